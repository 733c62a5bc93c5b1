/*
 * A target reading a window of small puts reads the end of each payload
 * and the next messages in one call: 16 puts of 4 KiB, all queued in its
 * socket, cost it about one read each (each read's staging holds the next
 * header and most of its payload), not two (the payload's rest, then the
 * next header).  Both engines run manual progress on this thread; reads
 * (recv and recvmsg, wrapped at link time) are counted while the target
 * progresses, and the bytes must land.
 */
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "testlib.h"

#define N 16
#define LEN 4096

ssize_t __real_recv(int fd, void *buf, size_t len, int flags);
ssize_t __real_recvmsg(int fd, struct msghdr *mh, int flags);

static bool counting;
static int reads;

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
	reads += counting;
	return __real_recv(fd, buf, len, flags);
}

ssize_t __wrap_recvmsg(int fd, struct msghdr *mh, int flags)
{
	reads += counting;
	return __real_recvmsg(fd, mh, flags);
}

int main(void)
{
	static char tb[N * LEN], ib[N * LEN];
	struct rma_op ops[N];
	struct rma_completion c[N];
	rma_region *tr, *ir;

	test_watchdog(60);
	rma_engine *t = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1});
	rma_engine *e = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 1});
	CHECK_RC(rma_region_register(t, tb, sizeof tb, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(e, ib, sizeof ib, 0, &ir), 0);
	rma_remote *rem = test_remote_of(tr);

	test_manual_connect(t, e, ir, rem);

	test_fill(ib, sizeof ib, 5);
	for (int i = 0; i < N; i++)
		ops[i] = (struct rma_op){.kind = RMA_OP_PUT, .local = ir,
					 .local_off = (uint64_t)i * LEN, .remote = rem,
					 .remote_off = (uint64_t)i * LEN, .len = LEN,
					 .user_data = (uint64_t)i};
	CHECK_RC(rma_post(e, ops, N, 5000, NULL), N);
	/* Everything is in the target's socket now (loopback). */
	counting = true;
	for (int i = 0; i < 5; i++)
		rma_progress(t, 0);
	counting = false;
	printf("%d puts of %d bytes: the target made %d reads\n", N, LEN, reads);
	for (int got = 0; got < N;) {
		rma_progress(e, 100);
		rma_progress(t, 0);
		int k = rma_poll(e, c, N);
		CHECK(k >= 0);
		for (int j = 0; j < k; j++)
			CHECK_RC(c[j].result, LEN);
		got += k;
	}
	CHECK_EQ(memcmp(tb, ib, sizeof tb), 0);
	CHECKF(reads <= N + 6, "%d puts of %d bytes took the target %d reads", N,
	       LEN, reads);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	return 0;
}
