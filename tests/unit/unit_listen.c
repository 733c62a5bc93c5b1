/* A listen address given explicitly (rma_config.listen, RMA_LISTEN) that
 * cannot be served fails rma_engine_create with the reason, also with the
 * default transport list, where a transport that cannot start is otherwise
 * skipped: a port in use answers -EADDRINUSE, an address of no interface
 * -EADDRNOTAVAIL, an unparsable one -EINVAL, each with an error message
 * naming the address.  With no listen given, or a free one, the default
 * engine starts as before. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "testlib.h"

static char logged[4096];

static void log_cb(void *arg, int level, const char *msg)
{
	size_t n = strlen(logged);
	(void)arg;
	if (level == RMA_LOG_ERROR)
		snprintf(logged + n, sizeof logged - n, "%s\n", msg);
}

/* rma_engine_create with cfg (default transports unless set) and listen
 * at; the engine is destroyed at once.  The error log in logged[]. */
static int create(const char *transports, const char *at)
{
	struct rma_config cfg;
	rma_engine *e = NULL;
	int rc;

	rma_config_init(&cfg);
	cfg.transports = transports;
	cfg.listen = at;
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	logged[0] = 0;
	rc = rma_engine_create(&cfg, &e);
	if (rc == 0)
		rma_engine_destroy(e);
	else
		CHECK(e == NULL);
	return rc;
}

/* Refused with want, and the error log names the address. */
static void refused(const char *transports, const char *at, int want)
{
	const char *named = at ? at : getenv("RMA_LISTEN");
	int rc = create(transports, at);

	CHECKF(rc == want, "listen %s, transports %s: %d (%s), want %d", named,
	       transports ? transports : "(default)", rc, rma_strerror(rc), want);
	CHECKF(strstr(logged, named) != NULL,
	       "the error log does not name %s: %s", named, logged);
}

int main(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	char busy[64];
	int fd;

	test_watchdog(60);
	unsetenv("RMA_LISTEN");
	unsetenv("RMA_TRANSPORTS");
	rma_set_log(RMA_LOG_ERROR, log_cb, NULL);

	/* A port in use: a listener of our own. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	CHECK(listen(fd, 1) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	snprintf(busy, sizeof busy, "127.0.0.1:%u", ntohs(sa.sin_port));

	/* The default (no listen given) and a free address start. */
	CHECK_RC(create(NULL, NULL), 0);
	CHECK_RC(create(NULL, "127.0.0.1:0"), 0);
	CHECK_RC(create("tcp", "127.0.0.1:0"), 0);

	refused(NULL, busy, -EADDRINUSE);
	refused("tcp", busy, -EADDRINUSE);
	refused(NULL, "192.0.2.1:0", -EADDRNOTAVAIL); /* TEST-NET-1 */
	refused(NULL, "not an address", -EINVAL);
	CHECK(strcmp(rma_strerror(-EADDRNOTAVAIL), strerror(EADDRNOTAVAIL)) != 0);

	/* The same through the environment. */
	setenv("RMA_LISTEN", busy, 1);
	refused(NULL, NULL, -EADDRINUSE);
	setenv("RMA_LISTEN", "192.0.2.1:0", 1);
	refused(NULL, NULL, -EADDRNOTAVAIL);
	unsetenv("RMA_LISTEN");
	CHECK_RC(create(NULL, NULL), 0);

	/* A list without tcp does not listen: the address is not used. */
	if (create("shm", NULL) == 0)
		CHECK_RC(create("shm", busy), 0);
	close(fd);
	printf("ok\n");
	return 0;
}
