/*
 * common.h - helpers shared by the rma CLI commands: argument parsing, sizes,
 * the --fill pattern, buffers, timing and output.
 *
 * Include this first in every tools/rma source: it sets _GNU_SOURCE before
 * any system header (CMake passes it too; the define keeps a bare
 * `gcc -fsyntax-only` check honest).
 */
#ifndef RMA_TOOL_COMMON_H
#define RMA_TOOL_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rma.h"
#include "util/size.h" /* rma__parse_size: byte counts, as the library reads them */

/* Exit codes shared by every command. */
enum {
	EXIT_OK = 0,
	EXIT_RUNTIME = 1, /* the transfer or the engine failed */
	EXIT_USAGE = 2,   /* bad command line */
};

/* Default target buffer size: 1 MiB. */
#define RMA_TOOL_DEFAULT_SIZE ((uint64_t)1 << 20)

/* Command entry points; argv[0] is the command name ("put"). */
int cmd_info(int argc, char **argv);
int cmd_target(int argc, char **argv);
int cmd_put(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Print "rma CMD: message" on stderr (one line) and return `code`. */
int tool_fail(const char *cmd, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Print "rma CMD: message" plus a --help hint on stderr; returns EXIT_USAGE. */
int tool_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Report a getopt_long failure (optstring must start with ':'): `c` is the
 * ':' or '?' it returned.  Returns EXIT_USAGE. */
int tool_getopt_error(const char *cmd, int c, char **argv);

/* Parse an unsigned integer (decimal, or 0x hex); -EINVAL / -ERANGE. */
int parse_u64(const char *s, uint64_t *out);

/* Parse hex digits (an even count, optionally after 0x) into bytes: the
 * count, or -EINVAL, or -E2BIG past cap. */
int parse_hex_bytes(const char *s, uint8_t *out, size_t cap);

/* Most bytes of a fabric address the CLI reads or prints. */
#define TOOL_FABRIC_ADDR_MAX 256

/* A plain libfabric target's triple: ADDRESS-HEX RKEY REMOTE-ADDR. */
struct tool_fabric {
	uint8_t addr[TOOL_FABRIC_ADDR_MAX];
	size_t addr_len;
	uint64_t rkey, raddr;
};

/* Parse the triple's three words, for use with transports (which must
 * name one spec: the target's provider); 0, or a usage error's exit code
 * with the message printed for cmd. */
int parse_fabric_triple(const char *cmd, char *const w[3], const char *transports,
			struct tool_fabric *f);

/* What an op's error may mean when a plain target's fabric gave it: a
 * text to append ("; ..."), or "". */
const char *fabric_hint(int err);

/* Parse a comma-separated list of sizes; at most `max` entries.  Returns the
 * count or -EINVAL / -ERANGE / -E2BIG. */
int parse_size_list(const char *s, uint64_t *out, size_t max);

/* Format a size compactly: "8", "4K", "64K", "1M", "1536" (exact only). */
const char *format_size(uint64_t n, char *buf, size_t cap);

/*
 * The --fill pattern, the same everywhere (target, put, bench, tests):
 * the buffer is a run of 64-bit little-endian words, word i being
 *     splitmix64(seed * 0x9E3779B97F4A7C15 + i)
 * where splitmix64(x) is the standard finaliser applied to
 * x + 0x9E3779B97F4A7C15.  A tail shorter than 8 bytes takes the low bytes
 * (little-endian order) of the next word.  Positions are relative to the
 * start of the buffer being filled.
 */
uint64_t fill_word(uint64_t seed, uint64_t i);
void fill_pattern(void *buf, size_t len, uint64_t seed);

/* Page-aligned, zero-filled buffer of at least max(len, 1) bytes (mmap), so
 * even a zero-length transfer has memory to register. */
void *buffer_alloc(size_t len);
void buffer_free(void *buf, size_t len);

/* Monotonic time in nanoseconds. */
uint64_t now_ns(void);

/* crc32c of a buffer, as the CLI prints it ("crc32c: %08x"). */
uint32_t buffer_crc(const void *buf, size_t len);

/* Turn a multi-line message into one line (newlines become "; "), in place
 * within cap bytes. */
void one_line(char *msg, size_t cap);

/* Map an --access argument ("rw", "r", "w") to enum rma_access; -EINVAL. */
int parse_access(const char *s, unsigned *out);

/*
 * Parse a duration into milliseconds: digits with a unit, "ms", "s" or
 * "min"; bare digits are milliseconds.  "250ms", "5s", "2min", "500".
 * Returns 0, or -EINVAL / -ERANGE.
 */
int parse_duration_ms(const char *s, uint64_t *out);

/*
 * Short options mean one thing in every command:
 *   -t --transport  -l --listen  -s --size  -o --offset  -f --fill
 *   -F --file  -O --out  -z --zero  -a --access  -T --timeout
 *   -w --window  -b --batch  -n --iters  -d --duration  -j --json
 *   -m --manual-progress  -h --help
 * Long only: --op, --target, --sizes (bench's synonym of --size), --warmup,
 * --verify, --peers, --regions, --alloc, --secret-file, --log.
 * bench's --duration and --warmup read a bare number as seconds (iperf3 -t).
 */
enum {
	OPT_SECRET_FILE = 0x100, /* every command */
	OPT_LOG,                 /* every command */
	OPT_OP,                  /* bench */
	OPT_TARGET,              /* bench */
	OPT_ALLOC,               /* target, bench */
};

/* The options every command takes, for its struct option table. */
#define COMMON_LONG_OPTIONS                                              \
	{ "secret-file", required_argument, NULL, OPT_SECRET_FILE },    \
	{ "log", required_argument, NULL, OPT_LOG },                    \
	{ "help", no_argument, NULL, 'h' }

/* Their --help lines. */
#define COMMON_HELP                                                          \
	"      --secret-file PATH   shared secret peers must prove: the file's\n"  \
	"                           first line (wins over RMA_SECRET)\n"           \
	"      --log LEVEL          error, warn, info or debug (default warn;\n"   \
	"                           wins over RMA_LOG)\n"                          \
	"  -h, --help               show this help\n"

/* How sizes and durations are written, for --help. */
#define UNITS_HELP                                                           \
	"Sizes: bytes, or a number with a binary suffix: K = 2^10, M = 2^20,\n"  \
	"G = 2^30, T = 2^40 (also KiB, MiB...); KB/MB are refused as ambiguous.\n" \
	"Durations: a number with a unit, ms, s or min; a bare number is ms.\n"   \
	"Rates are in MB/s, where MB = 10^6 bytes.\n"

#define TOOL_SECRET_MAX 1024

struct common_opts {
	const char *secret_file;
	int log_level; /* enum rma_log_level, or -1: not given */
	char secret[TOOL_SECRET_MAX];
};

void common_init(struct common_opts *o);

/* Handle option c if it is a common one: returns 1 if it was, 0 if not,
 * EXIT_USAGE (after a message) for a bad value. */
int common_option(const char *cmd, int c, const char *arg,
		  struct common_opts *o);

/* After parsing, with cfg's transports and listen set: set the log level,
 * read the secret file into cfg (cfg may be NULL for a command that makes
 * no engine).  An option given wins over its environment variable (the
 * library lets the variables win over rma_config).  Returns 0 or an exit
 * code. */
int common_apply(const char *cmd, struct common_opts *o,
		 struct rma_config *cfg);

#endif /* RMA_TOOL_COMMON_H */
