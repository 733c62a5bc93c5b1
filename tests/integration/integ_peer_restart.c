/* A target dies and a new one takes its address: ops with the old token
 * fail clearly (not a timeout, no bytes land in the new target), ops with
 * the new token work, from the same initiator engine. */
#include <errno.h>
#include <signal.h>

#include "integ_common.h"

int main(void)
{
	test_watchdog(100);
	int port = test_free_port();
	char listen[64];
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	struct target_opts o = { .transports = "tcp", .listen = listen,
				 .rw_size = 4 * MiB };
	struct target a, b;
	if (target_start(&a, &o))
		return TEST_SKIP;
	rma_engine *e = integ_engine(NULL);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	rma_remote *ra = integ_remote(&a, "rw");
	test_fill(buf, MiB, 8);
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, ra, 0, MiB, 10000), MiB);

	CHECK(kill(a.pid, SIGKILL) == 0);
	test_reap(a.pid, 5000);
	CHECK_EQ(target_start(&b, &o), 0);

	for (int i = 0; i < 3; i++) {
		int64_t t0 = test_now_ms();
		int64_t r = integ_op(e, i == 1 ? RMA_OP_GET : RMA_OP_PUT, l, ra, 0,
				     MiB, 10000);
		int64_t dt = test_now_ms() - t0;
		printf("old token, try %d: %lld (%s) in %lld ms\n", i,
		       (long long)r, r < 0 ? rma_strerror((int)r) : "ok",
		       (long long)dt);
		CHECKF(r < 0, "an op with the dead target's token succeeded");
		CHECK(r != -ETIMEDOUT);
		CHECK(dt < 5000);
	}
	CHECK_EQ_U64(target_crc(&b, "rw", 0, 4 * MiB),
		     rma_crc32c(0, test_alloc(4 * MiB), 4 * MiB));

	rma_remote *rb = integ_remote(&b, "rw");
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, rb, 0, MiB, 10000), MiB);
	CHECK_EQ_U64(target_crc(&b, "rw", 0, MiB), rma_crc32c(0, buf, MiB));
	rma_remote_free(ra);
	rma_remote_free(rb);
	rma_engine_destroy(e);
	target_stop(&b);
	printf("ok\n");
	return 0;
}
