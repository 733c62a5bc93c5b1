/*
 * limits.c - what the target allows, so that no peer can lock others out:
 *   - the caps on connections in the handshake and authenticated ones, in
 *     all and per remote address, are transport/admit.c's (shared with
 *     ofi's control listener); this file says which tcp connections are
 *     silent or idle and how one is closed;
 *   - connections in the handshake have a short timer;
 *   - authenticated connections close after an idle timeout: no byte in
 *     or out for that long, with nothing in flight or stuck mid-request
 *     (a peer that stops halfway holds its slot no longer than an idle
 *     one, and past the handshake time it may be evicted like one);
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

static bool idle(const struct conn *c)
{
	return c->hs == HS_READY && !c->count && !c->in_payload &&
	       c->rx_off == c->rx_len;
}

/* Nothing of a hello has come in, not even into the socket: the cheapest
 * connection to lose (a real initiator sends its hello at once). */
static bool adm_silent(struct rma__admitted *a)
{
	struct conn *c = container_of(a, struct conn, adm);
	return c->setup && rma__admit_silent(c->setup, c->w.fd);
}

/* Authenticated, and no byte in or out for longer than ns: whatever it
 * holds (a request partly read, a payload or replies stuck), its peer
 * has stopped. */
static bool stalled(const struct conn *c, int64_t now, int64_t ns)
{
	return c->hs == HS_READY && now - c->last_active > ns;
}

static bool adm_idle(struct rma__admitted *a, int64_t *since)
{
	struct conn *c = container_of(a, struct conn, adm);
	*since = c->last_active;
	return idle(c) ||
	       stalled(c, rma__now_ns(), c->tt->admit.lim.handshake_ns);
}

static void adm_evict(struct rma__admitted *a)
{
	rma__tcp_conn_kill(container_of(a, struct conn, adm), -ECONNRESET);
}

static const struct rma__admit_ops adm_ops = {
	.silent = adm_silent,
	.idle = adm_idle,
	.evict = adm_evict,
};

int rma__tcp_limits_init(struct tcp_tr *tt, const struct rma__topts *o)
{
	static const struct rma__admit_limits dflt = {
		.conns = 4096, .handshakes = 64, .addr_conns = 4096,
		.addr_handshakes = 32, .handshake_ns = 3000 * 1000000LL,
		.idle_ns = 120000 * 1000000LL,
	};
	tt->admit.ops = &adm_ops;
	tt->admit.refusals = &tt->refusals;
	return rma__admit_options("tcp", o, &dflt, &tt->admit.lim);
}

static void big_buffers(struct conn *c)
{
	struct tcp_tr *tt = c->tt;
	int sz = tt->sockbuf;

	if (!sz || tt->bigbuf_total + 2ull * sz > SOCKBUF_TOTAL)
		return; /* the kernel's autotuning will do */
	/* Privileged callers can go past rmem_max/wmem_max; others keep
	 * the kernel's autotuning, which a plain SO_RCVBUF would switch off. */
	int snd = setsockopt(c->w.fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
	int rcv = setsockopt(c->w.fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
	if (snd && rcv)
		return; /* one that took counts whole: it holds its buffer */
	c->bigbuf = true;
	tt->bigbuf_total += 2ull * sz;
}

void rma__tcp_authenticated(struct conn *c)
{
	if (!c->peer && !rma__admit_up(&c->tt->admit, &c->adm))
		return; /* refused */
	if (rma__tcp_conn_ring(c)) {
		rma__tcp_conn_kill(c, -ENOMEM);
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
		} else if (tt->admit.lim.idle_ns &&
			   stalled(c, now, tt->admit.lim.idle_ns)) {
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
	/* Listen again; the listener stays paused (and this tick armed)
	 * until an accept no longer fails for want of fds. */
	if (tt->listen_paused)
		rma__watch_mod(tt->e, &tt->lw, EPOLLIN);
	pending |= tt->listen_paused;
	for (int i = 0; i < RMA__REFUSED_N; i++)
		pending |= tt->refusals.n[i] != 0;
	if (pending || (tt->served && (tt->admit.nhandshakes || tt->admit.lim.idle_ns)))
		rma__timer_arm(tt->e, &tt->tick, now + TICK_NS);
}

void rma__tcp_timer_start(struct tcp_tr *tt)
{
	if (!tt->tick.slot) {
		tt->tick.cb = tick;
		rma__timer_arm(tt->e, &tt->tick, rma__now_ns() + TICK_NS);
	}
}
