/*
 * owner.c - the owner's side: the grant table, the listener, one control
 * connection per initiator engine, and the drain that makes release final.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport/shm/shm.h"

static void srv_release(struct rma__watch *w)
{
	struct shm_srv *s = container_of(w, struct shm_srv, w);
	free(s->setup);
	free(s->q);
	free(s);
}

/* Back to the free list, unless another cut-off row still names it. */
void rma__shm_slot_put(struct shm_tr *st, uint32_t slot)
{
	for (unsigned i = 0; st->nheld && i < SHM_ROWS; i++)
		if (st->rows[i].used && st->rows[i].hold == slot + 1)
			return;
	st->free_slots[st->nfree++] = slot;
}

static void row_unhold(struct shm_tr *st, struct shm_rowst *r)
{
	uint32_t h = r->hold;

	if (!h)
		return;
	r->hold = 0;
	st->nheld--;
	rma__shm_slot_put(st, h - 1);
}

static void row_free(struct shm_tr *st, unsigned i)
{
	struct shm_rowst *r = &st->rows[i];
	if (!r->s)
		st->nquar--;
	row_unhold(st, r);
	atomic_store(&shm_row_at(st->tab, i)->cur, 0);
	if (r->stage) { /* its pages back to the system, zero for the next */
		munmap(r->stage, SHM_STAGE_ROW);
		(void)fallocate(st->tfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)(SHM_STAGE_OFF + i * SHM_STAGE_ROW),
				(off_t)SHM_STAGE_ROW);
	}
	close(r->pidfd);
	memset(r, 0, sizeof *r);
}

/* Quarantined rows: free those whose process is gone, and give back the
 * slot a cut-off copy held once it has left it. */
void rma__shm_rows_reap(struct shm_tr *st)
{
	for (unsigned i = 0; i < SHM_ROWS; i++) {
		struct shm_rowst *r = &st->rows[i];
		if (!r->used || r->s)
			continue;
		if (rma__shm_pid_dead(r->pidfd))
			row_free(st, i);
		else if (r->hold &&
			 atomic_load(&shm_row_at(st->tab, i)->cur) != r->hold)
			row_unhold(st, r);
	}
}

/*
 * bye: the initiator closed the connection, which it does only once its
 * engine has stopped copying and unmapped its row.  When we close it, a live
 * initiator still maps its row writable and copies until it sees the hang-up
 * (or is inside a copy now): the row is quarantined until it exits, else a
 * new user of the row would share the word with it.
 */
void rma__shm_srv_close(struct shm_srv *s, bool bye)
{
	struct shm_tr *st = s->st;
	struct shm_srv **pp = &st->served;

	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	st->nserved--;
	rma__admit_drop(&st->admit, &s->adm);
	if (s->row >= 0) {
		struct shm_rowst *r = &st->rows[s->row];
		if (!bye && !rma__shm_pid_dead(r->pidfd)) {
			r->s = NULL; /* quarantined */
			st->nquar++;
		} else
			row_free(st, (unsigned)s->row);
		s->row = -1;
	}
	rma__watch_retire(st->e, &s->w);
	close(s->w.fd);
}

/* A free row for s, within its process's share: one live process must
 * not hold them all (a row it left while alive stays quarantined). */
static int row_get(struct shm_tr *st, struct shm_srv *s)
{
	unsigned mine = 0;
	int free_row = -1;

	for (unsigned i = 0; i < SHM_ROWS; i++) {
		struct shm_rowst *r = &st->rows[i];
		if (r->used && !r->s && rma__shm_pid_dead(r->pidfd))
			row_free(st, i); /* the quarantined process is gone */
		if (r->used)
			mine += r->pid == s->pid;
		else if (free_row < 0)
			free_row = (int)i;
	}
	if (mine >= SHM_PID_ROWS || free_row < 0)
		return -EUSERS;
	struct shm_rowst *r = &st->rows[free_row];
	int fd = rma__shm_pidfd(s->w.fd, s->pid);
	if (fd < 0)
		return fd;
	atomic_store(&shm_row_at(st->tab, (unsigned)free_row)->cur, 0);
	rma__shm_ring_reset(shm_row_at(st->tab, (unsigned)free_row));
	if (!st->stage_on || rma__shm_stage_map(st->tfd, (unsigned)free_row, &r->stage))
		r->stage = NULL; /* served without: copies instead */
	r->used = true;
	r->s = s;
	r->pidfd = fd;
	r->pid = s->pid;
	s->row = free_row;
	return 0;
}

/* A memfd only to a peer that holds a live key of that region granting
 * all of it, read and write: the file maps all of it for both, and a
 * read-only fd is reopened read-write through /proc by whoever holds it.
 * MAP is answered when the answer goes, so a region released meanwhile
 * is refused. */
static int srv_send(struct shm_srv *s, const struct shm_msg *q)
{
	struct shm_msg m = {.type = SHM_MAPPED, .a = q->a,
			    .status = -EKEYREJECTED};
	struct rma_engine *e = s->st->e;
	struct rma_region *kr = NULL;
	struct shm_reg *g = s->st->regs;
	char *addr;

	if (q->type != SHM_MAP)
		return rma__shm_send(s->w.fd, q, -1);
	while (g && g->id != q->a)
		g = g->next;
	/* Released meanwhile, or not a key of this region: refused. */
	if (g && !rma__target_lookup(e, q->b, 0, 0, 0, &addr, &kr, NULL) &&
	    kr == g->r) {
		uint64_t len = rma__region_len(g->r);
		m.status = -EACCES; /* a window or access less than the file's */
		if (!rma__target_lookup(e, q->b, 0, len, RMA_ACCESS_REMOTE_RW,
					&addr, &kr, NULL) &&
		    addr == rma__region_addr(g->r)) {
			m.status = 0;
			m.b = len;
			return rma__shm_send(s->w.fd, &m, rma__region_fd(g->r));
		}
	}
	return rma__shm_send(s->w.fd, &m, -1);
}

/* A send that failed so: the initiator closed its end (its own close,
 * as a hang-up read first would say). */
static bool gone(int rc)
{
	return rc == -EPIPE || rc == -ECONNRESET;
}

/*
 * Send q now, or after those already waiting: a full socket (an initiator
 * that does not run progress for a while) is backpressure, not an error.
 * Past SHM_PENDING the connection is closed, which drops every mapping on
 * the initiator's side.  False: s is gone.
 */
static bool srv_put(struct shm_srv *s, const struct shm_msg *q)
{
	struct shm_tr *st = s->st;
	int rc = s->nq ? -EAGAIN : srv_send(s, q);

	if (rc == -EAGAIN && s->nq < SHM_PENDING) {
		if (s->nq == s->capq) {
			unsigned cap = s->capq ? 2 * s->capq : 16;
			struct shm_msg *n = realloc(s->q, cap * sizeof *n);
			if (!n)
				goto fail;
			s->q = n;
			s->capq = cap;
		}
		s->q[s->nq++] = *q;
		if (s->nq == 1 && rma__watch_mod(st->e, &s->w, EPOLLIN | EPOLLOUT))
			goto fail;
		return true;
	}
	if (!rc)
		return true;
	if (rc == -EAGAIN)
		rma__warn("shm: pid %d has not read its control socket for %u "
			  "messages; closing its connection", (int)s->pid,
			  SHM_PENDING);
fail:
	rma__shm_srv_close(s, gone(rc));
	return false;
}

/* The socket has room again: 0, or -errno. */
static int srv_flush(struct shm_srv *s)
{
	unsigned i = 0;
	int rc = 0;

	while (i < s->nq && !(rc = srv_send(s, &s->q[i])))
		i++;
	memmove(s->q, s->q + i, (s->nq - i) * sizeof *s->q);
	s->nq -= i;
	if (rc && rc != -EAGAIN)
		return rc;
	return s->nq ? 0 : rma__watch_mod(s->st->e, &s->w, EPOLLIN);
}

static void srv_cb(struct rma__watch *w, uint32_t ev)
{
	struct shm_srv *s = container_of(w, struct shm_srv, w);
	struct shm_tr *st = s->st;
	struct shm_msg m;
	int rc;

	if (s->setup) { /* first the secret, as on tcp */
		rc = rma__setup_run(s->setup);
		if (rc == -EINPROGRESS) {
			rma__watch_mod(st->e, w, rma__setup_events(s->setup));
			return;
		}
		free(s->setup);
		s->setup = NULL;
		if (rc) {
			rma__refused(&st->refusals, rc == -EACCES ? RMA__REFUSED_SECRET
					: RMA__REFUSED_PROTO, rma__now_ns());
			rma__shm_srv_close(s, false);
			return;
		}
		rma__watch_mod(st->e, w, EPOLLIN);
	}
	if ((ev & EPOLLOUT) && s->nq && (rc = srv_flush(s))) {
		rma__shm_srv_close(s, gone(rc) || (ev & EPOLLHUP));
		return;
	}
	for (;;) {
		rc = rma__shm_recv(w->fd, &m, NULL);
		if (rc <= 0)
			break;
		if (m.type == SHM_HELLO && s->row < 0) {
			struct shm_msg r = {.type = SHM_WELCOME, .a = st->engine_id,
					    .c = SHM_FEAT_RING};
			if (m.b != st->engine_id)
				r.status = -ESTALE; /* another engine owns the name */
			else
				r.status = row_get(st, s);
			r.b = (uint64_t)s->row;
			if (!r.status && st->rows[s->row].stage)
				r.c |= SHM_FEAT_STAGE;
			if (!r.status) /* welcomed: its row bounds it now */
				rma__admit_drop(&st->admit, &s->adm);
			if (rma__shm_send(w->fd, &r, r.status ? -1 : st->tfd) || r.status) {
				rc = -EPROTO;
				break;
			}
		} else if (m.type == SHM_MAP && s->row >= 0) {
			if (!srv_put(s, &m))
				return; /* closed */
		} else if (m.type == SHM_BELL && s->row >= 0) {
			/* woken: this round serves the row */
		} else {
			rc = -EPROTO;
			break;
		}
	}
	if (rc < 0 || (ev & (EPOLLHUP | EPOLLERR)))
		rma__shm_srv_close(s, rc == -ECONNRESET || (ev & EPOLLHUP));
}

/* Nothing of the handshake has come in: the cheapest to lose. */
static bool adm_silent(struct rma__admitted *a)
{
	struct shm_srv *s = container_of(a, struct shm_srv, adm);
	return s->setup && rma__admit_silent(s->setup, s->w.fd);
}

static void adm_evict(struct rma__admitted *a)
{
	rma__shm_srv_close(container_of(a, struct shm_srv, adm), false);
}

/* Connections not yet welcomed have caps per process and in all, and a
 * new one evicts the oldest (silent first, its own process's first).
 * Welcomed ones hold a row: rows bound them, and evicting one would free
 * nothing (its row is quarantined while its process lives). */
static const struct rma__admit_ops adm_ops = {
	.silent = adm_silent,
	.evict = adm_evict,
};

static void accept_cb(struct rma__watch *w, uint32_t ev)
{
	struct shm_tr *st = container_of(w, struct shm_tr, lw);

	/* A bounded batch: a peer connecting as fast as we accept must not
	 * keep this loop, and the engine lock, from everything else. */
	for (int i = 0; i < SHM_ACCEPT_BATCH; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cr;
		socklen_t len = sizeof cr;
		uint8_t who[16] = {0};
		struct shm_srv *s;

		if (fd < 0) {
			if (errno != EMFILE && errno != ENFILE)
				return;
			/* Out of fds: shed a handshake and come back next
			 * round; with none to shed, stop listening until the
			 * next check rather than spin. */
			rma__refused(&st->refusals, RMA__REFUSED_LIMIT, rma__now_ns());
			if (st->admit.nhandshakes)
				rma__admit_make_room(&st->admit, NULL);
			else if (!rma__watch_mod(st->e, &st->lw, 0))
				st->listen_paused = true;
			return;
		}
		/* Only our own user (or root) may attach: anyone else could not
		 * copy anyway, and must not learn the table. */
		if (st->nserved >= SHM_MAX_CONNS ||
		    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) ||
		    (cr.uid != geteuid() && cr.uid != 0) || cr.pid <= 0) {
			close(fd);
			continue;
		}
		/* The caps count per process: its pid and uid stand for the
		 * remote address. */
		memcpy(who, &cr.pid, sizeof cr.pid);
		memcpy(who + 4, &cr.uid, sizeof cr.uid);
		rma__admit_make_room(&st->admit, who);
		if (!(s = calloc(1, sizeof *s))) {
			close(fd);
			continue;
		}
		memcpy(s->adm.raddr, who, sizeof who);
		s->st = st;
		s->row = -1;
		s->hs_deadline = rma__now_ns() + st->admit.lim.handshake_ns;
		s->pid = cr.pid;
		s->w.fd = fd;
		s->w.cb = srv_cb;
		s->w.release = srv_release;
		struct rma__setup_params sp = {
			.key = st->key, .kind = SHM_SETUP_KIND,
			.engine_id = st->engine_id,
		};
		s->setup = malloc(sizeof *s->setup);
		if (!s->setup || rma__setup_init(s->setup, fd, true, &sp) ||
		    rma__watch_add(st->e, &s->w, EPOLLIN)) {
			close(fd);
			free(s->setup);
			free(s);
			continue;
		}
		s->next = st->served;
		st->served = s;
		st->nserved++;
		rma__admit_handshake(&st->admit, &s->adm);
	}
}

int rma__shm_owner_init(struct shm_tr *st, const struct rma__topts *o)
{
	static const struct rma__admit_limits dflt = {
		.conns = SHM_MAX_CONNS, .handshakes = 64,
		.addr_conns = SHM_MAX_CONNS, .addr_handshakes = 8,
		.handshake_ns = 3000 * 1000000LL, .idle_ns = -1,
	};
	struct sockaddr_un sun;
	socklen_t len;
	int rc;

	st->admit.ops = &adm_ops;
	st->admit.refusals = &st->refusals;
	rc = rma__admit_options("shm", o, &dflt, &st->admit.lim);
	if (rc)
		return rc;

	st->tfd = memfd_create("rma-shm-grants", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (st->tfd < 0)
		return -errno;
	/* Every peer holds the fd: sealed at its size, none can shrink it
	 * under our mappings (a touch past the end would be SIGBUS here). */
	if (ftruncate(st->tfd, SHM_FILE_SIZE) ||
	    fcntl(st->tfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		return -errno;
	st->tab = mmap(NULL, SHM_TABLE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		       st->tfd, 0);
	if (st->tab == MAP_FAILED) {
		st->tab = NULL;
		return -errno;
	}
	*(uint64_t *)st->tab = SHM_TABLE_MAGIC;
	st->free_slots = malloc(SHM_SLOTS * sizeof *st->free_slots);
	st->pend = malloc(SHM_SLOTS * sizeof *st->pend);
	if (!st->free_slots || !st->pend)
		return -ENOMEM;
	for (uint32_t i = 0; i < SHM_SLOTS; i++)
		st->free_slots[st->nfree++] = SHM_SLOTS - 1 - i;
	st->lw.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (st->lw.fd < 0)
		return -errno;
	len = rma__shm_sockname(st->id.pid, st->engine_id, &sun);
	if (bind(st->lw.fd, (struct sockaddr *)&sun, len) || listen(st->lw.fd, 256))
		return -errno;
	st->lw.cb = accept_cb;
	rc = rma__watch_add(st->e, &st->lw, EPOLLIN);
	return rc;
}

void rma__shm_owner_fini(struct shm_tr *st)
{
	while (st->served)
		rma__shm_srv_close(st->served, false);
	for (unsigned i = 0; i < SHM_ROWS; i++)
		if (st->rows[i].used)
			row_free(st, i);
	if (st->lw.fd >= 0)
		close(st->lw.fd);
	if (st->tab)
		munmap(st->tab, SHM_TABLE_SIZE);
	if (st->tfd >= 0)
		close(st->tfd);
	free(st->free_slots);
	free(st->pend);
}

static bool pending(const struct shm_tr *st, uint64_t cur)
{
	uint64_t i = cur - 1;
	return cur && i < SHM_SLOTS && (st->pend_bits[i / 64] >> (i % 64) & 1);
}

/*
 * The grants in st->pend are revoked (their keys already 0).  Wait until
 * no initiator is inside a copy through any of them, for at most drain_ms
 * in all, however many there are: an initiator whose process is gone is
 * not waited for (its copy ended with it); one still copying at the bound
 * (a stopped process) loses its connection and is logged: at most the one
 * chunk it is in may still land.  Then the slots go back to the free
 * list, but one such a row still names (rma__shm_rows_reap gives it back).
 */
void rma__shm_drain(struct shm_tr *st)
{
	int64_t deadline = rma__now_ns() + (int64_t)st->drain_ms * 1000000;

	atomic_thread_fence(memory_order_seq_cst);
	for (unsigned i = 0; i < SHM_ROWS; i++) {
		struct shm_rowst *r = &st->rows[i];
		struct shm_row *row = shm_row_at(st->tab, i);
		unsigned spins = 0;
		uint64_t cur;

		if (!r->used)
			continue;
		while (pending(st, cur = atomic_load(&row->cur))) {
			if (++spins < 64)
				continue;
			if (rma__shm_pid_dead(r->pidfd))
				break;
			if (rma__now_ns() > deadline) {
				rma__warn("shm: release: pid %d still copying after %u ms; "
					  "cutting it off (its current chunk, at most %llu "
					  "bytes, may still land)", (int)r->pid,
					  st->drain_ms, (unsigned long long)st->max_msg);
				if (r->s)
					rma__shm_srv_close(r->s, false);
				if (r->used) { /* quarantined, still naming the slot */
					if (r->hold)
						row_unhold(st, r);
					r->hold = (uint32_t)cur;
					st->nheld++;
				}
				break;
			}
			sched_yield();
		}
	}
	while (st->npend) {
		uint32_t slot = st->pend[--st->npend];
		st->pend_bits[slot / 64] &= ~(1ull << (slot % 64));
		rma__shm_slot_put(st, slot);
	}
}

void rma__shm_unmap_notify(struct shm_tr *st, uint32_t region_id)
{
	struct shm_msg m = {.type = SHM_UNMAP, .a = region_id};
	for (struct shm_srv *s = st->served, *next; s; s = next) {
		next = s->next;
		if (s->row >= 0)
			srv_put(s, &m);
	}
}

/* Connections that never said HELLO. */
void rma__shm_owner_expire(struct shm_tr *st, int64_t now)
{
	for (struct shm_srv *s = st->served, *next; s; s = next) {
		next = s->next;
		if (s->row < 0 && now > s->hs_deadline) {
			rma__refused(&st->refusals, RMA__REFUSED_TIMEOUT, now);
			rma__shm_srv_close(s, false);
		}
	}
}
