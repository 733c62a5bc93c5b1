/*
 * ofi.c - one-sided RMA over libfabric reliable-datagram endpoints.
 *
 * An instance opens one provider's fabric and domain and a serving
 * endpoint whose fabric address (fi_getname) goes into advertisements,
 * with the provider and fabric names: reachable() compares both, since
 * a tcp;ofi_rxm endpoint on 127.0.0.1 cannot reach one on another
 * network, nor speak to sockets.  Each grant gets its own MR (mr.c);
 * each peer its own endpoint (peer.c), so stopping one peer's transfers
 * (libfabric cannot cancel an RMA) never touches another's.  The files:
 * see ofi.h.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "transport/ofi/ofi.h"

int rma__ofi_err(int fi_rc)
{
	int e = fi_rc < 0 ? -fi_rc : fi_rc;
	/* libfabric's own codes (FI_EOTHER and up) have no errno. */
	return e >= 256 ? -EIO : -e;
}

/* Provider choice: the option's word, or (plain "ofi") the first that this
 * host offers of efa, verbs, tcp.  shm is never picked unasked: it serves
 * one host only, and an error wedges its endpoint. */
static const struct {
	const char *opt, *prov;
	int level;
} provs[] = {
	{"efa", "efa", RMA_LEVEL_NIC},
	{"verbs", "verbs", RMA_LEVEL_NIC},
	{"tcp", "tcp", RMA_LEVEL_TCP},
	{"sockets", "sockets", RMA_LEVEL_TCP},
	{"shm", "shm", RMA_LEVEL_MEMORY},
};
#define AUTO_PROVS 3 /* the first three */

bool rma__ofi_prov_known(const char *opt)
{
	for (unsigned i = 0; i < RMA_ARRAY_SIZE(provs); i++)
		if (!strcmp(opt, provs[i].opt))
			return true;
	return false;
}

static struct fi_info *hints_for(const char *prov)
{
	struct fi_info *h = rma__fi.dupinfo(NULL);
	if (!h)
		return NULL;
	h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
		  FI_REMOTE_WRITE;
	h->ep_attr->type = FI_EP_RDM;
	/* Offer every mode we handle and obey what comes back; never 0 (efa
	 * would then claim 0 yet need virtual addresses). */
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_RAW;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->fabric_attr->prov_name = strdup(prov);
	return h;
}

/* The host part of a HOST:PORT (the engine's listen address), or NULL for
 * a wildcard. */
static const char *node_of(const char *hostport, char *buf, size_t cap)
{
	const char *colon;
	size_t n;
	if (!hostport)
		return "127.0.0.1";
	if (hostport[0] == '[') {
		colon = strchr(hostport, ']');
		hostport++;
	} else {
		colon = strrchr(hostport, ':');
	}
	n = colon ? (size_t)(colon - hostport) : strlen(hostport);
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, hostport, n);
	buf[n] = '\0';
	if (!strcmp(buf, "0.0.0.0") || !strcmp(buf, "::") || !buf[0])
		return NULL;
	return buf;
}

static int getinfo(const char *prov, const char *node, struct fi_info **out)
{
	struct fi_info *h = hints_for(prov);
	int rc;
	if (!h)
		return -ENOMEM;
	/* tcp and sockets bind the node given; the others have no IP. */
	bool ip = !strcmp(prov, "tcp") || !strcmp(prov, "sockets");
	if (!strcmp(prov, "efa")) {
		/* The device-RMA fabric where it exists (libfabric >= 2.2). */
		h->fabric_attr->name = strdup("efa-direct");
		rc = rma__fi.getinfo(OFI_VERSION, NULL, NULL, 0, h, out);
		free(h->fabric_attr->name);
		h->fabric_attr->name = NULL;
		if (rc == 0) {
			rma__fi.freeinfo(h);
			return 0;
		}
	}
	rc = rma__fi.getinfo(OFI_VERSION, ip ? node : NULL, NULL,
			ip && node ? FI_SOURCE : 0, h, out);
	rma__fi.freeinfo(h);
	return rc ? rma__ofi_err(rc) : 0;
}

/* The providers offering RDM with RMA here, asked once per process: one
 * fi_getinfo costs milliseconds, and every default engine probes. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_rc;
static const char *probe_why;
static bool probe_has[RMA_ARRAY_SIZE(provs)];

static void probe_run(void)
{
	struct fi_info *h, *list = NULL;

	if ((probe_rc = rma__fi_load(&probe_why)))
		return;
	probe_rc = -ENODEV;
	probe_why = "libfabric finds no provider with RMA on reliable-datagram "
		    "endpoints";
	if (!(h = hints_for(""))) {
		probe_rc = -ENOMEM;
		probe_why = "out of memory";
		return;
	}
	free(h->fabric_attr->prov_name);
	h->fabric_attr->prov_name = NULL;
	if (rma__fi.getinfo(OFI_VERSION, NULL, NULL, 0, h, &list) == 0) {
		for (struct fi_info *fi = list; fi; fi = fi->next)
			for (unsigned i = 0; i < RMA_ARRAY_SIZE(provs); i++) {
				/* "tcp;ofi_rxm": the core provider names it. */
				size_t n = strlen(provs[i].prov);
				const char *pn = fi->fabric_attr->prov_name;
				if (pn && !strncmp(pn, provs[i].prov, n) &&
				    (pn[n] == '\0' || pn[n] == ';')) {
					probe_has[i] = true;
					probe_rc = 0;
				}
			}
		rma__fi.freeinfo(list);
	}
	rma__fi.freeinfo(h);
}

static int ofi_probe(const char **why)
{
	pthread_once(&probe_once, probe_run);
	*why = probe_rc ? probe_why
			: "libfabric RMA over a reliable-datagram provider";
	return probe_rc;
}

/* A default engine starts ofi only on a NIC provider (efa, verbs; init),
 * and both need an RDMA device, which the kernel lists here: without one
 * that is known without loading libfabric (0.2 s with Debian's). */
static int ofi_probe_default(const char **why)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *de;
	bool dev = false;

	while (d && !dev && (de = readdir(d)))
		dev = de->d_name[0] != '.';
	if (d)
		closedir(d);
	if (!dev) {
		*why = "no RDMA device, and a default engine starts ofi only on "
		       "a NIC provider (efa, verbs); name it to use another "
		       "(ofi:tcp)";
		return -ENODEV;
	}
	return ofi_probe(why);
}

static const struct rma__topt_desc ofi_options[] = {
	{"prov", "tcp|sockets|shm|efa|verbs (default: the first of efa, verbs, "
		 "tcp this host offers)"},
	{"node", "tcp/sockets: the address to bind (default the host of "
		 "rma_config.listen, else 127.0.0.1)"},
	{"ctl", "HOST:PORT of the control listener every peer authenticates "
		"on (default the host of rma_config.listen, port 0)"},
	/* The control listener's limits (ctl.c, transport/admit.h). */
	{"max_conns", "authenticated control connections (4096)"},
	{"max_handshakes", "control connections in the handshake (64)"},
	{"max_addr_conns", "authenticated, per remote address (1024)"},
	{"max_addr_handshakes", "in the handshake, per remote address (32)"},
	{"handshake_ms", "time to authenticate and send an address (3000)"},
	{NULL, NULL},
};

static void cq_cb(struct rma__watch *w, uint32_t ev)
{
	struct ofi_ep *oe = container_of(w, struct ofi_ep, w);
	struct fid *f = &oe->cq->fid;
	int64_t now = rma__now_ns();

	oe->drained = true; /* this round's progress need not read it again */
	oe->polled = now;
	int taken = rma__ofi_cq_drain(oe);
	if (!ev) {
		/* A direct try (progress.c): work is what it took, or, for a
		 * serving queue (remote ops complete nothing there), that its
		 * fd told of work lately: a spinning thread keeps spinning. */
		w->quiet = !taken && now - oe->seen > OFI_BUSY_NS;
		return;
	}
	oe->seen = now;
	if (taken)
		return;
	/* The wait fd stays readable until fi_trywait resets its signal:
	 * then the (level-triggered) watch fires in every round, and nobody
	 * sleeping in epoll sleeps.  But once reset, the provider writes the
	 * signal again with the next completion: a write and a read per op,
	 * on its critical path, waking every epoll set above it.  So while
	 * completions come, keep it set (the event is then quiet: no sign of
	 * new work), and reset it once the queue has been quiet for
	 * OFI_QUIET_NS; a thread about to sleep resets every queue (arm).
	 * Without a progress thread the caller sleeps on our epoll set
	 * itself: reset at once.  -FI_EAGAIN: more is queued, and the fd
	 * rightly stays readable. */
	if (oe->ot->keep_signal && now - oe->last_taken <= OFI_QUIET_NS)
		w->quiet = true;
	else
		fi_trywait(oe->ot->fabric, &f, 1);
}

static void ep_release(struct rma__watch *w)
{
	free(container_of(w, struct ofi_ep, w));
}

void rma__ofi_ep_close(struct ofi_ep *oe)
{
	/* Out of epoll before the CQ (and its fd) goes. */
	if (oe->watched)
		rma__watch_retire(oe->ot->e, &oe->w);
	if (oe->ep)
		fi_close(&oe->ep->fid);
	if (oe->av)
		fi_close(&oe->av->fid);
	if (oe->cq)
		fi_close(&oe->cq->fid);
	if (!oe->watched)
		free(oe);
}

int rma__ofi_ep_open(struct ofi_tr *ot, struct ofi_peer *peer,
		     struct ofi_ep **out)
{
	struct ofi_ep *oe = calloc(1, sizeof *oe);
	struct fi_info *info = peer || !ot->serve_info ? ot->info : ot->serve_info;
	struct fi_info *dup = NULL;
	/* A peer's queue (ours to complete) has no wait fd where a progress
	 * thread can poll it instead: the fd costs the op's path (the bare
	 * loop, given one at the initiator, measured 1.5-2 us slower per
	 * 8-byte read; design.md section 10a). */
	bool has_fd = ot->wait_fd && !(peer && ot->keep_signal);
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = has_fd ? FI_WAIT_FD : FI_WAIT_NONE };
	struct fi_av_attr ava = { .type = info->domain_attr->av_type };
	int rc;

	if (!oe)
		return -ENOMEM;
	oe->ot = ot;
	oe->peer = peer;
	if (info->addr_format == FI_ADDR_STR) {
		/* shm names an endpoint by its source address, by default
		 * "pid:uid:n": each endpoint needs a name of its own, and one
		 * no earlier process can hold (a killed one leaves its files,
		 * and a later process may get its pid). */
		dup = rma__fi.dupinfo(info);
		if (!dup) {
			free(oe);
			return -ENOMEM;
		}
		static unsigned seq; /* shared by engines whose locks differ */
		char name[96];
		int n = snprintf(name, sizeof name, "%s-%u-%llx",
				 (const char *)info->src_addr,
				 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED),
				 (unsigned long long)(rma__random_u64() & 0xffffff));
		free(dup->src_addr);
		dup->src_addr = strdup(name);
		dup->src_addrlen = dup->src_addr ? (size_t)n + 1 : 0;
		info = dup;
	}
	const char *what;
	if ((what = "fi_endpoint", rc = fi_endpoint(ot->domain, info, &oe->ep, NULL)) ||
	    (what = "fi_cq_open", rc = fi_cq_open(ot->domain, &cqa, &oe->cq, NULL)) ||
	    (what = "fi_av_open", rc = fi_av_open(ot->domain, &ava, &oe->av, NULL)) ||
	    (what = "fi_ep_bind", rc = fi_ep_bind(oe->ep, &oe->av->fid, 0)) ||
	    (rc = fi_ep_bind(oe->ep, &oe->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (what = "fi_enable", rc = fi_enable(oe->ep))) {
		/* A CQ without a wait fd is tried next: no noise for it. */
		if (!(rc == -FI_ENOSYS && ot->wait_fd))
			rma__warn("ofi: %s: %s", what, rma__fi.strerror(-rc));
		goto fail;
	}
	if (ot->wait_fd) {
		/* Polled ones too: a spinning round may try them directly. */
		oe->w.fd = -1;
		oe->w.cb = cq_cb;
		oe->w.direct = true;
		oe->w.release = ep_release;
	}
	if (has_fd) {
		if ((rc = fi_control(&oe->cq->fid, FI_GETWAIT, &oe->w.fd)))
			goto fail;
		if ((rc = rma__watch_add(ot->e, &oe->w, EPOLLIN)))
			goto fail;
		oe->has_fd = true;
	}
	oe->watched = ot->wait_fd;
	if (dup)
		rma__fi.freeinfo(dup);
	*out = oe;
	return 0;
fail:
	if (dup)
		rma__fi.freeinfo(dup);
	rma__ofi_ep_close(oe);
	return rma__ofi_err(rc);
}

static void tr_free(struct ofi_tr *ot)
{
	rma__ofi_ctl_fini(ot);
	if (ot->serve)
		rma__ofi_ep_close(ot->serve);
	if (ot->domain)
		fi_close(&ot->domain->fid);
	if (ot->fabric)
		fi_close(&ot->fabric->fid);
	if (ot->info)
		rma__fi.freeinfo(ot->info);
	if (ot->serve_info)
		rma__fi.freeinfo(ot->serve_info);
	while (ot->free_ctx) {
		struct ofi_ctx *c = ot->free_ctx;
		ot->free_ctx = c->next;
		free(c);
	}
	free(ot);
}

static int ofi_init(struct rma_engine *e, const struct rma__topts *o,
		    struct rma__transport **out)
{
	const struct rma__engine_params *par = rma__engine_params(e);
	const char *prov = rma__topt(o, "prov"), *node = rma__topt(o, "node");
	char nbuf[128];
	struct ofi_tr *ot;
	int rc = -ENODEV, level = 0;
	unsigned i;

	if (!node)
		node = node_of(par->listen, nbuf, sizeof nbuf);
	if (prov) {
		for (i = 0; i < RMA_ARRAY_SIZE(provs); i++)
			if (!strcmp(prov, provs[i].opt))
				break;
		if (i == RMA_ARRAY_SIZE(provs)) {
			rma__err("ofi: unknown provider '%s' (tcp, sockets, shm, "
				 "efa, verbs)", prov);
			return -EINVAL;
		}
	}
	ot = calloc(1, sizeof *ot);
	if (!ot)
		return -ENOMEM;
	ot->e = e;
	ot->lw.fd = -1;
	ot->engine_id = par->engine_id;
	ot->keep_signal = !par->manual;
	ot->look.cb = rma__ofi_look;
	rma__setup_key(par->secret, ot->key);
	ot->open = !par->secret || !*par->secret;
	int lrc = rma__ofi_ctl_limits(ot, o); /* rc stays -ENODEV for the loop */
	if (lrc) {
		free(ot);
		return lrc;
	}
	pthread_once(&probe_once, probe_run);
	for (i = 0; i < RMA_ARRAY_SIZE(provs); i++) {
		if (prov ? strcmp(prov, provs[i].opt)
			 : i >= AUTO_PROVS || !probe_has[i])
			continue;
		/* A default engine already has tcp: ofi over a TCP-level
		 * provider would only add its cost to every progress round. */
		if (!prov && !rma__topts_named(o) && provs[i].level != RMA_LEVEL_NIC)
			continue;
		rc = getinfo(provs[i].prov, node, &ot->info);
		if (rc == 0) {
			ot->prov = provs[i].opt;
			level = provs[i].level;
			break;
		}
	}
	if (rc) {
		if (prov)
			rma__err("ofi: provider %s offers no RDM endpoint with RMA "
				 "here (%s)", prov, rma__fi.strerror(-rc));
		else if (!rma__topts_named(o))
			rma__info("ofi: no NIC provider (efa, verbs) here; not started "
				  "in a default engine (name it, e.g. ofi:tcp)");
		goto fail;
	}
	struct fi_info *fi = ot->info;
	if (fi->next) { /* keep the first entry only */
		struct fi_info *rest = fi->next;
		fi->next = NULL;
		rma__fi.freeinfo(rest);
	}
	ot->mr_mode = fi->domain_attr->mr_mode;
	ot->key_size = fi->domain_attr->mr_key_size;
	/* FI_MR_RAW: every key posted is mapped first, a u64 one (a plain
	 * peer's) as its mr_key_size little-endian bytes. */
	if (ot->mr_mode & FI_MR_RAW)
		ot->raw_u64 = ot->key_size ? ot->key_size : 8;
	ot->tx_size = fi->tx_attr->size ? (unsigned)RMA_MIN(fi->tx_attr->size, 65536) : 0;
	ot->max_msg = par->max_msg_size ? par->max_msg_size : OFI_DEFAULT_MAX_MSG;
	if (fi->ep_attr->max_msg_size && ot->max_msg > fi->ep_attr->max_msg_size)
		ot->max_msg = fi->ep_attr->max_msg_size;
	snprintf(ot->prov_name, sizeof ot->prov_name, "%s", fi->fabric_attr->prov_name);
	snprintf(ot->fabric_name, sizeof ot->fabric_name, "%s", fi->fabric_attr->name);
	if ((rc = rma__fi.fabric(fi->fabric_attr, &ot->fabric, NULL)) ||
	    (rc = fi_domain(ot->fabric, fi, &ot->domain, NULL))) {
		rc = rma__ofi_err(rc);
		goto fail;
	}
	/* Serving endpoints post nothing and take no messages: small queues.
	 * (rxm's message buffers do not follow these sizes: lib.c.) */
	ot->serve_info = rma__fi.dupinfo(fi);
	if (ot->serve_info) {
		ot->serve_info->rx_attr->size = RMA_MIN(fi->rx_attr->size, 64);
		ot->serve_info->tx_attr->size = RMA_MIN(fi->tx_attr->size, 64);
	}
	/* A wait fd where the provider has one (tcp, sockets, verbs); the
	 * others are polled (shm, efa before 2.3). */
	ot->wait_fd = true;
	rc = rma__ofi_ep_open(ot, NULL, &ot->serve);
	if (rc) {
		ot->wait_fd = false;
		rc = rma__ofi_ep_open(ot, NULL, &ot->serve);
	}
	if (rc)
		goto fail;
	if (!ot->wait_fd)
		ot->base.poll_ns = OFI_POLL_NS;
	ot->addr_len = sizeof ot->addr;
	rc = fi_getname(&ot->serve->ep->fid, ot->addr, &ot->addr_len);
	if (rc) {
		rc = rc == -FI_ETOOSMALL ? -ENAMETOOLONG : rma__ofi_err(rc);
		goto fail;
	}
	/* The control listener: the handshake every peer passes first. */
	const char *ctl = rma__topt(o, "ctl");
	char cbuf[160];
	if (!ctl) {
		const char *l = par->listen ? par->listen : "127.0.0.1:0";
		const char *colon = strrchr(l, ':');
		int n = colon ? (int)(colon - l) : (int)strlen(l);
		snprintf(cbuf, sizeof cbuf, "%.*s:0", n, l);
		ctl = cbuf;
	}
	if ((rc = rma__ofi_ctl_listen(ot, ctl, par->advertise)))
		goto fail;
	ot->base.level = level;
	rma__info("ofi: %s on fabric %s, mr_mode %#llx, tx size %u%s",
		  ot->prov_name, ot->fabric_name, (unsigned long long)ot->mr_mode,
		  ot->tx_size, ot->wait_fd ? "" : ", polled");
	*out = &ot->base;
	return 0;
fail:
	tr_free(ot);
	return rc;
}

static void ofi_fini(struct rma__transport *t)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	rma__ofi_peers_fini(ot);
	tr_free(ot);
}

/* Blob: u8 version (1) | u8 flags | u8 provider name length | u8 fabric
 * name length | u16 address length | names | address | [u8 control
 * address length | control address] (flag 2) | [u64 key | u64 base]
 * (flag 1) | [raw key record] (flag 4, only with flag 1: u16 length (at
 * most OFI_RAW_KEY_MAX) | u64 base for fi_mr_map_raw | key bytes; key is
 * then FI_KEY_NOTAVAIL).  rma's owners write flag 2: with a secret set,
 * never flag 1, so a grant's fabric key is told only to a peer that passed
 * the handshake (ctl.c); without one anybody passes it, so the token also
 * carries the key (flag 1, and 4 for an FI_MR_RAW key that fits in the
 * token), for initiators without the control connection.  rma initiators
 * use the control connection whenever flag 2 is there. */
#define BLOB_HDR 6
#define BLOB_FLAGS 7u

static int ofi_ad_pack(struct rma__transport *t, const struct rma__grant *g,
		       void *buf, size_t cap)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	size_t pl = strlen(ot->prov_name), fl = strlen(ot->fabric_name);
	size_t need = BLOB_HDR + pl + fl + ot->addr_len + 1 + ot->ctl_addr_len;
	struct ofi_grant *og = g ? *rma__grant_slot((struct rma__grant *)g, t) : NULL;
	struct ofi_rawkey raw = { 0 };
	uint8_t *b = buf;
	bool key = og && ot->open;

	if (g && !og)
		return -ENOENT;
	if (key)
		need += 16;
	if (key && og->raw) {
		raw = (struct ofi_rawkey){ .base = og->raw_base, .bytes = og->raw,
					   .len = og->raw_len };
		/* A raw key too long for the token stays out of it (rma's
		 * initiators ask for it over the control connection). */
		if (cap < need + OFI_RAWREC_HDR + raw.len) {
			key = false;
			need -= 16;
		} else {
			need += OFI_RAWREC_HDR + raw.len;
		}
	}
	if (cap < need)
		return -ENOSPC;
	b[0] = 1;
	b[1] = (uint8_t)(2 | (key ? 1 : 0) | (key && raw.len ? 4 : 0));
	b[2] = (uint8_t)pl;
	b[3] = (uint8_t)fl;
	rma__put_le16(b + 4, (uint16_t)ot->addr_len);
	b += BLOB_HDR;
	memcpy(b, ot->prov_name, pl);
	memcpy(b + pl, ot->fabric_name, fl);
	memcpy(b + pl + fl, ot->addr, ot->addr_len);
	b += pl + fl + ot->addr_len;
	b[0] = (uint8_t)ot->ctl_addr_len;
	memcpy(b + 1, ot->ctl_addr, ot->ctl_addr_len);
	if (key) {
		b += 1 + ot->ctl_addr_len;
		rma__put_le64(b, og->key);
		rma__put_le64(b + 8, og->base);
		if (raw.len && rma__ofi_rawrec_put(b + 16, cap - (size_t)(b + 16 -
					(uint8_t *)buf), &raw) < 0)
			return -ENOSPC; /* not reached: need counted it */
	}
	return (int)need;
}

/* The blob's parts after the names and the address: [u8 ctl length |
 * ctl] (flag 2), [key | base] (flag 1), then [raw key record] (flag 4).
 * -EBADMSG unless they fill it. */
struct blob_parts {
	size_t ctl_off, ctl_len, key_off, raw_off, raw_len;
};

static int blob_tail(const uint8_t *b, size_t len, struct blob_parts *bp)
{
	if (len < BLOB_HDR || b[0] != 1 || (b[1] & ~BLOB_FLAGS) || !b[2] || !b[3] ||
	    (b[1] & 5) == 4)
		return -EBADMSG;
	size_t pl = b[2], fl = b[3], al = rma__le16(b + 4);
	size_t o = BLOB_HDR + pl + fl + al;
	if (!al || al > OFI_ADDR_MAX || pl >= OFI_NAME_MAX || fl >= OFI_NAME_MAX ||
	    o > len)
		return -EBADMSG;
	*bp = (struct blob_parts){ 0 };
	if (b[1] & 2) {
		if (o >= len || (b[o] != 7 && b[o] != 19) || b[o] >= len - o)
			return -EBADMSG;
		bp->ctl_off = o + 1;
		bp->ctl_len = b[o];
		o += 1 + b[o];
	}
	if (b[1] & 1) {
		if (len - o < 16)
			return -EBADMSG;
		bp->key_off = o;
		o += 16;
	}
	if (b[1] & 4) {
		struct ofi_rawkey raw;
		int n = rma__ofi_rawrec_get(b + o, len - o, &raw);
		if (n < 0)
			return -EBADMSG;
		bp->raw_off = o;
		bp->raw_len = (size_t)n;
		o += (size_t)n;
	}
	return len == o ? 0 : -EBADMSG;
}

int rma__ofi_blob_ctl(const void *blob, size_t len, const uint8_t **ctl,
		      size_t *ctl_len)
{
	struct blob_parts bp;
	if (blob_tail(blob, len, &bp))
		return -EBADMSG;
	*ctl = (const uint8_t *)blob + bp.ctl_off;
	*ctl_len = bp.ctl_len;
	return bp.ctl_len ? 0 : -ENOENT;
}

int rma__ofi_blob_raw(const void *blob, size_t len, const uint8_t **rec,
		      size_t *rec_len)
{
	struct blob_parts bp;
	if (blob_tail(blob, len, &bp))
		return -EBADMSG;
	*rec = (const uint8_t *)blob + bp.raw_off;
	*rec_len = bp.raw_len;
	return bp.raw_len ? 0 : -ENOENT;
}

int rma__ofi_blob_parse(const void *blob, size_t len, const char **prov,
			size_t *prov_len, const char **fab, size_t *fab_len,
			const uint8_t **addr, size_t *addr_len, uint64_t *key,
			uint64_t *base, bool *has_key)
{
	const uint8_t *b = blob;
	struct blob_parts bp;
	if (blob_tail(b, len, &bp))
		return -EBADMSG;
	size_t pl = b[2], fl = b[3], al = rma__le16(b + 4);
	*prov = (const char *)b + BLOB_HDR;
	*prov_len = pl;
	*fab = *prov + pl;
	*fab_len = fl;
	*addr = (const uint8_t *)*fab + fl;
	*addr_len = al;
	*has_key = b[1] & 1;
	if (*has_key) {
		*key = rma__le64(b + bp.key_off);
		*base = rma__le64(b + bp.key_off + 8);
	}
	return 0;
}

static int ofi_ad_parse(const void *blob, size_t len, uint64_t core_key,
			struct rma__rkey *rk)
{
	const char *prov, *fab;
	const uint8_t *addr;
	size_t pl, fl, al;
	uint64_t key = 0, base = 0;
	bool has_key;
	rk->raw = NULL;
	rk->raw_len = 0;
	if (rma__ofi_plain(blob, len)) /* raw.c */
		return rma__ofi_plain_parse(blob, len, &prov, &pl, &addr, &al,
					    &rk->key, &rk->base);
	if (rma__ofi_blob_parse(blob, len, &prov, &pl, &fab, &fl, &addr, &al,
				&key, &base, &has_key))
		return -EBADMSG;
	/* An rma owner (a control address) is asked for the fabric key by the
	 * core key, whatever else the token carries for plain initiators. */
	const uint8_t *ctl, *rec;
	size_t cl, rl;
	if (!has_key || rma__ofi_blob_ctl(blob, len, &ctl, &cl) == 0) {
		rk->key = core_key;
		rk->base = 0;
	} else if (rma__ofi_blob_raw(blob, len, &rec, &rl) == 0) {
		/* Key bytes, mapped by the peer on first use; the core key
		 * names them in its key table. */
		rk->key = core_key;
		rk->base = base;
		rk->raw = rec;
		rk->raw_len = (uint16_t)rl;
	} else {
		rk->key = key;
		rk->base = base;
	}
	return 0;
}

static int ofi_reachable(struct rma__transport *t, const void *blob, size_t len)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	const char *prov, *fab;
	const uint8_t *addr;
	size_t pl, fl, al;
	uint64_t key, base;
	bool has_key;
	if (rma__ofi_plain(blob, len))
		return rma__ofi_plain_reachable(ot, blob, len);
	if (rma__ofi_blob_parse(blob, len, &prov, &pl, &fab, &fl, &addr, &al,
				&key, &base, &has_key) ||
	    pl != strlen(ot->prov_name) || memcmp(prov, ot->prov_name, pl) ||
	    fl != strlen(ot->fabric_name) || memcmp(fab, ot->fabric_name, fl) ||
	    al > OFI_ADDR_MAX)
		return RMA__DECLINE;
	return 0;
}

static int ofi_raw(struct rma__transport *t, void *out, size_t cap)
{
	struct ofi_tr *ot = container_of(t, struct ofi_tr, base);
	struct fid_domain *d = ot->domain;
	if (cap < sizeof d)
		return -ENOSPC;
	memcpy(out, &d, sizeof d);
	return (int)sizeof d;
}

const struct rma__transport_ops rma__ofi_ops = {
	.name = "ofi",
	.level = RMA_LEVEL_TCP,
	.wire_id = 3,
	.options = ofi_options,
	.probe = ofi_probe,
	.probe_default = ofi_probe_default,
	.init = ofi_init,
	.fini = ofi_fini,
	.mem_reg = rma__ofi_mem_reg,
	.mem_dereg = rma__ofi_mem_dereg,
	.grant_add = rma__ofi_grant_add,
	.grant_remove = rma__ofi_grant_remove,
	.ad_pack = ofi_ad_pack,
	.ad_parse = ofi_ad_parse,
	.reachable = ofi_reachable,
	.connect = rma__ofi_connect,
	.disconnect = rma__ofi_disconnect,
	.post = rma__ofi_post,
	.abort = rma__ofi_abort,
	.progress = rma__ofi_progress,
	.arm = rma__ofi_arm,
	.raw = ofi_raw,
	.fabric_pack = rma__ofi_fabric_pack,
	.fabric_unpack = rma__ofi_fabric_unpack,
};
