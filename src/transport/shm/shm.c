/*
 * shm.c - the shm transport's ops table: instances, regions, grants,
 * advertisements and reachability.  The files: see shm.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "transport/shm/shm.h"

static const struct rma__topt_desc shm_options[] = {
	{"drain_ms", "how long release waits for a peer inside a copy, 1-60000 "
		     "(default 1000)"},
	{"stage", "1: this engine, as owner, copies its peers' ops over 192 bytes "
		  "through a buffer each peer shares (its CPU, for about twice "
		  "the bandwidth); 0: they copy by cross-memory attach "
		  "(default 1)"},
	/* The listener's caps (owner.c; design.md section 10c). */
	{"max_handshakes", "connections not yet welcomed (64)"},
	{"max_addr_handshakes", "not yet welcomed, per process (8)"},
	{"handshake_ms", "time to be welcomed (3000)"},
	{NULL, NULL},
};

static int shm_probe(const char **why)
{
	return rma__shm_probe(why);
}

static void shm_fini(struct rma__transport *t)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);

	while (st->peers)
		rma__shm_disconnect(&st->peers->base, -ECANCELED);
	rma__shm_owner_fini(st);
	while (st->regs) {
		struct shm_reg *g = st->regs;
		st->regs = g->next;
		free(g);
	}
	rma__stage_release(&st->stage);
	free(st);
}

/* A spinning round tries the rings first once they found work. */
static void ring_cb(struct rma__watch *w, uint32_t events)
{
	w->quiet = !rma__shm_ring_round(container_of(w, struct shm_tr, rw));
}

static int shm_init(struct rma_engine *e, const struct rma__topts *o,
		    struct rma__transport **out)
{
	const struct rma__engine_params *ep = rma__engine_params(e);
	unsigned long drain = SHM_DRAIN_MS, stage = 1;
	char buf[8] = "";
	FILE *f;
	int rc;

	rc = rma__topt_uint(o, "drain_ms", 1, 60000, &drain);
	if (rc >= 0)
		rc = rma__topt_uint(o, "stage", 0, 1, &stage);
	if (rc < 0)
		return rc;
	struct shm_tr *st = calloc(1, sizeof *st);
	if (!st)
		return -ENOMEM;
	st->e = e;
	st->tfd = -1;
	st->lw.fd = -1;
	st->rw.fd = -1; /* polled, never in epoll: nothing to retire */
	st->rw.cb = ring_cb;
	st->rw.direct = true;
	st->engine_id = ep->engine_id;
	st->drain_ms = (unsigned)drain;
	st->stage_on = stage;
	st->max_msg = ep->max_msg_size ? RMA_MIN(ep->max_msg_size, SHM_MAX_MSG)
				       : SHM_MAX_MSG;
	st->next_region_id = 1;
	rma__setup_key(ep->secret, st->key);
	st->refusals.who = "shm";
	st->refusals.interval_ns = 10 * 1000000000LL;
	rc = rma__shm_ident(&st->id);
	/* Yama's restricted mode: let same-user peers attach to us. */
	f = rc ? NULL : fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fgets(buf, sizeof buf, f) && atoi(buf) == 1)
			prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
		fclose(f);
	}
	if (!rc)
		rc = rma__shm_owner_init(st, o);
	if (rc) {
		rma__shm_owner_fini(st);
		free(st);
		return rc;
	}
	*out = &st->base;
	return 0;
}

/* Any host memory can be copied by cma; memfd regions also by mapping. */
static int shm_mem_reg(struct rma__transport *t, struct rma_region *r)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	struct shm_reg *g;

	if (rma__region_fd(r) < 0)
		return 0;
	g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->r = r;
	g->id = st->next_region_id++;
	if (!st->next_region_id)
		st->next_region_id = 1;
	g->next = st->regs;
	st->regs = g;
	*rma__region_slot(r, t) = g;
	return 0;
}

static void shm_mem_dereg(struct rma__transport *t, struct rma_region *r)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	struct shm_reg *g = *rma__region_slot(r, t), **pp = &st->regs;

	if (!g)
		return;
	while (*pp != g)
		pp = &(*pp)->next;
	*pp = g->next;
	/* Peers drop their mappings (the grant table already stops them). */
	rma__shm_unmap_notify(st, g->id);
	free(g);
	*rma__region_slot(r, t) = NULL;
}

static int shm_grant_add(struct rma__transport *t, struct rma__grant *g)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	struct rma_region *r = rma__grant_region(g);
	struct shm_reg *rg = *rma__region_slot(r, t);
	struct shm_slot *s;
	uint32_t i;

	if (st->npend) /* a grant that never got out (another transport
			* refused it), removed outside a release */
		rma__shm_drain(st);
	if (st->nheld)
		rma__shm_rows_reap(st); /* slots cut-off copies held */
	if (!st->nfree)
		return RMA__DECLINE; /* table full: other transports carry it */
	/* Peers copy into and out of this process's memory without it: not
	 * device memory, which only a CUDA call here can reach.  tcp serves
	 * it, staged. */
	if (rma__region_device(r))
		return RMA__DECLINE;
	i = st->free_slots[--st->nfree];
	s = shm_slot_at(st->tab, i);
	s->addr = (uint64_t)(uintptr_t)(rma__region_addr(r) + rma__grant_off(g));
	s->len = rma__grant_len(g);
	s->access = rma__grant_access(g);
	s->region_id = rg ? rg->id : 0;
	s->region_addr = rg ? (uint64_t)(uintptr_t)rma__region_addr(r) : 0;
	/* Published last: a peer that sees the key sees the fields. */
	atomic_store(&s->key, rma__grant_key(g));
	*rma__grant_slot(g, t) = (void *)(uintptr_t)(i + 1);
	return 0;
}

static void shm_grant_remove(struct rma__transport *t, struct rma__grant *g)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	uint32_t i = (uint32_t)(uintptr_t)*rma__grant_slot(g, t) - 1;

	/* Drained with the region's other grants in revoke: each key is
	 * cleared before any wait, and the wait is drain_ms in all. */
	atomic_store(&shm_slot_at(st->tab, i)->key, 0);
	st->pend[st->npend++] = i;
	st->pend_bits[i / 64] |= 1ull << (i % 64);
	*rma__grant_slot(g, t) = NULL;
}

/* After every grant of r was removed: no copy through them runs once
 * this returns. */
static void shm_revoke(struct rma__transport *t, struct rma_region *r)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);

	if (st->npend)
		rma__shm_drain(st);
}

static int shm_ad_pack(struct rma__transport *t, const struct rma__grant *g,
		       void *buf, size_t cap)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	struct shm_blob b = {.slot = SHM_NO_SLOT, .id = st->id};

	if (cap < SHM_BLOB_LEN)
		return -ENOSPC;
	if (g) {
		struct rma__grant *gg = (struct rma__grant *)g;
		struct rma_region *r = rma__grant_region(g);
		struct shm_reg *rg = *rma__region_slot(r, t);
		b.slot = (uint32_t)(uintptr_t)*rma__grant_slot(gg, t) - 1;
		b.base = (uint64_t)(uintptr_t)(rma__region_addr(r) + rma__grant_off(g));
		if (rg) {
			b.flags = SHM_BLOB_MEMFD;
			b.region_id = rg->id;
			b.region_addr = (uint64_t)(uintptr_t)rma__region_addr(r);
			b.region_len = rma__region_len(r);
		}
	}
	rma__shm_blob_encode(&b, buf);
	return SHM_BLOB_LEN;
}

static int shm_ad_parse(const void *blob, size_t len, uint64_t core_key,
			struct rma__rkey *rk)
{
	struct shm_blob b;

	if (rma__shm_blob_decode(blob, len, &b))
		return -EBADMSG;
	rk->key = core_key;
	rk->base = b.base;
	rk->raw = blob; /* post reads the slot from it */
	rk->raw_len = (uint16_t)len;
	return 0;
}

/* Same boot and same pid namespace: the pid in the blob is one we can
 * attach to.  (The owner's socket lives in its network namespace, so a
 * peer in another one fails to connect and falls back.) */
static int shm_reachable(struct rma__transport *t, const void *blob, size_t len)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	struct shm_blob b;

	if (rma__shm_blob_decode(blob, len, &b) ||
	    memcmp(b.id.boot, st->id.boot, sizeof b.id.boot) ||
	    b.id.ns_dev != st->id.ns_dev || b.id.ns_ino != st->id.ns_ino)
		return RMA__DECLINE;
	return 0;
}

static void shm_progress(struct rma__transport *t)
{
	struct shm_tr *st = container_of(t, struct shm_tr, base);
	int64_t now;

	if (st->served || st->nring)
		rma__shm_ring_round(st);
	/* The cheap clock for the gate: a spinning round comes here often. */
	if (rma__coarse_ns() < st->next_check)
		return;
	now = rma__now_ns();
	st->next_check = now + 100 * 1000000LL;
	rma__shm_owner_expire(st, now);
	if (st->listen_paused) /* fds again?  The next accept says */
		st->listen_paused = rma__watch_mod(st->e, &st->lw, EPOLLIN) != 0;
	/* A quarantined row's process may have exited: its row and pidfd
	 * come back now, not at a later HELLO. */
	if (st->nheld || st->nquar)
		rma__shm_rows_reap(st);
	rma__shm_peers_expire(st, now);
	rma__refusals_log(&st->refusals, now);
}

static int shm_arm(struct rma__transport *t)
{
	return rma__shm_ring_arm(container_of(t, struct shm_tr, base));
}

const struct rma__transport_ops rma__shm_ops = {
	.name = "shm",
	.level = RMA_LEVEL_MEMORY,
	.wire_id = 2, /* 1 tcp, 3 ofi, 4 verbs */
	/* Local device memory only (staged in post); grants over it are
	 * declined, so targets serve it by tcp. */
	.caps = RMA__CAP_DEVICE,
	.options = shm_options,
	.probe = shm_probe,
	.init = shm_init,
	.fini = shm_fini,
	.mem_reg = shm_mem_reg,
	.mem_dereg = shm_mem_dereg,
	.grant_add = shm_grant_add,
	.grant_remove = shm_grant_remove,
	.revoke = shm_revoke,
	.ad_pack = shm_ad_pack,
	.ad_parse = shm_ad_parse,
	.reachable = shm_reachable,
	.connect = rma__shm_connect,
	.disconnect = rma__shm_disconnect,
	.post = rma__shm_post,
	.post_now = rma__shm_post_now,
	.flush = rma__shm_flush,
	.progress = shm_progress,
	.arm = shm_arm,
};
