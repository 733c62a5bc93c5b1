/*
 * Fault: a target is SIGSTOPped with a batch in flight, then SIGCONTed.
 * Deadlines are final: the stopped target's ops end with -ETIMEDOUT at their
 * deadline (within seconds), each exactly once; when the target resumes and
 * answers late, no completion is delivered again and no byte lands in a
 * timed-out get's buffer.  A second target in the same batch is unaffected,
 * and the resumed one serves again.
 */
#include "integ_fault.h"

#define SIZE (16 * MiB)
#define SIZE_B MiB /* B's gets must finish inside the deadline, sanitizers too */
#define PER 3
#define DEADLINE_MS 2000
#define SENTINEL 0x5A
#define SEED_A 31
#define SEED_B 32

int main(int argc, char **argv)
{
	test_watchdog(110);
	const char *tr = fault_transport(argc, argv);
	/* twice SIZE: the put goes to the second half, where no get reads (a
	 * timed-out put may still land when the target resumes) */
	struct target_opts oa = { .transports = tr, .rw_size = 2 * SIZE,
				  .rw_seed = SEED_A };
	struct target_opts ob = { .transports = tr, .rw_size = SIZE, .rw_seed = SEED_B };
	struct target a, b;
	if (target_start(&a, &oa))
		return TEST_SKIP;
	CHECK_EQ(target_start(&b, &ob), 0);
	rma_engine *e = fault_engine(tr);
	size_t llen = (size_t)(2 * PER + 1) * SIZE;
	unsigned char *buf = test_alloc(llen);
	rma_region *l = integ_region(e, buf, llen);
	rma_remote *ra = integ_remote(&a, "rw"), *rb = integ_remote(&b, "rw");
	CHECK_RC(rma_peer_connect(e, ra, 10000), 0);
	CHECK_RC(rma_peer_connect(e, rb, 10000), 0);

	/* ops 0..PER-1: gets from A (then stopped); PER..: gets from B */
	struct rma_op ops[2 * PER + 1];
	for (int i = 0; i < 2 * PER; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_GET, .local = l,
					  .local_off = (uint64_t)i * SIZE,
					  .remote = i < PER ? ra : rb,
					  .len = i < PER ? SIZE : SIZE_B,
					  .user_data = (uint64_t)i };
	/* and a put to A, from its own part of the buffer */
	ops[2 * PER] = (struct rma_op){ .kind = RMA_OP_PUT, .local = l,
					.local_off = (uint64_t)2 * PER * SIZE,
					.remote = ra, .remote_off = SIZE,
					.len = SIZE, .user_data = 2 * PER };
	int nops = 2 * PER + 1;

	for (int round = 0; round < 2; round++) {
		memset(buf, SENTINEL, llen);
		test_stop_child(a.pid);
		int64_t t0 = test_now_ms();
		int got;
		struct rma_completion c[2 * PER + 1];
		if (round == 0) {
			/* blocking: one result per op */
			int64_t res[2 * PER + 1];
			char report[1024];
			int rc = rma_submit(e, ops, (size_t)nops, DEADLINE_MS, res,
					    report, sizeof report);
			printf("submit: %d failed: %s\n", rc, report);
			for (int i = 0; i < nops; i++)
				c[i] = (struct rma_completion){
					.user_data = (uint64_t)i, .result = res[i] };
			got = nops;
			CHECK_RC(rc, PER + 1);
		} else {
			/* asynchronous: each completion once */
			CHECK_RC(rma_post(e, ops, (size_t)nops, DEADLINE_MS, NULL), nops);
			got = fault_collect(e, c, nops, DEADLINE_MS + 10000);
		}
		int64_t dt = test_now_ms() - t0;
		printf("round %d: %d completions in %lld ms\n", round, got,
		       (long long)dt);
		CHECK_EQ(got, nops);
		CHECKF(dt >= DEADLINE_MS - 100 && dt < DEADLINE_MS + 9000,
		       "%lld ms for a %d ms deadline", (long long)dt, DEADLINE_MS);
		int seen[2 * PER + 1] = { 0 };
		for (int i = 0; i < got; i++) {
			int k = (int)c[i].user_data;
			CHECK(k >= 0 && k < nops && !seen[k]);
			seen[k] = 1;
			if (ops[k].remote == ra) {
				CHECKF(c[i].result == -ETIMEDOUT,
				       "op %d to the stopped target: %lld %s", k,
				       (long long)c[i].result, fault_err(c[i].result));
			} else {
				CHECK_RC(c[i].result, SIZE_B);
				CHECK_EQ(test_check_fill(buf + (size_t)k * SIZE, SIZE_B,
							 SEED_B), -1);
			}
		}

		/* The target answers late; nothing may come of it. */
		test_cont_child(a.pid);
		int64_t end = test_now_ms() + 1500;
		while (test_now_ms() < end) {
			int n = rma_poll(e, c, 1);
			CHECKF(n == 0, "a completion (op %llu, %lld) after the deadline",
			       (unsigned long long)c[0].user_data,
			       (long long)c[0].result);
			test_sleep_ms(10);
		}
		for (size_t i = 0; i < (size_t)PER * SIZE; i++)
			CHECKF(buf[i] == SENTINEL,
			       "round %d: byte %zu of a timed-out get's buffer became "
			       "0x%02x after the target resumed", round, i, buf[i]);

		/* The resumed target serves again. */
		CHECK_RC(integ_op(e, RMA_OP_GET, l, ra, 0, SIZE, 20000), SIZE);
		CHECK_EQ(test_check_fill(buf, SIZE, SEED_A), -1);
	}

	rma_remote_free(ra);
	rma_remote_free(rb);
	rma_engine_destroy(e);
	target_stop(&a);
	target_stop(&b);
	printf("ok\n");
	return 0;
}
