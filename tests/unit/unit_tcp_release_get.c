/*
 * A stream of gets racing the release of their region: once
 * rma_region_release returns, the owner overwrites the memory (it stays
 * allocated, as an application's would), and no get may return the new
 * bytes.  The initiator stops reading for a while, so the target's socket
 * fills and replies wait in its queue when the release comes: large gets of
 * a region that stays (A) alternate with small gets of the one released
 * (R), so the reply being written when the socket filled is almost always
 * one of A's, and R's replies queued behind it must be refused, not sent.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "check.h"
#include "testlib.h"

#define PAIRS 200
#define NOPS (2 * PAIRS)
#define ALEN (256u << 10)
#define RLEN 4096u
#define ASIZE (16 * ALEN)
#define RSIZE (16 * RLEN)
#define OLD 0x5A
#define NEW 0xA7

static uint8_t pattern_a(size_t i)
{
	return (uint8_t)(i * 7 + 3);
}

int main(void)
{
	static uint8_t amem[ASIZE], rmem[RSIZE];
	static struct rma_completion comp[NOPS];
	int r_ok = 0, r_refused = 0;

	test_watchdog(100);
	uint8_t *local = test_alloc((size_t)PAIRS * (ALEN + RLEN));
	for (size_t i = 0; i < ASIZE; i++)
		amem[i] = pattern_a(i);
	rma_engine *t = test_tcp_engine((struct rma_config){0});
	rma_engine *e = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1,
		.queue_depth = 1024});
	rma_region *a, *l;
	CHECK_RC(rma_region_register(t, amem, ASIZE, RMA_ACCESS_REMOTE_READ, &a), 0);
	CHECK_RC(rma_region_register(e, local, (size_t)PAIRS * (ALEN + RLEN), 0, &l), 0);
	rma_remote *ra = test_remote_of(a);

	for (int round = 0; round < 3; round++) {
		rma_region *r;
		memset(rmem, OLD, sizeof rmem);
		memset(local, 0, (size_t)PAIRS * (ALEN + RLEN));
		CHECK_RC(rma_region_register(t, rmem, RSIZE, RMA_ACCESS_REMOTE_READ, &r), 0);
		rma_remote *rr = test_remote_of(r);
		CHECK_RC(rma_peer_connect(e, ra, 5000), 0);

		struct rma_op ops[NOPS];
		for (int i = 0; i < PAIRS; i++) {
			ops[2 * i] = (struct rma_op){
				.kind = RMA_OP_GET, .local = l,
				.local_off = (uint64_t)i * (ALEN + RLEN),
				.remote = ra, .remote_off = (uint64_t)(i % 16) * ALEN,
				.len = ALEN, .user_data = (uint64_t)(2 * i)};
			ops[2 * i + 1] = (struct rma_op){
				.kind = RMA_OP_GET, .local = l,
				.local_off = (uint64_t)i * (ALEN + RLEN) + ALEN,
				.remote = rr, .remote_off = (uint64_t)(i % 16) * RLEN,
				.len = RLEN, .user_data = (uint64_t)(2 * i + 1)};
		}
		CHECK_EQ(rma_post(e, ops, NOPS, 20000, NULL), NOPS);
		/* The requests are out; we do not read, the target stalls. */
		test_sleep_ms(300);
		rma_region_release(r);
		memset(rmem, NEW, sizeof rmem); /* the owner reuses its memory */

		int n = 0;
		int64_t end = test_now_ms() + 30000;
		while (n < NOPS && test_now_ms() < end) {
			rma_progress(e, 10);
			n += rma_poll(e, comp + n, (size_t)(NOPS - n));
		}
		CHECK_EQ(n, NOPS);
		for (int k = 0; k < NOPS; k++) {
			uint64_t i = comp[k].user_data;
			bool is_r = i & 1;
			const uint8_t *p = local + (i / 2) * (ALEN + RLEN) + (is_r ? ALEN : 0);
			size_t len = is_r ? RLEN : ALEN;
			/* Whatever the result, the new bytes never arrive. */
			for (size_t j = 0; is_r && j < len; j++)
				CHECKF(p[j] != NEW, "round %d: get %llu (result %lld) "
				       "returned memory written after release, byte %zu",
				       round, (unsigned long long)i,
				       (long long)comp[k].result, j);
			if (comp[k].result < 0) {
				r_refused += is_r;
				continue;
			}
			CHECK_EQ((uint64_t)comp[k].result, len);
			for (size_t j = 0; j < len; j++) {
				uint8_t want = is_r ? OLD
					       : pattern_a((i / 2 % 16) * ALEN + j);
				CHECKF(p[j] == want, "round %d: get %llu byte %zu: 0x%02x",
				       round, (unsigned long long)i, j, p[j]);
			}
			r_ok += is_r;
		}
		rma_remote_free(rr);
	}
	printf("gets of the released region: %d returned the old bytes, %d failed\n",
	       r_ok, r_refused);
	/* Else the race was never run: the release came after every reply. */
	CHECK(r_refused > 0);
	rma_remote_free(ra);
	rma_region_release(l);
	rma_region_release(a);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	test_free(local, (size_t)PAIRS * (ALEN + RLEN));
	printf("ok\n");
	return 0;
}
