/*
 * tcp.c - rma's own protocol over TCP.
 *
 * The target side is served here, by the engine's progress: PUT payloads are
 * received straight into the registered memory and acknowledged once there
 * (delivery complete); GET replies are written straight from it.  On the
 * initiator, GET payloads land straight in the op's buffer.  Only bytes that
 * arrive in the same read as a header (at most RXBUF) are copied, and CUDA
 * device memory, which goes through a pinned buffer a piece at a time.
 *
 * A peer that lies, sends garbage or vanishes loses its connection and its
 * own ops, nothing else.  The files: see tcp.h.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/tcp.h"

/* ---- listener ---- */

static void accept_cb(struct rma__watch *w, uint32_t ev)
{
	struct tcp_tr *tt = container_of(w, struct tcp_tr, lw);

	/* A bounded batch: a peer reconnecting as fast as we accept must not
	 * keep this loop, and the engine lock, from everything else. */
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof sa;
		int fd = accept4(w->fd, (struct sockaddr *)&sa, &salen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				/* Out of fds: shed a handshake and come back
				 * next round; with none to shed, stop
				 * listening for a tick rather than spin. */
				rma__refused(&tt->refusals, RMA__REFUSED_LIMIT,
					     rma__now_ns());
				if (tt->admit.nhandshakes) {
					rma__admit_make_room(&tt->admit, NULL);
				} else if (!rma__watch_mod(tt->e, &tt->lw, 0)) {
					tt->listen_paused = true;
					rma__tcp_timer_start(tt);
				}
				return;
			}
			tt->listen_paused = false; /* fds again */
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				rma__warn("tcp: accept: %s", strerror(errno));
			return;
		}
		tt->listen_paused = false;
		uint8_t raddr[16];
		rma__admit_raddr(&sa, raddr);
		rma__admit_make_room(&tt->admit, raddr);
		struct conn *c = rma__tcp_conn_new(tt, fd, SERVER_RING);
		if (!c) {
			close(fd);
			continue;
		}
		memcpy(c->adm.raddr, raddr, 16);
		c->hs_deadline = rma__now_ns() + tt->admit.lim.handshake_ns;
		rma__tcp_tune_accepted(fd);
		c->events = EPOLLIN;
		if (rma__tcp_hs_begin(c) || rma__watch_add(tt->e, &c->w, EPOLLIN)) {
			close(fd);
			rma__tcp_conn_release(&c->w);
			continue;
		}
		c->hs = HS_SETUP;
		c->next = tt->served;
		tt->served = c;
		tt->nserved++;
		rma__admit_handshake(&tt->admit, &c->adm);
		rma__tcp_timer_start(tt);
	}
}

/* ---- ops table ---- */

static int tcp_probe(const char **why)
{
	*why = "rma's own protocol over TCP sockets";
	return 0;
}

static const struct rma__topt_desc tcp_options[] = {
	{"listen", "HOST:PORT to listen on, [::] or 0.0.0.0 for every address "
		   "(default rma_config.listen, else 127.0.0.1:0)"},
	{"stripes", "connections per peer, 1-64 (default rma_config.stripes, else 4)"},
	{"sockbuf", "socket buffer each way, bytes, 64K-64M (1M; "
		    "0: the kernel's autotuning; needs CAP_NET_ADMIN, else autotuning)"},
	{"advertise", "HOST peers should connect to (default rma_config.advertise, "
		      "else for 0.0.0.0/[::] the default route's interface)"},
	/* The target's limits (limits.c; design.md section 10). */
	{"max_conns", "authenticated connections kept (4096)"},
	{"max_handshakes", "connections in the handshake (64)"},
	{"max_addr_conns", "authenticated, per remote address (4096)"},
	{"max_addr_handshakes", "in the handshake, per remote address (32)"},
	{"handshake_ms", "time to authenticate (3000)"},
	{"idle_ms", "idle timeout (120000; 0 = none)"},
	{NULL, NULL},
};

static int tcp_init(struct rma_engine *e, const struct rma__topts *o,
		    struct rma__transport **out)
{
	const struct rma__engine_params *p = rma__engine_params(e);
	const char *listen_at = rma__topt(o, "listen");
	const char *advertise = rma__topt(o, "advertise");
	unsigned long stripes = p->stripes, sockbuf = SOCKBUF;
	struct tcp_tr *tt;
	int fd, rc;

	if (!listen_at)
		listen_at = p->listen;
	rc = rma__topt_uint(o, "stripes", 1, 64, &stripes);
	if (rc < 0)
		return rc;
	rc = rma__topt_bytes(o, "sockbuf", 0, SOCKBUF_MAX, &sockbuf);
	if (rc < 0)
		return rc;
	if (sockbuf && sockbuf < SOCKBUF_MIN) {
		rma__err("tcp: option sockbuf=%lu: want 0 or at least %u",
			 sockbuf, SOCKBUF_MIN);
		return -EINVAL;
	}
	tt = calloc(1, sizeof *tt);
	if (!tt)
		return -ENOMEM;
	tt->e = e;
	tt->engine_id = p->engine_id;
	tt->max_msg = p->max_msg_size ? p->max_msg_size : DEFAULT_MAX_MSG;
	tt->depth = p->queue_depth;
	tt->stripes = (unsigned)stripes;
	tt->sockbuf = (int)sockbuf;
	rma__setup_key(p->secret, tt->key);
	if ((rc = rma__tcp_limits_init(tt, o))) {
		free(tt);
		return rc;
	}
	tt->refusals.who = "tcp";
	tt->refusals.interval_ns = 10LL * 1000000000;
	fd = rma__tcp_listen("tcp", listen_at, advertise ? advertise : p->advertise,
			     4096, tt->blob, &tt->blob_len);
	if (fd < 0) {
		rc = fd;
		goto fail;
	}
	tt->lw.fd = fd;
	tt->lw.cb = accept_cb;
	rc = rma__watch_add(e, &tt->lw, EPOLLIN);
	if (rc) {
		close(fd);
		goto fail;
	}
	*out = &tt->base;
	return 0;
fail:
	free(tt);
	return rc;
}

static void tcp_fini(struct rma__transport *t)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);
	while (tt->served)
		rma__tcp_conn_kill(tt->served, -ECANCELED);
	rma__timer_cancel(tt->e, &tt->tick);
	close(tt->lw.fd);
	rma__stage_release(&tt->stage);
	/* The engine is going away: release what the progress round would. */
	free(tt);
}

static int tcp_ad_pack(struct rma__transport *t, const struct rma__grant *g,
		       void *buf, size_t cap)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);
	if (cap < tt->blob_len)
		return -ENOSPC;
	memcpy(buf, tt->blob, tt->blob_len);
	return (int)tt->blob_len;
}

static int tcp_ad_parse(const void *blob, size_t len, uint64_t core_key,
			struct rma__rkey *rk)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	if (rma__tcp_sa_from_blob(blob, len, &sa, &salen))
		return -EBADMSG;
	rk->key = core_key;
	rk->base = 0; /* tcp addresses are offsets in the advertised window */
	return 0;
}

int rma__tcp_conn_start(struct tcp_peer *p)
{
	struct tcp_tr *tt = p->tt;
	int fd = rma__tcp_dial(&p->sa, p->salen);
	struct conn *c;

	if (fd < 0)
		return fd;
	/* Room for the peer's whole window plus dropped entries. */
	c = rma__tcp_conn_new(tt, fd, tt->depth * 2);
	if (!c || rma__tcp_conn_ring(c)) {
		close(fd);
		if (c)
			rma__tcp_conn_release(&c->w);
		return -ENOMEM;
	}
	c->peer = p;
	c->hs = HS_CONNECTING;
	c->events = EPOLLOUT;
	int rc = rma__watch_add(tt->e, &c->w, EPOLLOUT);
	if (rc) {
		close(fd);
		rma__tcp_conn_release(&c->w);
		return rc;
	}
	c->next = p->conns;
	p->conns = c;
	rma__tcp_timer_start(tt);
	return 0;
}

static int tcp_connect(struct rma__transport *t, const void *blob, size_t len,
		       uint64_t engine_id, struct rma__peer **out)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);
	struct tcp_peer *p = calloc(1, sizeof *p);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	p->tt = tt;
	p->expect_id = engine_id;
	if (rma__tcp_sa_from_blob(blob, len, &p->sa, &p->salen)) {
		free(p);
		return -EBADMSG;
	}
	for (unsigned i = 0; i < tt->stripes && !rc; i++)
		rc = rma__tcp_conn_start(p);
	if (rc) {
		p->base.state = RMA__PEER_FAILED; /* the core has not seen it */
		while (p->conns)
			rma__tcp_conn_kill(p->conns, rc);
		free(p);
		return rc;
	}
	p->next = tt->peers;
	tt->peers = p;
	*out = &p->base;
	return 0;
}

static void tcp_disconnect(struct rma__peer *bp, int err)
{
	struct tcp_peer *p = container_of(bp, struct tcp_peer, base);
	struct tcp_peer **pp = &p->tt->peers;
	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	p->base.state = RMA__PEER_FAILED; /* no peer_failed callback while going */
	while (p->conns)
		rma__tcp_conn_kill(p->conns, err);
	free(p);
}

/* Where a chunk goes.  Small chunks fill one connection up to STRIPE_FILL
 * unsent bytes, so that a batch of them leaves in one sendmsg and their
 * replies come back in one: spread over every stripe, each write, read and
 * wake-up would carry a few ops.  Larger chunks (and small ones past the
 * fill) go to the least loaded ready connection, so that transfers use
 * every stripe and a GET's reply is not queued behind another's.  A
 * connection's load is what it has still to send and the GET replies it
 * still awaits: a GET's request leaves at once, and counted by unsent
 * bytes alone every GET went to the first connection whose requests had
 * left (one stripe carried 40% of a 1 MiB get run). */
static struct conn *pick(struct tcp_peer *p, uint64_t len)
{
	struct conn *least = NULL, *fill = NULL;
	bool small = len <= STRIPE_SMALL;
	for (struct conn *c = p->conns; c; c = c->next) {
		if (c->hs != HS_READY || c->count == c->cap)
			continue;
		if (small && c->queued < STRIPE_FILL && (!fill || c->queued > fill->queued))
			fill = c;
		if (!least || c->queued + c->awaited < least->queued + least->awaited)
			least = c;
	}
	return fill ? fill : least;
}

/*
 * The target closes a connection idle for its idle_ms (limits.c), and the
 * end may wait here unread (a caller that drives progress itself has not
 * looked).  An empty connection quiet for QUIET_PEEK_NS is asked with a
 * peek before it takes a request that would only fail.
 */
static bool ended(const struct conn *c)
{
	char b;
	if (c->count || rma__now_ns() - c->last_active < QUIET_PEEK_NS)
		return false;
	ssize_t r = recv(c->w.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
}

/* Stripes the target closed (idle, evicted) come back when a large chunk
 * could use them, at most one per REFILL_NS: small chunks fill one
 * connection anyway, and a target short of slots is not asked again and
 * again. */
static void refill(struct tcp_peer *p)
{
	unsigned n = 0;
	for (struct conn *c = p->conns; c; c = c->next)
		n++;
	int64_t now = rma__now_ns();
	if (n < p->tt->stripes && now >= p->refill_at) {
		p->refill_at = now + REFILL_NS;
		rma__tcp_conn_start(p);
	}
}

/* A connection of this peer's still in its connect or handshake. */
static bool dialling(const struct tcp_peer *p)
{
	for (const struct conn *c = p->conns; c; c = c->next)
		if (c->hs != HS_READY)
			return true;
	return false;
}

static int tcp_post(struct rma__peer *bp, const struct rma__xfer *xf)
{
	struct tcp_peer *p = container_of(bp, struct tcp_peer, base);
	struct conn *c;
	struct txe *x;

	while ((c = pick(p, xf->len)) && ended(c)) {
		/* The last ready one goes: unless one is on its way, dial its
		 * successor first, so that the peer waits for it (CONNECTING)
		 * rather than fails.  One on its way may have been closed in
		 * its handshake too; it is replaced when it comes up ended. */
		if (p->nlive == 1 && !dialling(p))
			rma__tcp_conn_start(p);
		rma__tcp_conn_kill(c, -ECONNRESET);
	}
	if (xf->len > STRIPE_SMALL)
		refill(p);
	if (!c) /* rings full of dropped entries, or reconnecting: wait */
		return -EAGAIN;
	x = rma__tcp_ring_at(c, c->count);
	struct rma_tcp_hdr h = {
		.type = xf->kind == RMA_OP_PUT ? RMA_TCP_PUT : RMA_TCP_GET,
		.id = xf->op_id,
		.key = xf->rk->key,
		.addr = xf->raddr,
		.len = xf->len,
	};
	rma__tcp_hdr_encode(&h, x->hdr);
	x->kind = h.type;
	x->skipped = false;
	x->pay = xf->laddr;
	x->pay_len = xf->kind == RMA_OP_PUT ? xf->len : 0;
	x->op_id = xf->op_id;
	x->raddr = xf->raddr;
	x->len = xf->len;
	x->region = NULL;
	x->dev = rma__region_device(xf->local) ? xf->local : NULL;
	x->seq = ++c->tt->seq;
	c->count++;
	c->queued += RMA_TCP_HDR_SIZE + x->pay_len;
	if (x->kind == RMA_TCP_GET) {
		c->awaited += x->len;
		rma__tcp_conn_direct(c);
	}
	return 0;
}

static void tcp_flush(struct rma__peer *bp)
{
	struct tcp_peer *p = container_of(bp, struct tcp_peer, base);
	for (struct conn *c = p->conns, *next; c; c = next) {
		next = c->next;
		if (c->hs == HS_READY && c->sent < c->count)
			rma__tcp_conn_flush(c);
	}
}

/* A region is going: nothing may read or write it after this returns. */
static void tcp_revoke(struct rma__transport *t, struct rma_region *r)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);

	for (struct conn *c = tt->served, *next; c; c = next) {
		next = c->next;
		if (c->in_payload && c->pay_region == r) {
			c->pay_dst = NULL; /* rest of this PUT is discarded */
			c->pay_status = -EKEYREJECTED;
		}
		for (unsigned i = 0; i < c->count; i++) {
			struct txe *x = rma__tcp_ring_at(c, i);
			if (x->region != r)
				continue;
			if (i == 0 && c->cur_off > 0) {
				/* Its reply is half on the wire: cut it off. */
				rma__tcp_conn_kill(c, -ECONNRESET);
				break;
			}
			/* Not started: turn it into a refusal. */
			struct rma_tcp_hdr h;
			rma__tcp_hdr_decode(x->hdr, RMA_TCP_HDR_SIZE, UINT64_MAX, &h);
			h.status = -EKEYREJECTED;
			h.len = 0;
			rma__tcp_hdr_encode(&h, x->hdr);
			c->queued -= x->pay_len;
			x->pay = NULL;
			x->pay_len = 0;
			x->region = NULL;
			x->dev = NULL;
		}
	}
}

const struct rma__transport_ops rma__tcp_ops = {
	.name = "tcp",
	.level = RMA_LEVEL_TCP,
	.wire_id = 1,
	/* DEVICE: staged through host memory (conn.c) */
	.caps = RMA__CAP_DEVICE | RMA__CAP_LISTEN,
	.options = tcp_options,
	.probe = tcp_probe,
	.init = tcp_init,
	.fini = tcp_fini,
	.ad_pack = tcp_ad_pack,
	.ad_parse = tcp_ad_parse,
	.connect = tcp_connect,
	.disconnect = tcp_disconnect,
	.post = tcp_post,
	.flush = tcp_flush,
	.revoke = tcp_revoke,
};
