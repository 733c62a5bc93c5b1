/*
 * The progress thread sleeps until the earliest deadline it knows.  An op
 * posted with an earlier one must re-time that sleep: a 10 ms op behind a
 * 30 s op still fails within milliseconds, not at the thread's next wake-up.
 */
#include <errno.h>

#include "check.h"
#include "testlib.h"

int main(void)
{
	static char sb[64], ib[64];
	rma_region *sr, *ir;
	rma_remote *rem;

	test_watchdog(60);
	/* never answers */
	rma_engine *silent = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1});
	rma_engine *e = test_tcp_engine((struct rma_config){.stripes = 1, .spin_us = 1});
	CHECK_RC(rma_region_register(silent, sb, sizeof sb, RMA_ACCESS_REMOTE_RW, &sr), 0);
	rem = test_remote_of(sr);
	CHECK_RC(rma_region_register(e, ib, sizeof ib, 0, &ir), 0);

	struct rma_op a = {.kind = RMA_OP_GET, .local = ir, .remote = rem,
			   .len = 8, .user_data = 1};
	CHECK_RC(rma_post(e, &a, 1, 30000, NULL), 1);
	for (int k = 0; k < 5; k++) {
		struct rma_completion c;
		test_sleep_ms(150); /* the thread is asleep until the 30 s one */
		a.user_data = 2;
		int64_t t0 = test_now_ms();
		CHECK_RC(rma_post(e, &a, 1, 10, NULL), 1);
		while (rma_poll(e, &c, 1) == 0)
			test_sleep_ms(1);
		int64_t dt = test_now_ms() - t0;
		CHECK_EQ(c.user_data, 2);
		CHECK_RC(c.result, -ETIMEDOUT);
		CHECKF(dt < 300, "a 10 ms deadline fired after %lld ms", (long long)dt);
	}
	rma_remote_free(rem);
	rma_engine_destroy(e);
	rma_engine_destroy(silent);
	return 0;
}
