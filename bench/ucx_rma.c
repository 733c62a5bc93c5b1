/*
 * ucx_rma.c - UCX UCP put/get through the same timed loop as `rma bench`.
 *
 *   ucx_rma [--transport tcp|cma|posix|LIST] [--op put|get] [--sizes LIST]
 *           [--window N] [--duration MS] [--alloc]
 *
 * --transport becomes UCX_TLS (tcp also pins UCX_NET_DEVICES=lo, so it stays
 * on loopback).  The passive side maps one buffer with ucp_mem_map and sends
 * its worker address, packed rkey and base address over a socketpair; the
 * initiator connects an endpoint and runs ucp_put_nbx / ucp_get_nbx.
 *
 * The passive side's buffer is the process's own memory (posix_memalign),
 * registered with ucp_mem_map, as a user's buffer is.  With --alloc, UCX
 * allocates it instead (ucp_mem_map with UCP_MEM_MAP_ALLOCATE, address
 * NULL), as `rma bench --alloc` has the library allocate the target's
 * buffer: UCX's posix and sysv memory domains then hand out shared memory
 * the initiator can attach and copy into directly, which its posix
 * transport cannot do for user memory (it emulates put and get with
 * messages).  The initiator's buffer is user memory either way, as rma's
 * is.
 *
 * Completion: a get is complete when its callback runs (the data is here).
 * A put's callback only says the local buffer may be reused, so puts are
 * confirmed by ucp_ep_flush_nbx, posted after every window/2 puts (and
 * after each put in the latency phase): an op counts once a flush after it
 * has completed, which means the bytes are in the target's memory, as a
 * completed rma put does.  Both sides busy-poll ucp_worker_progress.
 */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#define BLOB_MAX 65536

struct ucx {
	ucp_context_h ctx;
	ucp_worker_h worker;
	ucp_mem_h memh;
	void *buf;
	size_t len;
	int ucx_owned; /* buf came from ucp_mem_map (--alloc) */
	/* initiator only */
	ucp_ep_h ep;
	ucp_rkey_h rkey;
	uint64_t raddr;
	unsigned batch;     /* puts per flush in the bandwidth phase */
	uint64_t unflushed; /* puts posted since the last flush */
	uint64_t done;      /* ops completed since the last progress() */
};

/* The callbacks find the initiator here: one per process. */
static struct ucx self;

static int err_of(ucs_status_t st)
{
	return st == UCS_OK ? 0 : st == UCS_ERR_NO_RESOURCE ? -EAGAIN
			   : st == UCS_ERR_NO_MEMORY	    ? -ENOMEM
							    : -EIO;
}

static int fail(const char *what, ucs_status_t st)
{
	hx_log("%s: %s", what, ucs_status_string(st));
	return err_of(st) ? err_of(st) : -EIO;
}

static void set_transport(const char *t)
{
	setenv("UCX_TLS", t, 1);
	if (!strcmp(t, "tcp"))
		setenv("UCX_NET_DEVICES", "lo", 0);
}

/* Context, worker and one mapped buffer of len bytes: the process's own,
 * or with alloc, allocated by UCX. */
static int setup(struct ucx *u, const struct hx_args *a, size_t len, int alloc)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES,
		.features = UCP_FEATURE_RMA,
	};
	ucp_worker_params_t wp = {
		.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
		.thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	ucp_config_t *cfg;
	ucs_status_t st;

	set_transport(a->transport);
	if ((st = ucp_config_read(NULL, NULL, &cfg)) != UCS_OK)
		return fail("ucp_config_read", st);
	st = ucp_init(&params, cfg, &u->ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK)
		return fail("ucp_init", st);
	if ((st = ucp_worker_create(u->ctx, &wp, &u->worker)) != UCS_OK)
		return fail("ucp_worker_create", st);
	u->len = len;
	if (alloc) {
		ucp_mem_map_params_t mp = {
			.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
				      UCP_MEM_MAP_PARAM_FIELD_LENGTH |
				      UCP_MEM_MAP_PARAM_FIELD_FLAGS,
			.address = NULL,
			.length = len,
			.flags = UCP_MEM_MAP_ALLOCATE,
		};
		ucp_mem_attr_t attr = {
			.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH,
		};
		if ((st = ucp_mem_map(u->ctx, &mp, &u->memh)) != UCS_OK)
			return fail("ucp_mem_map(UCP_MEM_MAP_ALLOCATE)", st);
		if ((st = ucp_mem_query(u->memh, &attr)) != UCS_OK)
			return fail("ucp_mem_query", st);
		if (attr.length < len)
			return -ENOMEM;
		u->buf = attr.address;
		u->ucx_owned = 1;
		memset(u->buf, 0x5a, len); /* the pages exist before timing */
		return 0;
	}
	if (posix_memalign(&u->buf, 4096, len))
		return -ENOMEM;
	memset(u->buf, 0x5a, len); /* the pages exist before mapping */
	ucp_mem_map_params_t mp = {
		.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
		.address = u->buf,
		.length = len,
	};
	if ((st = ucp_mem_map(u->ctx, &mp, &u->memh)) != UCS_OK)
		return fail("ucp_mem_map", st);
	return 0;
}

static void teardown(struct ucx *u)
{
	if (u->memh)
		ucp_mem_unmap(u->ctx, u->memh);
	if (u->worker)
		ucp_worker_destroy(u->worker);
	if (u->ctx)
		ucp_cleanup(u->ctx);
	if (!u->ucx_owned)
		free(u->buf); /* else ucp_mem_unmap released it */
}

static int serve(const struct hx_args *a, int sock)
{
	struct ucx u = { 0 };
	ucp_address_t *addr;
	size_t addr_len, rkey_len;
	void *rkey_buf;
	uint64_t base;
	ucs_status_t st;
	int rc = setup(&u, a, a->max_size, a->alloc);

	if (rc < 0)
		goto out;
	if ((st = ucp_worker_get_address(u.worker, &addr, &addr_len)) != UCS_OK) {
		rc = fail("ucp_worker_get_address", st);
		goto out;
	}
	if ((st = ucp_rkey_pack(u.ctx, u.memh, &rkey_buf, &rkey_len)) != UCS_OK) {
		ucp_worker_release_address(u.worker, addr);
		rc = fail("ucp_rkey_pack", st);
		goto out;
	}
	base = (uint64_t)(uintptr_t)u.buf;
	rc = hx_send(sock, addr, (uint32_t)addr_len);
	if (rc == 0)
		rc = hx_send(sock, rkey_buf, (uint32_t)rkey_len);
	if (rc == 0)
		rc = hx_send(sock, &base, sizeof base);
	ucp_rkey_buffer_release(rkey_buf);
	ucp_worker_release_address(u.worker, addr);
	/* tcp serves puts and emulated gets from progress; look at the
	 * socket only now and then, it costs a system call. */
	for (unsigned i = 1, empty = 0; rc == 0; i++) {
		hx_spun(&empty, (int)ucp_worker_progress(u.worker));
		if ((i & 1023) == 0 && hx_peer_gone(sock))
			break;
	}
out:
	teardown(&u);
	return rc;
}

static void put_done(void *req, ucs_status_t st, void *arg)
{
	(void)arg;
	if (st != UCS_OK)
		hx_log("put: %s", ucs_status_string(st));
	ucp_request_free(req);
}

static void flush_done(void *req, ucs_status_t st, void *arg)
{
	if (st != UCS_OK)
		hx_log("flush: %s", ucs_status_string(st));
	self.done += (uint64_t)(uintptr_t)arg;
	ucp_request_free(req);
}

static void get_done(void *req, ucs_status_t st, void *arg)
{
	(void)arg;
	if (st != UCS_OK)
		hx_log("get: %s", ucs_status_string(st));
	self.done++;
	ucp_request_free(req);
}

static int open_initiator(const struct hx_args *a, int sock, void **out)
{
	static char blob[BLOB_MAX], rkey_buf[BLOB_MAX];
	struct ucx *u = &self;
	uint32_t len, rkey_len;
	ucs_status_t st;
	int rc = setup(u, a, a->max_size, 0); /* user memory, as rma's */

	if (rc < 0)
		return rc;
	u->batch = a->window / 2 ? a->window / 2 : 1;
	if ((rc = hx_recv(sock, blob, sizeof blob, &len)) < 0 ||
	    (rc = hx_recv(sock, rkey_buf, sizeof rkey_buf, &rkey_len)) < 0 ||
	    (rc = hx_recv(sock, &u->raddr, sizeof u->raddr, &len)) < 0)
		return rc;
	ucp_ep_params_t ep = {
		.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
		.address = (ucp_address_t *)blob,
	};
	if ((st = ucp_ep_create(u->worker, &ep, &u->ep)) != UCS_OK)
		return fail("ucp_ep_create", st);
	if ((st = ucp_ep_rkey_unpack(u->ep, rkey_buf, &u->rkey)) != UCS_OK)
		return fail("ucp_ep_rkey_unpack", st);
	*out = u;
	return 0;
}

/* Confirm the puts posted so far; the flush's callback counts them. */
static int flush(void *ctx)
{
	struct ucx *u = ctx;
	uint64_t n = u->unflushed;

	if (n == 0)
		return 0;
	u->unflushed = 0;
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
		.cb.send = flush_done,
		.user_data = (void *)(uintptr_t)n,
	};
	ucs_status_ptr_t r = ucp_ep_flush_nbx(u->ep, &p);
	if (UCS_PTR_IS_ERR(r))
		return fail("ucp_ep_flush_nbx", UCS_PTR_STATUS(r));
	if (r == NULL)
		u->done += n;
	return 0;
}

static int post(void *ctx, unsigned kind, uint64_t size)
{
	struct ucx *u = ctx;
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_MEMH,
		.memh = u->memh,
	};
	ucs_status_ptr_t r;

	if (kind == HX_PUT) {
		p.cb.send = put_done;
		r = ucp_put_nbx(u->ep, u->buf, size, u->raddr, u->rkey, &p);
	} else {
		p.cb.send = get_done;
		r = ucp_get_nbx(u->ep, u->buf, size, u->raddr, u->rkey, &p);
	}
	if (UCS_PTR_IS_ERR(r))
		return fail(kind == HX_PUT ? "ucp_put_nbx" : "ucp_get_nbx",
			    UCS_PTR_STATUS(r));
	if (kind == HX_GET) {
		if (r == NULL)
			u->done++;
		return 0;
	}
	if (++u->unflushed == u->batch)
		return flush(u);
	return 0;
}

static int progress(void *ctx)
{
	struct ucx *u = ctx;
	int n;

	ucp_worker_progress(u->worker);
	n = (int)u->done;
	u->done = 0;
	return n;
}

static void *buffer(void *ctx)
{
	return ((struct ucx *)ctx)->buf;
}

static void close_initiator(void *ctx)
{
	struct ucx *u = ctx;

	if (u->rkey)
		ucp_rkey_destroy(u->rkey);
	if (u->ep) {
		ucp_request_param_t p = {
			.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
			.flags = UCP_EP_CLOSE_FLAG_FORCE,
		};
		ucs_status_ptr_t r = ucp_ep_close_nbx(u->ep, &p);
		if (UCS_PTR_IS_PTR(r)) {
			while (ucp_request_check_status(r) == UCS_INPROGRESS)
				ucp_worker_progress(u->worker);
			ucp_request_free(r);
		}
	}
	teardown(u);
}

int main(int argc, char **argv)
{
	static const struct hx_system sys = {
		.name = "ucx",
		.default_transport = "tcp",
		.serve = serve,
		.open = open_initiator,
		.post = post,
		.flush = flush,
		.progress = progress,
		.close = close_initiator,
		.buffer = buffer,
		.alloc_usage = "the passive side's buffer from ucp_mem_map("
			       "UCP_MEM_MAP_ALLOCATE), shared memory UCX allocates",
	};

	return hx_main(argc, argv, &sys);
}
