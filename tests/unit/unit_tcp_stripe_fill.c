/*
 * How a peer's chunks are spread over its tcp connections (stripes):
 * chunks over 16 KiB go to the least loaded connection, so eight 64 KiB
 * puts leave on all four, and so do eight 64 KiB gets posted one call at
 * a time (each request leaves at once: the replies still awaited are the
 * load); a batch of small ones fills one connection,
 * so 64 eight-byte puts (or gets) leave in one or two sendmsg calls on one
 * socket instead of a few on every stripe, and eight 4 KiB puts (or gets)
 * in one or two.  sendmsg is wrapped at link time
 * and counted on this thread only (the initiator runs manual progress, so
 * its writes happen here; the target's thread writes its replies).
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "testlib.h"

#define NFD 16

ssize_t __real_sendmsg(int fd, const struct msghdr *mh, int flags);

static pthread_t me;
static bool counting;
static int calls, fds[NFD], nfds;

ssize_t __wrap_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	/* This thread's only: the target's thread writes too. */
	if (pthread_equal(pthread_self(), me) && counting) {
		int i = 0;
		while (i < nfds && fds[i] != fd)
			i++;
		if (i == nfds && nfds < NFD)
			fds[nfds++] = fd;
		calls++;
	}
	return __real_sendmsg(fd, mh, flags);
}

static void count_start(void)
{
	calls = nfds = 0;
	counting = true;
}

/* Post n ops of len bytes each in one call, counting the writes it makes;
 * then wait for all of them, which must succeed. */
static void post_counted(rma_engine *e, enum rma_op_kind kind, rma_region *ir,
			 rma_remote *rem, unsigned n, uint64_t len, bool singly)
{
	struct rma_op ops[64];
	struct rma_completion c[64];

	for (unsigned i = 0; i < n; i++)
		ops[i] = (struct rma_op){.kind = kind, .local = ir,
					 .local_off = i * len, .remote = rem,
					 .remote_off = i * len, .len = len,
					 .user_data = i};
	count_start();
	if (singly) /* no progress between: no reply is taken meanwhile */
		for (unsigned i = 0; i < n; i++)
			CHECK_RC(rma_post(e, &ops[i], 1, 5000, NULL), 1);
	else
		CHECK_RC(rma_post(e, ops, n, 5000, NULL), (int)n);
	counting = false;
	unsigned got = 0;
	int64_t t0 = test_now_ms();
	while (got < n && test_now_ms() - t0 < 10000) {
		rma_progress(e, 100);
		int k = rma_poll(e, c, 64);
		CHECK(k >= 0);
		for (int j = 0; j < k; j++)
			CHECK_EQ(c[j].result, (int64_t)len);
		got += (unsigned)k;
	}
	CHECK_EQ(got, n);
}

/* n puts, then n gets, of len bytes each: one connection, one or two
 * sendmsg calls each way, the bytes where they belong. */
static void one_connection(rma_engine *e, rma_region *ir, rma_remote *rem,
			   const char *tb, char *ib, unsigned n, uint64_t len)
{
	size_t all = (size_t)n * len;
	for (int get = 0; get < 2; get++) {
		if (get)
			memset(ib, 0, all);
		else
			test_fill(ib, all, len);
		post_counted(e, get ? RMA_OP_GET : RMA_OP_PUT, ir, rem, n, len, false);
		CHECKF(nfds == 1 && calls <= 2,
		       "%u %s of %llu bytes: %d sendmsg calls on %d connections", n,
		       get ? "gets" : "puts", (unsigned long long)len, calls, nfds);
		CHECK_EQ(memcmp(tb, ib, all), 0);
	}
}

int main(void)
{
	const size_t mid = 64 << 10, size = 8 * mid;
	rma_region *tr, *ir;
	rma_remote *rem;

	test_watchdog(60);
	me = pthread_self();
	rma_engine *t = test_tcp_engine((struct rma_config){.stripes = 1});
	rma_engine *e = test_tcp_engine((struct rma_config){
		.flags = RMA_ENGINE_MANUAL_PROGRESS, .stripes = 4});
	char *tb = test_alloc(size), *ib = test_alloc(size);
	test_fill(ib, size, 1);
	memset(tb, 0, size);
	CHECK_RC(rma_region_register(t, tb, size, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(e, ib, size, 0, &ir), 0);
	rem = test_remote_of(tr);
	CHECK_RC(rma_peer_connect(e, rem, 5000), 0);

	/* Larger chunks: on every connection, once all four are up. */
	int64_t t0 = test_now_ms();
	do {
		post_counted(e, RMA_OP_PUT, ir, rem, 8, mid, false);
	} while (nfds < 4 && test_now_ms() - t0 < 5000);
	CHECKF(nfds == 4, "8 puts of 64 KiB went out on %d connections", nfds);
	CHECK_EQ(memcmp(tb, ib, size), 0);
	memset(ib, 0, size);
	post_counted(e, RMA_OP_GET, ir, rem, 8, mid, true);
	CHECKF(nfds == 4, "8 gets of 64 KiB, posted one by one, went out on %d connections",
	       nfds);
	CHECK_EQ(memcmp(tb, ib, size), 0);

	/* Small chunks: one connection, in one or two sendmsg calls (up to 64
	 * iovecs each: 31 puts, a header and a payload each, or 63 gets);
	 * 4 KiB, a key-value store's typical value, is small too. */
	one_connection(e, ir, rem, tb, ib, 64, 8);
	one_connection(e, ir, rem, tb, ib, 8, 4096);

	rma_remote_free(rem);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	test_free(tb, size);
	test_free(ib, size);
	return 0;
}
