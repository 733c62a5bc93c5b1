/* region.c - registered memory and the grants (keys) that expose it. */
#include <errno.h>
#include <stdlib.h>

#include "core/core.h"

static int grant_new(struct rma_engine *e, struct rma_region *r, uint64_t off,
		     uint64_t len, unsigned access, struct rma__grant **out)
{
	struct rma__grant *g = calloc(1, sizeof *g);
	int rc = -EEXIST;

	if (!g)
		return -ENOMEM;
	g->region = r;
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
	g->next = r->grants;
	r->grants = g;
	*out = g;
	return 0;
}

RMA_EXPORT int rma_region_register(rma_engine *e, void *addr, size_t len,
				   unsigned access, rma_region **out)
{
	struct rma_region *r;
	struct rma__grant *g;
	unsigned i;
	int rc = 0;

	if (!e || !addr || !len || !out || (access & ~(unsigned)RMA_ACCESS_REMOTE_RW))
		return -EINVAL;
	r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->e = e;
	r->addr = addr;
	r->len = len;
	r->access = access;
	pthread_mutex_lock(&e->mu);
	for (i = 0; i < e->ntr; i++)
		if ((rc = e->tr[i]->ops->mem_reg(e->tr[i], r)))
			break; /* undo [0, i) below */
	if (!rc && access) /* i == ntr here: a failure undoes them all */
		rc = grant_new(e, r, 0, len, access, &g);
	if (rc) {
		while (i-- > 0)
			e->tr[i]->ops->mem_dereg(e->tr[i], r);
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

/* With the lock held: revoke, cancel local users, unlink, free. */
static void region_free(struct rma_engine *e, struct rma_region *r)
{
	while (r->grants) {
		struct rma__grant *g = r->grants;
		r->grants = g->next;
		rma__keytab_del(&e->grants, g->key);
		free(g);
	}
	/* Transports stop touching the memory now (a reply half-sent from it
	 * costs that connection). */
	for (unsigned i = 0; i < e->ntr; i++)
		e->tr[i]->ops->revoke(e->tr[i], r);
	for (uint32_t i = 0; i < e->nops && r->nlocal; i++) {
		struct rma__op *op = &e->ops[i];
		if (op->state == RMA__OP_LIVE && op->local == r)
			rma__op_fail(e, op, -ECANCELED);
	}
	for (uint32_t i = 0; i < e->nops; i++)
		if (e->ops[i].local == r)
			e->ops[i].local = NULL;
	for (unsigned i = 0; i < e->ntr; i++)
		e->tr[i]->ops->mem_dereg(e->tr[i], r);
	if (r->prev)
		r->prev->next = r->next;
	else
		e->regions = r->next;
	if (r->next)
		r->next->prev = r->prev;
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

int rma__target_lookup(struct rma_engine *e, uint64_t key, uint64_t raddr,
		       uint64_t len, unsigned access, char **addr,
		       struct rma_region **region)
{
	struct rma__grant *g = rma__keytab_get(&e->grants, key);

	if (!g)
		return -EKEYREJECTED;
	if ((g->access & access) != access)
		return -EACCES;
	if (raddr > g->len || len > g->len - raddr)
		return -ERANGE;
	*addr = g->region->addr + g->off + raddr;
	*region = g->region;
	return 0;
}
