/*
 * peer.c - peers and the data path.
 *
 * Each peer gets an endpoint of its own (with its own completion queue and
 * address vector) holding one AV entry: the owner's serving address.
 * libfabric cannot cancel a posted RMA, so when an op dies with chunks
 * posted, abort() answers RMA__ABORT_PENDING and gives the provider a
 * short grace to report them; after that the peer's endpoint is closed
 * (a reset), which stops the provider touching any of its buffers, and
 * every chunk it held is reported.  The next post opens a fresh endpoint.
 * Other peers never notice.
 *
 * A peer of an rma owner opens its endpoint when the handshake passes
 * and sends the owner its fabric address, which the owner inserts into
 * this peer's serving endpoint's AV (EFA's rule: the target inserts the
 * initiator first).  Every later endpoint (after a reset, or a move to a
 * new serving endpoint) sends its address again, and posts wait until
 * the owner confirms it (ctl.c).
 *
 * A peer of an rma owner first passes the handshake on a control
 * connection (ctl.c): the owner's serving address for this peer and the
 * grants' fabric keys come from there, asked for on a key's first use.
 * Keys the provider needs mapped (FI_MR_RAW, rawkey.c) are mapped when
 * they arrive, held by each chunk posted with them, and unmapped once
 * dropped and no longer held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport/ofi/ofi.h"

static struct ofi_key *key_find(struct ofi_peer *pe, uint64_t core)
{
	return rma__ofi_keys_find(&pe->keys, core);
}

/* A failed chunk: if its grant was released, that is the reason it gets
 * (however the provider reports a cut connection). */
static int chunk_err(struct ofi_ctx *c, int err)
{
	struct ofi_key *k;
	if (err < 0 && c->peer->authed &&
	    (k = key_find(c->peer, c->core)) && k->state == -EKEYREJECTED)
		return -EKEYREJECTED;
	return err;
}

static void list_init(struct ofi_ctx *h)
{
	h->prev = h->next = h;
}

static struct ofi_ctx *ctx_get(struct ofi_tr *ot)
{
	struct ofi_ctx *c = ot->free_ctx;
	if (c) {
		ot->free_ctx = c->next;
		return c;
	}
	return malloc(sizeof *c);
}

static void ctx_put(struct ofi_tr *ot, struct ofi_ctx *c)
{
	c->next = ot->free_ctx;
	ot->free_ctx = c;
}

/* Chunk c is over: report it and recycle its context. */
static void ctx_done(struct ofi_ctx *c, int res)
{
	struct ofi_peer *pe = c->peer;
	struct ofi_tr *ot = pe->ot;
	uint64_t id = c->op_id, len = c->len;
	if (c->map) /* the provider is done with this chunk's key */
		rma__ofi_map_put(ot->domain, c->map);
	c->prev->next = c->next;
	c->next->prev = c->prev;
	pe->n--;
	ctx_put(ot, c);
	rma__xfer_done(ot->e, id, len, res);
}

/* The owner's serving address into the peer's endpoint's AV. */
static int owner_insert(struct ofi_peer *pe)
{
	int rc = fi_av_insert(pe->oe->av, pe->addr, 1, &pe->fa, 0, NULL);
	if (rc == 1)
		return 0;
	rma__warn("ofi: fi_av_insert: %s", rc < 0 ? rma__fi.strerror(-rc)
						 : "address refused");
	return rc < 0 ? rma__ofi_err(rc) : -EHOSTUNREACH;
}

/* Open the peer's endpoint, with the owner's serving address in its AV
 * once known.  A peer of an rma owner also sends the owner this
 * endpoint's own address (ADDR), and posts nothing from it until the owner
 * says it inserted it (WELCOME or ADDED): on EFA an RMA works only once
 * the target has the initiator's address in its AV. */
static int peer_open(struct ofi_peer *pe)
{
	uint8_t name[OFI_ADDR_MAX];
	size_t nl = sizeof name;
	int rc = rma__ofi_ep_open(pe->ot, pe, &pe->oe);
	if (rc)
		return rc;
	if (pe->addr_len && (rc = owner_insert(pe)))
		goto fail;
	if (pe->ctl) {
		rc = fi_getname(&pe->oe->ep->fid, name, &nl);
		if (rc) {
			rc = rc == -FI_ETOOSMALL ? -ENAMETOOLONG : rma__ofi_err(rc);
			goto fail;
		}
		if ((rc = rma__ofi_ctl_addr(pe->ctl, name, nl, ++pe->addr_seq)))
			goto fail;
		pe->addr_wait = true;
	}
	return 0;
fail:
	rma__ofi_ep_close(pe->oe);
	pe->oe = NULL;
	return rc;
}

int rma__ofi_peer_hello(struct ofi_peer *pe)
{
	return peer_open(pe);
}

/* Close the peer's endpoint: from here on the provider touches none of its
 * chunks' memory; each is reported with err. */
static void peer_reset(struct ofi_peer *pe, int err)
{
	pe->reset_due = false;
	pe->reset_by = 0;
	if (pe->oe) {
		rma__ofi_ep_close(pe->oe);
		pe->oe = NULL;
	}
	while (pe->inflight.next != &pe->inflight)
		ctx_done(pe->inflight.next, chunk_err(pe->inflight.next, err));
}

/* A completion error as the -errno its op gets.  The remote refusing a key
 * or an address shows as ECANCELED (tcp;ofi_rxm), EACCES (sockets) or
 * EKEYREJECTED; all mean the window is not (or no longer) there.  A
 * broken connection is -ECONNRESET. */
static int cq_errno(int err, int prov_errno)
{
	/* tcp;ofi_rxm: ECANCELED also ends every transfer of a connection
	 * that broke; its provider errno says which. */
	if (err == ECANCELED && (prov_errno == ENOTCONN || prov_errno == EPIPE ||
				 prov_errno == ECONNRESET))
		err = ECONNRESET;
	switch (err) {
	case ECANCELED: case EACCES: case EKEYREJECTED: case EINVAL:
		return -EKEYREJECTED;
	case ENOTCONN: case ECONNRESET: case EPIPE: case ECONNREFUSED:
	case ECONNABORTED: case EHOSTUNREACH:
		return -ECONNRESET;
	case ETIMEDOUT:
		return -ETIMEDOUT;
	default:
		return err > 0 && err < 256 ? -err : -EIO;
	}
}

/*
 * A reset is due (the connection broke): close the endpoint once the
 * provider has reported every chunk it holds, or after OFI_RESET_GRACE_NS.
 * Not at once: closing a tcp;ofi_rxm endpoint while its broken connection
 * still holds transfers crashes libfabric 1.17 inside fi_close (it handles
 * the cancelled transfers' completions after freeing them), and a killed
 * peer's connection reports them all within a few progress rounds.
 */
static void reset_soon(struct ofi_peer *pe)
{
	/* The grace belongs to a due reset, and goes with it (peer_reset,
	 * abort_timer): a move with no endpoint sets none, so a later break
	 * gets its full grace. */
	if (pe->reset_due && !pe->reset_by)
		pe->reset_by = rma__now_ns() + OFI_RESET_GRACE_NS;
	int64_t at = pe->n && pe->reset_due ? pe->reset_by : 0;
	if (!rma__timer_armed(&pe->abort_tm) || pe->abort_tm.at > at)
		rma__timer_arm(pe->ot->e, &pe->abort_tm, at);
}

int rma__ofi_cq_drain(struct ofi_ep *oe)
{
	struct fi_cq_entry ent[OFI_CQ_BATCH];
	struct ofi_peer *pe = oe->peer;
	int taken = 0;

	for (int round = 0; round < 64; round++) {
		ssize_t n = fi_cq_read(oe->cq, ent, OFI_CQ_BATCH);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				if (ent[i].op_context)
					ctx_done(ent[i].op_context, 0);
			taken += (int)n;
			/* A short read emptied the queue: another would only
			 * run the provider's progress again, between this
			 * completion and the caller waiting for it. */
			if (n < OFI_CQ_BATCH)
				break;
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};
			char buf[128];
			if (fi_cq_readerr(oe->cq, &ee, 0) < 1)
				break;
			const char *why = fi_cq_strerror(oe->cq, ee.prov_errno,
							 ee.err_data, buf, sizeof buf);
			int res = cq_errno(ee.err, ee.prov_errno);
			/* Cut off by a release?  Its notice came first. */
			if (res != -EKEYREJECTED && pe && pe->ctl && ee.op_context) {
				rma__ofi_ctl_poll(pe->ctl);
				res = chunk_err(ee.op_context, res);
			}
			rma__info("ofi: %s: transfer failed: %s (%d), provider: %s (%d)",
				  oe->ot->base.spec, rma__fi.strerror(ee.err), ee.err,
				  why ? why : "", ee.prov_errno);
			/* A broken connection, or a refusal on tcp;ofi_rxm (which
			 * drops the connection then and takes seconds to make a
			 * new one): a new endpoint connects at once.  sockets
			 * keeps its connection after a refusal. */
			if (pe && (res == -ECONNRESET ||
				   (res == -EKEYREJECTED && !strcmp(oe->ot->prov, "tcp"))))
				pe->reset_due = true;
			if (ee.op_context)
				ctx_done(ee.op_context, res);
			taken++;
			continue;
		}
		if (n != -FI_EAGAIN)
			rma__warn("ofi: %s: completion queue: %s", oe->ot->base.spec,
				  rma__fi.strerror((int)-n));
		break;
	}
	if (taken) {
		oe->last_taken = oe->worked = rma__now_ns();
		if (!oe->has_fd && oe->watched)
			rma__watch_touch(oe->ot->e, &oe->w);
	}
	if (pe && pe->stalled) {
		pe->stalled = false;
		rma__peer_kick(&pe->base);
	}
	if (pe && pe->reset_due)
		reset_soon(pe);
	return taken;
}

/* The abort grace is over, or a reset is due: drain once more, then close
 * the endpoint if a dead op still has chunks posted or the connection is
 * known broken. */
static void abort_timer(struct rma__timer *tm)
{
	struct ofi_peer *pe = container_of(tm, struct ofi_peer, abort_tm);
	bool dead = pe->reset_due || pe->moved;
	if (pe->oe)
		rma__ofi_cq_drain(pe->oe);
	for (struct ofi_ctx *c = pe->inflight.next; c != &pe->inflight && !dead;
	     c = c->next)
		dead = !rma__op_live(pe->ot->e, c->op_id);
	if (pe->moved && pe->ctl)
		rma__ofi_ctl_poll(pe->ctl); /* revocations before the move */
	/* A broken connection's chunks are the provider's to report first
	 * (reset_soon): an abort's grace that ends meanwhile waits for them
	 * too, since a dead op's chunks are reported by the close anyway. */
	if (pe->reset_due && pe->n && rma__now_ns() < pe->reset_by) {
		rma__timer_arm(pe->ot->e, &pe->abort_tm, pe->reset_by);
		return;
	}
	if (dead && pe->n)
		peer_reset(pe, -ECONNRESET);
	else if (dead && pe->oe) { /* nothing in flight: reopen lazily */
		rma__ofi_ep_close(pe->oe);
		pe->oe = NULL;
		pe->reset_due = false;
		pe->reset_by = 0;
	}
	if (pe->moved) { /* the next post opens an endpoint to the new one */
		memcpy(pe->addr, pe->new_addr, pe->new_addr_len);
		pe->addr_len = pe->new_addr_len;
		pe->moved = false;
	}
}

int rma__ofi_connect(struct rma__transport *t, const void *blob, size_t len,
		     uint64_t engine_id, struct rma__peer **out)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	const char *prov, *fab;
	const uint8_t *addr, *ctl;
	size_t pl, fl, al, cl;
	uint64_t key, base;
	bool has_key;
	struct ofi_peer *pe;
	int rc;

	/* A plain peer (raw.c) runs no engine: nothing to check beyond its
	 * address, and the fabric checks each request's key and bounds. */
	if (rma__ofi_plain(blob, len)
	    ? rma__ofi_plain_parse(blob, len, &prov, &pl, &addr, &al, &key, &base)
	    : rma__ofi_blob_parse(blob, len, &prov, &pl, &fab, &fl, &addr, &al,
				  &key, &base, &has_key))
		return -EBADMSG;
	bool has_ctl = rma__ofi_blob_ctl(blob, len, &ctl, &cl) == 0;
	if (!has_ctl && !ot->open) {
		/* No control address, no handshake: such a peer cannot prove
		 * the secret, and ops to it would bypass what it protects. A
		 * token may say so whoever made it (rma's owners never do). */
		if (!ot->noctl_refused)
			rma__err("ofi: %s: a shared secret is set: refusing a "
				 "peer with no control address, which cannot "
				 "prove it", ot->base.spec);
		ot->noctl_refused = true;
		return -EACCES;
	}
	pe = calloc(1, sizeof *pe);
	if (!pe)
		return -ENOMEM;
	pe->ot = ot;
	pe->expect_id = engine_id;
	list_init(&pe->inflight);
	pe->abort_tm.cb = abort_timer;
	pe->base.max_msg = ot->max_msg;
	pe->base.credits = ot->tx_size;
	if (has_ctl) {
		/* An rma owner: nothing reaches it before the handshake. */
		pe->authed = true;
		rc = rma__ofi_ctl_connect(pe, ctl, cl);
		if (rc)
			rma__peer_failed(&pe->base, rc);
	} else {
		/* A target without a control address: its token holds the
		 * fabric key itself. */
		memcpy(pe->addr, addr, al);
		pe->addr_len = al;
		rc = peer_open(pe);
		if (rc) {
			free(pe);
			return rc;
		}
		/* RDM has no connect: the provider connects on first use (rxm
		 * answers -EAGAIN meanwhile). */
		rma__peer_ready(&pe->base);
	}
	pe->next = ot->peers;
	ot->peers = pe;
	*out = &pe->base;
	return 0;
}

void rma__ofi_peer_up(struct ofi_peer *pe, const uint8_t *addr, size_t len,
		      uint64_t seq)
{
	int rc = -EPROTO;
	memcpy(pe->addr, addr, len);
	pe->addr_len = len;
	/* The owner must hold the address of the endpoint we have. */
	if (!pe->oe || seq != pe->addr_seq || (rc = owner_insert(pe))) {
		rma__ofi_peer_lost(pe, rc);
		return;
	}
	pe->addr_wait = false;
	rma__peer_ready(&pe->base);
}

void rma__ofi_peer_added(struct ofi_peer *pe, uint64_t seq)
{
	/* An answer about an endpoint closed since is no news. */
	if (pe->oe && pe->addr_wait && seq == pe->addr_seq) {
		pe->addr_wait = false;
		rma__peer_kick(&pe->base);
	}
}

/* The control connection is gone (or never came up): the owner is gone,
 * refused us, or is another engine.  Every chunk in flight ends now, not
 * at its deadline. */
void rma__ofi_peer_lost(struct ofi_peer *pe, int err)
{
	if (pe->ctl) {
		rma__ofi_ctl_close(pe->ctl);
		pe->ctl = NULL;
	}
	rma__timer_cancel(pe->ot->e, &pe->abort_tm);
	if (pe->oe && pe->n)
		rma__ofi_cq_drain(pe->oe); /* take what has finished */
	rma__timer_cancel(pe->ot->e, &pe->abort_tm);
	if (pe->oe && pe->n) {
		/* The provider reports the rest (reset_soon). */
		pe->reset_due = true;
		reset_soon(pe);
	} else {
		peer_reset(pe, err);
	}
	rma__peer_failed(&pe->base, err);
}

void rma__ofi_peer_key(struct ofi_peer *pe, uint64_t core, int status,
		       uint64_t fkey, uint64_t base, const struct ofi_rawkey *raw)
{
	struct ofi_key *k = key_find(pe, core);
	/* Not asked (or dropped meanwhile: asked again on use), or known and
	 * this is not a revocation. */
	if (!k || (k->state != 0 && status == 0))
		return;
	rma__ofi_keys_set(k, pe->ot->domain, pe->ot->raw_u64, status, fkey, base,
			  raw);
	rma__peer_kick(&pe->base);
}

void rma__ofi_peer_moved(struct ofi_peer *pe, const uint8_t *addr, size_t len)
{
	memcpy(pe->new_addr, addr, len);
	pe->new_addr_len = len;
	pe->moved = true;
	/* The owner closed the endpoint we send to: our connection to it is
	 * broken, only not yet seen, and is reset as any other (reset_soon).
	 * Not here: this may run inside a drain of the endpoint to close. */
	if (pe->oe)
		pe->reset_due = true;
	reset_soon(pe);
}

/* The fabric key and base for a token's core key: 0, -EAGAIN (asked; the
 * answer kicks the peer) or -errno. */
static int key_get(struct ofi_peer *pe, uint64_t core, struct ofi_key **out)
{
	struct ofi_key *k = key_find(pe, core);
	int rc;
	if (k) {
		*out = k;
		return k->state > 0 ? 0 : k->state == 0 ? -EAGAIN : k->state;
	}
	if (!pe->ctl)
		return -ECONNRESET;
	if ((rc = rma__ofi_keys_add(&pe->keys, pe->ot->domain, core, &k)))
		return rc;
	if ((rc = rma__ofi_ctl_ask(pe->ctl, core))) {
		pe->keys.n--; /* the entry just added */
		return rc;
	}
	return -EAGAIN;
}

/* A peer without a control connection: the token's key, mapped first
 * where the domain needs it (FI_MR_RAW) or the token holds key bytes.
 * The table is indexed by the token's key (the core key for key bytes). */
static int key_local(struct ofi_peer *pe, const struct rma__rkey *rk,
		     struct ofi_key **out)
{
	struct ofi_key *k = key_find(pe, rk->key);
	struct ofi_rawkey raw;
	int rc;

	if (!k) {
		if (rk->raw && rma__ofi_rawrec_get(rk->raw, rk->raw_len, &raw) < 0)
			return -EBADMSG; /* ad_parse checked it */
		if ((rc = rma__ofi_keys_add(&pe->keys, pe->ot->domain, rk->key, &k)))
			return rc;
		rma__ofi_keys_set(k, pe->ot->domain, pe->ot->raw_u64, 0, rk->key,
				  rk->base, rk->raw ? &raw : NULL);
	}
	*out = k;
	return k->state > 0 ? 0 : k->state;
}

void rma__ofi_disconnect(struct rma__peer *p, int err)
{
	struct ofi_peer *pe = container_of(p, struct ofi_peer, base);
	struct ofi_tr *ot = pe->ot;
	struct ofi_peer **pp = &ot->peers;

	while (*pp && *pp != pe)
		pp = &(*pp)->next;
	if (*pp)
		*pp = pe->next;
	rma__timer_cancel(ot->e, &pe->abort_tm);
	if (pe->oe && pe->n)
		rma__ofi_cq_drain(pe->oe); /* take what has finished */
	/* A broken connection's chunks are the provider's to report before
	 * the close (reset_soon): a lost peer destroyed for a fresh one, or
	 * by the engine, waits out what is left of that grace here. */
	while (pe->oe && pe->n && pe->reset_due && rma__now_ns() < pe->reset_by) {
		struct timespec ts = { 0, 200 * 1000 };
		nanosleep(&ts, NULL);
		rma__ofi_cq_drain(pe->oe);
	}
	rma__timer_cancel(ot->e, &pe->abort_tm);
	peer_reset(pe, err); /* every chunk reported: no mapping is held */
	if (pe->ctl)
		rma__ofi_ctl_close(pe->ctl);
	rma__ofi_keys_clear(&pe->keys, ot->domain);
	free(pe);
}

int rma__ofi_post(struct rma__peer *p, const struct rma__xfer *x)
{
	struct ofi_peer *pe = container_of(p, struct ofi_peer, base);
	struct ofi_tr *ot = pe->ot;
	struct ofi_ctx *c;
	ssize_t rc;
	int err;

	uint64_t rkey = x->rk->key, raddr = x->raddr;
	struct ofi_key *k = NULL;
	if (pe->reset_due || pe->moved)
		return -EAGAIN; /* the reset timer runs this round */
	if (pe->authed) {
		/* The token names the grant by its core key; the owner told
		 * us (and only after the handshake) its fabric key. */
		if ((err = key_get(pe, rkey, &k)))
			return err;
		rkey = k->fkey;
		raddr = k->base + (x->raddr - x->rk->base);
	} else if (x->rk->raw || ot->raw_u64) {
		if ((err = key_local(pe, x->rk, &k)))
			return err;
		rkey = k->fkey;
	}
	if (!pe->oe && (err = peer_open(pe)))
		return err;
	if (pe->addr_wait)
		return -EAGAIN; /* ADDED kicks the peer */
	c = ctx_get(ot);
	if (!c)
		return -ENOMEM;
	c->peer = pe;
	c->core = x->rk->key;
	c->map = NULL;
	c->op_id = x->op_id;
	c->len = x->len;
	void *desc = x->ldesc ? fi_mr_desc(x->ldesc) : NULL;
	if (x->kind == RMA_OP_PUT) {
		struct iovec iov = { x->laddr, x->len };
		struct fi_rma_iov riov = { raddr, x->len, rkey };
		struct fi_msg_rma m = {
			.msg_iov = &iov, .desc = &desc, .iov_count = 1,
			.addr = pe->fa, .rma_iov = &riov, .rma_iov_count = 1,
			.context = &c->fctx,
		};
		/* Completion means the bytes are in the target's memory. */
		rc = fi_writemsg(pe->oe->ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION);
	} else {
		rc = fi_read(pe->oe->ep, x->laddr, x->len, desc, pe->fa, raddr,
			     rkey, &c->fctx);
	}
	if (rc == 0) {
		if (k && k->map) { /* held until this chunk is reported */
			c->map = k->map;
			c->map->refs++;
		}
		c->prev = pe->inflight.prev;
		c->next = &pe->inflight;
		c->prev->next = c;
		pe->inflight.prev = c;
		pe->n++;
		pe->oe->worked = rma__now_ns();
		if (!pe->oe->has_fd)
			rma__wake_sleeper(ot->e); /* no fd tells of its end */
		return 0;
	}
	ctx_put(ot, c);
	if (rc == -FI_EAGAIN) {
		/* Out of resources or still connecting: progress, then the
		 * core retries (kicked from the drain), within the deadline. */
		pe->stalled = true;
		return -EAGAIN;
	}
	err = cq_errno((int)-rc, 0);
	/* sockets: -FI_ENOENT when its connection to the owner failed */
	if (err == -ECONNRESET || (rc == -FI_ENOENT && pe->authed)) {
		/* The connection is gone: a new endpoint connects afresh. */
		pe->reset_due = true;
		reset_soon(pe);
		return -EAGAIN;
	}
	rma__warn("ofi: %s: post: %s", ot->base.spec, rma__fi.strerror((int)-rc));
	return err;
}

int rma__ofi_abort(struct rma__peer *p, uint64_t op_id, int err)
{
	struct ofi_peer *pe = container_of(p, struct ofi_peer, base);
	bool posted = false;
	for (struct ofi_ctx *c = pe->inflight.next; c != &pe->inflight && !posted;
	     c = c->next)
		posted = c->op_id == op_id;
	if (!posted)
		return 0;
	/* The provider may still write a get's buffer or read a put's: wait
	 * for its word, and close the endpoint if it does not come soon. */
	if (!rma__timer_armed(&pe->abort_tm))
		rma__timer_arm(pe->ot->e, &pe->abort_tm,
			       rma__now_ns() + OFI_ABORT_GRACE_NS);
	return RMA__ABORT_PENDING;
}

/*
 * Read a queue in this round unless its event already did, and only while
 * it can have work: a peer's with chunks posted; one whose fd told of work
 * within OFI_BUSY_NS (requests come in runs, and tcp keeps what it read
 * ahead in its own buffer, out of the fd's sight); one without a wait fd;
 * and any other once every OFI_IDLE_POLL_NS, for what its fd does not
 * tell.  Each read runs the provider's progress, a system call or more: a
 * spinning round that read every idle serving queue cost a microsecond per
 * endpoint, and the request waiting in the busy one waited for them all.
 */
void rma__ofi_cq_poll(struct ofi_ep *oe)
{
	if (oe->drained) {
		oe->drained = false;
		return;
	}
	int64_t now = rma__now_ns();
	if ((oe->peer && oe->peer->n) || !oe->watched ||
	    now - oe->seen < OFI_BUSY_NS || now - oe->polled >= OFI_IDLE_POLL_NS) {
		oe->polled = now;
		rma__ofi_cq_drain(oe);
	}
}

void rma__ofi_progress(struct rma__transport *t)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	/* Peers' queues every round: their completions are what a caller
	 * waits for. */
	for (struct ofi_peer *pe = ot->peers; pe; pe = pe->next)
		if (pe->oe)
			rma__ofi_cq_poll(pe->oe);
	/* The passive side too: providers connect and serve remote ops only
	 * while the serving endpoints' queues are read (their wait fds do not
	 * tell of every request). */
	rma__ofi_cq_poll(ot->serve);
	rma__ofi_ctl_progress(ot);
}

int rma__ofi_arm(struct rma__transport *t)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	struct fid *f;
	if (!ot->wait_fd)
		return 0; /* polled every poll_ns */
	f = &ot->serve->cq->fid;
	if (fi_trywait(ot->fabric, &f, 1) || rma__ofi_ctl_arm(ot))
		return -EAGAIN;
	int64_t now = rma__now_ns(), look = 0;
	for (struct ofi_peer *pe = ot->peers; pe; pe = pe->next) {
		if (!pe->oe)
			continue;
		if (!pe->oe->has_fd) {
			/* Polled: no fd wakes us for its chunks.  Spin while
			 * they move; a queue with nothing reported for
			 * OFI_POLL_SPIN_NS (a stalled or dead peer) is looked
			 * at every OFI_IDLE_POLL_NS instead. */
			if (pe->n && now - pe->oe->worked < OFI_POLL_SPIN_NS)
				return -EAGAIN;
			if (pe->n)
				look = now + OFI_IDLE_POLL_NS;
			continue;
		}
		f = &pe->oe->cq->fid;
		if (fi_trywait(ot->fabric, &f, 1))
			return -EAGAIN;
	}
	if (look && (!rma__timer_armed(&ot->look) || ot->look.at > look))
		rma__timer_arm(ot->e, &ot->look, look);
	return 0;
}

/* The look is due: the round it ends reads every queue with chunks. */
void rma__ofi_look(struct rma__timer *tm)
{
	(void)tm;
}

void rma__ofi_peers_fini(struct ofi_tr *ot)
{
	rma__timer_cancel(ot->e, &ot->look);
	while (ot->peers)
		rma__ofi_disconnect(&ot->peers->base, -ECANCELED);
}

int rma__ofi_peer_posted(struct rma__transport *t)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	if (!ot->peers || !ot->peers->oe)
		return -ENOENT;
	return (int)ot->peers->n;
}

int rma__ofi_peer_name(struct rma__transport *t, void *buf, size_t cap)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	size_t len = cap;
	if (!ot->peers || !ot->peers->oe)
		return -ENOENT;
	if (fi_getname(&ot->peers->oe->ep->fid, buf, &len))
		return -ENOSPC;
	return (int)len;
}
