/*
 * fake_transport.h - a transport that records what the core posts and
 * completes nothing until the test says so.  Level MEMORY (option
 * "level=tcp|nic|memory" changes it), name "fake".  Knobs in `fake` make it
 * exercise each contract of transport.h: back-pressure, declining, grants,
 * abort, arm, credits.
 *
 * The test drives it from its own thread: fake_complete() takes the engine
 * lock (as transports are called with it held) and reports chunks done.
 */
#ifndef RMA_FAKE_TRANSPORT_H
#define RMA_FAKE_TRANSPORT_H

#include <pthread.h>
#include <stdint.h>

#include "core/core.h"
#include "transport/transport.h"

#define FAKE_MAX_XFERS 8192
#define FAKE_MAX_MSG 4096    /* chunk size when the engine sets none */
#define FAKE_BASE 0x10000000 /* rkey base: FAKE_BASE + window offset */
#define FAKE_WIRE_ID 200

enum { FAKE_POSTED = 1, FAKE_DONE = 2 };

struct fake_xfer {
	struct rma__xfer x;
	struct rma__peer *peer; /* posted to (disconnect reports its own) */
	int state;
};

struct fake_state {
	struct fake_xfer xfers[FAKE_MAX_XFERS];
	unsigned nxfers;          /* ever posted */
	unsigned outstanding;     /* posted, not completed */
	unsigned max_outstanding; /* high-water mark */
	unsigned connects, disconnects, revokes, flushes;
	uint64_t peer_max_msg;    /* what connect gave the peer */
	struct rma__peer *peer;   /* the last peer connected */
	/* 0: connect reports the peer ready at once (a synchronous transport);
	 * 1: the next progress round does. */
	int defer_ready;
	/* nonzero: connect reports the peer failed with it, at once */
	int fail_connect;
	/* nonzero: connect returns it (no peer at all) */
	int connect_err;
	/* posts answering -EAGAIN before one is taken; stays -EAGAIN while
	 * post_blocked is set (cleared by the test, then fake_kick) */
	unsigned post_eagain;
	int post_blocked;
	unsigned eagains;         /* -EAGAIN answers given */
	int decline_regions, decline_grants, unreachable;
	int abort_pending;        /* abort answers RMA__ABORT_PENDING */
	/* abort reports chunks itself (rma__xfer_done, -ECONNRESET) before it
	 * returns: 1 the op's, 2 every posted one (a queue pair drained) */
	int abort_sync;
	unsigned credits;         /* set as the peer's credits */
	/* post_now (the fast path): 0 declines every op (as a transport
	 * without it); 1 takes each, the first 64 recorded in now[] ('N' in
	 * the trace) */
	int take_now;
	unsigned nnow, now_declined;
	struct rma__xfer now[64];
	unsigned mem_regs, mem_deregs, grant_adds, grant_removes, arms;
	unsigned aborts, progresses, peer_raws;
	/* progress rounds run by the thread `mark` (set mark, then
	 * mark_set with release order) */
	pthread_t mark;
	int mark_set;
	unsigned progress_on_mark;
	int abort_err[64];        /* err of each abort, in order */
	uint64_t abort_op[64];
	/* What happened, in order: 'R' mem_reg, 'D' mem_dereg, 'P' a chunk
	 * posted, 'N' an op done by post_now, 'F' flush (the first 255). */
	char trace[256];
	unsigned ntrace;
};

extern struct fake_state fake;

/* Add "fake" to the registry (once, before any engine). */
void fake_register(void);
/* Forget every recorded xfer and counter. */
void fake_reset(int defer_ready);

/* An engine with only the fake transport, caller-driven progress. */
rma_engine *fake_engine(unsigned queue_depth);

/* Complete recorded xfer i with res (0 or -errno): rma__xfer_done under
 * the engine lock.  Then drive one progress round. */
void fake_complete(rma_engine *e, unsigned i, int res);
/* Complete every outstanding xfer (in posting order) with res. */
unsigned fake_complete_all(rma_engine *e, int res);

/* rma__op_buf / rma__op_live for recorded xfer i, under the lock. */
char *fake_op_buf(rma_engine *e, unsigned i);
int fake_op_live(rma_engine *e, unsigned i);

/* Drive progress until a completion is waiting or timeout_ms passes;
 * returns the number polled into c (0 or 1). */
int fake_wait_one(rma_engine *e, struct rma_completion *c, int timeout_ms);

/* The peer's room came back after -EAGAIN (rma__peer_kick, under the lock). */
void fake_kick(rma_engine *e);

/* A remote for window [off, off+len) of region r (advertise + decode). */
rma_remote *fake_remote(rma_region *r, uint64_t off, uint64_t len);

#endif
