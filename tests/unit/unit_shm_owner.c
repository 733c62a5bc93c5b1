/*
 * unit_shm_owner - the shm owner's control connections, in one process: an
 * owner engine with manual progress, and either raw initiators speaking the
 * control protocol by hand or a second engine.
 *
 *   rows   a row whose connection the owner closed is not handed to another
 *          initiator while the first lives (it still maps the row writable),
 *          even though it was not inside a copy; a row whose initiator closed
 *          the connection is.
 *   unmap  an initiator that does not run progress while the owner releases
 *          hundreds of regions (an UNMAP each) fills its control socket; the
 *          UNMAP of the region it mapped still reaches it once it runs.
 *   mapped the same full socket when the owner answers a MAP: the answer
 *          waits, the connection lives, the put succeeds.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "testlib.h"
#include "transport/shm/shm.h"

static rma_engine *owner(void)
{
	struct rma_config cfg;
	rma_engine *e;

	rma_config_init(&cfg);
	cfg.transports = "shm";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

#define FLOOD 500 /* regions released while the initiator sleeps */

/* Mappings of the memfd behind owner address p, other than p's own. */
static int other_maps(const void *p)
{
	char line[512], ino[32] = "";
	unsigned long lo;
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	CHECK(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%lx-", &lo) == 1 && lo == (uintptr_t)p)
			CHECK(sscanf(line, "%*s %*s %*s %*s %31s", ino) == 1);
	CHECKF(ino[0] && strcmp(ino, "0"), "no mapping of the region at %p", p);
	rewind(f);
	while (fgets(line, sizeof line, f)) {
		char i2[32];
		if (sscanf(line, "%lx-", &lo) == 1 && lo != (uintptr_t)p &&
		    strstr(line, "memfd:rma ") &&
		    sscanf(line, "%*s %*s %*s %*s %31s", i2) == 1 && !strcmp(i2, ino))
			n++;
	}
	fclose(f);
	return n;
}

/* b's op on a's region through tok; both engines driven by hand. */
static int64_t put(rma_engine *a, rma_engine *b, rma_region *l,
		   const char *tok, int64_t *ms)
{
	struct rma_completion c;
	rma_remote *r;
	int64_t t0 = test_now_ms();
	int n = 0;

	CHECK_RC(rma_remote_parse(tok, &r), 0);
	struct rma_op op = {.kind = RMA_OP_PUT, .local = l, .remote = r,
			    .len = 4096};
	CHECK_RC(rma_post(b, &op, 1, 10000, NULL), 1);
	while (n == 0) {
		CHECKF(test_now_ms() - t0 < 15000, "put never completed");
		rma_progress(a, 0);
		rma_progress(b, 0);
		n = rma_poll(b, &c, 1);
	}
	CHECK_RC(n, 1);
	if (ms)
		*ms = test_now_ms() - t0;
	rma_remote_free(r);
	return c.result;
}

/* Owner a's regions released one after another, b not running: its control
 * socket fills with UNMAPs. */
static void flood(rma_engine *a)
{
	for (int i = 0; i < FLOOD; i++) {
		rma_region *r;
		void *p;
		CHECK_RC(rma_region_alloc(a, 4096, RMA_ACCESS_REMOTE_RW, &r, &p), 0);
		CHECK_RC(rma_region_release(r), 0);
	}
}

static int case_unmap(bool then_map)
{
	rma_engine *a = owner(), *b = owner();
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	char *buf = test_alloc(4096);
	rma_region *l, *r0, *r1;
	void *p0, *p1;

	CHECK_RC(rma_region_register(b, buf, 4096, 0, &l), 0);
	CHECK_RC(rma_region_alloc(a, 1 << 20, RMA_ACCESS_REMOTE_RW, &r0, &p0), 0);
	CHECK_OK(rma_advertise_text(r0, 0, 0, 0, tok, sizeof tok));
	test_fill(buf, 4096, 3);
	CHECK_RC(put(a, b, l, tok, NULL), 4096);
	CHECKF(other_maps(p0) == 1, "the initiator did not map the region "
	       "(%d mappings)", other_maps(p0));
	flood(a);
	if (then_map) {
		int64_t ms;
		CHECK_RC(rma_region_alloc(a, 1 << 20, RMA_ACCESS_REMOTE_RW, &r1,
					  &p1), 0);
		CHECK_OK(rma_advertise_text(r1, 0, 0, 0, tok, sizeof tok));
		/* The MAP goes at once; its answer finds the socket full. */
		CHECK_RC(put(a, b, l, tok, &ms), 4096);
		printf("put to a fresh region behind %d UNMAPs: %lld ms\n", FLOOD,
		       (long long)ms);
		CHECK(!memcmp(p1, buf, 4096));
		CHECK_RC(rma_region_release(r1), 0);
	} else {
		/* Mapped by b: the UNMAP queues behind the flood. */
		int n0 = other_maps(p0);
		CHECK_RC(rma_region_release(r0), 0);
		r0 = NULL;
		for (int i = 0; i < 50; i++) {
			rma_progress(b, 0);
			rma_progress(a, 0);
		}
		/* p0 is unmapped now: look for any memfd:rma mapping of b's. */
		FILE *f = fopen("/proc/self/maps", "re");
		char line[512];
		int left = 0;
		CHECK(f);
		while (fgets(line, sizeof line, f))
			if (strstr(line, "memfd:rma "))
				left++;
		fclose(f);
		printf("memfd:rma mappings: %d before release, %d after\n", n0, left);
		CHECKF(left == 0, "%d mappings of released regions left in the "
		       "initiator", left);
	}
	if (r0)
		CHECK_RC(rma_region_release(r0), 0);
	rma_region_release(l);
	rma_engine_destroy(b);
	rma_engine_destroy(a);
	return 0;
}

/* The owner's next message on c, driving its progress; 1, or what
 * rma__shm_recv said (-ECONNRESET: closed). */
static int recv_msg(rma_engine *a, int c, struct shm_msg *m, int *fd)
{
	int64_t t0 = test_now_ms();
	int rc;

	while ((rc = rma__shm_recv(c, m, fd)) == 0) {
		CHECKF(test_now_ms() - t0 < 5000, "owner silent");
		rma_progress(a, 1);
	}
	return rc;
}

/* A raw initiator: connect, the secret handshake, HELLO; *row from WELCOME. */
static int raw_connect(rma_engine *a, int *row)
{
	const struct rma__engine_params *ep = rma__engine_params(a);
	struct sockaddr_un sun;
	static struct rma__setup su;
	uint8_t key[16];
	struct shm_msg m = {.type = SHM_HELLO, .a = 0x5eed, .b = ep->engine_id};
	int c, tfd = -1, rc;
	int64_t t0 = test_now_ms();

	c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(c >= 0);
	socklen_t sl = rma__shm_sockname((uint32_t)getpid(), ep->engine_id, &sun);
	CHECK(connect(c, (struct sockaddr *)&sun, sl) == 0);
	rma__setup_key(ep->secret, key);
	struct rma__setup_params sp = {
		.key = key, .kind = SHM_SETUP_KIND, .engine_id = 0x5eed,
		.expect_id = ep->engine_id,
	};
	CHECK_RC(rma__setup_init(&su, c, false, &sp), 0);
	while ((rc = rma__setup_run(&su)) == -EINPROGRESS) {
		CHECKF(test_now_ms() - t0 < 5000, "handshake stalled");
		rma_progress(a, 1);
	}
	CHECK_RC(rc, 0);
	CHECK_RC(rma__shm_send(c, &m, -1), 0);
	CHECK_RC(recv_msg(a, c, &m, &tfd), 1);
	CHECK(m.type == SHM_WELCOME);
	CHECK_RC(m.status, 0);
	CHECK(tfd >= 0 && m.b < SHM_ROWS);
	close(tfd);
	*row = (int)m.b;
	return c;
}

static int case_rows(void)
{
	rma_engine *a = owner();
	struct shm_msg m = {.type = 99};
	int r1, r2, r3, fd;

	int c1 = raw_connect(a, &r1);
	/* The owner closes c1 (a bad message) while its row reads 0. */
	CHECK_RC(rma__shm_send(c1, &m, -1), 0);
	CHECK_RC(recv_msg(a, c1, &m, &fd), -ECONNRESET);
	int c2 = raw_connect(a, &r2);
	printf("rows: %d, then %d after the owner closed the first\n", r1, r2);
	CHECKF(r2 != r1, "row %d given to a second initiator while the first "
	       "(alive) still maps it", r1);

	/* c2 closes itself: its row is free again at once. */
	close(c2);
	for (int i = 0; i < 5; i++)
		rma_progress(a, 1);
	int c3 = raw_connect(a, &r3);
	CHECKF(r3 == r2, "an initiator's own close left row %d unused (got %d)",
	       r2, r3);

	/* An initiator's own close met first by the owner's send (an UNMAP
	 * to every initiator: EPIPE), or, with messages queued for it, by the
	 * queue's flush: still its own close, and its row comes back. */
	for (int queued = 0; queued < 2; queued++) {
		int r4, r5;
		int c4 = raw_connect(a, &r4);
		if (queued)
			flood(a);
		close(c4);
		rma_region *r;
		void *p;
		CHECK_RC(rma_region_alloc(a, 4096, RMA_ACCESS_REMOTE_RW, &r, &p), 0);
		CHECK_RC(rma_region_release(r), 0);
		for (int i = 0; i < 5; i++)
			rma_progress(a, 1);
		int c5 = raw_connect(a, &r5);
		CHECKF(r5 == r4, "an initiator's own close seen by a failed send%s "
		       "left row %d unused (got %d)", queued ? " (queued)" : "",
		       r4, r5);
		close(c5);
	}
	close(c3);
	close(c1);
	rma_engine_destroy(a);
	return 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	struct rma_transport_info info[16];
	int n = rma_transports(info, 16);

	test_watchdog(60);
	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(info[i].name, "shm") && !info[i].available)
			SKIP("shm not available: %s", info[i].detail);
	if (!strcmp(c, "rows"))
		return case_rows();
	if (!strcmp(c, "unmap"))
		return case_unmap(false);
	if (!strcmp(c, "mapped"))
		return case_unmap(true);
	fprintf(stderr, "usage: %s rows | unmap | mapped\n", argv[0]);
	return 1;
}
