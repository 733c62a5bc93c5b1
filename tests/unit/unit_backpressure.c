/* A transport may answer post with -EAGAIN, even for the first chunk with
 * nothing in flight (a provider connecting on demand): the core keeps the
 * chunk and posts it again at the next progress round, or at once when the
 * transport calls rma__peer_kick().  Nothing is lost or posted twice. */
#include <errno.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(8192), *rbuf = test_alloc(8192);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(0);
	CHECK_RC(rma_region_register(e, lbuf, 8192, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 8192, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	struct rma_op op = { .kind = RMA_OP_PUT, .local = lr, .remote = rem,
			     .len = 8192, .user_data = 5 };

	/* 1. The first post is refused once; the next round posts it. */
	fake.post_eagain = 1;
	CHECK_RC(rma_post(e, &op, 1, 5000, NULL), 1);
	CHECK_EQ(fake.eagains, 1);
	CHECK_EQ(fake.nxfers, 0);
	CHECK_OK(rma_progress(e, 0));
	CHECK_EQ(fake.nxfers, 2); /* both chunks, each once */
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.result, 8192);

	/* 2. Refused until the transport has room, then kicked: the kick
	 * posts in the same progress round. */
	fake.post_blocked = 1;
	op.user_data = 6;
	CHECK_RC(rma_post(e, &op, 1, 5000, NULL), 1);
	for (int i = 0; i < 5; i++)
		CHECK_OK(rma_progress(e, 0)); /* retried, still refused */
	CHECK(fake.eagains >= 6);
	CHECK_EQ(fake.nxfers, 2);
	fake.post_blocked = 0;
	fake_kick(e);
	CHECK_OK(rma_progress(e, 0));
	CHECK_EQ(fake.nxfers, 4);
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 6);
	CHECK_EQ(c.result, 8192);

	/* 3. Still refused at the deadline: the op times out, cleanly. */
	fake.post_blocked = 1;
	CHECK_RC(rma_post(e, &op, 1, 50, NULL), 1);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_RC(c.result, -ETIMEDOUT);
	CHECK_EQ(fake.nxfers, 4);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
