#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "testlib.h"

#define MAX_CHILDREN 64
static pid_t children[MAX_CHILDREN];
static int nchildren;
static pid_t parent_pid;

static void kill_children(void)
{
	if (getpid() != parent_pid)
		return;
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
			children[i] = 0;
		}
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: watchdog: test ran too long\n";
	if (write(2, msg, sizeof msg - 1) < 0) {
		/* nothing more to do */
	}
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0)
			kill(children[i], SIGKILL);
	_exit(1);
}

void test_watchdog(unsigned seconds)
{
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	alarm(seconds);
	setvbuf(stdout, NULL, _IOLBF, 0);
}

int64_t test_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t test_cpu_ns(pid_t pid)
{
	char path[64], line[1024];
	unsigned long ut = 0, st = 0;
	struct timespec ts;

	if (!pid) {
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	}
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		FAIL("%s: %s", path, strerror(errno));
	if (!fgets(line, sizeof line, f))
		FAIL("%s: empty", path);
	fclose(f);
	const char *p = strrchr(line, ')'); /* the name may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			 &ut, &st) != 2)
		FAIL("%s: cannot parse", path);
	return (int64_t)(ut + st) * (1000000000 / sysconf(_SC_CLK_TCK));
}

void test_idle_check(pid_t peer)
{
	test_sleep_ms(50);
	int64_t c0 = test_cpu_ns(0), p0 = test_cpu_ns(peer), w0 = test_now_ms();
	test_sleep_ms(1000);
	int64_t used = (test_cpu_ns(0) - c0) / 1000000;
	int64_t pused = (test_cpu_ns(peer) - p0) / 1000000;
	int64_t wall = test_now_ms() - w0;
	CHECKF(used < wall / 10, "idle, this process used %lld ms of CPU in %lld ms",
	       (long long)used, (long long)wall);
	CHECKF(pused < wall / 10, "idle, the peer used %lld ms of CPU in %lld ms",
	       (long long)pused, (long long)wall);
}

void test_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

uint64_t test_seed(const char *what)
{
	const char *env = getenv("RMA_TEST_SEED");
	uint64_t seed;
	if (env && *env) {
		seed = strtoull(env, NULL, 0);
	} else {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^
		       (uint64_t)getpid() << 32;
	}
	printf("%s: seed %llu (rerun with RMA_TEST_SEED=%llu)\n", what,
	       (unsigned long long)seed, (unsigned long long)seed);
	return seed;
}

uint64_t test_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

uint64_t test_rand_range(uint64_t *s, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	uint64_t span = hi - lo + 1;
	return span ? lo + test_rand(s) % span : test_rand(s);
}

/* Pattern byte i depends on (seed, i / 8) only, so any sub-range can be
 * checked on its own. */
static inline uint64_t pattern_word(uint64_t seed, uint64_t w)
{
	uint64_t z = seed ^ (w * 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ULL;
	return z ^ (z >> 29) ^ seed;
}

void test_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	if (!seed) {
		memset(buf, 0, len);
		return;
	}
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = pattern_word(seed, i / 8);
		memcpy(p + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = pattern_word(seed, i / 8);
		memcpy(p + i, &v, len - i);
	}
}

ptrdiff_t test_check_fill(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = seed ? pattern_word(seed, i / 8) : 0;
		size_t n = len - i < 8 ? len - i : 8;
		if (memcmp(p + i, &v, n)) {
			const uint8_t *vb = (const uint8_t *)&v;
			for (size_t j = 0; j < n; j++)
				if (p[i + j] != vb[j])
					return (ptrdiff_t)(i + j);
		}
	}
	return -1;
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(TEST_TSAN)
#define TEST_TSAN 1
#endif

#ifdef TEST_TSAN
/* ThreadSanitizer's dynamic annotation (its runtime defines it). */
void AnnotateBenignRaceSized(const char *file, int line,
			     const volatile void *mem, size_t size,
			     const char *desc);
#endif

void test_remote_memory(const void *p, size_t len)
{
#ifdef TEST_TSAN
	AnnotateBenignRaceSized(__FILE__, __LINE__, p, len,
				"one-sided access by a remote peer");
#else
	(void)p;
	(void)len;
#endif
}

void *test_alloc(size_t len)
{
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		FAIL("mmap %zu bytes: %s", len, strerror(errno));
	return p;
}

void test_free(void *p, size_t len)
{
	munmap(p, len ? len : 1);
}

pid_t test_fork(int (*fn)(void *, int, int), void *arg, int *to_child,
		int *from_child)
{
	int a[2], b[2];
	if (!parent_pid) {
		parent_pid = getpid();
		atexit(kill_children);
	}
	if (pipe(a) || pipe(b))
		FAIL("pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		close(a[1]);
		close(b[0]);
		nchildren = 0;
		alarm(0);
		int rc = fn(arg, a[0], b[1]);
		fflush(NULL);
		_exit(rc);
	}
	close(a[0]);
	close(b[1]);
	*to_child = a[1];
	*from_child = b[0];
	if (nchildren < MAX_CHILDREN)
		children[nchildren++] = pid;
	return pid;
}

void test_forget_child(pid_t pid)
{
	for (int i = 0; i < nchildren; i++)
		if (children[i] == pid)
			children[i] = 0;
}

void test_stop_child(pid_t pid)
{
	int st;
	if (kill(pid, SIGSTOP))
		FAIL("SIGSTOP %d: %s", (int)pid, strerror(errno));
	for (;;) {
		pid_t r = waitpid(pid, &st, WUNTRACED);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != pid)
			FAIL("waiting for %d to stop: %s", (int)pid, strerror(errno));
		if (WIFSTOPPED(st))
			return;
		FAIL("child %d ended (status 0x%x) instead of stopping", (int)pid, st);
	}
}

void test_cont_child(pid_t pid)
{
	int st;
	if (kill(pid, SIGCONT))
		FAIL("SIGCONT %d: %s", (int)pid, strerror(errno));
	while (waitpid(pid, &st, WCONTINUED) < 0 && errno == EINTR)
		;
}

int test_reap(pid_t pid, int timeout_ms)
{
	int status;
	int64_t end = test_now_ms() + timeout_ms;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			test_forget_child(pid);
			return status;
		}
		if (r < 0) {
			test_forget_child(pid);
			return -1;
		}
		if (test_now_ms() >= end)
			break;
		test_sleep_ms(5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	test_forget_child(pid);
	return -1;
}

int test_send_line(int fd, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf - 1)
		return -EMSGSIZE;
	buf[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = write(fd, buf + off, (size_t)(n - off));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (int)w;
	}
	return 0;
}

int test_recv_line(int fd, char *buf, size_t cap, int timeout_ms)
{
	size_t n = 0;
	int64_t end = timeout_ms < 0 ? 0 : test_now_ms() + timeout_ms;
	for (;;) {
		int wait = -1;
		if (timeout_ms >= 0) {
			int64_t left = end - test_now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			wait = (int)left;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, wait);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		char c;
		ssize_t got = read(fd, &c, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return 0;
		if (c == '\n') {
			buf[n < cap ? n : cap - 1] = '\0';
			return (int)n ? (int)n : 1; /* an empty line reads as length 1 */
		}
		if (n + 1 < cap)
			buf[n] = c;
		n++;
	}
}

int test_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof a;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		FAIL("free port: %s", strerror(errno));
	close(fd);
	return ntohs(a.sin_port);
}

struct rma_engine *test_tcp_engine(struct rma_config cfg)
{
	rma_engine *e;
	cfg.size = sizeof cfg;
	if (!cfg.transports)
		cfg.transports = "tcp";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

struct rma_remote *test_remote_of(struct rma_region *r)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_remote *rem;
	CHECK(rma_advertise_text(r, 0, 0, 0, tok, sizeof tok) > 0);
	CHECK_RC(rma_remote_parse(tok, &rem), 0);
	return rem;
}

void test_manual_connect(rma_engine *t, rma_engine *e, rma_region *local,
			 rma_remote *rem)
{
	struct rma_op one = {.kind = RMA_OP_GET, .local = local, .remote = rem,
			     .len = 8};
	struct rma_completion c;
	int got = 0;

	CHECK_RC(rma_post(e, &one, 1, 5000, NULL), 1);
	for (int i = 0; i < 2000 && !got; i++) {
		rma_progress(t, 1);
		rma_progress(e, 1);
		got = rma_poll(e, &c, 1);
	}
	CHECK_EQ(got, 1);
	CHECK_RC(c.result, 8);
}
