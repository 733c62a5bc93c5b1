/*
 * How deep a receiver sets SO_RCVLOWAT in a large payload (conn.c,
 * rx_lowat).  A lone payload, nothing queued behind it, is read in marks
 * of RX_LOWAT, so that its copy out overlaps its sending.  In a stream of
 * payloads, each one's end finding the next message already come, the
 * mark is the payload's whole rest, from the second on: one wake-up and
 * one read each, until a payload's end finds nothing more.  Gets test the
 * initiator's side, puts the target's.  Both engines run manual progress
 * on this thread, so what sits in the socket when a payload ends is
 * known; setsockopt is wrapped at link time to see each mark set, and the
 * bytes must land.
 */
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "testlib.h"
#include "transport/tcp/tcp.h"

#define N 4
#define LEN (1u << 20)

int __real_setsockopt(int fd, int level, int name, const void *v, socklen_t len);

static int top;        /* the highest SO_RCVLOWAT set since the last run */
static int lone_marks; /* how many times it was set to RX_LOWAT */

int __wrap_setsockopt(int fd, int level, int name, const void *v, socklen_t len)
{
	if (level == SOL_SOCKET && name == SO_RCVLOWAT && len == sizeof(int)) {
		int want;
		memcpy(&want, v, sizeof want);
		if (want > top)
			top = want;
		lone_marks += want == (int)RX_LOWAT;
	}
	return __real_setsockopt(fd, level, name, v, len);
}

static rma_engine *t, *e;

/* Progress both engines until n completions have come, each of len bytes. */
static void finish(int n, int64_t len)
{
	struct rma_completion c[N];
	int got = 0;

	for (int i = 0; i < 200000 && got < n; i++) {
		rma_progress(t, 0);
		rma_progress(e, 0);
		int k = rma_poll(e, c, N);
		CHECK(k >= 0);
		for (int j = 0; j < k; j++)
			CHECK_RC(c[j].result, len);
		got += k;
	}
	CHECK_EQ(got, n);
}

/* n ops of LEN bytes, all posted at once; the highest mark they set. */
static int run(unsigned kind, int n, rma_region *ir, rma_remote *rem)
{
	struct rma_op ops[N];

	for (int i = 0; i < n; i++)
		ops[i] = (struct rma_op){.kind = kind, .local = ir,
					 .local_off = (uint64_t)i * LEN, .remote = rem,
					 .remote_off = (uint64_t)i * LEN, .len = LEN,
					 .user_data = (uint64_t)i};
	top = lone_marks = 0;
	CHECK_RC(rma_post(e, ops, (unsigned)n, 10000, NULL), n);
	finish(n, LEN);
	return top;
}

int main(void)
{
	static char tb[N * LEN], ib[N * LEN];
	rma_region *tr, *ir;

	test_watchdog(60);
	/* The smallest socket buffers: a payload never fits whole. */
	t = test_tcp_engine((struct rma_config){.transports = "tcp:sockbuf=64K",
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1});
	e = test_tcp_engine((struct rma_config){.transports = "tcp:sockbuf=64K",
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1});
	CHECK_RC(rma_region_register(t, tb, sizeof tb, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(e, ib, sizeof ib, 0, &ir), 0);
	rma_remote *rem = test_remote_of(tr);

	test_manual_connect(t, e, ir, rem);

	for (int k = 0; k < 2; k++) {
		unsigned kind = k ? RMA_OP_PUT : RMA_OP_GET;
		const char *what = k ? "put" : "get";
		char *from = k ? ib : tb, *to = k ? tb : ib;

		test_fill(from, sizeof tb, 3 + (uint64_t)k);
		int lone = run(kind, 1, ir, rem);
		CHECK_EQ(memcmp(to, from, LEN), 0);
		int stream = run(kind, N, ir, rem), stream_lone = lone_marks;
		CHECK_EQ(memcmp(to, from, sizeof tb), 0);
		int after = run(kind, 1, ir, rem);
		printf("%ss of %u bytes, highest mark: %d alone, %d with %d in "
		       "flight (%d of them marked as alone), %d alone after them\n",
		       what, LEN, lone, stream, N, stream_lone, after);
		CHECKF(lone > 1 && lone <= (int)RX_LOWAT, "a lone %s's mark: %d",
		       what, lone);
		CHECKF(stream > (int)RX_LOWAT, "%ss in a stream: mark %d, not "
		       "above %u", what, stream, RX_LOWAT);
		/* The first found nothing before it; each other one, its
		 * forerunner's end. */
		CHECKF(stream_lone == 1, "%d of %d %ss in a stream marked as "
		       "alone, not 1", stream_lone, N, what);
		CHECKF(after > 1 && after <= (int)RX_LOWAT, "a lone %s after a "
		       "stream: mark %d", what, after);
	}

	rma_remote_free(rem);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	return 0;
}
