/*
 * async_poll.c - asynchronous ops in an event loop: rma_post() returns at
 * once, rma_completion_fd() goes into poll() beside your other descriptors
 * (after rma_arm()), and rma_poll() collects the results when it is
 * readable.  Here: 64 gets of 4 KiB each, kept 8 in flight, each asking for
 * the CRC-32C of what landed (RMA_OP_CRC), which a real program would
 * compare with the owner's over its own channel.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include <rma.h>

#define CHUNK 4096
#define N_CHUNKS 64
#define WINDOW 8

int main(void)
{
	static unsigned char exposed_mem[CHUNK * N_CHUNKS];
	static unsigned char local_mem[CHUNK * N_CHUNKS];
	char token[RMA_ADVERTISEMENT_TEXT_MAX];
	struct rma_config cfg;
	rma_engine *owner, *peer;
	rma_region *exposed, *local;
	rma_remote *remote;
	int posted = 0, done = 0, inflight = 0, i;

	for (i = 0; i < (int)sizeof(exposed_mem); i++)
		exposed_mem[i] = (unsigned char)(i * 7);
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	if (rma_engine_create(&cfg, &owner) < 0 || rma_engine_create(&cfg, &peer) < 0 ||
	    rma_region_register(owner, exposed_mem, sizeof(exposed_mem),
				RMA_ACCESS_REMOTE_READ, &exposed) < 0 ||
	    rma_advertise_text(exposed, 0, 0, 0, token, sizeof(token)) < 0 ||
	    rma_remote_parse(token, &remote) < 0 ||
	    rma_region_register(peer, local_mem, sizeof(local_mem), 0, &local) < 0) {
		fprintf(stderr, "async_poll: setup failed\n");
		return 1;
	}

	struct pollfd pfd = { .fd = rma_completion_fd(peer), .events = POLLIN };

	while (done < N_CHUNKS) {
		/* Keep the window full; user_data says which chunk finished. */
		while (inflight < WINDOW && posted < N_CHUNKS) {
			struct rma_op op = {
				.kind = RMA_OP_GET, .flags = RMA_OP_CRC, .local = local,
				.local_off = (uint64_t)posted * CHUNK, .remote = remote,
				.remote_off = (uint64_t)posted * CHUNK, .len = CHUNK,
				.user_data = (uint64_t)posted,
			};
			int rc = rma_post(peer, &op, 1, 5000, NULL);

			if (rc == -EAGAIN)
				break; /* completion queue full: poll first */
			if (rc < 0) {
				fprintf(stderr, "async_poll: post: %s\n", rma_strerror(rc));
				return 1;
			}
			posted++;
			inflight++;
		}
		/* Sleep until completions wait (any other fds could go here);
		 * rma_arm first hands progress to the engine's thread (-EAGAIN:
		 * completions wait already). */
		if (rma_arm(peer) == 0 && poll(&pfd, 1, 5000) < 0)
			return 1;

		struct rma_completion c[WINDOW];
		int n = rma_poll(peer, c, WINDOW);

		for (i = 0; i < n; i++) {
			if (c[i].result < 0) {
				fprintf(stderr, "async_poll: chunk %llu: %s\n",
					(unsigned long long)c[i].user_data,
					rma_strerror((int)c[i].result));
				return 1;
			}
			/* The owner's side of the comparison, computed here. */
			uint64_t k = c[i].user_data;
			if (!(c[i].flags & RMA_COMPLETION_CRC) ||
			    c[i].crc32c != rma_crc32c(0, exposed_mem + k * CHUNK, CHUNK)) {
				fprintf(stderr, "async_poll: chunk %llu: crc differs\n",
					(unsigned long long)k);
				return 1;
			}
			done++;
			inflight--;
		}
	}
	for (i = 0; i < (int)sizeof(local_mem); i++)
		if (local_mem[i] != exposed_mem[i]) {
			fprintf(stderr, "async_poll: byte %d differs\n", i);
			return 1;
		}
	printf("async_poll: %d gets of %d bytes, all bytes and crcs match\n", N_CHUNKS,
	       CHUNK);

	rma_region_release(local);
	rma_remote_free(remote);
	rma_region_release(exposed);
	rma_engine_destroy(peer);
	rma_engine_destroy(owner);
	return 0;
}
