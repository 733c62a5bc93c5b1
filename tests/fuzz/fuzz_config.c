/*
 * Fuzz the configuration: the input is cut at NUL bytes into a transport
 * spec, then values for RMA_TRANSPORTS, RMA_LISTEN, RMA_SECRET,
 * RMA_TIMEOUT_MS, RMA_STRIPES and RMA_LOG.  The spec goes through the spec
 * parser; the variables through rma__config_resolve; whatever resolves is
 * then split into specs and each parsed, with tcp's options read back as
 * the transport reads them (numbers, the listen address).  Nothing may
 * crash, and what parses must hold its own invariants.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/core.h"
#include "transport/tcp/tcp.h"

static const char *const vars[] = {
	"RMA_TRANSPORTS", "RMA_LISTEN", "RMA_SECRET", "RMA_TIMEOUT_MS",
	"RMA_STRIPES", "RMA_LOG",
};

static void one_spec(const char *s, size_t len)
{
	struct rma__topts o;
	unsigned long v;

	if (rma__tspec_parse(s, len, &o))
		return;
	if (!o.ops || o.n > RMA__MAX_OPTS)
		abort();
	for (unsigned i = 0; i < o.n; i++)
		if (!o.name[i] || !o.val[i] || o.val[i] < o.buf ||
		    o.val[i] + strlen(o.val[i]) >= o.buf + sizeof o.buf)
			abort();
	rma__topt_uint(&o, "stripes", 1, 64, &v);
	rma__topt_uint(&o, "idle_ms", 0, 86400000, &v);
	const char *l = rma__topt(&o, "listen");
	if (l) {
		struct sockaddr_storage sa;
		socklen_t salen;
		rma__tcp_parse_hostport(l, &sa, &salen);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	char *buf = malloc(size + 1), *p, *end;
	struct rma_config out;

	if (!ready++)
		rma_set_log(-1, NULL, NULL); /* errors are expected */
	memcpy(buf, data, size);
	buf[size] = 0;
	end = buf + size;
	/* First field: a spec, length-delimited (it may hold anything). */
	size_t first = strnlen(buf, size);
	one_spec(buf, first);
	p = buf + first + (first < size);
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		if (p < end) {
			setenv(vars[i], p, 1);
			p += strlen(p) + 1;
		} else {
			unsetenv(vars[i]);
		}
	}
	if (rma__config_resolve(NULL, &out) == 0 && out.transports) {
		const char *s = out.transports;
		while (*s) {
			size_t n = strcspn(s, ",");
			one_spec(s, n);
			s += n + (s[n] == ',');
		}
	}
	rma_set_log(-1, NULL, NULL); /* RMA_LOG may have changed it */
	free(buf);
	return 0;
}
