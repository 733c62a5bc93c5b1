/*
 * memcpy_bw.c - the memory limit for bench/compare: one thread copying
 * SIZE bytes between two buffers, over and over, for a fixed time.
 *
 *   memcpy_bw [--sizes LIST] [--duration MS] [--piece BYTES]
 *
 * Each size is copied two ways: whole, one memcpy of SIZE bytes, and in
 * pieces, one memcpy per --piece bytes (default 256K, the pieces in which
 * rma's shm transport copies a chunk directly).  The two differ: glibc
 * copies a large block with non-temporal stores past the cache, while
 * pieces of 256 KiB stay in the cache's regime.  A size no larger than a
 * piece is copied whole only.
 * For larger sizes the duration is split into 4 rounds of each, in
 * alternation, so drift hits both alike; the better one is the limit.
 *
 * Prints one JSON object per size: system "memcpy", op "copy", iters,
 * seconds, bandwidth_MBps (10^6 bytes per second), ops_per_s, of the
 * better way; "method" ("whole" or "pieces"), "piece" (bytes), and
 * "whole_MBps" and "pieces_MBps" (null when not measured).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	if (*end == 'K')
		v <<= 10;
	else if (*end == 'M')
		v <<= 20;
	else if (*end == 'G')
		v <<= 30;
	return v;
}

#define ROUNDS 4

/* Copy size bytes from src to dst, in pieces of at most piece bytes, over
 * and over for ms; adds the copies and the seconds they took. */
static void copy_for(char *dst, const char *src, uint64_t size, uint64_t piece,
		     uint64_t ms, uint64_t *iters, double *secs)
{
	uint64_t t0 = now_ns(), end = t0 + ms * 1000000u, n = 0, t;
	/* 64 copies between clock reads keep the clock out of small sizes'
	 * numbers; a large copy reads it after each, so a round ends on time. */
	int batch = size <= 65536 ? 64 : 1;

	do {
		for (int k = 0; k < batch; k++) {
			for (uint64_t off = 0; off < size; off += piece)
				memcpy(dst + off, src + off,
				       size - off < piece ? size - off : piece);
			/* the copy must happen: dst "escapes" */
			__asm__ volatile("" : : "r"(dst) : "memory");
		}
		n += (uint64_t)batch;
	} while ((t = now_ns()) < end);
	*iters += n;
	*secs += (double)(t - t0) / 1e9;
}

int main(int argc, char **argv)
{
	char list[256] = "8,4K,64K,1M,16M";
	unsigned duration_ms = 500;
	uint64_t piece = 256 << 10;
	uint64_t sizes[16], max = 0;
	int n = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--sizes"))
			snprintf(list, sizeof list, "%s", argv[i + 1]);
		else if (!strcmp(argv[i], "--duration"))
			duration_ms = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--piece"))
			piece = parse_size(argv[i + 1]);
		else
			return 2;
	}
	for (char *save, *t = strtok_r(list, ",", &save); t && n < 16;
	     t = strtok_r(NULL, ",", &save)) {
		if ((sizes[n] = parse_size(t)) == 0)
			return 2;
		if (sizes[n] > max)
			max = sizes[n];
		n++;
	}
	char *src = malloc(max), *dst = malloc(max);
	if (!src || !dst || !duration_ms || !piece)
		return 1;
	memset(src, 1, max);
	memset(dst, 2, max);
	for (int i = 0; i < n; i++) {
		uint64_t size = sizes[i], w_iters = 0, p_iters = 0;
		double w_secs = 0, p_secs = 0, w_mbps, p_mbps = -1;
		int pieces = size > piece;

		if (!pieces) {
			copy_for(dst, src, size, size, duration_ms, &w_iters, &w_secs);
		} else {
			uint64_t ms = duration_ms / (2 * ROUNDS) ? duration_ms / (2 * ROUNDS) : 1;

			for (int r = 0; r < ROUNDS; r++) {
				copy_for(dst, src, size, size, ms, &w_iters, &w_secs);
				copy_for(dst, src, size, piece, ms, &p_iters, &p_secs);
			}
			p_mbps = (double)p_iters * (double)size / p_secs / 1e6;
		}
		w_mbps = (double)w_iters * (double)size / w_secs / 1e6;
		int best_pieces = p_mbps > w_mbps;
		uint64_t iters = best_pieces ? p_iters : w_iters;
		double secs = best_pieces ? p_secs : w_secs;
		char pm[32] = "null";

		if (pieces)
			snprintf(pm, sizeof pm, "%.2f", p_mbps);
		printf("{\"system\":\"memcpy\",\"op\":\"copy\",\"size\":%llu,\"iters\":%llu,"
		       "\"seconds\":%.4f,\"bandwidth_MBps\":%.2f,\"ops_per_s\":%.0f,"
		       "\"method\":\"%s\",\"piece\":%llu,\"whole_MBps\":%.2f,"
		       "\"pieces_MBps\":%s}\n",
		       (unsigned long long)size, (unsigned long long)iters, secs,
		       (double)iters * (double)size / secs / 1e6, (double)iters / secs,
		       best_pieces ? "pieces" : "whole", (unsigned long long)piece, w_mbps, pm);
		fflush(stdout);
	}
	free(src);
	free(dst);
	return 0;
}
