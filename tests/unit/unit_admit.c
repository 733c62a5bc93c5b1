/*
 * The handshake caps (admit.c) with fake connections:
 *   - past an address's cap, its oldest silent connection goes first,
 *     then its oldest; other addresses keep theirs;
 *   - a connection found talking is never asked again (each ask is a
 *     system call, and a flood of talking sockets is accepted as fast as
 *     it comes), while one found silent is asked again, and is still the
 *     one to go once the cap is reached.
 */
#include <string.h>

#include "check.h"
#include "testlib.h"
#include "transport/admit.h"
#include "util/util.h"

#define N 16

struct fake {
	struct rma__admitted a;
	bool silent, evicted;
	int asked;
};

static struct rma__admit ad;
static struct rma__refusals refusals = {.who = "test", .interval_ns = 3600000000000LL};
static struct fake conns[N];

static bool f_silent(struct rma__admitted *a)
{
	struct fake *f = container_of(a, struct fake, a);
	f->asked++;
	return f->silent;
}

static void f_evict(struct rma__admitted *a)
{
	struct fake *f = container_of(a, struct fake, a);
	f->evicted = true;
	rma__admit_drop(&ad, a);
}

static const struct rma__admit_ops ops = {.silent = f_silent, .evict = f_evict};

/* Connection i from address byte addr, silent or not, accepted. */
static void accept_one(int i, uint8_t addr, bool silent)
{
	struct fake *f = &conns[i];
	memset(f, 0, sizeof *f);
	f->a.raddr[15] = addr;
	f->silent = silent;
	rma__admit_make_room(&ad, f->a.raddr);
	rma__admit_handshake(&ad, &f->a);
}

static int evicted(void)
{
	int n = 0;
	for (int i = 0; i < N; i++)
		n += conns[i].evicted;
	return n;
}

static void reset(void)
{
	memset(&ad, 0, sizeof ad);
	ad.ops = &ops;
	ad.refusals = &refusals;
	ad.lim = (struct rma__admit_limits){.conns = 64, .handshakes = 8,
					   .addr_conns = 64, .addr_handshakes = 4};
}

int main(void)
{
	/* Talking, silent, then talking up to the address's cap of 4: the
	 * fifth evicts the silent one, though another is older. */
	reset();
	accept_one(0, 1, false);
	accept_one(1, 1, true);
	accept_one(2, 1, false);
	accept_one(3, 1, false);
	CHECK_EQ(evicted(), 0);
	accept_one(4, 1, false);
	CHECKF(conns[1].evicted && evicted() == 1,
	       "the silent connection stayed (evicted: 0 %d, 1 %d)",
	       conns[0].evicted, conns[1].evicted);
	/* No silent one left: the oldest goes. */
	accept_one(5, 1, false);
	CHECK(conns[0].evicted);
	CHECK_EQ(evicted(), 2);

	/* Each talking connection was asked once, however many scans. */
	for (int i = 0; i < 6; i++)
		if (!conns[i].silent)
			CHECKF(conns[i].asked <= 1, "connection %d asked %d times", i,
			       conns[i].asked);
	for (int i = 6; i < 12; i++) /* six more scans, each evicting */
		accept_one(i, 1, false);
	for (int i = 0; i < 12; i++)
		if (!conns[i].silent)
			CHECKF(conns[i].asked <= 1, "connection %d asked %d times", i,
			       conns[i].asked);
	CHECK_EQ(ad.nhandshakes, 4);

	/* A silent connection keeps being asked, and one that speaks
	 * later is no longer preferred. */
	reset();
	accept_one(0, 1, true);
	accept_one(1, 1, true);
	accept_one(2, 1, false);
	accept_one(3, 1, false);
	CHECK(conns[0].asked >= 2);
	conns[0].silent = false; /* its hello came in */
	accept_one(4, 1, false);
	CHECKF(conns[1].evicted && !conns[0].evicted,
	       "evicted 0: %d, 1: %d", conns[0].evicted, conns[1].evicted);

	/* Another address is untouched by this one's cap. */
	reset();
	accept_one(0, 2, true);
	for (int i = 1; i < 8; i++)
		accept_one(i, 1, false);
	CHECK(!conns[0].evicted);
	CHECK_EQ(evicted(), 3);
	printf("ok\n");
	return 0;
}
