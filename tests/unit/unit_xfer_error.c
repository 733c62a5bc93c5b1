/* A chunk that fails fails its op with that errno, exactly once; the op's
 * buffer is never handed out again; the peer's other ops are unaffected. */
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
	const uint64_t M = FAKE_MAX_MSG, len = 4 * M;
	char *lbuf = test_alloc(2 * len), *rbuf = test_alloc(2 * len);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(1);
	CHECK_RC(rma_region_register(e, lbuf, 2 * len, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 2 * len, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);

	struct rma_op ops[2] = {
		{ .kind = RMA_OP_GET, .local = lr, .remote = rem, .len = len,
		  .user_data = 1 },
		{ .kind = RMA_OP_GET, .local = lr, .local_off = len, .remote = rem,
		  .remote_off = len, .len = len, .user_data = 2 },
	};
	CHECK_RC(rma_post(e, ops, 2, -1, NULL), 2);
	rma_progress(e, 0);
	CHECK_EQ(fake.nxfers, 8);

	/* Op 1's chunks: the second fails with -EIO, the rest succeed. */
	uint64_t id1 = 0;
	unsigned k = 0;
	for (unsigned i = 0; i < fake.nxfers; i++) {
		if (fake.xfers[i].x.laddr >= lbuf + len)
			continue;
		id1 = fake.xfers[i].x.op_id;
		fake_complete(e, i, k++ == 1 ? -EIO : 0);
		if (k >= 2)
			CHECK(fake_op_buf(e, i) == NULL);
	}
	CHECK(id1 != 0);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 1);
	CHECK_RC(c.result, -EIO);
	CHECK_EQ(rma_poll(e, &c, 1), 0);

	/* Op 2 still completes normally. */
	for (unsigned i = 0; i < fake.nxfers; i++)
		if (fake.xfers[i].state == FAKE_POSTED) {
			CHECK(fake.xfers[i].x.op_id != id1);
			CHECK(fake_op_buf(e, i) == fake.xfers[i].x.laddr);
			fake_complete(e, i, 0);
		}
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 2);
	CHECK_EQ(c.result, (long long)len);
	CHECK_EQ(rma_poll(e, &c, 1), 0);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
