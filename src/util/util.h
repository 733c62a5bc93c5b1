/* Small internal helpers shared by the core and transports. */
#ifndef RMA_UTIL_H
#define RMA_UTIL_H

#include <endian.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define RMA_EXPORT __attribute__((visibility("default")))
#define RMA_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RMA_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RMA_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Little-endian loads and stores (the wire and advertisement byte order):
 * one move each on little-endian hosts, where memcpy of a fixed size
 * compiles to a plain load or store. */
static inline void rma__put_le16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof v);
}
static inline void rma__put_le32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof v);
}
static inline void rma__put_le64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof v);
}
static inline uint16_t rma__le16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof v);
	return le16toh(v);
}
static inline uint32_t rma__le32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return le32toh(v);
}
static inline uint64_t rma__le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return le64toh(v);
}

/* Random bytes from getrandom(); falls back to nothing weaker. */
int rma__random(void *buf, size_t n);
uint64_t rma__random_u64(void); /* never 0 */

/* Keyed 64-bit hash (SipHash-2-4) for the secret proof and table salting. */
uint64_t rma__siphash(const uint8_t key[16], const void *data, size_t n);

/* CRC-32C by one path: the table (every CPU), or SSE4.2 (0, or -ENOTSUP
 * on a CPU without it).  rma_crc32c picks the fastest; tests check both. */
uint32_t rma__crc32c_table(uint32_t crc, const void *buf, size_t len);
int rma__crc32c_sse42(uint32_t crc, const void *buf, size_t len, uint32_t *out);

/* Logging. */
void rma__log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int rma__log_enabled(int level);
void rma__log_set_level(int level);
#define rma__err(...) rma__log(RMA_LOG_ERROR, __VA_ARGS__)
#define rma__warn(...) rma__log(RMA_LOG_WARN, __VA_ARGS__)
#define rma__info(...) rma__log(RMA_LOG_INFO, __VA_ARGS__)
#define rma__dbg(...) \
	do { if (rma__log_enabled(RMA_LOG_DEBUG)) rma__log(RMA_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
