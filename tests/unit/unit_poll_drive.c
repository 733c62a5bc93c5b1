/*
 * rma_poll on an engine with a progress thread: when nothing waits, the
 * caller drives a progress round itself (the thread stands aside while the
 * caller keeps polling), and once the caller stops polling the thread takes
 * over again: a deadline still fires while the caller sleeps on the
 * completion fd.  The lease (poll_lease_us) holds the thread aside while
 * the caller is away, rma_arm hands progress back at once, and RMA_NONE
 * leaves all progress to the thread.  Completions made under a lease do
 * not write the fd until the caller arms or the lease lapses.  While a
 * caller keeps polling, the parked thread looks ever less often.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

/* Voluntary context switches of this process's other threads (the
 * progress thread): each is a sleep, so a look of a parked thread. */
static long others_switches(void)
{
	char path[300], line[128];
	long sum = 0;
	pid_t self = (pid_t)syscall(SYS_gettid);
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || atoi(de->d_name) == self)
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			if (!strncmp(line, "voluntary_ctxt_switches:", 24))
				sum += atol(line + 24);
		if (f)
			fclose(f);
	}
	closedir(d);
	return sum;
}

/* An engine on the fake transport, a region over buf and a remote for it,
 * which op then names; returns the completion fd. */
static int open_engine(const struct rma_config *cfg, char *buf, rma_engine **e,
		       rma_region **l, rma_remote **r, struct rma_op *op)
{
	CHECK_RC(rma_engine_create(cfg, e), 0);
	CHECK_RC(rma_region_register(*e, buf, 4096, RMA_ACCESS_REMOTE_RW, l), 0);
	*r = fake_remote(*l, 0, 4096);
	op->local = *l;
	op->remote = *r;
	int fd = rma_completion_fd(*e);
	CHECK(fd >= 0);
	return fd;
}

static void close_engine(rma_engine *e, rma_region *l, rma_remote *r)
{
	rma_remote_free(r);
	rma_region_release(l);
	rma_engine_destroy(e);
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);

	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "fake"; /* with its progress thread */
	char *buf = test_alloc(4096);
	rma_region *l;
	rma_remote *r;
	struct rma_op op = { .kind = RMA_OP_PUT, .len = 64, .user_data = 7 };
	int fd = open_engine(&cfg, buf, &e, &l, &r, &op);

	/* 1. Every empty poll runs a round on the calling thread. */
	struct rma_completion c;
	fake.mark = pthread_self();
	__atomic_store_n(&fake.mark_set, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(rma_poll(e, &c, 1), 0);
	CHECKF(fake.progress_on_mark >= 1000,
	       "%u rounds on the polling thread for 1000 empty polls",
	       fake.progress_on_mark);

	/* 2. An op times out while the caller, done polling, sleeps on the
	 * fd: the progress thread must be back to run the deadline. */
	CHECK_RC(rma_post(e, &op, 1, 100, NULL), 1);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(rma_poll(e, &c, 1), 0); /* renews the lease */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t t0 = test_now_ms();
	int n = poll(&p, 1, 10000);
	CHECKF(n == 1, "no completion %lld ms after the last poll",
	       (long long)(test_now_ms() - t0));
	CHECK_EQ(rma_poll(e, &c, 1), 1);
	CHECK_EQ(c.user_data, 7);
	CHECK_RC(c.result, -ETIMEDOUT);

	close_engine(e, l, r);

	/* 3. A long lease: while it holds, the thread stays aside (an op's
	 * deadline needs a progress round to fire), and rma_arm ends it. */
	cfg.poll_lease_us = 5000000;
	p.fd = open_engine(&cfg, buf, &e, &l, &r, &op);
	CHECK_RC(rma_arm(e), 0); /* nothing waits */
	/* The lease first: the post's deadline then wakes the thread only to
	 * see it and park. */
	CHECK_EQ(rma_poll(e, &c, 1), 0);
	CHECK_RC(rma_post(e, &op, 1, 200, NULL), 1);
	CHECKF(poll(&p, 1, 1500) == 0,
	       "the thread ran the 200 ms deadline within the 5 s lease");
	t0 = test_now_ms();
	CHECK_RC(rma_arm(e), 0);
	n = poll(&p, 1, 3000);
	CHECKF(n == 1, "no completion %lld ms after rma_arm (the lease ends "
	       "in 3.5 s)", (long long)(test_now_ms() - t0));
	/* A completion waits: rma_arm says so, and the fd stays readable. */
	CHECK_RC(rma_arm(e), -EAGAIN);
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(rma_poll(e, &c, 1), 1);
	CHECK_EQ(c.user_data, 7);
	CHECK_RC(c.result, -ETIMEDOUT);
	CHECK_RC(rma_arm(e), 0);
	close_engine(e, l, r);

	/* 4. A completion made while a poller's lease holds does not write
	 * the fd (the poller takes it: no system call per completion), yet
	 * one who then sleeps on the fd without rma_arm is told when the
	 * lease lapses. */
	cfg.poll_lease_us = 300000;
	p.fd = open_engine(&cfg, buf, &e, &l, &r, &op);
	for (int round = 0; round < 2; round++) {
		/* The lease first, so the deadline fires under it however
		 * late this thread runs after the post. */
		CHECK_EQ(rma_poll(e, NULL, 0), 0);
		CHECK_RC(rma_post(e, &op, 1, 20, NULL), 1);
		t0 = test_now_ms();
		while (test_now_ms() - t0 < 100) /* the deadline fires here */
			CHECK_EQ(rma_poll(e, NULL, 0), 0);
		CHECKF(poll(&p, 1, 0) == 0, "round %d: the fd was written for a "
		       "completion made under the lease", round);
		if (round == 0) {
			t0 = test_now_ms();
			n = poll(&p, 1, 5000);
			CHECKF(n == 1, "no word %lld ms after the last poll (the "
			       "lease ends in 300 ms)", (long long)(test_now_ms() - t0));
		} else {
			CHECK_RC(rma_arm(e), -EAGAIN); /* it waits: take it */
		}
		CHECK_EQ(rma_poll(e, &c, 1), 1);
		CHECK_RC(c.result, -ETIMEDOUT);
		CHECK_EQ(poll(&p, 1, 0), 0); /* drained with the queue */
	}
	close_engine(e, l, r);

	/* 5. A caller that keeps polling: the parked thread looks at the end
	 * of the (1 ms) lease, then ever less often, not every lease (each
	 * look preempts a spinning thread); once the caller stops, without
	 * rma_arm, the thread still takes over and runs the deadline. */
	cfg.poll_lease_us = 1000;
	p.fd = open_engine(&cfg, buf, &e, &l, &r, &op);
	/* The lease first: the post's deadline then wakes the thread from
	 * its sleep, and it parks. */
	CHECK_EQ(rma_poll(e, &c, 1), 0);
	CHECK_RC(rma_post(e, &op, 1, 500, NULL), 1);
	long before = others_switches();
	t0 = test_now_ms();
	while (test_now_ms() - t0 < 300)
		CHECK_EQ(rma_poll(e, &c, 1), 0);
	long looks = others_switches() - before;
	CHECKF(looks >= 0 && looks < 100, "the parked thread woke %ld times in "
	       "300 ms of polling with a 1 ms lease", looks);
	t0 = test_now_ms();
	n = poll(&p, 1, 5000);
	CHECKF(n == 1, "no completion %lld ms after the last poll (deadline in "
	       "200 ms)", (long long)(test_now_ms() - t0));
	CHECK_EQ(rma_poll(e, &c, 1), 1);
	CHECK_RC(c.result, -ETIMEDOUT);
	close_engine(e, l, r);

	/* 6. RMA_NONE: rma_poll only takes completions; the thread drives. */
	cfg.poll_lease_us = RMA_NONE;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	fake.progress_on_mark = 0;
	for (int i = 0; i < 100; i++)
		CHECK_EQ(rma_poll(e, &c, 1), 0);
	CHECK_EQ(fake.progress_on_mark, 0);
	rma_engine_destroy(e);
	cfg.poll_lease_us = 10000001;
	CHECK_RC(rma_engine_create(&cfg, &e), -EINVAL);
	printf("ok\n");
	return 0;
}
