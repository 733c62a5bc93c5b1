/*
 * regcache.c - the registration cache: ops on plain memory (rma_op.addr).
 *
 * An op that names memory by address uses a cached registration of a
 * page-aligned range that contains it, or registers one (a local-only
 * region of its own, which every instance registers as it would a user's).
 * Entries live in an array sorted by address; a lookup is a binary search
 * plus a short walk back bounded by the longest entry.  An entry is held by
 * each op using it until that op's slot is freed (its transport no longer
 * touches the memory, zombies included), so neither eviction nor
 * rma_mem_invalidate deregisters memory under an op: an invalidated entry
 * still held leaves the index at once and is deregistered when its last
 * op ends.  Idle entries sit on an LRU list; beyond the engine's bounds
 * (cache_entries, cache_bytes) the least recently used go first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

/* Asked on each miss (cheap beside a registration): no shared state
 * between engines. */
static uint64_t page_size(void)
{
	long v = sysconf(_SC_PAGESIZE);
	return v > 0 ? (uint64_t)v : 4096;
}

/* Index of the first entry whose address is above a (n if none). */
static unsigned upper(const struct rma__regcache *c, uintptr_t a)
{
	unsigned lo = 0, hi = c->n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if ((uintptr_t)c->v[mid]->reg.addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct rma__rcent *lookup(const struct rma__regcache *c, uintptr_t a,
				 uint64_t len)
{
	/* Entries starting at or below a, nearest first; one that starts
	 * more than maxlen below cannot reach a + len. */
	for (unsigned i = upper(c, a); i-- > 0;) {
		struct rma__rcent *ce = c->v[i];
		uintptr_t start = (uintptr_t)ce->reg.addr;
		if (a - start > c->maxlen)
			break;
		if (a - start + len <= ce->reg.len)
			return ce;
	}
	return NULL;
}

static int index_add(struct rma__regcache *c, struct rma__rcent *ce)
{
	if (c->n == c->cap) {
		unsigned cap = c->cap ? c->cap * 2 : 16;
		struct rma__rcent **v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	unsigned i = upper(c, (uintptr_t)ce->reg.addr);
	memmove(&c->v[i + 1], &c->v[i], (c->n - i) * sizeof *c->v);
	c->v[i] = ce;
	c->n++;
	c->bytes += ce->reg.len;
	if (ce->reg.len > c->maxlen)
		c->maxlen = ce->reg.len;
	return 0;
}

static void index_del(struct rma__regcache *c, struct rma__rcent *ce)
{
	unsigned i = upper(c, (uintptr_t)ce->reg.addr);
	while (c->v[--i] != ce) /* among entries at the same address */
		;
	memmove(&c->v[i], &c->v[i + 1], (c->n - i - 1) * sizeof *c->v);
	c->n--;
	c->bytes -= ce->reg.len;
	if (ce->reg.len == c->maxlen) { /* removal is rare: rescan */
		c->maxlen = 0;
		for (unsigned j = 0; j < c->n; j++)
			c->maxlen = RMA_MAX(c->maxlen, c->v[j]->reg.len);
	}
}

static void entry_free(struct rma_engine *e, struct rma__rcent *ce)
{
	rma__region_dereg(e, &ce->reg);
	free(ce);
}

/* Out of the index: freed now if idle, else when its last op ends. */
static void drop(struct rma_engine *e, struct rma__rcent *ce)
{
	struct rma__regcache *c = &e->rcache;

	index_del(c, ce);
	if (ce->users) {
		ce->dropped = true;
		c->in_use--;
		c->deferred++;
		return;
	}
	rma__list_del(&ce->lru);
	entry_free(e, ce);
}

/* Least recently used idle entries go while the cache is over a bound. */
static void trim(struct rma_engine *e)
{
	struct rma__regcache *c = &e->rcache;
	struct rma__lnode *n;

	while ((c->n > e->cfg.cache_entries || c->bytes > e->cfg.cache_bytes) &&
	       (n = rma__list_first(&c->idle))) {
		drop(e, container_of(n, struct rma__rcent, lru));
		c->evictions++;
	}
}

/* An entry containing [addr, addr+len), held for one op.  Registers on a
 * miss; before that, chunks already queued go to their transports, so
 * earlier ops move while this one registers. */
int rma__regcache_get(struct rma_engine *e, char *addr, uint64_t len,
		      struct rma__rcent **out)
{
	struct rma__regcache *c = &e->rcache;
	struct rma__rcent *ce;
	uintptr_t a = (uintptr_t)addr;
	int rc;

	if (a + len < a)
		return -ERANGE;
	if ((ce = lookup(c, a, len))) {
		c->hits++;
	} else {
		uint64_t ps = page_size();
		uintptr_t start = a & ~(uintptr_t)(ps - 1);
		uintptr_t end = (a + len + ps - 1) & ~(uintptr_t)(ps - 1);
		if (end < a + len)
			return -ERANGE;
		/* CUDA device memory: exactly the op's bytes (pages mean
		 * nothing there), and only where a transport carries it. */
		struct rma_region probe = {.addr = (char *)a, .len = len, .fd = -1};
		if ((rc = rma__region_detect(&probe)))
			return rc;
		if (probe.dev) {
			start = a;
			end = a + len;
		}
		ce = calloc(1, sizeof *ce);
		if (!ce)
			return -ENOMEM;
		ce->reg.e = e;
		ce->reg.addr = (char *)start;
		ce->reg.len = end - start;
		ce->reg.fd = -1;
		ce->reg.dev = probe.dev;
		ce->reg.cuctx = probe.cuctx;
		rma__list_init(&ce->reg.users);
		rma__pump_all(e);
		rc = rma__region_reg(e, &ce->reg);
		if (!rc)
			rc = index_add(c, ce);
		if (rc) {
			rma__region_dereg(e, &ce->reg);
			free(ce);
			return rc;
		}
		c->misses++;
	}
	if (ce->users++ == 0) {
		if (rma__list_linked(&ce->lru))
			rma__list_del(&ce->lru);
		c->in_use++;
	}
	trim(e);
	*out = ce;
	return 0;
}

/* An op holding ce ended (its slot is free). */
void rma__regcache_put(struct rma_engine *e, struct rma__rcent *ce)
{
	struct rma__regcache *c = &e->rcache;

	if (!ce || --ce->users)
		return;
	if (ce->dropped) {
		c->deferred--;
		entry_free(e, ce);
		return;
	}
	c->in_use--;
	rma__list_add_tail(&c->idle, &ce->lru);
	trim(e);
}

void rma__regcache_fini(struct rma_engine *e)
{
	struct rma__regcache *c = &e->rcache;

	/* Every op has ended: every entry is idle and indexed. */
	while (c->n)
		drop(e, c->v[c->n - 1]);
	free(c->v);
	c->v = NULL;
	c->cap = 0;
}

RMA_EXPORT int rma_mem_invalidate(rma_engine *e, const void *addr, size_t len)
{
	struct rma__regcache *c;
	uintptr_t a = (uintptr_t)addr, end;
	int n = 0;

	if (!e)
		return -EINVAL;
	end = a + (len ? len : 1);
	if (end < a)
		end = UINTPTR_MAX;
	c = &e->rcache;
	pthread_mutex_lock(&e->mu);
	/* Entries starting below end; those ending after a overlap. */
	for (unsigned i = upper(c, end - 1); i-- > 0;) {
		struct rma__rcent *ce = c->v[i];
		uintptr_t start = (uintptr_t)ce->reg.addr;
		if (a > start && a - start > c->maxlen)
			break;
		if (start + ce->reg.len > a) {
			drop(e, ce);
			c->invalidations++;
			n++;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

RMA_EXPORT int rma_cache_stats(rma_engine *e, struct rma_cache_stats *out)
{
	if (!e || !out)
		return -EINVAL;
	pthread_mutex_lock(&e->mu);
	const struct rma__regcache *c = &e->rcache;
	*out = (struct rma_cache_stats){
		.hits = c->hits,
		.misses = c->misses,
		.evictions = c->evictions,
		.invalidations = c->invalidations,
		.entries = c->n,
		.bytes = c->bytes,
		.in_use = c->in_use,
		.deferred = c->deferred,
	};
	pthread_mutex_unlock(&e->mu);
	return 0;
}
