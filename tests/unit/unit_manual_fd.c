/* With RMA_ENGINE_MANUAL_PROGRESS the completion fd (the epoll set) becomes
 * readable for a completion made inside rma_post (a zero-length op) and
 * when an op's deadline passes, so a poll(fd, -1) loop never hangs. */
#include <errno.h>
#include <poll.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, ms);
	CHECK(n >= 0);
	return n == 1 && (p.revents & POLLIN);
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(1); /* the peer stays connecting: nothing completes */
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(4096), *rbuf = test_alloc(4096);
	rma_region *lr, *rr;
	struct rma_completion c;
	int fd = rma_completion_fd(e);

	CHECK_OK(fd);
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	while (readable(fd, 0))
		rma_progress(e, 0);

	/* A zero-length op completes inside rma_post. */
	struct rma_op op = { .kind = RMA_OP_PUT, .local = lr, .remote = rem,
			     .len = 0, .user_data = 1 };
	CHECK_RC(rma_post(e, &op, 1, -1, NULL), 1);
	CHECK(readable(fd, 1000));
	CHECK_EQ(rma_poll(e, &c, 1), 1);
	CHECK_EQ(c.user_data, 1);
	while (readable(fd, 0))
		rma_progress(e, 0);

	/* A deadline: the fd wakes the caller when it passes. */
	op.len = 4096;
	op.user_data = 2;
	fake.defer_ready = 0;
	fake.post_blocked = 1; /* never reaches the transport */
	CHECK_RC(rma_post(e, &op, 1, 100, NULL), 1);
	while (readable(fd, 0)) /* whatever the post itself stirred */
		rma_progress(e, 0);
	int64_t t0 = test_now_ms();
	int got = 0;
	while (!got && test_now_ms() - t0 < 3000) {
		CHECKF(readable(fd, 2000), "fd not readable %lld ms after posting",
		       (long long)(test_now_ms() - t0));
		rma_progress(e, 0);
		got = rma_poll(e, &c, 1);
	}
	int64_t dt = test_now_ms() - t0;
	CHECK_EQ(got, 1);
	CHECK_RC(c.result, -ETIMEDOUT);
	CHECKF(dt >= 90 && dt < 1000, "timed out after %lld ms", (long long)dt);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
