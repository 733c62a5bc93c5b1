/* With queue_depth Q no more than Q chunks are with the transport at once;
 * each completed chunk releases a credit and the next chunk is posted;
 * several ops share one peer's window. */
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define Q 4
#define NOPS 3

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(Q);
	const uint64_t M = FAKE_MAX_MSG, len = 10 * M + 3;
	size_t size = (size_t)len * NOPS;
	char *lbuf = test_alloc(size), *rbuf = test_alloc(size);
	rma_region *lr, *rr;
	struct rma_completion c[NOPS];

	fake_reset(1);
	CHECK_RC(rma_region_register(e, lbuf, size, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, size, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);

	struct rma_op ops[NOPS];
	for (unsigned i = 0; i < NOPS; i++)
		ops[i] = (struct rma_op){ .kind = i % 2 ? RMA_OP_GET : RMA_OP_PUT,
					  .local = lr, .local_off = i * len,
					  .remote = rem, .remote_off = i * len,
					  .len = len, .user_data = i };
	CHECK_RC(rma_post(e, ops, NOPS, -1, NULL), NOPS);
	rma_progress(e, 0);
	CHECK_EQ(fake.outstanding, Q);
	CHECK_EQ(fake.nxfers, Q);

	/* Complete the oldest outstanding chunk, one at a time. */
	unsigned done = 0, total = 11 * NOPS;
	while (done < total) {
		unsigned i;
		for (i = 0; i < fake.nxfers && fake.xfers[i].state != FAKE_POSTED; i++)
			;
		CHECKF(i < fake.nxfers, "nothing outstanding after %u of %u chunks",
		       done, total);
		fake_complete(e, i, 0);
		done++;
		unsigned want = total - done < Q ? total - done : Q;
		CHECKF(fake.outstanding == want,
		       "after %u chunks done: %u outstanding, expected %u", done,
		       fake.outstanding, want);
		CHECK(fake.max_outstanding <= Q);
	}
	CHECK_EQ(fake.nxfers, total);
	CHECK_EQ(fake.max_outstanding, Q);

	int got = 0;
	for (int tries = 0; got < NOPS && tries < 100; tries++) {
		rma_progress(e, 10);
		int n = rma_poll(e, c + got, (size_t)(NOPS - got));
		CHECK_OK(n);
		got += n;
	}
	CHECK_EQ(got, NOPS);
	unsigned seen = 0;
	for (int i = 0; i < NOPS; i++) {
		CHECK(c[i].user_data < NOPS);
		CHECK_EQ(c[i].result, (long long)len);
		seen |= 1u << c[i].user_data;
	}
	CHECK_EQ(seen, (1u << NOPS) - 1);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
