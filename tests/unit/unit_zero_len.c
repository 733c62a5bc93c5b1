/* A zero-length op completes with 0 and sends nothing. */
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

int main(void)
{
	test_watchdog(60);
	fake_register();
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(4096), *rbuf = test_alloc(4096);
	rma_region *lr, *rr;
	struct rma_completion c;

	fake_reset(1);
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	CHECK_RC(rma_region_register(e, rbuf, 4096, RMA_ACCESS_REMOTE_RW, &rr), 0);
	rma_remote *rem = fake_remote(rr, 0, 0);

	for (unsigned kind = RMA_OP_PUT; kind <= RMA_OP_GET; kind++) {
		struct rma_op op = { .kind = kind, .local = lr, .local_off = 4096,
				     .remote = rem, .remote_off = 4096,
				     .len = 0, .user_data = 7 + kind };
		CHECK_RC(rma_post(e, &op, 1, -1, NULL), 1);
		CHECK_EQ(fake_wait_one(e, &c, 2000), 1);
		CHECK_EQ(c.user_data, 7 + kind);
		CHECK_EQ(c.result, 0);
		CHECK_EQ(fake.nxfers, 0);

		int64_t res = -1;
		CHECK_RC(rma_submit(e, &op, 1, 1000, &res, NULL, 0), 0);
		CHECK_EQ(res, 0);
		CHECK_EQ(fake.nxfers, 0);
	}
	CHECK_EQ(rma_poll(e, &c, 1), 0);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
