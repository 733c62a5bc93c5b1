/*
 * verbs.h - the verbs transport's own objects, shared by its files:
 *   verbs.c   the ops table: device and port, memory, grants, posting,
 *             completions, abort
 *   ctl.c     the control connection that exchanges QP numbers (over the
 *             shared connection-setup module) and the target's QPs
 *   qp.c      one RC queue pair (qp.h)
 *   ibv.c     the inline verbs as functions (ibv.h)
 * Nothing here leaves the transport; the core sees only rma__verbs_ops.
 */
#ifndef RMA_VERBS_H
#define RMA_VERBS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/admit.h"
#include "transport/transport.h"
#include "transport/verbs/qp.h"
#include "util/util.h"

#define VB_CQ_BATCH 32
#define VB_HANDSHAKE_NS (10LL * 1000000000) /* initiator side */
#define VB_DRAIN_WAIT_NS (2LL * 1000000000) /* disconnect's bounded wait */
#define VB_SETUP_KIND 1                     /* setup.h kind: verbs QPs */
#define VB_ADDR_MAX 19                      /* tcp-style address blob */

/* Advertisement blob: u8 version | u8 link layer | u16 lid | u8 has_gid |
 * 16 gid | u32 rkey | u64 base | control address (7 or 19 bytes). */
#define VB_AD_VERSION 1
#define VB_AD_FIXED 33


struct vb_ctl;
struct vb_async;

struct vb_tr {
	struct rma__transport base;
	struct rma_engine *e;
	struct rma__vdom *dom;
	struct rma__vcq *cq;          /* one CQ for every QP, both queues */
	struct ibv_comp_channel *ch;
	struct rma__watch cw;         /* the completion channel's fd */
	struct vb_async *aw;          /* the device's async event fd */
	bool armed;                   /* ibv_req_notify_cq is pending */
	struct rma__watch lw;         /* control listener */
	bool listen_paused;           /* out of fds: listening again next tick */
	struct rma__admit admit;      /* the listener's caps (admit.h) */
	struct rma__refusals refusals;
	struct rma__vqp_cfg qcfg;
	uint64_t engine_id;
	uint8_t key[16];              /* setup proof key */
	uint8_t addr[VB_ADDR_MAX];    /* control address blob */
	size_t addr_len;
	struct vb_peer *peers;        /* initiator side */
	struct vb_ctl *served;        /* target side: accepted controls */
	struct rma__timer tick;       /* handshake deadlines */
};

/* One posted chunk: WR ids [first, last] on the peer's QP. */
struct vb_chunk {
	uint64_t first, last, op_id, len;
	int err;                      /* first error a WR of it reported */
};

struct vb_peer {
	struct rma__peer base;
	struct vb_tr *vt;
	struct vb_peer *next;
	uint64_t expect_id;
	struct sockaddr_storage sa;
	socklen_t salen;
	struct rma__vqp qp;
	bool has_qp;
	uint32_t qp_gen;              /* bumped when the QP is destroyed */
	struct vb_ctl *ctl;
	struct vb_chunk *ring;        /* in posting order */
	uint32_t ring_cap, ring_head, ring_count;
	int qp_err;                   /* the QP is in error: why (0: fine) */
	bool draining;                /* drained() is reporting the ring */
	bool stalled;                 /* post said -EAGAIN: kick on credits */
};

/* ctl.c */
/* The control listener's caps from the options (ofi's names and defaults). */
int rma__verbs_ctl_limits(struct vb_tr *vt, const struct rma__topts *o);
int rma__verbs_ctl_listen(struct vb_tr *vt, const char *at, const char *advertise);
int rma__verbs_ctl_connect(struct vb_peer *p);
/* The peer's QP was drained after an error: make a new one and connect it
 * over the open control connection (the peer is connecting meanwhile).
 * 0, or -errno when that cannot start (then the peer fails). */
int rma__verbs_ctl_reset(struct vb_peer *p);
void rma__verbs_ctl_close(struct vb_ctl *c);
void rma__verbs_ctl_fini(struct vb_tr *vt);
void rma__verbs_ctl_tick(struct vb_tr *vt, int64_t now);
/* verbs.c, for ctl.c */
int rma__verbs_new_qp(struct vb_tr *vt, struct rma__vqp *q);
int rma__verbs_new_mirror(struct vb_tr *vt, struct rma__vqp *q);
void rma__verbs_peer_up(struct vb_peer *p, const struct rma__vqp_info *info);
void rma__verbs_peer_lost(struct vb_peer *p, int err);
/* ibv access flags for a grant's MR: exactly what the grant allows. */
int rma__verbs_grant_access(unsigned access);

#endif
