/* Small initiator-side helpers for the two-process tcp tests. */
#ifndef RMA_INTEG_COMMON_H
#define RMA_INTEG_COMMON_H

#include <string.h>

#include "check.h"
#include "target.h"
#include "testlib.h"

#define MiB (1u << 20)

static inline rma_engine *integ_engine(const char *secret)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.secret = secret;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static inline rma_region *integ_region(rma_engine *e, void *p, size_t len)
{
	rma_region *r;
	CHECK_RC(rma_region_register(e, p, len, 0, &r), 0);
	return r;
}

static inline rma_remote *integ_remote(struct target *t, const char *name)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_remote *r;
	target_token(t, name, 0, 0, 0, tok, sizeof tok);
	CHECK_RC(rma_remote_parse(tok, &r), 0);
	return r;
}

static inline int64_t integ_op(rma_engine *e, unsigned kind, rma_region *l,
			       const rma_remote *r, uint64_t roff, uint64_t len,
			       int timeout_ms)
{
	struct rma_op op = { .kind = kind, .local = l, .remote = r,
			     .remote_off = roff, .len = len };
	int64_t res = INT64_MIN;
	int rc = rma_submit(e, &op, 1, timeout_ms, &res, NULL, 0);
	CHECKF(rc == (res < 0), "rma_submit: %d, result %lld", rc, (long long)res);
	return res;
}

#endif
