/*
 * Wake-ups that must not wait for the progress thread's next timeout:
 *  1. a waiter's deadline, when the thread sleeps in a long epoll_wait;
 *  2. a completion made inside rma_post (zero-length op), in callback mode;
 *  3. a thread sleeping in rma_submit whose op another thread cancels.
 * Each is measured five times; the median must be far below the delays
 * the bugs caused (~900 ms, ~700 ms, ~100 ms).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"
#include "testlib.h"

static rma_engine *e;
static rma_region *l;
static rma_remote *silent_rem; /* its engine is never driven */
static atomic_int cb_count;
static int64_t submit_done_ms;

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int64_t median5(int64_t *v)
{
	qsort(v, 5, sizeof *v, cmp);
	return v[2];
}

static void on_complete(void *arg, const struct rma_completion *c, size_t n)
{
	cb_count += (int)n;
}

static void *submitter(void *arg)
{
	struct rma_op op = {.kind = RMA_OP_PUT, .local = l, .remote = silent_rem, .len = 8};
	int64_t res;
	rma_submit(e, &op, 1, 5000, &res, NULL, 0);
	submit_done_ms = test_now_ms();
	return NULL;
}

int main(void)
{
	static char sb[64], lb[64];
	rma_region *sr;
	int64_t dt[5];

	test_watchdog(120);
	rma_engine *silent = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS});
	CHECK_RC(rma_region_register(silent, sb, sizeof sb, RMA_ACCESS_REMOTE_RW, &sr), 0);
	silent_rem = test_remote_of(sr);
	e = test_tcp_engine((struct rma_config){0});
	CHECK_RC(rma_region_register(e, lb, sizeof lb, 0, &l), 0);

	/* 1: the thread is asleep in a 1 s epoll_wait when the deadline comes */
	struct rma_op op = {.kind = RMA_OP_PUT, .local = l, .remote = silent_rem, .len = 8};
	for (int i = 0; i < 5; i++) {
		int64_t res;
		test_sleep_ms(1100);
		int64_t t0 = test_now_ms();
		CHECK_RC(rma_submit(e, &op, 1, 50, &res, NULL, 0), 1);
		dt[i] = test_now_ms() - t0;
		CHECK_RC(res, -ETIMEDOUT);
	}
	CHECKF(median5(dt) < 400, "50 ms deadline: median %lld ms", (long long)dt[2]);

	/* 2: zero-length op, callback mode */
	CHECK_RC(rma_set_callback(e, on_complete, NULL), 0);
	op.len = 0;
	for (int i = 0; i < 5; i++) {
		test_sleep_ms(300);
		int before = cb_count;
		int64_t t0 = test_now_ms();
		CHECK_RC(rma_post(e, &op, 1, 1000, NULL), 1);
		while (cb_count == before && test_now_ms() - t0 < 3000)
			test_sleep_ms(1);
		CHECK_EQ(cb_count, before + 1);
		dt[i] = test_now_ms() - t0;
	}
	CHECKF(median5(dt) < 300, "zero-length op to callback: median %lld ms",
	       (long long)dt[2]);
	CHECK_RC(rma_set_callback(e, NULL, NULL), 0);

	/* 3: another thread's rma_submit, cancelled by rma_peer_remove */
	for (int i = 0; i < 5; i++) {
		pthread_t th;
		submit_done_ms = 0;
		CHECK(pthread_create(&th, NULL, submitter, NULL) == 0);
		test_sleep_ms(130 + i * 17); /* it is asleep on its condition */
		rma_peer_remove(e, silent_rem, 1);
		int64_t t1 = test_now_ms();
		pthread_join(th, NULL);
		dt[i] = submit_done_ms - t1;
	}
	CHECKF(median5(dt) < 50, "cancelled submit returned a median %lld ms late",
	       (long long)dt[2]);

	rma_remote_free(silent_rem);
	rma_engine_destroy(e);
	rma_engine_destroy(silent);
	return 0;
}
