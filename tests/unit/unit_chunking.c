/* An op of 10 * max_msg + 3 bytes is split into 11 chunks with the right
 * local address, remote address and length; it completes with its byte
 * count once every chunk is done, and only then. */
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static void run(unsigned kind)
{
	rma_engine *e = fake_engine(64);
	const uint64_t M = FAKE_MAX_MSG, len = 10 * M + 3;
	const uint64_t loff = 100, roff = 200, woff = 8192;
	size_t lsize = (size_t)(len + loff), rsize = (size_t)(len + roff + woff);
	char *lbuf = test_alloc(lsize), *rbuf = test_alloc(rsize);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(1);
	CHECK_RC(rma_region_register(e, lbuf, lsize, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, rsize, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, woff, 0);
	uint64_t key = rem->key;

	struct rma_op op = { .kind = kind, .local = lr, .local_off = loff,
			     .remote = rem, .remote_off = roff, .len = len,
			     .user_data = 42 };
	CHECK_RC(rma_post(e, &op, 1, -1, NULL), 1);
	rma_remote_free(rem); /* allowed once posted */
	rma_progress(e, 0);

	CHECK_EQ(fake.connects, 1);
	CHECK_EQ(fake.peer_max_msg, M);
	CHECK_EQ(fake.nxfers, 11);
	CHECK_EQ(fake.outstanding, 11);
	uint64_t op_id = fake.xfers[0].x.op_id;
	int seen[11] = {0};
	for (unsigned i = 0; i < fake.nxfers; i++) {
		const struct rma__xfer *x = &fake.xfers[i].x;
		uint64_t rel = (uint64_t)(x->laddr - (lbuf + loff));
		CHECKF(x->laddr >= lbuf + loff && rel < len && rel % M == 0,
		       "xfer %u: laddr %p not a chunk start of [%p, +%llu)", i,
		       (void *)x->laddr, (void *)(lbuf + loff),
		       (unsigned long long)len);
		unsigned k = (unsigned)(rel / M);
		CHECKF(!seen[k], "chunk %u posted twice", k);
		seen[k] = 1;
		CHECK_EQ(x->op_id, op_id);
		CHECK_EQ(x->kind, kind);
		CHECK_EQ_U64(x->rk->key, key);
		CHECK_EQ_U64(x->raddr, FAKE_BASE + woff + roff + k * M);
		CHECK_EQ(x->len, k == 10 ? 3 : M);
		CHECK(x->local == lr);
		if (kind == RMA_OP_GET)
			CHECK(fake_op_buf(e, i) == x->laddr);
		CHECK(fake_op_live(e, i));
	}

	/* Done chunk by chunk, in reverse; no completion before the last. */
	for (unsigned i = fake.nxfers; i-- > 0;) {
		CHECK_EQ(rma_poll(e, &c, 1), 0);
		fake_complete(e, i, 0);
	}
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 42);
	CHECK_EQ(c.result, (long long)len);
	CHECK_EQ(rma_poll(e, &c, 1), 0);
	CHECK(!fake_op_live(e, 0));

	rma_region_release(lr);
	rma_region_release(rr);
	rma_engine_destroy(e);
	test_free(lbuf, lsize);
	test_free(rbuf, rsize);
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	run(RMA_OP_PUT);
	run(RMA_OP_GET);
	printf("ok\n");
	return 0;
}
