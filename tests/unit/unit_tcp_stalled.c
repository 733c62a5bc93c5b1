/*
 * Peers that authenticate and then stop halfway through a request (39 bytes
 * of a 40-byte header) must not hold the target's authenticated slots:
 *   - the idle timeout closes them (no byte in or out for idle_ms), as it
 *     closes connections with nothing in flight;
 *   - with no idle timeout, past the handshake time they may be evicted
 *     like idle ones, so a fresh initiator gets in.
 * Each round fills max_conns with such peers, then a fresh engine's get
 * must succeed.
 */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"
#include "tcp_raw.h"
#include "testlib.h"

#define SECRET "stalled"
#define NCONN 8

/* n connections that prove the secret, then send 39 bytes and stop. */
static void open_stalled(const rma_remote *rem, int *fds, int n)
{
	static struct rma__setup s[NCONN];
	uint8_t part[39] = { 0 };

	for (int i = 0; i < n; i++) {
		fds[i] = tcp_raw_authed(rem, SECRET, &s[i]);
		CHECK(send(fds[i], part, sizeof part, MSG_NOSIGNAL) == sizeof part);
	}
}

/* How many of fds the target has closed (end of stream or reset). */
static int closed(const int *fds, int n)
{
	int k = 0;
	for (int i = 0; i < n; i++) {
		char b;
		ssize_t r = recv(fds[i], &b, 1, MSG_DONTWAIT);
		k += r == 0 || (r < 0 && errno != EAGAIN);
	}
	return k;
}

static void round_trip(const char *tspec, int wait_ms, const char *what)
{
	static char mem[4096], buf[4096];
	int fds[NCONN];
	rma_region *r, *l;

	rma_engine *t = test_tcp_engine((struct rma_config){
		.secret = SECRET, .transports = tspec});
	CHECK_RC(rma_region_register(t, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = test_remote_of(r);
	open_stalled(rem, fds, NCONN);
	test_sleep_ms(wait_ms);

	rma_engine *i = test_tcp_engine((struct rma_config){.secret = SECRET});
	CHECK_RC(rma_region_register(i, buf, sizeof buf, 0, &l), 0);
	struct rma_op op = {.kind = RMA_OP_GET, .local = l, .remote = rem,
			    .len = sizeof buf};
	int64_t res = 0;
	int rc = rma_submit(i, &op, 1, 5000, &res, NULL, 0);
	printf("%s: a fresh get: %d, %lld; %d of %d stalled peers closed\n",
	       what, rc, (long long)res, closed(fds, NCONN), NCONN);
	CHECKF(res == (int64_t)sizeof buf, "%s: a fresh get failed: %s", what,
	       rma_strerror((int)res));

	for (int k = 0; k < NCONN; k++)
		close(fds[k]);
	rma_region_release(l);
	rma_engine_destroy(i);
	rma_remote_free(rem);
	rma_region_release(r);
	rma_engine_destroy(t);
}

int main(void)
{
	test_watchdog(60);
	/* The idle timeout (400 ms) has closed them, well before the
	 * handshake time (3 s) would make them evictable. */
	round_trip("tcp:max_conns=8:idle_ms=400", 1000, "idle timeout");
	/* No idle timeout: past the handshake time (300 ms) a stalled peer
	 * is evicted for the fresh one. */
	round_trip("tcp:max_conns=8:idle_ms=0:handshake_ms=300", 600, "eviction");
	printf("ok\n");
	return 0;
}
