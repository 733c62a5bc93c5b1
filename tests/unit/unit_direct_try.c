/*
 * Direct tries (design.md section 5): a spinning round calls the hot
 * watch's callback without asking epoll, three rounds in four, and more
 * while rounds come faster than one epoll_wait in EPOLL_GAP_NS (2 us);
 * rounds further apart ask epoll every fourth time.  A socket is tried
 * only while epoll last found work on it alone: after work on another
 * connection every round asks epoll.  The
 * progress thread and rma_submit's waiters try any hot watch; the rounds
 * of rma_progress and rma_poll try only a queue (a watch without an fd,
 * which their transport polls), never a socket: a reply read there as soon
 * as its first bytes land is read in pieces.  The exception is rma_poll
 * with at most one op live: no other replies are coming to gather.
 */
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

struct probe {
	struct rma__watch w;
	pthread_t mark;    /* count only this thread's calls */
	unsigned tried;    /* calls without an event */
	unsigned events;   /* calls with one */
};

/* Always "found work", so that the watch stays hot. */
static void probe_cb(struct rma__watch *w, uint32_t ev)
{
	struct probe *p = container_of(w, struct probe, w);
	if (!pthread_equal(pthread_self(), p->mark))
		return;
	if (ev) {
		uint64_t v;
		p->events++;
		if (read(w->fd, &v, sizeof v) < 0) {
			/* drained already: a level-triggered fd goes quiet */
		}
	} else {
		p->tried++;
	}
}

static void probe_release(struct rma__watch *w)
{
	(void)w;
}

static void probe_init(struct probe *p, int fd)
{
	*p = (struct probe){ .mark = pthread_self() };
	p->w.fd = fd;
	p->w.direct = true;
	p->w.cb = probe_cb;
	p->w.release = probe_release;
}

/* n rounds of rma_progress, apart by gap_us; returns the direct tries they
 * made. */
static unsigned progress_rounds_gap(rma_engine *e, struct probe *p, int n,
				   unsigned gap_us)
{
	unsigned before = p->tried;
	for (int i = 0; i < n; i++) {
		if (gap_us)
			usleep(gap_us);
		CHECK(rma_progress(e, 0) >= 0);
	}
	return p->tried - before;
}

static unsigned progress_rounds(rma_engine *e, struct probe *p, int n)
{
	return progress_rounds_gap(e, p, n, 0);
}

/* Rounds back to back try it at least three times in four, yet epoll is
 * asked (at least once in 200 rounds: they take far over 2 us); rounds
 * apart by more than the gap ask epoll every fourth time. */
static void check_cadence(unsigned fast, unsigned slow, const char *who)
{
	CHECKF(fast >= 150 && fast < 200, "%s tried the hot watch in %u of 200 "
	       "rounds back to back", who, fast);
	CHECKF(slow >= 25 && slow <= 35, "%s tried the hot watch in %u of 40 "
	       "rounds 5 us apart", who, slow);
}

/* n spinning rounds that may try anything (the progress thread's, a
 * waiter's); returns p's direct tries. */
static unsigned thread_rounds(rma_engine *e, struct probe *p, int n)
{
	unsigned before = p->tried;
	for (int i = 0; i < n; i++)
		CHECK(rma__progress_once(e, 0, RMA__TRY_ANY) >= 0);
	return p->tried - before;
}

/* Rounds that may try anything, a few us apart (epoll's turn comes at
 * most once in 2 us), until epoll has reported p once more. */
static void until_event(rma_engine *e, struct probe *p)
{
	unsigned events = p->events;
	for (int i = 0; i < 50 && p->events == events; i++) {
		usleep(3);
		CHECK(rma__progress_once(e, 0, RMA__TRY_ANY) >= 0);
	}
	CHECK_EQ(p->events, events + 1);
}

/* Work on socket p once more, on its own, and the rounds that find it. */
static void again(rma_engine *e, struct probe *p)
{
	uint64_t one = 1;
	CHECK(write(p->w.fd, &one, sizeof one) == sizeof one);
	until_event(e, p);
}

static unsigned poll_rounds(rma_engine *e, struct probe *p, int n)
{
	struct rma_completion c;
	unsigned before = p->tried;
	for (int i = 0; i < n; i++)
		CHECK_EQ(rma_poll(e, &c, 1), 0);
	return p->tried - before;
}

/* A socket-like watch: an eventfd, readable once (one event). */
static int add_socket(rma_engine *e, struct probe *s)
{
	int fd = eventfd(1, EFD_NONBLOCK);
	CHECK(fd >= 0);
	probe_init(s, fd);
	pthread_mutex_lock(&e->mu);
	CHECK_RC(rma__watch_add(e, &s->w, EPOLLIN), 0);
	pthread_mutex_unlock(&e->mu);
	return fd;
}

static void teardown(rma_engine *e, struct probe *s, struct probe *q)
{
	pthread_mutex_lock(&e->mu);
	rma__watch_retire(e, &s->w);
	rma__watch_retire(e, &q->w);
	pthread_mutex_unlock(&e->mu);
	rma_engine_destroy(e);
	close(s->w.fd);
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);

	/* 1. Caller-driven progress: a queue is tried, a socket is not. */
	rma_engine *e = fake_engine(16);
	struct probe q, s;
	probe_init(&q, -1);
	pthread_mutex_lock(&e->mu);
	rma__watch_touch(e, &q.w);
	pthread_mutex_unlock(&e->mu);
	unsigned n = progress_rounds(e, &q, 200);
	check_cadence(n, progress_rounds_gap(e, &q, 40, 5), "rma_progress");

	add_socket(e, &s);
	progress_rounds(e, &s, 4); /* epoll reports it: the socket is hot */
	CHECK_EQ(s.events, 1);
	n = progress_rounds(e, &s, 40);
	CHECKF(n == 0, "rma_progress read a socket directly %u times in 40 rounds", n);
	/* The same hot socket, in rounds that may try anything (the thread's,
	 * a waiter's): not yet, since the epoll that made it hot found work
	 * on another watch (the queue) before it; once epoll finds work on
	 * it alone, it is tried. */
	n = thread_rounds(e, &s, 40);
	CHECKF(n == 0, "a thread's round tried a socket %u times in 40 rounds "
	       "after work on two watches", n);
	again(e, &s);
	unsigned tries[2];
	for (int k = 0; k < 2; k++) {
		unsigned before = s.tried;
		for (int i = 0; i < (k ? 40 : 200); i++) {
			if (k)
				usleep(5);
			CHECK(rma__progress_once(e, 0, RMA__TRY_ANY) >= 0);
		}
		tries[k] = s.tried - before;
	}
	check_cadence(tries[0], tries[1], "a thread's rounds");

	/* Work on a second connection (several peers): the hot socket is no
	 * better a guess than any, and every round asks epoll, until epoll
	 * finds work on one connection alone again. */
	struct probe s2;
	add_socket(e, &s2);
	until_event(e, &s2);
	n = thread_rounds(e, &s2, 40) + thread_rounds(e, &s, 40);
	CHECKF(n == 0, "a thread's round tried a socket %u times in 80 rounds "
	       "after work on two connections", n);
	again(e, &s2);
	n = thread_rounds(e, &s2, 40);
	CHECKF(n >= 20, "a thread's round tried the one busy socket %u times "
	       "in 40 rounds", n);
	pthread_mutex_lock(&e->mu);
	rma__watch_retire(e, &s2.w);
	pthread_mutex_unlock(&e->mu);
	close(s2.w.fd);
	teardown(e, &s, &q);

	/* 2. rma_poll on an engine with a progress thread: its rounds on the
	 * caller's thread follow the same rule. */
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	probe_init(&q, -1);
	pthread_mutex_lock(&e->mu);
	rma__watch_touch(e, &q.w);
	pthread_mutex_unlock(&e->mu);
	n = poll_rounds(e, &q, 40);
	CHECKF(n >= 20, "rma_poll tried the hot queue in %u of 40 rounds", n);

	/* Two ops in flight (counted only: the rule reads no more than the
	 * count), so the caller's rounds leave sockets to epoll, however hot. */
	__atomic_store_n(&e->live, 2, __ATOMIC_RELAXED);
	add_socket(e, &s);
	poll_rounds(e, &s, 8);
	CHECKF(s.events == 1, "the socket's event reached the polling thread %u times",
	       s.events);
	again(e, &s); /* epoll found work on it alone: it is hot */
	n = poll_rounds(e, &s, 40);
	CHECKF(n == 0, "rma_poll read a socket directly %u times in 40 rounds "
	       "with two ops live", n);
	/* One op live: no other replies to gather, so it reads it directly. */
	__atomic_store_n(&e->live, 1, __ATOMIC_RELAXED);
	n = poll_rounds(e, &s, 40);
	CHECKF(n >= 20, "rma_poll tried the hot socket in %u of 40 rounds "
	       "with one op live", n);
	__atomic_store_n(&e->live, 0, __ATOMIC_RELAXED);
	teardown(e, &s, &q);
	printf("ok\n");
	return 0;
}
