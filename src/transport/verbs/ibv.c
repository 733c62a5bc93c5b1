/* ibv.c - see ibv.h: one forwarder per inline verb, nothing else. */
#include "transport/verbs/ibv.h"

int rma__ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	return ibv_post_send(qp, wr, bad);
}

int rma__ibv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

int rma__ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_req_notify_cq(cq, solicited_only);
}

int rma__ibv_query_port(struct ibv_context *ctx, uint8_t port,
			struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

struct ibv_mr *rma__ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
			       int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

struct ibv_mw *rma__ibv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	return ibv_alloc_mw(pd, type);
}

int rma__ibv_dealloc_mw(struct ibv_mw *mw)
{
	return ibv_dealloc_mw(mw);
}

struct ibv_device **rma__ibv_get_device_list(int *n)
{
	return ibv_get_device_list(n);
}

int rma__ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port,
			  uint32_t index, struct ibv_gid_entry *out)
{
	return ibv_query_gid_ex(ctx, port, index, out, 0);
}
