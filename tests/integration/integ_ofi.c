/*
 * integ_ofi.c - what the ofi transport adds to the conformance suite.
 * Usage: integ_ofi CASE [PROV]  (PROV: tcp, the default, or sockets)
 *
 *   route      same-level instances: the first entry of the owner's
 *              advertisement wins, so a default engine keeps tcp
 *   ro_key     a read-only token edited to say read-write (crc fixed) still
 *              cannot write: the grant's own MR has no remote write
 *   window     a token edited to a longer window still cannot reach past
 *              the real one: the grant's MR has the window's bounds
 *   wrong_key  a forged key is refused with -EKEYREJECTED, and the next
 *              good op to that target works (tokens hold the core key
 *              only: the owner tells an authenticated peer the fabric key)
 *   killed     a target killed mid-batch: every op ends with an error
 *              within its deadline, and another target is still served
 *   late       gets to a stopped target time out; when it wakes, its
 *              replies must not land (libfabric cannot cancel: the
 *              transport closes the peer's endpoint), and the next op works
 *   secret     an owner with a shared secret: the right secret works, a
 *              wrong one or none gets -EACCES
 *   noctl      a token edited to name no control address (flag 1 without
 *              flag 2, or a plain fabric blob) skips the handshake: an
 *              engine with a secret refuses it (-EACCES, nothing written);
 *              one without uses it as is
 *   stale      an owner restarted at the same control address: an old
 *              token gets exactly -ESTALE (another engine answers)
 *   proof      a raw client with a wrong proof on the control connection
 *              is refused (-EACCES in message 4, then closed) and gets no
 *              fabric key; the same client with the right proof gets one
 *   fake_owner a token edited to name a fake owner whose proof is wrong:
 *              the initiator fails with -EACCES and sends nothing after
 *              its hello (no proof of its own, no KEY)
 *   raw_record a fake owner that knows the secret answers KEY with an
 *              FI_MR_RAW key record (ctl.c): a length of 0 or 257 (above
 *              OFI_RAW_KEY_MAX), bytes and all, fails the op with
 *              -EBADMSG; 256 passes the decoder and reaches the mapping
 *              (which tcp and sockets refuse: they are not FI_MR_RAW)
 *   stale_names  (shm) a crashed process leaves its shared-memory files
 *              behind, named by its pid; a new process that gets the same
 *              pid must still start ofi:prov=shm (names of our own)
 *   idle       after a stream of puts (completions taken by the progress
 *              thread), initiator and target go idle: a busy queue's kept
 *              wait-fd signal (cq_cb) must not keep a thread spinning
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "integ_common.h"
#include "util/base64url.h"
#include "transport/setup.h"

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define OFI_WIRE_ID 3
static char spec[64];

static rma_engine *engine_of(const char *transports)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = transports;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static int start(struct target *t, const char *transports, size_t size)
{
	static struct target_opts o[4]; /* read by the child after fork */
	static int n;
	struct target_opts *p = &o[n++ % 4];
	p->transports = transports;
	p->rw_size = size;
	p->rw_seed = 7;
	return target_start(t, p);
}

/* A target window's advertisement as bytes. */
static int ad_bytes(struct target *t, const char *region, uint64_t off,
		    uint64_t len, unsigned access, uint8_t *b)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	target_token(t, region, off, len, access, tok, sizeof tok);
	int n = rma__b64_decode(tok + 4, strlen(tok) - 4, b, RMA_ADVERTISEMENT_MAX);
	CHECKF(n > 36, "cannot decode token '%s'", tok);
	return n;
}

/* Edited bytes made valid again (the crc covers the rest). */
static rma_remote *reseal(uint8_t *b, int n)
{
	uint32_t crc = rma_crc32c(0, b, (size_t)n - 4);
	rma_remote *r;
	for (int i = 0; i < 4; i++)
		b[n - 4 + i] = (uint8_t)(crc >> (8 * i));
	CHECK_RC(rma_remote_decode(b, (size_t)n, &r), 0);
	return r;
}

/* The ofi entry's blob (version 2 layout, design.md section 9). */
static uint8_t *ofi_blob(uint8_t *b, int n, unsigned *blen)
{
	size_t o = 34 + (size_t)(b[32] | b[33] << 8);
	for (unsigned i = 0; i < b[6] && o + 4 <= (size_t)n; i++) {
		unsigned len = b[o + 2] | b[o + 3] << 8;
		if (b[o] == OFI_WIRE_ID) {
			*blen = len;
			return b + o + 4;
		}
		o += 4 + len;
	}
	FAIL("no ofi entry in the advertisement");
}

static const char *route_of(rma_engine *e, rma_remote *r)
{
	static struct rma_route_info ri;
	CHECK_RC(rma_peer_route(e, r, &ri), 0);
	return ri.transport;
}

static int case_route(void)
{
	struct target t;
	int rc = start(&t, NULL, 4 * MiB);
	if (rc)
		return rc;
	/* A default owner lists tcp before ofi: tcp wins that tie, whatever
	 * the initiator's order.  (shm, a level above both, is left out of
	 * the initiator: it would win any same-host route.) */
	char mine[96];
	snprintf(mine, sizeof mine, "%s,tcp", spec);
	rma_engine *e = engine_of(mine);
	rma_remote *r = integ_remote(&t, "rw");
	CHECKF(!strcmp(route_of(e, r), "tcp"),
	       "a default owner is reached over %s, not tcp", route_of(e, r));
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);

	/* The owner lists ofi first: ofi wins the tie, whatever the
	 * initiator's own order. */
	char list[96];
	snprintf(list, sizeof list, "%s,tcp", spec);
	if ((rc = start(&t, list, 4 * MiB)))
		return rc;
	snprintf(list, sizeof list, "tcp,%s", spec);
	e = engine_of(list);
	r = integ_remote(&t, "rw");
	CHECKF(!strncmp(route_of(e, r), "ofi", 3),
	       "an owner listing ofi first is reached over %s", route_of(e, r));
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	test_fill(buf, MiB, 99);
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, r, 0, MiB, 10000), MiB);
	CHECK_EQ_U64(target_crc(&t, "rw", 0, MiB), rma_crc32c(0, buf, MiB));
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

static int case_ro_key(void)
{
	struct target t;
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	int rc = start(&t, spec, 4 * MiB);
	if (rc)
		return rc;
	rma_engine *e = engine_of(spec);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	uint32_t before = target_crc(&t, "ro", 0, MiB);
	int n = ad_bytes(&t, "ro", 0, 0, 0, b);
	CHECK_EQ(b[5], RMA_ACCESS_REMOTE_READ);
	b[5] = RMA_ACCESS_REMOTE_RW;
	rma_remote *r = reseal(b, n);
	memset(buf, 0x5a, MiB);
	int64_t res = integ_op(e, RMA_OP_PUT, l, r, 0, 4096, 10000);
	CHECKF(res < 0, "a put through a read-only grant's key succeeded");
	CHECK_RC(res, -EKEYREJECTED);
	CHECK_EQ_U64(target_crc(&t, "ro", 0, MiB), before);
	/* Its reads still work. */
	CHECK_RC(integ_op(e, RMA_OP_GET, l, r, 0, MiB, 10000), MiB);
	CHECK_EQ(test_check_fill(buf, MiB, TARGET_RO_SEED), -1);
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

static int case_window(void)
{
	struct target t;
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	int rc = start(&t, spec, 4 * MiB);
	if (rc)
		return rc;
	rma_engine *e = engine_of(spec);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	uint32_t before = target_crc(&t, "rw", 0, 4 * MiB);
	int n = ad_bytes(&t, "rw", 65536, 65536, 0, b);
	b[24 + 2] = 0x11; /* window length 0x10000 -> 0x110000 */
	rma_remote *r = reseal(b, n);
	CHECK_EQ_U64(rma_remote_length(r), MiB + 65536);
	memset(buf, 0x5a, MiB);
	int64_t res = integ_op(e, RMA_OP_PUT, l, r, 65536, 4096, 10000);
	CHECKF(res < 0, "a put past the real window succeeded");
	res = integ_op(e, RMA_OP_PUT, l, r, 65536 - 100, 200, 10000);
	CHECKF(res < 0, "a put across the real window's end succeeded");
	CHECK_EQ_U64(target_crc(&t, "rw", 0, 4 * MiB), before);
	/* Inside it: fine. */
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, r, 0, 65536, 10000), 65536);
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

static int case_wrong_key(void)
{
	struct target t;
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	unsigned blen;
	int rc = start(&t, spec, 4 * MiB);
	if (rc)
		return rc;
	rma_engine *e = engine_of(spec);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	int n = ad_bytes(&t, "rw", 0, 0, 0, b);
	uint8_t *blob = ofi_blob(b, n, &blen);
	/* Without a secret the token also carries the fabric key (for plain
	 * initiators); rma initiators still ask by the core key. */
	CHECKF(blob[1] & 1, "an owner without a secret left the fabric key out");
	b[16] ^= 0x01; /* the core key's low byte */
	rma_remote *bad = reseal(b, n);
	rma_remote *good = integ_remote(&t, "rw");
	/* A refusal may reset the endpoint (tcp): the good op after it may
	 * connect again, so a first op's connect sets its bound. */
	int64_t t0 = test_now_ms();
	CHECK_RC(integ_op(e, RMA_OP_GET, l, good, 0, MiB, 10000), MiB);
	int64_t bound = 2 * (test_now_ms() - t0) + 1000;
	bound = bound < 2000 ? 2000 : bound;
	for (int i = 0; i < 3; i++) {
		CHECK_RC(integ_op(e, RMA_OP_GET, l, bad, 0, 4096, 10000), -EKEYREJECTED);
		t0 = test_now_ms();
		CHECK_RC(integ_op(e, RMA_OP_GET, l, good, 0, MiB, 10000), MiB);
		CHECKF(test_now_ms() - t0 < bound, "the good op after a refusal took "
		       "%lld ms (bound %lld)", (long long)(test_now_ms() - t0),
		       (long long)bound);
		CHECK_EQ(test_check_fill(buf, MiB, 7), -1);
	}
	rma_remote_free(bad);
	rma_remote_free(good);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

#define KN 8
#define KROUNDS 4
/* One target killed with KN large ops in flight: each ends within the
 * deadline, at least one with an error.  Each round is a fresh race
 * between the control connection's loss and the data connection's errors
 * (closing the endpoint while the provider still held transfers crashed
 * libfabric in about one round in seven). */
static int kill_one(struct target *t2, const int deadline)
{
	struct target t;
	int rc = start(&t, spec, 64 * MiB);
	if (rc)
		return rc;
	rma_engine *e = engine_of(spec);
	char *buf = test_alloc(64 * MiB);
	rma_region *l = integ_region(e, buf, 64 * MiB);
	rma_remote *r = integ_remote(&t, "rw"), *r2 = integ_remote(t2, "rw");
	CHECK_RC(rma_peer_connect(e, r, 10000), 0);
	CHECK_RC(integ_op(e, RMA_OP_GET, l, r, 0, 4096, 10000), 4096);

	struct rma_op ops[KN];
	for (int i = 0; i < KN; i++)
		ops[i] = (struct rma_op){ .kind = i % 2 ? RMA_OP_PUT : RMA_OP_GET,
					  .local = l, .local_off = (uint64_t)i * 8 * MiB,
					  .remote = r, .remote_off = (uint64_t)i * 8 * MiB,
					  .len = 8 * MiB, .user_data = (uint64_t)i };
	CHECK_RC(rma_post(e, ops, KN, deadline, NULL), KN);
	CHECK(kill(t.pid, SIGKILL) == 0);
	int64_t t0 = test_now_ms();
	test_reap(t.pid, 5000);
	test_forget_child(t.pid);

	struct rma_completion c[KN];
	int got = 0, failed = 0;
	while (got < KN && test_now_ms() - t0 < deadline + 2000) {
		int n = rma_poll(e, c + got, (size_t)(KN - got));
		CHECK_OK(n);
		got += n;
		if (!n)
			test_sleep_ms(5);
	}
	CHECKF(got == KN, "%d of %d ops ended within their deadline", got, KN);
	for (int i = 0; i < KN; i++)
		if (c[i].result < 0)
			failed++;
		else
			CHECK_EQ(c[i].result, 8 * MiB); /* finished before the kill */
	CHECKF(failed > 0, "no op failed although the target was killed");
	printf("killed: %d of %d failed in %lld ms\n", failed, KN,
	       (long long)(test_now_ms() - t0));

	/* The other target is served. */
	CHECK_RC(integ_op(e, RMA_OP_GET, l, r2, 0, 4 * MiB, 10000), 4 * MiB);
	CHECK_EQ(test_check_fill(buf, 4 * MiB, 7), -1);
	rma_remote_free(r);
	rma_remote_free(r2);
	rma_engine_destroy(e);
	test_free(buf, 64 * MiB);
	return 0;
}

static int case_killed(void)
{
	struct target t2;
	int rc;
	if ((rc = start(&t2, spec, 4 * MiB)))
		return rc;
	for (int round = 0; round < KROUNDS; round++)
		if ((rc = kill_one(&t2, 3000)))
			return rc;
	target_stop(&t2);
	return 0;
}

static int case_late(void)
{
	struct target t;
	const int deadline = 300;
	int rc = start(&t, spec, 16 * MiB);
	if (rc)
		return rc;
	rma_engine *e = engine_of(spec);
	char *buf = test_alloc(16 * MiB);
	rma_region *l = integ_region(e, buf, 16 * MiB);
	rma_remote *r = integ_remote(&t, "rw");
	CHECK_RC(integ_op(e, RMA_OP_GET, l, r, 0, 4096, 10000), 4096);
	memset(buf, 0xEE, 16 * MiB);
	test_stop_child(t.pid);
	struct rma_op ops[4];
	int64_t res[4];
	for (int i = 0; i < 4; i++)
		ops[i] = (struct rma_op){ .kind = RMA_OP_GET, .local = l,
					  .local_off = (uint64_t)i * 4 * MiB,
					  .remote = r, .len = 4 * MiB };
	int64_t t0 = test_now_ms();
	CHECK_RC(rma_submit(e, ops, 4, deadline, res, NULL, 0), 4);
	int64_t dt = test_now_ms() - t0;
	for (int i = 0; i < 4; i++)
		CHECK_RC(res[i], -ETIMEDOUT);
	CHECKF(dt < deadline + 3000, "timed-out gets took %lld ms", (long long)dt);
	test_cont_child(t.pid);
	test_sleep_ms(300);
	for (size_t i = 0; i < 16 * MiB; i++)
		CHECKF((unsigned char)buf[i] == 0xEE,
		       "a timed-out get wrote byte %zu after the target woke", i);
	CHECK_RC(integ_op(e, RMA_OP_GET, l, r, 0, 16 * MiB, 10000), 16 * MiB);
	CHECK_EQ(test_check_fill(buf, 16 * MiB, 7), -1);
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

static rma_engine *engine_secret(const char *secret)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = spec;
	cfg.secret = secret;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static void try_secret(struct target *t, const char *secret, int64_t want)
{
	rma_engine *e = engine_secret(secret);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	rma_remote *r = integ_remote(t, "rw");
	test_fill(buf, MiB, 99);
	int64_t got = integ_op(e, RMA_OP_PUT, l, r, 0, MiB, 10000);
	printf("secret %s: %lld %s\n", secret ? secret : "(none)", (long long)got,
	       got < 0 ? rma_strerror((int)got) : "ok");
	CHECK_RC(got, want);
	if (want < 0)
		CHECK_RC(integ_op(e, RMA_OP_GET, l, r, 0, MiB, 10000), want);
	else
		CHECK_EQ_U64(target_crc(t, "rw", 0, MiB), rma_crc32c(0, buf, MiB));
	rma_remote_free(r);
	rma_engine_destroy(e);
	test_free(buf, MiB);
}

static int case_secret(void)
{
	static struct target_opts o = { .secret = "open sesame", .rw_size = 4 * MiB };
	struct target t;
	o.transports = spec;
	if (target_start(&t, &o))
		return TEST_SKIP;
	/* With a secret the token names no fabric key: only the handshake
	 * tells it. */
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	unsigned blen;
	int n = ad_bytes(&t, "rw", 0, 0, 0, b);
	uint8_t *blob = ofi_blob(b, n, &blen);
	CHECKF(!(blob[1] & 1), "an owner with a secret put a fabric key in its token");
	try_secret(&t, "open sesame", MiB);
	try_secret(&t, "open sesame!", -EACCES);
	try_secret(&t, NULL, -EACCES);
	try_secret(&t, "open sesame", MiB);
	target_stop(&t);
	return 0;
}

/* The token of an owner without a secret, edited so that its ofi entry
 * names no control address: flag 1 without flag 2 (the entry holds the
 * fabric key itself), or a plain fabric blob, which rma builds only
 * locally (rma_remote_from_fabric).  Either would skip the handshake. */
static rma_remote *noctl_token(struct target *t, bool plain)
{
	uint8_t b[RMA_ADVERTISEMENT_MAX], q[64];
	unsigned blen;
	int n = ad_bytes(t, "rw", 0, 0, 0, b);
	uint8_t *blob = ofi_blob(b, n, &blen);
	CHECKF((blob[1] & 3) == 3, "an open owner's blob lacks flags 1|2: %#x",
	       blob[1]);
	size_t al = blob[4] | blob[5] << 8, co = 6 + blob[2] + blob[3] + al;
	size_t cut = 1 + blob[co], q_len = 0;
	if (plain) {
		/* u8 0x80 | u8 word length | u16 address length | word (none:
		 * any ofi instance) | address | key | base */
		q[0] = 0x80;
		q[1] = 0;
		q[2] = blob[4];
		q[3] = blob[5];
		CHECK(4 + al + 16 <= sizeof q);
		memcpy(q + 4, blob + 6 + blob[2] + blob[3], al);
		memcpy(q + 4 + al, blob + co + cut, 16);
		q_len = 4 + al + 16;
		cut = blen - q_len; /* the blob shrinks to q's length */
		co = 0;
	}
	uint8_t *tail = blob + co + cut, *end = b + n;
	memmove(blob + co, tail, (size_t)(end - tail));
	n -= (int)cut;
	blen -= (unsigned)cut;
	if (plain)
		memcpy(blob, q, q_len);
	else
		blob[1] &= (uint8_t)~2;
	blob[-2] = (uint8_t)blen;
	blob[-1] = (uint8_t)(blen >> 8);
	return reseal(b, n);
}

/* An engine with a secret refuses a peer that has no control address (it
 * cannot prove the secret): -EACCES, nothing written.  Without a secret
 * the same edited token works as is, which shows the edit sound. */
static int case_noctl(void)
{
	struct target t;
	int rc = start(&t, spec, 4 * MiB);
	if (rc)
		return rc;
	char *buf = test_alloc(MiB);
	test_fill(buf, MiB, 99);
	uint32_t before = target_crc(&t, "rw", 0, MiB);
	for (int plain = 0; plain < 2; plain++) {
		rma_engine *e = engine_secret("open sesame");
		rma_region *l = integ_region(e, buf, MiB);
		rma_remote *r = noctl_token(&t, plain);
		CHECK_RC(integ_op(e, RMA_OP_PUT, l, r, 0, MiB, 10000), -EACCES);
		CHECK_RC(integ_op(e, RMA_OP_GET, l, r, 0, MiB, 10000), -EACCES);
		CHECK_EQ_U64(target_crc(&t, "rw", 0, MiB), before);
		rma_remote_free(r);
		rma_engine_destroy(e);
	}
	for (int plain = 0; plain < 2; plain++) {
		rma_engine *e = engine_of(spec);
		rma_region *l = integ_region(e, buf, MiB);
		rma_remote *r = noctl_token(&t, plain);
		test_fill(buf, MiB, 50 + plain);
		CHECK_RC(integ_op(e, RMA_OP_PUT, l, r, 0, MiB, 10000), MiB);
		CHECK_EQ_U64(target_crc(&t, "rw", 0, MiB), rma_crc32c(0, buf, MiB));
		rma_remote_free(r);
		rma_engine_destroy(e);
	}
	test_free(buf, MiB);
	target_stop(&t);
	return 0;
}

static int case_stale(void)
{
	static char tr[128];
	static struct target_opts o = { .rw_size = 4 * MiB, .rw_seed = 7 };
	struct target t;
	snprintf(tr, sizeof tr, "%s:ctl=127.0.0.1:%d", spec, test_free_port());
	o.transports = tr;
	if (target_start(&t, &o))
		return TEST_SKIP;
	rma_engine *e = engine_of(spec);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	rma_remote *old = integ_remote(&t, "rw");
	CHECK_RC(integ_op(e, RMA_OP_GET, l, old, 0, MiB, 10000), MiB);
	target_stop(&t);
	/* Another engine at the same control address. */
	CHECK_EQ(target_start(&t, &o), 0);
	rma_engine *e2 = engine_of(spec); /* a fresh initiator: no old peer */
	rma_region *l2 = integ_region(e2, buf, MiB);
	CHECK_RC(integ_op(e2, RMA_OP_GET, l2, old, 0, MiB, 10000), -ESTALE);
	CHECK_RC(rma_peer_connect(e2, old, 10000), -ESTALE);
	/* and its own token works */
	rma_remote *cur = integ_remote(&t, "rw");
	CHECK_RC(integ_op(e2, RMA_OP_GET, l2, cur, 0, MiB, 10000), MiB);
	CHECK_EQ(test_check_fill(buf, MiB, 7), -1);
	rma_remote_free(cur);
	rma_remote_free(old);
	rma_engine_destroy(e2);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

static void xfer_all(int fd, void *b, size_t n, bool out)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = out ? send(fd, (char *)b + done, n - done, MSG_NOSIGNAL)
				: recv(fd, (char *)b + done, n - done, 0);
		CHECKF(r > 0, "control connection: %s", r ? strerror(errno) : "closed");
		done += (size_t)r;
	}
}

/* A hand-made handshake on the owner's control connection; then ADDR
 * (fabric address fa, fl bytes) and a KEY for the token's core key.
 * Returns the status of message 4; *keys is set when a KEYS answer with
 * status 0 came back. */
static int raw_client(const uint8_t *ctl, size_t cl, uint64_t core,
		      const char *secret, const uint8_t *fa, size_t fl,
		      bool *keys)
{
	CHECKF(cl == 7 && ctl[0] == 4, "control address is not IPv4");
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)(ctl[1] | ctl[2] << 8)) };
	memcpy(&sa.sin_addr, ctl + 3, 4);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	CHECKF(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect: %s",
	       strerror(errno));
	uint8_t key[16], b[RMA__SETUP_HDR_SIZE];
	rma__setup_key(secret, key);
	struct rma__setup_msg m = { .step = 1, .kind = 3, .engine_id = 1234,
				    .nonce = 0x1122334455667788ULL };
	rma__setup_msg_encode(&m, b);
	xfer_all(fd, b, sizeof b, true);
	xfer_all(fd, b, sizeof b, false);
	CHECK_RC(rma__setup_msg_decode(b, sizeof b, &m), 0);
	CHECK(m.step == 2 && m.blob_len == 0);
	uint64_t snonce = m.nonce;
	memset(&m, 0, sizeof m);
	m.step = 3;
	m.kind = 3;
	rma__setup_proof(key, 'C', snonce, NULL, 0, m.proof);
	rma__setup_msg_encode(&m, b);
	xfer_all(fd, b, sizeof b, true);
	xfer_all(fd, b, sizeof b, false);
	CHECK_RC(rma__setup_msg_decode(b, sizeof b, &m), 0);
	CHECK(m.step == 4);
	int status = m.status;
	/* Ask for the key whatever the answer: a refused client must get
	 * nothing but the end of the connection. */
	uint8_t k[32 + 32 + 128] = { 5 }, r[32 + 128];
	k[8] = (uint8_t)fl;
	k[16] = 1; /* the address's number */
	memcpy(k + 32, fa, fl);
	k[32 + fl] = 2;
	for (int i = 0; i < 8; i++)
		k[32 + fl + 8 + i] = (uint8_t)(core >> (8 * i));
	(void)!send(fd, k, 32 + fl + 32, MSG_NOSIGNAL);
	*keys = false;
	for (;;) {
		ssize_t n = recv(fd, r, 32, MSG_WAITALL);
		if (n <= 0)
			break;
		CHECK(n == 32);
		if (r[0] == 1) { /* WELCOME: its address follows */
			unsigned al = r[8] | r[9] << 8;
			CHECK(al > 0 && al <= 128);
			CHECK(recv(fd, r + 32, al, MSG_WAITALL) == (ssize_t)al);
			continue;
		}
		if (r[0] == 3) {
			*keys = r[4] == 0 && r[5] == 0 && r[6] == 0 && r[7] == 0;
			break;
		}
	}
	close(fd);
	return status;
}

static int case_proof(void)
{
	static struct target_opts o = { .secret = "open sesame", .rw_size = 4 * MiB };
	struct target t;
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	unsigned blen;
	o.transports = spec;
	if (target_start(&t, &o))
		return TEST_SKIP;
	int n = ad_bytes(&t, "rw", 0, 0, 0, b);
	uint8_t *blob = ofi_blob(b, n, &blen);
	CHECKF(blob[1] == 2, "the ofi blob has no control address (flags %u)", blob[1]);
	size_t o_ctl = 6 + (size_t)blob[2] + blob[3] + (blob[4] | blob[5] << 8);
	uint64_t core = 0;
	for (int i = 0; i < 8; i++)
		core |= (uint64_t)b[16 + i] << (8 * i);
	bool keys;
	/* Any address the provider takes: the owner's own will do. */
	const uint8_t *fa = blob + 6 + blob[2] + blob[3];
	size_t fl = (size_t)(blob[4] | blob[5] << 8);
	int st = raw_client(blob + o_ctl + 1, blob[o_ctl], core, "wrong", fa, fl,
			    &keys);
	printf("wrong proof: status %d, key given %d\n", st, keys);
	CHECK_RC(st, -EACCES);
	CHECK(!keys);
	st = raw_client(blob + o_ctl + 1, blob[o_ctl], core, "open sesame", fa, fl,
			&keys);
	printf("right proof: status %d, key given %d\n", st, keys);
	CHECK_RC(st, 0);
	CHECK(keys);
	/* and the owner still serves */
	try_secret(&t, "open sesame", MiB);
	target_stop(&t);
	return 0;
}

struct fake {
	int lfd;
	uint64_t engine_id;
	ssize_t after; /* bytes the initiator sent after message 1 */
};

/* The token of t's "rw" window (its bytes in b) with its control address
 * pointed at a fresh listener on 127.0.0.1 (*lfd): a fake owner's.  Also
 * the owner's engine id and serving address as the token names them. */
static rma_remote *ctl_redirected(struct target *t, uint8_t *b, int *lfd,
				  uint64_t *engine_id, const uint8_t **addr,
				  size_t *addr_len)
{
	unsigned blen;
	int n = ad_bytes(t, "rw", 0, 0, 0, b);
	uint8_t *blob = ofi_blob(b, n, &blen);
	size_t o_ctl = 6 + (size_t)blob[2] + blob[3] + (blob[4] | blob[5] << 8);
	CHECK(blob[1] == 2 && blob[o_ctl] == 7);
	*engine_id = 0;
	for (int i = 0; i < 8; i++)
		*engine_id |= (uint64_t)b[8 + i] << (8 * i);
	if (addr) {
		*addr = blob + 6 + blob[2] + blob[3];
		*addr_len = (size_t)(blob[4] | blob[5] << 8);
	}
	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	CHECK(bind(*lfd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
	      listen(*lfd, 4) == 0 &&
	      getsockname(*lfd, (struct sockaddr *)&sa, &sl) == 0);
	uint16_t port = ntohs(sa.sin_port);
	blob[o_ctl + 2] = (uint8_t)port;
	blob[o_ctl + 3] = (uint8_t)(port >> 8);
	return reseal(b, n);
}

static void *fake_owner(void *arg)
{
	struct fake *f = arg;
	uint8_t b[RMA__SETUP_HDR_SIZE], rest[256];
	struct rma__setup_msg m;
	int fd = accept(f->lfd, NULL, NULL);
	f->after = -1;
	if (fd < 0)
		return NULL;
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (recv(fd, b, sizeof b, MSG_WAITALL) != (ssize_t)sizeof b ||
	    rma__setup_msg_decode(b, sizeof b, &m) || m.step != 1) {
		close(fd);
		return NULL;
	}
	/* Message 2 with the right engine id and a proof made without the
	 * secret. */
	struct rma__setup_msg r = { .step = 2, .kind = 3,
				    .engine_id = f->engine_id, .word = 0,
				    .nonce = 0x5555aaaa5555aaaaULL };
	memset(r.proof, 0x42, sizeof r.proof);
	rma__setup_msg_encode(&r, b);
	(void)!send(fd, b, sizeof b, MSG_NOSIGNAL);
	/* Whatever comes next (until the client closes or 10 s pass). */
	ssize_t n, got = 0;
	while ((n = recv(fd, rest, sizeof rest, 0)) > 0)
		got += n;
	f->after = got;
	close(fd);
	return NULL;
}

static int case_fake_owner(void)
{
	static struct target_opts o = { .secret = "open sesame", .rw_size = 4 * MiB };
	struct target t;
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	o.transports = spec;
	if (target_start(&t, &o))
		return TEST_SKIP;
	struct fake f = { .engine_id = 0 };
	rma_remote *r = ctl_redirected(&t, b, &f.lfd, &f.engine_id, NULL, NULL);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, fake_owner, &f) == 0);

	rma_engine *e = engine_secret("open sesame");
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, r, 0, 4096, 10000), -EACCES);
	rma_remote_free(r);
	rma_engine_destroy(e); /* closes the connection: the fake stops */
	pthread_join(th, NULL);
	printf("fake owner: the initiator sent %zd bytes after its hello\n", f.after);
	CHECKF(f.after == 0, "the initiator answered a wrong server proof "
	       "(%zd bytes)", f.after);
	close(f.lfd);
	test_free(buf, MiB);
	target_stop(&t);
	return 0;
}

struct raw_owner {
	int lfd;
	uint64_t engine_id;
	const uint8_t *addr;  /* the serving address WELCOME names */
	size_t addr_len;
	unsigned len_field;   /* the record's length field */
	int keys_sent;
};

/* Passes the handshake (the real server side), sends WELCOME, answers
 * each KEY with a raw KEYS whose record says len_field and carries as
 * many bytes, then waits for the initiator to close. */
static void *raw_owner(void *arg)
{
	struct raw_owner *f = arg;
	uint8_t key[16], m[32 + 10 + 300];
	struct rma__setup s;
	int fd = accept(f->lfd, NULL, NULL), rc;
	if (fd < 0)
		return NULL;
	rma__setup_key("open sesame", key);
	struct rma__setup_params sp = { .key = key, .kind = 3,
					.engine_id = f->engine_id };
	CHECK_RC(rma__setup_init(&s, fd, true, &sp), 0);
	while ((rc = rma__setup_run(&s)) == -EINPROGRESS) {
		struct pollfd pf = { .fd = fd, .events = (short)rma__setup_events(&s) };
		CHECKF(poll(&pf, 1, 10000) == 1, "raw owner: handshake stalled");
	}
	CHECK_RC(rc, 0);
	struct timeval tv = { .tv_sec = 20 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	/* ADDR first: the initiator's endpoint address and its number. */
	uint8_t in[32 + 128];
	CHECK(recv(fd, in, 32, MSG_WAITALL) == 32 && in[0] == 5);
	unsigned al = in[8] | in[9] << 8;
	CHECK(al > 0 && al <= 128 && recv(fd, in + 32, al, MSG_WAITALL) == (ssize_t)al);
	memset(m, 0, 32);
	m[0] = 1; /* WELCOME, b = the number of the address it holds */
	m[8] = (uint8_t)f->addr_len;
	memcpy(m + 16, in + 16, 8);
	memcpy(m + 32, f->addr, f->addr_len);
	xfer_all(fd, m, 32 + f->addr_len, true);
	while (recv(fd, in, 32, MSG_WAITALL) == 32) {
		if (in[0] == 5) { /* a later ADDR: take its bytes, say ADDED */
			al = in[8] | in[9] << 8;
			CHECK(al > 0 && al <= 128 &&
			      recv(fd, in + 32, al, MSG_WAITALL) == (ssize_t)al);
			memset(m, 0, 32);
			m[0] = 6;
			memcpy(m + 16, in + 16, 8);
			xfer_all(fd, m, 32, true);
			continue;
		}
		if (in[0] != 2)
			continue;
		memset(m, 0, sizeof m);
		m[0] = 3; /* KEYS, status 0, a = the core key asked for */
		memcpy(m + 8, in + 8, 8);
		memset(m + 16, 0xff, 8); /* b = FI_KEY_NOTAVAIL: a record follows */
		m[32] = (uint8_t)f->len_field;
		m[33] = (uint8_t)(f->len_field >> 8);
		for (unsigned i = 0; i < f->len_field && i < 300; i++)
			m[42 + i] = (uint8_t)i;
		xfer_all(fd, m, 42 + f->len_field, true);
		f->keys_sent++;
	}
	close(fd);
	return NULL;
}

static int64_t raw_record(struct target *t, unsigned len_field)
{
	uint8_t b[RMA_ADVERTISEMENT_MAX];
	struct raw_owner f = { .len_field = len_field };
	rma_remote *r = ctl_redirected(t, b, &f.lfd, &f.engine_id, &f.addr,
				       &f.addr_len);
	pthread_t th;
	CHECK(pthread_create(&th, NULL, raw_owner, &f) == 0);

	rma_engine *e = engine_secret("open sesame");
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(e, buf, MiB);
	int64_t res = integ_op(e, RMA_OP_PUT, l, r, 0, 4096, 20000);
	rma_remote_free(r);
	rma_engine_destroy(e); /* closes the connection: the fake stops */
	pthread_join(th, NULL);
	close(f.lfd);
	test_free(buf, MiB);
	printf("record length %u: op %lld (%s), KEYS sent %d\n", len_field,
	       (long long)res, res < 0 ? strerror((int)-res) : "ok", f.keys_sent);
	CHECKF(f.keys_sent >= 1, "the initiator never asked for the key");
	return res;
}

static int case_raw_record(void)
{
	static struct target_opts o = { .secret = "open sesame", .rw_size = 4 * MiB };
	struct target t;
	o.transports = spec;
	if (target_start(&t, &o))
		return TEST_SKIP;
	CHECK_RC(raw_record(&t, 257), -EBADMSG);
	CHECK_RC(raw_record(&t, 0), -EBADMSG);
	int64_t res = raw_record(&t, 256);
	CHECKF(res < 0 && res != -EBADMSG && res != -ETIMEDOUT &&
	       res != -ECONNRESET, "a 256-byte record: %lld", (long long)res);
	target_stop(&t);
	return 0;
}

static void idle_cb(void *arg, const struct rma_completion *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (c[i].result == 8)
			__atomic_add_fetch((int *)arg, 1, __ATOMIC_RELEASE);
}

static int case_idle(void)
{
	struct target t;
	int rc = start(&t, spec, MiB);
	if (rc)
		return rc;
	rma_engine *e = engine_of(spec);
	char *buf = test_alloc(4096);
	rma_region *l = integ_region(e, buf, 4096);
	rma_remote *r = integ_remote(&t, "rw");
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, r, 0, 8, 10000), 8); /* connected */
	/* Completions through a callback: the progress thread takes every
	 * one, its CQ's signal kept set while they come (cq_cb). */
	int done = 0;
	CHECK_RC(rma_set_callback(e, idle_cb, &done), 0);
	for (int i = 0; i < 2000; i++) {
		struct rma_op op = { .kind = RMA_OP_PUT, .local = l, .remote = r,
				     .len = 8, .user_data = (uint64_t)i };
		CHECK_RC(rma_post(e, &op, 1, 10000, NULL), 1);
		int64_t until = test_now_ms() + 10000;
		while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) <= i) {
			CHECKF(test_now_ms() < until, "op %d: no completion in 10 s", i);
			sched_yield();
		}
	}
	test_idle_check(t.pid); /* past the spin and the quiet time */
	CHECK_RC(rma_set_callback(e, NULL, NULL), 0);
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

static int case_stale_names(void)
{
	/* libfabric's shm names an endpoint "pid:uid:n" by default: files
	 * such a name would take, as a killed process with our pid left them. */
	enum { N = 32 };
	char path[N][64];
	bool made[N];
	for (int i = 0; i < N; i++) {
		snprintf(path[i], sizeof path[i], "/dev/shm/%d:%d:%d", (int)getpid(),
			 (int)getuid(), i);
		int fd = open(path[i], O_CREAT | O_EXCL | O_RDWR, 0600);
		made[i] = fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	struct rma_config cfg;
	rma_engine *e = NULL;
	rma_config_init(&cfg);
	cfg.transports = spec;
	int rc = rma_engine_create(&cfg, &e);
	for (int i = 0; i < N; i++)
		if (made[i])
			unlink(path[i]);
	CHECK_RC(rc, 0);
	/* And it moves bytes: a target in another process, a put and a get. */
	struct target t;
	if ((rc = start(&t, spec, MiB)))
		return rc;
	char *buf = test_alloc(65536);
	rma_region *l = integ_region(e, buf, 65536);
	rma_remote *r = integ_remote(&t, "rw");
	memset(buf, 0x3c, 65536);
	CHECK_RC(integ_op(e, RMA_OP_PUT, l, r, 0, 65536, 10000), 65536);
	memset(buf, 0, 65536);
	CHECK_RC(integ_op(e, RMA_OP_GET, l, r, 0, 65536, 10000), 65536);
	for (int i = 0; i < 65536; i++)
		CHECKF((unsigned char)buf[i] == 0x3c, "byte %d: %#x", i, buf[i]);
	rma_remote_free(r);
	rma_engine_destroy(e);
	target_stop(&t);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "route", case_route },
	{ "ro_key", case_ro_key },
	{ "window", case_window },
	{ "wrong_key", case_wrong_key },
	{ "killed", case_killed },
	{ "late", case_late },
	{ "secret", case_secret },
	{ "noctl", case_noctl },
	{ "stale", case_stale },
	{ "proof", case_proof },
	{ "fake_owner", case_fake_owner },
	{ "raw_record", case_raw_record },
	{ "idle", case_idle },
	{ "stale_names", case_stale_names },
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s CASE [PROV]\n", argv[0]);
		return 1;
	}
	snprintf(spec, sizeof spec, "ofi:prov=%s", argc > 2 ? argv[2] : "tcp");
	test_watchdog(100);
	struct rma_transport_info info[16];
	int n = rma_transports(info, 16);
	CHECK_OK(n);
	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(info[i].name, "ofi") && !info[i].available)
			SKIP("ofi not available: %s", info[i].detail);
	rma_engine *probe;
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = spec;
	if (rma_engine_create(&cfg, &probe))
		SKIP("%s cannot start here", spec);
	rma_engine_destroy(probe);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (!strcmp(argv[1], cases[i].name))
			return cases[i].fn();
	fprintf(stderr, "unknown case '%s'\n", argv[1]);
	return 1;
}
