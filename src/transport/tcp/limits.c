/*
 * limits.c - what the target allows, so that no peer can lock others out:
 *   - connections still in the handshake have their own small cap, per
 *     remote address and in all, and a short timer; a new one evicts the
 *     oldest when a cap is full, so a flood of idle sockets cannot keep a
 *     real initiator from getting in;
 *   - authenticated connections have a cap, per address and in all; one
 *     that would pass it evicts the connection idle the longest, or is
 *     refused when none is idle;
 *   - authenticated connections with nothing in flight close after an
 *     idle timeout;
 *   - large socket buffers only after authentication, within a bound;
 *   - refusals are logged as counts, at most one line per interval.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "transport/tcp/tcp.h"

#define REFUSAL_LOG_NS (10LL * 1000000000)

int rma__tcp_limits_init(struct tcp_limits *l, const struct rma__topts *o)
{
	static const struct {
		const char *name;
		unsigned long lo, hi, dflt;
	} opt[] = {
		{"max_conns", 1, 1u << 20, 4096},
		{"max_handshakes", 1, 1u << 16, 64},
		{"max_addr_conns", 1, 1u << 20, 4096},
		{"max_addr_handshakes", 1, 1u << 16, 32},
		{"handshake_ms", 100, 600000, 3000},
		{"idle_ms", 0, 86400000, 120000},
	};
	unsigned long v[RMA_ARRAY_SIZE(opt)];

	for (size_t i = 0; i < RMA_ARRAY_SIZE(opt); i++) {
		int rc = rma__topt_uint(o, opt[i].name, opt[i].lo, opt[i].hi, &v[i]);
		if (rc < 0) {
			rma__err("tcp: option %s: want a number in [%lu, %lu]",
				 opt[i].name, opt[i].lo, opt[i].hi);
			return rc;
		}
		if (rc > 0)
			v[i] = opt[i].dflt;
	}
	l->conns = (unsigned)v[0];
	l->handshakes = (unsigned)v[1];
	l->addr_conns = (unsigned)v[2];
	l->addr_handshakes = (unsigned)v[3];
	l->handshake_ns = (int64_t)v[4] * 1000000;
	l->idle_ns = (int64_t)v[5] * 1000000;
	return 0;
}

void rma__tcp_raddr(const struct sockaddr_storage *sa, uint8_t out[16])
{
	memset(out, 0, 16);
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &in->sin_addr, 4);
	} else if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		memcpy(out, &in6->sin6_addr, 16);
	}
}

static bool idle(const struct conn *c)
{
	return c->hs == HS_READY && !c->count && !c->in_payload &&
	       c->rx_off == c->rx_len;
}

static void evict(struct tcp_tr *tt, struct conn *c)
{
	rma__refused(&tt->refusals, RMA__REFUSED_LIMIT, rma__now_ns());
	rma__tcp_conn_kill(c, -ECONNRESET);
}

/* Nothing of a hello has come in, not even into the socket: the cheapest
 * connection to lose (a real initiator sends its hello at once). */
static bool silent(const struct conn *c)
{
	uint8_t b;
	return c->setup && rma__setup_silent(c->setup) &&
	       recv(c->w.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

void rma__tcp_hs_link(struct tcp_tr *tt, struct conn *c)
{
	c->hs_older = tt->hs_newest;
	c->hs_newer = NULL;
	if (tt->hs_newest)
		tt->hs_newest->hs_newer = c;
	else
		tt->hs_oldest = c;
	tt->hs_newest = c;
	tt->nhandshakes++;
}

void rma__tcp_hs_unlink(struct tcp_tr *tt, struct conn *c)
{
	if (c->hs_newer)
		c->hs_newer->hs_older = c->hs_older;
	else
		tt->hs_newest = c->hs_older;
	if (c->hs_older)
		c->hs_older->hs_newer = c->hs_newer;
	else
		tt->hs_oldest = c->hs_newer;
	c->hs_newer = c->hs_older = NULL;
	tt->nhandshakes--;
}

/* The oldest handshake (from raddr, or from anywhere when raddr is NULL),
 * silent ones first; *count: how many there are.  Oldest first, so under
 * a flood of silent sockets the first one looked at is the one to go. */
static struct conn *oldest_handshake(struct tcp_tr *tt, const uint8_t *raddr,
				     unsigned *count)
{
	struct conn *old = NULL, *old_silent = NULL;

	*count = 0;
	for (struct conn *c = tt->hs_oldest; c; c = c->hs_newer) {
		if (raddr && memcmp(c->raddr, raddr, 16))
			continue;
		++*count;
		if (!old)
			old = c;
		if (!old_silent && silent(c))
			old_silent = c;
	}
	return old_silent ? old_silent : old;
}

void rma__tcp_admit(struct tcp_tr *tt, const uint8_t raddr[16])
{
	unsigned n;
	struct conn *v;

	if (!raddr) { /* out of fds: shed one now */
		if ((v = oldest_handshake(tt, NULL, &n)))
			evict(tt, v);
		return;
	}
	v = oldest_handshake(tt, raddr, &n);

	if (n >= tt->lim.addr_handshakes && v) {
		evict(tt, v);
		return;
	}
	if (tt->nhandshakes >= tt->lim.handshakes &&
	    (v = oldest_handshake(tt, NULL, &n)))
		evict(tt, v);
}

static void big_buffers(struct conn *c)
{
	struct tcp_tr *tt = c->tt;
	int sz = SOCKBUF;

	if (tt->bigbuf_total + 2ull * SOCKBUF > SOCKBUF_TOTAL)
		return; /* the kernel's autotuning will do */
	/* Privileged callers can go past rmem_max/wmem_max; others keep
	 * the kernel's autotuning, which a plain SO_RCVBUF would switch off. */
	if (setsockopt(c->w.fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) |
	    setsockopt(c->w.fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz))
		return;
	c->bigbuf = true;
	tt->bigbuf_total += 2ull * SOCKBUF;
}

void rma__tcp_authenticated(struct conn *c)
{
	struct tcp_tr *tt = c->tt;

	if (!c->peer) {
		struct conn *lru = NULL, *lru_here = NULL;
		unsigned all = 0, here = 0;
		for (struct conn *o = tt->served; o; o = o->next) {
			if (o == c || o->hs != HS_READY)
				continue;
			bool same = !memcmp(o->raddr, c->raddr, 16);
			all++;
			here += same;
			if (!idle(o))
				continue;
			if (!lru || o->last_active < lru->last_active)
				lru = o;
			if (same && (!lru_here || o->last_active < lru_here->last_active))
				lru_here = o;
		}
		struct conn *victim = NULL;
		if (here >= tt->lim.addr_conns)
			victim = lru_here ? lru_here : c;
		else if (all >= tt->lim.conns)
			victim = lru ? lru : c;
		if (victim)
			evict(tt, victim);
		if (victim == c)
			return;
	}
	big_buffers(c);
}

static void tick(struct rma__timer *tm)
{
	struct tcp_tr *tt = container_of(tm, struct tcp_tr, tick);
	int64_t now = rma__now_ns();
	bool pending = false;

	for (struct conn *c = tt->served, *next; c; c = next) {
		next = c->next;
		if (c->hs == HS_SETUP && now > c->hs_deadline) {
			rma__refused(&tt->refusals, RMA__REFUSED_TIMEOUT, now);
			rma__tcp_conn_kill(c, -ETIMEDOUT);
		} else if (tt->lim.idle_ns && idle(c) &&
			   now - c->last_active > tt->lim.idle_ns) {
			rma__tcp_conn_kill(c, -ETIMEDOUT);
		}
	}
	for (struct tcp_peer *p = tt->peers; p; p = p->next)
		for (struct conn *c = p->conns, *next; c; c = next) {
			next = c->next;
			if (c->hs != HS_READY && now > c->hs_deadline)
				rma__tcp_conn_kill(c, -ETIMEDOUT);
			else if (c->hs != HS_READY)
				pending = true;
		}
	rma__refusals_log(&tt->refusals, now);
	if (tt->listen_paused && !rma__watch_mod(tt->e, &tt->lw, EPOLLIN))
		tt->listen_paused = false;
	pending |= tt->listen_paused;
	for (int i = 0; i < RMA__REFUSED_N; i++)
		pending |= tt->refusals.n[i] != 0;
	if (pending || (tt->served && (tt->nhandshakes || tt->lim.idle_ns)))
		rma__timer_arm(tt->e, &tt->tick, now + TICK_NS);
}

void rma__tcp_timer_start(struct tcp_tr *tt)
{
	if (!tt->tick.slot) {
		tt->tick.cb = tick;
		rma__timer_arm(tt->e, &tt->tick, rma__now_ns() + TICK_NS);
	}
}
