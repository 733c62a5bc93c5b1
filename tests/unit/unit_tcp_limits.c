/*
 * The target's buffer and timer limits, looked at from inside the engine:
 *   - a connection still in the handshake keeps the kernel's default
 *     buffers; authenticated ones get large buffers up to a total bound
 *     (only where the process may force them: root), and closing them gives
 *     the bound back;
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

int main(void)
{
	static char mem[4096];
	static struct rma__setup s[NAUTH];
	rma_region *r;

	test_watchdog(60);
	rma_engine *t = test_tcp_engine((struct rma_config){.secret = SECRET});
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
			CHECKF(!c->bigbuf && rcvbuf(c->w.fd) < SOCKBUF,
			       "a connection in the handshake has %d bytes of buffer",
			       rcvbuf(c->w.fd));
			continue;
		}
		authed++;
		if (c->bigbuf) {
			big++;
			CHECK(rcvbuf(c->w.fd) >= SOCKBUF);
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
	CHECK_EQ_U64(total, (uint64_t)big * 2 * SOCKBUF);
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
