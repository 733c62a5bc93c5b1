/*
 * integ_ofi_ctl.c - the ofi control connection's rules, with the owner in
 * this process (its serving endpoints are looked at through the
 * transport's test accessors, under the engine's lock).
 * Usage: integ_ofi_ctl CASE [PROV]  (PROV: tcp, the default, or sockets)
 *
 *   insert    the owner holds the initiator's fabric address in the AV of
 *             that peer's serving endpoint, as the provider resolves it:
 *             after the handshake, in the new serving endpoint that
 *             replaces a released one, and after the initiator replaced
 *             its own endpoint
 *   wait      the initiator posts nothing through a new endpoint until the
 *             owner confirmed it inserted its address: with the owner
 *             held (its engine lock taken), an op after a move opens the
 *             endpoint but posts no chunk; let go, the op completes
 *   bad_addr  raw clients that pass the handshake and send an address
 *             that is too long, of the wrong length, or that the provider
 *             refuses are cut off with no WELCOME, the reason logged; an
 *             engine keeps moving data meanwhile
 *   full      a peer that keeps replacing its endpoint (a raw client
 *             sending ADDR after ADDR, each a new address) is answered
 *             ADDED until its serving endpoint's AV is full, then moved to
 *             a fresh endpoint (WELCOME, a new address) and served on,
 *             again and again: never cut off; an engine still moves data
 *   limit     one source address (127.0.0.2) holding control connections:
 *             beyond max_addr_conns it is refused, the refusals logged as
 *             a count (not one line each); a silent flood from 127.0.0.3
 *             beyond max_addr_handshakes evicts its own; an engine from
 *             127.0.0.1 still passes the handshake and moves data
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "integ_common.h"
#include "transport/setup.h"

/* ofi.h's test accessors (it needs libfabric's headers). */
int rma__ofi_ctl_holding(struct rma__transport *t, const void *addr, size_t len);
int rma__ofi_peer_name(struct rma__transport *t, void *buf, size_t cap);
int rma__ofi_peer_posted(struct rma__transport *t);

#define OFI_WIRE_ID 3
static char spec[64];

/* ---- log capture ---- */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int n_addr_lines, n_limit_lines;
static char first_addr_line[256];

static void log_cb(void *arg, int level, const char *msg)
{
	(void)arg;
	fprintf(stderr, "log %d: %s\n", level, msg);
	pthread_mutex_lock(&log_mu);
	if (strstr(msg, "the initiator's fabric address") && !n_addr_lines++)
		snprintf(first_addr_line, sizeof first_addr_line, "%s", msg);
	if (strstr(msg, "ofi: refused") && !strstr(msg, "over a connection limit 0"))
		n_limit_lines++;
	pthread_mutex_unlock(&log_mu);
}

static int log_count(int *n)
{
	pthread_mutex_lock(&log_mu);
	int v = *n;
	pthread_mutex_unlock(&log_mu);
	return v;
}

/* ---- engines ---- */
static rma_engine *engine_of(const char *transports)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = transports;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static struct rma__transport *ofi_of(rma_engine *e)
{
	for (unsigned i = 0; i < e->ntr; i++)
		if (!strcmp(e->tr[i]->ops->name, "ofi"))
			return e->tr[i];
	FAIL("the engine has no ofi instance");
}

/* The initiator's newest peer endpoint's fabric address. */
static int peer_name(rma_engine *e, uint8_t *b)
{
	pthread_mutex_lock(&e->mu);
	int n = rma__ofi_peer_name(ofi_of(e), b, 128);
	pthread_mutex_unlock(&e->mu);
	CHECKF(n > 0, "the initiator has no endpoint (%d)", n);
	return n;
}

static int holding(rma_engine *e, const uint8_t *b, int n)
{
	pthread_mutex_lock(&e->mu);
	int h = rma__ofi_ctl_holding(ofi_of(e), b, (size_t)n);
	pthread_mutex_unlock(&e->mu);
	return h;
}

struct window {
	char *mem;
	rma_region *reg;
	rma_remote *rem;
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	int adlen;
};

static void window_open(rma_engine *e, struct window *w, size_t len)
{
	w->mem = test_alloc(len);
	CHECK_RC(rma_region_register(e, w->mem, len, RMA_ACCESS_REMOTE_RW, &w->reg), 0);
	w->adlen = rma_advertise(w->reg, 0, 0, 0, w->ad, sizeof w->ad);
	CHECK_OK(w->adlen);
	CHECK_RC(rma_remote_decode(w->ad, (size_t)w->adlen, &w->rem), 0);
}

/* The ofi entry's blob in an advertisement (design.md section 9), its
 * control address (tcp's blob layout, IPv4) and fabric address. */
static void ofi_parts(const uint8_t *b, int n, struct sockaddr_in *ctl,
		      const uint8_t **fa, size_t *fl)
{
	size_t o = 34 + (size_t)(b[32] | b[33] << 8);
	for (unsigned i = 0; i < b[6] && o + 4 <= (size_t)n; i++) {
		unsigned len = b[o + 2] | b[o + 3] << 8;
		if (b[o] == OFI_WIRE_ID) {
			const uint8_t *bl = b + o + 4;
			size_t al = (size_t)(bl[4] | bl[5] << 8);
			size_t oc = 6 + (size_t)bl[2] + bl[3] + al;
			CHECKF(bl[1] & 2 && bl[oc] == 7, "no IPv4 control address");
			*fa = bl + 6 + bl[2] + bl[3];
			*fl = al;
			memset(ctl, 0, sizeof *ctl);
			ctl->sin_family = AF_INET;
			ctl->sin_port = htons((uint16_t)(bl[oc + 2] | bl[oc + 3] << 8));
			memcpy(&ctl->sin_addr, bl + oc + 4, 4);
			return;
		}
		o += 4 + len;
	}
	FAIL("no ofi entry in the advertisement");
}

/* An owner with a window of MiB, an initiator with a local region, and
 * the owner's control and fabric addresses from the advertisement. */
struct pair {
	rma_engine *own, *ini;
	struct window w;
	char *buf;
	rma_region *l;
	const uint8_t *fa;
	size_t fl;
	struct sockaddr_in ctl;
};

static void pair_open(struct pair *p)
{
	p->own = engine_of(spec);
	p->ini = engine_of(spec);
	window_open(p->own, &p->w, MiB);
	p->buf = test_alloc(MiB);
	p->l = integ_region(p->ini, p->buf, MiB);
	ofi_parts(p->w.ad, p->w.adlen, &p->ctl, &p->fa, &p->fl);
}

/* ---- a raw control client ---- */
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

/* A connection to the control listener from source address src (NULL:
 * any), with a 30 s receive timeout. */
static int ctl_dial(const struct sockaddr_in *ctl, const char *src)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	if (src) {
		struct sockaddr_in s = { .sin_family = AF_INET };
		CHECK(inet_pton(AF_INET, src, &s.sin_addr) == 1);
		CHECKF(bind(fd, (struct sockaddr *)&s, sizeof s) == 0,
		       "bind %s: %s", src, strerror(errno));
	}
	struct timeval tv = { .tv_sec = 30 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	CHECKF(connect(fd, (const struct sockaddr *)ctl, sizeof *ctl) == 0,
	       "connect: %s", strerror(errno));
	return fd;
}

/* The setup handshake without a secret; returns message 4's status. */
static int raw_setup(int fd)
{
	uint8_t key[16], b[RMA__SETUP_HDR_SIZE];
	rma__setup_key(NULL, key);
	struct rma__setup_msg m = { .step = 1, .kind = 3, .engine_id = 4321,
				    .nonce = 0x0102030405060708ULL };
	rma__setup_msg_encode(&m, b);
	xfer_all(fd, b, sizeof b, true);
	xfer_all(fd, b, sizeof b, false);
	CHECK_RC(rma__setup_msg_decode(b, sizeof b, &m), 0);
	CHECK(m.step == 2);
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
	return m.status;
}

/* ADDR number seq: declared length len, then `send_n` bytes of a. */
static void raw_addr_seq(int fd, uint64_t len, const uint8_t *a,
			 size_t send_n, uint64_t seq)
{
	uint8_t m[32 + 256] = { 5 };
	for (int i = 0; i < 8; i++) {
		m[8 + i] = (uint8_t)(len >> (8 * i));
		m[16 + i] = (uint8_t)(seq >> (8 * i));
	}
	memcpy(m + 32, a, send_n);
	xfer_all(fd, m, 32 + send_n, true);
}

static void raw_addr(int fd, uint64_t len, const uint8_t *a, size_t send_n)
{
	raw_addr_seq(fd, len, a, send_n, 1);
}

/* What the owner answers next: 1 WELCOME (its address read), 0 the
 * connection closed with nothing more, -1 the receive timed out. */
static int raw_answer(int fd)
{
	uint8_t r[32 + 128];
	ssize_t n = recv(fd, r, 32, MSG_WAITALL);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -1;
	if (n <= 0)
		return 0;
	CHECKF(n == 32 && r[0] == 1, "unexpected answer (%zd bytes, type %u)",
	       n, r[0]);
	unsigned al = r[8] | r[9] << 8;
	CHECK(al > 0 && al <= 128);
	CHECK(recv(fd, r + 32, al, MSG_WAITALL) == (ssize_t)al);
	return 1;
}

/* ---- cases ---- */
static int case_insert(void)
{
	rma_engine *own = engine_of(spec), *ini = engine_of(spec);
	struct window a, b;
	uint8_t a1[128], a2[128];
	window_open(own, &a, MiB);
	window_open(own, &b, MiB);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(ini, buf, MiB);
	test_fill(buf, MiB, 5);

	/* After the handshake: the serving endpoint holds our address. */
	CHECK_RC(integ_op(ini, RMA_OP_PUT, l, a.rem, 0, MiB, 20000), MiB);
	int n1 = peer_name(ini, a1);
	CHECKF(holding(own, a1, n1) == 1, "the owner's serving endpoint does "
	       "not hold the initiator's address");
	/* (The accessor is not fooled by any address: the owner's own.) */
	const uint8_t *fa;
	size_t fl;
	struct sockaddr_in ctl;
	ofi_parts(a.ad, a.adlen, &ctl, &fa, &fl);
	CHECK_EQ(holding(own, fa, (int)fl), 0);

	/* A release replaces the serving endpoint: the new one holds the
	 * initiator's address before its WELCOME goes out. */
	CHECK_RC(rma_region_release(a.reg), 0);
	CHECKF(holding(own, a1, n1) == 1, "the serving endpoint that replaced "
	       "a released one does not hold the initiator's address");

	/* The initiator replaces its endpoint on that move and tells the
	 * owner its new address before it posts. */
	CHECK_RC(integ_op(ini, RMA_OP_PUT, l, b.rem, 0, MiB, 20000), MiB);
	CHECK_EQ(test_check_fill(b.mem, MiB, 5), -1);
	int n2 = peer_name(ini, a2);
	CHECKF(holding(own, a2, n2) == 1, "the owner does not hold the "
	       "initiator's new endpoint's address");
	CHECKF(n1 != n2 || memcmp(a1, a2, (size_t)n1), "the initiator kept its "
	       "endpoint through a move");
	printf("insert: held after the handshake, the move and the reopen\n");
	rma_remote_free(a.rem);
	rma_remote_free(b.rem);
	rma_engine_destroy(ini);
	rma_engine_destroy(own);
	return 0;
}

/* Until the initiator's newest peer has no endpoint (closed = -ENOENT) or
 * has one (open), 20 s at most. */
static void wait_endpoint(rma_engine *e, bool open)
{
	int64_t t0 = test_now_ms();
	for (;;) {
		pthread_mutex_lock(&e->mu);
		int n = rma__ofi_peer_posted(ofi_of(e));
		pthread_mutex_unlock(&e->mu);
		if ((n >= 0) == open)
			return;
		CHECKF(test_now_ms() - t0 < 20000, "the initiator's endpoint did "
		       "not %s", open ? "open" : "close");
		test_sleep_ms(2);
	}
}

static int case_wait(void)
{
	rma_engine *own = engine_of(spec), *ini = engine_of(spec);
	struct window a, b;
	window_open(own, &a, MiB);
	window_open(own, &b, MiB);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(ini, buf, MiB);
	test_fill(buf, MiB, 8);
	/* Both keys known: the op below asks the owner nothing else. */
	CHECK_RC(integ_op(ini, RMA_OP_GET, l, a.rem, 0, 4096, 20000), 4096);
	CHECK_RC(integ_op(ini, RMA_OP_GET, l, b.rem, 0, 4096, 20000), 4096);
	/* A release moves the peer: with nothing in flight it closes its
	 * endpoint, the next op opens a new one. */
	CHECK_RC(rma_region_release(a.reg), 0);
	wait_endpoint(ini, false);

	/* The owner held: it cannot read the new ADDR. */
	pthread_mutex_lock(&own->mu);
	test_fill(buf, MiB, 8);
	struct rma_op op = { .kind = RMA_OP_PUT, .local = l, .remote = b.rem,
			     .len = MiB, .user_data = 1 };
	CHECK_RC(rma_post(ini, &op, 1, 20000, NULL), 1);
	wait_endpoint(ini, true);
	pthread_mutex_lock(&ini->mu);
	int posted = rma__ofi_peer_posted(ofi_of(ini));
	pthread_mutex_unlock(&ini->mu);
	pthread_mutex_unlock(&own->mu);
	CHECKF(posted == 0, "%d chunks posted before the owner confirmed the "
	       "new endpoint's address", posted);

	struct rma_completion c;
	int64_t t0 = test_now_ms();
	int n;
	while ((n = rma_poll(ini, &c, 1)) == 0 && test_now_ms() - t0 < 30000)
		test_sleep_ms(2);
	CHECK_EQ(n, 1);
	CHECK_RC(c.result, MiB);
	CHECK_EQ(test_check_fill(b.mem, MiB, 8), -1);
	printf("wait: no chunk posted until the owner confirmed the address\n");
	rma_remote_free(a.rem);
	rma_remote_free(b.rem);
	rma_engine_destroy(ini);
	rma_engine_destroy(own);
	return 0;
}

static int case_bad_addr(void)
{
	rma_set_log(RMA_LOG_WARN, log_cb, NULL);
	struct pair p;
	pair_open(&p);
	rma_engine *own = p.own, *ini = p.ini;
	struct window w = p.w;
	char *buf = p.buf;
	rma_region *l = p.l;
	const uint8_t *fa = p.fa;
	size_t fl = p.fl;
	struct sockaddr_in ctl = p.ctl;
	uint8_t junk[256];
	memset(junk, 0x7e, sizeof junk);

	/* A good peer first, and one that stays through it all. */
	CHECK_RC(integ_op(ini, RMA_OP_GET, l, w.rem, 0, MiB, 20000), MiB);
	/* Sound, for comparison: the owner's own address is taken. */
	int fd = ctl_dial(&ctl, NULL);
	CHECK_RC(raw_setup(fd), 0);
	raw_addr(fd, fl, fa, fl);
	CHECK_EQ(raw_answer(fd), 1);
	close(fd);

	/* Too long: refused on its header, before 200 bytes are read (only
	 * 100 come: an owner waiting for the rest would drop the connection
	 * at its handshake deadline instead, so the logged reason tells).
	 * The first refusal: the one whose reason is logged. */
	fd = ctl_dial(&ctl, NULL);
	CHECK_RC(raw_setup(fd), 0);
	raw_addr(fd, 200, junk, 100);
	CHECKF(raw_answer(fd) == 0, "an address of 200 bytes was not refused");
	close(fd);
	pthread_mutex_lock(&log_mu);
	CHECKF(strstr(first_addr_line, "too long"), "the refusal of a 200-byte "
	       "address gave the reason '%s'", first_addr_line);
	pthread_mutex_unlock(&log_mu);
	/* One byte short of the provider's length. */
	fd = ctl_dial(&ctl, NULL);
	CHECK_RC(raw_setup(fd), 0);
	raw_addr(fd, fl - 1, fa, fl - 1);
	CHECKF(raw_answer(fd) == 0, "an address of the wrong length was not "
	       "refused");
	close(fd);
	/* Right length, garbage bytes (a socket address of no family). */
	fd = ctl_dial(&ctl, NULL);
	CHECK_RC(raw_setup(fd), 0);
	raw_addr(fd, fl, junk, fl);
	CHECKF(raw_answer(fd) == 0, "an address the provider refuses was not "
	       "refused");
	close(fd);

	/* The owner keeps serving, the old peer and a new one. */
	test_fill(buf, MiB, 9);
	CHECK_RC(integ_op(ini, RMA_OP_PUT, l, w.rem, 0, MiB, 20000), MiB);
	CHECK_EQ(test_check_fill(w.mem, MiB, 9), -1);
	rma_engine *ini2 = engine_of(spec);
	rma_region *l2 = integ_region(ini2, buf, MiB);
	CHECK_RC(integ_op(ini2, RMA_OP_GET, l2, w.rem, 0, MiB, 20000), MiB);
	int lines = log_count(&n_addr_lines);
	printf("bad_addr: %d line(s) gave the reason\n", lines);
	CHECKF(lines >= 1, "no refusal of an initiator's address was logged");
	rma_engine_destroy(ini2);
	rma_engine_destroy(ini);
	rma_remote_free(w.rem);
	rma_engine_destroy(own);
	rma_set_log(RMA_LOG_WARN, NULL, NULL);
	return 0;
}

/* The owner's next message: its type, a and b; a WELCOME's address into
 * addr (128 bytes). */
static unsigned raw_msg(int fd, uint64_t *a, uint64_t *b, uint8_t *addr)
{
	uint8_t r[32];
	CHECKF(recv(fd, r, 32, MSG_WAITALL) == 32, "the owner closed the "
	       "control connection or did not answer");
	*a = *b = 0;
	for (int i = 7; i >= 0; i--) {
		*a = *a << 8 | r[8 + i];
		*b = *b << 8 | r[16 + i];
	}
	if (r[0] == 1) {
		CHECK(*a > 0 && *a <= 128);
		CHECK(recv(fd, addr, (size_t)*a, MSG_WAITALL) == (ssize_t)*a);
	}
	return r[0];
}

#define FULL_ADDRS 2200 /* over twice the 1024 a serving endpoint holds */
static int case_full(void)
{
	struct pair p;
	pair_open(&p);
	const uint8_t *fa = p.fa;
	size_t fl = p.fl;
	CHECK(fl >= 4 && fl <= 128);

	int fd = ctl_dial(&p.ctl, NULL);
	CHECK_RC(raw_setup(fd), 0);
	raw_addr(fd, fl, fa, fl);
	uint8_t got[128], a[128];
	uint64_t x, y;
	CHECK_EQ(raw_msg(fd, &x, &y, got), 1);
	/* Each a new, well-formed address: the owner's own with another
	 * port (the bytes after the family), as an initiator's next
	 * endpoint would have. */
	unsigned moves = 0, added = 0, since = 0, most = 0;
	for (unsigned i = 1; i <= FULL_ADDRS; i++) {
		memcpy(a, fa, fl);
		a[2] = (uint8_t)((20000 + i) >> 8);
		a[3] = (uint8_t)(20000 + i);
		raw_addr_seq(fd, fl, a, fl, (uint64_t)i + 1);
		unsigned t = raw_msg(fd, &x, &y, got);
		if (t == 6) { /* ADDED, for this address */
			CHECK_EQ(y, (uint64_t)i + 1);
			added++;
			since++;
			continue;
		}
		/* Moved: a fresh endpoint (its address, which the kernel may
		 * give the port of the one just closed), holding this one. */
		CHECKF(t == 1, "ADDR %u answered with type %u", i, t);
		CHECK_EQ(x, (uint64_t)fl);
		most = since > most ? since : most;
		since = 0;
		moves++;
	}
	printf("full: %u ADDED, %u moves, at most %u ADDED on one endpoint\n",
	       added, moves, most);
	CHECKF(moves >= 2, "%u addresses made %u moves", FULL_ADDRS, moves);
	CHECKF(most >= 1000, "a serving endpoint held only %u addresses", most);
	close(fd);

	/* The owner keeps serving. */
	test_fill(p.buf, MiB, 11);
	CHECK_RC(integ_op(p.ini, RMA_OP_PUT, p.l, p.w.rem, 0, MiB, 20000), MiB);
	CHECK_EQ(test_check_fill(p.w.mem, MiB, 11), -1);
	rma_engine_destroy(p.ini);
	rma_remote_free(p.w.rem);
	rma_engine_destroy(p.own);
	return 0;
}

/* A control session that may be refused anywhere: 1 if the owner sent
 * WELCOME (fd left open in *out), else 0 (fd closed). */
static int raw_try(const struct sockaddr_in *ctl, const char *src,
		   const uint8_t *fa, size_t fl, int *out)
{
	int fd = ctl_dial(ctl, src);
	uint8_t key[16], b[RMA__SETUP_HDR_SIZE], m[32 + 128] = { 5 };
	struct rma__setup_msg sm = { .step = 1, .kind = 3, .engine_id = 99,
				     .nonce = 0x55 };
	rma__setup_key(NULL, key);
	rma__setup_msg_encode(&sm, b);
	if (send(fd, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b ||
	    recv(fd, b, sizeof b, MSG_WAITALL) != (ssize_t)sizeof b ||
	    rma__setup_msg_decode(b, sizeof b, &sm) || sm.step != 2)
		goto refused;
	uint64_t snonce = sm.nonce;
	memset(&sm, 0, sizeof sm);
	sm.step = 3;
	sm.kind = 3;
	rma__setup_proof(key, 'C', snonce, NULL, 0, sm.proof);
	rma__setup_msg_encode(&sm, b);
	if (send(fd, b, sizeof b, MSG_NOSIGNAL) != (ssize_t)sizeof b ||
	    recv(fd, b, sizeof b, MSG_WAITALL) != (ssize_t)sizeof b ||
	    rma__setup_msg_decode(b, sizeof b, &sm) || sm.step != 4 || sm.status)
		goto refused;
	m[8] = (uint8_t)fl;
	m[16] = 1;
	memcpy(m + 32, fa, fl);
	if (send(fd, m, 32 + fl, MSG_NOSIGNAL) != (ssize_t)(32 + fl))
		goto refused;
	int a = raw_answer(fd);
	CHECKF(a >= 0, "no answer to a control session");
	if (a == 1) {
		*out = fd;
		return 1;
	}
refused:
	close(fd);
	return 0;
}

#define LIM 4
#define FLOOD 8
#define SILENT 12
static int case_limit(void)
{
	char own_spec[160];
	snprintf(own_spec, sizeof own_spec, "%s:max_addr_conns=%d:"
		 "max_addr_handshakes=%d:handshake_ms=60000", spec, LIM, LIM);
	rma_set_log(RMA_LOG_WARN, log_cb, NULL);
	rma_engine *own = engine_of(own_spec);
	struct window w;
	window_open(own, &w, MiB);
	const uint8_t *fa;
	size_t fl;
	struct sockaddr_in ctl;
	ofi_parts(w.ad, w.adlen, &ctl, &fa, &fl);

	/* Authenticated sessions from one address: LIM get in. */
	int held[FLOOD], nheld = 0;
	for (int i = 0; i < FLOOD; i++)
		nheld += raw_try(&ctl, "127.0.0.2", fa, fl, &held[nheld]);
	printf("limit: %d of %d sessions from 127.0.0.2 welcomed\n", nheld, FLOOD);
	CHECKF(nheld == LIM, "%d sessions from one address got in, the cap "
	       "is %d", nheld, LIM);
	/* The refusals are reported as a count, not a line each. */
	int64_t t0 = test_now_ms();
	while (!log_count(&n_limit_lines) && test_now_ms() - t0 < 30000)
		test_sleep_ms(20);
	int lines = log_count(&n_limit_lines);
	CHECKF(lines >= 1, "no refusal over the limit was logged");
	CHECKF(lines < FLOOD - LIM, "%d refusals took %d lines", FLOOD - LIM, lines);

	/* Silent connections from another address: each new one beyond LIM
	 * evicts that address's oldest (their handshake deadline is a minute
	 * away), so the newest LIM are left. */
	int silent[SILENT];
	for (int i = 0; i < SILENT; i++) {
		silent[i] = ctl_dial(&ctl, "127.0.0.3");
		/* accepted before the next one comes: the order is known */
		uint8_t b;
		struct pollfd pf = { .fd = silent[i], .events = POLLIN };
		(void)poll(&pf, 1, 50);
		(void)b;
	}
	for (int i = 0; i < SILENT - LIM; i++) {
		uint8_t b;
		ssize_t n = recv(silent[i], &b, 1, 0);
		CHECKF(n <= 0 && !(n < 0 && errno == EAGAIN), "silent connection %d "
		       "of %d was not evicted", i, SILENT);
	}
	for (int i = SILENT - LIM; i < SILENT; i++) {
		CHECK_RC(raw_setup(silent[i]), 0); /* still served */
		close(silent[i]);
	}
	for (int i = 0; i < SILENT - LIM; i++)
		close(silent[i]);

	/* An engine from 127.0.0.1 passes the handshake and moves data. */
	rma_engine *ini = engine_of(spec);
	char *buf = test_alloc(MiB);
	rma_region *l = integ_region(ini, buf, MiB);
	test_fill(buf, MiB, 3);
	CHECK_RC(integ_op(ini, RMA_OP_PUT, l, w.rem, 0, MiB, 20000), MiB);
	CHECK_EQ(test_check_fill(w.mem, MiB, 3), -1);
	for (int i = 0; i < nheld; i++)
		close(held[i]);
	rma_engine_destroy(ini);
	rma_remote_free(w.rem);
	rma_engine_destroy(own);
	rma_set_log(RMA_LOG_WARN, NULL, NULL);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "limit", case_limit },
	{ "insert", case_insert },
	{ "wait", case_wait },
	{ "bad_addr", case_bad_addr },
	{ "full", case_full },
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s CASE [PROV]\n", argv[0]);
		return 1;
	}
	snprintf(spec, sizeof spec, "ofi:prov=%s", argc > 2 ? argv[2] : "tcp");
	test_watchdog(100);
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
