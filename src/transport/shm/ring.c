/*
 * ring.c - ops on any memory, served by the owner.
 *
 * Cross-memory attach costs a system call per op, more than an 8-byte op
 * is worth, and on large ones one process's attach moves half of what two
 * plain copies on two cores do.  So an op into memory that is not a memfd
 * goes as a request in the initiator's row of the grant table, its bytes
 * inline (at most SHM_INLINE) or in the row's stage: the
 * initiator writes it (a put's bytes), then its number (seq); the
 * owner's progress reads each request once, checks slot, key, access and
 * window as a copy would (shm_window), copies, writes the answer (and a
 * get's bytes), then the number again (ack).  Each side waits on the
 * request's first line only: counters of their own (a producer's and a
 * consumer's index) would cost another line crossing each way per op.
 * The owner copies under its engine lock, where release revokes, so
 * release is final for these ops without a drain.  The owner trusts
 * nothing in the row: a bad request gets an error, a number out of turn
 * is not served.
 *
 * Neither side spins forever: before a thread sleeps (the transport's arm)
 * it sets its idle word in each row with work outstanding and looks once
 * more (a request written while the initiator's thread sleeps sets it
 * too); the other side, after publishing, clears that word and, if it was
 * set, sends SHM_BELL on the control socket, whose readiness wakes the
 * sleeper.  A side clears its own word only while its thread is awake: a
 * caller's rounds (rma_submit, rma_poll) run while the thread sleeps, and
 * the word must stay up for the thread once they stop.  Each
 * store-then-load pair is sequentially consistent, so one of the two sides
 * always sees the other.
 */
#include <string.h>
#include <sys/mman.h>

#include "transport/shm/shm.h"

/* Ring the other side's control socket.  A full socket is already
 * readable, so it needs no more; a broken one is the hang-up's to tell. */
void rma__shm_bell(int fd)
{
	struct shm_msg m = {.type = SHM_BELL};
	if (fd >= 0)
		(void)rma__shm_send(fd, &m, -1);
}

/* Map row's stage from the grant table's file: 0 or -errno. */
int rma__shm_stage_map(int fd, unsigned row, char **out)
{
	void *a = mmap(NULL, SHM_STAGE_ROW, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fd, (off_t)(SHM_STAGE_OFF + row * SHM_STAGE_ROW));

	if (a == MAP_FAILED)
		return -errno;
	*out = a;
	return 0;
}

/* A fresh row: no request, nobody asleep. */
void rma__shm_ring_reset(struct shm_row *row)
{
	for (unsigned i = 0; i < SHM_RING; i++) {
		atomic_store(&row->req[i].seq, 0);
		atomic_store(&row->req[i].ack, 0);
	}
	atomic_store(&row->owner_idle, 0);
	atomic_store(&row->peer_idle, 0);
}

/* ---- the initiator's side ---- */

/* Does x go by the ring?  Small, or any chunk if our row has its stage;
 * host memory on our side, a window that is not a memfd (that one is
 * mapped and copied directly), and an owner that said it serves rings. */
bool rma__shm_ring_fits(const struct shm_peer *p, const struct rma__xfer *x)
{
	const struct rma__rkey *rk = x->rk;
	uint64_t slot;

	if (!((x->len <= SHM_INLINE || (p->stage && x->len <= SHM_MAX_MSG)) &&
	      p->ring && p->row && rk->raw && rk->raw_len == SHM_BLOB_LEN &&
	      !rma__region_device(x->local)))
		return false;
	if (!(rk->raw[1] & SHM_BLOB_MEMFD))
		return true;
	/* A memfd region: mapped, if the grant buys the file. */
	slot = shm_raw_le(rk->raw, SHM_RAW_SLOT, 4);
	return slot < SHM_SLOTS &&
	       !shm_mappable(shm_slot_at(p->tab, (uint32_t)slot),
			     shm_raw_le(rk->raw, SHM_RAW_REGION_LEN, 8));
}

/* Take len bytes of the stage, in turn, whole (the end of the ring is
 * skipped if they do not fit there), on a cache line: their offset plus
 * one, or 0 with too few free. */
static uint32_t stage_take(struct shm_peer *p, uint64_t len)
{
	uint64_t at = p->shead % SHM_STAGE_ROW, skip = 0;

	len = (len + 63) & ~(uint64_t)63;
	if (at + len > SHM_STAGE_ROW) {
		skip = SHM_STAGE_ROW - at;
		at = 0;
	}
	if (p->shead + skip + len - p->stail > SHM_STAGE_ROW)
		return 0;
	p->shead += skip + len;
	return (uint32_t)at + 1;
}

/* Write x's request: 0, or -EAGAIN with the ring or the stage full (the
 * answers that free them kick the peer). */
int rma__shm_ring_post(struct shm_peer *p, const struct rma__xfer *x)
{
	struct shm_row *row = p->row;
	const uint8_t *raw = x->rk->raw;
	uint32_t i = p->rhead % SHM_RING, stage = 0;
	struct shm_req *q = &row->req[i];
	uint8_t *data = q->data;

	if (p->rhead - p->rtail == SHM_RING)
		return -EAGAIN;
	if (x->len > SHM_INLINE) {
		if (!(stage = stage_take(p, x->len)))
			return -EAGAIN;
		data = (uint8_t *)p->stage + stage - 1;
	}
	q->kind = x->kind;
	q->len = (uint32_t)x->len;
	q->slot = (uint32_t)raw[4] | (uint32_t)raw[5] << 8 |
		  (uint32_t)raw[6] << 16 | (uint32_t)raw[7] << 24;
	q->res = 0;
	q->key = x->rk->key;
	q->raddr = x->raddr;
	q->stage = stage;
	if (x->kind == RMA_OP_PUT)
		shm_copy(data, x->laddr, x->len);
	p->rops[i] = (struct shm_rop){x->op_id, x->laddr, (uint32_t)x->len,
				      x->kind, stage, p->shead};
	if (p->rhead++ == p->rtail)
		p->st->nring++;
	/* Our thread went to sleep before this request (its arm saw none):
	 * have the answer ring it. */
	if (rma__thread_asleep(p->st->e))
		atomic_store_explicit(&row->peer_idle, 1, memory_order_relaxed);
	/* Request n is numbered n + 1; published before the idle word is read. */
	atomic_store(&q->seq, p->rhead);
	if (atomic_load(&row->owner_idle) &&
	    atomic_exchange(&row->owner_idle, 0))
		rma__shm_bell(p->w.fd);
	return 0;
}

/* Report the answers the owner published; true if there were some. */
static bool ring_take(struct shm_peer *p)
{
	struct rma_engine *e = p->st->e;
	bool any = false;

	if (atomic_load_explicit(&p->row->peer_idle, memory_order_relaxed) &&
	    !rma__thread_asleep(e))
		atomic_store_explicit(&p->row->peer_idle, 0, memory_order_relaxed);
	while (p->rtail != p->rhead) {
		uint32_t i = p->rtail % SHM_RING;
		const struct shm_req *q = &p->row->req[i];
		struct shm_rop o = p->rops[i];

		if (atomic_load_explicit(&q->ack, memory_order_acquire) !=
		    p->rtail + 1)
			break; /* not answered yet (or not by an owner: it times out) */
		int res = q->res > 0 ? -EPROTO : q->res;

		/* A get's bytes only into an op still live: a dead one's
		 * memory may be the caller's again. */
		if (!res && o.kind == RMA_OP_GET && rma__op_live(e, o.op_id))
			shm_copy(o.laddr, o.stage ? p->stage + o.stage - 1
						: (char *)q->data, o.len);
		if (o.stage)
			p->stail = o.send;
		if (++p->rtail == p->rhead)
			p->st->nring--;
		rma__xfer_done(e, o.op_id, res ? 0 : o.len, res);
		any = true;
	}
	if (any)
		rma__peer_kick(&p->base);
	return any;
}

/* The connection is going: every request still out fails with err.  The
 * owner may yet answer them into the row, which is ours to unmap. */
void rma__shm_ring_fail(struct shm_peer *p, int err)
{
	while (p->rtail != p->rhead) {
		struct shm_rop o = p->rops[p->rtail % SHM_RING];
		if (++p->rtail == p->rhead)
			p->st->nring--;
		rma__xfer_done(p->st->e, o.op_id, 0, err);
	}
	p->stail = p->shead;
}

/* ---- the owner's side ---- */

/* Answer one request of row r: 0 or -errno.  Each field is read once,
 * into h. */
static int serve(struct shm_tr *st, const struct shm_rowst *r,
		 struct shm_req *q)
{
	struct shm_req h;
	uint64_t off;
	uint8_t *data = q->data;
	int rc;

	memcpy(&h.kind, &q->kind,
	       offsetof(struct shm_req, data) - offsetof(struct shm_req, kind));
	atomic_signal_fence(memory_order_seq_cst); /* h, never q, from here */
	if (h.kind != RMA_OP_PUT && h.kind != RMA_OP_GET)
		return -EINVAL;
	if (h.stage) {
		if (!r->stage || h.len > SHM_MAX_MSG ||
		    h.stage - 1 + (uint64_t)h.len > SHM_STAGE_ROW)
			return -EINVAL;
		data = (uint8_t *)r->stage + h.stage - 1;
	} else if (h.len > SHM_INLINE) {
		return -EINVAL;
	}
	if (h.slot >= SHM_SLOTS)
		return -EKEYREJECTED;
	const struct shm_slot *s = shm_slot_at(st->tab, h.slot);
	rc = shm_window(s, h.key, h.kind == RMA_OP_PUT ? RMA_ACCESS_REMOTE_WRITE
						       : RMA_ACCESS_REMOTE_READ,
			h.raddr, h.len, &off);
	if (rc)
		return rc;
	char *mem = (char *)(uintptr_t)(s->addr + off);
	if (h.kind == RMA_OP_PUT)
		shm_copy(mem, data, h.len);
	else
		shm_copy(data, mem, h.len);
	return 0;
}

/* Is the row's next request written?  Its number, n + 1, says so. */
static bool row_ready(struct shm_row *row, uint32_t cons)
{
	return atomic_load_explicit(&row->req[cons % SHM_RING].seq,
				    memory_order_acquire) == cons + 1;
}

/* Serve s's row, at most a ring's worth (an initiator that refills as
 * fast as it is served must not hold the round); true if it asked for
 * something. */
static bool serve_row(struct shm_tr *st, struct shm_srv *s)
{
	struct shm_rowst *r = &st->rows[s->row];
	struct shm_row *row = shm_row_at(st->tab, (unsigned)s->row);
	unsigned n = 0;

	if (atomic_load_explicit(&row->owner_idle, memory_order_relaxed) &&
	    !rma__thread_asleep(st->e))
		atomic_store_explicit(&row->owner_idle, 0, memory_order_relaxed);
	while (n < SHM_RING && row_ready(row, r->cons)) {
		struct shm_req *q = &row->req[r->cons % SHM_RING];
		q->res = serve(st, r, q);
		r->cons++;
		n++;
		atomic_store(&q->ack, r->cons); /* before the idle word is read */
	}
	if (!n)
		return false;
	if (atomic_load(&row->peer_idle) &&
	    atomic_exchange(&row->peer_idle, 0))
		rma__shm_bell(s->w.fd);
	return true;
}

/* Once per progress round, and from a spinning round directly: serve the
 * rows, take the answers.  True if either found work.  Lock held. */
bool rma__shm_ring_round(struct shm_tr *st)
{
	bool any = false;

	for (struct shm_srv *s = st->served, *next; s; s = next) {
		next = s->next;
		if (s->row >= 0)
			any |= serve_row(st, s);
	}
	for (struct shm_peer *p = st->peers; p && st->nring; p = p->next)
		if (p->rhead != p->rtail && p->row)
			any |= ring_take(p);
	if (any)
		rma__watch_touch(st->e, &st->rw);
	return any;
}

/* The thread is about to sleep: say so in every row with work to come,
 * then look once more.  0, or -EAGAIN if work came meanwhile. */
int rma__shm_ring_arm(struct shm_tr *st)
{
	for (struct shm_srv *s = st->served; s; s = s->next) {
		if (s->row < 0)
			continue;
		struct shm_row *row = shm_row_at(st->tab, (unsigned)s->row);
		atomic_store(&row->owner_idle, 1);
		if (row_ready(row, st->rows[s->row].cons))
			return -EAGAIN;
	}
	for (struct shm_peer *p = st->peers; p && st->nring; p = p->next) {
		if (p->rhead == p->rtail || !p->row)
			continue;
		atomic_store(&p->row->peer_idle, 1);
		if (atomic_load(&p->row->req[p->rtail % SHM_RING].ack) ==
		    p->rtail + 1)
			return -EAGAIN;
	}
	return 0;
}
