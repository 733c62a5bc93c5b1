/* A transport that learns inside connect() that the peer cannot be reached
 * reports rma__peer_failed() there: the post is refused with that error (no
 * other route exists), no completion is delivered, and a later post
 * connects afresh, freeing the failed peer then. */
#include <errno.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(4096), *rbuf = test_alloc(4096);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(0);
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	struct rma_op op = { .kind = RMA_OP_PUT, .local = lr, .remote = rem,
			     .len = 4096, .user_data = 9 };

	fake.fail_connect = -EHOSTDOWN;
	CHECK_RC(rma_post(e, &op, 1, 2000, NULL), -EHOSTDOWN);
	CHECK_EQ(fake.disconnects, 0); /* kept, so routing can pass over it */
	rma_progress(e, 0);
	CHECK_EQ(rma_poll(e, &c, 1), 0);

	fake.fail_connect = 0;
	CHECK_RC(rma_post(e, &op, 1, 2000, NULL), 1);
	CHECK_EQ(fake.connects, 2);
	CHECK_EQ(fake.disconnects, 1); /* the failed one, replaced */
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 9);
	CHECK_EQ(c.result, 4096);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
