/* Progress hooks.  A sleeping progress thread asks every transport first
 * (arm); a transport without an fd (poll_ns) is progressed at least that
 * often while the engine is otherwise idle; and the timer service runs a
 * callback at its time, re-armed or cancelled at will. */
#include <errno.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

struct tick {
	struct rma__timer tm;
	rma_engine *e;
	int fired;
	int64_t at_ms;
};

static void on_tick(struct rma__timer *tm)
{
	struct tick *t = container_of(tm, struct tick, tm);
	t->fired++;
	t->at_ms = test_now_ms();
	if (t->fired < 3)
		rma__timer_arm(t->e, tm, rma__now_ns() + 20 * 1000000LL);
}

static unsigned progresses(rma_engine *e)
{
	pthread_mutex_lock(&e->mu);
	unsigned n = fake.progresses;
	pthread_mutex_unlock(&e->mu);
	return n;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);

	/* Thread mode, a fake that must be polled every 10 ms. */
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "fake:poll=10";
	rma_engine *e;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	test_sleep_ms(100); /* past the spin window: the thread sleeps */
	unsigned p0 = progresses(e);
	test_sleep_ms(300);
	unsigned p1 = progresses(e);
	/* ~30 rounds at 10 ms; without the poll mode it sleeps 1 s at a time. */
	CHECKF(p1 - p0 >= 10, "%u progress rounds in 300 ms", p1 - p0);
	pthread_mutex_lock(&e->mu);
	CHECK(fake.arms > 0);
	pthread_mutex_unlock(&e->mu);

	/* Timers: three ticks 20 ms apart; a cancelled one never fires. */
	struct tick t = { .e = e }, never = { .e = e };
	t.tm.cb = on_tick;
	never.tm.cb = on_tick;
	int64_t t0 = test_now_ms();
	pthread_mutex_lock(&e->mu);
	rma__timer_arm(e, &t.tm, rma__now_ns() + 20 * 1000000LL);
	rma__timer_arm(e, &never.tm, rma__now_ns() + 30 * 1000000LL);
	rma__timer_cancel(e, &never.tm);
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < 100; i++) {
		pthread_mutex_lock(&e->mu);
		int f = t.fired;
		pthread_mutex_unlock(&e->mu);
		if (f == 3)
			break;
		test_sleep_ms(10);
	}
	pthread_mutex_lock(&e->mu);
	CHECK_EQ(t.fired, 3);
	CHECK_EQ(never.fired, 0);
	CHECKF(t.at_ms - t0 >= 55, "third tick after %lld ms", (long long)(t.at_ms - t0));
	pthread_mutex_unlock(&e->mu);
	rma_engine_destroy(e);

	/* A bad option value is refused at create. */
	cfg.transports = "fake:poll=0";
	CHECK_RC(rma_engine_create(&cfg, &e), -EINVAL);
	return 0;
}
