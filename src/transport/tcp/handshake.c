/*
 * handshake.c - every tcp connection opens with the shared connection setup
 * (transport/setup.h): the client learns the server's engine id and maximum
 * message size, and each side proves it knows the shared secret.  The
 * server side also applies the connection limits (tcp.c) once a peer has
 * proved itself.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "transport/tcp/tcp.h"

int rma__tcp_hs_begin(struct conn *c)
{
	struct tcp_tr *tt = c->tt;
	struct rma__setup_params p = {
		.key = tt->key,
		.kind = RMA_TCP_SETUP_KIND,
		.engine_id = tt->engine_id,
		.expect_id = c->peer ? c->peer->expect_id : 0,
		/* The server tells its maximum message size; the client
		 * sends 0 there, as it always has. */
		.word = c->peer ? 0 : tt->max_msg,
	};

	c->setup = malloc(sizeof *c->setup);
	if (!c->setup)
		return -ENOMEM;
	return rma__setup_init(c->setup, c->w.fd, !c->peer, &p);
}

/* The client side is through: the peer is the engine we wanted. */
static void client_ready(struct conn *c, uint64_t max_msg)
{
	struct tcp_peer *p = c->peer;

	if (max_msg < 4096) {
		rma__tcp_conn_kill(c, -EPROTO);
		return;
	}
	if (max_msg < p->base.max_msg || !p->base.max_msg)
		p->base.max_msg = RMA_MIN(max_msg, c->tt->max_msg);
	/* No last_active stamp: the target may have closed it while our
	 * side of the handshake waited (a caller driving progress itself),
	 * so its first request peeks (tcp.c, ended). */
	c->hs = HS_READY;
	rma__tcp_authenticated(c);
	p->retries = 0;
	p->nlive++;
	if (p->base.state != RMA__PEER_READY)
		rma__peer_ready(&p->base);
	if (c->count)
		rma__tcp_conn_flush(c);
	else
		rma__tcp_set_events(c, EPOLLIN);
}

void rma__tcp_hs_run(struct conn *c)
{
	struct tcp_tr *tt = c->tt;
	int rc = rma__setup_run(c->setup);

	if (rc == -EINPROGRESS) {
		rma__tcp_set_events(c, rma__setup_events(c->setup));
		return;
	}
	if (rc) {
		if (!c->peer)
			rma__refused(&tt->refusals, rc == -EACCES ? RMA__REFUSED_SECRET
						    : RMA__REFUSED_PROTO, rma__now_ns());
		rma__tcp_conn_kill(c, rc);
		return;
	}
	uint64_t word = c->setup->peer_word;
	free(c->setup);
	c->setup = NULL;
	if (c->peer) {
		client_ready(c, word);
		return;
	}
	c->hs = HS_READY;
	c->last_active = rma__now_ns();
	rma__tcp_authenticated(c);
	if (c->hs == HS_READY) /* unless a limit refused it */
		rma__tcp_set_events(c, EPOLLIN);
}

void rma__tcp_connected(struct conn *c)
{
	int err = 0;
	socklen_t len = sizeof err;

	if (getsockopt(c->w.fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		rma__tcp_conn_kill(c, -(err ? err : ECONNREFUSED));
		return;
	}
	if ((err = rma__tcp_hs_begin(c))) {
		rma__tcp_conn_kill(c, err);
		return;
	}
	c->hs = HS_SETUP;
	rma__tcp_hs_run(c);
}
