/* crc32c (Castagnoli): SSE4.2 instruction when the CPU has it, else a
 * slicing-by-8 table.  Used for advertisements and by the CLI. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "rma.h"
#include "util/util.h"

static uint32_t table[8][256];
static int have_sse42;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		table[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (int i = 0; i < 256; i++)
			table[t][i] = (table[t - 1][i] >> 8) ^
				      table[0][table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c,
							 const uint8_t *p,
							 size_t n)
{
	uint64_t c64 = c;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi(c, *p++);
		n--;
	}
	c64 = c;
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		w ^= c;
		c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
		    table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
		    table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		    table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return c;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Each path by itself, so that both are tested on every CPU. */
uint32_t rma__crc32c_table(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, crc_init);
	return ~crc_sw(~crc, buf, len);
}

int rma__crc32c_sse42(uint32_t crc, const void *buf, size_t len, uint32_t *out)
{
	pthread_once(&once, crc_init);
#if defined(__x86_64__)
	if (have_sse42) {
		*out = ~crc_hw(~crc, buf, len);
		return 0;
	}
#endif
	(void)crc;
	(void)buf;
	(void)len;
	(void)out;
	return -ENOTSUP;
}

RMA_EXPORT uint32_t rma_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, crc_init);
	uint32_t c = ~crc;
#if defined(__x86_64__)
	if (have_sse42)
		return ~crc_hw(c, buf, len);
#endif
	return ~crc_sw(c, buf, len);
}
