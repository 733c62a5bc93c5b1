/*
 * unit_verbs_hw.c - verbs on a real device: two engines in one process, a
 * put and a get through an RC queue pair, and a read-only grant: a put
 * with it is refused at post, and gets with it work.  (That the NIC
 * itself refuses a write with the read-only rkey, posted past the core's
 * check, is unit_verbs_nic's.)  Skips (77) where no device has an active
 * port, which is what `rma info` reports as the reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rma.h"
#include "testlib.h"

static int64_t run(rma_engine *e, struct rma_op op)
{
	struct rma_completion c;
	int64_t end = test_now_ms() + 10000;
	CHECK_RC(rma_post(e, &op, 1, 10000, NULL), 1);
	while (test_now_ms() < end) {
		if (rma_poll(e, &c, 1) == 1)
			return c.result;
		test_sleep_ms(1);
	}
	FAIL("no completion");
}

int main(void)
{
	struct rma_transport_info ti[8];
	int n = rma_transports(ti, 8), i;
	struct rma_config cfg;
	rma_engine *a, *b;
	rma_region *src, *dst;
	rma_remote *rw, *ro;
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	size_t len = 4 << 20;
	char *sbuf, *dbuf;

	test_watchdog(60);
	for (i = 0; i < n && i < 8; i++)
		if (!strcmp(ti[i].name, "verbs"))
			break;
	if ((i == n || i == 8 || !ti[i].available) && getenv("RMA_TEST_REQUIRE"))
		FAIL("verbs unavailable (RMA_TEST_REQUIRE is set): %s",
		     i < n && i < 8 ? ti[i].detail : "not built");
	if (i == n || i == 8 || !ti[i].available)
		SKIP("verbs unavailable: %s", i < n && i < 8 ? ti[i].detail : "not built");

	rma_config_init(&cfg);
	cfg.transports = "verbs";
	CHECK_RC(rma_engine_create(&cfg, &a), 0);
	CHECK_RC(rma_engine_create(&cfg, &b), 0);
	sbuf = test_alloc(len);
	dbuf = test_alloc(len);
	test_fill(sbuf, len, 7);
	CHECK_RC(rma_region_register(a, sbuf, len, 0, &src), 0);
	CHECK_RC(rma_region_register(b, dbuf, len, RMA_ACCESS_REMOTE_RW, &dst), 0);
	CHECK(rma_advertise_text(dst, 0, 0, RMA_ACCESS_REMOTE_RW, tok, sizeof tok) > 0);
	CHECK_RC(rma_remote_parse(tok, &rw), 0);
	CHECK(rma_advertise_text(dst, 0, 4096, RMA_ACCESS_REMOTE_READ, tok, sizeof tok) > 0);
	CHECK_RC(rma_remote_parse(tok, &ro), 0);

	/* Put it all, read it back into the zeroed source. */
	CHECK(run(a, (struct rma_op){ .kind = RMA_OP_PUT, .local = src,
				      .remote = rw, .len = len }) == (int64_t)len);
	CHECK(test_check_fill(dbuf, len, 7) == -1);
	memset(sbuf, 0, len);
	CHECK(run(a, (struct rma_op){ .kind = RMA_OP_GET, .local = src,
				      .remote = rw, .len = len }) == (int64_t)len);
	CHECK(test_check_fill(sbuf, len, 7) == -1);

	/* A read-only token does not post a put; nothing is written. */
	memset(dbuf, 0, 4096);
	struct rma_op put = { .kind = RMA_OP_PUT, .local = src, .remote = ro,
			      .len = 64 };
	CHECK_RC(rma_post(a, &put, 1, 10000, NULL), -EACCES);
	CHECK(test_check_fill(dbuf, 4096, 0) == -1);
	/* Its gets read the window. */
	test_fill(dbuf, 4096, 9);
	CHECK(run(a, (struct rma_op){ .kind = RMA_OP_GET, .local = src,
				      .remote = ro, .len = 4096 }) == 4096);
	CHECK(test_check_fill(sbuf, 4096, 9) == -1);

	rma_remote_free(rw);
	rma_remote_free(ro);
	rma_region_release(src);
	rma_region_release(dst);
	rma_engine_destroy(a);
	rma_engine_destroy(b);
	puts("ok");
	return 0;
}
