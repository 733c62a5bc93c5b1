/*
 * Fuzz the initiator side of the tcp transport: the harness plays a target
 * that handshakes correctly, reads the requests of a few posted ops, then
 * answers with the input bytes.  Header id fields holding 1..8 become the
 * ids of the requests in the order they arrived, so replies can match.
 * Nothing may crash or write outside the local region (ASan), and every
 * posted op must complete exactly once once the peer is removed.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "transport/tcp/tcp.h"

#define LOCAL (64u << 10)
#define ENGINE_ID 0x1234abcdULL
#define NOPS 4

static rma_engine *e;
static rma_region *local;
static rma_remote *rem;
static int lfd;
static uint8_t proof_key[16];

/* An advertisement naming the harness's listener (format: docs/design.md). */
static void forge_remote(uint16_t port)
{
	uint8_t b[64];
	size_t o = 32;
	rma__put_le32(b, 0x61414d52u);
	b[4] = 1;                  /* version */
	b[5] = RMA_ACCESS_REMOTE_RW;
	b[6] = 1;                  /* one transport entry */
	b[7] = 0;
	rma__put_le64(b + 8, ENGINE_ID);
	rma__put_le64(b + 16, 0x55); /* key */
	rma__put_le64(b + 24, LOCAL);
	b[o] = 1;                  /* tcp */
	rma__put_le16(b + o + 1, 7);
	b[o + 3] = 4;
	rma__put_le16(b + o + 4, port);
	b[o + 6] = 127, b[o + 7] = 0, b[o + 8] = 0, b[o + 9] = 1;
	o += 10;
	rma__put_le32(b + o, rma_crc32c(0, b, o));
	if (rma_remote_decode(b, o + 4, &rem))
		abort();
}

static void setup(void)
{
	struct rma_config cfg;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof sa;

	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	cfg.stripes = 1;
	rma_set_log(-1, NULL, NULL);
	if (rma_engine_create(&cfg, &e) ||
	    rma_region_register(e, malloc(LOCAL), LOCAL, 0, &local))
		abort();
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) ||
	    listen(lfd, 16) || getsockname(lfd, (struct sockaddr *)&sa, &len))
		abort();
	forge_remote(ntohs(sa.sin_port));
	rma__setup_key(NULL, proof_key); /* no secret */
}


/* Read exactly n bytes while driving the engine; -1 on EOF or no progress. */
static int read_full(int fd, uint8_t *b, size_t n)
{
	size_t have = 0;
	for (int i = 0; i < 100000 && have < n; i++) {
		rma_progress(e, 0);
		ssize_t r = recv(fd, b + have, n - have, MSG_DONTWAIT);
		if (r == 0)
			return -1;
		if (r > 0)
			have += (size_t)r;
	}
	return have == n ? 0 : -1;
}

static int serve_handshake(int fd)
{
	uint8_t b[RMA_TCP_HELLO_SIZE];
	struct rma_tcp_hello h;

	if (read_full(fd, b, sizeof b) || rma__tcp_hello_decode(b, sizeof b, &h) ||
	    h.step != 1)
		return -1;
	struct rma_tcp_hello s2 = {.step = 2, .engine_id = ENGINE_ID,
				   .max_msg = 1 << 20, .nonce = 99};
	rma__setup_proof(proof_key, 'S', h.nonce, NULL, 0, s2.proof);
	rma__tcp_hello_encode(&s2, b);
	if (send(fd, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b ||
	    read_full(fd, b, sizeof b) || rma__tcp_hello_decode(b, sizeof b, &h) ||
	    h.step != 3)
		return -1;
	struct rma_tcp_hello s4 = {.step = 4, .engine_id = ENGINE_ID};
	rma__tcp_hello_encode(&s4, b);
	return send(fd, b, sizeof b, MSG_NOSIGNAL) == (ssize_t)sizeof b ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	static const struct { unsigned kind; uint64_t loff, roff, len; } plan[NOPS] = {
		{RMA_OP_GET, 0, 0, 4096},
		{RMA_OP_PUT, 4096, 8192, 100},
		{RMA_OP_GET, 8192, 100, 1},
		{RMA_OP_GET, 16384, 0, LOCAL - 16384},
	};
	uint64_t ids[NOPS] = {0};
	long posted = 0, completed = 0;
	struct rma_completion c[16];
	int fd = -1, n;

	if (!ready++)
		setup();
	if (size > (1u << 20))
		return 0;
	for (int i = 0; i < NOPS; i++) {
		struct rma_op op = {.kind = plan[i].kind, .local = local,
				    .local_off = plan[i].loff, .remote = rem,
				    .remote_off = plan[i].roff, .len = plan[i].len};
		posted += rma_post(e, &op, 1, -1, NULL) == 1;
	}
	for (int i = 0; i < 100000 && fd < 0; i++) {
		rma_progress(e, 0);
		fd = accept(lfd, NULL, NULL);
	}
	if (fd < 0 || serve_handshake(fd))
		abort(); /* the initiator should always get this far */

	/* The requests, in order: learn their ids (skip PUT payloads). */
	for (int i = 0; i < NOPS; i++) {
		uint8_t h[RMA_TCP_HDR_SIZE], skip[256];
		struct rma_tcp_hdr q;
		if (read_full(fd, h, sizeof h) ||
		    rma__tcp_hdr_decode(h, sizeof h, 1 << 20, &q))
			abort();
		ids[i] = q.id;
		if (q.type == RMA_TCP_PUT && read_full(fd, skip, q.len))
			abort();
	}

	uint8_t *msg = malloc(size + 1);
	memcpy(msg, data, size);
	for (size_t i = 0; i + RMA_TCP_HDR_SIZE <= size; i += RMA_TCP_HDR_SIZE) {
		uint64_t k = rma__le64(msg + i + 8);
		if (k >= 1 && k <= NOPS)
			rma__put_le64(msg + i + 8, ids[k - 1]);
	}
	size_t sent = 0;
	for (int i = 0; i < 100000 && sent < size; i++) {
		ssize_t w = send(fd, msg + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0 && errno != EAGAIN)
			break; /* the initiator dropped us: fine */
		if (w > 0)
			sent += (size_t)w;
		rma_progress(e, 0);
	}
	for (int i = 0; i < 20; i++)
		rma_progress(e, 0);
	free(msg);

	/* Whatever happened, removing the peer settles every op, once. */
	int rc = rma_peer_remove(e, rem, 1); /* 1 ms: then cancel */
	if (rc && rc != -ETIMEDOUT && rc != -ENOENT)
		abort();
	close(fd);
	while ((n = rma_poll(e, c, 16)) > 0)
		completed += n;
	if (completed != posted)
		abort();
	return 0;
}
