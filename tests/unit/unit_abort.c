/* The transport is told when an op dies with chunks posted: on its deadline,
 * on cancel (peer remove), on release of its local region, on shutdown.
 * When abort answers RMA__ABORT_PENDING (a NIC that may still write), the
 * op's completion waits until the transport reports every chunk, and
 * rma_region_release does not return before that.  An abort may also
 * report chunks before it returns (a queue pair drained at once): each op
 * still completes exactly once. */
#include <errno.h>
#include <pthread.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static rma_region *lr, *rr;
static rma_remote *rem;
static char *lbuf, *rbuf;

static void post_one(rma_engine *e, int timeout_ms, uint64_t ud)
{
	struct rma_op op = { .kind = RMA_OP_GET, .local = lr, .remote = rem,
			     .len = 4096, .user_data = ud };
	CHECK_RC(rma_post(e, &op, 1, timeout_ms, NULL), 1);
	CHECK_OK(rma_progress(e, 0));
}

static rma_engine *setup(void)
{
	rma_engine *e = fake_engine(64);
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rem = fake_remote(rr, 0, 0);
	return e;
}

struct later { rma_engine *e; int ms; };

/* Reports every outstanding chunk after a while, as a NIC's flush would. */
static void *flush_later(void *arg)
{
	struct later *l = arg;
	test_sleep_ms(l->ms);
	fake_complete_all(l->e, -ECANCELED);
	return NULL;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	lbuf = test_alloc(4096);
	rbuf = test_alloc(4096);
	struct rma_completion c;

	/* abort answering 0: the completion comes at once, each reason. */
	fake_reset(0);
	rma_engine *e = setup();
	post_one(e, 30, 1);                       /* deadline */
	CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
	CHECK_RC(c.result, -ETIMEDOUT);
	CHECK_EQ(fake.aborts, 1);
	CHECK_RC(fake.abort_err[0], -ETIMEDOUT);
	CHECK_EQ_U64(fake.abort_op[0], fake.xfers[0].x.op_id);
	post_one(e, -1, 2);                       /* cancel */
	CHECK_RC(rma_peer_remove(e, rem, 20), -ETIMEDOUT);
	CHECK_EQ(fake.aborts, 2);
	CHECK_RC(fake.abort_err[1], -ECANCELED);
	CHECK_EQ(fake_wait_one(e, &c, 100), 1);
	CHECK_RC(c.result, -ECANCELED);
	post_one(e, -1, 3);                       /* release */
	CHECK_RC(rma_region_release(lr), 0);
	CHECK_EQ(fake.aborts, 3);
	CHECK_RC(fake.abort_err[2], -ECANCELED);
	CHECK_EQ(fake_wait_one(e, &c, 100), 1);
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	post_one(e, -1, 4);                       /* shutdown */
	CHECK_RC(rma_engine_shutdown(e, 0), 1);
	CHECK_EQ(fake.aborts, 4);
	CHECK_RC(fake.abort_err[3], -ECANCELED);
	CHECK_EQ(fake_wait_one(e, &c, 100), 1);
	CHECK_RC(c.result, -ECANCELED);
	rma_remote_free(rem);
	rma_engine_destroy(e);

	/* abort answering PENDING: nothing until the chunks are reported. */
	fake_reset(0);
	fake.abort_pending = 1;
	e = setup();
	post_one(e, 30, 5);
	test_sleep_ms(60);
	for (int i = 0; i < 5; i++)
		CHECK_OK(rma_progress(e, 5));
	CHECK_EQ(fake.aborts, 1);
	CHECK_EQ(rma_poll(e, &c, 1), 0);          /* withheld */
	fake_complete_all(e, -ECANCELED);         /* the flush */
	CHECK_EQ(fake_wait_one(e, &c, 100), 1);
	CHECK_EQ(c.user_data, 5);
	CHECK_RC(c.result, -ETIMEDOUT);           /* the reason, not the flush */

	/* Release waits for the flush: the NIC stops before it returns. */
	post_one(e, -1, 6);
	struct later l = { e, 150 };
	pthread_t th;
	int64_t t0 = test_now_ms(); /* before the flusher's clock starts */
	pthread_create(&th, NULL, flush_later, &l);
	CHECK_RC(rma_region_release(lr), 0);
	int64_t dt = test_now_ms() - t0;
	CHECKF(dt >= 140, "release returned after %lld ms, before the flush",
	       (long long)dt);
	CHECK_EQ(fake.outstanding, 0);
	pthread_join(th, NULL);
	CHECK_EQ(fake_wait_one(e, &c, 100), 1);
	CHECK_EQ(c.user_data, 6);
	CHECK_RC(c.result, -ECANCELED);

	rma_remote_free(rem);
	rma_engine_destroy(e);

	/* abort reporting the op's chunks before it returns (a queue pair
	 * drained at once): one completion, with the reason, and the slot
	 * freed once (two later posts get two slots). */
	for (int pending = 0; pending < 2; pending++) {
		fake_reset(0);
		fake.abort_sync = 1;
		fake.abort_pending = pending;
		e = setup();
		post_one(e, 30, 7);
		CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
		CHECK_EQ(c.user_data, 7);
		CHECK_RC(c.result, -ETIMEDOUT);
		CHECK_OK(rma_progress(e, 0));
		CHECK_EQ(rma_poll(e, &c, 1), 0);  /* no second completion */
		CHECK_EQ(e->live, 0);
		post_one(e, -1, 8);
		post_one(e, -1, 9);
		CHECK_EQ(fake.nxfers, 3);
		CHECKF(fake.xfers[1].x.op_id != fake.xfers[2].x.op_id,
		       "two live ops share op id %#llx",
		       (unsigned long long)fake.xfers[1].x.op_id);
		CHECK_EQ(fake_complete_all(e, 0), 2);
		CHECK_EQ(fake_wait_one(e, &c, 100), 1);
		CHECK_EQ(fake_wait_one(e, &c, 100), 1);
		CHECK_EQ(rma_poll(e, &c, 1), 0);
		rma_remote_free(rem);
		rma_engine_destroy(e);
	}

	/* Releasing a region whose first op's abort reports every chunk,
	 * the other ops' too: each op completes once, and release returns. */
	fake_reset(0);
	fake.abort_sync = 2;
	e = setup();
	for (uint64_t ud = 10; ud < 13; ud++)
		post_one(e, -1, ud);
	CHECK_RC(rma_region_release(lr), 0);
	CHECK_EQ(fake.outstanding, 0);
	unsigned mask = 0;
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(fake_wait_one(e, &c, 100), 1);
		CHECK(c.user_data >= 10 && c.user_data < 13);
		CHECKF(!(mask & 1u << (c.user_data - 10)), "op %llu completed twice",
		       (unsigned long long)c.user_data);
		mask |= 1u << (c.user_data - 10);
		CHECK(c.result < 0);
	}
	CHECK_EQ(rma_poll(e, &c, 1), 0);
	CHECK_EQ(e->live, 0);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
