/*
 * cmd_bench.c - `rma bench`: per size, a warm-up, then bandwidth and message
 * rate (a window of ops in flight per peer, posted in batches) and latency
 * (one op at a time), optionally checking the bytes afterwards; from one or
 * many initiator engines (--peers) into one or many regions (--regions) of a
 * target that is either given (--target) or started as a child process.
 */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZES 32
#define MAX_WINDOW 1024
#define MAX_PEERS 1024
#define MAX_REGIONS 1000000
#define MAX_SLOTS 4096         /* distinct offsets ops cycle through */
#define MAX_LAT_SAMPLES 50000 /* enough for a stable p99 in a 0.4 s phase */
#define MIN_LAT_SAMPLES 3
/* Busy-poll this long before sleeping on the fds: longer than the gap
 * between two completions at 1 MiB (a few hundred us), since a sleeping
 * poller hands the work to the engine's thread and each completion wakes
 * it again, and the peer loops never sleep at all. */
#define SPIN_NS 1000000
#define TARGET_START_MS 10000  /* for the child to send its advertisements */
#define TARGET_STOP_MS 10000   /* for the child to exit after EOF */
#define DEFAULT_SIZES "8,4K,64K,1M,16M"
#define DEFAULT_SEED 7         /* the child target's --fill */
#define PUT_SEED 0x5eed0000u   /* + size index: what puts write */
#define CHILD_MAGIC "rma-bench-target"

struct bench_args {
	const char *transports; /* NULL = every available one */
	unsigned kind;          /* RMA_OP_PUT or RMA_OP_GET */
	uint64_t sizes[MAX_SIZES];
	int n_sizes;
	unsigned window;        /* ops in flight per peer */
	bool window_set;
	unsigned batch;         /* ops per rma_post; 0 = whatever the window has free */
	uint64_t iters;         /* 0 = bounded by duration_ms instead */
	uint64_t duration_ms;   /* per phase, per size */
	uint64_t warmup_ms;     /* before each size's phases */
	bool warmup_set;
	bool json;
	bool manual;
	bool verify;
	uint64_t seed;          /* the target's fill pattern */
	bool seed_set;
	unsigned peers;         /* initiator engines */
	unsigned regions;       /* regions at the target */
	const char *token;      /* --target; NULL = start our own */
	bool fabric;            /* --target is a plain libfabric target's triple */
	struct tool_fabric fab;
	bool alloc;             /* our target's buffer from rma_region_alloc */
	uint64_t span;          /* bytes ops cycle through; 0 = offset 0 only */
	bool span_set;
	int timeout_ms;         /* per op; 0 = the engine's default */
	struct common_opts common;
};

/* The target child we started, if any. */
struct child {
	pid_t pid;
	int in_fd;  /* its stdin: closing it stops it */
	int out_fd; /* its stdout */
};

/* What setting up peers and regions cost (NAN: not measured; a memory
 * change may be negative). */
struct setup {
	unsigned regions;          /* registered at the target */
	double register_per_s;     /* the child's registration rate */
	double target_B_per_region;
	double target_B_per_peer;
	double initiator_B_per_peer;
	double connect_ms;         /* all peers connected */
};

/* Everything one measurement needs. */
struct bench {
	const struct bench_args *a;
	unsigned np, nr;           /* engines, remotes */
	rma_engine **e;
	rma_region **local;        /* the local buffer, registered in each engine */
	rma_remote **remote;
	struct pollfd *fds;        /* each engine's completion fd */
	unsigned *inflight;        /* per engine */
	unsigned char *buf;        /* the local buffer */
	unsigned char *expect;     /* get --verify: the target's fill */
	unsigned char *scratch;    /* put --verify: the target read back */
	rma_region *scratch_r;
	size_t len;                /* of each buffer: the largest size */
	uint64_t seq;              /* ops issued for this size: picks peer, region, slot */
	uint64_t slots;            /* distinct offsets for this size */
	const char *route;
	pid_t target_pid;          /* 0 = not ours: its memory is not measured */
	struct setup setup;
};

struct result {
	uint64_t size;
	uint64_t iters;
	uint64_t posts;   /* rma_post calls that posted ops */
	double secs;
	double cpu_us_init, cpu_us_target; /* CPU time per op; NAN: not measured */
	double mbps, ops_per_s;
	double p50_us, p99_us;
	size_t samples;
	int verified; /* -1 not checked, 0 failed, 1 ok */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rma bench [--transport LIST] [--op put|get] [--size LIST]\n"
		"                 [--window N] [--batch N] [--iters N] [--duration TIME]\n"
		"                 [--warmup TIME] [--verify] [--fill SEED] [--peers N]\n"
		"                 [--regions N] [--timeout DURATION] [--json]\n"
		"                 [--manual-progress] [--target TOKEN|TRIPLE] [--alloc]\n"
		"                 [--span BYTES]\n"
		"                 [--secret-file PATH] [--log LEVEL]\n\n"
		"For each size: a warm-up, then bandwidth and message rate with --window ops\n"
		"in flight per peer (rma_post, --batch ops per call, and rma_poll), then\n"
		"latency with one op at a time (rma_submit).  Latency is that of a completed\n"
		"op: posted until its completion is taken, a full round trip (a put completes\n"
		"when the target has the bytes).  Ops cycle through distinct offsets, peers\n"
		"and regions.  Without --target, a target is started as a child process on\n"
		"127.0.0.1, filled with --fill's pattern, and stopped at the end.\n\n"
		"options:\n"
		"  -t, --transport LIST     transports to use on both sides (default: all)\n"
		"      --op put|get         operation (default put)\n"
		"  -s, --size LIST          comma-separated sizes in bytes\n"
		"                           (default " DEFAULT_SIZES ")\n"
		"      --sizes LIST         the same as --size\n"
		"  -w, --window N           ops in flight per peer (default 16, 1..%d)\n"
		"  -b, --batch N            ops per rma_post call: post when N slots of the\n"
		"                           window are free (default: all free slots at once);\n"
		"                           N over the default window (16) makes it 2N (at\n"
		"                           most %d); N over a --window given is an error\n"
		"  -n, --iters N            ops per phase instead of a time bound\n"
		"  -d, --duration TIME      time per phase and size, in seconds like iperf3 -t:\n"
		"                           2, 0.5, or with a unit: 250ms, 2s (default 0.5)\n"
		"      --warmup TIME        unmeasured ops before each size, seconds as for\n"
		"                           --duration; 0 = none (default: a fifth of it)\n"
		"      --verify             check the bytes after each size: put reads the\n"
		"                           target back and compares; get compares with the\n"
		"                           target's fill\n"
		"  -f, --fill SEED          the target's fill pattern (default %d; with\n"
		"                           --target, the SEED it was started with; get\n"
		"                           --verify needs it)\n"
		"      --peers N            initiator engines, each connected to the target\n"
		"                           (default 1, up to %d); one thread polls them all,\n"
		"                           each with a lease of 1 ms per engine (max 100 ms)\n"
		"      --regions N          regions registered at the target, ops spread over\n"
		"                           them (default 1, up to %d; not with --target)\n"
		"  -T, --timeout DURATION   deadline of each op (default: the engine's, 30s;\n"
		"                           a bare number is ms)\n"
		"  -j, --json               one JSON object per line per size\n"
		"  -m, --manual-progress    no progress thread: busy-poll rma_progress(),\n"
		"                           yielding the CPU after each empty round\n"
		"      --target TOKEN       use an existing target (its window must hold the\n"
		"                           largest size and allow the operation)\n"
		"      --target 'ADDRESS-HEX RKEY REMOTE-ADDR'\n"
		"                           a plain libfabric target, by the triple it hands\n"
		"                           out (as rma put/get take it; needs --transport\n"
		"                           with one spec, e.g. ofi:tcp, and a window that\n"
		"                           holds the largest size: its fabric checks bounds)\n"
		"      --alloc              our target's buffer is shared memory from\n"
		"                           rma_region_alloc (same-host shm peers map it)\n"
		"      --span BYTES         ops cycle through distinct offsets within the\n"
		"                           first BYTES of the buffers (default: the largest\n"
		"                           size); 0: every op at offset 0, as a loop that\n"
		"                           reuses one buffer does (cache-warm)\n"
		COMMON_HELP "\n" UNITS_HELP
		"Here --duration and --warmup read a bare number as seconds.\n"
		"MB/s is 10^6 bytes/s, Gb/s 10^9 bits/s, Mop/s 10^6 completed ops/s.\n"
		"Setup costs: registrations per second at the target, and VmRSS growth per\n"
		"region (target) and per peer (target and initiator), from /proc.\n\n"
		"JSON keys: transport, op, size (bytes), window, batch, peers, regions,\n"
		"iters, seconds, duration_s, warmup_s, bandwidth_MBps, bandwidth_Gbps,\n"
		"ops_per_s, ops_per_post, latency_us_p50, latency_us_p99 (microseconds,\n"
		"a completed op), latency_samples, latency_of (\"completed op, one at a\n"
		"time\"), verified (true, false or null), cpu_us_per_op and\n"
		"target_cpu_us_per_op (CPU time of every thread of each side in the\n"
		"bandwidth phase, per op; the benchmark's includes its busy-polling),\n"
		"register_per_s, target_B_per_region, target_B_per_peer,\n"
		"initiator_B_per_peer, connect_ms (null where not measured),\n"
		"manual_progress.\n",
		MAX_WINDOW, MAX_WINDOW, DEFAULT_SEED, MAX_PEERS, MAX_REGIONS);
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

/*
 * A benchmark's time, as iperf3 -t and perftest -D read it: a bare number
 * is seconds ("2", "0.5"); with a unit it is what parse_duration_ms says.
 */
static int parse_seconds(const char *s, uint64_t *ms)
{
	size_t n = strspn(s, "0123456789.");
	char *end;
	double v;

	if (n == 0 || s[n] != '\0')
		return parse_duration_ms(s, ms);
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= 0) || v > 3600.0)
		return -EINVAL;
	*ms = (uint64_t)(v * 1000.0 + 0.5);
	return 0;
}

enum { OPT_WARMUP = 0x200, OPT_VERIFY, OPT_PEERS, OPT_REGIONS, OPT_SPAN };

static int parse_args(int argc, char **argv, struct bench_args *a)
{
	static const struct option opts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "op", required_argument, NULL, OPT_OP },
		{ "size", required_argument, NULL, 's' },
		{ "sizes", required_argument, NULL, 's' },
		{ "window", required_argument, NULL, 'w' },
		{ "batch", required_argument, NULL, 'b' },
		{ "iters", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, OPT_WARMUP },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "fill", required_argument, NULL, 'f' },
		{ "peers", required_argument, NULL, OPT_PEERS },
		{ "regions", required_argument, NULL, OPT_REGIONS },
		{ "timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "manual-progress", no_argument, NULL, 'm' },
		{ "target", required_argument, NULL, OPT_TARGET },
		{ "alloc", no_argument, NULL, OPT_ALLOC },
		{ "span", required_argument, NULL, OPT_SPAN },
		COMMON_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	const char *sizes = DEFAULT_SIZES;
	uint64_t v;
	int c, rc;

	*a = (struct bench_args){ .kind = RMA_OP_PUT, .window = 16, .duration_ms = 500,
				  .seed = DEFAULT_SEED, .peers = 1, .regions = 1 };
	common_init(&a->common);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":t:s:w:b:n:d:f:T:jmh", opts, NULL)) != -1) {
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
			a->window_set = true;
			break;
		case 'b':
			if (parse_count(optarg, MAX_WINDOW, &v) < 0)
				return tool_usage_error("bench", "bad --batch '%s' (1..%d)",
							optarg, MAX_WINDOW);
			a->batch = (unsigned)v;
			break;
		case 'n':
			if (parse_count(optarg, UINT32_MAX, &a->iters) < 0)
				return tool_usage_error("bench", "bad --iters '%s'", optarg);
			break;
		case 'd':
			if (parse_seconds(optarg, &v) < 0 || v == 0 || v > 3600000)
				return tool_usage_error("bench", "bad --duration '%s' (seconds, "
							"e.g. 2 or 0.5, or 250ms; 1ms..60min)", optarg);
			a->duration_ms = v;
			break;
		case OPT_WARMUP:
			if (parse_seconds(optarg, &v) < 0 || v > 3600000)
				return tool_usage_error("bench", "bad --warmup '%s' (seconds, "
							"e.g. 1 or 0.2, or 200ms)", optarg);
			a->warmup_ms = v;
			a->warmup_set = true;
			break;
		case OPT_VERIFY: a->verify = true; break;
		case 'f':
			if (parse_u64(optarg, &a->seed) < 0)
				return tool_usage_error("bench", "bad --fill seed '%s'", optarg);
			a->seed_set = true;
			break;
		case OPT_PEERS:
			if (parse_count(optarg, MAX_PEERS, &v) < 0)
				return tool_usage_error("bench", "bad --peers '%s' (1..%d)",
							optarg, MAX_PEERS);
			a->peers = (unsigned)v;
			break;
		case OPT_REGIONS:
			if (parse_count(optarg, MAX_REGIONS, &v) < 0)
				return tool_usage_error("bench", "bad --regions '%s' (1..%d)",
							optarg, MAX_REGIONS);
			a->regions = (unsigned)v;
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
		case OPT_ALLOC: a->alloc = true; break;
		case OPT_SPAN:
			if (strcmp(optarg, "0") && rma__parse_size(optarg, &v) < 0)
				return tool_usage_error("bench", "bad --span '%s' (bytes, or 0)",
							optarg);
			a->span = strcmp(optarg, "0") ? v : 0;
			a->span_set = true;
			break;
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
	if (a->batch > a->window) {
		if (a->window_set)
			return tool_usage_error("bench", "--batch %u is larger than --window %u",
						a->batch, a->window);
		/* Room for one batch in flight while the next is posted. */
		a->window = a->batch * 2 > MAX_WINDOW ? MAX_WINDOW : a->batch * 2;
	}
	if (!a->warmup_set)
		a->warmup_ms = a->duration_ms / 5;
	if (a->token && a->regions > 1)
		return tool_usage_error("bench", "--regions needs the target bench starts "
					"(not --target)");
	if (a->token && strpbrk(a->token, " \t")) {
		/* Tokens have no blanks: three words are a plain target's
		 * triple, as fi_rma --peer and scripts pass it. */
		char copy[1024], *w[3], *save = NULL, *t;
		int n = 0;

		if (strlen(a->token) >= sizeof copy)
			return tool_usage_error("bench", "--target: too long");
		strcpy(copy, a->token);
		for (t = strtok_r(copy, " \t", &save); t && n < 3; t = strtok_r(NULL, " \t", &save))
			w[n++] = t;
		if (n != 3 || t) /* t: a fourth word */
			return tool_usage_error("bench", "--target: a TOKEN, or the three words "
						"ADDRESS-HEX RKEY REMOTE-ADDR");
		if ((rc = parse_fabric_triple("bench", w, a->transports, &a->fab)))
			return rc;
		a->fabric = true;
	}
	if (a->token && a->verify && a->kind == RMA_OP_GET && !a->seed_set)
		return tool_usage_error("bench", "get --verify with --target needs --fill SEED "
					"(the target's)");
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

/* VmRSS of a process in bytes, or NAN; a difference of two is NAN unless
 * both were read. */
static double vm_rss(pid_t pid)
{
	char path[64], line[256];
	double kb = NAN;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return NAN;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %lf kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* CPU time of every thread of a process, in ns (schedstat), or -1. */
static double task_cpu_ns(pid_t pid)
{
	char path[64];
	struct dirent *d;
	double sum = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir)) != NULL) {
		char file[64];
		unsigned long long ns;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		if (snprintf(file, sizeof(file), "/proc/%d/task/%.20s/schedstat",
			     (int)pid, d->d_name) >= (int)sizeof(file))
			continue;
		f = fopen(file, "r");
		if (!f)
			continue; /* the thread just ended */
		if (fscanf(f, "%llu", &ns) == 1)
			sum += (double)ns;
		fclose(f);
	}
	closedir(dir);
	return sum;
}

static double self_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) < 0)
		return -1;
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ---- the target child ---- */

static int write_full(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * The child, forked before the parent makes any thread: one engine, one
 * buffer of `size` bytes filled with the seed's pattern, registered
 * a->regions times (each registration a region of its own over the same
 * bytes).  It writes
 *     CHILD_MAGIC REGIONS REGISTER_NS RSS_BEFORE RSS_AFTER\n
 * then, per region, a 2-byte length and the binary advertisement, and
 * serves until in_fd ends.
 */
static void child_target(const struct bench_args *a, uint64_t size, int in_fd,
			 int out_fd)
{
	struct rma_config cfg;
	unsigned char ad[RMA_ADVERTISEMENT_MAX];
	char line[160];
	rma_region **r;
	rma_engine *e;
	void *buf;
	double rss0, rss1;
	uint64_t t0, t1;
	unsigned i, n = 0;
	int rc;

	signal(SIGINT, SIG_IGN); /* the parent stops us by closing in_fd */
	rma_config_init(&cfg);
	cfg.transports = a->transports;
	cfg.listen = "127.0.0.1:0";
	cfg.secret = a->common.secret[0] ? a->common.secret : NULL;
	/* --alloc: the first region is shared memory from the library, the
	 * others (--regions) register the same bytes. */
	buf = a->alloc ? NULL : buffer_alloc((size_t)size);
	r = calloc(a->regions, sizeof(*r));
	if ((!buf && !a->alloc) || !r)
		_exit(3);
	if (buf)
		fill_pattern(buf, (size_t)size, a->seed);
	rc = rma_engine_create(&cfg, &e);
	if (rc < 0) {
		fprintf(stderr, "rma bench: target engine: %s\n", rma_strerror(rc));
		_exit(3);
	}
	rss0 = vm_rss(getpid());
	t0 = now_ns();
	for (n = 0; n < a->regions; n++) {
		if (!buf) {
			rc = rma_region_alloc(e, (size_t)size, RMA_ACCESS_REMOTE_RW,
					      &r[n], &buf);
			if (rc == 0)
				fill_pattern(buf, (size_t)size, a->seed);
		} else {
			rc = rma_region_register(e, buf, (size_t)size,
						 RMA_ACCESS_REMOTE_RW, &r[n]);
		}
		if (rc < 0) {
			fprintf(stderr, "rma bench: target: registering region %u: %s\n",
				n, rma_strerror(rc));
			_exit(3);
		}
	}
	t1 = now_ns();
	rss1 = vm_rss(getpid());
	snprintf(line, sizeof(line), CHILD_MAGIC " %u %" PRIu64 " %.0f %.0f\n", n,
		 t1 - t0, rss0, rss1);
	if (write_full(out_fd, line, strlen(line)) < 0)
		_exit(3);
	for (i = 0; i < n; i++) {
		rc = rma_advertise(r[i], 0, 0, 0, ad + 2, sizeof(ad) - 2);
		if (rc < 0) {
			fprintf(stderr, "rma bench: target: advertising: %s\n", rma_strerror(rc));
			_exit(3);
		}
		ad[0] = (unsigned char)(rc & 0xff);
		ad[1] = (unsigned char)(rc >> 8);
		if (write_full(out_fd, ad, (size_t)rc + 2) < 0)
			_exit(3);
	}
	for (;;) {
		char c;
		ssize_t got = read(in_fd, &c, 1);

		if (got == 0 || (got < 0 && errno != EINTR))
			break;
	}
	rma_engine_destroy(e); /* releases every region */
	_exit(0);
}

/* Read exactly n bytes by a deadline; 0 or -errno. */
static int read_full(int fd, void *p, size_t n, uint64_t deadline)
{
	char *c = p;

	while (n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ns();
		ssize_t got;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
			continue; /* EINTR or timeout: the deadline check decides */
		got = read(fd, c, n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -EPIPE;
		c += got;
		n -= (size_t)got;
	}
	return 0;
}

/* One text line (the header), byte by byte: it is short. */
static int read_line(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t len = 0;
	int rc;

	while (len + 1 < cap) {
		rc = read_full(fd, buf + len, 1, deadline);
		if (rc < 0)
			return rc;
		if (buf[len] == '\n')
			break;
		len++;
	}
	buf[len] = '\0';
	return (int)len;
}

/* Fork the child and take its advertisements into b->remote. */
static int start_target(struct bench *b, struct child *c)
{
	const struct bench_args *a = b->a;
	uint64_t deadline = now_ns() +
		((uint64_t)TARGET_START_MS + a->regions / 10u) * 1000000u;
	unsigned char ad[RMA_ADVERTISEMENT_MAX];
	char line[160];
	uint64_t reg_ns;
	double rss0, rss1;
	unsigned n, i;
	int in[2], out[2], rc;

	if (pipe2(in, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(out, O_CLOEXEC) < 0) {
		rc = -errno;
		close(in[0]);
		close(in[1]);
		return rc;
	}
	fflush(stdout); /* the child must not inherit buffered output */
	fflush(stderr);
	c->pid = fork();
	if (c->pid == 0) {
		close(in[1]);
		close(out[0]);
		child_target(a, b->len, in[0], out[1]);
	}
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	c->out_fd = out[0];
	if (c->pid < 0)
		return -errno;
	b->target_pid = c->pid;
	rc = read_line(c->out_fd, line, sizeof(line), deadline);
	if (rc < 0)
		return rc;
	if (sscanf(line, CHILD_MAGIC " %u %" SCNu64 " %lf %lf", &n, &reg_ns, &rss0,
		   &rss1) != 4 || n != a->regions)
		return -EBADMSG;
	b->setup.regions = n;
	b->setup.register_per_s = reg_ns ? n / (reg_ns / 1e9) : NAN;
	b->setup.target_B_per_region = (rss1 - rss0) / n;
	b->remote = calloc(n, sizeof(*b->remote));
	if (!b->remote)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		size_t len;

		rc = read_full(c->out_fd, ad, 2, deadline);
		if (rc < 0)
			return rc;
		len = ad[0] | (size_t)ad[1] << 8;
		if (len > sizeof(ad))
			return -EBADMSG;
		rc = read_full(c->out_fd, ad, len, deadline);
		if (rc < 0)
			return rc;
		rc = rma_remote_decode(ad, len, &b->remote[i]);
		if (rc < 0)
			return rc;
		b->nr = i + 1;
	}
	return 0;
}

/* Close its stdin and wait for it to exit; kill it if it hangs. */
static void stop_target(struct child *c)
{
	uint64_t deadline = now_ns() + (uint64_t)TARGET_STOP_MS * 1000000u;
	int status;

	if (c->pid <= 0)
		return;
	close(c->in_fd);
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

/* s mod n, without a division for the usual powers of two (1 peer, 1
 * region, one offset): at tens of cycles each, three divisions per op were
 * a fifth of an 8-byte shm op, a cost the peer loops do not pay. */
static uint64_t wrap(uint64_t s, uint64_t n)
{
	return (n & (n - 1)) == 0 ? s & (n - 1) : s % n;
}

/* The next op of this size: peer, region and offset cycle with b->seq. */
static unsigned next_op(struct bench *b, uint64_t size, struct rma_op *op,
			unsigned peer)
{
	uint64_t s = b->seq++;
	uint64_t off = wrap(s, b->slots) * size;

	if (peer == UINT32_MAX)
		peer = (unsigned)wrap(s, b->np);
	*op = (struct rma_op){
		.kind = b->a->kind,
		.local = b->local[peer],
		.local_off = off,
		.remote = b->remote[wrap(s, b->nr)],
		.remote_off = off,
		.len = size,
		.user_data = s,
	};
	return peer;
}

static int op_failed(const struct bench *b, uint64_t size, int err)
{
	return tool_fail("bench", EXIT_RUNTIME, "%s of %" PRIu64 " bytes failed: %s%s",
			 op_name(b->a->kind), size, rma_strerror(err),
			 b->a->fabric ? fabric_hint(err) : "");
}

/* About to sleep on the completion fds: hand progress back to each
 * engine's thread; false if completions came meanwhile. */
static bool armed(struct bench *b)
{
	for (unsigned p = 0; p < b->np; p++)
		if (b->inflight[p] && rma_arm(b->e[p]) == -EAGAIN)
			return false;
	return true;
}

/*
 * Take the completions waiting on every engine, or wait for some: spin
 * briefly, then sleep on the completion fds.  Returns the count or an exit
 * code (> 0 is never returned for an error: errors come back negative).
 */
static int reap(struct bench *b, uint64_t size, uint64_t *bytes)
{
	struct rma_completion comp[MAX_WINDOW];
	uint64_t spin_until = now_ns() + SPIN_NS;

	for (;;) {
		int total = 0;

		for (unsigned p = 0; p < b->np; p++) {
			int n;

			if (!b->inflight[p])
				continue;
			if (b->a->manual) {
				n = rma_progress(b->e[p], 0);
				if (n < 0)
					return -tool_fail("bench", EXIT_RUNTIME, "progress: %s",
							  rma_strerror(n));
			}
			n = rma_poll(b->e[p], comp, MAX_WINDOW);
			if (n < 0)
				return -tool_fail("bench", EXIT_RUNTIME, "poll: %s",
						  rma_strerror(n));
			for (int i = 0; i < n; i++) {
				if (comp[i].result < 0)
					return -op_failed(b, size, (int)comp[i].result);
				*bytes += (uint64_t)comp[i].result;
			}
			b->inflight[p] -= (unsigned)n;
			total += n;
		}
		if (total)
			return total;
		/* With manual progress we are the progress: keep spinning, but
		 * let a target on the same cores run (a spinner that never
		 * yields holds the CPU for a whole time slice). */
		if (b->a->manual)
			sched_yield();
		else if (now_ns() >= spin_until && armed(b))
			/* Bounded sleep: a lost wakeup costs 1 ms, not a hang. */
			poll(b->fds, b->np, 1);
	}
}

/* Post one batch to engine p if its window has room; returns ops posted
 * (maybe 0) or a negative exit code. */
static int post_batch(struct bench *b, uint64_t size, unsigned p, uint64_t left)
{
	const struct bench_args *a = b->a;
	struct rma_op ops[MAX_WINDOW];
	unsigned room = a->window - b->inflight[p];
	uint64_t first = b->seq;
	size_t want = a->batch ? (room >= a->batch ? a->batch : 0) : room;
	int err = 0, rc;

	if (want > left)
		want = (size_t)left;
	if (want == 0)
		return 0;
	for (size_t i = 0; i < want; i++)
		next_op(b, size, &ops[i], p);
	rc = rma_post(b->e[p], ops, want, a->timeout_ms, &err);
	if (rc == -EAGAIN)
		rc = 0, err = -EAGAIN;
	if (rc < 0)
		return -tool_fail("bench", EXIT_RUNTIME, "posting: %s", rma_strerror(rc));
	if ((size_t)rc < want && err != -EAGAIN)
		return -tool_fail("bench", EXIT_RUNTIME, "posting: %s", rma_strerror(err));
	b->seq = first + (uint64_t)rc; /* the ops not posted are issued again */
	b->inflight[p] += (unsigned)rc;
	return rc;
}

/* Keep every peer's window full for ms (or iters ops); results into res if
 * given (a warm-up passes NULL).  Returns 0 or an exit code. */
static int window_phase(struct bench *b, uint64_t size, uint64_t ms,
			uint64_t iters, struct result *res)
{
	uint64_t posted = 0, posts = 0, done = 0, bytes = 0, t0 = now_ns();
	double cpu0 = self_cpu_ns();
	double tcpu0 = b->target_pid ? task_cpu_ns(b->target_pid) : -1;
	unsigned inflight = 0;

	for (;;) {
		bool over = iters ? posted >= iters
				  : now_ns() - t0 >= ms * 1000000u;
		int n;

		/* Fill each window with as many whole batches as it has room for. */
		for (unsigned p = 0; !over && p < b->np; p++) {
			do {
				n = post_batch(b, size, p,
					       iters ? iters - posted : UINT64_MAX);
				if (n < 0)
					return -n;
				posted += (uint64_t)n;
				posts += n > 0;
				inflight += (unsigned)n;
			} while (n > 0 && b->a->batch);
		}
		if (inflight == 0 && over)
			break;
		if (inflight == 0)
			continue; /* every post met a full queue: try again */
		n = reap(b, size, &bytes);
		if (n < 0)
			return -n;
		done += (uint64_t)n;
		inflight -= (unsigned)n;
	}
	/* Polling is over: each engine's thread drives again from now on
	 * (its lease would keep it aside while the next phase waits). */
	for (unsigned p = 0; p < b->np; p++)
		rma_arm(b->e[p]);
	if (res) {
		res->iters = done;
		res->posts = posts;
		res->secs = (double)(now_ns() - t0) / 1e9;
		res->mbps = (double)bytes / res->secs / 1e6;
		res->ops_per_s = (double)done / res->secs;
		res->cpu_us_init = res->cpu_us_target = NAN;
		if (done && cpu0 >= 0) {
			double cpu1 = self_cpu_ns();

			if (cpu1 >= 0)
				res->cpu_us_init = (cpu1 - cpu0) / 1e3 / (double)done;
		}
		if (done && tcpu0 >= 0) {
			double tcpu1 = task_cpu_ns(b->target_pid);

			if (tcpu1 >= 0)
				res->cpu_us_target = (tcpu1 - tcpu0) / 1e3 / (double)done;
		}
	}
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

static int submit_one(struct bench *b, uint64_t size)
{
	struct rma_op op;
	unsigned p = next_op(b, size, &op, UINT32_MAX);
	int64_t result = 0;
	int rc = rma_submit(b->e[p], &op, 1, b->a->timeout_ms, &result, NULL, 0);

	if (rc == 0)
		return 0;
	if (rc < 0 && result >= 0)
		result = rc;
	return op_failed(b, size, (int)result);
}

static int latency_phase(struct bench *b, uint64_t size, struct result *res)
{
	static uint64_t samples[MAX_LAT_SAMPLES];
	const struct bench_args *a = b->a;
	size_t max = a->iters && a->iters < MAX_LAT_SAMPLES ? (size_t)a->iters
							    : MAX_LAT_SAMPLES;
	uint64_t t0 = now_ns();
	size_t n = 0;

	while (n < max) {
		uint64_t start = now_ns();
		int rc = submit_one(b, size);

		if (rc)
			return rc;
		samples[n++] = now_ns() - start;
		if (!a->iters && n >= MIN_LAT_SAMPLES &&
		    now_ns() - t0 >= a->duration_ms * 1000000u)
			break;
	}
	qsort(samples, n, sizeof(samples[0]), cmp_u64);
	res->samples = n;
	res->p50_us = percentile_us(samples, n, 50);
	res->p99_us = percentile_us(samples, n, 99);
	return 0;
}

/* Set the local buffer up so that --verify can tell the ops did their work:
 * puts write a pattern of this size's own, gets land on zeros. */
static void prepare_bytes(struct bench *b, int size_index)
{
	if (b->a->kind == RMA_OP_PUT)
		fill_pattern(b->buf, b->len, PUT_SEED + (uint64_t)size_index);
	else
		memset(b->buf, 0, b->len);
}

/* The bytes the ops touched, [0, slots used * size), are what they should
 * be: the target's (read back) equal what was put, or what was got equals
 * the target's fill.  Returns 1 ok, 0 differ, or a negative exit code. */
static int verify(struct bench *b, uint64_t size)
{
	uint64_t used = b->seq < b->slots ? b->seq : b->slots;
	size_t n = (size_t)(used * size);
	const unsigned char *want = b->expect;
	size_t i;

	if (b->a->kind == RMA_OP_PUT) {
		struct rma_op op = {
			.kind = RMA_OP_GET, .local = b->scratch_r,
			.remote = b->remote[0], .len = n,
		};
		int64_t result = 0;
		int rc;

		memset(b->scratch, 0, n);
		rc = rma_submit(b->e[0], &op, 1, b->a->timeout_ms, &result, NULL, 0);
		if (rc)
			return -tool_fail("bench", EXIT_RUNTIME, "--verify: reading the "
					  "target back: %s", rma_strerror(rc < 0 ? rc
							: (int)result));
		want = b->buf;
		for (i = 0; i < n && b->scratch[i] == want[i]; i++)
			;
	} else {
		for (i = 0; i < n && b->buf[i] == want[i]; i++)
			;
	}
	if (i == n)
		return 1;
	fprintf(stderr, "rma bench: --verify: %s of %" PRIu64 " bytes: byte %zu of %zu "
		"differs%s\n", op_name(b->a->kind), size, i, n,
		b->a->kind == RMA_OP_GET && b->a->token
			? " (is --fill the target's seed?)" : "");
	return 0;
}

static int measure(struct bench *b, int size_index, struct result *res)
{
	const struct bench_args *a = b->a;
	uint64_t size = a->sizes[size_index];
	int rc;

	*res = (struct result){ .size = size, .verified = -1 };
	b->seq = 0;
	/* Distinct offsets within the span (default: the whole buffer); at
	 * least one, offset 0. */
	b->slots = (a->span_set && a->span < b->len ? a->span : b->len) / size;
	if (b->slots > MAX_SLOTS)
		b->slots = MAX_SLOTS;
	if (b->slots == 0)
		b->slots = 1;
	if (a->verify)
		prepare_bytes(b, size_index);
	/* Warm-up: the same traffic, unmeasured, plus a few single ops. */
	if (a->warmup_ms) {
		rc = window_phase(b, size, a->warmup_ms, 0, NULL);
		if (rc)
			return rc;
	}
	for (unsigned i = 0; i < 3; i++)
		if ((rc = submit_one(b, size)) != 0)
			return rc;
	rc = window_phase(b, size, a->duration_ms, a->iters, res);
	if (rc == 0)
		rc = latency_phase(b, size, res);
	if (rc == 0 && a->verify) {
		rc = verify(b, size);
		if (rc < 0)
			return -rc;
		res->verified = rc;
		rc = 0;
	}
	return rc;
}

/* ---- output ---- */

/* A number, or null where it was not measured (NAN). */
static void json_num(const char *key, double v)
{
	if (isnan(v))
		printf(",\"%s\":null", key);
	else
		printf(",\"%s\":%.2f", key, v);
}

static void print_header(const struct bench *b)
{
	const struct bench_args *a = b->a;
	const struct setup *s = &b->setup;

	if (a->json)
		return;
	printf("rma bench: transport %s, op %s, window %u per peer, batch ", b->route,
	       op_name(a->kind), a->window);
	if (a->batch)
		printf("%u", a->batch);
	else
		printf("up to %u", a->window);
	printf(", peers %u, regions %u%s\n", b->np, b->nr,
	       a->manual ? ", manual progress" : "");
	if (!isnan(s->register_per_s)) {
		printf("target: %u region%s registered at %.0f/s, VmRSS ", s->regions,
		       s->regions == 1 ? "" : "s", s->register_per_s);
		if (isnan(s->target_B_per_region))
			printf("per region not measured\n");
		else
			printf("%+.0f bytes per region\n", s->target_B_per_region);
	}
	if (b->np > 1) {
		printf("peers: %u connected in %.1f ms; VmRSS per peer: ", b->np,
		       s->connect_ms);
		if (!isnan(s->target_B_per_peer))
			printf("target %+.0f bytes, ", s->target_B_per_peer);
		if (isnan(s->initiator_B_per_peer))
			printf("initiator not measured\n");
		else
			printf("initiator %+.0f bytes\n", s->initiator_B_per_peer);
	}
	printf("bandwidth and rate: %s phases of %.3g s after %.3g s of warm-up; "
	       "latency: a completed op, one at a time (a full round trip)\n",
	       a->iters ? "fixed-count" : "timed", a->duration_ms / 1e3,
	       a->warmup_ms / 1e3);
	printf("%8s %11s %9s %9s %9s %9s %10s %9s %9s%s\n", "size", "MB/s(10^6)",
	       "Gb/s", "Mop/s", "p50 us", "p99 us", "ops", "cpu/op", "tgt cpu",
	       a->verify ? "  verify" : "");
}

static void print_result(const struct bench *b, const struct result *r)
{
	const struct bench_args *a = b->a;
	const struct setup *s = &b->setup;
	char sz[32];

	if (!a->json) {
		char cpu[32], tgt[32];

		snprintf(cpu, sizeof(cpu), isnan(r->cpu_us_init) ? "-" : "%.2f",
			 r->cpu_us_init);
		snprintf(tgt, sizeof(tgt), isnan(r->cpu_us_target) ? "-" : "%.2f",
			 r->cpu_us_target);
		printf("%8s %11.2f %9.3f %9.4f %9.2f %9.2f %10" PRIu64 " %9s %9s%s\n",
		       format_size(r->size, sz, sizeof(sz)), r->mbps, r->mbps * 8 / 1e3,
		       r->ops_per_s / 1e6, r->p50_us, r->p99_us, r->iters,
		       cpu, tgt,
		       r->verified < 0 ? "" : r->verified ? "  ok" : "  FAILED");
		fflush(stdout);
		return;
	}
	printf("{\"transport\":\"%s\",\"op\":\"%s\",\"size\":%" PRIu64
	       ",\"window\":%u,\"batch\":%u,\"peers\":%u,\"regions\":%u"
	       ",\"iters\":%" PRIu64 ",\"seconds\":%.4f,\"duration_s\":%.3f"
	       ",\"warmup_s\":%.3f,\"bandwidth_MBps\":%.2f,\"bandwidth_Gbps\":%.4f"
	       ",\"ops_per_s\":%.1f,\"ops_per_post\":%.2f,\"latency_us_p50\":%.2f,\"latency_us_p99\":%.2f"
	       ",\"latency_samples\":%zu"
	       ",\"latency_of\":\"completed op, one at a time\",\"verified\":%s",
	       b->route, op_name(a->kind), r->size, a->window, a->batch, b->np, b->nr,
	       r->iters, r->secs, a->duration_ms / 1e3, a->warmup_ms / 1e3, r->mbps,
	       r->mbps * 8 / 1e3, r->ops_per_s,
	       r->posts ? (double)r->iters / r->posts : 0.0, r->p50_us, r->p99_us, r->samples,
	       r->verified < 0 ? "null" : r->verified ? "true" : "false");
	json_num("cpu_us_per_op", r->cpu_us_init);
	json_num("target_cpu_us_per_op", r->cpu_us_target);
	json_num("register_per_s", s->register_per_s);
	json_num("target_B_per_region", s->target_B_per_region);
	json_num("target_B_per_peer", s->target_B_per_peer);
	json_num("initiator_B_per_peer", s->initiator_B_per_peer);
	json_num("connect_ms", s->connect_ms);
	printf(",\"manual_progress\":%s}\n", a->manual ? "true" : "false");
	fflush(stdout);
}

/* ---- setup ---- */

static int check_remote(const struct bench_args *a, const rma_remote *r)
{
	unsigned need = a->kind == RMA_OP_PUT ? RMA_ACCESS_REMOTE_WRITE
					      : RMA_ACCESS_REMOTE_READ;

	/* A plain target's length is not known here (0): its fabric checks. */
	if (!a->fabric && rma_remote_length(r) < max_size(a))
		return tool_fail("bench", EXIT_RUNTIME, "the target's buffer (%" PRIu64
				 " bytes) is smaller than the largest size %" PRIu64,
				 rma_remote_length(r), max_size(a));
	if (!(rma_remote_access(r) & need))
		return tool_fail("bench", EXIT_RUNTIME, "the target does not allow %s",
				 op_name(a->kind));
	if (a->verify && a->kind == RMA_OP_PUT &&
	    !(rma_remote_access(r) & RMA_ACCESS_REMOTE_READ))
		return tool_fail("bench", EXIT_RUNTIME, "--verify reads the target back, "
				 "and it does not allow get");
	return 0;
}

/* Engine p with the local buffer registered in it, connected, one op done
 * (so that the target holds this peer's state). */
static int add_peer(struct bench *b, unsigned p)
{
	const struct bench_args *a = b->a;
	struct rma_config cfg;
	int rc;

	rma_config_init(&cfg);
	cfg.transports = a->transports;
	cfg.flags = a->manual ? RMA_ENGINE_MANUAL_PROGRESS : 0;
	cfg.secret = a->common.secret[0] ? a->common.secret : NULL;
	/* One thread polls every engine in turn: each engine's thread stands
	 * aside for a whole turn, not 1 ms (a turn past the lease, when this
	 * thread lost its core a while, woke 64 threads to drive what it was
	 * driving, and the cores went to them).  rma_arm ends the lease
	 * before the bench sleeps, so nothing waits for it. */
	cfg.poll_lease_us = (int)(1000 * (a->peers < 100 ? a->peers : 100));
	rc = rma_engine_create(&cfg, &b->e[p]);
	if (rc < 0) {
		b->e[p] = NULL;
		return tool_fail("bench", EXIT_RUNTIME, "creating engine %u: %s", p,
				 rma_strerror(rc));
	}
	b->fds[p] = (struct pollfd){ .fd = rma_completion_fd(b->e[p]), .events = POLLIN };
	rc = rma_region_register(b->e[p], b->buf, b->len, 0, &b->local[p]);
	if (rc < 0) {
		b->local[p] = NULL;
		return tool_fail("bench", EXIT_RUNTIME, "registering: %s", rma_strerror(rc));
	}
	rc = rma_peer_connect(b->e[p], b->remote[0], TARGET_START_MS);
	if (rc < 0 && rc != -EOPNOTSUPP && rc != -EISCONN && rc != -EALREADY)
		return tool_fail("bench", EXIT_RUNTIME, "connecting to the target: %s",
				 rma_strerror(rc));
	{
		struct rma_op op = { .kind = a->kind, .local = b->local[p],
				     .remote = b->remote[0], .len = 1 };
		int64_t result = 0;

		rc = rma_submit(b->e[p], &op, 1, a->timeout_ms, &result, NULL, 0);
		if (rc)
			return op_failed(b, 1, rc < 0 ? rc : (int)result);
	}
	return 0;
}

/* Every peer, with the memory each costs on both sides. */
static int add_peers(struct bench *b)
{
	double self0, target0 = NAN;
	uint64_t t0 = now_ns();
	int rc;

	rc = add_peer(b, 0);
	if (rc)
		return rc;
	self0 = vm_rss(getpid());
	if (b->target_pid)
		target0 = vm_rss(b->target_pid);
	for (unsigned p = 1; p < b->a->peers; p++) {
		rc = add_peer(b, p);
		b->np = p + 1; /* torn down on failure too */
		if (rc)
			return rc;
	}
	b->setup.connect_ms = (double)(now_ns() - t0) / 1e6;
	if (b->np > 1) {
		double self1 = vm_rss(getpid());
		double target1 = b->target_pid ? vm_rss(b->target_pid) : NAN;

		b->setup.initiator_B_per_peer = (self1 - self0) / (b->np - 1);
		b->setup.target_B_per_peer = (target1 - target0) / (b->np - 1);
	}
	return 0;
}

static int alloc_bench(struct bench *b)
{
	unsigned n = b->a->peers;

	b->e = calloc(n, sizeof(*b->e));
	b->local = calloc(n, sizeof(*b->local));
	b->fds = calloc(n, sizeof(*b->fds));
	b->inflight = calloc(n, sizeof(*b->inflight));
	b->buf = buffer_alloc(b->len);
	if (!b->e || !b->local || !b->fds || !b->inflight || !b->buf)
		return tool_fail("bench", EXIT_RUNTIME, "out of memory");
	fill_pattern(b->buf, b->len, 1);
	if (b->a->verify && b->a->kind == RMA_OP_GET) {
		b->expect = buffer_alloc(b->len);
		if (!b->expect)
			return tool_fail("bench", EXIT_RUNTIME, "out of memory");
		fill_pattern(b->expect, b->len, b->a->seed);
	}
	return 0;
}

static void free_bench(struct bench *b)
{
	for (unsigned p = 0; p < b->a->peers && b->e; p++) {
		if (b->local && b->local[p])
			rma_region_release(b->local[p]);
		if (b->e[p])
			rma_engine_destroy(b->e[p]); /* scratch_r goes with e[0] */
	}
	for (unsigned i = 0; i < b->nr; i++)
		rma_remote_free(b->remote[i]);
	free(b->remote);
	free(b->e);
	free(b->local);
	free(b->fds);
	free(b->inflight);
	if (b->buf)
		buffer_free(b->buf, b->len);
	if (b->expect)
		buffer_free(b->expect, b->len);
	if (b->scratch)
		buffer_free(b->scratch, b->len);
}

static int run_sizes(struct bench *b)
{
	int rc;

	if (b->a->verify && b->a->kind == RMA_OP_PUT) {
		b->scratch = buffer_alloc(b->len);
		if (!b->scratch)
			return tool_fail("bench", EXIT_RUNTIME, "out of memory");
		rc = rma_region_register(b->e[0], b->scratch, b->len, 0, &b->scratch_r);
		if (rc < 0)
			return tool_fail("bench", EXIT_RUNTIME, "registering: %s",
					 rma_strerror(rc));
	}
	print_header(b);
	for (int i = 0; i < b->a->n_sizes; i++) {
		struct result res;

		rc = measure(b, i, &res);
		if (rc)
			return rc;
		print_result(b, &res);
		if (res.verified == 0)
			return EXIT_RUNTIME;
	}
	return EXIT_OK;
}

int cmd_bench(int argc, char **argv)
{
	struct bench b = { 0 };
	struct child c = { 0 };
	struct bench_args a;
	struct rma_route_info ri;
	int rc;

	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	rc = common_apply("bench", &a.common, NULL); /* the engines take the secret */
	if (rc)
		return rc;
	if (a.transports)
		unsetenv("RMA_TRANSPORTS"); /* --transport wins, here and in the child */
	/* A target that dies must not take us down with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	b.a = &a;
	b.len = (size_t)max_size(&a);
	b.setup = (struct setup){ .register_per_s = NAN, .target_B_per_region = NAN,
				  .target_B_per_peer = NAN, .initiator_B_per_peer = NAN,
				  .connect_ms = NAN };
	if (a.token) {
		b.remote = calloc(1, sizeof(*b.remote));
		if (!b.remote)
			return tool_fail("bench", EXIT_RUNTIME, "out of memory");
		if (a.fabric)
			rc = rma_remote_from_fabric(a.transports, a.fab.addr, a.fab.addr_len,
						    a.fab.rkey, a.fab.raddr, 0, &b.remote[0]);
		else
			rc = rma_remote_parse(a.token, &b.remote[0]);
		if (rc < 0) {
			free(b.remote);
			return tool_fail("bench", EXIT_RUNTIME, "invalid %s: %s",
					 a.fabric ? "fabric address" : "advertisement",
					 rma_strerror(rc));
		}
		b.nr = 1;
	} else {
		/* Forked before any engine exists: the child has no threads to lose. */
		rc = start_target(&b, &c);
		if (rc < 0) {
			stop_target(&c);
			for (unsigned i = 0; i < b.nr; i++)
				rma_remote_free(b.remote[i]);
			free(b.remote);
			if (rc == -EPIPE)
				return tool_fail("bench", EXIT_RUNTIME, "the target exited "
						 "before sending its advertisements");
			return tool_fail("bench", EXIT_RUNTIME, "starting the target: %s",
					 rma_strerror(rc));
		}
	}
	rc = check_remote(&a, b.remote[0]);
	if (rc == 0)
		rc = alloc_bench(&b);
	if (rc == 0) {
		b.np = 1;
		rc = add_peers(&b);
	}
	if (rc == 0) {
		b.route = rma_peer_route(b.e[0], b.remote[0], &ri) == 0 ? ri.transport
			  : a.transports ? a.transports : "?";
		rc = run_sizes(&b);
	}
	free_bench(&b);
	stop_target(&c);
	return rc;
}
