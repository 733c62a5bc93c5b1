/*
 * ctl.c - the control connection: one TCP connection per initiator QP that
 * runs the shared setup handshake (secret proof both ways, the engine id
 * the advertisement named) with the QP info as each side's blob.
 *
 *   initiator                          target
 *   QP in RESET, connect()   ------>   accept
 *   setup (blob: its info)   ------>   its first message whole: mirror
 *                                      QP in RESET
 *   setup (blob: its info)   <----->   setup (blob: its info)
 *                                      mirror QP to RTS (it answers only)
 *   QP to RTS, peer ready    <------   one byte 0: "the mirror is up"
 *
 * The byte keeps the initiator from sending before the target's QP can
 * take packets.  The connection stays open: its end tells each side the
 * other has gone (the initiator drains and fails the peer; the target
 * destroys the mirror).
 *
 * A QP that went to the error state is replaced over the same connection,
 * once drained: the initiator sends 'R' and its new QP's info, the target
 * replaces its mirror and answers 'R' and the new mirror's info.  Ops
 * queued meanwhile wait (the peer is connecting again), so one bad op
 * fails only itself and what was in flight beside it.
 *
 * The listener admits through admit.h's caps, as ofi's control listener
 * does: a connection that never sends its first message costs a socket,
 * no QP, and the QPs made for unauthenticated ones are bounded by the
 * handshake caps.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/tcp.h"
#include "transport/verbs/verbs.h"

#include "transport/setup.h"

enum {
	CTL_CONNECTING, /* initiator: connect() in progress */
	CTL_HELLO,      /* target: the initiator's first message not all in */
	CTL_SETUP,      /* the handshake */
	CTL_WAIT_UP,    /* initiator: waiting for the target's byte */
	CTL_UP,
	CTL_RESET,      /* initiator: a new QP's info sent, waiting for 'R' */
};

#define RESET_LEN (1 + RMA__VQP_INFO_LEN)
/* The initiator's first setup message: a header and its QP info. */
#define HELLO_LEN (RMA__SETUP_HDR_SIZE + RMA__VQP_INFO_LEN)

struct vb_ctl {
	struct rma__watch w;
	struct vb_tr *vt;
	struct vb_peer *peer;   /* initiator side; NULL on the target */
	struct vb_ctl *next;    /* target: on vt->served */
	int step;
	int64_t deadline;
	struct rma__vqp qp;     /* target: the mirror QP */
	bool has_qp;
	struct rma__vqp_info peer_info;
	uint8_t rbuf[RESET_LEN];  /* a reset message coming in */
	size_t rhave;
	struct rma__setup s;
	struct rma__admitted adm; /* target: its address, its place in the caps */
};

static void ctl_release(struct rma__watch *w)
{
	struct vb_ctl *c = container_of(w, struct vb_ctl, w);
	close(w->fd);
	free(c);
}

static void served_unlink(struct vb_ctl *c)
{
	struct vb_ctl **pp = &c->vt->served;
	while (*pp && *pp != c)
		pp = &(*pp)->next;
	if (*pp)
		*pp = c->next;
}

/* Close; the memory goes once no thread can hold an event for it. */
void rma__verbs_ctl_close(struct vb_ctl *c)
{
	if (!c->peer) {
		served_unlink(c);
		rma__admit_drop(&c->vt->admit, &c->adm);
	}
	if (c->has_qp) {
		/* A mirror posts nothing: no DMA of ours to wait for. */
		rma__vqp_destroy(&c->qp);
		c->has_qp = false;
	}
	c->peer = NULL;
	rma__watch_retire(c->vt->e, &c->w);
}

static void ctl_fail(struct vb_ctl *c, int err)
{
	struct vb_peer *p = c->peer;
	if (p) {
		p->ctl = NULL;
		c->peer = NULL;
		c->next = NULL;
		rma__verbs_ctl_close(c);
		rma__verbs_peer_lost(p, err);
		return;
	}
	rma__verbs_ctl_close(c);
}

static int setup_start(struct vb_ctl *c, bool server, const struct rma__vqp *q)
{
	struct vb_tr *vt = c->vt;
	struct rma__vqp_info me;
	uint8_t blob[RMA__VQP_INFO_LEN];
	struct rma__setup_params sp;

	rma__vqp_info(q, &me);
	rma__vqp_info_encode(&me, blob);
	memset(&sp, 0, sizeof sp);
	sp.key = vt->key;
	sp.kind = VB_SETUP_KIND;
	sp.engine_id = vt->engine_id;
	sp.expect_id = server ? 0 : c->peer->expect_id;
	sp.blob = blob;
	sp.blob_len = sizeof blob;
	c->step = CTL_SETUP;
	return rma__setup_init(&c->s, c->w.fd, server, &sp);
}

/* The handshake is done: the peer's QP info is in the setup state. */
static int setup_done(struct vb_ctl *c)
{
	if (rma__vqp_info_decode(c->s.peer_blob, c->s.peer_blob_len, &c->peer_info))
		return -EPROTO;
	if (c->peer) {
		c->step = CTL_WAIT_UP;
		return rma__watch_mod(c->vt->e, &c->w, EPOLLIN);
	}
	/* Target: the mirror goes up, then says so. */
	int rc = rma__vqp_connect(&c->qp, &c->peer_info);
	uint8_t zero = 0;
	if (rc)
		return rc;
	if (send(c->w.fd, &zero, 1, MSG_NOSIGNAL) != 1)
		return -errno;
	c->step = CTL_UP;
	return rma__watch_mod(c->vt->e, &c->w, EPOLLIN);
}

/* 'R' and a QP's info, all at once: the socket is idle but for this. */
static int send_reset(struct vb_ctl *c, const struct rma__vqp *q)
{
	struct rma__vqp_info me;
	uint8_t m[RESET_LEN];

	rma__vqp_info(q, &me);
	m[0] = 'R';
	rma__vqp_info_encode(&me, m + 1);
	if (send(c->w.fd, m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof m)
		return errno ? -errno : -EIO;
	return 0;
}

/* Read one reset message: 1 done, 0 not yet, or -errno. */
static int recv_reset(struct vb_ctl *c)
{
	ssize_t n = recv(c->w.fd, c->rbuf + c->rhave, RESET_LEN - c->rhave, 0);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	c->rhave += (size_t)n;
	if (c->rhave < RESET_LEN)
		return 0;
	c->rhave = 0;
	if (c->rbuf[0] != 'R' ||
	    rma__vqp_info_decode(c->rbuf + 1, RMA__VQP_INFO_LEN, &c->peer_info))
		return -EPROTO;
	return 1;
}

int rma__verbs_ctl_reset(struct vb_peer *p)
{
	struct vb_ctl *c = p->ctl;
	int rc;

	if (!c || c->step != CTL_UP)
		return -ENOTCONN;
	rc = rma__verbs_new_qp(c->vt, &p->qp);
	if (rc)
		return rc;
	p->has_qp = true;
	rc = send_reset(c, &p->qp);
	if (rc) {
		rma__vqp_destroy(&p->qp);
		p->has_qp = false;
		return rc;
	}
	c->step = CTL_RESET;
	c->deadline = rma__now_ns() + VB_HANDSHAKE_NS;
	return 0;
}

/* Target: the initiator replaced its QP; replace the mirror to match. */
static int mirror_reset(struct vb_ctl *c)
{
	int rc;

	if (c->has_qp) {
		rma__vqp_destroy(&c->qp);
		c->has_qp = false;
	}
	rc = rma__verbs_new_mirror(c->vt, &c->qp);
	if (rc)
		return rc;
	c->has_qp = true;
	rc = rma__vqp_connect(&c->qp, &c->peer_info);
	return rc ? rc : send_reset(c, &c->qp);
}

/* Target: 1 once the initiator's first message is whole in the socket
 * (peeked, left for the handshake to read), 0 not yet, or -errno; a
 * header that cannot be a verbs client's ends it at once.  SO_RCVLOWAT
 * keeps a message sent in pieces from waking us for each. */
static int hello_in(struct vb_ctl *c)
{
	uint8_t b[HELLO_LEN];
	struct rma__setup_msg m;
	int one = 1;
	ssize_t n = recv(c->w.fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	if (n >= RMA__SETUP_HDR_SIZE &&
	    (rma__setup_msg_decode(b, RMA__SETUP_HDR_SIZE, &m) || m.step != 1 ||
	     m.kind != VB_SETUP_KIND || m.blob_len != RMA__VQP_INFO_LEN))
		return -EPROTO;
	if (n < (ssize_t)sizeof b)
		return 0;
	setsockopt(c->w.fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
	return 1;
}

/* Target: the mirror QP is made once the initiator has spoken, so a
 * socket that never does costs no QP. */
static int hello_step(struct vb_ctl *c)
{
	int rc = hello_in(c);

	if (rc <= 0)
		return rc;
	rc = rma__verbs_new_mirror(c->vt, &c->qp);
	if (rc)
		return rc;
	c->has_qp = true;
	return setup_start(c, true, &c->qp);
}

static void ctl_cb(struct rma__watch *w, uint32_t events)
{
	struct vb_ctl *c = container_of(w, struct vb_ctl, w);
	int rc = 0;

	if (c->step == CTL_CONNECTING) {
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			ctl_fail(c, -soerr);
			return;
		}
		rc = setup_start(c, false, &c->peer->qp);
		if (rc) {
			ctl_fail(c, rc);
			return;
		}
	}
	if (c->step == CTL_HELLO) {
		rc = hello_step(c);
		if (rc) {
			if (rc == -EPROTO)
				rma__refused(&c->vt->refusals, RMA__REFUSED_PROTO,
					     rma__now_ns());
			ctl_fail(c, rc);
			return;
		}
		if (c->step == CTL_HELLO)
			return;
	}
	if (c->step == CTL_SETUP) {
		rc = rma__setup_run(&c->s);
		if (rc == -EINPROGRESS) {
			rc = rma__watch_mod(c->vt->e, w, rma__setup_events(&c->s));
			if (rc)
				ctl_fail(c, rc);
			return;
		}
		/* Authenticated: within the caps on authenticated control
		 * connections, or refused (closed). */
		if (rc == 0 && !c->peer && !rma__admit_up(&c->vt->admit, &c->adm))
			return;
		if (rc == 0)
			rc = setup_done(c);
		if (rc) {
			/* A target counts refusals: a flood must not flood
			 * the log. */
			if (!c->peer && (rc == -EACCES || rc == -EPROTO))
				rma__refused(&c->vt->refusals,
					     rc == -EACCES ? RMA__REFUSED_SECRET
							   : RMA__REFUSED_PROTO,
					     rma__now_ns());
			else if (rc == -EACCES)
				rma__warn("verbs: peer refused: wrong secret");
			ctl_fail(c, rc);
		}
		return;
	}
	if (c->step == CTL_WAIT_UP) {
		uint8_t b;
		ssize_t n = recv(w->fd, &b, 1, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n != 1 || b != 0) {
			ctl_fail(c, n == 0 ? -ECONNRESET : n < 0 ? -errno : -EPROTO);
			return;
		}
		c->step = CTL_UP;
		rma__verbs_peer_up(c->peer, &c->peer_info);
		return;
	}
	if (c->step == CTL_RESET || (c->step == CTL_UP && !c->peer)) {
		rc = recv_reset(c);
		if (rc == 1) {
			if (c->peer) {
				c->step = CTL_UP;
				rma__verbs_peer_up(c->peer, &c->peer_info);
				return;
			}
			rc = mirror_reset(c);
		}
		if (rc)
			ctl_fail(c, rc);
		return;
	}
	if (c->step == CTL_UP) {
		/* The target says nothing unasked: data or EOF ends it. */
		uint8_t b;
		ssize_t n = recv(w->fd, &b, 1, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		ctl_fail(c, n == 0 ? -ECONNRESET : n < 0 ? -errno : -EPROTO);
	}
}

static struct vb_ctl *ctl_new(struct vb_tr *vt, int fd)
{
	struct vb_ctl *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->vt = vt;
	c->w.fd = fd;
	c->w.cb = ctl_cb;
	c->w.release = ctl_release;
	c->deadline = rma__now_ns() + VB_HANDSHAKE_NS;
	return c;
}

static void accept_cb(struct rma__watch *w, uint32_t ev)
{
	struct vb_tr *vt = container_of(w, struct vb_tr, lw);
	int lowat = HELLO_LEN;

	/* A bounded batch: a peer reconnecting as fast as we accept must
	 * not hold this loop. */
	for (int i = 0; i < 32; i++) {
		struct sockaddr_storage sa;
		socklen_t sl = sizeof sa;
		uint8_t raddr[16];
		struct vb_ctl *c;
		int fd = accept4(w->fd, (struct sockaddr *)&sa, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EMFILE && errno != ENFILE)
				return;
			/* Out of fds: shed a handshake and come back next
			 * round; with none to shed, stop listening until
			 * the tick rather than spin on a level-triggered
			 * listener. */
			rma__refused(&vt->refusals, RMA__REFUSED_LIMIT, rma__now_ns());
			if (vt->admit.nhandshakes)
				rma__admit_make_room(&vt->admit, NULL);
			else if (!rma__watch_mod(vt->e, &vt->lw, 0))
				vt->listen_paused = true;
			return;
		}
		/* One address cannot hold every handshake slot: its own
		 * oldest goes first. */
		rma__admit_raddr(&sa, raddr);
		rma__admit_make_room(&vt->admit, raddr);
		rma__tcp_tune_accepted(fd); /* no Nagle wait on the last byte */
		setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
		c = ctl_new(vt, fd);
		if (!c) {
			close(fd);
			continue;
		}
		memcpy(c->adm.raddr, raddr, 16);
		c->step = CTL_HELLO;
		c->deadline = rma__now_ns() + vt->admit.lim.handshake_ns;
		if (rma__watch_add(vt->e, &c->w, EPOLLIN)) {
			close(fd);
			free(c);
			continue;
		}
		c->next = vt->served;
		vt->served = c;
		rma__admit_handshake(&vt->admit, &c->adm);
	}
}

/* The caps' view of a control connection (admit.h).  None is ever idle:
 * closing it would take its peer's mirror QP. */
static bool adm_silent(struct rma__admitted *a)
{
	struct vb_ctl *c = container_of(a, struct vb_ctl, adm);
	uint8_t b;
	return c->step == CTL_HELLO &&
	       recv(c->w.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

static void adm_evict(struct rma__admitted *a)
{
	rma__verbs_ctl_close(container_of(a, struct vb_ctl, adm));
}

static const struct rma__admit_ops adm_ops = {
	.silent = adm_silent,
	.evict = adm_evict,
};

int rma__verbs_ctl_limits(struct vb_tr *vt, const struct rma__topts *o)
{
	vt->admit.ops = &adm_ops;
	vt->admit.refusals = &vt->refusals;
	vt->refusals.who = "verbs";
	vt->refusals.interval_ns = 10 * 1000000000LL;
	return rma__admit_options("verbs", o, &rma__admit_ctl_defaults,
				  &vt->admit.lim);
}

int rma__verbs_ctl_listen(struct vb_tr *vt, const char *at, const char *advertise)
{
	int fd, rc;

	fd = rma__tcp_listen("verbs", at ? at : "127.0.0.1:0", advertise, 1024,
			     vt->addr, &vt->addr_len);
	if (fd < 0)
		return fd;
	vt->lw.fd = fd;
	vt->lw.cb = accept_cb;
	rc = rma__watch_add(vt->e, &vt->lw, EPOLLIN);
	if (rc)
		close(fd);
	return rc;
}

int rma__verbs_ctl_connect(struct vb_peer *p)
{
	struct vb_tr *vt = p->vt;
	struct vb_ctl *c;
	int fd, rc;

	fd = rma__tcp_dial(&p->sa, p->salen);
	if (fd < 0)
		return fd;
	c = ctl_new(vt, fd);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->peer = p;
	c->step = CTL_CONNECTING;
	rc = rma__watch_add(vt->e, &c->w, EPOLLOUT);
	if (rc) {
		close(fd);
		free(c);
		return rc;
	}
	p->ctl = c;
	return 0;
}

/* Handshakes that never finish lose their connection. */
void rma__verbs_ctl_tick(struct vb_tr *vt, int64_t now)
{
	for (struct vb_ctl *c = vt->served, *next; c; c = next) {
		next = c->next;
		if (c->step != CTL_UP && now > c->deadline) {
			rma__refused(&vt->refusals, RMA__REFUSED_TIMEOUT, now);
			ctl_fail(c, -ETIMEDOUT);
		}
	}
	for (struct vb_peer *p = vt->peers; p; p = p->next)
		if (p->ctl && p->ctl->step != CTL_UP && now > p->ctl->deadline)
			ctl_fail(p->ctl, -ETIMEDOUT);
	rma__refusals_log(&vt->refusals, now);
	/* Out of fds a tick ago: listen again (it pauses again if still). */
	if (vt->listen_paused && !rma__watch_mod(vt->e, &vt->lw, EPOLLIN))
		vt->listen_paused = false;
}

void rma__verbs_ctl_fini(struct vb_tr *vt)
{
	while (vt->served)
		rma__verbs_ctl_close(vt->served);
	close(vt->lw.fd);
}
