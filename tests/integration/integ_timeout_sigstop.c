/* A stopped target: gets with a 500 ms deadline fail with -ETIMEDOUT well
 * within 5 s; after the target resumes and answers late, the initiator's
 * buffers still hold exactly their sentinel; then the peer works again. */
#include <errno.h>
#include <signal.h>

#include "integ_common.h"

#define N 4
#define SIZE (16 * MiB)
#define SENTINEL 0xC3

int main(void)
{
	test_watchdog(100);
	struct target_opts o = { .transports = "tcp", .rw_size = SIZE, .rw_seed = 9 };
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;
	rma_engine *e = integ_engine(NULL);
	char *buf = test_alloc((size_t)N * SIZE);
	rma_region *l = integ_region(e, buf, (size_t)N * SIZE);
	rma_remote *rem = integ_remote(&t, "rw");
	CHECK_RC(rma_peer_connect(e, rem, 10000), 0);

	memset(buf, SENTINEL, (size_t)N * SIZE);
	test_stop_child(t.pid);
	struct rma_op ops[N];
	int64_t res[N];
	char report[1024];
	for (int i = 0; i < N; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_GET, .local = l,
					  .local_off = (uint64_t)i * SIZE,
					  .remote = rem, .len = SIZE };
	int64_t t0 = test_now_ms();
	test_watchdog(10); /* a deadline that never fires must not take 100 s */
	CHECK_RC(rma_submit(e, ops, N, 500, res, report, sizeof report), N);
	test_watchdog(90);
	int64_t dt = test_now_ms() - t0;
	printf("submit returned after %lld ms: %s\n", (long long)dt, report);
	for (int i = 0; i < N; i++)
		CHECK_RC(res[i], -ETIMEDOUT);
	CHECKF(dt >= 450 && dt < 5000, "took %lld ms for a 500 ms deadline",
	       (long long)dt);
	CHECK(strstr(report, "op 0") && strstr(report, "op 3"));

	/* The same through rma_post. */
	t0 = test_now_ms();
	CHECK_RC(rma_post(e, ops, 2, 300, NULL), 2);
	struct rma_completion c[2];
	int got = 0;
	while (got < 2 && test_now_ms() - t0 < 5000) {
		got += rma_poll(e, c + got, (size_t)(2 - got));
		test_sleep_ms(1);
	}
	CHECK_EQ(got, 2);
	CHECK_RC(c[0].result, -ETIMEDOUT);
	CHECK_RC(c[1].result, -ETIMEDOUT);

	test_cont_child(t.pid);
	test_sleep_ms(500);
	for (size_t i = 0; i < (size_t)N * SIZE; i++)
		CHECKF((unsigned char)buf[i] == SENTINEL,
		       "byte %zu of a timed-out get's buffer changed after the "
		       "target resumed (0x%02x)", i, (unsigned char)buf[i]);

	/* The peer recovers: a new get works. */
	CHECK_RC(integ_op(e, RMA_OP_GET, l, rem, 0, SIZE, 10000), SIZE);
	CHECK_EQ(test_check_fill(buf, SIZE, 9), -1);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	printf("ok\n");
	return 0;
}
