/* Credits come from the transport too: a peer whose transport allows 3
 * chunks in flight never has more, though the engine's queue_depth is 64;
 * and an op flagged RMA_OP_FENCE starts only after every earlier op to the
 * peer has completed (the fake cannot fence itself, so the core holds it). */
#include <errno.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(64);
	const uint64_t M = FAKE_MAX_MSG;
	char *lbuf = test_alloc(16 * M), *rbuf = test_alloc(16 * M);
	rma_region *lr, *rr;
	struct rma_completion c[4];

	fake_reset(0);
	fake.credits = 3;
	CHECK_RC(rma_region_register(e, lbuf, 16 * M, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 16 * M, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	struct rma_op op = { .kind = RMA_OP_PUT, .local = lr, .remote = rem,
			     .len = 10 * M };
	CHECK_RC(rma_post(e, &op, 1, -1, NULL), 1);
	CHECK_EQ(fake.outstanding, 3);
	while (fake.outstanding) {
		fake_complete_all(e, 0);
		CHECK(fake.max_outstanding <= 3);
	}
	CHECK_EQ(fake.nxfers, 10);
	CHECK_EQ(fake_wait_one(e, c, 2000), 1);
	CHECK_EQ(c[0].result, (long long)(10 * M));

	/* Fence: a get of one chunk, then a fenced put, then a plain put. */
	fake.credits = 0;
	unsigned base = fake.nxfers;
	struct rma_op ops[3] = {
		{ .kind = RMA_OP_GET, .local = lr, .remote = rem, .len = M, .user_data = 1 },
		{ .kind = RMA_OP_PUT, .flags = RMA_OP_FENCE, .local = lr,
		  .remote = rem, .len = M, .user_data = 2 },
		{ .kind = RMA_OP_PUT, .local = lr, .remote = rem, .len = M, .user_data = 3 },
	};
	CHECK_RC(rma_post(e, ops, 3, -1, NULL), 3);
	CHECK_OK(rma_progress(e, 0));
	/* Only the get went out: the fence holds the rest, in order. */
	CHECK_EQ(fake.nxfers, base + 1);
	CHECK_EQ(fake.xfers[base].x.kind, RMA_OP_GET);
	fake_complete(e, base, 0);
	CHECK_OK(rma_progress(e, 0));
	CHECK_EQ(fake.nxfers, base + 3);
	CHECK_EQ(fake.xfers[base + 1].x.kind, RMA_OP_PUT);
	CHECK(fake.xfers[base + 1].x.laddr == lbuf);
	CHECK(fake.xfers[base + 1].x.flags & RMA__XFER_LAST);
	CHECK(!(fake.xfers[base + 1].x.flags & RMA__XFER_FENCE));
	CHECK(fake.xfers[base + 1].x.ldesc == lbuf); /* the fake's mem_reg slot */
	fake_complete_all(e, 0);
	int got = 0;
	for (int i = 0; i < 100 && got < 3; i++) {
		got += rma_poll(e, c + got, 3 - (size_t)got);
		rma_progress(e, 1);
	}
	CHECK_EQ(got, 3);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
