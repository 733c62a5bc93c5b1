/* Configuration: defaults, and the few RMA_* environment overrides. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

const char rma__listen_default[] = "127.0.0.1:0";

/* The documented knobs, in one place.  `rma info` prints this list. */
RMA_EXPORT void rma_config_init(struct rma_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->size = sizeof *cfg;
}

/* A number in [lo, hi], or "none" (RMA_NONE) where none_ok. */
static int env_int(const char *name, long lo, long hi, bool none_ok, long *out)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return 0;
	if (none_ok && !strcmp(s, "none")) {
		*out = RMA_NONE;
		return 1;
	}
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		rma__err("%s=%s: not a number in [%ld, %ld]", name, s, lo, hi);
		return -EINVAL;
	}
	*out = v;
	return 1;
}

static int log_level_from(const char *s)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

/* Copy the caller's config (as much of it as they know of), apply the
 * environment, and fill in defaults. */
int rma__config_resolve(const struct rma_config *in, struct rma_config *out)
{
	long v;
	int rc;

	rma_config_init(out);
	if (in) {
		if (in->size < offsetof(struct rma_config, queue_depth) ||
		    in->size > 4096)
			return -EINVAL;
		memcpy(out, in, RMA_MIN(in->size, sizeof *out));
		out->size = sizeof *out;
	}
	if (getenv("RMA_TRANSPORTS") && *getenv("RMA_TRANSPORTS"))
		out->transports = getenv("RMA_TRANSPORTS");
	if (getenv("RMA_LISTEN") && *getenv("RMA_LISTEN"))
		out->listen = getenv("RMA_LISTEN");
	if (getenv("RMA_ADVERTISE") && *getenv("RMA_ADVERTISE"))
		out->advertise = getenv("RMA_ADVERTISE");
	if (getenv("RMA_SECRET") && *getenv("RMA_SECRET"))
		out->secret = getenv("RMA_SECRET");
	if ((rc = env_int("RMA_TIMEOUT_MS", 1, 86400000, true, &v)) < 0)
		return rc;
	if (rc)
		out->timeout_ms = (int)v;
	if ((rc = env_int("RMA_STRIPES", 1, 64, false, &v)) < 0)
		return rc;
	if (rc)
		out->stripes = (unsigned)v;
	if (getenv("RMA_LOG") && *getenv("RMA_LOG")) {
		int lvl = log_level_from(getenv("RMA_LOG"));
		if (lvl < 0) {
			rma__err("RMA_LOG=%s: use error|warn|info|debug", getenv("RMA_LOG"));
			return -EINVAL;
		}
		rma__log_set_level(lvl);
	}

	if (out->flags & ~(unsigned)RMA_ENGINE_MANUAL_PROGRESS)
		return -EINVAL;
	if (!out->listen)
		out->listen = rma__listen_default;
	if (!out->queue_depth)
		out->queue_depth = 64;
	if (!out->cq_depth)
		out->cq_depth = 4096;
	if (!out->stripes)
		out->stripes = 4;
	if (!out->timeout_ms)
		out->timeout_ms = 30000;
	if (!out->spin_us)
		out->spin_us = 200;
	if (!out->cache_entries)
		out->cache_entries = 1024;
	if (!out->cache_bytes)
		out->cache_bytes = 1ull << 30;
	if (!out->poll_lease_us)
		out->poll_lease_us = 1000;
	if (out->queue_depth > 65536 || out->cq_depth > (1u << 18) ||
	    out->stripes > 64 || out->timeout_ms < RMA_NONE ||
	    out->spin_us < RMA_NONE || out->cache_entries > (1u << 20) ||
	    out->poll_lease_us < RMA_NONE || out->poll_lease_us > 10000000 ||
	    (out->max_msg_size && out->max_msg_size < 4096))
		return -EINVAL;
	return 0;
}
