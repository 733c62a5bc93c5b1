/*
 * Every tcp connection, the initiator's and the one the target accepted,
 * carries rma's socket options (no Nagle, keepalive probes, a user
 * timeout), though the target sets them once on its listener and relies
 * on the sockets it accepts inheriting them.  The initiator raises
 * SO_RCVLOWAT deep in a large reply, the target deep in a large put's
 * payload (conn.c, rx_lowat), and each must leave it at 1 after: a small
 * reply or put that follows a large one completes at once, and every
 * socket's mark, dialed or accepted, is 1 again.
 */
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "check.h"
#include "core/core.h"
#include "testlib.h"
#include "transport/tcp/tcp.h"

static int port_of(int fd, bool peer)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof sa;
	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&sa, &len))
		return -1;
	if (sa.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&sa)->sin_port);
	if (sa.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
	return -1;
}

static int opt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof v;
	CHECK_RC(getsockopt(fd, level, name, &v, &len), 0);
	return v;
}

static void check_tuned(int fd, const char *side)
{
	CHECKF(opt(fd, IPPROTO_TCP, TCP_NODELAY) != 0, "%s: Nagle on", side);
	CHECKF(opt(fd, SOL_SOCKET, SO_KEEPALIVE) != 0, "%s: no keepalive", side);
	CHECK_EQ(opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), KEEPIDLE_S);
	CHECK_EQ(opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), KEEPINTVL_S);
	CHECK_EQ(opt(fd, IPPROTO_TCP, TCP_KEEPCNT), KEEPCNT);
	CHECK_EQ(opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), USER_TIMEOUT_MS);
}

int main(void)
{
	static char tb[4096], ib[4096], big_t[4 << 20], big_i[4 << 20];
	rma_region *tr, *ir, *btr, *bir;

	test_watchdog(60);
	rma_engine *t = test_tcp_engine((struct rma_config){.stripes = 2});
	rma_engine *e = test_tcp_engine((struct rma_config){.stripes = 2});
	CHECK_RC(rma_region_register(t, tb, sizeof tb, RMA_ACCESS_REMOTE_RW, &tr), 0);
	CHECK_RC(rma_region_register(e, ib, sizeof ib, 0, &ir), 0);
	rma_remote *rem = test_remote_of(tr);
	CHECK_RC(rma_read_into(e, ir, rem, 5000), (int64_t)sizeof ib);
	CHECK_RC(rma_region_register(t, big_t, sizeof big_t, RMA_ACCESS_REMOTE_RW,
				     &btr), 0);
	CHECK_RC(rma_region_register(e, big_i, sizeof big_i, 0, &bir), 0);
	rma_remote *big = test_remote_of(btr);
	for (int i = 0; i < 3; i++) { /* 1 MiB replies on both stripes */
		CHECK_RC(rma_read_into(e, bir, big, 5000), (int64_t)sizeof big_i);
		CHECK_RC(rma_read_into(e, ir, rem, 1000), (int64_t)sizeof ib);
	}
	memset(big_i, 0x5a, sizeof big_i);
	for (int i = 0; i < 3; i++) { /* 1 MiB put payloads on both stripes */
		CHECK_RC(rma_write_from(e, bir, big, 5000), (int64_t)sizeof big_i);
		CHECK_RC(rma_write_from(e, ir, rem, 1000), (int64_t)sizeof ib);
	}
	CHECK(big_t[0] == 0x5a && big_t[sizeof big_t - 1] == 0x5a);
	rma_remote_free(big);

	/* The target's listening port, from its advertisement (tcp: family,
	 * port, address); the connections it accepted share that local port. */
	int lport = rma__le16(rem->ent[0].blob + 1), served = 0, dialed = 0;
	DIR *d = opendir("/proc/self/fd");
	CHECK(d != NULL);
	for (struct dirent *de; (de = readdir(d));) {
		int fd = atoi(de->d_name), type = -1, acc = -1;
		socklen_t len = sizeof type;
		if (de->d_name[0] == '.' || fd == dirfd(d) ||
		    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) ||
		    type != SOCK_STREAM)
			continue;
		len = sizeof acc;
		CHECK_RC(getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len), 0);
		if (acc || port_of(fd, true) < 0)
			continue; /* a listener, or not connected */
		bool server = port_of(fd, false) == lport;
		check_tuned(fd, server ? "accepted" : "dialed");
		CHECKF(opt(fd, SOL_SOCKET, SO_RCVLOWAT) == 1, "%s: SO_RCVLOWAT %d",
		       server ? "accepted" : "dialed",
		       opt(fd, SOL_SOCKET, SO_RCVLOWAT));
		served += server;
		dialed += !server;
	}
	closedir(d);
	printf("listener port %d: %d accepted and %d dialed connections tuned\n",
	       lport, served, dialed);
	CHECK(lport > 0);
	CHECK(served >= 1);
	CHECK(dialed >= 1);
	rma_remote_free(rem);
	rma_engine_destroy(e);
	rma_engine_destroy(t);
	return 0;
}
