/* A batch has one deadline.  With 16 op slots (cq_depth 8) and 160 ops,
 * most ops wait for a slot; slots free up for the first 900 ms, then
 * nothing completes.  The batch must end at its 1 s deadline, not at the
 * deadline of the last op posted plus 1 s (about 1.9 s).  The bounds are
 * wide for sanitizer builds on a loaded host. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define NOPS 160
#define DEADLINE_MS 1000

static rma_engine *e;
static atomic_int stop;

/* Completes the oldest outstanding chunk every 10 ms for 900 ms. */
static void *completer(void *arg)
{
	int64_t end = test_now_ms() + 900;
	while (!stop && test_now_ms() < end) {
		test_sleep_ms(10);
		pthread_mutex_lock(&e->mu);
		for (unsigned i = 0; i < fake.nxfers; i++)
			if (fake.xfers[i].state == FAKE_POSTED) {
				fake.xfers[i].state = FAKE_DONE;
				fake.outstanding--;
				rma__xfer_done(e, fake.xfers[i].x.op_id,
					       fake.xfers[i].x.len, 0);
				break;
			}
		pthread_mutex_unlock(&e->mu);
	}
	return NULL;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	cfg.cq_depth = 8;
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	char *lbuf = test_alloc(4096), *rbuf = test_alloc(4096);
	rma_region *lr, *rr;
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	struct rma_op ops[NOPS];
	int64_t res[NOPS];
	for (int i = 0; i < NOPS; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_PUT, .local = lr,
					  .remote = rem, .len = 64 };

	pthread_t th;
	pthread_create(&th, NULL, completer, NULL);
	int64_t t0 = test_now_ms();
	int failed = rma_submit(e, ops, NOPS, DEADLINE_MS, res, NULL, 0);
	int64_t dt = test_now_ms() - t0;
	stop = 1;
	pthread_join(th, NULL);

	int ok = 0;
	for (int i = 0; i < NOPS; i++) {
		CHECKF(res[i] == 64 || res[i] == -ETIMEDOUT, "op %d: %lld", i,
		       (long long)res[i]);
		ok += res[i] == 64;
	}
	CHECK_EQ(failed, NOPS - ok);
	CHECKF(ok >= 5 && ok < NOPS, "%d ops succeeded", ok);
	CHECKF(dt >= DEADLINE_MS - 10 && dt < DEADLINE_MS + 600,
	       "a %d ms batch took %lld ms", DEADLINE_MS, (long long)dt);

	fake_complete_all(e, 0); /* the zombies */
	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
