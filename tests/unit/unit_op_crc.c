/*
 * RMA_OP_CRC: the completion carries the CRC-32C of the bytes as they are
 * in local memory (a put's source when posted, a get's destination after
 * its last chunk landed), on plain memory and on regions; none when not
 * asked or when the op failed; rma_submit refuses the flag.
 */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define LEN (3 * FAKE_MAX_MSG + 100) /* four chunks */

static rma_remote *rem;

static int post(rma_engine *e, unsigned kind, unsigned flags, rma_region *l,
		void *addr, uint64_t len)
{
	struct rma_op op = { .kind = kind, .flags = flags, .local = l,
			     .addr = l ? NULL : addr, .remote = rem, .len = len,
			     .user_data = 9 };
	return rma_post(e, &op, 1, -1, NULL);
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);
	rma_engine *e = fake_engine(64);
	char *src = test_alloc(LEN), *dst = test_alloc(LEN);
	char *rbuf = test_alloc(LEN);
	rma_region *rr, *ls;
	struct rma_completion c;

	CHECK_RC(rma_region_register(e, rbuf, LEN, RMA_ACCESS_REMOTE_RW, &rr), 0);
	CHECK_RC(rma_region_register(e, src, LEN, 0, &ls), 0);
	rem = fake_remote(rr, 0, 0);
	test_fill(src, LEN, 0x5eed);

	for (int plain = 0; plain < 2; plain++) {
		/* A put: the CRC of the source as posted (changing it
		 * afterwards is the caller's race; the CRC names what was
		 * there when the op was handed over). */
		uint32_t want = rma_crc32c(0, src, LEN);
		CHECK_RC(post(e, RMA_OP_PUT, RMA_OP_CRC, plain ? NULL : ls, src,
			      LEN), 1);
		CHECK_EQ(fake.outstanding, 4);
		src[7] ^= 1;
		fake_complete_all(e, 0);
		CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
		src[7] ^= 1;
		CHECK_EQ(c.result, LEN);
		CHECK_EQ(c.user_data, 9);
		CHECK_EQ(c.flags, RMA_COMPLETION_CRC);
		CHECK_EQ_U64(c.crc32c, want);

		/* A get: the CRC of what landed, taken after the last chunk. */
		memset(dst, 0, LEN);
		CHECK_RC(post(e, RMA_OP_GET, RMA_OP_CRC, NULL, dst, LEN), 1);
		unsigned first = fake.nxfers - 4;
		for (unsigned i = 0; i < 3; i++)
			fake_complete(e, first + i, 0);
		test_fill(dst, LEN, 0xd00d + plain); /* "the bytes land" */
		fake_complete(e, first + 3, 0);
		CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
		CHECK_EQ(c.result, LEN);
		CHECK_EQ(c.flags, RMA_COMPLETION_CRC);
		CHECK_EQ_U64(c.crc32c, rma_crc32c(0, dst, LEN));
	}

	/* Not asked: no CRC. */
	CHECK_RC(post(e, RMA_OP_PUT, 0, NULL, src, LEN), 1);
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_EQ(c.result, LEN);
	CHECK_EQ(c.flags, 0);
	CHECK_EQ(c.crc32c, 0);
	CHECK_RC(post(e, RMA_OP_GET, 0, ls, NULL, LEN), 1);
	fake_complete_all(e, 0);
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_EQ(c.flags, 0);
	CHECK_EQ(c.crc32c, 0);

	/* A failed op carries none. */
	CHECK_RC(post(e, RMA_OP_GET, RMA_OP_CRC, NULL, dst, LEN), 1);
	fake_complete_all(e, -EIO);
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_RC(c.result, -EIO);
	CHECK_EQ(c.flags, 0);
	CHECK_EQ(c.crc32c, 0);

	/* Zero bytes: the CRC of nothing. */
	CHECK_RC(post(e, RMA_OP_PUT, RMA_OP_CRC, NULL, src, 0), 1);
	CHECK_EQ(fake_wait_one(e, &c, 5000), 1);
	CHECK_EQ(c.flags, RMA_COMPLETION_CRC);
	CHECK_EQ(c.crc32c, rma_crc32c(0, src, 0));

	/* rma_submit has no completion to carry it. */
	struct rma_op op = { .kind = RMA_OP_PUT, .flags = RMA_OP_CRC,
			     .local = ls, .remote = rem, .len = 8 };
	int64_t res = 0;
	CHECK_RC(rma_submit(e, &op, 1, 1000, &res, NULL, 0), 1);
	CHECK_RC(res, -EINVAL);
	CHECK_EQ(fake.outstanding, 0);
	/* An unknown flag still is refused. */
	op.flags = 1u << 7;
	CHECK_RC(rma_post(e, &op, 1, -1, NULL), -EINVAL);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
