/*
 * cuda.c - see cuda.h.  The few driver entry points used are declared here
 * with the driver API's ABI (the values below are the driver API's; when
 * the CUDA headers are present they are checked against them).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "rma.h"
#include "transport/verbs/cuda.h"
#include "util/util.h"

typedef int vb_cures;
typedef unsigned long long vb_cuptr;
enum {
	VB_CU_SUCCESS = 0,
	VB_CU_PTR_ATTR_CONTEXT = 1,
	VB_CU_PTR_ATTR_MEMORY_TYPE = 2,
	VB_CU_MEMORYTYPE_DEVICE = 2,
	VB_CU_HANDLE_DMA_BUF_FD = 1,
};

#if __has_include(<cuda.h>)
#include <cuda.h>
_Static_assert((int)CU_POINTER_ATTRIBUTE_CONTEXT == (int)VB_CU_PTR_ATTR_CONTEXT, "cuda ABI");
_Static_assert((int)CU_POINTER_ATTRIBUTE_MEMORY_TYPE == (int)VB_CU_PTR_ATTR_MEMORY_TYPE, "cuda ABI");
_Static_assert((int)CU_MEMORYTYPE_DEVICE == (int)VB_CU_MEMORYTYPE_DEVICE, "cuda ABI");
_Static_assert((int)CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD == (int)VB_CU_HANDLE_DMA_BUF_FD, "cuda ABI");
#endif

static struct {
	bool tried, ok;
	vb_cures (*ptr_attr)(void *data, int attr, vb_cuptr p);
	vb_cures (*addr_range)(vb_cuptr *base, size_t *size, vb_cuptr p);
	vb_cures (*handle)(void *h, vb_cuptr p, size_t size, int type,
			   unsigned long long flags);
	vb_cures (*ctx_push)(void *ctx);
	vb_cures (*ctx_pop)(void **ctx);
} cu;
static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;

/* Bind the driver once, only if the process already loaded it. */
static bool cu_load(void)
{
	pthread_mutex_lock(&cu_mu);
	if (!cu.tried) {
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		cu.tried = true;
		if (h) {
			*(void **)&cu.ptr_attr = dlsym(h, "cuPointerGetAttribute");
			*(void **)&cu.addr_range = dlsym(h, "cuMemGetAddressRange_v2");
			*(void **)&cu.handle = dlsym(h, "cuMemGetHandleForAddressRange");
			*(void **)&cu.ctx_push = dlsym(h, "cuCtxPushCurrent_v2");
			*(void **)&cu.ctx_pop = dlsym(h, "cuCtxPopCurrent_v2");
			cu.ok = cu.ptr_attr && cu.addr_range && cu.ctx_push && cu.ctx_pop;
		}
	}
	pthread_mutex_unlock(&cu_mu);
	return cu.ok;
}

bool rma__verbs_cuda_is_device(const void *addr)
{
	unsigned type = 0;
	if (!cu_load())
		return false;
	return cu.ptr_attr(&type, VB_CU_PTR_ATTR_MEMORY_TYPE,
			   (vb_cuptr)(uintptr_t)addr) == VB_CU_SUCCESS &&
	       type == VB_CU_MEMORYTYPE_DEVICE;
}

int rma__verbs_cuda_reg(struct ibv_pd *pd, void *addr, size_t len, int access,
			struct ibv_mr **out)
{
	vb_cuptr p = (vb_cuptr)(uintptr_t)addr, base, last_base;
	size_t size, last_size;
	void *ctx = NULL, *popped;
	int fd = -1, rc;
	struct ibv_mr *mr;

	if (!cu_load())
		return -ENOSYS;
	if (!cu.handle) {
		rma__warn("verbs: the CUDA driver cannot export dma-bufs "
			  "(cuMemGetHandleForAddressRange missing)");
		return -EOPNOTSUPP;
	}
	if (!len)
		len = 1;
	/* The driver call needs the allocation's context current. */
	if (cu.ptr_attr(&ctx, VB_CU_PTR_ATTR_CONTEXT, p) != VB_CU_SUCCESS || !ctx)
		return -EFAULT;
	if (cu.ctx_push(ctx) != VB_CU_SUCCESS)
		return -EFAULT;
	/* The dma-buf spans whole allocations: from the first byte's to the
	 * last byte's (a range may cross neighbouring allocations). */
	rc = -EFAULT;
	if (cu.addr_range(&base, &size, p) != VB_CU_SUCCESS ||
	    cu.addr_range(&last_base, &last_size, p + len - 1) != VB_CU_SUCCESS)
		goto out;
	if (cu.handle(&fd, base, (size_t)(last_base + last_size - base),
		      VB_CU_HANDLE_DMA_BUF_FD, 0) != VB_CU_SUCCESS || fd < 0) {
		rma__warn("verbs: cannot export GPU memory as a dma-buf "
			  "(needs Linux 5.12+ and a driver with dma-buf support)");
		rc = -EOPNOTSUPP;
		goto out;
	}
	/* Offset into the dma-buf, and the virtual address as the MR's
	 * address: lkeys and rkeys then work as for host memory. */
	errno = 0;
	mr = ibv_reg_dmabuf_mr(pd, (uint64_t)(p - base), len, (uint64_t)p, fd,
			       access);
	if (!mr) {
		rc = errno ? -errno : -EIO;
		goto out;
	}
	*out = mr;
	rc = 0;
out:
	if (fd >= 0)
		close(fd); /* the MR holds its own reference */
	cu.ctx_pop(&popped);
	return rc;
}

void rma__verbs_cuda_forget(void)
{
	pthread_mutex_lock(&cu_mu);
	memset(&cu, 0, sizeof cu);
	pthread_mutex_unlock(&cu_mu);
}
