/*
 * transport.h - what a transport implements, and what the core offers it.
 *
 * A transport is a folder src/transport/<name>/ with one `static const
 * struct rma__transport_ops` listed in registry.c.  An engine may run several
 * instances of one transport (two NICs, two providers), each made by init()
 * from its own options.  Transport objects embed the core's (struct
 * rma__transport, struct rma__peer) and get back to themselves with
 * container_of.  The registry fills unset ops with defaults (listed per op
 * below; most answer -EOPNOTSUPP), so the core never tests for NULL.
 *
 * Threading: every op is called with the engine lock held, and every rma__
 * service below must be called with it held.  Ops never block, with one
 * exception: disconnect() and fini() may wait (briefly) for hardware to stop.
 *
 * The full contract, call order and how to test a new transport:
 * docs/design.md, "Writing a transport".
 */
#ifndef RMA_TRANSPORT_H
#define RMA_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rma.h"
#include "util/list.h"

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

struct rma_engine;
struct rma_region;
struct rma__grant;
struct rma__topts;
struct rma__transport;
struct rma__peer;

/* Positive answers of mem_reg / grant_add / reachable: "not on this
 * transport".  The region, grant or peer simply does not use it. */
#define RMA__DECLINE 1
/* abort(): the hardware may still touch the op's memory; the transport
 * reports every outstanding chunk (rma__xfer_done) once it no longer can. */
#define RMA__ABORT_PENDING 1

/* The decoded per-transport part of an advertisement (ad_parse fills it). */
struct rma__rkey {
	uint64_t key;        /* the key xfers carry (tcp: the core key) */
	uint64_t base;       /* raddr of window offset 0 */
	const uint8_t *raw;  /* longer keys (FI_MR_RAW): bytes inside the blob */
	uint16_t raw_len;
};

/* rma__xfer.flags */
enum {
	RMA__XFER_LAST = 1u << 0,  /* the op's last chunk */
	RMA__XFER_FENCE = 1u << 1, /* start after every earlier chunk to this
				    * peer has completed (only sent to
				    * transports with RMA__CAP_FENCE; the core
				    * holds the chunk for the others) */
};

/* What an op's chunk needs. */
struct rma__xfer {
	uint64_t op_id;  /* names the op to rma__xfer_done / rma__op_buf */
	unsigned kind;   /* RMA_OP_PUT or RMA_OP_GET */
	unsigned flags;  /* RMA__XFER_* */
	const struct rma__rkey *rk; /* remote key; valid until the op's
				     * last chunk is reported */
	uint64_t raddr;  /* remote address: rk->base + window offset */
	char *laddr;     /* local memory */
	struct rma_region *local;
	void *ldesc;     /* this transport's descriptor of `local` (what
			  * mem_reg stored in its slot: an MR, an lkey) */
	uint64_t len;    /* <= the peer's max_msg */
};

/* One option a transport takes ("listen", "stripes", "prov"). */
struct rma__topt_desc {
	const char *name;
	const char *help; /* "HOST:PORT to listen on (127.0.0.1:0)" */
};

/* rma__transport_ops.caps */
enum {
	RMA__CAP_FENCE = 1u << 0, /* honours RMA__XFER_FENCE itself */
	/* Carries regions over CUDA device memory (rma__region_device): by
	 * DMA (verbs), or by staging every byte through host memory with the
	 * rma__stage_* helpers (tcp, shm).  Without it an instance is never
	 * offered such a region: the CPU cannot touch it. */
	RMA__CAP_DEVICE = 1u << 1,
	RMA__CAP_PEER_RAW = 1u << 2, /* peer_raw answers (rma_peer_raw) */
	/* Its listener serves rma_config.listen (tcp's).  When the caller
	 * gives that address (rma_config.listen, RMA_LISTEN), an engine with
	 * the default transport list does not skip this transport if it
	 * cannot start: creating the engine fails with its error. */
	RMA__CAP_LISTEN = 1u << 3,
};

struct rma__transport_ops {
	const char *name;
	int level;          /* enum rma_level; an instance may change it */
	uint8_t wire_id;    /* names this transport in advertisements; never reuse */
	unsigned caps;      /* RMA__CAP_* */
	/* Options init() accepts, ended by a NULL name.  A spec's first bare
	 * word is the value of the first option ("ofi:tcp" = "ofi:prov=tcp"). */
	const struct rma__topt_desc *options;

	/* 0 if usable on this host; else -errno, with a reason in why.
	 * Default: -EOPNOTSUPP. */
	int (*probe)(const char **why);
	/* Optional: the same for a default engine (no transports list), for
	 * a transport that starts there only in some cases and can tell more
	 * cheaply than probe that this host is not one.  Unset: probe. */
	int (*probe_default)(const char **why);
	/* One instance, with its options (rma__topt).  Set t->level here if
	 * it depends on them, and t->poll_ns for a transport without fds. */
	int (*init)(struct rma_engine *e, const struct rma__topts *o,
		    struct rma__transport **out);
	void (*fini)(struct rma__transport *t);

	/* Per-region registration; keep what you need in *rma__region_slot().
	 * RMA__DECLINE: this transport will not carry the region (memory it
	 * cannot reach).  CUDA device memory comes only to transports with
	 * RMA__CAP_DEVICE.  Default: 0, nothing to do. */
	int (*mem_reg)(struct rma__transport *t, struct rma_region *r);
	void (*mem_dereg)(struct rma__transport *t, struct rma_region *r);

	/* A grant (a window with its own key and access, what an advertisement
	 * names) is created / revoked.  A transport may register per grant
	 * (an MR or memory window with the grant's access and bounds), keeping
	 * it in *rma__grant_slot().  grant_remove is called for every grant
	 * grant_add accepted, before the region's mem_dereg, and after it
	 * returns no peer may reach the window through this transport.
	 * RMA__DECLINE leaves this transport out of the grant's
	 * advertisements.  Default: 0, nothing to do. */
	int (*grant_add)(struct rma__transport *t, struct rma__grant *g);
	void (*grant_remove)(struct rma__transport *t, struct rma__grant *g);

	/* This instance's advertisement blob for grant g (NULL: the engine
	 * address); bytes written or -ENOSPC. */
	int (*ad_pack)(struct rma__transport *t, const struct rma__grant *g,
		       void *buf, size_t cap);
	/* Validate a blob written by ad_pack (no engine needed); fill *rk;
	 * core_key is the advertisement's. */
	int (*ad_parse)(const void *blob, size_t len, uint64_t core_key,
			struct rma__rkey *rk);
	/* Can this instance reach the owner of blob (same host, same fabric,
	 * same port)?  0 yes, RMA__DECLINE no.  Default: 0. */
	int (*reachable)(struct rma__transport *t, const void *blob, size_t len);

	/* Start connecting to the peer named by blob (*out zeroed but for the
	 * transport's part).  Report the result with rma__peer_ready() or
	 * rma__peer_failed(), from inside connect (known at once) or later.
	 * Set p->max_msg (and p->credits if the transport has a queue of its
	 * own) before ready.  The core fills p->t and p->engine_id.  A
	 * failed connect lets the core fall back to the next level. */
	int (*connect)(struct rma__transport *t, const void *blob, size_t len,
		       uint64_t engine_id, struct rma__peer **out);
	/* Fail everything in flight (rma__xfer_done with err) and free.  When
	 * it returns nothing may touch any op's local memory. */
	void (*disconnect)(struct rma__peer *p, int err);

	/* Queue one chunk.  -EAGAIN: no room now; the core keeps the chunk
	 * and retries after rma__peer_kick() or at the next progress round.
	 * Other errors fail the op. */
	int (*post)(struct rma__peer *p, const struct rma__xfer *x);
	/* The fast path, for a transport that moves bytes in the caller's
	 * thread (a copy into mapped memory): do the whole op now, its only
	 * chunk, with nothing of this peer's queued or in flight ahead.  0:
	 * done, every byte moved; the core completes the op itself (no
	 * rma__xfer_done follows: x->op_id is 0, the op has no slot).
	 * RMA__DECLINE: not now (a refusal, a mapping not there yet, an
	 * error): the core posts the op the usual way and post() decides.
	 * Default: RMA__DECLINE. */
	int (*post_now)(struct rma__peer *p, const struct rma__xfer *x);
	/* Push queued work out (once per pump that posted).  Default: none. */
	void (*flush)(struct rma__peer *p);
	/* Op op_id died (err: -ETIMEDOUT, -ECANCELED, ...) with chunks still
	 * posted.  0: its local memory is already safe (the transport checks
	 * rma__op_live/rma__op_buf before touching it, as tcp does);
	 * RMA__ABORT_PENDING: the core withholds the op's completion until
	 * every chunk is reported, which the transport does once the hardware
	 * is stopped (QP to error and drained, endpoint closed).  Chunks may
	 * also be reported before abort returns: the op is dying meanwhile
	 * and completes once.  Default: 0. */
	int (*abort)(struct rma__peer *p, uint64_t op_id, int err);

	/* Once per progress round.  Default: nothing. */
	void (*progress)(struct rma__transport *t);
	/* The progress thread (or a waiter, or rma_progress with a timeout)
	 * is about to sleep in epoll: 0 if that is safe, -EAGAIN if work
	 * arrived (fi_trywait, ibv_req_notify_cq then poll again; shm's idle
	 * words, then a look at the rings).  Default: 0. */
	int (*arm)(struct rma__transport *t);

	/* Region is being released: stop touching its memory now.  Called
	 * after every grant_remove.  Default: nothing. */
	void (*revoke)(struct rma__transport *t, struct rma_region *r);

	/* Raw handles: the instance's (rma_transport_raw), a ready peer's
	 * (rma_peer_raw, transports with RMA__CAP_PEER_RAW).  Bytes written,
	 * or -ENOSPC.  Default: -EOPNOTSUPP. */
	int (*raw)(struct rma__transport *t, void *out, size_t cap);
	int (*peer_raw)(struct rma__peer *p, void *out, size_t cap);

	/* Plain fabric peers: programs with no rma engine, named by the triple
	 * they hand out (fabric address, key, base of the window).
	 * fabric_pack writes the blob that reaches such a peer (no engine;
	 * o: the spec's options) and returns its length; connect() to it
	 * makes no handshake.  fabric_unpack reads the triple back out of a
	 * blob ad_pack wrote, for a plain initiator: the address length, or
	 * RMA__DECLINE if the blob does not match o (another provider).
	 * Default: -EOPNOTSUPP. */
	int (*fabric_pack)(const struct rma__topts *o, const void *addr,
			   size_t addrlen, uint64_t key, uint64_t base,
			   void *buf, size_t cap);
	int (*fabric_unpack)(const struct rma__topts *o, const void *blob,
			     size_t len, void *addr, size_t cap, uint64_t *key,
			     uint64_t *base);
};

/* A transport instance; the transport's own object embeds it. */
struct rma__transport {
	const struct rma__transport_ops *ops;
	struct rma_engine *engine;
	int index;         /* slot in the engine, regions and grants */
	int level;         /* enum rma_level of this instance (init may set) */
	int64_t poll_ns;   /* > 0: no fd tells of its events; the progress
			    * thread polls at least this often */
	char spec[64];     /* "tcp", "ofi:prov=tcp": names it in logs */
};

enum rma__peer_state { RMA__PEER_CONNECTING, RMA__PEER_READY, RMA__PEER_FAILED };

/* Core part of a peer (one remote engine through one instance). */
struct rma__peer {
	struct rma__transport *t;
	uint64_t engine_id;
	int state;
	int error;            /* why it failed */
	uint64_t max_msg;     /* chunk size, set by the transport before ready */
	unsigned credits;     /* transport's own limit on chunks in flight
			       * (0: none; the engine's queue_depth still applies) */
	/* ---- the core's; transports do not touch ---- */
	unsigned inflight;    /* chunks posted, not yet done */
	unsigned nops;        /* live ops on this peer */
	bool was_ready;
	bool stalled;         /* post said -EAGAIN: retry each round */
	bool fell_back;       /* fallback from here already logged */
	int64_t retry_at;     /* failed: other routes are preferred until */
	struct rma__peer *next;
	struct rma__peer *hnext;  /* the engine's peer table */
	struct rma__lnode queue;  /* ops with chunks still to post */
	struct rma__lnode ops;    /* every live or dying op */
};

/* ---- options ---- */

/* Was this instance asked for by name?  (false: a default engine starts
 * every available transport; one that only costs there may decline.) */
bool rma__topts_named(const struct rma__topts *o);
/* Value of option `name` in an instance's spec, or NULL if not given. */
const char *rma__topt(const struct rma__topts *o, const char *name);
/* Same, as an unsigned in [lo, hi]: 0 and *out, 1 if absent, -EINVAL. */
int rma__topt_uint(const struct rma__topts *o, const char *name,
		   unsigned long lo, unsigned long hi, unsigned long *out);
/* Same for a byte count, which may end in a binary unit: 1M, 64KiB. */
int rma__topt_bytes(const struct rma__topts *o, const char *name,
		    unsigned long lo, unsigned long hi, unsigned long *out);

/* ---- regions and grants ---- */

char *rma__region_addr(const struct rma_region *r);
uint64_t rma__region_len(const struct rma_region *r);
unsigned rma__region_access(const struct rma_region *r);
/* The shared memory file behind r (rma_region_alloc; offset 0 is
 * rma__region_addr), or -1 for memory the user registered. */
int rma__region_fd(const struct rma_region *r);
/* This instance's private slot for r (set in mem_reg, read as xfer->ldesc). */
void **rma__region_slot(struct rma_region *r, const struct rma__transport *t);

/* ---- CUDA device memory, staged (transports with RMA__CAP_DEVICE) ---- */

/* Is r CUDA device memory (the CPU must not touch its bytes)? */
bool rma__region_device(const struct rma_region *r);
/* Synchronous copies between r's device memory and host memory, with r's
 * context made current: 0, or -EIO (logged). */
int rma__stage_dtoh(const struct rma_region *r, void *dst, const void *src,
		    size_t len);
int rma__stage_htod(const struct rma_region *r, void *dst, const void *src,
		    size_t len);
/* A transport's bounce buffer: RMA__STAGE_SIZE bytes of pinned host
 * memory, made on first use (reserve: 0, or -ENOMEM) and kept until
 * release.  Copies are synchronous, so one per instance bounds the pinned
 * memory staging costs; a piece larger than it is moved in turns. */
#define RMA__STAGE_SIZE (1u << 20)
struct rma__stage {
	char *buf;
	void *ctx;  /* the context it was pinned under */
};
int rma__stage_reserve(struct rma__stage *s, const struct rma_region *r);
void rma__stage_release(struct rma__stage *s);

struct rma_region *rma__grant_region(const struct rma__grant *g);
uint64_t rma__grant_key(const struct rma__grant *g);  /* the core key */
uint64_t rma__grant_off(const struct rma__grant *g);  /* window in the region */
uint64_t rma__grant_len(const struct rma__grant *g);
unsigned rma__grant_access(const struct rma__grant *g);
void **rma__grant_slot(struct rma__grant *g, const struct rma__transport *t);

/* Target side (software-checked transports): find the memory behind a
 * remote request, checking key, bounds and access.  0 and *addr, *region
 * and (dev not NULL) whether it is device memory, or -EKEYREJECTED /
 * -ERANGE / -EACCES.  Reads the grant only, not the region. */
int rma__target_lookup(struct rma_engine *e, uint64_t key, uint64_t raddr,
		       uint64_t len, unsigned access, char **addr,
		       struct rma_region **region, bool *dev);
/* A hint for a request about to be looked up: start loading key's table
 * slot (grant false: touches nothing), or, once that slot is likely in
 * the cache, its grant.  A transport holding many requests at once issues
 * the first for all, then the second one request ahead, so that with many
 * regions the cache misses overlap instead of adding up. */
void rma__target_prefetch(struct rma_engine *e, uint64_t key, bool grant);

/* ---- fds, timers, wake-ups ---- */

/* fd watching: cb runs under the engine lock with the epoll events.
 * A watch is never freed directly: rma__watch_retire() takes it out of the
 * epoll set at once (cb is not called again) and calls release() once no
 * thread can still hold an event naming it. */
struct rma__watch {
	int fd;
	int retired;
	/* cb may set quiet: the event brought nothing (a readiness it keeps
	 * on purpose), so it is no sign of activity to spin on. */
	bool quiet;
	/* cb may be called without an event (it reads until EAGAIN and sets
	 * quiet when nothing came): a spinning round then tries it directly,
	 * one system call instead of epoll_wait and a read. */
	bool direct;
	void (*cb)(struct rma__watch *w, uint32_t events);
	void (*release)(struct rma__watch *w);
	struct rma__watch *gnext;
};
int rma__watch_add(struct rma_engine *e, struct rma__watch *w, uint32_t events);
/* A direct watch that is not in the epoll set (fd -1, polled by its
 * transport) found work: it becomes the hot one.  Retire it all the same. */
void rma__watch_touch(struct rma_engine *e, struct rma__watch *w);
/* Work was given to something no fd announces: wake a sleeping thread. */
void rma__wake_sleeper(struct rma_engine *e);
/* Is the progress thread asleep in epoll (so only an fd wakes it)?  Lock
 * held. */
bool rma__thread_asleep(const struct rma_engine *e);
int rma__watch_mod(struct rma_engine *e, struct rma__watch *w, uint32_t events);
void rma__watch_retire(struct rma_engine *e, struct rma__watch *w);

/* A one-shot timer: cb runs under the lock in the first progress round at
 * or after `at` (rma__now_ns() clock).  Re-arm from cb to repeat. */
struct rma__timer {
	int64_t at;
	void (*cb)(struct rma__timer *tm);
	/* the core's: heap position + 1 (0: not in the heap), or on the
	 * in-order list */
	unsigned slot;
	struct rma__lnode fifo;
};
/* Is it armed? */
static inline bool rma__timer_armed(const struct rma__timer *tm)
{
	return tm->slot || tm->fifo.next;
}
void rma__timer_arm(struct rma_engine *e, struct rma__timer *tm, int64_t at);
void rma__timer_cancel(struct rma_engine *e, struct rma__timer *tm);

/* ---- ops and peers ---- */

/* A chunk finished: `res` is 0 or -errno.  Op ids are never 0.  Safe to
 * call from any transport callback: the core posts freed credits after. */
void rma__xfer_done(struct rma_engine *e, uint64_t op_id, uint64_t len, int res);
/* Where get data for [raddr, raddr+len) of op op_id lands, or NULL when the
 * op is no longer live (failed, timed out, cancelled): discard the data. */
char *rma__op_buf(struct rma_engine *e, uint64_t op_id, uint64_t raddr,
		  uint64_t len);
/* Is op op_id still live (its local memory may be touched)? */
int rma__op_live(struct rma_engine *e, uint64_t op_id);

void rma__peer_ready(struct rma__peer *p);
void rma__peer_failed(struct rma__peer *p, int err);
/* Room again after post answered -EAGAIN: the core posts on its way out
 * of the current callback or progress round. */
void rma__peer_kick(struct rma__peer *p);

/* ---- engine facts ---- */

struct rma__engine_params {
	const char *listen;       /* rma_config.listen: tcp's default */
	bool listen_given;        /* by the caller or RMA_LISTEN, not the
				   * default: see RMA__CAP_LISTEN */
	const char *advertise;    /* rma_config.advertise: tcp's default */
	const char *secret;
	unsigned queue_depth;
	unsigned stripes;         /* rma_config.stripes: tcp's default */
	uint64_t max_msg_size;
	uint64_t engine_id;
	bool manual;              /* no progress thread: callers sleep on the
				   * epoll set (the completion fd) */
};
const struct rma__engine_params *rma__engine_params(struct rma_engine *e);
int64_t rma__now_ns(void);
/* CLOCK_MONOTONIC_COARSE: a third of the precise clock's cost here, but
 * behind it by a tick or more (a VM's steal time): never for a deadline,
 * only where reading time too early costs a wake-up or a check put off,
 * not correctness. */
int64_t rma__coarse_ns(void);

/* ---- registry: the compiled transports, unset ops filled ---- */
const struct rma__transport_ops *const *rma__registry(unsigned *n);
const struct rma__transport_ops *rma__transport_by_wire(uint8_t id);
const struct rma__transport_ops *rma__transport_by_name(const char *name,
							size_t len);
const char *rma__registry_help(unsigned i); /* options of entry i */
const char *rma__topts_help(const struct rma__transport_ops *ops);
/* Tests only: add a transport before the first engine is created. */
int rma__registry_add(const struct rma__transport_ops *ops);

#endif
