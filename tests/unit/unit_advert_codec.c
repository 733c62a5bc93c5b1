/* Advertisement codec through the public API (tcp engine): bytes and text
 * round trip length and access; every single-byte change, every truncation
 * and an appended byte are refused with -EBADMSG; small buffers get
 * -ENOSPC; access is never more than the region's. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void decode_ok(const void *b, size_t n, uint64_t len, unsigned access)
{
	rma_remote *r;
	CHECK_RC(rma_remote_decode(b, n, &r), 0);
	CHECK_EQ(rma_remote_length(r), len);
	CHECK_EQ(rma_remote_access(r), access);
	rma_remote_free(r);
}

int main(void)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_region *rw, *ro;
	rma_remote *rem;
	static char mem[1 << 20];
	uint8_t ad[RMA_ADVERTISEMENT_MAX + 8], m[RMA_ADVERTISEMENT_MAX + 8];
	char text[RMA_ADVERTISEMENT_TEXT_MAX], t2[RMA_ADVERTISEMENT_TEXT_MAX];

	test_watchdog(60);
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	CHECK_RC(rma_region_register(e, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &rw), 0);
	CHECK_RC(rma_region_register(e, mem, 4096, RMA_ACCESS_REMOTE_READ, &ro), 0);

	int n = rma_advertise(rw, 0, 0, 0, ad, sizeof ad);
	CHECK_OK(n);
	CHECK(n > 0 && n <= RMA_ADVERTISEMENT_MAX);
	decode_ok(ad, (size_t)n, sizeof mem, RMA_ACCESS_REMOTE_RW);
	printf("advertisement: %d bytes\n", n);

	/* Every single-byte change. */
	for (int i = 0; i < n; i++) {
		memcpy(m, ad, (size_t)n);
		for (int v = 1; v < 256; v++) {
			m[i] = (uint8_t)(ad[i] ^ v);
			int rc = rma_remote_decode(m, (size_t)n, &rem);
			if (rc == 0)
				FAIL("byte %d ^ 0x%02x accepted: length %llu access %u",
				     i, v, (unsigned long long)rma_remote_length(rem),
				     rma_remote_access(rem));
			CHECKF(rc == -EBADMSG, "byte %d ^ 0x%02x: %d (%s)", i, v, rc,
			       rma_strerror(rc));
		}
	}
	/* Every truncation, and one byte too many. */
	for (int k = 0; k < n; k++)
		CHECKF(rma_remote_decode(ad, (size_t)k, &rem) == -EBADMSG,
		       "truncated to %d of %d bytes: not -EBADMSG", k, n);
	memcpy(m, ad, (size_t)n);
	m[n] = 0;
	CHECK_RC(rma_remote_decode(m, (size_t)n + 1, &rem), -EBADMSG);
	CHECK_RC(rma_remote_decode(NULL, 0, &rem), -EINVAL);

	/* A buffer one byte short at any size is -ENOSPC. */
	for (int cap = 0; cap < n; cap++)
		CHECKF(rma_advertise(rw, 0, 0, 0, m, (size_t)cap) == -ENOSPC,
		       "cap %d of %d", cap, n);

	/* Text: one word of the url alphabet, round trip. */
	int tn = rma_advertise_text(rw, 0, 0, 0, text, sizeof text);
	CHECK_OK(tn);
	CHECK_EQ(strlen(text), tn);
	CHECK(tn < RMA_ADVERTISEMENT_TEXT_MAX);
	for (int i = 0; i < tn; i++)
		CHECKF(strchr(alphabet, text[i]) != NULL, "char %d '%c'", i, text[i]);
	CHECK_RC(rma_remote_parse(text, &rem), 0);
	CHECK_EQ(rma_remote_length(rem), sizeof mem);
	CHECK_EQ(rma_remote_access(rem), RMA_ACCESS_REMOTE_RW);
	rma_remote_free(rem);
	CHECK_RC(rma_advertise_text(rw, 0, 0, 0, t2, (size_t)tn), -ENOSPC);
	CHECK_EQ(rma_advertise_text(rw, 0, 0, 0, t2, (size_t)tn + 1), tn);

	/* Any one character changed to any other valid one is refused. */
	for (int i = 0; i < tn; i++) {
		for (const char *c = alphabet; *c; c++) {
			if (*c == text[i])
				continue;
			strcpy(t2, text);
			t2[i] = *c;
			int rc = rma_remote_parse(t2, &rem);
			if (rc == 0)
				FAIL("text with char %d '%c'->'%c' accepted", i,
				     text[i], *c);
			CHECKF(rc == -EBADMSG, "char %d: %d (%s)", i, rc,
			       rma_strerror(rc));
		}
	}
	for (int k = 0; k < tn; k++) {
		strcpy(t2, text);
		t2[k] = '\0';
		CHECKF(rma_remote_parse(t2, &rem) == -EBADMSG,
		       "text truncated to %d chars accepted", k);
	}
	snprintf(t2, sizeof t2, "%s ", text);
	CHECK_RC(rma_remote_parse(t2, &rem), -EBADMSG);
	snprintf(t2, sizeof t2, "%sA", text);
	CHECK_RC(rma_remote_parse(t2, &rem), -EBADMSG);
	CHECK_RC(rma_remote_parse("", &rem), -EBADMSG);
	CHECK_RC(rma_remote_parse("rma1", &rem), -EBADMSG);

	/* Access: a subset may be advertised, never more than the region's. */
	n = rma_advertise(rw, 0, 0, RMA_ACCESS_REMOTE_READ, ad, sizeof ad);
	CHECK_OK(n);
	decode_ok(ad, (size_t)n, sizeof mem, RMA_ACCESS_REMOTE_READ);
	n = rma_advertise(rw, 0, 0, RMA_ACCESS_REMOTE_WRITE, ad, sizeof ad);
	CHECK_OK(n);
	decode_ok(ad, (size_t)n, sizeof mem, RMA_ACCESS_REMOTE_WRITE);
	n = rma_advertise(ro, 0, 0, 0, ad, sizeof ad);
	CHECK_OK(n);
	decode_ok(ad, (size_t)n, 4096, RMA_ACCESS_REMOTE_READ);
	CHECK_RC(rma_advertise(ro, 0, 0, RMA_ACCESS_REMOTE_WRITE, ad, sizeof ad), -EACCES);
	CHECK_RC(rma_advertise(ro, 0, 0, RMA_ACCESS_REMOTE_RW, ad, sizeof ad), -EACCES);
	CHECK_RC(rma_advertise(rw, 0, 0, 1u << 5, ad, sizeof ad), -EINVAL);

	CHECK_RC(rma_region_release(ro), 0);
	CHECK_RC(rma_region_release(rw), 0);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
