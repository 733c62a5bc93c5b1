/* A well-formed advertisement with forged fields (key, length, access; the
 * crc recomputed, so it decodes) reaches nothing it does not name: the
 * owner checks key, bounds and access itself.  Two tcp engines, one
 * process. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"
#include "util/util.h"

/* Field offsets of the documented advertisement layout (src/core/advert.c). */
#define AD_ACCESS 5
#define AD_KEY 16
#define AD_LENGTH 24

static rma_engine *engine(void)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

/* Advertise, apply a forgery, fix the crc, decode. */
static rma_remote *forge(rma_region *r, uint64_t off, uint64_t len,
			 unsigned access, int field, uint64_t value)
{
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	rma_remote *rem;
	int n = rma_advertise(r, off, len, access, ad, sizeof ad);
	CHECK_OK(n);
	if (field == AD_ACCESS)
		ad[AD_ACCESS] = (uint8_t)value;
	else if (field)
		rma__put_le64(ad + field, value);
	rma__put_le32(ad + n - 4, rma_crc32c(0, ad, (size_t)n - 4));
	CHECK_RC(rma_remote_decode(ad, (size_t)n, &rem), 0);
	return rem;
}

static int64_t op1(rma_engine *e, unsigned kind, rma_region *l,
		   const rma_remote *r, uint64_t roff, uint64_t len)
{
	struct rma_op op = { .kind = kind, .local = l, .remote = r,
			     .remote_off = roff, .len = len };
	int64_t res;
	rma_submit(e, &op, 1, 10000, &res, NULL, 0);
	return res;
}

int main(void)
{
	const size_t S = 1 << 20, W = 4096;
	uint64_t seed = test_seed("unit_forged_advert");
	test_watchdog(60);
	rma_engine *te = engine(), *ie = engine();
	char *tbuf = test_alloc(S), *lbuf = test_alloc(S);
	rma_region *tr, *lr;
	test_fill(tbuf, S, 3);
	CHECK_RC(rma_region_register(te, tbuf, S, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(ie, lbuf, S, 0, &lr), 0);

	/* Unforged: works. */
	rma_remote *rem = forge(tr, W, W, 0, 0, 0);
	CHECK_RC(op1(ie, RMA_OP_GET, lr, rem, 0, W), (int64_t)W);
	CHECK(!memcmp(lbuf, tbuf + W, W));
	rma_remote_free(rem);

	/* Forged keys: random and neighbouring. */
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	int n = rma_advertise(tr, W, W, 0, ad, sizeof ad);
	CHECK_OK(n);
	uint64_t key = rma__le64(ad + AD_KEY);
	uint64_t fakes[] = { key + 1, key - 1, key ^ (1ull << 63),
			     test_rand(&seed) | 1 };
	for (size_t i = 0; i < sizeof fakes / sizeof fakes[0]; i++) {
		rem = forge(tr, W, W, 0, AD_KEY, fakes[i]);
		CHECK_RC(op1(ie, RMA_OP_GET, lr, rem, 0, W), -EKEYREJECTED);
		CHECK_RC(op1(ie, RMA_OP_PUT, lr, rem, 0, W), -EKEYREJECTED);
		rma_remote_free(rem);
	}

	/* A forged length does not widen the window at the owner. */
	rem = forge(tr, W, W, 0, AD_LENGTH, S);
	CHECK_EQ(rma_remote_length(rem), S);
	CHECK_RC(op1(ie, RMA_OP_GET, lr, rem, 0, W), (int64_t)W);
	CHECK_RC(op1(ie, RMA_OP_GET, lr, rem, W, W), -ERANGE);
	CHECK_RC(op1(ie, RMA_OP_GET, lr, rem, 0, W + 1), -ERANGE);
	CHECK_RC(op1(ie, RMA_OP_PUT, lr, rem, S - W - 1, W), -ERANGE);
	rma_remote_free(rem);

	/* A forged access does not grant writing at the owner. */
	rem = forge(tr, 0, 0, RMA_ACCESS_REMOTE_READ, AD_ACCESS,
		    RMA_ACCESS_REMOTE_RW);
	CHECK_EQ(rma_remote_access(rem), RMA_ACCESS_REMOTE_RW);
	memset(lbuf, 0x77, W);
	CHECK_RC(op1(ie, RMA_OP_PUT, lr, rem, 0, W), -EACCES);
	CHECK_RC(op1(ie, RMA_OP_GET, lr, rem, 0, W), (int64_t)W);
	rma_remote_free(rem);
	rem = forge(tr, 0, 0, RMA_ACCESS_REMOTE_WRITE, AD_ACCESS,
		    RMA_ACCESS_REMOTE_RW);
	CHECK_RC(op1(ie, RMA_OP_GET, lr, rem, 0, W), -EACCES);
	rma_remote_free(rem);

	/* None of that changed the owner's memory. */
	CHECK_EQ(test_check_fill(tbuf, S, 3), -1);

	/* Still serving the real thing. */
	rem = forge(tr, 0, 0, 0, 0, 0);
	test_fill(lbuf, S, 4);
	CHECK_RC(op1(ie, RMA_OP_PUT, lr, rem, 0, S), (int64_t)S);
	CHECK(!memcmp(lbuf, tbuf, S));
	rma_remote_free(rem);

	rma_engine_destroy(ie);
	rma_engine_destroy(te);
	printf("ok\n");
	return 0;
}
