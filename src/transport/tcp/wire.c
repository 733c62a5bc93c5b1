/* wire.c - encode and validate tcp protocol headers (see wire.h). */
#include <errno.h>
#include <string.h>

#include "transport/setup.h"
#include "transport/tcp/wire.h"
#include "util/util.h"

void rma__tcp_hdr_encode(const struct rma_tcp_hdr *h, uint8_t *b)
{
	b[0] = h->type;
	b[1] = h->flags;
	rma__put_le16(b + 2, 0);
	rma__put_le32(b + 4, (uint32_t)h->status);
	rma__put_le64(b + 8, h->id);
	rma__put_le64(b + 16, h->key);
	rma__put_le64(b + 24, h->addr);
	rma__put_le64(b + 32, h->len);
}

int rma__tcp_hdr_decode(const uint8_t *b, size_t n, uint64_t max_len,
			struct rma_tcp_hdr *out)
{
	struct rma_tcp_hdr h;

	if (n < RMA_TCP_HDR_SIZE)
		return -EPROTO;
	h.type = b[0];
	h.flags = b[1];
	h.status = (int32_t)rma__le32(b + 4);
	h.id = rma__le64(b + 8);
	h.key = rma__le64(b + 16);
	h.addr = rma__le64(b + 24);
	h.len = rma__le64(b + 32);
	if (h.type < RMA_TCP_PUT || h.type > RMA_TCP_GET_RESP || h.flags ||
	    rma__le16(b + 2) || h.len > max_len)
		return -EPROTO;
	if (h.status > 0 || h.status < -4095)
		return -EPROTO;
	/* Requests carry no status; a failed GET carries no payload. */
	if ((h.type == RMA_TCP_PUT || h.type == RMA_TCP_GET) && h.status)
		return -EPROTO;
	if (h.type == RMA_TCP_GET_RESP && h.status && h.len)
		return -EPROTO;
	*out = h;
	return 0;
}

/* tcp's hello is the shared setup message (transport/setup.h) with kind 0,
 * no blob, and the word carrying the maximum message size. */
void rma__tcp_hello_encode(const struct rma_tcp_hello *h, uint8_t *b)
{
	struct rma__setup_msg m = {
		.step = h->step,
		.status = h->status,
		.engine_id = h->engine_id,
		.word = h->max_msg,
		.nonce = h->nonce,
	};
	memcpy(m.proof, h->proof, 16);
	rma__setup_msg_encode(&m, b);
}

int rma__tcp_hello_decode(const uint8_t *b, size_t n, struct rma_tcp_hello *out)
{
	struct rma__setup_msg m;

	if (rma__setup_msg_decode(b, n, &m) || m.kind != RMA_TCP_SETUP_KIND ||
	    m.blob_len)
		return -EPROTO;
	out->step = m.step;
	out->status = m.status;
	out->engine_id = m.engine_id;
	out->max_msg = m.word;
	out->nonce = m.nonce;
	memcpy(out->proof, m.proof, 16);
	return 0;
}
