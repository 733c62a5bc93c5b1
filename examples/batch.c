/*
 * batch.c - one batch, one deadline, one result per op: rma_submit() runs
 * several ops together and, when some fail, hands back a single report that
 * names each failed op by index and reason.  Op 2 here is deliberately out
 * of the advertised window, to show what that report looks like.
 */
#include <stdio.h>

#include <rma.h>

#define N_OPS 4

int main(void)
{
	static char exposed_mem[1 << 16];
	static char local_mem[1 << 16];
	char token[RMA_ADVERTISEMENT_TEXT_MAX], report[512];
	struct rma_op ops[N_OPS];
	int64_t results[N_OPS];
	struct rma_config cfg;
	rma_engine *owner, *peer;
	rma_region *exposed, *local;
	rma_remote *remote;
	int i, failed;

	rma_config_init(&cfg);
	cfg.transports = "tcp";
	if (rma_engine_create(&cfg, &owner) < 0 || rma_engine_create(&cfg, &peer) < 0 ||
	    rma_region_register(owner, exposed_mem, sizeof(exposed_mem),
				RMA_ACCESS_REMOTE_RW, &exposed) < 0 ||
	    rma_advertise_text(exposed, 0, 0, 0, token, sizeof(token)) < 0 ||
	    rma_remote_parse(token, &remote) < 0 ||
	    rma_region_register(peer, local_mem, sizeof(local_mem), 0, &local) < 0) {
		fprintf(stderr, "batch: setup failed\n");
		return 1;
	}

	/* Four 16 KiB puts side by side; op 2 starts past the window's end. */
	for (i = 0; i < N_OPS; i++)
		ops[i] = (struct rma_op){
			.kind = RMA_OP_PUT, .local = local, .local_off = (uint64_t)i << 14,
			.remote = remote, .remote_off = (uint64_t)i << 14,
			.len = 1 << 14, .user_data = (uint64_t)i,
		};
	ops[2].remote_off = sizeof(exposed_mem);

	failed = rma_submit(peer, ops, N_OPS, 5000, results, report, sizeof(report));
	for (i = 0; i < N_OPS; i++)
		printf("op %d: %lld%s%s\n", i, (long long)results[i],
		       results[i] < 0 ? " " : " bytes",
		       results[i] < 0 ? rma_strerror((int)results[i]) : "");
	printf("failed: %d\nreport: %s\n", failed, failed ? report : "(none)");

	rma_region_release(local);
	rma_remote_free(remote);
	rma_region_release(exposed);
	rma_engine_destroy(peer);
	rma_engine_destroy(owner);
	/* Expected: exactly op 2 failed, the others moved their bytes. */
	return !(failed == 1 && results[2] < 0 && results[0] == 1 << 14);
}
