/* Writes the fuzz seed corpus: valid and broken advertisements and tcp
 * messages.  Usage: fuzz_gen_corpus DIR  (creates DIR/advert, DIR/tcp_hdr, DIR/tcp_stream, DIR/tcp_replies). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rma.h"
#include "transport/tcp/wire.h"
#include "util/util.h"

static const char *dir;

static void put(const char *sub, const char *name, const void *b, size_t n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, sub);
	mkdir(path, 0755);
	snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
		perror(path);
		return;
	}
}

int main(int argc, char **argv)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_region *r;
	static char mem[1 << 16];
	uint8_t ad[RMA_ADVERTISEMENT_MAX];
	char text[RMA_ADVERTISEMENT_TEXT_MAX];
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	mkdir(dir, 0755);
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	if (rma_engine_create(&cfg, &e) || rma_region_register(e, mem, sizeof mem,
							      RMA_ACCESS_REMOTE_RW, &r))
		return 1;

	n = rma_advertise(r, 0, 0, 0, ad, sizeof ad);
	put("advert", "valid_whole", ad, (size_t)n);
	n = rma_advertise(r, 4096, 8192, RMA_ACCESS_REMOTE_READ, ad, sizeof ad);
	put("advert", "valid_window_ro", ad, (size_t)n);
	put("advert", "truncated", ad, (size_t)n - 5);
	ad[n - 1] ^= 1;
	put("advert", "bad_crc", ad, (size_t)n);
	n = rma_advertise_text(r, 0, 0, 0, text, sizeof text);
	put("advert", "text_valid", text, (size_t)n);
	put("advert", "empty", "", 0);
	/* An entry per transport this build has (tcp, shm, ofi: their
	 * ad_parse), with and without a secret (ofi's blob differs). */
	for (int secret = 0; secret < 2; secret++) {
		struct rma_config c2;
		rma_engine *e2;
		rma_region *r2;
		rma_config_init(&c2);
		c2.transports = "tcp,shm,ofi:prov=tcp";
		c2.flags = RMA_ENGINE_MANUAL_PROGRESS;
		c2.secret = secret ? "corpus" : NULL;
		if (rma_engine_create(&c2, &e2)) {
			c2.transports = "tcp,shm";
			if (rma_engine_create(&c2, &e2))
				continue;
		}
		if (rma_region_register(e2, mem, sizeof mem, RMA_ACCESS_REMOTE_RW,
					&r2) == 0) {
			n = rma_advertise(r2, 512, 1024, 0, ad, sizeof ad);
			if (n > 0)
				put("advert", secret ? "all_transports_secret" :
				    "all_transports", ad, (size_t)n);
			rma_region_release(r2);
		}
		rma_engine_destroy(e2);
	}

	struct rma_tcp_hdr h = { .type = RMA_TCP_PUT, .id = 1, .key = 0x1122334455667788ULL,
				 .addr = 4096, .len = 100 };
	uint8_t b[RMA_TCP_HELLO_SIZE];
	rma__tcp_hdr_encode(&h, b);
	put("tcp_hdr", "put", b, RMA_TCP_HDR_SIZE);
	h.type = RMA_TCP_PUT_ACK;
	h.len = 0;
	rma__tcp_hdr_encode(&h, b);
	put("tcp_hdr", "put_ack", b, RMA_TCP_HDR_SIZE);
	h.type = RMA_TCP_GET;
	h.len = 1 << 20;
	rma__tcp_hdr_encode(&h, b);
	put("tcp_hdr", "get", b, RMA_TCP_HDR_SIZE);
	h.type = RMA_TCP_GET_RESP;
	h.status = -EKEYREJECTED;
	h.len = 0;
	rma__tcp_hdr_encode(&h, b);
	put("tcp_hdr", "get_resp_err", b, RMA_TCP_HDR_SIZE);
	b[0] = 9;
	put("tcp_hdr", "bad_type", b, RMA_TCP_HDR_SIZE);
	for (int step = 1; step <= 4; step++) {
		struct rma_tcp_hello hl = { .step = (uint8_t)step, .engine_id = 42,
					    .max_msg = 1 << 20, .nonce = 7 };
		char name[32];
		rma__tcp_hello_encode(&hl, b);
		snprintf(name, sizeof name, "hello_%d", step);
		put("tcp_hdr", name, b, RMA_TCP_HELLO_SIZE);
	}
	put("tcp_hdr", "short", b, 17);

	/* Streams for fuzz_tcp_stream: key 1 stands for its read-write
	 * region, key 2 for its read-only one. */
	{
		uint8_t st[4 * RMA_TCP_HDR_SIZE + 64];
		size_t o = 0;
		struct rma_tcp_hdr q = { .type = RMA_TCP_PUT, .id = 1, .key = 1,
					 .addr = 8, .len = 64 };
		rma__tcp_hdr_encode(&q, st);
		memset(st + RMA_TCP_HDR_SIZE, 0x5a, 64);
		put("tcp_stream", "put_rw", st, RMA_TCP_HDR_SIZE + 64);
		q = (struct rma_tcp_hdr){ .type = RMA_TCP_GET, .id = 2, .key = 1,
					  .addr = 100, .len = 4096 };
		rma__tcp_hdr_encode(&q, st);
		put("tcp_stream", "get_rw", st, RMA_TCP_HDR_SIZE);
		q.key = 2;
		rma__tcp_hdr_encode(&q, st);
		q = (struct rma_tcp_hdr){ .type = RMA_TCP_PUT, .id = 3, .key = 2,
					  .len = 8 };
		rma__tcp_hdr_encode(&q, st + RMA_TCP_HDR_SIZE);
		memset(st + 2 * RMA_TCP_HDR_SIZE, 1, 8);
		put("tcp_stream", "get_ro_put_ro", st, 2 * RMA_TCP_HDR_SIZE + 8);
		for (int i = 0; i < 4; i++) { /* pipelined, one out of range */
			q = (struct rma_tcp_hdr){ .type = RMA_TCP_GET, .id = (uint64_t)i + 10,
						  .key = 1, .addr = i == 3 ? 65535 : 0,
						  .len = 16 };
			rma__tcp_hdr_encode(&q, st + o);
			o += RMA_TCP_HDR_SIZE;
		}
		put("tcp_stream", "pipelined", st, o);
	}

	/* Replies for fuzz_tcp_replies: ids 1..4 stand for its four requests
	 * (GET 4096 at 0, PUT 100 at 8192, GET 1 at 100, GET 48K at 0). */
	{
		static uint8_t st[4 * RMA_TCP_HDR_SIZE + 4096 + 1 + 64];
		size_t o = 0;
		struct rma_tcp_hdr q = { .type = RMA_TCP_GET_RESP, .id = 1,
					 .key = 0x55, .addr = 0, .len = 4096 };
		rma__tcp_hdr_encode(&q, st);
		o = RMA_TCP_HDR_SIZE + 4096;
		q = (struct rma_tcp_hdr){ .type = RMA_TCP_PUT_ACK, .id = 2,
					  .key = 0x55, .addr = 8192, .len = 100 };
		rma__tcp_hdr_encode(&q, st + o);
		o += RMA_TCP_HDR_SIZE;
		q = (struct rma_tcp_hdr){ .type = RMA_TCP_GET_RESP, .id = 3,
					  .key = 0x55, .addr = 100, .len = 1 };
		rma__tcp_hdr_encode(&q, st + o);
		o += RMA_TCP_HDR_SIZE + 1;
		q = (struct rma_tcp_hdr){ .type = RMA_TCP_GET_RESP, .id = 4,
					  .key = 0x55, .status = -EKEYREJECTED };
		rma__tcp_hdr_encode(&q, st + o);
		o += RMA_TCP_HDR_SIZE;
		put("tcp_replies", "all_answered", st, o);
		put("tcp_replies", "first_only", st, RMA_TCP_HDR_SIZE + 4096);
		put("tcp_replies", "truncated", st, RMA_TCP_HDR_SIZE + 100);
	}

	rma_region_release(r);
	rma_engine_destroy(e);
	return 0;
}
