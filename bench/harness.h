/*
 * harness.h - the measurement loop shared by the peer-library benchmarks
 * (ucx_rma.c, fi_rma.c), so that every system is timed the same way as
 * `rma bench`: for each size, a warm-up, then a bandwidth phase with a
 * window of ops in flight for a fixed time, then a latency phase of one op
 * at a time.  The warm-up is what `rma bench` does before each size: the
 * bandwidth phase's traffic (the same window, size and op), unmeasured, for
 * --warmup ms (default a fifth of --duration; 0: none), then 3 single ops.
 *
 * The program forks: the child is the passive side (it registers a buffer,
 * sends what the initiator needs over a socketpair and drives its library's
 * progress until the socket closes), the parent is the initiator.  With
 * --peer (systems that take one) it forks nothing and measures against an
 * existing passive side instead, e.g. `rma target`, whose share of the
 * cost then shows against the system's own passive side.  Before
 * timing, the initiator puts a pattern of the largest size and gets it back
 * into a cleared buffer; a mismatch fails the run.  Output is
 * one JSON object per size, with the keys of `rma bench --json` plus
 * "system", "seconds" and "ops_per_s".
 */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#define HX_MAX_SIZES 16
#define HX_PUT 1
#define HX_GET 2

struct hx_args {
	const char *transport;  /* library-specific: "tcp", "shm", ... */
	unsigned kind;          /* HX_PUT or HX_GET */
	uint64_t sizes[HX_MAX_SIZES];
	int n_sizes;
	uint64_t max_size;
	unsigned window;        /* ops in flight in the bandwidth phase */
	unsigned duration_ms;   /* per phase and size */
	unsigned warmup_ms;     /* unmeasured window traffic before each size */
	const char *peer;       /* --peer: an existing passive side, in the
				 * system's words; NULL: fork our own */
	int serve_only;         /* --serve: the passive side alone, until EOF */
	int alloc;              /* --alloc: the library allocates the passive
				 * side's buffer (systems with alloc_usage) */
};

/* One library, seen from the initiator.  Every hook returns 0 or -errno. */
struct hx_system {
	const char *name;                     /* "ucx": systems print "ucx-tcp" */
	const char *default_transport;
	/* The passive side, in the child: set up, send, serve until EOF. */
	int (*serve)(const struct hx_args *a, int sock);
	/* The initiator: set up against the peer behind sock, or with
	 * --peer (sock -1) against a->peer. */
	int (*open)(const struct hx_args *a, int sock, void **ctx);
	const char *peer_usage; /* what --peer takes; NULL: not supported */
	/* --serve: read what serve() sent on sock and print it as one line
	 * that --peer (of this or another initiator) takes.  NULL: not
	 * supported. */
	int (*advertise)(int sock);
	/* What --alloc does, for the usage line; NULL: not supported. */
	const char *alloc_usage;
	/* Post one op (HX_PUT or HX_GET) of size bytes from the start of
	 * the local buffer to the start of the remote one; -EAGAIN:
	 * progress, then try again. */
	int (*post)(void *ctx, unsigned kind, uint64_t size);
	/* Make every posted op completable (e.g. a flush after puts);
	 * called when posting stops.  May be NULL. */
	int (*flush)(void *ctx);
	/* Drive progress once; returns ops newly completed, or -errno. */
	int (*progress)(void *ctx);
	void (*close)(void *ctx);
	void *(*buffer)(void *ctx); /* the local buffer, max_size bytes */
};

int hx_main(int argc, char **argv, const struct hx_system *sys);

/* Length-prefixed messages over the socketpair; 0 or -errno. */
int hx_send(int sock, const void *buf, uint32_t len);
int hx_recv(int sock, void *buf, uint32_t cap, uint32_t *len);

/* Whether the initiator closed its end (checked without blocking). */
int hx_peer_gone(int sock);

/*
 * Call after every progress round of a busy-polling loop: after a run of
 * empty rounds it gives the core away once, as rma's progress thread does
 * after each empty round.  With more runnable threads than cores the peer
 * we wait for may need this core; on an idle machine it costs nothing.
 */
void hx_spun(unsigned *empty, int found);

uint64_t hx_now_ns(void);
void hx_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
