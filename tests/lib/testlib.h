/*
 * testlib.h - small helpers shared by rma's tests: a watchdog, clocks, a
 * seeded generator, fill patterns, line messages over pipes, forked
 * children that die with the test, and a free loopback port.
 */
#ifndef RMA_TESTLIB_H
#define RMA_TESTLIB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Kill the test (exit 1, children too) if it runs longer than seconds. */
void test_watchdog(unsigned seconds);

int64_t test_now_ms(void);
void test_sleep_ms(int ms);
/* CPU time of this process (pid 0) or another (from /proc), all threads. */
int64_t test_cpu_ns(pid_t pid);
/* After 50 ms (past any spin), this process and peer each use under a
 * tenth of a core for a second; fails the test otherwise.  A spinning
 * thread takes most of a core even on a loaded host. */
void test_idle_check(pid_t peer);

/* Seed from $RMA_TEST_SEED or the clock; printed so a failure can be rerun. */
uint64_t test_seed(const char *what);
uint64_t test_rand(uint64_t *state);              /* splitmix64 */
uint64_t test_rand_range(uint64_t *state, uint64_t lo, uint64_t hi); /* [lo,hi] */

/* Deterministic pattern from seed; seed 0 writes zeros. */
void test_fill(void *buf, size_t len, uint64_t seed);
/* Index of the first byte differing from the pattern, or -1. */
ptrdiff_t test_check_fill(const void *buf, size_t len, uint64_t seed);

/* Anonymous zeroed memory (mmap); aborts the test on failure. */
void *test_alloc(size_t len);
void test_free(void *p, size_t len);

/* Memory that remote peers put into or get from.  The test's own reads and
 * writes of it are ordered after a peer's by messages ThreadSanitizer cannot
 * see (an ack on a socket, a command on a pipe from another process), so
 * under TSan this marks races on exactly that range as benign; elsewhere it
 * does nothing.  Never for an initiator's get buffers: a completion that
 * came before its bytes is a real race. */
void test_remote_memory(const void *p, size_t len);

/* Run fn(arg, cmd_fd, resp_fd) in a child; the parent gets the other ends.
 * Children are SIGKILLed when the test exits. */
pid_t test_fork(int (*fn)(void *arg, int in_fd, int out_fd), void *arg,
		int *to_child, int *from_child);
/* Wait for the child up to timeout_ms; SIGKILL it after that.  Returns its
 * exit status as waitpid() reports it, or -1. */
int test_reap(pid_t pid, int timeout_ms);
void test_forget_child(pid_t pid);
/* SIGSTOP a child and wait until every thread of it has stopped (a plain
 * kill() returns while its threads may still run for a moment). */
void test_stop_child(pid_t pid);
void test_cont_child(pid_t pid);

/* One '\n'-terminated line each.  recv returns its length without the
 * newline, 0 on EOF, -ETIMEDOUT after timeout_ms (< 0 = forever). */
int test_send_line(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int test_recv_line(int fd, char *buf, size_t cap, int timeout_ms);

/* A loopback TCP port that was free a moment ago. */
int test_free_port(void);

/* A tcp engine from a config whose zero fields mean the defaults (size is
 * filled in, transports defaults to "tcp"); fails the test on error. */
struct rma_engine;
struct rma_config;
struct rma_engine *test_tcp_engine(struct rma_config cfg);

/* Its whole-region advertisement, decoded; fails the test on error. */
struct rma_region;
struct rma_remote;
struct rma_remote *test_remote_of(struct rma_region *r);

/* Initiator e connects to target t, both on manual progress on this
 * thread: an 8-byte get into local, each side progressed in turn (each
 * one's handshake steps need the other's).  Fails the test on error. */
void test_manual_connect(struct rma_engine *t, struct rma_engine *e,
			 struct rma_region *local, struct rma_remote *rem);

#endif
