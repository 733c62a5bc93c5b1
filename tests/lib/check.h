/*
 * check.h - tiny assertion macros for rma's tests.
 *
 * A failing check prints file:line, the expression and the values that
 * differed, then exits 1.  SKIP() exits 77 (ctest's SKIP_RETURN_CODE).
 */
#ifndef RMA_TEST_CHECK_H
#define RMA_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "rma.h"

#define TEST_SKIP 77

#define FAIL(...)                                                           \
	do {                                                                \
		fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);       \
		fprintf(stderr, __VA_ARGS__);                               \
		fputc('\n', stderr);                                        \
		exit(1);                                                    \
	} while (0)

#define SKIP(...)                                                           \
	do {                                                                \
		fprintf(stderr, "SKIP: ");                                  \
		fprintf(stderr, __VA_ARGS__);                               \
		fputc('\n', stderr);                                        \
		exit(TEST_SKIP);                                            \
	} while (0)

#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond))                                                \
			FAIL("check failed: %s", #cond);                    \
	} while (0)

/* CHECK with a formatted explanation. */
#define CHECKF(cond, ...)                                                   \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "%s:%d: FAIL: check failed: %s: ",  \
				__FILE__, __LINE__, #cond);                 \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			exit(1);                                            \
		}                                                           \
	} while (0)

#define CHECK_EQ(a, b)                                                      \
	do {                                                                \
		long long a_ = (long long)(a), b_ = (long long)(b);         \
		if (a_ != b_)                                               \
			FAIL("%s == %s: got %lld, expected %lld", #a, #b,   \
			     a_, b_);                                       \
	} while (0)

#define CHECK_EQ_U64(a, b)                                                  \
	do {                                                                \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);            \
		if (a_ != b_)                                               \
			FAIL("%s == %s: got 0x%" PRIx64 ", expected 0x%"    \
			     PRIx64, #a, #b, a_, b_);                       \
	} while (0)

/* An rma call's result must be `want` (0, a count, or -errno); errors are
 * printed by name. */
#define CHECK_RC(expr, want)                                                \
	do {                                                                \
		long long r_ = (long long)(expr), w_ = (long long)(want);   \
		if (r_ != w_)                                               \
			FAIL("%s: got %lld (%s), expected %lld (%s)", #expr,\
			     r_, r_ < 0 ? rma_strerror((int)r_) : "ok", w_, \
			     w_ < 0 ? rma_strerror((int)w_) : "ok");        \
	} while (0)

/* The call must succeed (result >= 0). */
#define CHECK_OK(expr)                                                      \
	do {                                                                \
		long long r_ = (long long)(expr);                           \
		if (r_ < 0)                                                 \
			FAIL("%s: failed with %lld (%s)", #expr, r_,        \
			     rma_strerror((int)r_));                        \
	} while (0)

#endif
