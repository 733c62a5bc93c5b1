/*
 * harness.c - argument parsing, the fork into passive side and initiator,
 * the timed phases and the JSON output shared by ucx_rma.c and fi_rma.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 50000 /* as rma bench: a stable p99 */
#define MIN_SAMPLES 3
#define WARMUP_OPS 3 /* single ops after the windowed warm-up, as rma bench */
#define YIELD_AFTER 256 /* empty rounds: longer than a loopback round trip */
#define STUCK_NS 20000000000ull /* a phase this far past its time has hung */

static const char *prog = "bench";

uint64_t hx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hx_spun(unsigned *empty, int found)
{
	if (found)
		*empty = 0;
	else if (++*empty % YIELD_AFTER == 0)
		sched_yield();
}

void hx_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int full_io(int fd, void *buf, size_t len, int sending)
{
	char *p = buf;

	while (len) {
		ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int hx_send(int sock, const void *buf, uint32_t len)
{
	int rc = full_io(sock, &len, sizeof len, 1);

	return rc ? rc : full_io(sock, (void *)buf, len, 1);
}

int hx_recv(int sock, void *buf, uint32_t cap, uint32_t *len)
{
	int rc = full_io(sock, len, sizeof *len, 0);

	if (rc)
		return rc;
	if (*len > cap)
		return -EMSGSIZE;
	return full_io(sock, buf, *len, 0);
}

int hx_peer_gone(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };

	return poll(&p, 1, 0) > 0; /* the initiator only ever closes it */
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		return -EINVAL;
	switch (*end) {
	case 'K': v <<= 10; end++; break;
	case 'M': v <<= 20; end++; break;
	case 'G': v <<= 30; end++; break;
	}
	if (*end || v == 0)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, const struct hx_system *sys,
		      struct hx_args *a)
{
	static const struct option opts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "op", required_argument, NULL, 'o' },
		{ "sizes", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "duration", required_argument, NULL, 'd' },
		{ "peer", required_argument, NULL, 'p' },
		{ "serve", no_argument, NULL, 'S' },
		{ "alloc", no_argument, NULL, 'A' },
		{ "warmup", required_argument, NULL, 'W' },
		{ NULL, 0, NULL, 0 },
	};
	char sizes[256] = "8,4K,64K,1M,16M";
	int c, warmup_set = 0;

	*a = (struct hx_args){ .transport = sys->default_transport, .kind = HX_PUT,
			       .window = 16, .duration_ms = 500 };
	while ((c = getopt_long(argc, argv, "t:o:s:w:d:", opts, NULL)) != -1) {
		switch (c) {
		case 't': a->transport = optarg; break;
		case 'o':
			if (strcmp(optarg, "put") && strcmp(optarg, "get"))
				return -EINVAL;
			a->kind = strcmp(optarg, "put") ? HX_GET : HX_PUT;
			break;
		case 's': snprintf(sizes, sizeof sizes, "%s", optarg); break;
		case 'w': a->window = (unsigned)atoi(optarg); break;
		case 'd': a->duration_ms = (unsigned)atoi(optarg); break;
		case 'W':
			a->warmup_ms = (unsigned)atoi(optarg);
			warmup_set = 1;
			break;
		case 'p':
			if (!sys->peer_usage)
				return -EINVAL;
			a->peer = optarg;
			break;
		case 'S':
			if (!sys->advertise)
				return -EINVAL;
			a->serve_only = 1;
			break;
		case 'A':
			if (!sys->alloc_usage)
				return -EINVAL;
			a->alloc = 1;
			break;
		default: return -EINVAL;
		}
	}
	if (optind != argc || (a->peer && a->serve_only) || a->window == 0 ||
	    a->window > 4096 || a->duration_ms == 0)
		return -EINVAL;
	if (!warmup_set)
		a->warmup_ms = a->duration_ms / 5; /* as rma bench */
	for (char *save, *tok = strtok_r(sizes, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (a->n_sizes == HX_MAX_SIZES || parse_size(tok, &a->sizes[a->n_sizes]) < 0)
			return -EINVAL;
		if (a->sizes[a->n_sizes] > a->max_size)
			a->max_size = a->sizes[a->n_sizes];
		a->n_sizes++;
	}
	return a->n_sizes ? 0 : -EINVAL;
}

struct result {
	uint64_t iters;
	double seconds;
	double p50_us, p99_us;
	size_t samples;
};

/* Wait for at least one completion; -ETIMEDOUT if none by deadline. */
static int wait_some(const struct hx_system *sys, void *ctx, uint64_t deadline)
{
	unsigned empty = 0;

	for (;;) {
		int n = sys->progress(ctx);

		if (n != 0)
			return n;
		hx_spun(&empty, 0);
		if (hx_now_ns() > deadline)
			return -ETIMEDOUT;
	}
}

/* Post one op, driving progress while the library says EAGAIN; ops that
 * complete meanwhile are added to *done. */
static int post_retry(const struct hx_system *sys, void *ctx, unsigned kind,
		      uint64_t size, uint64_t *done, uint64_t deadline)
{
	unsigned empty = 0;

	for (;;) {
		int rc = sys->post(ctx, kind, size);

		if (rc != -EAGAIN)
			return rc;
		rc = sys->progress(ctx);
		if (rc < 0)
			return rc;
		*done += (uint64_t)rc;
		hx_spun(&empty, rc);
		if (hx_now_ns() > deadline)
			return -ETIMEDOUT;
	}
}

/* One op at a time, to completion; returns 0 or -errno. */
static int one_op(const struct hx_system *sys, void *ctx, unsigned kind,
		  uint64_t size)
{
	uint64_t deadline = hx_now_ns() + STUCK_NS, done = 0;
	int rc = post_retry(sys, ctx, kind, size, &done, deadline);

	if (rc == 0 && sys->flush)
		rc = sys->flush(ctx);
	while (rc == 0 && done == 0) {
		rc = wait_some(sys, ctx, deadline);
		if (rc > 0) {
			done += (uint64_t)rc;
			rc = 0;
		}
	}
	return rc;
}

/* The window full for ms: the bandwidth phase, or (unmeasured) the
 * warm-up. */
static int bandwidth_phase(const struct hx_system *sys, void *ctx,
			   const struct hx_args *a, uint64_t size, unsigned ms,
			   struct result *r)
{
	uint64_t t0 = hx_now_ns(), end = t0 + (uint64_t)ms * 1000000u;
	uint64_t posted = 0, done = 0;
	unsigned empty = 0;
	int flushed = 0;

	for (;;) {
		uint64_t now = hx_now_ns();
		int over = now >= end, rc;

		if (now > end + STUCK_NS)
			return -ETIMEDOUT;
		while (!over && posted - done < a->window) {
			rc = sys->post(ctx, a->kind, size);
			if (rc == -EAGAIN)
				break;
			if (rc < 0)
				return rc;
			posted++;
		}
		if (over && posted == done)
			break;
		if (over && !flushed && sys->flush) {
			if ((rc = sys->flush(ctx)) < 0)
				return rc;
			flushed = 1;
		}
		rc = sys->progress(ctx);
		if (rc < 0)
			return rc;
		done += (uint64_t)rc;
		hx_spun(&empty, rc);
	}
	r->iters = done;
	r->seconds = (double)(hx_now_ns() - t0) / 1e9;
	return 0;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Nearest-rank percentile, in microseconds (as `rma bench` computes it). */
static double percentile_us(const uint64_t *s, size_t n, unsigned pct)
{
	size_t rank = (n * pct + 99) / 100;

	return (double)s[rank ? rank - 1 : 0] / 1e3;
}

static int latency_phase(const struct hx_system *sys, void *ctx,
			 const struct hx_args *a, uint64_t size, struct result *r)
{
	static uint64_t samples[MAX_SAMPLES];
	uint64_t t0 = hx_now_ns();
	size_t n = 0;

	while (n < MAX_SAMPLES) {
		uint64_t start = hx_now_ns();
		int rc = one_op(sys, ctx, a->kind, size);

		if (rc < 0)
			return rc;
		samples[n++] = hx_now_ns() - start;
		if (n >= MIN_SAMPLES && hx_now_ns() - t0 >= (uint64_t)a->duration_ms * 1000000u)
			break;
	}
	qsort(samples, n, sizeof samples[0], cmp_u64);
	r->samples = n;
	r->p50_us = percentile_us(samples, n, 50);
	r->p99_us = percentile_us(samples, n, 99);
	return 0;
}

static void print_result(const struct hx_system *sys, const struct hx_args *a,
			 uint64_t size, const struct result *r)
{
	double bytes = (double)r->iters * (double)size;

	printf("{\"system\":\"%s-%s\",\"op\":\"%s\",\"size\":%llu,\"window\":%u,"
	       "\"target\":\"%s\",\"iters\":%llu,\"seconds\":%.4f,"
	       "\"warmup_s\":%.3f,\"bandwidth_MBps\":%.2f,"
	       "\"ops_per_s\":%.0f,\"latency_us_p50\":%.2f,\"latency_us_p99\":%.2f,"
	       "\"latency_samples\":%zu,\"alloc\":%s}\n",
	       sys->name, a->transport, a->kind == HX_PUT ? "put" : "get",
	       (unsigned long long)size, a->window, a->peer ? "peer" : "own",
	       (unsigned long long)r->iters,
	       r->seconds, a->warmup_ms / 1e3, bytes / r->seconds / 1e6,
	       (double)r->iters / r->seconds, r->p50_us, r->p99_us, r->samples,
	       a->alloc ? "true" : "false");
	fflush(stdout);
}

static unsigned char pattern(uint64_t i)
{
	return (unsigned char)(i * 131 + (i >> 13) + 7);
}

/* Before timing anything: put a pattern, get it back into a cleared
 * buffer and compare, so a loop that moved no bytes cannot report. */
static int verify(const struct hx_system *sys, void *ctx, uint64_t len)
{
	unsigned char *buf = sys->buffer(ctx);
	int rc;

	for (uint64_t i = 0; i < len; i++)
		buf[i] = pattern(i);
	if ((rc = one_op(sys, ctx, HX_PUT, len)) < 0)
		return rc;
	memset(buf, 0, len);
	if ((rc = one_op(sys, ctx, HX_GET, len)) < 0)
		return rc;
	for (uint64_t i = 0; i < len; i++) {
		if (buf[i] != pattern(i)) {
			hx_log("verify: byte %llu of %llu came back wrong",
			       (unsigned long long)i, (unsigned long long)len);
			return -EIO;
		}
	}
	return 0;
}

static int initiator(const struct hx_system *sys, const struct hx_args *a, int sock)
{
	void *ctx;
	int rc = sys->open(a, sock, &ctx);

	if (rc < 0) {
		hx_log("setup failed: %s", strerror(-rc));
		return rc;
	}
	if ((rc = verify(sys, ctx, a->max_size)) < 0) {
		hx_log("put then get of %llu bytes: %s", (unsigned long long)a->max_size,
		       strerror(-rc));
		sys->close(ctx);
		return rc;
	}
	for (int i = 0; i < a->n_sizes && rc == 0; i++) {
		uint64_t size = a->sizes[i];
		struct result r = { 0 };

		struct result warm = { 0 };

		/* Warm-up, as rma bench: the same traffic, unmeasured, plus
		 * a few single ops. */
		if (a->warmup_ms)
			rc = bandwidth_phase(sys, ctx, a, size, a->warmup_ms, &warm);
		for (int w = 0; w < WARMUP_OPS && rc == 0; w++)
			rc = one_op(sys, ctx, a->kind, size);
		if (rc == 0)
			rc = bandwidth_phase(sys, ctx, a, size, a->duration_ms, &r);
		if (rc == 0)
			rc = latency_phase(sys, ctx, a, size, &r);
		if (rc == 0)
			print_result(sys, a, size, &r);
		else
			hx_log("%s of %llu bytes failed: %s",
			       a->kind == HX_PUT ? "put" : "get",
			       (unsigned long long)size, strerror(-rc));
	}
	sys->close(ctx);
	return rc;
}

int hx_main(int argc, char **argv, const struct hx_system *sys)
{
	struct hx_args a;
	int sv[2], status, rc;
	pid_t pid;

	prog = sys->name;
	if (parse_args(argc, argv, sys, &a) < 0) {
		fprintf(stderr, "usage: %s_rma [--transport T] [--op put|get] [--sizes LIST]"
				" [--window N] [--duration MS] [--warmup MS]%s%s%s%s%s\n",
			sys->name,
			sys->peer_usage ? " [--peer '" : "",
			sys->peer_usage ? sys->peer_usage : "", sys->peer_usage ? "']" : "",
			sys->advertise ? " [--serve]" : "",
			sys->alloc_usage ? " [--alloc]" : "");
		if (sys->alloc_usage)
			fprintf(stderr, "  --alloc  %s\n", sys->alloc_usage);
		return 2;
	}
	if (a.peer) /* someone else's passive side: no child */
		return initiator(sys, &a, -1) < 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		rc = sys->serve(&a, sv[1]);
		if (rc < 0)
			hx_log("passive side failed: %s", strerror(-rc));
		_exit(rc < 0);
	}
	close(sv[1]);
	if (a.serve_only) {
		/* Print what an initiator needs, then serve until stdin ends. */
		char buf[64];
		rc = sys->advertise(sv[0]);
		fflush(stdout);
		while (rc == 0 && read(STDIN_FILENO, buf, sizeof buf) > 0)
			;
	} else {
		rc = initiator(sys, &a, sv[0]);
	}
	close(sv[0]); /* tells the passive side to finish */
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		rc = rc ? rc : -ECHILD;
	return rc < 0;
}
