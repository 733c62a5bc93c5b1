/* Advertisement v2 decoding, field by field, with the checksum recomputed so
 * that every forged field meets its own check (not the crc's):
 *  - accepted: a v1 token (old owners), core fields the decoder does not
 *    know (non-critical), two entries of one transport (instances 0 and 1),
 *    an entry of a transport this build lacks (skipped);
 *  - refused (-EBADMSG): magic, version, access, entry count (0, more than
 *    present, above the limit), reserved byte, zero id / key / length, an
 *    entry length past the end, a duplicate (transport, instance), trailing
 *    bytes, a core-field length past its area, a critical unknown tag, an
 *    expiry of the wrong size;
 *  - an expired advertisement decodes but is not used (-EKEYEXPIRED). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static uint8_t buf[RMA_ADVERTISEMENT_MAX];
static size_t len;

static void put8(uint8_t v) { buf[len++] = v; }
static void put16(uint16_t v) { rma__put_le16(buf + len, v); len += 2; }
static void put64(uint64_t v) { rma__put_le64(buf + len, v); len += 8; }

/* Header: magic, version, access, count, reserved, id, key, length. */
static void hdr(unsigned version, unsigned count)
{
	len = 0;
	rma__put_le32(buf, 0x61414d52u);
	len = 4;
	put8((uint8_t)version);
	put8(RMA_ACCESS_REMOTE_RW);
	put8((uint8_t)count);
	put8(0);
	put64(0x1111);
	put64(0x2222);
	put64(4096);
}

/* A fake entry (its blob: magic, base). */
static void fake_entry(unsigned version, unsigned instance)
{
	put8(FAKE_WIRE_ID);
	if (version == 2)
		put8((uint8_t)instance);
	put16(16);
	put64(0xFA4EFA4EFA4EFA4EULL);
	put64(FAKE_BASE + 64 * instance);
}

static int decode(void)
{
	rma_remote *r;
	rma__put_le32(buf + len, rma_crc32c(0, buf, len));
	int rc = rma_remote_decode(buf, len + 4, &r);
	if (rc == 0)
		rma_remote_free(r);
	return rc;
}

static rma_remote *decoded(void)
{
	rma_remote *r;
	rma__put_le32(buf + len, rma_crc32c(0, buf, len));
	CHECK_RC(rma_remote_decode(buf, len + 4, &r), 0);
	return r;
}

/* A plain valid v2 advertisement with one fake entry. */
static void v2(void)
{
	hdr(2, 1);
	put16(0);
	fake_entry(2, 0);
}

#define REFUSED(what, mutate)                                         \
	do {                                                          \
		v2();                                                 \
		mutate;                                               \
		CHECKF(decode() == -EBADMSG, "%s accepted", what);    \
	} while (0)

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);

	/* Accepted. */
	v2();
	rma_remote *r = decoded();
	CHECK_EQ(r->nent, 1);
	CHECK_EQ_U64(r->ent[0].rk.base, FAKE_BASE);
	CHECK_EQ_U64(r->key, 0x2222);
	rma_remote_free(r);

	hdr(1, 1); /* v1: no core fields, no instance byte */
	fake_entry(1, 0);
	r = decoded();
	CHECK_EQ(r->nent, 1);
	CHECK_EQ(rma_remote_length(r), 4096);
	rma_remote_free(r);

	hdr(2, 3); /* unknown core field; two instances; an unknown transport */
	put16(5);
	put8(0x42); put8(3); put8(1); put8(2); put8(3);
	fake_entry(2, 0);
	fake_entry(2, 1);
	put8(250); put8(0); put16(2); put8(9); put8(9);
	r = decoded();
	CHECK_EQ(r->nent, 2);
	CHECK_EQ(r->ent[1].instance, 1);
	CHECK_EQ_U64(r->ent[1].rk.base, FAKE_BASE + 64);
	rma_remote_free(r);

	/* Refused, one field at a time. */
	REFUSED("magic", buf[0] ^= 1);
	REFUSED("version 0", buf[4] = 0);
	REFUSED("version 3", buf[4] = 3);
	REFUSED("access 0", buf[5] = 0);
	REFUSED("access bit 2", buf[5] |= 4);
	REFUSED("count 0", buf[6] = 0);
	REFUSED("count past the entries", buf[6] = 2);
	REFUSED("count above the limit", buf[6] = RMA__MAX_ENTRIES + 1);
	REFUSED("reserved byte", buf[7] = 1);
	REFUSED("engine id 0", memset(buf + 8, 0, 8));
	REFUSED("key 0", memset(buf + 16, 0, 8));
	REFUSED("length 0", memset(buf + 24, 0, 8));
	REFUSED("entry length past the end", rma__put_le16(buf + 36, 17));
	REFUSED("short entry length", rma__put_le16(buf + 36, 15));
	REFUSED("trailing bytes", put8(0));
	REFUSED("duplicate instance", (buf[6] = 2, fake_entry(2, 0)));
	REFUSED("core fields past the end", rma__put_le16(buf + 32, 200));
	hdr(2, 1); put16(3); put8(0x80); put8(1); put8(0); fake_entry(2, 0);
	CHECKF(decode() == -EBADMSG, "critical unknown core field accepted");
	hdr(2, 1); put16(6); put8(1); put8(4); put8(1); put8(1); put8(1); put8(1);
	fake_entry(2, 0);
	CHECKF(decode() == -EBADMSG, "4-byte expiry accepted");
	hdr(2, 1); put16(3); put8(0x10); put8(5); put8(0); fake_entry(2, 0);
	CHECKF(decode() == -EBADMSG, "core field longer than its area accepted");
	/* An unknown version laid out as a v2 without core fields, or as a
	 * v1 with instance bytes: only the version check stops these. */
	hdr(3, 1); fake_entry(2, 0);
	CHECKF(decode() == -EBADMSG, "version 3 accepted");
	hdr(0, 1); fake_entry(1, 0);
	CHECKF(decode() == -EBADMSG, "version 0 accepted");
	hdr(1, 2); fake_entry(1, 0); fake_entry(1, 0);
	CHECKF(decode() == -EBADMSG, "v1 duplicate transport accepted");
	/* One entry too many, each distinct: only the count limit stops it
	 * (v1: transports this build lacks; v2: instances of the fake). */
	hdr(1, RMA__MAX_TRANSPORTS + 1);
	for (int i = 0; i < RMA__MAX_TRANSPORTS + 1; i++) {
		put8((uint8_t)(230 + i)); put16(1); put8(0);
	}
	CHECKF(decode() == -EBADMSG, "v1 with 9 entries accepted");
	hdr(2, RMA__MAX_ENTRIES + 1);
	put16(0);
	for (int i = 0; i < RMA__MAX_ENTRIES + 1; i++) {
		put8((uint8_t)(230 + i % 4)); put8((uint8_t)i); put16(1); put8(0);
	}
	CHECKF(decode() == -EBADMSG, "v2 with 17 entries accepted");

	/* Expiry: decoded, then refused at post. */
	rma_engine *e = fake_engine(64);
	char *lbuf = test_alloc(4096);
	rma_region *lr;
	CHECK_RC(rma_region_register(e, lbuf, 4096, 0, &lr), 0);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
	for (int past = 1; past >= 0; past--) {
		hdr(2, 1);
		put16(10);
		put8(1);
		put8(8);
		put64(past ? now - 1000000000ull : now + 3600ull * 1000000000);
		fake_entry(2, 0);
		r = decoded();
		struct rma_op op = { .kind = RMA_OP_GET, .local = lr, .remote = r,
				     .len = 8 };
		CHECK_RC(rma_post(e, &op, 1, 1000, NULL), past ? -EKEYEXPIRED : 1);
		rma_remote_free(r);
	}
	rma_engine_destroy(e);
	return 0;
}
