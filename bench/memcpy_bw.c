/*
 * memcpy_bw.c - the memory limit for bench/compare: one thread copying
 * SIZE bytes between two buffers, over and over, for a fixed time.
 *
 *   memcpy_bw [--sizes LIST] [--duration MS]
 *
 * Prints one JSON object per size: system "memcpy", op "copy", iters,
 * seconds, bandwidth_MBps (10^6 bytes per second), ops_per_s.
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

int main(int argc, char **argv)
{
	char list[256] = "8,4K,64K,1M,16M";
	unsigned duration_ms = 500;
	uint64_t sizes[16], max = 0;
	int n = 0;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--sizes"))
			snprintf(list, sizeof list, "%s", argv[i + 1]);
		else if (!strcmp(argv[i], "--duration"))
			duration_ms = (unsigned)atoi(argv[i + 1]);
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
	if (!src || !dst || !duration_ms)
		return 1;
	memset(src, 1, max);
	memset(dst, 2, max);
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns(), end = t0 + (uint64_t)duration_ms * 1000000u;
		uint64_t iters = 0, t;

		do {
			/* 64 copies between clock reads keep the clock out of
			 * small sizes' numbers. */
			for (int k = 0; k < 64; k++) {
				memcpy(dst, src, sizes[i]);
				/* the copy must happen: dst "escapes" */
				__asm__ volatile("" : : "r"(dst) : "memory");
			}
			iters += 64;
		} while ((t = now_ns()) < end);
		double secs = (double)(t - t0) / 1e9;
		printf("{\"system\":\"memcpy\",\"op\":\"copy\",\"size\":%llu,\"iters\":%llu,"
		       "\"seconds\":%.4f,\"bandwidth_MBps\":%.2f,\"ops_per_s\":%.0f}\n",
		       (unsigned long long)sizes[i], (unsigned long long)iters, secs,
		       (double)iters * (double)sizes[i] / secs / 1e6, (double)iters / secs);
		fflush(stdout);
	}
	free(src);
	free(dst);
	return 0;
}
