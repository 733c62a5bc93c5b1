/* wire.c - encode and validate tcp protocol headers (see wire.h). */
#include <errno.h>
#include <string.h>

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

void rma__tcp_hello_encode(const struct rma_tcp_hello *h, uint8_t *b)
{
	memset(b, 0, RMA_TCP_HELLO_SIZE);
	rma__put_le32(b, RMA_TCP_MAGIC);
	rma__put_le16(b + 4, RMA_TCP_VERSION);
	b[6] = h->step;
	rma__put_le32(b + 8, (uint32_t)h->status);
	rma__put_le64(b + 16, h->engine_id);
	rma__put_le64(b + 24, h->max_msg);
	rma__put_le64(b + 32, h->nonce);
	memcpy(b + 40, h->proof, 16);
}

int rma__tcp_hello_decode(const uint8_t *b, size_t n, struct rma_tcp_hello *out)
{
	struct rma_tcp_hello h;

	if (n < RMA_TCP_HELLO_SIZE || rma__le32(b) != RMA_TCP_MAGIC ||
	    rma__le16(b + 4) != RMA_TCP_VERSION || b[6] < 1 || b[6] > 4 ||
	    b[7] || rma__le32(b + 12) || rma__le64(b + 56))
		return -EPROTO;
	h.step = b[6];
	h.status = (int32_t)rma__le32(b + 8);
	h.engine_id = rma__le64(b + 16);
	h.max_msg = rma__le64(b + 24);
	h.nonce = rma__le64(b + 32);
	memcpy(h.proof, b + 40, 16);
	if (h.status > 0 || h.status < -4095)
		return -EPROTO;
	*out = h;
	return 0;
}
