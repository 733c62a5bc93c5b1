/*
 * cq.c - the completion queue: a ring of cq_depth records that every post
 * reserves a slot in, and the file descriptor that tells of it.
 *
 * cq_fd is an eventfd, written when completions wait and it is not yet
 * readable, and drained when the ring empties, but only once someone may
 * be watching it (rma_completion_fd was called): a program that polls the
 * queue pays no system call per completion.  Nor does one that polls for
 * now and sleeps on the fd later: while an rma_poll caller's lease is
 * current it takes the completions itself, so the fd is written when it
 * arms (rma_arm) or, if it sleeps without arming, when the lease lapses
 * (the progress thread then looks).  With completions coming one by one,
 * a write and a read per completion were two of the eight system calls of
 * a 64 KiB read over ofi:tcp.  With a progress thread it is the completion
 * fd itself.  In manual mode the completion fd is the epoll set, which
 * holds cq_fd (edge-triggered) and the timer fd, so it becomes readable for
 * completions made anywhere, inside rma_post included, and when a deadline
 * passes.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/core.h"

static void cq_watch_cb(struct rma__watch *w, uint32_t events)
{
	/* Nothing to do: the event only made the epoll set readable. */
}

int rma__cq_init(struct rma_engine *e)
{
	e->cq_cap = e->cfg.cq_depth;
	e->cq = calloc(e->cq_cap, sizeof *e->cq);
	if (!e->cq)
		return -ENOMEM;
	e->cq_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (e->cq_fd < 0)
		return -errno;
	if (!(e->flags & RMA_ENGINE_MANUAL_PROGRESS))
		return 0;
	e->cq_watch.fd = e->cq_fd;
	e->cq_watch.cb = cq_watch_cb;
	return rma__watch_add(e, &e->cq_watch, EPOLLIN | EPOLLET);
}

void rma__cq_push(struct rma_engine *e, uint64_t user_data, int64_t res,
		  unsigned flags, uint32_t crc)
{
	uint32_t n = e->cq_count, tail = (e->cq_head + n) % e->cq_cap;
	e->cq[tail].user_data = user_data;
	e->cq[tail].result = res;
	e->cq[tail].crc32c = crc;
	e->cq[tail].flags = flags;
	/* Stored atomically: rma_poll peeks at it without the lock. */
	__atomic_store_n(&e->cq_count, n + 1, __ATOMIC_RELEASE);
	/* A poller with a current lease takes it; rma_arm or the thread
	 * (at the lease's end) writes the fd for what it left.  That thread
	 * must be parked to look at the lease's end: one asleep in epoll
	 * since before the lease began (a transport that completes inside
	 * post wakes no fd of its own) is woken to park.  The coarse clock
	 * (a push per op: the precise one was a quarter of an 8-byte shm
	 * op) may call a lease that just ended current: the woken thread
	 * then finds it over and writes the fd after its round. */
	if (!e->cq_fd_used || e->cq_fd_set)
		return;
	if (!(e->has_thread && __atomic_load_n(&e->poll_lease, __ATOMIC_RELAXED) >
			       rma__coarse_ns()))
		rma__cq_signal(e);
	else
		rma__wake_sleeper(e);
}

/* Make cq_fd readable for the completions that wait (lock held). */
void rma__cq_signal(struct rma_engine *e)
{
	uint64_t one = 1;
	if (!e->cq_fd_used || e->cq_fd_set || !e->cq_count)
		return;
	if (write(e->cq_fd, &one, sizeof one) < 0) {
		/* cannot fail short of a counter overflow */
	}
	e->cq_fd_set = true;
}

/* Take up to max completions from the queue (lock held). */
uint32_t rma__cq_take(struct rma_engine *e, struct rma_completion *out,
		      uint32_t max)
{
	uint32_t n = 0, count = e->cq_count;

	while (n < max && count) {
		out[n++] = e->cq[e->cq_head];
		e->cq_head = (e->cq_head + 1) % e->cq_cap;
		count--;
	}
	e->cq_reserved -= n;
	__atomic_store_n(&e->cq_count, count, __ATOMIC_RELEASE);
	if (n && !count && e->cq_fd_set) {
		e->cq_fd_set = false;
		uint64_t v;
		if (read(e->cq_fd, &v, sizeof v) < 0) {
			/* already drained */
		}
	}
	return n;
}

RMA_EXPORT int rma_poll(rma_engine *e, struct rma_completion *out, size_t max)
{
	uint32_t n;

	if (!e || (!out && max))
		return -EINVAL;
	/* A caller polling drives progress itself (when the queue is empty),
	 * and the progress thread stands aside until the lease runs out,
	 * rather than two threads fighting for the cores and the transports'
	 * locks over the same work.  The lease outlasts a post, a batch of
	 * completions handled, or a turn given to a peer sharing the core:
	 * each time it lapsed under a caller still polling, the thread woke
	 * and took the lock from it (design.md, "Pollers drive progress
	 * too").  rma_arm ends it when the caller goes to sleep.  (Not in
	 * callback mode: completions never come here, and a caller holding a
	 * lock its callback takes must not run it.) */
	int64_t lease = e->cfg.poll_lease_us * 1000LL; /* RMA_NONE: < 0 */
	bool drive = e->has_thread && lease > 0 &&
		     !__atomic_load_n(&e->cb, __ATOMIC_RELAXED);
	if (drive)
		__atomic_store_n(&e->poll_lease, rma__now_ns() + lease,
				 __ATOMIC_RELAXED);
	if (!__atomic_load_n(&e->cq_count, __ATOMIC_ACQUIRE)) {
		if (!drive)
			return 0;
		/* A round can outlast the lease (a large get's bytes are
		 * copied in it): the thread waits for it all the same. */
		__atomic_add_fetch(&e->polling, 1, __ATOMIC_RELAXED);
		/* One op out: no replies to gather, read its socket directly
		 * (rma__progress_once). */
		int try = __atomic_load_n(&e->live, __ATOMIC_RELAXED) <= 1
				  ? RMA__TRY_ANY : RMA__TRY_QUEUE;
		int got = rma__progress_once(e, 0, try);
		__atomic_store_n(&e->poll_lease, rma__now_ns() + lease,
				 __ATOMIC_RELAXED);
		__atomic_sub_fetch(&e->polling, 1, __ATOMIC_RELAXED);
		if (got == 0)
			rma__spin_idle(); /* nothing came: now and then, let a
					   * peer on our core run */
		if (!__atomic_load_n(&e->cq_count, __ATOMIC_ACQUIRE))
			return 0;
	}
	pthread_mutex_lock(&e->mu);
	n = rma__cq_take(e, out, (uint32_t)RMA_MIN(max, UINT32_MAX));
	pthread_mutex_unlock(&e->mu);
	return (int)n;
}

RMA_EXPORT int rma_arm(rma_engine *e)
{
	if (!e)
		return -EINVAL;
	if (__atomic_load_n(&e->cq_count, __ATOMIC_ACQUIRE))
		return -EAGAIN;
	/* The caller is about to sleep: the thread drives from now on.  A
	 * completion added after the lease ends makes the fd readable; one
	 * added during it (a push under the lock that still saw the lease)
	 * is signalled here, under the lock. */
	if (__atomic_exchange_n(&e->poll_lease, 0, __ATOMIC_RELAXED) > rma__now_ns())
		rma__unpark(e);
	pthread_mutex_lock(&e->mu);
	rma__cq_signal(e);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

RMA_EXPORT int rma_completion_fd(rma_engine *e)
{
	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	if (!e->cq_fd_used) {
		/* From now on the fd tells; say so for what already waits. */
		e->cq_fd_used = true;
		rma__cq_signal(e);
	}
	pthread_mutex_unlock(&e->mu);
	return (e->flags & RMA_ENGINE_MANUAL_PROGRESS) ? e->epfd : e->cq_fd;
}
