/*
 * wire.h - rma's tcp protocol: message layout and codec.
 *
 * Every message starts with a 40-byte header, little-endian:
 *   u8 type | u8 flags | u16 reserved (0) | i32 status | u64 id |
 *   u64 key | u64 addr | u64 len
 * PUT carries len payload bytes; GET_RESP carries len bytes when status is 0.
 * The handshake is one HELLO each way (see tcp.c).
 */
#ifndef RMA_TCP_WIRE_H
#define RMA_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define RMA_TCP_HDR_SIZE 40
#define RMA_TCP_VERSION 1
#define RMA_TCP_MAGIC 0x31414d52u /* "RMA1" */

enum rma_tcp_type {
	RMA_TCP_PUT = 1,      /* initiator -> target, with payload */
	RMA_TCP_PUT_ACK = 2,  /* target -> initiator, after the payload is in memory */
	RMA_TCP_GET = 3,      /* initiator -> target */
	RMA_TCP_GET_RESP = 4, /* target -> initiator, payload if status == 0 */
};

struct rma_tcp_hdr {
	uint8_t type;
	uint8_t flags;
	int32_t status; /* 0 or -errno */
	uint64_t id;
	uint64_t key;
	uint64_t addr;
	uint64_t len;
};

/* Encode into exactly RMA_TCP_HDR_SIZE bytes. */
void rma__tcp_hdr_encode(const struct rma_tcp_hdr *h, uint8_t *buf);

/* Decode and validate one header: type known, reserved bits zero, status a
 * plausible -errno (0 on requests), payload length within max_len.  Returns
 * 0 or -EPROTO; *h is written only on success. */
int rma__tcp_hdr_decode(const uint8_t *buf, size_t n, uint64_t max_len,
			struct rma_tcp_hdr *h);

/* Handshake message, 64 bytes, four of them per connection: the shared
 * connection setup (transport/setup.h) with kind 0 and no blob, its word
 * carrying the maximum message size.
 *   1 C->S: engine id, client nonce
 *   2 S->C: engine id, max message size, server nonce, server proof
 *   3 C->S: client proof
 *   4 S->C: status (0, or -EACCES when the proof is wrong)
 * Layout: u32 magic | u16 version | u8 step | u8 kind 0 | i32 status | u32 0 |
 *   u64 engine_id | u64 max_msg | u64 nonce | u8 proof[16] | u64 0
 * A proof is a keyed hash (SipHash-2-4, key derived from the shared secret)
 * of the other side's nonce, so the secret itself never crosses the wire. */
#define RMA_TCP_HELLO_SIZE 64
#define RMA_TCP_SETUP_KIND 0

struct rma_tcp_hello {
	uint8_t step; /* 1..4 */
	int32_t status;
	uint64_t engine_id;
	uint64_t max_msg;
	uint64_t nonce;
	uint8_t proof[16];
};

void rma__tcp_hello_encode(const struct rma_tcp_hello *h, uint8_t *buf);
int rma__tcp_hello_decode(const uint8_t *buf, size_t n,
			  struct rma_tcp_hello *h);

#endif
