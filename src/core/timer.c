/*
 * timer.c - every deadline, ordered: op deadlines and the transports'
 * timers.  A timer armed no earlier than the last one on the in-order list
 * (ops posted with the same timeout, nearly all of them) is appended there
 * in O(1); any other goes into a binary min-heap, O(log n).  Cancelling is
 * O(1) or O(log n), and the earliest is the earlier of the list's head and
 * the heap's top, where the progress loop (and the timerfd behind the
 * manual completion fd) looks.  Nothing scans the op pool.
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
	rma__list_init(&e->timers.fifo);
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
static inline void arm_fd(struct rma_engine *e, int64_t at)
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

static struct rma__timer *fifo_head(struct rma__theap *h)
{
	struct rma__lnode *n = rma__list_first(&h->fifo);
	return n ? container_of(n, struct rma__timer, fifo) : NULL;
}

static struct rma__timer *earliest(struct rma__theap *h)
{
	struct rma__timer *f = fifo_head(h), *t = h->n ? h->t[0] : NULL;
	return !f ? t : !t ? f : f->at <= t->at ? f : t;
}

static void heap_add(struct rma_engine *e, struct rma__timer *tm)
{
	struct rma__theap *h = &e->timers;
	if (h->n == h->cap) {
		/* Op deadlines never get here (a slot per op); transports'
		 * timers may. */
		unsigned cap = h->cap * 2;
		struct rma__timer **t = realloc(h->t, cap * sizeof *t);
		if (!t) {
			rma__err("timer heap: out of memory");
			return;
		}
		h->t = t;
		h->cap = cap;
	}
	h->t[h->n] = tm;
	sift_up(e, h->n++);
}

void rma__timer_arm(struct rma_engine *e, struct rma__timer *tm, int64_t at)
{
	struct rma__theap *h = &e->timers;
	struct rma__lnode *last = h->fifo.prev;

	if (rma__timer_armed(tm))
		rma__timer_cancel(e, tm);
	tm->at = at;
	if (last != &h->fifo) {
		if (container_of(last, struct rma__timer, fifo)->at <= at) {
			/* In order, behind an earlier one: the common case. */
			rma__list_add_tail(&h->fifo, &tm->fifo);
			return;
		}
		heap_add(e, tm);
		if (h->t[0] != tm || fifo_head(h)->at <= at)
			return;
	} else if (h->n && h->t[0]->at <= at) {
		rma__list_add_tail(&h->fifo, &tm->fifo);
		return;
	} else {
		rma__list_add_tail(&h->fifo, &tm->fifo);
	}
	/* The new earliest: aim the timerfd, and wake a thread sleeping
	 * past it. */
	arm_fd(e, at);
	if (e->has_thread && e->poll_until && at < e->poll_until)
		rma__wake(e);
}

void rma__timer_cancel(struct rma_engine *e, struct rma__timer *tm)
{
	struct rma__theap *h = &e->timers;
	unsigned i;

	if (tm->fifo.next) {
		rma__list_del(&tm->fifo);
		return;
	}
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
	struct rma__timer *tm = earliest(&e->timers);
	return tm ? tm->at : 0;
}

/* Run every timer due at `now`.  A callback may arm or cancel timers. */
void rma__timers_run(struct rma_engine *e, int64_t now)
{
	struct rma__theap *h = &e->timers;
	struct rma__timer *tm;

	if (h->fifo.next == &h->fifo && !h->n) { /* nothing armed */
		if (e->timer_armed <= now)
			e->timer_armed = 0; /* the timerfd fired, or never will */
		return;
	}
	while ((tm = earliest(h)) && tm->at <= now) {
		rma__timer_cancel(e, tm);
		e->work++;
		tm->cb(tm);
	}
	/* Re-aim the timerfd at what is left. */
	if (e->timer_armed && e->timer_armed <= now) {
		e->timer_armed = 0;
		if (tm)
			arm_fd(e, tm->at);
	}
}
