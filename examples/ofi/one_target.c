/*
 * one_target.c - the passive peer the other examples put into and get
 * from, written against plain libfabric (no librma): an RDM endpoint of
 * provider tcp (tcp;ofi_rxm), one registered buffer, and the triple a
 * client would send over its own control channel:
 *
 *   advertisement: <address-hex> <rkey> <remote-addr>
 *
 * It then stays passive, but keeps reading its completion queue: tcp;ofi_rxm
 * makes progress (accepting connections, serving RMA) only while its
 * queue is read.  When stdin closes, or on SIGINT/SIGTERM, it prints the
 * crc32c of its buffer and exits.
 *
 *   one_target [--read] [--size BYTES] [NODE]      (NODE: 127.0.0.1)
 *
 * --read fills the buffer with a payload for read_from_peer to get.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = sig;
}

/* CRC-32C (Castagnoli), bit by bit: short beats fast here. */
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

#define TRY(call)                                                            \
	do {                                                                 \
		int rc_ = (call);                                            \
		if (rc_) {                                                   \
			fprintf(stderr, "one_target: %s: %s\n", #call,       \
				fi_strerror(-rc_));                          \
			return 1;                                            \
		}                                                            \
	} while (0)

int main(int argc, char **argv)
{
	const char *node = "127.0.0.1";
	size_t size = 4096;
	int serve_reads = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--read"))
			serve_reads = 1;
		else if (!strcmp(argv[i], "--size") && i + 1 < argc)
			size = strtoull(argv[++i], NULL, 0);
		else if (argv[i][0] != '-')
			node = argv[i];
		else {
			fprintf(stderr, "usage: one_target [--read] [--size BYTES] [NODE]\n");
			return 2;
		}
	}
	unsigned char *buf = calloc(1, size ? size : 1);
	if (!buf || !size)
		return 1;
	if (serve_reads) /* a payload anyone can recognise */
		for (size_t i = 0; i < size; i++)
			buf[i] = (unsigned char)(i * 7 + i / 256 + 1);

	/* The same hints as any RMA initiator of the pair: RDM, RMA both ways,
	 * every mr_mode bit we handle offered, and what comes back obeyed. */
	struct fi_info *hints = fi_allocinfo(), *info;
	if (!hints)
		return 1;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
		      FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->fabric_attr->prov_name = strdup("tcp");
	int rc = fi_getinfo(FI_VERSION(1, 9), node, NULL, FI_SOURCE, hints, &info);
	if (rc == -FI_ENODATA) { /* nothing offers this: not our failure */
		fprintf(stderr, "one_target: no tcp provider with RMA here\n");
		return 77;
	}
	TRY(rc);
	fi_freeinfo(hints);

	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_mr *mr;
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = FI_WAIT_FD };
	struct fi_av_attr ava = { .type = info->domain_attr->av_type };
	TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	TRY(fi_cq_open(domain, &cqa, &cq, NULL));
	TRY(fi_av_open(domain, &ava, &av, NULL));
	TRY(fi_endpoint(domain, info, &ep, NULL));
	TRY(fi_ep_bind(ep, &av->fid, 0));
	TRY(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(ep));

	/* Remote access to the buffer.  Without FI_MR_PROV_KEY we choose the
	 * key: a random one, as keys must be unique per domain and should not
	 * be guessable. */
	uint64_t mr_mode = info->domain_attr->mr_mode, key = 0;
	size_t key_size = info->domain_attr->mr_key_size;
	if (getrandom(&key, sizeof key, 0) != sizeof key)
		return 1;
	if (key_size && key_size < 8)
		key &= (1ULL << (8 * key_size)) - 1;
	TRY(fi_mr_reg(domain, buf, size, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key,
		      0, &mr, NULL));
	key = fi_mr_key(mr);
	/* Remote addresses: the buffer's virtual address (FI_MR_VIRT_ADDR) or
	 * an offset from its start. */
	uint64_t raddr = mr_mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)buf : 0;

	unsigned char addr[256];
	size_t alen = sizeof addr;
	TRY(fi_getname(&ep->fid, addr, &alen));
	printf("advertisement: ");
	for (size_t i = 0; i < alen; i++)
		printf("%02x", addr[i]);
	printf(" 0x%" PRIx64 " 0x%" PRIx64 "\n", key, raddr);
	fflush(stdout);

	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* stdin's end stops us, unless it is /dev/null or a file (at its end
	 * at once): then only a signal does. */
	struct stat st;
	int watch_stdin = isatty(0) || (fstat(0, &st) == 0 &&
					(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)));
	struct pollfd pfd[2] = { { .fd = -1, .events = POLLIN },
				 { .fd = watch_stdin ? 0 : -1, .events = POLLIN } };
	TRY(fi_control(&cq->fid, FI_GETWAIT, &pfd[0].fd));

	while (!stop) {
		struct fi_cq_entry ent[16];
		ssize_t n = fi_cq_read(cq, ent, 16); /* progress; we post nothing */
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee = {0};
			fi_cq_readerr(cq, &ee, 0);
			fprintf(stderr, "one_target: %s\n", fi_strerror(ee.err));
		}
		if (n > 0 || n == -FI_EAVAIL)
			continue;
		/* Sleep on the queue's fd only when fi_trywait says nothing is
		 * pending; a bounded sleep otherwise. */
		struct fid *f = &cq->fid;
		int timeout = fi_trywait(fabric, &f, 1) == FI_SUCCESS ? 1000 : 1;
		if (poll(pfd, 2, timeout) > 0 && pfd[1].revents) {
			char tmp[256];
			if (read(0, tmp, sizeof tmp) <= 0)
				break; /* stdin closed */
		}
	}

	fi_close(&mr->fid);
	fi_close(&ep->fid);
	fi_close(&av->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	printf("crc32c: %08" PRIx32 "\n", crc32c(buf, size));
	free(buf);
	return 0;
}
