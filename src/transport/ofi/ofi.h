/*
 * ofi.h - the ofi transport (libfabric RMA), shared by its files:
 *   ofi.c    the ops table: provider choice, the serving endpoint,
 *            advertisement blobs, reachability
 *   mr.c     local registrations and one MR per grant
 *   peer.c   peers, each with an endpoint of its own; posting, completion
 *            queues, errors, abort and reset
 *   ctl.c    the control connection: the shared setup handshake (secret,
 *            engine id), a serving endpoint per authenticated initiator,
 *            and the grants' fabric keys, handed out only over it
 *   raw.c    plain libfabric peers: their blobs, and the triple read out
 *            of an owner's blob for a plain initiator
 *   rawkey.c FI_MR_RAW keys (their record, reading, mapping, unmapping)
 *            and the initiator's table of grant keys per peer
 *   lib.c    libfabric itself, loaded at the first probe (never linked)
 *   stub.c   built instead of the others when libfabric is missing
 * Nothing here leaves the transport; the core sees only rma__ofi_ops.
 */
#ifndef RMA_OFI_H
#define RMA_OFI_H

#include <stdbool.h>
#include <stdint.h>

/* transport.h first: libfabric defines container_of only if unset. */
#include "transport/transport.h"
#include "transport/admit.h"
#include "transport/setup.h"
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
#define OFI_RESET_GRACE_NS (1000LL * 1000000) /* for a broken connection's
						 * chunks to be reported */
#define OFI_POLL_NS (200LL * 1000)          /* providers without a wait fd */
#define OFI_QUIET_NS (100LL * 1000)         /* a CQ this quiet gets its fd reset */
#define OFI_BUSY_NS (2000LL * 1000)         /* a queue read every round after its fd told of work */
#define OFI_IDLE_POLL_NS (1000LL * 1000)    /* and an idle one this often */
#define OFI_POLL_SPIN_NS (10LL * 1000000)   /* a polled queue's chunks keep the thread up */
#define OFI_SETUP_KIND 3                    /* setup.h kind: ofi's control */
#define OFI_CTL_ADDR_MAX 19                 /* tcp-format address: v4 7, v6 19 */
#define OFI_HANDSHAKE_NS (10LL * 1000000000) /* initiator: setup to WELCOME */
#define OFI_KEYS_MAX 1024                    /* initiator: keys kept per peer */
#define OFI_IDLE_MAX 16                      /* owner: serving endpoints kept */
#define OFI_RAW_KEY_MAX 256  /* FI_MR_RAW key bytes taken or sent (ucx: 64) */
#define OFI_RAWREC_HDR 10    /* a raw key record: u16 length | u64 base */
#define OFI_SERVE_ADDRS 1024 /* owner: initiator addresses in a serving AV */

struct ofi_ctl;

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
	int64_t last_taken; /* when a drain last took a completion */
	int64_t seen;       /* when its wait fd last told of work */
	int64_t polled;     /* when it was last read */
	int64_t worked;     /* when a chunk was last posted or reported */
	bool watched;       /* w is the core's: freed through rma__watch_retire */
	bool has_fd;        /* the CQ has a wait fd, in the epoll set */
	bool drained;       /* by its wait fd's event, in this round */
};

/* One posted chunk; its fi_context2 is the op context libfabric hands back. */
struct ofi_ctx {
	struct fi_context2 fctx; /* first: providers may use it (FI_CONTEXT2) */
	struct ofi_ctx *prev, *next;
	struct ofi_peer *peer;
	uint64_t op_id, len;
	uint64_t core;           /* authed peers: the token's key */
	struct ofi_map *map;     /* the mapped key it was posted with */
};

/* An FI_MR_RAW key's bytes and the base fi_mr_map_raw takes with them. */
struct ofi_rawkey {
	uint64_t base;
	const uint8_t *bytes;
	size_t len;      /* 1..OFI_RAW_KEY_MAX */
};

/* A key fi_mr_map_raw made (initiator side).  Apart from the key table,
 * whose entries move: chunks posted with it hold it until reported, and
 * it is unmapped once dropped and no longer held. */
struct ofi_map {
	uint64_t key;    /* what is posted */
	unsigned refs;   /* chunks in flight with it */
	bool dropped;    /* revoked, evicted, or its peer gone */
};

/* A grant's fabric key as the owner told it (initiator side). */
struct ofi_key {
	uint64_t core;  /* the token's key (the table's index) */
	uint64_t fkey;  /* the key posted: the MR's, or map->key */
	uint64_t base;  /* remote address of window offset 0 */
	struct ofi_map *map; /* FI_MR_RAW: fkey is mapped; NULL otherwise */
	int state;      /* 1 known, 0 asked, -errno refused */
};

/* An initiator peer's keys, at most OFI_KEYS_MAX. */
struct ofi_keys {
	struct ofi_key *v;
	unsigned n, cap;
};

struct ofi_peer {
	struct rma__peer base;
	struct ofi_tr *ot;
	struct ofi_peer *next;
	struct ofi_ctl *ctl;     /* NULL: a raw peer (no control address) */
	bool authed;             /* keys come over ctl, not from tokens */
	uint64_t expect_id;      /* the engine id the advertisement named */
	struct ofi_keys keys;
	bool moved;              /* the owner gave a new serving address */
	uint8_t new_addr[OFI_ADDR_MAX];
	size_t new_addr_len;
	struct ofi_ep *oe;       /* NULL before the handshake, after a reset
	                          * until the next post; raw peers: from connect */
	fi_addr_t fa;
	uint8_t addr[OFI_ADDR_MAX];
	size_t addr_len;
	uint64_t addr_seq;       /* our endpoints' addresses sent to the owner */
	bool addr_wait;          /* oe's address not yet confirmed: no posts */
	struct ofi_ctx inflight; /* list head */
	unsigned n;              /* chunks in inflight */
	bool stalled;            /* post said -EAGAIN: kick after progress */
	bool reset_due;          /* reset once the current call returns */
	int64_t reset_by;        /* reset_due: close the endpoint by then */
	struct rma__timer abort_tm;
};

/* A grant's registration: its own MR with the grant's access. */
struct ofi_grant {
	struct fid_mr *mr;
	uint64_t key, base;
	uint64_t core;           /* the grant's core key: what peers ask by */
	uint8_t *raw;            /* FI_MR_RAW: the key's bytes (key unused) */
	size_t raw_len;
	uint64_t raw_base;       /* fi_mr_raw_attr's base, for fi_mr_map_raw */
	struct ofi_grant *next;  /* on ofi_tr.grants */
};

struct ofi_tr {
	struct rma__transport base;
	struct rma_engine *e;
	struct fi_info *info;
	struct fi_info *serve_info; /* serving endpoints: small queues */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct ofi_ep *serve;    /* the advertised endpoint (passive side) */
	struct ofi_peer *peers;
	struct ofi_ctx *free_ctx;
	uint64_t mr_mode;
	uint64_t max_msg;
	size_t key_size;
	size_t raw_u64;          /* FI_MR_RAW: u64 keys are mapped as this many
				  * bytes (0: not FI_MR_RAW) */
	unsigned tx_size;
	bool wait_fd;            /* CQs have FI_WAIT_FD */
	bool keep_signal;        /* a progress thread: busy CQs keep it set */
	const char *prov;        /* option value: tcp, sockets, shm, efa, verbs */
	char prov_name[OFI_NAME_MAX], fabric_name[OFI_NAME_MAX];
	uint8_t addr[OFI_ADDR_MAX];
	size_t addr_len;
	/* ctl.c: the control listener and what the handshake needs */
	struct rma__watch lw;
	uint8_t ctl_addr[OFI_CTL_ADDR_MAX];
	size_t ctl_addr_len;
	uint8_t key[16];         /* setup proof key, from the secret */
	bool open;               /* no secret: tokens may carry fabric keys */
	bool noctl_refused;      /* said once: a secret refuses no-control peers */
	uint64_t engine_id;
	struct ofi_ctl *served;  /* owner: accepted control connections */
	struct ofi_ctl *idle;    /* owner: serving endpoints whose peer left */
	unsigned nidle;
	unsigned nserved;
	struct rma__admit admit; /* owner: caps on control connections */
	struct ofi_grant *grants;
	struct rma__refusals refusals;
	int64_t addr_warned;     /* owner: last bad initiator address logged */
	struct rma__timer tick;  /* owner: handshake deadlines, refusal log */
	struct rma__timer look;  /* a sleeping thread reads polled queues */
};

/* ofi.c */
int rma__ofi_ep_open(struct ofi_tr *ot, struct ofi_peer *peer,
		     struct ofi_ep **out);
void rma__ofi_ep_close(struct ofi_ep *oe);
int rma__ofi_err(int fi_rc); /* a libfabric error as -errno */

/* lib.c: libfabric's own symbols, bound by rma__fi_load (ofi's probe;
 * everything else runs after it).  fi_allocinfo() is dupinfo(NULL). */
struct rma__fi {
	int (*getinfo)(uint32_t version, const char *node, const char *service,
		       uint64_t flags, const struct fi_info *hints,
		       struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		      void *context);
	const char *(*strerror)(int errnum);
};
extern struct rma__fi rma__fi;
extern const char *rma__fi_soname; /* dlopen'ed; tests may point it elsewhere */
int rma__fi_load(const char **why); /* 0, or -EOPNOTSUPP and why */
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
void rma__ofi_cq_poll(struct ofi_ep *oe); /* unless its event read it */
int rma__ofi_cq_drain(struct ofi_ep *oe); /* entries taken */
void rma__ofi_look(struct rma__timer *tm);
void rma__ofi_peers_fini(struct ofi_tr *ot);
/* peer.c, for ctl.c */
/* The handshake passed: open the peer's endpoint and send its address. */
int rma__ofi_peer_hello(struct ofi_peer *pe);
/* WELCOME: the owner's serving address, which holds our address seq. */
void rma__ofi_peer_up(struct ofi_peer *pe, const uint8_t *addr, size_t len,
		      uint64_t seq);
/* ADDED: the owner holds our address seq. */
void rma__ofi_peer_added(struct ofi_peer *pe, uint64_t seq);
void rma__ofi_peer_lost(struct ofi_peer *pe, int err);
void rma__ofi_peer_key(struct ofi_peer *pe, uint64_t core, int status,
		       uint64_t fkey, uint64_t base, const struct ofi_rawkey *raw);
void rma__ofi_peer_moved(struct ofi_peer *pe, const uint8_t *addr, size_t len);

/* ctl.c */
/* The control listener's limits (admit.h): defaults or options. */
int rma__ofi_ctl_limits(struct ofi_tr *ot, const struct rma__topts *o);
int rma__ofi_ctl_listen(struct ofi_tr *ot, const char *at, const char *advertise);
void rma__ofi_ctl_fini(struct ofi_tr *ot);
int rma__ofi_ctl_connect(struct ofi_peer *pe, const uint8_t *ctl, size_t len);
int rma__ofi_ctl_ask(struct ofi_ctl *c, uint64_t core);
/* Initiator: our endpoint's fabric address, number seq, for the owner to
 * insert (ADDR). */
int rma__ofi_ctl_addr(struct ofi_ctl *c, const void *addr, size_t len,
		      uint64_t seq);
/* Initiator: read what the owner sent so far (notices of revoked keys
 * come before the endpoint they ended). */
void rma__ofi_ctl_poll(struct ofi_ctl *c);
void rma__ofi_ctl_close(struct ofi_ctl *c);
/* Owner: cut off every peer that was given this grant's key. */
void rma__ofi_ctl_revoke(struct ofi_tr *ot, uint64_t core);
void rma__ofi_ctl_progress(struct ofi_tr *ot);
int rma__ofi_ctl_arm(struct ofi_tr *ot);
/* The control address in a blob (flag 2), if any: 0, or -ENOENT. */
int rma__ofi_blob_ctl(const void *blob, size_t len, const uint8_t **ctl,
		      size_t *ctl_len);
/* The raw key record in a blob (flag 4), if any: 0, or -ENOENT. */
int rma__ofi_blob_raw(const void *blob, size_t len, const uint8_t **rec,
		      size_t *rec_len);

/* Blob fields both ofi.c and peer.c read. */
int rma__ofi_blob_parse(const void *blob, size_t len, const char **prov,
			size_t *prov_len, const char **fab, size_t *fab_len,
			const uint8_t **addr, size_t *addr_len, uint64_t *key,
			uint64_t *base, bool *has_key);

/* For tests (the engine's lock held).  Owner: how many peers' serving
 * endpoints hold addr in their AV, as the provider resolves the entry
 * inserted for the peer.  Initiator: the fabric address of the newest
 * peer's endpoint: its length, -ENOENT (none open) or -ENOSPC; the
 * chunks posted through it, or -ENOENT. */
int rma__ofi_ctl_holding(struct rma__transport *t, const void *addr, size_t len);
int rma__ofi_peer_name(struct rma__transport *t, void *buf, size_t cap);
int rma__ofi_peer_posted(struct rma__transport *t);

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

/* rawkey.c: the record (u16 length | u64 base | bytes), in KEYS and tokens */
/* Its whole length from its first OFI_RAWREC_HDR of len bytes, or -EBADMSG
 * (length 0 or above OFI_RAW_KEY_MAX). */
int rma__ofi_rawrec_size(const uint8_t *b, size_t len);
/* Decode one record at the start of b: its length, or -EBADMSG. */
int rma__ofi_rawrec_get(const uint8_t *b, size_t len, struct ofi_rawkey *out);
/* Bytes written, -EINVAL (key length out of bounds) or -ENOSPC. */
int rma__ofi_rawrec_put(uint8_t *b, size_t cap, const struct ofi_rawkey *k);
/* Owner: a grant MR's raw key (fi_mr_raw_attr), the base preset to addr;
 * *bytes is malloc'd.  0, -EMSGSIZE (longer than OFI_RAW_KEY_MAX) or
 * -errno. */
int rma__ofi_raw_read(struct fid_mr *mr, uint64_t addr, uint8_t **bytes,
		      size_t *len, uint64_t *base);
/* Initiator: map a raw key (fi_mr_map_raw); 0 or -errno. */
int rma__ofi_map_new(struct fid_domain *d, const struct ofi_rawkey *k,
		     struct ofi_map **out);
/* Drop a mapping (NULL: nothing); unmapped now if no chunk holds it. */
void rma__ofi_map_drop(struct fid_domain *d, struct ofi_map *m);
/* A chunk posted with m is reported; unmaps a dropped one left unheld. */
void rma__ofi_map_put(struct fid_domain *d, struct ofi_map *m);

/* rawkey.c: the key table */
struct ofi_key *rma__ofi_keys_find(struct ofi_keys *t, uint64_t core);
/* A new entry (state 0) for core.  A full table first forgets its settled
 * entries (asked again on use), dropping their mappings; still full:
 * -EAGAIN.  0, -EAGAIN or -ENOMEM. */
int rma__ofi_keys_add(struct ofi_keys *t, struct fid_domain *d, uint64_t core,
		      struct ofi_key **out);
/* Settle k: status < 0 refuses or revokes it (its mapping dropped); 0
 * gives fkey and base, or raw (mapped here).  raw_u64 (ofi_tr) > 0: a u64
 * key is mapped too, as that many little-endian bytes (more than 8:
 * -EOPNOTSUPP).  A failed mapping refuses k with its error. */
void rma__ofi_keys_set(struct ofi_key *k, struct fid_domain *d, size_t raw_u64,
		       int status, uint64_t fkey, uint64_t base,
		       const struct ofi_rawkey *raw);
/* Forget every entry, dropping their mappings (the peer is going). */
void rma__ofi_keys_clear(struct ofi_keys *t, struct fid_domain *d);

#endif
