/* Grants reach the transport, and a transport may decline.
 *  - Registering a region with remote access makes one grant (the whole
 *    region); each new window advertised makes one more, the same window
 *    again none; release removes every grant the transport accepted, before
 *    mem_dereg, and revokes.
 *  - A transport declining a grant is left out of that advertisement; one
 *    declining a region is left out of all of the region's advertisements,
 *    and ops on it route elsewhere; if every transport declines, the call
 *    fails with -EOPNOTSUPP. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static rma_engine *engine(const char *transports)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = transports;
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

/* Does the advertisement of [off, off+len) carry the fake's entry? */
static int has_fake(rma_region *r, uint64_t off, uint64_t len, int *err)
{
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	rma_remote *rem;
	int n = rma_advertise(r, off, len, 0, ad, sizeof ad);
	*err = n < 0 ? n : 0;
	if (n < 0)
		return -1;
	CHECK_RC(rma_remote_decode(ad, (size_t)n, &rem), 0);
	int found = 0;
	for (unsigned i = 0; i < rem->nent; i++)
		found |= rem->ent[i].wire_id == FAKE_WIRE_ID;
	rma_remote_free(rem);
	return found;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	char *buf = test_alloc(65536);
	rma_region *r;
	int err;

	/* Lifetime. */
	fake_reset(0);
	rma_engine *e = engine("fake");
	CHECK_RC(rma_region_register(e, buf, 65536, RMA_ACCESS_REMOTE_RW, &r), 0);
	CHECK_EQ(fake.mem_regs, 1);
	CHECK_EQ(fake.grant_adds, 1);
	CHECK_EQ(has_fake(r, 0, 0, &err), 1);        /* the region's own grant */
	CHECK_EQ(fake.grant_adds, 1);
	CHECK_EQ(has_fake(r, 4096, 4096, &err), 1);  /* a new window */
	CHECK_EQ(has_fake(r, 4096, 4096, &err), 1);  /* the same again */
	CHECK_EQ(fake.grant_adds, 2);
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	CHECK_OK(rma_advertise(r, 4096, 4096, RMA_ACCESS_REMOTE_READ, ad, sizeof ad));
	CHECK_EQ(fake.grant_adds, 3);                /* other access: its own */
	CHECK_EQ(fake.grant_removes, 0);
	CHECK_RC(rma_region_release(r), 0);
	CHECK_EQ(fake.grant_removes, 3);
	CHECK_EQ(fake.revokes, 1);
	CHECK_EQ(fake.mem_deregs, 1);
	/* A local-only region: registered, no grant. */
	CHECK_RC(rma_region_register(e, buf, 65536, 0, &r), 0);
	CHECK_EQ(fake.grant_adds, 3);
	CHECK_RC(rma_region_release(r), 0);
	CHECK_EQ(fake.mem_deregs, 2);
	rma_engine_destroy(e);

	/* Declining, next to tcp. */
	fake_reset(0);
	e = engine("fake,tcp");
	CHECK_RC(rma_region_register(e, buf, 65536, RMA_ACCESS_REMOTE_RW, &r), 0);
	fake.decline_grants = 1;
	CHECK_EQ(has_fake(r, 0, 1024, &err), 0);     /* tcp only */
	CHECK_EQ(has_fake(r, 0, 0, &err), 1);        /* made before: kept */
	fake.decline_grants = 0;
	CHECK_EQ(has_fake(r, 0, 1024, &err), 0);     /* that grant stays tcp's */
	CHECK_RC(rma_region_release(r), 0);
	CHECK_EQ(fake.grant_removes, fake.grant_adds);

	fake.decline_regions = 1;
	CHECK_RC(rma_region_register(e, buf, 65536, RMA_ACCESS_REMOTE_RW, &r), 0);
	CHECK_EQ(has_fake(r, 0, 0, &err), 0);
	CHECK_EQ(has_fake(r, 8, 8, &err), 0);
	CHECK_RC(rma_region_release(r), 0);
	rma_engine_destroy(e);

	/* Nobody to carry it. */
	e = engine("fake");
	CHECK_RC(rma_region_register(e, buf, 65536, RMA_ACCESS_REMOTE_RW, &r),
		 -EOPNOTSUPP);
	fake.decline_regions = 0;
	CHECK_RC(rma_region_register(e, buf, 65536, RMA_ACCESS_REMOTE_RW, &r), 0);
	fake.decline_grants = 1;
	CHECK_EQ(has_fake(r, 0, 100, &err), -1);
	CHECK_RC(err, -EOPNOTSUPP);
	fake.decline_grants = 0;
	rma_engine_destroy(e); /* frees r */

	/* A local region the fake declined is not posted through it. */
	fake_reset(0);
	rma_engine *owner = engine("fake,tcp"), *init = engine("fake,tcp");
	rma_region *tr, *lr;
	CHECK_RC(rma_region_register(owner, buf, 4096, RMA_ACCESS_REMOTE_RW, &tr), 0);
	fake.decline_regions = 1;
	char *lbuf = test_alloc(4096);
	CHECK_RC(rma_region_register(init, lbuf, 4096, 0, &lr), 0);
	rma_remote *rem = test_remote_of(tr);
	struct rma_op op = { .kind = RMA_OP_PUT, .local = lr, .remote = rem, .len = 4096 };
	CHECK_RC(rma_post(init, &op, 1, 5000, NULL), 1);
	CHECK_EQ(fake.connects, 0);  /* went to tcp */
	struct rma_completion c;
	int got = 0;
	for (int i = 0; i < 500 && !got; i++) {
		rma_progress(owner, 1);
		rma_progress(init, 1);
		got = rma_poll(init, &c, 1);
	}
	CHECK_EQ(got, 1);
	CHECK_EQ(c.result, 4096);
	rma_remote_free(rem);
	rma_engine_destroy(init);
	rma_engine_destroy(owner);
	return 0;
}
