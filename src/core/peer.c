/*
 * peer.c - peers, routing and fallback.
 *
 * A peer is one remote engine reached through one transport instance.  The
 * route to the owner of an advertisement is the highest-level instance that
 * (a) knows an entry of it, (b) finds it reachable, (c) registered the
 * op's local region, and (d) has not just failed to connect to that engine.
 * When a connect fails, the ops that have not started move to the next
 * route within their own deadlines; the failed instance is passed over for
 * RETRY_NS, unless it is the only route there is (a restarted target is
 * reconnected at once).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define RETRY_NS (1000LL * 1000000)

/* Engine ids are random: the id mixed with the instance is hash enough. */
static unsigned slot_of(const struct rma_engine *e, uint64_t engine_id,
			const struct rma__transport *t)
{
	uint64_t h = (engine_id ^ (uint64_t)t->index) * 0x9E3779B97F4A7C15ull;
	return (unsigned)(h >> 32) & (e->ptab_cap - 1);
}

struct rma__peer *rma__peer_find(struct rma_engine *e, uint64_t engine_id,
				 const struct rma__transport *t)
{
	for (struct rma__peer *p = e->ptab[slot_of(e, engine_id, t)]; p; p = p->hnext)
		if (p->engine_id == engine_id && p->t == t)
			return p;
	return NULL;
}

/* A failed peer stays as a marker: routing passes over it for RETRY_NS
 * and rma_peer_route reports its error.  Engines are never reborn under
 * their id, so in a long-lived initiator the markers of dead targets would
 * pile up (a few hundred bytes each, more through a provider): one with no
 * ops left goes RMA__MARKER_NS after its retry time, swept when a later
 * peer is added, at most once per RETRY_NS. */
static void sweep_markers(struct rma_engine *e)
{
	int64_t now = rma__now_ns();
	if (now < e->sweep_at)
		return;
	e->sweep_at = now + RETRY_NS;
	for (struct rma__peer *p = e->peers, *next; p; p = next) {
		next = p->next;
		/* (inflight: an op that ended early, its chunks still out,
		 * hears of them through this peer) */
		if (p->state == RMA__PEER_FAILED && !p->inflight &&
		    rma__list_empty(&p->ops) && now - p->retry_at >= RMA__MARKER_NS)
			rma__peer_destroy(e, p, p->error);
	}
}

/* Add p (t and engine_id set) to the list and the table, which doubles
 * when half full (if memory allows; else its chains just grow longer).
 * Only connects get here, never the data path. */
static void peer_link(struct rma_engine *e, struct rma__peer *p)
{
	sweep_markers(e);
	if (e->npeers + 1 > e->ptab_cap / 2) {
		unsigned cap = e->ptab_cap * 2;
		struct rma__peer **tab = calloc(cap, sizeof *tab);
		if (tab) {
			struct rma__peer **old = e->ptab;
			e->ptab = tab;
			e->ptab_cap = cap;
			for (struct rma__peer *q = e->peers; q; q = q->next) {
				unsigned i = slot_of(e, q->engine_id, q->t);
				q->hnext = tab[i];
				tab[i] = q;
			}
			free(old);
		}
	}
	unsigned i = slot_of(e, p->engine_id, p->t);
	p->hnext = e->ptab[i];
	e->ptab[i] = p;
	p->next = e->peers;
	e->peers = p;
	e->npeers++;
}

static bool passed_over(const struct rma__peer *p, int64_t *now)
{
	if (!p || p->state != RMA__PEER_FAILED)
		return false;
	if (!*now)
		*now = rma__now_ns();
	return *now < p->retry_at;
}

int rma__route(struct rma_engine *e, const rma_remote *r,
	       const struct rma_region *local, unsigned skip,
	       struct rma__transport **tp, const struct rma__rentry **entp)
{
	struct rma__transport *best = NULL, *spare = NULL;
	const struct rma__rentry *bent = NULL, *sent = NULL;
	int64_t now = 0;

	if (!skip && rma__rc_hit(e, r, local)) {
		*tp = e->rc.t;
		*entp = e->rc.ent;
		return 0;
	}
	if (r->plain && e->p.secret && *e->p.secret) {
		/* No handshake with a plain fabric peer: it cannot prove the
		 * secret, and ops to it would bypass what the secret protects. */
		if (!e->plain_refused)
			rma__err("a shared secret is set: refusing a plain fabric "
				 "peer, which cannot prove it");
		e->plain_refused = true;
		return -EACCES;
	}

	for (unsigned k = 0; k < r->nent; k++) {
		const struct rma__rentry *ent = &r->ent[k];
		for (unsigned i = 0; i < e->ntr; i++) {
			struct rma__transport *t = e->tr[i];
			if (t->ops->wire_id != ent->wire_id || (skip & 1u << i) ||
			    (local && !(local->tmask & 1u << i)) ||
			    t->ops->reachable(t, ent->blob, ent->len))
				continue;
			if (passed_over(rma__peer_find(e, r->engine_id, t), &now)) {
				if (!spare || t->level > spare->level) {
					spare = t;
					sent = ent;
				}
			} else if (!best || t->level > best->level) {
				best = t;
				bent = ent;
			}
		}
	}
	if (!best) { /* only routes that just failed: try again */
		best = spare;
		bent = sent;
	}
	if (!best)
		return -EHOSTUNREACH;
	if (local && !skip && !spare) { /* time plays no part: keep it */
		if (e->rc.r != r) {
			if (e->rc.r)
				rma__remote_unref(e->rc.r);
			rma__remote_ref((rma_remote *)r);
			e->rc.r = (rma_remote *)r;
		}
		e->rc.tmask = local->tmask;
		e->rc.gen = e->route_gen;
		e->rc.t = best;
		e->rc.ent = bent;
		e->rc.p = NULL;
	}
	*tp = best;
	*entp = bent;
	return 0;
}

static void peer_unlink(struct rma_engine *e, struct rma__peer *p)
{
	e->route_gen++;
	struct rma__peer **pp = &e->ptab[slot_of(e, p->engine_id, p->t)];
	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	for (pp = &e->peers; *pp != p;)
		pp = &(*pp)->next;
	*pp = p->next;
	e->npeers--;
	if (p->stalled) {
		p->stalled = false;
		e->stalled--;
	}
}

struct rma__peer *rma__peer_get(struct rma_engine *e, const rma_remote *r,
				struct rma__transport *t,
				const struct rma__rentry *ent, int *err)
{
	struct rma__peer *p = rma__peer_find(e, r->engine_id, t);
	bool fell_back = false;

	if (p && p->state != RMA__PEER_FAILED)
		return p;
	if (p) { /* failed earlier: start over with a fresh connection */
		fell_back = p->fell_back;
		rma__peer_destroy(e, p, p->error);
	}
	*err = t->ops->connect(t, ent->blob, ent->len, r->engine_id, &p);
	if (*err)
		return NULL;
	rma__list_init(&p->queue);
	rma__list_init(&p->ops);
	p->fell_back = fell_back;
	if (p->state == RMA__PEER_FAILED) { /* failed at once */
		e->route_gen++;
		*err = p->error ? p->error : -ECONNREFUSED;
		p->t = t; /* kept, so that routing passes over it a while */
		p->engine_id = r->engine_id;
		p->retry_at = rma__now_ns() + RETRY_NS;
		peer_link(e, p);
		return NULL;
	}
	p->t = t;
	p->engine_id = r->engine_id;
	if (p->state == RMA__PEER_READY)
		p->was_ready = true;
	else
		p->state = RMA__PEER_CONNECTING;
	peer_link(e, p);
	return p;
}

void rma__fail_peer_ops(struct rma_engine *e, struct rma__peer *p, int err)
{
	struct rma__lnode *n;
	while ((n = rma__list_first(&p->queue)))
		rma__op_fail(e, container_of(n, struct rma__op, qnode), err);
}

/* Say once per peer that its ops go elsewhere (a peer that failed inside
 * connect() is kept a while for this and for routing). */
void rma__note_fallback(struct rma_engine *e, uint64_t engine_id,
			struct rma__transport *from, int err,
			struct rma__transport *to)
{
	struct rma__peer *p = rma__peer_find(e, engine_id, from);
	if (p && p->fell_back)
		return;
	if (p)
		p->fell_back = true;
	rma__log(p ? RMA_LOG_WARN : RMA_LOG_INFO,
		 "peer %016llx: %s failed (%s); falling back to %s",
		 (unsigned long long)engine_id, from->spec, rma_strerror(err),
		 to->spec);
}

/* p failed: ops that have not started move to the next route. */
static void fall_back(struct rma_engine *e, struct rma__peer *p, int err)
{
	struct rma__lnode *n, *next;

	for (n = p->queue.next; n != &p->queue; n = next) {
		struct rma__op *op = container_of(n, struct rma__op, qnode);
		struct rma__transport *t;
		const struct rma__rentry *ent;
		struct rma__peer *np;
		int rc;

		next = n->next;
		if (op->posted || op->chunks)
			continue;
		if (rma__route(e, op->remote, op->local, 1u << p->t->index,
			       &t, &ent))
			continue; /* nowhere else: fails with p below */
		np = rma__peer_get(e, op->remote, t, ent, &rc);
		if (!np)
			continue;
		rma__note_fallback(e, p->engine_id, p->t, err, t);
		rma__list_del(&op->qnode);
		rma__list_del(&op->pnode);
		p->nops--;
		rma__op_attach(e, op, np, ent);
		e->pump = true;
	}
}

void rma__peer_ready(struct rma__peer *p)
{
	p->state = RMA__PEER_READY;
	p->was_ready = true;
	if (p->t) /* else still inside connect(): the caller pumps */
		p->t->engine->pump = true;
}

void rma__peer_failed(struct rma__peer *p, int err)
{
	if (p->state == RMA__PEER_FAILED)
		return;
	p->state = RMA__PEER_FAILED;
	p->error = err;
	if (!p->t) /* still inside connect(): no ops yet */
		return;
	struct rma_engine *e = p->t->engine;
	e->route_gen++;
	p->retry_at = rma__now_ns() + RETRY_NS;
	if (p->stalled) {
		p->stalled = false;
		e->stalled--;
	}
	fall_back(e, p, err);
	rma__fail_peer_ops(e, p, err);
}

void rma__peer_destroy(struct rma_engine *e, struct rma__peer *p, int err)
{
	struct rma__lnode *n;

	peer_unlink(e, p);
	rma__fail_peer_ops(e, p, err);
	/* Ops with chunks in flight: abort, then disconnect reports them. */
	while ((n = rma__list_first(&p->ops))) {
		struct rma__op *op = container_of(n, struct rma__op, pnode);
		if (op->state == RMA__OP_LIVE) {
			rma__op_fail(e, op, err);
			if (op->state == RMA__OP_LIVE)
				break; /* cannot happen; never loop forever */
		} else {
			rma__list_del(n); /* dying: disconnect completes it */
		}
	}
	p->t->ops->disconnect(p, err);
}

/* ---- the public calls ---- */

struct peer_wait {
	struct rma_engine *e;
	const rma_remote *r;
	struct rma__transport *t;
	int remove;
};

static int peer_settled(void *arg)
{
	struct peer_wait *w = arg;
	struct rma__peer *p = rma__peer_find(w->e, w->r->engine_id, w->t);
	if (!p)
		return 1;
	return w->remove ? p->nops == 0 : p->state != RMA__PEER_CONNECTING;
}

RMA_EXPORT int rma_peer_connect(rma_engine *e, const rma_remote *r, int timeout_ms)
{
	struct peer_wait w = {e, r, NULL, 0};
	const struct rma__rentry *ent;
	unsigned skip = 0;
	int64_t deadline;
	int err = 0;

	if (!e || !r)
		return -EINVAL;
	rma__deadline(e, timeout_ms, &deadline);
	pthread_mutex_lock(&e->mu);
	if (e->shut)
		err = -ESHUTDOWN;
	/* Each route in turn, best first, while time is left. */
	while (!err && !(err = rma__route(e, r, NULL, skip, &w.t, &ent))) {
		if (rma__peer_get(e, r, w.t, ent, &err))
			rma__wait_until(e, peer_settled, &w, deadline);
		if (!err) {
			struct rma__peer *p = rma__peer_find(e, r->engine_id, w.t);
			err = !p ? -ECONNRESET
			      : p->state == RMA__PEER_READY ? 0
			      : p->state == RMA__PEER_FAILED ? p->error : -ETIMEDOUT;
		}
		if (!err || err == -ETIMEDOUT ||
		    (deadline && rma__now_ns() >= deadline))
			break;
		skip |= 1u << w.t->index;
		struct rma__transport *next;
		if (rma__route(e, r, NULL, skip, &next, &ent))
			break; /* no other route: this error stands */
		rma__note_fallback(e, r->engine_id, w.t, err, next);
		err = 0;
	}
	pthread_mutex_unlock(&e->mu);
	return err;
}

RMA_EXPORT int rma_peer_raw(rma_engine *e, const rma_remote *r,
			    const char *name, void *out, size_t cap)
{
	const struct rma__rentry *ent;
	struct rma__transport *t;
	struct rma__peer *p;
	unsigned skip = 0;
	int rc = -ENOENT;

	if (!e || !r || !name || (!out && cap))
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	/* Routes through the named transport's instances only. */
	for (unsigned i = 0; i < e->ntr; i++) {
		if (strcmp(e->tr[i]->ops->name, name))
			skip |= 1u << i;
		else if (!(e->tr[i]->ops->caps & RMA__CAP_PEER_RAW))
			skip |= 1u << i, rc = -EOPNOTSUPP;
		else
			rc = -EHOSTUNREACH;
	}
	if (rc == -EHOSTUNREACH && e->shut)
		rc = -ESHUTDOWN;
	else if (rc == -EHOSTUNREACH && !rma__route(e, r, NULL, skip, &t, &ent)) {
		p = rma__peer_get(e, r, t, ent, &rc); /* connects if need be */
		if (p)
			rc = p->state == RMA__PEER_READY
				     ? t->ops->peer_raw(p, out, cap) : -ENOTCONN;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

RMA_EXPORT int rma_peer_remove(rma_engine *e, const rma_remote *r, int timeout_ms)
{
	struct peer_wait w = {e, r, NULL, 1};
	int64_t deadline;
	int rc = -ENOENT;

	if (!e || !r)
		return -EINVAL;
	rma__deadline(e, timeout_ms, &deadline);
	pthread_mutex_lock(&e->mu);
	/* Every route to that engine: each is a peer of its own. */
	for (unsigned i = 0; i < e->ntr; i++) {
		w.t = e->tr[i];
		struct rma__peer *p = rma__peer_find(e, r->engine_id, w.t);
		if (!p)
			continue;
		rma__wait_until(e, peer_settled, &w, deadline);
		p = rma__peer_find(e, r->engine_id, w.t);
		if (p) {
			int one = p->nops ? -ETIMEDOUT : 0;
			rma__peer_destroy(e, p, -ECANCELED);
			if (rc != -ETIMEDOUT)
				rc = one;
		} else if (rc == -ENOENT) {
			rc = 0;
		}
	}
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);
	return rc;
}

static const char *state_name(int s)
{
	return s == RMA_PEER_READY ? "connected" : s == RMA_PEER_CONNECTING
	       ? "connecting" : s == RMA_PEER_FAILED ? "failed" : "not connected";
}

RMA_EXPORT int rma_peer_route(rma_engine *e, const rma_remote *r,
			      struct rma_route_info *out)
{
	struct rma_route_info info = {0};
	const struct rma__rentry *ent;
	struct rma__transport *t;
	size_t o = 0;

	if (!e || !r || !out)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	int rc = rma__route(e, r, NULL, 0, &t, &ent);
	if (rc) {
		o += (size_t)snprintf(info.why, sizeof info.why,
				      "no transport in common: advertised");
		for (unsigned k = 0; k < r->nent && o < sizeof info.why; k++) {
			const struct rma__transport_ops *ops =
				rma__transport_by_wire(r->ent[k].wire_id);
			o += (size_t)snprintf(info.why + o, sizeof info.why - o,
					      " %s", ops ? ops->name : "?");
		}
		pthread_mutex_unlock(&e->mu);
		return rc;
	}
	struct rma__peer *p = rma__peer_find(e, r->engine_id, t);
	info.transport = t->spec;
	info.level = t->level;
	info.state = p ? p->state + 1 : RMA_PEER_NONE;
	info.error = p && p->state == RMA__PEER_FAILED ? p->error : 0;
	o = (size_t)snprintf(info.why, sizeof info.why, "%s: %s",
			     t->spec, state_name(info.state));
	/* Say which better routes were passed over, and why. */
	for (unsigned i = 0; i < e->ntr && o < sizeof info.why; i++) {
		struct rma__transport *u = e->tr[i];
		struct rma__peer *q = rma__peer_find(e, r->engine_id, u);
		if (u->level > t->level && q && q->state == RMA__PEER_FAILED)
			o += (size_t)snprintf(info.why + o, sizeof info.why - o,
					      "; %s failed (%s)", u->spec,
					      rma_strerror(q->error));
	}
	pthread_mutex_unlock(&e->mu);
	*out = info;
	return 0;
}
