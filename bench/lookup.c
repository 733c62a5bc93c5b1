/*
 * lookup - what finding a request's memory costs a target with many
 * regions: ns per rma__target_lookup (key, access and bounds checked, the
 * address and device flag out), keys drawn at random among N regions'
 * grants, best of 5 passes of 4,000,000 lookups.  Built against librma's
 * internals (rma_static).
 *
 *   build/bench_lookup [N ...]      default: 1 1000 100000
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/core.h"

#define LOOKUPS 4000000
#define SLICE 64 /* bytes per region */

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int run(unsigned n)
{
	struct rma_config cfg = {.size = sizeof cfg, .transports = "tcp",
				 .flags = RMA_ENGINE_MANUAL_PROGRESS};
	rma_engine *e;
	int rc = rma_engine_create(&cfg, &e);
	if (rc) {
		fprintf(stderr, "engine: %s\n", rma_strerror(rc));
		return 1;
	}
	char *mem = malloc((size_t)n * SLICE);
	uint64_t *keys = malloc(n * sizeof *keys);
	uint32_t *order = malloc(LOOKUPS * sizeof *order);
	if (!mem || !keys || !order)
		return 1;
	double t0 = now_s();
	for (unsigned i = 0; i < n; i++) {
		rma_region *r;
		struct rma__grant *g;
		if ((rc = rma_region_register(e, mem + (size_t)i * SLICE, SLICE,
					      RMA_ACCESS_REMOTE_RW, &r)) ||
		    (rc = rma__grant_for(r, 0, SLICE, RMA_ACCESS_REMOTE_RW, &g))) {
			fprintf(stderr, "region %u: %s\n", i, rma_strerror(rc));
			return 1;
		}
		keys[i] = rma__grant_key(g);
	}
	double reg_s = now_s() - t0;
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (unsigned i = 0; i < LOOKUPS; i++) { /* xorshift64 */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		order[i] = (uint32_t)(x % n);
	}
	double best = 1e9;
	uintptr_t sink = 0;
	for (int pass = 0; pass < 5; pass++) {
		t0 = now_s();
		for (unsigned i = 0; i < LOOKUPS; i++) {
			char *addr;
			struct rma_region *r;
			bool dev;
			if (rma__target_lookup(e, keys[order[i]], 0, 8,
					       RMA_ACCESS_REMOTE_WRITE, &addr, &r, &dev))
				return 1;
			sink += (uintptr_t)addr + dev;
		}
		double ns = (now_s() - t0) / LOOKUPS * 1e9;
		best = ns < best ? ns : best;
	}
	printf("regions %7u  lookup %6.1f ns  (registered and granted in %.3f s)%s\n",
	       n, best, reg_s, sink == 1 ? " " : "");
	rma_engine_destroy(e);
	free(order);
	free(keys);
	free(mem);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *dflt[] = {"1", "1000", "100000"};
	const char **list = argc > 1 ? (const char **)argv + 1 : dflt;
	int n = argc > 1 ? argc - 1 : 3;

	for (int i = 0; i < n; i++) {
		long v = strtol(list[i], NULL, 10);
		if (v < 1 || v > 10000000) {
			fprintf(stderr, "usage: bench_lookup [N ...] (1..10000000)\n");
			return 2;
		}
		if (run((unsigned)v))
			return 1;
	}
	return 0;
}
