/*
 * progress.c - the progress loop: epoll, deadlines, callbacks, and the
 * progress thread.
 *
 * The thread spins (epoll_wait with timeout 0) for spin_us after any
 * activity (longer while work comes at gaps just past it: rma__spin_next),
 * then sleeps until the next deadline: a blocking wake-up across cores
 * costs tens of microseconds, a spinning poll a few.  While a caller
 * waits in rma_submit it drives progress itself and the thread stands
 * aside, so one waiting op costs one spinning core, not two.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

#define PARK_NS 1000000      /* a parked thread's first look */
#define PARK_MAX_NS 10000000 /* the longest it sleeps without a look */
#define SPIN_EPOLL 4         /* a spinning round asks epoll this often, */
#define SPIN_EPOLL_ONE 16    /* or this often while one watch has all the work, */
#define EPOLL_GAP_NS 2000    /* and at most once in this long */
#define ONE_RUNS 4           /* epoll rounds in a row that say so */
#define SPIN_YIELD 4         /* an idle spinning round yields this often, */
#define YIELD_GAP_NS 5000    /* and at most once in this long, */
#define CROWD_HOLD_NS 20000000 /* while a look found the thread kept off
				* its core this recently (RMA__CROWD_LOOK_NS) */
#define SPIN_STRETCH 10      /* spins stretch to at most this many spin_us */

/*
 * How long to spin after activity that came gap_ns after the one before.
 * A peer whose round trips grow just past spin_us (a host that preempted
 * it once) finds us asleep each time, and its next request then waits
 * for our wake-up: on a busy host hundreds of microseconds, so the round
 * trip stays past spin_us, a slow mode that keeps itself up (8-byte tcp
 * ops at 0.6 ms each for the rest of a run, against 15 us).  So spin
 * twice such a gap, up to SPIN_STRETCH x base; a longer gap is idleness,
 * and a shorter one needs only the base.
 */
int64_t rma__spin_next(int64_t base_ns, int64_t gap_ns)
{
	int64_t cap = base_ns * SPIN_STRETCH;
	if (base_ns <= 0 || gap_ns <= base_ns || gap_ns > cap)
		return RMA_MAX(base_ns, 0);
	return RMA_MIN(2 * gap_ns, cap);
}

int rma__watch_add(struct rma_engine *e, struct rma__watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	w->retired = 0;
	return epoll_ctl(e->epfd, EPOLL_CTL_ADD, w->fd, &ev) ? -errno : 0;
}

int rma__watch_mod(struct rma_engine *e, struct rma__watch *w, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = w};
	return epoll_ctl(e->epfd, EPOLL_CTL_MOD, w->fd, &ev) ? -errno : 0;
}

/* Lock held; hot is read without it, as a hint, and checked under it. */
static void set_hot(struct rma_engine *e, struct rma__watch *w)
{
	__atomic_store_n(&e->hot_queue, w->fd < 0, __ATOMIC_RELAXED);
	__atomic_store_n(&e->hot, w, __ATOMIC_RELAXED);
}

/* A direct watch with no fd (a queue its transport polls) found work:
 * spinning rounds try it first.  Lock held. */
void rma__watch_touch(struct rma_engine *e, struct rma__watch *w)
{
	e->touched = true; /* activity, as an fd's event is */
	if (w->direct && !w->retired)
		set_hot(e, w);
}

/* Lock held: the thread publishes poll_until under it before it sleeps. */
bool rma__thread_asleep(const struct rma_engine *e)
{
	return e->has_thread && e->poll_until;
}

/* A transport gave work to something no fd will announce (a queue it
 * polls): a thread asleep in epoll must come and poll. */
void rma__wake_sleeper(struct rma_engine *e)
{
	if (rma__thread_asleep(e))
		rma__wake(e);
}

void rma__watch_retire(struct rma_engine *e, struct rma__watch *w)
{
	if (e->hot == w)
		__atomic_store_n(&e->hot, NULL, __ATOMIC_RELAXED);
	if (w->fd >= 0)
		epoll_ctl(e->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->retired = 1;
	w->gnext = e->grave;
	e->grave = w;
}

/* Release retired watches once no thread can hold an event naming one:
 * a poller that started after the EPOLL_CTL_DEL cannot see them. */
static void bury(struct rma_engine *e)
{
	if (!e->grave || __atomic_load_n(&e->pollers, __ATOMIC_SEQ_CST))
		return;
	struct rma__watch *w = e->grave;
	e->grave = NULL;
	while (w) {
		struct rma__watch *next = w->gnext;
		if (w->release)
			w->release(w);
		w = next;
	}
}

/* The earliest deadline moved before the sleeping thread's wake-up time:
 * wake it so it re-times its sleep.  Lock held. */
void rma__retime(struct rma_engine *e)
{
	int64_t next = rma__timers_next(e);
	if (e->has_thread && e->poll_until && next && next < e->poll_until)
		rma__wake(e);
}

/* The timer fd fired: the round's rma__timers_run does the work. */
static void timer_cb(struct rma__watch *w, uint32_t events)
{
	uint64_t v;
	if (read(w->fd, &v, sizeof v) < 0) {
		/* EAGAIN: re-armed meanwhile */
	}
}

int rma__progress_init(struct rma_engine *e)
{
	e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (e->timer_fd < 0)
		return -errno;
	e->timer_watch.fd = e->timer_fd;
	e->timer_watch.cb = timer_cb;
	return rma__watch_add(e, &e->timer_watch, EPOLLIN);
}

void rma__wake(struct rma_engine *e)
{
	uint64_t one = 1;
	if (write(e->wake_fd, &one, sizeof one) < 0) {
		/* counter full: it is readable anyway */
	}
}

/*
 * One round: the events of ready fds, each transport's progress hook,
 * deadlines, freed credits.  Returns the events that found work.
 *
 * A spinning round (timeout 0) of a waiter or the thread (direct) tries
 * the hot watch first, the direct one (tcp's connections) whose callback
 * last found work: a read that finds the reply is one system call where
 * epoll_wait and the read are two, and an empty one costs what an empty
 * epoll_wait does.  Every SPIN_EPOLL-th spinning round, and every round
 * without a hot watch, asks epoll, so other fds wait a few microseconds at
 * most; every round while work comes on several connections (the last
 * epoll that found work found it on another: with 64 peers, trying the
 * hot one found nothing three times per request); and every
 * SPIN_EPOLL_ONE-th while epoll keeps finding work only on the hot watch
 * (one peer), since each empty epoll_wait delays that peer's next
 * request.  The rounds of rma_poll and rma_progress try only a queue
 * (RMA__TRY_QUEUE: ofi's completion queue, which every round reads
 * anyway, so epoll is the round's only extra system call); a socket waits
 * for epoll there: those rounds run between a caller's posts, and reading
 * as soon as a byte lands would split the replies that a round of epoll
 * lets gather (except an rma_poll with one op live, which has none to
 * gather: rma_poll passes RMA__TRY_ANY then).
 */
int rma__progress_once(struct rma_engine *e, int timeout_ms, int try)
{
	struct epoll_event ev[64];
	int n = 0, active = 0, err = 0;

	unsigned runs = __atomic_load_n(&e->hot_runs, __ATOMIC_RELAXED);
	unsigned every = runs >= ONE_RUNS ? SPIN_EPOLL_ONE : SPIN_EPOLL;
	int64_t now = 0; /* read once in a spinning round */
	bool queue = __atomic_load_n(&e->hot_queue, __ATOMIC_RELAXED);
	/* A socket only while it is the one with the work (runs > 0). */
	bool direct = try && !timeout_ms && __atomic_load_n(&e->hot, __ATOMIC_RELAXED) &&
		      (queue || runs) && (try == RMA__TRY_ANY || queue);
	if (direct && !(__atomic_add_fetch(&e->spins, 1, __ATOMIC_RELAXED) % every)) {
		/* Epoll's turn by count; but a round of a polled queue is a
		 * tenth of a round of a socket: not twice in EPOLL_GAP_NS. */
		now = rma__now_ns();
		direct = now - __atomic_load_n(&e->epoll_at, __ATOMIC_RELAXED) < EPOLL_GAP_NS;
	}
	if (direct) {
		pthread_mutex_lock(&e->mu);
		struct rma__watch *w = e->hot;
		if (w && w->direct && (try == RMA__TRY_ANY || w->fd < 0)) {
			w->quiet = false;
			w->cb(w, 0);
			active = !w->quiet;
		} else if (!w || !w->direct) {
			/* it opted out: epoll from the next round */
			__atomic_store_n(&e->hot, NULL, __ATOMIC_RELAXED);
		} /* else a socket became hot meanwhile: not this round's to try */
	} else {
		__atomic_add_fetch(&e->pollers, 1, __ATOMIC_SEQ_CST);
		n = epoll_wait(e->epfd, ev, 64, timeout_ms);
		err = errno;
		if (!now || timeout_ms) /* it may have slept */
			now = rma__now_ns();
		__atomic_store_n(&e->epoll_at, now, __ATOMIC_RELAXED);
		pthread_mutex_lock(&e->mu);
		__atomic_sub_fetch(&e->pollers, 1, __ATOMIC_SEQ_CST);
		struct rma__watch *was = e->hot;
		bool other = false;
		for (int i = 0; i < n; i++) {
			struct rma__watch *w = ev[i].data.ptr;
			if (!w->retired) {
				w->quiet = false;
				w->cb(w, ev[i].events);
				if (!w->quiet) {
					active++;
					other |= w->direct && w != was;
					if (w->direct && !w->retired)
						set_hot(e, w);
				}
			}
		}
		/* Work on another connection (requests from several peers):
		 * ask epoll often again, so none waits behind the hot one. */
		if (active)
			__atomic_store_n(&e->hot_runs,
					 other ? 0 : RMA_MIN(e->hot_runs + 1, ONE_RUNS),
					 __ATOMIC_RELAXED);
	}
	/* Completions the hooks found (queues a transport polls) are work
	 * too: a caller in rma_poll must not yield after them, and a thread
	 * that took them keeps spinning. */
	uint32_t had = e->cq_count;
	for (unsigned i = 0; i < e->ntr; i++)
		e->tr[i]->ops->progress(e->tr[i]);
	if (e->cq_count > had || e->touched)
		active++;
	e->touched = false;
	if (!now)
		now = rma__now_ns();
	if (active > 0) {
		e->spin_ns = rma__spin_next((int64_t)e->cfg.spin_us * 1000,
					    now - e->last_activity);
		e->last_activity = now;
	}
	rma__pump_pending(e);
	if (rma__timers_due(e, now)) {
		rma__timers_run(e, now);
		rma__pump_pending(e); /* what expired timers freed */
	}
	bury(e);
	/* Threads sleeping in wait_until() re-check their condition. */
	pthread_cond_broadcast(&e->done_cv);
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);
	return n < 0 ? -err : active;
}

/*
 * A spinning round found nothing: every SPIN_YIELD-th time, let a thread
 * sharing this core run (often the very peer being waited for).  Not every
 * time: a yield is a system call, and on a host where a system call costs
 * a microsecond, yielding after every empty round made each side of an
 * 8-byte round trip notice the reply about half a microsecond later.  Nor
 * more than once in YIELD_GAP_NS: the empty rounds of a polled queue (shm's
 * ring) take a fraction of a yield, and every fourth one kept a spinner in
 * sched_yield most of the time.  A thread allowed on one CPU only shares
 * it with whatever it waits for: it yields every time.
 *
 * And only while the core is shared.  A yield that finds nobody else
 * runnable comes straight back, a system call for nothing, and a reply
 * that lands meanwhile waits for it (without them an 8-byte tcp get took
 * 1.13x the ping-pong's round trip where it took 1.17x; design.md 5).
 * So every RMA__CROWD_LOOK_NS a spinner reads its usage (getrusage): it
 * shares its core if, since the last look, it was switched out while it
 * could still run (ru_nivcsw: preempted, or a yield that let another
 * thread run) and ran for less than three quarters of the time.  A
 * thread that woke for a moment (a parked progress thread looking, a
 * kernel worker) takes a few microseconds and does not count; a busy
 * process, or the very peer we wait for placed on our core, takes the
 * core for a time slice and does.  Then it yields as before, for CROWD_HOLD_NS from the last such
 * look: a competitor preempts a spinner once a slice, and a yield that
 * hands the core over counts as a switch too.
 */
void rma__crowd_look(struct rma__crowd *c, int64_t now, const struct rusage *ru)
{
	if (!ru) { /* unknown: yield, as ever */
		c->crowded = now;
	} else {
		int64_t ran = ((int64_t)ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000000 +
			      ((int64_t)ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1000;
		if (c->looked && ru->ru_nivcsw != c->switched &&
		    4 * (ran - c->ran) < 3 * (now - c->looked))
			c->crowded = now;
		c->switched = ru->ru_nivcsw;
		c->ran = ran;
	}
	c->looked = now;
}

bool rma__crowd_shared(const struct rma__crowd *c, int64_t now)
{
	return now - c->crowded <= CROWD_HOLD_NS;
}

void rma__spin_idle(void)
{
	static __thread unsigned idle, every;
	static __thread int64_t yielded;
	static __thread struct rma__crowd crowd;

	if (!every) {
		cpu_set_t set;
		every = sched_getaffinity(0, sizeof set, &set) == 0 &&
				CPU_COUNT(&set) == 1 ? 1 : SPIN_YIELD;
		crowd.crowded = rma__now_ns(); /* until a look says otherwise */
	}
	if (++idle % every)
		return;
	if (every > 1) {
		int64_t now = rma__now_ns();
		if (now - crowd.looked >= RMA__CROWD_LOOK_NS) {
			struct rusage ru;
			rma__crowd_look(&crowd, now, getrusage(RUSAGE_THREAD, &ru) ? NULL : &ru);
		}
		if (!rma__crowd_shared(&crowd, now) || now - yielded < YIELD_GAP_NS)
			return;
		yielded = now;
	}
	sched_yield();
}

void rma__deliver_callbacks(struct rma_engine *e)
{
	struct rma_completion batch[64];

	if (!__atomic_load_n(&e->cq_count, __ATOMIC_ACQUIRE))
		return; /* the common case, without the lock */
	pthread_mutex_lock(&e->mu);
	/* One thread delivers at a time, so callbacks arrive in order. */
	while (e->cb && !e->in_cb && e->cq_count) {
		rma_complete_cb cb = e->cb;
		void *arg = e->cb_arg;
		uint32_t n = rma__cq_take(e, batch, RMA_ARRAY_SIZE(batch));
		e->in_cb = true;
		pthread_mutex_unlock(&e->mu);
		cb(arg, batch, n);
		pthread_mutex_lock(&e->mu);
		e->in_cb = false;
	}
	pthread_mutex_unlock(&e->mu);
}

/* How long the thread may sleep: not while spinning, nor past the next
 * timer, a transport's poll interval, or a stalled peer's retry; and only
 * if every transport agrees (arm). */
static int sleep_ms(struct rma_engine *e)
{
	int64_t now = rma__now_ns();
	int64_t ms = 1000, next = rma__timers_next(e);

	if (now - e->last_activity < e->spin_ns)
		return 0;
	if (next)
		ms = RMA_MIN(ms, RMA_MAX(0, (next - now) / 1000000 + 1));
	if (e->poll_ns)
		ms = RMA_MIN(ms, (e->poll_ns + 999999) / 1000000);
	if (e->pump) /* completions freed credits (a transport that copies
		      * inside post): post more now */
		ms = 0;
	else if (e->stalled)
		ms = RMA_MIN(ms, 1);
	if (ms && rma__arm_all(e))
		ms = 0;
	return (int)ms;
}

/* About to sleep in epoll: 0 if every transport agrees, -EAGAIN if one
 * found work meanwhile (or must be polled).  Lock held. */
int rma__arm_all(struct rma_engine *e)
{
	for (unsigned i = 0; i < e->ntr; i++)
		if (e->tr[i]->ops->arm(e->tr[i]) == -EAGAIN)
			return -EAGAIN;
	return 0;
}

/* Someone else drives progress: a waiter in rma__wait_until (or one that
 * left within PARK_NS: a loop of rma_submit is between two calls), or an
 * rma_poll caller inside a round or whose lease is current. */
static bool driven(struct rma_engine *e, int64_t *lease)
{
	int64_t now = rma__now_ns();
	*lease = __atomic_load_n(&e->poll_lease, __ATOMIC_RELAXED);
	return __atomic_load_n(&e->waiters, __ATOMIC_RELAXED) || *lease > now ||
	       __atomic_load_n(&e->polling, __ATOMIC_RELAXED) ||
	       now - __atomic_load_n(&e->waiter_left, __ATOMIC_RELAXED) < PARK_NS;
}

/*
 * Stand aside while a caller drives progress.  Sleep on park_mu, not mu:
 * taking mu to look would make a spinning caller wait for this thread.
 * Each look is a wake-up that takes a core from a spinning caller for tens
 * of microseconds, the tail of its latency: so a waiter leaves without
 * waking us (a loop of rma_submit keeps the cores) unless it leaves work
 * that nobody drives, and we look after PARK_NS, then ever less often, up
 * to PARK_MAX_NS, while callers keep driving.  Between two waits of such
 * a loop, a look also serves what arrived (peers' requests) with one
 * round.  A poller's lease is looked at when it ends, and while the
 * poller keeps renewing it, after PARK_NS, then ever less often too.
 */
static void park(struct rma_engine *e)
{
	int64_t lease, wait = PARK_NS, look = 0;

	pthread_mutex_lock(&e->park_mu);
	while (!__atomic_load_n(&e->stop, __ATOMIC_RELAXED) && driven(e, &lease)) {
		bool waiter = __atomic_load_n(&e->waiters, __ATOMIC_RELAXED) ||
			      lease < __atomic_load_n(&e->waiter_left, __ATOMIC_RELAXED);
		int64_t now = rma__now_ns(), until;
		if (waiter) {
			until = now + wait;
			wait = RMA_MIN(2 * wait, PARK_MAX_NS);
		} else {
			/* Only a poller drives: look when its lease ends (one
			 * that went to sleep on the completion fd needs us),
			 * and while it keeps renewing it, ever less often: each
			 * look preempts a spinning thread (the poller or its
			 * peer), and looks every 1 ms cost 64 KiB ofi:tcp runs
			 * a fifth of their bandwidth. */
			until = RMA_MAX(lease, now + (look ? look : 1000));
			look = look ? RMA_MIN(2 * look, PARK_MAX_NS) : PARK_NS;
		}
		struct timespec ts = {(time_t)(until / 1000000000),
				      (long)(until % 1000000000)};
		if (pthread_cond_timedwait(&e->pt_cv, &e->park_mu, &ts) == ETIMEDOUT &&
		    waiter && !__atomic_load_n(&e->waiters, __ATOMIC_RELAXED) &&
		    !__atomic_load_n(&e->polling, __ATOMIC_RELAXED) &&
		    __atomic_load_n(&e->poll_lease, __ATOMIC_RELAXED) < rma__now_ns()) {
			pthread_mutex_unlock(&e->park_mu);
			rma__progress_once(e, 0, RMA__TRY_NONE);
			pthread_mutex_lock(&e->park_mu);
		}
	}
	pthread_mutex_unlock(&e->park_mu);
}

/* Wake a parked progress thread: the last waiter left work behind or went
 * to sleep, or shutdown. */
void rma__unpark(struct rma_engine *e)
{
	pthread_mutex_lock(&e->park_mu);
	pthread_cond_broadcast(&e->pt_cv);
	pthread_mutex_unlock(&e->park_mu);
}

static void *thread_main(void *arg)
{
	struct rma_engine *e = arg;
	int64_t lease;

	pthread_mutex_lock(&e->mu);
	while (!e->stop) {
		if (driven(e, &lease)) {
			pthread_mutex_unlock(&e->mu);
			park(e);
			pthread_mutex_lock(&e->mu);
			/* Back on duty: sleep in epoll rather than spin, so a
			 * caller about to wait again keeps the cores.  A poller
			 * whose lease lapsed without rma_arm may sleep on the
			 * completion fd: make it tell of what waits (cq.c). */
			e->last_activity = 0;
			rma__cq_signal(e);
			continue;
		}
		int timeout = sleep_ms(e);
		/* Published so that an earlier deadline can wake us. */
		e->poll_until = timeout ? rma__now_ns() + (int64_t)timeout * 1000000 : 0;
		pthread_mutex_unlock(&e->mu);
		/* Spinning: when a round finds nothing, let a thread sharing
		 * this core run (it may be the one we are waiting for). */
		if (rma__progress_once(e, timeout, RMA__TRY_ANY) == 0 && !timeout)
			rma__spin_idle();
		pthread_mutex_lock(&e->mu);
		e->poll_until = 0;
		/* Completions a push left to a lease that had in fact ended
		 * (cq.c reads the coarse clock): nobody takes them now. */
		if (e->cq_fd_used && !e->cq_fd_set && e->cq_count && !driven(e, &lease))
			rma__cq_signal(e);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

int rma__progress_start(struct rma_engine *e)
{
	int rc = pthread_create(&e->thread, NULL, thread_main, e);
	if (rc)
		return -rc;
	e->has_thread = true;
	return 0;
}

void rma__progress_stop(struct rma_engine *e)
{
	if (!e->has_thread)
		return;
	pthread_mutex_lock(&e->mu);
	__atomic_store_n(&e->stop, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&e->mu);
	rma__unpark(e);
	rma__wake(e);
	pthread_join(e->thread, NULL);
	e->has_thread = false;
}

RMA_EXPORT int rma_progress(rma_engine *e, int timeout_ms)
{
	if (!e)
		return -EINVAL;
	if (timeout_ms) { /* a sleep: the transports that poll must agree */
		pthread_mutex_lock(&e->mu);
		if (rma__arm_all(e))
			timeout_ms = 0;
		pthread_mutex_unlock(&e->mu);
	}
	int rc = rma__progress_once(e, timeout_ms, RMA__TRY_QUEUE);
	if (rc < 0 && rc != -EINTR)
		return rc;
	pthread_mutex_lock(&e->mu);
	rc = (int)e->cq_count;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

RMA_EXPORT int rma_set_callback(rma_engine *e, rma_complete_cb cb, void *arg)
{
	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	__atomic_store_n(&e->cb, cb, __ATOMIC_RELAXED); /* rma_poll peeks at it */
	e->cb_arg = arg;
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);
	return 0;
}
