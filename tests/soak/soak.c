/*
 * soak - mixed ops from several initiator processes against several target
 * processes, with faults injected, checking data integrity throughout.
 *
 *   rma_soak [--seconds N] [--transport SPEC] [--initiators N]
 *
 * Each initiator owns one slice of every target's "rw" region.  It keeps
 * a copy of what the slice must hold: a successful get of the slice must
 * match it byte for byte, and a successful get of the read-only region must
 * match its fixed pattern.  A failed put makes the slice unknown; after a
 * settling time (a timed-out put may still land when a stopped target
 * resumes) a whole-slice put makes it known again.  Faults, one every 0.5-2 s:
 * SIGKILL of an initiator or of target 1 (both restarted), SIGSTOP/SIGCONT
 * of a target or an initiator, release and re-registration of a target's
 * region.  Target 0 and initiator 0 are never killed, so their resident
 * memory at start and end shows what a long-lived process keeps.
 *
 * Prints ops done, errors by kind, integrity checks and faults, and
 * resident memory at start and end.  Exit 0 when nothing was corrupt and
 * every process did its part, 1 otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "target.h"
#include "testlib.h"

#define NT 2                   /* targets */
#define MAXI 8                 /* initiators */
#define SLICE (1u << 20)       /* per initiator per target */
#define RO_OP (256u << 10)     /* largest read-only get */
#define DEADLINE_MS 2000
#define SETTLE_MS 6000         /* > the longest stop + a deadline */
#define STOP_MS 3000           /* longest SIGSTOP: past a deadline */
#define NERR 160               /* errno values counted one by one */
#define REPORT_MS 500

/* ---- initiator ---- */

struct init_arg {
	int idx;
	const char *tr;
	uint64_t seed;
	char rw[NT][RMA_ADVERTISEMENT_TEXT_MAX]; /* "" = none */
	char ro[NT][RMA_ADVERTISEMENT_TEXT_MAX];
};

struct stats {
	long ops, puts, gets, ro_gets, checks, corrupt, bytes;
	long err[NERR + 1]; /* [NERR]: anything larger */
};

static void stats_send(int out, struct stats *s)
{
	char line[1024];
	int n = snprintf(line, sizeof line, "d %ld %ld %ld %ld %ld %ld %ld",
			 s->ops, s->puts, s->gets, s->ro_gets, s->checks,
			 s->corrupt, s->bytes);
	for (int i = 0; i <= NERR; i++)
		if (s->err[i] && n < (int)sizeof line - 32)
			n += snprintf(line + n, sizeof line - (size_t)n, " %d=%ld",
				      i, s->err[i]);
	test_send_line(out, "%s", line);
	memset(s, 0, sizeof *s);
}

static void set_remote(rma_remote **r, const char *tok)
{
	if (*r)
		rma_remote_free(*r);
	*r = NULL;
	if (*tok && strcmp(tok, "-"))
		CHECK_RC(rma_remote_parse(tok, r), 0);
}

static int initiator(void *argp, int in, int out)
{
	struct init_arg *a = argp;
	uint64_t rs = a->seed;
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = a->tr;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);

	/* per target: a slice slot and a read-only slot; then the expected
	 * slices and the read-only pattern */
	size_t slot = SLICE + RO_OP;
	unsigned char *buf = test_alloc(NT * slot);
	unsigned char *expect = test_alloc(NT * SLICE);
	unsigned char *ro_ref = test_alloc(TARGET_SMALL);
	test_fill(ro_ref, TARGET_SMALL, TARGET_RO_SEED);
	rma_region *l;
	CHECK_RC(rma_region_register(e, buf, NT * slot, 0, &l), 0);

	rma_remote *rw[NT] = { 0 }, *ro[NT] = { 0 };
	int known[NT] = { 0 };
	int64_t settle[NT];
	/* a killed predecessor's puts may still be landing */
	for (int t = 0; t < NT; t++)
		settle[t] = test_now_ms() + SETTLE_MS;
	for (int t = 0; t < NT; t++) {
		set_remote(&rw[t], a->rw[t]);
		set_remote(&ro[t], a->ro[t]);
	}
	uint64_t base = (uint64_t)a->idx * SLICE;
	struct stats st = { 0 };
	int64_t next_report = test_now_ms() + REPORT_MS;
	char line[1024], tok[RMA_ADVERTISEMENT_TEXT_MAX];
	int t;

	for (;;) {
		int n = 1;
		for (;;) {
			struct pollfd pf = { .fd = in, .events = POLLIN };
			if (poll(&pf, 1, 0) <= 0)
				break;
			/* a whole line is there: the soak writes lines at once */
			if ((n = test_recv_line(in, line, sizeof line, 5000)) <= 0)
				break;
			if (sscanf(line, "rw %d %699s", &t, tok) == 2 && t >= 0 &&
			    t < NT) {
				set_remote(&rw[t], tok);
				known[t] = 0;
				settle[t] = test_now_ms() + SETTLE_MS;
			} else if (sscanf(line, "ro %d %699s", &t, tok) == 2 &&
				   t >= 0 && t < NT) {
				set_remote(&ro[t], tok);
			} else if (!strcmp(line, "quit")) {
				stats_send(out, &st);
				test_send_line(out, "bye");
				rma_engine_destroy(e);
				return 0;
			}
		}
		if (n == 0)
			return 0; /* the soak is gone */
		CHECKF(n > 0, "reading the soak's commands: %s", strerror(-n));

		/* One op per target on this initiator's slice, one read-only
		 * get per target: nothing in a batch overlaps. */
		struct rma_op ops[2 * NT];
		int what[2 * NT], tgt[2 * NT], k = 0;
		int64_t now = test_now_ms();
		for (t = 0; t < NT; t++) {
			unsigned char *s = buf + (size_t)t * slot;
			if (rw[t] && now >= settle[t]) {
				uint64_t off = 0, len = SLICE;
				int put = !known[t] || test_rand(&rs) % 2;
				if (known[t]) {
					len = test_rand_range(&rs, 1, SLICE);
					off = test_rand_range(&rs, 0, SLICE - len);
				}
				if (put)
					test_fill(s + off, len, test_rand(&rs) | 1);
				ops[k] = (struct rma_op){
					.kind = put ? RMA_OP_PUT : RMA_OP_GET,
					.local = l, .local_off = (uint64_t)t * slot + off,
					.remote = rw[t], .remote_off = base + off,
					.len = len };
				what[k] = put ? 0 : 1;
				tgt[k++] = t;
			}
			if (ro[t] && test_rand(&rs) % 2) {
				uint64_t len = test_rand_range(&rs, 1, RO_OP);
				uint64_t off = test_rand_range(&rs, 0, TARGET_SMALL - len);
				ops[k] = (struct rma_op){
					.kind = RMA_OP_GET, .local = l,
					.local_off = (uint64_t)t * slot + SLICE,
					.remote = ro[t], .remote_off = off, .len = len };
				what[k] = 2;
				tgt[k++] = t;
			}
		}
		if (!k) {
			test_sleep_ms(10);
			continue;
		}
		int64_t res[2 * NT];
		int rc = rma_submit(e, ops, (size_t)k, DEADLINE_MS, res, NULL, 0);
		CHECKF(rc >= 0 && rc <= k, "rma_submit: %d", rc);
		for (int i = 0; i < k; i++) {
			t = tgt[i];
			st.ops++;
			if (res[i] < 0) {
				int en = (int)-res[i];
				st.err[en < NERR ? en : NERR]++;
				if (what[i] == 0) {
					known[t] = 0;
					settle[t] = test_now_ms() + SETTLE_MS;
				}
				continue;
			}
			CHECK_EQ(res[i], ops[i].len);
			st.bytes += res[i];
			unsigned char *got = buf + ops[i].local_off;
			uint64_t off = ops[i].remote_off;
			if (what[i] == 0) {
				st.puts++;
				memcpy(expect + (size_t)t * SLICE + (off - base), got,
				       ops[i].len);
				known[t] = 1;
			} else if (what[i] == 1) {
				st.gets++;
				if (!known[t])
					continue;
				st.checks++;
				const unsigned char *want =
					expect + (size_t)t * SLICE + (off - base);
				if (memcmp(got, want, ops[i].len)) {
					size_t j = 0;
					while (got[j] == want[j])
						j++;
					fprintf(stderr, "soak: CORRUPT: initiator %d, "
						"target %d, slice byte %" PRIu64
						": 0x%02x, expected 0x%02x (get of "
						"%" PRIu64 " at %" PRIu64 ")\n", a->idx,
						t, off - base + j, got[j], want[j],
						(uint64_t)ops[i].len, off - base);
					st.corrupt++;
					known[t] = 0;
				}
			} else {
				st.ro_gets++;
				st.checks++;
				if (memcmp(got, ro_ref + off, ops[i].len)) {
					fprintf(stderr, "soak: CORRUPT: initiator %d, "
						"target %d: read-only get of %" PRIu64
						" at %" PRIu64 " differs\n", a->idx, t,
						(uint64_t)ops[i].len, off);
					st.corrupt++;
				}
			}
		}
		if (test_now_ms() >= next_report) {
			stats_send(out, &st);
			next_report = test_now_ms() + REPORT_MS;
		}
	}
}

/* ---- the soak itself ---- */

struct iproc {
	pid_t pid;
	int to, from;
	int64_t last_ops; /* when it last reported an op */
	int quitting;
};

static struct target tg[NT];
static struct target_opts topt[NT];
static char listen1[64];
static struct iproc ip[MAXI];
static int ni = 3;
static const char *tr = "tcp";
static uint64_t rs;
static struct init_arg iarg;
static struct stats total;
static long lost_initiators, faults[6];
static const char *fault_name[6] = { "initiator kills", "target kills",
				     "target stops", "initiator stops",
				     "releases", "" };

static void tokens(int t)
{
	target_token(&tg[t], "rw", 0, 0, 0, iarg.rw[t], sizeof iarg.rw[t]);
	target_token(&tg[t], "ro", 0, 0, 0, iarg.ro[t], sizeof iarg.ro[t]);
}

static void broadcast(int t)
{
	for (int i = 0; i < ni; i++)
		if (ip[i].pid > 0) {
			test_send_line(ip[i].to, "rw %d %s", t,
				       *iarg.rw[t] ? iarg.rw[t] : "-");
			test_send_line(ip[i].to, "ro %d %s", t,
				       *iarg.ro[t] ? iarg.ro[t] : "-");
		}
}

static void start_initiator(int i)
{
	iarg.idx = i;
	iarg.tr = tr;
	iarg.seed = test_rand(&rs);
	ip[i].pid = test_fork(initiator, &iarg, &ip[i].to, &ip[i].from);
	ip[i].last_ops = test_now_ms();
	ip[i].quitting = 0;
}

static void end_initiator(int i)
{
	close(ip[i].to);
	close(ip[i].from);
	ip[i].pid = 0;
}

static void take(const char *line, int i)
{
	struct stats s = { 0 };
	const char *p = line + 2;
	char *end;
	long *f[] = { &s.ops, &s.puts, &s.gets, &s.ro_gets, &s.checks,
		      &s.corrupt, &s.bytes };
	for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
		*f[k] = strtol(p, &end, 10);
		p = end;
	}
	int en;
	long c;
	int used;
	while (sscanf(p, " %d=%ld%n", &en, &c, &used) == 2) {
		if (en >= 0 && en <= NERR)
			s.err[en] += c;
		p += used;
	}
	total.ops += s.ops;
	total.puts += s.puts;
	total.gets += s.gets;
	total.ro_gets += s.ro_gets;
	total.checks += s.checks;
	total.corrupt += s.corrupt;
	total.bytes += s.bytes;
	for (int k = 0; k <= NERR; k++)
		total.err[k] += s.err[k];
	if (s.ops)
		ip[i].last_ops = test_now_ms();
}

/* Read the initiators' reports for ms milliseconds; restart any that
 * died on its own (counted: that is a failure). */
static void pump(int ms)
{
	int64_t end = test_now_ms() + ms;
	do {
		struct pollfd p[MAXI];
		for (int i = 0; i < ni; i++)
			p[i] = (struct pollfd){ .fd = ip[i].pid > 0 ? ip[i].from : -1,
						.events = POLLIN };
		int64_t left = end - test_now_ms();
		if (poll(p, (nfds_t)ni, left > 0 ? (int)left : 0) < 0 && errno != EINTR)
			FAIL("poll: %s", strerror(errno));
		for (int i = 0; i < ni; i++) {
			if (!(p[i].revents & (POLLIN | POLLHUP)))
				continue;
			char line[1024];
			int n = test_recv_line(ip[i].from, line, sizeof line, 1000);
			if (n > 0 && line[0] == 'd')
				take(line, i);
			else if (n > 0 && !strcmp(line, "bye"))
				ip[i].quitting = 2;
			else if (n == 0 && ip[i].quitting != 2) {
				int st = test_reap(ip[i].pid, 5000);
				fprintf(stderr, "soak: initiator %d exited on its own "
					"(status 0x%x); restarting it\n", i, st);
				lost_initiators++;
				end_initiator(i);
				start_initiator(i);
			}
		}
	} while (test_now_ms() < end);
}

static void start_target(int t)
{
	CHECK_EQ(target_start(&tg[t], &topt[t]), 0);
	tokens(t);
}

static void fault(void)
{
	int kind = (int)test_rand_range(&rs, 0, 4);
	int t = (int)test_rand_range(&rs, 0, NT - 1);
	int i = (int)test_rand_range(&rs, 0, (uint64_t)ni - 1);
	int ms = (int)test_rand_range(&rs, 100, STOP_MS);
	char rep[64];
	switch (kind) {
	case 0: /* initiator SIGKILL (not initiator 0) and a new one */
		if (ni < 2)
			return;
		i = 1 + (int)test_rand_range(&rs, 0, (uint64_t)ni - 2);
		kill(ip[i].pid, SIGKILL);
		test_reap(ip[i].pid, 5000);
		end_initiator(i);
		start_initiator(i);
		break;
	case 1: /* target 1 SIGKILL, restarted at its address */
		t = 1;
		kill(tg[t].pid, SIGKILL);
		test_reap(tg[t].pid, 5000);
		close(tg[t].cmd);
		close(tg[t].resp);
		*iarg.rw[t] = *iarg.ro[t] = '\0';
		broadcast(t);
		pump(ms);
		start_target(t);
		broadcast(t);
		break;
	case 2: /* target stopped for a while */
		test_stop_child(tg[t].pid);
		pump(ms);
		test_cont_child(tg[t].pid);
		break;
	case 3: /* initiator stopped for a while */
		test_stop_child(ip[i].pid);
		pump(ms);
		test_cont_child(ip[i].pid);
		ip[i].last_ops = test_now_ms();
		break;
	case 4: /* the region released under the streams, then again */
		target_cmd(&tg[t], rep, sizeof rep, "release rw");
		CHECKF(atoi(rep) == 0, "release: %s", rep);
		pump(ms / 4);
		target_cmd(&tg[t], NULL, 0, "register rw");
		tokens(t);
		broadcast(t);
		break;
	}
	faults[kind]++;
}

static long rss_of(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	int seconds = 300;
	static const struct option lo[] = {
		{ "seconds", required_argument, 0, 's' },
		{ "transport", required_argument, 0, 't' },
		{ "initiators", required_argument, 0, 'i' },
		{ 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "s:t:i:", lo, NULL)) != -1) {
		if (c == 's')
			seconds = atoi(optarg);
		else if (c == 't')
			tr = optarg;
		else if (c == 'i')
			ni = atoi(optarg);
		else {
			fprintf(stderr, "usage: rma_soak [--seconds N] "
				"[--transport SPEC] [--initiators 1-%d]\n", MAXI);
			return 2;
		}
	}
	if (seconds < 1 || ni < 1 || ni > MAXI)
		return 2;
	test_watchdog((unsigned)seconds + 180);
	rs = test_seed("soak");
	snprintf(listen1, sizeof listen1, "127.0.0.1:%d", test_free_port());
	for (int t = 0; t < NT; t++) {
		topt[t] = (struct target_opts){ .transports = tr,
						.rw_size = MAXI * SLICE };
		if (t == 1)
			topt[t].listen = listen1; /* restarts reuse it */
		if (target_start(&tg[t], &topt[t]))
			return TEST_SKIP;
		tokens(t);
	}
	for (int i = 0; i < ni; i++)
		start_initiator(i);

	pump(SETTLE_MS + 2000); /* warm up: connections, first whole-slice puts */
	long rss_t0 = rss_of(tg[0].pid), rss_i0 = rss_of(ip[0].pid);
	long ops_warm = total.ops;
	printf("soak: %d s, %d initiators, %d targets, transport %s\n", seconds,
	       ni, NT, tr);
	int64_t start = test_now_ms(), end = start + (int64_t)seconds * 1000;
	int stuck = 0;
	while (test_now_ms() < end) {
		pump((int)test_rand_range(&rs, 500, 2000));
		fault();
		for (int i = 0; i < ni; i++)
			if (test_now_ms() - ip[i].last_ops > 30000) {
				fprintf(stderr, "soak: initiator %d did no op for "
					"30 s\n", i);
				stuck++;
				ip[i].last_ops = test_now_ms();
			}
	}

	/* the end: every initiator reports its last counts */
	long rss_t1 = rss_of(tg[0].pid), rss_i1 = rss_of(ip[0].pid);
	for (int i = 0; i < ni; i++) {
		ip[i].quitting = 1;
		test_send_line(ip[i].to, "quit");
	}
	for (int64_t q = test_now_ms() + 20000; test_now_ms() < q;) {
		int done = 0;
		for (int i = 0; i < ni; i++)
			done += ip[i].quitting == 2;
		if (done == ni)
			break;
		pump(100);
	}
	for (int i = 0; i < ni; i++) {
		int st = test_reap(ip[i].pid, 10000);
		if (ip[i].quitting != 2 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "soak: initiator %d did not end cleanly\n", i);
			lost_initiators++;
		}
		end_initiator(i);
	}
	for (int t = 0; t < NT; t++)
		target_stop(&tg[t]);

	double secs = (double)(test_now_ms() - start) / 1000.0;
	printf("ops: %ld in %.0f s (%ld after warm-up): %ld puts, %ld gets, "
	       "%ld read-only gets ok; %.1f MiB moved\n", total.ops, secs,
	       total.ops - ops_warm, total.puts, total.gets, total.ro_gets,
	       (double)total.bytes / (1 << 20));
	long errs = 0;
	for (int k = 0; k <= NERR; k++)
		errs += total.err[k];
	printf("errors: %ld\n", errs);
	for (int k = 0; k <= NERR; k++)
		if (total.err[k])
			printf("  %-28s %ld\n", k < NERR ? rma_strerror(-k) : "other",
			       total.err[k]);
	printf("integrity: %ld checks, %ld corrupt\n", total.checks,
	       total.corrupt);
	printf("faults:");
	for (int k = 0; k < 5; k++)
		printf(" %s %ld%s", fault_name[k], faults[k], k < 4 ? "," : "\n");
	printf("resident memory (never killed):\n");
	printf("  %-28s start %7ld KiB, end %7ld KiB (%+ld)\n", "target 0",
	       rss_t0, rss_t1, rss_t1 - rss_t0);
	printf("  %-28s start %7ld KiB, end %7ld KiB (%+ld)\n", "initiator 0",
	       rss_i0, rss_i1, rss_i1 - rss_i0);
	int ok = total.corrupt == 0 && !lost_initiators && !stuck &&
		 total.ops > ops_warm;
	printf("soak: %s\n", ok ? "PASS" : "FAIL");
	return ok ? 0 : 1;
}
