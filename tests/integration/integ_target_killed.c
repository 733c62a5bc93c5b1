/* The target is killed (SIGKILL) while 64 MiB gets are in flight: they
 * fail with an error soon, not at their deadline and not by hanging; later
 * ops to the dead target fail quickly too. */
#include <errno.h>
#include <signal.h>

#include "integ_common.h"

#define SIZE (64 * MiB)
#define N 4
#define DEADLINE_MS 15000

int main(void)
{
	test_watchdog(100);
	struct target_opts o = { .transports = "tcp", .rw_size = SIZE, .rw_seed = 5 };
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;
	rma_engine *e = integ_engine(NULL);
	char *buf = test_alloc(SIZE);
	rma_region *l = integ_region(e, buf, SIZE);
	rma_remote *rem = integ_remote(&t, "rw");
	CHECK_RC(rma_peer_connect(e, rem, 10000), 0);

	struct rma_op ops[N];
	for (int i = 0; i < N; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_GET, .local = l,
					  .remote = rem, .len = SIZE,
					  .user_data = (uint64_t)i };
	CHECK_RC(rma_post(e, ops, N, DEADLINE_MS, NULL), N);
	test_sleep_ms(5);
	CHECK(kill(t.pid, SIGKILL) == 0);
	int64_t t0 = test_now_ms();
	test_reap(t.pid, 5000);

	struct rma_completion c[N];
	int got = 0, failed = 0;
	while (got < N && test_now_ms() - t0 < DEADLINE_MS + 5000) {
		int n = rma_poll(e, c + got, (size_t)(N - got));
		CHECK_OK(n);
		got += n;
		if (!n)
			test_sleep_ms(1);
	}
	int64_t dt = test_now_ms() - t0;
	CHECKF(got == N, "%d of %d gets completed %lld ms after the kill", got,
	       N, (long long)dt);
	for (int i = 0; i < N; i++) {
		printf("get %llu: %lld%s%s\n", (unsigned long long)c[i].user_data,
		       (long long)c[i].result, c[i].result < 0 ? " " : "",
		       c[i].result < 0 ? rma_strerror((int)c[i].result) : "");
		CHECK(c[i].result == SIZE || c[i].result < 0);
		CHECKF(c[i].result != -ETIMEDOUT,
		       "a get to a killed target waited for its deadline");
		failed += c[i].result < 0;
	}
	CHECKF(failed > 0, "every get finished before the kill; nothing tested");
	CHECKF(dt < 5000, "failures took %lld ms after the kill", (long long)dt);

	/* Later ops to the dead target fail quickly. */
	t0 = test_now_ms();
	int64_t r = integ_op(e, RMA_OP_GET, l, rem, 0, 4096, DEADLINE_MS);
	dt = test_now_ms() - t0;
	printf("after: %lld (%s) in %lld ms\n", (long long)r,
	       r < 0 ? rma_strerror((int)r) : "ok", (long long)dt);
	CHECK(r < 0 && r != -ETIMEDOUT);
	CHECK(dt < 5000);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
