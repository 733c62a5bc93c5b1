/*
 * setup.h - connection setup shared by transports: a four-message handshake
 * over a connected stream socket that authenticates both sides with the
 * shared secret, checks that the server is the engine the advertisement
 * named, and carries a transport's own parameters both ways (a 64-bit word
 * and an opaque blob of at most RMA__SETUP_BLOB_MAX bytes).
 *
 * tcp runs it on each data connection; a transport with its own data path
 * (queue pair numbers, fabric addresses) runs it on a control connection and
 * puts what the other side needs in the blob.
 *
 * Messages: a 64-byte header, little-endian, then blob_len blob bytes:
 *   u32 magic "RMA1" | u16 version 1 | u8 step | u8 kind | i32 status |
 *   u32 blob_len | u64 engine_id | u64 word | u64 nonce | u8 proof[16] |
 *   u64 0
 *   1 C->S: client engine id, word, nonce, blob
 *   2 S->C: server engine id, word, nonce, blob, server proof
 *   3 C->S: client proof
 *   4 S->C: status: 0, or -EACCES when the client's proof is wrong
 * kind names the transport's use of the handshake (tcp: 0) and must match.
 *
 * Proof key: k = SipHash-2-4(K0, secret) || SipHash-2-4(K1, secret), each
 * little-endian, with K0 = "rma-tcp-secret-0" and K1 = "rma-tcp-secret-1"
 * (16 ASCII bytes each; the names predate this module) and secret the bytes
 * of the string without its NUL (empty when none is set).
 * A side's proof over the other side's nonce n, with its own blob b:
 *   SipHash-2-4(k, tag || le64(n) || b) || SipHash-2-4(k, (tag ^ 0x80) || le64(n) || b)
 * tag 'S' (0x53) for the server, 'C' (0x43) for the client; each half
 * little-endian.  The server's proof is in message 2 and covers the blob sent
 * there; the client's is in message 3 and covers the blob of message 1.
 * The secret never crosses the wire; the header words are not covered.
 *
 * Order of checks on the client: message 2's proof (-EACCES, before the
 * client sends anything of its own beyond message 1), then its engine id
 * (-ESTALE).  Malformed or unexpected messages give -EPROTO.
 */
#ifndef RMA_TRANSPORT_SETUP_H
#define RMA_TRANSPORT_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RMA__SETUP_HDR_SIZE 64
#define RMA__SETUP_BLOB_MAX 1024
#define RMA__SETUP_MAGIC 0x31414d52u /* "RMA1" */
#define RMA__SETUP_VERSION 1

struct rma__setup_msg {
	uint8_t step;      /* 1..4 */
	uint8_t kind;
	int32_t status;    /* 0 or -errno (message 4) */
	uint32_t blob_len; /* bytes after the header */
	uint64_t engine_id;
	uint64_t word;
	uint64_t nonce;
	uint8_t proof[16];
};

/* Exactly RMA__SETUP_HDR_SIZE bytes. */
void rma__setup_msg_encode(const struct rma__setup_msg *m, uint8_t *buf);
/* Magic, version, step, reserved bytes, status range, blob_len bound:
 * 0 or -EPROTO; *m written only on success. */
int rma__setup_msg_decode(const uint8_t *buf, size_t n, struct rma__setup_msg *m);

/* The proof key from the shared secret (NULL = none). */
void rma__setup_key(const char *secret, uint8_t key[16]);
/* Side 'S' or 'C' proves the key over the other side's nonce and its own
 * blob (len <= RMA__SETUP_BLOB_MAX). */
void rma__setup_proof(const uint8_t key[16], char side, uint64_t nonce,
		      const void *blob, size_t len, uint8_t out[16]);
/* Equal, in time that does not depend on where they differ. */
bool rma__setup_equal(const uint8_t *a, const uint8_t *b, size_t n);

struct rma__setup_params {
	const uint8_t *key;   /* 16 bytes from rma__setup_key */
	uint8_t kind;
	uint64_t engine_id;   /* ours */
	uint64_t expect_id;   /* client: the engine id the advertisement named */
	uint64_t word;        /* ours, for the peer */
	const void *blob;     /* ours, copied; len <= RMA__SETUP_BLOB_MAX */
	size_t blob_len;
};

/* One side of one handshake.  Nothing here blocks or sleeps: the owner
 * calls rma__setup_run when the socket is ready for rma__setup_events(). */
struct rma__setup {
	int fd;
	bool server;
	uint8_t state;
	int err;              /* why it failed */
	uint8_t kind;
	uint8_t key[16];
	uint64_t engine_id, expect_id, word, nonce;
	uint16_t blob_len;
	uint8_t blob[RMA__SETUP_BLOB_MAX];
	/* what the peer sent (valid once rma__setup_run returned 0) */
	uint64_t peer_id, peer_word, peer_nonce;
	uint16_t peer_blob_len;
	uint8_t peer_blob[RMA__SETUP_BLOB_MAX];
	/* one message in, one out */
	uint8_t in[RMA__SETUP_HDR_SIZE + RMA__SETUP_BLOB_MAX];
	size_t in_have, in_need;
	uint8_t out[RMA__SETUP_HDR_SIZE + RMA__SETUP_BLOB_MAX];
	size_t out_len, out_off;
};

/* fd: a connected (client) or accepted (server) non-blocking stream
 * socket, owned by the caller.  -EINVAL on a blob over the bound. */
int rma__setup_init(struct rma__setup *s, int fd, bool server,
		    const struct rma__setup_params *p);
/* Move the handshake on as far as the socket allows.  0: done, both sides
 * proved the secret and the peer's fields are in *s; -EINPROGRESS: call
 * again when the socket is ready for rma__setup_events(s); -EACCES wrong
 * secret, -ESTALE wrong engine id, -EPROTO a bad message, -ECONNRESET the
 * peer closed, or the socket's -errno.  After a failure, close the socket:
 * the handshake is over.  Never reads past its last message, so whatever
 * follows on the socket is the caller's. */
int rma__setup_run(struct rma__setup *s);
/* EPOLLIN or EPOLLOUT: what rma__setup_run waits for. */
uint32_t rma__setup_events(const struct rma__setup *s);
/* A server that has not had a byte of the client's hello yet (bytes still
 * in the socket are not counted: see tcp's limits.c). */
bool rma__setup_silent(const struct rma__setup *s);
/* Still in the handshake (not done, not failed). */
bool rma__setup_pending(const struct rma__setup *s);

/* Refused peers, logged as a count per interval instead of a line each
 * (a flood of bad handshakes must not flood the log). */
enum rma__refusal {
	RMA__REFUSED_SECRET,  /* wrong proof */
	RMA__REFUSED_PROTO,   /* malformed handshake */
	RMA__REFUSED_TIMEOUT, /* handshake not finished in time */
	RMA__REFUSED_LIMIT,   /* over a connection limit: evicted or refused */
	RMA__REFUSED_N,
};
struct rma__refusals {
	const char *who;          /* log prefix, e.g. "tcp" */
	int64_t interval_ns;      /* at most one warning per interval */
	unsigned n[RMA__REFUSED_N];
	int64_t last;             /* when the last warning went out, ns */
	bool logged;              /* one has */
};
/* Count a refusal; the first after a quiet interval is logged at once. */
void rma__refused(struct rma__refusals *r, enum rma__refusal why, int64_t now);
/* Log the counts gathered since the last warning once an interval has
 * passed (call it from a timer). */
void rma__refusals_log(struct rma__refusals *r, int64_t now);

#endif
