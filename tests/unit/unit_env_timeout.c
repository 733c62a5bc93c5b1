/* timeout_ms 0 means the engine's default, which RMA_TIMEOUT_MS sets;
 * timeout_ms < 0 means no deadline at all. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	test_watchdog(60);
	fake_register();
	setenv("RMA_TIMEOUT_MS", "300", 1);
	rma_engine *e = fake_engine(64);
	unsetenv("RMA_TIMEOUT_MS");
	char *lbuf = test_alloc(8192), *rbuf = test_alloc(8192);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(1);
	CHECK_RC(rma_region_register(e, lbuf, 8192, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 8192, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	struct rma_op ops[2] = {
		{ .kind = RMA_OP_GET, .local = lr, .remote = rem, .len = 4096,
		  .user_data = 1 },
		{ .kind = RMA_OP_GET, .local = lr, .local_off = 4096, .remote = rem,
		  .len = 4096, .user_data = 2 },
	};
	int64_t t0 = test_now_ms();
	CHECK_RC(rma_post(e, &ops[0], 1, 0, NULL), 1);  /* the default: 300 ms */
	CHECK_RC(rma_post(e, &ops[1], 1, -1, NULL), 1); /* no deadline */
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	int64_t dt = test_now_ms() - t0;
	CHECK_EQ(c.user_data, 1);
	CHECK_RC(c.result, -ETIMEDOUT);
	CHECKF(dt >= 295 && dt < 1500, "default deadline hit after %lld ms",
	       (long long)dt);
	/* The op without a deadline is still waiting after another second. */
	CHECK_EQ(fake_wait_one(e, &c, 1000), 0);
	CHECK_EQ(fake.outstanding, 2);
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 2);
	CHECK_EQ(c.result, 4096);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
