/*
 * peer.c - the initiator's side: the control connection, the copies, and
 * the memfd regions mapped from the owner.
 *
 * Every copy is bracketed by the owner's grant table: announce the slot in
 * our row, check the slot's key (and the window, the access) as the owner
 * publishes them, copy, clear the row.  The owner's release clears the key
 * first and then waits for rows naming the slot, so a copy either saw the
 * key cleared or is waited for (design.md, "The shm transport").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport/shm/shm.h"

static void peer_free(struct shm_peer *p)
{
	free(p->setup);
	if (p->tab)
		munmap((void *)p->tab, SHM_ROW_OFF);
	if (p->row)
		munmap(p->row, SHM_PAGE);
	if (p->stage)
		munmap(p->stage, SHM_STAGE_ROW);
	for (unsigned i = 0; i < SHM_MAPS; i++)
		if (p->maps[i].addr)
			munmap(p->maps[i].addr, p->maps[i].len);
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

/* The watch is buried: free the peer if the core is done with it too. */
static void peer_release(struct rma__watch *w)
{
	struct shm_peer *p = container_of(w, struct shm_peer, w);
	p->released = true;
	if (p->gone)
		peer_free(p);
}

/* Stop watching a broken control connection; the peer lives on, failed,
 * until the core disconnects it. */
static void peer_close(struct shm_peer *p, int err)
{
	if (p->w.fd < 0)
		return;
	/* No copy after this (the peer is failed or gone, and copies end
	 * inside post): the row goes first, since the owner hands it to
	 * another initiator once it sees us close; the requests in it fail. */
	if (p->row) {
		rma__shm_ring_fail(p, err);
		munmap(p->row, SHM_PAGE);
		p->row = NULL;
	}
	if (p->stage) {
		munmap(p->stage, SHM_STAGE_ROW);
		p->stage = NULL;
	}
	rma__watch_retire(p->st->e, &p->w);
	close(p->w.fd);
	p->w.fd = -1;
}

static void peer_fail(struct shm_peer *p, int err)
{
	peer_close(p, err);
	if (p->base.state != RMA__PEER_FAILED)
		rma__peer_failed(&p->base, err);
}

static void unlink_peer(struct shm_peer *p)
{
	struct shm_peer **pp = &p->st->peers;
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp)
		*pp = p->next;
}

static struct shm_map *map_find(struct shm_peer *p, uint32_t id)
{
	for (unsigned i = 0; i < SHM_MAPS; i++)
		if (p->maps[i].id == id)
			return &p->maps[i];
	return NULL;
}

static void map_drop(struct shm_map *m)
{
	if (m->addr)
		munmap(m->addr, m->len);
	memset(m, 0, sizeof *m);
}

/* WELCOME: map the table (read-only), our row and its stage (writable). */
static int welcome(struct shm_peer *p, const struct shm_msg *m, int fd)
{
	struct stat sb;
	void *tab, *row;

	if (m->status)
		return m->status < 0 ? m->status : -EPROTO;
	if (fd < 0 || m->a != p->expect_id || m->b >= SHM_ROWS ||
	    fstat(fd, &sb) || (uint64_t)sb.st_size < SHM_TABLE_SIZE)
		return -EPROTO;
	tab = mmap(NULL, SHM_ROW_OFF, PROT_READ, MAP_SHARED, fd, 0);
	if (tab == MAP_FAILED)
		return -errno;
	row = mmap(NULL, SHM_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   (off_t)(SHM_ROW_OFF + m->b * SHM_PAGE));
	if (row == MAP_FAILED) {
		int rc = -errno;
		munmap(tab, SHM_ROW_OFF);
		return rc;
	}
	p->tab = tab;
	p->row = row;
	if (*(const uint64_t *)p->tab != SHM_TABLE_MAGIC)
		return -EPROTO;
	/* Without a stage, larger ops copy by cross-memory attach. */
	if ((m->c & SHM_FEAT_STAGE) && (uint64_t)sb.st_size >= SHM_FILE_SIZE &&
	    rma__shm_stage_map(fd, (unsigned)m->b, &p->stage))
		p->stage = NULL;
	p->welcomed = true;
	p->ring = m->c & SHM_FEAT_RING;
	p->base.max_msg = p->st->max_msg;
	p->base.credits = SHM_CREDITS;
	rma__peer_ready(&p->base);
	return 0;
}

static int mapped(struct shm_peer *p, const struct shm_msg *m, int fd)
{
	struct shm_map *mp = map_find(p, (uint32_t)m->a);
	struct stat sb;

	if (!mp || !mp->pending)
		return -EPROTO;
	mp->pending = false;
	rma__peer_kick(&p->base);
	if (m->status) {
		mp->err = m->status < 0 ? m->status : -EPROTO;
		return 0;
	}
	if (fd < 0 || fstat(fd, &sb) || (uint64_t)sb.st_size < m->b || !m->b) {
		mp->err = -EPROTO;
		return 0;
	}
	void *a = mmap(NULL, m->b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a == MAP_FAILED) {
		mp->err = -errno;
		return 0;
	}
	mp->addr = a;
	mp->len = m->b;
	rma__log(RMA_LOG_DEBUG, "shm: mapped region %u of pid %d (%llu bytes)",
		 mp->id, (int)p->pid, (unsigned long long)mp->len);
	return 0;
}

static void peer_cb(struct rma__watch *w, uint32_t ev)
{
	struct shm_peer *p = container_of(w, struct shm_peer, w);
	struct shm_msg m;
	int rc, fd;

	if (p->setup) { /* first the secret and the engine id, as on tcp */
		rc = rma__setup_run(p->setup);
		if (rc == -EINPROGRESS) {
			rma__watch_mod(p->st->e, w, rma__setup_events(p->setup));
			return;
		}
		free(p->setup);
		p->setup = NULL;
		struct shm_msg h = {.type = SHM_HELLO, .a = p->st->engine_id,
				    .b = p->expect_id};
		if (!rc)
			rc = rma__shm_send(w->fd, &h, -1);
		if (!rc)
			rc = rma__watch_mod(p->st->e, w, EPOLLIN);
		if (rc)
			peer_fail(p, rc);
		return;
	}
	for (;;) {
		fd = -1;
		rc = rma__shm_recv(w->fd, &m, &fd);
		if (rc <= 0)
			break;
		if (m.type == SHM_WELCOME && !p->welcomed)
			rc = welcome(p, &m, fd);
		else if (m.type == SHM_MAPPED && p->welcomed)
			rc = mapped(p, &m, fd);
		else if (m.type == SHM_UNMAP && p->welcomed && fd < 0) {
			struct shm_map *mp = map_find(p, (uint32_t)m.a);
			if (mp && !mp->pending)
				map_drop(mp);
			rc = 0;
		} else if (m.type == SHM_BELL && p->welcomed && fd < 0)
			rc = 0; /* woken: this round takes the answers */
		else
			rc = -EPROTO;
		if (fd >= 0)
			close(fd); /* a mapping outlives its fd */
		if (rc < 0)
			break;
	}
	if (rc == 0 && (ev & (EPOLLHUP | EPOLLERR)))
		rc = -ECONNRESET;
	if (rc < 0)
		peer_fail(p, rc);
}

/* Connect to the owner's socket and check who answers; 0 or -errno. */
static int dial(struct shm_peer *p, const struct shm_blob *b, uint64_t engine_id)
{
	struct sockaddr_un sun;
	struct ucred cr;
	socklen_t sl;
	uint64_t start;
	int rc;

	p->w.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->w.fd < 0)
		return -errno;
	sl = rma__shm_sockname(b->id.pid, engine_id, &sun);
	if (connect(p->w.fd, (struct sockaddr *)&sun, sl))
		return -errno; /* ECONNREFUSED: gone, or another network namespace */
	/* The listener is the process the advertisement names, of our user,
	 * and not a newer process that reused its pid. */
	sl = sizeof cr;
	if (getsockopt(p->w.fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) ||
	    cr.pid != p->pid || (cr.uid != geteuid() && geteuid() != 0))
		return -EPERM;
	p->pidfd = rma__shm_pidfd(p->w.fd, p->pid);
	if (p->pidfd < 0)
		return p->pidfd;
	rc = rma__shm_start_time(p->pid, &start);
	if (rc || start != b->id.start)
		return -ESTALE;
	struct rma__setup_params sp = {
		.key = p->st->key, .kind = SHM_SETUP_KIND,
		.engine_id = p->st->engine_id, .expect_id = engine_id,
	};
	p->setup = malloc(sizeof *p->setup);
	if (!p->setup)
		return -ENOMEM;
	rc = rma__setup_init(p->setup, p->w.fd, false, &sp);
	if (rc)
		return rc;
	p->w.cb = peer_cb;
	p->w.release = peer_release;
	rc = rma__watch_add(p->st->e, &p->w, EPOLLOUT | EPOLLIN);
	if (rc == 0)
		p->watched = true;
	return rc;
}

int rma__shm_connect(struct rma__transport *t, const void *blob, size_t len,
		     uint64_t engine_id, struct rma__peer **out)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	struct shm_blob b;
	struct shm_peer *p;
	int rc;

	if (rma__shm_blob_decode(blob, len, &b))
		return -EBADMSG;
	p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->st = st;
	p->pidfd = -1;
	p->expect_id = engine_id;
	p->pid = (pid_t)b.id.pid;
	p->hs_deadline = rma__now_ns() + SHM_HELLO_NS;
	rc = dial(p, &b, engine_id);
	if (rc) {
		/* Failed at once: a peer kept failed, so routing passes over
		 * shm for this engine a while and says so once. */
		if (p->w.fd >= 0 && !p->watched)
			close(p->w.fd);
		p->w.fd = -1;
		rma__peer_failed(&p->base, rc);
	}
	p->next = st->peers;
	st->peers = p;
	*out = &p->base;
	return 0;
}

/* Report what was copied: the core counts a chunk only after post returns. */
void rma__shm_flush(struct rma__peer *bp)
{
	struct shm_peer *p = container_of(bp, struct shm_peer, base);
	struct rma_engine *e = p->st->e;

	while (p->ndone) {
		struct shm_done d = p->done[--p->ndone];
		rma__xfer_done(e, d.op_id, d.len, d.res);
	}
}

void rma__shm_disconnect(struct rma__peer *bp, int err)
{
	struct shm_peer *p = container_of(bp, struct shm_peer, base);

	/* Copies are synchronous: these ended; report what they did. */
	rma__shm_flush(bp);
	unlink_peer(p);
	p->base.state = RMA__PEER_FAILED;
	p->gone = true;
	if (p->w.fd >= 0)
		peer_close(p, err); /* peer_release frees it */
	else if (!p->watched || p->released)
		peer_free(p);
}

/* Cross-memory attach, looping on short counts (they stop at a remote
 * page the owner cannot give: EFAULT). */
static int cma(struct shm_peer *p, unsigned kind, char *l, uint64_t raddr,
	       uint64_t len)
{
	while (len) {
		struct iovec lv = {l, len}, rv = {(void *)(uintptr_t)raddr, len};
		ssize_t n = kind == RMA_OP_PUT
				    ? process_vm_writev(p->pid, &lv, 1, &rv, 1, 0)
				    : process_vm_readv(p->pid, &lv, 1, &rv, 1, 0);
		if (n <= 0) {
			int rc = n < 0 ? -errno : -EFAULT;
			return rc == -ESRCH ? -ECONNRESET : rc;
		}
		l += n;
		raddr += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* The memfd path: the region mapped here, asked for on first use. */
static int via_map(struct shm_peer *p, const struct shm_slot *s, uint64_t key,
		   uint64_t region_len, char **dst, uint64_t raddr, uint64_t len)
{
	struct shm_map *mp = map_find(p, s->region_id);

	if (!mp && !shm_mappable(s, region_len))
		return 1; /* the owner would refuse: copy by cma */
	if (!mp) {
		mp = map_find(p, 0);
		if (!mp) { /* full: drop one that is not pending */
			for (unsigned i = 0; i < SHM_MAPS && !mp; i++)
				if (!p->maps[(s->region_id + i) % SHM_MAPS].pending)
					mp = &p->maps[(s->region_id + i) % SHM_MAPS];
			if (!mp)
				return 1; /* all pending: use cma */
			map_drop(mp);
		}
		struct shm_msg m = {.type = SHM_MAP, .a = s->region_id, .b = key};
		if (p->w.fd < 0 || rma__shm_send(p->w.fd, &m, -1))
			return 1;
		mp->id = s->region_id;
		mp->pending = true;
		return -EAGAIN;
	}
	if (mp->pending)
		return -EAGAIN;
	if (mp->err || raddr < s->region_addr ||
	    raddr - s->region_addr > mp->len ||
	    len > mp->len - (raddr - s->region_addr))
		return 1; /* not mappable: copy by cma, which checks */
	*dst = mp->addr + (raddr - s->region_addr);
	return 0;
}

/* Move x's bytes now: 0, -ECONNRESET (the owner is gone: the chunk ends
 * with it), or a refusal (-EAGAIN: a mapping was asked for). */
static int move(struct shm_peer *p, const struct rma__xfer *x)
{
	const struct rma__rkey *rk = x->rk;
	uint32_t slot;
	const struct shm_slot *s;
	char *dst = NULL, *l = x->laddr;
	bool staged = rma__region_device(x->local);
	uint64_t off;
	unsigned need = x->kind == RMA_OP_PUT ? RMA_ACCESS_REMOTE_WRITE
					      : RMA_ACCESS_REMOTE_READ;
	int rc;

	/* ad_parse validated the blob; only its slot is needed here. */
	if (!rk->raw || rk->raw_len != SHM_BLOB_LEN)
		return -EKEYREJECTED;
	slot = (uint32_t)shm_raw_le(rk->raw, SHM_RAW_SLOT, 4);
	if (slot >= SHM_SLOTS)
		return -EKEYREJECTED; /* an engine address names no window */
	if (staged) {
		/* Local device memory: copied through the pinned buffer, a
		 * put's bytes before the window is entered. */
		if ((rc = rma__stage_reserve(&p->st->stage, x->local)))
			return rc;
		l = p->st->stage.buf;
		if (x->kind == RMA_OP_PUT &&
		    (rc = rma__stage_dtoh(x->local, l, x->laddr, x->len)))
			return rc;
	}
	s = shm_slot_at(p->tab, slot);
	/* Announce, then check: the owner clears the key, then reads rows. */
	atomic_store(&p->row->cur, (uint64_t)slot + 1);
	if ((rc = shm_window(s, rk->key, need, x->raddr, x->len, &off)))
		goto out;
	if (s->region_id) {
		rc = via_map(p, s, rk->key,
			     shm_raw_le(rk->raw, SHM_RAW_REGION_LEN, 8), &dst,
			     x->raddr, x->len);
		if (rc < 0) /* -EAGAIN: asked for the mapping, kicked on answer */
			goto out;
	}
	if (dst) {
		if (x->kind == RMA_OP_PUT)
			shm_copy(dst, l, x->len);
		else
			shm_copy(l, dst, x->len);
		rc = 0;
	} else {
		/* The owner may be gone and its pid reused: check it lives, at
		 * least every SHM_ALIVE_NS (a memfd copy needs no check). */
		int64_t now = rma__now_ns();
		if (now - p->alive_at > SHM_ALIVE_NS) {
			if (rma__shm_pid_dead(p->pidfd)) {
				rc = -ECONNRESET;
				goto out;
			}
			p->alive_at = now;
		}
		rc = cma(p, x->kind, l, x->raddr, x->len);
	}
out:
	atomic_store_explicit(&p->row->cur, 0, memory_order_release);
	if (!rc && staged && x->kind == RMA_OP_GET)
		rc = rma__stage_htod(x->local, x->laddr, l, x->len);
	return rc;
}

int rma__shm_post(struct rma__peer *bp, const struct rma__xfer *x)
{
	struct shm_peer *p = container_of(bp, struct shm_peer, base);
	int rc;

	if (rma__shm_ring_fits(p, x))
		return rma__shm_ring_post(p, x);
	if (p->ndone == SHM_CREDITS)
		return -EAGAIN;
	rc = move(p, x);
	if (rc && rc != -ECONNRESET) /* refused: the op fails, or waits */
		return rc;
	p->done[p->ndone++] = (struct shm_done){x->op_id, x->len, rc};
	return 0;
}

/* A copy is synchronous: one that works is done here.  A request to the
 * owner is not. */
int rma__shm_post_now(struct rma__peer *bp, const struct rma__xfer *x)
{
	struct shm_peer *p = container_of(bp, struct shm_peer, base);

	return rma__shm_ring_fits(p, x) || move(p, x) ? RMA__DECLINE : 0;
}

/* An owner that never answers (stopped, stuck) fails the connect, so ops
 * fall back to the next route within their deadlines. */
void rma__shm_peers_expire(struct shm_tr *st, int64_t now)
{
	for (struct shm_peer *p = st->peers; p; p = p->next)
		if (!p->welcomed && now > p->hs_deadline &&
		    p->base.state == RMA__PEER_CONNECTING)
			peer_fail(p, -ETIMEDOUT);
}
