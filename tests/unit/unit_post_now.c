/*
 * The fast path (transport.h, post_now): an op the transport can do at
 * once completes inside rma_post / rma_submit, with no slot and no pump;
 * one behind others of its peer, one of several chunks, a CRC op, or one
 * the transport declines takes the queue; and the completion fd tells of
 * a completion made there, with a progress thread too.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define LEN 65536

static struct rma_op op_of(unsigned kind, rma_region *lr, rma_remote *rem,
			   uint64_t off, uint64_t len, uint64_t ud)
{
	return (struct rma_op){ .kind = kind, .local = lr, .local_off = off,
				.remote = rem, .remote_off = off + 8,
				.len = len, .user_data = ud };
}

/* Done at once: the completion waits before any progress round. */
static void done_at_once(rma_engine *e, rma_region *lr, rma_remote *rem,
			 char *lbuf)
{
	struct rma_completion c;
	int64_t res = -1;

	for (unsigned kind = RMA_OP_PUT; kind <= RMA_OP_GET; kind++) {
		unsigned n = fake.nnow;
		struct rma_op op = op_of(kind, lr, rem, 128, 64, 40 + kind);
		CHECK_RC(rma_post(e, &op, 1, 1000, NULL), 1);
		CHECK_EQ(fake.nnow, n + 1);
		CHECK_EQ(rma_poll(e, &c, 1), 1);
		CHECK_EQ(c.user_data, 40 + kind);
		CHECK_EQ(c.result, 64);
		const struct rma__xfer *x = &fake.now[n];
		CHECK_EQ(x->op_id, 0);
		CHECK_EQ(x->kind, kind);
		CHECK_EQ(x->len, 64);
		CHECK_EQ(x->raddr, FAKE_BASE + 136);
		CHECKF(x->laddr == lbuf + 128, "laddr %p, not %p",
		       (void *)x->laddr, (void *)(lbuf + 128));
		CHECK_EQ(x->flags, RMA__XFER_LAST);

		CHECK_RC(rma_submit(e, &op, 1, 1000, &res, NULL, 0), 0);
		CHECK_EQ(res, 64);
		CHECK_EQ(fake.nnow, n + 2);
	}
	CHECK_EQ(fake.nxfers, 0);
	CHECK_EQ(rma_poll(e, &c, 1), 0);
}

/* What must take the queue does, and in posting order. */
static void queued(rma_engine *e, rma_region *lr, rma_remote *rem)
{
	struct rma_completion c[8];
	unsigned n = fake.nnow;

	/* Several chunks: queued; held there by a transport with no room. */
	fake.post_blocked = 1;
	struct rma_op big = op_of(RMA_OP_PUT, lr, rem, 0, 3 * fake.peer_max_msg, 1);
	CHECK_RC(rma_post(e, &big, 1, 2000, NULL), 1);
	/* Behind it: queued too, not done ahead of it. */
	struct rma_op small = op_of(RMA_OP_PUT, lr, rem, 0, 8, 2);
	CHECK_RC(rma_post(e, &small, 1, 2000, NULL), 1);
	CHECK_EQ(fake.nnow, n);
	CHECK_EQ(fake.nxfers, 0);
	fake.post_blocked = 0;
	fake_kick(e);
	CHECK_EQ(rma_progress(e, 0), 0);
	CHECK_EQ(fake.nxfers, 4);
	CHECK_EQ(fake.xfers[3].x.len, 8); /* the small one last */
	/* In flight ahead of it: queued. */
	struct rma_op get = op_of(RMA_OP_GET, lr, rem, 64, 8, 3);
	CHECK_RC(rma_post(e, &get, 1, 2000, NULL), 1);
	CHECK_EQ(fake.nnow, n);
	CHECK_EQ(fake.nxfers, 5);
	CHECK_EQ(fake_complete_all(e, 0), 5);
	int got = 0;
	for (int i = 0; i < 50 && got < 3; i++)
		got += rma_poll(e, c + got, 8 - got);
	CHECK_EQ(got, 3);

	/* Nothing ahead now: at once again; but a CRC op takes the queue. */
	struct rma_op crc = op_of(RMA_OP_PUT, lr, rem, 0, 8, 4);
	crc.flags = RMA_OP_CRC;
	CHECK_RC(rma_post(e, &crc, 1, 2000, NULL), 1);
	CHECK_EQ(fake.nnow, n);
	CHECK_EQ(fake.nxfers, 6);
	CHECK_EQ(fake_complete_all(e, 0), 1);
	CHECK_EQ(fake_wait_one(e, c, 2000), 1);
	CHECK_EQ(c[0].user_data, 4);
	CHECK_RC(rma_post(e, &small, 1, 2000, NULL), 1);
	CHECK_EQ(fake.nnow, n + 1);
	CHECK_EQ(rma_poll(e, c, 8), 1);

	/* Declined: post() decides. */
	fake.take_now = 0;
	CHECK_RC(rma_post(e, &small, 1, 2000, NULL), 1);
	CHECK_EQ(fake.now_declined, 1);
	CHECK_EQ(fake.nxfers, 7);
	CHECK_EQ(fake_complete_all(e, 0), 1);
	CHECK_EQ(fake_wait_one(e, c, 2000), 1);
	CHECK_EQ(c[0].result, 8);
	fake.take_now = 1;
	CHECK_EQ(fake.outstanding, 0);
}

/* Ops done at once still hold their completion's place: once cq_depth
 * wait unpolled, the next post answers -EAGAIN, and none is lost. */
static void full_queue(rma_engine *e, rma_region *lr, rma_remote *rem)
{
	static struct rma_completion c[4096];
	struct rma_op op = op_of(RMA_OP_PUT, lr, rem, 0, 8, 0);
	unsigned n = 0;
	int rc, got = 0;

	while ((rc = rma_post(e, &op, 1, 1000, NULL)) == 1 && n <= 4096)
		op.user_data = ++n;
	CHECK_RC(rc, -EAGAIN);
	CHECK_EQ(n, 4096);
	while ((rc = rma_poll(e, c + got, 4096 - (size_t)got)) > 0)
		got += rc;
	CHECK_EQ(got, 4096);
	for (int i = 0; i < got; i++)
		CHECKF(c[i].user_data == (uint64_t)i && c[i].result == 8,
		       "completion %d: user_data %llu, result %lld", i,
		       (unsigned long long)c[i].user_data, (long long)c[i].result);
	CHECK_RC(rma_post(e, &op, 1, 1000, NULL), 1);
	CHECK_EQ(rma_poll(e, c, 1), 1);
}

/* A peer still connecting: queued until it is ready. */
static void connecting(void)
{
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(LEN), *rbuf = test_alloc(LEN);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(1);
	fake.take_now = 1;
	CHECK_RC(rma_region_register(e, lbuf, LEN, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, LEN, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, LEN);
	struct rma_op op = op_of(RMA_OP_PUT, lr, rem, 0, 8, 9);
	CHECK_RC(rma_post(e, &op, 1, 2000, NULL), 1);
	CHECK_EQ(fake.nnow, 0);
	CHECK_EQ(rma_progress(e, 0), 0); /* ready now; the op is posted */
	CHECK_EQ(fake.nxfers, 1);
	CHECK_EQ(fake_complete_all(e, 0), 1);
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_EQ(c.user_data, 9);
	rma_remote_free(rem);
	rma_engine_destroy(e);
}

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, ms) == 1;
}

/*
 * The completion fd, with a progress thread: a caller that polled, then
 * posts an op done at once and sleeps on the fd without rma_arm, is woken
 * once its lease is over.  The push reads the lease on the coarse clock,
 * which may still call it current: the thread writes the fd then.
 */
static void fd_with_thread(void)
{
	struct rma_config cfg;
	rma_engine *e;
	char *lbuf = test_alloc(LEN), *rbuf = test_alloc(LEN);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(0);
	fake.take_now = 1;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	int fd = rma_completion_fd(e);
	CHECKF(fd >= 0, "rma_completion_fd: %d", fd);
	CHECK_RC(rma_region_register(e, lbuf, LEN, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, LEN, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, LEN);
	struct rma_op op = op_of(RMA_OP_PUT, lr, rem, 0, 8, 5);
	CHECK_RC(rma_submit(e, &op, 1, 2000, &(int64_t){0}, NULL, 0), 0);
	for (int i = 0; i < 40; i++) {
		CHECK_EQ(rma_poll(e, &c, 1), 0); /* a lease of 1 ms */
		/* Past the lease by up to 3 ms: within a coarse tick of it */
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 + (i % 4) * 700000 }, NULL);
		CHECK_RC(rma_post(e, &op, 1, 2000, NULL), 1);
		CHECKF(readable(fd, 3000), "round %d: no fd signal for a completion "
		       "made in rma_post", i);
		CHECK_EQ(rma_poll(e, &c, 1), 1);
		CHECK_EQ(c.result, 8);
	}
	/* And with rma_arm, at once. */
	CHECK_RC(rma_post(e, &op, 1, 2000, NULL), 1);
	CHECK_RC(rma_arm(e), -EAGAIN);
	CHECK_EQ(rma_poll(e, &c, 1), 1);
	rma_remote_free(rem);
	rma_engine_destroy(e);
}

int main(void)
{
	test_watchdog(120);
	fake_register();

	/* Manual progress: the fd is readable after a completion made in
	 * rma_post. */
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(LEN), *rbuf = test_alloc(LEN);
	rma_region *lr, *rr;
	fake_reset(0);
	fake.take_now = 1;
	CHECK_RC(rma_region_register(e, lbuf, LEN, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, LEN, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, LEN);
	int fd = rma_completion_fd(e);
	struct rma_op op = op_of(RMA_OP_GET, lr, rem, 0, 8, 1);
	CHECK_RC(rma_post(e, &op, 1, 1000, NULL), 1);
	CHECK(readable(fd, 0));
	struct rma_completion c;
	CHECK_EQ(rma_poll(e, &c, 1), 1);

	done_at_once(e, lr, rem, lbuf);
	queued(e, lr, rem);
	full_queue(e, lr, rem);
	rma_remote_free(rem);
	rma_engine_destroy(e);

	connecting();
	fd_with_thread();
	printf("ok\n");
	return 0;
}
