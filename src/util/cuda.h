/*
 * cuda.h - the CUDA driver, loaded at run time and never linked.
 *
 * The driver (libcuda.so.1) is used only if the process has already loaded
 * it: an application that owns device memory has, so a host-only process
 * pays nothing and needs no CUDA.  Until it is found, a call looks again
 * whenever the process has loaded an object since the last look, so an
 * application may initialise CUDA after its first rma call.  Shared by
 * the core (staging device memory through host buffers for transports
 * that copy with the CPU) and verbs (dma-buf).
 */
#ifndef RMA_UTIL_CUDA_H
#define RMA_UTIL_CUDA_H

#include <stdbool.h>
#include <stddef.h>

/* The driver entry points rma uses, with the driver API's ABI (int result,
 * 0 = CUDA_SUCCESS; pointers to device memory as unsigned long long). */
struct rma__cuda {
	int (*ptr_attr)(void *data, int attr, unsigned long long p);
	int (*addr_range)(unsigned long long *base, size_t *size,
			  unsigned long long p);
	int (*handle)(void *h, unsigned long long p, size_t size, int type,
		      unsigned long long flags); /* NULL: driver too old */
	int (*ctx_push)(void *ctx);
	int (*ctx_pop)(void **ctx);
	int (*dtoh)(void *dst, unsigned long long src, size_t len);
	int (*htod)(unsigned long long dst, const void *src, size_t len);
	int (*host_alloc)(void **p, size_t len, unsigned flags);
	int (*host_free)(void *p);
};

/* The driver values used (checked against <cuda.h> where it is found). */
enum {
	RMA__CU_ATTR_CONTEXT = 1,
	RMA__CU_ATTR_MEMORY_TYPE = 2,
	RMA__CU_ATTR_IS_MANAGED = 8,
	RMA__CU_MEMORYTYPE_DEVICE = 2,
	RMA__CU_HANDLE_DMA_BUF_FD = 1,
	RMA__CU_HOSTALLOC_PORTABLE = 1,
};

/* The driver, or NULL when the process has not loaded it. */
const struct rma__cuda *rma__cuda(void);

/* What kind of memory addr is. */
enum rma__cuda_mem {
	RMA__CUDA_HOST,    /* not CUDA's, or pinned host memory */
	RMA__CUDA_DEVICE,  /* device memory: the CPU cannot touch it */
	RMA__CUDA_MANAGED, /* unified memory: device-resident at times, but
			    * the CPU may touch it (pages migrate) */
};
/* ctx (may be NULL) gets the owning context of device or managed memory. */
enum rma__cuda_mem rma__cuda_mem(const void *addr, void **ctx);

/* Copy between device memory of context ctx and host memory, synchronously
 * (the bytes are in place on return; host buffers from rma__cuda_host_alloc
 * make that so for host-to-device copies too).  0, or -EIO. */
int rma__cuda_dtoh(void *ctx, void *dst, const void *dev, size_t len);
int rma__cuda_htod(void *ctx, void *dev, const void *src, size_t len);

/* Pinned host memory usable with every context (portable), allocated with
 * ctx current.  0 and *out, or -ENOMEM (-ENOSYS without the driver). */
int rma__cuda_host_alloc(void *ctx, size_t len, void **out);
void rma__cuda_host_free(void *ctx, void *p);

/* Tests only: forget the driver, look for it again at the next call. */
void rma__cuda_forget(void);

#endif
