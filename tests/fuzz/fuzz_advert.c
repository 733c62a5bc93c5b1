/* Fuzz the advertisement decoders: rma_remote_decode on the bytes, and on
 * the bytes with their crc made right (else few inputs would reach the
 * entries' decoders, each transport's ad_parse), rma_remote_parse on the
 * bytes as text, and parse of the bytes' own text form, which must agree
 * with decode. */
#include <stdlib.h>
#include <string.h>

#include "rma.h"
#include "util/base64url.h"

/* What decode accepted must be valid. */
static void check_valid(const rma_remote *r)
{
	unsigned a = rma_remote_access(r);
	if (!a || (a & ~(unsigned)RMA_ACCESS_REMOTE_RW) || !rma_remote_length(r))
		abort();
}

/* The same bytes with the crc that covers them. */
static void decode_sealed(const uint8_t *data, size_t size)
{
	rma_remote *r;
	if (size < 4 || size > RMA_ADVERTISEMENT_MAX)
		return;
	uint8_t *b = malloc(size); /* exactly size: ASan sees reads past it */
	if (!b)
		return;
	memcpy(b, data, size);
	uint32_t crc = rma_crc32c(0, b, size - 4);
	for (int i = 0; i < 4; i++)
		b[size - 4 + i] = (uint8_t)(crc >> (8 * i));
	if (rma_remote_decode(b, size, &r) == 0) {
		check_valid(r);
		rma_remote_free(r);
	}
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rma_remote *r, *r2;
	int rc = rma_remote_decode(data, size, &r);

	if (rc == 0)
		check_valid(r);
	decode_sealed(data, size);

	/* The same bytes in their text form decode the same way. */
	if (size <= RMA_ADVERTISEMENT_MAX) {
		char text[4 + RMA_ADVERTISEMENT_MAX * 4 / 3 + 4];
		memcpy(text, "rma1", 4);
		if (rma__b64_encode(data, size, text + 4, sizeof text - 4) ||
		    size == 0) {
			int rc2 = rma_remote_parse(text, &r2);
			if ((rc2 == 0) != (rc == 0))
				abort();
			if (rc2 == 0) {
				if (rma_remote_length(r2) != rma_remote_length(r) ||
				    rma_remote_access(r2) != rma_remote_access(r))
					abort();
				rma_remote_free(r2);
			}
		}
	}
	if (rc == 0)
		rma_remote_free(r);

	/* The bytes themselves as a token. */
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (rma_remote_parse(s, &r) == 0)
		rma_remote_free(r);
	free(s);
	return 0;
}
