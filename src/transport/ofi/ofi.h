/*
 * ofi.h - the ofi transport (libfabric RMA), shared by its files:
 *   ofi.c    the ops table: provider choice, the serving endpoint,
 *            advertisement blobs, reachability
 *   mr.c     local registrations and one MR per grant
 *   peer.c   peers, each with an endpoint of its own; posting, completion
 *            queues, errors, abort and reset
 *   raw.c    plain libfabric peers: their blobs, and the triple read out
 *            of an owner's blob for a plain initiator
 *   stub.c   built instead of the others when libfabric is missing
 * Nothing here leaves the transport; the core sees only rma__ofi_ops.
 */
#ifndef RMA_OFI_H
#define RMA_OFI_H

#include <stdbool.h>
#include <stdint.h>

/* transport.h first: libfabric defines container_of only if unset. */
#include "transport/transport.h"
#include "util/util.h"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define OFI_VERSION FI_VERSION(1, 9)
#define OFI_NAME_MAX 64        /* provider and fabric names in a blob */
#define OFI_ADDR_MAX 128       /* fi_getname bytes in a blob */
#define OFI_DEFAULT_MAX_MSG (1u << 20)
#define OFI_CQ_BATCH 16
#define OFI_ABORT_GRACE_NS (20LL * 1000000) /* before a reset stops an abort */
#define OFI_POLL_NS (200LL * 1000)          /* providers without a wait fd */

/* One endpoint with its own completion queue and address vector: the
 * serving one of an instance, or one per peer.  Separately allocated so
 * its fd watch may outlive it (rma__watch_retire). */
struct ofi_ep {
	struct rma__watch w;   /* the CQ's wait fd, if it has one */
	struct ofi_tr *ot;
	struct ofi_peer *peer; /* NULL: the serving endpoint */
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	bool watched;
};

/* One posted chunk; its fi_context2 is the op context libfabric hands back. */
struct ofi_ctx {
	struct fi_context2 fctx; /* first: providers may use it (FI_CONTEXT2) */
	struct ofi_ctx *prev, *next;
	struct ofi_peer *peer;
	uint64_t op_id, len;
};

struct ofi_peer {
	struct rma__peer base;
	struct ofi_tr *ot;
	struct ofi_peer *next;
	struct ofi_ep *oe;       /* NULL until first post or after a reset */
	fi_addr_t fa;
	uint8_t addr[OFI_ADDR_MAX];
	size_t addr_len;
	struct ofi_ctx inflight; /* list head */
	unsigned n;              /* chunks in inflight */
	bool stalled;            /* post said -EAGAIN: kick after progress */
	bool reset_due;          /* reset once the current call returns */
	struct rma__timer abort_tm;
};

/* A grant's registration: its own MR with the grant's access. */
struct ofi_grant {
	struct fid_mr *mr;
	uint64_t key, base;
};

struct ofi_tr {
	struct rma__transport base;
	struct rma_engine *e;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct ofi_ep *serve;    /* the advertised endpoint (passive side) */
	struct ofi_peer *peers;
	struct ofi_ctx *free_ctx;
	uint64_t mr_mode;
	uint64_t max_msg;
	size_t key_size;
	unsigned tx_size;
	bool wait_fd;            /* CQs have FI_WAIT_FD */
	const char *prov;        /* option value: tcp, sockets, shm, efa, verbs */
	char prov_name[OFI_NAME_MAX], fabric_name[OFI_NAME_MAX];
	uint8_t addr[OFI_ADDR_MAX];
	size_t addr_len;
};

/* ofi.c */
int rma__ofi_ep_open(struct ofi_tr *ot, struct ofi_peer *peer,
		     struct ofi_ep **out);
void rma__ofi_ep_close(struct ofi_ep *oe);
int rma__ofi_err(int fi_rc); /* a libfabric error as -errno */
bool rma__ofi_prov_known(const char *opt); /* tcp, sockets, shm, efa, verbs */

/* mr.c */
int rma__ofi_mem_reg(struct rma__transport *t, struct rma_region *r);
void rma__ofi_mem_dereg(struct rma__transport *t, struct rma_region *r);
int rma__ofi_grant_add(struct rma__transport *t, struct rma__grant *g);
void rma__ofi_grant_remove(struct rma__transport *t, struct rma__grant *g);

/* peer.c */
int rma__ofi_connect(struct rma__transport *t, const void *blob, size_t len,
		     uint64_t engine_id, struct rma__peer **out);
void rma__ofi_disconnect(struct rma__peer *p, int err);
int rma__ofi_post(struct rma__peer *p, const struct rma__xfer *x);
int rma__ofi_abort(struct rma__peer *p, uint64_t op_id, int err);
void rma__ofi_progress(struct rma__transport *t);
int rma__ofi_arm(struct rma__transport *t);
void rma__ofi_cq_drain(struct ofi_ep *oe);
void rma__ofi_peers_fini(struct ofi_tr *ot);
/* Blob fields both ofi.c and peer.c read. */
int rma__ofi_blob_parse(const void *blob, size_t len, const char **prov,
			size_t *prov_len, const char **fab, size_t *fab_len,
			const uint8_t **addr, size_t *addr_len, uint64_t *key,
			uint64_t *base, bool *has_key);

/* raw.c */
bool rma__ofi_plain(const void *blob, size_t len); /* a plain peer's blob? */
int rma__ofi_plain_parse(const void *blob, size_t len, const char **prov,
			 size_t *prov_len, const uint8_t **addr, size_t *addr_len,
			 uint64_t *key, uint64_t *base);
int rma__ofi_plain_reachable(const struct ofi_tr *ot, const void *blob,
			     size_t len);
int rma__ofi_fabric_pack(const struct rma__topts *o, const void *addr,
			 size_t addrlen, uint64_t key, uint64_t base, void *buf,
			 size_t cap);
int rma__ofi_fabric_unpack(const struct rma__topts *o, const void *blob,
			   size_t len, void *addr, size_t cap, uint64_t *key,
			   uint64_t *base);

#endif
