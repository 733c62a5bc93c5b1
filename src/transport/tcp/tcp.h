/*
 * tcp.h - the tcp transport's own objects, shared by its files:
 *   tcp.c        the ops table: listener, peers, posting, revoke
 *   conn.c       a connection's data path: rings, reading, writing, serving
 *   handshake.c  the connection setup (transport/setup.h) on each connection
 *   limits.c     what the target allows: handshake and connection caps,
 *                per-address caps (transport/admit.c, shared with ofi),
 *                timers, idle connections, large buffers
 *   addr.c       addresses and socket options
 *   wire.c       the message codec (wire.h)
 * Nothing here leaves the transport; the core sees only rma__tcp_ops.
 */
#ifndef RMA_TCP_H
#define RMA_TCP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/admit.h"
#include "transport/setup.h"
#include "transport/tcp/wire.h"
#include "transport/transport.h"
#include "util/util.h"

#define RXBUF 4096                 /* header staging */
#define SERVER_RING 128            /* replies queued per connection */
#define HANDSHAKE_NS (10LL * 1000000000) /* initiator side */
#define DEFAULT_MAX_MSG (1u << 20)
#define RX_BUDGET (16u << 20)      /* bytes per wake-up, for fairness */
/* Socket buffer each way for authenticated connections (option sockbuf).
 * Small enough that the bytes in flight stay in the cache between the
 * copy in and the copy out: 16 MiB gets on loopback ran 1.3x faster
 * with 1 MiB than with 8 MiB (design.md section 10). */
#define SOCKBUF (1 << 20)
#define SOCKBUF_MIN (64 << 10)
#define SOCKBUF_MAX (64 << 20)
#define SOCKBUF_TOTAL (256ull << 20) /* bound on all large buffers, both ways */
/* A peer host that vanishes is noticed by the kernel: unacknowledged data
 * for USER_TIMEOUT, or an idle connection failing keepalive probes. */
#define USER_TIMEOUT_MS 30000
#define KEEPIDLE_S 10
#define KEEPINTVL_S 5
#define KEEPCNT 3
#define IOV_BATCH 64
#define DIRECT_PAYLOAD_MAX (64u << 10) /* direct tries: not with more to come */
#define READ_AHEAD_MAX (64u << 10) /* payloads read with the next messages */
#define RX_LOWAT (128u << 10)      /* deep in a lone payload: bytes per wake-up */
#define STRIPE_SMALL 16384u      /* chunks up to this size fill one connection */
#define STRIPE_FILL (64u << 10) /* up to this many unsent bytes */
/* A connection quiet this long is asked whether the target has closed it
 * before it takes a request (tcp.c, ended). */
#define QUIET_PEEK_NS (1000LL * 1000)
/* At most one stripe dialled again per peer this often (tcp.c, refill). */
#define REFILL_NS (1000LL * 1000 * 1000)
#define ACCEPT_BATCH 32            /* connections accepted per wake-up */
#define TICK_NS (100 * 1000000LL)  /* resolution of the tcp timers */
#define HS_RETRIES 8               /* handshakes reset by a flooded target */

enum hs_state {
	HS_CONNECTING, /* client: connect() in progress */
	HS_SETUP,      /* in the connection setup (c->setup) */
	HS_READY,
	HS_DEAD,
};

struct txe {
	uint8_t hdr[RMA_TCP_HDR_SIZE];
	uint8_t kind;         /* message type */
	bool skipped;         /* op died before it was written: never sent */
	char *pay;            /* payload source (PUT data / GET reply data) */
	uint64_t pay_len;
	uint64_t op_id;       /* initiator: the op */
	uint64_t raddr, len;  /* initiator: to check the reply */
	void *region;         /* target: the memory a GET reply reads */
	/* The op's local region (initiator) or the GET reply's (target)
	 * when it is device memory: payloads go through tt->stage. */
	struct rma_region *dev;
	uint64_t seq;         /* names the entry to the staged-piece cache */
};

struct tcp_tr;
struct tcp_peer;

struct conn {
	struct rma__watch w;
	struct tcp_tr *tt;
	struct tcp_peer *peer; /* NULL on the target side */
	struct conn *next;
	int hs;
	int64_t hs_deadline;
	struct rma__setup *setup; /* while in HS_SETUP */
	uint32_t events;
	struct rma__admitted adm; /* target: its address, its place in the
				   * limits (admit.h) */
	int64_t last_active;   /* last byte in or out, ns */
	bool bigbuf;           /* holds sockbuf buffers */
	int lowat;             /* SO_RCVLOWAT as last set (1: the kernel's) */

	/* rx */
	uint8_t rx[RXBUF];
	size_t rx_off, rx_len;
	bool in_payload;
	struct rma_tcp_hdr cur;
	uint64_t pay_done;
	char *pay_dst;         /* target PUT: memory; NULL = discard */
	void *pay_region;
	int pay_status;        /* target: the PUT's ack; initiator: the GET's
				* result (a failed device copy) */
	struct rma_region *pay_dev; /* payload lands in device memory */
	bool paused;           /* target: reply ring full */
	bool stream;           /* the last payload's end found the next
				* message already come */

	/* tx ring */
	struct txe *ring;
	unsigned cap, head, count, sent; /* sent: entries fully written, from head */
	size_t cur_off;        /* bytes of entry head+sent already written */
	uint64_t queued;       /* bytes waiting, to balance stripes */
	uint64_t awaited;      /* initiator: GET reply bytes still to come */
};

/* Whether spinning rounds may read c directly (progress.c): not deep in
 * a large payload, nor while more than DIRECT_PAYLOAD_MAX of replies is
 * on its way (a large get's).  There a direct try mostly finds a few bytes
 * or none, and each recv takes the socket lock that the sender's side
 * needs to queue more: epoll, with SO_RCVLOWAT, says when data has come.
 * (1 MiB gets one at a time, polled, ran 15% slower read directly.) */
static inline void rma__tcp_conn_direct(struct conn *c)
{
	c->w.direct = !(c->in_payload && c->cur.len - c->pay_done > DIRECT_PAYLOAD_MAX) &&
		      c->awaited <= DIRECT_PAYLOAD_MAX;
}

struct tcp_peer {
	struct rma__peer base;
	struct tcp_tr *tt;
	struct tcp_peer *next;   /* the transport's peers */
	struct conn *conns;
	unsigned nlive;
	unsigned retries;        /* handshakes reset by the target in a row */
	int64_t refill_at;       /* no stripe dialled again before this */
	uint64_t expect_id;
	struct sockaddr_storage sa;
	socklen_t salen;
};

struct tcp_tr {
	struct rma__transport base;
	struct rma_engine *e;
	struct rma__watch lw;
	uint8_t blob[19];
	size_t blob_len;
	uint64_t max_msg;
	uint64_t engine_id;
	unsigned depth, stripes;
	int sockbuf;             /* each way; 0: the kernel's autotuning */
	uint8_t key[16];         /* from the shared secret */
	struct conn *served;     /* accepted connections */
	struct tcp_peer *peers;  /* connections we started, by peer */
	unsigned nserved;        /* all accepted */
	struct rma__admit admit; /* what the target allows (limits.c) */
	struct rma__refusals refusals;
	uint64_t bigbuf_total;   /* large buffer bytes granted, both ways */
	struct rma__timer tick;  /* limits.c: handshake and idle timers */
	bool listen_paused;      /* out of fds: it tries once a tick until an accept works */
	uint8_t discard[64 << 10];
	/* Device memory goes through one pinned buffer, synchronously.
	 * Sending, it holds a piece of entry stage_seq's payload on
	 * connection stage_c (NULL: nothing), reused while that entry is
	 * written in turns; receiving overwrites it. */
	struct rma__stage stage;
	struct conn *stage_c;
	uint64_t stage_seq, stage_off, stage_len, seq;
};

/* addr.c */
int rma__tcp_parse_hostport(const char *s, struct sockaddr_storage *sa,
			    socklen_t *len);
/* What peers should connect to, for a socket bound to `bound`: `advertise`
 * (a host, the bound port) if given; for a wildcard bind, the best address
 * of an up, non-loopback interface, the default route's first (logged);
 * else the bound address itself. */
int rma__tcp_advertised(const struct sockaddr_storage *bound,
			const char *advertise, struct sockaddr_storage *out);
size_t rma__tcp_blob_from_sa(const struct sockaddr_storage *sa, uint8_t *b);
/* A non-blocking socket listening on `at` (HOST:PORT), and in blob the
 * address peers should connect to (rma__tcp_advertised; 19 bytes at most).
 * Returns the fd, or -errno (logged as `who`'s). */
int rma__tcp_listen(const char *who, const char *at, const char *advertise,
		    int backlog, uint8_t *blob, size_t *blob_len);
int rma__tcp_sa_from_blob(const uint8_t *b, size_t n,
			  struct sockaddr_storage *sa, socklen_t *len);
void rma__tcp_tune_socket(int fd);
/* The same for a socket accepted from a listener of rma__tcp_listen. */
void rma__tcp_tune_accepted(int fd);
/* A non-blocking, tuned socket connecting to sa (writable once connected).
 * Returns the fd, or -errno. */
int rma__tcp_dial(const struct sockaddr_storage *sa, socklen_t len);

/* handshake.c */
int rma__tcp_hs_begin(struct conn *c);
void rma__tcp_hs_run(struct conn *c);
void rma__tcp_connected(struct conn *c);

/* limits.c */
/* The limits (admit.h): defaults, or the instance's options (tcp_options
 * in tcp.c); -EINVAL. */
int rma__tcp_limits_init(struct tcp_tr *tt, const struct rma__topts *o);
/* c proved the secret: apply the connection caps (evicting the idlest or
 * refusing c), give a target's connection its ring, and grant large
 * buffers within their bound. */
void rma__tcp_authenticated(struct conn *c);
/* Timers (handshakes too slow, idle connections, the refusal log) tick
 * every TICK_NS while there is a connection or a refusal to report. */
void rma__tcp_timer_start(struct tcp_tr *tt);

/* tcp.c */
int rma__tcp_conn_start(struct tcp_peer *p);

/* conn.c */
/* A connection with room for cap messages; the ring itself comes from
 * rma__tcp_conn_ring: at once for an initiator's, on authentication for a
 * target's, so that a flood of handshakes costs neither memory nor time
 * for rings it never uses. */
struct conn *rma__tcp_conn_new(struct tcp_tr *tt, int fd, unsigned cap);
int rma__tcp_conn_ring(struct conn *c); /* 0 or -ENOMEM */
void rma__tcp_conn_release(struct rma__watch *w);
void rma__tcp_conn_kill(struct conn *c, int err);
void rma__tcp_conn_flush(struct conn *c);
void rma__tcp_conn_rx(struct conn *c);
void rma__tcp_set_events(struct conn *c, uint32_t ev);
struct txe *rma__tcp_ring_at(struct conn *c, unsigned i);

#endif
