/*
 * The shared connection setup (transport/setup.h) by itself, both sides on
 * a socketpair, or one side against a raw peer written from the layout in
 * setup.h: blobs and words cross both ways; the proof follows the
 * documented formula; a wrong secret fails the client with -EACCES before
 * it sends anything past its hello, and the server with -EACCES after
 * telling the client; a wrong engine id gives exactly -ESTALE; truncated,
 * garbage and out-of-order messages give -EPROTO; an oversized blob is
 * refused on both ends; nothing past the last message is read.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "testlib.h"
#include "transport/setup.h"
#include "util/util.h"

#define ID_S 0x5e5e5e5e12345678ull
#define ID_C 0xc1c1c1c100000042ull

static uint8_t key_a[16], key_b[16];

static void pair(int sv[2])
{
	CHECK_RC(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
}

static void init(struct rma__setup *s, int fd, bool server, const uint8_t *key,
		 uint64_t expect, const void *blob, size_t len)
{
	struct rma__setup_params p = {
		.key = key,
		.engine_id = server ? ID_S : ID_C,
		.expect_id = expect,
		.word = server ? 1u << 20 : 77,
		.blob = blob,
		.blob_len = len,
	};
	CHECK_RC(rma__setup_init(s, fd, server, &p), 0);
}

/* Run both sides until neither can move. */
static void drive(struct rma__setup *c, struct rma__setup *s, int *rc_c, int *rc_s)
{
	*rc_c = *rc_s = -EINPROGRESS;
	for (int i = 0; i < 100; i++) {
		if (*rc_c == -EINPROGRESS)
			*rc_c = rma__setup_run(c);
		if (*rc_s == -EINPROGRESS)
			*rc_s = rma__setup_run(s);
	}
}

/* Bytes waiting on fd (0 when none). */
static ssize_t pending(int fd)
{
	uint8_t b[4096];
	ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT | MSG_PEEK);
	return n < 0 ? 0 : n;
}

static int read_all(int fd, uint8_t *b, size_t n)
{
	size_t have = 0;
	for (int i = 0; i < 1000 && have < n; i++) {
		ssize_t r = recv(fd, b + have, n - have, MSG_DONTWAIT);
		if (r == 0)
			return -1;
		if (r > 0)
			have += (size_t)r;
		else
			test_sleep_ms(1);
	}
	return have == n ? 0 : -1;
}

static void good_and_blobs(void)
{
	static struct rma__setup c, s;
	uint8_t cb[100], sb[RMA__SETUP_BLOB_MAX];
	int sv[2], rc_c, rc_s;

	for (size_t i = 0; i < sizeof cb; i++)
		cb[i] = (uint8_t)(i * 3 + 1);
	for (size_t i = 0; i < sizeof sb; i++)
		sb[i] = (uint8_t)(i * 7 + 2);
	pair(sv);
	init(&c, sv[0], false, key_a, ID_S, cb, sizeof cb);
	init(&s, sv[1], true, key_a, 0, sb, sizeof sb);
	drive(&c, &s, &rc_c, &rc_s);
	CHECK_RC(rc_c, 0);
	CHECK_RC(rc_s, 0);
	CHECK(!rma__setup_pending(&c) && !rma__setup_pending(&s));
	CHECK_EQ_U64(c.peer_id, ID_S);
	CHECK_EQ_U64(s.peer_id, ID_C);
	CHECK_EQ_U64(c.peer_word, 1u << 20);
	CHECK_EQ_U64(s.peer_word, 77);
	CHECK_EQ(c.peer_blob_len, sizeof sb);
	CHECK(!memcmp(c.peer_blob, sb, sizeof sb));
	CHECK_EQ(s.peer_blob_len, sizeof cb);
	CHECK(!memcmp(s.peer_blob, cb, sizeof cb));
	/* Done means done: a second call stays done and reads nothing. */
	CHECK_EQ(send(sv[0], "data", 4, 0), 4);
	CHECK_RC(rma__setup_run(&s), 0);
	CHECK_EQ(pending(sv[1]), 4);
	close(sv[0]);
	close(sv[1]);
}

static void wrong_secret_client(void)
{
	static struct rma__setup c, s;
	int sv[2], rc_c, rc_s;

	pair(sv);
	init(&c, sv[0], false, key_a, ID_S, NULL, 0);
	init(&s, sv[1], true, key_b, 0, NULL, 0);
	drive(&c, &s, &rc_c, &rc_s);
	CHECK_RC(rc_c, -EACCES);
	/* The client sent its hello and nothing else: no proof, no data. */
	CHECK_RC(rc_s, -EINPROGRESS);
	CHECK_EQ(pending(sv[1]), 0);
	CHECK_RC(rma__setup_run(&c), -EACCES); /* stays failed */
	close(sv[0]);
	CHECK_RC(rma__setup_run(&s), -ECONNRESET);
	close(sv[1]);
}

/* A raw client: hello, then a proof computed with `key` over the server's
 * nonce and `blob` (which it may not have sent). */
static int raw_client(const uint8_t *key, const void *sent_blob, size_t sent_len,
		      const void *proved_blob, size_t proved_len,
		      struct rma__setup_msg *m4)
{
	static struct rma__setup s;
	struct rma__setup_msg m = {.step = 1, .engine_id = ID_C, .nonce = 99,
				   .blob_len = (uint32_t)sent_len};
	uint8_t b[RMA__SETUP_HDR_SIZE + RMA__SETUP_BLOB_MAX];
	int sv[2], rc;

	pair(sv);
	init(&s, sv[1], true, key_a, 0, NULL, 0);
	rma__setup_msg_encode(&m, b);
	if (sent_len)
		memcpy(b + RMA__SETUP_HDR_SIZE, sent_blob, sent_len);
	CHECK_EQ(send(sv[0], b, RMA__SETUP_HDR_SIZE + sent_len, 0),
		 (ssize_t)(RMA__SETUP_HDR_SIZE + sent_len));
	CHECK_RC(rma__setup_run(&s), -EINPROGRESS);
	CHECK_RC(read_all(sv[0], b, RMA__SETUP_HDR_SIZE), 0);
	CHECK_RC(rma__setup_msg_decode(b, RMA__SETUP_HDR_SIZE, &m), 0);
	CHECK_EQ(m.step, 2);
	struct rma__setup_msg m3 = {.step = 3};
	rma__setup_proof(key, 'C', m.nonce, proved_blob, proved_len, m3.proof);
	rma__setup_msg_encode(&m3, b);
	CHECK_EQ(send(sv[0], b, RMA__SETUP_HDR_SIZE, 0), RMA__SETUP_HDR_SIZE);
	rc = rma__setup_run(&s);
	CHECK_RC(read_all(sv[0], b, RMA__SETUP_HDR_SIZE), 0);
	CHECK_RC(rma__setup_msg_decode(b, RMA__SETUP_HDR_SIZE, m4), 0);
	CHECK_EQ(m4->step, 4);
	close(sv[0]);
	close(sv[1]);
	return rc;
}

static void wrong_secret_server(void)
{
	struct rma__setup_msg m4;
	uint8_t blob[8] = "verbs-qp", other[8] = "verbs-QP";

	CHECK_RC(raw_client(key_a, NULL, 0, NULL, 0, &m4), 0);
	CHECK_EQ(m4.status, 0);
	CHECK_RC(raw_client(key_b, NULL, 0, NULL, 0, &m4), -EACCES);
	CHECK_EQ(m4.status, -EACCES);
	/* The proof covers the blob: right key, other blob. */
	CHECK_RC(raw_client(key_a, blob, sizeof blob, blob, sizeof blob, &m4), 0);
	CHECK_RC(raw_client(key_a, blob, sizeof blob, other, sizeof other, &m4),
		 -EACCES);
	CHECK_EQ(m4.status, -EACCES);
}

static void wrong_engine(void)
{
	static struct rma__setup c, s;
	int sv[2], rc_c, rc_s;

	pair(sv);
	init(&c, sv[0], false, key_a, ID_S + 1, NULL, 0);
	init(&s, sv[1], true, key_a, 0, NULL, 0);
	drive(&c, &s, &rc_c, &rc_s);
	CHECK_RC(rc_c, -ESTALE);
	CHECK_EQ(pending(sv[1]), 0);
	close(sv[0]);
	close(sv[1]);
	/* A wrong secret is found before a wrong engine id. */
	pair(sv);
	init(&c, sv[0], false, key_a, ID_S + 1, NULL, 0);
	init(&s, sv[1], true, key_b, 0, NULL, 0);
	drive(&c, &s, &rc_c, &rc_s);
	CHECK_RC(rc_c, -EACCES);
	close(sv[0]);
	close(sv[1]);
}

/* Feed `bytes` to one side (server or client after its hello), then close
 * if asked: the side must fail with `want`. */
static void feed(bool server, const uint8_t *bytes, size_t n, bool eof, int want,
		 const char *what)
{
	static struct rma__setup x;
	uint8_t b[RMA__SETUP_HDR_SIZE];
	int sv[2];

	pair(sv);
	init(&x, sv[1], server, key_a, ID_S, NULL, 0);
	if (!server) {
		CHECK_RC(rma__setup_run(&x), -EINPROGRESS);
		CHECK_RC(read_all(sv[0], b, sizeof b), 0); /* its hello */
	}
	if (n)
		CHECK_EQ(send(sv[0], bytes, n, 0), (ssize_t)n);
	if (eof)
		shutdown(sv[0], SHUT_WR);
	int rc = rma__setup_run(&x);
	CHECKF(rc == want, "%s side, %s: got %d (%s), expected %d (%s)",
	       server ? "server" : "client", what, rc, rma_strerror(rc), want,
	       rma_strerror(want));
	close(sv[0]);
	close(sv[1]);
}

static void malformed(void)
{
	uint8_t b[RMA__SETUP_HDR_SIZE + RMA__SETUP_BLOB_MAX + 8];
	struct rma__setup_msg m = {.step = 1, .engine_id = ID_C, .nonce = 5};

	for (int server = 0; server < 2; server++) {
		m.step = server ? 1 : 2;
		m.engine_id = server ? ID_C : ID_S;
		m.blob_len = 0;
		m.kind = 0;
		rma__setup_msg_encode(&m, b);
		feed(server, b, 30, true, -EPROTO, "a header cut short");
		feed(server, b, 0, true, -ECONNRESET, "closed before a byte");
		memset(b, 0xA5, sizeof b);
		feed(server, b, RMA__SETUP_HDR_SIZE, false, -EPROTO, "garbage");
		rma__setup_msg_encode(&m, b);
		b[0] ^= 1;
		feed(server, b, RMA__SETUP_HDR_SIZE, false, -EPROTO, "bad magic");
		rma__setup_msg_encode(&m, b);
		b[4] = 2;
		feed(server, b, RMA__SETUP_HDR_SIZE, false, -EPROTO, "version 2");
		rma__setup_msg_encode(&m, b);
		b[60] = 1;
		feed(server, b, RMA__SETUP_HDR_SIZE, false, -EPROTO, "reserved bytes");
		m.kind = 3;
		rma__setup_msg_encode(&m, b);
		feed(server, b, RMA__SETUP_HDR_SIZE, false, -EPROTO, "another kind");
		m.kind = 0;
		m.step = 3;
		rma__setup_msg_encode(&m, b);
		feed(server, b, RMA__SETUP_HDR_SIZE, false, -EPROTO, "out of order");
		m.step = server ? 1 : 2;
		/* A blob announced past the bound; one cut short. */
		rma__setup_msg_encode(&m, b);
		rma__put_le32(b + 12, RMA__SETUP_BLOB_MAX + 1);
		feed(server, b, sizeof b, false, -EPROTO, "oversized blob");
		m.blob_len = 16;
		rma__setup_msg_encode(&m, b);
		feed(server, b, RMA__SETUP_HDR_SIZE + 10, true, -EPROTO,
		     "a blob cut short");
	}
	/* Our own blob over the bound is refused before anything is sent. */
	static struct rma__setup x;
	static uint8_t big[RMA__SETUP_BLOB_MAX + 1];
	struct rma__setup_params p = {.key = key_a, .blob = big,
				      .blob_len = sizeof big};
	CHECK_RC(rma__setup_init(&x, -1, false, &p), -EINVAL);
}

/* The key and proof follow the formula written in setup.h. */
static void formula(void)
{
	static const uint8_t k0[16] = "rma-tcp-secret-0", k1[16] = "rma-tcp-secret-1";
	const char *secret = "open sesame";
	uint8_t key[16], want_key[16], proof[16], msg[9 + 3];

	/* SipHash-2-4 itself: the reference vector (key 00..0f, message
	 * 00..0e), so another implementation can start from the paper. */
	uint8_t k[16], m[15];
	for (int i = 0; i < 16; i++)
		k[i] = (uint8_t)i;
	for (int i = 0; i < 15; i++)
		m[i] = (uint8_t)i;
	CHECK_EQ_U64(rma__siphash(k, m, 15), 0xa129ca6149be45e5ull);

	rma__setup_key(secret, key);
	rma__put_le64(want_key, rma__siphash(k0, secret, strlen(secret)));
	rma__put_le64(want_key + 8, rma__siphash(k1, secret, strlen(secret)));
	CHECK(!memcmp(key, want_key, 16));
	rma__setup_key(NULL, key);
	rma__put_le64(want_key, rma__siphash(k0, "", 0));
	CHECK(!memcmp(key, want_key, 8));

	msg[0] = 'C';
	rma__put_le64(msg + 1, 0x0102030405060708ull);
	memcpy(msg + 9, "abc", 3);
	rma__setup_proof(key_a, 'C', 0x0102030405060708ull, "abc", 3, proof);
	CHECK_EQ_U64(rma__le64(proof), rma__siphash(key_a, msg, sizeof msg));
	msg[0] ^= 0x80;
	CHECK_EQ_U64(rma__le64(proof + 8), rma__siphash(key_a, msg, sizeof msg));
	/* Without a blob: the 9 bytes tcp has always used. */
	rma__setup_proof(key_a, 'S', 42, NULL, 0, proof);
	msg[0] = 'S';
	rma__put_le64(msg + 1, 42);
	CHECK_EQ_U64(rma__le64(proof), rma__siphash(key_a, msg, 9));
	CHECK(rma__setup_equal(proof, proof, 16));
	for (int i = 0; i < 16; i++) { /* a difference anywhere counts */
		uint8_t other[16];
		memcpy(other, proof, 16);
		other[i] ^= 0x10;
		CHECKF(!rma__setup_equal(proof, other, 16), "byte %d", i);
	}
}

static int nlog;
static char last_log[512];

static void log_cb(void *arg, int level, const char *msg)
{
	(void)arg;
	(void)level;
	nlog++;
	snprintf(last_log, sizeof last_log, "%s", msg);
}

/* A flood of refusals makes one line per interval, with the counts. */
static void refusal_log(void)
{
	struct rma__refusals r = {.who = "test", .interval_ns = 1000};

	rma_set_log(RMA_LOG_WARN, log_cb, NULL);
	rma__refused(&r, RMA__REFUSED_SECRET, 5000);
	CHECK_EQ(nlog, 1); /* the first at once */
	CHECK(strstr(last_log, "refused 1 connection"));
	for (int i = 0; i < 1000; i++)
		rma__refused(&r, i & 1 ? RMA__REFUSED_LIMIT : RMA__REFUSED_PROTO,
			     5001 + i % 998);
	rma__refusals_log(&r, 5999);
	CHECK_EQ(nlog, 1); /* none within the interval */
	rma__refusals_log(&r, 6000);
	CHECK_EQ(nlog, 2); /* then one, with what it counted */
	CHECKF(strstr(last_log, "refused 1000 connections") &&
	       strstr(last_log, "bad handshake 500") &&
	       strstr(last_log, "over a connection limit 500"), "%s", last_log);
	rma__refusals_log(&r, 9000);
	CHECK_EQ(nlog, 2); /* nothing new, nothing said */
	rma_set_log(RMA_LOG_WARN, NULL, NULL);
}

int main(void)
{
	test_watchdog(60);
	rma__setup_key("right", key_a);
	rma__setup_key("wrong", key_b);
	formula();
	good_and_blobs();
	wrong_secret_client();
	wrong_secret_server();
	wrong_engine();
	malformed();
	refusal_log();
	printf("ok\n");
	return 0;
}
