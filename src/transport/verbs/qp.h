/*
 * qp.h - an RC queue pair and the shared objects it leans on.
 *
 * A domain is one opened device port with its protection domain; a CQ may
 * serve many QPs.  Both are reference counted: a QP holds one reference on
 * its domain and one on each CQ, so they outlive it whatever order the
 * owner drops them in.
 *
 * Life of a QP: rma__vqp_create (RESET) -> rma__vqp_info to the peer ->
 * rma__vqp_connect(peer's info) (INIT, RTR, RTS) -> put/get -> completions
 * handed back with rma__vqp_retire -> rma__vqp_destroy.
 *
 * Work request ids are per QP and consecutive: an op posted as n WRs owns
 * [first, last], and only `last` asks for a completion.  Completions on one
 * send queue come in posting order, so a completion for id w retires every
 * WR up to w (the unsignalled ones before it included); an error completion
 * names the WR that failed, which lies in exactly one op's range.
 */
#ifndef RMA_VERBS_QP_H
#define RMA_VERBS_QP_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

struct rma__vdom {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port;
	int gid_index;               /* -1: no GID (InfiniBand, LID routed) */
	union ibv_gid gid;
	struct ibv_port_attr port_attr;
	struct ibv_device_attr dev_attr;
	unsigned refs;
	/* Called when the last reference goes (frees pd, ctx and itself). */
	void (*release)(struct rma__vdom *d);
};

struct rma__vcq {
	struct ibv_cq *cq;
	unsigned refs;
	void (*release)(struct rma__vcq *c);
};

static inline void rma__vdom_get(struct rma__vdom *d) { d->refs++; }
static inline void rma__vdom_put(struct rma__vdom *d)
{
	if (--d->refs == 0 && d->release)
		d->release(d);
}
static inline void rma__vcq_get(struct rma__vcq *c) { c->refs++; }
static inline void rma__vcq_put(struct rma__vcq *c)
{
	if (--c->refs == 0 && c->release)
		c->release(c);
}

/* QP settings; rma__vqp_cfg_default gives the reference values. */
struct rma__vqp_cfg {
	enum ibv_mtu path_mtu;    /* IBV_MTU_4096, capped by the port */
	uint8_t timeout;          /* 14: 4.096 us * 2^14 = 67 ms */
	uint8_t retry_cnt;        /* 7 */
	uint8_t rnr_retry;        /* 7 (= retry for ever) */
	uint8_t min_rnr_timer;    /* 12 */
	uint8_t max_rd_atomic;    /* 16, both directions, capped by device */
	uint16_t pkey_index;      /* 0 */
	uint32_t max_send_wr;     /* 512: send-queue depth */
	uint32_t max_recv_wr;     /* 1: nothing is received, some providers
				   * refuse a zero-depth queue */
	uint32_t reserve;         /* 2 send-queue slots kept for the drain
				   * marker and a memory-window invalidate */
	uint64_t max_msg_size;    /* 1 GiB, capped by the port */
	int access;               /* what peers may do through this QP:
				   * REMOTE_READ | REMOTE_WRITE */
};
void rma__vqp_cfg_default(struct rma__vqp_cfg *c);

/* What a peer needs to connect to a QP (the control handshake carries it). */
struct rma__vqp_info {
	uint32_t qp_num;      /* 24 bits */
	uint32_t psn;         /* 24 bits: the sender's first PSN */
	uint16_t lid;         /* InfiniBand link layer; 0 on RoCE */
	uint8_t mtu;          /* enum ibv_mtu the sender can take */
	uint8_t rd_atomic;    /* reads the sender accepts in flight */
	bool has_gid;
	union ibv_gid gid;
};

/* As the control handshake carries it, little-endian: u32 qpn | u32 psn |
 * u16 lid | u8 mtu | u8 rd_atomic | u8 has_gid | 16 gid. */
#define RMA__VQP_INFO_LEN 29
void rma__vqp_info_encode(const struct rma__vqp_info *in, uint8_t *b);
/* 0, or -EBADMSG for a wrong length, a number over 24 bits, an MTU out of
 * range or a has_gid byte other than 0 or 1. */
int rma__vqp_info_decode(const uint8_t *b, size_t n, struct rma__vqp_info *out);

struct rma__vqp {
	struct ibv_qp *qp;
	struct rma__vdom *dom;
	struct rma__vcq *scq, *rcq;
	struct rma__vqp_cfg cfg;
	uint32_t psn;
	uint32_t depth;       /* WRs that may be outstanding (minus reserve) */
	uint64_t max_msg;     /* bytes in one WR */
	uint64_t head;        /* next WR id (ids start at 1) */
	uint64_t tail;        /* ids below are retired */
	bool reserve_used;    /* a reserved slot holds a marker */
	uint64_t marker;      /* the drain marker's id, 0: none */
};

/* Create in RESET on dom with the given CQs (referenced until destroy).
 * 0 or -errno (ibv_create_qp's errno, -EIO without one). */
int rma__vqp_create(struct rma__vqp *q, struct rma__vdom *dom,
		    struct rma__vcq *scq, struct rma__vcq *rcq,
		    const struct rma__vqp_cfg *cfg);
void rma__vqp_destroy(struct rma__vqp *q);

/* What the peer needs to connect to q. */
void rma__vqp_info(const struct rma__vqp *q, struct rma__vqp_info *out);
/* RESET -> INIT -> RTR -> RTS against the peer's info.  0 or -errno; on
 * failure the QP is left where the failing step found it. */
int rma__vqp_connect(struct rma__vqp *q, const struct rma__vqp_info *peer);
/* Current enum ibv_qp_state (from ibv_query_qp), or -errno. */
int rma__vqp_state(struct rma__vqp *q);

/* Largest transfer one WR carries (credit budgeting: an op of len bytes
 * takes rma__vqp_wrs(q, len) slots). */
static inline uint64_t rma__vqp_max_msg(const struct rma__vqp *q)
{
	return q->max_msg;
}
static inline uint32_t rma__vqp_wrs(const struct rma__vqp *q, uint64_t len)
{
	return len ? (uint32_t)((len + q->max_msg - 1) / q->max_msg) : 1;
}
/* Send-queue slots free now. */
static inline uint32_t rma__vqp_credits(const struct rma__vqp *q)
{
	uint64_t used = q->head - q->tail;
	return used >= q->depth ? 0 : q->depth - (uint32_t)used;
}

/* One side of a transfer. */
struct rma__vseg {
	uint64_t addr;
	uint32_t key;         /* lkey locally, rkey remotely */
};

/* Post an RDMA WRITE of [local, +len) to remote (put) or an RDMA READ of
 * remote into local (get), split into WRs of at most max_msg bytes, the
 * last one signalled.  fence: the first WR waits for earlier reads.
 * *first and *last get the WR ids.  Returns the WR count, -EAGAIN without
 * enough credits (nothing posted), -EMSGSIZE if the op can never fit,
 * or ibv_post_send's -errno (WRs before the failing one are posted and
 * retire with a later completion). */
int rma__vqp_put(struct rma__vqp *q, struct rma__vseg local,
		 struct rma__vseg remote, uint64_t len, bool fence,
		 uint64_t *first, uint64_t *last);
int rma__vqp_get(struct rma__vqp *q, struct rma__vseg local,
		 struct rma__vseg remote, uint64_t len, bool fence,
		 uint64_t *first, uint64_t *last);

/* A completion for WR id w came back (any status): frees its slot and
 * those of the unsignalled WRs before it. */
void rma__vqp_retire(struct rma__vqp *q, uint64_t wr_id);

/* Stop the hardware: QP to ERR, then one signalled marker WR (in a
 * reserved slot) whose flushed completion proves every earlier WR is
 * finished.  Returns 0 with q->marker set, or -errno. */
int rma__vqp_drain(struct rma__vqp *q);

#endif
