/*
 * rma_peer_raw: a peer's raw handles, through the transport named, only
 * once its connection is up (connecting on first use); transports without
 * raw handles, absent ones and bad arguments refused.  The fake transport
 * answers with its peer's address.
 */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	char buf[4096], out[64];
	rma_region *rr;
	struct rma__peer *got = NULL;

	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(8);
	fake_reset(1); /* connects complete at the next progress round */
	CHECK_RC(rma_region_register(e, buf, sizeof buf, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);

	CHECK_RC(rma_peer_raw(NULL, rem, "fake", out, sizeof out), -EINVAL);
	CHECK_RC(rma_peer_raw(e, NULL, "fake", out, sizeof out), -EINVAL);
	CHECK_RC(rma_peer_raw(e, rem, NULL, out, sizeof out), -EINVAL);
	CHECK_RC(rma_peer_raw(e, rem, "verbs", out, sizeof out), -ENOENT);
	CHECK_EQ(fake.connects, 0);

	/* Not connected: the first call starts the connect. */
	CHECK_RC(rma_peer_raw(e, rem, "fake", out, sizeof out), -ENOTCONN);
	CHECK_EQ(fake.connects, 1);
	CHECK_RC(rma_peer_raw(e, rem, "fake", out, sizeof out), -ENOTCONN);
	CHECK_EQ(fake.connects, 1); /* the same connect, still running */
	CHECK_EQ(fake.peer_raws, 0);
	rma_progress(e, 1);
	CHECK_EQ(fake.peer->state, RMA__PEER_READY);
	CHECK_RC(rma_peer_raw(e, rem, "fake", out, sizeof out), (int)sizeof got);
	memcpy(&got, out, sizeof got);
	CHECK(got == fake.peer);
	CHECK_RC(rma_peer_raw(e, rem, "fake", out, 1), -ENOSPC);

	/* A connect that fails at once answers with its error. */
	rma_peer_remove(e, rem, 1000);
	fake.fail_connect = -ECONNREFUSED;
	CHECK_RC(rma_peer_raw(e, rem, "fake", out, sizeof out), -ECONNREFUSED);
	fake.fail_connect = 0;
	rma_remote_free(rem);
	rma_engine_destroy(e);

	/* tcp has no raw handles: refused before any connect. */
	rma_engine *t = test_tcp_engine((struct rma_config){0});
	rma_engine *i = test_tcp_engine((struct rma_config){0});
	CHECK_RC(rma_region_register(t, buf, sizeof buf, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rem = test_remote_of(rr);
	CHECK_RC(rma_peer_raw(i, rem, "tcp", out, sizeof out), -EOPNOTSUPP);
	struct rma_route_info ri;
	CHECK_RC(rma_peer_route(i, rem, &ri), 0);
	CHECK_EQ(ri.state, RMA_PEER_NONE);
	rma_remote_free(rem);
	rma_engine_destroy(i);
	rma_engine_destroy(t);
	printf("ok\n");
	return 0;
}
