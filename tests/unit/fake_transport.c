#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

struct fake_state fake;

static void trace(char c)
{
	if (fake.ntrace < sizeof fake.trace - 1)
		fake.trace[fake.ntrace++] = c;
}

struct fake_peer {
	struct rma__peer base;
};

static const struct rma__topt_desc f_options[] = {
	{"level", "tcp|nic|memory (default memory)"},
	{"poll", "MS: no fd, poll every MS milliseconds"},
	{NULL, NULL},
};

static int f_probe(const char **why)
{
	*why = "test fake";
	return 0;
}

static int f_init(struct rma_engine *e, const struct rma__topts *o,
		  struct rma__transport **out)
{
	const char *lvl = rma__topt(o, "level");
	unsigned long poll_ms = 0;
	struct rma__transport *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	t->engine = e;
	if (rma__topt_uint(o, "poll", 1, 1000, &poll_ms) < 0) {
		free(t);
		return -EINVAL;
	}
	t->poll_ns = (int64_t)poll_ms * 1000000;
	if (lvl)
		t->level = !strcmp(lvl, "tcp") ? RMA_LEVEL_TCP
			   : !strcmp(lvl, "nic") ? RMA_LEVEL_NIC : RMA_LEVEL_MEMORY;
	*out = t;
	return 0;
}

static void f_fini(struct rma__transport *t)
{
	free(t);
}

static int f_mem_reg(struct rma__transport *t, struct rma_region *r)
{
	if (fake.decline_regions)
		return RMA__DECLINE;
	fake.mem_regs++;
	trace('R');
	/* The descriptor xfers carry back as ldesc. */
	*rma__region_slot(r, t) = rma__region_addr(r);
	return 0;
}

static void f_mem_dereg(struct rma__transport *t, struct rma_region *r)
{
	fake.mem_deregs++;
	trace('D');
}

static int f_grant_add(struct rma__transport *t, struct rma__grant *g)
{
	if (fake.decline_grants)
		return RMA__DECLINE;
	fake.grant_adds++;
	return 0;
}

static void f_grant_remove(struct rma__transport *t, struct rma__grant *g)
{
	fake.grant_removes++;
}

/* Blob: u64 magic | u64 base.  For the engine address (g NULL) just the
 * magic. */
static int f_ad_pack(struct rma__transport *t, const struct rma__grant *g,
		     void *buf, size_t cap)
{
	uint8_t *b = buf;
	size_t need = g ? 16 : 8;
	if (cap < need)
		return -ENOSPC;
	rma__put_le64(b, 0xFA4EFA4EFA4EFA4EULL);
	if (g)
		rma__put_le64(b + 8, FAKE_BASE + rma__grant_off(g));
	return (int)need;
}

/* A plain fabric peer's blob: u64 magic | u64 key | u64 base | address. */
#define FAKE_PLAIN_MAGIC 0x9A1A9A1A9A1A9A1AULL

static int f_fabric_pack(const struct rma__topts *o, const void *addr,
			 size_t addrlen, uint64_t key, uint64_t base, void *buf,
			 size_t cap)
{
	uint8_t *b = buf;
	if (cap < 24 + addrlen)
		return -ENOSPC;
	rma__put_le64(b, FAKE_PLAIN_MAGIC);
	rma__put_le64(b + 8, key);
	rma__put_le64(b + 16, base);
	memcpy(b + 24, addr, addrlen);
	return (int)(24 + addrlen);
}

/* Only plain blobs carry a triple here; an owner's is declined. */
static int f_fabric_unpack(const struct rma__topts *o, const void *blob,
			   size_t len, void *addr, size_t cap, uint64_t *key,
			   uint64_t *base)
{
	const uint8_t *b = blob;
	if (len < 24 || rma__le64(b) != FAKE_PLAIN_MAGIC)
		return RMA__DECLINE;
	if (len - 24 > cap)
		return -ENOSPC;
	*key = rma__le64(b + 8);
	*base = rma__le64(b + 16);
	memcpy(addr, b + 24, len - 24);
	return (int)(len - 24);
}

static int f_ad_parse(const void *blob, size_t len, uint64_t core_key,
		      struct rma__rkey *rk)
{
	const uint8_t *b = blob;
	if (len > 24 && rma__le64(b) == FAKE_PLAIN_MAGIC) {
		rk->key = rma__le64(b + 8);
		rk->base = rma__le64(b + 16);
		return 0;
	}
	if (len != 16 || rma__le64(b) != 0xFA4EFA4EFA4EFA4EULL)
		return -EBADMSG;
	rk->key = core_key;
	rk->base = rma__le64(b + 8);
	return 0;
}

static int f_reachable(struct rma__transport *t, const void *blob, size_t len)
{
	return fake.unreachable ? RMA__DECLINE : 0;
}

static int f_connect(struct rma__transport *t, const void *blob, size_t len,
		     uint64_t engine_id, struct rma__peer **out)
{
	if (fake.connect_err)
		return fake.connect_err;
	struct fake_peer *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	const struct rma__engine_params *par = rma__engine_params(t->engine);
	p->base.max_msg = par->max_msg_size ? par->max_msg_size : FAKE_MAX_MSG;
	p->base.credits = fake.credits;
	fake.peer_max_msg = p->base.max_msg;
	fake.connects++;
	fake.peer = &p->base;
	*out = &p->base;
	if (fake.fail_connect)
		rma__peer_failed(&p->base, fake.fail_connect);
	else if (!fake.defer_ready)
		rma__peer_ready(&p->base);
	return 0;
}

static void f_disconnect(struct rma__peer *p, int err)
{
	struct rma_engine *e = p->t->engine;
	fake.disconnects++;
	if (fake.peer == p)
		fake.peer = NULL;
	for (unsigned i = 0; i < fake.nxfers; i++)
		if (fake.xfers[i].state == FAKE_POSTED && fake.xfers[i].peer == p) {
			fake.xfers[i].state = FAKE_DONE;
			fake.outstanding--;
			rma__xfer_done(e, fake.xfers[i].x.op_id,
				       fake.xfers[i].x.len, err);
		}
	free(container_of(p, struct fake_peer, base));
}

static int f_post(struct rma__peer *p, const struct rma__xfer *x)
{
	if (fake.post_blocked || fake.post_eagain) {
		if (fake.post_eagain)
			fake.post_eagain--;
		fake.eagains++;
		return -EAGAIN;
	}
	if (fake.nxfers == FAKE_MAX_XFERS)
		FAIL("fake transport: more than %d xfers posted", FAKE_MAX_XFERS);
	fake.xfers[fake.nxfers].x = *x;
	fake.xfers[fake.nxfers].peer = p;
	fake.xfers[fake.nxfers].state = FAKE_POSTED;
	fake.nxfers++;
	trace('P');
	fake.outstanding++;
	if (fake.outstanding > fake.max_outstanding)
		fake.max_outstanding = fake.outstanding;
	return 0;
}

static int f_post_now(struct rma__peer *p, const struct rma__xfer *x)
{
	if (!fake.take_now) {
		fake.now_declined++;
		return RMA__DECLINE;
	}
	if (fake.nnow < RMA_ARRAY_SIZE(fake.now))
		fake.now[fake.nnow] = *x;
	fake.nnow++;
	trace('N');
	return 0;
}

static void f_flush(struct rma__peer *p)
{
	fake.flushes++;
	trace('F');
}

static int f_abort(struct rma__peer *p, uint64_t op_id, int err)
{
	if (fake.aborts < RMA_ARRAY_SIZE(fake.abort_err)) {
		fake.abort_err[fake.aborts] = err;
		fake.abort_op[fake.aborts] = op_id;
	}
	fake.aborts++;
	for (unsigned i = 0; fake.abort_sync && i < fake.nxfers; i++) {
		struct fake_xfer *f = &fake.xfers[i];
		if (f->state != FAKE_POSTED ||
		    (fake.abort_sync == 1 && f->x.op_id != op_id))
			continue;
		f->state = FAKE_DONE;
		fake.outstanding--;
		rma__xfer_done(p->t->engine, f->x.op_id, f->x.len, -ECONNRESET);
	}
	return fake.abort_pending ? RMA__ABORT_PENDING : 0;
}

static void f_progress(struct rma__transport *t)
{
	fake.progresses++;
	if (__atomic_load_n(&fake.mark_set, __ATOMIC_ACQUIRE) &&
	    pthread_equal(pthread_self(), fake.mark))
		fake.progress_on_mark++;
	if (fake.defer_ready && fake.peer &&
	    fake.peer->state == RMA__PEER_CONNECTING)
		rma__peer_ready(fake.peer);
}

static int f_arm(struct rma__transport *t)
{
	fake.arms++;
	return 0;
}

static void f_revoke(struct rma__transport *t, struct rma_region *r)
{
	fake.revokes++;
}

/* Raw handles of a peer: the peer itself. */
static int f_peer_raw(struct rma__peer *p, void *out, size_t cap)
{
	fake.peer_raws++;
	if (cap < sizeof p)
		return -ENOSPC;
	memcpy(out, &p, sizeof p);
	return (int)sizeof p;
}

static const struct rma__transport_ops fake_ops = {
	.name = "fake",
	.caps = RMA__CAP_PEER_RAW,
	.level = RMA_LEVEL_MEMORY,
	.wire_id = FAKE_WIRE_ID,
	.options = f_options,
	.probe = f_probe,
	.init = f_init,
	.fini = f_fini,
	.mem_reg = f_mem_reg,
	.mem_dereg = f_mem_dereg,
	.grant_add = f_grant_add,
	.grant_remove = f_grant_remove,
	.ad_pack = f_ad_pack,
	.ad_parse = f_ad_parse,
	.reachable = f_reachable,
	.connect = f_connect,
	.disconnect = f_disconnect,
	.post = f_post,
	.post_now = f_post_now,
	.flush = f_flush,
	.abort = f_abort,
	.progress = f_progress,
	.arm = f_arm,
	.revoke = f_revoke,
	.peer_raw = f_peer_raw,
	.fabric_pack = f_fabric_pack,
	.fabric_unpack = f_fabric_unpack,
};

void fake_register(void)
{
	CHECK_RC(rma__registry_add(&fake_ops), 0);
}

void fake_reset(int defer_ready)
{
	memset(&fake, 0, sizeof fake);
	fake.defer_ready = defer_ready;
}

rma_engine *fake_engine(unsigned queue_depth)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "fake";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	cfg.queue_depth = queue_depth;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

void fake_complete(rma_engine *e, unsigned i, int res)
{
	CHECKF(i < fake.nxfers && fake.xfers[i].state == FAKE_POSTED,
	       "xfer %u is not outstanding (%u posted)", i, fake.nxfers);
	fake.xfers[i].state = FAKE_DONE;
	fake.outstanding--;
	pthread_mutex_lock(&e->mu);
	rma__xfer_done(e, fake.xfers[i].x.op_id, fake.xfers[i].x.len, res);
	pthread_mutex_unlock(&e->mu);
	rma_progress(e, 0);
}

unsigned fake_complete_all(rma_engine *e, int res)
{
	unsigned n = 0;
	for (unsigned i = 0; i < fake.nxfers; i++)
		if (fake.xfers[i].state == FAKE_POSTED) {
			fake_complete(e, i, res);
			n++;
		}
	return n;
}

void fake_kick(rma_engine *e)
{
	pthread_mutex_lock(&e->mu);
	CHECK(fake.peer != NULL);
	rma__peer_kick(fake.peer);
	pthread_mutex_unlock(&e->mu);
}

char *fake_op_buf(rma_engine *e, unsigned i)
{
	const struct rma__xfer *x = &fake.xfers[i].x;
	pthread_mutex_lock(&e->mu);
	char *p = rma__op_buf(e, x->op_id, x->raddr, x->len);
	pthread_mutex_unlock(&e->mu);
	return p;
}

int fake_op_live(rma_engine *e, unsigned i)
{
	pthread_mutex_lock(&e->mu);
	int live = rma__op_live(e, fake.xfers[i].x.op_id);
	pthread_mutex_unlock(&e->mu);
	return live;
}

int fake_wait_one(rma_engine *e, struct rma_completion *c, int timeout_ms)
{
	int64_t end = test_now_ms() + timeout_ms;
	for (;;) {
		int n = rma_poll(e, c, 1);
		CHECK_OK(n);
		if (n == 1)
			return 1;
		if (test_now_ms() >= end)
			return 0;
		CHECK_OK(rma_progress(e, 10));
	}
}

rma_remote *fake_remote(rma_region *r, uint64_t off, uint64_t len)
{
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	rma_remote *rem;
	int n = rma_advertise(r, off, len, 0, ad, sizeof ad);
	CHECK_OK(n);
	CHECK_RC(rma_remote_decode(ad, (size_t)n, &rem), 0);
	return rem;
}
