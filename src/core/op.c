/*
 * op.c - the op path: validation, peers, chunking under credits,
 * completion, deadlines, and the synchronous calls built on it.
 *
 * An op is LIVE from post until its completion is delivered.  If it fails
 * while chunks are still with the transport (timeout, cancel, error) its
 * completion is delivered at once and it becomes a ZOMBIE: the transport
 * finds it no longer live and discards its late data; the slot returns to
 * the pool when the last chunk is reported.
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

int rma__ops_init(struct rma_engine *e)
{
	e->nops = e->cfg.cq_depth * 2;
	e->ops = calloc(e->nops, sizeof *e->ops);
	if (!e->ops)
		return -ENOMEM;
	for (uint32_t i = e->nops; i-- > 0;) {
		e->ops[i].id = 1ULL << 32 | i; /* generation 1: no op id is 0 */
		e->ops[i].fnext = e->free_ops;
		e->free_ops = &e->ops[i];
	}
	return 0;
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
	op->fnext = e->free_ops;
	e->free_ops = op;
}

static void cq_push(struct rma_engine *e, uint64_t user_data, int64_t res)
{
	uint32_t n = e->cq_count, tail = (e->cq_head + n) % e->cq_cap;
	e->cq[tail].user_data = user_data;
	e->cq[tail].result = res;
	/* Stored atomically: rma_poll peeks at it without the lock. */
	__atomic_store_n(&e->cq_count, n + 1, __ATOMIC_RELEASE);
	if (n == 0 && !(e->flags & RMA_ENGINE_MANUAL_PROGRESS)) {
		uint64_t one = 1;
		if (write(e->cq_fd, &one, sizeof one) < 0) {
			/* cannot fail short of a counter overflow */
		}
	}
}

/* Deliver the op's one completion and retire it from the live set. */
static void op_complete(struct rma_engine *e, struct rma__op *op, int64_t res)
{
	struct rma__peer *p = op->peer;

	if (op->batch) {
		op->batch->results[op->batch_index] = res;
		if (--op->batch->left == 0) /* its waiter may sleep on done_cv */
			pthread_cond_broadcast(&e->done_cv);
	} else {
		cq_push(e, op->user_data, res);
	}
	if (op->local)
		op->local->nlocal--;
	if (p)
		p->nops--;
	e->live--;
	if (op->chunks == 0)
		op_release(e, op);
	else
		op->state = RMA__OP_ZOMBIE;
}

static void queue_remove(struct rma__peer *p, struct rma__op *op)
{
	struct rma__op **pp = &p->qhead, *prev = NULL;
	while (*pp && *pp != op) {
		prev = *pp;
		pp = &(*pp)->qnext;
	}
	if (!*pp)
		return;
	*pp = op->qnext;
	if (p->qtail == op)
		p->qtail = prev;
	op->qnext = NULL;
}

void rma__op_fail(struct rma_engine *e, struct rma__op *op, int err)
{
	if (op->state != RMA__OP_LIVE)
		return;
	if (op->peer && op->posted < op->len)
		queue_remove(op->peer, op);
	op_complete(e, op, err);
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
	if (op->state == RMA__OP_ZOMBIE) {
		if (!op->chunks)
			op_release(e, op);
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

	if (!op || op->state != RMA__OP_LIVE || op->kind != RMA_OP_GET ||
	    raddr < op->raddr || raddr - op->raddr > op->len ||
	    len > op->len - (raddr - op->raddr))
		return NULL;
	return op->laddr + (raddr - op->raddr);
}

int rma__op_live(struct rma_engine *e, uint64_t op_id)
{
	struct rma__op *op = op_lookup(e, op_id);
	return op && op->state == RMA__OP_LIVE;
}

/* Hand queued chunks to the transport while the peer has credits. */
void rma__peer_pump(struct rma_engine *e, struct rma__peer *p)
{
	int posted = 0;

	if (p->state != RMA__PEER_READY)
		return;
	while (p->qhead && p->inflight < e->cfg.queue_depth) {
		struct rma__op *op = p->qhead;
		uint64_t n = RMA_MIN(p->max_msg, op->len - op->posted);
		struct rma__xfer x = {
			.op_id = op->id,
			.kind = op->kind,
			.key = op->key,
			.raddr = op->raddr + op->posted,
			.laddr = op->laddr + op->posted,
			.local = op->local,
			.len = n,
		};
		int rc = p->t->ops->post(p, &x);
		if (rc == -EAGAIN)
			break; /* the transport is full: retried when it drains */
		if (rc < 0) {
			rma__op_fail(e, op, rc);
			continue;
		}
		posted = 1;
		op->posted += n;
		op->chunks++;
		p->inflight++;
		if (op->posted == op->len) {
			p->qhead = op->qnext;
			if (!p->qhead)
				p->qtail = NULL;
			op->qnext = NULL;
		}
	}
	if (posted)
		p->t->ops->flush(p);
}

static void pump_all(struct rma_engine *e)
{
	e->pump = false;
	for (struct rma__peer *p = e->peers; p; p = p->next)
		if (p->qhead)
			rma__peer_pump(e, p);
}

/* After a progress round: post what freed credits or ready peers allow. */
void rma__pump_pending(struct rma_engine *e)
{
	if (e->pump)
		pump_all(e);
}

void rma__check_deadlines(struct rma_engine *e, int64_t now)
{
	int64_t next = 0;

	if (!e->next_deadline || now < e->next_deadline)
		return;
	for (uint32_t i = 0; i < e->nops; i++) {
		struct rma__op *op = &e->ops[i];
		if (op->state != RMA__OP_LIVE || !op->deadline)
			continue;
		if (op->deadline <= now)
			rma__op_fail(e, op, -ETIMEDOUT);
		else if (!next || op->deadline < next)
			next = op->deadline;
	}
	e->next_deadline = next;
}

void rma__fail_peer_ops(struct rma_engine *e, struct rma__peer *p, int err)
{
	while (p->qhead)
		rma__op_fail(e, p->qhead, err);
}

void rma__peer_ready(struct rma__peer *p)
{
	p->state = RMA__PEER_READY;
	if (p->t) /* else still inside connect(): the caller pumps */
		p->t->engine->pump = true;
}

void rma__peer_failed(struct rma__peer *p, int err)
{
	p->state = RMA__PEER_FAILED;
	p->error = err;
	if (p->t) /* else still inside connect(): no ops yet */
		rma__fail_peer_ops(p->t->engine, p, err);
}

void rma__peer_destroy(struct rma_engine *e, struct rma__peer *p, int err)
{
	struct rma__peer **pp = &e->peers;
	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	rma__fail_peer_ops(e, p, err);
	/* Chunks still in flight fail (or finish zombies) in disconnect. */
	for (uint32_t i = 0; i < e->nops; i++)
		if (e->ops[i].state == RMA__OP_LIVE && e->ops[i].peer == p)
			rma__op_fail(e, &e->ops[i], err);
	p->t->ops->disconnect(p, err);
}

static struct rma__peer *peer_find(struct rma_engine *e, const rma_remote *r,
				   struct rma__transport **t)
{
	if (!rma__route(e, r, t))
		return NULL;
	for (struct rma__peer *p = e->peers; p; p = p->next)
		if (p->engine_id == r->engine_id && p->t == *t)
			return p;
	return NULL;
}

struct rma__peer *rma__peer_get(struct rma_engine *e, const rma_remote *r,
				int *err)
{
	struct rma__transport *t = NULL;
	const struct rma__rentry *ent = rma__route(e, r, &t);
	struct rma__peer *p;

	if (!ent) {
		*err = -EHOSTUNREACH;
		return NULL;
	}
	p = peer_find(e, r, &t);
	if (p && p->state != RMA__PEER_FAILED)
		return p;
	if (p) /* failed earlier: start over with a fresh connection */
		rma__peer_destroy(e, p, p->error);
	*err = t->ops->connect(t, ent->blob, ent->len, r->engine_id, &p);
	if (*err)
		return NULL;
	if (p->state == RMA__PEER_FAILED) { /* failed at once */
		*err = p->error ? p->error : -ECONNREFUSED;
		t->ops->disconnect(p, *err);
		return NULL;
	}
	p->t = t;
	p->engine_id = r->engine_id;
	if (p->state != RMA__PEER_READY) /* ready at once is allowed */
		p->state = RMA__PEER_CONNECTING;
	p->next = e->peers;
	e->peers = p;
	return p;
}

int rma__post_locked(struct rma_engine *e, const struct rma_op *d,
		     int timeout_ms, struct rma__batch *b, size_t index)
{
	const rma_remote *r = d->remote;
	struct rma__transport *t = NULL;
	const struct rma__rentry *ent;
	struct rma__peer *p;
	struct rma__op *op;
	unsigned need;
	int err;

	if (e->shut)
		return -ESHUTDOWN;
	if ((d->kind != RMA_OP_PUT && d->kind != RMA_OP_GET) || d->flags ||
	    !d->local || !r || d->local->e != e)
		return -EINVAL;
	if (d->local_off > d->local->len || d->len > d->local->len - d->local_off ||
	    d->remote_off > r->len || d->len > r->len - d->remote_off)
		return -ERANGE;
	need = d->kind == RMA_OP_PUT ? RMA_ACCESS_REMOTE_WRITE : RMA_ACCESS_REMOTE_READ;
	if (!(r->access & need))
		return -EACCES;
	if (!b && e->cq_reserved == e->cq_cap)
		return -EAGAIN;
	if (!e->free_ops)
		return -EAGAIN;
	ent = rma__route(e, r, &t);
	if (!ent)
		return -EHOSTUNREACH;
	p = NULL;
	if (d->len) {
		p = rma__peer_get(e, r, &err);
		if (!p)
			return err;
	}

	op = e->free_ops;
	e->free_ops = op->fnext;
	op->state = RMA__OP_LIVE;
	op->kind = d->kind;
	op->peer = p;
	op->local = d->local;
	op->laddr = d->local->addr + d->local_off;
	op->len = d->len;
	op->key = ent->rk.key;
	op->raddr = ent->rk.base + d->remote_off;
	op->posted = op->done = 0;
	op->chunks = 0;
	op->user_data = d->user_data;
	op->batch = b;
	op->batch_index = index;
	op->qnext = NULL;
	rma__timeout_ns(e, timeout_ms, &op->deadline);
	d->local->nlocal++;
	e->live++;
	if (!b)
		e->cq_reserved++;
	if (!p) { /* zero bytes: nothing to move */
		op_complete(e, op, 0);
		return 0;
	}
	p->nops++;
	if (op->deadline && (!e->next_deadline || op->deadline < e->next_deadline)) {
		e->next_deadline = op->deadline;
		rma__retime(e); /* the thread may sleep past it */
	}
	if (p->qtail)
		p->qtail->qnext = op;
	else
		p->qhead = op;
	p->qtail = op;
	return 0;
}

RMA_EXPORT int rma_post(rma_engine *e, const struct rma_op *ops, size_t n,
			int timeout_ms)
{
	size_t i;
	int rc = 0;

	if (!e || (!ops && n) || n > INT32_MAX)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < n; i++) {
		rc = rma__post_locked(e, &ops[i], timeout_ms, NULL, 0);
		if (rc < 0)
			break;
	}
	/* The caller's thread sends right away: no hand-off on the fast path. */
	pump_all(e);
	/* Completions made right here (zero-length ops, a failed peer) reach
	 * a callback through the progress thread, never inside rma_post. */
	if (e->cb && e->cq_count && e->has_thread)
		rma__wake(e);
	pthread_mutex_unlock(&e->mu);
	if (i == 0 && rc < 0)
		return rc;
	return (int)i;
}

/* Take up to max completions from the queue (lock held). */
uint32_t rma__cq_take(struct rma_engine *e, struct rma_completion *out,
		      uint32_t max)
{
	uint32_t n = 0, count = e->cq_count;

	while (n < max && count) {
		out[n++] = e->cq[e->cq_head];
		e->cq_head = (e->cq_head + 1) % e->cq_cap;
		count--;
	}
	e->cq_reserved -= n;
	__atomic_store_n(&e->cq_count, count, __ATOMIC_RELEASE);
	if (n && !count) {
		uint64_t v;
		if (read(e->cq_fd, &v, sizeof v) < 0) {
			/* already drained, or never written (manual mode) */
		}
	}
	return n;
}

RMA_EXPORT int rma_poll(rma_engine *e, struct rma_completion *out, size_t max)
{
	uint32_t n;

	if (!e || (!out && max))
		return -EINVAL;
	/* Empty: answer without the lock, which the progress thread needs;
	 * callers spin here. */
	if (!__atomic_load_n(&e->cq_count, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&e->mu);
	n = rma__cq_take(e, out, (uint32_t)RMA_MIN(max, UINT32_MAX));
	pthread_mutex_unlock(&e->mu);
	return (int)n;
}

/* Waits this thread is inside: more than one means a completion callback,
 * run by an outer wait, is waiting in turn. */
static __thread unsigned nested_waits;

/*
 * Wait until done() or the deadline (0 = none).  First spin, driving
 * progress from this thread (the progress thread stands aside meanwhile);
 * then, if there is a progress thread, hand progress back to it and sleep
 * on done_cv, which every progress round signals.  Without one, sleep in
 * epoll ourselves.  Called and returns with the lock held.
 */
void rma__wait_until(struct rma_engine *e, int (*done)(void *), void *arg,
		     int64_t deadline)
{
	int64_t spin_until = rma__now_ns() + (int64_t)e->cfg.spin_us * 1000;

	nested_waits++;
	e->waiters++;
	while (!done(arg)) {
		int64_t now = rma__now_ns();
		if (deadline && now >= deadline)
			break;
		/* From a completion callback (run by the progress thread,
		 * or by an outer wait that keeps it parked) nobody else
		 * drives progress: keep doing it ourselves. */
		bool thread = e->has_thread && !e->stop && nested_waits == 1 &&
			      !pthread_equal(pthread_self(), e->thread);
		if (now >= spin_until && thread) {
			int64_t until = now + 100 * 1000000LL;
			if (deadline && deadline < until)
				until = deadline;
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			int64_t ns = ts.tv_nsec + (until - now);
			ts.tv_sec += ns / 1000000000;
			ts.tv_nsec = ns % 1000000000;
			if (--e->waiters == 0)
				pthread_cond_broadcast(&e->pt_cv);
			rma__retime(e); /* our deadlines are the thread's now */
			pthread_cond_timedwait(&e->done_cv, &e->mu, &ts);
			e->waiters++;
			continue;
		}
		int timeout = 0;
		if (now >= spin_until) {
			/* No progress thread: every completion passes through
			 * a waiter; with company, look again soon. */
			timeout = e->waiters > 1 ? 1 : 100;
			int64_t next = e->next_deadline;
			if (deadline && (!next || deadline < next))
				next = deadline;
			if (next && (next - now) / 1000000 < timeout)
				timeout = (int)RMA_MAX(0, (next - now) / 1000000 + 1);
		}
		pthread_mutex_unlock(&e->mu);
		if (rma__progress_once(e, timeout) == 0 && !timeout)
			sched_yield(); /* spinning: let a thread sharing our core run */
		pthread_mutex_lock(&e->mu);
	}
	/* The progress thread notices on its own within PARK_NS: waking it
	 * here would put it on a core right when the caller wants both. */
	e->waiters--;
	nested_waits--;
}

static int batch_done(void *arg)
{
	return ((struct rma__batch *)arg)->left == 0;
}

static void report_add(char *report, size_t cap, size_t *len, const char *fmt,
		       ...) __attribute__((format(printf, 4, 5)));
static void report_add(char *report, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	if (!report || *len >= cap)
		return;
	va_start(ap, fmt);
	int w = vsnprintf(report + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (w > 0)
		*len += RMA_MIN((size_t)w, cap - *len - 1);
}

RMA_EXPORT int rma_submit(rma_engine *e, const struct rma_op *ops, size_t n,
			  int timeout_ms, int64_t *results, char *report,
			  size_t report_cap)
{
	struct rma__batch b = {.n = n, .left = n, .results = results};
	int64_t deadline;
	size_t failed = 0, len = 0;

	if (!e || (!ops && n) || (!results && n))
		return -EINVAL;
	if (report && report_cap)
		report[0] = '\0';
	rma__timeout_ns(e, timeout_ms, &deadline);
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < n; i++) {
		int rc;
		while ((rc = rma__post_locked(e, &ops[i], timeout_ms, &b, i)) == -EAGAIN &&
		       (!deadline || rma__now_ns() < deadline)) {
			/* Out of op slots: let some finish first. */
			pump_all(e);
			pthread_mutex_unlock(&e->mu);
			rma__progress_once(e, 1);
			pthread_mutex_lock(&e->mu);
		}
		if (rc < 0) {
			results[i] = rc == -EAGAIN ? -ETIMEDOUT : rc;
			b.left--;
		}
	}
	pump_all(e);
	rma__wait_until(e, batch_done, &b, 0); /* ops carry the deadline */
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);

	for (size_t i = 0; i < n; i++)
		failed += results[i] < 0;
	if (failed) {
		report_add(report, report_cap, &len, "%zu of %zu ops failed:", failed, n);
		for (size_t i = 0; i < n; i++)
			if (results[i] < 0)
				report_add(report, report_cap, &len,
					   "\n  op %zu (%s): %s", i,
					   ops[i].kind == RMA_OP_PUT ? "put" : "get",
					   rma_strerror((int)results[i]));
	}
	return (int)failed;
}

static int64_t whole(rma_engine *e, unsigned kind, rma_region *local,
		     const rma_remote *r, int timeout_ms)
{
	struct rma_op op = {.kind = kind, .local = local, .remote = r};
	int64_t res;

	if (!e || !local || !r)
		return -EINVAL;
	if (kind == RMA_OP_GET ? local->len < r->len : local->len > r->len)
		return -EMSGSIZE;
	op.len = kind == RMA_OP_GET ? r->len : local->len;
	int rc = rma_submit(e, &op, 1, timeout_ms, &res, NULL, 0);
	return rc < 0 ? rc : res;
}

RMA_EXPORT int64_t rma_read_into(rma_engine *e, rma_region *local,
				 const rma_remote *r, int timeout_ms)
{
	return whole(e, RMA_OP_GET, local, r, timeout_ms);
}

RMA_EXPORT int64_t rma_write_from(rma_engine *e, rma_region *local,
				  const rma_remote *r, int timeout_ms)
{
	return whole(e, RMA_OP_PUT, local, r, timeout_ms);
}

struct peer_wait {
	struct rma_engine *e;
	const rma_remote *r;
	int remove;
};

static int peer_settled(void *arg)
{
	struct peer_wait *w = arg;
	struct rma__transport *t;
	struct rma__peer *p = peer_find(w->e, w->r, &t);
	if (!p)
		return 1;
	return w->remove ? p->nops == 0 : p->state != RMA__PEER_CONNECTING;
}

RMA_EXPORT int rma_peer_connect(rma_engine *e, const rma_remote *r, int timeout_ms)
{
	struct peer_wait w = {e, r, 0};
	struct rma__transport *t;
	struct rma__peer *p;
	int64_t deadline;
	int err = 0;

	if (!e || !r)
		return -EINVAL;
	rma__timeout_ns(e, timeout_ms, &deadline);
	pthread_mutex_lock(&e->mu);
	if (e->shut)
		err = -ESHUTDOWN;
	else if (rma__peer_get(e, r, &err))
		rma__wait_until(e, peer_settled, &w, deadline);
	if (!err) {
		p = peer_find(e, r, &t);
		err = !p ? -ECONNRESET
		      : p->state == RMA__PEER_READY ? 0
		      : p->state == RMA__PEER_FAILED ? p->error : -ETIMEDOUT;
	}
	pthread_mutex_unlock(&e->mu);
	return err;
}

RMA_EXPORT int rma_peer_remove(rma_engine *e, const rma_remote *r, int timeout_ms)
{
	struct peer_wait w = {e, r, 1};
	struct rma__transport *t;
	struct rma__peer *p;
	int64_t deadline;
	int rc = 0;

	if (!e || !r)
		return -EINVAL;
	rma__timeout_ns(e, timeout_ms, &deadline);
	pthread_mutex_lock(&e->mu);
	if (!peer_find(e, r, &t)) {
		pthread_mutex_unlock(&e->mu);
		return -ENOENT;
	}
	rma__wait_until(e, peer_settled, &w, deadline);
	p = peer_find(e, r, &t);
	if (p) {
		rc = p->nops ? -ETIMEDOUT : 0;
		rma__peer_destroy(e, p, -ECANCELED);
	}
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);
	return rc;
}
