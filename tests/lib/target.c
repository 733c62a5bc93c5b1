#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "rma.h"

#include "target.h"
#include "testlib.h"

struct treg {
	const char *name;
	char *buf;
	size_t len;
	rma_region *r;
};

static struct treg *find(struct treg *regs, const char *name)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(regs[i].name, name))
			return &regs[i];
	return NULL;
}

/*
 * Commands (one line each; every reply starts with "ok" or "err"):
 *   adv NAME OFF LEN ACCESS     -> ok TOKEN
 *   crc NAME OFF LEN            -> ok CRC32C-HEX
 *   fill NAME SEED              -> ok
 *   check NAME SEED             -> ok FIRST-BAD-INDEX (-1 = all match)
 *   release NAME                -> ok RC
 *   release_fill NAME SEED      -> ok RC   (release, then at once
 *                                  overwrite the memory with SEED's pattern,
 *                                  as an owner reusing it would)
 *   register NAME               -> ok RC   (register a released region
 *                                  again, same memory, its first access)
 *   release_watch NAME MS       -> ok RC same|changed   (release, crc,
 *                                  wait MS, crc again)
 *   release_fill NAME SEED MS   -> ok RC FIRST-BAD-INDEX MS-TAKEN  (release,
 *                                  overwrite with SEED's pattern at once,
 *                                  wait MS, check it: -1 = untouched)
 *   heap                        -> ok BYTES   (malloc'd bytes in use:
 *                                  a leak check across many peers)
 *   exit                        -> ok, then the engine is destroyed
 */
/* Release unmaps rma_region_alloc memory: keep a second view of the same
 * pages (mremap of size 0 duplicates a shared mapping), so the commands
 * still see what a peer could have written there. */
static void keep_view(const struct target_opts *o, struct treg *t)
{
	if (!o->alloc)
		return;
	void *v = mremap(t->buf, 0, t->len, MREMAP_MAYMOVE);
	if (v == MAP_FAILED)
		abort();
	t->buf = v;
}

static int target_main(void *arg, int in, int out)
{
	const struct target_opts *o = arg;
	struct rma_config cfg;
	rma_engine *e;
	char line[1024];

	if (o->netns) {
		int fd = open(o->netns, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
			test_send_line(out, "err netns %s: %s", o->netns,
				       strerror(errno));
			return 1;
		}
		close(fd);
	}
	rma_config_init(&cfg);
	cfg.transports = o->transports;
	cfg.listen = o->listen;
	cfg.secret = o->secret;
	int rc = rma_engine_create(&cfg, &e);
	if (rc < 0) {
		test_send_line(out, "skip rma_engine_create(%s): %s",
			       o->transports, rma_strerror(rc));
		return 0;
	}

	struct treg regs[4] = {
		{ "rw", NULL, o->rw_size ? o->rw_size : 64u << 20, NULL },
		{ "ro", NULL, TARGET_SMALL, NULL },
		{ "wo", NULL, TARGET_SMALL, NULL },
		{ "none", NULL, TARGET_NONE_SIZE, NULL },
	};
	unsigned acc[4] = { RMA_ACCESS_REMOTE_RW, RMA_ACCESS_REMOTE_READ,
			    RMA_ACCESS_REMOTE_WRITE, 0 };
	for (int i = 0; i < 4; i++) {
		if (o->alloc) {
			void *p = NULL;
			rc = rma_region_alloc(e, regs[i].len, acc[i], &regs[i].r, &p);
			regs[i].buf = p;
		} else {
			regs[i].buf = test_alloc(regs[i].len);
			rc = rma_region_register(e, regs[i].buf, regs[i].len,
						 acc[i], &regs[i].r);
		}
		if (rc == 0)
			test_remote_memory(regs[i].buf, regs[i].len);
		if (rc < 0) {
			test_send_line(out, "err register %s: %s", regs[i].name,
				       rma_strerror(rc));
			return 1;
		}
	}
	test_fill(regs[0].buf, regs[0].len, o->rw_seed);
	test_fill(regs[1].buf, regs[1].len, TARGET_RO_SEED);
	test_send_line(out, "ready");

	for (;;) {
		char name[32], tok[RMA_ADVERTISEMENT_TEXT_MAX];
		uint64_t a, b;
		unsigned access;
		int ms;
		if (test_recv_line(in, line, sizeof line, -1) <= 0)
			break; /* parent gone */
		if (sscanf(line, "adv %31s %" SCNu64 " %" SCNu64 " %u", name,
			   &a, &b, &access) == 4) {
			struct treg *t = find(regs, name);
			rc = t ? rma_advertise_text(t->r, a, b, access, tok,
						    sizeof tok)
			       : -ENOENT;
			if (rc < 0)
				test_send_line(out, "err %d %s", rc,
					       rma_strerror(rc));
			else
				test_send_line(out, "ok %s", tok);
		} else if (sscanf(line, "crc %31s %" SCNu64 " %" SCNu64, name,
				  &a, &b) == 3) {
			struct treg *t = find(regs, name);
			if (!t || a > t->len || b > t->len - a)
				test_send_line(out, "err range");
			else
				test_send_line(out, "ok %08x",
					       rma_crc32c(0, t->buf + a, b));
		} else if (sscanf(line, "fill %31s %" SCNu64, name, &a) == 2) {
			struct treg *t = find(regs, name);
			if (t)
				test_fill(t->buf, t->len, a);
			test_send_line(out, t ? "ok" : "err name");
		} else if (sscanf(line, "check %31s %" SCNu64, name, &a) == 2) {
			struct treg *t = find(regs, name);
			if (t)
				test_send_line(out, "ok %td",
					       test_check_fill(t->buf, t->len, a));
			else
				test_send_line(out, "err name");
		} else if (sscanf(line, "release_fill %31s %" SCNu64 " %d", name,
				  &a, &ms) == 3) {
			struct treg *t = find(regs, name);
			if (!t || !t->r) {
				test_send_line(out, "err name");
				continue;
			}
			keep_view(o, t);
			int64_t t0 = test_now_ms();
			rc = rma_region_release(t->r);
			int64_t took = test_now_ms() - t0;
			t->r = NULL;
			test_fill(t->buf, t->len, a);
			test_sleep_ms(ms);
			test_send_line(out, "ok %d %td %lld", rc,
				       test_check_fill(t->buf, t->len, a),
				       (long long)took);
		} else if (sscanf(line, "release_watch %31s %d", name, &ms) == 2) {
			struct treg *t = find(regs, name);
			if (!t || !t->r) {
				test_send_line(out, "err name");
				continue;
			}
			keep_view(o, t);
			rc = rma_region_release(t->r);
			t->r = NULL;
			uint32_t c1 = rma_crc32c(0, t->buf, t->len);
			test_sleep_ms(ms);
			uint32_t c2 = rma_crc32c(0, t->buf, t->len);
			test_send_line(out, "ok %d %s", rc,
				       c1 == c2 ? "same" : "changed");
		} else if (sscanf(line, "release_fill %31s %" SCNu64, name,
				  &a) == 2) {
			struct treg *t = find(regs, name);
			if (!t || !t->r) {
				test_send_line(out, "err name");
				continue;
			}
			rc = rma_region_release(t->r);
			t->r = NULL;
			test_fill(t->buf, t->len, a);
			test_send_line(out, "ok %d", rc);
		} else if (sscanf(line, "register %31s", name) == 1) {
			struct treg *t = find(regs, name);
			if (!t || t->r) {
				test_send_line(out, "err name");
				continue;
			}
			rc = rma_region_register(e, t->buf, t->len,
						 acc[t - regs], &t->r);
			test_send_line(out, rc < 0 ? "err %d" : "ok %d", rc);
		} else if (sscanf(line, "release %31s", name) == 1) {
			struct treg *t = find(regs, name);
			if (!t || !t->r) {
				test_send_line(out, "err name");
				continue;
			}
			keep_view(o, t);
			rc = rma_region_release(t->r);
			t->r = NULL;
			test_send_line(out, "ok %d", rc);
		} else if (!strcmp(line, "heap")) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
			struct mallinfo2 mi = mallinfo2();
			test_send_line(out, "ok %zu", mi.uordblks + mi.hblkhd);
#else
			test_send_line(out, "err no mallinfo2 here");
#endif
		} else if (!strcmp(line, "exit")) {
			test_send_line(out, "ok");
			break;
		} else {
			test_send_line(out, "err unknown command: %s", line);
		}
	}
	rma_engine_destroy(e);
	return 0;
}

/*
 * The target runs in a fresh image of this program.  A test forks it after
 * its own engines run threads, and a forked child inherits any lock such a
 * thread held at that moment (the allocator's, under a sanitizer) and can
 * hang on it.  So the child only calls execve, which is safe after fork,
 * and the new image's constructor below serves as the target, reading its
 * options from the environment prepared here, before the fork.
 */
#define TENV "RMA_TEST_TARGET"

struct target_exec {
	char path[4096];
	char **envp;
	size_t own; /* envp[own..] are ours to free */
};

static int target_exec(void *arg, int in, int out)
{
	struct target_exec *x = arg;
	char *argv[] = { "rma-test-target", NULL };
	/* The environment was written before the pipes existed: they go to
	 * fds 3 and 4, by way of copies above both. */
	int i2 = fcntl(in, F_DUPFD_CLOEXEC, 10), o2 = fcntl(out, F_DUPFD_CLOEXEC, 10);
	if (i2 < 0 || o2 < 0 || dup2(i2, 3) < 0 || dup2(o2, 4) < 0)
		return 127;
	execve(x->path, argv, x->envp);
	return 127;
}

static char *env_pair(const char *name, const char *val)
{
	size_t n = strlen(name) + strlen(val) + 2;
	char *s = malloc(n);
	if (!s)
		FAIL("out of memory");
	snprintf(s, n, "%s=%s", name, val);
	return s;
}

static void target_exec_prepare(struct target_exec *x, const struct target_opts *o)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char v[128];

	ssize_t len = readlink("/proc/self/exe", x->path, sizeof x->path - 1);
	if (len <= 0)
		FAIL("readlink /proc/self/exe: %s", strerror(errno));
	x->path[len] = '\0';
	while (environ[n])
		n++;
	x->envp = calloc(n + 8, sizeof *x->envp);
	if (!x->envp)
		FAIL("out of memory");
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], TENV, strlen(TENV)))
			x->envp[k++] = environ[i];
	x->own = k;
	snprintf(v, sizeof v, "%zu %" PRIu64 " %d", o->rw_size, o->rw_seed,
		 o->alloc ? 1 : 0);
	x->envp[k++] = env_pair(TENV, v);
	const char *names[] = { TENV "_TRANSPORTS", TENV "_LISTEN",
				TENV "_SECRET", TENV "_NETNS" };
	const char *vals[] = { o->transports, o->listen, o->secret, o->netns };
	for (int i = 0; i < 4; i++)
		if (vals[i])
			x->envp[k++] = env_pair(names[i], vals[i]);
	x->envp[k] = NULL;
}

static void target_exec_free(struct target_exec *x)
{
	for (size_t i = x->own; x->envp[i]; i++)
		free(x->envp[i]);
	free(x->envp);
}

static const char *env_take(const char *name)
{
	const char *v = getenv(name);
	return v ? strdup(v) : NULL;
}

__attribute__((constructor)) static void target_child(void)
{
	const char *v = getenv(TENV);
	static struct target_opts o;
	int alloc = 0;

	if (!v)
		return;
	if (sscanf(v, "%zu %" SCNu64 " %d", &o.rw_size, &o.rw_seed, &alloc) != 3)
		_exit(126);
	o.alloc = alloc;
	o.transports = env_take(TENV "_TRANSPORTS");
	o.listen = env_take(TENV "_LISTEN");
	o.secret = env_take(TENV "_SECRET");
	o.netns = env_take(TENV "_NETNS");
	const char *names[] = { TENV, TENV "_TRANSPORTS", TENV "_LISTEN",
				TENV "_SECRET", TENV "_NETNS" };
	for (int i = 0; i < 5; i++)
		unsetenv(names[i]);
	alarm(0); /* a parent's watchdog outlives exec */
	signal(SIGPIPE, SIG_IGN);
	int rc = target_main(&o, 3, 4);
	fflush(NULL);
	_exit(rc);
}

int target_start(struct target *t, const struct target_opts *o)
{
	char line[1024];
	struct target_exec x;
	target_exec_prepare(&x, o);
	t->pid = test_fork(target_exec, &x, &t->cmd, &t->resp);
	target_exec_free(&x);
	int n = test_recv_line(t->resp, line, sizeof line, 20000);
	if (n <= 0)
		FAIL("target did not start (%s)",
		     n == 0 ? "it exited" : "no answer in 20 s");
	if (!strncmp(line, "skip", 4)) {
		/* Where the transport must work (the soft-RoCE guest sets
		 * this), a target that cannot start is a failure. */
		if (getenv("RMA_TEST_REQUIRE"))
			FAIL("target cannot start (RMA_TEST_REQUIRE is set): %s",
			     line + 5);
		printf("SKIP: target: %s\n", line + 4);
		test_reap(t->pid, 5000);
		return TEST_SKIP;
	}
	if (strcmp(line, "ready"))
		FAIL("target failed to start: %s", line);
	return 0;
}

static int target_vtry(struct target *t, char *reply, size_t cap,
		       const char *fmt, va_list ap)
{
	char cmd[512], line[1024];
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	if (test_send_line(t->cmd, "%s", cmd))
		FAIL("target command '%s': target gone", cmd);
	int n = test_recv_line(t->resp, line, sizeof line, 30000);
	if (n <= 0)
		FAIL("target command '%s': %s", cmd,
		     n == 0 ? "target exited" : "no reply in 30 s");
	int ok = !strncmp(line, "ok", 2);
	if (!ok && !reply)
		FAIL("target command '%s' failed: %s", cmd, line);
	if (reply && cap) {
		const char *p = line + (ok ? 2 : 3);
		if (ok && *p == ' ')
			p++;
		snprintf(reply, cap, "%s", p);
	}
	return ok ? 0 : -1;
}

int target_try(struct target *t, char *reply, size_t cap, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = target_vtry(t, reply, cap, fmt, ap);
	va_end(ap);
	return rc;
}

void target_cmd(struct target *t, char *reply, size_t cap, const char *fmt,
		...)
{
	char err[1024];
	va_list ap;
	va_start(ap, fmt);
	int rc = target_vtry(t, err, sizeof err, fmt, ap);
	va_end(ap);
	if (rc)
		FAIL("target command '%s...' failed: %s", fmt, err);
	if (reply && cap)
		snprintf(reply, cap, "%s", err);
}

void target_token(struct target *t, const char *region, uint64_t off,
		  uint64_t len, unsigned access, char *tok, size_t cap)
{
	target_cmd(t, tok, cap, "adv %s %" PRIu64 " %" PRIu64 " %u", region,
		   off, len, access);
}

uint32_t target_crc(struct target *t, const char *region, uint64_t off,
		    uint64_t len)
{
	char r[64];
	target_cmd(t, r, sizeof r, "crc %s %" PRIu64 " %" PRIu64, region, off,
		   len);
	return (uint32_t)strtoul(r, NULL, 16);
}

void target_stop(struct target *t)
{
	if (t->pid <= 0)
		return;
	if (test_send_line(t->cmd, "exit") == 0) {
		char line[64];
		test_recv_line(t->resp, line, sizeof line, 5000);
	}
	int st = test_reap(t->pid, 5000);
	close(t->cmd);
	close(t->resp);
	t->pid = 0;
	if (st == -1)
		FAIL("target did not exit within 5 s of 'exit' (killed)");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("target exited badly (status 0x%x)", st);
}
