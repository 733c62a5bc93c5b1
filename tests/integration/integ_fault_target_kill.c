/*
 * Fault: a target is SIGKILLed mid-batch.  One batch goes to two targets;
 * A dies while it is in flight.  A's ops end with their own error soon
 * after the kill (not at the deadline, not -ETIMEDOUT); B's ops in the same
 * batch complete with the right bytes; a target restarted at A's address
 * serves the same initiator engine through its new token.
 */
#include "integ_fault.h"

#define SIZE (32 * MiB)
#define PER 4            /* ops per target in the batch */
#define DEADLINE_MS 30000
#define SEED_A 21
#define SEED_B 22
#define SEED_PUT 23

int main(int argc, char **argv)
{
	test_watchdog(110);
	const char *tr = fault_transport(argc, argv);
	char listen[64];
	snprintf(listen, sizeof listen, "127.0.0.1:%d", test_free_port());
	struct target_opts oa = { .transports = tr, .listen = listen,
				  .rw_size = 2 * SIZE, .rw_seed = SEED_A };
	struct target_opts ob = { .transports = tr, .rw_size = 2 * SIZE,
				  .rw_seed = SEED_B };
	struct target a, b;
	if (target_start(&b, &ob))
		return TEST_SKIP;
	rma_engine *e = fault_engine(tr);
	size_t llen = (size_t)2 * PER * SIZE;
	char *buf = test_alloc(llen);
	rma_region *l = integ_region(e, buf, llen);
	rma_remote *rb = integ_remote(&b, "rw");

	/* A batch may finish before the kill lands on a fast machine; then the
	 * attempt proves nothing and is made again with a fresh A. */
	int failed = 0;
	for (int attempt = 0; attempt < 3 && !failed; attempt++) {
		CHECK_EQ(target_start(&a, &oa), 0);
		rma_remote *ra = integ_remote(&a, "rw");
		CHECK_RC(rma_peer_connect(e, ra, 10000), 0);
		CHECK_RC(rma_peer_connect(e, rb, 10000), 0);
		memset(buf, 0, llen);
		test_fill(buf + (size_t)(PER - 1) * SIZE, SIZE, SEED_PUT);
		test_fill(buf + (size_t)(2 * PER - 1) * SIZE, SIZE, SEED_PUT);

		/* ops 0..PER-1 to A, PER..2*PER-1 to B; the last of each a put
		 * into the region's second half, where no get of the batch reads */
		struct rma_op ops[2 * PER];
		for (int i = 0; i < 2 * PER; i++)
			ops[i] = (struct rma_op){
				.kind = i % PER == PER - 1 ? RMA_OP_PUT : RMA_OP_GET,
				.local = l, .local_off = (uint64_t)i * SIZE,
				.remote = i < PER ? ra : rb, .len = SIZE,
				.remote_off = i % PER == PER - 1 ? SIZE : 0,
				.user_data = (uint64_t)i };
		int err = 0;
		CHECK_RC(rma_post(e, ops, 2 * PER, DEADLINE_MS, &err), 2 * PER);
		CHECK(kill(a.pid, SIGKILL) == 0);
		int64_t t0 = test_now_ms();
		test_reap(a.pid, 5000);
		close(a.cmd);
		close(a.resp);

		struct rma_completion c[2 * PER];
		int got = fault_collect(e, c, 2 * PER, DEADLINE_MS + 10000);
		int64_t dt = test_now_ms() - t0;
		CHECKF(got == 2 * PER, "%d of %d ops completed %lld ms after the kill",
		       got, 2 * PER, (long long)dt);
		int seen[2 * PER] = { 0 };
		for (int i = 0; i < got; i++) {
			int k = (int)c[i].user_data;
			int64_t r = c[i].result;
			CHECK(k >= 0 && k < 2 * PER && !seen[k]);
			seen[k] = 1;
			printf("attempt %d op %d (%s %c): %lld %s\n", attempt, k,
			       ops[k].kind == RMA_OP_PUT ? "put" : "get",
			       k < PER ? 'A' : 'B', (long long)r, fault_err(r));
			if (k < PER) {
				CHECK(r == SIZE || r < 0);
				CHECKF(r != -ETIMEDOUT,
				       "an op to the killed target waited for its deadline");
				failed += r < 0;
				if (r == SIZE && ops[k].kind == RMA_OP_GET)
					CHECK_EQ(test_check_fill(buf + (size_t)k * SIZE,
								 SIZE, SEED_A), -1);
			} else {
				/* the other peer is unaffected */
				CHECK_RC(r, SIZE);
				if (ops[k].kind == RMA_OP_GET)
					CHECK_EQ(test_check_fill(buf + (size_t)k * SIZE,
								 SIZE, SEED_B), -1);
			}
		}
		CHECKF(!failed || dt < 15000, "failures took %lld ms after the kill",
		       (long long)dt);
		CHECK_EQ_U64(target_crc(&b, "rw", SIZE, SIZE),
			     rma_crc32c(0, buf + (size_t)(2 * PER - 1) * SIZE, SIZE));
		target_cmd(&b, NULL, 0, "fill rw %d", SEED_B);

		/* A later op to the dead target fails fast too. */
		t0 = test_now_ms();
		int64_t r = integ_op(e, RMA_OP_GET, l, ra, 0, 4096, DEADLINE_MS);
		dt = test_now_ms() - t0;
		printf("after the kill: %lld %s in %lld ms\n", (long long)r,
		       fault_err(r), (long long)dt);
		CHECK(r < 0 && r != -ETIMEDOUT);
		CHECK(dt < 15000);
		rma_remote_free(ra);
		if (!failed)
			printf("attempt %d: the batch beat the kill; again\n", attempt);
	}
	CHECKF(failed, "every op to A finished before the kill; nothing tested");

	/* A comes back at the same address: its new token works from the same
	 * engine, both ways. */
	CHECK_EQ(target_start(&a, &oa), 0);
	rma_remote *ra = integ_remote(&a, "rw");
	test_fill(buf, MiB, SEED_PUT);
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, ra, SIZE, MiB, 20000), MiB);
	CHECK_EQ_U64(target_crc(&a, "rw", SIZE, MiB), rma_crc32c(0, buf, MiB));
	CHECK_RC(integ_op(e, RMA_OP_GET, l, ra, 0, SIZE, 20000), SIZE);
	CHECK_EQ(test_check_fill(buf, SIZE, SEED_A), -1);
	/* and B still works */
	CHECK_RC(integ_op(e, RMA_OP_GET, l, rb, 0, SIZE, 20000), SIZE);
	CHECK_EQ(test_check_fill(buf, SIZE, SEED_B), -1);

	rma_remote_free(ra);
	rma_remote_free(rb);
	rma_engine_destroy(e);
	target_stop(&a);
	target_stop(&b);
	printf("ok\n");
	return 0;
}
