/* base64url (no padding): round trip of every length 0..300 and random
 * bytes; the text alphabet; bad characters, impossible lengths, non-zero
 * unused bits and short buffers are refused. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"
#include "util/base64url.h"

static int in_alphabet(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int main(void)
{
	uint64_t seed = test_seed("unit_base64url");
	uint8_t in[300], out[300];
	char text[512];

	test_watchdog(60);
	/* Known vectors (RFC 4648 section 10, unpadded, url alphabet). */
	static const struct { const char *raw, *enc; } kv[] = {
		{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg" }, { "fooba", "Zm9vYmE" },
		{ "foobar", "Zm9vYmFy" }, { "\xfb\xff", "-_8" },
	};
	for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
		size_t n = strlen(kv[i].raw);
		CHECK_EQ(rma__b64_encode(kv[i].raw, n, text, sizeof text),
			 strlen(kv[i].enc));
		CHECKF(!strcmp(text, kv[i].enc), "encode(%s) = %s, want %s",
		       kv[i].raw, text, kv[i].enc);
		CHECK_EQ(rma__b64_decode(kv[i].enc, strlen(kv[i].enc), out,
					 sizeof out), n);
		CHECK(!memcmp(out, kv[i].raw, n));
	}

	for (size_t n = 0; n <= sizeof in; n++) {
		for (size_t i = 0; i < n; i++)
			in[i] = (uint8_t)test_rand(&seed);
		size_t w = rma__b64_encode(in, n, text, sizeof text);
		CHECK_EQ(w, (n * 4 + 2) / 3);
		CHECK_EQ(strlen(text), w);
		for (size_t i = 0; i < w; i++)
			CHECKF(in_alphabet(text[i]), "char %zu of %zu: 0x%02x",
			       i, w, (unsigned char)text[i]);
		memset(out, 0xAA, sizeof out);
		CHECK_EQ(rma__b64_decode(text, w, out, sizeof out), n);
		CHECKF(!memcmp(in, out, n), "round trip of %zu bytes differs", n);

		/* Exact-size encode buffer works, one less fails. */
		CHECK_EQ(rma__b64_encode(in, n, text, w + 1), w);
		CHECK_EQ(rma__b64_encode(in, n, text, w), 0);
		/* Decode into a buffer one byte short. */
		if (n > 0)
			CHECK_RC(rma__b64_decode(text, w, out, n - 1), -ENOSPC);

		/* Every non-alphabet byte at every position is refused. */
		if (n == 7 || n == 8 || n == 9) {
			for (size_t pos = 0; pos < w; pos++) {
				char save = text[pos];
				for (int ch = 0; ch < 256; ch++) {
					if (in_alphabet((char)ch))
						continue;
					text[pos] = (char)ch;
					CHECKF(rma__b64_decode(text, w, out, sizeof out)
					       == -EBADMSG, "char 0x%02x at %zu accepted",
					       ch, pos);
				}
				text[pos] = save;
			}
		}
	}

	/* Lengths of 4k+1 characters cannot come from any byte string. */
	for (size_t n = 1; n < 40; n += 4)
		CHECK_RC(rma__b64_decode("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
					 n, out, sizeof out), -EBADMSG);
	/* Padding is not part of this alphabet. */
	CHECK_RC(rma__b64_decode("Zg==", 4, out, sizeof out), -EBADMSG);
	CHECK_RC(rma__b64_decode("Zm+v", 4, out, sizeof out), -EBADMSG);
	CHECK_RC(rma__b64_decode("Zm/v", 4, out, sizeof out), -EBADMSG);
	/* One encoding per byte string: unused low bits must be zero. */
	CHECK_RC(rma__b64_decode("Zh", 2, out, sizeof out), -EBADMSG);
	CHECK_RC(rma__b64_decode("Zm9", 3, out, sizeof out), -EBADMSG);
	CHECK_EQ(rma__b64_decode("Zg", 2, out, sizeof out), 1);
	printf("ok\n");
	return 0;
}
