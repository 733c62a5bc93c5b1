/*
 * unit_cuda_stage.c - CUDA device memory over tcp and shm, staged through
 * pinned host memory, with no GPU.
 *
 * dlopen/dlsym are replaced at link time, so the "CUDA driver" is this
 * file.  Its device memory is a memfd mapped twice: the "device addresses"
 * handed to rma are a PROT_NONE mapping, so any CPU access to them (a
 * recv, a memcpy, process_vm_*) faults or fails; only the fake driver's
 * copies reach the bytes, through the second, readable mapping.  The
 * copies check that the memory's context is current and count the bytes
 * and whether the host side was pinned memory from the driver.
 *
 * One case per run: unit_cuda_stage CASE (ctest runs each).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"
#include "util/cuda.h"

#define DEV_SIZE (128u << 20)
#define MIB (1u << 20)
static void *const CTX = (void *)0x5eed;

static char *dev;      /* the device addresses (PROT_NONE) */
static char *dev_view; /* the same bytes, as the driver sees them */
static bool driver_loaded = true;

static _Thread_local void *cur_ctx;
static atomic_ulong n_attr, n_dtoh, n_htod, b_dtoh, b_htod, n_unpinned,
	n_noctx, n_alloc, n_free, n_pinned_live;
static atomic_int fail_dtoh, fail_htod; /* fail that many copies */
static atomic_int fail_skip;            /* ... after letting these pass */

static bool fail_now(atomic_int *fail)
{
	if (atomic_load(fail) <= 0)
		return false;
	if (atomic_load(&fail_skip) > 0) {
		atomic_fetch_sub(&fail_skip, 1);
		return false;
	}
	return atomic_fetch_sub(fail, 1) > 0;
}

/* Pinned host allocations, to check copies use them. */
#define MAX_PINNED 64
static struct { char *p; size_t len; } pinned[MAX_PINNED];
static pthread_mutex_t pin_mu = PTHREAD_MUTEX_INITIALIZER;

static bool is_dev(unsigned long long p)
{
	return p >= (uintptr_t)dev && p < (uintptr_t)dev + DEV_SIZE;
}
static bool is_pinned(const void *p, size_t len)
{
	bool ok = false;
	pthread_mutex_lock(&pin_mu);
	for (int i = 0; i < MAX_PINNED && !ok; i++)
		ok = pinned[i].p && (const char *)p >= pinned[i].p &&
		     (const char *)p + len <= pinned[i].p + pinned[i].len;
	pthread_mutex_unlock(&pin_mu);
	return ok;
}

static int f_ptr_attr(void *data, int attr, unsigned long long p)
{
	n_attr++;
	if (!is_dev(p))
		return 1; /* CUDA_ERROR_INVALID_VALUE: not the driver's */
	if (attr == RMA__CU_ATTR_MEMORY_TYPE)
		*(unsigned *)data = RMA__CU_MEMORYTYPE_DEVICE;
	else if (attr == RMA__CU_ATTR_CONTEXT)
		*(void **)data = CTX;
	else if (attr == RMA__CU_ATTR_IS_MANAGED) /* the last MiB */
		*(unsigned *)data = p >= (uintptr_t)dev + DEV_SIZE - MIB;
	else
		return 1;
	return 0;
}
static int f_push(void *ctx) { cur_ctx = ctx; return 0; }
static int f_pop(void **ctx) { *ctx = cur_ctx; cur_ctx = NULL; return 0; }
static int f_dtoh(void *dst, unsigned long long src, size_t len)
{
	if (cur_ctx != CTX) {
		n_noctx++;
		return 201; /* CUDA_ERROR_INVALID_CONTEXT */
	}
	if (!is_dev(src) || !is_dev(src + len - 1))
		return 1;
	if (fail_now(&fail_dtoh))
		return 999;
	if (!is_pinned(dst, len))
		n_unpinned++;
	memcpy(dst, dev_view + (src - (uintptr_t)dev), len);
	n_dtoh++;
	b_dtoh += len;
	return 0;
}
static int f_htod(unsigned long long dst, const void *src, size_t len)
{
	if (cur_ctx != CTX) {
		n_noctx++;
		return 201;
	}
	if (!is_dev(dst) || !is_dev(dst + len - 1))
		return 1;
	if (fail_now(&fail_htod))
		return 999;
	if (!is_pinned(src, len))
		n_unpinned++;
	memcpy(dev_view + (dst - (uintptr_t)dev), src, len);
	n_htod++;
	b_htod += len;
	return 0;
}
static int f_host_alloc(void **p, size_t len, unsigned flags)
{
	if (cur_ctx != CTX || !(flags & RMA__CU_HOSTALLOC_PORTABLE))
		return 201;
	pthread_mutex_lock(&pin_mu);
	for (int i = 0; i < MAX_PINNED; i++)
		if (!pinned[i].p) {
			pinned[i].p = malloc(len);
			pinned[i].len = len;
			*p = pinned[i].p;
			n_alloc++;
			n_pinned_live++;
			pthread_mutex_unlock(&pin_mu);
			return 0;
		}
	pthread_mutex_unlock(&pin_mu);
	return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}
static int f_host_free(void *p)
{
	pthread_mutex_lock(&pin_mu);
	for (int i = 0; i < MAX_PINNED; i++)
		if (pinned[i].p == p) {
			free(p);
			pinned[i].p = NULL;
			n_free++;
			n_pinned_live--;
		}
	pthread_mutex_unlock(&pin_mu);
	return 0;
}
static int f_unused(void) { return 1; }

void *__real_dlopen(const char *name, int flags);
static atomic_int n_cuda_dlopen; /* rma asked for the driver */
void *__wrap_dlopen(const char *name, int flags)
{
	if (!strcmp(name, "libcuda.so.1")) {
		atomic_fetch_add(&n_cuda_dlopen, 1);
		CHECK(flags & RTLD_NOLOAD); /* never loads the driver itself */
		return driver_loaded ? (void *)&driver_loaded : NULL;
	}
	return __real_dlopen(name, flags);
}
void *__real_dlsym(void *h, const char *name);
void *__wrap_dlsym(void *h, const char *name)
{
	static const struct { const char *n; void *f; } tab[] = {
		{"cuPointerGetAttribute", (void *)f_ptr_attr},
		{"cuCtxPushCurrent_v2", (void *)f_push},
		{"cuCtxPopCurrent_v2", (void *)f_pop},
		{"cuMemcpyDtoH_v2", (void *)f_dtoh},
		{"cuMemcpyHtoD_v2", (void *)f_htod},
		{"cuMemHostAlloc", (void *)f_host_alloc},
		{"cuMemFreeHost", (void *)f_host_free},
		{"cuMemGetAddressRange_v2", (void *)f_unused},
		{"cuMemGetHandleForAddressRange", (void *)f_unused},
	};
	if (h != &driver_loaded)
		return __real_dlsym(h, name);
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
		if (!strcmp(name, tab[i].n))
			return tab[i].f;
	return NULL;
}

/* Stream cases: large writes go out in short pieces, and every third
 * one finds the socket "full", so device payloads are written in turns
 * (a piece resumed from the middle, other connections' and received
 * payloads passing through the same buffer in between). */
static bool short_writes;
static atomic_uint n_large_sends;
ssize_t __real_sendmsg(int fd, const struct msghdr *mh, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	struct iovec iov[64];
	struct msghdr m = *mh;
	size_t total = 0, cap = 200 * 1024 + 3;

	for (size_t i = 0; i < mh->msg_iovlen; i++)
		total += mh->msg_iov[i].iov_len;
	if (!short_writes || total <= cap || mh->msg_iovlen > 64)
		return __real_sendmsg(fd, mh, flags);
	/* a few bytes, then "full", then a larger piece: in turn */
	switch (atomic_fetch_add(&n_large_sends, 1) % 3) {
	case 0:
		cap = 1003;
		break;
	case 1:
		errno = EAGAIN;
		return -1;
	}
	m.msg_iov = iov;
	m.msg_iovlen = 0;
	for (size_t i = 0; i < mh->msg_iovlen && cap; i++) {
		iov[i] = mh->msg_iov[i];
		if (iov[i].iov_len > cap)
			iov[i].iov_len = cap;
		cap -= iov[i].iov_len;
		m.msg_iovlen++;
	}
	return __real_sendmsg(fd, &m, flags);
}

static void dev_init(void)
{
	int fd = memfd_create("fake-gpu", MFD_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, DEV_SIZE) == 0);
	dev = mmap(NULL, DEV_SIZE, PROT_NONE, MAP_SHARED, fd, 0);
	dev_view = mmap(NULL, DEV_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(dev != MAP_FAILED && dev_view != MAP_FAILED);
	close(fd);
}
static char *view(const char *d) { return dev_view + (d - dev); }

static rma_engine *engine(const char *transports)
{
	return test_tcp_engine((struct rma_config){.transports = transports});
}

static void copies_none(void)
{
	CHECK_EQ(n_dtoh, 0);
	CHECK_EQ(n_htod, 0);
}

/* Put local[off, +len) to the remote's start, then get it back into
 * local2: each side's bytes checked through the right view. */
struct side {
	rma_engine *e;
	rma_region *r;
	char *addr; /* as registered */
	char *cpu;  /* where the test reads and writes it */
};

static struct side side_new(rma_engine *e, bool device, size_t off, size_t len,
			    unsigned access)
{
	struct side s = {.e = e};
	if (device) {
		s.addr = dev + off;
		s.cpu = view(s.addr);
	} else {
		s.addr = s.cpu = test_alloc(len);
	}
	CHECK_RC(rma_region_register(e, s.addr, len, access, &s.r), 0);
	return s;
}

/* A round of puts and gets of several sizes, chunked (> max_msg) and
 * larger than the staging buffer; returns the bytes moved each way. */
static uint64_t round_trip(struct side *ini, struct side *ini2, struct side *tgt,
			   const char *want_route)
{
	static const size_t sizes[] = {1, 4097, 3 * MIB + 123};
	rma_remote *rem = test_remote_of(tgt->r);
	struct rma_route_info ri;
	uint64_t total = 0;

	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		size_t n = sizes[k];
		uint64_t seed = 77 + k;
		test_fill(ini->cpu, n, seed);
		memset(tgt->cpu, 0, n);
		struct rma_op op = {.kind = RMA_OP_PUT, .local = ini->r,
				    .remote = rem, .len = n};
		int64_t res;
		CHECK_RC(rma_submit(ini->e, &op, 1, 20000, &res, NULL, 0), 0);
		CHECK_EQ(res, (int64_t)n);
		CHECKF(test_check_fill(tgt->cpu, n, seed) < 0, "put of %zu", n);

		memset(ini2->cpu, 0, n);
		op = (struct rma_op){.kind = RMA_OP_GET, .local = ini2->r,
				     .remote = rem, .len = n};
		CHECK_RC(rma_submit(ini->e, &op, 1, 20000, &res, NULL, 0), 0);
		CHECK_EQ(res, (int64_t)n);
		CHECKF(test_check_fill(ini2->cpu, n, seed) < 0, "get of %zu", n);
		total += n;
	}
	CHECK_RC(rma_peer_route(ini->e, rem, &ri), 0);
	CHECKF(!strcmp(ri.transport, want_route), "route %s: %s", ri.transport, ri.why);
	rma_remote_free(rem);
	return total;
}

static void finish(struct side *a, struct side *b, struct side *c)
{
	rma_engine *e1 = a->e, *e2 = c->e;
	rma_region_release(a->r);
	if (b != a)
		rma_region_release(b->r);
	rma_region_release(c->r);
	rma_engine_destroy(e1);
	rma_engine_destroy(e2);
	/* Every pinned buffer went back; never more than one per instance. */
	CHECK_EQ(n_pinned_live, 0);
	CHECK(n_alloc <= 4);
	CHECK_EQ(n_noctx, 0);
	CHECK_EQ(n_unpinned, 0);
}

/* Initiator's memory on the device, the target's on the host. */
static void case_local(const char *tr, const char *route)
{
	rma_engine *t = engine(tr), *e = engine(tr);
	struct side tgt = side_new(t, false, 0, 4 * MIB, RMA_ACCESS_REMOTE_RW);
	struct side a = side_new(e, true, 0, 4 * MIB, 0);
	struct side b = side_new(e, true, 8 * MIB, 4 * MIB, 0);
	uint64_t n = round_trip(&a, &b, &tgt, route);
	/* Every byte put was read from the device by the driver, every byte
	 * got written to it by the driver: the staging path, and only it. */
	CHECK_EQ(b_dtoh, n);
	CHECK_EQ(b_htod, n);
	CHECK(n_alloc >= 1);
	finish(&a, &b, &tgt);
}

/* The target's memory on the device: tcp stages it there (shm declines
 * it, so a shm engine routes to tcp). */
static void case_target(const char *tr)
{
	rma_engine *t = engine(tr), *e = engine(tr);
	struct side tgt = side_new(t, true, 16 * MIB, 4 * MIB, RMA_ACCESS_REMOTE_RW);
	struct side a = side_new(e, false, 0, 4 * MIB, 0);
	struct side b = side_new(e, false, 0, 4 * MIB, 0);
	uint64_t n = round_trip(&a, &b, &tgt, "tcp");
	CHECK_EQ(b_dtoh, n);
	CHECK_EQ(b_htod, n);
	finish(&a, &b, &tgt);
}

/* Both sides on the device: each byte crosses the driver twice. */
static void case_both(void)
{
	rma_engine *t = engine("tcp"), *e = engine("tcp");
	struct side tgt = side_new(t, true, 16 * MIB, 4 * MIB, RMA_ACCESS_REMOTE_RW);
	struct side a = side_new(e, true, 0, 4 * MIB, 0);
	struct side b = side_new(e, true, 8 * MIB, 4 * MIB, 0);
	uint64_t n = round_trip(&a, &b, &tgt, "tcp");
	CHECK_EQ(b_dtoh, 2 * n);
	CHECK_EQ(b_htod, 2 * n);
	CHECK(n_alloc >= 2); /* one buffer per engine's instance */
	finish(&a, &b, &tgt);
}

/* Many puts and gets in flight at once, on one connection or striped,
 * chunks larger than the pinned buffer: device payloads written in turns
 * (socket full), pieces resumed while received pieces pass through the
 * same buffer. */
#define SLOTS 16
#define SLOT (3 * MIB / 2 + 4096)
static void case_stream(unsigned stripes, uint64_t max_msg, bool target_dev)
{
	struct rma_config cfg = {.transports = "tcp", .stripes = stripes,
				 .max_msg_size = max_msg};
	rma_engine *t = test_tcp_engine(cfg), *e = test_tcp_engine(cfg);
	struct side tgt = side_new(t, target_dev, 64 * MIB, SLOTS * SLOT,
				   RMA_ACCESS_REMOTE_RW);
	struct side a = side_new(e, !target_dev || stripes == 1, 0, SLOTS * SLOT, 0);
	rma_remote *rem = test_remote_of(tgt.r);
	struct rma_op ops[SLOTS];
	int64_t res[SLOTS];

	short_writes = true;

	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < SLOTS; i++) {
			uint64_t seed = 1000 * (uint64_t)round + (uint64_t)i + 1;
			bool put = (i + round) % 2 == 0;
			test_fill((put ? a.cpu : tgt.cpu) + (size_t)i * SLOT, SLOT, seed);
			memset((put ? tgt.cpu : a.cpu) + (size_t)i * SLOT, 0, SLOT);
			ops[i] = (struct rma_op){
				.kind = put ? RMA_OP_PUT : RMA_OP_GET, .local = a.r,
				.local_off = (uint64_t)i * SLOT, .remote = rem,
				.remote_off = (uint64_t)i * SLOT, .len = SLOT};
		}
		CHECK_RC(rma_submit(e, ops, SLOTS, 30000, res, NULL, 0), 0);
		for (int i = 0; i < SLOTS; i++) {
			uint64_t seed = 1000 * (uint64_t)round + (uint64_t)i + 1;
			CHECK_EQ(res[i], (int64_t)SLOT);
			CHECKF(test_check_fill(a.cpu + (size_t)i * SLOT, SLOT, seed) < 0 &&
			       test_check_fill(tgt.cpu + (size_t)i * SLOT, SLOT, seed) < 0,
			       "round %d op %d (%s)", round, i,
			       ops[i].kind == RMA_OP_PUT ? "put" : "get");
		}
	}
	CHECK(b_dtoh >= 3ull * SLOTS / 2 * SLOT);
	CHECK(n_large_sends > 0);
	rma_remote_free(rem);
	finish(&a, &a, &tgt);
}

/* Host memory never takes the staging path, on any transport. */
static void case_host(const char *tr, const char *route)
{
	rma_engine *t = engine(tr), *e = engine(tr);
	struct side tgt = side_new(t, false, 0, 4 * MIB, RMA_ACCESS_REMOTE_RW);
	struct side a = side_new(e, false, 0, 4 * MIB, 0);
	struct side b = side_new(e, false, 0, 4 * MIB, 0);
	round_trip(&a, &b, &tgt, route);
	copies_none();
	CHECK_EQ(n_alloc, 0);
	CHECK(n_attr > 0); /* it did ask the driver */
	finish(&a, &b, &tgt);
}

/* A failed device copy fails that op with -EIO, and only it; the rest of
 * its payload is not copied (one chunk: one connection, chunks of 4 MiB). */
static void case_copy_error(const char *tr, bool target_dev)
{
	struct rma_config cfg = {.transports = tr, .stripes = 1,
				 .max_msg_size = 4 * MIB};
	rma_engine *t = test_tcp_engine(cfg), *e = test_tcp_engine(cfg);
	struct side tgt = side_new(t, target_dev, 16 * MIB, 4 * MIB, RMA_ACCESS_REMOTE_RW);
	struct side a = side_new(e, !target_dev, 0, 4 * MIB, 0);
	rma_remote *rem = test_remote_of(tgt.r);
	const size_t n = 3 * MIB + 5;
	int64_t res;

	/* The first piece fails, or the second (half the payload is on the
	 * wire: for a sender that costs the connection). */
	for (int skip = 0; skip < 2; skip++)
	for (int kind = RMA_OP_PUT; kind <= RMA_OP_GET; kind++) {
		struct rma_op op = {.kind = (unsigned)kind, .local = a.r,
				    .remote = rem, .len = n};
		/* put: read from the device (initiator) or written to it
		 * (target); get: the other way round */
		bool dtoh = (kind == RMA_OP_PUT) != target_dev;
		atomic_ulong *copies = dtoh ? &n_dtoh : &n_htod;
		unsigned long before = atomic_load(copies);
		atomic_store(&fail_skip, skip);
		atomic_store(dtoh ? &fail_dtoh : &fail_htod, 1);
		CHECK_EQ(rma_submit(e, &op, 1, 20000, &res, NULL, 0), 1);
		/* A target whose reply breaks off resets the connection. */
		CHECK_EQ(res, skip && target_dev && kind == RMA_OP_GET ?
				      -ECONNRESET : -EIO);
		CHECK_EQ(atomic_load(dtoh ? &fail_dtoh : &fail_htod), 0);
		CHECK_EQ(atomic_load(copies), before + (unsigned long)skip);
		/* The next op works. */
		test_fill(a.cpu, n, 9);
		test_fill(tgt.cpu, n, 9);
		CHECK_RC(rma_submit(e, &op, 1, 20000, &res, NULL, 0), 0);
		CHECK_EQ(res, (int64_t)n);
		CHECK(test_check_fill(a.cpu, n, 9) < 0);
		CHECK(test_check_fill(tgt.cpu, n, 9) < 0);
	}
	rma_remote_free(rem);
	rma_region_release(a.r);
	rma_region_release(tgt.r);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
}

/* Device memory is never offered to a transport that cannot carry it,
 * and a region half on the device is refused. */
static void case_gate(void)
{
	rma_engine *fe, *e = engine("tcp");
	rma_region *r;

	fake_register();
	fake_reset(0);
	fe = fake_engine(8);
	CHECK_RC(rma_region_register(fe, dev, MIB, RMA_ACCESS_REMOTE_RW, &r),
		 -EOPNOTSUPP);
	CHECK_EQ(fake.mem_regs, 0);
	char *host = test_alloc(MIB);
	CHECK_RC(rma_region_register(fe, host, MIB, 0, &r), 0);
	CHECK_EQ(fake.mem_regs, 1);
	rma_region_release(r);
	/* Unified (managed) memory: the CPU may touch it, it is the host's. */
	CHECK_RC(rma_region_register(fe, dev + DEV_SIZE - MIB, MIB, 0, &r), 0);
	CHECK_EQ(fake.mem_regs, 2);
	rma_region_release(r);
	rma_engine_destroy(fe);

	CHECK_RC(rma_region_register(e, dev + DEV_SIZE - MIB - 4096, 8192, 0, &r),
		 -EINVAL);
	CHECK_RC(rma_region_register(e, dev - 4096, 8192, 0, &r), -EINVAL);
	rma_engine_destroy(e);
}

/* Without a driver in the process nothing is asked of CUDA. */
static void case_no_driver(void)
{
	driver_loaded = false;
	rma__cuda_forget();
	rma_engine *t = engine("tcp"), *e = engine("tcp");
	struct side tgt = side_new(t, false, 0, MIB, RMA_ACCESS_REMOTE_RW);
	struct side a = side_new(e, false, 0, MIB, 0);
	struct side b = side_new(e, false, 0, MIB, 0);
	rma_remote *rem = test_remote_of(tgt.r);
	CHECK_EQ(rma_write_from(e, a.r, rem, 20000), MIB);
	rma_remote_free(rem);
	CHECK_EQ(n_attr, 0);
	copies_none();
	finish(&a, &b, &tgt);
}

/* The driver is asked for once, then again only after the process loads
 * an object: a host-only process pays no dlopen per registration (each
 * unmaps the loader's cache), and one that initialises CUDA after its
 * first rma call still has its device memory recognised. */
static void case_driver_later(void)
{
	driver_loaded = false;
	rma__cuda_forget();
	atomic_store(&n_cuda_dlopen, 0);
	rma_engine *e = engine("tcp");
	char *host = test_alloc(MIB);
	rma_region *r[3], *dr;
	for (int i = 0; i < 3; i++)
		CHECK_RC(rma_region_register(e, host, MIB, 0, &r[i]), 0);
	CHECKF(n_cuda_dlopen == 1, "3 registrations asked for the driver %d times",
	       (int)n_cuda_dlopen);
	CHECK_EQ(n_attr, 0);
	/* The application initialises CUDA: the driver, and an object the
	 * process had not loaded before (libc's libanl) to be counted. */
	driver_loaded = true;
	void *h = __real_dlopen("libanl.so.1", RTLD_NOW);
	CHECKF(h, "dlopen libanl.so.1: %s", dlerror());
	CHECK_RC(rma_region_register(e, dev, MIB, 0, &dr), 0);
	CHECKF(n_cuda_dlopen == 2, "after a load, the driver was asked for %d times",
	       (int)n_cuda_dlopen);
	CHECK(n_attr > 0); /* the region was looked at as device memory */
	rma_region_release(dr);
	for (int i = 0; i < 3; i++)
		rma_region_release(r[i]);
	rma_engine_destroy(e);
	test_free(host, MIB);
	dlclose(h);
}

/* Device memory named by address (the registration cache) is staged like
 * a device region; a CRC of device memory is refused (the CPU cannot read
 * it). */
static void case_plain(void)
{
	rma_engine *t = engine("tcp"), *e = engine("tcp");
	struct side tgt = side_new(t, false, 0, MIB, RMA_ACCESS_REMOTE_RW);
	rma_remote *rem = test_remote_of(tgt.r);
	char *src = dev + 16 * MIB + 100, *dst = dev + 20 * MIB + 100;
	size_t n = 70000;
	int64_t res;

	test_fill(view(src), n, 5);
	struct rma_op op = {.kind = RMA_OP_PUT, .addr = src, .remote = rem, .len = n};
	CHECK_RC(rma_submit(e, &op, 1, 20000, &res, NULL, 0), 0);
	CHECK_EQ(res, (int64_t)n);
	CHECK(test_check_fill(tgt.cpu, n, 5) < 0);
	memset(view(dst), 0, n);
	op = (struct rma_op){.kind = RMA_OP_GET, .addr = dst, .remote = rem, .len = n};
	CHECK_RC(rma_submit(e, &op, 1, 20000, &res, NULL, 0), 0);
	CHECK_EQ(res, (int64_t)n);
	CHECK(test_check_fill(view(dst), n, 5) < 0);
	CHECK_EQ(b_dtoh, n);
	CHECK_EQ(b_htod, n);

	op = (struct rma_op){.kind = RMA_OP_PUT, .flags = RMA_OP_CRC, .addr = src,
			     .remote = rem, .len = n};
	CHECK_RC(rma_post(e, &op, 1, 20000, NULL), -EOPNOTSUPP);
	rma_remote_free(rem);
	rma_region_release(tgt.r);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	CHECK_EQ(n_pinned_live, 0);
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";

	test_watchdog(100);
	dev_init();
	if (!strcmp(c, "tcp_local"))
		case_local("tcp", "tcp");
	else if (!strcmp(c, "tcp_target"))
		case_target("tcp");
	else if (!strcmp(c, "tcp_both"))
		case_both();
	else if (!strcmp(c, "stream"))
		case_stream(4, 0, false);
	else if (!strcmp(c, "stream_one_conn"))
		case_stream(1, 4 * MIB, false);
	else if (!strcmp(c, "stream_target"))
		case_stream(4, 4 * MIB, true);
	else if (!strcmp(c, "shm_local"))
		case_local("shm,tcp", "shm");
	else if (!strcmp(c, "shm_target"))
		case_target("shm,tcp");
	else if (!strcmp(c, "host"))
		case_host("tcp", "tcp");
	else if (!strcmp(c, "shm_host"))
		case_host("shm,tcp", "shm");
	else if (!strcmp(c, "tcp_copy_error"))
		case_copy_error("tcp", false);
	else if (!strcmp(c, "tcp_target_copy_error"))
		case_copy_error("tcp", true);
	else if (!strcmp(c, "shm_copy_error"))
		case_copy_error("shm,tcp", false);
	else if (!strcmp(c, "gate"))
		case_gate();
	else if (!strcmp(c, "plain"))
		case_plain();
	else if (!strcmp(c, "no_driver"))
		case_no_driver();
	else if (!strcmp(c, "driver_later"))
		case_driver_later();
	else
		FAIL("unknown case '%s'", c);
	return 0;
}
