/*
 * insn_put.c - the client half of bench/insn.sh: N round trips of one
 * small op (posted, then its completion taken), one at a time, against a
 * target's advertisement.  It drives progress itself and waits in the
 * kernel (rma_progress with a timeout) rather than spinning, so that the
 * instructions it executes depend on the number of ops, not on timing.
 *
 *   insn_put TOKEN ITERS [put|get] [BYTES]     (defaults: put, 8 bytes)
 *
 * Prints "ops: N" and "progress_calls: N" (rma_progress calls in the loop;
 * one per op when every reply was already waiting).  Uses only <rma.h>.
 */
#include <rma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, int err)
{
	fprintf(stderr, "insn_put: %s: %s\n", what, rma_strerror(err));
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: insn_put TOKEN ITERS [put|get] [BYTES]\n");
		return 2;
	}
	long iters = strtol(argv[2], NULL, 10);
	unsigned kind = (argc > 3 && !strcmp(argv[3], "get")) ? RMA_OP_GET : RMA_OP_PUT;
	uint64_t len = argc > 4 ? strtoull(argv[4], NULL, 10) : 8;
	static char buf[1 << 16];
	if (iters < 0 || len == 0 || len > sizeof buf)
		return 2;

	struct rma_config cfg;
	rma_engine *e;
	rma_region *reg;
	rma_remote *remote;
	int rc;

	rma_config_init(&cfg);
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	if ((rc = rma_engine_create(&cfg, &e)) < 0)
		return fail("engine", rc);
	if ((rc = rma_region_register(e, buf, sizeof buf, 0, &reg)) < 0)
		return fail("register", rc);
	if ((rc = rma_remote_parse(argv[1], &remote)) < 0)
		return fail("token", rc);
	if ((rc = rma_peer_connect(e, remote, 0)) < 0)
		return fail("connect", rc);

	struct rma_op op = {
		.kind = kind, .local = reg, .remote = remote, .len = len,
	};
	long progress_calls = 0;
	for (long i = 0; i < iters; i++) {
		struct rma_completion c;
		op.user_data = (uint64_t)i;
		if ((rc = rma_post(e, &op, 1, 0, NULL)) != 1)
			return fail("post", rc < 0 ? rc : -1);
		while ((rc = rma_poll(e, &c, 1)) == 0) {
			/* Blocks in epoll until the reply is readable. */
			if ((rc = rma_progress(e, 100)) < 0)
				return fail("progress", rc);
			progress_calls++;
		}
		if (rc < 0)
			return fail("poll", rc);
		if (c.result != (int64_t)len)
			return fail("op", c.result < 0 ? (int)c.result : -1);
	}
	printf("ops: %ld\nprogress_calls: %ld\n", iters, progress_calls);
	rma_remote_free(remote);
	rma_engine_destroy(e);
	return 0;
}
