/* A transport that can reach its peer synchronously (shm, loopback) calls
 * rma__peer_ready() from inside connect(); the op that caused the connect
 * must then flow without any further call from the transport. */
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(64);
	const uint64_t len = 3 * FAKE_MAX_MSG;
	char *lbuf = test_alloc(len), *rbuf = test_alloc(len);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(0);
	CHECK_RC(rma_region_register(e, lbuf, len, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, len, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);

	struct rma_op op = { .kind = RMA_OP_PUT, .local = lr, .remote = rem,
			     .len = len, .user_data = 5 };
	CHECK_RC(rma_post(e, &op, 1, 2000, NULL), 1);
	for (int i = 0; i < 5 && fake.nxfers < 3; i++)
		rma_progress(e, 1);
	CHECK_EQ(fake.connects, 1);
	CHECKF(fake.nxfers == 3,
	       "peer made ready inside connect(): %u of 3 chunks posted "
	       "(the core left the peer CONNECTING?)", fake.nxfers);
	CHECK_EQ(fake.peer->state, RMA__PEER_READY);
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.result, (long long)len);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
