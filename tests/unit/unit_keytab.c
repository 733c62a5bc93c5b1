/* The region key table: put/get/del/reinsert with many random keys across
 * several grow steps; duplicates and key 0 refused; tombstones keep probe
 * chains intact. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "core/keytab.h"
#include "testlib.h"

#define N 50000

static uint64_t keys[N];
static int vals[N];

int main(void)
{
	uint64_t seed = test_seed("unit_keytab");
	struct rma__keytab t;

	test_watchdog(60);
	CHECK_RC(rma__keytab_init(&t, test_rand(&seed)), 0);
	CHECK_RC(rma__keytab_put(&t, 0, &vals[0]), -EINVAL);
	CHECK(rma__keytab_get(&t, 0) == NULL);
	CHECK(rma__keytab_del(&t, 0) == NULL);
	CHECK(rma__keytab_get(&t, 12345) == NULL);

	for (int i = 0; i < N; i++) {
		do
			keys[i] = test_rand(&seed);
		while (!keys[i]);
		CHECK_RC(rma__keytab_put(&t, keys[i], &vals[i]), 0);
		if (i % 997 == 0)
			for (int j = 0; j <= i; j += 13)
				CHECK(rma__keytab_get(&t, keys[j]) == &vals[j]);
	}
	CHECK_EQ(t.n, N);
	CHECK(t.cap >= 2 * N);
	for (int i = 0; i < N; i++) {
		CHECKF(rma__keytab_get(&t, keys[i]) == &vals[i], "key %d lost", i);
		CHECK_RC(rma__keytab_put(&t, keys[i], &vals[0]), -EEXIST);
	}
	/* Keys next to issued ones are unknown (a random collision among
	 * 50000 keys in 2^64 is not a concern). */
	for (int i = 0; i < 1000; i++) {
		CHECK(rma__keytab_get(&t, keys[i] + 1) == NULL);
		CHECK(rma__keytab_get(&t, keys[i] ^ (1ull << 63)) == NULL);
	}

	/* Delete every other key; the rest stay reachable past tombstones. */
	for (int i = 0; i < N; i += 2)
		CHECK(rma__keytab_del(&t, keys[i]) == &vals[i]);
	for (int i = 0; i < N; i++)
		CHECK(rma__keytab_get(&t, keys[i]) == (i % 2 ? &vals[i] : NULL));
	for (int i = 0; i < N; i += 2)
		CHECK(rma__keytab_del(&t, keys[i]) == NULL);
	CHECK_EQ(t.n, N / 2);

	/* Reinsert with new values, and churn (del + put) many times so the
	 * table rehashes its tombstones. */
	for (int i = 0; i < N; i += 2)
		CHECK_RC(rma__keytab_put(&t, keys[i], &vals[(i + 1) % N]), 0);
	for (int round = 0; round < 5; round++)
		for (int i = 0; i < N; i++) {
			CHECK(rma__keytab_del(&t, keys[i]) != NULL);
			CHECK_RC(rma__keytab_put(&t, keys[i], &vals[i]), 0);
		}
	CHECK_EQ(t.n, N);
	for (int i = 0; i < N; i++)
		CHECK(rma__keytab_get(&t, keys[i]) == &vals[i]);

	/* Empty it completely, then reuse. */
	for (int i = 0; i < N; i++)
		CHECK(rma__keytab_del(&t, keys[i]) == &vals[i]);
	CHECK_EQ(t.n, 0);
	for (int i = 0; i < N; i++)
		CHECK(rma__keytab_get(&t, keys[i]) == NULL);
	CHECK_RC(rma__keytab_put(&t, keys[7], &vals[7]), 0);
	CHECK(rma__keytab_get(&t, keys[7]) == &vals[7]);
	rma__keytab_fini(&t);
	printf("ok\n");
	return 0;
}
