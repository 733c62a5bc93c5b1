/* A target that accepts connections (its kernel does) but never answers the
 * handshake: the initiator gives up on those connections after the 10 s
 * handshake limit and the peer fails with -ETIMEDOUT, even when the caller
 * asked to wait longer; once the target runs again, a fresh connect works. */
#include <errno.h>
#include <signal.h>

#include "integ_common.h"

int main(void)
{
	test_watchdog(100);
	struct target_opts o = { .transports = "tcp", .rw_size = MiB, .rw_seed = 3 };
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;
	rma_engine *e = integ_engine(NULL);
	rma_remote *rem = integ_remote(&t, "rw");

	test_stop_child(t.pid);
	int64_t t0 = test_now_ms();
	CHECK_RC(rma_peer_connect(e, rem, 60000), -ETIMEDOUT);
	int64_t dt = test_now_ms() - t0;
	printf("connect gave up after %lld ms\n", (long long)dt);
	CHECKF(dt >= 9000 && dt < 20000, "gave up after %lld ms, not ~10 s",
	       (long long)dt);
	test_cont_child(t.pid);

	CHECK_RC(rma_peer_connect(e, rem, 10000), 0);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	CHECK_RC(rma_read_into(e, l, rem, 10000), MiB);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}
