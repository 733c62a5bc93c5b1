/*
 * pingpong.c - TCP round-trip baseline for `rma bench` latency: two
 * processes on loopback bounce a small message over one connection with
 * TCP_NODELAY, both busy-polling non-blocking sockets (no sleeping in the
 * kernel, like rma's spinning progress), and report the RTT percentiles.
 *
 *   cc -O2 -o pingpong bench/pingpong.c
 *   ./pingpong [-s BYTES] [-n ITERS] [-c CONNS]
 *                          (defaults: 8 bytes, 100000 iters, 1 connection)
 *
 * With -c N the client sends each message on the next of N connections in
 * turn, and the server finds the one with a message by busy-polling epoll
 * (timeout 0), as any event loop serving many peers must: what a round
 * trip costs the system when each comes from another peer, the reference
 * for `rma bench --peers N`'s one-at-a-time latency.
 *
 * Output lines: "size: N", "iters: N", "rtt_us_p50: X", "rtt_us_p99: X".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 1000
#define MAX_SIZE 4096
#define MAX_CONNS 1024

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Spin until all len bytes are sent (or received): never sleep. */
static void spin_io(int fd, char *buf, size_t len, int sending)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL)
				    : recv(fd, buf + done, len - done, 0);

		if (n > 0)
			done += (size_t)n;
		else if (n == 0)
			exit(0); /* peer closed: the run is over */
		else if (errno != EAGAIN && errno != EINTR)
			die(sending ? "send" : "recv");
	}
}

static void tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void serve(int lfd, size_t size, int conns)
{
	char buf[MAX_SIZE];
	struct epoll_event ev[64];
	int fd = -1, ep = conns > 1 ? epoll_create1(0) : -1;

	if (conns > 1 && ep < 0)
		die("epoll_create1");
	for (int i = 0; i < conns; i++) {
		struct epoll_event one = { .events = EPOLLIN };

		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		tune(fd);
		one.data.fd = fd;
		if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &one) < 0)
			die("epoll_ctl");
	}
	for (;;) {
		/* One peer: just its socket, no epoll. */
		int n = ep < 0 ? 1 : epoll_wait(ep, ev, 64, 0);

		for (int i = 0; i < n; i++) {
			int s = ep < 0 ? fd : ev[i].data.fd;

			spin_io(s, buf, size, 0);
			spin_io(s, buf, size, 1);
		}
	}
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static double pct_us(const uint64_t *s, size_t n, unsigned pct)
{
	size_t rank = (n * pct + 99) / 100;

	return (double)s[rank ? rank - 1 : 0] / 1e3;
}

static void client(struct sockaddr_in *addr, size_t size, size_t iters, int conns)
{
	char buf[MAX_SIZE];
	uint64_t *rtt = calloc(iters, sizeof(*rtt));
	int fds[MAX_CONNS];
	size_t i;

	if (!rtt)
		die("calloc");
	for (int c = 0; c < conns; c++) {
		fds[c] = socket(AF_INET, SOCK_STREAM, 0);
		if (fds[c] < 0 || connect(fds[c], (struct sockaddr *)addr, sizeof(*addr)) < 0)
			die("connect");
		tune(fds[c]);
	}
	memset(buf, 0x5a, size);
	for (i = 0; i < WARMUP + iters; i++) {
		int fd = fds[i % (size_t)conns];
		uint64_t t0 = now_ns();

		spin_io(fd, buf, size, 1);
		spin_io(fd, buf, size, 0);
		if (i >= WARMUP)
			rtt[i - WARMUP] = now_ns() - t0;
	}
	for (int c = 0; c < conns; c++)
		close(fds[c]);
	qsort(rtt, iters, sizeof(*rtt), cmp_u64);
	printf("size: %zu\niters: %zu\nconns: %d\nrtt_us_p50: %.2f\nrtt_us_p99: %.2f\n",
	       size, iters, conns, pct_us(rtt, iters, 50), pct_us(rtt, iters, 99));
	free(rtt);
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(addr);
	size_t size = 8, iters = 100000;
	int c, lfd, status, conns = 1;
	pid_t pid;

	while ((c = getopt(argc, argv, "s:n:c:")) != -1) {
		if (c == 's')
			size = strtoul(optarg, NULL, 0);
		else if (c == 'n')
			iters = strtoul(optarg, NULL, 0);
		else if (c == 'c')
			conns = atoi(optarg);
		else
			return 2;
	}
	if (size == 0 || size > MAX_SIZE || iters == 0 || conns < 1 || conns > MAX_CONNS) {
		fprintf(stderr, "pingpong: size 1..%d, iters > 0, conns 1..%d\n",
			MAX_SIZE, MAX_CONNS);
		return 2;
	}
	/* Listen before forking so the client knows the port. */
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(lfd, conns) < 0 || getsockname(lfd, (struct sockaddr *)&addr, &alen) < 0)
		die("listen");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0)
		serve(lfd, size, conns);
	close(lfd);
	client(&addr, size, iters, conns);
	waitpid(pid, &status, 0);
	return 0;
}
