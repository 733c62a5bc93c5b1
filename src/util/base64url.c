#include <errno.h>
#include <stdint.h>

#include "util/base64url.h"

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t rma__b64_encode(const void *in, size_t n, char *out, size_t cap)
{
	const uint8_t *p = in;
	size_t need = (n / 3) * 4 + (n % 3 ? n % 3 + 1 : 0);
	size_t o = 0;

	if (need + 1 > cap)
		return 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		size_t left = n - i;
		if (left > 1)
			v |= (uint32_t)p[i + 1] << 8;
		if (left > 2)
			v |= p[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		if (left > 1)
			out[o++] = alphabet[(v >> 6) & 63];
		if (left > 2)
			out[o++] = alphabet[v & 63];
	}
	out[o] = '\0';
	return o;
}

static int value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

int rma__b64_decode(const char *in, size_t n, void *out, size_t cap)
{
	uint8_t *o = out;
	size_t len = 0;

	if (n % 4 == 1)
		return -EBADMSG;
	for (size_t i = 0; i < n; i += 4) {
		size_t left = n - i < 4 ? n - i : 4;
		uint32_t v = 0;
		for (size_t j = 0; j < 4; j++) {
			int d = j < left ? value(in[i + j]) : 0;
			if (d < 0)
				return -EBADMSG;
			v = v << 6 | (uint32_t)d;
		}
		size_t bytes = left - 1;
		/* Unused low bits must be zero: one encoding per byte string. */
		if ((bytes == 1 && (v & 0xffff)) || (bytes == 2 && (v & 0xff)))
			return -EBADMSG;
		if (len + bytes > cap)
			return -ENOSPC;
		o[len++] = (uint8_t)(v >> 16);
		if (bytes > 1)
			o[len++] = (uint8_t)(v >> 8);
		if (bytes > 2)
			o[len++] = (uint8_t)v;
	}
	return (int)len;
}
