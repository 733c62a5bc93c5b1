/*
 * Chaos on one process pair: three threads post random puts/gets (1 B to
 * 3 MiB, deadlines of 1-20 ms or 2 s) while a fourth releases and
 * re-registers target regions, releases the local region, and removes the
 * peer.  Every posted op must complete exactly once, with its length or an
 * error that the chaos explains; under ASan nothing may touch freed memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testlib.h"

#define NREG 3
#define RSZ (3u << 20)
#define SECONDS 4

static rma_engine *T, *I;
static rma_region *treg[NREG], *ireg;
static rma_remote *rem[NREG];
static char *tbuf[NREG], *ibuf;
static pthread_rwlock_t tlock, ilock; /* handles swapped by the chaos thread */
static atomic_long posted, completed, bad;
static atomic_int stop;
static unsigned seed;

static void account(const struct rma_completion *c, int n)
{
	for (int i = 0; i < n; i++) {
		int64_t r = c[i].result;
		completed++;
		if (r >= 0 ? (uint64_t)r != c[i].user_data
			   : r != -ETIMEDOUT && r != -ECANCELED &&
				     r != -EKEYREJECTED && r != -ECONNRESET) {
			fprintf(stderr, "unexpected result %lld for a %llu-byte op (%s)\n",
				(long long)r, (unsigned long long)c[i].user_data,
				r < 0 ? rma_strerror((int)r) : "short");
			bad++;
		}
	}
}

static void *poster(void *arg)
{
	unsigned s = seed + (unsigned)(uintptr_t)arg;
	struct rma_completion c[64];

	while (!stop) {
		struct rma_op ops[16];
		int n = 1 + rand_r(&s) % 16;
		pthread_rwlock_rdlock(&tlock);
		pthread_rwlock_rdlock(&ilock);
		for (int i = 0; i < n; i++) {
			uint64_t len = rand_r(&s) % 4 ? (uint64_t)(rand_r(&s) % 70000)
						      : (uint64_t)rand_r(&s) % RSZ;
			ops[i] = (struct rma_op){
				.kind = 1 + rand_r(&s) % 2, .local = ireg,
				.local_off = rand_r(&s) % (RSZ - len + 1),
				.remote = rem[rand_r(&s) % NREG],
				.remote_off = rand_r(&s) % (RSZ - len + 1),
				.len = len, .user_data = len};
		}
		int timeout = rand_r(&s) % 3 ? 1 + rand_r(&s) % 20 : 2000;
		int r = rma_post(I, ops, (size_t)n, timeout, NULL);
		pthread_rwlock_unlock(&ilock);
		pthread_rwlock_unlock(&tlock);
		if (r > 0)
			posted += r;
		else if (r != -EAGAIN)
			CHECK_RC(r, 1);
		account(c, rma_poll(I, c, 64));
		if (r == -EAGAIN)
			test_sleep_ms(1);
	}
	return NULL;
}

static void *chaos(void *arg)
{
	unsigned s = seed * 7 + 1;
	while (!stop) {
		test_sleep_ms(2 + rand_r(&s) % 5);
		int k = rand_r(&s) % NREG;
		switch (rand_r(&s) % 3) {
		case 0: /* a target region goes and comes back (new key) */
			pthread_rwlock_wrlock(&tlock);
			CHECK_RC(rma_region_release(treg[k]), 0);
			CHECK_RC(rma_region_register(T, tbuf[k], RSZ,
						     RMA_ACCESS_REMOTE_RW, &treg[k]), 0);
			rma_remote_free(rem[k]);
			rem[k] = test_remote_of(treg[k]);
			pthread_rwlock_unlock(&tlock);
			break;
		case 1: /* the local region goes: its ops are cancelled */
			pthread_rwlock_wrlock(&ilock);
			CHECK_RC(rma_region_release(ireg), 0);
			CHECK_RC(rma_region_register(I, ibuf, RSZ, 0, &ireg), 0);
			pthread_rwlock_unlock(&ilock);
			break;
		default: { /* the peer goes: waits briefly, cancels the rest */
			pthread_rwlock_rdlock(&tlock);
			int r = rma_peer_remove(I, rem[0], rand_r(&s) % 2 ? 1 : 5);
			pthread_rwlock_unlock(&tlock);
			CHECKF(r == 0 || r == -ETIMEDOUT || r == -ENOENT,
			       "rma_peer_remove: %s", rma_strerror(r));
		}
		}
	}
	return NULL;
}

int main(void)
{
	pthread_t th[4];
	struct rma_completion c[64];
	int n;

	test_watchdog(120);
	seed = (unsigned)test_seed("chaos");
	pthread_rwlock_init(&tlock, NULL);
	pthread_rwlock_init(&ilock, NULL);
	T = test_tcp_engine((struct rma_config){0});
	I = test_tcp_engine((struct rma_config){.queue_depth = 16});
	for (int k = 0; k < NREG; k++) {
		tbuf[k] = test_alloc(RSZ);
		memset(tbuf[k], k, RSZ);
		CHECK_RC(rma_region_register(T, tbuf[k], RSZ, RMA_ACCESS_REMOTE_RW, &treg[k]), 0);
		rem[k] = test_remote_of(treg[k]);
	}
	ibuf = test_alloc(RSZ);
	CHECK_RC(rma_region_register(I, ibuf, RSZ, 0, &ireg), 0);
	for (uintptr_t i = 0; i < 3; i++)
		CHECK(pthread_create(&th[i], NULL, poster, (void *)i) == 0);
	CHECK(pthread_create(&th[3], NULL, chaos, NULL) == 0);
	test_sleep_ms(SECONDS * 1000);
	/* a slow build on a busy host: chaos until enough ops, 30 s at most */
	for (int i = 0; posted <= 1000 && i < 260; i++)
		test_sleep_ms(100);
	stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);

	int rc = rma_engine_shutdown(I, 5000);
	CHECKF(rc == 0 || rc == -ETIMEDOUT, "shutdown: %s", rma_strerror(rc));
	while ((n = rma_poll(I, c, 64)) > 0)
		account(c, n);
	printf("posted %ld, completed %ld\n", (long)posted, (long)completed);
	CHECK(posted > 1000);
	CHECK_EQ(completed, posted);
	CHECK_EQ(bad, 0);
	rma_engine_destroy(I);
	rma_engine_destroy(T);
	for (int k = 0; k < NREG; k++)
		rma_remote_free(rem[k]);
	return 0;
}
