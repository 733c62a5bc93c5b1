/*
 * No lockout: a target flooded with connections still serves a real
 * initiator, fresh engines' first gets succeeding within a second (the
 * median of the rounds; 3 s at most, for sanitizer builds on a busy host).
 *   held    4,100 plain connections opened and held (nothing sent)
 *   reopen  the same, each reopened as soon as the target drops it
 *   hello   the same from 127.0.0.2, each connection sending a valid
 *           first hello (none is cheaper to evict than the initiator's):
 *           the per-address cap keeps the flood to its own slots
 *   authed  4,096 connections that prove the secret, then sit idle: 2,048
 *           each from 127.0.0.2 and 127.0.0.3 (the per-address cap set to
 *           2,048), then 16 more from 127.0.0.3, which must evict that
 *           address's own idlest, not the older ones of 127.0.0.2; the
 *           real initiator comes from 127.0.0.1 and must evict the
 *           idlest of all
 *   idle    an authenticated connection with nothing in flight is closed
 *           after the idle timeout (tcp option idle_ms); an engine whose
 *           connection was closed that way still gets through
 * argv[1] picks one.  Needs about 2 x 4,200 fds: raises RLIMIT_NOFILE, and
 * when the hard limit is too low runs authed with fewer connections (the
 * target's max_conns option lowered to match, printed) or skips.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "integ_common.h"
#include "transport/setup.h"

#define SECRET "lockout"
#define PLAIN 4100
#define AUTHED 4096
#define BATCH 16 /* concurrent handshakes: under the per-address cap */

static struct sockaddr_in taddr;
static uint64_t tid;
static int fds[PLAIN + 64];
static int nfds;
static atomic_int stop, reopened;

static int connect_from(const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (fd < 0)
		return -errno;
	if (src) {
		struct sockaddr_in sa = {.sin_family = AF_INET};
		inet_pton(AF_INET, src, &sa.sin_addr);
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&sa, sizeof sa)) {
			int rc = -errno;
			close(fd);
			return rc;
		}
	}
	if (connect(fd, (struct sockaddr *)&taddr, sizeof taddr)) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static bool say_hello; /* "hello" mode: each connection sends a hello */

static int plain_connect(void)
{
	int fd = connect_from(say_hello ? "127.0.0.2" : NULL);
	if (fd >= 0 && say_hello) {
		struct rma__setup_msg m = {.step = 1, .engine_id = 1, .nonce = 2};
		uint8_t b[RMA__SETUP_HDR_SIZE];
		rma__setup_msg_encode(&m, b);
		(void)!send(fd, b, sizeof b, MSG_NOSIGNAL);
	}
	return fd;
}

/* Fresh engine, first get: must succeed, within 3 s; returns its ms. */
static int64_t legit_get(struct target *t, int round)
{
	rma_engine *e = integ_engine(SECRET);
	char *buf = test_alloc(4096);
	rma_region *l = integ_region(e, buf, 4096);
	rma_remote *rem = integ_remote(t, "rw");
	int64_t t0 = test_now_ms();
	int64_t got = integ_op(e, RMA_OP_GET, l, rem, 0, 4096, 5000);
	int64_t ms = test_now_ms() - t0;
	printf("round %d: get %lld (%s) in %lld ms\n", round, (long long)got,
	       got < 0 ? rma_strerror((int)got) : "ok", (long long)ms);
	CHECKF(got == 4096, "round %d: get gave %lld (%s)", round, (long long)got,
	       got < 0 ? rma_strerror((int)got) : "ok");
	CHECKF(ms < 3000, "round %d: %lld ms", round, (long long)ms);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	test_free(buf, 4096);
	return ms;
}

static int cmp_ms(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* n rounds of legit_get; their median within a second. */
static void legit_gets(struct target *t, int n)
{
	int64_t ms[16];
	for (int i = 0; i < n; i++)
		ms[i] = legit_get(t, i);
	qsort(ms, (size_t)n, sizeof ms[0], cmp_ms);
	CHECKF(ms[n / 2] < 1000, "median first get %lld ms", (long long)ms[n / 2]);
}

static void open_plain(int n)
{
	for (nfds = 0; nfds < n; nfds++) {
		int fd = plain_connect();
		CHECKF(fd >= 0, "connection %d: %s", nfds, rma_strerror(fd));
		fds[nfds] = fd;
	}
}

static void close_all(void)
{
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	nfds = 0;
}

/* Reopen every connection the target drops, as fast as it drops them. */
static void *reopener(void *arg)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	(void)arg;
	for (int i = 0; i < nfds; i++) {
		struct epoll_event ev = {.events = EPOLLRDHUP, .data.u32 = (uint32_t)i};
		epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
	}
	while (!atomic_load(&stop)) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, 10);
		for (int k = 0; k < n; k++) {
			uint32_t i = evs[k].data.u32;
			close(fds[i]); /* also leaves the epoll set */
			fds[i] = plain_connect();
			if (fds[i] < 0)
				continue;
			struct epoll_event ev = {.events = EPOLLRDHUP, .data.u32 = i};
			epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
			atomic_fetch_add(&reopened, 1);
		}
	}
	close(ep);
	return NULL;
}

/* n more connections, from src, that complete the handshake with the
 * secret. */
static void open_authed(int n, const char *src)
{
	static struct rma__setup s[BATCH];
	uint8_t key[16];
	struct rma__setup_params p = {.expect_id = tid};

	rma__setup_key(SECRET, key);
	p.key = key;
	n += nfds;
	while (nfds < n) {
		int m = RMA_MIN(BATCH, n - nfds), left = m;
		int rc[BATCH];
		for (int i = 0; i < m; i++) {
			int fd = connect_from(src);
			CHECKF(fd >= 0, "connection %d: %s", nfds + i, rma_strerror(fd));
			CHECK_RC(rma__setup_init(&s[i], fd, false, &p), 0);
			rc[i] = -EINPROGRESS;
		}
		for (int round = 0; left && round < 10000; round++) {
			struct pollfd pf[BATCH];
			for (int i = 0; i < m; i++) {
				if (rc[i] == -EINPROGRESS && (rc[i] = rma__setup_run(&s[i])) != -EINPROGRESS) {
					CHECKF(rc[i] == 0, "handshake %d: %s", nfds + i,
					       rma_strerror(rc[i]));
					left--;
				}
				pf[i].fd = rc[i] == -EINPROGRESS ? s[i].fd : -1;
				pf[i].events = rma__setup_events(&s[i]) & EPOLLOUT ? POLLOUT : POLLIN;
			}
			if (left)
				poll(pf, (nfds_t)m, 100);
		}
		CHECKF(!left, "%d handshakes did not finish", left);
		for (int i = 0; i < m; i++)
			fds[nfds++] = s[i].fd;
	}
}

/* Connections [from, to) the target has closed. */
static int closed_in(int from, int to)
{
	int closed = 0;
	for (int i = from; i < to; i++) {
		char b;
		if (recv(fds[i], &b, 1, MSG_DONTWAIT | MSG_PEEK) == 0)
			closed++;
	}
	return closed;
}

static int count_closed(void)
{
	return closed_in(0, nfds);
}

static void target_addr(struct target *t)
{
	rma_remote *rem = integ_remote(t, "rw");
	const uint8_t *b = rem->ent[0].blob; /* tcp: family, port, ipv4 */
	taddr.sin_family = AF_INET;
	taddr.sin_port = htons(rma__le16(b + 1));
	memcpy(&taddr.sin_addr, b + 3, 4);
	tid = rem->engine_id;
	rma_remote_free(rem);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "held";
	int authed = AUTHED;
	struct rlimit rl;
	char spec[128] = "tcp";

	test_watchdog(110);
	/* Both processes hold one end of each connection, plus the target's
	 * engines and ours. */
	CHECK_RC(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rlim_t want = PLAIN + 512;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
		if (strcmp(mode, "authed") || rl.rlim_max < 1024)
			SKIP("RLIMIT_NOFILE hard limit %llu < %llu",
			     (unsigned long long)rl.rlim_max, (unsigned long long)want);
		authed = ((int)rl.rlim_max - 512) & ~1;
		printf("fds short: %d authenticated connections, target cap lowered to match\n",
		       authed);
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want
				      ? want : rl.rlim_max;
		CHECK_RC(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	if (!strcmp(mode, "idle"))
		snprintf(spec, sizeof spec, "tcp:idle_ms=300");
	if (!strcmp(mode, "authed"))
		snprintf(spec, sizeof spec, "tcp:max_conns=%d:max_addr_conns=%d",
			 authed, authed / 2);

	struct target_opts o = {.transports = spec, .secret = SECRET,
				.rw_size = MiB};
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;
	target_addr(&t);

	if (!strcmp(mode, "held")) {
		open_plain(PLAIN);
		legit_gets(&t, 5);
		printf("%d of %d plain connections dropped by the target\n",
		       count_closed(), nfds);
		close_all();
	} else if (!strcmp(mode, "reopen") || !strcmp(mode, "hello")) {
		say_hello = !strcmp(mode, "hello");
		if (say_hello && taddr.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			SKIP("the target is not on 127.0.0.1");
		pthread_t th;
		open_plain(PLAIN);
		CHECK_RC(pthread_create(&th, NULL, reopener, NULL), 0);
		test_sleep_ms(200);
		legit_gets(&t, 10);
		atomic_store(&stop, 1);
		pthread_join(th, NULL);
		printf("%d connections reopened as they were dropped\n",
		       atomic_load(&reopened));
		CHECK(atomic_load(&reopened) > 0);
		close_all();
	} else if (!strcmp(mode, "authed")) {
		if (taddr.sin_addr.s_addr != htonl(INADDR_LOOPBACK))
			SKIP("the target is not on 127.0.0.1");
		int half = authed / 2;
		int64_t t0 = test_now_ms();
		open_authed(half, "127.0.0.2");
		open_authed(half, "127.0.0.3");
		printf("%d authenticated connections in %lld ms, %d closed by the target\n",
		       nfds, (long long)(test_now_ms() - t0), count_closed());
		CHECK_EQ(count_closed(), 0);
		/* Past its own cap, an address loses its own idlest. */
		open_authed(BATCH, "127.0.0.3");
		/* evicted after the handshake's last message: wait for it */
		for (int64_t t1 = test_now_ms();
		     closed_in(half, 2 * half) < BATCH && test_now_ms() - t1 < 5000;)
			test_sleep_ms(10);
		test_sleep_ms(100); /* and for any eviction too many */
		CHECK_EQ(closed_in(0, half), 0);
		CHECK_EQ(closed_in(half, 2 * half), BATCH);
		CHECK_EQ(closed_in(2 * half, nfds), 0);
		legit_gets(&t, 5);
		/* Room was made by closing the idlest of all, one per new
		 * connection: the oldest, from 127.0.0.2. */
		int closed = closed_in(0, half);
		printf("%d idle connections evicted for the initiator\n", closed);
		CHECK(closed >= 1);
		CHECK_EQ(closed_in(half, 2 * half), BATCH);
		close_all();
	} else if (!strcmp(mode, "idle")) {
		open_authed(1, NULL);
		int64_t t0 = test_now_ms();
		struct pollfd pf = {.fd = fds[0], .events = POLLIN};
		CHECK_EQ(poll(&pf, 1, 3000), 1);
		int64_t ms = test_now_ms() - t0;
		printf("idle connection closed after %lld ms\n", (long long)ms);
		CHECK_EQ(count_closed(), 1);
		CHECKF(ms >= 250, "closed after %lld ms, idle timeout 300", (long long)ms);
		close_all();
		/* An engine whose connection went idle connects again. */
		rma_engine *e = integ_engine(SECRET);
		char *buf = test_alloc(4096);
		rma_region *l = integ_region(e, buf, 4096);
		rma_remote *rem = integ_remote(&t, "rw");
		CHECK_EQ(integ_op(e, RMA_OP_GET, l, rem, 0, 4096, 5000), 4096);
		test_sleep_ms(800);
		CHECK_EQ(integ_op(e, RMA_OP_GET, l, rem, 0, 4096, 5000), 4096);
		rma_remote_free(rem);
		rma_engine_destroy(e);
		test_free(buf, 4096);
	} else {
		FAIL("unknown mode %s", mode);
	}
	target_stop(&t);
	printf("ok\n");
	return 0;
}
