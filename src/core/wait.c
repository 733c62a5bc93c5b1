/*
 * wait.c - every blocking call waits here: rma_submit, rma_read_into,
 * rma_write_from (and their _mem forms), and (through rma__wait_until) peer connect and remove,
 * region release and engine shutdown.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "core/core.h"

/* Waits this thread is inside: more than one means a completion callback,
 * run by an outer wait, is waiting in turn. */
static __thread unsigned nested_waits;

/*
 * Wait until done() or the deadline (0 = none).  First spin, driving
 * progress from this thread (the progress thread stands aside meanwhile);
 * then, if there is a progress thread, hand progress back to it and sleep
 * on done_cv, which every progress round signals.  Without one, sleep in
 * epoll ourselves.  Called and returns with the lock held.
 */
void rma__wait_until(struct rma_engine *e, int (*done)(void *), void *arg,
		     int64_t deadline)
{
	/* As the thread spins (rma__spin_next): past the gaps work came at. */
	int64_t spin_until = rma__now_ns() + e->spin_ns;

	nested_waits++;
	__atomic_add_fetch(&e->waiters, 1, __ATOMIC_RELAXED);
	while (!done(arg)) {
		int64_t now = rma__now_ns();
		if (deadline && now >= deadline)
			break;
		/* From a completion callback (run by the progress thread,
		 * or by an outer wait that keeps it parked) nobody else
		 * drives progress: keep doing it ourselves. */
		bool thread = e->has_thread && !e->stop && nested_waits == 1 &&
			      !pthread_equal(pthread_self(), e->thread);
		if (now >= spin_until && thread) {
			int64_t until = now + 100 * 1000000LL;
			if (deadline && deadline < until)
				until = deadline;
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			int64_t ns = ts.tv_nsec + (until - now);
			ts.tv_sec += ns / 1000000000;
			ts.tv_nsec = ns % 1000000000;
			if (__atomic_sub_fetch(&e->waiters, 1, __ATOMIC_RELAXED) == 0) {
				/* Nobody drives now: the thread, at once. */
				__atomic_store_n(&e->waiter_left, 0, __ATOMIC_RELAXED);
				rma__unpark(e);
			}
			rma__retime(e); /* our deadlines are the thread's now */
			if (e->pump && e->backlog) /* and our pending posts
						    * (no fd tells it) */
				rma__wake(e);
			pthread_cond_timedwait(&e->done_cv, &e->mu, &ts);
			__atomic_add_fetch(&e->waiters, 1, __ATOMIC_RELAXED);
			continue;
		}
		int timeout = 0;
		if (now >= spin_until) {
			/* No progress thread: every completion passes through
			 * a waiter; with company, look again soon. */
			timeout = e->waiters > 1 || e->stalled ? 1 : 100;
			int64_t next = rma__timers_next(e);
			if (deadline && (!next || deadline < next))
				next = deadline;
			if (next && (next - now) / 1000000 < timeout)
				timeout = (int)RMA_MAX(0, (next - now) / 1000000 + 1);
			if (e->poll_ns && e->poll_ns / 1000000 < timeout)
				timeout = (int)(e->poll_ns / 1000000);
			if (timeout && rma__arm_all(e)) /* work no fd tells */
				timeout = 0;
		}
		pthread_mutex_unlock(&e->mu);
		if (rma__progress_once(e, timeout, RMA__TRY_ANY) == 0 && !timeout)
			rma__spin_idle(); /* let a thread sharing our core run */
		pthread_mutex_lock(&e->mu);
	}
	/* A parked progress thread looks again on its own, within
	 * milliseconds: waking it here would put it on a core right when a
	 * caller in a loop wants both.  Unless work is left that nobody
	 * drives now: ops in flight, callbacks to deliver. */
	__atomic_store_n(&e->waiter_left, rma__now_ns(), __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&e->waiters, 1, __ATOMIC_RELAXED) == 0 &&
	    e->has_thread && (e->live || (e->cb && e->cq_count))) {
		__atomic_store_n(&e->waiter_left, 0, __ATOMIC_RELAXED);
		rma__unpark(e);
	}
	nested_waits--;
}

static int batch_done(void *arg)
{
	return ((struct rma__batch *)arg)->left == 0;
}

static void report_add(char *report, size_t cap, size_t *len, const char *fmt,
		       ...) __attribute__((format(printf, 4, 5)));
static void report_add(char *report, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	if (!report || *len >= cap)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(report + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (w > 0)
		*len += RMA_MIN((size_t)w, cap - *len - 1);
}

RMA_EXPORT int rma_submit(rma_engine *e, const struct rma_op *ops, size_t n,
			  int timeout_ms, int64_t *results, char *report,
			  size_t report_cap)
{
	struct rma__batch b = {.n = n, .left = n, .results = results};
	/* One deadline for the whole batch, slot waits included, read from
	 * the clock only if an op is not done at once (op.c, post_now). */
	struct rma__when when = {.timeout_ms = timeout_ms};
	size_t failed = 0, len = 0;

	if (!e || (!ops && n) || (!results && n))
		return -EINVAL;
	if (report && report_cap)
		report[0] = '\0';
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < n; i++) {
		int rc;
		while ((rc = rma__post_locked(e, &ops[i], &when, &b, i)) == -EAGAIN &&
		       (!rma__when_deadline(e, &when) ||
			rma__now_ns() < when.deadline)) {
			/* Out of op slots: let some finish first. */
			rma__pump_all(e);
			pthread_mutex_unlock(&e->mu);
			rma__progress_once(e, 1, RMA__TRY_NONE);
			pthread_mutex_lock(&e->mu);
		}
		if (rc < 0) {
			results[i] = rc == -EAGAIN ? -ETIMEDOUT : rc;
			b.left--;
		}
	}
	if (b.left) {
		rma__pump_all(e);
		rma__wait_until(e, batch_done, &b, 0); /* ops carry the deadline */
	} else {
		rma__pump_pending(e); /* every op done at once */
	}
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);

	for (size_t i = 0; i < n; i++)
		failed += results[i] < 0;
	if (failed) {
		report_add(report, report_cap, &len, "%zu of %zu ops failed:", failed, n);
		for (size_t i = 0; i < n; i++)
			if (results[i] < 0)
				report_add(report, report_cap, &len,
					   "\n  op %zu (%s): %s", i,
					   ops[i].kind == RMA_OP_PUT ? "put" : "get",
					   rma_strerror((int)results[i]));
	}
	return (int)failed;
}

static int64_t whole(rma_engine *e, unsigned kind, rma_region *local,
		     const rma_remote *r, int timeout_ms)
{
	struct rma_op op = {.kind = kind, .local = local, .remote = r};
	int64_t res;

	if (!e || !local || !r)
		return -EINVAL;
	if (kind == RMA_OP_GET ? local->len < r->len : local->len > r->len)
		return -EMSGSIZE;
	op.len = kind == RMA_OP_GET ? r->len : local->len;
	int rc = rma_submit(e, &op, 1, timeout_ms, &res, NULL, 0);
	return rc < 0 ? rc : res;
}

RMA_EXPORT int64_t rma_read_into(rma_engine *e, rma_region *local,
				 const rma_remote *r, int timeout_ms)
{
	return whole(e, RMA_OP_GET, local, r, timeout_ms);
}

RMA_EXPORT int64_t rma_write_from(rma_engine *e, rma_region *local,
				  const rma_remote *r, int timeout_ms)
{
	return whole(e, RMA_OP_PUT, local, r, timeout_ms);
}

/* The same on plain memory, through the registration cache. */
static int64_t whole_mem(rma_engine *e, unsigned kind, void *buf, size_t len,
			 const rma_remote *r, int timeout_ms)
{
	struct rma_op op = {.kind = kind, .addr = buf, .remote = r};
	int64_t res;

	if (!e || !buf || !r)
		return -EINVAL;
	if (kind == RMA_OP_GET ? len < r->len : len > r->len)
		return -EMSGSIZE;
	op.len = kind == RMA_OP_GET ? r->len : len;
	int rc = rma_submit(e, &op, 1, timeout_ms, &res, NULL, 0);
	return rc < 0 ? rc : res;
}

RMA_EXPORT int64_t rma_read_into_mem(rma_engine *e, void *buf, size_t len,
				     const rma_remote *r, int timeout_ms)
{
	return whole_mem(e, RMA_OP_GET, buf, len, r, timeout_ms);
}

RMA_EXPORT int64_t rma_write_from_mem(rma_engine *e, const void *buf,
				      size_t len, const rma_remote *r,
				      int timeout_ms)
{
	/* A put only reads it. */
	return whole_mem(e, RMA_OP_PUT, (void *)buf, len, r, timeout_ms);
}
