/*
 * triple.h - shared by the librma examples here: the remote named by the
 * three words one_target prints after "advertisement:", as a client would
 * receive them over its own control channel:
 *
 *   <address-hex> <rkey> <remote-addr>     (numbers: 0x hex or decimal)
 */
#ifndef EXAMPLES_OFI_TRIPLE_H
#define EXAMPLES_OFI_TRIPLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rma.h>

#define PAYLOAD 4096 /* one_target's buffer: the whole window */

static int number(const char *s, uint64_t *out)
{
	char *end;
	int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	*out = strtoull(s, &end, hex ? 16 : 10);
	return *s && *end == '\0' ? 0 : -1;
}

/* argv[1..3] -> a remote for a window of len bytes, or NULL (said why). */
static rma_remote *remote_from_args(int argc, char **argv, uint64_t len)
{
	unsigned char addr[128];
	size_t n = argc == 4 ? strlen(argv[1]) / 2 : 0;
	uint64_t rkey, raddr;
	rma_remote *r;
	int rc;

	if (argc != 4 || strlen(argv[1]) % 2 || n > sizeof addr ||
	    number(argv[2], &rkey) || number(argv[3], &raddr)) {
		fprintf(stderr, "usage: %s <address-hex> <rkey> <remote-addr>\n"
			"  (the three words one_target prints after 'advertisement:')\n",
			argv[0]);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(argv[1] + 2 * i, "%2x", &v) != 1) {
			fprintf(stderr, "%s: bad address hex\n", argv[0]);
			return NULL;
		}
		addr[i] = (unsigned char)v;
	}
	rc = rma_remote_from_fabric("ofi:tcp", addr, n, rkey, raddr, len, &r);
	if (rc < 0) {
		fprintf(stderr, "%s: %s\n", argv[0], rma_strerror(rc));
		return NULL;
	}
	return r;
}

/* An engine on libfabric's tcp provider (RMA_TRANSPORTS may override). */
static rma_engine *ofi_engine(unsigned flags)
{
	struct rma_config cfg;
	rma_engine *e;
	int rc;

	rma_config_init(&cfg);
	cfg.transports = "ofi:tcp";
	cfg.flags = flags;
	rc = rma_engine_create(&cfg, &e);
	if (rc < 0) {
		fprintf(stderr, "creating the engine: %s\n", rma_strerror(rc));
		return NULL;
	}
	return e;
}

#endif
