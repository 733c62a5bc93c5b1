/* Releasing a region that an in-flight op uses as local memory completes
 * that op with -ECANCELED; its chunks' buffers are never handed out again
 * and their late completions deliver nothing.  Other ops are untouched. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(64);
	const uint64_t len = 2 * FAKE_MAX_MSG;
	char *l1 = test_alloc(len), *l2 = test_alloc(len), *rbuf = test_alloc(2 * len);
	rma_region *lr1, *lr2, *rr;
	struct rma_completion c;

	fake_reset(1);
	CHECK_RC(rma_region_register(e, l1, len, 0, &lr1), 0);
	CHECK_RC(rma_region_register(e, l2, len, 0, &lr2), 0);
	CHECK_RC(rma_region_register(e, rbuf, 2 * len, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);

	struct rma_op ops[2] = {
		{ .kind = RMA_OP_GET, .local = lr1, .remote = rem, .len = len,
		  .user_data = 1 },
		{ .kind = RMA_OP_GET, .local = lr2, .remote = rem,
		  .remote_off = len, .len = len, .user_data = 2 },
	};
	CHECK_RC(rma_post(e, ops, 2, -1, NULL), 2);
	rma_progress(e, 0);
	CHECK_EQ(fake.nxfers, 4);

	CHECK_RC(rma_region_release(lr1), 0);
	CHECK(fake.revokes >= 1);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 1);
	CHECK_RC(c.result, -ECANCELED);
	CHECK_EQ(rma_poll(e, &c, 1), 0);

	for (unsigned i = 0; i < fake.nxfers; i++) {
		const struct rma__xfer *x = &fake.xfers[i].x;
		int mine = x->laddr >= l1 && x->laddr < l1 + len;
		char *b = fake_op_buf(e, i);
		if (mine)
			CHECKF(b == NULL, "xfer %u of the released region's op "
			       "still has a buffer", i);
		else
			CHECK(b == x->laddr);
	}
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 2);
	CHECK_EQ(c.result, (long long)len);
	rma_progress(e, 20);
	CHECK_EQ(rma_poll(e, &c, 1), 0);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
