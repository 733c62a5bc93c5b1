/*
 * op.c - the op path: validation, the op pool, chunking under credits,
 * completion and failure.
 *
 * An op is LIVE from post until its completion is delivered.  If it fails
 * while chunks are still with the transport (timeout, cancel, error), the
 * transport's abort() says whether its local memory is already safe.  If so
 * the completion is delivered at once and the op becomes a ZOMBIE: the
 * transport finds it no longer live and discards late data; the slot
 * returns to the pool when the last chunk is reported.  If not (a NIC may
 * still write), the op is DYING: its completion waits for the transport to
 * report every chunk, which it does once the hardware has stopped.
 *
 * Every list an op is on (its peer's queue and ops, its region's users) is
 * doubly linked and every deadline sits in a heap, so no step here scans
 * the pool.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

static void op_expire(struct rma__timer *tm);
static void stall_retry(struct rma__timer *tm);

int rma__ops_init(struct rma_engine *e)
{
	e->nops = e->cfg.cq_depth * 2;
	e->ops = calloc(e->nops, sizeof *e->ops);
	if (!e->ops)
		return -ENOMEM;
	for (uint32_t i = e->nops; i-- > 0;) {
		e->ops[i].id = 1ULL << 32 | i; /* generation 1: no op id is 0 */
		e->ops[i].deadline.cb = op_expire;
		e->ops[i].fnext = e->free_ops;
		e->free_ops = &e->ops[i];
	}
	e->stall_timer.cb = stall_retry;
	rma__list_init(&e->rcache.idle);
	/* One heap slot per op, and some for the transports' timers. */
	return rma__timers_init(e, e->nops + 64);
}

static struct rma__op *op_lookup(struct rma_engine *e, uint64_t id)
{
	uint32_t idx = (uint32_t)id;
	if (idx >= e->nops)
		return NULL;
	struct rma__op *op = &e->ops[idx];
	return op->id == id && op->state != RMA__OP_FREE ? op : NULL;
}

static void op_release(struct rma_engine *e, struct rma__op *op)
{
	op->state = RMA__OP_FREE;
	op->id += 1ULL << 32; /* a new generation: stale ids miss */
	op->peer = NULL;
	op->local = NULL;
	if (op->remote)
		rma__remote_unref(op->remote);
	op->remote = NULL;
	op->ent = NULL;
	/* Its transport is done with the memory: a cached range may go. */
	rma__regcache_put(e, op->rce);
	op->rce = NULL;
	op->fnext = e->free_ops;
	e->free_ops = op;
}

/* Off every list: the op is no longer live. */
static void op_unlink(struct rma_engine *e, struct rma__op *op)
{
	struct rma__peer *p = op->peer;

	rma__timer_cancel(e, &op->deadline);
	if (rma__list_linked(&op->qnode))
		rma__list_del(&op->qnode);
	if (rma__list_linked(&op->pnode))
		rma__list_del(&op->pnode);
	if (rma__list_linked(&op->rnode))
		rma__list_del(&op->rnode);
	op->local = NULL;
	if (p)
		p->nops--;
	/* Written under the lock; rma_poll reads it without (cq.c). */
	__atomic_store_n(&e->live, e->live - 1, __ATOMIC_RELAXED);
}

/* Deliver the op's one completion and retire it. */
static void op_complete(struct rma_engine *e, struct rma__op *op, int64_t res)
{
	if (op->batch) {
		op->batch->results[op->batch_index] = res;
		if (--op->batch->left == 0) /* its waiter may sleep on done_cv */
			pthread_cond_broadcast(&e->done_cv);
	} else if (res >= 0 && (op->flags & RMA_OP_CRC)) {
		/* A get's bytes have all landed now; a put's was taken at post. */
		if (op->kind == RMA_OP_GET)
			op->crc = rma_crc32c(0, op->laddr, op->len);
		rma__cq_push(e, op->user_data, res, RMA_COMPLETION_CRC, op->crc);
	} else {
		rma__cq_push(e, op->user_data, res, 0, 0);
	}
	op_unlink(e, op);
	if (op->chunks == 0)
		op_release(e, op);
	else
		op->state = RMA__OP_ZOMBIE;
}

void rma__op_fail(struct rma_engine *e, struct rma__op *op, int err)
{
	if (op->state != RMA__OP_LIVE)
		return;
	if (rma__list_linked(&op->qnode))
		rma__list_del(&op->qnode);
	if (op->chunks) {
		struct rma__peer *p = op->peer;
		uint64_t id = op->id;
		/* Dying before abort runs: a transport that reports the op's
		 * chunks inside abort (a queue pair drained at once) then
		 * completes it through rma__xfer_done, once, with err. */
		op->state = RMA__OP_DYING;
		op->err = err;
		int rc = p->t->ops->abort(p, id, err);
		if (op->id != id || op->state != RMA__OP_DYING)
			return; /* completed inside abort */
		if (rc == RMA__ABORT_PENDING) {
			rma__timer_cancel(e, &op->deadline);
			return;
		}
	}
	op_complete(e, op, err);
}

static void op_expire(struct rma__timer *tm)
{
	struct rma__op *op = container_of(tm, struct rma__op, deadline);
	/* The peer is set for every op that can have a deadline pending. */
	rma__op_fail(op->peer->t->engine, op, -ETIMEDOUT);
}

void rma__xfer_done(struct rma_engine *e, uint64_t op_id, uint64_t len, int res)
{
	struct rma__op *op = op_lookup(e, op_id);

	if (!op || !op->chunks) {
		rma__warn("completion for unknown op %#llx", (unsigned long long)op_id);
		return;
	}
	op->chunks--;
	op->peer->inflight--;
	e->pump = true;
	switch (op->state) {
	case RMA__OP_ZOMBIE:
		if (!op->chunks)
			op_release(e, op);
		return;
	case RMA__OP_DYING:
		if (!op->chunks)
			op_complete(e, op, op->err);
		return;
	}
	if (res < 0) {
		rma__op_fail(e, op, res);
		return;
	}
	op->done += len;
	if (op->done == op->len && !op->chunks)
		op_complete(e, op, (int64_t)op->len);
}

char *rma__op_buf(struct rma_engine *e, uint64_t op_id, uint64_t raddr,
		  uint64_t len)
{
	struct rma__op *op = op_lookup(e, op_id);
	uint64_t start;

	if (!op || op->state != RMA__OP_LIVE || op->kind != RMA_OP_GET)
		return NULL;
	start = op->raddr;
	if (raddr < start || raddr - start > op->len ||
	    len > op->len - (raddr - start))
		return NULL;
	return op->laddr + (raddr - start);
}

int rma__op_live(struct rma_engine *e, uint64_t op_id)
{
	struct rma__op *op = op_lookup(e, op_id);
	return op && op->state == RMA__OP_LIVE;
}

/* Put op on peer p's lists, to be posted through entry ent. */
void rma__op_attach(struct rma_engine *e, struct rma__op *op,
		    struct rma__peer *p, const struct rma__rentry *ent)
{
	op->peer = p;
	op->ent = ent;
	op->raddr = ent->rk.base + op->roff;
	op->ldesc = op->local->tdata[p->t->index];
	p->nops++;
	rma__list_add_tail(&p->ops, &op->pnode);
	rma__list_add_tail(&p->queue, &op->qnode);
}

/* A peer whose transport had no room is retried within a millisecond: the
 * timer wakes a sleeping thread, or makes the manual completion fd
 * readable, even if the transport has no event to report. */
static void stall_retry(struct rma__timer *tm)
{
	struct rma_engine *e = container_of(tm, struct rma_engine, stall_timer);
	e->pump = true;
}

static void set_stalled(struct rma_engine *e, struct rma__peer *p, bool on)
{
	if (on && !rma__timer_armed(&e->stall_timer))
		rma__timer_arm(e, &e->stall_timer, rma__now_ns() + 1000000);
	if (p->stalled == on)
		return;
	p->stalled = on;
	if (on)
		e->stalled++;
	else
		e->stalled--;
}

/* Hand queued chunks to the transport while the peer has credits. */
void rma__peer_pump(struct rma_engine *e, struct rma__peer *p)
{
	const struct rma__transport_ops *ops = p->t->ops;
	unsigned limit = e->cfg.queue_depth;
	struct rma__lnode *n;
	int posted = 0;

	if (p->state != RMA__PEER_READY)
		return;
	if (p->credits && p->credits < limit)
		limit = p->credits;
	if (p->stalled)
		set_stalled(e, p, false);
	while ((n = rma__list_first(&p->queue)) && p->inflight < limit) {
		struct rma__op *op = container_of(n, struct rma__op, qnode);
		uint64_t len = RMA_MIN(p->max_msg, op->len - op->posted);
		unsigned flags = op->posted + len == op->len ? RMA__XFER_LAST : 0;

		if ((op->flags & RMA_OP_FENCE) && op->posted == 0) {
			if (ops->caps & RMA__CAP_FENCE)
				flags |= RMA__XFER_FENCE;
			else if (p->inflight)
				break; /* earlier ops first; pumped as they end */
		}
		struct rma__xfer x = {
			.op_id = op->id,
			.kind = op->kind,
			.flags = flags,
			.rk = &op->ent->rk,
			.raddr = op->raddr + op->posted,
			.laddr = op->laddr + op->posted,
			.local = op->local,
			.ldesc = op->ldesc,
			.len = len,
		};
		int rc = ops->post(p, &x);
		if (rc == -EAGAIN) {
			set_stalled(e, p, true); /* retried each round or on a kick */
			break;
		}
		if (rc < 0) {
			rma__op_fail(e, op, rc);
			continue;
		}
		posted = 1;
		op->posted += len;
		op->chunks++;
		p->inflight++;
		if (op->posted == op->len)
			rma__list_del(&op->qnode);
	}
	if (n && p->inflight >= limit)
		e->backlog = true;
	if (posted)
		ops->flush(p);
}

void rma__pump_all(struct rma_engine *e)
{
	e->pump = false;
	e->backlog = false;
	for (struct rma__peer *p = e->peers; p; p = p->next)
		if (!rma__list_empty(&p->queue))
			rma__peer_pump(e, p);
		else if (p->stalled) /* its ops ended meanwhile */
			set_stalled(e, p, false);
}

/* After a progress round: post what freed credits, ready peers or
 * transports that had no room before now allow. */
void rma__pump_pending(struct rma_engine *e)
{
	if (e->pump || e->stalled)
		rma__pump_all(e);
}

void rma__peer_kick(struct rma__peer *p)
{
	if (p->t)
		p->t->engine->pump = true;
}

/*
 * The fast path (transport.h, post_now): an op that fits one chunk, with
 * nothing of its peer's queued or in flight ahead of it, which the
 * transport can do whole in this thread, completes here: no slot, no
 * deadline, no trip through the pump.  Order is kept: an op behind others
 * takes the queue.  Returns 0 (completed) or RMA__DECLINE.
 */
static int post_now(struct rma_engine *e, const struct rma_op *d,
		    struct rma__peer *p, const struct rma__rentry *ent,
		    struct rma_region *local, char *laddr, struct rma__batch *b,
		    size_t index)
{
	if (p->state != RMA__PEER_READY || d->len > p->max_msg ||
	    (d->flags & RMA_OP_CRC) || p->inflight || !rma__list_empty(&p->queue))
		return RMA__DECLINE;
	struct rma__xfer x = {
		.kind = d->kind,
		.flags = RMA__XFER_LAST,
		.rk = &ent->rk,
		.raddr = ent->rk.base + d->remote_off,
		.laddr = laddr,
		.local = local,
		.ldesc = local->tdata[p->t->index],
		.len = d->len,
	};
	if (p->t->ops->post_now(p, &x))
		return RMA__DECLINE;
	if (b) {
		b->results[index] = (int64_t)d->len;
		b->left--; /* its waiter is this thread, not yet waiting */
	} else {
		e->cq_reserved++;
		rma__cq_push(e, d->user_data, (int64_t)d->len, 0, 0);
	}
	return 0;
}

int rma__post_locked(struct rma_engine *e, const struct rma_op *d,
		     struct rma__when *when, struct rma__batch *b, size_t index)
{
	rma_remote *r = (rma_remote *)d->remote;
	struct rma_region *local = d->local;
	struct rma__rcent *rce = NULL;
	char *laddr;
	struct rma__transport *t = NULL;
	const struct rma__rentry *ent = NULL;
	struct rma__peer *p = NULL;
	struct rma__op *op;
	unsigned need;
	int err, p_err = 0;

	if (e->shut)
		return -ESHUTDOWN;
	if ((d->kind != RMA_OP_PUT && d->kind != RMA_OP_GET) ||
	    (d->flags & ~(unsigned)(RMA_OP_FENCE | RMA_OP_CRC)) ||
	    ((d->flags & RMA_OP_CRC) && b) || d->reserved[0] || !r ||
	    (local ? local->e != e || d->addr : !d->addr))
		return -EINVAL;
	if ((local && (d->local_off > local->len ||
		       d->len > local->len - d->local_off)) ||
	    (!local && (uintptr_t)d->addr + d->local_off + d->len <
			       (uintptr_t)d->addr) ||
	    d->remote_off > r->len || d->len > r->len - d->remote_off)
		return -ERANGE;
	laddr = (local ? local->addr : (char *)d->addr) + d->local_off;
	need = d->kind == RMA_OP_PUT ? RMA_ACCESS_REMOTE_WRITE : RMA_ACCESS_REMOTE_READ;
	if (!(r->access & need))
		return -EACCES;
	if (r->expires) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		if ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec >= r->expires)
			return -EKEYEXPIRED;
	}
	if (!b && e->cq_reserved == e->cq_cap)
		return -EAGAIN;
	if (!e->free_ops)
		return -EAGAIN;
	if (!local && d->len) { /* plain memory: a cached registration */
		if ((err = rma__regcache_get(e, laddr, d->len, &rce)))
			return err;
		local = &rce->reg;
	}
	/* The CPU cannot read device memory for a CRC. */
	if ((d->flags & RMA_OP_CRC) && local && rma__region_device(local)) {
		rma__regcache_put(e, rce);
		return -EOPNOTSUPP;
	}
	/* The best route; if its connect fails at once, the next one.  The
	 * last op's route and peer, while no peer has failed or gone since
	 * (route_gen), serve the next op to the same remote: no scan, no
	 * lookup. */
	if (d->len && e->rc.p && rma__rc_hit(e, r, local)) {
		t = e->rc.t;
		ent = e->rc.ent;
		p = e->rc.p;
	} else for (unsigned skip = 0;;) {
		err = rma__route(e, r, local, skip, &t, &ent);
		if (err) {
			err = skip ? p_err : err;
			break;
		}
		if (!d->len)
			break;
		if ((p = rma__peer_get(e, r, t, ent, &p_err))) {
			if (!skip && rma__rc_hit(e, r, local) && e->rc.t == t &&
			    e->rc.ent == ent)
				e->rc.p = p;
			break;
		}
		skip |= 1u << t->index;
		struct rma__transport *next;
		const struct rma__rentry *nent;
		if ((err = rma__route(e, r, local, skip, &next, &nent))) {
			err = p_err;
			break;
		}
		rma__note_fallback(e, r->engine_id, t, p_err, next);
	}
	if (err || (p && post_now(e, d, p, ent, local, laddr, b, index) == 0)) {
		rma__regcache_put(e, rce);
		return err ? err : 1;
	}

	op = e->free_ops;
	e->free_ops = op->fnext;
	op->state = RMA__OP_LIVE;
	op->kind = d->kind;
	op->flags = d->flags;
	op->local = local;
	op->rce = rce;
	op->laddr = laddr;
	op->len = d->len;
	op->crc = (d->flags & RMA_OP_CRC) && d->kind == RMA_OP_PUT
			  ? rma_crc32c(0, laddr, d->len) : 0;
	op->roff = d->remote_off;
	op->remote = r;
	rma__remote_ref(r);
	op->posted = op->done = 0;
	op->chunks = 0;
	op->user_data = d->user_data;
	op->batch = b;
	op->batch_index = index;
	op->peer = NULL;
	op->ent = ent;
	if (local)
		rma__list_add_tail(&local->users, &op->rnode);
	__atomic_store_n(&e->live, e->live + 1, __ATOMIC_RELAXED);
	if (!b)
		e->cq_reserved++;
	if (!p) { /* zero bytes: nothing to move */
		op_complete(e, op, 0);
		return 1;
	}
	rma__op_attach(e, op, p, ent);
	if (rma__when_deadline(e, when))
		rma__timer_arm(e, &op->deadline, when->deadline);
	return 0;
}

RMA_EXPORT int rma_post(rma_engine *e, const struct rma_op *ops, size_t n,
			int timeout_ms, int *err)
{
	/* Read the clock only for an op that needs a deadline: one done on
	 * the fast path has none. */
	struct rma__when when = {.timeout_ms = timeout_ms};
	bool queued = false;
	size_t i;
	int rc = 0;

	if (!e || (!ops && n) || n > INT32_MAX)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < n; i++) {
		rc = rma__post_locked(e, &ops[i], &when, NULL, 0);
		if (rc < 0)
			break;
		queued |= rc == 0;
	}
	/* The caller's thread sends right away: no hand-off.  (Ops all done
	 * at once need only what a progress round would pump.) */
	if (queued)
		rma__pump_all(e);
	else
		rma__pump_pending(e);
	/* Completions made right here (zero-length ops, a failed peer) reach
	 * a callback through the progress thread, never inside rma_post. */
	if (e->cb && e->cq_count && e->has_thread)
		rma__wake(e);
	/* Chunks completed inside that pump (a transport that copies in
	 * post) left more to post: the progress thread may be asleep with no
	 * fd to wake it. */
	else if (e->pump && e->backlog && e->has_thread)
		rma__wake(e);
	pthread_mutex_unlock(&e->mu);
	if (i < n && err)
		*err = rc;
	if (i == 0 && rc < 0)
		return rc;
	return (int)i;
}
