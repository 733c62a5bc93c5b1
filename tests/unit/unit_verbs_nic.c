/*
 * unit_verbs_nic.c - what the NIC itself refuses, past the core's checks.
 *
 * An initiator engine (manual progress, so its CQ is the test's to poll)
 * connects to a target engine as any peer would; the test then posts its
 * own RDMA WRITEs and READs on that engine's QP with the rkeys and
 * addresses the target's advertisements carry, as an attacker holding a
 * token would: a write with a read-only grant's rkey, bytes outside a
 * sub-window, and any op after rma_region_release returned must each
 * complete with IBV_WC_REM_ACCESS_ERR, and the target's memory must not
 * change.  After each refusal the engine replaces its QP and the next
 * op through the API succeeds.  Needs a device (77 without; fails
 * instead with RMA_TEST_REQUIRE set, as in the soft-RoCE guest).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rma.h"
#include "testlib.h"

#include "core/core.h"
#include "transport/verbs/verbs.h"

#define LEN (64 << 10)
#define WIN_OFF 16384
#define WIN_LEN 4096

static rma_engine *owner;
static char *obuf;

/* The engine's verbs peer for r, connected. */
static struct vb_peer *peer_of(rma_engine *e, const rma_remote *r)
{
	const struct rma__transport_ops *vops = rma__transport_by_name("verbs", 5);
	CHECK_RC(rma_peer_connect(e, r, 10000), 0);
	for (unsigned i = 0; i < e->ntr; i++) {
		struct rma__peer *p;
		if (e->tr[i]->ops != vops)
			continue;
		p = rma__peer_find(e, r->engine_id, e->tr[i]);
		CHECK(p && p->state == RMA__PEER_READY);
		return container_of(p, struct vb_peer, base);
	}
	FAIL("no verbs instance in the initiator");
}

/* One raw WR on p's QP, addressed by hand; its completion's status. */
static enum ibv_wc_status raw_op(struct vb_peer *p, enum ibv_wr_opcode opc,
				 char *local, struct ibv_mr *mr, uint64_t raddr,
				 uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len,
			       .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 0x5eed, .sg_list = &sge,
				  .num_sge = 1, .opcode = opc,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;
	int64_t end = test_now_ms() + 10000;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	CHECK_RC(ibv_post_send(p->qp.qp, &wr, &bad), 0);
	while (test_now_ms() < end) {
		int n = ibv_poll_cq(p->vt->cq->cq, 1, &wc);
		CHECK(n >= 0);
		if (n == 1 && wc.wr_id == 0x5eed)
			return wc.status;
		if (!n)
			test_sleep_ms(1);
	}
	FAIL("no completion for the raw op");
}

static rma_remote *token(rma_region *r, uint64_t off, uint64_t len, unsigned acc)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_remote *rem;
	CHECK(rma_advertise_text(r, off, len, acc, tok, sizeof tok) > 0);
	CHECK_RC(rma_remote_parse(tok, &rem), 0);
	return rem;
}

struct attempt {
	const char *what;
	enum ibv_wr_opcode opc;
	int64_t delta;     /* from the grant's base */
	uint32_t len;
};

/* Each attempt from a fresh initiator (a refused op takes its QP down);
 * then an API op through a replaced QP of that same engine works. */
static void refused(rma_remote *rem, const struct attempt *a, rma_remote *good)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_region *lr;
	char *lbuf = test_alloc(LEN);
	struct rma_completion c;

	rma_config_init(&cfg);
	cfg.transports = "verbs";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	CHECK_RC(rma_region_register(e, lbuf, LEN, 0, &lr), 0);
	struct vb_peer *p = peer_of(e, rem);
	struct ibv_mr *mr = ibv_reg_mr(p->vt->dom->pd, lbuf, LEN,
				       IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr);
	uint32_t before = rma_crc32c(0, obuf, LEN);
	test_fill(lbuf, LEN, 99);
	uint64_t raddr = rem->ent[0].rk.base + (uint64_t)a->delta;
	enum ibv_wc_status st = raw_op(p, a->opc, lbuf, mr, raddr,
				       (uint32_t)rem->ent[0].rk.key, a->len);
	CHECKF(st == IBV_WC_REM_ACCESS_ERR, "%s: completed with %s, not a "
	       "remote access error", a->what, ibv_wc_status_str(st));
	test_sleep_ms(50);
	CHECKF(rma_crc32c(0, obuf, LEN) == before, "%s: the target's memory "
	       "changed", a->what);
	ibv_dereg_mr(mr);

	/* The QP is in error; the engine finds it so, drains and replaces
	 * it, and the API's next op works. */
	if (good) {
		struct rma_op op = { .kind = RMA_OP_GET, .local = lr,
				     .remote = good, .len = WIN_LEN };
		int64_t got = -1, end = test_now_ms() + 20000;
		while (got != WIN_LEN && test_now_ms() < end) {
			CHECK_RC(rma_post(e, &op, 1, 5000, NULL), 1);
			while (rma_poll(e, &c, 1) == 0)
				rma_progress(e, 10);
			got = c.result;
		}
		CHECKF(got == WIN_LEN, "%s: the next get gave %lld", a->what,
		       (long long)got);
	}
	rma_region_release(lr);
	rma_engine_destroy(e);
	test_free(lbuf, LEN);
	printf("ok: %s refused at the NIC\n", a->what);
}

int main(void)
{
	struct rma_transport_info ti[8];
	int n = rma_transports(ti, 8), i;
	struct rma_config cfg;
	rma_region *reg;

	test_watchdog(120);
	for (i = 0; i < n && i < 8; i++)
		if (!strcmp(ti[i].name, "verbs"))
			break;
	if ((i == n || i == 8 || !ti[i].available) && getenv("RMA_TEST_REQUIRE"))
		FAIL("verbs unavailable (RMA_TEST_REQUIRE is set)");
	if (i == n || i == 8 || !ti[i].available)
		SKIP("verbs unavailable: %s", i < n && i < 8 ? ti[i].detail : "not built");

	rma_config_init(&cfg);
	cfg.transports = "verbs";
	CHECK_RC(rma_engine_create(&cfg, &owner), 0);
	obuf = test_alloc(LEN);
	test_fill(obuf, LEN, 5);
	CHECK_RC(rma_region_register(owner, obuf, LEN, RMA_ACCESS_REMOTE_RW, &reg), 0);
	rma_remote *ro = token(reg, 0, 0, RMA_ACCESS_REMOTE_READ);
	rma_remote *win = token(reg, WIN_OFF, WIN_LEN, RMA_ACCESS_REMOTE_RW);
	rma_remote *rw = token(reg, 0, 0, RMA_ACCESS_REMOTE_RW);

	static const struct attempt ro_write = { "a write with a read-only rkey",
						 IBV_WR_RDMA_WRITE, 0, 64 };
	static const struct attempt win_cases[] = {
		{ "a write before a sub-window", IBV_WR_RDMA_WRITE, -64, 64 },
		{ "a write past a sub-window", IBV_WR_RDMA_WRITE, WIN_LEN, 64 },
		{ "a write straddling a sub-window's end", IBV_WR_RDMA_WRITE,
		  WIN_LEN - 32, 64 },
		{ "a read past a sub-window", IBV_WR_RDMA_READ, WIN_LEN, 64 },
	};
	refused(ro, &ro_write, win);
	for (size_t k = 0; k < sizeof win_cases / sizeof win_cases[0]; k++)
		refused(win, &win_cases[k], ro);

	/* After release returns, its rkeys reach nothing: neither writes nor
	 * reads, and the memory stays as release left it. */
	rma_remote_free(ro);
	rma_remote_free(win);
	static const struct attempt after[] = {
		{ "a write after release", IBV_WR_RDMA_WRITE, 0, 4096 },
		{ "a read after release", IBV_WR_RDMA_READ, 0, 4096 },
	};
	CHECK_RC(rma_region_release(reg), 0);
	memset(obuf, 0, LEN);
	for (size_t k = 0; k < sizeof after / sizeof after[0]; k++)
		refused(rw, &after[k], NULL);
	for (size_t k = 0; k < LEN; k++)
		CHECKF(!obuf[k], "byte %zu changed after release", k);
	rma_remote_free(rw);
	rma_engine_destroy(owner);
	puts("ok");
	return 0;
}
