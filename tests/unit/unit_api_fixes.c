/* API corrections:
 *  - outputs are written only on success: rma_advertise, rma_advertise_text
 *    and rma_engine_address leave the caller's buffer untouched on -ENOSPC;
 *  - "none" is expressible: timeout_ms RMA_NONE (or RMA_TIMEOUT_MS=none)
 *    gives ops no deadline, spin_us RMA_NONE no spin;
 *  - RMA_LOG sets the level and keeps the application's log callback;
 *  - rma_engine_shutdown with a negative drain waits for every op. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static int logs;
static void on_log(void *arg, int level, const char *msg) { logs++; }

static rma_engine *engine(int timeout_ms, int spin_us)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	cfg.timeout_ms = timeout_ms;
	cfg.spin_us = spin_us;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static unsigned timers(rma_engine *e)
{
	pthread_mutex_lock(&e->mu);
	unsigned n = e->timers.n; /* the heap, and the in-order list */
	for (struct rma__lnode *l = e->timers.fifo.next; l != &e->timers.fifo;
	     l = l->next)
		n++;
	pthread_mutex_unlock(&e->mu);
	return n;
}

static void *complete_later(void *arg)
{
	test_sleep_ms(100);
	fake_complete_all(arg, 0);
	return NULL;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);
	uint8_t out[RMA_ADVERTISEMENT_TEXT_MAX];
	char *lbuf = test_alloc(4096), *rbuf = test_alloc(4096);
	rma_region *lr, *rr;

	/* Nothing written on -ENOSPC. */
	rma_engine *e = engine(0, 0);
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	int n = rma_advertise(rr, 0, 0, 0, out, sizeof out);
	int t = rma_advertise_text(rr, 0, 0, 0, (char *)out, sizeof out);
	int a = rma_engine_address(e, out, sizeof out);
	CHECK_OK(n);
	CHECK_OK(t);
	CHECK_OK(a);
	for (int call = 0; call < 3; call++) {
		memset(out, 0xAB, sizeof out);
		if (call == 0)
			CHECK_RC(rma_advertise(rr, 0, 0, 0, out, (size_t)n - 1), -ENOSPC);
		else if (call == 1)
			CHECK_RC(rma_advertise_text(rr, 0, 0, 0, (char *)out,
						    (size_t)t), -ENOSPC);
		else
			CHECK_RC(rma_engine_address(e, out, (size_t)a - 1), -ENOSPC);
		for (size_t i = 0; i < sizeof out; i++)
			CHECKF(out[i] == 0xAB, "call %d wrote byte %zu on -ENOSPC",
			       call, i);
	}
	CHECK_RC(rma_advertise_text(rr, 0, 0, 0, (char *)out, (size_t)t + 1), t);
	CHECK_EQ(strlen((char *)out), t);
	rma_engine_destroy(e);

	/* No default deadline, no spin. */
	for (int env = 0; env < 2; env++) {
		if (env)
			setenv("RMA_TIMEOUT_MS", "none", 1);
		e = engine(env ? 0 : RMA_NONE, RMA_NONE);
		CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
		CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
		rma_remote *rem = fake_remote(rr, 0, 0);
		struct rma_op op = { .kind = RMA_OP_GET, .local = lr, .remote = rem,
				     .len = 64 };
		CHECK_RC(rma_post(e, &op, 1, 0, NULL), 1);
		CHECK_EQ(timers(e), 0);   /* no deadline */
		CHECK_RC(rma_post(e, &op, 1, 50, NULL), 1);
		CHECK_EQ(timers(e), 1);   /* an explicit one still counts */
		rma_remote_free(rem);
		rma_engine_destroy(e);
	}
	unsetenv("RMA_TIMEOUT_MS");
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	cfg.spin_us = -2;
	CHECK_RC(rma_engine_create(&cfg, &e), -EINVAL);

	/* RMA_LOG keeps the callback. */
	rma_set_log(RMA_LOG_ERROR, on_log, NULL);
	setenv("RMA_LOG", "info", 1);
	cfg.spin_us = 0;
	cfg.transports = "fake,nosuch"; /* logs an error, through on_log */
	CHECK_RC(rma_engine_create(&cfg, &e), -ENOENT);
	CHECK(logs >= 1);
	unsetenv("RMA_LOG");
	rma_set_log(RMA_LOG_WARN, NULL, NULL);

	/* shutdown(-1): waits for the op, which then succeeds. */
	e = engine(0, 0);
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);
	struct rma_op op = { .kind = RMA_OP_GET, .local = lr, .remote = rem,
			     .len = 64, .user_data = 8 };
	CHECK_RC(rma_post(e, &op, 1, -1, NULL), 1);
	pthread_t th;
	pthread_create(&th, NULL, complete_later, e);
	CHECK_RC(rma_engine_shutdown(e, -1), 0);
	pthread_join(th, NULL);
	struct rma_completion c;
	CHECK_EQ(rma_poll(e, &c, 1), 1);
	CHECK_EQ(c.result, 64);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
