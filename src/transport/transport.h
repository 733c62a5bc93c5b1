/*
 * transport.h - what a transport implements, and what the core offers it.
 *
 * A transport is a folder src/transport/<name>/ with one `static const
 * struct rma__transport_ops` listed in registry.c.  Its objects embed the
 * core's (struct rma__transport, struct rma__peer) as their first member and
 * get back to themselves with container_of.  The registry fills unset ops
 * with stubs that answer -EOPNOTSUPP, so the core never tests for NULL.
 *
 * Threading: every op is called with the engine lock held, and every rma__
 * service below must be called with it held.  Transports never block.
 */
#ifndef RMA_TRANSPORT_H
#define RMA_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rma.h"

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

struct rma_engine;
struct rma_region;
struct rma__transport;
struct rma__peer;

/* What an op's chunk needs on the wire. */
struct rma__xfer {
	uint64_t op_id;  /* names the op to rma__xfer_done / rma__op_buf */
	unsigned kind;   /* RMA_OP_PUT or RMA_OP_GET */
	uint64_t key;    /* remote key (from the advertisement) */
	uint64_t raddr;  /* remote address: key's base + offset */
	char *laddr;     /* local memory */
	struct rma_region *local;
	uint64_t len;    /* <= the peer's max_msg */
};

/* The decoded per-transport part of an advertisement. */
struct rma__rkey {
	uint64_t key;
	uint64_t base;
};

struct rma__transport_ops {
	const char *name;
	int level;          /* enum rma_level */
	uint8_t wire_id;    /* names this transport in advertisements; never reuse */

	/* 0 if usable on this host; else -errno, with a reason in why. */
	int (*probe)(const char **why);
	int (*init)(struct rma_engine *e, struct rma__transport **out);
	void (*fini)(struct rma__transport *t);

	/* Per-region registration (MRs, transport keys). */
	int (*mem_reg)(struct rma__transport *t, struct rma_region *r);
	void (*mem_dereg)(struct rma__transport *t, struct rma_region *r);

	/* This transport's part of an advertisement for window [off, off+len)
	 * of r reached with core key `key`; returns bytes written or -ENOSPC. */
	int (*ad_pack)(struct rma__transport *t, struct rma_region *r,
		       uint64_t key, uint64_t off, uint64_t len, void *buf,
		       size_t cap);
	/* Validate a blob written by ad_pack (no engine needed); fill *rk with
	 * the key and base that xfers use; core_key is the advertisement's. */
	int (*ad_parse)(const void *blob, size_t len, uint64_t core_key,
			struct rma__rkey *rk);

	/* Start connecting to the peer named by blob (*out zeroed but for the
	 * transport's part).  The transport reports the result with
	 * rma__peer_ready() or rma__peer_failed(), either from inside connect
	 * (reachable, or not, at once) or later from its callbacks; the core
	 * fills p->t and p->engine_id. */
	int (*connect)(struct rma__transport *t, const void *blob, size_t len,
		       uint64_t engine_id, struct rma__peer **out);
	/* Fail everything in flight (rma__xfer_done with err) and free. */
	void (*disconnect)(struct rma__peer *p, int err);

	/* Queue one chunk.  The core never posts more than queue_depth
	 * chunks per peer, so this cannot run out of room. */
	int (*post)(struct rma__peer *p, const struct rma__xfer *x);
	/* Push queued work to the wire (called once per rma_post batch). */
	void (*flush)(struct rma__peer *p);

	/* Called once per progress round (transports with no fd to watch). */
	void (*progress)(struct rma__transport *t);
	/* Region is being released: stop touching its memory now. */
	void (*revoke)(struct rma__transport *t, struct rma_region *r);

	int (*raw)(struct rma__transport *t, void *out, size_t cap);
};

struct rma__transport {
	const struct rma__transport_ops *ops;
	struct rma_engine *engine;
	int index; /* slot in the engine and in rma__region.tdata */
};

enum rma__peer_state { RMA__PEER_CONNECTING, RMA__PEER_READY, RMA__PEER_FAILED };

/* Core part of a peer; the transport's peer embeds it. */
struct rma__peer {
	struct rma__transport *t;
	uint64_t engine_id;
	int state;
	int error;            /* why it failed */
	uint64_t max_msg;     /* chunk size, set by the transport before ready */
	unsigned inflight;    /* chunks posted, not yet done */
	struct rma__peer *next;
	struct rma__op *qhead, *qtail; /* ops with chunks still to post */
	unsigned nops;        /* live ops on this peer */
};

/* ---- core services for transports ---- */

/* fd watching: cb runs under the engine lock with the epoll events.
 * A watch is never freed directly: rma__watch_retire() takes it out of the
 * epoll set at once (cb is not called again) and calls release() once no
 * thread can still hold an event naming it. */
struct rma__watch {
	int fd;
	int retired;
	void (*cb)(struct rma__watch *w, uint32_t events);
	void (*release)(struct rma__watch *w);
	struct rma__watch *gnext;
};
int rma__watch_add(struct rma_engine *e, struct rma__watch *w, uint32_t events);
int rma__watch_mod(struct rma_engine *e, struct rma__watch *w, uint32_t events);
void rma__watch_retire(struct rma_engine *e, struct rma__watch *w);

/* A chunk finished: `res` is 0 or -errno.  Op ids are never 0.  Safe to call from any
 * transport callback: the core posts freed credits after the callback. */
void rma__xfer_done(struct rma_engine *e, uint64_t op_id, uint64_t len, int res);
/* Where get data for [raddr, raddr+len) of op op_id lands, or NULL when the
 * op is no longer live (failed, timed out, cancelled): discard the data. */
char *rma__op_buf(struct rma_engine *e, uint64_t op_id, uint64_t raddr,
		  uint64_t len);
/* Is op op_id still live (its local memory may be touched)? */
int rma__op_live(struct rma_engine *e, uint64_t op_id);

void rma__peer_ready(struct rma__peer *p);
void rma__peer_failed(struct rma__peer *p, int err);

/* Target side: find the memory behind a remote request, checking key,
 * bounds and access.  0 and *addr, or -EKEYREJECTED / -ERANGE / -EACCES. */
int rma__target_lookup(struct rma_engine *e, uint64_t key, uint64_t raddr,
		       uint64_t len, unsigned access, char **addr,
		       struct rma_region **region);

/* Engine facts transports need. */
struct rma__engine_params {
	const char *listen;
	const char *secret;
	unsigned queue_depth;
	unsigned stripes;
	uint64_t max_msg_size;
	uint64_t engine_id;
};
const struct rma__engine_params *rma__engine_params(struct rma_engine *e);
int64_t rma__now_ns(void);

/* Registry: the compiled transports, unset ops filled with stubs. */
const struct rma__transport_ops *const *rma__registry(unsigned *n);
const struct rma__transport_ops *rma__transport_by_wire(uint8_t id);
/* Tests only: add a transport before the first engine is created. */
int rma__registry_add(const struct rma__transport_ops *ops);

#endif
