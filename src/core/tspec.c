/*
 * tspec.c - transport specs: "name[:opt=value[:opt=value...]]", one per
 * engine instance, comma-separated in rma_config.transports, RMA_TRANSPORTS
 * and the CLI's --transport.
 *
 * Values may hold colons (addresses): a segment that is not "known=..."
 * continues the value before it, so "tcp:listen=[::1]:7000:stripes=2" is
 * listen "[::1]:7000" and stripes "2".  A first bare word is the value of
 * the transport's first option ("ofi:tcp" = "ofi:prov=tcp").
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "util/size.h"

static const struct rma__topt_desc *find_opt(const struct rma__transport_ops *ops,
					     const char *name, size_t n)
{
	for (const struct rma__topt_desc *d = ops->options; d && d->name; d++)
		if (strlen(d->name) == n && !strncmp(d->name, name, n))
			return d;
	return NULL;
}

int rma__tspec_parse(const char *spec, size_t len, struct rma__topts *o)
{
	const char *colon = memchr(spec, ':', len);
	size_t nlen = colon ? (size_t)(colon - spec) : len;
	char src[sizeof o->buf], *seg, *next;
	char *out = o->buf, *end = o->buf + sizeof o->buf;

	memset(o, 0, sizeof *o);
	o->ops = rma__transport_by_name(spec, nlen);
	if (!o->ops) {
		rma__err("unknown transport '%.*s'", (int)nlen, spec);
		return -ENOENT;
	}
	if (!colon)
		return 0;
	if (len - nlen - 1 >= sizeof src) {
		rma__err("transport spec '%.*s' too long", (int)len, spec);
		return -EINVAL;
	}
	memcpy(src, colon + 1, len - nlen - 1);
	src[len - nlen - 1] = '\0';
	/* Values land in o->buf; they are never longer than src. */
	/* Split by hand: "[::1]" has empty segments that must survive. */
	for (seg = src; seg; seg = next) {
		next = strchr(seg, ':');
		if (next)
			*next++ = '\0';
		char *eq = strchr(seg, '=');
		const struct rma__topt_desc *d = NULL;
		size_t n;

		if (eq) {
			d = find_opt(o->ops, seg, (size_t)(eq - seg));
			if (!d) {
				rma__err("%s: unknown option '%.*s' (%s)",
					 o->ops->name, (int)(eq - seg), seg,
					 rma__topts_help(o->ops));
				return -EINVAL;
			}
			for (unsigned i = 0; i < o->n; i++)
				if (!strcmp(o->name[i], d->name)) {
					rma__err("%s: option '%s' given twice",
						 o->ops->name, d->name);
					return -EINVAL;
				}
			seg = eq + 1;
		} else if (o->n) { /* more of the previous value */
			n = strlen(seg);
			out[-1] = ':'; /* over the previous value's NUL */
			memcpy(out, seg, n + 1);
			out += n + 1;
			continue;
		} else { /* a bare first word: the first option's value */
			d = o->ops->options;
			if (!d || !d->name) {
				rma__err("%s takes no options", o->ops->name);
				return -EINVAL;
			}
		}
		if (o->n == RMA__MAX_OPTS)
			return -EINVAL;
		n = strlen(seg);
		if (out + n + 1 > end)
			return -EINVAL;
		memcpy(out, seg, n + 1);
		o->name[o->n] = d->name;
		o->val[o->n++] = out;
		out += n + 1;
	}
	return 0;
}

/* "listen=HOST:PORT ...; stripes=N ..." for messages and rma_transports(). */
const char *rma__topts_help(const struct rma__transport_ops *ops)
{
	static __thread char buf[1024];
	size_t o = 0;

	buf[0] = '\0';
	/* Stop at the end: buf + o past it is not even a valid pointer. */
	for (const struct rma__topt_desc *d = ops->options;
	     d && d->name && o < sizeof buf; d++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s: %s",
				      o ? "; " : "", d->name, d->help);
	return o ? buf : "no options";
}

bool rma__topts_named(const struct rma__topts *o)
{
	return o && o->named;
}

const char *rma__topt(const struct rma__topts *o, const char *name)
{
	for (unsigned i = 0; o && i < o->n; i++)
		if (!strcmp(o->name[i], name))
			return o->val[i];
	return NULL;
}

static int topt_num(const struct rma__topts *o, const char *name, bool bytes,
		    unsigned long lo, unsigned long hi, unsigned long *out)
{
	const char *s = rma__topt(o, name);
	uint64_t v = 0;
	char *end;
	bool ok;

	if (!s)
		return 1;
	if (bytes) {
		ok = !rma__parse_size(s, &v);
	} else {
		errno = 0;
		v = strtoull(s, &end, 10);
		ok = !errno && isdigit((unsigned char)*s) && !*end;
	}
	if (!ok || v < lo || v > hi) {
		rma__err("%s: option %s=%s: want %s in [%lu, %lu]", o->ops->name,
			 name, s, bytes ? "bytes (K, M, G, T: binary units)" : "a number",
			 lo, hi);
		return -EINVAL;
	}
	*out = (unsigned long)v;
	return 0;
}

int rma__topt_uint(const struct rma__topts *o, const char *name,
		   unsigned long lo, unsigned long hi, unsigned long *out)
{
	return topt_num(o, name, false, lo, hi, out);
}

int rma__topt_bytes(const struct rma__topts *o, const char *name,
		    unsigned long lo, unsigned long hi, unsigned long *out)
{
	return topt_num(o, name, true, lo, hi, out);
}
