/* Garbage on the listener, a half-sent handshake, a bad handshake and 300
 * half-open connections: while they are open, another initiator's put and
 * get still succeed; the garbage connection is closed by the target. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "integ_common.h"

#define HALF_OPEN 300

static int dial(int port, int nonblock)
{
	int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0);
	int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
	CHECKF(rc == 0 || (nonblock && errno == EINPROGRESS), "connect: %s",
	       strerror(errno));
	return fd;
}

static void send_all(int fd, const void *b, size_t n)
{
	CHECK(write(fd, b, n) == (ssize_t)n);
}

/* Closed by the peer within timeout_ms? */
static int closed_by_peer(int fd, int timeout_ms)
{
	int64_t end = test_now_ms() + timeout_ms;
	char buf[4096];
	while (test_now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) > 0) {
			ssize_t r = read(fd, buf, sizeof buf);
			if (r == 0 || (r < 0 && errno == ECONNRESET))
				return 1;
		}
	}
	return 0;
}

static void putget(rma_engine *e, rma_region *l, char *buf, rma_remote *rem,
		   struct target *t, uint64_t seed)
{
	test_fill(buf, MiB, seed);
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, rem, 4096, MiB, 10000), MiB);
	CHECK_EQ_U64(target_crc(t, "rw", 4096, MiB), rma_crc32c(0, buf, MiB));
	memset(buf, 0, MiB);
	CHECK_RC(integ_op(e, RMA_OP_GET, l, rem, 4096, MiB, 10000), MiB);
	CHECK_EQ(test_check_fill(buf, MiB, seed), -1);
}

int main(void)
{
	test_watchdog(100);
	uint64_t seed = test_seed("integ_listener_garbage");
	int port = test_free_port();
	char listen[64];
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	struct target_opts o = { .transports = "tcp", .listen = listen,
				 .rw_size = 4 * MiB };
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;

	/* Garbage. */
	int garbage = dial(port, 0);
	uint8_t junk[4096];
	for (size_t i = 0; i < sizeof junk; i++)
		junk[i] = (uint8_t)test_rand(&seed);
	send_all(garbage, junk, sizeof junk);
	/* Half a handshake: the magic and version, then silence. */
	int half = dial(port, 0);
	static const uint8_t start[6] = { 'R', 'M', 'A', '1', 1, 0 };
	send_all(half, start, sizeof start);
	/* A whole handshake-sized message with a wrong magic. */
	int badhello = dial(port, 0);
	uint8_t hello[64] = { 'X', 'M', 'A', '1', 1, 0, 1 };
	send_all(badhello, hello, sizeof hello);
	/* Connections that never send a byte. */
	int open_fds[HALF_OPEN];
	for (int i = 0; i < HALF_OPEN; i++)
		open_fds[i] = dial(port, 1);

	rma_engine *e = integ_engine(NULL);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	rma_remote *rem = integ_remote(&t, "rw");
	int64_t t0 = test_now_ms();
	putget(e, l, buf, rem, &t, 101);
	printf("put+get with %d idle connections open: %lld ms\n", HALF_OPEN,
	       (long long)(test_now_ms() - t0));

	CHECKF(closed_by_peer(garbage, 5000),
	       "the target kept a connection that sent garbage open");
	CHECKF(closed_by_peer(badhello, 5000),
	       "the target kept a connection with a bad handshake open");

	/* A second initiator engine, also served. */
	rma_engine *e2 = integ_engine(NULL);
	char *buf2 = test_alloc(MiB);
	rma_region *l2 = integ_region(e2, buf2, MiB);
	putget(e2, l2, buf2, rem, &t, 202);
	rma_engine_destroy(e2);

	for (int i = 0; i < HALF_OPEN; i++)
		close(open_fds[i]);
	close(half);
	close(garbage);
	close(badhello);
	putget(e, l, buf, rem, &t, 303);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	printf("ok\n");
	return 0;
}
