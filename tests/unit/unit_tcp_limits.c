/*
 * The target's buffer and timer limits, looked at from inside the engine:
 *   - a connection still in the handshake keeps the kernel's default
 *     buffers; authenticated ones get large buffers (option sockbuf, 1 MiB
 *     by default, 0 for none) up to a total bound (only where the process
 *     may force them: root), and closing them gives the bound back;
 *   - a connection that never sends its hello is closed by the handshake
 *     timer (3 s, checked every 100 ms).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"
#include "testlib.h"
#include "tcp_raw.h"
#include "transport/tcp/tcp.h"

#define SECRET "limits"
#define NAUTH 24

static int rcvbuf(int fd)
{
	int v = 0;
	socklen_t len = sizeof v;
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len);
	return v;
}

/* One authenticated connection into an engine made with `spec`: the
 * buffer each way it was given (0: none forced), as the engine counts it. */
static uint64_t one_authed(const char *spec)
{
	static char mem[64];
	struct rma__setup s;
	rma_region *r;

	rma_engine *t = test_tcp_engine((struct rma_config){.secret = SECRET,
							    .transports = spec});
	struct tcp_tr *tt = container_of(t->tr[0], struct tcp_tr, base);
	CHECK_RC(rma_region_register(t, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = test_remote_of(r);
	tcp_raw_authed(rem, SECRET, &s);
	/* The target ends its side of the handshake after ours: wait for it. */
	struct conn *c;
	for (int64_t end = test_now_ms() + 5000;; test_sleep_ms(5)) {
		pthread_mutex_lock(&t->mu);
		c = tt->served;
		if ((c && c->hs != HS_SETUP) || test_now_ms() > end)
			break;
		pthread_mutex_unlock(&t->mu);
	}
	CHECK(c && c->hs != HS_SETUP && !c->next);
	uint64_t each = tt->bigbuf_total / 2;
	CHECK_EQ(c->bigbuf, each != 0);
	if (c->bigbuf)
		CHECK(rcvbuf(c->w.fd) >= tt->sockbuf);
	pthread_mutex_unlock(&t->mu);
	close(s.fd);
	rma_remote_free(rem);
	rma_region_release(r);
	rma_engine_destroy(t);
	return each;
}

int main(void)
{
	static char mem[4096];
	static struct rma__setup s[NAUTH];
	rma_region *r;

	test_watchdog(60);
	if (geteuid() == 0) { /* may force buffers */
		CHECK_EQ_U64(one_authed("tcp"), SOCKBUF);
		CHECK_EQ_U64(one_authed("tcp:sockbuf=65536"), 65536);
	}
	CHECK_EQ_U64(one_authed("tcp:sockbuf=0"), 0);
	if (geteuid() == 0) { /* binary units, as the command line's sizes */
		CHECK_EQ_U64(one_authed("tcp:sockbuf=2M"), 2u << 20);
		CHECK_EQ_U64(one_authed("tcp:sockbuf=64KiB"), 65536);
		CHECK_EQ_U64(one_authed("tcp:sockbuf=64m"), 64u << 20);
	}
	rma_engine *bad;
	static const char *const bad_specs[] = {"tcp:sockbuf=65535",
		"tcp:sockbuf=67108865", "tcp:sockbuf=1MB", "tcp:sockbuf=65M",
		"tcp:sockbuf=63K", "tcp:sockbuf=1Q", "tcp:sockbuf=M",
		"tcp:sockbuf=-1", "tcp:sockbuf=18014398509481984K"};
	for (size_t i = 0; i < sizeof bad_specs / sizeof *bad_specs; i++)
		CHECK_RC(rma_engine_create(&(struct rma_config){.size = sizeof(struct rma_config),
			 .transports = bad_specs[i]}, &bad), -EINVAL);

	/* 8 MiB each: NAUTH connections reach the bound. */
	rma_engine *t = test_tcp_engine((struct rma_config){.secret = SECRET,
		.transports = "tcp:sockbuf=8388608"});
	struct tcp_tr *tt = container_of(t->tr[0], struct tcp_tr, base);
	CHECK_RC(rma_region_register(t, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = test_remote_of(r);
	struct sockaddr_in sa = tcp_raw_addr(rem);

	int64_t t0 = test_now_ms();
	int plain = socket(AF_INET, SOCK_STREAM, 0);
	CHECK_RC(connect(plain, (struct sockaddr *)&sa, sizeof sa), 0);

	for (int i = 0; i < NAUTH; i++)
		tcp_raw_authed(rem, SECRET, &s[i]);
	test_sleep_ms(100);

	pthread_mutex_lock(&t->mu);
	unsigned big = 0, authed = 0, waiting = 0;
	for (struct conn *c = tt->served; c; c = c->next) {
		if (c->hs == HS_SETUP) {
			waiting++;
			CHECKF(!c->bigbuf && rcvbuf(c->w.fd) < tt->sockbuf,
			       "a connection in the handshake has %d bytes of buffer",
			       rcvbuf(c->w.fd));
			continue;
		}
		authed++;
		if (c->bigbuf) {
			big++;
			CHECK(rcvbuf(c->w.fd) >= tt->sockbuf);
		}
	}
	uint64_t total = tt->bigbuf_total;
	pthread_mutex_unlock(&t->mu);
	printf("%u authenticated, %u in the handshake, %u with large buffers "
	       "(%llu MiB of %llu)\n", authed, waiting, big,
	       (unsigned long long)(total >> 20),
	       (unsigned long long)(SOCKBUF_TOTAL >> 20));
	CHECK_EQ(authed, NAUTH);
	CHECK_EQ(waiting, 1);
	CHECK_EQ_U64(total, (uint64_t)big * 2 * tt->sockbuf);
	CHECK(total <= SOCKBUF_TOTAL);
	if (geteuid() == 0) /* may force buffers: the bound is what stops it */
		CHECK_EQ_U64(total, SOCKBUF_TOTAL);

	for (int i = 0; i < NAUTH; i++)
		close(s[i].fd);
	int64_t end = test_now_ms() + 3000;
	for (;;) {
		pthread_mutex_lock(&t->mu);
		total = tt->bigbuf_total;
		pthread_mutex_unlock(&t->mu);
		if (!total || test_now_ms() > end)
			break;
		test_sleep_ms(10);
	}
	CHECKF(total == 0, "%llu bytes still counted after every connection closed",
	       (unsigned long long)total);

	/* The silent connection goes when its handshake time is up. */
	struct pollfd pf = {.fd = plain, .events = POLLIN};
	CHECK_EQ(poll(&pf, 1, 6000), 1);
	char b;
	CHECK(recv(plain, &b, 1, 0) <= 0);
	int64_t ms = test_now_ms() - t0;
	printf("a silent connection closed after %lld ms\n", (long long)ms);
	CHECKF(ms >= 2900 && ms < 4500, "closed after %lld ms", (long long)ms);
	close(plain);

	rma_remote_free(rem);
	rma_region_release(r);
	rma_engine_destroy(t);
	printf("ok\n");
	return 0;
}
