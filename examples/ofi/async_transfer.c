/*
 * async_transfer.c - the same put as one_transfer, posted asynchronously:
 * rma_post returns at once, and the completion fd (readable while
 * completions wait) goes into the caller's own poll loop with its other
 * fds; rma_poll then takes the completion.
 *
 *   async_transfer <address-hex> <rkey> <remote-addr>   (from one_target)
 */
#include <inttypes.h>
#include <poll.h>

#include "triple.h"

int main(int argc, char **argv)
{
	static unsigned char payload[PAYLOAD];
	rma_remote *remote = remote_from_args(argc, argv, PAYLOAD);
	rma_engine *e = remote ? ofi_engine(0) : NULL;
	rma_region *local;
	struct rma_completion c;
	int err = 0;

	if (!e)
		return 1;
	for (size_t i = 0; i < sizeof payload; i++)
		payload[i] = (unsigned char)(i * 13 + 5);
	if (rma_region_register(e, payload, sizeof payload, 0, &local) < 0)
		return 1;

	struct rma_op op = { .kind = RMA_OP_PUT, .local = local, .remote = remote,
			     .len = sizeof payload, .user_data = 42 };
	if (rma_post(e, &op, 1, 10000, &err) != 1) {
		fprintf(stderr, "async_transfer: post: %s\n", rma_strerror(err));
		return 1;
	}
	/* Free to do other work here; the progress thread moves the bytes. */
	struct pollfd pfd = { .fd = rma_completion_fd(e), .events = POLLIN };
	while (rma_poll(e, &c, 1) == 0)
		if (rma_arm(e) == 0) /* the engine's thread drives while we sleep */
			poll(&pfd, 1, -1); /* the op's deadline bounds the wait */
	if (c.result < 0) {
		fprintf(stderr, "async_transfer: op %" PRIu64 ": %s\n", c.user_data,
			rma_strerror((int)c.result));
		return 1;
	}
	printf("op %" PRIu64 " wrote %" PRId64 " bytes\n", c.user_data, c.result);
	printf("crc32c: %08" PRIx32 "\n", rma_crc32c(0, payload, sizeof payload));

	rma_region_release(local);
	rma_remote_free(remote);
	rma_engine_destroy(e);
	return 0;
}
