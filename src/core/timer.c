/*
 * timer.c - every deadline in one binary min-heap: op deadlines and the
 * transports' timers.  Arming, cancelling and expiring cost O(log n) whatever
 * the pool size, and the earliest is always at the top, where the progress
 * loop (and the timerfd behind the manual completion fd) looks.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>

#include "core/core.h"

int rma__timers_init(struct rma_engine *e, unsigned cap)
{
	e->timers.t = calloc(cap, sizeof *e->timers.t);
	if (!e->timers.t)
		return -ENOMEM;
	e->timers.cap = cap;
	return 0;
}

void rma__timers_fini(struct rma_engine *e)
{
	free(e->timers.t);
	e->timers.t = NULL;
}

static void place(struct rma__theap *h, unsigned i, struct rma__timer *tm)
{
	h->t[i] = tm;
	tm->slot = i + 1;
}

static void sift_up(struct rma_engine *e, unsigned i)
{
	struct rma__theap *h = &e->timers;
	struct rma__timer *tm = h->t[i];
	while (i > 0) {
		unsigned up = (i - 1) / 2;
		if (h->t[up]->at <= tm->at)
			break;
		place(h, i, h->t[up]);
		i = up;
		e->work++;
	}
	place(h, i, tm);
}

static void sift_down(struct rma_engine *e, unsigned i)
{
	struct rma__theap *h = &e->timers;
	struct rma__timer *tm = h->t[i];
	for (;;) {
		unsigned c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->t[c + 1]->at < h->t[c]->at)
			c++;
		if (tm->at <= h->t[c]->at)
			break;
		place(h, i, h->t[c]);
		i = c;
		e->work++;
	}
	place(h, i, tm);
}

/* The timerfd follows the earliest timer, but only ever moves earlier here:
 * firing early costs one wasted round, re-arming on every change a system
 * call per op.  Absolute CLOCK_MONOTONIC, the clock of rma__now_ns(). */
static void arm_fd(struct rma_engine *e, int64_t at)
{
	if (e->timer_fd < 0 || (e->timer_armed && e->timer_armed <= at))
		return;
	struct itimerspec its = {
		.it_value = {.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000},
	};
	if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
		its.it_value.tv_nsec = 1; /* zero would disarm */
	if (timerfd_settime(e->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		e->timer_armed = at;
}

void rma__timer_arm(struct rma_engine *e, struct rma__timer *tm, int64_t at)
{
	struct rma__theap *h = &e->timers;

	if (tm->slot)
		rma__timer_cancel(e, tm);
	if (h->n == h->cap) {
		/* Op deadlines never get here (the heap has a slot per op);
		 * transports' timers may. */
		unsigned cap = h->cap * 2;
		struct rma__timer **t = realloc(h->t, cap * sizeof *t);
		if (!t) {
			rma__err("timer heap: out of memory");
			return;
		}
		h->t = t;
		h->cap = cap;
	}
	tm->at = at;
	h->t[h->n] = tm;
	sift_up(e, h->n++);
	if (h->t[0] == tm) {
		arm_fd(e, at);
		rma__retime(e);
	}
}

void rma__timer_cancel(struct rma_engine *e, struct rma__timer *tm)
{
	struct rma__theap *h = &e->timers;
	unsigned i;

	if (!tm->slot)
		return;
	i = tm->slot - 1;
	tm->slot = 0;
	if (i == --h->n)
		return;
	struct rma__timer *last = h->t[h->n];
	place(h, i, last);
	if (i > 0 && last->at < h->t[(i - 1) / 2]->at)
		sift_up(e, i);
	else
		sift_down(e, i);
}

int64_t rma__timers_next(struct rma_engine *e)
{
	return e->timers.n ? e->timers.t[0]->at : 0;
}

/* Run every timer due at `now`.  A callback may arm or cancel timers. */
void rma__timers_run(struct rma_engine *e, int64_t now)
{
	struct rma__theap *h = &e->timers;

	while (h->n && h->t[0]->at <= now) {
		struct rma__timer *tm = h->t[0];
		rma__timer_cancel(e, tm);
		e->work++;
		tm->cb(tm);
	}
	/* Re-aim the timerfd at what is left. */
	if (e->timer_armed && e->timer_armed <= now) {
		e->timer_armed = 0;
		if (h->n)
			arm_fd(e, h->t[0]->at);
	}
}
