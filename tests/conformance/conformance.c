/*
 * conformance.c - the contract every transport keeps, through the public
 * API only.  Usage: conformance TRANSPORT [CASE]  (no CASE: all of them).
 *
 * Each case forks a target process (tests/lib/target.c) whose engine uses
 * TRANSPORT, and acts as the initiator with an engine of its own.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "target.h"
#include "testlib.h"

#define MiB (1u << 20)

static const char *transport;
static bool alloc_mem; /* TRANSPORT-alloc: the target's memory is a memfd */

static rma_engine *engine(unsigned flags)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = transport;
	cfg.flags = flags;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static rma_region *region(rma_engine *e, void *p, size_t len)
{
	rma_region *r;
	CHECK_RC(rma_region_register(e, p, len, 0, &r), 0);
	return r;
}

static rma_remote *parse(const char *tok)
{
	rma_remote *r;
	CHECK_RC(rma_remote_parse(tok, &r), 0);
	return r;
}

static rma_remote *remote(struct target *t, const char *name, uint64_t off,
			  uint64_t len, unsigned access)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	target_token(t, name, off, len, access, tok, sizeof tok);
	return parse(tok);
}

/* One op through rma_submit; the report must name it when it fails. */
static int64_t op1(rma_engine *e, unsigned kind, rma_region *l, uint64_t loff,
		   const rma_remote *r, uint64_t roff, uint64_t len, int timeout_ms)
{
	struct rma_op op = { .kind = kind, .local = l, .local_off = loff,
			     .remote = r, .remote_off = roff, .len = len };
	int64_t res = INT64_MIN;
	char report[512];
	int rc = rma_submit(e, &op, 1, timeout_ms, &res, report, sizeof report);
	CHECKF(res != INT64_MIN, "rma_submit left results[0] unset");
	CHECKF(rc == (res < 0), "rma_submit returned %d with result %lld", rc,
	       (long long)res);
	if (res < 0)
		CHECKF(strstr(report, "op 0") != NULL,
		       "report does not name op 0: '%s'", report);
	return res;
}

static int start(struct target *t, size_t rw_size, uint64_t rw_seed)
{
	static struct target_opts o; /* the child reads it after fork */
	o.transports = transport;
	o.alloc = alloc_mem;
	o.rw_size = rw_size;
	o.rw_seed = rw_seed;
	return target_start(t, &o);
}

/* For cases that need ops a stopped target cannot finish.  shm copies
 * without the target's help, except that a memfd region is mapped on first
 * use through the target: give it such memory. */
/* A stopped verbs target's NIC still answers every read and write: its
 * process has no part in them.  Stalling it would need its link cut, and
 * rxe on Debian 12's kernel serves only the initial network namespace, so
 * the suite's cases that stall a target end there for verbs (77), after
 * what they check first; the fault matrix's link case covers the rest. */
static bool served_by_nic(void)
{
	return !strncmp(transport, "verbs", 5);
}

static int start_stallable(struct target *t, size_t rw_size, uint64_t rw_seed)
{
	bool was = alloc_mem;
	if (!strcmp(transport, "shm"))
		alloc_mem = true;
	int rc = start(t, rw_size, rw_seed);
	alloc_mem = was;
	return rc;
}

/* ------------------------------------------------------------------ */

/* Puts and gets of random sizes (1 B .. 64 MiB) at random offsets; a local
 * mirror of the target's memory checks every byte. */
static int case_putget(void)
{
	uint64_t seed = test_seed("putget");
	const size_t S = 64 * MiB;
	uint64_t tseed = test_rand(&seed) | 1, sseed = test_rand(&seed) | 1;
	struct target t;
	int rc = start(&t, S, tseed);
	if (rc)
		return rc;

	rma_engine *e = engine(0);
	char *mirror = test_alloc(S), *src = test_alloc(S), *dst = test_alloc(S);
	test_fill(mirror, S, tseed);
	test_fill(src, S, sseed);
	test_fill(dst, S, sseed ^ 0xabcdef);
	rma_region *ls = region(e, src, S), *ld = region(e, dst, S);
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);
	CHECK_EQ(rma_remote_length(rem), S);
	CHECK_EQ(rma_remote_access(rem), RMA_ACCESS_REMOTE_RW);

	for (int it = 0; it < 24; it++) {
		uint64_t size, roff, loff;
		if (it == 0)
			size = 1;
		else if (it == 1 || it == 2)
			size = S;
		else {
			unsigned bits = (unsigned)test_rand_range(&seed, 0, 25);
			size = test_rand_range(&seed, 1ull << bits, 2ull << bits);
		}
		roff = test_rand_range(&seed, 0, S - size);
		loff = test_rand_range(&seed, 0, S - size);
		unsigned kind = it == 2 ? RMA_OP_GET
			      : it < 2 ? RMA_OP_PUT
				       : (unsigned)test_rand_range(&seed, 1, 2);
		printf("  %2d: %s %10llu bytes local %llu remote %llu\n", it,
		       kind == RMA_OP_PUT ? "put" : "get",
		       (unsigned long long)size, (unsigned long long)loff,
		       (unsigned long long)roff);
		if (kind == RMA_OP_PUT) {
			CHECK_RC(op1(e, RMA_OP_PUT, ls, loff, rem, roff, size, 30000),
				 (int64_t)size);
			memcpy(mirror + roff, src + loff, size);
			CHECK_EQ_U64(target_crc(&t, "rw", roff, size),
				     rma_crc32c(0, src + loff, size));
		} else {
			uint8_t before[16], after[16];
			size_t nb = loff < 16 ? loff : 16;
			size_t na = S - loff - size < 16 ? S - loff - size : 16;
			memcpy(before, dst + loff - nb, nb);
			memcpy(after, dst + loff + size, na);
			CHECK_RC(op1(e, RMA_OP_GET, ld, loff, rem, roff, size, 30000),
				 (int64_t)size);
			CHECKF(!memcmp(dst + loff, mirror + roff, size),
			       "get of %llu bytes at %llu: data differs",
			       (unsigned long long)size, (unsigned long long)roff);
			CHECKF(!memcmp(before, dst + loff - nb, nb) &&
			       !memcmp(after, dst + loff + size, na),
			       "get wrote outside its local range");
		}
	}
	CHECK_EQ_U64(target_crc(&t, "rw", 0, S), rma_crc32c(0, mirror, S));

	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

/* 1000 mixed puts and gets in one rma_submit: exactly 1000 results; then
 * a batch with bad ops in it, and the same through rma_post/rma_poll. */
static int case_batch(void)
{
	uint64_t seed = test_seed("batch");
	enum { N = 1000, SLOT = 8192 };
	const size_t S = 16 * MiB, L = (size_t)N * SLOT;
	uint64_t tseed = test_rand(&seed) | 1;
	struct target t;
	int rc = start(&t, S, tseed);
	if (rc)
		return rc;

	rma_engine *e = engine(0);
	char *mirror = test_alloc(S), *src = test_alloc(L), *dst = test_alloc(L);
	test_fill(mirror, S, tseed);
	test_fill(src, L, tseed ^ 77);
	rma_region *ls = region(e, src, L), *ld = region(e, dst, L);
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);
	static struct rma_op ops[N];
	static int64_t res[N];
	char report[8192];

	for (int i = 0; i < N; i++) {
		unsigned kind = (unsigned)test_rand_range(&seed, 1, 2);
		ops[i] = (struct rma_op){ .kind = kind,
					  .local = kind == RMA_OP_PUT ? ls : ld,
					  .local_off = (uint64_t)i * SLOT,
					  .remote = rem,
					  .remote_off = (uint64_t)i * SLOT,
					  .len = test_rand_range(&seed, 1, SLOT),
					  .user_data = (uint64_t)i };
		res[i] = INT64_MIN;
	}
	CHECK_RC(rma_submit(e, ops, N, 30000, res, report, sizeof report), 0);
	for (int i = 0; i < N; i++) {
		CHECKF(res[i] == (int64_t)ops[i].len,
		       "op %d (%s, %llu bytes): result %lld", i,
		       ops[i].kind == RMA_OP_PUT ? "put" : "get",
		       (unsigned long long)ops[i].len, (long long)res[i]);
		char *l = (ops[i].kind == RMA_OP_PUT ? src : dst) + (size_t)i * SLOT;
		if (ops[i].kind == RMA_OP_GET)
			CHECKF(!memcmp(l, mirror + (size_t)i * SLOT, ops[i].len),
			       "get %d: data differs", i);
		else
			memcpy(mirror + (size_t)i * SLOT, l, ops[i].len);
	}
	CHECK_EQ_U64(target_crc(&t, "rw", 0, S), rma_crc32c(0, mirror, S));

	/* Two bad ops in the batch: the rest still run; the report names
	 * each failed op by index. */
	ops[10].remote_off = S;  /* past the end */
	ops[500].local_off = L;  /* past the local end */
	for (int i = 0; i < N; i++)
		res[i] = INT64_MIN;
	CHECK_RC(rma_submit(e, ops, N, 30000, res, report, sizeof report), 2);
	for (int i = 0; i < N; i++) {
		if (i == 10 || i == 500)
			CHECK_RC(res[i], -ERANGE);
		else
			CHECKF(res[i] == (int64_t)ops[i].len, "op %d: result %lld",
			       i, (long long)res[i]);
	}
	CHECKF(strstr(report, "op 10 ") && strstr(report, "op 500 ") &&
	       !strstr(report, "op 11 "), "report: '%s'", report);
	printf("report: %s\n", report);
	ops[10].remote_off = 10 * SLOT;
	ops[500].local_off = 500 * SLOT;

	/* The same 1000 through rma_post: 1000 completions, one per op. */
	static unsigned char seen[N];
	memset(seen, 0, sizeof seen);
	CHECK_RC(rma_post(e, ops, N, 30000, NULL), N);
	int got = 0;
	int64_t end = test_now_ms() + 30000;
	while (got < N && test_now_ms() < end) {
		struct rma_completion c[64];
		int n = rma_poll(e, c, 64);
		CHECK_OK(n);
		for (int k = 0; k < n; k++) {
			CHECK(c[k].user_data < N);
			CHECKF(!seen[c[k].user_data], "op %llu completed twice",
			       (unsigned long long)c[k].user_data);
			seen[c[k].user_data] = 1;
			CHECK_EQ(c[k].result, (long long)ops[c[k].user_data].len);
		}
		got += n;
		if (!n)
			test_sleep_ms(1);
	}
	CHECK_EQ(got, N);
	test_sleep_ms(50);
	struct rma_completion extra;
	CHECK_EQ(rma_poll(e, &extra, 1), 0);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

/* rma_read_into / rma_write_from: whole buffers, -EMSGSIZE on mismatch. */
static int case_sizes(void)
{
	const uint64_t W = MiB, OFF = 4096;
	struct target t;
	int rc = start(&t, 4 * MiB, 1234);
	if (rc)
		return rc;
	rma_engine *e = engine(0);
	char *big = test_alloc(2 * W), *eq = test_alloc(W), *small = test_alloc(W / 2);
	rma_region *rbig = region(e, big, 2 * W), *req = region(e, eq, W),
		   *rsmall = region(e, small, W / 2);
	rma_remote *rem = remote(&t, "rw", OFF, W, 0);
	CHECK_EQ(rma_remote_length(rem), W);
	uint32_t wcrc = target_crc(&t, "rw", OFF, W);
	uint32_t head = target_crc(&t, "rw", 0, OFF);
	uint32_t tail = target_crc(&t, "rw", OFF + W, 4 * MiB - OFF - W);

	CHECK_RC(rma_read_into(e, req, rem, 10000), (int64_t)W);
	CHECK_EQ_U64(rma_crc32c(0, eq, W), wcrc);
	memset(big, 0x5a, 2 * W);
	CHECK_RC(rma_read_into(e, rbig, rem, 10000), (int64_t)W);
	CHECK_EQ_U64(rma_crc32c(0, big, W), wcrc);
	for (uint64_t i = W; i < 2 * W; i++)
		CHECKF(big[i] == 0x5a, "read_into wrote past the remote length (%llu)",
		       (unsigned long long)i);
	CHECK_RC(rma_read_into(e, rsmall, rem, 10000), -EMSGSIZE);

	test_fill(small, W / 2, 99);
	CHECK_RC(rma_write_from(e, rsmall, rem, 10000), (int64_t)(W / 2));
	CHECK_EQ_U64(target_crc(&t, "rw", OFF, W / 2), rma_crc32c(0, small, W / 2));
	CHECK_EQ_U64(target_crc(&t, "rw", OFF + W / 2, W / 2),
		     rma_crc32c(0, eq + W / 2, W / 2));
	test_fill(eq, W, 98);
	CHECK_RC(rma_write_from(e, req, rem, 10000), (int64_t)W);
	CHECK_EQ_U64(target_crc(&t, "rw", OFF, W), rma_crc32c(0, eq, W));
	CHECK_RC(rma_write_from(e, rbig, rem, 10000), -EMSGSIZE);
	/* Nothing outside the window was touched. */
	CHECK_EQ_U64(target_crc(&t, "rw", 0, OFF), head);
	CHECK_EQ_U64(target_crc(&t, "rw", OFF + W, 4 * MiB - OFF - W), tail);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

/* Poll until want completions arrived or timeout_ms passed. */
static int collect(rma_engine *e, struct rma_completion *c, int want,
		   int timeout_ms)
{
	int got = 0;
	for (int64_t end = test_now_ms() + timeout_ms;
	     got < want && test_now_ms() < end;) {
		int n = rma_poll(e, c + got, (size_t)(want - got));
		CHECK_OK(n);
		got += n;
		if (!n)
			test_sleep_ms(1);
	}
	return got;
}

struct cbstate {
	pthread_mutex_t mu;
	int n;
	uint64_t mask;
	int bad;
};

static void on_complete(void *arg, const struct rma_completion *c, size_t n)
{
	struct cbstate *s = arg;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++) {
		if (c[i].user_data >= 64 || c[i].result != 4096 ||
		    (s->mask & (1ull << c[i].user_data)))
			s->bad++;
		else
			s->mask |= 1ull << c[i].user_data;
		s->n++;
	}
	pthread_mutex_unlock(&s->mu);
}

static int fd_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r = poll(&p, 1, timeout_ms);
	CHECK(r >= 0);
	return r > 0 && (p.revents & POLLIN);
}

/* post + poll, the completion fd (thread and manual progress), the
 * callback, and rma_post's partial-post rule. */
static int case_completion(void)
{
	struct target t;
	int rc = start(&t, 4 * MiB, 5);
	if (rc)
		return rc;
	char *buf = test_alloc(MiB);
	struct rma_completion c[64];

	/* Thread progress: post, then poll until all arrive. */
	rma_engine *e = engine(0);
	rma_region *l = region(e, buf, MiB);
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);
	struct rma_op ops[16];
	for (int i = 0; i < 16; i++)
		ops[i] = (struct rma_op){ .kind = i % 2 ? RMA_OP_GET : RMA_OP_PUT,
					  .local = l, .local_off = (uint64_t)i * 4096,
					  .remote = rem,
					  .remote_off = (uint64_t)i * 4096,
					  .len = 4096, .user_data = (uint64_t)i };
	CHECK_RC(rma_post(e, ops, 16, 10000, NULL), 16);
	unsigned mask = 0;
	int got = 0;
	for (int64_t end = test_now_ms() + 10000; got < 16 && test_now_ms() < end;) {
		int n = rma_poll(e, c, 64);
		CHECK_OK(n);
		for (int i = 0; i < n; i++) {
			CHECK(c[i].user_data < 16);
			CHECK(!(mask & (1u << c[i].user_data)));
			mask |= 1u << c[i].user_data;
			CHECK_EQ(c[i].result, 4096);
		}
		got += n;
		if (!n)
			test_sleep_ms(1);
	}
	CHECK_EQ(got, 16);

	/* The completion fd: readable when a completion waits, not after. */
	int fd = rma_completion_fd(e);
	CHECK(fd >= 0);
	CHECK(!fd_readable(fd, 0));
	CHECK_RC(rma_post(e, ops, 1, 10000, NULL), 1);
	CHECKF(fd_readable(fd, 10000), "completion fd not readable in 10 s");
	CHECK_EQ(rma_poll(e, c, 64), 1);
	CHECK_EQ(c[0].result, 4096);
	CHECK(!fd_readable(fd, 0));

	/* Callback mode: completions go to cb, not the queue. */
	struct cbstate s = { PTHREAD_MUTEX_INITIALIZER, 0, 0, 0 };
	CHECK_RC(rma_set_callback(e, on_complete, &s), 0);
	CHECK_RC(rma_post(e, ops, 16, 10000, NULL), 16);
	for (int64_t end = test_now_ms() + 10000; test_now_ms() < end;) {
		pthread_mutex_lock(&s.mu);
		int n = s.n;
		pthread_mutex_unlock(&s.mu);
		if (n >= 16)
			break;
		test_sleep_ms(1);
	}
	test_sleep_ms(20);
	pthread_mutex_lock(&s.mu);
	CHECK_EQ(s.n, 16);
	CHECK_EQ(s.bad, 0);
	CHECK_EQ_U64(s.mask, 0xffff);
	pthread_mutex_unlock(&s.mu);
	CHECK_EQ(rma_poll(e, c, 64), 0);
	CHECK_RC(rma_set_callback(e, NULL, NULL), 0);

	/* rma_post: an invalid op stops the post there; only the ops before it
	 * deliver completions, and the caller learns the stopping op's errno.
	 * A first invalid op returns its errno. */
	struct rma_op bad[3] = { ops[0], ops[1], ops[2] };
	int err = 0;
	bad[1].flags = 1u << 15; /* undefined */
	CHECK_RC(rma_post(e, bad, 3, 10000, &err), 1);
	CHECK_RC(err, -EINVAL);
	bad[0].kind = 0;
	CHECK_RC(rma_post(e, bad, 3, 10000, NULL), -EINVAL);
	bad[0] = ops[0];
	bad[0].len = MiB; /* local_off 0 + 1 MiB fits; remote too */
	bad[0].remote_off = 4 * MiB - 10;
	CHECK_RC(rma_post(e, bad, 1, 10000, NULL), -ERANGE);
	got = collect(e, c, 1, 10000);
	test_sleep_ms(100);
	got += rma_poll(e, c + got, 64 - (size_t)got);
	CHECK_EQ(got, 1);
	CHECK_EQ(c[0].user_data, 0);
	CHECK_EQ(c[0].result, 4096);
	rma_engine_destroy(e);

	/* A full completion queue refuses more posts with -EAGAIN (a partial
	 * post counts what fit) until completions are polled. */
	{
		struct rma_config cfg;
		rma_config_init(&cfg);
		cfg.transports = transport;
		cfg.cq_depth = 8;
		CHECK_RC(rma_engine_create(&cfg, &e), 0);
	}
	l = region(e, buf, MiB);
	for (int i = 0; i < 16; i++)
		ops[i].local = l;
	CHECK_RC(rma_post(e, ops, 12, 10000, NULL), 8);
	CHECK_RC(rma_post(e, ops, 1, 10000, NULL), -EAGAIN);
	CHECK_EQ(collect(e, c, 8, 10000), 8);
	CHECK_RC(rma_post(e, ops, 1, 10000, NULL), 1);
	CHECK_EQ(collect(e, c, 1, 10000), 1);
	CHECK_EQ(c[0].result, 4096);
	rma_engine_destroy(e);

	/* Caller-driven progress: wait on the fd, drive with rma_progress. */
	e = engine(RMA_ENGINE_MANUAL_PROGRESS);
	l = region(e, buf, MiB);
	for (int i = 0; i < 16; i++)
		ops[i].local = l;
	fd = rma_completion_fd(e);
	CHECK(fd >= 0);
	CHECK_RC(rma_post(e, ops, 16, 10000, NULL), 16);
	got = 0;
	mask = 0;
	for (int64_t end = test_now_ms() + 10000; got < 16 && test_now_ms() < end;) {
		fd_readable(fd, 100);
		CHECK_OK(rma_progress(e, 0));
		int n = rma_poll(e, c, 64);
		CHECK_OK(n);
		for (int i = 0; i < n; i++) {
			CHECK(c[i].user_data < 16);
			CHECK(!(mask & (1u << c[i].user_data)));
			mask |= 1u << c[i].user_data;
			CHECK_EQ(c[i].result, 4096);
		}
		got += n;
	}
	CHECK_EQ(got, 16);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

/* Bad input gets a clear error and leaves everyone served. */
static int case_errors(void)
{
	struct target t;
	int rc = start(&t, 4 * MiB, 21);
	if (rc)
		return rc;
	rma_engine *e = engine(0);
	char *buf = test_alloc(2 * MiB), reply[1024];
	char tok[RMA_ADVERTISEMENT_TEXT_MAX], t2[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_region *l = region(e, buf, 2 * MiB);
	rma_remote *r, *bad;

	/* A window: only it is reachable. */
	r = remote(&t, "rw", 4096, 65536, 0);
	CHECK_RC(op1(e, RMA_OP_PUT, l, 0, r, 65536 - 10, 10, 10000), 10);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, r, 0, 65536, 10000), 65536);
	CHECK_RC(op1(e, RMA_OP_PUT, l, 0, r, 65536 - 10, 11, 10000), -ERANGE);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, r, 65536 - 10, 20, 10000), -ERANGE);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, r, 65536, 1, 10000), -ERANGE);
	CHECK_RC(op1(e, RMA_OP_PUT, l, 0, r, UINT64_MAX - 5, 10, 10000), -ERANGE);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, r, 0, UINT64_MAX, 10000), -ERANGE);
	CHECK_RC(op1(e, RMA_OP_GET, l, 2 * MiB - 5, r, 0, 10, 10000), -ERANGE);
	rma_remote_free(r);

	/* Access: the advertisement's, which is at most the region's. */
	r = remote(&t, "ro", 0, 0, 0);
	CHECK_EQ(rma_remote_access(r), RMA_ACCESS_REMOTE_READ);
	CHECK_RC(op1(e, RMA_OP_PUT, l, 0, r, 0, 4096, 10000), -EACCES);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, r, 0, TARGET_SMALL, 10000), TARGET_SMALL);
	CHECK_EQ(test_check_fill(buf, TARGET_SMALL, TARGET_RO_SEED), -1);
	rma_remote *ro = r;
	r = remote(&t, "wo", 0, 0, 0);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, r, 0, 4096, 10000), -EACCES);
	CHECK_RC(op1(e, RMA_OP_PUT, l, 0, r, 0, 4096, 10000), 4096);
	rma_remote_free(r);
	r = remote(&t, "rw", 0, 0, RMA_ACCESS_REMOTE_READ);
	CHECK_RC(op1(e, RMA_OP_PUT, l, 0, r, 0, 4096, 10000), -EACCES);
	rma_remote_free(r);
	CHECKF(target_try(&t, reply, sizeof reply, "adv ro 0 0 %u",
			  RMA_ACCESS_REMOTE_RW) < 0,
	       "a read-only region was advertised writable");
	CHECKF(target_try(&t, reply, sizeof reply, "adv none 0 0 0") < 0,
	       "a region without remote access was advertised");

	/* Malformed tokens are refused at parse. */
	target_token(&t, "rw", 0, 0, 0, tok, sizeof tok);
	size_t n = strlen(tok);
	for (size_t i = 0; i < n; i++) {
		strcpy(t2, tok);
		t2[i] = t2[i] == 'A' ? 'B' : 'A';
		rc = rma_remote_parse(t2, &bad);
		if (rc == 0)
			FAIL("token with char %zu changed was accepted", i);
		CHECK_RC(rc, -EBADMSG);
	}
	strcpy(t2, tok);
	t2[n / 2] = '!';
	CHECK_RC(rma_remote_parse(t2, &bad), -EBADMSG);
	t2[n / 2] = '\0';
	CHECK_RC(rma_remote_parse(t2, &bad), -EBADMSG);
	CHECK_RC(rma_remote_parse("hello", &bad), -EBADMSG);

	/* A released region's key is rejected by its owner. */
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, ro, 0, 4096, 10000), 4096);
	target_cmd(&t, reply, sizeof reply, "release ro");
	CHECK_EQ(atoi(reply), 0);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, ro, 0, 4096, 10000), -EKEYREJECTED);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, ro, 0, 4096, 10000), -EKEYREJECTED);
	rma_remote_free(ro);

	/* And everyone is still served. */
	r = parse(tok);
	test_fill(buf, 2 * MiB, 4242);
	CHECK_RC(op1(e, RMA_OP_PUT, l, 0, r, 0, 2 * MiB, 10000), 2 * MiB);
	CHECK_EQ_U64(target_crc(&t, "rw", 0, 2 * MiB), rma_crc32c(0, buf, 2 * MiB));
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

/* ---- release racing with a stream of puts ---- */

struct stream {
	rma_engine *e;
	rma_region *l;
	rma_remote *r;
	size_t size;
	atomic_int phase, stop; /* written by the test, read by the streamer */
	long ok[3], fail[3], posted[3], other;
	int other_code;
};

static void *streamer(void *arg)
{
	struct stream *s = arg;
	const uint64_t chunk = 256 << 10;
	uint64_t seq = 0;
	int inflight = 0;

	while (!s->stop || inflight) {
		while (!s->stop && inflight < 16) {
			int ph = s->phase;
			struct rma_op op = {
				.kind = RMA_OP_PUT, .local = s->l,
				.remote = s->r,
				.remote_off = (seq * chunk) % s->size,
				.len = chunk,
				.user_data = (uint64_t)ph << 32 | seq,
			};
			int rc = rma_post(s->e, &op, 1, 10000, NULL);
			seq++;
			__atomic_add_fetch(&s->posted[ph], 1, __ATOMIC_RELAXED);
			if (rc == 1) {
				inflight++;
			} else {
				s->fail[ph]++;
				if (rc != -EKEYREJECTED && rc != -ECONNRESET) {
					s->other++;
					s->other_code = rc;
				}
			}
			if (ph == 2)
				break; /* slower after release: failures are quick */
		}
		struct rma_completion c[32];
		int n = rma_poll(s->e, c, 32);
		for (int i = 0; i < n; i++) {
			int ph = (int)(c[i].user_data >> 32);
			inflight--;
			if (c[i].result == (int64_t)chunk) {
				s->ok[ph]++;
			} else {
				s->fail[ph]++;
				if (c[i].result != -EKEYREJECTED &&
				    c[i].result != -ECONNRESET) {
					s->other++;
					s->other_code = (int)c[i].result;
				}
			}
		}
		if (n <= 0)
			test_sleep_ms(1);
	}
	return NULL;
}

static int case_release_race(void)
{
	/* libfabric's shm copies without checking keys: the owner cannot
	 * refuse a peer that keeps using a released key, so "release is
	 * final" rests on the initiator honouring the revocation.  Not
	 * claimed (design.md, ofi gaps). */
	if (!strcmp(transport, "ofi:prov=shm"))
		SKIP("ofi:prov=shm: libfabric's shm does not check keys on its "
		     "copies, so the owner cannot make release final");
	const size_t S = 16 * MiB;
	struct target t;
	int rc = start(&t, S, 0);
	if (rc)
		return rc;
	struct stream s = { 0 };
	char *buf = test_alloc(256 << 10), reply[256];
	test_fill(buf, 256 << 10, 31337);
	s.e = engine(0);
	s.l = region(s.e, buf, 256 << 10);
	s.r = remote(&t, "rw", 0, 0, 0);
	s.size = S;

	/* Connected first, so the 200 ms before the release measure puts,
	 * not a provider's connection setup on a loaded host. */
	CHECK_RC(op1(s.e, RMA_OP_PUT, s.l, 0, s.r, 0, 4096, 10000), 4096);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, streamer, &s) == 0);
	test_sleep_ms(200);
	s.phase = 1;
	target_cmd(&t, reply, sizeof reply, "release_watch rw 200");
	s.phase = 2;
	/* Some posts after the release: at least 300 ms of them, longer on a
	 * loaded host where ops caught by the release take a while to end
	 * (the window is full until they do). */
	int64_t until = test_now_ms() + 20000;
	test_sleep_ms(300);
	while (__atomic_load_n(&s.posted[2], __ATOMIC_RELAXED) < 4 &&
	       test_now_ms() < until)
		test_sleep_ms(10);
	s.stop = 1;
	pthread_join(th, NULL);
	printf("before: %ld ok %ld failed; during: %ld ok %ld failed; after: "
	       "%ld posted %ld ok %ld failed\n", s.ok[0], s.fail[0], s.ok[1],
	       s.fail[1], s.posted[2], s.ok[2], s.fail[2]);

	CHECKF(!strcmp(reply, "0 same"),
	       "target memory changed after rma_region_release returned (%s)",
	       reply);
	CHECKF(s.ok[0] > 0, "no put succeeded before the release");
	CHECKF(s.posted[2] > 0, "nothing posted after the release");
	CHECKF(s.ok[2] == 0, "%ld puts posted after the release succeeded",
	       s.ok[2]);
	CHECKF(s.other == 0, "%ld ops failed with %d (%s), not -EKEYREJECTED or "
	       "-ECONNRESET", s.other, s.other_code, rma_strerror(s.other_code));

	/* The target still serves its other regions. */
	rma_remote *wo = remote(&t, "wo", 0, 0, 0);
	CHECK_RC(op1(s.e, RMA_OP_PUT, s.l, 0, wo, 0, 256 << 10, 10000), 256 << 10);
	CHECK_EQ_U64(target_crc(&t, "wo", 0, 256 << 10),
		     rma_crc32c(0, buf, 256 << 10));
	rma_remote_free(wo);
	rma_remote_free(s.r);
	rma_engine_destroy(s.e);
	target_stop(&t);
	return 0;
}

/* ---- shutdown: drain vs cancel ---- */

static int case_shutdown(void)
{
	const size_t S = 16 * MiB;
	struct target t;
	int rc = start_stallable(&t, S, 0);
	if (rc)
		return rc;
	char *buf = test_alloc(S);
	struct rma_completion c[32];
	struct rma_op ops[16];
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);

	/* Drain: everything in flight finishes, shutdown returns 0. */
	rma_engine *e = engine(0);
	rma_region *l = region(e, buf, S);
	test_fill(buf, S, 555);
	for (int i = 0; i < 16; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_PUT, .local = l,
					  .local_off = (uint64_t)i * MiB,
					  .remote = rem,
					  .remote_off = (uint64_t)i * MiB,
					  .len = MiB, .user_data = (uint64_t)i };
	CHECK_RC(rma_post(e, ops, 16, 30000, NULL), 16);
	CHECK_RC(rma_engine_shutdown(e, 20000), 0);
	CHECK_EQ(collect(e, c, 16, 1000), 16);
	for (int i = 0; i < 16; i++)
		CHECK_EQ(c[i].result, MiB);
	CHECK_EQ_U64(target_crc(&t, "rw", 0, S), rma_crc32c(0, buf, S));
	CHECK_RC(rma_post(e, ops, 1, 1000, NULL), -ESHUTDOWN);
	int64_t res;
	CHECK_RC(rma_submit(e, ops, 1, 1000, &res, NULL, 0), 1);
	CHECK_RC(res, -ESHUTDOWN);
	rma_engine_destroy(e);

	if (served_by_nic()) {
		target_stop(&t);
		SKIP("%s: a stopped target's NIC still serves: cancelling "
		     "ops that cannot finish is not tested here", transport);
	}
	/* Cancel: the target is stopped, so nothing can finish. */
	for (int drain = 0; drain <= 300; drain += 300) {
		e = engine(0);
		l = region(e, buf, S);
		memset(buf, 0xEE, S);
		for (int i = 0; i < 16; i++) {
			ops[i].kind = RMA_OP_GET;
			ops[i].local = l;
		}
		CHECK_RC(rma_peer_connect(e, rem, 10000), 0);
		test_stop_child(t.pid);
		CHECK_RC(rma_post(e, ops, 16, -1, NULL), 16);
		test_sleep_ms(100);
		int64_t t0 = test_now_ms();
		/* Asked to cancel: the count; ran out of time: -ETIMEDOUT. */
		CHECK_RC(rma_engine_shutdown(e, drain), drain ? -ETIMEDOUT : 16);
		int64_t dt = test_now_ms() - t0;
		CHECKF(dt >= drain - 5 && dt < drain + 2000,
		       "shutdown(%d) took %lld ms", drain, (long long)dt);
		CHECK_EQ(collect(e, c, 16, 1000), 16);
		for (int i = 0; i < 16; i++)
			CHECK_RC(c[i].result, -ECANCELED);
		test_cont_child(t.pid);
		test_sleep_ms(300);
		for (size_t i = 0; i < S; i++)
			CHECKF((unsigned char)buf[i] == 0xEE,
			       "a cancelled get wrote byte %zu", i);
		CHECK_EQ(rma_poll(e, c, 32), 0);
		rma_engine_destroy(e);
	}

	/* The target is fine. */
	e = engine(0);
	l = region(e, buf, S);
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, rem, 0, S, 30000), (int64_t)S);
	CHECK_EQ(test_check_fill(buf, S, 555), -1);
	rma_engine_destroy(e);
	rma_remote_free(rem);
	target_stop(&t);
	return 0;
}

/* rma_peer_remove: waits for the peer's ops up to its timeout, cancels the
 * rest, forgets the peer (-ENOENT after); the next op connects afresh. */
static int case_peer_remove(void)
{
	struct target t;
	int rc = start_stallable(&t, 16 * MiB, 17);
	if (rc)
		return rc;
	rma_engine *e = engine(0);
	char *buf = test_alloc(16 * MiB);
	rma_region *l = region(e, buf, 16 * MiB);
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);
	struct rma_completion c[8];
	struct rma_op ops[8];

	CHECK_RC(rma_peer_remove(e, rem, 100), -ENOENT);
	for (int i = 0; i < 8; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_GET, .local = l,
					  .local_off = (uint64_t)i * 2 * MiB,
					  .remote = rem,
					  .remote_off = (uint64_t)i * 2 * MiB,
					  .len = 2 * MiB, .user_data = (uint64_t)i };
	/* Idle peer: removed at once. */
	CHECK_RC(rma_peer_connect(e, rem, 10000), 0);
	CHECK_RC(rma_peer_remove(e, rem, 5000), 0);
	CHECK_RC(rma_peer_remove(e, rem, 100), -ENOENT);

	/* Ops that finish in time: remove waits for them. */
	CHECK_RC(rma_post(e, ops, 8, 10000, NULL), 8);
	CHECK_RC(rma_peer_remove(e, rem, 10000), 0);
	CHECK_EQ(collect(e, c, 8, 1000), 8);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(c[i].result, 2 * MiB);
	CHECK_EQ(test_check_fill(buf, 16 * MiB, 17), -1);

	if (served_by_nic()) {
		target_stop(&t);
		SKIP("%s: a stopped target's NIC still serves: removing a peer "
		     "whose ops cannot finish is not tested here", transport);
	}
	/* Ops that cannot finish (target stopped): cancelled at the timeout. */
	CHECK_RC(rma_peer_connect(e, rem, 10000), 0);
	memset(buf, 0xEE, 16 * MiB);
	test_stop_child(t.pid);
	CHECK_RC(rma_post(e, ops, 8, -1, NULL), 8);
	int64_t t0 = test_now_ms();
	CHECK_RC(rma_peer_remove(e, rem, 300), -ETIMEDOUT);
	int64_t dt = test_now_ms() - t0;
	CHECKF(dt >= 295 && dt < 3000, "remove(300) took %lld ms", (long long)dt);
	CHECK_EQ(collect(e, c, 8, 1000), 8);
	for (int i = 0; i < 8; i++)
		CHECK_RC(c[i].result, -ECANCELED);
	CHECK_RC(rma_peer_remove(e, rem, 100), -ENOENT);
	test_cont_child(t.pid);
	test_sleep_ms(300);
	for (size_t i = 0; i < 16 * MiB; i++)
		CHECKF((unsigned char)buf[i] == 0xEE,
		       "a cancelled get wrote byte %zu", i);

	/* And the peer can be used again. */
	CHECK_RC(op1(e, RMA_OP_GET, l, 0, rem, 0, 16 * MiB, 10000), 16 * MiB);
	CHECK_EQ(test_check_fill(buf, 16 * MiB, 17), -1);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

/* Several threads share one engine, each running its own rma_submit
 * batches and rma_post/rma_poll against its own slice. */
#define NTHREADS 4
struct worker {
	rma_engine *e;
	rma_region *l;
	rma_remote *rem;
	char *buf;
	int id;
	uint64_t seed;
	char err[256];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const uint64_t slice = MiB, base = (uint64_t)w->id * slice;
	for (int round = 0; round < 100 && !w->err[0]; round++) {
		struct rma_op ops[8];
		int64_t res[8];
		uint64_t len = 1 + test_rand(&w->seed) % (slice / 8);
		test_fill(w->buf + base, slice / 2, w->seed + (uint64_t)round);
		for (int i = 0; i < 8; i++) {
			int put = i < 4;
			ops[i] = (struct rma_op){
				.kind = put ? RMA_OP_PUT : RMA_OP_GET, .local = w->l,
				.local_off = base + (uint64_t)i * (slice / 8),
				.remote = w->rem,
				.remote_off = base + (uint64_t)(i % 4) * (slice / 8),
				.len = len };
		}
		/* puts first, then gets of the same remote bytes */
		int rc = rma_submit(w->e, ops, 4, 10000, res, NULL, 0);
		if (!rc)
			rc = rma_submit(w->e, ops + 4, 4, 10000, res + 4, NULL, 0);
		if (rc) {
			snprintf(w->err, sizeof w->err, "round %d: %d ops failed", round, rc);
			break;
		}
		for (int i = 0; i < 4; i++)
			if (memcmp(w->buf + base + (uint64_t)i * (slice / 8),
				   w->buf + base + (uint64_t)(i + 4) * (slice / 8), len))
				snprintf(w->err, sizeof w->err,
					 "round %d: get %d differs from its put", round, i);
	}
	return NULL;
}

static int case_threads(void)
{
	struct target t;
	int rc = start(&t, NTHREADS * MiB, 0);
	if (rc)
		return rc;
	uint64_t seed = test_seed("threads");
	rma_engine *e = engine(0);
	char *buf = test_alloc(NTHREADS * MiB);
	rma_region *l = region(e, buf, NTHREADS * MiB);
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ e, l, rem, buf, i, test_rand(&seed), "" };
		CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		CHECKF(!w[i].err[0], "thread %d: %s", i, w[i].err);
	}
	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

/* Ops on plain memory (rma_op.addr) through the registration cache, with
 * RMA_OP_CRC: rma_post with the CRC checked against the target's, then
 * rma_submit and the _mem helpers; a second op hits, an invalidated range
 * misses. */
static int case_plainmem(void)
{
	uint64_t seed = test_seed("plainmem");
	const size_t S = 4 * MiB, W = 256 << 10;
	struct target t;
	int rc = start(&t, S, test_rand(&seed) | 1);
	if (rc)
		return rc;

	rma_engine *e = engine(0);
	char *src = test_alloc(S), *dst = test_alloc(S);
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);
	rma_remote *win = remote(&t, "rw", S - W, W, 0);
	struct rma_cache_stats st;
	struct rma_completion c;
	test_fill(src, S, test_rand(&seed) | 1);

	/* Put with a CRC: it is the target's CRC of what arrived. */
	struct rma_op op = { .kind = RMA_OP_PUT, .flags = RMA_OP_CRC,
			     .addr = src, .local_off = 100, .remote = rem,
			     .remote_off = 7, .len = S - 200, .user_data = 1 };
	CHECK_RC(rma_post(e, &op, 1, 30000, NULL), 1);
	CHECK_EQ(collect(e, &c, 1, 30000), 1);
	CHECK_EQ(c.result, (int64_t)(S - 200));
	CHECK_EQ(c.flags, RMA_COMPLETION_CRC);
	CHECK_EQ_U64(c.crc32c, rma_crc32c(0, src + 100, S - 200));
	CHECK_EQ_U64(c.crc32c, target_crc(&t, "rw", 7, S - 200));

	/* Get with a CRC, into plain memory. */
	op = (struct rma_op){ .kind = RMA_OP_GET, .flags = RMA_OP_CRC,
			      .addr = dst, .remote = rem, .len = S,
			      .user_data = 2 };
	CHECK_RC(rma_post(e, &op, 1, 30000, NULL), 1);
	CHECK_EQ(collect(e, &c, 1, 30000), 1);
	CHECK_EQ(c.result, (int64_t)S);
	CHECK_EQ(c.flags, RMA_COMPLETION_CRC);
	CHECK_EQ_U64(c.crc32c, target_crc(&t, "rw", 0, S));
	CHECK_EQ_U64(c.crc32c, rma_crc32c(0, dst, S));
	CHECK(!memcmp(dst + 7, src + 100, S - 200));
	CHECK_RC(rma_cache_stats(e, &st), 0);
	CHECK_EQ(st.misses, 2);

	/* Not asked: none.  Inside src's range: a hit. */
	op = (struct rma_op){ .kind = RMA_OP_PUT, .addr = src + 4096,
			      .remote = rem, .len = 4096, .user_data = 3 };
	CHECK_RC(rma_post(e, &op, 1, 30000, NULL), 1);
	CHECK_EQ(collect(e, &c, 1, 30000), 1);
	CHECK_EQ(c.result, 4096);
	CHECK_EQ(c.flags, 0);
	CHECK_EQ(c.crc32c, 0);
	CHECK_EQ_U64(target_crc(&t, "rw", 0, 4096), rma_crc32c(0, src + 4096, 4096));
	CHECK_RC(rma_cache_stats(e, &st), 0);
	CHECK_EQ(st.hits, 1);
	CHECK_EQ(st.misses, 2);

	/* rma_submit and the blocking helpers. */
	test_fill(src, W, test_rand(&seed) | 1);
	struct rma_op sop = { .kind = RMA_OP_PUT, .addr = src,
			      .remote = rem, .len = W };
	int64_t res = 0;
	CHECK_RC(rma_submit(e, &sop, 1, 30000, &res, NULL, 0), 0);
	CHECK_EQ(res, (int64_t)W);
	CHECK_EQ_U64(target_crc(&t, "rw", 0, W), rma_crc32c(0, src, W));
	CHECK_RC(rma_write_from_mem(e, src, W, win, 30000), (int64_t)W);
	CHECK_EQ_U64(target_crc(&t, "rw", S - W, W), rma_crc32c(0, src, W));
	memset(dst, 0, W);
	CHECK_RC(rma_read_into_mem(e, dst, W, win, 30000), (int64_t)W);
	CHECK(!memcmp(dst, src, W));
	CHECK_RC(rma_read_into_mem(e, dst, W - 1, win, 30000), -EMSGSIZE);
	CHECK_RC(rma_cache_stats(e, &st), 0);
	CHECK_EQ(st.misses, 2);
	CHECK_EQ(st.hits, 4);

	/* Invalidated before reuse: the next op registers afresh. */
	CHECK_RC(rma_mem_invalidate(e, src, S), 1);
	CHECK_RC(rma_write_from_mem(e, src, W, win, 30000), (int64_t)W);
	CHECK_RC(rma_cache_stats(e, &st), 0);
	CHECK_EQ(st.misses, 3);
	CHECK_EQ(st.invalidations, 1);
	CHECK_EQ(st.in_use, 0);

	rma_remote_free(win);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	test_free(src, S);
	test_free(dst, S);
	target_stop(&t);
	return 0;
}

/* After small ops one at a time (a waiter spinning on its reply, a target
 * spinning for the next request) and a window of them through rma_poll,
 * both sides go quiet: neither uses a tenth of a core while idle. */
static int case_idle(void)
{
	struct target t;
	int rc = start(&t, MiB, 5);
	if (rc)
		return rc;
	rma_engine *e = engine(0);
	char *buf = test_alloc(MiB);
	rma_region *l = region(e, buf, MiB);
	rma_remote *rem = remote(&t, "rw", 0, 0, 0);
	for (int i = 0; i < 2000; i++)
		CHECK_RC(op1(e, i % 2 ? RMA_OP_GET : RMA_OP_PUT, l, 8 * (uint64_t)i,
			     rem, 8 * (uint64_t)i, 8, 10000), 8);
	struct rma_op ops[16];
	struct rma_completion c[16];
	for (int i = 0; i < 16; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_PUT, .local = l,
					  .local_off = 8 * (uint64_t)i, .remote = rem,
					  .remote_off = 8 * (uint64_t)i, .len = 8 };
	for (int round = 0; round < 100; round++) {
		CHECK_RC(rma_post(e, ops, 16, 10000, NULL), 16);
		int got = 0;
		int64_t until = test_now_ms() + 15000;
		while (got < 16) {
			CHECKF(test_now_ms() < until, "round %d: %d of 16 ops ended", round, got);
			int n = rma_poll(e, c, 16);
			CHECK_OK(n);
			for (int j = 0; j < n; j++)
				CHECK_RC(c[j].result, 8);
			got += n;
		}
	}
	test_idle_check(t.pid);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	test_free(buf, MiB);
	target_stop(&t);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "putget", case_putget },
	{ "batch", case_batch },
	{ "sizes", case_sizes },
	{ "completion", case_completion },
	{ "errors", case_errors },
	{ "release_race", case_release_race },
	{ "shutdown", case_shutdown },
	{ "peer_remove", case_peer_remove },
	{ "threads", case_threads },
	{ "plainmem", case_plainmem },
	{ "idle", case_idle },
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s TRANSPORT [CASE]\n", argv[0]);
		return 1;
	}
	static char tname[64];
	snprintf(tname, sizeof tname, "%s", argv[1]);
	char *suffix = strstr(tname, "-alloc");
	if (suffix && !suffix[6]) {
		*suffix = '\0';
		alloc_mem = true;
	}
	transport = tname;
	test_watchdog(110);

	struct rma_transport_info info[16];
	int n = rma_transports(info, 16), found = 0;
	CHECK_OK(n);
	/* A spec may carry options ("ofi:prov=tcp"): match its name. */
	size_t nlen = strcspn(transport, ":");
	for (int i = 0; i < n && i < 16; i++)
		if (strlen(info[i].name) == nlen &&
		    !strncmp(info[i].name, transport, nlen)) {
			found = 1;
			if (!info[i].available)
				SKIP("transport %s not available: %s", transport,
				     info[i].detail);
		}
	if (!found)
		SKIP("transport %s is not built in", transport);

	int ran = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (argc > 2 && strcmp(argv[2], cases[i].name))
			continue;
		printf("== %s: %s\n", transport, cases[i].name);
		int rc = cases[i].fn();
		if (rc)
			return rc;
		ran++;
	}
	if (!ran) {
		fprintf(stderr, "unknown case '%s'\n", argv[2]);
		return 1;
	}
	printf("ok\n");
	return 0;
}
