/*
 * cmd_target.c - `rma target`: register a buffer, print its advertisement,
 * serve it until stdin ends or a signal arrives, then print its crc32c.
 */
#include "common.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct target_args {
	const char *transports; /* NULL = every available one */
	const char *listen;     /* NULL = the library's default */
	const char *advertise;  /* NULL = the library's choice */
	uint64_t size;
	bool fill;
	uint64_t seed;
	unsigned access;
	bool alloc;             /* rma_region_alloc: shared memory (shm maps it) */
	bool secret_set;        /* --secret-file or RMA_SECRET */
	struct common_opts common;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rma target [--transport LIST] [--listen HOST:PORT] [--advertise HOST]\n"
		"                  [--size BYTES] [--fill SEED] [--access rw|r|w] [--alloc]\n"
		"                  [--secret-file PATH]\n"
		"                  [--log LEVEL]\n\n"
		"Register a buffer (default 1M, zero-filled unless --fill) with the given\n"
		"remote access (default rw) and print on stdout:\n"
		"  advertisement: TOKEN\n"
		"and, when an ofi transport carries it, a second line for initiators that\n"
		"use plain libfabric (fi_write/fi_read on an RDM endpoint of the same\n"
		"provider, at REMOTE-ADDR + offset with key RKEY):\n"
		"  fabric: ADDRESS-HEX RKEY REMOTE-ADDR\n"
		"(not with a shared secret: such an initiator cannot prove it).\n"
		"Then serve remote puts and gets until stopped, release the buffer and print\n"
		"  crc32c: HEX        (of the whole buffer, 8 lowercase hex digits)\n\n"
		"Stopping: SIGINT, SIGTERM or SIGHUP always stops it.  If stdin is a\n"
		"terminal, a pipe, a FIFO or a socket, end of input on stdin (or an error\n"
		"reading it) stops it too (close the pipe, or press Ctrl-D).  If stdin is\n"
		"/dev/null or a regular file it is ignored (it would end at once) and only\n"
		"a signal stops the target.\n\n"
		"options:\n"
		"  -t, --transport LIST     transports to offer, e.g. tcp or tcp,shm, each\n"
		"                           with options: tcp:listen=0.0.0.0:7000 (default: all)\n"
		"  -l, --listen HOST:PORT   tcp listen address; 0.0.0.0:PORT or [::]:PORT for\n"
		"                           every address (default 127.0.0.1:0, or RMA_LISTEN);\n"
		"                           one that cannot be bound (in use, no such\n"
		"                           interface) stops the target with status 1\n"
		"      --advertise HOST     the address peers should connect to (default: the\n"
		"                           listen address; for 0.0.0.0 or [::], an up\n"
		"                           interface's, the default route's first; or\n"
		"                           RMA_ADVERTISE)\n"
		"  -s, --size BYTES         buffer size (default 1M)\n"
		"  -f, --fill SEED          fill with the deterministic pattern of SEED\n"
		"  -a, --access MODE        rw (default), r (get only) or w (put only)\n"
		"      --alloc              the buffer is shared memory from rma_region_alloc:\n"
		"                           same-host shm peers map it once and copy directly\n"
		COMMON_HELP "\n" UNITS_HELP);
}

static int parse_args(int argc, char **argv, struct target_args *a)
{
	static const struct option opts[] = {
		{ "transport", required_argument, NULL, 't' },
		{ "listen", required_argument, NULL, 'l' },
		{ "advertise", required_argument, NULL, 'A' + 256 },
		{ "size", required_argument, NULL, 's' },
		{ "fill", required_argument, NULL, 'f' },
		{ "access", required_argument, NULL, 'a' },
		{ "alloc", no_argument, NULL, OPT_ALLOC },
		COMMON_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	int c, rc;

	*a = (struct target_args){ .size = RMA_TOOL_DEFAULT_SIZE,
				   .access = RMA_ACCESS_REMOTE_RW };
	common_init(&a->common);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":t:l:s:f:a:h", opts, NULL)) != -1) {
		switch (c) {
		case 't': a->transports = optarg; break;
		case 'l': a->listen = optarg; break;
		case 'A' + 256: a->advertise = optarg; break;
		case OPT_ALLOC: a->alloc = true; break;
		case 's':
			if (rma__parse_size(optarg, &a->size) < 0 || a->size == 0)
				return tool_usage_error("target", "bad --size '%s'", optarg);
			break;
		case 'f':
			if (parse_u64(optarg, &a->seed) < 0)
				return tool_usage_error("target", "bad --fill seed '%s'", optarg);
			a->fill = true;
			break;
		case 'a':
			if (parse_access(optarg, &a->access) < 0)
				return tool_usage_error("target", "bad --access '%s' (rw, r or w)", optarg);
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			rc = common_option("target", c, optarg, &a->common);
			if (rc == 1)
				break;
			return rc ? rc : tool_getopt_error("target", c, argv);
		}
	}
	if (optind < argc)
		return tool_usage_error("target", "unexpected argument '%s'", argv[optind]);
	if ((uint64_t)(size_t)a->size != a->size)
		return tool_usage_error("target", "--size too large for this machine");
	return 0;
}

/*
 * Block the stop signals and return a signalfd for them.  This must happen
 * before the engine starts its progress thread, which inherits the mask:
 * otherwise the signal could land on that thread and kill the process
 * before the buffer's crc is printed.
 */
static int stop_signals_fd(void)
{
	sigset_t set;
	int fd;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	fd = signalfd(-1, &set, SFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Whether end of input on stdin is a meaningful "stop" (see usage()). */
static bool stdin_is_watchable(void)
{
	struct stat st;

	if (fstat(STDIN_FILENO, &st) < 0)
		return false;
	if (isatty(STDIN_FILENO))
		return true;
	return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

/* Serve until stdin reaches EOF (when watched) or a stop signal arrives. */
static void wait_for_stop(int sig_fd)
{
	struct pollfd pfd[2] = {
		{ .fd = sig_fd, .events = POLLIN },
		{ .fd = stdin_is_watchable() ? STDIN_FILENO : -1, .events = POLLIN },
	};

	for (;;) {
		char buf[256];

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		if (pfd[0].revents)
			return; /* a stop signal: nothing else to read from it */
		if (pfd[1].revents) {
			/* Input is ignored; only its end matters. */
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				return;
		}
	}
}

/* The `fabric:` line: the token's ofi entry as a plain libfabric
 * initiator names it.  Nothing without an ofi entry. */
static void print_fabric(const struct target_args *a, const char *token)
{
	uint8_t addr[TOOL_FABRIC_ADDR_MAX];
	uint64_t rkey, raddr;
	rma_remote *r;
	int n;

	if (rma_remote_parse(token, &r) < 0)
		return;
	n = rma_remote_to_fabric(r, "ofi", addr, sizeof addr, &rkey, &raddr);
	rma_remote_free(r);
	if (n <= 0)
		return;
	if (a->secret_set) {
		fprintf(stderr, "rma target: no 'fabric:' line: a plain libfabric "
			"initiator cannot prove the shared secret\n");
		return;
	}
	printf("fabric: ");
	for (int i = 0; i < n; i++)
		printf("%02x", addr[i]);
	printf(" 0x%" PRIx64 " 0x%" PRIx64 "\n", rkey, raddr);
}

static int serve(const struct target_args *a, int sig_fd, rma_engine *e,
		 unsigned char *buf, rma_region *r)
{
	char token[RMA_ADVERTISEMENT_TEXT_MAX];
	int rc = 0;

	if (!r)
		rc = rma_region_register(e, buf, (size_t)a->size, a->access, &r);
	if (rc < 0)
		return tool_fail("target", EXIT_RUNTIME, "registering %" PRIu64
				 " bytes: %s", a->size, rma_strerror(rc));
	rc = rma_advertise_text(r, 0, 0, 0, token, sizeof(token));
	if (rc < 0) {
		rma_region_release(r);
		return tool_fail("target", EXIT_RUNTIME, "advertising: %s",
				 rma_strerror(rc));
	}
	printf("advertisement: %s\n", token);
	print_fabric(a, token);
	fflush(stdout);

	wait_for_stop(sig_fd);

	/* Release unmaps --alloc memory: keep a second view of its pages
	 * (mremap of size 0 duplicates a shared mapping) for the crc. */
	if (a->alloc) {
		void *view = mremap(buf, 0, (size_t)a->size, MREMAP_MAYMOVE);
		if (view == MAP_FAILED)
			return tool_fail("target", EXIT_RUNTIME, "mremap: %s",
					 strerror(errno));
		buf = view;
	}
	/* Once release returns no remote op touches buf: the crc is final. */
	rc = rma_region_release(r);
	if (rc < 0)
		fprintf(stderr, "rma target: releasing the region: %s\n",
			rma_strerror(rc));
	/* The crc still says what the buffer holds; the status says that a
	 * remote op may yet have touched it after. */
	printf("crc32c: %08" PRIx32 "\n", buffer_crc(buf, (size_t)a->size));
	fflush(stdout);
	if (a->alloc)
		munmap(buf, (size_t)a->size);
	return rc < 0 ? EXIT_RUNTIME : EXIT_OK;
}

/* The engine could not be created: say why, naming the listen address
 * when it is the cause (in use, on no interface here, a privileged port). */
static int engine_fail(const struct rma_config *cfg, int rc)
{
	const char *at = cfg->listen ? cfg->listen : getenv("RMA_LISTEN");

	if (at && *at && (rc == -EADDRINUSE || rc == -EADDRNOTAVAIL ||
			  rc == -EACCES))
		return tool_fail("target", EXIT_RUNTIME, "cannot listen on %s: %s",
				 at, rc == -EACCES ? strerror(EACCES)
						   : rma_strerror(rc));
	return tool_fail("target", EXIT_RUNTIME, "creating the engine: %s",
			 rma_strerror(rc));
}

int cmd_target(int argc, char **argv)
{
	struct target_args a;
	struct rma_config cfg;
	rma_engine *e;
	unsigned char *buf;
	int rc, sig_fd;

	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	rma_config_init(&cfg);
	cfg.transports = a.transports;
	cfg.listen = a.listen;
	cfg.advertise = a.advertise;
	if (a.advertise)
		unsetenv("RMA_ADVERTISE"); /* the option wins, as the others do */
	rc = common_apply("target", &a.common, &cfg);
	if (rc)
		return rc;
	const char *env_secret = getenv("RMA_SECRET");
	a.secret_set = (cfg.secret && *cfg.secret) || (env_secret && *env_secret);

	/* A reader that went away must not kill us before the crc line. */
	signal(SIGPIPE, SIG_IGN);
	sig_fd = stop_signals_fd();
	if (sig_fd < 0)
		return tool_fail("target", EXIT_RUNTIME, "signalfd: %s",
				 strerror(-sig_fd));

	if (a.alloc) {
		void *p = NULL;
		rma_region *r = NULL;
		rc = rma_engine_create(&cfg, &e);
		if (rc < 0)
			return engine_fail(&cfg, rc);
		rc = rma_region_alloc(e, (size_t)a.size, a.access, &r, &p);
		if (rc < 0) {
			rma_engine_destroy(e);
			return tool_fail("target", EXIT_RUNTIME, "allocating %" PRIu64
					 " bytes: %s", a.size, rma_strerror(rc));
		}
		if (a.fill)
			fill_pattern(p, (size_t)a.size, a.seed);
		rc = serve(&a, sig_fd, e, p, r);
		rma_engine_destroy(e);
		close(sig_fd);
		return rc;
	}
	buf = buffer_alloc((size_t)a.size);
	if (!buf)
		return tool_fail("target", EXIT_RUNTIME, "allocating %" PRIu64
				 " bytes: %s", a.size, strerror(errno));
	if (a.fill)
		fill_pattern(buf, (size_t)a.size, a.seed);

	rc = rma_engine_create(&cfg, &e);
	if (rc < 0) {
		buffer_free(buf, (size_t)a.size);
		return engine_fail(&cfg, rc);
	}
	rc = serve(&a, sig_fd, e, buf, NULL);
	rma_engine_destroy(e);
	buffer_free(buf, (size_t)a.size);
	close(sig_fd);
	return rc;
}
