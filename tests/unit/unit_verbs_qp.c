/*
 * unit_verbs_qp.c - the queue-pair module, checked by what it asks of
 * libibverbs.  Every verb it calls is replaced at link time (-Wl,--wrap)
 * with a recorder, so no RDMA device is needed: the tests assert the
 * creation attributes, the attribute masks and values of each transition,
 * the WR chains of chunked ops, credits, and the drain.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "verbs_cmocka.h"

#include "transport/verbs/qp.h"

/* ---- recorders ---- */

static struct ibv_qp fake_qp;
static struct ibv_qp_init_attr got_init;
static int create_calls, destroy_calls;

struct ibv_qp *__wrap_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	create_calls++;
	got_init = *a;
	fake_qp.qp_num = 0x123456;
	return &fake_qp;
}

int __wrap_ibv_destroy_qp(struct ibv_qp *qp)
{
	destroy_calls++;
	return 0;
}

#define MAXMOD 8
static struct ibv_qp_attr mod_attr[MAXMOD];
static int mod_mask[MAXMOD];
static int nmod;
static int mod_fail_at = -1; /* index of the modify call that fails */

int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int i = nmod++;
	if (i < MAXMOD) {
		mod_attr[i] = *a;
		mod_mask[i] = mask;
	}
	return i == mod_fail_at ? EINVAL : 0;
}

static enum ibv_qp_state query_state = IBV_QPS_RTS;
static int query_mask;

int __wrap_ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
			struct ibv_qp_init_attr *ia)
{
	query_mask = mask;
	a->qp_state = query_state;
	return 0;
}

static uint32_t rand_word = 0xaabbccdd;

ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags)
{
	memcpy(buf, &rand_word, n < 4 ? n : 4);
	return (ssize_t)n;
}

#define MAXWR 64
static struct ibv_send_wr posted[MAXWR];
static struct ibv_sge posted_sge[MAXWR];
static int nposted, post_calls;
static int post_fail_after = -1; /* WRs accepted before a failure */

int __wrap_rma__ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			      struct ibv_send_wr **bad)
{
	int k = 0;
	post_calls++;
	for (; wr; wr = wr->next, k++) {
		if (k == post_fail_after) {
			*bad = wr;
			return ENOMEM;
		}
		if (nposted < MAXWR) {
			posted[nposted] = *wr;
			if (wr->num_sge)
				posted_sge[nposted] = wr->sg_list[0];
			nposted++;
		}
	}
	return 0;
}

/* ---- fixtures ---- */

static struct ibv_pd fake_pd;
static struct ibv_cq fake_scq, fake_rcq;
static struct rma__vdom dom;
static struct rma__vcq scq, rcq;
static int dom_released, cq_released;

static void dom_release(struct rma__vdom *d) { dom_released++; }
static void cq_release(struct rma__vcq *c) { cq_released++; }

static int setup(void **state)
{
	memset(&dom, 0, sizeof dom);
	dom.pd = &fake_pd;
	dom.port = 1;
	dom.gid_index = 3;
	memset(dom.gid.raw, 0x11, 16);
	dom.port_attr.active_mtu = IBV_MTU_4096;
	dom.port_attr.lid = 0;
	dom.port_attr.link_layer = IBV_LINK_LAYER_ETHERNET;
	dom.port_attr.max_msg_sz = 1u << 31;
	dom.dev_attr.max_qp_wr = 32768;
	dom.dev_attr.max_qp_rd_atom = 16;
	dom.dev_attr.max_qp_init_rd_atom = 16;
	dom.refs = 1;
	dom.release = dom_release;
	scq = (struct rma__vcq){ .cq = &fake_scq, .refs = 1, .release = cq_release };
	rcq = (struct rma__vcq){ .cq = &fake_rcq, .refs = 1, .release = cq_release };
	dom_released = cq_released = 0;
	create_calls = destroy_calls = 0;
	nmod = 0;
	mod_fail_at = -1;
	nposted = post_calls = 0;
	post_fail_after = -1;
	rand_word = 0xaabbccdd;
	query_state = IBV_QPS_RTS;
	return 0;
}

static void make(struct rma__vqp *q, struct rma__vqp_cfg *cfg)
{
	struct rma__vqp_cfg def;
	if (!cfg) {
		rma__vqp_cfg_default(&def);
		cfg = &def;
	}
	assert_int_equal(rma__vqp_create(q, &dom, &scq, &rcq, cfg), 0);
}

static struct rma__vqp_info peer_info(void)
{
	struct rma__vqp_info p;
	memset(&p, 0, sizeof p);
	p.qp_num = 0xabcdef;
	p.psn = 0x00f00d;
	p.mtu = IBV_MTU_4096;
	p.rd_atomic = 16;
	p.has_gid = true;
	memset(p.gid.raw, 0x22, 16);
	return p;
}

/* ---- tests ---- */

static void test_create_attrs_and_refs(void **state)
{
	struct rma__vqp q;
	make(&q, NULL);
	assert_int_equal(create_calls, 1);
	assert_int_equal(got_init.qp_type, IBV_QPT_RC);
	assert_int_equal(got_init.sq_sig_all, 0);
	assert_ptr_equal(got_init.send_cq, &fake_scq);
	assert_ptr_equal(got_init.recv_cq, &fake_rcq);
	assert_int_equal(got_init.cap.max_send_wr, 512);
	assert_int_equal(got_init.cap.max_send_sge, 1);
	assert_int_equal(got_init.cap.max_inline_data, 0);
	/* The QP holds the domain and both CQs. */
	assert_int_equal(dom.refs, 2);
	assert_int_equal(scq.refs, 2);
	assert_int_equal(rcq.refs, 2);
	/* Owner drops first: nothing is freed while the QP lives. */
	rma__vdom_put(&dom);
	rma__vcq_put(&scq);
	rma__vcq_put(&rcq);
	assert_int_equal(dom_released, 0);
	assert_int_equal(cq_released, 0);
	rma__vqp_destroy(&q);
	assert_int_equal(destroy_calls, 1);
	assert_int_equal(dom_released, 1);
	assert_int_equal(cq_released, 2);
	/* Credits: depth minus the reserve; max message 1 GiB. */
	assert_int_equal(q.depth, 510);
	assert_int_equal(rma__vqp_max_msg(&q), 1ull << 30);
}

static void test_create_caps_by_device(void **state)
{
	struct rma__vqp q;
	dom.dev_attr.max_qp_wr = 100;
	dom.port_attr.max_msg_sz = 1u << 20;
	make(&q, NULL);
	assert_int_equal(got_init.cap.max_send_wr, 100);
	assert_int_equal(q.depth, 98);
	assert_int_equal(rma__vqp_max_msg(&q), 1u << 20);
	rma__vqp_destroy(&q);
}

static void test_psn_random_24_bits(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_info me;
	make(&q, NULL);
	rma__vqp_info(&q, &me);
	assert_int_equal(me.psn, 0xaabbccdd & 0xffffff);
	assert_int_equal(me.qp_num, 0x123456);
	assert_true(me.has_gid);
	assert_memory_equal(me.gid.raw, dom.gid.raw, 16);
	assert_int_equal(me.mtu, IBV_MTU_4096);
	assert_int_equal(me.rd_atomic, 16);
	rma__vqp_destroy(&q);
}

static void test_connect_transitions(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_info p = peer_info();
	make(&q, NULL);
	assert_int_equal(rma__vqp_connect(&q, &p), 0);
	assert_int_equal(nmod, 3);

	assert_int_equal(mod_mask[0], IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	assert_int_equal(mod_attr[0].qp_state, IBV_QPS_INIT);
	assert_int_equal(mod_attr[0].pkey_index, 0);
	assert_int_equal(mod_attr[0].port_num, 1);
	assert_int_equal(mod_attr[0].qp_access_flags,
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);

	assert_int_equal(mod_mask[1], IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	assert_int_equal(mod_attr[1].qp_state, IBV_QPS_RTR);
	assert_int_equal(mod_attr[1].path_mtu, IBV_MTU_4096);
	assert_int_equal(mod_attr[1].dest_qp_num, 0xabcdef);
	assert_int_equal(mod_attr[1].rq_psn, 0x00f00d);
	assert_int_equal(mod_attr[1].max_dest_rd_atomic, 16);
	assert_int_equal(mod_attr[1].min_rnr_timer, 12);
	assert_int_equal(mod_attr[1].ah_attr.port_num, 1);
	assert_int_equal(mod_attr[1].ah_attr.is_global, 1);
	assert_int_equal(mod_attr[1].ah_attr.grh.sgid_index, 3);
	assert_int_equal(mod_attr[1].ah_attr.grh.hop_limit, 0xff);
	assert_memory_equal(mod_attr[1].ah_attr.grh.dgid.raw, p.gid.raw, 16);

	assert_int_equal(mod_mask[2], IBV_QP_STATE | IBV_QP_TIMEOUT |
			 IBV_QP_RETRY_CNT | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY |
			 IBV_QP_MAX_QP_RD_ATOMIC);
	assert_int_equal(mod_attr[2].qp_state, IBV_QPS_RTS);
	assert_int_equal(mod_attr[2].sq_psn, 0xbbccdd);
	assert_int_equal(mod_attr[2].timeout, 14);
	assert_int_equal(mod_attr[2].retry_cnt, 7);
	assert_int_equal(mod_attr[2].rnr_retry, 7);
	assert_int_equal(mod_attr[2].max_rd_atomic, 16);
	rma__vqp_destroy(&q);
}

static void test_connect_caps(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_info p = peer_info();

	/* The port's active MTU caps 4096. */
	dom.port_attr.active_mtu = IBV_MTU_1024;
	make(&q, NULL);
	assert_int_equal(rma__vqp_connect(&q, &p), 0);
	assert_int_equal(mod_attr[1].path_mtu, IBV_MTU_1024);
	rma__vqp_destroy(&q);

	/* The peer's MTU caps it too; the device caps read depths; the
	 * peer's responder depth caps ours. */
	nmod = 0;
	dom.port_attr.active_mtu = IBV_MTU_4096;
	dom.dev_attr.max_qp_rd_atom = 4;
	dom.dev_attr.max_qp_init_rd_atom = 8;
	p.mtu = IBV_MTU_2048;
	p.rd_atomic = 2;
	make(&q, NULL);
	assert_int_equal(rma__vqp_connect(&q, &p), 0);
	assert_int_equal(mod_attr[1].path_mtu, IBV_MTU_2048);
	assert_int_equal(mod_attr[1].max_dest_rd_atomic, 4);
	assert_int_equal(mod_attr[2].max_rd_atomic, 2);
	rma__vqp_destroy(&q);
}

static void test_connect_ib_lid(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_info p = peer_info();
	dom.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
	dom.gid_index = -1;
	dom.port_attr.lid = 7;
	p.has_gid = false;
	p.lid = 9;
	make(&q, NULL);
	assert_int_equal(rma__vqp_connect(&q, &p), 0);
	assert_int_equal(mod_attr[1].ah_attr.dlid, 9);
	assert_int_equal(mod_attr[1].ah_attr.is_global, 0);
	rma__vqp_destroy(&q);
}

static void test_connect_fails_midway(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_info p = peer_info();
	make(&q, NULL);
	mod_fail_at = 1; /* RTR refused */
	assert_int_equal(rma__vqp_connect(&q, &p), -EINVAL);
	assert_int_equal(nmod, 2); /* never tried RTS */
	rma__vqp_destroy(&q);
}

static void test_connect_roce_needs_gid(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_info p = peer_info();
	p.has_gid = false;
	make(&q, NULL);
	assert_int_equal(rma__vqp_connect(&q, &p), -EHOSTUNREACH);
	assert_int_equal(nmod, 0);
	rma__vqp_destroy(&q);
}

static void test_state_query(void **state)
{
	struct rma__vqp q;
	make(&q, NULL);
	query_state = IBV_QPS_ERR;
	assert_int_equal(rma__vqp_state(&q), IBV_QPS_ERR);
	assert_int_equal(query_mask, IBV_QP_STATE);
	query_state = IBV_QPS_RTR;
	assert_int_equal(rma__vqp_state(&q), IBV_QPS_RTR);
	rma__vqp_destroy(&q);
}

static void test_put_chunked(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_cfg cfg;
	uint64_t first = 0, last = 0;
	int i;

	rma__vqp_cfg_default(&cfg);
	cfg.max_msg_size = 4096;
	make(&q, &cfg);
	assert_int_equal(rma__vqp_put(&q, (struct rma__vseg){ 0x10000, 0x55 },
				      (struct rma__vseg){ 0x900000, 0x77 },
				      4096 * 2 + 100, false, &first, &last), 3);
	assert_int_equal(post_calls, 1);
	assert_int_equal(nposted, 3);
	assert_int_equal(last - first, 2);
	for (i = 0; i < 3; i++) {
		assert_int_equal(posted[i].opcode, IBV_WR_RDMA_WRITE);
		assert_int_equal(posted[i].wr_id, first + i);
		assert_int_equal(posted[i].num_sge, 1);
		assert_int_equal(posted_sge[i].addr, 0x10000 + 4096 * i);
		assert_int_equal(posted_sge[i].lkey, 0x55);
		assert_int_equal(posted[i].wr.rdma.remote_addr, 0x900000 + 4096 * i);
		assert_int_equal(posted[i].wr.rdma.rkey, 0x77);
		assert_int_equal(posted_sge[i].length, i < 2 ? 4096 : 100);
		/* Only the op's last WR asks for a completion. */
		assert_int_equal(!!(posted[i].send_flags & IBV_SEND_SIGNALED), i == 2);
		assert_int_equal(posted[i].send_flags & IBV_SEND_FENCE, 0);
	}
	assert_int_equal(rma__vqp_credits(&q), 510 - 3);
	rma__vqp_destroy(&q);
}

static void test_get_read_fence(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_cfg cfg;
	uint64_t first = 0, last = 0;

	rma__vqp_cfg_default(&cfg);
	cfg.max_msg_size = 1000;
	make(&q, &cfg);
	assert_int_equal(rma__vqp_get(&q, (struct rma__vseg){ 0x2000, 1 },
				      (struct rma__vseg){ 0x3000, 2 }, 2000,
				      true, &first, &last), 2);
	assert_int_equal(posted[0].opcode, IBV_WR_RDMA_READ);
	assert_int_equal(posted[1].opcode, IBV_WR_RDMA_READ);
	assert_true(posted[0].send_flags & IBV_SEND_FENCE);
	assert_false(posted[1].send_flags & IBV_SEND_FENCE);
	assert_int_equal(posted_sge[1].addr, 0x2000 + 1000);
	assert_int_equal(posted[1].wr.rdma.remote_addr, 0x3000 + 1000);
	rma__vqp_destroy(&q);
}

static void test_credits_and_retire(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_cfg cfg;
	uint64_t f[4], l[4];
	struct rma__vseg a = { 0x1000, 1 }, b = { 0x2000, 2 };

	rma__vqp_cfg_default(&cfg);
	cfg.max_send_wr = 10; /* depth 8 after the reserve of 2 */
	cfg.max_msg_size = 100;
	make(&q, &cfg);
	assert_int_equal(rma__vqp_put(&q, a, b, 300, false, &f[0], &l[0]), 3);
	assert_int_equal(rma__vqp_put(&q, a, b, 400, false, &f[1], &l[1]), 4);
	assert_int_equal(rma__vqp_credits(&q), 1);
	/* Two WRs do not fit in one slot: nothing is posted. */
	assert_int_equal(rma__vqp_put(&q, a, b, 200, false, &f[2], &l[2]), -EAGAIN);
	assert_int_equal(nposted, 7);
	/* One op bigger than the queue can never go. */
	assert_int_equal(rma__vqp_put(&q, a, b, 900, false, &f[2], &l[2]), -EMSGSIZE);
	/* The first op's completion frees its three slots. */
	rma__vqp_retire(&q, l[0]);
	assert_int_equal(rma__vqp_credits(&q), 4);
	assert_int_equal(rma__vqp_put(&q, a, b, 200, false, &f[2], &l[2]), 2);
	/* A stale or repeated completion changes nothing. */
	rma__vqp_retire(&q, l[0]);
	assert_int_equal(rma__vqp_credits(&q), 2);
	rma__vqp_retire(&q, l[2]);
	assert_int_equal(rma__vqp_credits(&q), 8);
	rma__vqp_destroy(&q);
}

static void test_zero_length_posts_one(void **state)
{
	struct rma__vqp q;
	uint64_t f, l;
	make(&q, NULL);
	assert_int_equal(rma__vqp_put(&q, (struct rma__vseg){ 0, 0 },
				      (struct rma__vseg){ 0x5000, 9 }, 0, false,
				      &f, &l), 1);
	assert_int_equal(nposted, 1);
	assert_int_equal(posted[0].num_sge, 0);
	assert_true(posted[0].send_flags & IBV_SEND_SIGNALED);
	assert_int_equal(f, l);
	rma__vqp_destroy(&q);
}

static void test_post_partial_failure(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_cfg cfg;
	uint64_t f = 0, l = 0, head;
	rma__vqp_cfg_default(&cfg);
	cfg.max_msg_size = 10;
	make(&q, &cfg);
	head = q.head;
	post_fail_after = 1;
	assert_int_equal(rma__vqp_put(&q, (struct rma__vseg){ 0x100, 1 },
				      (struct rma__vseg){ 0x200, 2 }, 30, false,
				      &f, &l), -ENOMEM);
	/* The one WR that went out keeps its slot until retired. */
	assert_int_equal(q.head, head + 1);
	assert_int_equal(rma__vqp_credits(&q), 509);
	rma__vqp_destroy(&q);
}

static void test_drain_marker(void **state)
{
	struct rma__vqp q;
	struct rma__vqp_cfg cfg;
	uint64_t f, l;
	rma__vqp_cfg_default(&cfg);
	cfg.max_send_wr = 4; /* depth 2 */
	make(&q, &cfg);
	assert_int_equal(rma__vqp_put(&q, (struct rma__vseg){ 0x100, 1 },
				      (struct rma__vseg){ 0x200, 2 }, 8, false,
				      &f, &l), 1);
	assert_int_equal(rma__vqp_put(&q, (struct rma__vseg){ 0x100, 1 },
				      (struct rma__vseg){ 0x200, 2 }, 8, false,
				      &f, &l), 1);
	assert_int_equal(rma__vqp_credits(&q), 0);
	/* Full queue: the marker still goes, in the reserve. */
	assert_int_equal(rma__vqp_drain(&q), 0);
	assert_int_equal(nmod, 1);
	assert_int_equal(mod_mask[0], IBV_QP_STATE);
	assert_int_equal(mod_attr[0].qp_state, IBV_QPS_ERR);
	assert_int_equal(nposted, 3);
	assert_int_equal(posted[2].wr_id, q.marker);
	assert_true(posted[2].send_flags & IBV_SEND_SIGNALED);
	assert_true(q.marker > l);
	/* The marker's flushed completion ends the drain. */
	rma__vqp_retire(&q, l);
	assert_int_not_equal(q.marker, 0);
	rma__vqp_retire(&q, posted[2].wr_id);
	assert_int_equal(q.marker, 0);
	rma__vqp_destroy(&q);
}

static void test_info_codec(void **state)
{
	struct rma__vqp_info a = peer_info(), b;
	uint8_t buf[RMA__VQP_INFO_LEN];
	a.lid = 0x1234;
	rma__vqp_info_encode(&a, buf);
	/* Little-endian on the wire, whatever the host. */
	assert_int_equal(buf[0], 0xef);
	assert_int_equal(buf[2], 0xab);
	assert_int_equal(buf[8], 0x34);
	assert_int_equal(rma__vqp_info_decode(buf, sizeof buf, &b), 0);
	assert_int_equal(b.qp_num, a.qp_num);
	assert_int_equal(b.psn, a.psn);
	assert_int_equal(b.lid, a.lid);
	assert_int_equal(b.mtu, a.mtu);
	assert_int_equal(b.rd_atomic, a.rd_atomic);
	assert_true(b.has_gid);
	assert_memory_equal(b.gid.raw, a.gid.raw, 16);
	/* Wrong length, a QP number over 24 bits, a bad MTU, a bad flag. */
	assert_int_equal(rma__vqp_info_decode(buf, sizeof buf - 1, &b), -EBADMSG);
	buf[3] = 1;
	assert_int_equal(rma__vqp_info_decode(buf, sizeof buf, &b), -EBADMSG);
	buf[3] = 0;
	buf[10] = 6;
	assert_int_equal(rma__vqp_info_decode(buf, sizeof buf, &b), -EBADMSG);
	buf[10] = IBV_MTU_4096;
	buf[12] = 2;
	assert_int_equal(rma__vqp_info_decode(buf, sizeof buf, &b), -EBADMSG);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_create_attrs_and_refs, setup),
		cmocka_unit_test_setup(test_create_caps_by_device, setup),
		cmocka_unit_test_setup(test_psn_random_24_bits, setup),
		cmocka_unit_test_setup(test_connect_transitions, setup),
		cmocka_unit_test_setup(test_connect_caps, setup),
		cmocka_unit_test_setup(test_connect_ib_lid, setup),
		cmocka_unit_test_setup(test_connect_fails_midway, setup),
		cmocka_unit_test_setup(test_connect_roce_needs_gid, setup),
		cmocka_unit_test_setup(test_state_query, setup),
		cmocka_unit_test_setup(test_put_chunked, setup),
		cmocka_unit_test_setup(test_get_read_fence, setup),
		cmocka_unit_test_setup(test_credits_and_retire, setup),
		cmocka_unit_test_setup(test_zero_length_posts_one, setup),
		cmocka_unit_test_setup(test_post_partial_failure, setup),
		cmocka_unit_test_setup(test_drain_marker, setup),
		cmocka_unit_test_setup(test_info_codec, setup),
	};
	return rma_verbs_run(tests, sizeof tests / sizeof tests[0], argc, argv);
}
