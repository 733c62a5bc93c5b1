/*
 * tcp authentication, each side against a raw peer, and the engine-id check:
 *   - a raw client with a wrong proof is told -EACCES and its connection is
 *     closed; a request sent after it is never answered;
 *   - a fake server that does not know the secret makes the initiator fail
 *     with exactly -EACCES, and receives nothing from it past its hello
 *     (no proof, no op);
 *   - a target restarted on the same address (same secret, new engine)
 *     gives exactly -ESTALE to a token of the old one.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"
#include "testlib.h"
#include "transport/setup.h"
#include "transport/tcp/wire.h"

#define SECRET "the right one"

static struct sockaddr_in addr_of(const rma_remote *rem)
{
	const uint8_t *b = rem->ent[0].blob; /* tcp: family, port, ipv4 */
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_port = htons(rma__le16(b + 1));
	memcpy(&sa.sin_addr, b + 3, 4);
	return sa;
}

/* Read exactly n bytes within 5 s; -1 on EOF or timeout. */
static int read_n(int fd, uint8_t *b, size_t n)
{
	size_t have = 0;
	int64_t end = test_now_ms() + 5000;
	while (have < n && test_now_ms() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t r = recv(fd, b + have, n - have, 0);
		if (r <= 0)
			return -1;
		have += (size_t)r;
	}
	return have == n ? 0 : -1;
}

/* Wait for EOF (or reset) on fd: 0, or -1 if it stays open 5 s. */
static int wait_closed(int fd)
{
	uint8_t b[256];
	int64_t end = test_now_ms() + 5000;
	while (test_now_ms() < end) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 100) <= 0)
			continue;
		if (recv(fd, b, sizeof b, 0) <= 0)
			return 0;
	}
	return -1;
}

static void raw_client_wrong_proof(void)
{
	rma_engine *e = test_tcp_engine((struct rma_config){.secret = SECRET});
	static char mem[4096];
	rma_region *r;
	uint8_t b[RMA_TCP_HELLO_SIZE], key[16];
	struct rma_tcp_hello h;

	CHECK_RC(rma_region_register(e, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = test_remote_of(r);
	struct sockaddr_in sa = addr_of(rem);
	for (int right = 0; right < 2; right++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		CHECK_RC(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
		h = (struct rma_tcp_hello){.step = 1, .engine_id = 9, .nonce = 1234};
		rma__tcp_hello_encode(&h, b);
		CHECK_EQ(send(fd, b, sizeof b, 0), (ssize_t)sizeof b);
		CHECK_RC(read_n(fd, b, sizeof b), 0);
		CHECK_RC(rma__tcp_hello_decode(b, sizeof b, &h), 0);
		CHECK_EQ(h.step, 2);
		CHECK_EQ_U64(h.engine_id, rem->engine_id);
		struct rma_tcp_hello c3 = {.step = 3};
		rma__setup_key(right ? SECRET : "a wrong one", key);
		rma__setup_proof(key, 'C', h.nonce, NULL, 0, c3.proof);
		rma__tcp_hello_encode(&c3, b);
		CHECK_EQ(send(fd, b, sizeof b, 0), (ssize_t)sizeof b);
		CHECK_RC(read_n(fd, b, sizeof b), 0);
		CHECK_RC(rma__tcp_hello_decode(b, sizeof b, &h), 0);
		CHECK_EQ(h.step, 4);
		CHECKF(h.status == (right ? 0 : -EACCES), "%s proof: status %d",
		       right ? "right" : "wrong", h.status);
		/* A request after it: answered only on the right proof. */
		struct rma_tcp_hdr q = {.type = RMA_TCP_GET, .id = 1,
					.key = rem->key, .addr = 0, .len = 8};
		uint8_t qb[RMA_TCP_HDR_SIZE + 8];
		rma__tcp_hdr_encode(&q, qb);
		(void)!send(fd, qb, RMA_TCP_HDR_SIZE, MSG_NOSIGNAL);
		if (right) {
			CHECK_RC(read_n(fd, qb, RMA_TCP_HDR_SIZE + 8), 0);
			CHECK_EQ(qb[0], RMA_TCP_GET_RESP);
		} else {
			CHECKF(wait_closed(fd) == 0, "the target kept a refused connection");
		}
		close(fd);
	}
	rma_remote_free(rem);
	rma_region_release(r);
	rma_engine_destroy(e);
}

/* A listener posing as the target of rem without the secret. */
static void fake_server(void)
{
	rma_engine *t = test_tcp_engine((struct rma_config){.secret = SECRET});
	static char mem[4096], local[4096];
	rma_region *r, *l;
	CHECK_RC(rma_region_register(t, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = test_remote_of(r);
	struct sockaddr_in sa = addr_of(rem);
	rma_region_release(r);
	rma_engine_destroy(t); /* its address is ours now */

	int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	CHECK_RC(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	CHECK_RC(listen(lfd, 16), 0);

	rma_engine *e = test_tcp_engine((struct rma_config){.secret = SECRET,
							    .stripes = 1});
	CHECK_RC(rma_region_register(e, local, sizeof local, 0, &l), 0);
	struct rma_op op = {.kind = RMA_OP_PUT, .local = l, .remote = rem, .len = 64};
	CHECK_RC(rma_post(e, &op, 1, 5000, NULL), 1);

	int fd = accept(lfd, NULL, NULL);
	CHECK(fd >= 0);
	uint8_t b[RMA_TCP_HELLO_SIZE], key[16];
	struct rma_tcp_hello h;
	CHECK_RC(read_n(fd, b, sizeof b), 0);
	CHECK_RC(rma__tcp_hello_decode(b, sizeof b, &h), 0);
	CHECK_EQ(h.step, 1);
	/* The right engine id and size, a proof with the wrong key. */
	struct rma_tcp_hello s2 = {.step = 2, .engine_id = rem->engine_id,
				   .max_msg = 1 << 20, .nonce = 77};
	rma__setup_key("not the secret", key);
	rma__setup_proof(key, 'S', h.nonce, NULL, 0, s2.proof);
	rma__tcp_hello_encode(&s2, b);
	CHECK_EQ(send(fd, b, sizeof b, 0), (ssize_t)sizeof b);

	struct rma_completion c;
	int64_t end = test_now_ms() + 5000;
	int n = 0;
	while (!n && test_now_ms() < end)
		if (!(n = rma_poll(e, &c, 1)))
			test_sleep_ms(10);
	CHECK_EQ(n, 1);
	CHECKF(c.result == -EACCES, "initiator: %lld (%s), expected -EACCES",
	       (long long)c.result, rma_strerror((int)c.result));
	/* Nothing came from the initiator after its hello: no proof of its
	 * own, no op header, no data. */
	ssize_t got = recv(fd, b, sizeof b, MSG_DONTWAIT);
	CHECKF(got <= 0, "the initiator sent %zd bytes to a server without the secret",
	       got);
	close(fd);
	close(lfd);
	rma_remote_free(rem);
	rma_region_release(l);
	rma_engine_destroy(e);
}

static void restarted(void)
{
	static char mem[4096], local[4096];
	rma_region *r, *l;
	char listen[64];
	int port = test_free_port();

	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	rma_engine *t = test_tcp_engine((struct rma_config){.secret = SECRET,
							    .listen = listen});
	CHECK_RC(rma_region_register(t, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = test_remote_of(r);
	rma_region_release(r);
	rma_engine_destroy(t);
	/* A new engine on the same address, same secret, same region. */
	t = test_tcp_engine((struct rma_config){.secret = SECRET, .listen = listen});
	CHECK_RC(rma_region_register(t, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);

	rma_engine *e = test_tcp_engine((struct rma_config){.secret = SECRET});
	CHECK_RC(rma_region_register(e, local, sizeof local, 0, &l), 0);
	for (int kind = RMA_OP_PUT; kind <= RMA_OP_GET; kind++) {
		struct rma_op op = {.kind = (unsigned)kind, .local = l, .remote = rem,
				    .len = 64};
		int64_t res = 0;
		rma_submit(e, &op, 1, 5000, &res, NULL, 0);
		CHECKF(res == -ESTALE, "op %d: %lld (%s), expected -ESTALE", kind,
		       (long long)res, rma_strerror((int)res));
	}
	rma_remote_free(rem);
	rma_region_release(l);
	rma_region_release(r);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
}

int main(void)
{
	test_watchdog(60);
	raw_client_wrong_proof();
	fake_server();
	restarted();
	printf("ok\n");
	return 0;
}
