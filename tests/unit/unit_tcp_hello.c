/* tcp handshake message codec: round trip of each step, layout, and
 * every rejection (short input, magic, version, step, reserved bytes,
 * status out of range). */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"
#include "transport/tcp/wire.h"
#include "util/util.h"

static void refused(const uint8_t *b, size_t n, const char *why)
{
	struct rma_tcp_hello h, before;
	memset(&h, 0xAB, sizeof h);
	before = h;
	int rc = rma__tcp_hello_decode(b, n, &h);
	CHECKF(rc == -EPROTO, "%s: got %d, expected -EPROTO", why, rc);
	CHECKF(!memcmp(&h, &before, sizeof h), "%s: *h written on failure", why);
}

int main(void)
{
	uint64_t seed = test_seed("unit_tcp_hello");
	uint8_t b[RMA_TCP_HELLO_SIZE + 8], m[RMA_TCP_HELLO_SIZE];
	struct rma_tcp_hello in, out;

	test_watchdog(60);
	for (int i = 0; i < 1000; i++) {
		memset(&in, 0, sizeof in);
		in.step = (uint8_t)(1 + i % 4);
		in.status = i % 3 ? 0 : -(int32_t)test_rand_range(&seed, 1, 4095);
		in.engine_id = test_rand(&seed);
		in.max_msg = test_rand(&seed);
		in.nonce = test_rand(&seed);
		for (int k = 0; k < 16; k++)
			in.proof[k] = (uint8_t)test_rand(&seed);
		memset(b, 0xCC, sizeof b);
		rma__tcp_hello_encode(&in, b);
		CHECK_EQ(b[RMA_TCP_HELLO_SIZE], 0xCC);
		CHECK_EQ_U64(rma__le32(b), RMA_TCP_MAGIC);
		CHECK_EQ(rma__le16(b + 4), RMA_TCP_VERSION);
		CHECK_EQ(b[6], in.step);
		CHECK_EQ_U64(rma__le64(b + 16), in.engine_id);
		CHECK_RC(rma__tcp_hello_decode(b, RMA_TCP_HELLO_SIZE, &out), 0);
		CHECK_EQ(out.step, in.step);
		CHECK_EQ(out.status, in.status);
		CHECK_EQ_U64(out.engine_id, in.engine_id);
		CHECK_EQ_U64(out.max_msg, in.max_msg);
		CHECK_EQ_U64(out.nonce, in.nonce);
		CHECK(!memcmp(out.proof, in.proof, 16));
	}
	memcpy(m, b, sizeof m);

	for (size_t n = 0; n < RMA_TCP_HELLO_SIZE; n++)
		refused(m, n, "truncated");
	for (int i = 0; i < 4; i++)
		for (int bit = 0; bit < 8; bit++) {
			memcpy(b, m, sizeof m);
			b[i] ^= (uint8_t)(1u << bit);
			refused(b, sizeof m, "magic");
		}
	for (int v = 0; v < 65536; v += (v < 16 ? 1 : 997)) {
		if (v == RMA_TCP_VERSION)
			continue;
		memcpy(b, m, sizeof m);
		rma__put_le16(b + 4, (uint16_t)v);
		refused(b, sizeof m, "version");
	}
	static const int bad_steps[] = { 0, 5, 6, 128, 255 };
	for (size_t i = 0; i < sizeof bad_steps / sizeof bad_steps[0]; i++) {
		memcpy(b, m, sizeof m);
		b[6] = (uint8_t)bad_steps[i];
		refused(b, sizeof m, "step");
	}
	static const int reserved[] = { 7, 12, 13, 14, 15, 56, 57, 58, 59, 60,
					61, 62, 63 };
	for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
		memcpy(b, m, sizeof m);
		b[reserved[i]] = 1;
		refused(b, sizeof m, "reserved byte");
	}
	static const int32_t bad_status[] = { 1, 4096, INT32_MAX, -4096,
					      INT32_MIN };
	for (size_t i = 0; i < sizeof bad_status / sizeof bad_status[0]; i++) {
		memcpy(b, m, sizeof m);
		rma__put_le32(b + 8, (uint32_t)bad_status[i]);
		refused(b, sizeof m, "status");
	}
	memcpy(b, m, sizeof m);
	rma__put_le32(b + 8, (uint32_t)-EACCES);
	CHECK_RC(rma__tcp_hello_decode(b, sizeof m, &out), 0);
	CHECK_EQ(out.status, -EACCES);
	printf("ok\n");
	return 0;
}
