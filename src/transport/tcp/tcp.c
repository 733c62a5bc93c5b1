/*
 * tcp.c - rma's own protocol over TCP.
 *
 * The target side is served here, by the engine's progress: PUT payloads are
 * received straight into the registered memory and acknowledged once there
 * (delivery complete); GET replies are written straight from it.  On the
 * initiator, GET payloads land straight in the op's buffer.  Only bytes that
 * arrive in the same read as a header (at most RXBUF) are copied.
 *
 * Each connection keeps one ring of messages.  Initiator side: entries
 * [head, sent) are on the wire awaiting their reply, which comes back in
 * order; [sent, head+count) wait to be written.  Target side: replies
 * waiting to be written; when the ring is full the connection stops reading
 * (backpressure).  A peer that lies, sends garbage or vanishes loses its
 * connection and its own ops, nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/tcp/wire.h"
#include "transport/transport.h"
#include "util/util.h"

#define RXBUF 4096                 /* header staging */
#define SERVER_RING 128            /* replies queued per connection */
#define MAX_SERVER_CONNS 4096
#define HANDSHAKE_NS (10LL * 1000000000)
#define DEFAULT_MAX_MSG (1u << 20)
#define RX_BUDGET (16u << 20)      /* bytes per wake-up, for fairness */
#define SOCKBUF (8 << 20)
/* A peer host that vanishes is noticed by the kernel: unacknowledged data
 * for USER_TIMEOUT, or an idle connection failing keepalive probes. */
#define USER_TIMEOUT_MS 30000
#define KEEPIDLE_S 10
#define KEEPINTVL_S 5
#define KEEPCNT 3
#define IOV_BATCH 64

enum hs_state {
	HS_CONNECTING, /* client: connect() in progress */
	HS_WAIT2,      /* client: sent 1, waiting for 2 */
	HS_WAIT4,      /* client: sent 3, waiting for 4 */
	HS_WAIT1,      /* server: waiting for 1 */
	HS_WAIT3,      /* server: sent 2, waiting for 3 */
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
	uint8_t hs_buf[RMA_TCP_HELLO_SIZE];
	size_t hs_have;
	uint64_t nonce;
	uint32_t events;

	/* rx */
	uint8_t rx[RXBUF];
	size_t rx_off, rx_len;
	bool in_payload;
	struct rma_tcp_hdr cur;
	uint64_t pay_done;
	char *pay_dst;         /* target PUT: memory; NULL = discard */
	void *pay_region;
	int pay_status;
	bool paused;           /* target: reply ring full */

	/* tx ring */
	struct txe *ring;
	unsigned cap, head, count, sent; /* sent: entries fully written, from head */
	size_t cur_off;        /* bytes of entry head+sent already written */
	uint64_t queued;       /* bytes waiting, to balance stripes */
};

struct tcp_peer {
	struct rma__peer base;
	struct tcp_tr *tt;
	struct tcp_peer *next;   /* the transport's peers */
	struct conn *conns;
	unsigned nlive;
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
	uint8_t key[16];         /* from the shared secret */
	struct conn *served;     /* accepted connections */
	struct tcp_peer *peers;  /* connections we started, by peer */
	unsigned nserved;
	int64_t next_timer;
	uint8_t discard[64 << 10];
};

static void conn_kill(struct conn *c, int err);
static void conn_flush(struct conn *c);
static void conn_rx(struct conn *c);

/* ---- addresses ---- */

static int parse_hostport(const char *s, struct sockaddr_storage *sa,
			  socklen_t *len)
{
	char host[256], *port;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai;

	if (strlen(s) >= sizeof host)
		return -EINVAL;
	strcpy(host, s);
	port = strrchr(host, ':');
	if (!port)
		return -EINVAL;
	*port++ = '\0';
	char *h = host;
	if (h[0] == '[') { /* [v6]:port */
		size_t n = strlen(h);
		if (n < 2 || h[n - 1] != ']')
			return -EINVAL;
		h[n - 1] = '\0';
		h++;
	}
	if (!strcmp(h, "*") || !*h)
		h = NULL;
	if (getaddrinfo(h, port, &hints, &ai))
		return -EINVAL;
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* An address peers can reach when we listen on the wildcard. */
static void pick_reachable(struct sockaddr_storage *sa)
{
	struct ifaddrs *ifa, *i;
	if (sa->ss_family != AF_INET ||
	    ((struct sockaddr_in *)sa)->sin_addr.s_addr != htonl(INADDR_ANY))
		return;
	((struct sockaddr_in *)sa)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr !=
			    htonl(INADDR_LOOPBACK)) {
			((struct sockaddr_in *)sa)->sin_addr =
				((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			break;
		}
	freeifaddrs(ifa);
}

/* blob: u8 family (4|6) | u16 port | 4 or 16 address bytes */
static size_t blob_from_sa(const struct sockaddr_storage *sa, uint8_t *b)
{
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		b[0] = 4;
		rma__put_le16(b + 1, ntohs(in->sin_port));
		memcpy(b + 3, &in->sin_addr, 4);
		return 7;
	}
	const struct sockaddr_in6 *in6 = (const void *)sa;
	b[0] = 6;
	rma__put_le16(b + 1, ntohs(in6->sin6_port));
	memcpy(b + 3, &in6->sin6_addr, 16);
	return 19;
}

static int sa_from_blob(const uint8_t *b, size_t n, struct sockaddr_storage *sa,
			socklen_t *len)
{
	memset(sa, 0, sizeof *sa);
	if (n == 7 && b[0] == 4 && rma__le16(b + 1)) {
		struct sockaddr_in *in = (void *)sa;
		in->sin_family = AF_INET;
		in->sin_port = htons(rma__le16(b + 1));
		memcpy(&in->sin_addr, b + 3, 4);
		*len = sizeof *in;
		return 0;
	}
	if (n == 19 && b[0] == 6 && rma__le16(b + 1)) {
		struct sockaddr_in6 *in6 = (void *)sa;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(rma__le16(b + 1));
		memcpy(&in6->sin6_addr, b + 3, 16);
		*len = sizeof *in6;
		return 0;
	}
	return -EBADMSG;
}

static void tune_socket(int fd)
{
	int one = 1, sz = SOCKBUF, ut = USER_TIMEOUT_MS;
	int idle = KEEPIDLE_S, intvl = KEEPINTVL_S, cnt = KEEPCNT;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof ut);
	/* Privileged callers can go past rmem_max/wmem_max; others keep
	 * the kernel's autotuning, which a plain SO_RCVBUF would switch off. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
}

/* ---- handshake ---- */

static void proof(const struct tcp_tr *tt, char side, uint64_t nonce,
		  uint8_t out[16])
{
	uint8_t msg[9];
	msg[0] = (uint8_t)side;
	rma__put_le64(msg + 1, nonce);
	uint64_t a = rma__siphash(tt->key, msg, sizeof msg);
	msg[0] ^= 0x80;
	uint64_t b = rma__siphash(tt->key, msg, sizeof msg);
	rma__put_le64(out, a);
	rma__put_le64(out + 8, b);
}

static int ct_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

static int hs_send(struct conn *c, const struct rma_tcp_hello *h)
{
	uint8_t b[RMA_TCP_HELLO_SIZE];
	rma__tcp_hello_encode(h, b);
	/* 64 bytes into an idle socket's empty buffer: all or an error. */
	ssize_t n = send(c->w.fd, b, sizeof b, MSG_NOSIGNAL);
	return n == (ssize_t)sizeof b ? 0 : n < 0 ? -errno : -EPROTO;
}

static void set_events(struct conn *c, uint32_t ev)
{
	if (c->events == ev || c->hs == HS_DEAD)
		return;
	c->events = ev;
	rma__watch_mod(c->tt->e, &c->w, ev);
}

/* A message of the handshake is complete in c->hs_buf. */
static void hs_step(struct conn *c)
{
	struct tcp_tr *tt = c->tt;
	struct rma_tcp_hello in, out = {0};
	uint8_t want[16];
	int rc;

	c->hs_have = 0;
	if (rma__tcp_hello_decode(c->hs_buf, sizeof c->hs_buf, &in)) {
		conn_kill(c, -EPROTO);
		return;
	}
	switch (c->hs) {
	case HS_WAIT1: /* server */
		if (in.step != 1)
			break;
		out.step = 2;
		out.engine_id = tt->engine_id;
		out.max_msg = tt->max_msg;
		out.nonce = c->nonce;
		proof(tt, 'S', in.nonce, out.proof);
		if (hs_send(c, &out))
			break;
		c->hs = HS_WAIT3;
		return;
	case HS_WAIT3: /* server */
		if (in.step != 3)
			break;
		proof(tt, 'C', c->nonce, want);
		out.step = 4;
		out.status = ct_equal(want, in.proof, 16) ? 0 : -EACCES;
		out.engine_id = tt->engine_id;
		rc = hs_send(c, &out);
		if (rc || out.status) {
			if (out.status)
				rma__warn("tcp: refused a connection: wrong shared secret");
			break;
		}
		c->hs = HS_READY;
		return;
	case HS_WAIT2: /* client */
		if (in.step != 2)
			break;
		if (in.engine_id != c->peer->expect_id) {
			conn_kill(c, -ESTALE);
			return;
		}
		proof(tt, 'S', c->nonce, want);
		if (!ct_equal(want, in.proof, 16)) {
			conn_kill(c, -EACCES);
			return;
		}
		if (in.max_msg < 4096) {
			break;
		}
		if (in.max_msg < c->peer->base.max_msg || !c->peer->base.max_msg)
			c->peer->base.max_msg = RMA_MIN(in.max_msg, tt->max_msg);
		out.step = 3;
		proof(tt, 'C', in.nonce, out.proof);
		if (hs_send(c, &out))
			break;
		c->hs = HS_WAIT4;
		return;
	case HS_WAIT4: /* client */
		if (in.step != 4)
			break;
		if (in.status) {
			conn_kill(c, in.status);
			return;
		}
		c->hs = HS_READY;
		c->peer->nlive++;
		if (c->peer->base.state != RMA__PEER_READY)
			rma__peer_ready(&c->peer->base);
		if (c->count)
			conn_flush(c);
		return;
	}
	conn_kill(c, -EPROTO);
}

static void hs_rx(struct conn *c)
{
	while (c->hs != HS_READY && c->hs != HS_DEAD) {
		ssize_t n = recv(c->w.fd, c->hs_buf + c->hs_have,
				 sizeof c->hs_buf - c->hs_have, 0);
		if (n == 0) {
			conn_kill(c, c->hs == HS_WAIT4 || c->hs == HS_WAIT2
					     ? -ECONNRESET : -EPROTO);
			return;
		}
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				conn_kill(c, -errno);
			return;
		}
		c->hs_have += (size_t)n;
		if (c->hs_have == sizeof c->hs_buf)
			hs_step(c);
	}
}

/* ---- connections ---- */

static void conn_release(struct rma__watch *w)
{
	struct conn *c = container_of(w, struct conn, w);
	free(c->ring);
	free(c);
}

static void conn_cb(struct rma__watch *w, uint32_t ev);

static struct conn *conn_new(struct tcp_tr *tt, int fd, unsigned cap)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->ring = calloc(cap, sizeof *c->ring);
	if (!c->ring) {
		free(c);
		return NULL;
	}
	c->cap = cap;
	c->tt = tt;
	c->w.fd = fd;
	c->w.cb = conn_cb;
	c->w.release = conn_release;
	c->nonce = rma__random_u64();
	c->hs_deadline = rma__now_ns() + HANDSHAKE_NS;
	return c;
}

static struct txe *ring_at(struct conn *c, unsigned i)
{
	return &c->ring[(c->head + i) % c->cap];
}

static void ring_pop(struct conn *c)
{
	c->head = (c->head + 1) % c->cap;
	c->count--;
	c->sent--;
}

static void conn_kill(struct conn *c, int err)
{
	struct tcp_tr *tt = c->tt;
	struct rma_engine *e = tt->e;

	if (c->hs == HS_DEAD)
		return;
	bool was_ready = c->hs == HS_READY;
	c->hs = HS_DEAD;
	rma__watch_retire(e, &c->w);
	close(c->w.fd);
	if (!c->peer) {
		struct conn **pp = &tt->served;
		while (*pp != c)
			pp = &(*pp)->next;
		*pp = c->next;
		tt->nserved--;
		return;
	}
	struct tcp_peer *p = c->peer;
	struct conn **pp = &p->conns;
	while (*pp != c)
		pp = &(*pp)->next;
	*pp = c->next;
	if (was_ready)
		p->nlive--;
	/* Every chunk this connection held fails with the reason. */
	for (unsigned i = 0; i < c->count; i++) {
		struct txe *x = ring_at(c, i);
		if (!x->skipped)
			rma__xfer_done(e, x->op_id, 0, err);
	}
	c->count = 0;
	if (!p->conns && p->base.state != RMA__PEER_FAILED) {
		if (err != -ECANCELED)
			rma__info("tcp: peer lost: %s", rma_strerror(err));
		rma__peer_failed(&p->base, err);
	} else if (p->nlive == 0 && p->base.state == RMA__PEER_READY) {
		/* survivors are still handshaking: wait for them */
		p->base.state = RMA__PEER_CONNECTING;
	}
}

/* Write what the ring holds: headers and payloads, many per writev. */
static void conn_flush(struct conn *c)
{
	struct rma_engine *e = c->tt->e;

	while (c->hs == HS_READY && c->sent < c->count) {
		struct iovec iov[IOV_BATCH];
		int niov = 0;
		size_t off = c->cur_off;

		for (unsigned i = c->sent; i < c->count && niov + 2 <= IOV_BATCH; i++) {
			struct txe *x = ring_at(c, i);
			if (c->peer && !rma__op_live(e, x->op_id)) {
				if (i == c->sent && off > 0) {
					/* Half-written PUT whose buffer may be gone. */
					if (x->pay_len) {
						conn_kill(c, -ECONNRESET);
						return;
					}
				} else if (i == c->sent) {
					/* Not a byte written yet: drop it. */
					x->skipped = true;
					rma__xfer_done(e, x->op_id, 0, -ECANCELED);
					c->queued -= RMA_MIN(c->queued, RMA_TCP_HDR_SIZE + x->pay_len);
					c->sent++;
					continue;
				} else {
					break; /* handle it when it reaches the front */
				}
			}
			if (off < RMA_TCP_HDR_SIZE) {
				iov[niov].iov_base = x->hdr + off;
				iov[niov++].iov_len = RMA_TCP_HDR_SIZE - off;
				off = 0;
			} else {
				off -= RMA_TCP_HDR_SIZE;
			}
			if (x->pay_len > off) {
				iov[niov].iov_base = x->pay + off;
				iov[niov++].iov_len = x->pay_len - off;
			}
			off = 0;
		}
		if (!niov)
			break;
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
		ssize_t n = sendmsg(c->w.fd, &mh, MSG_NOSIGNAL); /* no SIGPIPE */
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_kill(c, errno == EPIPE ? -ECONNRESET : -errno);
			return;
		}
		/* Advance over what went out. */
		size_t left = (size_t)n;
		while (left && c->sent < c->count) {
			struct txe *x = ring_at(c, c->sent);
			size_t total = RMA_TCP_HDR_SIZE + x->pay_len - c->cur_off;
			if (left < total) {
				c->cur_off += left;
				c->queued -= RMA_MIN(c->queued, left);
				left = 0;
				break;
			}
			left -= total;
			c->queued -= RMA_MIN(c->queued, total);
			c->cur_off = 0;
			c->sent++;
			if (!c->peer) /* target: a written reply is done */
				ring_pop(c);
		}
	}
	if (c->hs == HS_DEAD)
		return;
	/* Initiator: pop skipped entries at the head (no reply will come). */
	while (c->peer && c->count && c->sent && ring_at(c, 0)->skipped)
		ring_pop(c);
	/* A paused target connection reads again once its replies drain. */
	uint32_t want = c->paused ? 0 : EPOLLIN;
	if (c->sent < c->count)
		want |= EPOLLOUT;
	set_events(c, want);
}

/* ---- target side ---- */

static void reply(struct conn *c, uint8_t type, const struct rma_tcp_hdr *req,
		  int status, char *pay, void *region)
{
	struct txe *x = ring_at(c, c->count);
	struct rma_tcp_hdr h = {
		.type = type,
		.status = status,
		.id = req->id,
		.key = req->key,
		.addr = req->addr,
		.len = status && type == RMA_TCP_GET_RESP ? 0 : req->len,
	};
	rma__tcp_hdr_encode(&h, x->hdr);
	x->kind = type;
	x->skipped = false;
	x->pay = pay;
	x->pay_len = type == RMA_TCP_GET_RESP && !status ? req->len : 0;
	x->op_id = 0;
	x->region = region;
	c->count++;
	c->queued += RMA_TCP_HDR_SIZE + x->pay_len;
}

/* A request header arrived on a target connection. */
static void serve(struct conn *c, const struct rma_tcp_hdr *h)
{
	struct rma_engine *e = c->tt->e;
	struct rma_region *region = NULL;
	char *addr = NULL;

	if (h->type == RMA_TCP_GET) {
		int rc = rma__target_lookup(e, h->key, h->addr, h->len,
					    RMA_ACCESS_REMOTE_READ, &addr, &region);
		reply(c, RMA_TCP_GET_RESP, h, rc, rc ? NULL : addr, region);
		return;
	}
	/* PUT: the payload goes straight into the region, or is discarded. */
	c->pay_status = rma__target_lookup(e, h->key, h->addr, h->len,
					   RMA_ACCESS_REMOTE_WRITE, &addr, &region);
	c->pay_dst = c->pay_status ? NULL : addr;
	c->pay_region = region;
	c->cur = *h;
	c->pay_done = 0;
	c->in_payload = true;
}

/* ---- initiator side ---- */

/* A reply header arrived; it must answer the oldest request on the wire. */
static int answer(struct conn *c, const struct rma_tcp_hdr *h)
{
	struct rma_engine *e = c->tt->e;
	struct txe *x;

	while (c->sent && ring_at(c, 0)->skipped)
		ring_pop(c);
	if (!c->sent)
		return -EPROTO;
	x = ring_at(c, 0);
	if (h->id != x->op_id || h->addr != x->raddr ||
	    (h->type == RMA_TCP_PUT_ACK) != (x->kind == RMA_TCP_PUT) ||
	    (!h->status && h->len != x->len))
		return -EPROTO;
	if (h->type == RMA_TCP_GET_RESP && !h->status) {
		c->cur = *h;
		c->pay_done = 0;
		c->in_payload = true;
		return 0;
	}
	ring_pop(c);
	rma__xfer_done(e, h->id, h->status ? 0 : h->len, h->status);
	return 0;
}

/* Where the next payload bytes go; NULL = discard. */
static char *payload_dst(struct conn *c)
{
	if (!c->peer)
		return c->pay_dst ? c->pay_dst + c->pay_done : NULL;
	return rma__op_buf(c->tt->e, c->cur.id, c->cur.addr + c->pay_done,
			   c->cur.len - c->pay_done);
}

static void payload_end(struct conn *c)
{
	c->in_payload = false;
	if (!c->peer) {
		reply(c, RMA_TCP_PUT_ACK, &c->cur, c->pay_status, NULL, NULL);
		return;
	}
	ring_pop(c);
	rma__xfer_done(c->tt->e, c->cur.id, c->cur.len, 0);
}

static void payload_take(struct conn *c, const uint8_t *src, size_t n)
{
	char *dst = payload_dst(c);
	if (dst)
		memcpy(dst, src, n);
	c->pay_done += n;
	if (c->pay_done == c->cur.len)
		payload_end(c);
}

/* Parse what the staging buffer holds.  Returns 0, or -errno to kill. */
static int rx_parse(struct conn *c)
{
	uint64_t max = c->peer ? c->peer->base.max_msg : c->tt->max_msg;

	while (c->rx_off < c->rx_len) {
		size_t avail = c->rx_len - c->rx_off;
		if (c->in_payload) {
			size_t n = RMA_MIN(avail, c->cur.len - c->pay_done);
			payload_take(c, c->rx + c->rx_off, n);
			c->rx_off += n;
			continue;
		}
		if (avail < RMA_TCP_HDR_SIZE)
			break;
		if (!c->peer && c->count == c->cap) {
			c->paused = true; /* no room for the reply: wait */
			break;
		}
		struct rma_tcp_hdr h;
		if (rma__tcp_hdr_decode(c->rx + c->rx_off, avail, max, &h))
			return -EPROTO;
		c->rx_off += RMA_TCP_HDR_SIZE;
		bool request = h.type == RMA_TCP_PUT || h.type == RMA_TCP_GET;
		if (request != !c->peer)
			return -EPROTO;
		if (request)
			serve(c, &h);
		else if (answer(c, &h))
			return -EPROTO;
		if (c->in_payload && c->cur.len == 0)
			payload_end(c);
	}
	if (c->rx_off == c->rx_len)
		c->rx_off = c->rx_len = 0;
	return 0;
}

static void conn_rx(struct conn *c)
{
	size_t budget = RX_BUDGET;
	int rc;

	while (c->hs == HS_READY) {
		if ((rc = rx_parse(c))) {
			rma__warn("tcp: %s peer sent invalid data; dropping it",
				  c->peer ? "target" : "initiator");
			conn_kill(c, rc);
			return;
		}
		if (c->paused) {
			/* Reply ring full: write replies out, then go on. */
			conn_flush(c);
			if (c->hs != HS_READY || c->count == c->cap)
				break;
			c->paused = false;
			continue;
		}
		/* Out of budget only now: staged bytes are always parsed
		 * first, since no event may come for them. */
		if (!budget)
			break;
		ssize_t n;
		if (c->in_payload) {
			/* Large payloads: straight into place. */
			size_t want = RMA_MIN(c->cur.len - c->pay_done, budget);
			char *dst = payload_dst(c);
			if (!dst) {
				dst = (char *)c->tt->discard;
				want = RMA_MIN(want, sizeof c->tt->discard);
			}
			n = recv(c->w.fd, dst, want, 0);
			if (n > 0) {
				c->pay_done += (size_t)n;
				if (c->pay_done == c->cur.len)
					payload_end(c);
			}
		} else {
			/* Move a partial header to the front, then top up. */
			if (c->rx_off) {
				memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
				c->rx_len -= c->rx_off;
				c->rx_off = 0;
			}
			n = recv(c->w.fd, c->rx + c->rx_len, sizeof c->rx - c->rx_len, 0);
			if (n > 0)
				c->rx_len += (size_t)n;
		}
		if (n == 0) {
			conn_kill(c, -ECONNRESET);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_kill(c, errno == EPIPE ? -ECONNRESET : -errno);
			return;
		}
		budget -= RMA_MIN(budget, (size_t)n);
	}
	/* Target: replies out now, in one write; this also re-arms EPOLLIN
	 * on a connection that was paused. */
	if (c->hs == HS_READY && !c->peer)
		conn_flush(c);
}

static void conn_connected(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;
	struct rma_tcp_hello h = {.step = 1, .engine_id = c->tt->engine_id,
				  .nonce = c->nonce};

	if (getsockopt(c->w.fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		conn_kill(c, -(err ? err : ECONNREFUSED));
		return;
	}
	if ((err = hs_send(c, &h))) {
		conn_kill(c, err);
		return;
	}
	c->hs = HS_WAIT2;
	set_events(c, EPOLLIN);
}

static void conn_cb(struct rma__watch *w, uint32_t ev)
{
	struct conn *c = container_of(w, struct conn, w);

	if (c->hs == HS_CONNECTING) {
		if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			conn_connected(c);
		return;
	}
	if (c->hs != HS_READY) {
		hs_rx(c);
		return;
	}
	if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
		conn_rx(c);
	if (c->hs == HS_READY && (ev & EPOLLOUT)) {
		conn_flush(c);
		if (c->paused && c->hs == HS_READY && c->count < c->cap) {
			c->paused = false;
			conn_rx(c); /* requests already buffered */
		}
	}
}

/* ---- listener ---- */

static void accept_cb(struct rma__watch *w, uint32_t ev)
{
	struct tcp_tr *tt = container_of(w, struct tcp_tr, lw);

	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				rma__warn("tcp: accept: %s", strerror(errno));
			return;
		}
		struct conn *c = tt->nserved < MAX_SERVER_CONNS
					 ? conn_new(tt, fd, SERVER_RING) : NULL;
		if (!c) {
			close(fd);
			continue;
		}
		tune_socket(fd);
		c->hs = HS_WAIT1;
		c->events = EPOLLIN;
		if (rma__watch_add(tt->e, &c->w, EPOLLIN)) {
			close(fd);
			conn_release(&c->w);
			continue;
		}
		c->next = tt->served;
		tt->served = c;
		tt->nserved++;
	}
}

/* Handshakes that never finish lose their connection, on both sides. */
static void tcp_progress(struct rma__transport *t)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);
	int64_t now = rma__now_ns();

	if (now < tt->next_timer)
		return;
	tt->next_timer = now + 100 * 1000000LL;
	for (struct conn *c = tt->served, *next; c; c = next) {
		next = c->next;
		if (c->hs != HS_READY && now > c->hs_deadline)
			conn_kill(c, -ETIMEDOUT);
	}
	for (struct tcp_peer *p = tt->peers; p; p = p->next)
		for (struct conn *c = p->conns, *next; c; c = next) {
			next = c->next;
			if (c->hs != HS_READY && now > c->hs_deadline)
				conn_kill(c, -ETIMEDOUT);
		}
}

/* ---- ops table ---- */

static int tcp_probe(const char **why)
{
	*why = "rma's own protocol over TCP sockets";
	return 0;
}

static int tcp_init(struct rma_engine *e, struct rma__transport **out)
{
	const struct rma__engine_params *p = rma__engine_params(e);
	struct sockaddr_storage sa;
	socklen_t len;
	struct tcp_tr *tt;
	int fd, one = 1, rc;

	rc = parse_hostport(p->listen, &sa, &len);
	if (rc) {
		rma__err("tcp: cannot parse listen address '%s' (want HOST:PORT)", p->listen);
		return rc;
	}
	tt = calloc(1, sizeof *tt);
	if (!tt)
		return -ENOMEM;
	tt->e = e;
	tt->engine_id = p->engine_id;
	tt->max_msg = p->max_msg_size ? p->max_msg_size : DEFAULT_MAX_MSG;
	tt->depth = p->queue_depth;
	tt->stripes = p->stripes;
	{
		/* Both sides derive the proof key from the secret ("" if none). */
		static const uint8_t k0[16] = "rma-tcp-secret-0";
		static const uint8_t k1[16] = "rma-tcp-secret-1";
		const char *s = p->secret ? p->secret : "";
		rma__put_le64(tt->key, rma__siphash(k0, s, strlen(s)));
		rma__put_le64(tt->key + 8, rma__siphash(k1, s, strlen(s)));
	}
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 4096)) {
		rc = -errno;
		rma__err("tcp: cannot listen on %s: %s", p->listen, strerror(errno));
		close(fd);
		goto fail;
	}
	len = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &len);
	pick_reachable(&sa);
	tt->blob_len = blob_from_sa(&sa, tt->blob);
	tt->lw.fd = fd;
	tt->lw.cb = accept_cb;
	rc = rma__watch_add(e, &tt->lw, EPOLLIN);
	if (rc) {
		close(fd);
		goto fail;
	}
	*out = &tt->base;
	return 0;
fail:
	free(tt);
	return rc;
}

static void tcp_fini(struct rma__transport *t)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);
	while (tt->served)
		conn_kill(tt->served, -ECANCELED);
	close(tt->lw.fd);
	/* The engine is going away: release what the progress round would. */
	free(tt);
}

static int tcp_ad_pack(struct rma__transport *t, struct rma_region *r,
		       uint64_t key, uint64_t off, uint64_t len, void *buf,
		       size_t cap)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);
	if (cap < tt->blob_len)
		return -ENOSPC;
	memcpy(buf, tt->blob, tt->blob_len);
	return (int)tt->blob_len;
}

static int tcp_ad_parse(const void *blob, size_t len, uint64_t core_key,
			struct rma__rkey *rk)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	if (sa_from_blob(blob, len, &sa, &salen))
		return -EBADMSG;
	rk->key = core_key;
	rk->base = 0; /* tcp addresses are offsets in the advertised window */
	return 0;
}

static int conn_start(struct tcp_peer *p)
{
	struct tcp_tr *tt = p->tt;
	int fd = socket(p->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct conn *c;

	if (fd < 0)
		return -errno;
	tune_socket(fd);
	if (connect(fd, (struct sockaddr *)&p->sa, p->salen) && errno != EINPROGRESS) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	/* Room for the peer's whole window plus dropped entries. */
	c = conn_new(tt, fd, tt->depth * 2);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->peer = p;
	c->hs = HS_CONNECTING;
	c->events = EPOLLOUT;
	int rc = rma__watch_add(tt->e, &c->w, EPOLLOUT);
	if (rc) {
		close(fd);
		conn_release(&c->w);
		return rc;
	}
	c->next = p->conns;
	p->conns = c;
	return 0;
}

static int tcp_connect(struct rma__transport *t, const void *blob, size_t len,
		       uint64_t engine_id, struct rma__peer **out)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);
	struct tcp_peer *p = calloc(1, sizeof *p);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	p->tt = tt;
	p->expect_id = engine_id;
	if (sa_from_blob(blob, len, &p->sa, &p->salen)) {
		free(p);
		return -EBADMSG;
	}
	for (unsigned i = 0; i < tt->stripes && !rc; i++)
		rc = conn_start(p);
	if (rc) {
		p->base.state = RMA__PEER_FAILED; /* the core has not seen it */
		while (p->conns)
			conn_kill(p->conns, rc);
		free(p);
		return rc;
	}
	p->next = tt->peers;
	tt->peers = p;
	*out = &p->base;
	return 0;
}

static void tcp_disconnect(struct rma__peer *bp, int err)
{
	struct tcp_peer *p = container_of(bp, struct tcp_peer, base);
	struct tcp_peer **pp = &p->tt->peers;
	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	p->base.state = RMA__PEER_FAILED; /* no peer_failed callback while going */
	while (p->conns)
		conn_kill(p->conns, err);
	free(p);
}

/* The least loaded ready connection. */
static struct conn *pick(struct tcp_peer *p)
{
	struct conn *best = NULL;
	for (struct conn *c = p->conns; c; c = c->next)
		if (c->hs == HS_READY && c->count < c->cap &&
		    (!best || c->queued < best->queued))
			best = c;
	return best;
}

static int tcp_post(struct rma__peer *bp, const struct rma__xfer *xf)
{
	struct tcp_peer *p = container_of(bp, struct tcp_peer, base);
	struct conn *c = pick(p);
	struct txe *x;

	if (!c) /* rings full of dropped entries: wait for replies */
		return -EAGAIN;
	x = ring_at(c, c->count);
	struct rma_tcp_hdr h = {
		.type = xf->kind == RMA_OP_PUT ? RMA_TCP_PUT : RMA_TCP_GET,
		.id = xf->op_id,
		.key = xf->key,
		.addr = xf->raddr,
		.len = xf->len,
	};
	rma__tcp_hdr_encode(&h, x->hdr);
	x->kind = h.type;
	x->skipped = false;
	x->pay = xf->laddr;
	x->pay_len = xf->kind == RMA_OP_PUT ? xf->len : 0;
	x->op_id = xf->op_id;
	x->raddr = xf->raddr;
	x->len = xf->len;
	x->region = NULL;
	c->count++;
	c->queued += RMA_TCP_HDR_SIZE + x->pay_len;
	return 0;
}

static void tcp_flush(struct rma__peer *bp)
{
	struct tcp_peer *p = container_of(bp, struct tcp_peer, base);
	for (struct conn *c = p->conns, *next; c; c = next) {
		next = c->next;
		if (c->hs == HS_READY && c->sent < c->count)
			conn_flush(c);
	}
}

/* A region is going: nothing may read or write it after this returns. */
static void tcp_revoke(struct rma__transport *t, struct rma_region *r)
{
	struct tcp_tr *tt = container_of(t, struct tcp_tr, base);

	for (struct conn *c = tt->served, *next; c; c = next) {
		next = c->next;
		if (c->in_payload && c->pay_region == r) {
			c->pay_dst = NULL; /* rest of this PUT is discarded */
			c->pay_status = -EKEYREJECTED;
		}
		for (unsigned i = 0; i < c->count; i++) {
			struct txe *x = ring_at(c, i);
			if (x->region != r)
				continue;
			if (i == 0 && c->cur_off > 0) {
				/* Its reply is half on the wire: cut it off. */
				conn_kill(c, -ECONNRESET);
				break;
			}
			/* Not started: turn it into a refusal. */
			struct rma_tcp_hdr h;
			rma__tcp_hdr_decode(x->hdr, RMA_TCP_HDR_SIZE, UINT64_MAX, &h);
			h.status = -EKEYREJECTED;
			h.len = 0;
			rma__tcp_hdr_encode(&h, x->hdr);
			c->queued -= x->pay_len;
			x->pay = NULL;
			x->pay_len = 0;
			x->region = NULL;
		}
	}
}

const struct rma__transport_ops rma__tcp_ops = {
	.name = "tcp",
	.level = RMA_LEVEL_TCP,
	.wire_id = 1,
	.probe = tcp_probe,
	.init = tcp_init,
	.fini = tcp_fini,
	.ad_pack = tcp_ad_pack,
	.ad_parse = tcp_ad_parse,
	.connect = tcp_connect,
	.disconnect = tcp_disconnect,
	.post = tcp_post,
	.flush = tcp_flush,
	.progress = tcp_progress,
	.revoke = tcp_revoke,
};
