/*
 * region.c - registered memory and the grants (keys) that expose it.
 *
 * A grant is a window [off, off+len) of a region with its own random key
 * and access: what one advertisement names.  Every instance sees each
 * grant come and go (grant_add / grant_remove), so a NIC transport can
 * register per grant, with that grant's bounds and access only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

/* ---- accessors for transports ---- */

char *rma__region_addr(const struct rma_region *r) { return r->addr; }
uint64_t rma__region_len(const struct rma_region *r) { return r->len; }
unsigned rma__region_access(const struct rma_region *r) { return r->access; }
int rma__region_fd(const struct rma_region *r) { return r->fd; }
void **rma__region_slot(struct rma_region *r, const struct rma__transport *t)
{
	return &r->tdata[t->index];
}

struct rma_region *rma__grant_region(const struct rma__grant *g) { return g->region; }
uint64_t rma__grant_key(const struct rma__grant *g) { return g->key; }
uint64_t rma__grant_off(const struct rma__grant *g) { return g->off; }
uint64_t rma__grant_len(const struct rma__grant *g) { return g->len; }
unsigned rma__grant_access(const struct rma__grant *g) { return g->access; }
void **rma__grant_slot(struct rma__grant *g, const struct rma__transport *t)
{
	return &g->tdata[t->index];
}

/* ---- grants ---- */

static void grant_free(struct rma_engine *e, struct rma__grant *g)
{
	rma__keytab_del(&e->grants, g->key);
	for (unsigned i = 0; i < e->ntr; i++)
		if (g->tmask & 1u << i)
			e->tr[i]->ops->grant_remove(e->tr[i], g);
	free(g);
}

static int grant_new(struct rma_engine *e, struct rma_region *r, uint64_t off,
		     uint64_t len, unsigned access, struct rma__grant **out)
{
	struct rma__grant *g = calloc(1, sizeof *g);
	int rc = -EEXIST;

	if (!g)
		return -ENOMEM;
	g->region = r;
	g->base = r->addr + off;
	g->dev = r->dev;
	g->off = off;
	g->len = len;
	g->access = access;
	/* A fresh random key; retry on the (astronomically rare) collision. */
	for (int tries = 0; rc == -EEXIST && tries < 8; tries++) {
		g->key = rma__random_u64();
		rc = g->key ? rma__keytab_put(&e->grants, g->key, g) : -EIO;
	}
	if (rc) {
		free(g);
		return rc;
	}
	for (unsigned i = 0; i < e->ntr; i++) {
		if (!(r->tmask & 1u << i))
			continue;
		rc = e->tr[i]->ops->grant_add(e->tr[i], g);
		if (rc < 0) {
			grant_free(e, g);
			return rc;
		}
		if (rc == 0)
			g->tmask |= 1u << i;
	}
	if (!g->tmask) { /* nothing would carry it */
		grant_free(e, g);
		return -EOPNOTSUPP;
	}
	g->next = r->grants;
	r->grants = g;
	*out = g;
	return 0;
}

/* The grant for exactly this window, made on first use. */
int rma__grant_for(struct rma_region *r, uint64_t off, uint64_t len,
		   unsigned access, struct rma__grant **out)
{
	for (struct rma__grant *g = r->grants; g; g = g->next)
		if (g->off == off && g->len == len && g->access == access) {
			*out = g;
			return 0;
		}
	return grant_new(r->e, r, off, len, access, out);
}

/* ---- regions ---- */

void rma__region_dereg(struct rma_engine *e, struct rma_region *r)
{
	for (unsigned i = 0; i < e->ntr; i++)
		if (r->tmask & 1u << i)
			e->tr[i]->ops->mem_dereg(e->tr[i], r);
	r->tmask = 0;
}

/* Each instance registers r, or declines to carry it; at least one must
 * take it.  On failure nothing stays registered.  Lock held. */
int rma__region_reg(struct rma_engine *e, struct rma_region *r)
{
	int rc = 0;

	/* Each instance registers it, or declines to carry it. */
	for (unsigned i = 0; i < e->ntr && rc >= 0; i++) {
		if (!rma__region_carries(r, e->tr[i]))
			continue;
		rc = e->tr[i]->ops->mem_reg(e->tr[i], r);
		if (rc == 0)
			r->tmask |= 1u << i;
	}
	if (rc >= 0 && !r->tmask)
		rc = -EOPNOTSUPP; /* every transport declined */
	if (rc < 0)
		rma__region_dereg(e, r);
	return rc < 0 ? rc : 0;
}

static int region_new(rma_engine *e, void *addr, size_t len, unsigned access,
		      int fd, rma_region **out)
{
	struct rma_region *r;
	struct rma__grant *g;
	int rc;

	if (!e || !addr || !len || !out || (access & ~(unsigned)RMA_ACCESS_REMOTE_RW))
		return -EINVAL;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->e = e;
	r->addr = addr;
	r->len = len;
	r->access = access;
	r->fd = fd;
	rma__list_init(&r->users);
	if ((rc = rma__region_detect(r))) {
		free(r);
		return rc;
	}
	pthread_mutex_lock(&e->mu);
	rc = rma__region_reg(e, r);
	if (rc >= 0 && access)
		rc = grant_new(e, r, 0, len, access, &g);
	if (rc < 0) {
		rma__region_dereg(e, r);
		pthread_mutex_unlock(&e->mu);
		free(r);
		return rc;
	}
	r->next = e->regions;
	if (e->regions)
		e->regions->prev = r;
	e->regions = r;
	pthread_mutex_unlock(&e->mu);
	*out = r;
	return 0;
}

RMA_EXPORT int rma_region_register(rma_engine *e, void *addr, size_t len,
				   unsigned access, rma_region **out)
{
	return region_new(e, addr, len, access, -1, out);
}

RMA_EXPORT int rma_region_alloc(rma_engine *e, size_t len, unsigned access,
				rma_region **out, void **addr)
{
	void *p;
	int fd, rc;

	if (!e || !len || !out || !addr)
		return -EINVAL;
	fd = memfd_create("rma", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* Sealed against shrinking: a peer's mapping can never fault. */
	if (ftruncate(fd, (off_t)len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = region_new(e, p, len, access, fd, out);
	if (rc) {
		munmap(p, len);
		close(fd);
		return rc;
	}
	*addr = p;
	return 0;
}

static int users_gone(void *arg)
{
	return rma__list_empty(&((struct rma_region *)arg)->users);
}

/* With the lock held: revoke, cancel local users, unlink, free. */
static void region_free(struct rma_engine *e, struct rma_region *r)
{
	struct rma__lnode *n, *next;

	while (r->grants) {
		struct rma__grant *g = r->grants;
		r->grants = g->next;
		grant_free(e, g);
	}
	/* Transports stop touching the memory now (a reply half-sent from it
	 * costs that connection). */
	for (unsigned i = 0; i < e->ntr; i++)
		e->tr[i]->ops->revoke(e->tr[i], r);
	for (n = r->users.next; n != &r->users; n = next) {
		next = n->next;
		rma__op_fail(e, container_of(n, struct rma__op, rnode), -ECANCELED);
		/* An abort that reports chunks at once may complete other ops
		 * too (next among them): start over; failed ops are skipped. */
		if (next != &r->users && !rma__list_linked(next))
			next = r->users.next;
	}
	/* Ops whose hardware may still write here (abort pending) hold the
	 * release until the transport has stopped it. */
	if (!rma__list_empty(&r->users))
		rma__wait_until(e, users_gone, r, 0);
	rma__region_dereg(e, r);
	if (r->prev)
		r->prev->next = r->next;
	else
		e->regions = r->next;
	if (r->next)
		r->next->prev = r->prev;
	if (r->fd >= 0) { /* rma_region_alloc's */
		munmap(r->addr, r->len);
		close(r->fd);
	}
	free(r);
}

RMA_EXPORT int rma_region_release(rma_region *r)
{
	if (!r)
		return -EINVAL;
	struct rma_engine *e = r->e;
	pthread_mutex_lock(&e->mu);
	region_free(e, r);
	pthread_mutex_unlock(&e->mu);
	rma__deliver_callbacks(e);
	return 0;
}

void rma__region_free_all(struct rma_engine *e)
{
	while (e->regions)
		region_free(e, e->regions);
}

void rma__target_prefetch(struct rma_engine *e, uint64_t key, bool grant)
{
	struct rma__grant *g;

	if (!grant)
		rma__keytab_prefetch(&e->grants, key);
	else if ((g = rma__keytab_get(&e->grants, key)))
		__builtin_prefetch(g);
}

int rma__target_lookup(struct rma_engine *e, uint64_t key, uint64_t raddr,
		       uint64_t len, unsigned access, char **addr,
		       struct rma_region **region, bool *dev)
{
	struct rma__grant *g = rma__keytab_get(&e->grants, key);

	if (!g)
		return -EKEYREJECTED;
	if ((g->access & access) != access)
		return -EACCES;
	if (raddr > g->len || len > g->len - raddr)
		return -ERANGE;
	*addr = g->base + raddr;
	*region = g->region;
	if (dev)
		*dev = g->dev;
	return 0;
}
