/*
 * cuda.h - registering CUDA device memory with the NIC through dma-buf.
 *
 * The CUDA driver library is never linked: src/util/cuda.h finds it only
 * if the process has already loaded it.
 */
#ifndef RMA_VERBS_CUDA_H
#define RMA_VERBS_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include <infiniband/verbs.h>

/* Is addr CUDA device memory?  false without CUDA in the process. */
bool rma__verbs_cuda_is_device(const void *addr);

/* Register [addr, addr+len) of device memory: the dma-buf of the whole
 * allocation(s) covering it, an MR over exactly the range, addressed by
 * virtual address like host MRs.  0 and *out, or -ENOSYS (no CUDA driver
 * loaded), -EOPNOTSUPP (no dma-buf export: driver or kernel too old),
 * -EFAULT (not device memory), or ibv_reg_dmabuf_mr's -errno. */
int rma__verbs_cuda_reg(struct ibv_pd *pd, void *addr, size_t len, int access,
			struct ibv_mr **out);

#endif
