/*
 * stage.c - CUDA device memory on transports that move bytes with the CPU.
 *
 * A region over device memory is recognised at registration (through the
 * run-time-loaded driver, src/util/cuda.h).  Only instances whose transport
 * says it can carry device memory (RMA__CAP_DEVICE) register it: verbs by
 * dma-buf, tcp and shm by staging each piece through a pinned host buffer
 * of their own with these helpers.  Any other transport never sees it.
 */
#include <errno.h>

#include "core/core.h"
#include "util/cuda.h"

/* Called by region_new before any instance sees r: 0, or -EINVAL for a
 * range that is device memory at one end only. */
int rma__region_detect(struct rma_region *r)
{
	void *ctx = NULL;

	if (r->fd >= 0 || !rma__cuda())
		return 0; /* rma_region_alloc's memory is the host's */
	if (rma__cuda_mem(r->addr, &ctx) != RMA__CUDA_DEVICE) {
		if (rma__cuda_mem(r->addr + r->len - 1, NULL) == RMA__CUDA_DEVICE)
			return -EINVAL;
		return 0;
	}
	if (rma__cuda_mem(r->addr + r->len - 1, NULL) != RMA__CUDA_DEVICE)
		return -EINVAL;
	r->dev = true;
	r->cuctx = ctx;
	return 0;
}

/* May instance i carry region r? */
bool rma__region_carries(const struct rma_region *r, const struct rma__transport *t)
{
	return !r->dev || (t->ops->caps & RMA__CAP_DEVICE);
}

bool rma__region_device(const struct rma_region *r)
{
	return r->dev;
}

int rma__stage_dtoh(const struct rma_region *r, void *dst, const void *src,
		    size_t len)
{
	return rma__cuda_dtoh(r->cuctx, dst, src, len);
}

int rma__stage_htod(const struct rma_region *r, void *dst, const void *src,
		    size_t len)
{
	return rma__cuda_htod(r->cuctx, dst, src, len);
}

int rma__stage_reserve(struct rma__stage *s, const struct rma_region *r)
{
	void *p;
	int rc;

	if (s->buf)
		return 0;
	rc = rma__cuda_host_alloc(r->cuctx, RMA__STAGE_SIZE, &p);
	if (rc)
		return rc == -ENOSYS ? -EIO : rc;
	s->buf = p;
	s->ctx = r->cuctx;
	return 0;
}

void rma__stage_release(struct rma__stage *s)
{
	if (s->buf)
		rma__cuda_host_free(s->ctx, s->buf);
	s->buf = NULL;
	s->ctx = NULL;
}
