/*
 * one_transfer.c - one put into a plain libfabric target, run to
 * completion with rma_submit: a batch of ops under one deadline, with one
 * result per op and a report naming any that failed.
 *
 *   one_transfer <address-hex> <rkey> <remote-addr>   (from one_target)
 */
#include <inttypes.h>

#include "triple.h"

int main(int argc, char **argv)
{
	static unsigned char payload[PAYLOAD];
	rma_remote *remote = remote_from_args(argc, argv, PAYLOAD);
	rma_engine *e = remote ? ofi_engine(0) : NULL;
	rma_region *local;
	int64_t result;
	char report[256];

	if (!e)
		return 1;
	for (size_t i = 0; i < sizeof payload; i++)
		payload[i] = (unsigned char)(i * 31 + 1);
	/* Local memory is registered (no remote access: a server exposes
	 * nothing of its own). */
	if (rma_region_register(e, payload, sizeof payload, 0, &local) < 0)
		return 1;

	struct rma_op op = { .kind = RMA_OP_PUT, .local = local,
			     .remote = remote, .len = sizeof payload };
	if (rma_submit(e, &op, 1, 10000, &result, report, sizeof report)) {
		fprintf(stderr, "one_transfer: %s\n", report);
		return 1;
	}
	/* Completion means the bytes are in the target's memory. */
	printf("wrote %" PRId64 " bytes\n", result);
	printf("crc32c: %08" PRIx32 "\n", rma_crc32c(0, payload, sizeof payload));

	rma_region_release(local);
	rma_remote_free(remote);
	rma_engine_destroy(e);
	return 0;
}
