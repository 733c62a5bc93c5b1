/* Both CRC-32C paths, whichever the CPU would pick: the table (the only one
 * on CPUs without SSE4.2) and SSE4.2 (where present), each against the
 * standard vectors, each in pieces at every alignment, and each equal to
 * the other and to rma_crc32c on random data. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "testlib.h"
#include "util/util.h"

struct vec {
	const char *what;
	uint8_t fill; /* 0: zeros, 1: 0xff, 2: ascending, 3: descending */
	uint32_t crc;
};

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static uint32_t hw(uint32_t c, const void *p, size_t n)
{
	uint32_t out = 0;
	CHECK_RC(rma__crc32c_sse42(c, p, n, &out), 0);
	return out;
}

static void check_path(const char *name, crc_fn f)
{
	/* RFC 3720 B.4 and the usual check value. */
	static const struct vec v[] = {
		{"32 zeros", 0, 0x8a9136aa}, {"32 x 0xff", 1, 0x62a8ab43},
		{"0..31", 2, 0x46dd794e}, {"31..0", 3, 0x113fdb5c},
	};
	uint8_t b[64];

	CHECKF(f(0, "123456789", 9) == 0xe3069283, "%s: check value 0x%08x", name,
	       f(0, "123456789", 9));
	CHECK_EQ_U64(f(0, "", 0), 0);
	CHECK_EQ_U64(f(0, "a", 1), 0xc1d04330);
	for (size_t k = 0; k < RMA_ARRAY_SIZE(v); k++) {
		for (int i = 0; i < 32; i++)
			b[i] = v[k].fill == 0 ? 0 : v[k].fill == 1 ? 0xff
			       : v[k].fill == 2 ? (uint8_t)i : (uint8_t)(31 - i);
		uint32_t got = f(0, b, 32);
		CHECKF(got == v[k].crc, "%s, %s: 0x%08x, expected 0x%08x", name,
		       v[k].what, got, v[k].crc);
		/* In two pieces at every split: the same value. */
		for (int cut = 0; cut <= 32; cut++) {
			uint32_t c = f(f(0, b, (size_t)cut), b + cut, (size_t)(32 - cut));
			CHECKF(c == v[k].crc, "%s, %s, split at %d: 0x%08x", name,
			       v[k].what, cut, c);
		}
	}
	/* Every start alignment and tail length of the check value. */
	for (int off = 0; off < 8; off++) {
		memcpy(b + off, "123456789", 9);
		CHECKF(f(0, b + off, 9) == 0xe3069283, "%s, offset %d", name, off);
	}
	printf("%s: ok\n", name);
}

int main(void)
{
	uint64_t seed = test_seed("unit_crc32c_paths");
	static uint8_t buf[20000];
	uint32_t out;

	test_watchdog(60);
	check_path("table", rma__crc32c_table);
	int rc = rma__crc32c_sse42(0, "", 0, &out);
	if (rc == 0)
		check_path("sse4.2", hw);
	else
		printf("sse4.2: not on this CPU (%s); the table is what runs\n",
		       rma_strerror(rc));
	for (int k = 0; k < 100; k++) {
		size_t n = (size_t)test_rand_range(&seed, 0, sizeof buf);
		size_t off = (size_t)test_rand_range(&seed, 0, 7);
		for (size_t i = 0; i < n - RMA_MIN(n, off); i++)
			buf[off + i] = (uint8_t)test_rand(&seed);
		size_t len = n - RMA_MIN(n, off);
		uint32_t t = rma__crc32c_table(0, buf + off, len);
		CHECK_EQ_U64(rma_crc32c(0, buf + off, len), t);
		if (rc == 0)
			CHECK_EQ_U64(hw(0, buf + off, len), t);
	}
	printf("ok\n");
	return 0;
}
