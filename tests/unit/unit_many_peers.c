/* Many peers: 3000 remote engines (forged advertisements, one fake entry
 * each) get a peer apiece through the engine's peer table, which grows as
 * they come; each op reaches its own peer, and removing them all leaves
 * the table empty. */
#include <errno.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

#define NPEERS 3000

static rma_remote *remote_of(uint64_t engine_id)
{
	uint8_t b[64];
	size_t o = 0;
	rma__put_le32(b, 0x61414d52u);
	b[4] = 2;
	b[5] = RMA_ACCESS_REMOTE_RW;
	b[6] = 1;
	b[7] = 0;
	rma__put_le64(b + 8, engine_id);
	rma__put_le64(b + 16, 0x1234);
	rma__put_le64(b + 24, 4096);
	o = 32;
	rma__put_le16(b + o, 0);
	o += 2;
	b[o++] = FAKE_WIRE_ID;
	b[o++] = 0;
	rma__put_le16(b + o, 16);
	o += 2;
	rma__put_le64(b + o, 0xFA4EFA4EFA4EFA4EULL);
	rma__put_le64(b + o + 8, FAKE_BASE);
	o += 16;
	rma__put_le32(b + o, rma_crc32c(0, b, o));
	rma_remote *r;
	CHECK_RC(rma_remote_decode(b, o + 4, &r), 0);
	return r;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(4096);
	rma_region *lr;
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	static rma_remote *rem[NPEERS];
	for (int i = 0; i < NPEERS; i++) {
		rem[i] = remote_of(0x1000 + (uint64_t)i * 7919);
		struct rma_op op = { .kind = RMA_OP_PUT, .local = lr,
				     .remote = rem[i], .len = 8, .user_data = (uint64_t)i };
		CHECK_RC(rma_post(e, &op, 1, -1, NULL), 1);
	}
	pthread_mutex_lock(&e->mu);
	CHECK_EQ(e->npeers, NPEERS);
	CHECK(e->ptab_cap >= 2 * NPEERS);
	for (int i = 0; i < NPEERS; i++) {
		struct rma__peer *p = rma__peer_find(e, rem[i]->engine_id, e->tr[0]);
		CHECK(p != NULL && p->engine_id == rem[i]->engine_id);
		CHECK_EQ(p->nops, 1);
	}
	CHECK(rma__peer_find(e, 0x999999, e->tr[0]) == NULL);
	pthread_mutex_unlock(&e->mu);
	CHECK_EQ(fake.connects, NPEERS);
	CHECK_EQ(fake_complete_all(e, 0), NPEERS);
	struct rma_completion c[64];
	int got = 0;
	while (got < NPEERS) {
		int n = rma_poll(e, c, 64);
		CHECK_OK(n);
		for (int k = 0; k < n; k++)
			CHECK_EQ(c[k].result, 8);
		got += n;
		if (!n)
			rma_progress(e, 1);
	}
	for (int i = 0; i < NPEERS; i++) {
		CHECK_RC(rma_peer_remove(e, rem[i], 1000), 0);
		rma_remote_free(rem[i]);
	}
	pthread_mutex_lock(&e->mu);
	CHECK_EQ(e->npeers, 0);
	CHECK(e->peers == NULL);
	pthread_mutex_unlock(&e->mu);
	rma_engine_destroy(e);
	return 0;
}
