/*
 * registry.c - the compiled transports.  Adding a transport means one
 * `extern` line and one entry below; the core never names a transport.
 * Unset ops are filled with stubs answering -EOPNOTSUPP.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "transport/transport.h"
#include "util/util.h"

extern const struct rma__transport_ops rma__tcp_ops, rma__shm_ops, rma__ofi_ops,
	rma__verbs_ops;

static const struct rma__transport_ops *const builtin[] = {
	&rma__tcp_ops,
	&rma__shm_ops, /* before ofi: a MEMORY-level tie goes to shm */
	&rma__ofi_ops, /* after tcp: same-level ties go to the first */
#ifdef RMA_HAVE_VERBS
	&rma__verbs_ops,
#endif
};

#define MAX_TRANSPORTS 8
static struct rma__transport_ops filled[MAX_TRANSPORTS];
static const struct rma__transport_ops *table[MAX_TRANSPORTS + 1];
static char help[MAX_TRANSPORTS][1024]; /* each one's options, for rma info */
static unsigned count;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;

static int stub_probe(const char **why) { *why = "not implemented"; return -EOPNOTSUPP; }
static int stub_init(struct rma_engine *e, const struct rma__topts *o,
		     struct rma__transport **out) { return -EOPNOTSUPP; }
static void stub_fini(struct rma__transport *t) {}
static int stub_mem_reg(struct rma__transport *t, struct rma_region *r) { return 0; }
static void stub_mem_dereg(struct rma__transport *t, struct rma_region *r) {}
static int stub_grant_add(struct rma__transport *t, struct rma__grant *g) { return 0; }
static void stub_grant_remove(struct rma__transport *t, struct rma__grant *g) {}
static int stub_ad_pack(struct rma__transport *t, const struct rma__grant *g,
			void *b, size_t c) { return -EOPNOTSUPP; }
static int stub_ad_parse(const void *b, size_t l, uint64_t k, struct rma__rkey *rk) { return -EOPNOTSUPP; }
static int stub_reachable(struct rma__transport *t, const void *b, size_t l) { return 0; }
static int stub_connect(struct rma__transport *t, const void *b, size_t l,
			uint64_t id, struct rma__peer **o) { return -EOPNOTSUPP; }
static void stub_disconnect(struct rma__peer *p, int err) {}
static int stub_post(struct rma__peer *p, const struct rma__xfer *x) { return -EOPNOTSUPP; }
static int stub_post_now(struct rma__peer *p, const struct rma__xfer *x) { return RMA__DECLINE; }
static void stub_flush(struct rma__peer *p) {}
static int stub_abort(struct rma__peer *p, uint64_t id, int err) { return 0; }
static void stub_progress(struct rma__transport *t) {}
static int stub_arm(struct rma__transport *t) { return 0; }
static void stub_revoke(struct rma__transport *t, struct rma_region *r) {}
static int stub_raw(struct rma__transport *t, void *o, size_t c) { return -EOPNOTSUPP; }
static int stub_peer_raw(struct rma__peer *p, void *o, size_t c) { return -EOPNOTSUPP; }
static int stub_fabric_pack(const struct rma__topts *o, const void *a, size_t al,
			    uint64_t k, uint64_t b, void *buf, size_t cap) { return -EOPNOTSUPP; }
static int stub_fabric_unpack(const struct rma__topts *o, const void *blob, size_t len,
			      void *a, size_t cap, uint64_t *k, uint64_t *b) { return -EOPNOTSUPP; }

static void fill(struct rma__transport_ops *o)
{
#define F(op) if (!o->op) o->op = stub_##op
	F(probe); F(init); F(fini); F(mem_reg); F(mem_dereg); F(grant_add);
	F(grant_remove); F(ad_pack); F(ad_parse); F(reachable); F(connect);
	F(disconnect); F(post); F(post_now); F(flush); F(abort); F(progress); F(arm);
	F(revoke); F(raw); F(peer_raw); F(fabric_pack); F(fabric_unpack);
#undef F
}

static int add(const struct rma__transport_ops *ops)
{
	if (count == MAX_TRANSPORTS)
		return -ENOSPC;
	for (unsigned i = 0; i < count; i++)
		if (!strcmp(table[i]->name, ops->name) ||
		    table[i]->wire_id == ops->wire_id)
			return -EEXIST;
	filled[count] = *ops;
	fill(&filled[count]);
	snprintf(help[count], sizeof help[count], "%s", rma__topts_help(ops));
	table[count] = &filled[count];
	count++;
	return 0;
}

static void load(void)
{
	if (count)
		return;
	for (size_t i = 0; i < RMA_ARRAY_SIZE(builtin); i++)
		add(builtin[i]);
}

/* For tests: add a transport (e.g. a fault-injecting fake) before any
 * engine is created. */
int rma__registry_add(const struct rma__transport_ops *ops)
{
	pthread_mutex_lock(&reg_mu);
	load();
	int rc = add(ops);
	pthread_mutex_unlock(&reg_mu);
	return rc;
}

const struct rma__transport_ops *const *rma__registry(unsigned *n)
{
	pthread_mutex_lock(&reg_mu);
	load();
	*n = count;
	pthread_mutex_unlock(&reg_mu);
	return table;
}

const struct rma__transport_ops *rma__transport_by_wire(uint8_t id)
{
	unsigned n;
	const struct rma__transport_ops *const *t = rma__registry(&n);
	for (unsigned i = 0; i < n; i++)
		if (t[i]->wire_id == id)
			return t[i];
	return NULL;
}

const struct rma__transport_ops *rma__transport_by_name(const char *name,
							size_t len)
{
	unsigned n;
	const struct rma__transport_ops *const *t = rma__registry(&n);
	for (unsigned i = 0; i < n; i++)
		if (strlen(t[i]->name) == len && !strncmp(t[i]->name, name, len))
			return t[i];
	return NULL;
}

const char *rma__registry_help(unsigned i)
{
	unsigned n;
	rma__registry(&n);
	return i < n ? help[i] : "";
}
