/*
 * registered_arena.c - a payload inside a pre-registered arena: register
 * one large region once (at start-up, say), build payloads anywhere in it,
 * and name each by its offset.  No op registers anything.
 *
 *   registered_arena <address-hex> <rkey> <remote-addr>   (from one_target)
 */
#include <inttypes.h>

#include "triple.h"

#define ARENA (256 * 1024)

int main(int argc, char **argv)
{
	static unsigned char arena[ARENA];
	rma_remote *remote = remote_from_args(argc, argv, PAYLOAD);
	rma_engine *e = remote ? ofi_engine(0) : NULL;
	rma_region *region;
	int64_t result;
	char report[256];

	if (!e)
		return 1;
	if (rma_region_register(e, arena, sizeof arena, 0, &region) < 0)
		return 1;

	/* The payload is built in place, 64 KiB into the arena. */
	uint64_t off = 64 * 1024;
	unsigned char *payload = arena + off;
	for (size_t i = 0; i < PAYLOAD; i++)
		payload[i] = (unsigned char)(i * 3 + 11);

	struct rma_op op = { .kind = RMA_OP_PUT, .local = region, .local_off = off,
			     .remote = remote, .len = PAYLOAD };
	if (rma_submit(e, &op, 1, 10000, &result, report, sizeof report)) {
		fprintf(stderr, "registered_arena: %s\n", report);
		return 1;
	}
	printf("wrote %" PRId64 " bytes from arena offset %" PRIu64 "\n", result, off);
	printf("crc32c: %08" PRIx32 "\n", rma_crc32c(0, payload, PAYLOAD));

	rma_region_release(region);
	rma_remote_free(remote);
	rma_engine_destroy(e);
	return 0;
}
