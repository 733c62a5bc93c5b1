/* Routing with reachability and fallback.  Both engines run a MEMORY-level
 * transport (the fake) and tcp; the owner advertises both.
 *  - The fake's connect fails inside connect (rma__peer_failed): every op
 *    still arrives, over tcp, and the fallback is logged once per peer.
 *  - The fake's connect returns an error (no peer at all): the same.
 *  - The fake finds the owner unreachable: tcp at once, nothing logged.
 * rma_peer_route says which transport carries the peer, and why. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int fallbacks;

static void on_log(void *arg, int level, const char *msg)
{
	pthread_mutex_lock(&log_mu);
	if (strstr(msg, "falling back to tcp"))
		fallbacks++;
	pthread_mutex_unlock(&log_mu);
}

static int logged(void)
{
	pthread_mutex_lock(&log_mu);
	int n = fallbacks;
	fallbacks = 0;
	pthread_mutex_unlock(&log_mu);
	return n;
}

static rma_engine *engine(void)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "fake,tcp";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static void round_trip(rma_engine *init, rma_region *lr, char *lbuf,
		       const rma_remote *rem, char *tbuf, uint64_t seed)
{
	for (int i = 0; i < 3; i++) {
		test_fill(lbuf, 4096, seed + (uint64_t)i);
		CHECK_RC(rma_write_from(init, lr, rem, 5000), 4096);
		CHECK_EQ(test_check_fill(tbuf, 4096, seed + (uint64_t)i), -1);
	}
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_set_log(RMA_LOG_INFO, on_log, NULL);
	fake_reset(0);

	rma_engine *owner = engine(), *init = engine();
	char *tbuf = test_alloc(4096), *lbuf = test_alloc(4096);
	rma_region *tr, *lr;
	struct rma_route_info ri;
	CHECK_RC(rma_region_register(owner, tbuf, 4096, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(init, lbuf, 4096, 0, &lr), 0);
	rma_remote *rem = test_remote_of(tr);

	/* The route before any connection: the fake, the higher level. */
	CHECK_RC(rma_peer_route(init, rem, &ri), 0);
	CHECK(!strcmp(ri.transport, "fake"));
	CHECK_EQ(ri.level, RMA_LEVEL_MEMORY);
	CHECK_EQ(ri.state, RMA_PEER_NONE);

	/* 1. Failed inside connect. */
	fake.fail_connect = -EPERM;
	round_trip(init, lr, lbuf, rem, tbuf, 100);
	CHECK_EQ(logged(), 1);
	CHECK_EQ(fake.connects, 1); /* passed over afterwards, not retried */
	CHECK_RC(rma_peer_route(init, rem, &ri), 0);
	CHECK(!strcmp(ri.transport, "tcp"));
	CHECK_EQ(ri.state, RMA_PEER_READY);
	CHECKF(strstr(ri.why, "fake failed") != NULL, "why: %s", ri.why);
	/* Explicit connects fall back too.  A removed peer is a new one:
	 * its fallback is logged once more, then not again. */
	CHECK_RC(rma_peer_remove(init, rem, 1000), 0);
	CHECK_RC(rma_peer_connect(init, rem, 5000), 0);
	round_trip(init, lr, lbuf, rem, tbuf, 200);
	CHECK_EQ(logged(), 1);
	CHECK_RC(rma_peer_remove(init, rem, 1000), 0);

	/* 2. connect() itself refuses. */
	fake.fail_connect = 0;
	fake.connect_err = -ENETUNREACH;
	round_trip(init, lr, lbuf, rem, tbuf, 300);
	CHECK_RC(rma_peer_route(init, rem, &ri), 0);
	CHECK(!strcmp(ri.transport, "fake")); /* nothing remembers the refusal */
	CHECK_RC(rma_peer_remove(init, rem, 1000), 0);

	/* 3. Unreachable: tcp, and no fallback to speak of. */
	fake.connect_err = 0;
	fake.unreachable = 1;
	logged();
	unsigned connects = fake.connects;
	round_trip(init, lr, lbuf, rem, tbuf, 400);
	CHECK_EQ(fake.connects, connects);
	CHECK_EQ(logged(), 0);
	CHECK_RC(rma_peer_route(init, rem, &ri), 0);
	CHECK(!strcmp(ri.transport, "tcp"));
	CHECK_EQ(ri.level, RMA_LEVEL_TCP);

	/* 4. A remote nothing here can reach. */
	fake.unreachable = 0;
	rma_engine *fake_only;
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &fake_only), 0);
	rma_region *fr;
	CHECK_RC(rma_region_register(fake_only, tbuf, 4096, RMA_ACCESS_REMOTE_RW, &fr), 0);
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	rma_remote *tcp_rem;
	int n = rma_advertise(fr, 0, 0, 0, ad, sizeof ad);
	CHECK_OK(n);
	CHECK_RC(rma_remote_decode(ad, (size_t)n, &tcp_rem), 0);
	rma_engine *memory_only;
	cfg.transports = "fake";
	CHECK_RC(rma_engine_create(&cfg, &memory_only), 0);
	memset(&ri, 0x5A, sizeof ri);
	CHECK_RC(rma_peer_route(memory_only, tcp_rem, &ri), -EHOSTUNREACH);
	CHECK_EQ(ri.level, 0x5A5A5A5A); /* not written on failure */
	rma_remote_free(tcp_rem);
	rma_engine_destroy(memory_only);
	rma_engine_destroy(fake_only);

	rma_remote_free(rem);
	rma_engine_destroy(init);
	rma_engine_destroy(owner);
	rma_set_log(RMA_LOG_WARN, NULL, NULL);
	return 0;
}
