/*
 * A completion callback runs on the progress thread.  A blocking call made
 * from it (rma_read_into) must drive progress itself instead of waiting for
 * the progress thread, which is busy running the callback.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "testlib.h"

static rma_engine *e;
static rma_region *local;
static rma_remote *rem;
static int64_t inner = 1; /* result of the read made inside the callback */
static int calls;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void on_complete(void *arg, const struct rma_completion *c, size_t n)
{
	int64_t r = rma_read_into(e, local, rem, 2000);
	pthread_mutex_lock(&mu);
	inner = r;
	calls += (int)n;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

int main(void)
{
	static char src[65536], dst[65536];
	rma_region *r;

	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (char)(i * 7 + 1);
	/* a 1 us spin reaches the sleeping part of the wait at once */
	e = test_tcp_engine((struct rma_config){.spin_us = 1});
	CHECK_RC(rma_region_register(e, src, sizeof src, RMA_ACCESS_REMOTE_RW, &r), 0);
	CHECK_RC(rma_region_register(e, dst, sizeof dst, 0, &local), 0);
	rem = test_remote_of(r);
	CHECK_RC(rma_set_callback(e, on_complete, NULL), 0);

	struct rma_op op = {.kind = RMA_OP_GET, .local = local, .remote = rem,
			    .len = 8, .user_data = 42};
	CHECK_RC(rma_post(e, &op, 1, 5000, NULL), 1);

	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&mu);
	while (!calls && pthread_cond_timedwait(&cv, &mu, &ts) == 0)
		;
	pthread_mutex_unlock(&mu);
	CHECKF(calls == 1, "callback ran %d times", calls);
	CHECK_RC(inner, (int64_t)sizeof src);
	CHECK(memcmp(src, dst, sizeof src) == 0);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
