/*
 * main.c - the rma command-line tool: dispatch to one command per file.
 */
#include "common.h"

#include <stdio.h>
#include <string.h>

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "info", cmd_info, "show the version and the transports built in" },
	{ "target", cmd_target, "register a buffer and serve it until told to stop" },
	{ "put", cmd_put, "write local bytes into an advertised buffer" },
	{ "get", cmd_get, "read bytes out of an advertised buffer" },
	{ "bench", cmd_bench, "measure bandwidth and latency of put or get" },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: rma COMMAND [OPTIONS]\n"
		   "       rma COMMAND --help\n"
		   "       rma --version\n\n"
		   "One-sided remote memory access: a target registers memory and\n"
		   "prints an advertisement; put and get move bytes with it.\n\n"
		   "commands:\n");
	for (i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nEvery command takes --secret-file PATH, --log LEVEL and --help.\n"
		   "A short option means the same in every command (-s size, -o offset,\n"
		   "-T timeout, ...); long options are stable.\n\n"
		   UNITS_HELP
		   "\nenvironment: RMA_TRANSPORTS, RMA_LISTEN, RMA_ADVERTISE, RMA_SECRET,\n"
		   "RMA_TIMEOUT_MS, RMA_STRIPES, RMA_LOG (an option given wins over its\n"
		   "variable)\n"
		   "\nexit status: 0 ok, 1 runtime error, 2 usage error\n"
		   "See rma(1).\n");
}

static const struct command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct command *cmd;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("rma %s\n", rma_version());
		return EXIT_OK;
	}
	/* "rma help put" is "rma put --help". */
	if (strcmp(argv[1], "help") == 0 && argc >= 3 &&
	    (cmd = find_command(argv[2])) != NULL) {
		char *args[] = { argv[2], "--help", NULL };

		return cmd->run(2, args);
	}
	cmd = find_command(argv[1]);
	if (!cmd) {
		fprintf(stderr, "rma: unknown command '%s'\n", argv[1]);
		usage(stderr);
		return EXIT_USAGE;
	}
	return cmd->run(argc - 1, argv + 1);
}
