/*
 * cuda.c - see cuda.h.  The driver comes from the shared run-time loader
 * (src/util/cuda.h).
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "rma.h"
#include "transport/verbs/cuda.h"
#include "util/cuda.h"
#include "util/util.h"

bool rma__verbs_cuda_is_device(const void *addr)
{
	/* Managed memory too: its pages may live on the device. */
	return rma__cuda_mem(addr, NULL) != RMA__CUDA_HOST;
}

int rma__verbs_cuda_reg(struct ibv_pd *pd, void *addr, size_t len, int access,
			struct ibv_mr **out)
{
	const struct rma__cuda *cu = rma__cuda();
	unsigned long long p = (unsigned long long)(uintptr_t)addr, base, last_base;
	size_t size, last_size;
	void *ctx = NULL, *popped;
	int fd = -1, rc;
	struct ibv_mr *mr;

	if (!cu)
		return -ENOSYS;
	if (!cu->handle) {
		rma__warn("verbs: the CUDA driver cannot export dma-bufs "
			  "(cuMemGetHandleForAddressRange missing)");
		return -EOPNOTSUPP;
	}
	if (!len)
		len = 1;
	/* The driver call needs the allocation's context current. */
	if (cu->ptr_attr(&ctx, RMA__CU_ATTR_CONTEXT, p) || !ctx)
		return -EFAULT;
	if (cu->ctx_push(ctx))
		return -EFAULT;
	/* The dma-buf spans whole allocations: from the first byte's to the
	 * last byte's (a range may cross neighbouring allocations). */
	rc = -EFAULT;
	if (cu->addr_range(&base, &size, p) ||
	    cu->addr_range(&last_base, &last_size, p + len - 1))
		goto out;
	if (cu->handle(&fd, base, (size_t)(last_base + last_size - base),
		       RMA__CU_HANDLE_DMA_BUF_FD, 0) || fd < 0) {
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
	cu->ctx_pop(&popped);
	return rc;
}
