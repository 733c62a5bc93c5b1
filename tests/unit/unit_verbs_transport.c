/*
 * unit_verbs_transport.c - the verbs transport's ops, driven directly, with
 * a recording core underneath (the rma__ services it calls) and every verb
 * replaced at link time by a small fake NIC: posted WRs wait in a queue, the
 * test completes them with a status of its choice, and a QP moved to the
 * error state flushes the rest, as RC hardware does.  No RDMA device is
 * needed; what is proven is what the transport asks of libibverbs and what
 * it reports to the core.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "verbs_cmocka.h"

#include "transport/verbs/ibv.h"
#include "transport/verbs/verbs.h"

extern const struct rma__transport_ops rma__verbs_ops;

/* ---- the recording core ---- */

struct rma__topts { const char *k[4], *v[4]; int n; };
struct rma_region { char *addr; uint64_t len; unsigned access; void *slot; };
struct rma__grant { struct rma_region *r; uint64_t off, len; unsigned access; void *slot; };

const char *rma__topt(const struct rma__topts *o, const char *name)
{
	for (int i = 0; o && i < o->n; i++)
		if (!strcmp(o->k[i], name))
			return o->v[i];
	return NULL;
}
int rma__topt_uint(const struct rma__topts *o, const char *name,
		   unsigned long lo, unsigned long hi, unsigned long *out)
{
	const char *s = rma__topt(o, name);
	if (!s)
		return 1;
	*out = strtoul(s, NULL, 0);
	return *out < lo || *out > hi ? -EINVAL : 0;
}
int rma__topt_bytes(const struct rma__topts *o, const char *name,
		    unsigned long lo, unsigned long hi, unsigned long *out)
{
	return rma__topt_uint(o, name, lo, hi, out);
}
char *rma__region_addr(const struct rma_region *r) { return r->addr; }
uint64_t rma__region_len(const struct rma_region *r) { return r->len; }
unsigned rma__region_access(const struct rma_region *r) { return r->access; }
void **rma__region_slot(struct rma_region *r, const struct rma__transport *t) { return &r->slot; }
struct rma_region *rma__grant_region(const struct rma__grant *g) { return g->r; }
uint64_t rma__grant_key(const struct rma__grant *g) { return 0; }
uint64_t rma__grant_off(const struct rma__grant *g) { return g->off; }
uint64_t rma__grant_len(const struct rma__grant *g) { return g->len; }
unsigned rma__grant_access(const struct rma__grant *g) { return g->access; }
void **rma__grant_slot(struct rma__grant *g, const struct rma__transport *t) { return &g->slot; }

#define MAXDONE 64
static int qp_destroys;
/* destroys: QPs destroyed when the report came */
static struct { uint64_t op_id, len; int res, destroys; } done[MAXDONE];
static int ndone;
/* Set: a failed chunk of another op than dying_op fails that op, as the
 * core does, by aborting it (the transport is re-entered). */
static struct vb_peer *reenter;
static uint64_t dying_op;

void rma__xfer_done(struct rma_engine *e, uint64_t op_id, uint64_t len, int res)
{
	if (ndone < MAXDONE) {
		done[ndone].op_id = op_id;
		done[ndone].len = len;
		done[ndone].res = res;
		done[ndone].destroys = qp_destroys;
	}
	ndone++;
	if (reenter && res < 0 && op_id != dying_op) {
		uint64_t outer = dying_op;
		dying_op = op_id;
		rma__verbs_ops.abort(&reenter->base, op_id, res);
		dying_op = outer;
	}
}
char *rma__op_buf(struct rma_engine *e, uint64_t id, uint64_t ra, uint64_t l) { return NULL; }
int rma__op_live(struct rma_engine *e, uint64_t id) { return 1; }

static int ready_calls, failed_calls, failed_err, kicks;
void rma__peer_ready(struct rma__peer *p) { ready_calls++; p->state = RMA__PEER_READY; }
void rma__peer_failed(struct rma__peer *p, int err)
{
	if (p->state == RMA__PEER_FAILED)
		return;
	failed_calls++;
	failed_err = err;
	p->state = RMA__PEER_FAILED;
}
void rma__peer_kick(struct rma__peer *p) { kicks++; }

#define MAXW 32
static struct rma__watch *wl[MAXW];
static uint32_t wev[MAXW];
static int watches;
int rma__watch_add(struct rma_engine *e, struct rma__watch *w, uint32_t ev)
{
	for (int i = 0; i < MAXW; i++)
		if (!wl[i]) {
			wl[i] = w;
			wev[i] = ev;
			watches++;
			return 0;
		}
	return -ENOMEM;
}
int rma__watch_mod(struct rma_engine *e, struct rma__watch *w, uint32_t ev)
{
	for (int i = 0; i < MAXW; i++)
		if (wl[i] == w)
			wev[i] = ev;
	return 0;
}
void rma__watch_retire(struct rma_engine *e, struct rma__watch *w)
{
	for (int i = 0; i < MAXW; i++)
		if (wl[i] == w) {
			wl[i] = NULL;
			watches--;
		}
	if (w->release)
		w->release(w);
}
/* One round of the progress thread: poll the watched fds, run callbacks. */
static void pump(int ms)
{
	struct pollfd pf[MAXW];
	struct rma__watch *who[MAXW];
	int n = 0;
	for (int i = 0; i < MAXW; i++)
		if (wl[i]) {
			pf[n].fd = wl[i]->fd;
			pf[n].events = (short)((wev[i] & EPOLLIN ? POLLIN : 0) |
					       (wev[i] & EPOLLOUT ? POLLOUT : 0));
			who[n++] = wl[i];
		}
	if (poll(pf, (nfds_t)n, ms) <= 0)
		return;
	for (int i = 0; i < n; i++) {
		bool live = false;
		for (int j = 0; j < MAXW; j++)
			live |= wl[j] == who[i];
		if (live && pf[i].revents)
			who[i]->cb(who[i], (pf[i].revents & POLLIN ? EPOLLIN : 0) |
				   (pf[i].revents & POLLOUT ? EPOLLOUT : 0) |
				   (pf[i].revents & (POLLERR | POLLHUP) ? EPOLLERR : 0));
	}
}
void rma__timer_arm(struct rma_engine *e, struct rma__timer *tm, int64_t at) {}
void rma__timer_cancel(struct rma_engine *e, struct rma__timer *tm) {}

static struct rma__engine_params params = { .engine_id = 42 };
const struct rma__engine_params *rma__engine_params(struct rma_engine *e) { return &params; }
int64_t rma__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
void rma__log(int level, const char *fmt, ...)
{
	if (getenv("VB_LOG")) {
		va_list ap;
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc(10, stderr);
	}
}
int rma__log_enabled(int level) { return 0; }

/* ---- the fake NIC ---- */

#define MAXQ 1024
/* The test's script: the statuses of the next completions. */
static enum ibv_wc_status script[MAXQ];
static int script_n;

static struct ibv_device *devs[2];
static struct ibv_device fake_dev;
static int ndevs, list_errno;
static struct ibv_context fake_ctx;
static struct ibv_pd fake_pd;
static struct ibv_cq fake_cq;
static struct ibv_comp_channel fake_ch;
static int port_active_mask;             /* bit p: port p is active */
static int mlx5_gids;                    /* a GID table as mlx5 fills it
					  * (2: with no IPv4 address) */
static int pd_allocs, cq_creates, mr_regs, mr_deregs, notify_calls, acks;
static int pending_events, cq_made;
static struct ibv_comp_channel *cq_channel;

struct ibv_device **__wrap_rma__ibv_get_device_list(int *n)
{
	if (!ndevs) {
		errno = list_errno;
		*n = 0;
		return NULL;
	}
	devs[0] = &fake_dev;
	*n = ndevs;
	return devs;
}
void __wrap_ibv_free_device_list(struct ibv_device **l) {}
const char *__wrap_ibv_get_device_name(struct ibv_device *d) { return "fake0"; }
struct ibv_context *__wrap_ibv_open_device(struct ibv_device *d)
{
	int fds[2];
	if (pipe(fds) == 0) {
		close(fds[1]);
		fake_ctx.async_fd = fds[0];
	}
	return &fake_ctx;
}
int __wrap_ibv_close_device(struct ibv_context *c) { close(c->async_fd); return 0; }

/* One async event waiting, or none. */
static struct ibv_async_event pending_async;
static bool async_waiting;
static int async_acks;
int __wrap_ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	if (!async_waiting) {
		errno = EAGAIN;
		return -1;
	}
	async_waiting = false;
	*ev = pending_async;
	return 0;
}
void __wrap_ibv_ack_async_event(struct ibv_async_event *ev) { async_acks++; }
int __wrap_ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof *a);
	a->phys_port_cnt = 2;
	a->max_qp_wr = 16384;
	a->max_cqe = 1 << 20;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	return 0;
}
int __wrap_rma__ibv_query_port(struct ibv_context *c, uint8_t port,
			       struct ibv_port_attr *pa)
{
	memset(pa, 0, sizeof *pa);
	pa->state = (port_active_mask >> port) & 1 ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	pa->link_layer = IBV_LINK_LAYER_ETHERNET;
	pa->active_mtu = IBV_MTU_4096;
	pa->gid_tbl_len = mlx5_gids ? 5 : 3;
	pa->max_msg_sz = 1u << 30;
	return 0;
}
int __wrap_rma__ibv_query_gid_ex(struct ibv_context *c, uint32_t port,
				 uint32_t index, struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof *e);
	e->gid.raw[15] = (uint8_t)index;
	e->gid_index = index;
	/* index 0: RoCE v1, index 1: RoCE v2 */
	e->gid_type = index == 0 ? IBV_GID_TYPE_ROCE_V1 : IBV_GID_TYPE_ROCE_V2;
	if (mlx5_gids) {
		/* As mlx5 fills it: the link-local GID as v1 (0) and v2 (1),
		 * then the port's IPv4 address as v1 (2) and v2 (3). */
		static const uint8_t ll[16] = { 0xfe, 0x80, [15] = 0x11 };
		static const uint8_t v4[16] = { [10] = 0xff, [11] = 0xff,
						10, 0, 0, 1 };
		if (index > (mlx5_gids == 2 ? 1u : 3u)) {
			errno = ENODATA;
			return -1;
		}
		memcpy(e->gid.raw, index < 2 ? ll : v4, 16);
		e->gid_type = index & 1 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	}
	return 0;
}
struct ibv_pd *__wrap_ibv_alloc_pd(struct ibv_context *c) { pd_allocs++; return &fake_pd; }
int __wrap_ibv_dealloc_pd(struct ibv_pd *pd) { pd_allocs--; return 0; }
struct ibv_comp_channel *__wrap_ibv_create_comp_channel(struct ibv_context *c)
{
	int fds[2];
	if (pipe(fds))
		return NULL;
	close(fds[1]);
	fake_ch.fd = fds[0];
	return &fake_ch;
}
int __wrap_ibv_destroy_comp_channel(struct ibv_comp_channel *ch) { close(ch->fd); return 0; }
struct ibv_cq *__wrap_ibv_create_cq(struct ibv_context *c, int cqe, void *ctx,
				    struct ibv_comp_channel *ch, int vec)
{
	cq_creates++;
	cq_made++;
	cq_channel = ch;
	return &fake_cq;
}
int __wrap_ibv_destroy_cq(struct ibv_cq *cq) { cq_creates--; return 0; }
int __wrap_ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx)
{
	if (!pending_events) {
		errno = EAGAIN;
		return -1;
	}
	pending_events--;
	*cq = &fake_cq;
	return 0;
}
void __wrap_ibv_ack_cq_events(struct ibv_cq *cq, unsigned n) { acks += (int)n; }
static int notify_lands; /* a completion arrives just as the CQ is armed */
int __wrap_rma__ibv_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	notify_calls++;
	if (notify_lands) {
		notify_lands = 0;
		script[script_n++] = IBV_WC_SUCCESS;
	}
	return 0;
}

#define MAXMR 16
static struct ibv_mr mrs[MAXMR];
static int mr_access[MAXMR];
static struct ibv_mr *last_dereg;
struct ibv_mr *__wrap_rma__ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *m = &mrs[mr_regs % MAXMR];
	mr_access[mr_regs % MAXMR] = access;
	m->addr = addr;
	m->length = len;
	m->lkey = 0x100 + (uint32_t)mr_regs;
	m->rkey = 0x900 + (uint32_t)mr_regs;
	mr_regs++;
	return m;
}
int __wrap_ibv_dereg_mr(struct ibv_mr *mr) { mr_deregs++; last_dereg = mr; return 0; }

/* QPs: completions are only ever asked of the newest. */
#define MAXQP 16
static struct ibv_qp qps[MAXQP], *cur_qp;
static struct ibv_qp_attr rtr_of[MAXQP]; /* each QP's INIT->RTR attributes */
static bool rts_of[MAXQP];
static int qp_creates, qp_in_err, modify_err_calls;
static uint32_t send_wr_of[MAXQP]; /* each QP's max_send_wr asked */
struct ibv_qp *__wrap_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct ibv_qp *q = &qps[qp_creates % MAXQP];
	send_wr_of[qp_creates % MAXQP] = a->cap.max_send_wr;
	memset(&rtr_of[qp_creates % MAXQP], 0, sizeof rtr_of[0]);
	rts_of[qp_creates % MAXQP] = false;
	qp_creates++;
	qp_in_err = 0;
	q->qp_num = 0x1000 + (uint32_t)qp_creates;
	cur_qp = q;
	return q;
}
int __wrap_ibv_destroy_qp(struct ibv_qp *qp) { qp_destroys++; return 0; }
static int modify_err_fails; /* moving a QP to ERR fails (EIO) */
int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	if (a->qp_state == IBV_QPS_RTR)
		rtr_of[qp - qps] = *a;
	if (a->qp_state == IBV_QPS_RTS)
		rts_of[qp - qps] = true;
	if (a->qp_state == IBV_QPS_ERR) {
		modify_err_calls++;
		if (modify_err_fails)
			return EIO;
		qp_in_err = 1;
	}
	return 0;
}
int __wrap_ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int m,
			struct ibv_qp_init_attr *ia)
{
	a->qp_state = qp_in_err ? IBV_QPS_ERR : IBV_QPS_RTS;
	return 0;
}

/* Posted WRs, in order: only the signalled ones ever complete. */
static struct { uint64_t wr_id; bool sig; enum ibv_wr_opcode op; uint32_t rkey, lkey, qpn; } sq[MAXQ];
static int sq_head, sq_tail, posts;
int __wrap_rma__ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			      struct ibv_send_wr **bad)
{
	for (; wr; wr = wr->next) {
		sq[sq_tail % MAXQ].wr_id = wr->wr_id;
		sq[sq_tail % MAXQ].sig = wr->send_flags & IBV_SEND_SIGNALED;
		sq[sq_tail % MAXQ].op = wr->opcode;
		sq[sq_tail % MAXQ].rkey = wr->wr.rdma.rkey;
		sq[sq_tail % MAXQ].lkey = wr->num_sge ? wr->sg_list[0].lkey : 0;
		sq[sq_tail % MAXQ].qpn = qp->qp_num;
		sq_tail++;
		posts++;
	}
	return 0;
}


static int cq_dead; /* the CQ returns nothing, ever */
int __wrap_rma__ibv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int k = 0;
	if (cq_dead)
		return 0;
	while (k < n && sq_head < sq_tail) {
		enum ibv_wc_status st;
		if (script_n) {
			st = script[0];
			memmove(script, script + 1, --script_n * sizeof script[0]);
		} else if (qp_in_err) {
			st = IBV_WC_WR_FLUSH_ERR;
		} else {
			break;
		}
		/* Unsignalled WRs complete silently unless they fail. */
		while (sq_head < sq_tail && !sq[sq_head % MAXQ].sig &&
		       st == IBV_WC_SUCCESS)
			sq_head++;
		if (sq_head == sq_tail)
			break;
		memset(&wc[k], 0, sizeof wc[k]);
		wc[k].wr_id = sq[sq_head % MAXQ].wr_id;
		wc[k].status = st;
		wc[k].qp_num = sq[sq_head % MAXQ].qpn;
		if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR)
			qp_in_err = 1; /* what RC hardware does */
		sq_head++;
		k++;
	}
	return k;
}

/* accept4, for the control listener: it can be out of fds. */
static int accept_emfile, accept_calls;
int accept4(int fd, struct sockaddr *sa, socklen_t *sl, int flags)
{
	static int (*real)(int, struct sockaddr *, socklen_t *, int);
	accept_calls++;
	if (accept_emfile) {
		errno = EMFILE;
		return -1;
	}
	if (!real)
		real = (int (*)(int, struct sockaddr *, socklen_t *, int))
			dlsym(RTLD_NEXT, "accept4");
	return real(fd, sa, sl, flags);
}

/* ---- fixtures ---- */

static struct rma__transport *t;
static struct vb_tr *vt;
static char mem[1 << 16];
static struct rma_region region;
static const struct rma__rkey rkey = { .key = 0x777, .base = 0x50000 };

static void reset_nic(void)
{
	ndevs = 1;
	list_errno = 0;
	port_active_mask = 1 << 1;
	mlx5_gids = 0;
	pd_allocs = cq_creates = mr_regs = mr_deregs = notify_calls = acks = 0;
	pending_events = cq_made = 0;
	notify_lands = 0;
	async_waiting = false;
	async_acks = 0;
	qp_creates = qp_destroys = qp_in_err = modify_err_calls = 0;
	modify_err_fails = 0;
	cq_dead = 0;
	accept_emfile = accept_calls = 0;
	reenter = NULL;
	dying_op = 0;
	sq_head = sq_tail = posts = 0;
	script_n = 0;
	ndone = ready_calls = failed_calls = failed_err = kicks = 0;
	watches = 0;
	memset(wl, 0, sizeof wl);
	params.secret = NULL;
}

static int setup(void **state)
{
	reset_nic();
	t = NULL;
	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &t), 0);
	vt = container_of(t, struct vb_tr, base);
	region = (struct rma_region){ mem, sizeof mem, RMA_ACCESS_REMOTE_RW, NULL };
	assert_int_equal(rma__verbs_ops.mem_reg(t, &region), 0);
	return 0;
}

static int teardown(void **state)
{
	if (t) {
		rma__verbs_ops.mem_dereg(t, &region);
		rma__verbs_ops.fini(t);
	}
	t = NULL;
	return 0;
}

/* A peer as the control connection would leave it: QP connected. */
static struct vb_peer *up_peer(void)
{
	struct vb_peer *p = calloc(1, sizeof *p);
	struct rma__vqp_info info = { .qp_num = 0x77, .psn = 5, .mtu = IBV_MTU_4096,
				      .rd_atomic = 16, .has_gid = true };
	p->vt = vt;
	assert_int_equal(rma__verbs_new_qp(vt, &p->qp), 0);
	p->has_qp = true;
	p->ring_cap = p->qp.depth + 1;
	p->ring = calloc(p->ring_cap, sizeof *p->ring);
	p->next = vt->peers;
	vt->peers = p;
	p->base.t = t;
	rma__verbs_peer_up(p, &info);
	return p;
}

static int post(struct vb_peer *p, uint64_t op, unsigned kind, uint64_t len)
{
	struct rma__xfer x = { .op_id = op, .kind = kind, .rk = &rkey,
			       .raddr = rkey.base + 64, .laddr = mem,
			       .local = &region, .ldesc = region.slot, .len = len };
	return rma__verbs_ops.post(&p->base, &x);
}

/* ---- tests ---- */

static void test_probe_no_kernel(void **state)
{
	const char *why = NULL;
	reset_nic();
	ndevs = 0;
	list_errno = ENOSYS;
	assert_int_equal(rma__verbs_ops.probe(&why), -ENODEV);
	assert_non_null(strstr(why, "kernel has no RDMA support"));
}

static void test_probe_ports(void **state)
{
	const char *why = NULL;
	reset_nic();
	port_active_mask = 0;
	assert_int_equal(rma__verbs_ops.probe(&why), -ENODEV);
	assert_non_null(strstr(why, "none with an active port"));
	assert_non_null(strstr(why, "fake0: port 1 down (RoCE), port 2 down (RoCE)"));
	/* Port 2 up: found, with its RoCE v2 GID (index 1, not the v1 at 0). */
	port_active_mask = 1 << 2;
	assert_int_equal(rma__verbs_ops.probe(&why), 0);
	assert_non_null(strstr(why, "fake0 port 2 RoCE gid 1"));
	/* rma info lists every port and its state. */
	assert_non_null(strstr(why, "fake0: port 1 down (RoCE), port 2 active (RoCE)"));
}

/* On mlx5 the first RoCE v2 GID is the link-local one, which no router
 * forwards: the IPv4-mapped v2 GID (index 3) is the one to advertise. */
static void test_gid_prefers_routable_v2(void **state)
{
	struct rma__transport *x = NULL;
	struct vb_tr *xv;

	reset_nic();
	mlx5_gids = 1;
	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &x), 0);
	xv = container_of(x, struct vb_tr, base);
	assert_int_equal(xv->dom->gid_index, 3);
	assert_int_equal(xv->dom->gid.raw[10], 0xff);
	assert_int_equal(xv->dom->gid.raw[12], 10);
	assert_int_equal(xv->dom->gid.raw[15], 1);
	rma__verbs_ops.fini(x);
	/* Only link-local v2 GIDs: the first v2 still beats v1. */
	reset_nic();
	mlx5_gids = 2;
	x = NULL;
	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &x), 0);
	xv = container_of(x, struct vb_tr, base);
	assert_int_equal(xv->dom->gid_index, 1);
	assert_int_equal(xv->dom->gid.raw[0], 0xfe);
	rma__verbs_ops.fini(x);
}

static void test_init_one_pd_one_cq(void **state)
{
	assert_int_equal(pd_allocs, 1);
	assert_int_equal(cq_creates, 1);
	assert_ptr_equal(cq_channel, &fake_ch);
	/* The channel's fd sleeps in epoll: it must not block when read. */
	assert_true(fcntl(fake_ch.fd, F_GETFL) & O_NONBLOCK);
	assert_int_equal(vt->dom->gid_index, 1);
	/* Two QPs share the CQ and the PD. */
	struct vb_peer *a = up_peer(), *b = up_peer();
	assert_int_equal(cq_creates, 1);
	assert_int_equal(pd_allocs, 1);
	assert_int_equal(vt->cq->refs, 1 + 2 * 2);
	rma__verbs_ops.disconnect(&a->base, -ECANCELED);
	rma__verbs_ops.disconnect(&b->base, -ECANCELED);
	assert_int_equal(vt->cq->refs, 1);
}

static void test_mem_reg_least_access(void **state)
{
	assert_int_equal(mr_access[0], IBV_ACCESS_LOCAL_WRITE);
	assert_ptr_equal(region.slot, &mrs[0]);
}

static void test_grant_rkey_scope(void **state)
{
	struct rma__grant ro = { &region, 4096, 100, RMA_ACCESS_REMOTE_READ, NULL };
	struct rma__grant rw = { &region, 0, 8192, RMA_ACCESS_REMOTE_RW, NULL };
	struct ibv_mr *m;
	uint8_t blob[128];
	struct rma__rkey rk;
	int n;

	assert_int_equal(rma__verbs_ops.grant_add(t, &ro), 0);
	m = ro.slot;
	/* Exactly the window, read only. */
	assert_ptr_equal(m->addr, mem + 4096);
	assert_int_equal(m->length, 100);
	assert_int_equal(mr_access[1], IBV_ACCESS_REMOTE_READ);
	assert_int_equal(rma__verbs_ops.grant_add(t, &rw), 0);
	assert_int_equal(mr_access[2], IBV_ACCESS_REMOTE_READ |
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
	/* The advertisement carries the grant's own rkey and base: the
	 * window's address, whatever mr->addr says (a dma-buf MR's is the
	 * offset into the dma-buf: 0 here). */
	m->addr = NULL;
	n = rma__verbs_ops.ad_pack(t, &ro, blob, sizeof blob);
	assert_true(n > 0);
	assert_int_equal(rma__verbs_ops.ad_parse(blob, (size_t)n, 0, &rk), 0);
	assert_int_equal(rk.key, m->rkey);
	assert_int_equal(rk.base, (uint64_t)(uintptr_t)(mem + 4096));
	assert_int_equal(rma__verbs_ops.reachable(t, blob, (size_t)n), 0);
	/* A truncated or altered blob is refused. */
	assert_int_equal(rma__verbs_ops.ad_parse(blob, (size_t)n - 1, 0, &rk), -EBADMSG);
	blob[0] = 9;
	assert_int_equal(rma__verbs_ops.ad_parse(blob, (size_t)n, 0, &rk), -EBADMSG);
	/* Removal deregisters that MR and no other. */
	rma__verbs_ops.grant_remove(t, &ro);
	assert_ptr_equal(last_dereg, m);
	rma__verbs_ops.grant_remove(t, &rw);
	assert_int_equal(mr_deregs, 2);
}

static void test_post_opcodes_keys(void **state)
{
	struct vb_peer *p = up_peer();
	assert_int_equal(ready_calls, 1);
	assert_int_equal(p->base.credits, p->qp.depth);
	assert_int_equal(p->base.max_msg, 1u << 30);
	assert_int_equal(post(p, 1, RMA_OP_PUT, 64), 0);
	assert_int_equal(post(p, 2, RMA_OP_GET, 64), 0);
	assert_int_equal(sq[0].op, IBV_WR_RDMA_WRITE);
	assert_int_equal(sq[1].op, IBV_WR_RDMA_READ);
	assert_int_equal(sq[0].rkey, 0x777);
	assert_int_equal(sq[0].lkey, mrs[0].lkey);
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 0); /* nothing completed yet */
	script[script_n++] = IBV_WC_SUCCESS;
	script[script_n++] = IBV_WC_SUCCESS;
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 2);
	assert_int_equal(done[0].op_id, 1);
	assert_int_equal(done[0].res, 0);
	assert_int_equal(done[0].len, 64);
	assert_int_equal(done[1].op_id, 2);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
}

static void test_error_fails_its_op_then_replaces(void **state)
{
	struct vb_peer *p = up_peer();
	assert_int_equal(post(p, 1, RMA_OP_PUT, 8), 0);
	assert_int_equal(post(p, 2, RMA_OP_PUT, 8), 0);
	assert_int_equal(post(p, 3, RMA_OP_GET, 8), 0);
	script[script_n++] = IBV_WC_SUCCESS;
	script[script_n++] = IBV_WC_REM_ACCESS_ERR;
	rma__verbs_ops.progress(t);
	rma__verbs_ops.progress(t); /* the marker's flush */
	/* op 1 fine, op 2 refused by the target, op 3 flushed; then the
	 * drain marker comes back and the QP goes. */
	assert_int_equal(ndone, 3);
	assert_int_equal(done[0].op_id, 1);
	assert_int_equal(done[0].res, 0);
	assert_int_equal(done[1].op_id, 2);
	assert_int_equal(done[1].res, -EKEYREJECTED);
	assert_int_equal(done[2].op_id, 3);
	assert_int_equal(done[2].res, -ECONNRESET);
	assert_int_equal(modify_err_calls, 1);
	assert_int_equal(qp_destroys, 1);
	assert_false(p->has_qp);
	/* The peer is reported failed with the first error, so the core
	 * connects anew (a new QP) for later ops. */
	assert_int_equal(failed_calls, 1);
	assert_int_equal(failed_err, -EKEYREJECTED);
	assert_int_not_equal(post(p, 4, RMA_OP_PUT, 8), 0);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	struct vb_peer *q = up_peer();
	assert_int_equal(qp_creates, 2);
	assert_int_equal(post(q, 5, RMA_OP_PUT, 8), 0);
	rma__verbs_ops.disconnect(&q->base, -ECANCELED);
}

static void test_abort_drains_before_reporting(void **state)
{
	struct vb_peer *p = up_peer();
	assert_int_equal(post(p, 7, RMA_OP_GET, 8), 0);
	/* An op with nothing posted is already safe. */
	assert_int_equal(rma__verbs_ops.abort(&p->base, 99, -ETIMEDOUT), 0);
	assert_int_equal(modify_err_calls, 0);
	assert_int_equal(rma__verbs_ops.abort(&p->base, 7, -ETIMEDOUT),
			 RMA__ABORT_PENDING);
	assert_int_equal(modify_err_calls, 1);
	/* Nothing reported until the flushed completions are polled. */
	assert_int_equal(ndone, 0);
	assert_int_equal(qp_destroys, 0);
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 1);
	assert_int_equal(done[0].op_id, 7);
	assert_true(done[0].res < 0);
	assert_int_equal(qp_destroys, 1);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
}

/* A drain that cannot start reports every chunk at once; each report of
 * another op's chunk fails that op, whose abort re-enters the transport.
 * Every chunk is reported once, the drain is asked for once, and the QP
 * is destroyed once. */
static void test_abort_drain_fails_reentered(void **state)
{
	struct vb_peer *p = up_peer();
	for (uint64_t op = 7; op < 10; op++) {
		assert_int_equal(post(p, op, RMA_OP_GET, 8), 0);
		assert_int_equal(post(p, op, RMA_OP_PUT, 8), 0);
	}
	modify_err_fails = 1;
	reenter = p;
	dying_op = 7;
	/* Everything was reported before abort returned: nothing pending. */
	assert_int_equal(rma__verbs_ops.abort(&p->base, 7, -ETIMEDOUT), 0);
	assert_int_equal(ndone, 6);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(done[i].op_id, 7 + (uint64_t)i / 2);
		assert_true(done[i].res < 0);
	}
	assert_int_equal(qp_destroys, 1);
	assert_false(p->has_qp);
	assert_int_equal(failed_calls, 1); /* the peer is lost once */
	assert_int_equal(modify_err_calls, 1); /* no drain nested in one */
	reenter = NULL;
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	assert_int_equal(ndone, 6);
}

static void test_credits_and_kick(void **state)
{
	struct vb_peer *p = up_peer();
	uint32_t depth = p->qp.depth, i;
	for (i = 0; i < depth; i++)
		assert_int_equal(post(p, 100 + i, RMA_OP_PUT, 8), 0);
	assert_int_equal(post(p, 1, RMA_OP_PUT, 8), -EAGAIN);
	assert_int_equal(posts, (int)depth);
	assert_int_equal(kicks, 0);
	script[script_n++] = IBV_WC_SUCCESS;
	rma__verbs_ops.progress(t);
	assert_int_equal(kicks, 1);
	assert_int_equal(post(p, 1, RMA_OP_PUT, 8), 0);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
}

static void test_arm_polls_after_notify(void **state)
{
	struct vb_peer *p = up_peer();
	/* Empty: arm, and it is safe to sleep. */
	assert_int_equal(rma__verbs_ops.arm(t), 0);
	assert_int_equal(notify_calls, 1);
	/* Already armed: no second request. */
	assert_int_equal(rma__verbs_ops.arm(t), 0);
	assert_int_equal(notify_calls, 1);
	/* A completion waiting: do not sleep. */
	assert_int_equal(post(p, 1, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_SUCCESS;
	assert_int_equal(rma__verbs_ops.arm(t), -EAGAIN);
	assert_int_equal(ndone, 1);
	/* Events read from the channel are acked together and disarm. */
	pending_events = 3;
	vt->cw.cb(&vt->cw, 1);
	assert_int_equal(acks, 3);
	assert_int_equal(rma__verbs_ops.arm(t), 0);
	assert_int_equal(notify_calls, 2);
	/* A completion that lands before the arm raises no event: the poll
	 * after arming must find it. */
	assert_int_equal(post(p, 2, RMA_OP_PUT, 8), 0);
	vt->armed = false;
	notify_lands = 1;
	assert_int_equal(rma__verbs_ops.arm(t), -EAGAIN);
	assert_int_equal(ndone, 2);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
}

/* A QP that breaks without a completion saying so (async QP_FATAL): it is
 * drained like one that failed a WR, and the event is acked. */
static void test_async_qp_fatal(void **state)
{
	struct vb_peer *p = up_peer();
	struct rma__watch *aw = (struct rma__watch *)vt->aw;
	assert_true(fcntl(aw->fd, F_GETFL) & O_NONBLOCK);
	assert_int_equal(post(p, 1, RMA_OP_GET, 8), 0);
	pending_async.event_type = IBV_EVENT_QP_FATAL;
	pending_async.element.qp = p->qp.qp;
	async_waiting = true;
	aw->cb(aw, EPOLLIN);
	assert_int_equal(async_acks, 1);
	assert_int_equal(modify_err_calls, 1);
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 1);
	assert_true(done[0].res < 0);
	assert_int_equal(failed_calls, 1);
	assert_int_equal(failed_err, -EIO);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
}

/* The CQ overran (async CQ_ERR): no completion, no drain marker, will
 * ever come back on it.  The QP is destroyed, its chunk reported, the
 * peer failed so that the core connects anew, and the CQ replaced. */
static void test_async_cq_err(void **state)
{
	struct vb_peer *p = up_peer(), *q;
	struct rma__watch *aw = (struct rma__watch *)vt->aw;
	assert_int_equal(post(p, 1, RMA_OP_GET, 8), 0);
	cq_dead = 1;
	pending_async.event_type = IBV_EVENT_CQ_ERR;
	pending_async.element.cq = vt->cq->cq;
	async_waiting = true;
	aw->cb(aw, EPOLLIN);
	rma__verbs_ops.progress(t);
	assert_int_equal(async_acks, 1);
	assert_int_equal(ndone, 1);
	assert_int_equal(done[0].op_id, 1);
	assert_true(done[0].res < 0);
	assert_int_equal(done[0].destroys, 1); /* the QP went first */
	assert_false(p->has_qp);
	assert_int_equal(failed_calls, 1);
	assert_int_equal(failed_err, -EIO);
	/* A new CQ, and the old one gone once its QP went. */
	assert_int_equal(cq_made, 2);
	assert_int_equal(cq_creates, 1);
	assert_int_equal(vt->cq->refs, 1);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	assert_int_equal(ndone, 1);
	/* A peer made afterwards works on the new CQ (the destroyed QP's
	 * WR never completes). */
	cq_dead = 0;
	sq_head = sq_tail;
	q = up_peer();
	assert_int_equal(post(q, 2, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_SUCCESS;
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 2);
	assert_int_equal(done[1].res, 0);
	rma__verbs_ops.disconnect(&q->base, -ECANCELED);
}

/* A flushed completion with no error seen before (the QP went to error
 * on its own): the QP is drained all the same, not posted to again. */
static void test_flush_alone_drains(void **state)
{
	struct vb_peer *p = up_peer();
	assert_int_equal(post(p, 1, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_WR_FLUSH_ERR;
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 1);
	assert_int_equal(done[0].res, -ECONNRESET);
	assert_int_equal(modify_err_calls, 1);
	rma__verbs_ops.progress(t);
	assert_int_equal(qp_destroys, 1);
	assert_int_equal(failed_calls, 1);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
}

static void test_disconnect_waits_for_drain(void **state)
{
	struct vb_peer *p = up_peer();
	assert_int_equal(post(p, 1, RMA_OP_GET, 8), 0);
	assert_int_equal(post(p, 2, RMA_OP_GET, 8), 0);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	/* The QP went to error, both chunks came back flushed, the marker
	 * too, and only then was the QP destroyed. */
	assert_int_equal(modify_err_calls, 1);
	assert_int_equal(ndone, 2);
	assert_int_equal(qp_destroys, 1);
	assert_int_equal(sq_head, sq_tail);
}

/* The marker never comes back (a CQ that returns nothing): disconnect
 * gives up waiting, and then the QP is destroyed before any chunk is
 * reported, since a chunk reported is memory the owner may reuse. */
static void test_disconnect_timeout_destroys_first(void **state)
{
	struct vb_peer *p = up_peer();
	assert_int_equal(post(p, 1, RMA_OP_GET, 8), 0);
	assert_int_equal(post(p, 2, RMA_OP_PUT, 8), 0);
	cq_dead = 1;
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	assert_int_equal(modify_err_calls, 1);
	assert_int_equal(qp_destroys, 1);
	assert_int_equal(ndone, 2);
	assert_int_equal(done[0].destroys, 1);
	assert_int_equal(done[1].destroys, 1);
	assert_int_equal(done[0].res, -ECANCELED);
}

/* The control connection between two instances over loopback. */
static struct vb_peer *connect_to(struct rma__transport *target, uint64_t id,
				  int *rc)
{
	uint8_t blob[128];
	struct rma__peer *bp = NULL;
	int n = rma__verbs_ops.ad_pack(target, NULL, blob, sizeof blob);
	assert_true(n > 0);
	*rc = rma__verbs_ops.connect(t, blob, (size_t)n, id, &bp);
	if (*rc)
		return NULL;
	bp->t = t;
	bp->engine_id = id;
	for (int i = 0; i < 200 && bp->state == RMA__PEER_CONNECTING; i++)
		pump(10);
	return container_of(bp, struct vb_peer, base);
}

static void test_ctl_handshake(void **state)
{
	struct rma__transport *b = NULL;
	struct vb_peer *p;
	int rc, a_qp = qp_creates - 0;

	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	p = connect_to(b, 42, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	/* QP a_qp is the initiator's, a_qp + 1 the target's mirror: each
	 * went to RTR against the other's number and PSN, and to RTS. */
	struct rma__vqp_info ai;
	rma__vqp_info(&p->qp, &ai);
	assert_int_equal(rtr_of[a_qp].dest_qp_num, qps[a_qp + 1].qp_num);
	assert_int_equal(rtr_of[a_qp + 1].dest_qp_num, ai.qp_num);
	assert_int_equal(rtr_of[a_qp + 1].rq_psn, ai.psn);
	assert_true(rts_of[a_qp]);
	assert_true(rts_of[a_qp + 1]);
	/* The mirror only answers: a send queue of the fewest entries, not
	 * the initiator's depth (kernel memory per connection). */
	assert_int_equal(send_wr_of[a_qp], 512);
	assert_true(send_wr_of[a_qp + 1] <= 4);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	rma__verbs_ops.fini(b);
}

/* A WR error with the control connection up: the QP is drained, replaced
 * in place (a new mirror on the target too), and the peer is ready again
 * without ever being reported failed, so queued ops just wait. */
static void test_ctl_replaces_errored_qp(void **state)
{
	struct rma__transport *b = NULL;
	struct vb_peer *p;
	int rc, before;
	uint32_t old_qpn;

	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	p = connect_to(b, 42, &rc);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	old_qpn = p->qp.qp->qp_num;
	assert_int_equal(post(p, 1, RMA_OP_PUT, 8), 0);
	assert_int_equal(post(p, 2, RMA_OP_GET, 8), 0);
	script[script_n++] = IBV_WC_REM_ACCESS_ERR;
	before = qp_creates;
	rma__verbs_ops.progress(t);
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 2);
	assert_int_equal(done[0].res, -EKEYREJECTED);
	assert_int_equal(done[1].res, -ECONNRESET);
	/* Drained, and a new QP is being connected. */
	assert_int_equal(p->base.state, RMA__PEER_CONNECTING);
	assert_int_equal(qp_creates, before + 1);
	for (int i = 0; i < 200 && p->base.state != RMA__PEER_READY; i++)
		pump(10);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	assert_int_equal(failed_calls, 0);
	/* The target made a new mirror against the new QP. */
	assert_int_equal(qp_creates, before + 2);
	assert_int_not_equal(p->qp.qp->qp_num, old_qpn);
	assert_int_equal(rtr_of[before + 1].dest_qp_num, p->qp.qp->qp_num);
	assert_true(rts_of[before]);
	/* Later ops go out on it and complete. */
	assert_int_equal(post(p, 3, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_SUCCESS;
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 3);
	assert_int_equal(done[2].op_id, 3);
	assert_int_equal(done[2].res, 0);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	rma__verbs_ops.fini(b);
}

/* A WR error whose report fails another op: that op's abort cannot start
 * a drain (the QP refuses ERR), so the QP is destroyed there and then and a
 * new one is asked for over the control connection.  The completion that
 * started it all must not drain the new QP: the peer is replaced, never
 * reported failed. */
static void test_wc_report_replaces_qp_once(void **state)
{
	struct rma__transport *b = NULL;
	struct vb_peer *p;
	int rc, before;

	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	p = connect_to(b, 42, &rc);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	assert_int_equal(post(p, 7, RMA_OP_PUT, 8), 0);
	assert_int_equal(post(p, 7, RMA_OP_GET, 8), 0);
	assert_int_equal(post(p, 8, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_REM_ACCESS_ERR;
	modify_err_fails = 1;
	reenter = p;
	before = qp_destroys;
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 3);
	assert_int_equal(done[0].res, -EKEYREJECTED);
	assert_int_equal(qp_destroys, before + 1); /* the old QP only */
	assert_true(p->has_qp);
	assert_int_equal(p->base.state, RMA__PEER_CONNECTING);
	reenter = NULL;
	modify_err_fails = 0;
	for (int i = 0; i < 200 && p->base.state != RMA__PEER_READY; i++)
		pump(10);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	assert_int_equal(failed_calls, 0);
	assert_int_equal(post(p, 9, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_SUCCESS;
	rma__verbs_ops.progress(t);
	assert_int_equal(ndone, 4);
	assert_int_equal(done[3].op_id, 9);
	assert_int_equal(done[3].res, 0);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	rma__verbs_ops.fini(b);
}

/* rma_transport_raw's handles: the instance's device, PD, CQ and port;
 * rma_peer_raw's: the peer's own QP on top, until it is replaced. */
static void test_raw_handles(void **state)
{
	struct rma__transport *b = NULL;
	struct rma_verbs_raw h;
	struct vb_peer *p;
	int rc, first;

	memset(&h, 0xa5, sizeof h);
	assert_int_equal(rma__verbs_ops.raw(t, &h, sizeof h), (int)sizeof h);
	assert_ptr_equal(h.context, &fake_ctx);
	assert_ptr_equal(h.pd, &fake_pd);
	assert_ptr_equal(h.cq, &fake_cq);
	assert_null(h.qp);
	assert_int_equal(h.qp_num, 0);
	assert_int_equal(h.port_num, vt->dom->port);
	assert_int_equal(rma__verbs_ops.raw(t, &h, sizeof h - 1), -ENOSPC);

	assert_true(rma__verbs_ops.caps & RMA__CAP_PEER_RAW);
	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	first = qp_creates; /* the initiator's QP; first + 1 the mirror */
	p = connect_to(b, 42, &rc);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	memset(&h, 0, sizeof h);
	assert_int_equal(rma__verbs_ops.peer_raw(&p->base, &h, sizeof h),
			 (int)sizeof h);
	assert_ptr_equal(h.qp, &qps[first % MAXQP]);
	assert_int_equal(h.qp_num, qps[first % MAXQP].qp_num);
	assert_ptr_equal(h.context, &fake_ctx);
	assert_ptr_equal(h.pd, &fake_pd);
	assert_ptr_equal(h.cq, &fake_cq);
	assert_int_equal(rma__verbs_ops.peer_raw(&p->base, &h, sizeof h - 1), -ENOSPC);

	/* A WR error: drained (no QP meanwhile), then a new one. */
	assert_int_equal(post(p, 1, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_REM_ACCESS_ERR;
	rma__verbs_ops.progress(t);
	rma__verbs_ops.progress(t);
	for (int i = 0; i < 200 && p->base.state != RMA__PEER_READY; i++)
		pump(10);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	assert_int_equal(rma__verbs_ops.peer_raw(&p->base, &h, sizeof h),
			 (int)sizeof h);
	assert_ptr_equal(h.qp, p->qp.qp);
	assert_ptr_not_equal(h.qp, &qps[first % MAXQP]);
	assert_int_equal(h.qp_num, p->qp.qp->qp_num);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	rma__verbs_ops.fini(b);

	/* Without a control connection the errored QP is gone: no handle. */
	p = up_peer();
	assert_int_equal(post(p, 2, RMA_OP_PUT, 8), 0);
	script[script_n++] = IBV_WC_REM_ACCESS_ERR;
	rma__verbs_ops.progress(t);
	rma__verbs_ops.progress(t);
	assert_false(p->has_qp);
	assert_int_equal(rma__verbs_ops.peer_raw(&p->base, &h, sizeof h), -ENOTCONN);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
}

/* The target takes nothing but a well-formed reset on an open control
 * connection: anything else ends it (and no new mirror is made). */
static void test_ctl_target_refuses_garbage(void **state)
{
	struct rma__transport *b = NULL;
	struct vb_peer *p;
	struct rma__vqp_info me;
	uint8_t m[1 + RMA__VQP_INFO_LEN];
	int rc, before;

	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	p = connect_to(b, 42, &rc);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	before = qp_creates;
	rma__vqp_info(&p->qp, &me);
	m[0] = 'X'; /* a valid info behind the wrong tag */
	rma__vqp_info_encode(&me, m + 1);
	/* The control's watch is its first member. */
	assert_int_equal(write(((struct rma__watch *)p->ctl)->fd, m, sizeof m),
			 (ssize_t)sizeof m);
	for (int i = 0; i < 100 && p->base.state == RMA__PEER_READY; i++)
		pump(10);
	assert_int_equal(p->base.state, RMA__PEER_FAILED);
	assert_int_equal(failed_err, -ECONNRESET);
	assert_int_equal(qp_creates, before);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	rma__verbs_ops.fini(b);
}

/* A raw TCP connection to a target's control listener. */
static int raw_dial(struct vb_tr *target)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(getsockname(target->lw.fd, (struct sockaddr *)&sa, &sl), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sl), 0);
	return fd;
}

/* What an initiator sends first: a well-formed setup message 1. */
static void raw_hello(int fd)
{
	uint8_t b[RMA__SETUP_HDR_SIZE + RMA__VQP_INFO_LEN];
	struct rma__setup_msg m = { .step = 1, .kind = VB_SETUP_KIND,
				    .blob_len = RMA__VQP_INFO_LEN,
				    .engine_id = 7, .nonce = 1 };
	memset(b, 0, sizeof b);
	rma__setup_msg_encode(&m, b);
	(void)!send(fd, b, sizeof b, MSG_NOSIGNAL);
}

/* Connections that never authenticate cost the target no more QPs than
 * its handshake cap: none while they say nothing, at most max_handshakes
 * once they send a first message.  A real initiator still gets in. */
static void test_ctl_listener_caps_qps(void **state)
{
	struct rma__topts o = { { "max_handshakes" }, { "4" }, 1 };
	struct rma__transport *b = NULL;
	struct vb_tr *bv;
	struct vb_peer *p;
	int fds[20], live0, rc, i;

	assert_int_equal(rma__verbs_ops.init(NULL, &o, &b), 0);
	bv = container_of(b, struct vb_tr, base);
	assert_int_equal(bv->admit.lim.handshakes, 4);
	assert_int_equal(bv->admit.lim.handshake_ns, 3000 * 1000000LL);
	live0 = qp_creates - qp_destroys;
	for (i = 0; i < 10; i++)
		fds[i] = raw_dial(bv);
	for (i = 0; i < 5; i++)
		pump(10);
	assert_int_equal(qp_creates - qp_destroys, live0);
	assert_true(bv->admit.nhandshakes <= 4);
	for (i = 10; i < 20; i++) {
		fds[i] = raw_dial(bv);
		raw_hello(fds[i]);
	}
	for (i = 0; i < 5; i++)
		pump(10);
	assert_true(qp_creates - qp_destroys - live0 <= 4);
	assert_true(qp_creates - qp_destroys - live0 > 0);
	assert_true(bv->admit.nhandshakes <= 4);
	p = connect_to(b, 42, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(p->base.state, RMA__PEER_READY);
	assert_int_equal(bv->admit.nconns, 1);
	/* The rest have handshake_ms (3 s) to authenticate, not 10. */
	rma__verbs_ctl_tick(bv, rma__now_ns() + 2500 * 1000000LL);
	assert_true(bv->admit.nhandshakes > 0);
	rma__verbs_ctl_tick(bv, rma__now_ns() + 3500 * 1000000LL);
	assert_int_equal(bv->admit.nhandshakes, 0);
	assert_int_equal(qp_creates - qp_destroys - live0, 2); /* p and its mirror */
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	for (i = 0; i < 20; i++)
		close(fds[i]);
	rma__verbs_ops.fini(b);
}

/* Out of fds, the level-triggered listener would fire for ever: a
 * handshake is shed, and with none left the listener pauses until the
 * tick. */
static void test_ctl_listener_emfile_pauses(void **state)
{
	struct rma__transport *b = NULL;
	struct vb_tr *bv;
	int a, c, i;

	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	bv = container_of(b, struct vb_tr, base);
	a = raw_dial(bv);
	pump(10);
	assert_int_equal(bv->admit.nhandshakes, 1);
	accept_emfile = 1;
	c = raw_dial(bv);
	pump(10);
	assert_int_equal(bv->admit.nhandshakes, 0); /* shed for an fd */
	assert_false(bv->listen_paused);
	accept_calls = 0;
	for (i = 0; i < 5; i++)
		pump(10);
	assert_int_equal(accept_calls, 1);
	assert_true(bv->listen_paused);
	/* Fds again: the tick listens again and the waiting one gets in. */
	accept_emfile = 0;
	rma__verbs_ctl_tick(bv, rma__now_ns());
	assert_false(bv->listen_paused);
	pump(10);
	assert_int_equal(bv->admit.nhandshakes, 1);
	close(a);
	close(c);
	rma__verbs_ops.fini(b);
}

static void test_ctl_wrong_engine(void **state)
{
	struct rma__transport *b = NULL;
	struct vb_peer *p;
	int rc;

	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	p = connect_to(b, 43, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(p->base.state, RMA__PEER_FAILED);
	assert_int_equal(failed_err, -ESTALE);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	rma__verbs_ops.fini(b);
}

static void test_ctl_wrong_secret(void **state)
{
	struct rma__transport *b = NULL;
	struct vb_peer *p;
	int rc;

	params.secret = "not the initiator's";
	assert_int_equal(rma__verbs_ops.init(NULL, NULL, &b), 0);
	p = connect_to(b, 42, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(p->base.state, RMA__PEER_FAILED);
	assert_int_equal(failed_err, -EACCES);
	rma__verbs_ops.disconnect(&p->base, -ECANCELED);
	rma__verbs_ops.fini(b);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_no_kernel),
		cmocka_unit_test(test_probe_ports),
		cmocka_unit_test(test_gid_prefers_routable_v2),
		cmocka_unit_test_setup_teardown(test_init_one_pd_one_cq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mem_reg_least_access, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grant_rkey_scope, setup, teardown),
		cmocka_unit_test_setup_teardown(test_post_opcodes_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_fails_its_op_then_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_drains_before_reporting, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_drain_fails_reentered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_credits_and_kick, setup, teardown),
		cmocka_unit_test_setup_teardown(test_arm_polls_after_notify, setup, teardown),
		cmocka_unit_test_setup_teardown(test_async_qp_fatal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_async_cq_err, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_alone_drains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disconnect_waits_for_drain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disconnect_timeout_destroys_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_handshake, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_replaces_errored_qp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wc_report_replaces_qp_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_target_refuses_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_listener_caps_qps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_listener_emfile_pauses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_wrong_engine, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ctl_wrong_secret, setup, teardown),
		cmocka_unit_test_setup_teardown(test_raw_handles, setup, teardown),
	};
	return rma_verbs_run(tests, sizeof tests / sizeof tests[0], argc, argv);
}
