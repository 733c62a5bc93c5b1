/*
 * integ_shm_backlog - shm copies inside post, so no fd ever tells the
 * progress thread that more chunks wait.  An op larger than one pump's
 * credits (64 MiB = 128 chunks, 32 per pump), posted with rma_post and then
 * only polled, must still finish at copy speed: the core wakes the thread
 * when a pump leaves a backlog.  Without that the thread sleeps up to 1 s
 * per pump; the op must finish within 500 ms (it copies in ~10 ms).
 * Repeated, with the thread idle before each post; then the same through
 * rma_submit, whose wait hands progress to the thread after a short spin.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rma.h"
#include "target.h"
#include "testlib.h"

#define SIZE (64u << 20)

int main(void)
{
	static struct target_opts o = { .transports = "shm", .rw_size = SIZE };
	struct rma_transport_info info[16];
	int n = rma_transports(info, 16), rc;
	struct target t;

	test_watchdog(100);
	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(info[i].name, "shm") && !info[i].available)
			SKIP("shm not available: %s", info[i].detail);
	if ((rc = target_start(&t, &o)))
		return rc;
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_remote *r;
	rma_region *l;
	rma_engine *e;
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "shm";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	target_token(&t, "rw", 0, 0, 0, tok, sizeof tok);
	CHECK_RC(rma_remote_parse(tok, &r), 0);
	char *buf = test_alloc(SIZE);
	test_fill(buf, SIZE, 8);
	CHECK_RC(rma_region_register(e, buf, SIZE, 0, &l), 0);
	CHECK_RC(rma_peer_connect(e, r, 10000), 0);

	int64_t worst = 0;
	for (int i = 0; i < 5; i++) {
		test_sleep_ms(50); /* the progress thread goes to sleep */
		struct rma_op op = { .kind = i % 2 ? RMA_OP_GET : RMA_OP_PUT,
				     .local = l, .remote = r, .len = SIZE };
		int64_t t0 = test_now_ms();
		CHECK_RC(rma_post(e, &op, 1, 10000, NULL), 1);
		struct rma_completion c;
		while (rma_poll(e, &c, 1) == 0)
			; /* polling only: no waits that would drive progress */
		int64_t dt = test_now_ms() - t0;
		CHECK_RC(c.result, SIZE);
		if (dt > worst)
			worst = dt;
	}
	printf("64 MiB by rma_post + rma_poll: worst %lld ms\n", (long long)worst);
	CHECKF(worst < 500, "an op of 4 pumps took %lld ms", (long long)worst);

	worst = 0;
	for (int i = 0; i < 5; i++) {
		test_sleep_ms(50);
		struct rma_op op = { .kind = i % 2 ? RMA_OP_GET : RMA_OP_PUT,
				     .local = l, .remote = r, .len = SIZE };
		int64_t res, t0 = test_now_ms();
		CHECK_RC(rma_submit(e, &op, 1, 10000, &res, NULL, 0), 0);
		int64_t dt = test_now_ms() - t0;
		CHECK_RC(res, SIZE);
		if (dt > worst)
			worst = dt;
	}
	printf("64 MiB by rma_submit: worst %lld ms\n", (long long)worst);
	CHECKF(worst < 500, "an op of 4 pumps took %lld ms", (long long)worst);
	CHECK_EQ(test_check_fill(buf, SIZE, 8), -1);
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}
