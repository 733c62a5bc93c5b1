/*
 * handshake.c - four 64-byte messages open every connection (wire.h): the
 * client learns the server's engine id and chunk size, and each side proves
 * it knows the shared secret against the other's fresh nonce.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/tcp.h"

void rma__tcp_secret_key(const char *secret, uint8_t key[16])
{
	static const uint8_t k0[16] = "rma-tcp-secret-0";
	static const uint8_t k1[16] = "rma-tcp-secret-1";
	const char *s = secret ? secret : "";
	rma__put_le64(key, rma__siphash(k0, s, strlen(s)));
	rma__put_le64(key + 8, rma__siphash(k1, s, strlen(s)));
}

void rma__tcp_proof(const uint8_t key[16], char side, uint64_t nonce,
		    uint8_t out[16])
{
	uint8_t msg[9];
	msg[0] = (uint8_t)side;
	rma__put_le64(msg + 1, nonce);
	rma__put_le64(out, rma__siphash(key, msg, sizeof msg));
	msg[0] ^= 0x80;
	rma__put_le64(out + 8, rma__siphash(key, msg, sizeof msg));
}

static int ct_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return d == 0;
}

static int hs_send(struct conn *c, const struct rma_tcp_hello *h)
{
	uint8_t b[RMA_TCP_HELLO_SIZE];
	rma__tcp_hello_encode(h, b);
	/* 64 bytes into an idle socket's empty buffer: all or an error. */
	ssize_t n = send(c->w.fd, b, sizeof b, MSG_NOSIGNAL);
	return n == (ssize_t)sizeof b ? 0 : n < 0 ? -errno : -EPROTO;
}

/* A message of the handshake is complete in c->hs_buf. */
static void hs_step(struct conn *c)
{
	struct tcp_tr *tt = c->tt;
	struct rma_tcp_hello in, out = {0};
	uint8_t want[16];
	int rc;

	c->hs_have = 0;
	if (rma__tcp_hello_decode(c->hs_buf, sizeof c->hs_buf, &in)) {
		rma__tcp_conn_kill(c, -EPROTO);
		return;
	}
	switch (c->hs) {
	case HS_WAIT1: /* server */
		if (in.step != 1)
			break;
		out.step = 2;
		out.engine_id = tt->engine_id;
		out.max_msg = tt->max_msg;
		out.nonce = c->nonce;
		rma__tcp_proof(tt->key, 'S', in.nonce, out.proof);
		if (hs_send(c, &out))
			break;
		c->hs = HS_WAIT3;
		return;
	case HS_WAIT3: /* server */
		if (in.step != 3)
			break;
		rma__tcp_proof(tt->key, 'C', c->nonce, want);
		out.step = 4;
		out.status = ct_equal(want, in.proof, 16) ? 0 : -EACCES;
		out.engine_id = tt->engine_id;
		rc = hs_send(c, &out);
		if (rc || out.status) {
			if (out.status)
				rma__warn("tcp: refused a connection: wrong shared secret");
			break;
		}
		c->hs = HS_READY;
		return;
	case HS_WAIT2: /* client */
		if (in.step != 2)
			break;
		if (in.engine_id != c->peer->expect_id) {
			rma__tcp_conn_kill(c, -ESTALE);
			return;
		}
		rma__tcp_proof(tt->key, 'S', c->nonce, want);
		if (!ct_equal(want, in.proof, 16)) {
			rma__tcp_conn_kill(c, -EACCES);
			return;
		}
		if (in.max_msg < 4096) {
			break;
		}
		if (in.max_msg < c->peer->base.max_msg || !c->peer->base.max_msg)
			c->peer->base.max_msg = RMA_MIN(in.max_msg, tt->max_msg);
		out.step = 3;
		rma__tcp_proof(tt->key, 'C', in.nonce, out.proof);
		if (hs_send(c, &out))
			break;
		c->hs = HS_WAIT4;
		return;
	case HS_WAIT4: /* client */
		if (in.step != 4)
			break;
		if (in.status) {
			rma__tcp_conn_kill(c, in.status);
			return;
		}
		c->hs = HS_READY;
		c->peer->nlive++;
		if (c->peer->base.state != RMA__PEER_READY)
			rma__peer_ready(&c->peer->base);
		if (c->count)
			rma__tcp_conn_flush(c);
		return;
	}
	rma__tcp_conn_kill(c, -EPROTO);
}

void rma__tcp_hs_rx(struct conn *c)
{
	while (c->hs != HS_READY && c->hs != HS_DEAD) {
		ssize_t n = recv(c->w.fd, c->hs_buf + c->hs_have,
				 sizeof c->hs_buf - c->hs_have, 0);
		if (n == 0) {
			rma__tcp_conn_kill(c, c->hs == HS_WAIT4 || c->hs == HS_WAIT2
					     ? -ECONNRESET : -EPROTO);
			return;
		}
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				rma__tcp_conn_kill(c, -errno);
			return;
		}
		c->hs_have += (size_t)n;
		if (c->hs_have == sizeof c->hs_buf)
			hs_step(c);
	}
}

void rma__tcp_connected(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;
	struct rma_tcp_hello h = {.step = 1, .engine_id = c->tt->engine_id,
				  .nonce = c->nonce};

	if (getsockopt(c->w.fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		rma__tcp_conn_kill(c, -(err ? err : ECONNREFUSED));
		return;
	}
	if ((err = hs_send(c, &h))) {
		rma__tcp_conn_kill(c, err);
		return;
	}
	c->hs = HS_WAIT2;
	rma__tcp_set_events(c, EPOLLIN);
}
