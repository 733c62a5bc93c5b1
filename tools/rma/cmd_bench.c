/*
 * cmd_bench.c - `rma bench`: bandwidth (a window of ops in flight) and
 * latency (one op at a time) of put or get, per size, against a target
 * that is either given (--target) or started as a child process.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 32
#define MAX_WINDOW 1024
#define MAX_LAT_SAMPLES 2000
#define MIN_LAT_SAMPLES 3
#define WARMUP_OPS 3
#define SPIN_NS 50000          /* busy-poll before sleeping on the fd */
#define TARGET_START_MS 10000  /* for the child to print its token */
#define TARGET_STOP_MS 10000   /* for the child to exit after EOF */
#define DEFAULT_SIZES "8,4K,64K,1M,16M"

struct bench_args {
	const char *transports; /* NULL = every available one */
	unsigned kind;          /* RMA_OP_PUT or RMA_OP_GET */
	uint64_t sizes[MAX_SIZES];
	int n_sizes;
	unsigned window;
	uint64_t iters;         /* 0 = bounded by duration_ms instead */
	unsigned duration_ms;   /* per phase, per size */
	bool json;
	bool manual;
	const char *token;      /* --target; NULL = start our own */
	int timeout_ms;         /* per op; 0 = the engine's default */
	struct common_opts common;
};

/* The target child we started, if any. */
struct child {
	pid_t pid;
	int in_fd;  /* its stdin: closing it stops it */
	int out_fd; /* its stdout */
};

/* Everything one measurement needs. */
struct bench {
	const struct bench_args *a;
	rma_engine *e;
	rma_remote *remote;
	rma_region *local;
	const char *route;
	int comp_fd;
};

struct result {
	uint64_t size;
	uint64_t iters;
	double mbps;
	double p50_us, p99_us;
	size_t samples;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rma bench [--transport LIST] [--op put|get] [--size LIST] [--window N]\n"
		"                 [--iters N] [--duration DURATION] [--timeout DURATION]\n"
		"                 [--json] [--manual-progress] [--target TOKEN]\n"
		"                 [--secret-file PATH] [--log LEVEL]\n\n"
		"For each size, measure bandwidth with --window ops in flight (rma_post and\n"
		"rma_poll), then latency with one op at a time (rma_submit), reporting the\n"
		"median (p50) and p99 in microseconds.  Without --target, a target is started\n"
		"as a child ('rma target --listen 127.0.0.1:0') and stopped at the end.\n\n"
		"options:\n"
		"  -t, --transport LIST     transports to use on both sides (default: all)\n"
		"      --op put|get         operation (default put)\n"
		"  -s, --size LIST          comma-separated sizes in bytes\n"
		"                           (default " DEFAULT_SIZES ")\n"
		"      --sizes LIST         the same as --size\n"
		"  -w, --window N           ops in flight in the bandwidth phase (default 16)\n"
		"  -n, --iters N            ops per phase instead of a time bound\n"
		"  -d, --duration DURATION  time per phase and size (default 500ms)\n"
		"  -T, --timeout DURATION   deadline of each op (default: the engine's, 30s)\n"
		"  -j, --json               one JSON object per line per size\n"
		"  -m, --manual-progress    no progress thread: busy-poll rma_progress()\n"
		"      --target TOKEN       use an existing target (its buffer must hold the\n"
		"                           largest size and allow the operation)\n"
		COMMON_HELP "\n" UNITS_HELP "\n"
		"JSON keys: transport, op, size (bytes), window, iters, bandwidth_MBps\n"
		"(10^6 bytes/s), latency_us_p50, latency_us_p99 (microseconds),\n"
		"latency_samples, manual_progress.\n");
}

static const char *op_name(unsigned kind)
{
	return kind == RMA_OP_PUT ? "put" : "get";
}

static int parse_op(const char *s, unsigned *kind)
{
	if (strcmp(s, "put") == 0)
		*kind = RMA_OP_PUT;
	else if (strcmp(s, "get") == 0)
		*kind = RMA_OP_GET;
	else
		return -EINVAL;
	return 0;
}

static int parse_count(const char *s, uint64_t max, uint64_t *out)
{
	return parse_u64(s, out) < 0 || *out == 0 || *out > max ? -EINVAL : 0;
}

static int parse_args(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "op", required_argument, NULL, OPT_OP },
		{ "size", required_argument, NULL, 's' },
		{ "sizes", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "iters", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "manual-progress", no_argument, NULL, 'm' },
		{ "target", required_argument, NULL, OPT_TARGET },
		COMMON_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	const char *sizes = DEFAULT_SIZES;
	uint64_t v;
	int c, rc;

	*a = (struct bench_args){ .kind = RMA_OP_PUT, .window = 16, .duration_ms = 500 };
	common_init(&a->common);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":t:s:w:n:d:T:jmh", opts, NULL)) != -1) {
		switch (c) {
		case 't': a->transports = optarg; break;
		case OPT_OP:
			if (parse_op(optarg, &a->kind) < 0)
				return tool_usage_error("bench", "bad --op '%s' (put or get)", optarg);
			break;
		case 's': sizes = optarg; break;
		case 'w':
			if (parse_count(optarg, MAX_WINDOW, &v) < 0)
				return tool_usage_error("bench", "bad --window '%s' (1..%d)",
							optarg, MAX_WINDOW);
			a->window = (unsigned)v;
			break;
		case 'n':
			if (parse_count(optarg, UINT32_MAX, &a->iters) < 0)
				return tool_usage_error("bench", "bad --iters '%s'", optarg);
			break;
		case 'd':
			if (parse_duration_ms(optarg, &v) < 0 || v == 0 || v > 3600000)
				return tool_usage_error("bench", "bad --duration '%s' (1ms..60min)", optarg);
			a->duration_ms = (unsigned)v;
			break;
		case 'T':
			if (parse_duration_ms(optarg, &v) < 0 || v == 0 || v > INT32_MAX)
				return tool_usage_error("bench", "bad --timeout '%s' (e.g. 500ms, 5s; > 0)",
							optarg);
			a->timeout_ms = (int)v;
			break;
		case 'j': a->json = true; break;
		case 'm': a->manual = true; break;
		case OPT_TARGET: a->token = optarg; break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			rc = common_option("bench", c, optarg, &a->common);
			if (rc == 1)
				break;
			return rc ? rc : tool_getopt_error("bench", c, argv);
		}
	}
	if (optind < argc)
		return tool_usage_error("bench", "unexpected argument '%s'", argv[optind]);
	a->n_sizes = parse_size_list(sizes, a->sizes, MAX_SIZES);
	if (a->n_sizes < 0)
		return tool_usage_error("bench", "bad --size '%s'", sizes);
	for (c = 0; c < a->n_sizes; c++)
		if (a->sizes[c] == 0)
			return tool_usage_error("bench", "sizes must be > 0");
	return 0;
}

static uint64_t max_size(const struct bench_args *a)
{
	uint64_t m = 1;
	int i;

	for (i = 0; i < a->n_sizes; i++)
		if (a->sizes[i] > m)
			m = a->sizes[i];
	return m;
}

/* ---- the target child ---- */

static void exec_target(const struct bench_args *a, uint64_t size,
			int in_fd, int out_fd)
{
	static const char *const levels[] = { "error", "warn", "info", "debug" };
	char size_arg[32];
	char *argv[16];
	int n = 0;

	if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0)
		_exit(127);
	snprintf(size_arg, sizeof(size_arg), "%" PRIu64, size);
	argv[n++] = "rma";
	argv[n++] = "target";
	argv[n++] = "--size";
	argv[n++] = size_arg;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	if (a->transports) {
		argv[n++] = "--transport";
		argv[n++] = (char *)a->transports;
	}
	/* The child shares our secret and log level (their variables, if
	 * we used them, pass through the environment). */
	if (a->common.secret_file) {
		argv[n++] = "--secret-file";
		argv[n++] = (char *)a->common.secret_file;
	}
	if (a->common.log_level >= 0) {
		argv[n++] = "--log";
		argv[n++] = (char *)levels[a->common.log_level];
	}
	argv[n] = NULL;
	execv("/proc/self/exe", argv);
	fprintf(stderr, "rma bench: exec target: %s\n", strerror(errno));
	_exit(127);
}

/* Read one line from fd within timeout_ms; returns its length or -errno. */
static int read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
	size_t len = 0;

	while (len + 1 < cap) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)((deadline - now_ns()) / 1000000u);
		ssize_t n;

		if (now_ns() >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, left) <= 0)
			continue; /* EINTR or timeout: the deadline check decides */
		n = read(fd, buf + len, 1); /* byte by byte: it is one short line */
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		if (buf[len] == '\n')
			break;
		len++;
	}
	buf[len] = '\0';
	return (int)len;
}

static int start_target(const struct bench_args *a, uint64_t size,
			struct child *c, char *token, size_t cap)
{
	static const char prefix[] = "advertisement: ";
	char line[RMA_ADVERTISEMENT_TEXT_MAX + 64];
	int in[2], out[2], rc;

	if (pipe2(in, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(out, O_CLOEXEC) < 0) {
		rc = -errno;
		close(in[0]);
		close(in[1]);
		return rc;
	}
	c->pid = fork();
	if (c->pid == 0)
		exec_target(a, size, in[0], out[1]);
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	c->out_fd = out[0];
	if (c->pid < 0)
		return -errno;
	rc = read_line(c->out_fd, line, sizeof(line), TARGET_START_MS);
	if (rc < 0)
		return rc;
	if (strncmp(line, prefix, sizeof(prefix) - 1) != 0 ||
	    strlen(line + sizeof(prefix) - 1) >= cap)
		return -EBADMSG;
	strcpy(token, line + sizeof(prefix) - 1);
	return 0;
}

/* Close its stdin, let it print its crc and exit; kill it if it hangs. */
static void stop_target(struct child *c)
{
	uint64_t deadline = now_ns() + (uint64_t)TARGET_STOP_MS * 1000000u;
	char line[64];
	int status;

	if (c->pid <= 0)
		return;
	close(c->in_fd);
	read_line(c->out_fd, line, sizeof(line), TARGET_STOP_MS); /* crc */
	close(c->out_fd);
	while (waitpid(c->pid, &status, WNOHANG) == 0) {
		if (now_ns() >= deadline) {
			fprintf(stderr, "rma bench: target did not stop; killing it\n");
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &status, 0);
			break;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	}
	c->pid = 0;
}

/* ---- measurement ---- */

static void fill_ops(const struct bench *b, uint64_t size, struct rma_op *ops,
		     size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		ops[i] = (struct rma_op){
			.kind = b->a->kind,
			.local = b->local,
			.remote = b->remote,
			.len = size,
			.user_data = i,
		};
}

/* Wait for at least one completion; returns the count or -errno. */
static int wait_completions(const struct bench *b, struct rma_completion *c,
			    size_t max)
{
	uint64_t spin_until = now_ns() + SPIN_NS;

	for (;;) {
		int n;

		if (b->a->manual) {
			n = rma_progress(b->e, 0);
			if (n < 0)
				return n;
		}
		n = rma_poll(b->e, c, max);
		if (n != 0)
			return n;
		/* With manual progress we are the progress: keep spinning. */
		if (!b->a->manual && now_ns() >= spin_until) {
			struct pollfd pfd = { .fd = b->comp_fd, .events = POLLIN };

			/* Bounded sleep: a lost wakeup costs 1 ms, not a hang. */
			poll(&pfd, 1, 1);
		}
	}
}

static bool phase_over(const struct bench_args *a, uint64_t posted,
		       uint64_t t0)
{
	if (a->iters)
		return posted >= a->iters;
	return now_ns() - t0 >= (uint64_t)a->duration_ms * 1000000u;
}

/* Top the window up; returns ops posted (maybe 0 on -EAGAIN) or -errno. */
static int post_some(const struct bench *b, struct rma_op *ops, size_t want)
{
	int rc = rma_post(b->e, ops, want, b->a->timeout_ms, NULL);

	return rc == -EAGAIN ? 0 : rc;
}

static int bandwidth_phase(const struct bench *b, uint64_t size,
			   struct result *res)
{
	struct rma_op ops[MAX_WINDOW];
	struct rma_completion comp[MAX_WINDOW];
	const struct bench_args *a = b->a;
	uint64_t posted = 0, done = 0, bytes = 0, t0 = now_ns();
	size_t inflight = 0;

	fill_ops(b, size, ops, a->window);
	for (;;) {
		bool over = phase_over(a, posted, t0);
		int i, n;

		if (!over && inflight < a->window) {
			size_t want = a->window - inflight;

			if (a->iters && want > a->iters - posted)
				want = (size_t)(a->iters - posted);
			n = post_some(b, ops, want);
			if (n < 0)
				return tool_fail("bench", EXIT_RUNTIME, "posting: %s",
						 rma_strerror(n));
			posted += (uint64_t)n;
			inflight += (size_t)n;
		}
		if (inflight == 0 && over)
			break;
		n = wait_completions(b, comp, MAX_WINDOW);
		if (n < 0)
			return tool_fail("bench", EXIT_RUNTIME, "progress: %s",
					 rma_strerror(n));
		for (i = 0; i < n; i++) {
			if (comp[i].result < 0)
				return tool_fail("bench", EXIT_RUNTIME, "%s of %" PRIu64
						 " bytes failed: %s",
						 op_name(a->kind), size,
						 rma_strerror((int)comp[i].result));
			bytes += (uint64_t)comp[i].result;
		}
		done += (uint64_t)n;
		inflight -= (size_t)n;
	}
	res->iters = done;
	res->mbps = (double)bytes / ((double)(now_ns() - t0) / 1e9) / 1e6;
	return 0;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/* Nearest-rank percentile of sorted samples, in microseconds. */
static double percentile_us(const uint64_t *s, size_t n, unsigned pct)
{
	size_t rank = (n * pct + 99) / 100;

	return (double)s[rank ? rank - 1 : 0] / 1e3;
}

static int submit_one(const struct bench *b, const struct rma_op *op)
{
	int64_t result = 0;
	int rc = rma_submit(b->e, op, 1, b->a->timeout_ms, &result, NULL, 0);

	if (rc == 0)
		return 0;
	if (rc < 0 && result >= 0)
		result = rc;
	return tool_fail("bench", EXIT_RUNTIME, "%s of %" PRIu64 " bytes failed: %s",
			 op_name(b->a->kind), op->len, rma_strerror((int)result));
}

static int latency_phase(const struct bench *b, uint64_t size,
			 struct result *res)
{
	static uint64_t samples[MAX_LAT_SAMPLES];
	const struct bench_args *a = b->a;
	size_t max = a->iters && a->iters < MAX_LAT_SAMPLES ? (size_t)a->iters
							    : MAX_LAT_SAMPLES;
	uint64_t t0 = now_ns();
	struct rma_op op;
	size_t n = 0;

	fill_ops(b, size, &op, 1);
	while (n < max) {
		uint64_t start = now_ns();
		int rc = submit_one(b, &op);

		if (rc)
			return rc;
		samples[n++] = now_ns() - start;
		if (!a->iters && n >= MIN_LAT_SAMPLES &&
		    now_ns() - t0 >= (uint64_t)a->duration_ms * 1000000u)
			break;
	}
	qsort(samples, n, sizeof(samples[0]), cmp_u64);
	res->samples = n;
	res->p50_us = percentile_us(samples, n, 50);
	res->p99_us = percentile_us(samples, n, 99);
	return 0;
}

static int measure(const struct bench *b, uint64_t size, struct result *res)
{
	struct rma_op op;
	int i, rc;

	*res = (struct result){ .size = size };
	fill_ops(b, size, &op, 1);
	for (i = 0; i < WARMUP_OPS; i++)
		if ((rc = submit_one(b, &op)) != 0)
			return rc;
	rc = bandwidth_phase(b, size, res);
	if (rc == 0)
		rc = latency_phase(b, size, res);
	return rc;
}

/* ---- output ---- */

static void print_header(const struct bench *b)
{
	if (b->a->json)
		return;
	printf("rma bench: transport %s, op %s, window %u%s\n", b->route,
	       op_name(b->a->kind), b->a->window,
	       b->a->manual ? ", manual progress" : "");
	printf("%10s %16s %12s %12s %10s\n", "size", "bandwidth MB/s", "p50 us",
	       "p99 us", "iters");
}

static void print_result(const struct bench *b, const struct result *r)
{
	char sz[32];

	if (b->a->json)
		printf("{\"transport\":\"%s\",\"op\":\"%s\",\"size\":%" PRIu64
		       ",\"window\":%u,\"iters\":%" PRIu64 ",\"bandwidth_MBps\":%.2f"
		       ",\"latency_us_p50\":%.2f,\"latency_us_p99\":%.2f"
		       ",\"latency_samples\":%zu,\"manual_progress\":%s}\n",
		       b->route, op_name(b->a->kind), r->size, b->a->window, r->iters,
		       r->mbps, r->p50_us, r->p99_us, r->samples,
		       b->a->manual ? "true" : "false");
	else
		printf("%10s %16.2f %12.2f %12.2f %10" PRIu64 "\n",
		       format_size(r->size, sz, sizeof(sz)), r->mbps, r->p50_us,
		       r->p99_us, r->iters);
	fflush(stdout);
}

/* ---- setup ---- */

static int check_remote(const struct bench_args *a, const rma_remote *r)
{
	unsigned need = a->kind == RMA_OP_PUT ? RMA_ACCESS_REMOTE_WRITE
					      : RMA_ACCESS_REMOTE_READ;

	if (rma_remote_length(r) < max_size(a))
		return tool_fail("bench", EXIT_RUNTIME, "the target's buffer (%" PRIu64
				 " bytes) is smaller than the largest size %" PRIu64,
				 rma_remote_length(r), max_size(a));
	if (!(rma_remote_access(r) & need))
		return tool_fail("bench", EXIT_RUNTIME, "the target does not allow %s",
				 op_name(a->kind));
	return 0;
}

static int run_sizes(struct bench *b)
{
	int i, rc;

	print_header(b);
	for (i = 0; i < b->a->n_sizes; i++) {
		struct result res;

		rc = measure(b, b->a->sizes[i], &res);
		if (rc)
			return rc;
		print_result(b, &res);
	}
	return EXIT_OK;
}

/* Engine, local buffer and connection, then the measurements. */
static int run_bench(const struct bench_args *a, const char *token)
{
	struct bench b = { .a = a };
	struct rma_config cfg;
	size_t len = (size_t)max_size(a);
	void *buf = NULL;
	int rc;

	rc = rma_remote_parse(token, &b.remote);
	if (rc < 0)
		return tool_fail("bench", EXIT_RUNTIME, "invalid advertisement: %s",
				 rma_strerror(rc));
	rc = check_remote(a, b.remote);
	if (rc)
		goto out;
	rma_config_init(&cfg);
	cfg.transports = a->transports;
	cfg.flags = a->manual ? RMA_ENGINE_MANUAL_PROGRESS : 0;
	cfg.secret = a->common.secret[0] ? a->common.secret : NULL;
	rc = rma_engine_create(&cfg, &b.e);
	if (rc < 0) {
		b.e = NULL;
		rc = tool_fail("bench", EXIT_RUNTIME, "creating the engine: %s",
			       rma_strerror(rc));
		goto out;
	}
	b.comp_fd = rma_completion_fd(b.e);
	buf = buffer_alloc(len);
	if (!buf) {
		rc = tool_fail("bench", EXIT_RUNTIME, "allocating %zu bytes", len);
		goto out;
	}
	fill_pattern(buf, len, 1);
	rc = rma_region_register(b.e, buf, len, 0, &b.local);
	if (rc < 0) {
		b.local = NULL;
		rc = tool_fail("bench", EXIT_RUNTIME, "registering: %s", rma_strerror(rc));
		goto out;
	}
	rc = rma_peer_connect(b.e, b.remote, TARGET_START_MS);
	if (rc < 0 && rc != -EOPNOTSUPP && rc != -EISCONN && rc != -EALREADY) {
		rc = tool_fail("bench", EXIT_RUNTIME, "connecting to the target: %s",
			       rma_strerror(rc));
		goto out;
	}
	struct rma_route_info ri;
	b.route = rma_peer_route(b.e, b.remote, &ri) == 0 ? ri.transport
		  : a->transports ? a->transports : "?";
	rc = run_sizes(&b);
out:
	if (b.local)
		rma_region_release(b.local);
	if (b.e)
		rma_engine_destroy(b.e);
	buffer_free(buf, len);
	rma_remote_free(b.remote);
	return rc;
}

int cmd_bench(int argc, char **argv)
{
	char token[RMA_ADVERTISEMENT_TEXT_MAX];
	struct child c = { 0 };
	struct bench_args a;
	int rc;

	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	rc = common_apply("bench", &a.common, NULL); /* run_bench takes the secret */
	if (rc)
		return rc;
	if (a.transports)
		unsetenv("RMA_TRANSPORTS"); /* --transport wins, here and in the child */
	/* A target that dies must not take us down with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	if (a.token)
		return run_bench(&a, a.token);
	fflush(stdout); /* the child must not inherit buffered output */
	rc = start_target(&a, max_size(&a), &c, token, sizeof(token));
	if (rc < 0) {
		stop_target(&c);
		if (rc == -EPIPE)
			return tool_fail("bench", EXIT_RUNTIME, "the target exited "
					 "before printing its advertisement");
		return tool_fail("bench", EXIT_RUNTIME, "starting the target: %s",
				 rma_strerror(rc));
	}
	rc = run_bench(&a, token);
	stop_target(&c);
	return rc;
}
