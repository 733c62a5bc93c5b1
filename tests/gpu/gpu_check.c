/*
 * gpu_check.c - CUDA device memory through rma on a real GPU: regions over
 * cuMemAlloc'd memory, put and get over tcp (staged through pinned host
 * memory), on the initiator, the target and both, and over shm (local
 * device memory; a device target falls back to tcp); every byte checked by
 * copying it back with the driver.  Prints the rate of large transfers.
 *
 * Exits 0 pass, 1 fail, 77 when there is no CUDA driver or no GPU.  The
 * driver is loaded with dlopen, as an application would load it before
 * using rma; the build needs only the CUDA headers.
 *
 *   gpu_check [MiB]   (largest transfer, default 256)
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rma.h"

#define MIB ((size_t)1 << 20)

static struct {
	__typeof__(&cuInit) init;
	__typeof__(&cuDeviceGetCount) count;
	__typeof__(&cuDeviceGet) get;
	__typeof__(&cuDeviceGetName) name;
	__typeof__(&cuDevicePrimaryCtxRetain) retain;
	__typeof__(&cuDevicePrimaryCtxRelease) release;
	__typeof__(&cuCtxSetCurrent) set_current;
	__typeof__(&cuMemAlloc) alloc;
	__typeof__(&cuMemFree) free;
	__typeof__(&cuMemcpyHtoD) htod;
	__typeof__(&cuMemcpyDtoH) dtoh;
	__typeof__(&cuGetErrorString) errstr;
} cu;

static int failures;

#define FAILF(...)                                                          \
	do {                                                                \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);        \
		fprintf(stderr, __VA_ARGS__);                               \
		fputc('\n', stderr);                                        \
		failures++;                                                 \
	} while (0)

static const char *cuerr(CUresult rc)
{
	const char *s = NULL;
	if (cu.errstr && cu.errstr(rc, &s) == CUDA_SUCCESS && s)
		return s;
	return "unknown CUDA error";
}

#define CU(call)                                                            \
	do {                                                                \
		CUresult rc_ = (call);                                      \
		if (rc_ != CUDA_SUCCESS) {                                  \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__,   \
				__LINE__, #call, cuerr(rc_));               \
			exit(1);                                            \
		}                                                           \
	} while (0)

#define RMA(call)                                                           \
	do {                                                                \
		int rc_ = (int)(call);                                      \
		if (rc_ < 0) {                                              \
			fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__,   \
				__LINE__, #call, rma_strerror(rc_));        \
			exit(1);                                            \
		}                                                           \
	} while (0)

static bool load_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h)
		return false;
#define SYM(f, n) (*(void **)&cu.f = dlsym(h, n))
	SYM(init, "cuInit");
	SYM(count, "cuDeviceGetCount");
	SYM(get, "cuDeviceGet");
	SYM(name, "cuDeviceGetName");
	SYM(retain, "cuDevicePrimaryCtxRetain");
	SYM(release, "cuDevicePrimaryCtxRelease_v2");
	SYM(set_current, "cuCtxSetCurrent");
	SYM(alloc, "cuMemAlloc_v2");
	SYM(free, "cuMemFree_v2");
	SYM(htod, "cuMemcpyHtoD_v2");
	SYM(dtoh, "cuMemcpyDtoH_v2");
	SYM(errstr, "cuGetErrorString");
#undef SYM
	return cu.init && cu.count && cu.get && cu.name && cu.retain &&
	       cu.release && cu.set_current && cu.alloc && cu.free && cu.htod &&
	       cu.dtoh;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

/* One side's memory: on the device (checked through the driver) or not. */
struct mem {
	bool dev;
	CUdeviceptr d;
	uint8_t *h;
	size_t len;
	rma_region *r;
};

static struct mem mem_new(rma_engine *e, bool dev, size_t len, unsigned access)
{
	struct mem m = {.dev = dev, .len = len};
	void *addr;
	if (dev) {
		CU(cu.alloc(&m.d, len));
		addr = (void *)(uintptr_t)m.d;
	} else {
		m.h = calloc(1, len);
		if (!m.h)
			exit(1);
		addr = m.h;
	}
	RMA(rma_region_register(e, addr, len, access, &m.r));
	return m;
}

static void mem_free(struct mem *m)
{
	rma_region_release(m->r);
	if (m->dev)
		CU(cu.free(m->d));
	else
		free(m->h);
}

static void mem_write(struct mem *m, const uint8_t *src, size_t n)
{
	if (m->dev)
		CU(cu.htod(m->d, src, n));
	else
		memcpy(m->h, src, n);
}

static void mem_read(struct mem *m, uint8_t *dst, size_t n)
{
	if (m->dev)
		CU(cu.dtoh(dst, m->d, n));
	else
		memcpy(dst, m->h, n);
}

static rma_engine *engine(const char *transports)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = transports;
	RMA(rma_engine_create(&cfg, &e));
	return e;
}

static rma_remote *remote_of(rma_region *r)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_remote *rem;
	RMA(rma_advertise_text(r, 0, 0, 0, tok, sizeof tok));
	RMA(rma_remote_parse(tok, &rem));
	return rem;
}

static int64_t run(rma_engine *e, unsigned kind, rma_region *local,
		   rma_remote *rem, size_t n)
{
	struct rma_op op = {.kind = kind, .local = local, .remote = rem, .len = n};
	int64_t res = 0;
	char report[256] = "";
	if (rma_submit(e, &op, 1, 60000, &res, report, sizeof report) < 0 || res < 0)
		fprintf(stderr, "  %s of %zu: %s %s\n", kind == RMA_OP_PUT ? "put" : "get",
			n, rma_strerror((int)res), report);
	return res;
}

/* Put initiator memory into the target's, get it back into a second
 * initiator buffer; compare both through the driver. */
static void check(const char *transports, bool ini_dev, bool tgt_dev,
		  size_t max, const char *want_route)
{
	static const size_t base_sizes[] = {1, 4097, 3 * MIB + 123, 64 * MIB};
	rma_engine *t = engine(transports), *e = engine(transports);
	struct mem tgt = mem_new(t, tgt_dev, max, RMA_ACCESS_REMOTE_RW);
	struct mem a = mem_new(e, ini_dev, max, 0), b = mem_new(e, ini_dev, max, 0);
	rma_remote *rem = remote_of(tgt.r);
	uint8_t *want = malloc(max), *got = malloc(max), *zero = calloc(1, max);
	struct rma_route_info ri;
	size_t sizes[5];
	unsigned ns = 0;

	if (!want || !got || !zero)
		exit(1);
	for (unsigned i = 0; i < 4; i++)
		if (base_sizes[i] <= max)
			sizes[ns++] = base_sizes[i];
	if (max > 64 * MIB)
		sizes[ns++] = max;
	printf("%-8s initiator %s, target %s:", transports,
	       ini_dev ? "GPU " : "host", tgt_dev ? "GPU " : "host");
	for (unsigned k = 0; k < ns; k++) {
		size_t n = sizes[k];
		fill(want, n, k + 1);
		mem_write(&a, want, n);
		mem_write(&tgt, zero, n);
		mem_write(&b, zero, n);
		double t0 = now_s();
		if (run(e, RMA_OP_PUT, a.r, rem, n) != (int64_t)n)
			FAILF("%s put of %zu", transports, n);
		double t1 = now_s();
		mem_read(&tgt, got, n);
		if (memcmp(got, want, n))
			FAILF("%s put of %zu: target bytes differ", transports, n);
		double t2 = now_s();
		if (run(e, RMA_OP_GET, b.r, rem, n) != (int64_t)n)
			FAILF("%s get of %zu", transports, n);
		double t3 = now_s();
		mem_read(&b, got, n);
		if (memcmp(got, want, n))
			FAILF("%s get of %zu: local bytes differ", transports, n);
		if (n >= 64 * MIB)
			printf(" %zu MiB put %.2f GB/s get %.2f GB/s", n / MIB,
			       (double)n / (t1 - t0) / 1e9, (double)n / (t3 - t2) / 1e9);
	}
	if (rma_peer_route(e, rem, &ri) == 0 && strcmp(ri.transport, want_route))
		FAILF("%s: route %s, expected %s (%s)", transports, ri.transport,
		      want_route, ri.why);
	printf(" (route %s)\n", want_route);
	rma_remote_free(rem);
	mem_free(&a);
	mem_free(&b);
	mem_free(&tgt);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	free(want);
	free(got);
	free(zero);
}

int main(int argc, char **argv)
{
	size_t max = (argc > 1 ? strtoull(argv[1], NULL, 10) : 256) * MIB;
	CUdevice dev;
	CUcontext ctx;
	int n = 0;
	char name[128] = "";

	if (max < 4 * MIB)
		max = 4 * MIB;
	if (!load_driver()) {
		fprintf(stderr, "SKIP: no CUDA driver (libcuda.so.1)\n");
		return 77;
	}
	if (cu.init(0) != CUDA_SUCCESS || cu.count(&n) != CUDA_SUCCESS || n < 1) {
		fprintf(stderr, "SKIP: no GPU\n");
		return 77;
	}
	CU(cu.get(&dev, 0));
	CU(cu.name(name, sizeof name, dev));
	CU(cu.retain(&ctx, dev));
	CU(cu.set_current(ctx));
	printf("GPU 0: %s; largest transfer %zu MiB\n", name, max / MIB);

	check("tcp", true, false, max, "tcp");
	check("tcp", false, true, max, "tcp");
	check("tcp", true, true, max, "tcp");
	check("tcp", false, false, max, "tcp"); /* host, for comparison */
	check("shm,tcp", true, false, max, "shm");
	check("shm,tcp", false, true, max, "tcp"); /* shm declines device grants */

	CU(cu.set_current(NULL));
	cu.release(dev);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
