/* tcp_raw.c - raw clients of a tcp target (tcp_raw.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "check.h"
#include "core/core.h"
#include "tcp_raw.h"

struct sockaddr_in tcp_raw_addr(const rma_remote *rem)
{
	const uint8_t *b = rem->ent[0].blob;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_port = htons(rma__le16(b + 1));
	memcpy(&sa.sin_addr, b + 3, 4);
	return sa;
}

int tcp_raw_authed(const rma_remote *rem, const char *secret,
		   struct rma__setup *s)
{
	struct sockaddr_in sa = tcp_raw_addr(rem);
	uint8_t key[16];

	rma__setup_key(secret, key);
	struct rma__setup_params p = {.key = key, .expect_id = rem->engine_id};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ||
	      errno == EINPROGRESS);
	CHECK_RC(rma__setup_init(s, fd, false, &p), 0);
	int rc = -EINPROGRESS;
	for (int k = 0; k < 500 && rc == -EINPROGRESS; k++) {
		struct pollfd pf = {.fd = fd, .events =
			rma__setup_events(s) & EPOLLOUT ? POLLOUT : POLLIN};
		poll(&pf, 1, 10);
		rc = rma__setup_run(s);
	}
	CHECK_RC(rc, 0);
	return fd;
}
