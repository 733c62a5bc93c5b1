/* Fuzz the tcp header and handshake decoders: whatever they accept must be
 * valid and re-encode to the very same bytes. */
#include <stdlib.h>
#include <string.h>

#include "transport/tcp/wire.h"

#define MAX_LEN (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rma_tcp_hdr h;
	struct rma_tcp_hello hello;
	uint8_t again[RMA_TCP_HELLO_SIZE];

	if (rma__tcp_hdr_decode(data, size, MAX_LEN, &h) == 0) {
		if (size < RMA_TCP_HDR_SIZE || h.type < RMA_TCP_PUT ||
		    h.type > RMA_TCP_GET_RESP || h.len > MAX_LEN ||
		    h.status > 0 || h.status < -4095)
			abort();
		rma__tcp_hdr_encode(&h, again);
		if (memcmp(again, data, RMA_TCP_HDR_SIZE))
			abort();
	}
	if (rma__tcp_hello_decode(data, size, &hello) == 0) {
		if (size < RMA_TCP_HELLO_SIZE)
			abort();
		rma__tcp_hello_encode(&hello, again);
		if (memcmp(again, data, RMA_TCP_HELLO_SIZE))
			abort();
	}
	return 0;
}
