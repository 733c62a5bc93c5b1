/*
 * A target connection queues at most 128 replies and stops reading when its
 * queue is full.  With a window far beyond that on one connection, every op
 * must still complete: the connection resumes reading as replies drain.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testlib.h"

#define NOPS 4000
#define OPLEN (64 << 10) /* replies outgrow the socket buffers: the target
			    must wait for the initiator to read */
#define SPAN (16 * OPLEN)

int main(void)
{
	static char src[SPAN], dst[SPAN];
	static struct rma_op ops[NOPS];
	static int64_t res[NOPS];
	rma_engine *e;
	rma_region *r, *l;
	rma_remote *rem;

	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (char)(i * 13 + 5);
	/* one connection, a window far past the target's reply queue */
	e = test_tcp_engine((struct rma_config){.stripes = 1, .queue_depth = 2048});
	CHECK_RC(rma_region_register(e, src, sizeof src, RMA_ACCESS_REMOTE_READ, &r), 0);
	CHECK_RC(rma_region_register(e, dst, sizeof dst, 0, &l), 0);
	rem = test_remote_of(r);

	for (int round = 0; round < 3; round++) {
		memset(dst, 0, sizeof dst);
		for (size_t i = 0; i < NOPS; i++)
			ops[i] = (struct rma_op){.kind = RMA_OP_GET, .local = l,
						 .local_off = i % 16 * OPLEN, .remote = rem,
						 .remote_off = i % 16 * OPLEN, .len = OPLEN};
		CHECK_RC(rma_submit(e, ops, NOPS, 20000, res, NULL, 0), 0);
		for (size_t i = 0; i < NOPS; i++)
			CHECK_EQ(res[i], OPLEN);
		CHECK(memcmp(src, dst, sizeof src) == 0);
	}
	rma_remote_free(rem);
	rma_engine_destroy(e);
	return 0;
}
