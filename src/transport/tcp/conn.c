/*
 * conn.c - one tcp connection's data path.
 *
 * Each connection keeps one ring of messages.  Initiator side: entries
 * [head, sent) are on the wire awaiting their reply, which comes back in
 * order; [sent, head+count) wait to be written.  Target side: replies
 * waiting to be written; when the ring is full the connection stops reading
 * (backpressure).  Payloads are read straight into place; only bytes that
 * arrive in the same read as a header (at most RXBUF) are copied.
 */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/tcp/tcp.h"

void rma__tcp_set_events(struct conn *c, uint32_t ev)
{
	if (c->events == ev || c->hs == HS_DEAD)
		return;
	c->events = ev;
	rma__watch_mod(c->tt->e, &c->w, ev);
}

void rma__tcp_conn_release(struct rma__watch *w)
{
	struct conn *c = container_of(w, struct conn, w);
	free(c->setup);
	free(c->ring);
	free(c);
}

static void conn_cb(struct rma__watch *w, uint32_t ev);

struct conn *rma__tcp_conn_new(struct tcp_tr *tt, int fd, unsigned cap)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->cap = cap;
	c->tt = tt;
	c->w.fd = fd;
	c->w.cb = conn_cb;
	c->w.direct = true;
	c->lowat = 1;
	c->w.release = rma__tcp_conn_release;
	c->hs_deadline = rma__now_ns() + HANDSHAKE_NS;
	return c;
}

int rma__tcp_conn_ring(struct conn *c)
{
	if (!c->ring && !(c->ring = calloc(c->cap, sizeof *c->ring)))
		return -ENOMEM;
	return 0;
}

struct txe *rma__tcp_ring_at(struct conn *c, unsigned i)
{
	return &c->ring[(c->head + i) % c->cap];
}

static void ring_pop(struct conn *c)
{
	struct txe *x = &c->ring[c->head];

	if (c->peer && x->kind == RMA_TCP_GET)
		c->awaited -= RMA_MIN(c->awaited, x->len);
	c->head = (c->head + 1) % c->cap;
	c->count--;
	c->sent--;
}

void rma__tcp_conn_kill(struct conn *c, int err)
{
	struct tcp_tr *tt = c->tt;
	struct rma_engine *e = tt->e;

	if (c->hs == HS_DEAD)
		return;
	bool was_ready = c->hs == HS_READY;
	c->hs = HS_DEAD;
	if (tt->stage_c == c)
		tt->stage_c = NULL;
	rma__watch_retire(e, &c->w);
	close(c->w.fd);
	if (c->bigbuf)
		tt->bigbuf_total -= 2ull * tt->sockbuf;
	c->bigbuf = false;
	if (!c->peer) {
		rma__admit_drop(&tt->admit, &c->adm);
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
	/* A flooded target sheds connections still in the handshake
	 * (limits.c): connect again, a few times, rather than fail. */
	if (!was_ready && err == -ECONNRESET && p->retries < HS_RETRIES &&
	    p->base.state != RMA__PEER_FAILED && !c->count) {
		p->retries++;
		if (rma__tcp_conn_start(p) == 0)
			return;
	}
	/* Every chunk this connection held fails with the reason. */
	for (unsigned i = 0; i < c->count; i++) {
		struct txe *x = rma__tcp_ring_at(c, i);
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

/* The next bytes of a device payload, from byte poff: a piece copied into
 * the pinned buffer, or the rest of the piece already there.  The caller
 * writes that entry alone, so a partial write is resumed from the cache. */
static int stage_tx(struct conn *c, struct txe *x, uint64_t poff,
		    struct iovec *iov)
{
	struct tcp_tr *tt = c->tt;
	int rc;

	if (tt->stage_c != c || tt->stage_seq != x->seq || poff < tt->stage_off ||
	    poff >= tt->stage_off + tt->stage_len) {
		uint64_t n = RMA_MIN((uint64_t)RMA__STAGE_SIZE, x->pay_len - poff);
		tt->stage_c = NULL;
		if ((rc = rma__stage_reserve(&tt->stage, x->dev)) ||
		    (rc = rma__stage_dtoh(x->dev, tt->stage.buf, x->pay + poff, n)))
			return rc;
		tt->stage_c = c;
		tt->stage_seq = x->seq;
		tt->stage_off = poff;
		tt->stage_len = n;
	}
	iov->iov_base = tt->stage.buf + (poff - tt->stage_off);
	iov->iov_len = tt->stage_off + tt->stage_len - poff;
	return 0;
}

/* A device payload could not be read: an entry not yet begun becomes a
 * failure of its own (initiator: the chunk; target: a refusal), one half
 * written costs the connection. */
static int stage_tx_failed(struct conn *c, struct txe *x, int err)
{
	if (c->cur_off) {
		rma__tcp_conn_kill(c, err);
		return -1;
	}
	c->queued -= RMA_MIN(c->queued, x->pay_len);
	x->pay = NULL;
	x->pay_len = 0;
	x->dev = NULL;
	if (c->peer) {
		x->skipped = true;
		rma__xfer_done(c->tt->e, x->op_id, 0, err);
		c->queued -= RMA_MIN(c->queued, RMA_TCP_HDR_SIZE);
		c->sent++;
		return 1;
	}
	struct rma_tcp_hdr h;
	rma__tcp_hdr_decode(x->hdr, RMA_TCP_HDR_SIZE, UINT64_MAX, &h);
	h.status = err;
	h.len = 0;
	rma__tcp_hdr_encode(&h, x->hdr);
	x->region = NULL;
	return 0;
}

/* Write what the ring holds: headers and payloads, many per writev. */
void rma__tcp_conn_flush(struct conn *c)
{
	struct rma_engine *e = c->tt->e;

	while (c->hs == HS_READY && c->sent < c->count) {
		struct iovec iov[IOV_BATCH];
		int niov = 0;
		size_t off = c->cur_off;

		for (unsigned i = c->sent; i < c->count && niov + 2 <= IOV_BATCH; i++) {
			struct txe *x = rma__tcp_ring_at(c, i);
			if (c->peer && !rma__op_live(e, x->op_id)) {
				if (i == c->sent && off > 0) {
					/* Half-written PUT whose buffer may be gone. */
					if (x->pay_len) {
						rma__tcp_conn_kill(c, -ECONNRESET);
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
			bool staged = x->dev && x->pay_len;
			struct iovec piece;
			if (staged && i != c->sent)
				break; /* device payloads go out alone */
			if (staged) {
				uint64_t poff = off > RMA_TCP_HDR_SIZE ? off - RMA_TCP_HDR_SIZE : 0;
				int rc = stage_tx(c, x, poff, &piece);
				if (rc && (rc = stage_tx_failed(c, x, rc)) < 0)
					return;
				if (rc > 0)
					continue; /* failed and dropped: the next one */
				staged = x->pay_len != 0; /* 0: now a refusal */
			}
			if (off < RMA_TCP_HDR_SIZE) {
				iov[niov].iov_base = x->hdr + off;
				iov[niov++].iov_len = RMA_TCP_HDR_SIZE - off;
				off = 0;
			} else {
				off -= RMA_TCP_HDR_SIZE;
			}
			if (staged) {
				iov[niov++] = piece;
				break;
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
			rma__tcp_conn_kill(c, errno == EPIPE ? -ECONNRESET : -errno);
			return;
		}
		/* Advance over what went out. */
		size_t left = (size_t)n;
		while (left && c->sent < c->count) {
			struct txe *x = rma__tcp_ring_at(c, c->sent);
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
		c->last_active = rma__now_ns();
	}
	if (c->hs == HS_DEAD)
		return;
	/* Initiator: pop skipped entries at the head (no reply will come). */
	while (c->peer && c->count && c->sent && rma__tcp_ring_at(c, 0)->skipped)
		ring_pop(c);
	/* A paused target connection reads again once its replies drain. */
	uint32_t want = c->paused ? 0 : EPOLLIN;
	if (c->sent < c->count)
		want |= EPOLLOUT;
	rma__tcp_set_events(c, want);
}

/* ---- target side ---- */

static void reply(struct conn *c, uint8_t type, const struct rma_tcp_hdr *req,
		  int status, char *pay, struct rma_region *region, bool dev)
{
	struct txe *x = rma__tcp_ring_at(c, c->count);
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
	x->dev = pay && dev ? region : NULL;
	x->seq = ++c->tt->seq;
	c->count++;
	c->queued += RMA_TCP_HDR_SIZE + x->pay_len;
}

/* A request header arrived on a target connection. */
static void serve(struct conn *c, const struct rma_tcp_hdr *h)
{
	struct rma_engine *e = c->tt->e;
	struct rma_region *region = NULL;
	char *addr = NULL;
	bool dev = false;

	if (h->type == RMA_TCP_GET) {
		int rc = rma__target_lookup(e, h->key, h->addr, h->len,
					    RMA_ACCESS_REMOTE_READ, &addr, &region, &dev);
		reply(c, RMA_TCP_GET_RESP, h, rc, rc ? NULL : addr, region, dev);
		return;
	}
	/* PUT: the payload goes straight into the region, or is discarded. */
	c->pay_status = rma__target_lookup(e, h->key, h->addr, h->len,
					   RMA_ACCESS_REMOTE_WRITE, &addr, &region, &dev);
	c->pay_dst = c->pay_status ? NULL : addr;
	c->pay_region = region;
	c->pay_dev = c->pay_dst && dev ? region : NULL;
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

	while (c->sent && rma__tcp_ring_at(c, 0)->skipped)
		ring_pop(c);
	if (!c->sent)
		return -EPROTO;
	x = rma__tcp_ring_at(c, 0);
	if (h->id != x->op_id || h->addr != x->raddr ||
	    (h->type == RMA_TCP_PUT_ACK) != (x->kind == RMA_TCP_PUT) ||
	    (!h->status && h->len != x->len))
		return -EPROTO;
	if (h->type == RMA_TCP_GET_RESP && !h->status) {
		c->pay_status = 0;
		c->pay_dev = x->dev;
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
	if (c->pay_status)
		return NULL;
	return rma__op_buf(c->tt->e, c->cur.id, c->cur.addr + c->pay_done,
			   c->cur.len - c->pay_done);
}

static void payload_end(struct conn *c)
{
	c->in_payload = false;
	if (!c->peer) {
		reply(c, RMA_TCP_PUT_ACK, &c->cur, c->pay_status, NULL, NULL, false);
		return;
	}
	ring_pop(c);
	rma__xfer_done(c->tt->e, c->cur.id, c->pay_status ? 0 : c->cur.len,
		       c->pay_status);
}

/* n payload bytes at src belong at dst, in device memory: copy them there
 * now, from the pinned buffer (a copy from other memory may return before
 * the bytes land).  A failed copy fails the payload (target: the ack says
 * so; initiator: the chunk) and the rest of it is discarded. */
static void stage_rx(struct conn *c, char *dst, const void *src, size_t n)
{
	struct tcp_tr *tt = c->tt;
	int rc = rma__stage_reserve(&tt->stage, c->pay_dev);
	if (!rc && src != tt->stage.buf) {
		/* bytes that came with a header: at most RXBUF */
		tt->stage_c = NULL;
		memcpy(tt->stage.buf, src, n);
	}
	if (!rc)
		rc = rma__stage_htod(c->pay_dev, dst, tt->stage.buf, n);
	if (rc) {
		c->pay_status = rc;
		c->pay_dst = NULL;
	}
}

static void payload_take(struct conn *c, const uint8_t *src, size_t n)
{
	char *dst = payload_dst(c);
	if (dst && c->pay_dev)
		stage_rx(c, dst, src, n);
	else if (dst)
		memcpy(dst, src, n);
	c->pay_done += n;
	if (c->pay_done == c->cur.len)
		payload_end(c);
}

#define NO_NEXT SIZE_MAX

/* The request header after the one staged at off, staged whole too: its
 * offset, or NO_NEXT.  Unchecked: it only picks what to prefetch. */
static size_t next_request(const struct conn *c, size_t off)
{
	uint64_t len = c->rx[off] == RMA_TCP_PUT ? rma__le64(c->rx + off + 32) : 0;
	size_t left = c->rx_len - off - RMA_TCP_HDR_SIZE;

	if (len > left || left - len < RMA_TCP_HDR_SIZE)
		return NO_NEXT;
	return off + RMA_TCP_HDR_SIZE + (size_t)len;
}

/* A target: the staged requests' keys start loading, so that with many
 * regions their lookups' cache misses overlap. */
static void prefetch_keys(struct conn *c)
{
	struct rma_engine *e = c->tt->e;
	size_t off = c->rx_off;

	if (c->in_payload) {
		uint64_t rest = c->cur.len - c->pay_done;
		if (rest > c->rx_len - off || c->rx_len - off - rest < RMA_TCP_HDR_SIZE)
			return;
		off += (size_t)rest;
	} else if (c->rx_len - off < 2 * RMA_TCP_HDR_SIZE) {
		return; /* one request at most: nothing to overlap */
	}
	for (int i = 0; i < 16 && off != NO_NEXT; i++, off = next_request(c, off))
		rma__target_prefetch(e, rma__le64(c->rx + off + 16), false);
}

/* Parse what the staging buffer holds.  Returns 0, or -errno to kill. */
static int rx_parse(struct conn *c)
{
	uint64_t max = c->peer ? c->peer->base.max_msg : c->tt->max_msg;

	if (!c->peer)
		prefetch_keys(c);

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
		if (request) {
			size_t next = next_request(c, c->rx_off - RMA_TCP_HDR_SIZE);
			if (next != NO_NEXT)
				rma__target_prefetch(c->tt->e,
						     rma__le64(c->rx + next + 16), true);
			serve(c, &h);
		} else if (answer(c, &h)) {
			return -EPROTO;
		}
		if (c->in_payload && c->cur.len == 0)
			payload_end(c);
	}
	if (c->rx_off == c->rx_len)
		c->rx_off = c->rx_len = 0;
	return 0;
}

/* Deep in a large payload (an initiator's GET reply, a target's PUT): the
 * socket reads as ready only once a mark's worth of bytes, or the
 * payload's rest, have come, so each wake-up reads that much rather than
 * the few tens of KiB that came since the last look.  The mark is
 * RX_LOWAT for a lone payload, whose copy out then overlaps its sending;
 * in a stream of payloads (the last one's end found the next message
 * waiting) the sender is busy anyway, and the mark is the whole rest:
 * one wake-up and one read per payload (1 MiB gets ran 1.15x, puts 1.27x
 * with 16 in flight; the kernel caps a mark at half the receive buffer).
 * Back to 1 before a payload's end, or a small message after it would go
 * unseen.  The kernel reports a socket short of the mark anyway when its
 * buffer or window runs out, so a mark above what can come never stalls
 * it. */
static void rx_lowat(struct conn *c)
{
	uint64_t left = c->in_payload ? c->cur.len - c->pay_done : 0;
	uint64_t mark = c->stream ? INT_MAX : RX_LOWAT;
	int want = left > DIRECT_PAYLOAD_MAX ? (int)RMA_MIN(left, mark) : 1;

	if (want != c->lowat &&
	    !setsockopt(c->w.fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want))
		c->lowat = want;
}

void rma__tcp_conn_rx(struct conn *c)
{
	size_t budget = RX_BUDGET;
	bool drained = false; /* a recv came back short: nothing more queued */
	bool got = false;
	bool ended = false; /* a payload just ended in place */
	int rc;

	while (c->hs == HS_READY) {
		if ((rc = rx_parse(c))) {
			rma__warn("tcp: %s peer sent invalid data; dropping it",
				  c->peer ? "target" : "initiator");
			rma__tcp_conn_kill(c, rc);
			return;
		}
		if (c->paused) {
			/* Reply ring full: write replies out, then go on. */
			rma__tcp_conn_flush(c);
			if (c->hs != HS_READY || c->count == c->cap)
				break;
			c->paused = false;
			continue;
		}
		/* Out of budget only now: staged bytes are always parsed
		 * first, since no event may come for them.  After a short
		 * read, another recv would only say EAGAIN, on the reply's
		 * critical path: the (level-triggered) watch calls again if
		 * more has come meanwhile. */
		if (!budget || drained)
			break;
		ssize_t n;
		if (c->in_payload) {
			/* Large payloads: straight into place. */
			size_t want = RMA_MIN(c->cur.len - c->pay_done, budget);
			char *dst = payload_dst(c), *at = dst;
			struct tcp_tr *tt = c->tt;
			bool staged = dst && c->pay_dev;
			if (staged) {
				/* Device memory: through the pinned buffer. */
				int err = rma__stage_reserve(&tt->stage, c->pay_dev);
				if (err) {
					c->pay_status = err;
					c->pay_dst = NULL;
					continue; /* discarded from here */
				}
				tt->stage_c = NULL; /* a piece cached there is gone */
				at = tt->stage.buf;
				want = RMA_MIN(want, (size_t)RMA__STAGE_SIZE);
			} else if (!dst) {
				at = (char *)tt->discard;
				want = RMA_MIN(want, sizeof tt->discard);
			}
			/* A small payload's end in place and what follows it
			 * (the next messages) into the staging buffer, in one
			 * call: a window of small payloads then costs about one
			 * read per message, not two.  Not for large ones: 16 MiB
			 * gets ran 8% slower that way, for a reason not found. */
			struct iovec iov[2] = {{at, want}, {c->rx, sizeof c->rx}};
			bool more = !staged && want == c->cur.len - c->pay_done &&
				    want <= READ_AHEAD_MAX && c->rx_len == 0;
			struct msghdr mh = {.msg_iov = iov, .msg_iovlen = more ? 2 : 1};
			size_t asked = want + (more ? sizeof c->rx : 0);
			n = recvmsg(c->w.fd, &mh, 0);
			drained = n >= 0 && (size_t)n < asked;
			if (n > 0) {
				size_t pay = RMA_MIN((size_t)n, want);
				if (staged)
					stage_rx(c, dst, at, pay);
				c->pay_done += pay;
				if (more)
					c->rx_len = (size_t)n - pay;
				if (c->pay_done == c->cur.len) {
					payload_end(c);
					/* Is the next message here?  The read
					 * ahead says; else the next read. */
					if (more)
						c->stream = (size_t)n > pay;
					ended = !more;
				}
			}
		} else {
			/* Move a partial header to the front, then top up. */
			if (c->rx_off) {
				memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
				c->rx_len -= c->rx_off;
				c->rx_off = 0;
			}
			size_t room = sizeof c->rx - c->rx_len;
			n = recv(c->w.fd, c->rx + c->rx_len, room, 0);
			drained = n >= 0 && (size_t)n < room;
			if (ended)
				c->stream = n > 0;
			ended = false;
			if (n > 0)
				c->rx_len += (size_t)n;
		}
		if (n == 0) {
			rma__tcp_conn_kill(c, -ECONNRESET);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR) {
				c->w.quiet = !got; /* a direct try that found nothing */
				break;
			}
			rma__tcp_conn_kill(c, errno == EPIPE ? -ECONNRESET : -errno);
			return;
		}
		got = true;
		budget -= RMA_MIN(budget, (size_t)n);
		c->last_active = rma__now_ns();
	}
	rma__tcp_conn_direct(c);
	if (c->hs == HS_READY)
		rx_lowat(c);
	/* Target: replies out now, in one write; this also re-arms EPOLLIN
	 * on a connection that was paused. */
	if (c->hs == HS_READY && !c->peer)
		rma__tcp_conn_flush(c);
}

static void conn_cb(struct rma__watch *w, uint32_t ev)
{
	struct conn *c = container_of(w, struct conn, w);

	if (!ev) { /* a direct try (spinning round): only for data */
		if (c->hs == HS_READY)
			rma__tcp_conn_rx(c);
		else
			w->quiet = true;
		return;
	}
	if (c->hs == HS_CONNECTING) {
		if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			rma__tcp_connected(c);
		return;
	}
	if (c->hs == HS_SETUP) {
		rma__tcp_hs_run(c);
		return;
	}
	if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
		rma__tcp_conn_rx(c);
	if (c->hs == HS_READY && (ev & EPOLLOUT)) {
		rma__tcp_conn_flush(c);
		if (c->paused && c->hs == HS_READY && c->count < c->cap) {
			c->paused = false;
			rma__tcp_conn_rx(c); /* requests already buffered */
		}
	}
}
