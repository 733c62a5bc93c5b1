/*
 * core.h - the engine's internal objects.  Only src/core includes this;
 * transports see src/transport/transport.h.
 *
 * Locking: one mutex per engine (e->mu) guards everything here.  The
 * progress thread, threads waiting in rma_submit and every API call take it;
 * epoll_wait runs without it.
 *
 * Files: engine.c (lifetime, introspection), tspec.c (transport specs and
 * options), config.c, region.c (regions, grants), stage.c (CUDA device
 * memory on CPU-copying transports), advert.c (the codec),
 * op.c (the op path), regcache.c (ops on plain memory), peer.c (peers,
 * routing, fallback), cq.c (the
 * completion queue), wait.c (every blocking call), timer.c (the deadline
 * heap), progress.c (the loop and its thread).
 */
#ifndef RMA_CORE_H
#define RMA_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/keytab.h"
#include "rma.h"
#include "transport/transport.h"
#include "util/list.h"
#include "util/util.h"

#define RMA__MAX_TRANSPORTS 8   /* instances per engine */
#define RMA__MAX_ENTRIES 16     /* transport entries per advertisement */
#define RMA__ADVERT_MAGIC 0x61414d52u /* "RMAa" */
#define RMA__ADVERT_VERSION 2
#define RMA__MAX_OPTS 8
/* How long a failed peer's marker outlives its retry time (peer.c). */
#define RMA__MARKER_NS (60LL * 1000000000)

/* A parsed transport spec: "tcp:listen=0.0.0.0:7000:stripes=4". */
struct rma__topts {
	const struct rma__transport_ops *ops;
	bool named;  /* listed by the user, not a default engine's pick */
	unsigned n;
	const char *name[RMA__MAX_OPTS];
	const char *val[RMA__MAX_OPTS];
	char buf[256];
};

/* A window of a region reachable with one key (an advertisement names one). */
struct rma__grant {
	/* What serving a request reads, together: with many regions a
	 * lookup then misses the cache on the key's slot and here only. */
	uint64_t key;
	char *base;       /* region->addr + off */
	uint64_t len;
	unsigned access;
	bool dev;         /* the region is device memory */
	struct rma_region *region;
	uint64_t off;
	unsigned tmask;   /* instances that accepted it (grant_add) */
	void *tdata[RMA__MAX_TRANSPORTS];
	struct rma__grant *next; /* the region's grants */
};

struct rma_region {
	struct rma_engine *e;
	char *addr;
	uint64_t len;
	unsigned access;
	unsigned tmask;   /* instances that registered it (mem_reg) */
	int fd;           /* memfd behind it (rma_region_alloc), else -1 */
	bool dev;         /* CUDA device memory (stage.c) */
	void *cuctx;      /* ... and its context */
	struct rma__grant *grants;
	void *tdata[RMA__MAX_TRANSPORTS];
	struct rma__lnode users; /* live and dying ops using it as local memory */
	struct rma_region *next, *prev;
};

/* A range of plain memory the registration cache keeps registered
 * (regcache.c): a local-only region of its own, off e->regions. */
struct rma__rcent {
	struct rma_region reg;
	unsigned users;         /* ops holding it, until their slots are freed */
	bool dropped;           /* out of the index; freed when users reach 0 */
	struct rma__lnode lru;  /* on the idle list while users == 0 */
};

struct rma__regcache {
	struct rma__rcent **v;  /* indexed entries, sorted by address */
	unsigned n, cap;
	uint64_t maxlen;        /* longest indexed entry: bounds the search */
	uint64_t bytes;
	unsigned in_use, deferred;
	struct rma__lnode idle; /* indexed entries no op holds, least recent first */
	uint64_t hits, misses, evictions, invalidations;
};

enum rma__op_state {
	RMA__OP_FREE,
	RMA__OP_LIVE,
	RMA__OP_DYING,  /* failed; completion withheld until the transport
			 * reports every chunk (abort said PENDING) */
	RMA__OP_ZOMBIE, /* completed; slot held until its chunks are reported */
};

struct rma__batch; /* a waiting rma_submit */
struct rma__when;  /* engine.c */

struct rma__op {
	uint64_t id; /* generation << 32 | slot */
	int state;
	unsigned kind, flags;
	int err;                /* DYING: the result to deliver */
	struct rma__peer *peer;
	struct rma_region *local;
	struct rma__rcent *rce; /* plain memory: the cache entry it holds */
	uint32_t crc;           /* RMA_OP_CRC: a put's, taken at post */
	char *laddr;
	uint64_t len;
	uint64_t roff;          /* offset in the remote window */
	rma_remote *remote;     /* a reference: entries for routing, keys */
	const struct rma__rentry *ent; /* the route's entry */
	uint64_t raddr;         /* the route's address of byte 0 */
	void *ldesc;            /* the route's descriptor of `local` */
	uint64_t posted, done;  /* bytes handed to the transport / finished */
	unsigned chunks;        /* chunks with the transport */
	struct rma__timer deadline;
	uint64_t user_data;
	struct rma__batch *batch; /* NULL: the engine's completion queue */
	size_t batch_index;
	struct rma__lnode qnode;  /* peer's queue of ops with chunks to post */
	struct rma__lnode pnode;  /* peer's ops */
	struct rma__lnode rnode;  /* local region's users */
	struct rma__op *fnext;    /* free list */
};

struct rma__batch {
	size_t n, left;
	int64_t *results;
};

/* Timers (op deadlines and transport timers): those armed in time order,
 * the common case (ops posted with one timeout), go on a list; the rest
 * into a binary min-heap. */
struct rma__theap {
	struct rma__timer **t;
	unsigned n, cap;
	struct rma__lnode fifo;
};

struct rma_engine {
	pthread_mutex_t mu;
	struct rma__engine_params p;
	struct rma_config cfg;
	unsigned flags;
	char *transports_str, *listen_str, *secret_str, *advertise_str;

	struct rma__transport *tr[RMA__MAX_TRANSPORTS];
	unsigned ntr;

	struct rma__keytab grants;
	struct rma_region *regions;
	struct rma__regcache rcache;
	struct rma__peer *peers;
	/* (engine id, instance) -> peer: finding one costs the same for 1 or
	 * 10,000 peers */
	struct rma__peer **ptab;
	unsigned ptab_cap, npeers;
	int64_t sweep_at;       /* failed peers' markers swept next (peer.c) */
	/* The last route taken, for the next op to the same remote: valid
	 * while route_gen stands (bumped when any peer fails or goes). */
	struct {
		rma_remote *r;  /* a reference */
		unsigned tmask, gen;
		struct rma__transport *t;
		const struct rma__rentry *ent;
		struct rma__peer *p; /* its peer, once an op found it (op.c) */
	} rc;
	unsigned route_gen;
	bool plain_refused;     /* said once why plain fabric peers are refused */

	/* op slots: live ops + zombies, never more than nops */
	struct rma__op *ops;
	uint32_t nops;
	struct rma__op *free_ops;
	uint32_t live;          /* ops in LIVE or DYING state (stored atomically) */
	unsigned stalled;       /* peers whose post said -EAGAIN */
	struct rma__timer stall_timer; /* retries them */

	struct rma__theap timers;
	int timer_fd;           /* armed to the earliest timer: the manual
				 * completion fd wakes on deadlines */
	struct rma__watch timer_watch;
	int64_t timer_armed;    /* what timer_fd is set to; 0 = disarmed */
	uint64_t work;          /* list and heap steps (tests count them) */

	/* completion queue: a ring of cq_depth; posts reserve their slot */
	struct rma_completion *cq;
	uint32_t cq_cap, cq_head, cq_count, cq_reserved;
	rma_complete_cb cb;
	void *cb_arg;
	int cq_fd;     /* eventfd, readable while completions wait */
	bool cq_fd_used; /* rma_completion_fd was called: keep cq_fd true */
	bool cq_fd_set;  /* cq_fd holds a count (is readable) */
	struct rma__watch cq_watch; /* manual mode: cq_fd in the epoll set */
	pthread_cond_t done_cv; /* batch waiters */

	/* progress */
	int epfd;
	int wake_fd;   /* eventfd to kick the progress thread */
	struct rma__watch wake_watch;
	pthread_t thread;
	bool has_thread, stop, shut;
	unsigned waiters;       /* threads driving progress in rma_submit (atomic reads) */
	int64_t waiter_left;    /* when the last of them left (atomic) */
	pthread_mutex_t park_mu; /* the progress thread parks under this, not mu: */
	pthread_cond_t pt_cv;   /* its periodic look never blocks a driving caller */
	int64_t last_activity;
	int64_t spin_ns;         /* how long to spin after it (rma__spin_next) */
	int64_t poll_until;      /* when the thread's epoll_wait times out; 0: not asleep */
	int64_t poll_lease;      /* rma_poll callers drive progress until then (atomic) */
	unsigned polling;        /* rma_poll callers inside a progress round (atomic) */
	int64_t poll_ns;         /* smallest transport poll_ns; 0 = none */
	bool in_cb;
	bool pump;               /* credits freed or a peer became ready */
	bool backlog;            /* the last pump left a peer at its credit
				  * limit with chunks queued */
	int pollers;             /* threads between epoll_wait and handling */
	struct rma__watch *hot;  /* the direct watch that last found work */
	bool touched;            /* a polled queue found work this round */
	bool hot_queue;          /* it has no fd: a queue its transport polls */
	unsigned spins;          /* spinning rounds, for the epoll_wait of each Nth */
	int64_t epoll_at;        /* when a round last asked epoll */
	unsigned hot_runs;       /* epoll rounds in a row whose work was all the hot watch's */
	struct rma__watch *grave; /* retired watches awaiting release */
};

/* op.c */
int rma__ops_init(struct rma_engine *e);
void rma__op_fail(struct rma_engine *e, struct rma__op *op, int err);
void rma__peer_pump(struct rma_engine *e, struct rma__peer *p);
void rma__pump_all(struct rma_engine *e);
void rma__pump_pending(struct rma_engine *e);
/* 0: queued; 1: completed already (done at once, or zero bytes); -errno. */
int rma__post_locked(struct rma_engine *e, const struct rma_op *op,
		     struct rma__when *when, struct rma__batch *b, size_t index);
void rma__op_attach(struct rma_engine *e, struct rma__op *op,
		    struct rma__peer *p, const struct rma__rentry *ent);

/* peer.c */
/* The cached route (e->rc) still serves an op from local to r. */
static inline bool rma__rc_hit(const struct rma_engine *e, const rma_remote *r,
			       const struct rma_region *local)
{
	return r == e->rc.r && local && local->tmask == e->rc.tmask &&
	       e->rc.gen == e->route_gen;
}
struct rma__peer *rma__peer_find(struct rma_engine *e, uint64_t engine_id,
				 const struct rma__transport *t);
int rma__route(struct rma_engine *e, const rma_remote *r,
	       const struct rma_region *local, unsigned skip,
	       struct rma__transport **tp, const struct rma__rentry **entp);
void rma__note_fallback(struct rma_engine *e, uint64_t engine_id,
			struct rma__transport *from, int err,
			struct rma__transport *to);
struct rma__peer *rma__peer_get(struct rma_engine *e, const rma_remote *r,
				struct rma__transport *t,
				const struct rma__rentry *ent, int *err);
void rma__peer_destroy(struct rma_engine *e, struct rma__peer *p, int err);
void rma__fail_peer_ops(struct rma_engine *e, struct rma__peer *p, int err);

/* regcache.c: ops on plain memory */
int rma__regcache_get(struct rma_engine *e, char *addr, uint64_t len,
		      struct rma__rcent **out);
void rma__regcache_put(struct rma_engine *e, struct rma__rcent *c);
void rma__regcache_fini(struct rma_engine *e);

/* cq.c */
void rma__cq_push(struct rma_engine *e, uint64_t user_data, int64_t res,
		  unsigned flags, uint32_t crc);
void rma__cq_signal(struct rma_engine *e);
uint32_t rma__cq_take(struct rma_engine *e, struct rma_completion *out,
		      uint32_t max);
int rma__cq_init(struct rma_engine *e);

/* wait.c */
void rma__wait_until(struct rma_engine *e, int (*done)(void *), void *arg,
		     int64_t deadline);

/* timer.c */
int rma__timers_init(struct rma_engine *e, unsigned cap);
void rma__timers_fini(struct rma_engine *e);
void rma__timers_run(struct rma_engine *e, int64_t now);
int64_t rma__timers_next(struct rma_engine *e);
/* Anything for rma__timers_run at `now`?  Cheap enough for every round. */
static inline bool rma__timers_due(const struct rma_engine *e, int64_t now)
{
	const struct rma__theap *h = &e->timers;
	const struct rma__lnode *f = h->fifo.next;
	return (f != &h->fifo &&
		container_of(f, const struct rma__timer, fifo)->at <= now) ||
	       (h->n && h->t[0]->at <= now) ||
	       (e->timer_armed && e->timer_armed <= now);
}

/* progress.c */
int rma__progress_init(struct rma_engine *e);
int rma__progress_start(struct rma_engine *e);
void rma__progress_stop(struct rma_engine *e);
/* One round; returns the events that brought work (0: none), or -errno.
 * A spinning round (timeout 0) may first try the hot watch directly:
 * RMA__TRY_ANY, or RMA__TRY_QUEUE only if it is a queue its transport
 * polls (no fd); RMA__TRY_NONE asks epoll. */
enum { RMA__TRY_NONE, RMA__TRY_ANY, RMA__TRY_QUEUE };
int rma__progress_once(struct rma_engine *e, int timeout_ms, int try);
void rma__spin_idle(void);
/* Whether a spinning thread shares its core (rma__spin_idle yields only
 * then): a look at its usage every RMA__CROWD_LOOK_NS, ru NULL where it
 * could not be read. */
#define RMA__CROWD_LOOK_NS 200000
struct rusage;
struct rma__crowd {
	int64_t looked, ran, crowded; /* last look; CPU time then; last crowded look */
	long switched;                /* ru_nivcsw then */
};
void rma__crowd_look(struct rma__crowd *c, int64_t now, const struct rusage *ru);
bool rma__crowd_shared(const struct rma__crowd *c, int64_t now);
/* Before a sleep in epoll: every transport's arm; 0 or -EAGAIN. */
int rma__arm_all(struct rma_engine *e);
void rma__wake(struct rma_engine *e);
void rma__unpark(struct rma_engine *e); /* a parked progress thread looks again */
void rma__retime(struct rma_engine *e);
void rma__deliver_callbacks(struct rma_engine *e);

/* region.c */
void rma__region_free_all(struct rma_engine *e);
int rma__region_reg(struct rma_engine *e, struct rma_region *r);
void rma__region_dereg(struct rma_engine *e, struct rma_region *r);
/* stage.c */
int rma__region_detect(struct rma_region *r);
bool rma__region_carries(const struct rma_region *r,
			 const struct rma__transport *t);
int rma__grant_for(struct rma_region *r, uint64_t off, uint64_t len,
		   unsigned access, struct rma__grant **out);

/* advert.c: the decoded advertisement, immutable once decoded and shared
 * (by reference count) with the ops that use it */
struct rma__rentry {
	uint8_t wire_id;
	uint8_t instance;
	uint16_t len;
	const uint8_t *blob; /* points into rma_remote.raw */
	struct rma__rkey rk;
};
struct rma_remote {
	uint64_t engine_id;
	uint64_t key;
	uint64_t len;
	unsigned access;
	unsigned refs;       /* the caller's + one per op using it */
	unsigned nent;
	int64_t expires;     /* wall-clock ns; 0 = never */
	bool plain;          /* a plain fabric peer (fabric.c): no engine */
	struct rma__rentry ent[RMA__MAX_ENTRIES];
	size_t rawlen;
	uint8_t raw[];
};
void rma__remote_ref(rma_remote *r);
void rma__remote_unref(rma_remote *r);

/* config.c */
int rma__config_resolve(const struct rma_config *in, struct rma_config *out);
/* The listen address a resolved config has when the caller gave none (nor
 * RMA_LISTEN): out->listen == rma__listen_default, this very pointer. */
extern const char rma__listen_default[];

/* tspec.c */
int rma__tspec_parse(const char *spec, size_t len, struct rma__topts *o);

/* progress.c */
int64_t rma__spin_next(int64_t base_ns, int64_t gap_ns);

/* engine.c */
int rma__deadline(struct rma_engine *e, int timeout_ms, int64_t *deadline);
/* A call's timeout, turned into a deadline at its first need (the clock
 * costs tens of ns: an op done at once needs none). */
struct rma__when {
	int timeout_ms;
	bool known;
	int64_t deadline; /* once known: 0 = none */
};
int64_t rma__when_deadline(struct rma_engine *e, struct rma__when *w);

#endif
