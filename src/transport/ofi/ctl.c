/*
 * ctl.c - the control connection: one TCP connection per initiator peer
 * that runs the shared setup handshake (kind 3, no blobs: both sides prove
 * the secret, the initiator checks the owner's engine id) before the
 * initiator learns anything it could use for RMA.
 *
 *   initiator                          owner
 *   connect()                -------> accept
 *   setup (secret, engine id) <-----> setup
 *   ADDR its endpoint's      -------> inserted into the AV of a serving
 *        fabric address, number n     endpoint of this peer's own
 *                            <------- WELCOME: that endpoint's fabric
 *                                     address (it holds address n)
 *   KEY core key             -------> the grant with that core key?
 *                            <------- KEYS status, fabric key, base
 *                            <------- REVOKED core key, then WELCOME: the
 *                                     grant was released; a new serving
 *                                     endpoint (holding the initiator's
 *                                     last address) replaces the old one
 *   ADDR n+1 (a new endpoint) ------> inserted too (serve_insert)
 *                            <------- ADDED n+1
 *
 * Messages after the setup are 32 bytes, u32 type | i32 status | u64 a |
 * u64 b | u64 c, little-endian; ADDR and WELCOME are followed by a (at
 * most OFI_ADDR_MAX) address bytes, and b is the number of the
 * initiator's address (ADDR, ADDED, WELCOME).  The owner inserts the
 * initiator's address before it answers because EFA serves an RMA only
 * from an address the target has in its AV; the initiator posts nothing
 * from an endpoint until the owner said it holds that endpoint's address.
 * A KEYS for a provider with FI_MR_RAW has b = FI_KEY_NOTAVAIL (never a
 * key given otherwise) and is followed by a raw key record (rawkey.c):
 * u16 key length, at most OFI_RAW_KEY_MAX (a longer one is -EBADMSG) |
 * u64 base for fi_mr_map_raw | the key bytes; the initiator maps it and
 * posts with the result.  Advertisements carry the core key only,
 * so a token is useless without passing the handshake.  The connection
 * stays open: its end tells the initiator the owner is gone (every chunk
 * in flight fails at once) and tells the owner to close the peer's serving
 * endpoint.  A release replaces the serving endpoints of the peers given
 * that grant's key: a transfer the provider is in the middle of ends with
 * the old endpoint, so release is final.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/ofi/ofi.h"
#include "transport/tcp/tcp.h"

/* CTL_ADDR: the owner waits for the initiator's first ADDR. */
enum { CTL_CONNECTING, CTL_SETUP, CTL_ADDR, CTL_WELCOME, CTL_UP };
enum { MSG_WELCOME = 1, MSG_KEY = 2, MSG_KEYS = 3, MSG_REVOKED = 4,
       MSG_ADDR = 5, MSG_ADDED = 6 };
#define MSG_LEN 32
#define RAWREC_MAX (OFI_RAWREC_HDR + OFI_RAW_KEY_MAX)

struct ofi_ctl {
	struct rma__watch w;
	struct ofi_tr *ot;
	struct ofi_peer *peer;  /* initiator side; NULL on the owner */
	struct ofi_ctl *next;   /* owner: on ot->served */
	struct ofi_ep *serve;   /* owner: this peer's serving endpoint */
	int step;
	int err;                /* initiator: a failure read by ctl_poll */
	int64_t deadline;
	struct rma__timer tm;   /* initiator: the handshake's deadline */
	uint64_t *given;        /* owner: core keys handed out */
	unsigned ngiven, capgiven;
	uint8_t iaddr[OFI_ADDR_MAX]; /* owner: the initiator's fabric address */
	size_t iaddr_len;
	uint64_t iseq;          /* owner: its number, as the initiator counts */
	fi_addr_t ifa;          /* owner: its entry in serve's AV */
	unsigned naddr;         /* owner: entries in serve's AV */
	uint8_t in[MSG_LEN + RMA_MAX(OFI_ADDR_MAX, RAWREC_MAX)];
	size_t have, need;
	struct rma__setup s;
	struct rma__admitted adm; /* owner: its address, its place in the caps */
};

static void msg_put(uint8_t *b, uint32_t type, int32_t status, uint64_t a,
		    uint64_t bb, uint64_t c)
{
	rma__put_le32(b, type);
	rma__put_le32(b + 4, (uint32_t)status);
	rma__put_le64(b + 8, a);
	rma__put_le64(b + 16, bb);
	rma__put_le64(b + 24, c);
}

/* All or nothing: a peer that leaves 32-byte messages unread for a whole
 * socket buffer is broken.  Part of a message sent leaves the stream out
 * of step for good: it is shut down, and the reader's loss path (end of
 * stream) fails the connection as any other. */
static int send_all(int fd, const void *b, size_t n)
{
	ssize_t r = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (r == (ssize_t)n)
		return 0;
	if (r > 0) {
		shutdown(fd, SHUT_RDWR);
		return -ECONNRESET;
	}
	return r < 0 && errno != EAGAIN ? -errno : -ENOBUFS;
}

static void ctl_release(struct rma__watch *w)
{
	struct ofi_ctl *c = container_of(w, struct ofi_ctl, w);
	free(c->given);
	free(c);
}

void rma__ofi_ctl_close(struct ofi_ctl *c)
{
	struct ofi_tr *ot = c->ot;
	if (!c->peer && c->step != -1) {
		struct ofi_ctl **pp = &ot->served;
		while (*pp && *pp != c)
			pp = &(*pp)->next;
		if (*pp) {
			*pp = c->next;
			ot->nserved--;
		}
		rma__admit_drop(&ot->admit, &c->adm);
	}
	/* The serving endpoint first: once closed, the provider moves no
	 * more bytes for this peer. */
	if (c->serve) {
		rma__ofi_ep_close(c->serve);
		c->serve = NULL;
	}
	rma__timer_cancel(ot->e, &c->tm);
	c->peer = NULL;
	c->step = -1;
	rma__watch_retire(ot->e, &c->w);
	close(c->w.fd);
}

/* Owner: the peer left.  Its serving endpoint is kept for the next peer
 * (with the keys it carried: a release still closes it) rather than
 * closed: tcp;ofi_rxm leaves a connection that is still open when its
 * endpoint closes in CLOSE-WAIT, with its buffers, for the life of the
 * process, and a new endpoint costs tens of milliseconds. */
static void ctl_park(struct ofi_ctl *c)
{
	struct ofi_ep *oe = c->serve;
	struct ofi_tr *ot = c->ot;
	struct ofi_ctl *d = NULL;

	c->serve = NULL;
	if (oe && ot->nidle < OFI_IDLE_MAX && c->ngiven <= 256 &&
	    c->naddr < OFI_SERVE_ADDRS / 2 &&
	    (d = calloc(1, sizeof *d))) {
		d->ot = ot;
		d->serve = oe;
		d->naddr = c->naddr;
		d->given = c->given;
		d->ngiven = c->ngiven;
		d->capgiven = c->capgiven;
		c->given = NULL;
		c->ngiven = c->capgiven = 0;
		d->next = ot->idle;
		ot->idle = d;
		ot->nidle++;
	} else if (oe) {
		rma__ofi_ep_close(oe);
	}
	rma__ofi_ctl_close(c);
}

static void idle_drop(struct ofi_tr *ot, struct ofi_ctl **pp)
{
	struct ofi_ctl *d = *pp;
	*pp = d->next;
	ot->nidle--;
	rma__ofi_ep_close(d->serve);
	free(d->given);
	free(d);
}

static void ctl_fail(struct ofi_ctl *c, int err)
{
	struct ofi_peer *pe = c->peer;
	if (pe) {
		pe->ctl = NULL;
		rma__ofi_ctl_close(c);
		rma__ofi_peer_lost(pe, err);
		return;
	}
	if (c->step == CTL_SETUP || (c->step == CTL_ADDR && err == -ETIMEDOUT))
		rma__refused(&c->ot->refusals, err == -EACCES ? RMA__REFUSED_SECRET
				: err == -ETIMEDOUT ? RMA__REFUSED_TIMEOUT
				: RMA__REFUSED_PROTO, rma__now_ns());
	ctl_park(c);
}

static int setup_start(struct ofi_ctl *c, bool server)
{
	struct rma__setup_params sp = {
		.key = c->ot->key, .kind = OFI_SETUP_KIND,
		.engine_id = c->ot->engine_id,
		.expect_id = server ? 0 : c->peer->expect_id,
	};
	c->step = CTL_SETUP;
	return rma__setup_init(&c->s, c->w.fd, server, &sp);
}

/* Owner: put the initiator's address into its serving endpoint's AV: EFA
 * serves an RMA only from an address the target inserted.  Done for every
 * provider, where it is harmless.  Entries are never removed (the old
 * address of an endpoint the initiator closed, or a parked endpoint's last
 * peer): the provider may still be closing the connection from it, and an
 * entry is small.  So an endpoint holds at most OFI_SERVE_ADDRS addresses
 * (on_addr then moves its peer to a fresh one). */
static int serve_insert(struct ofi_ctl *c)
{
	struct ofi_ep *oe = c->serve;
	int rc;

	if (c->naddr >= OFI_SERVE_ADDRS)
		return -EMLINK;
	c->ifa = FI_ADDR_NOTAVAIL;
	rc = fi_av_insert(oe->av, c->iaddr, 1, &c->ifa, 0, NULL);
	if (rc == 1) {
		c->naddr++;
		return 0;
	}
	/* Not kept for another peer: a tcp;ofi_rxm AV that had refused an
	 * address (after a removal) was seen to refuse the next good one
	 * too (-EINVAL). */
	c->ifa = FI_ADDR_NOTAVAIL;
	rma__ofi_ep_close(oe);
	c->serve = NULL;
	return rc < 0 ? rma__ofi_err(rc) : -EADDRNOTAVAIL;
}

/* Owner: an initiator's address was refused.  Logged with its reason at
 * most once per refusal interval (anybody passes the handshake when there
 * is no secret); the count goes with the other refusals. */
static int addr_refused(struct ofi_ctl *c, const char *why, int err)
{
	struct ofi_tr *ot = c->ot;
	int64_t now = rma__now_ns();

	if (!ot->addr_warned || now - ot->addr_warned >= ot->refusals.interval_ns) {
		rma__warn("ofi: %s: refused a control connection: the initiator's "
			  "fabric address %s", ot->base.spec, why);
		ot->addr_warned = now;
	}
	rma__refused(&ot->refusals, RMA__REFUSED_PROTO, now);
	return err;
}

/* Owner: what an ADDR's bytes must be before they reach the provider: a
 * fixed-size address as long as our own (same provider and fabric), or
 * (FI_ADDR_STR, shm) a string ending inside them. */
static const char *addr_bad(const struct ofi_tr *ot, const uint8_t *a, size_t len)
{
	if (ot->info->addr_format == FI_ADDR_STR)
		return memchr(a, '\0', len) ? NULL : "is not a string";
	return len == ot->addr_len ? NULL : "has the wrong length";
}

/* Owner: the peer proved the secret and sent its address.  Give it an
 * endpoint of its own, holding that address: a parked one (its keys stay
 * on record) or, if fresh, a new one. */
static int welcome(struct ofi_ctl *c, bool fresh)
{
	struct ofi_tr *ot = c->ot;
	uint8_t m[MSG_LEN + OFI_ADDR_MAX];
	size_t al = OFI_ADDR_MAX;
	struct ofi_ctl *d = ot->idle;
	int rc;

	if (!fresh && d && !c->given) {
		ot->idle = d->next;
		ot->nidle--;
		c->serve = d->serve;
		c->naddr = d->naddr;
		c->given = d->given;
		c->ngiven = d->ngiven;
		c->capgiven = d->capgiven;
		free(d);
	} else if ((rc = rma__ofi_ep_open(ot, NULL, &c->serve))) {
		return rc;
	} else {
		c->naddr = 0;
	}
	if ((rc = serve_insert(c)))
		return addr_refused(c, rc == -EMLINK ? "is one too many"
				    : "was refused by the provider", rc);
	rc = fi_getname(&c->serve->ep->fid, m + MSG_LEN, &al);
	if (rc)
		return rma__ofi_err(rc);
	msg_put(m, MSG_WELCOME, 0, al, c->iseq, 0);
	c->step = CTL_UP;
	c->need = MSG_LEN;
	return send_all(c->w.fd, m, MSG_LEN + al);
}

/* Owner: ADDR, whole.  The first one gets the peer its serving endpoint
 * (WELCOME); a later one (the initiator replaced its endpoint) joins the
 * same AV (ADDED). */
static int on_addr(struct ofi_ctl *c, uint64_t len, uint64_t seq)
{
	const char *why = addr_bad(c->ot, c->in + MSG_LEN, len);
	uint8_t m[MSG_LEN];
	int rc;

	if (why)
		return addr_refused(c, why, -EPROTO);
	memcpy(c->iaddr, c->in + MSG_LEN, len);
	c->iaddr_len = len;
	c->iseq = seq;
	if (c->step == CTL_ADDR)
		return welcome(c, false);
	if ((rc = serve_insert(c)) == -EMLINK) {
		/* Its endpoint is full (the initiator replaced its own
		 * endpoint OFI_SERVE_ADDRS times): the peer moves to a fresh
		 * one, as after a revocation, rather than lose its
		 * connection and the ops waiting on it. */
		rma__ofi_ep_close(c->serve);
		c->serve = NULL;
		return welcome(c, true);
	}
	if (rc)
		return addr_refused(c, "was refused by the provider", rc);
	msg_put(m, MSG_ADDED, 0, 0, seq, 0);
	return send_all(c->w.fd, m, MSG_LEN);
}

static struct ofi_grant *grant_find(struct ofi_tr *ot, uint64_t core)
{
	for (struct ofi_grant *g = ot->grants; g; g = g->next)
		if (g->core == core)
			return g;
	return NULL;
}

/* Owner: KEY.  The fabric key of a live grant, remembered so that its
 * release can cut this peer off. */
static int answer_key(struct ofi_ctl *c, uint64_t core)
{
	struct ofi_grant *g = grant_find(c->ot, core);
	uint8_t m[MSG_LEN + RAWREC_MAX];
	bool known = false;
	int rl;

	if (!g) {
		msg_put(m, MSG_KEYS, -EKEYREJECTED, core, 0, 0);
		return send_all(c->w.fd, m, MSG_LEN);
	}
	for (unsigned i = 0; i < c->ngiven && !known; i++)
		known = c->given[i] == core;
	if (!known) {
		if (c->ngiven == c->capgiven) {
			unsigned cap = c->capgiven ? 2 * c->capgiven : 16;
			uint64_t *n = realloc(c->given, cap * sizeof *n);
			if (!n)
				return -ENOMEM;
			c->given = n;
			c->capgiven = cap;
		}
		c->given[c->ngiven++] = core;
	}
	if (!g->raw) {
		msg_put(m, MSG_KEYS, 0, core, g->key, g->base);
		return send_all(c->w.fd, m, MSG_LEN);
	}
	msg_put(m, MSG_KEYS, 0, core, FI_KEY_NOTAVAIL, g->base);
	rl = rma__ofi_rawrec_put(m + MSG_LEN, sizeof m - MSG_LEN,
				 &(struct ofi_rawkey){ .base = g->raw_base,
						       .bytes = g->raw,
						       .len = g->raw_len });
	return rl < 0 ? rl : send_all(c->w.fd, m, MSG_LEN + (size_t)rl);
}

/* A whole message is in c->in. */
static int on_msg(struct ofi_ctl *c)
{
	uint32_t type = rma__le32(c->in);
	int32_t status = (int32_t)rma__le32(c->in + 4);
	uint64_t a = rma__le64(c->in + 8), b = rma__le64(c->in + 16),
		 cc = rma__le64(c->in + 24);

	if (status > 0 || status < -4095)
		return -EPROTO;
	if (!c->peer && type == MSG_ADDR && !status) {
		/* The length is checked before a byte of the address is read:
		 * c->in holds OFI_ADDR_MAX of them. */
		if (!a || a > OFI_ADDR_MAX)
			return addr_refused(c, "is too long or empty", -EPROTO);
		if (c->need == MSG_LEN) {
			c->need += a;
			return 1;
		}
		return on_addr(c, a, b);
	}
	if (!c->peer) /* owner: else only KEY, once welcomed */
		return type == MSG_KEY && !status && c->step == CTL_UP
		       ? answer_key(c, a) : -EPROTO;
	if (c->step == CTL_WELCOME && type == MSG_WELCOME) {
		if (status)
			return status;
		if (!a || a > OFI_ADDR_MAX)
			return -EPROTO;
		if (c->need == MSG_LEN) { /* now the address */
			c->need += a;
			return 1;
		}
		c->step = CTL_UP;
		rma__timer_cancel(c->ot->e, &c->tm);
		rma__ofi_peer_up(c->peer, c->in + MSG_LEN, a, b);
		return 0;
	}
	if (c->step == CTL_UP && type == MSG_WELCOME) { /* moved */
		if (status || !a || a > OFI_ADDR_MAX)
			return -EPROTO;
		if (c->need == MSG_LEN) {
			c->need += a;
			return 1;
		}
		rma__ofi_peer_moved(c->peer, c->in + MSG_LEN, a);
		return 0;
	}
	if (c->step == CTL_UP && type == MSG_ADDED && !status) {
		rma__ofi_peer_added(c->peer, b);
		return 0;
	}
	if (c->step == CTL_UP && type == MSG_REVOKED) {
		rma__ofi_peer_key(c->peer, a, -EKEYREJECTED, 0, 0, NULL);
		return 0;
	}
	if (c->step == CTL_UP && type == MSG_KEYS &&
	    !status && b == FI_KEY_NOTAVAIL) { /* a raw key record follows */
		const uint8_t *rec = c->in + MSG_LEN;
		struct ofi_rawkey raw;
		int n;
		if (c->need == MSG_LEN) {
			c->need += OFI_RAWREC_HDR;
			return 1;
		}
		if (c->need == MSG_LEN + OFI_RAWREC_HDR) {
			n = rma__ofi_rawrec_size(rec, OFI_RAWREC_HDR);
			if (n < 0)
				return n;
			c->need = MSG_LEN + (size_t)n;
			return 1;
		}
		if (rma__ofi_rawrec_get(rec, c->need - MSG_LEN, &raw) < 0)
			return -EBADMSG;
		rma__ofi_peer_key(c->peer, a, 0, 0, cc, &raw);
		return 0;
	}
	if (c->step == CTL_UP && type == MSG_KEYS) {
		rma__ofi_peer_key(c->peer, a, status, b, cc, NULL);
		return 0;
	}
	return -EPROTO;
}

/* Read and act on whole messages: 0 (no more now), 1 (the connection was
 * closed meanwhile: leave it), or -errno, sticky (the caller fails the
 * connection). */
static int ctl_read(struct ofi_ctl *c)
{
	while (!c->err) {
		ssize_t n = recv(c->w.fd, c->in + c->have, c->need - c->have,
				 MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n <= 0) {
			c->err = n == 0 ? -ECONNRESET : -errno;
			break;
		}
		c->have += (size_t)n;
		if (c->have < c->need)
			continue;
		int rc = on_msg(c);
		if (rc == 1)
			continue; /* more of the same message */
		if (rc) {
			c->err = rc;
			break;
		}
		if (c->step == -1)
			return 1; /* closed meanwhile (its peer failed) */
		c->have = 0;
		c->need = MSG_LEN;
	}
	return c->err;
}

static void ctl_cb(struct rma__watch *w, uint32_t ev)
{
	struct ofi_ctl *c = container_of(w, struct ofi_ctl, w);
	int rc;

	if (c->step == CTL_CONNECTING) {
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			ctl_fail(c, -soerr);
			return;
		}
		if ((rc = setup_start(c, false))) {
			ctl_fail(c, rc);
			return;
		}
	}
	if (c->step == CTL_SETUP) {
		rc = rma__setup_run(&c->s);
		if (rc == -EINPROGRESS) {
			rc = rma__watch_mod(c->ot->e, w, rma__setup_events(&c->s));
			if (rc)
				ctl_fail(c, rc);
			return;
		}
		if (rc) {
			if (c->peer && rc == -EACCES)
				rma__warn("ofi: %s: the owner refused us, or failed to "
					  "prove the shared secret", c->ot->base.spec);
			ctl_fail(c, rc);
			return;
		}
		/* Authenticated: nothing before this point gave anything away.
		 * Within the caps on authenticated connections, or refused. */
		if (!c->peer && !rma__admit_up(&c->ot->admit, &c->adm))
			return;
		c->have = 0;
		c->need = MSG_LEN;
		/* The initiator opens its endpoint now and sends its address;
		 * the owner waits for it (under the handshake's deadline). */
		if (!c->peer) {
			c->step = CTL_ADDR;
		} else if ((rc = rma__ofi_peer_hello(c->peer))) {
			ctl_fail(c, rc);
			return;
		} else {
			c->step = CTL_WELCOME;
		}
		if ((rc = rma__watch_mod(c->ot->e, w, EPOLLIN))) {
			ctl_fail(c, rc);
			return;
		}
	}
	if ((rc = ctl_read(c)) == 1)
		return;
	if (rc == 0 && (ev & (EPOLLHUP | EPOLLERR)))
		rc = -ECONNRESET;
	if (rc)
		ctl_fail(c, rc);
}

void rma__ofi_ctl_poll(struct ofi_ctl *c)
{
	/* A failure is acted on by the watch, not here (inside a drain):
	 * EPOLLOUT fires at once on a connected socket. */
	if (c->step == CTL_UP && ctl_read(c) < 0)
		(void)rma__watch_mod(c->ot->e, &c->w, EPOLLIN | EPOLLOUT);
}

static struct ofi_ctl *ctl_new(struct ofi_tr *ot, int fd)
{
	struct ofi_ctl *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->ot = ot;
	c->w.fd = fd;
	c->w.cb = ctl_cb;
	c->w.release = ctl_release;
	c->ifa = FI_ADDR_NOTAVAIL;
	return c;
}

/* Owner: handshakes that do not finish in time are dropped; refusals are
 * reported as counts. */
static void tick_cb(struct rma__timer *tm)
{
	struct ofi_tr *ot = container_of(tm, struct ofi_tr, tick);
	int64_t now = rma__now_ns();
	bool pending = false;

	for (struct ofi_ctl *c = ot->served, *next; c; c = next) {
		next = c->next;
		if (c->step != CTL_SETUP && c->step != CTL_ADDR)
			continue;
		if (now > c->deadline)
			ctl_fail(c, -ETIMEDOUT);
		else
			pending = true;
	}
	rma__refusals_log(&ot->refusals, now);
	for (int i = 0; i < RMA__REFUSED_N; i++)
		pending |= ot->refusals.n[i] != 0;
	if (pending)
		rma__timer_arm(ot->e, tm, now + 100 * 1000000LL);
}

static void accept_cb(struct rma__watch *w, uint32_t ev)
{
	struct ofi_tr *ot = container_of(w, struct ofi_tr, lw);
	for (int i = 0; i < 32; i++) {
		struct sockaddr_storage sa;
		socklen_t sl = sizeof sa;
		uint8_t raddr[16];
		int fd = accept4(w->fd, (struct sockaddr *)&sa, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of fds: shed a handshake for the next round. */
			if (errno == EMFILE || errno == ENFILE) {
				rma__refused(&ot->refusals, RMA__REFUSED_LIMIT,
					     rma__now_ns());
				rma__admit_make_room(&ot->admit, NULL);
			}
			break;
		}
		/* One address cannot hold every handshake slot: its own
		 * oldest goes first. */
		rma__admit_raddr(&sa, raddr);
		rma__admit_make_room(&ot->admit, raddr);
		rma__tcp_tune_accepted(fd);
		struct ofi_ctl *c = ctl_new(ot, fd);
		if (!c) {
			close(fd);
			continue;
		}
		memcpy(c->adm.raddr, raddr, 16);
		c->deadline = rma__now_ns() + ot->admit.lim.handshake_ns;
		if (setup_start(c, true) || rma__watch_add(ot->e, &c->w, EPOLLIN)) {
			close(fd);
			free(c);
			continue;
		}
		c->next = ot->served;
		ot->served = c;
		ot->nserved++;
		rma__admit_handshake(&ot->admit, &c->adm);
	}
	if (ot->nserved && !rma__timer_armed(&ot->tick))
		rma__timer_arm(ot->e, &ot->tick, rma__now_ns() + 100 * 1000000LL);
}

/* The caps' view of a control connection (admit.h).  None is ever idle:
 * its peer's transfers need no control traffic, and closing it would
 * close their serving endpoint. */
static bool adm_silent(struct rma__admitted *a)
{
	struct ofi_ctl *c = container_of(a, struct ofi_ctl, adm);
	return c->step == CTL_SETUP && rma__admit_silent(&c->s, c->w.fd);
}

static void adm_evict(struct rma__admitted *a)
{
	ctl_park(container_of(a, struct ofi_ctl, adm));
}

static const struct rma__admit_ops adm_ops = {
	.silent = adm_silent,
	.evict = adm_evict,
};

int rma__ofi_ctl_limits(struct ofi_tr *ot, const struct rma__topts *o)
{
	ot->admit.ops = &adm_ops;
	ot->admit.refusals = &ot->refusals;
	return rma__admit_options("ofi", o, &rma__admit_ctl_defaults,
				  &ot->admit.lim);
}

int rma__ofi_ctl_listen(struct ofi_tr *ot, const char *at, const char *advertise)
{
	int fd, rc;

	ot->lw.fd = -1;
	ot->tick.cb = tick_cb;
	ot->refusals.who = "ofi";
	ot->refusals.interval_ns = 10 * 1000000000LL;
	fd = rma__tcp_listen("ofi", at, advertise, 1024, ot->ctl_addr,
			     &ot->ctl_addr_len);
	if (fd < 0)
		return fd;
	ot->lw.fd = fd;
	ot->lw.cb = accept_cb;
	rc = rma__watch_add(ot->e, &ot->lw, EPOLLIN);
	if (rc) {
		close(fd);
		ot->lw.fd = -1;
	}
	return rc;
}

void rma__ofi_ctl_fini(struct ofi_tr *ot)
{
	while (ot->served)
		rma__ofi_ctl_close(ot->served);
	while (ot->idle)
		idle_drop(ot, &ot->idle);
	rma__timer_cancel(ot->e, &ot->tick);
	/* Only at fini, when no poller is left: the watch lives in ot, which
	 * goes now, so it is not retired (closing drops it from epoll). */
	if (ot->lw.fd >= 0) {
		close(ot->lw.fd);
		ot->lw.fd = -1;
	}
}

static void hs_timer(struct rma__timer *tm)
{
	struct ofi_ctl *c = container_of(tm, struct ofi_ctl, tm);
	if (c->peer && c->step != CTL_UP)
		ctl_fail(c, -ETIMEDOUT);
}

int rma__ofi_ctl_connect(struct ofi_peer *pe, const uint8_t *ctl, size_t len)
{
	struct sockaddr_storage sa;
	socklen_t sl;
	struct ofi_ctl *c;
	int fd, rc;

	if (rma__tcp_sa_from_blob(ctl, len, &sa, &sl))
		return -EBADMSG;
	fd = rma__tcp_dial(&sa, sl);
	if (fd < 0)
		return fd;
	c = ctl_new(pe->ot, fd);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->peer = pe;
	c->step = CTL_CONNECTING;
	c->tm.cb = hs_timer;
	rc = rma__watch_add(pe->ot->e, &c->w, EPOLLOUT);
	if (rc) {
		close(fd);
		free(c);
		return rc;
	}
	rma__timer_arm(pe->ot->e, &c->tm, rma__now_ns() + OFI_HANDSHAKE_NS);
	pe->ctl = c;
	return 0;
}

int rma__ofi_ctl_addr(struct ofi_ctl *c, const void *addr, size_t len,
		      uint64_t seq)
{
	uint8_t m[MSG_LEN + OFI_ADDR_MAX];
	if (!len || len > OFI_ADDR_MAX)
		return -ENAMETOOLONG;
	msg_put(m, MSG_ADDR, 0, len, seq, 0);
	memcpy(m + MSG_LEN, addr, len);
	return send_all(c->w.fd, m, MSG_LEN + len);
}

int rma__ofi_ctl_ask(struct ofi_ctl *c, uint64_t core)
{
	uint8_t m[MSG_LEN];
	msg_put(m, MSG_KEY, 0, core, 0, 0);
	return send_all(c->w.fd, m, MSG_LEN);
}

/* Owner: this peer may be inside a transfer into a released window (a
 * put half received): only closing its serving endpoint stops that.  The
 * notice goes first, so the peer reads why before its transfers break. */
static int moved(struct ofi_ctl *c, uint64_t core)
{
	uint8_t m[MSG_LEN];
	msg_put(m, MSG_REVOKED, 0, core, 0, 0);
	int rc = send_all(c->w.fd, m, MSG_LEN);
	rma__ofi_ep_close(c->serve);
	c->serve = NULL;
	return rc ? rc : welcome(c, true);
}

void rma__ofi_ctl_revoke(struct ofi_tr *ot, uint64_t core)
{
	for (struct ofi_ctl **pp = &ot->idle; *pp;) {
		bool had = false;
		for (unsigned i = 0; i < (*pp)->ngiven && !had; i++)
			had = (*pp)->given[i] == core;
		if (had) /* its last peer may still be moving bytes */
			idle_drop(ot, pp);
		else
			pp = &(*pp)->next;
	}
	for (struct ofi_ctl *c = ot->served, *next; c; c = next) {
		next = c->next;
		for (unsigned i = 0; i < c->ngiven; i++)
			if (c->given[i] == core) {
				c->given[i] = c->given[--c->ngiven];
				if (moved(c, core))
					rma__ofi_ctl_close(c);
				break;
			}
	}
}

void rma__ofi_ctl_progress(struct ofi_tr *ot)
{
	for (struct ofi_ctl *c = ot->served; c; c = c->next)
		if (c->serve)
			rma__ofi_cq_poll(c->serve);
	for (struct ofi_ctl *d = ot->idle; d; d = d->next)
		rma__ofi_cq_poll(d->serve);
}

int rma__ofi_ctl_arm(struct ofi_tr *ot)
{
	for (struct ofi_ctl *c = ot->served; c; c = c->next) {
		struct fid *f;
		if (!c->serve)
			continue;
		f = &c->serve->cq->fid;
		if (fi_trywait(ot->fabric, &f, 1))
			return -EAGAIN;
	}
	for (struct ofi_ctl *d = ot->idle; d; d = d->next) {
		struct fid *f = &d->serve->cq->fid;
		if (fi_trywait(ot->fabric, &f, 1))
			return -EAGAIN;
	}
	return 0;
}

int rma__ofi_ctl_holding(struct rma__transport *t, const void *addr, size_t len)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	int n = 0;
	for (struct ofi_ctl *c = ot->served; c; c = c->next) {
		uint8_t got[OFI_ADDR_MAX];
		size_t gl = sizeof got;
		/* The provider's answer, not our copy of what we inserted. */
		if (c->serve && c->ifa != FI_ADDR_NOTAVAIL &&
		    fi_av_lookup(c->serve->av, c->ifa, got, &gl) == 0 &&
		    gl == len && !memcmp(got, addr, len))
			n++;
	}
	return n;
}
