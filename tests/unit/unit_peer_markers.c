/* A failed peer stays as a marker (routing passes over it, rma_peer_route
 * reports its error), and goes once it has no ops left and RMA__MARKER_NS
 * have passed since its retry time, swept when a later peer is added: a
 * long-lived initiator does not keep one for every target that ever died
 * (engines are never reborn under their id).  A fresh marker stays, and so
 * does a failed peer whose op still waits for its chunk's report. */
#include <errno.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define NT 6

static int route_state(rma_engine *e, const rma_remote *r, int *err)
{
	struct rma_route_info info;
	CHECK_RC(rma_peer_route(e, r, &info), 0);
	*err = info.error;
	return info.state;
}

/* A retry time old enough for the marker to go. */
static int64_t long_ago(void)
{
	return rma__now_ns() - RMA__MARKER_NS - 1;
}

static void set_retry_at(rma_engine *e, struct rma__peer *p, int64_t t)
{
	pthread_mutex_lock(&e->mu);
	p->retry_at = t;
	pthread_mutex_unlock(&e->mu);
}

/* The next peer added sweeps (else at most once per second); with age,
 * every marker is old enough to go. */
static void sweep_due(rma_engine *e, bool age)
{
	int64_t old = long_ago();
	pthread_mutex_lock(&e->mu);
	for (struct rma__peer *p = e->peers; age && p; p = p->next)
		if (p->state == RMA__PEER_FAILED)
			p->retry_at = old;
	e->sweep_at = 0;
	pthread_mutex_unlock(&e->mu);
}

static int put(rma_engine *e, rma_region *l, rma_remote *r, int timeout_ms)
{
	struct rma_op op = { .kind = RMA_OP_PUT, .local = l, .remote = r, .len = 64 };
	return rma_post(e, &op, 1, timeout_ms, NULL);
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);
	rma_engine *e = fake_engine(64), *tg[NT];
	char *lbuf = test_alloc(4096), *rbuf[NT];
	rma_region *lr, *rr[NT];
	rma_remote *rem[NT];
	struct rma_completion c;
	int err;

	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	for (int i = 0; i < NT; i++) {
		tg[i] = fake_engine(64);
		rbuf[i] = test_alloc(4096);
		CHECK_RC(rma_region_register(tg[i], rbuf[i], 4096, RMA_ACCESS_REMOTE_RW,
					     &rr[i]), 0);
		rem[i] = fake_remote(rr[i], 0, 0);
	}

	/* A connect that fails leaves a marker. */
	fake.fail_connect = -EHOSTDOWN;
	CHECK_RC(put(e, lr, rem[0], 2000), -EHOSTDOWN);
	fake.fail_connect = 0;
	CHECK_EQ(route_state(e, rem[0], &err), RMA_PEER_FAILED);
	CHECK_EQ(err, -EHOSTDOWN);

	/* A new peer sweeps, but a fresh marker stays.  (This op's deadline
	 * passes below with its chunk still out.) */
	sweep_due(e, false);
	CHECK_RC(put(e, lr, rem[1], 100), 1);
	struct rma__peer *p1 = fake.peer;
	CHECK_EQ(route_state(e, rem[0], &err), RMA_PEER_FAILED);
	CHECK_EQ(fake.disconnects, 0);

	/* An old one goes with the next peer added; the others stay. */
	sweep_due(e, true);
	CHECK_RC(put(e, lr, rem[2], 10000), 1);
	CHECK_EQ(route_state(e, rem[0], &err), RMA_PEER_NONE);
	CHECK_EQ(fake.disconnects, 1);
	CHECK_EQ(route_state(e, rem[1], &err), RMA_PEER_READY);
	CHECK_EQ(route_state(e, rem[2], &err), RMA_PEER_READY);

	/* The op to rem[1] times out, its chunk still with the transport;
	 * then that peer is lost.  However old, it stays while the chunk is
	 * out: its report comes through the peer. */
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_EQ(c.result, -ETIMEDOUT);
	pthread_mutex_lock(&e->mu);
	rma__peer_failed(p1, -ECONNRESET);
	pthread_mutex_unlock(&e->mu);
	sweep_due(e, true);
	CHECK_RC(put(e, lr, rem[3], 10000), 1);
	CHECK_EQ(route_state(e, rem[1], &err), RMA_PEER_FAILED);
	CHECK_EQ(err, -ECONNRESET);
	CHECK_EQ(fake.disconnects, 1);

	/* Its chunk reported, it may go, but sweeps come at most once a
	 * second: the next peer added within it leaves it. */
	CHECK_EQ(fake_complete_all(e, 0), 3);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(fake_wait_one(e, &c, 0), 0); /* the timed-out op's is dropped */
	set_retry_at(e, p1, rma__now_ns()); /* young again */
	sweep_due(e, false);
	CHECK_RC(put(e, lr, rem[4], 10000), 1); /* a sweep, before the age */
	CHECK_EQ(route_state(e, rem[1], &err), RMA_PEER_FAILED);
	set_retry_at(e, p1, long_ago());
	CHECK_RC(put(e, lr, rem[0], 10000), 1); /* within the second */
	CHECK_EQ(route_state(e, rem[1], &err), RMA_PEER_FAILED);
	CHECK_EQ(fake.disconnects, 1);
	sweep_due(e, false);
	CHECK_RC(put(e, lr, rem[5], 10000), 1);
	CHECK_EQ(route_state(e, rem[1], &err), RMA_PEER_NONE);
	CHECK_EQ(fake.disconnects, 2);
	CHECK_EQ(route_state(e, rem[0], &err), RMA_PEER_READY);
	CHECK_EQ(fake_complete_all(e, 0), 3);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(fake_wait_one(e, &c, 2000), 1);

	for (int i = 0; i < NT; i++) {
		rma_remote_free(rem[i]);
		rma_engine_destroy(tg[i]);
	}
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
