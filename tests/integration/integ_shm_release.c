/*
 * integ_shm_release - release is final on shm, whether the owner copies
 * (through a peer's stage, under its lock) or the initiator does alone
 * (cross-memory attach, or plain copies into rma_region_alloc memory).
 *
 *   race [alloc|cma]  puts and gets stream into a target region while it
 *                 is released; the target overwrites the memory with a new
 *                 pattern the moment release returns.  Nothing may change it
 *                 after that, and no get may return a byte of it.  Plain:
 *                 the owner copies through the stage; cma: the owner has
 *                 no stage (shm:stage=0), the initiator attaches.
 *   killed        an initiator killed inside a copy does not hold release up
 *                 (drain bound 5 s; release must take well under 1 s).
 *   stopped       an initiator stuck inside a copy (alive) holds release
 *                 for the bound, no longer, and is cut off; later grants
 *                 on the target (fresh regions) release at once.
 *   staged        an initiator stuck writing a put into its stage holds
 *                 release up not at all: nothing of it is in flight.
 * killed and stopped run with shm:stage=0, so that the copy is the
 * initiator's.
 * "Inside a copy" is made certain: the initiator's source page is a
 * userfaultfd hole, so its process_vm_writev blocks on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "rma.h"
#include "target.h"
#include "testlib.h"

#define MiB (1u << 20)
#define S (16 * MiB)
#define OPSZ MiB
#define SLOTS 16
#define SEED_A 111
#define SEED_B 0xb0b

struct stream {
	rma_engine *e;
	rma_region *l;
	char *buf;           /* SLOTS get slots, then the put source */
	const char *bpat;    /* the pattern written after release */
	rma_remote *r;
	atomic_int phase, stop;
	atomic_long ok[3][2], fail[3]; /* the main thread waits on them */
	long leaked, other;
	int other_code;
};

/* Does a get of [off, off+len) hold any word of the after-release pattern? */
static int leaked(const char *got, const char *bpat, uint64_t off, size_t len)
{
	for (size_t i = 0; i + 8 <= len; i += 8)
		if (!memcmp(got + i, bpat + off + i, 8))
			return 1;
	return 0;
}

static void *streamer(void *arg)
{
	struct stream *s = arg;
	uint64_t rnd = test_seed("stream"), seq = 0, offs[SLOTS];
	unsigned busy = 0;
	int inflight = 0;

	while (!s->stop || inflight) {
		while (!s->stop && inflight < SLOTS) {
			int ph = s->phase, slot = 0;
			while (busy & 1u << slot)
				slot++;
			unsigned kind = seq++ % 2 ? RMA_OP_GET : RMA_OP_PUT;
			uint64_t off = test_rand_range(&rnd, 0, (S - OPSZ) / 4096) * 4096;
			struct rma_op op = {
				.kind = kind, .local = s->l,
				.local_off = kind == RMA_OP_GET ? (uint64_t)slot * OPSZ
								: (uint64_t)SLOTS * OPSZ,
				.remote = s->r, .remote_off = off, .len = OPSZ,
				.user_data = (uint64_t)ph << 32 | kind << 8 | (unsigned)slot,
			};
			if (kind == RMA_OP_GET)
				memset(s->buf + op.local_off, 0, OPSZ);
			int rc = rma_post(s->e, &op, 1, 10000, NULL);
			if (rc == 1) {
				inflight++;
				if (kind == RMA_OP_GET) {
					busy |= 1u << slot;
					offs[slot] = off;
				}
			} else {
				s->fail[ph]++;
				if (rc != -EKEYREJECTED && rc != -ECONNRESET) {
					s->other++;
					s->other_code = rc;
				}
			}
			if (ph == 2)
				break;
		}
		struct rma_completion c[32];
		int n = rma_poll(s->e, c, 32);
		for (int i = 0; i < n; i++) {
			int ph = (int)(c[i].user_data >> 32);
			unsigned kind = (c[i].user_data >> 8) & 0xff;
			int slot = (int)(c[i].user_data & 0xff);
			inflight--;
			if (kind == RMA_OP_GET)
				busy &= ~(1u << slot);
			if (c[i].result == (int64_t)OPSZ) {
				s->ok[ph][kind == RMA_OP_GET]++;
				if (kind == RMA_OP_GET &&
				    leaked(s->buf + (size_t)slot * OPSZ, s->bpat,
					   offs[slot], OPSZ))
					s->leaked++;
			} else {
				s->fail[ph]++;
				if (c[i].result != -EKEYREJECTED &&
				    c[i].result != -ECONNRESET) {
					s->other++;
					s->other_code = (int)c[i].result;
				}
			}
		}
		if (n <= 0 && s->phase == 2)
			test_sleep_ms(1);
	}
	return NULL;
}

static rma_engine *shm_engine(void)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "shm";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static rma_remote *remote(struct target *t, const char *name)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_remote *r;
	target_token(t, name, 0, 0, 0, tok, sizeof tok);
	CHECK_RC(rma_remote_parse(tok, &r), 0);
	return r;
}

static int mapped; /* "shm: mapped region" debug lines */
static void log_cb(void *arg, int level, const char *msg)
{
	if (strstr(msg, "shm: mapped region"))
		mapped++;
	else if (level <= RMA_LOG_WARN)
		fprintf(stderr, "rma: %s\n", msg);
}

static int case_race(bool alloc, bool cma)
{
	static struct target_opts o = { .transports = "shm", .rw_size = S };
	struct target t;
	struct stream s = { 0 };
	char reply[256];
	int rc, bad;
	long long took;

	o.alloc = alloc;
	o.transports = cma ? "shm:stage=0" : "shm";
	if ((rc = target_start(&t, &o)))
		return rc;
	char *bpat = test_alloc(S);
	test_fill(bpat, S, SEED_B);
	s.bpat = bpat;
	rma_set_log(RMA_LOG_DEBUG, log_cb, NULL);
	s.e = shm_engine();
	s.buf = test_alloc((SLOTS + 1) * OPSZ);
	test_fill(s.buf + SLOTS * OPSZ, OPSZ, SEED_A);
	CHECK_RC(rma_region_register(s.e, s.buf, (SLOTS + 1) * OPSZ, 0, &s.l), 0);
	s.r = remote(&t, "rw");
	struct rma_route_info ri;
	CHECK_RC(rma_peer_route(s.e, s.r, &ri), 0);
	CHECKF(!strcmp(ri.transport, "shm"), "route is %s", ri.transport);

	pthread_t th;
	CHECK(pthread_create(&th, NULL, streamer, &s) == 0);
	/* Stream for 200 ms once both kinds get through (the first ops
	 * connect), then release; after it, until ops have failed, 200 ms at
	 * least.  Deadlines, not sleeps: a loaded host connects slowly. */
	int64_t t0 = test_now_ms(), t1;
	while (!(s.ok[0][0] && s.ok[0][1]) && test_now_ms() - t0 < 10000)
		test_sleep_ms(5);
	test_sleep_ms(200);
	s.phase = 1;
	target_cmd(&t, reply, sizeof reply, "release_fill rw %u 300", SEED_B);
	s.phase = 2;
	for (t1 = test_now_ms(); test_now_ms() - t1 < 10000;) {
		test_sleep_ms(20);
		if (s.fail[2] && test_now_ms() - t1 >= 200)
			break;
	}
	s.stop = 1;
	pthread_join(th, NULL);
	printf("before: %ld puts %ld gets ok; during: %ld/%ld ok %ld failed; "
	       "after: %ld/%ld ok %ld failed\n", (long)s.ok[0][0], (long)s.ok[0][1],
	       (long)s.ok[1][0], (long)s.ok[1][1], (long)s.fail[1],
	       (long)s.ok[2][0], (long)s.ok[2][1], (long)s.fail[2]);
	CHECK(sscanf(reply, "%d %d %lld", &rc, &bad, &took) == 3);
	CHECK_RC(rc, 0);
	CHECKF(bad == -1, "target memory changed at byte %d after release returned",
	       bad);
	CHECKF(s.leaked == 0, "%ld gets returned bytes written after release",
	       s.leaked);
	CHECKF(s.ok[0][0] > 0 && s.ok[0][1] > 0, "no put or no get before release");
	CHECKF(s.fail[2] > 0, "nothing failed after the release");
	CHECKF(s.ok[2][0] + s.ok[2][1] == 0, "ops posted after release succeeded");
	CHECKF(s.other == 0, "%ld ops failed with %s, not -EKEYREJECTED",
	       s.other, rma_strerror(s.other_code));
	/* memfd memory is mapped once, and only then; plain memory never. */
	CHECKF(mapped == (alloc ? 1 : 0), "mapped the target's region %d times",
	       mapped);
	rma_remote_free(s.r);
	rma_engine_destroy(s.e);
	target_stop(&t);
	return 0;
}

/* The child initiator's source page is a userfaultfd hole nobody fills, so
 * its put blocks inside the copy (its row set) until it is killed: a
 * deterministic "initiator stuck mid-copy".  A thread reports the fault. */
struct stuck { int uffd, out; };

static void *fault_watch(void *arg)
{
	struct stuck *st = arg;
	struct uffd_msg m;
	struct pollfd p = { .fd = st->uffd, .events = POLLIN };
	while (poll(&p, 1, -1) == 1 && read(st->uffd, &m, sizeof m) == sizeof m)
		if (m.event == UFFD_EVENT_PAGEFAULT) {
			test_send_line(st->out, "stuck");
			break; /* never resolved */
		}
	return NULL;
}

static int stuck_putter(void *arg, int in, int out)
{
	const char *tok = arg;
	static struct stuck st;
	struct uffdio_api api = { .api = UFFD_API };
	rma_remote *r;
	rma_region *l;
	pthread_t th;

	st.out = out;
	st.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (st.uffd < 0 || ioctl(st.uffd, UFFDIO_API, &api)) {
		test_send_line(out, "skip userfaultfd: %s", strerror(errno));
		return 0;
	}
	char *src = mmap(NULL, MiB, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct uffdio_register reg = {
		.range = { (uintptr_t)src, MiB },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	CHECK(src != MAP_FAILED && ioctl(st.uffd, UFFDIO_REGISTER, &reg) == 0);
	rma_engine *e = shm_engine();
	CHECK_RC(rma_remote_parse(tok, &r), 0);
	CHECK_RC(rma_region_register(e, src, MiB, 0, &l), 0);
	CHECK(pthread_create(&th, NULL, fault_watch, &st) == 0);
	struct rma_op op = { .kind = RMA_OP_PUT, .local = l, .remote = r,
			     .len = MiB };
	int64_t res;
	rma_submit(e, &op, 1, RMA_NONE, &res, NULL, 0);
	test_send_line(out, "done %lld", (long long)res); /* must not happen */
	return 0;
}

/* A child initiator stuck inside a copy (cma: its own; else writing its
 * stage, before the owner is asked); kill it or not; release. */
static int case_initiator_gone(bool kill_it, bool cma)
{
	static struct target_opts o = { .rw_size = 16 * MiB };
	unsigned bound = kill_it ? 5000 : 300;
	char spec[64], tok[RMA_ADVERTISEMENT_TEXT_MAX], line[256], reply[256];
	struct target t;
	int in, out, rc, bad;
	long long took;

	snprintf(spec, sizeof spec, "shm:drain_ms=%u:stage=%d", bound, !cma);
	o.transports = spec;
	if ((rc = target_start(&t, &o)))
		return rc;
	target_token(&t, "rw", 0, 0, 0, tok, sizeof tok);
	pid_t pid = test_fork(stuck_putter, tok, &in, &out);
	CHECKF(test_recv_line(out, line, sizeof line, 20000) > 0, "putter silent");
	if (!strncmp(line, "skip", 4)) {
		test_reap(pid, 5000);
		SKIP("%s", line);
	}
	CHECKF(!strcmp(line, "stuck"), "putter: %s", line);
	if (kill_it) {
		kill(pid, SIGKILL);
		test_reap(pid, 5000);
	}
	target_cmd(&t, reply, sizeof reply, "release_fill rw 77 100");
	CHECK(sscanf(reply, "%d %d %lld", &rc, &bad, &took) == 3);
	printf("release took %lld ms (bound %u ms)\n", took, bound);
	CHECK_RC(rc, 0);
	if (kill_it)
		CHECKF(took < 2500, "release waited %lld ms for a dead initiator",
		       took);
	else if (!cma)
		CHECKF(took < bound / 3, "release waited %lld ms for an initiator "
		       "that had asked nothing yet", took);
	else
		CHECKF(took >= bound - 10 && took < bound + 3000,
		       "release took %lld ms with a stuck initiator, bound %u",
		       took, bound);
	CHECKF(bad == -1, "target memory changed at byte %d after release", bad);
	if (!kill_it) {
		/* The cut-off row still names the released grant's slot while
		 * the putter lives: fresh grants are not drained against it. */
		for (int i = 0; i < 3; i++) {
			target_cmd(&t, reply, sizeof reply, "register rw");
			target_token(&t, "rw", 0, 0, 0, tok, sizeof tok);
			target_cmd(&t, reply, sizeof reply, "release_fill rw 78 0");
			CHECK(sscanf(reply, "%d %d %lld", &rc, &bad, &took) == 3);
			CHECK_RC(rc, 0);
			printf("fresh grant %d: release took %lld ms\n", i, took);
			CHECKF(took < bound / 3, "a fresh grant's release took %lld "
			       "ms (bound %u): drained against the cut-off row",
			       took, bound);
		}
		kill(pid, SIGKILL);
		test_reap(pid, 5000);
	}

	/* The target serves others as before (a stuck initiator's row stays
	 * out of use; a new one gets another). */
	rma_engine *e = shm_engine();
	char *buf = test_alloc(4096);
	rma_region *l;
	rma_remote *wo = remote(&t, "wo");
	CHECK_RC(rma_region_register(e, buf, 4096, 0, &l), 0);
	test_fill(buf, 4096, 5);
	int64_t res;
	struct rma_op op = { .kind = RMA_OP_PUT, .local = l, .remote = wo,
			     .len = 4096 };
	CHECK_RC(rma_submit(e, &op, 1, 10000, &res, NULL, 0), 0);
	CHECK_RC(res, 4096);
	CHECK_EQ_U64(target_crc(&t, "wo", 0, 4096), rma_crc32c(0, buf, 4096));
	rma_remote_free(wo);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	struct rma_transport_info info[16];
	int n = rma_transports(info, 16);

	test_watchdog(100);
	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(info[i].name, "shm") && !info[i].available)
			SKIP("shm not available: %s", info[i].detail);
	const char *v = argc > 2 ? argv[2] : "";
	if (!strcmp(c, "race"))
		return case_race(!strcmp(v, "alloc"), !strcmp(v, "cma"));
	if (!strcmp(c, "killed"))
		return case_initiator_gone(true, true);
	if (!strcmp(c, "stopped"))
		return case_initiator_gone(false, true);
	if (!strcmp(c, "staged"))
		return case_initiator_gone(false, false);
	fprintf(stderr, "usage: %s race [alloc|cma] | killed | stopped | staged\n",
		argv[0]);
	return 1;
}
