/*
 * verbs.c - one-sided RDMA over libibverbs RC queue pairs.
 *
 * One instance opens one device port: a protection domain for the engine,
 * one completion queue with a completion channel for every QP.  Regions are
 * registered for local use only (the lkey); each grant gets its own MR with
 * exactly the grant's bounds and access, so the rkey an advertisement
 * carries reaches nothing else, and grant_remove's deregistration revokes
 * it.  An initiator opens a QP per peer on first use and exchanges QP
 * numbers over a control connection (ctl.c); the target keeps a mirror QP
 * per control connection and never posts on it.
 *
 * Each chunk is one chunk of WRs whose last one is signalled; a ring per
 * peer maps WR ids back to ops.  A WR error fails its op; the QP is then in
 * error, every later WR is flushed, and once a drain marker comes back the
 * QP is destroyed and the peer reported failed, so the core connects anew
 * (a new QP) for later ops.  Abort does the same on purpose: the NIC writes
 * without asking, so an op is only reported once its QP is drained.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "transport/setup.h"
#include "transport/tcp/tcp.h"
#include "transport/verbs/cuda.h"
#include "transport/verbs/ibv.h"
#include "transport/verbs/verbs.h"

/* ---- device and port ---- */

struct vb_sel {
	const char *dev;  /* NULL: the first with an active port */
	int port;         /* 0: the first active one */
	int gid;          /* -1: choose */
};

static bool port_active(struct ibv_context *ctx, int port, struct ibv_port_attr *pa)
{
	memset(pa, 0, sizeof *pa);
	return rma__ibv_query_port(ctx, (uint8_t)port, pa) == 0 &&
	       pa->state == IBV_PORT_ACTIVE;
}

/* fe80::/10: valid on one link only. */
static bool gid_link_local(const union ibv_gid *g)
{
	return g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
}

static bool gid_zero(const union ibv_gid *g)
{
	static const uint8_t z[16];
	return !memcmp(g->raw, z, sizeof z);
}

/* RoCE needs a GID.  Prefer a RoCE v2 one (routable over IP) that is not
 * link-local: the first v2 entry is usually fe80::, which reaches nothing
 * past a router, while an IPv4-mapped or global one does.  Else the first
 * v2, else the first of any type.  InfiniBand routes by LID within a
 * subnet: no GID. */
static int pick_gid(struct ibv_context *ctx, int port,
		    const struct ibv_port_attr *pa, int want, union ibv_gid *gid)
{
	struct ibv_gid_entry ge;
	union ibv_gid v2g, anyg;
	int i, v2 = -1, any = -1;

	if (want >= 0) {
		if (want >= pa->gid_tbl_len ||
		    rma__ibv_query_gid_ex(ctx, (uint32_t)port, (uint32_t)want, &ge))
			return -ENOENT;
		*gid = ge.gid;
		return want;
	}
	if (pa->link_layer != IBV_LINK_LAYER_ETHERNET)
		return -1;
	for (i = 0; i < pa->gid_tbl_len; i++) {
		if (rma__ibv_query_gid_ex(ctx, (uint32_t)port, (uint32_t)i, &ge))
			continue;
		if (ge.gid_type == IBV_GID_TYPE_ROCE_V2) {
			if (!gid_link_local(&ge.gid) && !gid_zero(&ge.gid)) {
				*gid = ge.gid;
				return i;
			}
			if (v2 < 0) {
				v2g = ge.gid;
				v2 = i;
			}
		}
		if (any < 0) {
			anyg = ge.gid;
			any = i;
		}
	}
	if (v2 >= 0) {
		*gid = v2g;
		return v2;
	}
	if (any >= 0) {
		*gid = anyg;
		return any;
	}
	return -ENOENT;
}

static void dom_release(struct rma__vdom *d)
{
	ibv_dealloc_pd(d->pd);
	ibv_close_device(d->ctx);
	free(d);
}

/* Open the selected device and port: 0 and *out, or -errno with why. */
static int open_dom(const struct vb_sel *sel, struct rma__vdom **out,
		    char *why, size_t wlen)
{
	struct ibv_device **list;
	struct rma__vdom *d = NULL;
	int n = 0, i, rc = -ENODEV;

	errno = 0;
	list = rma__ibv_get_device_list(&n);
	if (!list || n == 0) {
		int err = errno ? errno : ENODEV;
		snprintf(why, wlen, "no RDMA device (%s)",
			 list ? "ibv_get_device_list found none"
			 : err == ENOSYS ? "the kernel has no RDMA support"
					 : strerror(err));
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	if (sel->dev)
		snprintf(why, wlen, "no device %s with an active port", sel->dev);
	else
		snprintf(why, wlen, "%d RDMA device(s), none with an active port", n);
	for (i = 0; i < n && !d; i++) {
		const char *name = ibv_get_device_name(list[i]);
		struct ibv_context *ctx;
		struct ibv_device_attr da;
		struct ibv_port_attr pa;
		int p, lo, hi;

		if (sel->dev && strcmp(name, sel->dev))
			continue;
		ctx = ibv_open_device(list[i]);
		if (!ctx)
			continue;
		if (ibv_query_device(ctx, &da)) {
			ibv_close_device(ctx);
			continue;
		}
		lo = sel->port ? sel->port : 1;
		hi = sel->port ? sel->port : da.phys_port_cnt;
		for (p = lo; p <= hi && !d; p++) {
			union ibv_gid gid;
			int gi;
			if (!port_active(ctx, p, &pa))
				continue;
			memset(&gid, 0, sizeof gid);
			gi = pick_gid(ctx, p, &pa, sel->gid, &gid);
			if (gi < -1) {
				snprintf(why, wlen, "%s port %d: no usable GID", name, p);
				continue;
			}
			d = calloc(1, sizeof *d);
			if (!d) {
				rc = -ENOMEM;
				break;
			}
			d->ctx = ctx;
			d->port = (uint8_t)p;
			d->gid_index = gi;
			d->gid = gid;
			d->port_attr = pa;
			d->dev_attr = da;
			d->refs = 1;
			d->release = dom_release;
			snprintf(why, wlen, "%s port %d %s%s%d", name, p,
				 pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
				 gi >= 0 ? " gid " : " lid ", gi >= 0 ? gi : pa.lid);
		}
		if (!d)
			ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (!d)
		return rc;
	*out = d;
	return 0;
}

static const char *port_state(enum ibv_port_state st)
{
	switch (st) {
	case IBV_PORT_ACTIVE: return "active";
	case IBV_PORT_DOWN: return "down";
	case IBV_PORT_INIT: return "init";
	case IBV_PORT_ARMED: return "armed";
	default: return "not active";
	}
}

/* Every device and port with its state, for rma info: "; mlx5_0: port 1
 * active (RoCE), port 2 down". */
static void list_ports(char *buf, size_t cap)
{
	struct ibv_device **list;
	size_t at = strlen(buf);
	int n = 0;

	list = rma__ibv_get_device_list(&n);
	for (int i = 0; list && i < n && at < cap; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct ibv_device_attr da;
		if (!ctx)
			continue;
		if (ibv_query_device(ctx, &da) == 0) {
			at += (size_t)snprintf(buf + at, cap - at, "; %s:",
					       ibv_get_device_name(list[i]));
			for (int p = 1; p <= da.phys_port_cnt && at < cap; p++) {
				struct ibv_port_attr pa;
				memset(&pa, 0, sizeof pa);
				if (rma__ibv_query_port(ctx, (uint8_t)p, &pa))
					continue;
				at += (size_t)snprintf(buf + at, cap - at,
					"%s port %d %s (%s)", p > 1 ? "," : "", p,
					port_state(pa.state),
					pa.link_layer == IBV_LINK_LAYER_ETHERNET
						? "RoCE" : "InfiniBand");
			}
		}
		ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
}

static __thread char probe_why[512];

static int vb_probe(const char **why)
{
	struct vb_sel sel = { NULL, 0, -1 };
	struct rma__vdom *d;
	int rc = open_dom(&sel, &d, probe_why, sizeof probe_why);

	*why = probe_why;
	if (rc != -ENODEV || strstr(probe_why, "device(s)"))
		list_ports(probe_why, sizeof probe_why);
	if (rc)
		return rc;
	ibv_close_device(d->ctx);
	free(d);
	return 0;
}

/* ---- completions ---- */

static struct vb_peer *peer_of(struct vb_tr *vt, uint32_t qp_num)
{
	for (struct vb_peer *p = vt->peers; p; p = p->next)
		if (p->has_qp && p->qp.qp->qp_num == qp_num)
			return p;
	return NULL;
}

/* The core posts only what a token grants, inside its window, so a NIC's
 * remote access error means the rkey no longer names the window: its grant
 * was released (or the token forged), as a key-checking transport says. */
static int wc_errno(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return 0;
	case IBV_WC_REM_ACCESS_ERR: return -EKEYREJECTED;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR: return -EFAULT;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR: return -EHOSTUNREACH;
	case IBV_WC_REM_INV_REQ_ERR: return -EINVAL;
	case IBV_WC_WR_FLUSH_ERR: return -ECONNRESET;
	default: return -EIO;
	}
}

static void ring_pop(struct vb_peer *p, int res)
{
	struct vb_chunk *c = &p->ring[p->ring_head];
	p->ring_head = (p->ring_head + 1) % p->ring_cap;
	p->ring_count--;
	rma__xfer_done(p->vt->e, c->op_id, res ? 0 : c->len, res);
}

/* Every chunk still in the ring fails with err. */
static void ring_fail_all(struct vb_peer *p, int err)
{
	while (p->ring_count) {
		struct vb_chunk *c = &p->ring[p->ring_head];
		ring_pop(p, c->err ? c->err : err);
	}
}

/* The drain marker came back: nothing of this QP touches memory now.  A
 * ready peer gets a new QP over its control connection (queued ops wait
 * for it); otherwise the peer fails and the core connects anew. */
static void drained(struct vb_peer *p)
{
	int err = p->qp_err;

	/* Each report may fail another op, whose abort asks for a drain
	 * (start_drain): this one covers it. */
	p->draining = true;
	ring_fail_all(p, err);
	p->draining = false;
	rma__vqp_destroy(&p->qp);
	p->has_qp = false;
	p->qp_gen++;
	p->qp_err = 0;
	p->stalled = false; /* the new QP's readiness pumps the queue */
	if (p->base.state == RMA__PEER_READY && rma__verbs_ctl_reset(p) == 0) {
		p->base.state = RMA__PEER_CONNECTING;
		return;
	}
	rma__verbs_peer_lost(p, err);
}

/* Put the QP in error and send the marker (once). */
static void start_drain(struct vb_peer *p, int err)
{
	if (!p->qp_err)
		p->qp_err = err;
	if (!p->has_qp || p->qp.marker || p->draining)
		return;
	if (rma__vqp_drain(&p->qp)) {
		/* No marker, no proof: destroying the QP is all that is
		 * left, and the chunks fail now. */
		rma__warn("verbs: cannot drain a queue pair; destroying it");
		drained(p);
	}
}

static void on_wc(struct vb_tr *vt, const struct ibv_wc *wc)
{
	struct vb_peer *p = peer_of(vt, wc->qp_num);
	int res = wc_errno(wc->status);
	uint32_t gen;

	if (!p)
		return; /* a mirror QP's, or one already gone */
	gen = p->qp_gen;
	if (p->qp.marker && wc->wr_id == p->qp.marker) {
		rma__vqp_retire(&p->qp, wc->wr_id);
		drained(p);
		return;
	}
	rma__vqp_retire(&p->qp, wc->wr_id);
	if (res && res != -ECONNRESET && !p->qp_err)
		rma__warn("verbs: work request failed: %s (vendor error 0x%x)",
			  ibv_wc_status_str(wc->status), wc->vendor_err);
	while (p->ring_count && p->qp_gen == gen) {
		struct vb_chunk *c = &p->ring[p->ring_head];
		if (wc->wr_id < c->first)
			break; /* belongs to nothing we track */
		if (wc->wr_id > c->last) {
			/* Its own completion was lost to an error before it;
			 * it cannot have finished cleanly. */
			ring_pop(p, c->err ? c->err : (p->qp_err ? p->qp_err : -EIO));
			continue;
		}
		if (res && !c->err)
			c->err = res;
		if (wc->wr_id == c->last)
			ring_pop(p, c->err);
		break;
	}
	/* A report may have drained this QP already (an abort whose drain
	 * could not start) and made a new one: that one is not in error. */
	if (p->qp_gen != gen)
		return;
	/* Any error means the QP is in the error state (a flush, too: it
	 * may have got there without telling us first). */
	if (res)
		start_drain(p, res);
	if (p->stalled && rma__vqp_credits(&p->qp)) {
		p->stalled = false;
		rma__peer_kick(&p->base);
	}
}

/* Poll until empty: how many completions were seen. */
static int poll_cq(struct vb_tr *vt)
{
	struct ibv_wc wc[VB_CQ_BATCH];
	int total = 0, n, i;

	do {
		n = rma__ibv_poll_cq(vt->cq->cq, VB_CQ_BATCH, wc);
		if (n < 0) {
			rma__err("verbs: ibv_poll_cq failed (%d)", n);
			return total;
		}
		for (i = 0; i < n; i++)
			on_wc(vt, &wc[i]);
		total += n;
	} while (n == VB_CQ_BATCH);
	return total;
}

static void channel_cb(struct rma__watch *w, uint32_t events)
{
	struct vb_tr *vt = container_of(w, struct vb_tr, cw);
	struct ibv_cq *cq;
	void *ctx;
	unsigned got = 0;

	/* Non-blocking fd: read every pending event, ack them together (the
	 * ack takes a lock), then poll; arm() re-arms before sleeping. */
	while (ibv_get_cq_event(vt->ch, &cq, &ctx) == 0)
		got++;
	if (got) {
		ibv_ack_cq_events(vt->cq->cq, got);
		vt->armed = false;
	}
	poll_cq(vt);
}

static void vb_progress(struct rma__transport *t)
{
	poll_cq(container_of(t, struct vb_tr, base));
}

/* The race-free sleep: poll, arm, poll again, because a completion that
 * landed before the arm raises no event. */
static int vb_arm(struct rma__transport *t)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);

	if (poll_cq(vt))
		return -EAGAIN;
	if (!vt->armed) {
		int rc = rma__ibv_req_notify_cq(vt->cq->cq, 0);
		if (rc)
			return rc > 0 ? -rc : -EIO;
		vt->armed = true;
	}
	return poll_cq(vt) ? -EAGAIN : 0;
}

/* ---- the CQ ---- */

static void cq_release(struct rma__vcq *c)
{
	ibv_destroy_cq(c->cq);
	free(c);
}

/* Every QP's send queue fits, so the CQ never overruns; the QP count is
 * bounded by what the CQ can hold. */
static int cq_open(struct vb_tr *vt, struct rma__vcq **out)
{
	int cqe = 64 * (int)vt->qcfg.max_send_wr;
	struct rma__vcq *c;

	if (vt->dom->dev_attr.max_cqe > 0 && cqe > vt->dom->dev_attr.max_cqe)
		cqe = vt->dom->dev_attr.max_cqe;
	c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	errno = 0;
	c->cq = ibv_create_cq(vt->dom->ctx, cqe, vt, vt->ch, 0);
	if (!c->cq) {
		free(c);
		return errno ? -errno : -ENOMEM;
	}
	c->refs = 1;
	c->release = cq_release;
	*out = c;
	return 0;
}

/* The CQ is in error (or the device is gone): no completion, a drain
 * marker included, will ever come back.  Destroying a QP is then the
 * only proof that the NIC is done with its memory: every QP goes, its
 * chunks fail, its peer fails (the core connects anew).  Mirrors go too
 * (their initiators see the connection end).  A CQ in error is replaced
 * for the QPs to come; a dead device has nothing to replace it with. */
static void cq_lost(struct vb_tr *vt, bool replace)
{
	struct rma__vcq *c;
	struct ibv_cq *cq;
	void *ctx;
	unsigned got = 0;

	for (struct vb_peer *p = vt->peers, *next; p; p = next) {
		next = p->next;
		if (!p->has_qp)
			continue;
		if (!p->qp_err)
			p->qp_err = -EIO;
		rma__vqp_destroy(&p->qp);
		p->has_qp = false;
		p->qp_gen++;
		ring_fail_all(p, -EIO);
		p->qp_err = 0;
		p->stalled = false;
		rma__verbs_peer_lost(p, -EIO);
	}
	while (vt->served)
		rma__verbs_ctl_close(vt->served);
	if (!replace)
		return;
	/* Events still unread must be acked before the CQ goes. */
	while (ibv_get_cq_event(vt->ch, &cq, &ctx) == 0)
		got++;
	if (got)
		ibv_ack_cq_events(vt->cq->cq, got);
	vt->armed = false;
	if (cq_open(vt, &c)) {
		rma__err("verbs: cannot replace the completion queue");
		return;
	}
	rma__vcq_put(vt->cq);
	vt->cq = c;
}

/* ---- asynchronous events ---- */

/* Events no completion reports: a QP that broke on its own, a CQ overrun,
 * a port going down.  Heap-allocated so that its retirement may outlive
 * the instance. */
struct vb_async {
	struct rma__watch w;
	struct vb_tr *vt;
};

static void async_release(struct rma__watch *w)
{
	free(container_of(w, struct vb_async, w));
}

static void async_cb(struct rma__watch *w, uint32_t events)
{
	struct vb_async *a = container_of(w, struct vb_async, w);
	struct vb_tr *vt = a->vt;
	struct ibv_async_event ev;

	while (vt && ibv_get_async_event(vt->dom->ctx, &ev) == 0) {
		enum ibv_event_type type = ev.event_type;
		struct ibv_qp *qp = ev.element.qp;

		/* Ack first: destroying the QP below waits for its events. */
		ibv_ack_async_event(&ev);
		switch (type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
			rma__warn("verbs: queue pair error: %s", ibv_event_type_str(type));
			for (struct vb_peer *p = vt->peers; p; p = p->next)
				if (p->has_qp && p->qp.qp == qp)
					start_drain(p, -EIO);
			break;
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_DEVICE_FATAL:
			rma__err("verbs: %s: every peer fails", ibv_event_type_str(type));
			cq_lost(vt, type == IBV_EVENT_CQ_ERR);
			break;
		case IBV_EVENT_PORT_ERR:
			rma__warn("verbs: port %u went down", vt->dom->port);
			break;
		default:
			break;
		}
	}
}

static int async_start(struct vb_tr *vt)
{
	struct vb_async *a = calloc(1, sizeof *a);
	int fd = vt->dom->ctx->async_fd;
	int rc;

	if (!a)
		return -ENOMEM;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	a->vt = vt;
	a->w.fd = fd;
	a->w.cb = async_cb;
	a->w.release = async_release;
	rc = rma__watch_add(vt->e, &a->w, EPOLLIN);
	if (rc) {
		free(a);
		return rc;
	}
	vt->aw = a;
	return 0;
}

/* ---- instance ---- */

static const struct rma__topt_desc vb_options[] = {
	{"dev", "device (first with an active port)"},
	{"port", "port (first active)"},
	{"gid", "GID index (first RoCE v2; none on IB)"},
	{"listen", "HOST:PORT of the control connection (rma_config.listen)"},
	{"advertise", "HOST peers reach it at (rma_config.advertise)"},
	{"mtu", "path MTU bytes (4096, port-capped)"},
	{"sq_depth", "send-queue depth (512)"},
	{"max_msg", "bytes per WR (1 GiB)"},
	{"timeout", "ack timeout 4.096us*2^N (14)"},
	{"retry", "retries 0-7 (7)"},
	{"rnr_retry", "RNR retries 0-7 (7)"},
	{"rd_atomic", "reads in flight (16, device-capped)"},
	/* The control listener's limits (ctl.c, transport/admit.h). */
	{"max_conns", "authenticated control connections (4096)"},
	{"max_handshakes", "control connections in the handshake (64)"},
	{"max_addr_conns", "authenticated, per remote address (1024)"},
	{"max_addr_handshakes", "in the handshake, per remote address (32)"},
	{"handshake_ms", "time to authenticate (3000)"},
	{NULL, NULL},
};

static int mtu_enum(unsigned long bytes, enum ibv_mtu *m)
{
	switch (bytes) {
	case 256: *m = IBV_MTU_256; return 0;
	case 512: *m = IBV_MTU_512; return 0;
	case 1024: *m = IBV_MTU_1024; return 0;
	case 2048: *m = IBV_MTU_2048; return 0;
	case 4096: *m = IBV_MTU_4096; return 0;
	default: return -EINVAL;
	}
}

static int parse_opts(const struct rma__topts *o, struct vb_sel *sel,
		      struct rma__vqp_cfg *c)
{
	unsigned long v;
	int rc;

	rma__vqp_cfg_default(c);
	sel->dev = rma__topt(o, "dev");
	v = 0;
	if ((rc = rma__topt_uint(o, "port", 1, 255, &v)) < 0)
		return rc;
	sel->port = (int)v;
	v = 0;
	sel->gid = -1;
	if ((rc = rma__topt_uint(o, "gid", 0, 65535, &v)) < 0)
		return rc;
	if (rc == 0)
		sel->gid = (int)v;
	if ((rc = rma__topt_uint(o, "mtu", 256, 4096, &v)) < 0)
		return rc;
	if (rc == 0 && mtu_enum(v, &c->path_mtu))
		return -EINVAL;
	v = c->max_send_wr;
	if ((rc = rma__topt_uint(o, "sq_depth", 8, 32768, &v)) < 0)
		return rc;
	c->max_send_wr = (uint32_t)v;
	v = c->max_msg_size;
	if ((rc = rma__topt_bytes(o, "max_msg", 1, 1ul << 31, &v)) < 0)
		return rc;
	c->max_msg_size = v;
	v = c->timeout;
	if ((rc = rma__topt_uint(o, "timeout", 1, 31, &v)) < 0)
		return rc;
	c->timeout = (uint8_t)v;
	v = c->retry_cnt;
	if ((rc = rma__topt_uint(o, "retry", 0, 7, &v)) < 0)
		return rc;
	c->retry_cnt = (uint8_t)v;
	v = c->rnr_retry;
	if ((rc = rma__topt_uint(o, "rnr_retry", 0, 7, &v)) < 0)
		return rc;
	c->rnr_retry = (uint8_t)v;
	v = c->max_rd_atomic;
	if ((rc = rma__topt_uint(o, "rd_atomic", 1, 255, &v)) < 0)
		return rc;
	c->max_rd_atomic = (uint8_t)v;
	return 0;
}

static void tick_cb(struct rma__timer *tm)
{
	struct vb_tr *vt = container_of(tm, struct vb_tr, tick);
	int64_t now = rma__now_ns();
	rma__verbs_ctl_tick(vt, now);
	rma__timer_arm(vt->e, &vt->tick, now + 100 * 1000000LL);
}

static int vb_init(struct rma_engine *e, const struct rma__topts *o,
		   struct rma__transport **out)
{
	const struct rma__engine_params *ep = rma__engine_params(e);
	const char *listen_at = rma__topt(o, "listen");
	const char *advertise = rma__topt(o, "advertise");
	struct vb_sel sel;
	struct vb_tr *vt;
	char why[160];
	int rc;

	vt = calloc(1, sizeof *vt);
	if (!vt)
		return -ENOMEM;
	rc = parse_opts(o, &sel, &vt->qcfg);
	if (!rc)
		rc = rma__verbs_ctl_limits(vt, o);
	if (rc)
		goto fail;
	rc = open_dom(&sel, &vt->dom, why, sizeof why);
	if (rc) {
		rma__err("verbs: %s", why);
		goto fail;
	}
	vt->dom->pd = ibv_alloc_pd(vt->dom->ctx);
	if (!vt->dom->pd) {
		rc = errno ? -errno : -ENOMEM;
		ibv_close_device(vt->dom->ctx);
		free(vt->dom);
		vt->dom = NULL;
		goto fail;
	}
	rma__info("verbs: %s", why);
	vt->e = e;
	vt->engine_id = ep->engine_id;
	vt->ch = ibv_create_comp_channel(vt->dom->ctx);
	if (!vt->ch) {
		rc = errno ? -errno : -ENOMEM;
		goto fail_dom;
	}
	fcntl(vt->ch->fd, F_SETFL, fcntl(vt->ch->fd, F_GETFL) | O_NONBLOCK);
	rc = cq_open(vt, &vt->cq);
	if (rc)
		goto fail_ch;
	vt->cw.fd = vt->ch->fd;
	vt->cw.cb = channel_cb;
	rc = rma__watch_add(e, &vt->cw, EPOLLIN);
	if (rc)
		goto fail_cq;
	rc = async_start(vt);
	if (rc)
		goto fail_cq;
	rma__setup_key(ep->secret, vt->key);
	rc = rma__verbs_ctl_listen(vt, listen_at ? listen_at : ep->listen,
				   advertise ? advertise : ep->advertise);
	if (rc)
		goto fail_watch;
	vt->base.level = RMA_LEVEL_NIC;
	vt->tick.cb = tick_cb;
	rma__timer_arm(e, &vt->tick, rma__now_ns() + 100 * 1000000LL);
	*out = &vt->base;
	return 0;
fail_watch:
	vt->aw->vt = NULL;
	rma__watch_retire(e, &vt->aw->w);
	/* closing the channel's fd takes it out of epoll */
fail_cq:
	rma__vcq_put(vt->cq);
fail_ch:
	ibv_destroy_comp_channel(vt->ch);
fail_dom:
	rma__vdom_put(vt->dom);
fail:
	free(vt);
	return rc;
}

static void vb_fini(struct rma__transport *t)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);

	rma__timer_cancel(vt->e, &vt->tick);
	rma__verbs_ctl_fini(vt);
	vt->aw->vt = NULL;
	rma__watch_retire(vt->e, &vt->aw->w);
	if (vt->armed) {
		/* Events still unread must be acked before the CQ goes. */
		struct ibv_cq *cq;
		void *ctx;
		unsigned got = 0;
		while (ibv_get_cq_event(vt->ch, &cq, &ctx) == 0)
			got++;
		if (got)
			ibv_ack_cq_events(vt->cq->cq, got);
	}
	/* The channel's watch lives in vt: no retire (its grave entry would
	 * outlive vt); destroying the channel closes the fd, which takes it
	 * out of the epoll set. */
	rma__vcq_put(vt->cq);
	ibv_destroy_comp_channel(vt->ch);
	rma__vdom_put(vt->dom);
	free(vt);
}

/* ---- memory ---- */

/* Host memory by address; CUDA device memory through its dma-buf. */
static int reg(struct vb_tr *vt, char *addr, uint64_t len, int access,
	       struct ibv_mr **out)
{
	if (rma__verbs_cuda_is_device(addr))
		return rma__verbs_cuda_reg(vt->dom->pd, addr, len, access, out);
	errno = 0;
	*out = rma__ibv_reg_mr(vt->dom->pd, addr, len ? len : 1, access);
	if (!*out)
		return errno ? -errno : -ENOMEM;
	return 0;
}

/* Regions are registered for local use only: gets land in them, puts read
 * them.  Remote access comes from a grant's own MR. */
static int vb_mem_reg(struct rma__transport *t, struct rma_region *r)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);
	struct ibv_mr *mr;
	int rc = reg(vt, rma__region_addr(r), rma__region_len(r),
		     IBV_ACCESS_LOCAL_WRITE, &mr);
	if (rc)
		return rc;
	*rma__region_slot(r, t) = mr;
	return 0;
}

static void vb_mem_dereg(struct rma__transport *t, struct rma_region *r)
{
	void **slot = rma__region_slot(r, t);
	if (*slot)
		ibv_dereg_mr(*slot);
	*slot = NULL;
}

/* A grant's MR covers exactly its window with exactly its access: its rkey
 * reaches nothing else.  (A type-2 memory window would save the pinning,
 * but it is bound to one QP and its rkey is known only after the bind, so
 * it cannot go in an advertisement made before any peer connects.) */
int rma__verbs_grant_access(unsigned access)
{
	int a = 0;
	if (access & RMA_ACCESS_REMOTE_READ)
		a |= IBV_ACCESS_REMOTE_READ;
	if (access & RMA_ACCESS_REMOTE_WRITE)
		a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	return a;
}

static int vb_grant_add(struct rma__transport *t, struct rma__grant *g)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);
	struct rma_region *r = rma__grant_region(g);
	uint64_t len = rma__grant_len(g);
	int access = rma__verbs_grant_access(rma__grant_access(g));
	struct ibv_mr *mr;
	int rc;

	if (!access)
		return RMA__DECLINE;
	rc = reg(vt, rma__region_addr(r) + rma__grant_off(g), len, access, &mr);
	if (rc)
		return rc;
	*rma__grant_slot(g, t) = mr;
	return 0;
}

/* ibv_dereg_mr returns once the rkey is invalid: no peer reaches the
 * window through it afterwards. */
static void vb_grant_remove(struct rma__transport *t, struct rma__grant *g)
{
	void **slot = rma__grant_slot(g, t);
	if (*slot && ibv_dereg_mr(*slot))
		rma__err("verbs: ibv_dereg_mr failed: %s", strerror(errno));
	*slot = NULL;
}

/* ---- advertisements ---- */

static int vb_ad_pack(struct rma__transport *t, const struct rma__grant *g,
		      void *buf, size_t cap)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);
	uint8_t *b = buf;
	struct ibv_mr *mr = NULL;

	if (cap < VB_AD_FIXED + vt->addr_len)
		return -ENOSPC;
	if (g)
		mr = *rma__grant_slot((struct rma__grant *)g, t);
	memset(b, 0, VB_AD_FIXED);
	b[0] = VB_AD_VERSION;
	b[1] = vt->dom->port_attr.link_layer;
	rma__put_le16(b + 2, vt->dom->port_attr.lid);
	b[4] = vt->dom->gid_index >= 0;
	if (b[4])
		memcpy(b + 5, vt->dom->gid.raw, 16);
	if (mr) {
		/* The window's address, not mr->addr: a dma-buf MR's addr is
		 * the offset into the dma-buf, while the NIC knows it by the
		 * address it was registered at (its iova). */
		const char *base = rma__region_addr(rma__grant_region(g)) +
				   rma__grant_off(g);
		rma__put_le32(b + 21, mr->rkey);
		rma__put_le64(b + 25, (uint64_t)(uintptr_t)base);
	}
	memcpy(b + VB_AD_FIXED, vt->addr, vt->addr_len);
	return (int)(VB_AD_FIXED + vt->addr_len);
}

static int vb_ad_parse(const void *blob, size_t len, uint64_t core_key,
		       struct rma__rkey *rk)
{
	const uint8_t *b = blob;
	struct sockaddr_storage sa;
	socklen_t salen;

	if (len < VB_AD_FIXED || b[0] != VB_AD_VERSION || b[4] > 1 ||
	    rma__tcp_sa_from_blob(b + VB_AD_FIXED, len - VB_AD_FIXED, &sa, &salen))
		return -EBADMSG;
	rk->key = rma__le32(b + 21);
	rk->base = rma__le64(b + 25);
	return 0;
}

/* Same link layer, and a GID on both sides where the link needs one. */
static int vb_reachable(struct rma__transport *t, const void *blob, size_t len)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);
	const uint8_t *b = blob;

	if (len < VB_AD_FIXED || b[1] != vt->dom->port_attr.link_layer)
		return RMA__DECLINE;
	if (b[1] == IBV_LINK_LAYER_ETHERNET && (!b[4] || vt->dom->gid_index < 0))
		return RMA__DECLINE;
	return 0;
}

/* ---- peers ---- */

int rma__verbs_new_qp(struct vb_tr *vt, struct rma__vqp *q)
{
	return rma__vqp_create(q, vt->dom, vt->cq, vt->cq, &vt->qcfg);
}

/* A target's mirror only answers: the responder needs no send queue
 * entries for reads or writes, so it gets the fewest the QP allows, not
 * the initiator's depth (kernel memory per control connection). */
int rma__verbs_new_mirror(struct vb_tr *vt, struct rma__vqp *q)
{
	struct rma__vqp_cfg cfg = vt->qcfg;
	cfg.max_send_wr = cfg.reserve + 1;
	return rma__vqp_create(q, vt->dom, vt->cq, vt->cq, &cfg);
}

static int vb_connect(struct rma__transport *t, const void *blob, size_t len,
		      uint64_t engine_id, struct rma__peer **out)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);
	const uint8_t *b = blob;
	struct vb_peer *p;
	int rc;

	if (len < VB_AD_FIXED)
		return -EBADMSG;
	p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->vt = vt;
	p->expect_id = engine_id;
	if (rma__tcp_sa_from_blob(b + VB_AD_FIXED, len - VB_AD_FIXED, &p->sa,
				  &p->salen)) {
		free(p);
		return -EBADMSG;
	}
	rc = rma__verbs_new_qp(vt, &p->qp);
	if (rc) {
		free(p);
		return rc;
	}
	p->has_qp = true;
	p->ring_cap = p->qp.depth + 1;
	p->ring = calloc(p->ring_cap, sizeof *p->ring);
	if (!p->ring) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = rma__verbs_ctl_connect(p);
	if (rc)
		goto fail;
	p->next = vt->peers;
	vt->peers = p;
	*out = &p->base;
	return 0;
fail:
	rma__vqp_destroy(&p->qp);
	free(p->ring);
	free(p);
	return rc;
}

/* The control connection finished: the QP can go to RTS. */
void rma__verbs_peer_up(struct vb_peer *p, const struct rma__vqp_info *info)
{
	int rc = rma__vqp_connect(&p->qp, info);
	if (rc) {
		rma__warn("verbs: cannot connect the queue pair: %s", strerror(-rc));
		rma__verbs_peer_lost(p, rc);
		return;
	}
	p->base.max_msg = rma__vqp_max_msg(&p->qp);
	p->base.credits = p->qp.depth;
	rma__peer_ready(&p->base);
}

void rma__verbs_peer_lost(struct vb_peer *p, int err)
{
	if (p->has_qp && p->ring_count) {
		/* The hardware may still write: drain first, fail after. */
		start_drain(p, err);
		return;
	}
	if (p->ctl) {
		rma__verbs_ctl_close(p->ctl);
		p->ctl = NULL;
	}
	rma__peer_failed(&p->base, err);
}

static void vb_disconnect(struct rma__peer *bp, int err)
{
	struct vb_peer *p = container_of(bp, struct vb_peer, base);
	struct vb_tr *vt = p->vt;
	struct vb_peer **pp = &vt->peers;

	p->base.state = RMA__PEER_FAILED; /* no callbacks while going */
	if (p->has_qp && p->ring_count) {
		/* The one op allowed to wait: until the flushed marker proves
		 * the NIC is done with every op's memory. */
		int64_t end = rma__now_ns() + VB_DRAIN_WAIT_NS;
		start_drain(p, err);
		while (p->has_qp && rma__now_ns() < end)
			poll_cq(vt);
	}
	/* No proof came in time: destroying the QP is what stops the NIC,
	 * and it must come before any chunk is reported. */
	if (p->has_qp) {
		rma__vqp_destroy(&p->qp);
		p->has_qp = false;
		p->qp_gen++;
	}
	ring_fail_all(p, err);
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp)
		*pp = p->next;
	if (p->ctl)
		rma__verbs_ctl_close(p->ctl);
	free(p->ring);
	free(p);
}

static int vb_post(struct rma__peer *bp, const struct rma__xfer *x)
{
	struct vb_peer *p = container_of(bp, struct vb_peer, base);
	struct ibv_mr *mr = x->ldesc;
	struct rma__vseg l, r;
	struct vb_chunk *c;
	uint64_t first, last;
	int rc;

	if (!p->has_qp)
		return -ENOTCONN;
	if (p->qp_err) {
		/* The QP drains after another op's error: this one waits for
		 * the QP that replaces it (drained() pumps), rather than
		 * failing with an error that was not its own. */
		p->stalled = true;
		return -EAGAIN;
	}
	if (!mr)
		return -EINVAL;
	l.addr = (uint64_t)(uintptr_t)x->laddr;
	l.key = mr->lkey;
	r.addr = x->raddr;
	r.key = (uint32_t)x->rk->key;
	if (x->kind == RMA_OP_PUT)
		rc = rma__vqp_put(&p->qp, l, r, x->len,
				  x->flags & RMA__XFER_FENCE, &first, &last);
	else
		rc = rma__vqp_get(&p->qp, l, r, x->len,
				  x->flags & RMA__XFER_FENCE, &first, &last);
	if (rc == -EAGAIN) {
		p->stalled = true;
		return rc;
	}
	if (rc < 0) {
		if (rc != -EMSGSIZE)
			start_drain(p, rc); /* a QP that refuses posts is broken */
		return rc;
	}
	c = &p->ring[(p->ring_head + p->ring_count) % p->ring_cap];
	c->first = first;
	c->last = last;
	c->op_id = x->op_id;
	c->len = x->len;
	c->err = 0;
	p->ring_count++;
	return 0;
}

/* The op's memory is safe only once the NIC cannot touch it: if any of
 * its chunks is posted, the QP goes to error and drains; the chunks are
 * reported from the flushed completions.  Every op on that QP fails with
 * it: RC has no way to cancel one WR. */
static int vb_abort(struct rma__peer *bp, uint64_t op_id, int err)
{
	struct vb_peer *p = container_of(bp, struct vb_peer, base);
	uint32_t i;

	for (i = 0; i < p->ring_count; i++)
		if (p->ring[(p->ring_head + i) % p->ring_cap].op_id == op_id)
			break;
	if (i == p->ring_count)
		return 0;
	start_drain(p, -ECONNRESET);
	/* A drain that could not start has already reported everything. */
	for (i = 0; i < p->ring_count; i++)
		if (p->ring[(p->ring_head + i) % p->ring_cap].op_id == op_id)
			return RMA__ABORT_PENDING;
	return 0;
}

/* Raw handles for users who drive the NIC themselves (rma.h). */
static int vb_raw(struct rma__transport *t, void *out, size_t cap)
{
	struct vb_tr *vt = container_of(t, struct vb_tr, base);
	struct rma_verbs_raw h = {
		.context = vt->dom->ctx,
		.pd = vt->dom->pd,
		.cq = vt->cq->cq,
		.port_num = vt->dom->port,
	};
	if (cap < sizeof h)
		return -ENOSPC;
	memcpy(out, &h, sizeof h);
	return (int)sizeof h;
}

/* ... and a peer's QP, with the CQ it completes on. */
static int vb_peer_raw(struct rma__peer *bp, void *out, size_t cap)
{
	struct vb_peer *p = container_of(bp, struct vb_peer, base);
	struct rma_verbs_raw h;
	int rc = vb_raw(&p->vt->base, &h, sizeof h);

	if (rc < 0)
		return rc;
	if (!p->has_qp)
		return -ENOTCONN; /* being replaced */
	h.qp = p->qp.qp;
	h.qp_num = p->qp.qp->qp_num;
	h.cq = p->qp.scq->cq;
	if (cap < sizeof h)
		return -ENOSPC;
	memcpy(out, &h, sizeof h);
	return (int)sizeof h;
}

const struct rma__transport_ops rma__verbs_ops = {
	.name = "verbs",
	.level = RMA_LEVEL_NIC,
	.wire_id = 4, /* 1 tcp, 2 shm, 3 ofi */
	/* device memory by dma-buf; raw QPs per peer */
	.caps = RMA__CAP_FENCE | RMA__CAP_DEVICE | RMA__CAP_PEER_RAW,
	.options = vb_options,
	.probe = vb_probe,
	.init = vb_init,
	.fini = vb_fini,
	.mem_reg = vb_mem_reg,
	.mem_dereg = vb_mem_dereg,
	.grant_add = vb_grant_add,
	.grant_remove = vb_grant_remove,
	.ad_pack = vb_ad_pack,
	.ad_parse = vb_ad_parse,
	.reachable = vb_reachable,
	.connect = vb_connect,
	.disconnect = vb_disconnect,
	.post = vb_post,
	.abort = vb_abort,
	.progress = vb_progress,
	.arm = vb_arm,
	.raw = vb_raw,
	.peer_raw = vb_peer_raw,
};
