/* tcp message header codec: byte layout, round trip of every type, and
 * every rejection (unknown type, flags or reserved bits, length over the
 * limit, short input, implausible status); a refused decode writes
 * nothing; whatever decodes re-encodes to the same bytes. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"
#include "transport/tcp/wire.h"
#include "util/util.h"

#define MAX (1u << 20)

static void refused(const uint8_t *b, size_t n, uint64_t max, const char *why)
{
	struct rma_tcp_hdr h, before;
	memset(&h, 0xAB, sizeof h);
	before = h;
	int rc = rma__tcp_hdr_decode(b, n, max, &h);
	CHECKF(rc == -EPROTO, "%s: got %d, expected -EPROTO", why, rc);
	CHECKF(!memcmp(&h, &before, sizeof h), "%s: *h written on failure", why);
}

static void roundtrip(const struct rma_tcp_hdr *in)
{
	uint8_t b[RMA_TCP_HDR_SIZE + 8];
	struct rma_tcp_hdr out;
	memset(b, 0xCC, sizeof b);
	rma__tcp_hdr_encode(in, b);
	CHECK_EQ(b[RMA_TCP_HDR_SIZE], 0xCC); /* exactly 40 bytes written */
	CHECK_EQ(b[0], in->type);
	CHECK_EQ(b[1], in->flags);
	CHECK_EQ(rma__le16(b + 2), 0);
	CHECK_EQ((int32_t)rma__le32(b + 4), in->status);
	CHECK_EQ_U64(rma__le64(b + 8), in->id);
	CHECK_EQ_U64(rma__le64(b + 16), in->key);
	CHECK_EQ_U64(rma__le64(b + 24), in->addr);
	CHECK_EQ_U64(rma__le64(b + 32), in->len);
	CHECK_RC(rma__tcp_hdr_decode(b, RMA_TCP_HDR_SIZE, MAX, &out), 0);
	CHECK_EQ(out.type, in->type);
	CHECK_EQ(out.flags, in->flags);
	CHECK_EQ(out.status, in->status);
	CHECK_EQ_U64(out.id, in->id);
	CHECK_EQ_U64(out.key, in->key);
	CHECK_EQ_U64(out.addr, in->addr);
	CHECK_EQ_U64(out.len, in->len);
	/* Longer input: only the header is read. */
	CHECK_RC(rma__tcp_hdr_decode(b, sizeof b, MAX, &out), 0);
}

int main(void)
{
	uint64_t seed = test_seed("unit_tcp_hdr");
	uint8_t b[RMA_TCP_HDR_SIZE], m[RMA_TCP_HDR_SIZE];

	test_watchdog(60);
	for (int i = 0; i < 2000; i++) {
		struct rma_tcp_hdr h = {
			.type = (uint8_t)test_rand_range(&seed, RMA_TCP_PUT,
							 RMA_TCP_GET_RESP),
			.id = test_rand(&seed), .key = test_rand(&seed),
			.addr = test_rand(&seed),
			.len = test_rand_range(&seed, 0, MAX),
		};
		if (h.type == RMA_TCP_PUT_ACK && i % 2)
			h.status = -(int32_t)test_rand_range(&seed, 1, 4095);
		if (h.type == RMA_TCP_GET_RESP && i % 2) {
			h.status = -(int32_t)test_rand_range(&seed, 1, 4095);
			h.len = 0;
		}
		roundtrip(&h);
	}
	struct rma_tcp_hdr edge = { .type = RMA_TCP_PUT_ACK, .status = -4095,
				    .id = UINT64_MAX, .key = UINT64_MAX,
				    .addr = UINT64_MAX, .len = MAX };
	roundtrip(&edge);

	struct rma_tcp_hdr good = { .type = RMA_TCP_PUT, .id = 7, .key = 0x1234,
				    .addr = 4096, .len = 100 };
	rma__tcp_hdr_encode(&good, b);

	for (size_t n = 0; n < RMA_TCP_HDR_SIZE; n++)
		refused(b, n, MAX, "truncated");
	for (int t = 0; t < 256; t++) {
		if (t >= RMA_TCP_PUT && t <= RMA_TCP_GET_RESP)
			continue;
		memcpy(m, b, sizeof m);
		m[0] = (uint8_t)t;
		refused(m, sizeof m, MAX, "unknown type");
	}
	for (int bit = 0; bit < 8; bit++) {
		memcpy(m, b, sizeof m);
		m[1] = (uint8_t)(1u << bit);
		refused(m, sizeof m, MAX, "flag bit");
	}
	for (int bit = 0; bit < 16; bit++) {
		memcpy(m, b, sizeof m);
		rma__put_le16(m + 2, (uint16_t)(1u << bit));
		refused(m, sizeof m, MAX, "reserved bit");
	}

	/* Length: the limit itself is fine, one more is not. */
	struct rma_tcp_hdr h = good, out;
	for (int type = RMA_TCP_PUT; type <= RMA_TCP_GET_RESP; type++) {
		h.type = (uint8_t)type;
		h.len = MAX;
		rma__tcp_hdr_encode(&h, m);
		CHECK_RC(rma__tcp_hdr_decode(m, sizeof m, MAX, &out), 0);
		h.len = MAX + 1ull;
		rma__tcp_hdr_encode(&h, m);
		refused(m, sizeof m, MAX, "len > max");
		h.len = UINT64_MAX;
		rma__tcp_hdr_encode(&h, m);
		refused(m, sizeof m, MAX, "len = 2^64-1");
	}

	/* Status: 0 or a plausible -errno, and only on replies. */
	static const int32_t bad_status[] = { 1, 2, 4096, INT32_MAX, -4096,
					      -100000, INT32_MIN };
	for (size_t i = 0; i < sizeof bad_status / sizeof bad_status[0]; i++)
		for (int type = RMA_TCP_PUT; type <= RMA_TCP_GET_RESP; type++) {
			h = good;
			h.type = (uint8_t)type;
			h.len = 0;
			h.status = bad_status[i];
			rma__tcp_hdr_encode(&h, m);
			refused(m, sizeof m, MAX, "status out of range");
		}
	h = good;
	h.status = -EIO;
	rma__tcp_hdr_encode(&h, m);
	refused(m, sizeof m, MAX, "status on a PUT request");
	h.type = RMA_TCP_GET;
	rma__tcp_hdr_encode(&h, m);
	refused(m, sizeof m, MAX, "status on a GET request");
	h.type = RMA_TCP_GET_RESP;
	h.len = 10;
	rma__tcp_hdr_encode(&h, m);
	refused(m, sizeof m, MAX, "failed GET_RESP with a payload");
	h.len = 0;
	rma__tcp_hdr_encode(&h, m);
	CHECK_RC(rma__tcp_hdr_decode(m, sizeof m, MAX, &out), 0);
	CHECK_EQ(out.status, -EIO);

	/* Random bytes: refused, or canonical (re-encodes identically). */
	long accepted = 0;
	for (int i = 0; i < 200000; i++) {
		for (size_t k = 0; k < sizeof m; k += 8) {
			uint64_t v = test_rand(&seed);
			memcpy(m + k, &v, 8);
		}
		/* Bias toward plausible headers so some get through. */
		m[0] = (uint8_t)(m[0] % 6);
		if (i % 2) {
			m[1] = m[2] = m[3] = 0;
			m[33] = m[34] = m[35] = m[36] = m[37] = m[38] = m[39] = 0;
			m[32] &= 0x0f;
		}
		if (i % 4 == 1)
			memset(m + 4, 0, 4);
		if (rma__tcp_hdr_decode(m, sizeof m, MAX, &out) == 0) {
			uint8_t again[RMA_TCP_HDR_SIZE];
			rma__tcp_hdr_encode(&out, again);
			CHECKF(!memcmp(again, m, sizeof m),
			       "accepted header does not re-encode identically");
			accepted++;
		}
	}
	CHECKF(accepted > 1000, "only %ld random headers accepted", accepted);
	printf("ok (%ld random headers accepted)\n", accepted);
	return 0;
}
