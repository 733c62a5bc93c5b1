/* shm advertisement blob: byte layout (little-endian, at fixed offsets),
 * round trip of a plain and a memfd window, and every rejection (length,
 * version, unknown flags, reserved bytes, pid 0, a memfd window outside its
 * region, region fields on a plain window). */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"
#include "transport/shm/shm.h"

static void refused(const uint8_t *b, size_t n, const char *why)
{
	struct shm_blob out;
	CHECKF(rma__shm_blob_decode(b, n, &out) == -EBADMSG, "%s: accepted", why);
}

int main(void)
{
	struct shm_blob in = {
		.flags = SHM_BLOB_MEMFD, .slot = 0x01020304, .region_id = 7,
		.base = 0x7f0000001000, .region_addr = 0x7f0000000000,
		.region_len = 1 << 20,
	}, out;
	uint8_t b[SHM_BLOB_LEN + 1], c[SHM_BLOB_LEN];

	for (int i = 0; i < 16; i++)
		in.id.boot[i] = (uint8_t)(0xa0 + i);
	in.id.pid = 4242;
	in.id.start = 0x1122334455667788ull;
	in.id.ns_dev = 4;
	in.id.ns_ino = 0xeffffffcull;
	rma__shm_blob_encode(&in, b);

	/* Layout: the fields where the format says. */
	CHECK_EQ(b[0], SHM_BLOB_VERSION);
	CHECK_EQ(b[1], SHM_BLOB_MEMFD);
	CHECK(b[4] == 0x04 && b[7] == 0x01);                 /* slot */
	CHECK(b[8] == (4242 & 0xff) && b[9] == 4242 >> 8);   /* pid */
	CHECK_EQ(b[12], 7);                                  /* region id */
	CHECK(b[16] == 0x88 && b[23] == 0x11);               /* start time */
	CHECK_EQ(b[24], 4);                                  /* ns dev */
	CHECK_EQ(b[32], 0xfc);                               /* ns ino */
	CHECK(b[40] == 0xa0 && b[55] == 0xaf);               /* boot id */
	CHECK(b[57] == 0x10 && b[61] == 0x7f);               /* base */
	CHECK(b[64] == 0 && b[69] == 0x7f);                  /* region addr */
	CHECK_EQ(b[74], 0x10);                               /* region len */

	CHECK_RC(rma__shm_blob_decode(b, SHM_BLOB_LEN, &out), 0);
	CHECK(out.flags == in.flags && out.slot == in.slot &&
	      out.region_id == in.region_id && out.base == in.base &&
	      out.region_addr == in.region_addr && out.region_len == in.region_len &&
	      out.id.pid == in.id.pid && out.id.start == in.id.start &&
	      out.id.ns_dev == in.id.ns_dev && out.id.ns_ino == in.id.ns_ino &&
	      !memcmp(out.id.boot, in.id.boot, 16));
	rma__shm_blob_encode(&out, c);
	CHECK(!memcmp(b, c, SHM_BLOB_LEN));

	refused(b, SHM_BLOB_LEN - 1, "short");
	refused(b, SHM_BLOB_LEN + 1, "long");
	memcpy(c, b, SHM_BLOB_LEN); c[0] = 2;    refused(c, SHM_BLOB_LEN, "version 2");
	memcpy(c, b, SHM_BLOB_LEN); c[1] |= 2;   refused(c, SHM_BLOB_LEN, "unknown flag");
	memcpy(c, b, SHM_BLOB_LEN); c[2] = 1;    refused(c, SHM_BLOB_LEN, "reserved byte 2");
	memcpy(c, b, SHM_BLOB_LEN); c[3] = 1;    refused(c, SHM_BLOB_LEN, "reserved byte 3");
	memcpy(c, b, SHM_BLOB_LEN); memset(c + 8, 0, 4);
	refused(c, SHM_BLOB_LEN, "pid 0");
	memcpy(c, b, SHM_BLOB_LEN); c[11] = 0x80; refused(c, SHM_BLOB_LEN, "negative pid");
	memcpy(c, b, SHM_BLOB_LEN); memset(c + 12, 0, 4);
	refused(c, SHM_BLOB_LEN, "memfd window without a region id");

	struct shm_blob bad = in;
	bad.base = in.region_addr - 1;
	rma__shm_blob_encode(&bad, c);
	refused(c, SHM_BLOB_LEN, "window below its region");
	bad.base = in.region_addr + in.region_len + 1;
	rma__shm_blob_encode(&bad, c);
	refused(c, SHM_BLOB_LEN, "window past its region");
	bad = in;
	bad.region_len = 0;
	rma__shm_blob_encode(&bad, c);
	refused(c, SHM_BLOB_LEN, "memfd region of length 0");

	/* A plain window carries no region fields. */
	struct shm_blob plain = in;
	plain.flags = 0;
	plain.region_id = 0;
	plain.region_addr = plain.region_len = 0;
	rma__shm_blob_encode(&plain, c);
	CHECK_RC(rma__shm_blob_decode(c, SHM_BLOB_LEN, &out), 0);
	plain.region_id = 3;
	rma__shm_blob_encode(&plain, c);
	refused(c, SHM_BLOB_LEN, "region id on a plain window");
	plain.region_id = 0;
	plain.region_len = 5;
	rma__shm_blob_encode(&plain, c);
	refused(c, SHM_BLOB_LEN, "region length on a plain window");
	printf("ok\n");
	return 0;
}
