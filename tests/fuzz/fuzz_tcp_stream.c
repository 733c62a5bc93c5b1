/*
 * Fuzz the target side of the tcp transport with whole byte streams.  Each
 * input is sent, after a correct handshake, on a fresh connection to an
 * engine serving two regions (read-write and read-only).  Header key fields
 * holding 1 or 2 are replaced by the regions' real keys, so requests reach
 * the memory paths.  Nothing may crash or touch memory outside the regions
 * (ASan), the read-only region must never change, the engine must go on
 * serving, and it must retire every connection the client closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "transport/tcp/tcp.h"

#define REGION (64u << 10)

static rma_engine *e;
static uint64_t key_rw, key_ro;
static struct sockaddr_in addr;
static uint8_t proof_key[16];
static uint8_t *ro_mem, ro_copy[REGION]; /* the read-only region never changes */

static uint64_t remote_of(rma_region *r)
{
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	rma_remote *rem;
	int n = rma_advertise(r, 0, 0, 0, ad, sizeof ad);
	if (n < 0 || rma_remote_decode(ad, (size_t)n, &rem))
		abort();
	uint64_t key = rem->key;
	const uint8_t *b = rem->ent[0].blob; /* tcp: family, port, ipv4 */
	addr.sin_family = AF_INET;
	addr.sin_port = htons(rma__le16(b + 1));
	memcpy(&addr.sin_addr, b + 3, 4);
	rma_remote_free(rem);
	return key;
}

static void setup(void)
{
	struct rma_config cfg;
	rma_region *rw, *ro;

	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS; /* this thread drives it */
	rma_set_log(-1, NULL, NULL);             /* garbage is expected */
	if (rma_engine_create(&cfg, &e))
		abort();
	ro_mem = malloc(REGION);
	for (size_t i = 0; ro_mem && i < REGION; i++)
		ro_mem[i] = ro_copy[i] = (uint8_t)(i * 131 + 7);
	if (!ro_mem ||
	    rma_region_register(e, malloc(REGION), REGION, RMA_ACCESS_REMOTE_RW, &rw) ||
	    rma_region_register(e, ro_mem, REGION, RMA_ACCESS_REMOTE_READ, &ro))
		abort();
	key_rw = remote_of(rw);
	key_ro = remote_of(ro);
	rma__setup_key(NULL, proof_key); /* no secret */
}

/* Drive the engine and drain whatever it sends back; 0 on EOF. */
static int pump(int fd, int rounds)
{
	uint8_t sink[65536];
	for (int i = 0; i < rounds; i++) {
		rma_progress(e, 0);
		ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
		if (n == 0)
			return 0;
	}
	return 1;
}

/* The engine's tcp transport, to check that it retires what it served. */
static struct tcp_tr *tcp_of(void)
{
	return container_of(e->tr[0], struct tcp_tr, base);
}

/* Drive the engine until fd is readable or 10 s pass.  Waiting by the
 * clock, not by a count of rounds: on a loaded host loopback delivery can
 * be left to a kernel thread that gets the CPU only when we sleep. */
static int wait_readable(int fd)
{
	int64_t end = rma__now_ns() + 10 * 1000000000LL;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	while (rma__now_ns() < end) {
		rma_progress(e, 0);
		if (poll(&pfd, 1, 1) > 0)
			return 0;
	}
	return -ETIMEDOUT;
}

static int hello_recv(int fd, struct rma_tcp_hello *h)
{
	uint8_t b[RMA_TCP_HELLO_SIZE];
	size_t have = 0;
	while (have < sizeof b) {
		if (wait_readable(fd))
			return -ETIMEDOUT;
		ssize_t n = recv(fd, b + have, sizeof b - have, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n > 0)
			have += (size_t)n;
	}
	return rma__tcp_hello_decode(b, sizeof b, h);
}

static int handshake(int fd)
{
	struct rma_tcp_hello h = {.step = 1, .engine_id = 7, .nonce = 11};
	uint8_t b[RMA_TCP_HELLO_SIZE];
	int rc;

	rma__tcp_hello_encode(&h, b);
	if (send(fd, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b)
		return -errno;
	if ((rc = hello_recv(fd, &h)) || h.step != 2)
		return rc ? rc : -EPROTO;
	struct rma_tcp_hello c3 = {.step = 3};
	rma__setup_proof(proof_key, 'C', h.nonce, NULL, 0, c3.proof);
	rma__tcp_hello_encode(&c3, b);
	if (send(fd, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b)
		return -errno;
	if ((rc = hello_recv(fd, &h)) || h.step != 4 || h.status)
		return rc ? rc : -EPROTO;
	return 0;
}

static void stopped_serving(const char *what, int rc)
{
	fprintf(stderr, "fuzz_tcp_stream: %s: %s (connections served: %u)\n",
		what, strerror(-rc), tcp_of()->nserved);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready++)
		setup();
	if (size > (1u << 20))
		return 0;

	uint8_t *msg = malloc(size + 1);
	memcpy(msg, data, size);
	for (size_t i = 0; i + RMA_TCP_HDR_SIZE <= size; i += RMA_TCP_HDR_SIZE) {
		uint64_t k = rma__le64(msg + i + 16);
		if (k == 1 || k == 2)
			rma__put_le64(msg + i + 16, k == 1 ? key_rw : key_ro);
	}

	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1, rc;
	if (fd < 0)
		stopped_serving("socket", -errno);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	/* A signal (libfabric's providers, loaded with the library, use
	 * timers) may interrupt the connect; it then completes on its own. */
	if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) {
		int err = errno, so = 0;
		socklen_t sl = sizeof so;
		struct pollfd pf = {.fd = fd, .events = POLLOUT};
		if (err != EINTR || poll(&pf, 1, 10000) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) || so)
			stopped_serving("connect", -(err != EINTR ? err : so ? so : ETIMEDOUT));
	}
	if ((rc = handshake(fd)))
		stopped_serving("handshake", rc);
	size_t sent = 0;
	for (int i = 0; i < 100000 && sent < size; i++) {
		ssize_t n = send(fd, msg + sent, size - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN)
			break; /* the engine dropped us: fine */
		if (n > 0)
			sent += (size_t)n;
		if (!pump(fd, 1))
			break;
	}
	pump(fd, 50);
	close(fd);
	free(msg);
	/* The engine must notice the close and retire the connection; one
	 * it kept would count against its connection limit for good. */
	int64_t end = rma__now_ns() + 10 * 1000000000LL;
	while (tcp_of()->nserved && rma__now_ns() < end)
		rma_progress(e, 1);
	if (tcp_of()->nserved)
		stopped_serving("a closed connection was never retired", -EBUSY);
	if (memcmp(ro_mem, ro_copy, REGION)) {
		fprintf(stderr, "fuzz_tcp_stream: the read-only region changed\n");
		abort();
	}
	return 0;
}
