/*
 * rma.h - one-sided remote memory access.
 *
 * A process registers memory and hands out an advertisement (a token); peers
 * holding it put into or get from that memory over the best transport both
 * sides share.  Every call returns 0, a count, or a negative errno; name it
 * with rma_strerror().  Output arguments come last and are written only on
 * success.  All calls are thread-safe unless noted (rma_engine_destroy).
 * A decoded rma_remote is immutable: any number of threads and engines may
 * use one at once.  The introspection calls (rma_transports, rma_version,
 * rma_strerror, rma_peer_route) are thread-safe and return pointers to
 * static or engine-lifetime storage.
 */
#ifndef RMA_H
#define RMA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RMA_VERSION_MAJOR 0
#define RMA_VERSION_MINOR 1
#define RMA_VERSION_PATCH 0

/* "none" where a config field or timeout takes it: no spin, no deadline. */
#define RMA_NONE (-1)

/* Opaque handles. */
typedef struct rma_engine rma_engine; /* one per process or independent user */
typedef struct rma_region rma_region; /* registered local memory */
typedef struct rma_remote rma_remote; /* a decoded advertisement */

/* Transport levels: a peer is reached through the highest level both share. */
enum rma_level {
	RMA_LEVEL_NONE = 0,
	RMA_LEVEL_TCP = 1,
	RMA_LEVEL_NIC = 2,
	RMA_LEVEL_MEMORY = 3,
};

/* Remote access granted on a region (local use is always allowed). */
enum rma_access {
	RMA_ACCESS_REMOTE_READ = 1u << 0,  /* peers may get from it */
	RMA_ACCESS_REMOTE_WRITE = 1u << 1, /* peers may put into it */
};
#define RMA_ACCESS_REMOTE_RW (RMA_ACCESS_REMOTE_READ | RMA_ACCESS_REMOTE_WRITE)

/* rma_config.flags */
enum rma_engine_flags {
	/* No progress thread: the caller drives progress with rma_progress().
	 * rma_submit(), rma_read_into() and rma_write_from() drive it themselves. */
	RMA_ENGINE_MANUAL_PROGRESS = 1u << 0,
};

/*
 * Engine configuration.  Call rma_config_init() first, then set what you need;
 * zero means "default" for every numeric field.  The struct is copied during
 * rma_engine_create(); its strings need not outlive the call.  `size` lets the
 * struct grow without breaking older callers.
 *
 * Environment overrides, read once at rma_engine_create() (they win over the
 * struct): RMA_TRANSPORTS, RMA_LISTEN, RMA_ADVERTISE, RMA_SECRET, RMA_TIMEOUT_MS (or
 * "none"), RMA_STRIPES, RMA_LOG (error|warn|info|debug; sets the level and
 * keeps a callback installed with rma_set_log).
 *
 * transports: comma-separated specs, one engine instance each:
 * "name[:option=value...]", e.g. "tcp:listen=0.0.0.0:7000:stripes=4,shm".
 * rma_transports() lists each transport's options.  `listen` and `stripes`
 * below are tcp's defaults when its spec does not set them.
 */
struct rma_config {
	size_t size;            /* sizeof(struct rma_config) */
	const char *transports; /* "tcp,shm" (specs); NULL = every available one */
	const char *listen;     /* "HOST:PORT"; NULL = "127.0.0.1:0" */
	const char *secret;     /* shared secret checked at connect; NULL = none */
	unsigned flags;         /* enum rma_engine_flags */
	unsigned queue_depth;   /* chunks in flight per peer (credits); 64 */
	unsigned cq_depth;      /* completions that may wait unpolled; 4096 (max 262144) */
	unsigned stripes;       /* connections per peer for striping; 4 */
	uint64_t max_msg_size;  /* chunk size; 0 = the transport's (tcp: 1 MiB) */
	int timeout_ms;         /* default op deadline; 30000; RMA_NONE = none */
	int spin_us;            /* busy-poll before sleeping; 200; RMA_NONE = none */
	const char *advertise;  /* host peers should use to reach tcp's listen
				 * address; NULL = itself, or for 0.0.0.0/[::]
				 * the default route's interface */
	/* The registration cache (ops on plain memory, rma_op.addr): at most
	 * this many ranges and bytes stay registered once their ops end.
	 * Ranges in use by ops in flight are never dropped, so the cache may
	 * exceed these while they run. */
	unsigned cache_entries; /* 1024 (max 1048576) */
	uint64_t cache_bytes;   /* 1 GiB */
	/* How long each rma_poll keeps the progress thread aside, the caller
	 * driving progress itself, unless rma_arm ends it sooner; RMA_NONE:
	 * never (rma_poll then only takes completions). */
	int poll_lease_us;      /* 1000 (max 10000000) */
};

void rma_config_init(struct rma_config *cfg);

int rma_engine_create(const struct rma_config *cfg, rma_engine **out);

/* The engine's own address (every active transport's endpoint) as bytes;
 * returns the length, or -ENOSPC if cap is too small (nothing written). */
int rma_engine_address(rma_engine *e, void *buf, size_t cap);

/*
 * Stop the engine.  New posts fail with -ESHUTDOWN.  drain_ms == 0 cancels
 * every op in flight (-ECANCELED) and returns how many it cancelled.
 * drain_ms > 0 lets ops finish for up to drain_ms, then cancels the rest:
 * 0 if none was left, -ETIMEDOUT if some were.  drain_ms < 0 waits for
 * every op (each still ends by its own deadline) and returns 0.
 * Completions stay pollable until rma_engine_destroy().
 */
int rma_engine_shutdown(rma_engine *e, int drain_ms);

/* Shuts down (cancelling) if needed, releases every region, frees the
 * engine.  Not thread-safe: no other call on e may be running. */
void rma_engine_destroy(rma_engine *e);

/* ---- regions and advertisements ---- */

/* Register [addr, addr+len) with enum rma_access flags (0 = local use only).
 * CUDA device memory too, when the application has loaded the driver
 * (api.md: verbs by dma-buf, tcp and shm through pinned host memory);
 * -EINVAL for a range that is device memory at one end only. */
int rma_region_register(rma_engine *e, void *addr, size_t len, unsigned access,
			rma_region **out);

/*
 * Allocate len bytes of shared memory (a memfd, zero-filled) and register
 * them like rma_region_register; *addr receives the address.  A same-host
 * peer maps such memory once and copies with no system call per op (shm).
 * rma_region_release unmaps it.
 */
int rma_region_alloc(rma_engine *e, size_t len, unsigned access,
		     rma_region **out, void **addr);

/*
 * Revoke every advertisement of the region and free the handle.  Local ops
 * using the region complete with -ECANCELED.  When it returns, no remote op
 * reads or writes the memory any more; remote ops racing with it fail at
 * their initiator.
 */
int rma_region_release(rma_region *r);

/*
 * Advertise [off, off+len) of a region (len 0 = to the end) with at most the
 * region's access (access 0 = the region's).  Only that window is reachable
 * with the result.  rma_advertise() writes bytes and returns their count;
 * rma_advertise_text() writes one NUL-terminated word ([A-Za-z0-9_-]) and
 * returns its strlen.  -ENOSPC if cap is too small (nothing written).
 */
#define RMA_ADVERTISEMENT_MAX 512  /* bytes */
#define RMA_ADVERTISEMENT_TEXT_MAX 700 /* chars, with the NUL */
int rma_advertise(rma_region *r, uint64_t off, uint64_t len, unsigned access,
		  void *buf, size_t cap);
int rma_advertise_text(rma_region *r, uint64_t off, uint64_t len,
		       unsigned access, char *text, size_t cap);

/* Decode an advertisement, validating everything (-EBADMSG if malformed).
 * A remote is independent of any engine and immutable; share it freely
 * between threads and engines.  rma_remote_free() may be called while ops
 * posted with it are in flight: they keep what they need. */
int rma_remote_decode(const void *buf, size_t len, rma_remote **out);
int rma_remote_parse(const char *text, rma_remote **out);
void rma_remote_free(rma_remote *r);
uint64_t rma_remote_length(const rma_remote *r);
unsigned rma_remote_access(const rma_remote *r);

/*
 * Plain fabric peers: programs that run no rma engine, only libfabric, and
 * hand out a triple instead of a token: their endpoint's fabric address
 * (fi_getname bytes), the key of their registration, and the remote
 * address of the window's first byte (its virtual address if the provider
 * uses FI_MR_VIRT_ADDR, else 0).
 *
 * rma_remote_from_fabric makes a remote from such a triple.  spec names
 * the transport and its provider, as in rma_config.transports ("ofi:tcp");
 * both sides must use the same provider (an RDM endpoint).  len is the
 * window's length if known (ops past it fail here with -ERANGE), or 0 if
 * not: the target's fabric checks every request's key and bounds, and a
 * refusal completes the op with -EKEYREJECTED.  The remote allows puts and
 * gets (the fabric checks access too).  Its peer identity is derived from
 * the address, so remotes at one address share one peer (rma_peer_remove
 * of any of them removes it).  There is no handshake: an engine with a
 * shared secret refuses ops to such a remote with -EACCES, since the peer
 * cannot prove it.  rma_read_into needs a known len.  The caller frees the
 * remote with rma_remote_free.  Errors: -EINVAL (NULL or empty address, a
 * bad spec option), -ENOENT (unknown transport), -EOPNOTSUPP (the
 * transport takes no plain peers, or this build lacks libfabric),
 * -ENAMETOOLONG (address over 128 bytes).
 *
 * rma_remote_to_fabric is the reverse, for a plain libfabric initiator of
 * an rma owner: the triple of r's first entry for spec's transport (with
 * "ofi:tcp", an entry of that provider).  It writes the fabric address
 * into addr and returns its length; the initiator uses fi_write/fi_read
 * (RDM, the same provider) with key *rkey at *remote_addr + offset.
 * -ENOENT if r has no such entry, -ENOSPC if cap is too small, -EOPNOTSUPP
 * as above.  Such an initiator proves no secret: the owner's fabric
 * accepts RMA from anyone who reaches it and holds the key.
 */
int rma_remote_from_fabric(const char *spec, const void *addr, size_t addrlen,
			   uint64_t rkey, uint64_t remote_addr, uint64_t len,
			   rma_remote **out);
int rma_remote_to_fabric(const rma_remote *r, const char *spec, void *addr,
			 size_t cap, uint64_t *rkey, uint64_t *remote_addr);

/* ---- peers ---- */

/* Timeouts: everywhere below, timeout_ms 0 means the engine's default
 * (rma_config.timeout_ms) and a negative value means no deadline. */

/* Connect to the owner of `r` now (ops otherwise connect on first use). */
int rma_peer_connect(rma_engine *e, const rma_remote *r, int timeout_ms);

/* Wait up to timeout_ms for this peer's ops, cancel the rest (-ECANCELED),
 * and drop its connections.  Returns 0, -ETIMEDOUT if ops were cancelled,
 * or -ENOENT if there is no such peer. */
int rma_peer_remove(rma_engine *e, const rma_remote *r, int timeout_ms);

/* ---- ops ---- */

enum rma_op_kind {
	RMA_OP_PUT = 1, /* local -> remote */
	RMA_OP_GET = 2, /* remote -> local */
};

/* rma_op.flags */
enum rma_op_flags {
	/* Start only after every op posted earlier to the same peer has
	 * completed: a get then sees the target memory as those ops left it,
	 * and a put cannot overtake an earlier get of the same bytes. */
	RMA_OP_FENCE = 1u << 0,
	/* The completion carries the CRC-32C (rma_crc32c, from 0) of the
	 * bytes moved, as they are in local memory: a put's source when the
	 * op is posted, a get's destination once its last byte has landed.
	 * Compare it with the peer's over your own channel.  rma_post only
	 * (rma_submit has no completions to carry it: -EINVAL). */
	RMA_OP_CRC = 1u << 1,
};

/* rma_op grows only into `reserved`; a caller that zeroes the struct keeps
 * working.
 *
 * Local memory is `local` (a registered region) at local_off, or, when
 * local is NULL, plain memory at addr + local_off: rma registers it through
 * the engine's registration cache (rma_cache_stats) and keeps it
 * registered after the op, for later ops inside the same range.  Before
 * freeing, unmapping or remapping such memory, call rma_mem_invalidate. */
struct rma_op {
	unsigned kind;            /* enum rma_op_kind */
	unsigned flags;           /* enum rma_op_flags */
	rma_region *local;        /* local memory (any access flags), or NULL */
	uint64_t local_off;
	const rma_remote *remote; /* may be freed once the op is posted */
	uint64_t remote_off;      /* within the advertised window */
	uint64_t len;             /* bytes; 0 completes at once with 0 */
	uint64_t user_data;       /* returned in the completion */
	void *addr;               /* plain local memory when local is NULL */
	uint64_t reserved[1];     /* must be 0 */
};

/* rma_completion.flags */
enum rma_completion_flags {
	RMA_COMPLETION_CRC = 1u << 0, /* crc32c is set (RMA_OP_CRC) */
};

/* result: bytes moved, or a negative errno.  A put's completion means the
 * bytes are in the target's memory; a get's, that they are in local memory.
 * crc32c: with RMA_COMPLETION_CRC in flags (an RMA_OP_CRC op that
 * succeeded), the CRC-32C of the bytes moved; else 0.  The struct grew
 * from 16 to 24 bytes with these two fields: rebuild code that polls. */
struct rma_completion {
	uint64_t user_data;
	int64_t result;
	uint32_t crc32c;
	uint32_t flags;           /* enum rma_completion_flags */
};

/*
 * Post ops asynchronously, all with one deadline of timeout_ms (0 = the
 * engine's default, < 0 = none).  Returns how many were posted, from the
 * first: each posted op delivers exactly one completion.  If op i cannot be
 * posted, ops before it are, i is returned and *err (if err is not NULL)
 * receives op i's -errno; if the first cannot, its -errno is returned.
 * -EAGAIN: completion queue full, poll first.
 */
int rma_post(rma_engine *e, const struct rma_op *ops, size_t n, int timeout_ms,
	     int *err);

/* Take up to max waiting completions; returns the count (0 if none).  If
 * none wait, an engine with a progress thread first runs one progress round
 * on the caller's thread.  A caller polling drives progress: after each
 * call the thread stands aside for poll_lease_us (rma_config), so that two
 * threads do not fight over the same work. */
int rma_poll(rma_engine *e, struct rma_completion *out, size_t max);

/* Stop polling: call before sleeping on rma_completion_fd() (or going off
 * to other work) after rma_poll.  Returns -EAGAIN if completions wait
 * (take them first), else 0: the progress thread drives from now on.  A
 * caller that sleeps without it still gets its completions, but up to
 * poll_lease_us late (10 ms after a long run of polls). */
int rma_arm(rma_engine *e);

/* Drive progress once, waiting up to timeout_ms for activity; returns the
 * number of completions waiting.  Needed only with RMA_ENGINE_MANUAL_PROGRESS. */
int rma_progress(rma_engine *e, int timeout_ms);

/* A file descriptor that is readable when completions wait (after
 * rma_poll, call rma_arm before sleeping on it).  With
 * RMA_ENGINE_MANUAL_PROGRESS it is readable when rma_progress() has work: a
 * transport event, a completion made anywhere (rma_post included), or a
 * deadline passing.  Owned by the engine; do not close it. */
int rma_completion_fd(rma_engine *e);

/* Deliver completions to cb instead of the queue, in batches, with no
 * engine lock held, one batch at a time.  cb runs on whichever thread
 * drives progress: the progress thread, or a caller inside rma_progress,
 * rma_submit, rma_read_into, rma_write_from, rma_peer_connect,
 * rma_peer_remove, rma_region_release, rma_set_callback or
 * rma_engine_shutdown (never inside rma_post or rma_poll).  Do not hold,
 * across those calls, a lock that cb takes.  cb NULL restores the queue. */
typedef void (*rma_complete_cb)(void *arg, const struct rma_completion *c,
				size_t n);
int rma_set_callback(rma_engine *e, rma_complete_cb cb, void *arg);

/*
 * Run n ops to completion with one deadline.  results[i] receives op i's
 * result (bytes or -errno), always exactly n of them.  Returns 0 if all
 * succeeded, else the number that failed; if report is given it then holds
 * one message naming each failed op by index and reason.  Completions of
 * these ops never reach rma_poll() or the callback.
 */
int rma_submit(rma_engine *e, const struct rma_op *ops, size_t n,
	       int timeout_ms, int64_t *results, char *report,
	       size_t report_cap);

/* Monarch's size rules, whole buffers: read_into moves the remote length
 * into the start of local (local must be at least as big); write_from moves
 * the local length into the start of the remote (remote must be at least as
 * big).  Return the bytes moved or -errno (-EMSGSIZE on a size mismatch). */
int64_t rma_read_into(rma_engine *e, rma_region *local, const rma_remote *r,
		      int timeout_ms);
int64_t rma_write_from(rma_engine *e, rma_region *local, const rma_remote *r,
		       int timeout_ms);
/* The same for plain memory [buf, buf+len), registered through the cache. */
int64_t rma_read_into_mem(rma_engine *e, void *buf, size_t len,
			  const rma_remote *r, int timeout_ms);
int64_t rma_write_from_mem(rma_engine *e, const void *buf, size_t len,
			   const rma_remote *r, int timeout_ms);

/* ---- the registration cache (ops on plain memory) ---- */

/*
 * Drop every cached registration overlapping [addr, addr+len) (len 0: the
 * byte at addr), so a later op there registers the memory afresh.  Call it
 * before freeing, unmapping or remapping memory that ops named by address:
 * a NIC registration pins the old pages.  A range still used by ops in
 * flight is deregistered when the last of them ends, never under them.
 * Returns how many ranges were dropped.
 */
int rma_mem_invalidate(rma_engine *e, const void *addr, size_t len);

struct rma_cache_stats {
	uint64_t hits;          /* ops that found their range registered */
	uint64_t misses;        /* ops that registered a range */
	uint64_t evictions;     /* ranges dropped to stay within the bounds */
	uint64_t invalidations; /* ranges dropped by rma_mem_invalidate */
	uint64_t entries;       /* ranges registered now */
	uint64_t bytes;         /* their bytes */
	uint64_t in_use;        /* of those, ranges used by ops in flight */
	uint64_t deferred;      /* dropped ranges waiting for their ops */
};
/* A snapshot of the engine's cache counters (since rma_engine_create). */
int rma_cache_stats(rma_engine *e, struct rma_cache_stats *out);

/* ---- introspection ---- */

struct rma_transport_info {
	const char *name;    /* "tcp", ... */
	int level;           /* enum rma_level (an instance may differ) */
	int available;       /* 1 if usable on this host */
	const char *detail;  /* why not available, or a short description */
	const char *options; /* "listen: ...; stripes: ..." or "no options" */
};

/* Fill up to max entries, one per compiled transport; returns how many are
 * compiled (may exceed max). */
int rma_transports(struct rma_transport_info *out, size_t max);

/* Raw transport handles (e.g. for GPU-initiated transfers), where a
 * transport has any; -EOPNOTSUPP where it has none, -ENOENT if the
 * transport is not active in this engine, -ENOSPC if cap is too small.
 * Returns the bytes written.  verbs writes a struct rma_verbs_raw (qp
 * NULL). */
int rma_transport_raw(rma_engine *e, const char *transport, void *out,
		      size_t cap);

/*
 * What verbs hands out (include <infiniband/verbs.h> for the types).  The
 * objects are the engine's: use them (query them, register memory on the
 * PD, make QPs of your own on it) but never destroy or modify them.  The
 * engine polls the CQ and counts the QP's send queue itself, so posting on
 * its QP needs care: a WR rma did not post is one it cannot account for.
 * Valid until the engine is destroyed (context, pd, cq), and for qp until
 * that peer is removed or fails, or its QP is replaced after a work
 * request error (a new QP: ask again).
 */
struct rma_verbs_raw {
	void *context;     /* struct ibv_context *: the device */
	void *pd;          /* struct ibv_pd *: every region's MRs are on it */
	void *cq;          /* struct ibv_cq *: shared by the instance's QPs */
	void *qp;          /* struct ibv_qp *: the peer's RC QP (rma_peer_raw) */
	uint32_t qp_num;   /* qp's number; 0 without one */
	uint32_t port_num; /* the port in use */
};

/*
 * A peer's raw handles on transport `transport` ("verbs": a struct
 * rma_verbs_raw with the QP that reaches r's owner and its CQ), written to
 * out; returns the bytes written.  Connects on that transport if there is
 * no connection yet: until it is up the answer is -ENOTCONN (ask again
 * after rma_progress or a wait), or the connect's error if it failed at
 * once.  -EOPNOTSUPP: the transport has no raw handles (tcp, shm);
 * -ENOENT: not active in this engine; -EHOSTUNREACH: r has no entry for
 * it, or the owner is out of its reach; -ENOSPC: cap too small.
 */
int rma_peer_raw(rma_engine *e, const rma_remote *r, const char *transport,
		 void *out, size_t cap);

/* How this engine reaches the owner of r. */
enum rma_peer_state {
	RMA_PEER_NONE = 0,     /* no connection yet (made on first use) */
	RMA_PEER_CONNECTING = 1,
	RMA_PEER_READY = 2,
	RMA_PEER_FAILED = 3,
};
struct rma_route_info {
	const char *transport; /* instance spec ("tcp", "ofi:prov=tcp") */
	int level;             /* enum rma_level */
	int state;             /* enum rma_peer_state */
	int error;             /* -errno of the failure, when FAILED */
	char why[192];         /* "tcp: connected; shm failed (...)" */
};
/* The route ops to r's owner take now: the highest level both sides offer
 * that is reachable and has not just failed.  -EHOSTUNREACH if none (then
 * *out is not written).  A failed peer reads FAILED, with its error, for
 * at least a minute after it failed; then, with no ops left on it, it may
 * be forgotten (NONE), and the next op connects afresh. */
int rma_peer_route(rma_engine *e, const rma_remote *r,
		   struct rma_route_info *out);

const char *rma_strerror(int err);
const char *rma_version(void); /* "0.1.0" */

/* crc32c (Castagnoli) of a buffer, continuing from crc (start with 0). */
uint32_t rma_crc32c(uint32_t crc, const void *buf, size_t len);

/* Logging: messages at or above level go to cb (default: stderr). */
enum rma_log_level {
	RMA_LOG_ERROR = 0,
	RMA_LOG_WARN = 1,
	RMA_LOG_INFO = 2,
	RMA_LOG_DEBUG = 3,
};
typedef void (*rma_log_cb)(void *arg, int level, const char *msg);
void rma_set_log(int level, rma_log_cb cb, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* RMA_H */
