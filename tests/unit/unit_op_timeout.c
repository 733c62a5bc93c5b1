/* Ops with a deadline whose chunks never complete finish with -ETIMEDOUT
 * within the bound, never before it; afterwards rma__op_buf() returns NULL
 * for their chunks (late data is discarded) and late chunk completions
 * deliver nothing. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define NOPS 4
#define TIMEOUT_MS 200

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(64);
	const uint64_t len = 3 * FAKE_MAX_MSG;
	char *lbuf = test_alloc(NOPS * len), *rbuf = test_alloc(NOPS * len);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(1);
	CHECK_RC(rma_region_register(e, lbuf, NOPS * len, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, NOPS * len, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);

	struct rma_op ops[NOPS];
	for (unsigned i = 0; i < NOPS; i++)
		ops[i] = (struct rma_op){ .kind = i % 2 ? RMA_OP_PUT : RMA_OP_GET,
					  .local = lr, .local_off = i * len,
					  .remote = rem, .remote_off = i * len,
					  .len = len, .user_data = 10 + i };
	int64_t t0 = test_now_ms();
	CHECK_RC(rma_post(e, ops, NOPS, TIMEOUT_MS, NULL), NOPS);
	rma_progress(e, 0);
	CHECK_EQ(fake.nxfers, 3 * NOPS);
	/* One chunk of op 0 does complete; the op still times out. */
	fake_complete(e, 0, 0);

	unsigned seen = 0;
	for (int i = 0; i < NOPS; i++) {
		CHECKF(fake_wait_one(e, &c, 5000) == 1,
		       "op %d of %d: no completion 5 s after a %d ms deadline",
		       i, NOPS, TIMEOUT_MS);
		int64_t dt = test_now_ms() - t0;
		CHECK(c.user_data >= 10 && c.user_data < 10 + NOPS);
		CHECK_RC(c.result, -ETIMEDOUT);
		CHECKF(dt >= TIMEOUT_MS - 5 && dt < TIMEOUT_MS + 1000,
		       "timed out after %lld ms, deadline %d ms", (long long)dt,
		       TIMEOUT_MS);
		seen |= 1u << (c.user_data - 10);
	}
	CHECK_EQ(seen, (1u << NOPS) - 1);

	for (unsigned i = 0; i < fake.nxfers; i++) {
		CHECKF(fake_op_buf(e, i) == NULL,
		       "xfer %u: rma__op_buf of a timed-out op is not NULL", i);
		CHECK(!fake_op_live(e, i));
	}
	/* Late completions (success and failure) deliver nothing more. */
	for (unsigned i = 0; i < fake.nxfers; i++)
		if (fake.xfers[i].state == FAKE_POSTED)
			fake_complete(e, i, i % 2 ? -EIO : 0);
	rma_progress(e, 20);
	CHECK_EQ(rma_poll(e, &c, 1), 0);

	/* Long deadlines never fall due early: ops posted a millisecond apart
	 * (a clock that lags, as CLOCK_MONOTONIC_COARSE does by a tick and
	 * more, would show at some of them). */
	enum { NLONG = 6, LONG_MS = 1000 };
	int64_t posted[NLONG];
	fake_reset(1);
	for (unsigned i = 0; i < NLONG; i++) {
		struct rma_op op = { .kind = RMA_OP_GET, .local = lr, .remote = rem,
				     .len = 64, .user_data = 100 + i };
		posted[i] = now_ns();
		CHECK_RC(rma_post(e, &op, 1, LONG_MS, NULL), 1);
		rma_progress(e, 0);
		test_sleep_ms(1);
	}
	for (int i = 0; i < NLONG; i++) {
		CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
		int64_t ns = now_ns() - posted[c.user_data - 100];
		CHECK_RC(c.result, -ETIMEDOUT);
		CHECKF(ns >= (int64_t)LONG_MS * 1000000 && ns < (LONG_MS + 500) * 1000000LL,
		       "a %d ms deadline fell due after %.3f ms", LONG_MS, ns / 1e6);
	}

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
