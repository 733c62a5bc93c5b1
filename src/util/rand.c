/* Randomness and keyed hashing.  Keys and nonces come from getrandom(),
 * never from counters or addresses. */
#include <errno.h>
#include <sys/random.h>

#include "rma.h"
#include "util/util.h"

int rma__random(void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

uint64_t rma__random_u64(void)
{
	uint64_t v = 0;
	while (v == 0)
		if (rma__random(&v, sizeof v) < 0)
			return 0; /* callers check for 0 */
	return v;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                     \
	do {                                                         \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;               \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;               \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)

uint64_t rma__siphash(const uint8_t key[16], const void *data, size_t n)
{
	const uint8_t *in = data;
	uint64_t k0 = rma__le64(key), k1 = rma__le64(key + 8);
	uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
	uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
	uint64_t b = (uint64_t)n << 56;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		uint64_t m = rma__le64(in + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t j = 0; i + j < n; j++)
		b |= (uint64_t)in[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}
