/*
 * read_from_peer.c - one get: read the payload a plain libfabric target
 * serves (run `one_target --read`) into local memory.
 *
 *   read_from_peer <address-hex> <rkey> <remote-addr>   (from one_target)
 */
#include <inttypes.h>

#include "triple.h"

int main(int argc, char **argv)
{
	static unsigned char landing[PAYLOAD];
	rma_remote *remote = remote_from_args(argc, argv, PAYLOAD);
	rma_engine *e = remote ? ofi_engine(0) : NULL;
	rma_region *local;
	int64_t result;
	char report[256];

	if (!e)
		return 1;
	if (rma_region_register(e, landing, sizeof landing, 0, &local) < 0)
		return 1;

	struct rma_op op = { .kind = RMA_OP_GET, .local = local,
			     .remote = remote, .len = sizeof landing };
	if (rma_submit(e, &op, 1, 10000, &result, report, sizeof report)) {
		fprintf(stderr, "read_from_peer: %s\n", report);
		return 1;
	}
	/* Completion means the bytes are in local memory. */
	printf("read %" PRId64 " bytes\n", result);
	printf("crc32c: %08" PRIx32 "\n", rma_crc32c(0, landing, sizeof landing));

	rma_region_release(local);
	rma_remote_free(remote);
	rma_engine_destroy(e);
	return 0;
}
