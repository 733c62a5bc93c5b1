/*
 * Whether a spinning thread shares its core (rma__crowd_look and
 * rma__crowd_shared), from made-up usage: rma__spin_idle yields only while
 * it does.  Shared: since the last look the thread was switched out while
 * it could run (ru_nivcsw grew) and ran for less than three quarters of
 * the time; then for 20 ms from that look.  A thread that woke for a
 * moment takes a few microseconds (not shared), a competitor a time slice
 * (shared); a thread that slept was not switched out involuntarily.
 */
#include <sys/resource.h>

#include "check.h"
#include "core/core.h"

static const int64_t us = 1000, ms = 1000000;

/* A look at time now (ns) where the thread has run ran_ns in all and
 * been switched out nivcsw times. */
static void look(struct rma__crowd *c, int64_t now, int64_t ran_ns, long nivcsw)
{
	struct rusage ru = {0};
	ru.ru_utime.tv_sec = ran_ns / 2 / 1000000000;
	ru.ru_utime.tv_usec = ran_ns / 2 % 1000000000 / 1000;
	ru.ru_stime.tv_sec = (ran_ns - ran_ns / 2) / 1000000000;
	ru.ru_stime.tv_usec = (ran_ns - ran_ns / 2) % 1000000000 / 1000;
	ru.ru_nivcsw = nivcsw;
	rma__crowd_look(c, now, &ru);
}

int main(void)
{
	int64_t t = 10 * 1000 * ms, ran = 5 * 1000 * ms;
	struct rma__crowd c = {.crowded = t}; /* as rma__spin_idle starts */

	/* It starts out shared, until looks say otherwise. */
	CHECK(rma__crowd_shared(&c, t));
	look(&c, t, ran, 7); /* the first look only takes note */
	/* Alone: every 200 us it ran the whole 200 us, no switch.  Shared
	 * only until 20 ms after the start. */
	for (int i = 0; i < 150; i++) {
		t += 200 * us;
		ran += 200 * us;
		look(&c, t, ran, 7);
		CHECK(rma__crowd_shared(&c, t) == (i < 100));
	}
	CHECK(!rma__crowd_shared(&c, t));

	/* A thread that woke for a moment preempted it: 20 us of 200 off
	 * its core, one switch.  Not shared. */
	t += 200 * us;
	ran += 180 * us;
	look(&c, t, ran, 8);
	CHECK(!rma__crowd_shared(&c, t));

	/* It slept 50 ms (ran 1 ms of them) without being switched out
	 * involuntarily: not shared. */
	t += 50 * ms;
	ran += 1 * ms;
	look(&c, t, ran, 8);
	CHECK(!rma__crowd_shared(&c, t));

	/* A competitor took the core for a 3 ms slice: one switch, 0.2 ms
	 * run in 3.2.  Shared for 20 ms from that look, through looks that
	 * find it alone again. */
	int64_t at = t + 3200 * us;
	t = at;
	ran += 200 * us;
	look(&c, t, ran, 9);
	CHECK(rma__crowd_shared(&c, t));
	for (int i = 0; i < 100; i++) {
		t += 200 * us;
		ran += 200 * us;
		look(&c, t, ran, 9);
		CHECK(rma__crowd_shared(&c, t));
	}
	CHECK_EQ(t - at, 20 * ms);
	t += 200 * us;
	ran += 200 * us;
	look(&c, t, ran, 9);
	CHECK(!rma__crowd_shared(&c, t));

	/* Yields that hand the core over: switches, half the time run.  It
	 * stays shared while they do. */
	for (int i = 0; i < 300; i++) {
		t += 200 * us;
		ran += 100 * us;
		look(&c, t, ran, 10 + i);
		CHECK(rma__crowd_shared(&c, t));
	}
	/* Alone again for 21 ms: not shared. */
	t += 21 * ms;
	ran += 21 * ms;
	look(&c, t, ran, 309);
	CHECK(!rma__crowd_shared(&c, t));
	/* Exactly three quarters run, with a switch: not shared (less is). */
	t += 200 * us;
	ran += 150 * us;
	look(&c, t, ran, 401);
	CHECK(!rma__crowd_shared(&c, t));
	t += 200 * us;
	ran += 149 * us;
	look(&c, t, ran, 402);
	CHECK(rma__crowd_shared(&c, t));

	/* Usage that cannot be read: shared. */
	t += 21 * ms;
	CHECK(!rma__crowd_shared(&c, t));
	rma__crowd_look(&c, t, NULL);
	CHECK(rma__crowd_shared(&c, t));
	printf("ok\n");
	return 0;
}
