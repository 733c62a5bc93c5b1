/* A target with a shared secret refuses initiators with a wrong or no
 * secret (-EACCES) and keeps serving the one with the right secret. */
#include <errno.h>

#include "integ_common.h"

static void attempt(struct target *t, const char *secret, int64_t want)
{
	rma_engine *e = integ_engine(secret);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	rma_remote *rem = integ_remote(t, "rw");
	int64_t t0 = test_now_ms();
	int64_t got = integ_op(e, RMA_OP_PUT, l, rem, 0, MiB, 10000);
	printf("secret %s: %lld (%s) in %lld ms\n", secret ? secret : "(none)",
	       (long long)got, got < 0 ? rma_strerror((int)got) : "ok",
	       (long long)(test_now_ms() - t0));
	CHECKF(got == want, "secret '%s': got %lld (%s), expected %lld (%s)",
	       secret ? secret : "(none)", (long long)got,
	       got < 0 ? rma_strerror((int)got) : "ok", (long long)want,
	       want < 0 ? rma_strerror((int)want) : "ok");
	if (want < 0) {
		CHECK_RC(rma_peer_connect(e, rem, 10000), want);
		CHECK_RC(integ_op(e, RMA_OP_GET, l, rem, 0, MiB, 10000), want);
	} else {
		CHECK_EQ_U64(target_crc(t, "rw", 0, MiB), rma_crc32c(0, buf, MiB));
	}
	rma_remote_free(rem);
	rma_engine_destroy(e);
	test_free(buf, MiB);
}

int main(void)
{
	test_watchdog(100);
	struct target_opts o = { .transports = "tcp", .secret = "open sesame",
				 .rw_size = 4 * MiB };
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;
	attempt(&t, "open sesame", MiB);
	attempt(&t, "open sesame!", -EACCES);
	attempt(&t, "wrong", -EACCES);
	attempt(&t, NULL, -EACCES);
	attempt(&t, "open sesame", MiB);
	target_stop(&t);
	printf("ok\n");
	return 0;
}
