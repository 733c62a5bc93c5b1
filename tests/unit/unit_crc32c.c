/* rma_crc32c: the Castagnoli check value and other known vectors, and
 * continuation across any split point equals one pass. */
#include <string.h>

#include "check.h"
#include "testlib.h"

int main(void)
{
	uint64_t seed = test_seed("unit_crc32c");
	static uint8_t buf[70000];

	test_watchdog(60);
	CHECK_EQ_U64(rma_crc32c(0, "123456789", 9), 0xe3069283);
	CHECK_EQ_U64(rma_crc32c(0, "", 0), 0);
	CHECK_EQ_U64(rma_crc32c(0, "a", 1), 0xc1d04330);
	/* RFC 3720 B.4: 32 bytes of zeros, of 0xff, ascending, descending. */
	memset(buf, 0, 32);
	CHECK_EQ_U64(rma_crc32c(0, buf, 32), 0x8a9136aa);
	memset(buf, 0xff, 32);
	CHECK_EQ_U64(rma_crc32c(0, buf, 32), 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	CHECK_EQ_U64(rma_crc32c(0, buf, 32), 0x46dd794e);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	CHECK_EQ_U64(rma_crc32c(0, buf, 32), 0x113fdb5c);

	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)test_rand(&seed);
	uint32_t whole = rma_crc32c(0, buf, sizeof buf);
	for (int k = 0; k < 200; k++) {
		size_t a = (size_t)test_rand_range(&seed, 0, sizeof buf);
		size_t b = (size_t)test_rand_range(&seed, a, sizeof buf);
		uint32_t c = rma_crc32c(0, buf, a);
		c = rma_crc32c(c, buf + a, b - a);
		c = rma_crc32c(c, buf + b, sizeof buf - b);
		CHECKF(c == whole, "split at %zu/%zu: 0x%08x != 0x%08x", a, b, c,
		       whole);
	}
	/* Misaligned starts agree with an aligned copy. */
	for (size_t off = 1; off < 16; off++) {
		static uint8_t copy[1000];
		memcpy(copy, buf + off, sizeof copy);
		CHECK_EQ_U64(rma_crc32c(0, buf + off, sizeof copy),
			     rma_crc32c(0, copy, sizeof copy));
	}
	printf("ok\n");
	return 0;
}
