/* Raw clients of a tcp target, for tests of its limits: its address from
 * a token, and a connection that has passed the handshake. */
#ifndef RMA_TEST_TCP_RAW_H
#define RMA_TEST_TCP_RAW_H

#include <netinet/in.h>

#include "rma.h"
#include "transport/setup.h"

/* The target's IPv4 address in rem's (first, tcp) entry. */
struct sockaddr_in tcp_raw_addr(const rma_remote *rem);
/* A non-blocking connection to rem's target that proved secret, run
 * through s (which keeps the fd); fails the test otherwise. */
int tcp_raw_authed(const rma_remote *rem, const char *secret,
		   struct rma__setup *s);

#endif
