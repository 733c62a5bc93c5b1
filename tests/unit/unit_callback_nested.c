/*
 * A completion callback can run on a user thread that is itself waiting
 * (in rma_read_into, driving progress while the progress thread stands
 * aside).  A blocking call made from that callback must drive progress
 * itself: its own deadline fires on time, and so does the outer one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "testlib.h"

static rma_engine *init, *t2;
static rma_region *ir;
static rma_remote *dead; /* owned by an engine nobody drives: never answers */
static atomic_int quit;
static int64_t inner = 1, inner_ms = -1;

static rma_remote *advertise(rma_engine *e, char *buf, size_t len)
{
	rma_region *r;
	CHECK_RC(rma_region_register(e, buf, len, RMA_ACCESS_REMOTE_RW, &r), 0);
	return test_remote_of(r);
}

static void *drive(void *arg)
{
	test_sleep_ms(20);
	while (!quit)
		rma_progress(t2, 5);
	return NULL;
}

static void on_complete(void *arg, const struct rma_completion *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (c[i].user_data == 7 && inner_ms < 0) {
			int64_t t0 = test_now_ms();
			inner = rma_read_into(init, ir, dead, 1000);
			inner_ms = test_now_ms() - t0;
		}
}

int main(void)
{
	static char sb[64], t2b[64], ib[64];
	pthread_t th;

	test_watchdog(60);
	const struct rma_config manual = {.flags = RMA_ENGINE_MANUAL_PROGRESS,
					  .stripes = 1};
	rma_engine *silent = test_tcp_engine(manual);
	t2 = test_tcp_engine(manual);
	/* long spin: the callback runs in it */
	init = test_tcp_engine((struct rma_config){.stripes = 1, .spin_us = 100000});
	dead = advertise(silent, sb, sizeof sb);
	rma_remote *live = advertise(t2, t2b, sizeof t2b);
	CHECK_RC(rma_region_register(init, ib, sizeof ib, 0, &ir), 0);
	CHECK_RC(rma_set_callback(init, on_complete, NULL), 0);
	CHECK(pthread_create(&th, NULL, drive, NULL) == 0);

	struct rma_op a = {.kind = RMA_OP_GET, .local = ir, .remote = live,
			   .len = 8, .user_data = 7};
	CHECK_RC(rma_post(init, &a, 1, 5000, NULL), 1);
	int64_t t0 = test_now_ms();
	int64_t outer = rma_read_into(init, ir, dead, 3000);
	int64_t outer_ms = test_now_ms() - t0;
	quit = 1;
	pthread_join(th, NULL);

	CHECKF(inner_ms >= 0, "the callback never ran");
	CHECK_RC(inner, -ETIMEDOUT);
	CHECKF(inner_ms < 2500, "inner wait took %lld ms for a 1000 ms deadline",
	       (long long)inner_ms);
	CHECK_RC(outer, -ETIMEDOUT);
	CHECKF(outer_ms < 5000, "outer wait took %lld ms for a 3000 ms deadline",
	       (long long)outer_ms);

	rma_remote_free(dead);
	rma_remote_free(live);
	rma_engine_destroy(init);
	rma_engine_destroy(t2);
	rma_engine_destroy(silent);
	return 0;
}
