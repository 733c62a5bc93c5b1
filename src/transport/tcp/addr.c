/* addr.c - tcp addresses (HOST:PORT, advertisement blobs) and socket options. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

static bool is_wildcard(const struct sockaddr_storage *sa)
{
	if (sa->ss_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

static uint16_t port_of(const struct sockaddr_storage *sa)
{
	return sa->ss_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port
	       : ((const struct sockaddr_in6 *)sa)->sin6_port;
}

/* The interface of the default route (IPv4, then IPv6), or "" if none. */
static void default_route_if(char name[IF_NAMESIZE])
{
	char line[256], ifn[IF_NAMESIZE + 1], dst[64];
	FILE *f = fopen("/proc/net/route", "re");

	name[0] = '\0';
	if (f) {
		if (fgets(line, sizeof line, f)) /* header */
			while (fgets(line, sizeof line, f))
				if (sscanf(line, "%16s %63s", ifn, dst) == 2 &&
				    !strcmp(dst, "00000000") && strlen(ifn) < IF_NAMESIZE) {
					strcpy(name, ifn);
					break;
				}
		fclose(f);
	}
	if (name[0] || !(f = fopen("/proc/net/ipv6_route", "re")))
		return;
	/* dst plen src plen next-hop metric refcnt use flags ifname */
	while (fgets(line, sizeof line, f)) {
		char d[33];
		unsigned plen;
		if (sscanf(line, "%32s %x %*s %*s %*s %*s %*s %*s %*s %16s", d, &plen,
			   ifn) == 3 && plen == 0 && strcmp(ifn, "lo") &&
		    !strcmp(d, "00000000000000000000000000000000") &&
		    strlen(ifn) < IF_NAMESIZE) {
			strcpy(name, ifn);
			break;
		}
	}
	fclose(f);
}

/* How good an interface address is to advertise: 0 = unusable. */
static int score(const struct ifaddrs *i, int family, const char *defif)
{
	if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
		return 0;
	int f = i->ifa_addr->sa_family, s;
	if (f == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		if (IN6_IS_ADDR_LINKLOCAL(a) || IN6_IS_ADDR_LOOPBACK(a))
			return 0; /* a link-local address needs a scope peers lack */
	} else if (f != AF_INET) {
		return 0;
	}
	s = f == family ? 2 : family == AF_INET6 ? 1 : 0; /* [::] takes v4 too */
	if (!s)
		return 0;
	return s + (defif[0] && !strcmp(i->ifa_name, defif) ? 4 : 0);
}

int rma__tcp_advertised(const struct sockaddr_storage *bound,
			const char *advertise, struct sockaddr_storage *out)
{
	uint16_t port = port_of(bound);
	char why[96] = "";

	*out = *bound;
	if (advertise) {
		/* A name or address; the port is always the bound one. */
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
		char host[256];
		size_t n = strlen(advertise);
		if (n >= sizeof host || !n)
			return -EINVAL;
		memcpy(host, advertise, n + 1);
		if (host[0] == '[' && host[n - 1] == ']') {
			host[n - 1] = '\0';
			memmove(host, host + 1, n - 1);
		}
		if (getaddrinfo(host, NULL, &hints, &ai)) {
			rma__err("tcp: cannot resolve advertise address '%s'", advertise);
			return -EINVAL;
		}
		memcpy(out, ai->ai_addr, ai->ai_addrlen);
		freeaddrinfo(ai);
	} else if (is_wildcard(bound)) {
		struct ifaddrs *ifa, *best = NULL;
		char defif[IF_NAMESIZE];
		int top = 0;
		default_route_if(defif);
		if (getifaddrs(&ifa) == 0) {
			for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
				int sc = score(i, bound->ss_family, defif);
				if (sc > top) {
					top = sc;
					best = i;
				}
			}
			if (best) {
				memset(out, 0, sizeof *out);
				memcpy(out, best->ifa_addr, best->ifa_addr->sa_family == AF_INET
				       ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
				snprintf(why, sizeof why, " (%s%s)", best->ifa_name,
					 top >= 4 ? ", the default route's" : "");
			}
			freeifaddrs(ifa);
		}
		if (!best) { /* nothing else is up: loopback is all there is */
			if (bound->ss_family == AF_INET)
				((struct sockaddr_in *)out)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			else
				((struct sockaddr_in6 *)out)->sin6_addr = in6addr_loopback;
			snprintf(why, sizeof why, " (no other interface is up)");
		}
	} else {
		return 0; /* a specific address: advertise it as it is */
	}
	if (out->ss_family == AF_INET)
		((struct sockaddr_in *)out)->sin_port = port;
	else
		((struct sockaddr_in6 *)out)->sin6_port = port;
	char host[INET6_ADDRSTRLEN] = "?";
	const void *a = out->ss_family == AF_INET
		? (const void *)&((struct sockaddr_in *)out)->sin_addr
		: (const void *)&((struct sockaddr_in6 *)out)->sin6_addr;
	inet_ntop(out->ss_family, a, host, sizeof host);
	rma__info("tcp: advertising %s%s%s:%u%s%s", out->ss_family == AF_INET6 ? "[" : "",
		  host, out->ss_family == AF_INET6 ? "]" : "", ntohs(port), why,
		  advertise ? "" : "; choose with tcp:advertise=HOST");
	return 0;
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

void rma__tcp_tune_accepted(int fd)
{
	/* Linux copies a listener's socket options to the sockets it
	 * accepts, which saves six system calls per connection (a flood of
	 * them is accepted as fast as it comes); checked once, in case a
	 * kernel does not. */
	static atomic_int inherits; /* 0 not known, 1 yes, -1 no */
	int v = atomic_load_explicit(&inherits, memory_order_relaxed);

	if (!v) {
		int ut = 0;
		socklen_t len = sizeof ut;
		v = !getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, &len) &&
			    ut == USER_TIMEOUT_MS ? 1 : -1;
		atomic_store_explicit(&inherits, v, memory_order_relaxed);
	}
	if (v < 0)
		rma__tcp_tune_socket(fd);
}

int rma__tcp_listen(const char *who, const char *at, const char *advertise,
		    int backlog, uint8_t *blob, size_t *blob_len)
{
	struct sockaddr_storage sa, adv;
	socklen_t len;
	int fd, one = 1, rc;

	rc = rma__tcp_parse_hostport(at, &sa, &len);
	if (rc) {
		rma__err("%s: cannot parse listen address '%s' (want HOST:PORT)", who, at);
		return rc;
	}
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	rma__tcp_tune_socket(fd); /* accepted sockets inherit it */
	if (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, backlog)) {
		rc = -errno;
		rma__err("%s: cannot listen on %s: %s", who, at, strerror(errno));
		close(fd);
		return rc;
	}
	len = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &len);
	rc = rma__tcp_advertised(&sa, advertise, &adv);
	if (rc) {
		close(fd);
		return rc;
	}
	*blob_len = rma__tcp_blob_from_sa(&adv, blob);
	return fd;
}

int rma__tcp_dial(const struct sockaddr_storage *sa, socklen_t len)
{
	int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	rma__tcp_tune_socket(fd);
	if (connect(fd, (const struct sockaddr *)sa, len) && errno != EINPROGRESS) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}
