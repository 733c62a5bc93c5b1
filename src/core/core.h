/*
 * core.h - the engine's internal objects.  Only src/core includes this;
 * transports see src/transport/transport.h.
 *
 * Locking: one mutex per engine (e->mu) guards everything here.  The
 * progress thread, threads waiting in rma_submit and every API call take it;
 * epoll_wait runs without it.
 */
#ifndef RMA_CORE_H
#define RMA_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/keytab.h"
#include "rma.h"
#include "transport/transport.h"
#include "util/util.h"

#define RMA__MAX_TRANSPORTS 8
#define RMA__ADVERT_MAGIC 0x61414d52u /* "RMAa" */
#define RMA__ADVERT_VERSION 1

/* A window of a region reachable with one key (an advertisement names one). */
struct rma__grant {
	uint64_t key;
	struct rma_region *region;
	uint64_t off, len;
	unsigned access;
	struct rma__grant *next; /* the region's grants */
};

struct rma_region {
	struct rma_engine *e;
	char *addr;
	uint64_t len;
	unsigned access;
	struct rma__grant *grants;
	void *tdata[RMA__MAX_TRANSPORTS]; /* per-transport registration */
	unsigned nlocal;                  /* live ops using it as local memory */
	struct rma_region *next, *prev;
};

enum rma__op_state { RMA__OP_FREE, RMA__OP_LIVE, RMA__OP_ZOMBIE };

struct rma__batch; /* a waiting rma_submit */

struct rma__op {
	uint64_t id; /* generation << 32 | slot */
	int state;
	unsigned kind;
	struct rma__peer *peer;
	struct rma_region *local;
	char *laddr;
	uint64_t len;
	uint64_t key, raddr;    /* remote key and start address */
	uint64_t posted, done;  /* bytes handed to the transport / finished */
	unsigned chunks;        /* chunks with the transport */
	int64_t deadline;       /* ns, 0 = none */
	uint64_t user_data;
	struct rma__batch *batch; /* NULL: the engine's completion queue */
	size_t batch_index;
	struct rma__op *qnext;    /* peer's queue of ops with chunks to post */
	struct rma__op *fnext;    /* free list */
};

struct rma__batch {
	size_t n, left;
	int64_t *results;
};

struct rma_engine {
	pthread_mutex_t mu;
	struct rma__engine_params p;
	struct rma_config cfg;
	unsigned flags;
	char *transports_str, *listen_str, *secret_str;

	struct rma__transport *tr[RMA__MAX_TRANSPORTS];
	unsigned ntr;

	struct rma__keytab grants;
	struct rma_region *regions;
	struct rma__peer *peers;

	/* op slots: live ops + zombies, never more than nops */
	struct rma__op *ops;
	uint32_t nops;
	struct rma__op *free_ops;
	uint32_t live;          /* ops in LIVE state */
	int64_t next_deadline;  /* earliest live deadline, 0 = none */

	/* completion queue: a ring of cq_depth; posts reserve their slot */
	struct rma_completion *cq;
	uint32_t cq_cap, cq_head, cq_count, cq_reserved;
	rma_complete_cb cb;
	void *cb_arg;
	int cq_fd;     /* eventfd, readable while completions wait */
	pthread_cond_t done_cv; /* batch waiters */

	/* progress */
	int epfd;
	int wake_fd;   /* eventfd to kick the progress thread */
	struct rma__watch wake_watch;
	pthread_t thread;
	bool has_thread, stop, shut;
	unsigned waiters;       /* threads driving progress in rma_submit */
	pthread_cond_t pt_cv;   /* the progress thread sleeps here meanwhile */
	int64_t last_activity;
	int64_t poll_until;      /* when the thread's epoll_wait times out; 0: not asleep */
	bool in_cb;
	bool pump;               /* credits freed or a peer became ready */
	int pollers;             /* threads between epoll_wait and handling */
	struct rma__watch *grave; /* retired watches awaiting release */
};

/* op.c */
int rma__ops_init(struct rma_engine *e);
void rma__op_fail(struct rma_engine *e, struct rma__op *op, int err);
void rma__peer_pump(struct rma_engine *e, struct rma__peer *p);
void rma__check_deadlines(struct rma_engine *e, int64_t now);
void rma__pump_pending(struct rma_engine *e);
void rma__fail_peer_ops(struct rma_engine *e, struct rma__peer *p, int err);
struct rma__peer *rma__peer_get(struct rma_engine *e, const rma_remote *r,
				int *err);
int rma__post_locked(struct rma_engine *e, const struct rma_op *op,
		     int timeout_ms, struct rma__batch *b, size_t index);
void rma__peer_destroy(struct rma_engine *e, struct rma__peer *p, int err);
void rma__wait_until(struct rma_engine *e, int (*done)(void *), void *arg,
		     int64_t deadline);

uint32_t rma__cq_take(struct rma_engine *e, struct rma_completion *out,
		      uint32_t max);

/* progress.c */
int rma__progress_start(struct rma_engine *e);
void rma__progress_stop(struct rma_engine *e);
int rma__progress_once(struct rma_engine *e, int timeout_ms);
void rma__wake(struct rma_engine *e);
void rma__retime(struct rma_engine *e);
void rma__deliver_callbacks(struct rma_engine *e);

/* region.c */
void rma__region_free_all(struct rma_engine *e);

/* advert.c: the decoded advertisement */
struct rma__rentry {
	uint8_t wire_id;
	uint16_t len;
	const uint8_t *blob; /* points into rma_remote.raw */
	struct rma__rkey rk;
};
struct rma_remote {
	uint64_t engine_id;
	uint64_t key;
	uint64_t len;
	unsigned access;
	unsigned nent;
	struct rma__rentry ent[RMA__MAX_TRANSPORTS];
	size_t rawlen;
	uint8_t raw[];
};

/* config.c */
int rma__config_resolve(const struct rma_config *in, struct rma_config *out);

/* engine.c */
const struct rma__rentry *rma__route(struct rma_engine *e, const rma_remote *r,
				     struct rma__transport **t);
int rma__timeout_ns(struct rma_engine *e, int timeout_ms, int64_t *deadline);

#endif
