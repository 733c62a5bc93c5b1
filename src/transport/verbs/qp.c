/*
 * qp.c - an RC queue pair: creation, the three transitions, chunked RDMA
 * WRITE/READ posting against send-queue credits, and the drain that stops
 * it.  See qp.h.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "transport/verbs/ibv.h"
#include "transport/verbs/qp.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define RMA_VQP_SMALL 8 /* WR chains this long live on the stack */

/* verbs calls return a positive errno, or -1 with errno set, by provider. */
static int verr(int rc)
{
	if (rc > 0)
		return -rc;
	return errno ? -errno : -EIO;
}

void rma__vqp_cfg_default(struct rma__vqp_cfg *c)
{
	memset(c, 0, sizeof *c);
	c->path_mtu = IBV_MTU_4096;
	c->timeout = 14;
	c->retry_cnt = 7;
	c->rnr_retry = 7;
	c->min_rnr_timer = 12;
	c->max_rd_atomic = 16;
	c->pkey_index = 0;
	c->max_send_wr = 512;
	c->max_recv_wr = 1;
	c->reserve = 2;
	c->max_msg_size = 1ull << 30;
	c->access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
}

int rma__vqp_create(struct rma__vqp *q, struct rma__vdom *dom,
		    struct rma__vcq *scq, struct rma__vcq *rcq,
		    const struct rma__vqp_cfg *cfg)
{
	struct ibv_qp_init_attr ia;
	uint32_t want, psn;

	memset(q, 0, sizeof *q);
	q->cfg = *cfg;
	want = cfg->max_send_wr;
	if (dom->dev_attr.max_qp_wr > 0 && want > (uint32_t)dom->dev_attr.max_qp_wr)
		want = (uint32_t)dom->dev_attr.max_qp_wr;
	if (want <= cfg->reserve)
		return -EINVAL;

	memset(&ia, 0, sizeof ia);
	ia.send_cq = scq->cq;
	ia.recv_cq = rcq->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 0; /* each op asks for its own last completion */
	ia.cap.max_send_wr = want;
	ia.cap.max_recv_wr = cfg->max_recv_wr;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 0;
	errno = 0;
	q->qp = ibv_create_qp(dom->pd, &ia);
	if (!q->qp)
		return errno ? -errno : -EIO;

	/* A fresh random start PSN per QP: a stale or forged packet from an
	 * old connection is unlikely to fall in the window. */
	if (getrandom(&psn, sizeof psn, 0) != sizeof psn) {
		int err = errno ? -errno : -EIO;
		ibv_destroy_qp(q->qp);
		q->qp = NULL;
		return err;
	}
	q->psn = psn & 0xffffff;
	q->depth = want - cfg->reserve;
	q->max_msg = cfg->max_msg_size;
	if (dom->port_attr.max_msg_sz && dom->port_attr.max_msg_sz < q->max_msg)
		q->max_msg = dom->port_attr.max_msg_sz;
	q->head = q->tail = 1;
	q->dom = dom;
	q->scq = scq;
	q->rcq = rcq;
	rma__vdom_get(dom);
	rma__vcq_get(scq);
	rma__vcq_get(rcq);
	return 0;
}

void rma__vqp_destroy(struct rma__vqp *q)
{
	if (!q->qp)
		return;
	ibv_destroy_qp(q->qp);
	q->qp = NULL;
	rma__vcq_put(q->scq);
	rma__vcq_put(q->rcq);
	rma__vdom_put(q->dom);
}

static enum ibv_mtu local_mtu(const struct rma__vqp *q)
{
	enum ibv_mtu m = q->cfg.path_mtu;
	if (q->dom->port_attr.active_mtu && q->dom->port_attr.active_mtu < m)
		m = q->dom->port_attr.active_mtu;
	return m;
}

/* Reads this QP accepts in flight as a responder. */
static uint8_t local_dest_rd(const struct rma__vqp *q)
{
	int n = q->cfg.max_rd_atomic;
	if (q->dom->dev_attr.max_qp_rd_atom < n)
		n = q->dom->dev_attr.max_qp_rd_atom;
	return (uint8_t)n;
}

void rma__vqp_info(const struct rma__vqp *q, struct rma__vqp_info *out)
{
	memset(out, 0, sizeof *out);
	out->qp_num = q->qp->qp_num;
	out->psn = q->psn;
	out->lid = q->dom->port_attr.lid;
	out->mtu = (uint8_t)local_mtu(q);
	out->rd_atomic = local_dest_rd(q);
	if (q->dom->gid_index >= 0) {
		out->has_gid = true;
		out->gid = q->dom->gid;
	}
}

void rma__vqp_info_encode(const struct rma__vqp_info *in, uint8_t *b)
{
	uint32_t v;
	v = htole32(in->qp_num);
	memcpy(b, &v, 4);
	v = htole32(in->psn);
	memcpy(b + 4, &v, 4);
	uint16_t l = htole16(in->lid);
	memcpy(b + 8, &l, 2);
	b[10] = in->mtu;
	b[11] = in->rd_atomic;
	b[12] = in->has_gid;
	memcpy(b + 13, in->gid.raw, 16);
}

int rma__vqp_info_decode(const uint8_t *b, size_t n, struct rma__vqp_info *out)
{
	uint32_t qpn, psn;
	uint16_t lid;

	if (n != RMA__VQP_INFO_LEN)
		return -EBADMSG;
	memcpy(&qpn, b, 4);
	memcpy(&psn, b + 4, 4);
	memcpy(&lid, b + 8, 2);
	qpn = le32toh(qpn);
	psn = le32toh(psn);
	if (qpn > 0xffffff || psn > 0xffffff || b[10] < IBV_MTU_256 ||
	    b[10] > IBV_MTU_4096 || b[12] > 1)
		return -EBADMSG;
	memset(out, 0, sizeof *out);
	out->qp_num = qpn;
	out->psn = psn;
	out->lid = le16toh(lid);
	out->mtu = b[10];
	out->rd_atomic = b[11];
	out->has_gid = b[12];
	memcpy(out->gid.raw, b + 13, 16);
	return 0;
}

int rma__vqp_connect(struct rma__vqp *q, const struct rma__vqp_info *peer)
{
	struct ibv_qp_attr a;
	int rc, rd;
	enum ibv_mtu mtu;

	/* RoCE has no LIDs: without both GIDs there is no route. */
	if (q->dom->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET &&
	    (!peer->has_gid || q->dom->gid_index < 0))
		return -EHOSTUNREACH;
	if (peer->mtu < IBV_MTU_256 || peer->mtu > IBV_MTU_4096)
		return -EINVAL;

	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = q->cfg.pkey_index;
	a.port_num = q->dom->port;
	a.qp_access_flags = q->cfg.access;
	rc = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return verr(rc);

	mtu = local_mtu(q);
	if ((enum ibv_mtu)peer->mtu < mtu)
		mtu = (enum ibv_mtu)peer->mtu;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = peer->qp_num & 0xffffff;
	a.rq_psn = peer->psn & 0xffffff;
	a.max_dest_rd_atomic = local_dest_rd(q);
	a.min_rnr_timer = q->cfg.min_rnr_timer;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.sl = 0;
	a.ah_attr.src_path_bits = 0;
	a.ah_attr.port_num = q->dom->port;
	if (peer->has_gid && q->dom->gid_index >= 0) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.sgid_index = (uint8_t)q->dom->gid_index;
		a.ah_attr.grh.hop_limit = 0xff;
	}
	rc = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			   IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return verr(rc);

	/* Our reads in flight: no more than the device can issue nor the
	 * peer will answer. */
	rd = q->cfg.max_rd_atomic;
	rd = MIN(rd, q->dom->dev_attr.max_qp_init_rd_atom);
	rd = MIN(rd, (int)peer->rd_atomic);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = q->psn;
	a.timeout = q->cfg.timeout;
	a.retry_cnt = q->cfg.retry_cnt;
	a.rnr_retry = q->cfg.rnr_retry;
	a.max_rd_atomic = (uint8_t)rd;
	rc = ibv_modify_qp(q->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_SQ_PSN |
			   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		return verr(rc);
	return 0;
}

int rma__vqp_state(struct rma__vqp *q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc;

	memset(&a, 0, sizeof a);
	rc = ibv_query_qp(q->qp, &a, IBV_QP_STATE, &ia);
	if (rc)
		return verr(rc);
	return (int)a.qp_state;
}

static int post(struct rma__vqp *q, enum ibv_wr_opcode opcode,
		struct rma__vseg local, struct rma__vseg remote, uint64_t len,
		bool fence, uint64_t *first, uint64_t *last)
{
	struct ibv_send_wr wr_small[RMA_VQP_SMALL], *wr = wr_small, *bad = NULL;
	struct ibv_sge sge_small[RMA_VQP_SMALL], *sge = sge_small;
	uint32_t n = rma__vqp_wrs(q, len), i;
	uint64_t off = 0;
	int rc;

	if (n > q->depth)
		return -EMSGSIZE;
	if (q->head - q->tail + n > q->depth)
		return -EAGAIN;
	if (n > RMA_VQP_SMALL) {
		wr = calloc(n, sizeof *wr);
		sge = calloc(n, sizeof *sge);
		if (!wr || !sge) {
			free(wr);
			free(sge);
			return -ENOMEM;
		}
	} else {
		memset(wr, 0, n * sizeof *wr);
	}
	for (i = 0; i < n; i++) {
		uint64_t l = MIN(len - off, q->max_msg);
		wr[i].wr_id = q->head + i;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].opcode = opcode;
		/* A zero-byte op still needs one WR, with no SGE, or it would
		 * never complete. */
		if (l) {
			sge[i].addr = local.addr + off;
			sge[i].length = (uint32_t)l;
			sge[i].lkey = local.key;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
		}
		wr[i].wr.rdma.remote_addr = remote.addr + off;
		wr[i].wr.rdma.rkey = remote.key;
		off += l;
	}
	/* Only the last WR asks for a completion: its CQE retires the whole
	 * op (completions are in order), and an error in an earlier WR
	 * still produces a CQE naming it. */
	wr[n - 1].send_flags |= IBV_SEND_SIGNALED;
	if (fence)
		wr[0].send_flags |= IBV_SEND_FENCE;

	rc = rma__ibv_post_send(q->qp, wr, &bad);
	if (rc) {
		/* WRs before bad went out and hold their ids and slots until
		 * a later completion retires them. */
		uint32_t posted = bad ? (uint32_t)(bad - wr) : 0;
		if (posted > n)
			posted = 0;
		q->head += posted;
		rc = verr(rc);
	} else {
		*first = q->head;
		*last = q->head + n - 1;
		q->head += n;
		rc = (int)n;
	}
	if (wr != wr_small) {
		free(wr);
		free(sge);
	}
	return rc;
}

int rma__vqp_put(struct rma__vqp *q, struct rma__vseg local,
		 struct rma__vseg remote, uint64_t len, bool fence,
		 uint64_t *first, uint64_t *last)
{
	return post(q, IBV_WR_RDMA_WRITE, local, remote, len, fence, first, last);
}

int rma__vqp_get(struct rma__vqp *q, struct rma__vseg local,
		 struct rma__vseg remote, uint64_t len, bool fence,
		 uint64_t *first, uint64_t *last)
{
	return post(q, IBV_WR_RDMA_READ, local, remote, len, fence, first, last);
}

void rma__vqp_retire(struct rma__vqp *q, uint64_t wr_id)
{
	if (wr_id >= q->tail && wr_id < q->head)
		q->tail = wr_id + 1;
	if (wr_id == q->marker)
		q->marker = 0;
}

int rma__vqp_drain(struct rma__vqp *q)
{
	struct ibv_qp_attr a;
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	if (q->marker)
		return 0;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_ERR;
	rc = ibv_modify_qp(q->qp, &a, IBV_QP_STATE);
	if (rc)
		return verr(rc);
	/* In ERR every WR is flushed in order, so the marker's completion
	 * comes after every earlier WR's: then nothing touches memory. */
	memset(&wr, 0, sizeof wr);
	wr.wr_id = q->head;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	rc = rma__ibv_post_send(q->qp, &wr, &bad);
	if (rc)
		return verr(rc);
	q->marker = q->head++;
	return 0;
}
