/*
 * Fault: the owner releases a region while remote puts and gets stream
 * into it, then at once overwrites the memory (as an owner reusing it
 * would).  When release returns, no peer touches the memory any more:
 *   - every get that succeeded holds only bytes from before the overwrite
 *     (the first pattern or the puts' pattern, never the owner's new one);
 *   - no put lands after release returned (the memory still holds exactly
 *     the owner's new pattern once the streams stop);
 *   - every op posted after release returned fails.
 * Three rounds: the region is registered again between them.
 */
#include "integ_fault.h"

#define SIZE (8 * MiB)
#define OPSZ (256u << 10)
#define W 16        /* ops in flight */
#define STREAM_MS 300
#define S_OLD 41    /* the region before the streams */
#define S_PUT 42    /* what the puts write */
#define S_NEW 43    /* what the owner writes after release */

static unsigned char *ref_old, *ref_put;

/* Each byte of a get must come from before the overwrite. */
static void check_get(const unsigned char *got, uint64_t roff, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++) {
		unsigned char b = got[i];
		CHECKF(b == ref_old[roff + i] || b == ref_put[roff + i],
		       "a successful get read byte %llu of the region after "
		       "release returned (0x%02x)",
		       (unsigned long long)(roff + i), b);
	}
}

int main(int argc, char **argv)
{
	test_watchdog(110);
	const char *tr = fault_transport(argc, argv);
	uint64_t seed = test_seed("release");
	struct target_opts o = { .transports = tr, .rw_size = SIZE, .rw_seed = S_OLD };
	struct target t;
	if (target_start(&t, &o))
		return TEST_SKIP;
	rma_engine *e = fault_engine(tr);
	ref_old = test_alloc(SIZE);
	test_fill(ref_old, SIZE, S_OLD);
	/* local: W get slots, then the put source (the put pattern, so a put
	 * at remote offset X sends the pattern's bytes for X) */
	size_t llen = (size_t)W * OPSZ + SIZE;
	unsigned char *buf = test_alloc(llen);
	ref_put = buf + (size_t)W * OPSZ;
	test_fill(ref_put, SIZE, S_PUT);
	rma_region *l = integ_region(e, buf, llen);

	for (int round = 0; round < 3; round++) {
		if (round) {
			target_cmd(&t, NULL, 0, "register rw");
			target_cmd(&t, NULL, 0, "fill rw %d", S_OLD);
		}
		rma_remote *rem = integ_remote(&t, "rw");
		CHECK_RC(rma_peer_connect(e, rem, 10000), 0);
		int busy[W] = { 0 };
		struct rma_op slot[W];
		long ok_before = 0, ok_racing = 0, err_racing = 0, err_after = 0;
		int phase = 0; /* 0 streaming, 1 release returned, 2 draining */
		int inflight = 0;
		int64_t phase_end = test_now_ms() + STREAM_MS;
		while (phase < 2 || inflight) {
			if (phase == 0 && test_now_ms() >= phase_end) {
				/* The engine keeps streaming while this thread
				 * waits for the target's answer. */
				char rep[64];
				target_cmd(&t, rep, sizeof rep, "release_fill rw %d",
					   S_NEW);
				CHECKF(atoi(rep) == 0, "release: %s", rep);
				phase = 1;
				phase_end = test_now_ms() + STREAM_MS;
			} else if (phase == 1 && test_now_ms() >= phase_end) {
				phase = 2;
			}
			for (int s = 0; s < W && phase < 2; s++) {
				if (busy[s])
					continue;
				uint64_t len = test_rand_range(&seed, 1, OPSZ);
				uint64_t roff = test_rand_range(&seed, 0, SIZE - len);
				int get = test_rand(&seed) & 1;
				slot[s] = (struct rma_op){
					.kind = get ? RMA_OP_GET : RMA_OP_PUT,
					.local = l,
					.local_off = get ? (uint64_t)s * OPSZ
							 : (uint64_t)W * OPSZ + roff,
					.remote = rem, .remote_off = roff, .len = len,
					.user_data = (uint64_t)s | (uint64_t)phase << 32 };
				int r = rma_post(e, &slot[s], 1, 10000, NULL);
				if (r == -EAGAIN)
					break;
				CHECK_RC(r, 1);
				busy[s] = 1;
				inflight++;
			}
			struct rma_completion c[W];
			int n = rma_poll(e, c, W);
			CHECK_OK(n);
			for (int i = 0; i < n; i++) {
				int s = (int)(c[i].user_data & 0xffffffff);
				int posted_after = (int)(c[i].user_data >> 32);
				int64_t r = c[i].result;
				CHECK(s < W && busy[s]);
				busy[s] = 0;
				inflight--;
				if (posted_after) {
					CHECKF(r < 0, "an op posted after release "
					       "returned succeeded (%lld)", (long long)r);
					CHECK(r != -ETIMEDOUT);
					err_after++;
					continue;
				}
				if (r < 0) {
					CHECKF(phase > 0, "op failed before release: "
					       "%s", fault_err(r));
					err_racing++;
					continue;
				}
				CHECK_RC(r, slot[s].len);
				if (slot[s].kind == RMA_OP_GET)
					check_get(buf + (size_t)s * OPSZ,
						  slot[s].remote_off, slot[s].len);
				if (phase)
					ok_racing++;
				else
					ok_before++;
			}
			if (!n)
				test_sleep_ms(1);
		}
		printf("round %d: ok before release %ld, racing it: ok %ld, "
		       "failed %ld; posted after it: failed %ld\n", round,
		       ok_before, ok_racing, err_racing, err_after);
		CHECKF(ok_before > 0 && err_after > 0,
		       "the streams did not span the release");
		char rep[64];
		test_sleep_ms(200); /* a stray put would have landed by now */
		target_cmd(&t, rep, sizeof rep, "check rw %d", S_NEW);
		CHECKF(atoi(rep) == -1, "a put landed at byte %s after release "
		       "returned", rep);
		rma_remote_free(rem);
	}

	rma_engine_destroy(e);
	target_stop(&t);
	printf("ok\n");
	return 0;
}
