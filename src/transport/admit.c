/*
 * admit.c - what a listener admits (admit.h): the caps on connections in
 * the handshake and authenticated ones, in all and per remote address.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/admit.h"
#include "util/util.h"

const struct rma__admit_limits rma__admit_ctl_defaults = {
	.conns = 4096, .handshakes = 64, .addr_conns = 1024,
	.addr_handshakes = 32, .handshake_ns = 3000 * 1000000LL,
	.idle_ns = -1, /* no idle timeout */
};

int rma__admit_options(const char *who, const struct rma__topts *o,
		       const struct rma__admit_limits *d,
		       struct rma__admit_limits *out)
{
	const struct {
		const char *name;
		unsigned long lo, hi, dflt;
	} opt[] = {
		{"max_conns", 1, 1u << 20, d->conns},
		{"max_handshakes", 1, 1u << 16, d->handshakes},
		{"max_addr_conns", 1, 1u << 20, d->addr_conns},
		{"max_addr_handshakes", 1, 1u << 16, d->addr_handshakes},
		{"handshake_ms", 100, 600000, (unsigned long)(d->handshake_ns / 1000000)},
		{"idle_ms", 0, 86400000,
		 d->idle_ns > 0 ? (unsigned long)(d->idle_ns / 1000000) : 0},
	};
	unsigned long v[RMA_ARRAY_SIZE(opt)];
	size_t n = RMA_ARRAY_SIZE(opt) - (d->idle_ns < 0);

	for (size_t i = 0; i < n; i++) {
		int rc = rma__topt_uint(o, opt[i].name, opt[i].lo, opt[i].hi, &v[i]);
		if (rc < 0) {
			rma__err("%s: option %s: want a number in [%lu, %lu]",
				 who, opt[i].name, opt[i].lo, opt[i].hi);
			return rc;
		}
		if (rc > 0)
			v[i] = opt[i].dflt;
	}
	out->conns = (unsigned)v[0];
	out->handshakes = (unsigned)v[1];
	out->addr_conns = (unsigned)v[2];
	out->addr_handshakes = (unsigned)v[3];
	out->handshake_ns = (int64_t)v[4] * 1000000;
	out->idle_ns = d->idle_ns < 0 ? 0 : (int64_t)v[5] * 1000000;
	return 0;
}

void rma__admit_raddr(const struct sockaddr_storage *sa, uint8_t out[16])
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

bool rma__admit_silent(const struct rma__setup *s, int fd)
{
	uint8_t b;
	return rma__setup_silent(s) && recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

static void evict(struct rma__admit *ad, struct rma__admitted *a)
{
	rma__refused(ad->refusals, RMA__REFUSED_LIMIT, rma__now_ns());
	ad->ops->evict(a);
}

static void link_newest(struct rma__admitted **oldest, struct rma__admitted **newest,
			struct rma__admitted *a)
{
	a->older = *newest;
	a->newer = NULL;
	if (*newest)
		(*newest)->newer = a;
	else
		*oldest = a;
	*newest = a;
}

void rma__admit_drop(struct rma__admit *ad, struct rma__admitted *a)
{
	struct rma__admitted **oldest, **newest;
	if (a->list == 1) {
		oldest = &ad->hs_oldest;
		newest = &ad->hs_newest;
		ad->nhandshakes--;
	} else if (a->list == 2) {
		oldest = &ad->up_oldest;
		newest = &ad->up_newest;
		ad->nconns--;
	} else {
		return;
	}
	if (a->newer)
		a->newer->older = a->older;
	else
		*newest = a->older;
	if (a->older)
		a->older->newer = a->newer;
	else
		*oldest = a->newer;
	a->newer = a->older = NULL;
	a->list = 0;
}

void rma__admit_handshake(struct rma__admit *ad, struct rma__admitted *a)
{
	link_newest(&ad->hs_oldest, &ad->hs_newest, a);
	a->list = 1;
	a->spoke = false;
	ad->nhandshakes++;
}

/* The oldest handshake (from raddr, or from anywhere when raddr is NULL),
 * silent ones first; *count: how many there are.  Oldest first, so under
 * a flood of silent sockets the first one looked at is the one to go. */
static struct rma__admitted *oldest_handshake(struct rma__admit *ad,
					      const uint8_t *raddr, unsigned *count)
{
	struct rma__admitted *old = NULL, *old_silent = NULL;

	*count = 0;
	for (struct rma__admitted *a = ad->hs_oldest; a; a = a->newer) {
		if (raddr && memcmp(a->raddr, raddr, 16))
			continue;
		++*count;
		if (!old)
			old = a;
		/* Once a byte has come in, a connection is never silent
		 * again: ask each only until it has spoken, so that a flood
		 * of talking sockets costs no peek per accepted connection
		 * per handshake. */
		if (!old_silent && !a->spoke) {
			if (ad->ops->silent && ad->ops->silent(a))
				old_silent = a;
			else
				a->spoke = true;
		}
	}
	return old_silent ? old_silent : old;
}

void rma__admit_make_room(struct rma__admit *ad, const uint8_t *raddr)
{
	unsigned n;
	struct rma__admitted *v;

	if (!raddr) {
		if ((v = oldest_handshake(ad, NULL, &n)))
			evict(ad, v);
		return;
	}
	v = oldest_handshake(ad, raddr, &n);
	if (n >= ad->lim.addr_handshakes && v) {
		evict(ad, v);
		return;
	}
	if (ad->nhandshakes >= ad->lim.handshakes &&
	    (v = oldest_handshake(ad, NULL, &n)))
		evict(ad, v);
}

bool rma__admit_up(struct rma__admit *ad, struct rma__admitted *a)
{
	struct rma__admitted *lru = NULL, *lru_here = NULL, *victim = NULL;
	int64_t t_lru = 0, t_here = 0, since;
	unsigned here = 0;

	rma__admit_drop(ad, a);
	for (struct rma__admitted *o = ad->up_oldest; o; o = o->newer) {
		bool same = !memcmp(o->raddr, a->raddr, 16);
		here += same;
		if (!ad->ops->idle || !ad->ops->idle(o, &since))
			continue;
		if (!lru || since < t_lru) {
			lru = o;
			t_lru = since;
		}
		if (same && (!lru_here || since < t_here)) {
			lru_here = o;
			t_here = since;
		}
	}
	if (here >= ad->lim.addr_conns)
		victim = lru_here ? lru_here : a;
	else if (ad->nconns >= ad->lim.conns)
		victim = lru ? lru : a;
	if (victim == a) {
		evict(ad, a);
		return false;
	}
	if (victim)
		evict(ad, victim);
	link_newest(&ad->up_oldest, &ad->up_newest, a);
	a->list = 2;
	ad->nconns++;
	return true;
}
