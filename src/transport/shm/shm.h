/*
 * shm.h - the shm transport's own objects, shared by its files:
 *   shm.c     the ops table: identity, advertisement, grants, revoke
 *   owner.c   the owner's side: listener, control connections, drain
 *   peer.c    the initiator's side: connect, post (the copies), mappings
 *   host.c    same-host identity and the probe
 *   wire.c    the advertisement blob and the control messages
 *   ring.c    small ops on any memory, served by the owner through a ring
 *
 * Same-host put/get by the initiator alone: cross-memory attach
 * (process_vm_readv/writev) into any registered memory, or plain memcpy into
 * rma_region_alloc memory (a memfd the peer maps once).  The owner keeps
 * control through a shared grant table (design.md, "The shm transport").
 */
#ifndef RMA_SHM_H
#define RMA_SHM_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "transport/admit.h"
#include "transport/setup.h"
#include "transport/transport.h"
#include "util/util.h"

#define SHM_PAGE 4096u
#define SHM_SLOTS 4096u            /* grants one engine shares at once */
#define SHM_ROWS 256u              /* initiator engines attached at once */
#define SHM_PID_ROWS 8u            /* rows one process holds, quarantined
				    * ones too */
#define SHM_SLOT_OFF SHM_PAGE
#define SHM_ROW_OFF (SHM_SLOT_OFF + SHM_SLOTS * sizeof(struct shm_slot))
#define SHM_TABLE_SIZE (SHM_ROW_OFF + SHM_ROWS * SHM_PAGE)
/* Past the table, in the same memfd: each row's stage, SHM_STAGE_ROW
 * bytes that carry requests' bytes when they do not fit inline, taken in
 * turn as a ring (requests are answered in order).  Its pages exist only
 * once written, and go back when the row is freed. */
#define SHM_STAGE_ROW ((size_t)4 * SHM_MAX_MSG)
#define SHM_STAGE_OFF SHM_TABLE_SIZE
#define SHM_FILE_SIZE (SHM_STAGE_OFF + SHM_ROWS * SHM_STAGE_ROW)
#define SHM_TABLE_MAGIC 0x31545344414d52ull /* "RMADST1" */
#define SHM_MAX_MSG (1024u << 10)  /* one chunk: ~70 us of copying */
#define SHM_COPY_PIECE (256u << 10) /* a direct copy's memcpy calls */
#define SHM_CREDITS 32u            /* chunks copied per pump before reporting */
#define SHM_DRAIN_MS 1000u         /* default bound on release's drain */
#define SHM_MAX_CONNS 1024u
#define SHM_ACCEPT_BATCH 32        /* accepts per wake-up of the listener */
#define SHM_MAPS 64u               /* memfd regions a peer keeps mapped */
#define SHM_PENDING 1024u          /* messages an owner queues for a full
				    * socket before it closes the connection */
#define SHM_HELLO_NS (10LL * 1000000000) /* a handshake not done by then fails */
#define SHM_SETUP_KIND 4           /* shm's use of the setup handshake */
/* How long a check that the owner lives stays good.  Pids come back only
 * after the kernel has cycled through pid_max of them (>= 32768), which
 * takes seconds of forking, not one millisecond. */
#define SHM_ALIVE_NS 1000000

/* One grant in the table.  key is 0 when the slot is free or revoked; the
 * owner writes the other fields before publishing key. */
struct shm_slot {
	_Atomic uint64_t key;
	uint64_t addr;   /* the window's address in the owner */
	uint64_t len;
	uint64_t region_addr; /* memfd regions: offset 0 of the file */
	uint32_t access;
	uint32_t region_id;   /* memfd regions: names the file; else 0 */
};

/* One request in a row's ring, four cache lines: its numbers, header and
 * first 16 bytes of data share the first, so an 8-byte op crosses between
 * the cores once each way (a line crossing costs about 0.45 us here).
 * The initiator writes the fields (a put's bytes inline or in the row's
 * stage), then seq; the owner, who reads it once and checks it all,
 * writes res (and a get's bytes), then ack. */
#define SHM_RING 15u               /* requests in flight per row */
#define SHM_INLINE 192u            /* bytes a request carries: larger ones
				    * go through the row's stage */
struct shm_req {
	_Atomic uint32_t seq; /* initiator: n + 1 for the row's request n */
	_Atomic uint32_t ack; /* owner: n + 1 once request n is answered */
	uint32_t kind;     /* RMA_OP_PUT or RMA_OP_GET */
	uint32_t len;      /* <= SHM_INLINE, or SHM_MAX_MSG staged */
	uint32_t slot;
	int32_t res;       /* the owner's answer: 0 or -errno */
	uint64_t key;
	uint64_t raddr;    /* the window's address space, as for a copy */
	uint32_t stage;    /* 0: the bytes are in data; else at stage - 1 in
			    * the row's stage */
	uint32_t pad0;
	uint8_t data[SHM_INLINE];
	uint8_t pad[16];
};
_Static_assert(sizeof(struct shm_req) == 256, "a request is four lines");

/* One initiator engine's row, a page of its own (it maps only that page
 * writable).  cur: the slot it is copying through, plus one, or 0.  The
 * ring: small ops on memory that is not a memfd, where a system call per
 * op (cross-memory attach) would cost more than the op; the owner copies
 * under its own lock, so its release is final for them without a drain.
 * A side about to sleep sets its idle word; the other, having published,
 * clears it and rings the control socket (ring.c). */
struct shm_row {
	_Atomic uint64_t cur;
	uint8_t pad0[56];
	_Atomic uint32_t owner_idle; /* owner: asleep, ring to wake it */
	uint8_t pad1[60];
	_Atomic uint32_t peer_idle;  /* initiator: asleep, ring to wake it */
	uint8_t pad2[124];
	struct shm_req req[SHM_RING];
};
_Static_assert(sizeof(struct shm_row) <= SHM_PAGE, "a row is one page");
_Static_assert(offsetof(struct shm_row, req) % 64 == 0, "requests start a line");

/* The checks every access passes, the owner's or the initiator's: the
 * slot's key (0 when free or revoked), its access, the window.  0 and
 * *off, or -errno. */
static inline int shm_window(const struct shm_slot *s, uint64_t key,
			     unsigned need, uint64_t raddr, uint64_t len,
			     uint64_t *off)
{
	if (!key || atomic_load(&s->key) != key)
		return -EKEYREJECTED;
	if ((s->access & need) != need)
		return -EACCES;
	*off = raddr - s->addr; /* wraps for addresses below the window */
	if (*off > s->len || len > s->len - *off)
		return -ERANGE;
	return 0;
}

/* A memfd region's file maps all of the region, for reading and writing
 * (a receiver of an O_RDONLY fd reopens it read-write through /proc): the
 * owner hands it only for a grant over all of it with both accesses.
 * Other grants' ops go through the ring, which the owner checks, or by
 * cross-memory attach. */
static inline bool shm_mappable(const struct shm_slot *s, uint64_t region_len)
{
	return s->addr == s->region_addr && s->len == region_len &&
	       (s->access & RMA_ACCESS_REMOTE_RW) == RMA_ACCESS_REMOTE_RW;
}

/* The little-endian field at off of a blob ad_parse validated. */
static inline uint64_t shm_raw_le(const uint8_t *raw, unsigned off, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = n; i--;)
		v = v << 8 | raw[off + i];
	return v;
}
#define SHM_RAW_SLOT 4          /* u32: the grant's slot */
#define SHM_RAW_REGION_LEN 72   /* u64: memfd regions' length */

/* What the advertisement blob holds (SHM_BLOB_LEN bytes, little-endian). */
struct shm_ident {
	uint8_t boot[16];   /* /proc/sys/kernel/random/boot_id */
	uint64_t ns_dev, ns_ino; /* pid namespace */
	uint32_t pid;
	uint64_t start;     /* the owner's start time, against pid reuse */
};
#define SHM_BLOB_LEN 80
#define SHM_BLOB_VERSION 1
#define SHM_BLOB_MEMFD 1u   /* flags: the window is in a memfd region */
#define SHM_NO_SLOT UINT32_MAX

struct shm_blob {
	uint8_t flags;
	uint32_t slot;
	uint32_t region_id; /* memfd regions: names the file to map */
	struct shm_ident id;
	uint64_t base;      /* the window's address in the owner */
	uint64_t region_addr, region_len;
};
void rma__shm_blob_encode(const struct shm_blob *b, uint8_t *out);
int rma__shm_blob_decode(const void *buf, size_t len, struct shm_blob *b);

/* Control messages (SOCK_SEQPACKET, one per packet, little-endian). */
enum {
	SHM_HELLO = 1,   /* I->O: a = initiator engine id, b = owner engine id */
	SHM_WELCOME,     /* O->I: status, a = owner engine id, b = row,
			  * c = features (SHM_FEAT_*); + table fd */
	SHM_MAP,         /* I->O: a = region id, b = a key of one of its grants */
	SHM_MAPPED,      /* O->I: status, a = region id, b = length; + memfd */
	SHM_UNMAP,       /* O->I: a = region id: released, drop the mapping */
	SHM_BELL,        /* either way: the ring has work for a side asleep */
};
#define SHM_MSG_LEN 32
/* The owner serves its rows' rings, each request numbered in its first
 * line.  Bit 0 said so of the first ring, whose counts sat apart from the
 * requests; an initiator built for that one, or an owner that serves no
 * ring (c 0), sees no bit it knows and copies instead. */
#define SHM_FEAT_RING 4u
#define SHM_FEAT_STAGE 2u /* the row has its stage, past the table */
struct shm_msg {
	uint32_t type;
	int32_t status;
	uint64_t a, b, c;
};
int rma__shm_send(int fd, const struct shm_msg *m, int pass_fd);
/* 1 and *m (and *fd_out, or -1) on a message, 0 if none ready, -errno. */
int rma__shm_recv(int fd, struct shm_msg *m, int *fd_out);
/* The owner's abstract socket name for engine id on pid. */
socklen_t rma__shm_sockname(uint32_t pid, uint64_t engine_id, void *sun);

/* A memfd region the owner shares. */
struct shm_reg {
	struct rma_region *r;
	uint32_t id;
	struct shm_reg *next;
};

struct shm_tr;

/* The owner's end of one initiator engine's control connection. */
struct shm_srv {
	struct rma__watch w;
	struct rma__admitted adm; /* among the handshakes until WELCOME */
	struct shm_tr *st;
	pid_t pid;
	int row;         /* -1 until HELLO */
	int64_t hs_deadline;
	struct rma__setup *setup; /* the secret handshake; NULL once done */
	/* What the socket had no room for, sent in order when it drains:
	 * UNMAP as is, MAP (the request) answered when it goes. */
	struct shm_msg *q;
	unsigned nq, capq;
	struct shm_srv *next;
};

/* A row in use: by a connection (s), or quarantined (s NULL) after its
 * connection was closed while it was still copying, until its process is
 * gone (else its late "done" would clear a new user's row). */
struct shm_rowst {
	bool used;
	struct shm_srv *s;
	int pidfd;       /* the initiator process: dead means its copies ended */
	pid_t pid;
	uint32_t cons;   /* ring requests answered */
	char *stage;     /* the row's stage, or NULL */
	uint32_t hold;   /* cut off inside a copy through slot hold - 1: that
			  * slot stays out of the free list while the row
			  * names it, else each grant reusing it would be
			  * drained against the row for the whole bound */
};

struct shm_map {
	uint32_t id;     /* region id, 0: empty */
	bool pending;    /* MAP sent, no answer yet */
	char *addr;
	uint64_t len;
	int err;         /* the owner refused */
};

struct shm_done {
	uint64_t op_id, len;
	int res;
};

struct shm_peer {
	struct rma__peer base;
	struct rma__watch w;
	struct shm_tr *st;
	pid_t pid;
	int pidfd;
	int64_t alive_at;         /* the owner was alive then (rma__now_ns) */
	uint64_t expect_id;
	int64_t hs_deadline;
	struct rma__setup *setup; /* the secret handshake; NULL once done */
	bool welcomed;
	bool ring;                /* the owner serves our row's ring */
	bool watched;             /* its socket was in the engine's epoll */
	bool gone;                /* disconnected: the core forgot it */
	bool released;            /* its watch is buried */
	const char *tab;          /* header and slots, read-only */
	struct shm_row *row;      /* our row, writable */
	char *stage;              /* our row's stage, or NULL */
	uint64_t shead, stail;    /* stage bytes taken and given back */
	unsigned ndone;
	struct shm_done done[SHM_CREDITS];
	/* The ring: requests written (rhead) and answers taken (rtail). */
	uint32_t rhead, rtail;
	struct shm_rop {
		uint64_t op_id;
		char *laddr;
		uint32_t len, kind;
		uint32_t stage;   /* as in the request */
		uint64_t send;    /* shead once its bytes were taken */
	} rops[SHM_RING];
	struct shm_map maps[SHM_MAPS];
	struct shm_peer *next;
};

struct shm_tr {
	struct rma__transport base;
	struct rma_engine *e;
	uint64_t engine_id;
	uint8_t key[16];          /* proof key from the shared secret */
	struct shm_ident id;
	uint64_t max_msg;
	unsigned drain_ms;
	bool stage_on;            /* rows get their stage (option stage) */
	int tfd;                  /* the grant table (memfd) */
	char *tab;
	uint32_t nfree, *free_slots;
	/* Revoked, not yet drained: a release clears every grant's key,
	 * then drains them together (revoke), drain_ms in all. */
	uint32_t npend, *pend;
	uint64_t pend_bits[SHM_SLOTS / 64];
	unsigned nheld;           /* rows holding a slot (shm_rowst.hold) */
	unsigned nquar;           /* rows quarantined (shm_rowst.s NULL) */
	struct rma__watch lw;     /* listener */
	bool listen_paused;       /* out of fds: listens again at the next check */
	struct rma__admit admit;  /* handshakes' caps, per process and in all */
	struct shm_srv *served;
	unsigned nserved;
	struct shm_rowst rows[SHM_ROWS];
	struct shm_reg *regs;
	uint32_t next_region_id;
	struct shm_peer *peers;
	unsigned nring;           /* peers with ring requests in flight */
	struct rma__watch rw;     /* the rings, polled (fd -1) */
	int64_t next_check;
	struct rma__refusals refusals; /* failed handshakes, logged as counts */
	struct rma__stage stage;  /* local device memory goes through it */
};

/* Rows are mapped one page each: they must start on a page. */
_Static_assert(SHM_ROW_OFF % SHM_PAGE == 0, "grant table rows must be page aligned");
/* A chunk is staged whole. */
_Static_assert(SHM_MAX_MSG <= RMA__STAGE_SIZE, "a chunk must fit the staging buffer");

/* A chunk's copy, in pieces of SHM_COPY_PIECE: glibc changes strategy
 * for a block of a megabyte or more (non-temporal stores past its
 * threshold on some hosts; past the L2's size on AMD, a vector loop in
 * place of "rep movsb", whose stores skip reading the lines they
 * overwrite).  Between two cores, where the lines sit in the other's
 * cache, whole 1 MiB chunks through a row's stage moved 7-9 GB/s where
 * 1 MiB less 64 bytes moved 20-23 (docs/design.md, shm's data path).
 * Pieces keep every size in the fast regime. */
static inline void shm_copy(void *dst, const void *src, size_t len)
{
	for (size_t off = 0; off < len; off += SHM_COPY_PIECE) {
		size_t n = len - off < SHM_COPY_PIECE ? len - off : SHM_COPY_PIECE;
		memcpy((char *)dst + off, (const char *)src + off, n);
	}
}

static inline struct shm_slot *shm_slot_at(const char *tab, uint32_t i)
{
	return (struct shm_slot *)(tab + SHM_SLOT_OFF) + i;
}
static inline struct shm_row *shm_row_at(char *tab, unsigned i)
{
	return (struct shm_row *)(tab + SHM_ROW_OFF + (size_t)i * SHM_PAGE);
}

/* ring.c */
bool rma__shm_ring_fits(const struct shm_peer *p, const struct rma__xfer *x);
int rma__shm_ring_post(struct shm_peer *p, const struct rma__xfer *x);
void rma__shm_ring_fail(struct shm_peer *p, int err);
bool rma__shm_ring_round(struct shm_tr *st);
int rma__shm_ring_arm(struct shm_tr *st);
void rma__shm_ring_reset(struct shm_row *row);
int rma__shm_stage_map(int fd, unsigned row, char **out);
void rma__shm_bell(int fd);

/* host.c */
int rma__shm_ident(struct shm_ident *id);
int rma__shm_start_time(pid_t pid, uint64_t *out);
int rma__shm_probe(const char **why);
int rma__shm_pidfd(int sock, pid_t pid);
bool rma__shm_pid_dead(int pidfd);

/* owner.c */
int rma__shm_owner_init(struct shm_tr *st, const struct rma__topts *o);
void rma__shm_owner_fini(struct shm_tr *st);
void rma__shm_drain(struct shm_tr *st);
void rma__shm_slot_put(struct shm_tr *st, uint32_t slot);
void rma__shm_rows_reap(struct shm_tr *st);
void rma__shm_unmap_notify(struct shm_tr *st, uint32_t region_id);
void rma__shm_owner_expire(struct shm_tr *st, int64_t now);
void rma__shm_srv_close(struct shm_srv *s, bool bye);

/* peer.c */
int rma__shm_connect(struct rma__transport *t, const void *blob, size_t len,
		     uint64_t engine_id, struct rma__peer **out);
void rma__shm_disconnect(struct rma__peer *p, int err);
int rma__shm_post(struct rma__peer *p, const struct rma__xfer *x);
int rma__shm_post_now(struct rma__peer *p, const struct rma__xfer *x);
void rma__shm_flush(struct rma__peer *p);
void rma__shm_peers_expire(struct shm_tr *st, int64_t now);

#endif
