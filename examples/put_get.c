/*
 * put_get.c - the smallest round trip: one engine owns a buffer and hands
 * out its advertisement; another engine (standing in for another process)
 * writes into it with a put and reads it back with a get.
 *
 *   build: cc put_get.c $(pkg-config --cflags --libs rma)
 */
#include <stdio.h>
#include <string.h>

#include <rma.h>

#define MSG "hello, remote memory"

static int check(int rc, const char *what)
{
	if (rc < 0)
		fprintf(stderr, "put_get: %s: %s\n", what, rma_strerror(rc));
	return rc < 0;
}

/* Run one op to completion; 0 or a failure already reported. */
static int run_one(rma_engine *e, const struct rma_op *op, const char *what)
{
	int64_t result;

	if (rma_submit(e, op, 1, 5000, &result, NULL, 0) == 0)
		return 0;
	fprintf(stderr, "put_get: %s: %s\n", what, rma_strerror((int)result));
	return 1;
}

int main(void)
{
	static char exposed_mem[4096]; /* the memory peers may touch */
	static char local_mem[128];    /* [0,64): source, [64,128): destination */
	char token[RMA_ADVERTISEMENT_TEXT_MAX];
	struct rma_config cfg;
	rma_engine *owner, *peer;
	rma_region *exposed, *local;
	rma_remote *remote;

	rma_config_init(&cfg);
	cfg.transports = "tcp"; /* any transport works; tcp is always there */
	if (check(rma_engine_create(&cfg, &owner), "owner engine") ||
	    check(rma_engine_create(&cfg, &peer), "peer engine"))
		return 1;

	/* Owner: register the buffer and make a token for it.  In real use the
	 * token travels to the peer over your own channel (a socket, a file). */
	if (check(rma_region_register(owner, exposed_mem, sizeof(exposed_mem),
				      RMA_ACCESS_REMOTE_RW, &exposed), "register") ||
	    check(rma_advertise_text(exposed, 0, 0, 0, token, sizeof(token)), "advertise"))
		return 1;
	printf("token: %s\n", token);

	/* Peer: decode the token and register its own memory (local use only). */
	if (check(rma_remote_parse(token, &remote), "parse") ||
	    check(rma_region_register(peer, local_mem, sizeof(local_mem), 0, &local),
		  "register local"))
		return 1;
	strcpy(local_mem, MSG);

	struct rma_op put = { .kind = RMA_OP_PUT, .local = local, .local_off = 0,
			      .remote = remote, .remote_off = 128, .len = 64 };
	struct rma_op get = { .kind = RMA_OP_GET, .local = local, .local_off = 64,
			      .remote = remote, .remote_off = 128, .len = 64 };

	/* Two submits, not one batch: ops in a batch may run in any order.
	 * When the put completes, the bytes are in the owner's memory. */
	if (run_one(peer, &put, "put") || run_one(peer, &get, "get"))
		return 1;
	printf("owner's memory: \"%s\"\n", exposed_mem + 128);
	printf("read back:      \"%s\"\n", local_mem + 64);

	rma_region_release(local);
	rma_remote_free(remote);
	rma_region_release(exposed);
	rma_engine_destroy(peer);
	rma_engine_destroy(owner);
	return strcmp(exposed_mem + 128, MSG) != 0 || strcmp(local_mem + 64, MSG) != 0;
}
