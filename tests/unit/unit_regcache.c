/*
 * The registration cache for ops on plain memory (rma_op.addr), through
 * the fake transport: misses register a page-aligned range, later ops
 * inside it hit, rma_mem_invalidate drops ranges (deferred while an op,
 * a zombie included, still holds them), the bounds evict the least
 * recently used idle range, registration of op i+1 comes after op i's
 * chunks went to the transport, and registered regions never touch it.
 */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define PG 4096u
#define NPG 16

static rma_remote *rem;

static struct rma_cache_stats stats(rma_engine *e)
{
	struct rma_cache_stats s;
	CHECK_RC(rma_cache_stats(e, &s), 0);
	return s;
}

static int post(rma_engine *e, unsigned kind, void *addr, uint64_t len,
		int timeout_ms)
{
	struct rma_op op = { .kind = kind, .addr = addr, .remote = rem,
			     .len = len, .user_data = 5 };
	return rma_post(e, &op, 1, timeout_ms, NULL);
}

/* Complete every outstanding chunk and take the one completion. */
static void finish(rma_engine *e, int64_t want)
{
	struct rma_completion c;
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_EQ(c.result, want);
}

static rma_engine *engine(unsigned entries, uint64_t bytes)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	cfg.cache_entries = entries;
	cfg.cache_bytes = bytes;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);
	rma_engine *e = fake_engine(64);
	char *mem = test_alloc(NPG * PG), *rbuf = test_alloc(64 * PG);
	rma_region *rr, *lr;
	struct rma_cache_stats s;
	struct rma_completion c;
	unsigned regs, deregs;

	CHECK_RC(rma_region_register(e, rbuf, 64 * PG, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rem = fake_remote(rr, 0, 0);

	/* ---- miss, then hits inside the registered range ---- */
	regs = fake.mem_regs;
	CHECK_RC(post(e, RMA_OP_PUT, mem + 16, 100, -1), 1);
	CHECK_EQ(fake.mem_regs, regs + 1);
	CHECK_EQ(fake.nxfers, 1);
	CHECK(fake.xfers[0].x.laddr == mem + 16);
	CHECK(rma__region_addr(fake.xfers[0].x.local) == mem);
	CHECK_EQ(rma__region_len(fake.xfers[0].x.local), PG);
	CHECK(fake.xfers[0].x.ldesc == mem); /* the fake's mem_reg slot */
	s = stats(e);
	CHECK_EQ(s.misses, 1);
	CHECK_EQ(s.hits, 0);
	CHECK_EQ(s.entries, 1);
	CHECK_EQ(s.bytes, PG);
	CHECK_EQ(s.in_use, 1);
	finish(e, 100);
	CHECK_EQ(stats(e).in_use, 0);

	CHECK_RC(post(e, RMA_OP_GET, mem + 200, PG - 200, -1), 1);
	CHECK_EQ(fake.mem_regs, regs + 1);
	CHECK(fake.xfers[1].x.laddr == mem + 200);
	s = stats(e);
	CHECK_EQ(s.hits, 1);
	CHECK_EQ(s.misses, 1);
	finish(e, PG - 200);

	/* Crossing the page's end: a new range of two pages. */
	CHECK_RC(post(e, RMA_OP_GET, mem + PG - 8, 16, -1), 1);
	CHECK_EQ(fake.mem_regs, regs + 2);
	s = stats(e);
	CHECK_EQ(s.misses, 2);
	CHECK_EQ(s.entries, 2);
	CHECK_EQ(s.bytes, 3 * PG);
	finish(e, 16);
	/* Inside the second range only. */
	CHECK_RC(post(e, RMA_OP_PUT, mem + PG + 8, 64, -1), 1);
	CHECK_EQ(fake.mem_regs, regs + 2);
	CHECK_EQ(stats(e).hits, 2);
	finish(e, 64);

	/* ---- registered regions skip the cache ---- */
	CHECK_RC(rma_region_register(e, mem + 8 * PG, PG, 0, &lr), 0);
	regs = fake.mem_regs;
	struct rma_op rop = { .kind = RMA_OP_PUT, .local = lr, .remote = rem,
			      .len = 64 };
	CHECK_RC(rma_post(e, &rop, 1, -1, NULL), 1);
	finish(e, 64);
	s = stats(e);
	CHECK_EQ(s.hits + s.misses, 4);
	CHECK_EQ(fake.mem_regs, regs);

	/* ---- invalidate ---- */
	deregs = fake.mem_deregs;
	CHECK_RC(rma_mem_invalidate(e, mem + 10 * PG, PG), 0); /* nothing there */
	CHECK_RC(rma_mem_invalidate(e, mem + 2 * PG, 1), 0);   /* just past both */
	CHECK_EQ(fake.mem_deregs, deregs);
	CHECK_RC(rma_mem_invalidate(e, mem + PG + 100, 1), 1); /* the 2-page one */
	CHECK_EQ(fake.mem_deregs, deregs + 1);
	s = stats(e);
	CHECK_EQ(s.entries, 1);
	CHECK_EQ(s.bytes, PG);
	CHECK_EQ(s.invalidations, 1);
	CHECK_RC(rma_mem_invalidate(e, mem, 0), 1); /* len 0: the byte at addr */
	CHECK_EQ(fake.mem_deregs, deregs + 2);
	CHECK_EQ(stats(e).entries, 0);
	/* The next op there registers afresh. */
	regs = fake.mem_regs;
	CHECK_RC(post(e, RMA_OP_PUT, mem + 16, 100, -1), 1);
	CHECK_EQ(fake.mem_regs, regs + 1);
	CHECK_EQ(stats(e).misses, 3);
	finish(e, 100);

	/* ---- a range in use is not deregistered under its op ---- */
	CHECK_RC(post(e, RMA_OP_GET, mem + 3 * PG, 2 * FAKE_MAX_MSG, -1), 1);
	deregs = fake.mem_deregs;
	CHECK_RC(rma_mem_invalidate(e, mem + 3 * PG, 1), 1);
	CHECK_EQ(fake.mem_deregs, deregs);
	s = stats(e);
	CHECK_EQ(s.deferred, 1);
	CHECK_EQ(s.in_use, 0);
	CHECK_EQ(s.entries, 1); /* mem's first page */
	/* A new op there cannot use the dropped range. */
	regs = fake.mem_regs;
	CHECK_RC(post(e, RMA_OP_PUT, mem + 3 * PG, 8, -1), 1);
	CHECK_EQ(fake.mem_regs, regs + 1);
	unsigned first = fake.nxfers - 3; /* the get's two chunks, then the put */
	fake_complete(e, first, 0);
	CHECK_EQ(fake.mem_deregs, deregs); /* one chunk still out */
	fake_complete(e, first + 1, 0);
	CHECK_EQ(fake.mem_deregs, deregs + 1);
	CHECK_EQ(stats(e).deferred, 0);
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_EQ(c.result, 2 * FAKE_MAX_MSG);
	finish(e, 8);

	/* A zombie (timed out, its chunk still with the transport) holds its
	 * range too, until the chunk is reported. */
	CHECK_RC(post(e, RMA_OP_GET, mem + 5 * PG, 64, 50), 1);
	unsigned zx = fake.nxfers - 1;
	CHECK_EQ(fake_wait_one(e, &c, 10000), 1);
	CHECK_RC(c.result, -ETIMEDOUT);
	deregs = fake.mem_deregs;
	CHECK_RC(rma_mem_invalidate(e, mem + 5 * PG, PG), 1);
	CHECK_EQ(fake.mem_deregs, deregs);
	CHECK_EQ(stats(e).deferred, 1);
	fake_complete(e, zx, 0);
	CHECK_EQ(fake.mem_deregs, deregs + 1);
	CHECK_EQ(stats(e).deferred, 0);

	/* ---- registration of op i+1 after op i's chunks are posted ---- */
	struct rma_op ops[3];
	for (unsigned i = 0; i < 3; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_PUT,
					  .addr = mem + (10 + i) * PG,
					  .remote = rem, .len = 64 };
	fake.ntrace = 0;
	memset(fake.trace, 0, sizeof fake.trace);
	CHECK_RC(rma_post(e, ops, 3, -1, NULL), 3);
	CHECKF(!strcmp(fake.trace, "RPFRPFRPF"), "trace %s", fake.trace);
	for (unsigned i = 0; i < 3; i++)
		finish(e, 64);
	/* All hits: one pump, one flush. */
	fake.ntrace = 0;
	memset(fake.trace, 0, sizeof fake.trace);
	CHECK_RC(rma_post(e, ops, 3, -1, NULL), 3);
	CHECKF(!strcmp(fake.trace, "PPPF"), "trace %s", fake.trace);
	for (unsigned i = 0; i < 3; i++)
		finish(e, 64);

	/* ---- bad ops ---- */
	struct rma_op bad = { .kind = RMA_OP_PUT, .remote = rem, .len = 8 };
	CHECK_RC(rma_post(e, &bad, 1, -1, NULL), -EINVAL); /* no memory */
	bad.addr = mem;
	bad.local = lr;
	CHECK_RC(rma_post(e, &bad, 1, -1, NULL), -EINVAL); /* both */
	bad.local = NULL;
	bad.reserved[0] = 1;
	CHECK_RC(rma_post(e, &bad, 1, -1, NULL), -EINVAL);
	bad.reserved[0] = 0;
	bad.addr = (void *)(UINTPTR_MAX - 4);
	CHECK_RC(rma_post(e, &bad, 1, -1, NULL), -ERANGE);
	/* Zero bytes: completes, registers nothing. */
	s = stats(e);
	bad.addr = mem;
	bad.len = 0;
	CHECK_RC(rma_post(e, &bad, 1, -1, NULL), 1);
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_EQ(c.result, 0);
	CHECK_EQ(stats(e).misses + stats(e).hits, s.misses + s.hits);
	/* Every instance declines: the op fails, nothing stays. */
	fake.decline_regions = 1;
	CHECK_RC(post(e, RMA_OP_PUT, mem + 14 * PG, 8, -1), -EOPNOTSUPP);
	fake.decline_regions = 0;
	CHECK_EQ(stats(e).entries, s.entries);

	CHECK_RC(rma_region_release(lr), 0);
	rma_remote_free(rem);
	rma_engine_destroy(e);

	/* ---- the bounds: least recently used idle ranges go ---- */
	fake_reset(0);
	e = engine(2, 0);
	CHECK_RC(rma_region_register(e, rbuf, 64 * PG, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rem = fake_remote(rr, 0, 0);
	for (unsigned i = 0; i < 3; i++) {
		CHECK_RC(post(e, RMA_OP_GET, mem + i * PG, 8, -1), 1);
		finish(e, 8);
	}
	s = stats(e);
	CHECK_EQ(s.misses, 3);
	CHECK_EQ(s.evictions, 1);
	CHECK_EQ(s.entries, 2);
	CHECK_EQ(fake.mem_deregs, 1);
	/* Page 0 went (least recent): a miss again; page 2 is the LRU now
	 * (page 1 was hit after it), so it goes next. */
	CHECK_RC(post(e, RMA_OP_GET, mem + PG, 8, -1), 1);
	finish(e, 8);
	CHECK_EQ(stats(e).hits, 1);
	CHECK_RC(post(e, RMA_OP_GET, mem, 8, -1), 1);
	finish(e, 8);
	s = stats(e);
	CHECK_EQ(s.misses, 4);
	CHECK_EQ(s.evictions, 2);
	CHECK_RC(post(e, RMA_OP_GET, mem + PG, 8, -1), 1);
	finish(e, 8);
	CHECK_EQ(stats(e).hits, 2);
	CHECK_RC(post(e, RMA_OP_GET, mem + 2 * PG, 8, -1), 1);
	finish(e, 8);
	CHECK_EQ(stats(e).misses, 5);

	/* Ranges in use stay beyond the bound; they go once idle. */
	unsigned ev = (unsigned)stats(e).evictions;
	for (unsigned i = 4; i < 8; i++)
		CHECK_RC(post(e, RMA_OP_GET, mem + i * PG, 8, -1), 1);
	s = stats(e);
	CHECK_EQ(s.entries, 4);
	CHECK_EQ(s.in_use, 4);
	CHECK_EQ(s.evictions, ev + 2); /* the two idle ones */
	deregs = fake.mem_deregs;
	fake_complete_all(e, 0);
	for (unsigned i = 4; i < 8; i++)
		CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	s = stats(e);
	CHECK_EQ(s.entries, 2);
	CHECK_EQ(s.in_use, 0);
	CHECK_EQ(fake.mem_deregs, deregs + 2);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	/* Destroy deregisters what the cache kept. */
	CHECK_EQ(fake.mem_deregs, fake.mem_regs);

	/* A byte bound: a range larger than it lives only while in use. */
	fake_reset(0);
	e = engine(0, 2 * PG);
	CHECK_RC(rma_region_register(e, rbuf, 64 * PG, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rem = fake_remote(rr, 0, 0);
	CHECK_RC(post(e, RMA_OP_PUT, mem, 3 * PG, -1), 1);
	CHECK_EQ(stats(e).entries, 1);
	finish(e, 3 * PG);
	s = stats(e);
	CHECK_EQ(s.entries, 0);
	CHECK_EQ(s.bytes, 0);
	CHECK_EQ(s.evictions, 1);
	CHECK_RC(post(e, RMA_OP_PUT, mem, PG, -1), 1);
	finish(e, PG);
	CHECK_RC(post(e, RMA_OP_PUT, mem + PG, PG, -1), 1);
	finish(e, PG);
	s = stats(e);
	CHECK_EQ(s.entries, 2);
	CHECK_EQ(s.bytes, 2 * PG);
	CHECK_EQ(s.evictions, 1);
	/* Destroyed with ops in flight on plain memory, one of them on a
	 * range already invalidated: everything is deregistered once. */
	CHECK_RC(post(e, RMA_OP_PUT, mem + 4 * PG, 8, -1), 1);
	CHECK_RC(post(e, RMA_OP_GET, mem + 5 * PG, 8, -1), 1);
	CHECK_RC(rma_mem_invalidate(e, mem + 5 * PG, 1), 1);
	CHECK_EQ(stats(e).deferred, 1);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	CHECK_EQ(fake.mem_deregs, fake.mem_regs);

	printf("ok\n");
	return 0;
}
