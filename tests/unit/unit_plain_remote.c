/* Plain fabric peers through the fake transport: rma_remote_from_fabric
 * gives a remote whose xfers carry the triple's key and base + offset;
 * windows at one address share one peer, another address is another peer;
 * a known length bounds ops, an unknown one does not; an engine with a
 * shared secret refuses such a remote (-EACCES) before connecting;
 * rma_remote_to_fabric gives the triple back; bad arguments are refused. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static const uint8_t addr_a[6] = {1, 2, 3, 4, 5, 6};
static const uint8_t addr_b[6] = {1, 2, 3, 4, 5, 7};

static rma_remote *plain(const uint8_t *addr, uint64_t key, uint64_t base,
			 uint64_t len)
{
	rma_remote *r = NULL;
	CHECK_RC(rma_remote_from_fabric("fake", addr, 6, key, base, len, &r), 0);
	return r;
}

/* Post one put of len bytes at off to r; returns rma_post's answer. */
static int put(rma_engine *e, rma_region *lr, rma_remote *r, uint64_t off,
	       uint64_t len)
{
	struct rma_op op = { .kind = RMA_OP_PUT, .local = lr, .remote = r,
			     .remote_off = off, .len = len };
	return rma_post(e, &op, 1, 5000, NULL);
}

static void secret_refused(void)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_region *lr;
	char *buf = test_alloc(4096);

	fake_reset(0);
	rma_config_init(&cfg);
	cfg.transports = "fake";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	cfg.secret = "a secret the plain peer cannot prove";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	CHECK_RC(rma_region_register(e, buf, 4096, 0, &lr), 0);
	rma_remote *r = plain(addr_a, 7, 0, 0);
	CHECK_RC(put(e, lr, r, 0, 4096), -EACCES);
	CHECK_RC(rma_peer_connect(e, r, 1000), -EACCES);
	CHECK_EQ(fake.connects, 0);
	CHECK_EQ(fake.nxfers, 0);
	rma_remote_free(r);
	rma_region_release(lr);
	rma_engine_destroy(e);
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(8192);
	rma_region *lr;
	uint8_t got[16];
	uint64_t k, base;

	CHECK_RC(rma_region_register(e, lbuf, 8192, 0, &lr), 0);

	/* Two windows at one address, one at another. */
	rma_remote *w1 = plain(addr_a, 0x1111, 0x40000, 0);
	rma_remote *w2 = plain(addr_a, 0x2222, 0x80000, 8192);
	rma_remote *other = plain(addr_b, 0x1111, 0x40000, 0);
	CHECK_EQ_U64(rma_remote_length(w1), UINT64_MAX); /* not known */
	CHECK_EQ_U64(rma_remote_length(w2), 8192);
	CHECK_EQ(rma_remote_access(w1), RMA_ACCESS_REMOTE_RW);
	CHECK_EQ_U64(w1->engine_id, w2->engine_id);
	CHECK(w1->engine_id != other->engine_id);

	CHECK_RC(put(e, lr, w1, 0x100, 4096), 1);
	CHECK_EQ(fake.nxfers, 1);
	CHECK_EQ_U64(fake.xfers[0].x.rk->key, 0x1111);
	CHECK_EQ_U64(fake.xfers[0].x.raddr, 0x40100);
	CHECK_RC(put(e, lr, w2, 4096, 4096), 1);
	CHECK_EQ_U64(fake.xfers[1].x.rk->key, 0x2222);
	CHECK_EQ_U64(fake.xfers[1].x.raddr, 0x81000);
	CHECK_EQ(fake.connects, 1); /* one peer for one address */
	CHECK_RC(put(e, lr, other, 0, 4096), 1);
	CHECK_EQ(fake.connects, 2);
	/* A known length bounds ops here; an unknown one leaves it to the
	 * target's fabric. */
	CHECK_RC(put(e, lr, w2, 4096 + 1, 4096), -ERANGE);
	CHECK_RC(put(e, lr, w1, (uint64_t)1 << 40, 4096), 1);
	fake_complete_all(e, 0);
	struct rma_completion c[8];
	int n = 0;
	for (int i = 0; i < 100 && n < 4; i++) {
		rma_progress(e, 10);
		n += rma_poll(e, c + n, 8 - (size_t)n);
	}
	CHECK_EQ(n, 4);
	for (int i = 0; i < n; i++)
		CHECK_EQ(c[i].result, 4096);

	/* The triple comes back out. */
	CHECK_RC(rma_remote_to_fabric(w2, "fake", got, sizeof got, &k, &base), 6);
	CHECK(!memcmp(got, addr_a, 6));
	CHECK_EQ_U64(k, 0x2222);
	CHECK_EQ_U64(base, 0x80000);
	CHECK_RC(rma_remote_to_fabric(w2, "fake", got, 5, &k, &base), -ENOSPC);
	CHECK_RC(rma_remote_to_fabric(w2, "tcp", got, sizeof got, &k, &base), -ENOENT);
	/* An owner's blob holds no triple in the fake: declined, not found. */
	rma_region *rr;
	char *rbuf = test_alloc(4096);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *owned = fake_remote(rr, 0, 0);
	CHECK_RC(rma_remote_to_fabric(owned, "fake", got, sizeof got, &k, &base), -ENOENT);
	rma_remote_free(owned);
	rma_region_release(rr);

	/* Bad arguments. */
	rma_remote *r = NULL;
	CHECK_RC(rma_remote_from_fabric("fake", NULL, 6, 1, 0, 0, &r), -EINVAL);
	CHECK_RC(rma_remote_from_fabric("fake", addr_a, 0, 1, 0, 0, &r), -EINVAL);
	CHECK_RC(rma_remote_from_fabric(NULL, addr_a, 6, 1, 0, 0, &r), -EINVAL);
	CHECK_RC(rma_remote_from_fabric("nosuch", addr_a, 6, 1, 0, 0, &r), -ENOENT);
	CHECK_RC(rma_remote_from_fabric("tcp", addr_a, 6, 1, 0, 0, &r), -EOPNOTSUPP);
	CHECK(r == NULL);

	rma_remote_free(w1);
	rma_remote_free(w2);
	rma_remote_free(other);
	rma_region_release(lr);
	rma_engine_destroy(e);

	secret_refused();
	return 0;
}
