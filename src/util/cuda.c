/*
 * cuda.c - see cuda.h.  Entry points are found with dlsym under their
 * versioned names (those the driver API's macros select), so no CUDA
 * header or library is needed to build or run rma.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "rma.h"
#include "util/cuda.h"
#include "util/util.h"

#if __has_include(<cuda.h>)
#include <cuda.h>
_Static_assert((int)CU_POINTER_ATTRIBUTE_CONTEXT == RMA__CU_ATTR_CONTEXT, "cuda ABI");
_Static_assert((int)CU_POINTER_ATTRIBUTE_MEMORY_TYPE == RMA__CU_ATTR_MEMORY_TYPE, "cuda ABI");
_Static_assert((int)CU_POINTER_ATTRIBUTE_IS_MANAGED == RMA__CU_ATTR_IS_MANAGED, "cuda ABI");
_Static_assert((int)CU_MEMORYTYPE_DEVICE == RMA__CU_MEMORYTYPE_DEVICE, "cuda ABI");
_Static_assert((int)CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == RMA__CU_HANDLE_DMA_BUF_FD, "cuda ABI");
_Static_assert(CU_MEMHOSTALLOC_PORTABLE == RMA__CU_HOSTALLOC_PORTABLE, "cuda ABI");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "cuda ABI");
#endif

static struct rma__cuda cu;
static bool cu_ok;
static bool cu_looked;              /* dlopen asked since the last forget */
static unsigned long long cu_adds;  /* objects loaded, as of that look */
static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;

/* The loader counts the objects it ever loaded; every entry holds it. */
static int loaded_count(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size < offsetof(struct dl_phdr_info, dlpi_subs))
		return 2; /* an old loader: unknown */
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

#define SYM(h, field, name) (*(void **)&cu.field = dlsym(h, name))

const struct rma__cuda *rma__cuda(void)
{
	bool ok;

	pthread_mutex_lock(&cu_mu);
	/* Ask dlopen only when an object was loaded since it last said no:
	 * even with RTLD_NOLOAD it maps and unmaps the loader's cache, and
	 * in a threaded process each unmap interrupts every other CPU
	 * (measured: 80-100 us a registration, 10,000 regions a second). */
	unsigned long long adds = 0;
	bool known = !cu_ok && dl_iterate_phdr(loaded_count, &adds) == 1;
	if (!cu_ok && (!known || !cu_looked || adds != cu_adds)) {
		cu_looked = true;
		cu_adds = adds;
		/* RTLD_NOLOAD: only a driver the application loaded itself. */
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (h) {
			SYM(h, ptr_attr, "cuPointerGetAttribute");
			SYM(h, addr_range, "cuMemGetAddressRange_v2");
			SYM(h, handle, "cuMemGetHandleForAddressRange");
			SYM(h, ctx_push, "cuCtxPushCurrent_v2");
			SYM(h, ctx_pop, "cuCtxPopCurrent_v2");
			SYM(h, dtoh, "cuMemcpyDtoH_v2");
			SYM(h, htod, "cuMemcpyHtoD_v2");
			SYM(h, host_alloc, "cuMemHostAlloc");
			SYM(h, host_free, "cuMemFreeHost");
			/* Everything but the dma-buf export (newer drivers). */
			cu_ok = cu.ptr_attr && cu.addr_range && cu.ctx_push &&
				cu.ctx_pop && cu.dtoh && cu.htod &&
				cu.host_alloc && cu.host_free;
			if (!cu_ok)
				rma__warn("the CUDA driver lacks calls rma needs; "
					  "device memory is not recognised");
			/* The reference NOLOAD took is kept: the pointers
			 * above must outlive any dlclose of the app's. */
		}
	}
	ok = cu_ok;
	pthread_mutex_unlock(&cu_mu);
	return ok ? &cu : NULL;
}

enum rma__cuda_mem rma__cuda_mem(const void *addr, void **ctx)
{
	const struct rma__cuda *d = rma__cuda();
	unsigned long long p = (unsigned long long)(uintptr_t)addr;
	unsigned type = 0, managed = 0;
	void *c = NULL;

	if (!d || d->ptr_attr(&type, RMA__CU_ATTR_MEMORY_TYPE, p) ||
	    type != RMA__CU_MEMORYTYPE_DEVICE)
		return RMA__CUDA_HOST; /* not the driver's, or host memory */
	if (d->ptr_attr(&c, RMA__CU_ATTR_CONTEXT, p))
		c = NULL;
	if (ctx)
		*ctx = c;
	/* An error here (an old driver) leaves it device memory. */
	if (d->ptr_attr(&managed, RMA__CU_ATTR_IS_MANAGED, p) == 0 && managed)
		return RMA__CUDA_MANAGED;
	return RMA__CUDA_DEVICE;
}

/* The copy calls need the memory's context current on this thread. */
static int copy(void *ctx, bool to_dev, void *dev, void *host, size_t len)
{
	const struct rma__cuda *d = rma__cuda();
	unsigned long long p = (unsigned long long)(uintptr_t)dev;
	void *popped;
	int rc;

	if (!d)
		return -EIO;
	if (!len)
		return 0;
	if (ctx && d->ctx_push(ctx))
		return -EIO;
	rc = to_dev ? d->htod(p, host, len) : d->dtoh(host, p, len);
	if (ctx)
		d->ctx_pop(&popped);
	if (rc) {
		rma__warn("CUDA %s copy of %zu bytes failed (CUresult %d)",
			  to_dev ? "host-to-device" : "device-to-host", len, rc);
		return -EIO;
	}
	return 0;
}

int rma__cuda_dtoh(void *ctx, void *dst, const void *dev, size_t len)
{
	return copy(ctx, false, (void *)dev, dst, len);
}

int rma__cuda_htod(void *ctx, void *dev, const void *src, size_t len)
{
	return copy(ctx, true, dev, (void *)src, len);
}

int rma__cuda_host_alloc(void *ctx, size_t len, void **out)
{
	const struct rma__cuda *d = rma__cuda();
	void *p = NULL, *popped;
	int rc;

	if (!d)
		return -ENOSYS;
	if (ctx && d->ctx_push(ctx))
		return -ENOMEM;
	rc = d->host_alloc(&p, len, RMA__CU_HOSTALLOC_PORTABLE);
	if (ctx)
		d->ctx_pop(&popped);
	if (rc || !p) {
		rma__warn("cannot pin %zu bytes of host memory for staging "
			  "(CUresult %d)", len, rc);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void rma__cuda_host_free(void *ctx, void *p)
{
	const struct rma__cuda *d = rma__cuda();
	void *popped;

	if (!d || !p)
		return;
	/* A context destroyed meanwhile took the memory with it: the call
	 * then fails, harmlessly. */
	if (ctx && d->ctx_push(ctx))
		return;
	d->host_free(p);
	if (ctx)
		d->ctx_pop(&popped);
}

void rma__cuda_forget(void)
{
	pthread_mutex_lock(&cu_mu);
	memset(&cu, 0, sizeof cu);
	cu_ok = cu_looked = false;
	pthread_mutex_unlock(&cu_mu);
}
