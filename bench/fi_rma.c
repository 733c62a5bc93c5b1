/*
 * fi_rma.c - a bare libfabric RMA loop (fi_writemsg / fi_read on an RDM
 * endpoint) through the same timed loop as `rma bench`.
 *
 *   fi_rma [--transport tcp|shm|verbs] [--op put|get] [--sizes LIST] [--window N]
 *          [--duration MS] [--peer 'ADDRESS-HEX RKEY REMOTE-ADDR' | --serve]
 *
 * --transport is the provider name: "tcp" gives tcp;ofi_rxm on libfabric
 * 1.17, bound to 127.0.0.1.  The passive side registers one buffer for
 * remote read and write and sends its endpoint name, key and target address
 * (its virtual address if the provider wants FI_MR_VIRT_ADDR, else 0) over
 * a socketpair; it then keeps reading its CQ, since with manual progress an
 * endpoint nobody polls answers nothing.  Puts ask for FI_DELIVERY_COMPLETE,
 * so a put's completion means the bytes are in the target's memory; a
 * read's completion means they are here.  -FI_EAGAIN means: read the CQ,
 * then post again.
 *
 * --transport tcp-waitfd is the same loop over tcp with its CQs opened with
 * FI_WAIT_FD, as a library must that lets a thread sleep on them: the cost
 * of that fd, measured on its own.
 *
 * --peer 'ADDRESS-HEX RKEY REMOTE-ADDR' measures against an existing
 * passive side instead of our own, such as `rma target --transport ofi:tcp`
 * (its `fabric:` line) or examples/ofi/one_target (its `advertisement:`
 * line): the same initiator against both shows what the target costs.
 * Its buffer must hold the largest size, readable and writable.
 *
 * --serve runs the passive side alone: it prints "fabric: ADDRESS-HEX RKEY
 * REMOTE-ADDR" (for --peer, or `rma bench --transport ofi:tcp --target`)
 * and serves, busy-polling, until its stdin ends: rma's initiator against
 * this loop's target shows what the initiator costs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define NAME_MAX_LEN 256
#define CTX_RING 4096 /* more than any window: each op in flight owns one */
#define CQ_BATCH 64
#define MR_KEY 0x5eedf00dull

struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *buf;
	size_t len;
	/* initiator only */
	fi_addr_t peer;
	uint64_t raddr, rkey;
	void *desc;
	uint64_t next_ctx;
	struct fi_context2 ctx[CTX_RING];
};

static int fail(const char *what, int rc)
{
	hx_log("%s: %s", what, fi_strerror(-rc));
	return rc < 0 ? rc : -EIO;
}

#define WAITFD_SUFFIX "-waitfd"

static int setup(struct fab *f, const struct hx_args *a, size_t len, uint64_t access)
{
	struct fi_info *hints = fi_allocinfo();
	/* tcp and sockets bind loopback; shm and verbs have no such node. */
	const char *node = !strncmp(a->transport, "tcp", 3) ||
			   !strncmp(a->transport, "sockets", 7) ? "127.0.0.1" : NULL;
	size_t plen = strlen(a->transport), slen = strlen(WAITFD_SUFFIX);
	bool wait_fd = plen > slen && !strcmp(a->transport + plen - slen, WAITFD_SUFFIX);
	int rc;

	if (!hints)
		return -ENOMEM;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->domain_attr->threading = FI_THREAD_DOMAIN; /* one thread: no locks */
	hints->fabric_attr->prov_name = strndup(a->transport, wait_fd ? plen - slen : plen);
	rc = fi_getinfo(FI_VERSION(1, 17), node, NULL, node ? FI_SOURCE : 0, hints, &f->info);
	fi_freeinfo(hints);
	if (rc)
		return fail("fi_getinfo", rc);
	if ((rc = fi_fabric(f->info->fabric_attr, &f->fabric, NULL)) ||
	    (rc = fi_domain(f->fabric, f->info, &f->domain, NULL)))
		return fail("fi_fabric/fi_domain", rc);
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT,
				      .wait_obj = wait_fd ? FI_WAIT_FD : FI_WAIT_NONE };
	if ((rc = fi_av_open(f->domain, &av_attr, &f->av, NULL)) ||
	    (rc = fi_cq_open(f->domain, &cq_attr, &f->cq, NULL)) ||
	    (rc = fi_endpoint(f->domain, f->info, &f->ep, NULL)) ||
	    (rc = fi_ep_bind(f->ep, &f->av->fid, 0)) ||
	    (rc = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (rc = fi_enable(f->ep)))
		return fail("endpoint setup", rc);
	f->len = len;
	if (posix_memalign(&f->buf, 4096, len))
		return -ENOMEM;
	memset(f->buf, 0x5a, len); /* FI_MR_ALLOCATED: the pages must exist */
	/* Locally used memory needs an MR only under FI_MR_LOCAL. */
	if (access & (FI_REMOTE_READ | FI_REMOTE_WRITE) ||
	    (f->info->domain_attr->mr_mode & FI_MR_LOCAL)) {
		rc = fi_mr_reg(f->domain, f->buf, len, access, 0, MR_KEY, 0, &f->mr, NULL);
		if (rc)
			return fail("fi_mr_reg", rc);
	}
	return 0;
}

static void teardown(struct fab *f)
{
	if (f->mr)
		fi_close(&f->mr->fid);
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->av)
		fi_close(&f->av->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		fi_freeinfo(f->info);
	free(f->buf);
}

/* Read what the CQ holds; returns completions, 0 or -errno. */
static int reap(struct fab *f)
{
	struct fi_cq_entry e[CQ_BATCH];
	ssize_t n = fi_cq_read(f->cq, e, CQ_BATCH);

	if (n >= 0)
		return (int)n;
	if (n == -FI_EAGAIN)
		return 0;
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };

		fi_cq_readerr(f->cq, &err, 0);
		hx_log("completion error: %s (provider: %s)", fi_strerror(err.err),
		       fi_cq_strerror(f->cq, err.prov_errno, err.err_data, NULL, 0));
		return -(err.err ? err.err : EIO);
	}
	return fail("fi_cq_read", (int)n);
}

static int serve(const struct hx_args *a, int sock)
{
	struct fab *f = calloc(1, sizeof *f);
	char name[NAME_MAX_LEN];
	size_t name_len = sizeof name;
	uint64_t info[2];
	int rc;

	if (!f)
		return -ENOMEM;
	rc = setup(f, a, a->max_size, FI_REMOTE_READ | FI_REMOTE_WRITE);
	if (rc == 0 && (rc = fi_getname(&f->ep->fid, name, &name_len)))
		rc = fail("fi_getname", rc);
	if (rc == 0) {
		info[0] = fi_mr_key(f->mr);
		info[1] = (f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
				  ? (uint64_t)(uintptr_t)f->buf : 0;
		rc = hx_send(sock, name, (uint32_t)name_len);
		if (rc == 0)
			rc = hx_send(sock, info, sizeof info);
	}
	for (unsigned i = 1, empty = 0; rc == 0; i++) {
		/* Nothing completes here (no ops of its own): whether a round
		 * did work is not visible, so it yields on the count alone. */
		rc = reap(f);
		hx_spun(&empty, 0);
		if (rc > 0)
			rc = 0;
		if ((i & 1023) == 0 && hx_peer_gone(sock))
			break;
	}
	teardown(f);
	free(f);
	return rc;
}

static int hex_digit(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch |= 0x20; /* lower case */
	return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* --peer: "ADDRESS-HEX RKEY REMOTE-ADDR", the numbers hex with 0x or
 * decimal; the address into name.  0 or -EINVAL. */
static int parse_peer(const char *s, char *name, uint32_t cap, uint32_t *len,
		      uint64_t info[2])
{
	char *end;
	uint32_t n = 0;

	while (*s == ' ')
		s++;
	for (; *s && *s != ' '; s += 2) {
		int hi = hex_digit(s[0]), lo = hex_digit(s[1]);

		if (hi < 0 || lo < 0 || n == cap)
			return -EINVAL;
		name[n++] = (char)(hi << 4 | lo);
	}
	for (int i = 0; i < 2; i++) {
		errno = 0;
		info[i] = strtoull(s, &end, 0);
		if (end == s || errno || (*end && *end != ' '))
			return -EINVAL;
		s = end;
	}
	while (*s == ' ')
		s++;
	*len = n;
	return n && !*s ? 0 : -EINVAL;
}

static int open_initiator(const struct hx_args *a, int sock, void **out)
{
	struct fab *f = calloc(1, sizeof *f);
	char name[NAME_MAX_LEN];
	uint64_t info[2];
	uint32_t len;
	int rc;

	if (!f)
		return -ENOMEM;
	if ((rc = setup(f, a, a->max_size, FI_READ | FI_WRITE)) < 0)
		return rc;
	f->desc = f->mr ? fi_mr_desc(f->mr) : NULL;
	if (a->peer) {
		if (parse_peer(a->peer, name, sizeof name, &len, info) < 0) {
			hx_log("--peer: want 'ADDRESS-HEX RKEY REMOTE-ADDR', got '%s'", a->peer);
			return -EINVAL;
		}
	} else if ((rc = hx_recv(sock, name, sizeof name, &len)) < 0 ||
		   (rc = hx_recv(sock, info, sizeof info, &len)) < 0) {
		return rc;
	}
	f->rkey = info[0];
	f->raddr = info[1];
	rc = fi_av_insert(f->av, name, 1, &f->peer, 0, NULL);
	if (rc != 1)
		return fail("fi_av_insert", rc < 0 ? rc : -EIO);
	*out = f;
	return 0;
}

/* --serve: the passive side's triple, as --peer and rma take it. */
static int advertise(int sock)
{
	unsigned char name[NAME_MAX_LEN];
	uint64_t info[2];
	uint32_t len;
	int rc;

	if ((rc = hx_recv(sock, name, sizeof name, &len)) < 0 ||
	    (rc = hx_recv(sock, info, sizeof info, &len)) < 0)
		return rc;
	printf("fabric: ");
	for (uint32_t i = 0; i < len; i++)
		printf("%02x", name[i]);
	printf(" %#llx %#llx\n", (unsigned long long)info[0], (unsigned long long)info[1]);
	return 0;
}

static int post(void *ctx, unsigned kind, uint64_t size)
{
	struct fab *f = ctx;
	void *op_ctx = &f->ctx[f->next_ctx % CTX_RING];
	ssize_t rc;

	if (kind == HX_PUT) {
		struct iovec iov = { .iov_base = f->buf, .iov_len = size };
		struct fi_rma_iov rma = { .addr = f->raddr, .len = size, .key = f->rkey };
		struct fi_msg_rma msg = {
			.msg_iov = &iov,
			.desc = &f->desc,
			.iov_count = 1,
			.addr = f->peer,
			.rma_iov = &rma,
			.rma_iov_count = 1,
			.context = op_ctx,
		};
		rc = fi_writemsg(f->ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
	} else {
		rc = fi_read(f->ep, f->buf, size, f->desc, f->peer, f->raddr, f->rkey, op_ctx);
	}
	if (rc == -FI_EAGAIN)
		return -EAGAIN;
	if (rc)
		return fail(kind == HX_PUT ? "fi_writemsg" : "fi_read", (int)rc);
	f->next_ctx++;
	return 0;
}

static int progress(void *ctx)
{
	return reap(ctx);
}

static void *buffer(void *ctx)
{
	return ((struct fab *)ctx)->buf;
}

static void close_initiator(void *ctx)
{
	teardown(ctx);
	free(ctx);
}

int main(int argc, char **argv)
{
	static const struct hx_system sys = {
		.name = "fi",
		.default_transport = "tcp",
		.serve = serve,
		.open = open_initiator,
		.peer_usage = "ADDRESS-HEX RKEY REMOTE-ADDR",
		.advertise = advertise,
		.post = post,
		.progress = progress,
		.close = close_initiator,
		.buffer = buffer,
	};

	/* What librma sets for itself (src/transport/ofi/lib.c): rxm without
	 * its shared receive context, the same provider settings on both sides
	 * of the comparison.  RMA uses no receive buffers; only memory differs. */
	setenv("FI_OFI_RXM_USE_SRX", "0", 0);
	return hx_main(argc, argv, &sys);
}
