/*
 * setup.c - the authenticated connection setup any transport can run on a
 * stream socket (layout and proof: setup.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "transport/setup.h"
#include "rma.h"
#include "util/util.h"

enum { S_START, S_WAIT1, S_WAIT2, S_WAIT3, S_WAIT4, S_DONE, S_FAILED };

void rma__setup_msg_encode(const struct rma__setup_msg *m, uint8_t *b)
{
	memset(b, 0, RMA__SETUP_HDR_SIZE);
	rma__put_le32(b, RMA__SETUP_MAGIC);
	rma__put_le16(b + 4, RMA__SETUP_VERSION);
	b[6] = m->step;
	b[7] = m->kind;
	rma__put_le32(b + 8, (uint32_t)m->status);
	rma__put_le32(b + 12, m->blob_len);
	rma__put_le64(b + 16, m->engine_id);
	rma__put_le64(b + 24, m->word);
	rma__put_le64(b + 32, m->nonce);
	memcpy(b + 40, m->proof, 16);
}

int rma__setup_msg_decode(const uint8_t *b, size_t n, struct rma__setup_msg *out)
{
	struct rma__setup_msg m;

	if (n < RMA__SETUP_HDR_SIZE || rma__le32(b) != RMA__SETUP_MAGIC ||
	    rma__le16(b + 4) != RMA__SETUP_VERSION || b[6] < 1 || b[6] > 4 ||
	    rma__le64(b + 56))
		return -EPROTO;
	m.step = b[6];
	m.kind = b[7];
	m.status = (int32_t)rma__le32(b + 8);
	m.blob_len = rma__le32(b + 12);
	m.engine_id = rma__le64(b + 16);
	m.word = rma__le64(b + 24);
	m.nonce = rma__le64(b + 32);
	memcpy(m.proof, b + 40, 16);
	if (m.status > 0 || m.status < -4095 || m.blob_len > RMA__SETUP_BLOB_MAX)
		return -EPROTO;
	/* Only the first message each way carries a blob. */
	if (m.blob_len && m.step > 2)
		return -EPROTO;
	*out = m;
	return 0;
}

void rma__setup_key(const char *secret, uint8_t key[16])
{
	static const uint8_t k0[16] = "rma-tcp-secret-0";
	static const uint8_t k1[16] = "rma-tcp-secret-1";
	const char *s = secret ? secret : "";
	rma__put_le64(key, rma__siphash(k0, s, strlen(s)));
	rma__put_le64(key + 8, rma__siphash(k1, s, strlen(s)));
}

void rma__setup_proof(const uint8_t key[16], char side, uint64_t nonce,
		      const void *blob, size_t len, uint8_t out[16])
{
	uint8_t msg[9 + RMA__SETUP_BLOB_MAX];

	len = RMA_MIN(len, (size_t)RMA__SETUP_BLOB_MAX);
	msg[0] = (uint8_t)side;
	rma__put_le64(msg + 1, nonce);
	if (len)
		memcpy(msg + 9, blob, len);
	rma__put_le64(out, rma__siphash(key, msg, 9 + len));
	msg[0] ^= 0x80;
	rma__put_le64(out + 8, rma__siphash(key, msg, 9 + len));
}

bool rma__setup_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	volatile uint8_t d = 0; /* no early exit, whatever the optimizer likes */
	for (size_t i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

int rma__setup_init(struct rma__setup *s, int fd, bool server,
		    const struct rma__setup_params *p)
{
	if (p->blob_len > RMA__SETUP_BLOB_MAX)
		return -EINVAL;
	memset(s, 0, offsetof(struct rma__setup, in));
	s->fd = fd;
	s->server = server;
	s->state = server ? S_WAIT1 : S_START;
	s->kind = p->kind;
	memcpy(s->key, p->key, 16);
	s->engine_id = p->engine_id;
	s->expect_id = p->expect_id;
	s->word = p->word;
	s->nonce = rma__random_u64();
	s->blob_len = (uint16_t)p->blob_len;
	if (p->blob_len)
		memcpy(s->blob, p->blob, p->blob_len);
	s->in_have = 0;
	s->in_need = RMA__SETUP_HDR_SIZE;
	s->out_len = s->out_off = 0;
	return 0;
}

static void queue(struct rma__setup *s, struct rma__setup_msg *m,
		  const void *blob)
{
	m->kind = s->kind;
	rma__setup_msg_encode(m, s->out);
	if (m->blob_len)
		memcpy(s->out + RMA__SETUP_HDR_SIZE, blob, m->blob_len);
	s->out_len = RMA__SETUP_HDR_SIZE + m->blob_len;
	s->out_off = 0;
}

static int fail(struct rma__setup *s, int err)
{
	s->state = S_FAILED;
	s->err = err;
	return err;
}

/* A whole message is in s->in: act on it.  0 or -errno. */
static int step(struct rma__setup *s, const struct rma__setup_msg *m)
{
	const uint8_t *blob = s->in + RMA__SETUP_HDR_SIZE;
	struct rma__setup_msg out = {0};
	uint8_t want[16];

	switch (s->state) {
	case S_WAIT1: /* server */
		if (m->step != 1)
			return -EPROTO;
		s->peer_id = m->engine_id;
		s->peer_word = m->word;
		s->peer_nonce = m->nonce;
		s->peer_blob_len = (uint16_t)m->blob_len;
		memcpy(s->peer_blob, blob, m->blob_len);
		out.step = 2;
		out.engine_id = s->engine_id;
		out.word = s->word;
		out.nonce = s->nonce;
		out.blob_len = s->blob_len;
		rma__setup_proof(s->key, 'S', m->nonce, s->blob, s->blob_len,
				 out.proof);
		queue(s, &out, s->blob);
		s->state = S_WAIT3;
		return 0;
	case S_WAIT3: /* server */
		if (m->step != 3)
			return -EPROTO;
		rma__setup_proof(s->key, 'C', s->nonce, s->peer_blob,
				 s->peer_blob_len, want);
		out.step = 4;
		out.engine_id = s->engine_id;
		if (!rma__setup_equal(want, m->proof, 16)) {
			/* Say why, once, then give up: the peer may not read. */
			out.status = -EACCES;
			queue(s, &out, s->blob); /* no blob: blob_len 0 */
			(void)!send(s->fd, s->out, s->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
			s->out_len = 0;
			return -EACCES;
		}
		queue(s, &out, s->blob); /* no blob: blob_len 0 */
		s->state = S_DONE;
		return 0;
	case S_WAIT2: /* client */
		if (m->step != 2)
			return -EPROTO;
		/* The proof first: who is not the server has no say. */
		rma__setup_proof(s->key, 'S', s->nonce, blob, m->blob_len, want);
		if (!rma__setup_equal(want, m->proof, 16))
			return -EACCES;
		if (m->engine_id != s->expect_id)
			return -ESTALE;
		s->peer_id = m->engine_id;
		s->peer_word = m->word;
		s->peer_nonce = m->nonce;
		s->peer_blob_len = (uint16_t)m->blob_len;
		memcpy(s->peer_blob, blob, m->blob_len);
		out.step = 3;
		rma__setup_proof(s->key, 'C', m->nonce, s->blob, s->blob_len,
				 out.proof);
		queue(s, &out, s->blob); /* no blob: blob_len 0 */
		s->state = S_WAIT4;
		return 0;
	case S_WAIT4: /* client */
		if (m->step != 4)
			return -EPROTO;
		if (m->status)
			return m->status;
		s->state = S_DONE;
		return 0;
	}
	return -EPROTO;
}

int rma__setup_run(struct rma__setup *s)
{
	struct rma__setup_msg m = {0};
	ssize_t n;
	int rc;

	if (s->state == S_START) { /* client: connected, say hello */
		m.step = 1;
		m.engine_id = s->engine_id;
		m.word = s->word;
		m.nonce = s->nonce;
		m.blob_len = s->blob_len;
		queue(s, &m, s->blob);
		s->state = S_WAIT2;
	}
	for (;;) {
		if (s->state == S_FAILED)
			return s->err;
		if (s->out_off < s->out_len) {
			n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					return -EINPROGRESS;
				return fail(s, errno == EPIPE ? -ECONNRESET : -errno);
			}
			s->out_off += (size_t)n;
			continue;
		}
		if (s->state == S_DONE)
			return 0;
		/* Exactly what the message lacks: what follows is not ours. */
		n = recv(s->fd, s->in + s->in_have, s->in_need - s->in_have,
			 MSG_DONTWAIT);
		if (n == 0) /* closed: between messages, or cutting one short */
			return fail(s, s->in_have ? -EPROTO : -ECONNRESET);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return -EINPROGRESS;
			return fail(s, -errno);
		}
		s->in_have += (size_t)n;
		if (s->in_have < s->in_need)
			continue;
		if (rma__setup_msg_decode(s->in, s->in_have, &m) || m.kind != s->kind)
			return fail(s, -EPROTO);
		if (s->in_need == RMA__SETUP_HDR_SIZE && m.blob_len) {
			s->in_need += m.blob_len; /* now the blob */
			continue;
		}
		s->in_have = 0;
		s->in_need = RMA__SETUP_HDR_SIZE;
		if ((rc = step(s, &m)))
			return fail(s, rc);
	}
}

uint32_t rma__setup_events(const struct rma__setup *s)
{
	return s->state == S_START || s->out_off < s->out_len ? EPOLLOUT : EPOLLIN;
}

bool rma__setup_silent(const struct rma__setup *s)
{
	return s->state == S_WAIT1 && s->in_have == 0;
}

bool rma__setup_pending(const struct rma__setup *s)
{
	return s->state != S_DONE && s->state != S_FAILED;
}

void rma__refused(struct rma__refusals *r, enum rma__refusal why, int64_t now)
{
	r->n[why]++;
	rma__refusals_log(r, now);
}

void rma__refusals_log(struct rma__refusals *r, int64_t now)
{
	unsigned total = 0;
	for (int i = 0; i < RMA__REFUSED_N; i++)
		total += r->n[i];
	if (!total || (r->logged && now - r->last < r->interval_ns))
		return;
	rma__warn("%s: refused %u connection%s%s: wrong secret %u, bad handshake %u, "
		  "handshake too slow %u, over a connection limit %u", r->who,
		  total, total == 1 ? "" : "s", r->logged ? " since the last report" : "",
		  r->n[RMA__REFUSED_SECRET], r->n[RMA__REFUSED_PROTO],
		  r->n[RMA__REFUSED_TIMEOUT], r->n[RMA__REFUSED_LIMIT]);
	memset(r->n, 0, sizeof r->n);
	r->last = now;
	r->logged = true;
}
