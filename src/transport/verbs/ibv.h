/*
 * ibv.h - the libibverbs calls that verbs.h defines inline (through the
 * provider's ops table), made into real functions.  The rest of the
 * transport calls these instead, so that tests can replace every verb the
 * transport uses at link time (-Wl,--wrap=rma__ibv_post_send, ...); verbs
 * that libibverbs exports are called, and wrapped, by their own names.
 */
#ifndef RMA_VERBS_IBV_H
#define RMA_VERBS_IBV_H

#include <infiniband/verbs.h>

int rma__ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad);
int rma__ibv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int rma__ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int rma__ibv_query_port(struct ibv_context *ctx, uint8_t port,
			struct ibv_port_attr *attr);
struct ibv_mr *rma__ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
			       int access);
struct ibv_mw *rma__ibv_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int rma__ibv_dealloc_mw(struct ibv_mw *mw);
struct ibv_device **rma__ibv_get_device_list(int *n);
int rma__ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port,
			  uint32_t index, struct ibv_gid_entry *out);

#endif
