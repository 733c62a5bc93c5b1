/*
 * An op larger than its window: 16 chunks of 4 KiB with a window of 4.
 * The initiator is driven by hand and sleeps while the target answers, so
 * a whole window of acks (or get replies) arrives in one read.  When the op
 * completes, every byte must be in place: a put's in the target's memory,
 * a get's in the local buffer; completing once the first window is
 * acknowledged would leave the rest missing.
 */
#include <string.h>

#include "check.h"
#include "testlib.h"

#define CHUNK 4096
#define OPLEN (16 * CHUNK)

/* Drive the initiator until its one op completes; the result. */
static int64_t wait_one(rma_engine *e)
{
	struct rma_completion c;
	int64_t end = test_now_ms() + 10000;
	while (test_now_ms() < end) {
		test_sleep_ms(20); /* the target answers the whole window */
		rma_progress(e, 0);
		if (rma_poll(e, &c, 1) == 1)
			return c.result;
	}
	FAIL("no completion in 10 s");
}

int main(void)
{
	static uint8_t tmem[OPLEN], lmem[OPLEN];

	test_watchdog(60);
	test_remote_memory(tmem, sizeof tmem); /* written and read by the peer */
	rma_engine *t = test_tcp_engine((struct rma_config){.max_msg_size = CHUNK});
	rma_engine *e = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1, .queue_depth = 4,
		.max_msg_size = CHUNK});
	rma_region *tr, *l;
	CHECK_RC(rma_region_register(t, tmem, OPLEN, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(e, lmem, OPLEN, 0, &l), 0);
	rma_remote *rem = test_remote_of(tr);
	CHECK_RC(rma_peer_connect(e, rem, 5000), 0);

	for (int round = 0; round < 10; round++) {
		/* put: the target's memory holds all of it at completion */
		test_fill(lmem, OPLEN, (uint64_t)round + 1);
		memset(tmem, 0, OPLEN);
		struct rma_op op = {.kind = RMA_OP_PUT, .local = l, .remote = rem,
				    .len = OPLEN};
		CHECK_EQ(rma_post(e, &op, 1, 10000, NULL), 1);
		CHECK_EQ(wait_one(e), OPLEN);
		ptrdiff_t bad = test_check_fill(tmem, OPLEN, (uint64_t)round + 1);
		CHECKF(bad < 0, "round %d: put complete, target byte %td wrong "
		       "(chunk %td of 16)", round, bad, bad / CHUNK);

		/* get: the local buffer holds all of it at completion */
		test_fill(tmem, OPLEN, (uint64_t)round + 100);
		memset(lmem, 0, OPLEN);
		op.kind = RMA_OP_GET;
		CHECK_EQ(rma_post(e, &op, 1, 10000, NULL), 1);
		CHECK_EQ(wait_one(e), OPLEN);
		bad = test_check_fill(lmem, OPLEN, (uint64_t)round + 100);
		CHECKF(bad < 0, "round %d: get complete, local byte %td wrong "
		       "(chunk %td of 16)", round, bad, bad / CHUNK);
	}
	rma_remote_free(rem);
	rma_region_release(l);
	rma_region_release(tr);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	printf("ok\n");
	return 0;
}
