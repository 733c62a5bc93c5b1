/*
 * A connection reads at most 16 MiB per wake-up.  Bytes already staged when
 * the budget runs out must still be parsed: here a GET reply just short of
 * 16 MiB is followed by a PUT_ACK that arrives in the same read, and nothing
 * else will ever wake the connection.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testlib.h"

int main(void)
{
	const size_t big = 32 << 20;
	rma_region *tr, *ir;
	rma_remote *rem;

	test_watchdog(60);
	/* One connection, and the GET is one chunk. */
	rma_engine *t = test_tcp_engine((struct rma_config){
		.stripes = 1, .max_msg_size = big});
	rma_engine *e = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1, .max_msg_size = big});
	char *tb = test_alloc(big), *ib = test_alloc(big);
	memset(tb, 1, big);
	memset(ib, 2, big);
	CHECK_RC(rma_region_register(t, tb, big, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(e, ib, big, 0, &ir), 0);
	rem = test_remote_of(tr);
	CHECK_RC(rma_peer_connect(e, rem, 5000), 0);

	for (uint64_t slack = 4; slack <= 36; slack += 8) {
		/* 40-byte GET_RESP header + n1 payload + slack = 16 MiB: the
		 * 40-byte PUT_ACK straddles the end of the budget. */
		uint64_t n1 = (16u << 20) - 40 - slack;
		struct rma_op ops[2] = {
			{.kind = RMA_OP_GET, .local = ir, .remote = rem, .len = n1,
			 .user_data = 1},
			{.kind = RMA_OP_PUT, .local = ir, .local_off = n1,
			 .remote = rem, .remote_off = n1, .len = 1, .user_data = 2},
		};
		CHECK_RC(rma_post(e, ops, 2, 5000, NULL), 2);
		test_sleep_ms(300); /* both replies wait in the socket */
		int got = 0;
		struct rma_completion c[2];
		int64_t t0 = test_now_ms();
		while (got < 2 && test_now_ms() - t0 < 10000) {
			rma_progress(e, 100);
			got += rma_poll(e, c + got, 2 - got);
		}
		CHECK_EQ(got, 2);
		int64_t dt = test_now_ms() - t0;
		for (int k = 0; k < 2; k++)
			CHECK_EQ(c[k].result, c[k].user_data == 1 ? (int64_t)n1 : 1);
		CHECKF(dt < 4000, "replies parsed after %lld ms (slack %llu)",
		       (long long)dt, (unsigned long long)slack);
	}
	rma_remote_free(rem);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	return 0;
}
