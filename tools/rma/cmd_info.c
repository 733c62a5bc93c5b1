/*
 * cmd_info.c - `rma info`: version and the transports compiled in, with
 * their levels, whether they are usable on this host, and their options.
 */
#include "common.h"

#include <getopt.h>
#include <stdio.h>

#define MAX_TRANSPORTS 16

static const char *level_name(int level)
{
	switch (level) {
	case RMA_LEVEL_TCP: return "tcp";
	case RMA_LEVEL_NIC: return "nic";
	case RMA_LEVEL_MEMORY: return "memory";
	default: return "none";
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: rma info [--secret-file PATH] [--log LEVEL]\n\n"
		   "Print the library version and two lines per transport compiled in:\n"
		   "  version: X.Y.Z\n"
		   "  transport: NAME level=tcp|nic|memory available=yes|no (detail)\n"
		   "    options: NAME: meaning; ...  (set as --transport NAME:opt=value:...)\n\n"
		   "options (taken by every command; info makes no engine, so it only\n"
		   "checks that the secret file is readable):\n"
		   COMMON_HELP);
}

int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
		COMMON_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	struct rma_transport_info info[MAX_TRANSPORTS];
	struct common_opts common;
	int n, i, c, rc;

	common_init(&common);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return EXIT_OK;
		}
		rc = common_option("info", c, optarg, &common);
		if (rc != 1)
			return rc ? rc : tool_getopt_error("info", c, argv);
	}
	if (optind < argc)
		return tool_usage_error("info", "unexpected argument '%s'",
					argv[optind]);
	rc = common_apply("info", &common, NULL);
	if (rc)
		return rc;

	printf("version: %s\n", rma_version());
	n = rma_transports(info, MAX_TRANSPORTS);
	if (n < 0)
		return tool_fail("info", EXIT_RUNTIME, "listing transports: %s",
				 rma_strerror(n));
	if (n > MAX_TRANSPORTS)
		n = MAX_TRANSPORTS;
	for (i = 0; i < n; i++) {
		printf("transport: %s level=%s available=%s (%s)\n",
		       info[i].name ? info[i].name : "?",
		       level_name(info[i].level),
		       info[i].available ? "yes" : "no",
		       info[i].detail ? info[i].detail : "");
		printf("    options: %s\n", info[i].options ? info[i].options : "");
	}
	return EXIT_OK;
}
