/* Op-pool costs do not grow with the pool.  On an engine that has already
 * completed a round of ops (so free slots come back in reverse order),
 * 100,000 ops queued to a stalled peer all expire at their deadline, and
 * the work done (heap and list steps, counted by the engine) stays within
 * O(n log n): about 2 x 17 heap steps per op, where the old slot-order scan
 * with a singly linked queue did O(n^2).  The time is printed, not
 * asserted; releasing a region with all of them queued is counted too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define N 100000

static uint64_t work(rma_engine *e)
{
	pthread_mutex_lock(&e->mu);
	uint64_t w = e->work;
	pthread_mutex_unlock(&e->mu);
	return w;
}

int main(void)
{
	test_watchdog(120);
	fake_register();
	fake_reset(1); /* the peer never becomes ready: everything queues */
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	cfg.cq_depth = 1u << 17;
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	rma_engine *e;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	char *lbuf = test_alloc(4096), *rbuf = test_alloc(4096);
	rma_region *lr, *rr;
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	struct rma_op *ops = calloc(N, sizeof *ops);
	struct rma_completion *c = calloc(N, sizeof *c);
	CHECK(ops && c);

	/* A used engine: a round of zero-length ops. */
	for (int i = 0; i < N; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_GET, .local = lr,
					  .remote = rem, .len = 0 };
	CHECK_RC(rma_post(e, ops, N, -1, NULL), N);
	CHECK_EQ(rma_poll(e, c, N), N);

	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++)
			ops[i].len = 8;
		/* Two deadlines, the later first: half the ops go on the
		 * in-order list, half into the heap. */
		CHECK_RC(rma_post(e, ops, N / 2, round ? -1 : 200, NULL), N / 2);
		CHECK_RC(rma_post(e, ops + N / 2, N / 2, round ? -1 : 150, NULL), N / 2);
		uint64_t w0 = work(e);
		int64_t t0 = test_now_ms();
		if (round == 0) {
			int got = 0;
			while (got < N && test_now_ms() - t0 < 30000) {
				rma_progress(e, 10);
				got += rma_poll(e, c + got, N - (size_t)got);
			}
			CHECK_EQ(got, N);
			for (int i = 0; i < N; i++)
				CHECK_RC(c[i].result, -ETIMEDOUT);
		} else {
			CHECK_RC(rma_region_release(lr), 0);
			CHECK_EQ(rma_poll(e, c, N), N);
			for (int i = 0; i < N; i++)
				CHECK_RC(c[i].result, -ECANCELED);
		}
		uint64_t w = work(e) - w0;
		printf("%s of %d queued ops: %llu steps (%.1f per op), %lld ms\n",
		       round ? "release" : "expiry", N, (unsigned long long)w,
		       (double)w / N, (long long)(test_now_ms() - t0));
		CHECKF(w <= (uint64_t)N * 40, "%llu steps for %d ops",
		       (unsigned long long)w, N);
	}

	free(ops);
	free(c);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
