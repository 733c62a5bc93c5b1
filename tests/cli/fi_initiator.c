/*
 * fi_initiator.c - a plain libfabric initiator (no librma) for the interop
 * tests: one fi_writemsg (delivery complete) or fi_read of --size bytes at
 * REMOTE-ADDR + --offset with key RKEY, to the fabric address given in hex,
 * over an RDM endpoint of provider tcp.  What `rma target`'s `fabric:` line
 * hands out is all it needs.
 *
 *   fi_initiator [--read] [--size N] [--offset N] [--fill SEED]
 *                ADDRESS-HEX RKEY REMOTE-ADDR
 *
 * Prints `crc32c: HEX` of the bytes moved; on a completion error prints
 * the provider's reason and exits 1.  Gives up after 30 s of -FI_EAGAIN.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

static uint32_t crc32c(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & -(c & 1u));
	}
	return ~c;
}

static uint64_t number(const char *s)
{
	int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	return strtoull(s, NULL, hex ? 16 : 10);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define TRY(call)                                                            \
	do {                                                                 \
		int rc_ = (int)(call);                                       \
		if (rc_ < 0) {                                               \
			fprintf(stderr, "fi_initiator: %s: %s\n", #call,     \
				fi_strerror(-rc_));                          \
			return 1;                                            \
		}                                                            \
	} while (0)

int main(int argc, char **argv)
{
	int do_read = 0;
	uint64_t size = 4096, off = 0, seed = 1;
	char *pos[3];
	int npos = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--read"))
			do_read = 1;
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = number(argv[++i]);
		else if (!strcmp(argv[i], "--offset") && i + 1 < argc)
			off = number(argv[++i]);
		else if (!strcmp(argv[i], "--fill") && i + 1 < argc)
			seed = number(argv[++i]);
		else if (npos < 3)
			pos[npos++] = argv[i];
	}
	if (npos != 3 || !size || strlen(pos[0]) % 2 || strlen(pos[0]) > 512) {
		fprintf(stderr, "usage: fi_initiator [--read] [--size N] [--offset N] "
			"[--fill SEED] ADDRESS-HEX RKEY REMOTE-ADDR\n");
		return 2;
	}
	unsigned char addr[256];
	size_t alen = strlen(pos[0]) / 2;
	for (size_t i = 0; i < alen; i++) {
		unsigned v;
		if (sscanf(pos[0] + 2 * i, "%2x", &v) != 1)
			return 2;
		addr[i] = (unsigned char)v;
	}
	uint64_t key = number(pos[1]), raddr = number(pos[2]) + off;
	unsigned char *buf = malloc(size);
	if (!buf)
		return 1;
	for (uint64_t i = 0; i < size; i++)
		buf[i] = do_read ? 0 : (unsigned char)(seed * 131 + i * 7 + (i >> 8));

	struct fi_info *hints = fi_allocinfo(), *info;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->fabric_attr->prov_name = strdup("tcp");
	TRY(fi_getinfo(FI_VERSION(1, 9), "127.0.0.1", NULL, FI_SOURCE, hints, &info));
	fi_freeinfo(hints);

	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_mr *mr = NULL;
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_av_attr ava = { .type = info->domain_attr->av_type };
	fi_addr_t peer;
	TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	TRY(fi_cq_open(domain, &cqa, &cq, NULL));
	TRY(fi_av_open(domain, &ava, &av, NULL));
	TRY(fi_endpoint(domain, info, &ep, NULL));
	TRY(fi_ep_bind(ep, &av->fid, 0));
	TRY(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(ep));
	if (fi_av_insert(av, addr, 1, &peer, 0, NULL) != 1) {
		fprintf(stderr, "fi_initiator: fi_av_insert refused the address\n");
		return 1;
	}
	void *desc = NULL;
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		TRY(fi_mr_reg(domain, buf, size, FI_READ | FI_WRITE, 0, 0, 0, &mr, NULL));
		desc = fi_mr_desc(mr);
	}

	struct fi_context2 ctx;
	struct iovec iov = { buf, size };
	struct fi_rma_iov riov = { raddr, size, key };
	struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
				  .addr = peer, .rma_iov = &riov,
				  .rma_iov_count = 1, .context = &ctx };
	double deadline = now() + 30;
	ssize_t rc;
	struct fi_cq_entry ent;
	/* The first post connects: tcp;ofi_rxm answers -FI_EAGAIN until then,
	 * and only reading the queue moves it on. */
	do {
		rc = do_read ? fi_read(ep, buf, size, desc, peer, raddr, key, &ctx)
			     : fi_writemsg(ep, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
		if (rc == -FI_EAGAIN) {
			fi_cq_read(cq, &ent, 0);
			sched_yield(); /* the target may share our CPU */
		}
	} while (rc == -FI_EAGAIN && now() < deadline);
	TRY(rc);
	while ((rc = fi_cq_read(cq, &ent, 1)) == -FI_EAGAIN && now() < deadline)
		sched_yield();
	if (rc == -FI_EAVAIL) {
		struct fi_cq_err_entry ee = {0};
		char why[128];
		fi_cq_readerr(cq, &ee, 0);
		fprintf(stderr, "fi_initiator: transfer failed: %s (provider: %s)\n",
			fi_strerror(ee.err),
			fi_cq_strerror(cq, ee.prov_errno, ee.err_data, why, sizeof why));
		return 1;
	}
	if (rc != 1) {
		fprintf(stderr, "fi_initiator: no completion: %s\n",
			fi_strerror((int)-rc));
		return 1;
	}
	printf("bytes: %" PRIu64 "\ncrc32c: %08" PRIx32 "\n", size, crc32c(buf, size));

	if (mr)
		fi_close(&mr->fid);
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	free(buf);
	return 0;
}
