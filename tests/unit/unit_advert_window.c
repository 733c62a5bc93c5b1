/* Advertising a window of a region: the decoded length is the window's;
 * len 0 means "to the end"; windows outside the region are refused. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"

static uint64_t ad_len(rma_region *r, uint64_t off, uint64_t len)
{
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	rma_remote *rem;
	int n = rma_advertise(r, off, len, 0, ad, sizeof ad);
	CHECK_OK(n);
	CHECK_RC(rma_remote_decode(ad, (size_t)n, &rem), 0);
	uint64_t l = rma_remote_length(rem);
	rma_remote_free(rem);
	return l;
}

int main(void)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_region *r;
	static char mem[1 << 20];
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	const uint64_t L = sizeof mem;

	test_watchdog(60);
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	CHECK_RC(rma_region_register(e, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);

	CHECK_EQ(ad_len(r, 0, 0), L);
	CHECK_EQ(ad_len(r, 0, L), L);
	CHECK_EQ(ad_len(r, 4096, 8192), 8192);
	CHECK_EQ(ad_len(r, 4096, 0), L - 4096);
	CHECK_EQ(ad_len(r, L - 1, 0), 1);
	CHECK_EQ(ad_len(r, L - 1, 1), 1);
	CHECK_EQ(ad_len(r, 0, 1), 1);

	CHECK_RC(rma_advertise(r, L, 0, 0, ad, sizeof ad), -ERANGE);
	CHECK_RC(rma_advertise(r, L, 1, 0, ad, sizeof ad), -ERANGE);
	CHECK_RC(rma_advertise(r, 0, L + 1, 0, ad, sizeof ad), -ERANGE);
	CHECK_RC(rma_advertise(r, 1, L, 0, ad, sizeof ad), -ERANGE);
	CHECK_RC(rma_advertise(r, L - 10, 11, 0, ad, sizeof ad), -ERANGE);
	CHECK_RC(rma_advertise(r, UINT64_MAX, 2, 0, ad, sizeof ad), -ERANGE);
	CHECK_RC(rma_advertise(r, 16, UINT64_MAX, 0, ad, sizeof ad), -ERANGE);
	CHECK_RC(rma_advertise(r, UINT64_MAX - 5, 10, 0, ad, sizeof ad), -ERANGE);

	/* Two different windows are two different advertisements. */
	uint8_t a1[RMA_ADVERTISEMENT_MAX], a2[RMA_ADVERTISEMENT_MAX];
	int n1 = rma_advertise(r, 0, 4096, 0, a1, sizeof a1);
	int n2 = rma_advertise(r, 4096, 4096, 0, a2, sizeof a2);
	CHECK_OK(n1);
	CHECK_OK(n2);
	CHECK(n1 != n2 || memcmp(a1, a2, (size_t)n1));

	CHECK_RC(rma_region_release(r), 0);
	rma_engine_destroy(e);
	printf("ok\n");
	return 0;
}
