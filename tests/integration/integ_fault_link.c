/*
 * Fault: the link goes down mid-transfer.  The target lives in one network
 * namespace, the initiator in another, joined by a veth pair; while large
 * gets stream, the initiator's end is set down.  Every op ends by its
 * deadline plus seconds; when the link comes back and the old connection's
 * bytes flow again, nothing lands in the buffers of ops already completed;
 * new ops work.
 *
 * Needs root (namespaces, links): exits 77 otherwise.  The namespaces are
 * removed at exit, and by a detached guard process if the test dies first.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/wait.h>

#include "integ_fault.h"

#define SIZE (32 * MiB)
#define N 4
#define DEADLINE_MS 3000
#define SENTINEL 0xA5
#define SEED 51

static char ns_a[32], ns_b[32], veth_a[16], veth_b[16];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int st = system(cmd);
	return st == 0 ? 0 : -1;
}

static void cleanup(void)
{
	/* deleting a namespace deletes the veth end inside it */
	sh("ip netns del %s 2>/dev/null", ns_a);
	sh("ip netns del %s 2>/dev/null", ns_b);
}

/* A grandchild outside the test's process tree waits for the test to go
 * (its pipe closes however it dies), then removes the namespaces. */
static void start_guard(void)
{
	int p[2];
	if (pipe(p))
		FAIL("pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		setsid();
		if (fork() != 0)
			_exit(0);
		close(p[1]);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != p[0])
				close(fd);
		char c;
		while (read(p[0], &c, 1) != 0 && errno == EINTR)
			;
		cleanup();
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	close(p[0]);
	fcntl(p[1], F_SETFD, FD_CLOEXEC); /* only this process holds it */
}

static void join_ns(const char *name)
{
	char path[64];
	snprintf(path, sizeof path, "/run/netns/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
		FAIL("join %s: %s", path, strerror(errno));
	close(fd);
}

int main(int argc, char **argv)
{
	test_watchdog(110);
	const char *tr = fault_transport(argc, argv);
	if (geteuid() != 0)
		SKIP("network namespaces need root");
	if (system("ip -V >/dev/null 2>&1") != 0)
		SKIP("no ip(8)");
	int id = (int)getpid() % 100000;
	snprintf(ns_a, sizeof ns_a, "rma_fault_a%d", id);
	snprintf(ns_b, sizeof ns_b, "rma_fault_b%d", id);
	snprintf(veth_a, sizeof veth_a, "rfa%d", id);
	snprintf(veth_b, sizeof veth_b, "rfb%d", id);
	cleanup(); /* a leftover of an earlier run with this pid */
	start_guard();
	atexit(cleanup);
	if (sh("ip netns add %s", ns_a) || sh("ip netns add %s", ns_b) ||
	    sh("ip link add %s netns %s type veth peer name %s netns %s",
	       veth_a, ns_a, veth_b, ns_b) ||
	    sh("ip -n %s addr add 10.250.0.1/24 dev %s", ns_a, veth_a) ||
	    sh("ip -n %s addr add 10.250.0.2/24 dev %s", ns_b, veth_b) ||
	    sh("ip -n %s link set lo up", ns_a) ||
	    sh("ip -n %s link set lo up", ns_b) ||
	    sh("ip -n %s link set %s up", ns_a, veth_a) ||
	    sh("ip -n %s link set %s up", ns_b, veth_b))
		SKIP("could not build two namespaces joined by veth (no "
		     "CAP_NET_ADMIN here?)");

	char nspath[64];
	snprintf(nspath, sizeof nspath, "/run/netns/%s", ns_a);
	struct target_opts o = { .transports = tr, .listen = "10.250.0.1:7411",
				 .rw_size = SIZE, .rw_seed = SEED,
				 .netns = nspath };
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;
	join_ns(ns_b); /* before the engine, so its threads live there too */
	rma_engine *e = fault_engine(tr);
	size_t llen = (size_t)N * SIZE;
	unsigned char *buf = test_alloc(llen);
	rma_region *l = integ_region(e, buf, llen);
	rma_remote *rem = integ_remote(&t, "rw");
	CHECK_RC(rma_peer_connect(e, rem, 10000), 0);
	CHECK_RC(integ_op(e, RMA_OP_GET, l, rem, 0, SIZE, 20000), SIZE);
	CHECK_EQ(test_check_fill(buf, SIZE, SEED), -1);

	/* A batch may beat the link going down; then it is tried again. */
	int failed = 0;
	struct rma_op ops[N];
	struct rma_completion c[N];
	for (int attempt = 0; attempt < 3 && !failed; attempt++) {
		memset(buf, SENTINEL, llen);
		for (int i = 0; i < N; i++)
			ops[i] = (struct rma_op){ .kind = RMA_OP_GET, .local = l,
						  .local_off = (uint64_t)i * SIZE,
						  .remote = rem, .len = SIZE,
						  .user_data = (uint64_t)i };
		CHECK_RC(rma_post(e, ops, N, DEADLINE_MS, NULL), N);
		test_sleep_ms(5);
		CHECK_EQ(sh("ip -n %s link set %s down", ns_b, veth_b), 0);
		int64_t t0 = test_now_ms();
		int got = fault_collect(e, c, N, DEADLINE_MS + 10000);
		int64_t dt = test_now_ms() - t0;
		CHECKF(got == N, "%d of %d gets ended %lld ms after the link went "
		       "down", got, N, (long long)dt);
		for (int i = 0; i < N; i++) {
			int64_t r = c[i].result;
			printf("attempt %d get %llu: %lld %s\n", attempt,
			       (unsigned long long)c[i].user_data, (long long)r,
			       fault_err(r));
			CHECK(r == SIZE || r < 0);
			failed += r < 0;
		}
		CHECKF(dt < DEADLINE_MS + 8000, "the gets ended %lld ms after the "
		       "link went down, past the %d ms deadline", (long long)dt,
		       DEADLINE_MS);

		/* What each buffer holds now is final. */
		uint32_t crc[N];
		for (int i = 0; i < N; i++)
			crc[i] = rma_crc32c(0, buf + (size_t)i * SIZE, SIZE);
		CHECK_EQ(sh("ip -n %s link set %s up", ns_b, veth_b), 0);
		test_sleep_ms(2000); /* retransmits resume the old stream */
		for (int i = 0; i < N; i++)
			CHECKF(crc[i] == rma_crc32c(0, buf + (size_t)i * SIZE, SIZE),
			       "get %d's buffer changed after it completed", i);
		if (!failed)
			printf("attempt %d: the batch beat the link; again\n",
			       attempt);
	}
	CHECKF(failed, "every get finished before the link went down");

	/* The link is back: the peer serves again (a few tries: the old
	 * connection may first have to be found dead). */
	int64_t r = -1;
	for (int i = 0; i < 3 && r != SIZE; i++) {
		r = integ_op(e, RMA_OP_GET, l, rem, 0, SIZE, 10000);
		printf("after the link came back, try %d: %lld %s\n", i,
		       (long long)r, fault_err(r));
	}
	CHECK_RC(r, SIZE);
	CHECK_EQ(test_check_fill(buf, SIZE, SEED), -1);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	target_stop(&t);
	printf("ok\n");
	return 0;
}
