/* FI_MR_RAW end to end over a real provider that does not need it: two
 * ofi:tcp engines in one process are told their domain is FI_MR_RAW, and
 * each domain's ops are wrapped so that grant MRs answer fi_mr_raw_attr
 * with a 24-byte key (a tag, the real key, its complement) that only the
 * wrapped fi_mr_map_raw turns back into the key tcp;ofi_rxm checks.  So a
 * put or get completes only if the owner read the raw key, sent it in
 * KEYS, and the initiator mapped it and posted the result; and every
 * mapping must be unmapped once: on revocation (a region released) and on
 * rma_peer_remove.  While chunks are in flight each holds the mapping
 * (refs == chunks).  The open token carries the key bytes (flag 4), so it
 * has no plain triple. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "core/core.h"
#include "testlib.h"
#include "transport/ofi/ofi.h"

#define TAG "rma-raw!"
#define RAW_LEN 24
#define LEN (8 << 20)

static const struct fi_ops *dom_orig[2], *mr_orig;
static const struct fi_ops_mr *reg_orig[2];
static struct fi_ops dom_ops[2], mr_ops;
static struct fi_ops_mr reg_ops[2];
static atomic_int raw_reads, maps, unmaps, bad;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t live[64];
static unsigned nlive;

static int mr_control(struct fid *fid, int cmd, void *arg)
{
	struct fid_mr *mr = container_of(fid, struct fid_mr, fid);
	struct fi_mr_raw_attr *a = arg;
	if (cmd != FI_GET_RAW_MR)
		return mr_orig->control(fid, cmd, arg);
	if (*a->key_size < RAW_LEN) {
		*a->key_size = RAW_LEN;
		return -FI_ETOOSMALL;
	}
	memcpy(a->raw_key, TAG, 8);
	rma__put_le64(a->raw_key + 8, mr->key);
	rma__put_le64(a->raw_key + 16, ~mr->key);
	*a->key_size = RAW_LEN;
	atomic_fetch_add(&raw_reads, 1);
	return 0;
}

static int dom_control(int side, struct fid *fid, int cmd, void *arg)
{
	if (cmd == FI_MAP_RAW_MR) {
		struct fi_mr_map_raw *m = arg;
		uint64_t k;
		if (m->key_size != RAW_LEN || memcmp(m->raw_key, TAG, 8) ||
		    (k = rma__le64(m->raw_key + 8)) != ~rma__le64(m->raw_key + 16)) {
			atomic_fetch_add(&bad, 1);
			return -FI_EINVAL;
		}
		pthread_mutex_lock(&live_mu);
		if (nlive < RMA_ARRAY_SIZE(live))
			live[nlive++] = k;
		pthread_mutex_unlock(&live_mu);
		*m->key = k;
		atomic_fetch_add(&maps, 1);
		return 0;
	}
	if (cmd == FI_UNMAP_KEY) {
		uint64_t k = *(uint64_t *)arg;
		bool found = false;
		pthread_mutex_lock(&live_mu);
		for (unsigned i = 0; i < nlive && !found; i++)
			if (live[i] == k) {
				live[i] = live[--nlive];
				found = true;
			}
		pthread_mutex_unlock(&live_mu);
		atomic_fetch_add(found ? &unmaps : &bad, 1);
		return found ? 0 : -FI_EINVAL;
	}
	return dom_orig[side]->control(fid, cmd, arg);
}

static int dom_control0(struct fid *fid, int cmd, void *arg)
{
	return dom_control(0, fid, cmd, arg);
}

static int dom_control1(struct fid *fid, int cmd, void *arg)
{
	return dom_control(1, fid, cmd, arg);
}

static int wrap_mr(struct fid_mr *mr)
{
	if (!mr_orig) {
		mr_orig = mr->fid.ops;
		mr_ops = *mr_orig;
		mr_ops.control = mr_control;
	}
	if (mr->fid.ops != mr_orig)
		return -FI_EINVAL; /* one ops table for every MR, or no test */
	mr->fid.ops = &mr_ops;
	return 0;
}

static int reg(int side, struct fid *fid, const void *buf, size_t len,
	       uint64_t access, uint64_t offset, uint64_t key, uint64_t flags,
	       struct fid_mr **mr, void *ctx)
{
	int rc = reg_orig[side]->reg(fid, buf, len, access, offset, key, flags,
				     mr, ctx);
	if (rc == 0 && (rc = wrap_mr(*mr)))
		fi_close(&(*mr)->fid);
	return rc;
}

static int reg0(struct fid *fid, const void *buf, size_t len, uint64_t access,
		uint64_t offset, uint64_t key, uint64_t flags, struct fid_mr **mr,
		void *ctx)
{
	return reg(0, fid, buf, len, access, offset, key, flags, mr, ctx);
}

static int reg1(struct fid *fid, const void *buf, size_t len, uint64_t access,
		uint64_t offset, uint64_t key, uint64_t flags, struct fid_mr **mr,
		void *ctx)
{
	return reg(1, fid, buf, len, access, offset, key, flags, mr, ctx);
}

/* Engine e's ofi instance; call with e->mu held. */
static struct ofi_tr *ofi_of(rma_engine *e)
{
	for (unsigned i = 0; i < e->ntr; i++)
		if (!strcmp(e->tr[i]->ops->name, "ofi"))
			return container_of(e->tr[i], struct ofi_tr, base);
	FAIL("no ofi instance");
}

/* Make engine e's ofi instance believe its domain is FI_MR_RAW. */
static void make_raw(rma_engine *e, int side)
{
	pthread_mutex_lock(&e->mu);
	struct ofi_tr *ot = ofi_of(e);
	ot->mr_mode |= FI_MR_RAW;
	ot->raw_u64 = 8;
	struct fid_domain *d = ot->domain;
	dom_orig[side] = d->fid.ops;
	dom_ops[side] = *d->fid.ops;
	dom_ops[side].control = side ? dom_control1 : dom_control0;
	d->fid.ops = &dom_ops[side];
	reg_orig[side] = d->mr;
	reg_ops[side] = *d->mr;
	reg_ops[side].reg = side ? reg1 : reg0;
	d->mr = &reg_ops[side];
	pthread_mutex_unlock(&e->mu);
}

/* The chunks in flight on e's peer each hold their key's mapping. */
static void check_held(rma_engine *e)
{
	pthread_mutex_lock(&e->mu);
	struct ofi_peer *pe = ofi_of(e)->peers;
	for (; pe; pe = pe->next) {
		unsigned held = 0, maps_held = 0;
		for (struct ofi_ctx *c = pe->inflight.next; c != &pe->inflight;
		     c = c->next) {
			struct ofi_key *k = rma__ofi_keys_find(&pe->keys, c->core);
			held += c->map && k && c->map == k->map;
		}
		for (unsigned i = 0; i < pe->keys.n; i++)
			if (pe->keys.v[i].map)
				maps_held += pe->keys.v[i].map->refs;
		CHECK_EQ(held, pe->n);
		CHECK_EQ(maps_held, pe->n);
	}
	pthread_mutex_unlock(&e->mu);
}

static int64_t xfer(rma_engine *e, unsigned kind, rma_region *local,
		    const rma_remote *r)
{
	struct rma_op op = { .kind = kind, .local = local, .remote = r,
			     .len = LEN, .user_data = 7 };
	struct rma_completion c;
	int64_t end = test_now_ms() + 30000;
	int rc = rma_post(e, &op, 1, 20000, NULL);
	if (rc != 1)
		return rc < 0 ? rc : -EIO;
	check_held(e);
	while (test_now_ms() < end)
		if (rma_poll(e, &c, 1) == 1)
			return c.result;
	return -ETIMEDOUT;
}

static void wait_unmaps(int want)
{
	int64_t end = test_now_ms() + 30000;
	while (atomic_load(&unmaps) < want && test_now_ms() < end)
		test_sleep_ms(2); /* the progress thread reads REVOKED */
	CHECK_EQ(atomic_load(&unmaps), want);
}

int main(void)
{
	struct rma_config cfg;
	rma_engine *owner, *init;
	rma_region *tr, *lr;
	rma_remote *r;
	uint8_t addr[OFI_ADDR_MAX];
	uint64_t k, base;
	char *tbuf = test_alloc(LEN), *lbuf = test_alloc(LEN);

	test_watchdog(120);
	rma_config_init(&cfg);
	cfg.transports = "ofi:tcp";
	if (rma_engine_create(&cfg, &owner))
		SKIP("no ofi:tcp engine here");
	CHECK_RC(rma_engine_create(&cfg, &init), 0);
	make_raw(owner, 0);
	make_raw(init, 1);

	CHECK_RC(rma_region_register(owner, tbuf, LEN, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(init, lbuf, LEN, 0, &lr), 0);
	r = test_remote_of(tr);
	CHECK_EQ(atomic_load(&raw_reads), 1);
	/* No secret: the token holds the key bytes (flag 4), no u64 key. */
	CHECK_RC(rma_remote_to_fabric(r, "ofi", addr, sizeof addr, &k, &base),
		 -ENOENT);

	test_fill(lbuf, LEN, 11);
	CHECK_EQ(xfer(init, RMA_OP_PUT, lr, r), LEN);
	CHECK_EQ(test_check_fill(tbuf, LEN, 11), -1);
	test_fill(tbuf, LEN, 12);
	CHECK_EQ(xfer(init, RMA_OP_GET, lr, r), LEN);
	CHECK_EQ(test_check_fill(lbuf, LEN, 12), -1);
	CHECK_EQ(atomic_load(&maps), 1); /* once per key, not per op */
	CHECK_EQ(atomic_load(&unmaps), 0);

	/* Revocation: the owner's REVOKED drops the mapping. */
	CHECK_RC(rma_region_release(tr), 0);
	wait_unmaps(1);
	CHECK_EQ(xfer(init, RMA_OP_PUT, lr, r), -EKEYREJECTED);
	rma_remote_free(r);

	/* A new grant is mapped anew; removing the peer unmaps it. */
	CHECK_RC(rma_region_register(owner, tbuf, LEN, RMA_ACCESS_REMOTE_RW, &tr), 0);
	r = test_remote_of(tr);
	CHECK_EQ(xfer(init, RMA_OP_PUT, lr, r), LEN);
	CHECK_EQ(xfer(init, RMA_OP_GET, lr, r), LEN); /* posted at once, held */
	CHECK_EQ(atomic_load(&maps), 2);
	CHECK_RC(rma_peer_remove(init, r, 5000), 0);
	wait_unmaps(2);

	rma_remote_free(r);
	rma_region_release(lr);
	rma_region_release(tr);
	rma_engine_destroy(init);
	rma_engine_destroy(owner);
	CHECK_EQ(atomic_load(&maps), atomic_load(&unmaps));
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(nlive, 0);
	test_free(tbuf, LEN);
	test_free(lbuf, LEN);
	return 0;
}
