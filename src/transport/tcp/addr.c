/* addr.c - tcp addresses (HOST:PORT, advertisement blobs) and socket options. */
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "transport/tcp/tcp.h"

int rma__tcp_parse_hostport(const char *s, struct sockaddr_storage *sa,
			  socklen_t *len)
{
	char host[256], *port;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai;

	if (strlen(s) >= sizeof host)
		return -EINVAL;
	strcpy(host, s);
	port = strrchr(host, ':');
	if (!port)
		return -EINVAL;
	*port++ = '\0';
	char *h = host;
	if (h[0] == '[') { /* [v6]:port */
		size_t n = strlen(h);
		if (n < 2 || h[n - 1] != ']')
			return -EINVAL;
		h[n - 1] = '\0';
		h++;
	}
	if (!strcmp(h, "*") || !*h)
		h = NULL;
	if (getaddrinfo(h, port, &hints, &ai))
		return -EINVAL;
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* An address peers can reach when we listen on the wildcard. */
void rma__tcp_pick_reachable(struct sockaddr_storage *sa)
{
	struct ifaddrs *ifa, *i;
	if (sa->ss_family != AF_INET ||
	    ((struct sockaddr_in *)sa)->sin_addr.s_addr != htonl(INADDR_ANY))
		return;
	((struct sockaddr_in *)sa)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (getifaddrs(&ifa))
		return;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr !=
			    htonl(INADDR_LOOPBACK)) {
			((struct sockaddr_in *)sa)->sin_addr =
				((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			break;
		}
	freeifaddrs(ifa);
}

/* blob: u8 family (4|6) | u16 port | 4 or 16 address bytes */
size_t rma__tcp_blob_from_sa(const struct sockaddr_storage *sa, uint8_t *b)
{
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		b[0] = 4;
		rma__put_le16(b + 1, ntohs(in->sin_port));
		memcpy(b + 3, &in->sin_addr, 4);
		return 7;
	}
	const struct sockaddr_in6 *in6 = (const void *)sa;
	b[0] = 6;
	rma__put_le16(b + 1, ntohs(in6->sin6_port));
	memcpy(b + 3, &in6->sin6_addr, 16);
	return 19;
}

int rma__tcp_sa_from_blob(const uint8_t *b, size_t n, struct sockaddr_storage *sa,
			socklen_t *len)
{
	memset(sa, 0, sizeof *sa);
	if (n == 7 && b[0] == 4 && rma__le16(b + 1)) {
		struct sockaddr_in *in = (void *)sa;
		in->sin_family = AF_INET;
		in->sin_port = htons(rma__le16(b + 1));
		memcpy(&in->sin_addr, b + 3, 4);
		*len = sizeof *in;
		return 0;
	}
	if (n == 19 && b[0] == 6 && rma__le16(b + 1)) {
		struct sockaddr_in6 *in6 = (void *)sa;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(rma__le16(b + 1));
		memcpy(&in6->sin6_addr, b + 3, 16);
		*len = sizeof *in6;
		return 0;
	}
	return -EBADMSG;
}

void rma__tcp_tune_socket(int fd)
{
	int one = 1, ut = USER_TIMEOUT_MS;
	int idle = KEEPIDLE_S, intvl = KEEPINTVL_S, cnt = KEEPCNT;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof ut);
	/* Large buffers come only after authentication (limits.c). */
}
