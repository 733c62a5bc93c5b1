/* Fuzz the advertisement decoders: rma_remote_decode on the bytes,
 * rma_remote_parse on the bytes as text, and parse of the bytes' own text
 * form, which must agree with decode. */
#include <stdlib.h>
#include <string.h>

#include "rma.h"
#include "util/base64url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	rma_remote *r, *r2;
	int rc = rma_remote_decode(data, size, &r);

	if (rc == 0) {
		unsigned a = rma_remote_access(r);
		if (!a || (a & ~(unsigned)RMA_ACCESS_REMOTE_RW) ||
		    !rma_remote_length(r))
			abort(); /* decode accepted what it must validate */
	}

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
