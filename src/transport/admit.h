/*
 * admit.h - what a listener admits, so that no remote address can lock
 * others out; shared by tcp's listener and ofi's control listener:
 *   - connections still in the handshake have a cap per remote address and
 *     in all; a new one evicts the oldest (of its own address first, those
 *     with nothing received first), so a flood of idle sockets cannot keep
 *     a real initiator from getting in;
 *   - authenticated connections have a cap per address and in all; one
 *     that would pass it evicts the connection idle the longest (of its
 *     own address when that cap is the one full), or is refused when none
 *     is idle (or the transport never calls one idle);
 *   - every eviction or refusal is counted in the transport's refusals,
 *     which are logged as counts, at most one line per interval.
 * The transport embeds a struct rma__admitted in each accepted connection
 * and says, through rma__admit_ops, which are silent or idle and how one
 * is closed.
 */
#ifndef RMA_TRANSPORT_ADMIT_H
#define RMA_TRANSPORT_ADMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/setup.h"
#include "transport/transport.h"

struct rma__admit_limits {
	unsigned conns;           /* authenticated connections, all peers */
	unsigned handshakes;      /* connections still in the handshake */
	unsigned addr_conns;      /* authenticated, from one remote address */
	unsigned addr_handshakes; /* in the handshake, from one remote address */
	int64_t handshake_ns;     /* time a connection has to authenticate */
	int64_t idle_ns;          /* authenticated, nothing in flight: closed
	                           * after this long (0 = never) */
};

/* One accepted connection, embedded in the transport's own. */
struct rma__admitted {
	struct rma__admitted *newer, *older; /* in its list, by age */
	uint8_t raddr[16];        /* remote address, IPv4 mapped */
	uint8_t list;             /* 0 none, 1 handshakes, 2 authenticated */
	bool spoke;               /* found not silent: never asked again */
};

struct rma__admit_ops {
	/* Nothing of a hello has come in: the cheapest to lose.  NULL: none. */
	bool (*silent)(struct rma__admitted *a);
	/* Authenticated with nothing in flight; *since: its last activity.
	 * NULL: none ever is (authenticated ones are never evicted). */
	bool (*idle)(struct rma__admitted *a, int64_t *since);
	/* Close it; it leaves its list through rma__admit_drop. */
	void (*evict)(struct rma__admitted *a);
};

struct rma__admit {
	struct rma__admit_limits lim;
	const struct rma__admit_ops *ops;
	struct rma__refusals *refusals;
	struct rma__admitted *hs_oldest, *hs_newest, *up_oldest, *up_newest;
	unsigned nhandshakes, nconns;
};

/* No byte of the client's hello has come in on fd, not even into the
 * socket (setup s, the server's side): the cheapest connection to lose,
 * since a real initiator sends its hello at once. */
bool rma__admit_silent(const struct rma__setup *s, int fd);
/* The limits: defaults d, overridden by the options max_conns,
 * max_handshakes, max_addr_conns, max_addr_handshakes, handshake_ms and
 * (when d->idle_ns >= 0) idle_ms.  -EINVAL (logged as who's). */
/* The limits of a control listener (ofi's, verbs'): no idle timeout, its
 * connections carrying no data. */
extern const struct rma__admit_limits rma__admit_ctl_defaults;
int rma__admit_options(const char *who, const struct rma__topts *o,
		       const struct rma__admit_limits *d,
		       struct rma__admit_limits *out);
void rma__admit_raddr(const struct sockaddr_storage *sa, uint8_t out[16]);
/* A connection from raddr was accepted: make room among the handshakes
 * before it joins them; NULL: out of fds, shed the oldest handshake. */
void rma__admit_make_room(struct rma__admit *ad, const uint8_t *raddr);
/* a (its raddr set) joins the handshakes. */
void rma__admit_handshake(struct rma__admit *ad, struct rma__admitted *a);
/* a proved the secret: it joins the authenticated within their caps.
 * false: a itself was refused (evicted). */
bool rma__admit_up(struct rma__admit *ad, struct rma__admitted *a);
/* a is closing: out of whichever list holds it. */
void rma__admit_drop(struct rma__admit *ad, struct rma__admitted *a);

#endif
