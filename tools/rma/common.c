/*
 * common.c - helpers shared by the rma CLI commands.
 */
#include "common.h"

#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static void vreport(const char *cmd, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	one_line(msg, sizeof(msg));
	fprintf(stderr, "rma %s: %s\n", cmd, msg);
}

int tool_fail(const char *cmd, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(cmd, fmt, ap);
	va_end(ap);
	return code;
}

int tool_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(cmd, fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try 'rma %s --help'.\n", cmd);
	return EXIT_USAGE;
}

int tool_getopt_error(const char *cmd, int c, char **argv)
{
	/* getopt leaves optind just past the offending word. */
	const char *word = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':')
		return tool_usage_error(cmd, "option '%s' needs a value", word);
	/* A long option is named as given: optopt holds its short letter
	 * when the fault is a value it takes none of (--zero=1). */
	if (strncmp(word, "--", 2) == 0) {
		const char *eq = strchr(word, '=');

		if (eq && optopt)
			return tool_usage_error(cmd, "option '%.*s' takes no value",
						(int)(eq - word), word);
		return tool_usage_error(cmd, "unknown option '%s'", word);
	}
	if (optopt && optopt != '?')
		return tool_usage_error(cmd, "unknown option '-%c'", optopt);
	return tool_usage_error(cmd, "unknown option '%s'", word);
}

int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s)
		return -EINVAL;
	/* Base 16 after 0x, else 10: a leading zero is not octal. */
	bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	const char *digits = hex ? s + 2 : s;

	/* Digits only: strtoull would take signs, leading blanks and, in
	 * base 16, a second "0x". */
	if (!*digits)
		return -EINVAL;
	for (const char *p = digits; *p; p++)
		if (hex ? !isxdigit((unsigned char)*p) : !isdigit((unsigned char)*p))
			return -EINVAL;
	errno = 0;
	v = strtoull(digits, &end, hex ? 16 : 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

int parse_hex_bytes(const char *s, uint8_t *out, size_t cap)
{
	size_t n;

	if (!s)
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	n = strlen(s);
	if (!n || n % 2)
		return -EINVAL;
	if (n / 2 > cap)
		return -E2BIG;
	for (size_t i = 0; i < n; i += 2) {
		if (!isxdigit((unsigned char)s[i]) || !isxdigit((unsigned char)s[i + 1]))
			return -EINVAL;
		char pair[3] = { s[i], s[i + 1], '\0' };
		out[i / 2] = (uint8_t)strtoul(pair, NULL, 16);
	}
	return (int)(n / 2);
}

int parse_fabric_triple(const char *cmd, char *const w[3], const char *transports,
			struct tool_fabric *f)
{
	int n = parse_hex_bytes(w[0], f->addr, sizeof f->addr);

	if (n < 0)
		return tool_usage_error(cmd, "bad fabric address '%s' (hex digits, an even "
					"count%s)", w[0], n == -E2BIG ? ", at most 256 bytes" : "");
	f->addr_len = (size_t)n;
	if (parse_u64(w[1], &f->rkey) < 0)
		return tool_usage_error(cmd, "bad rkey '%s' (0x hex or decimal)", w[1]);
	if (parse_u64(w[2], &f->raddr) < 0)
		return tool_usage_error(cmd, "bad remote address '%s' (0x hex or decimal)",
					w[2]);
	if (!transports || strchr(transports, ','))
		return tool_usage_error(cmd, "a fabric address needs --transport with one "
					"spec, e.g. ofi:tcp");
	return 0;
}

/* A plain target's fabric answers a wrong key, or bytes outside its
 * registration, by refusing the request or dropping the connection. */
const char *fabric_hint(int err)
{
	if (err == -EKEYREJECTED)
		return "; check the rkey, the remote address, and that the bytes "
		       "lie inside the target's registration";
	if (err == -ECONNRESET)
		return "; a plain target's fabric also drops the connection on a "
		       "wrong rkey or remote address, or bytes outside its registration";
	return "";
}

int parse_size_list(const char *s, uint64_t *out, size_t max)
{
	char item[64];
	size_t n = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int rc;

		if (len == 0 || len >= sizeof(item))
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		memcpy(item, p, len);
		item[len] = '\0';
		rc = rma__parse_size(item, &out[n]);
		if (rc < 0)
			return rc;
		n++;
		if (!comma)
			break;
		p = comma + 1;
	}
	return (int)n;
}

const char *format_size(uint64_t n, char *buf, size_t cap)
{
	static const char units[] = "KMGT";
	int u = -1;

	/* Only exact multiples get a suffix, so the text parses back to n. */
	while (n >= 1024 && n % 1024 == 0 && u < 3) {
		n /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, cap, "%" PRIu64, n);
	else
		snprintf(buf, cap, "%" PRIu64 "%c", n, units[u]);
	return buf;
}

#define GOLDEN 0x9E3779B97F4A7C15ull

static uint64_t splitmix64(uint64_t x)
{
	uint64_t z = x + GOLDEN;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t fill_word(uint64_t seed, uint64_t i)
{
	return splitmix64(seed * GOLDEN + i);
}

void fill_pattern(void *buf, size_t len, uint64_t seed)
{
	unsigned char *p = buf;
	size_t words = len / 8;
	uint64_t base = seed * GOLDEN;
	size_t i;

	for (i = 0; i < words; i++) {
		uint64_t w = htole64(splitmix64(base + i));

		memcpy(p + i * 8, &w, 8);
	}
	if (len % 8) {
		uint64_t w = htole64(splitmix64(base + words));

		memcpy(p + words * 8, &w, len % 8);
	}
}

static size_t buffer_span(size_t len)
{
	return len ? len : 1;
}

void *buffer_alloc(size_t len)
{
	/* Anonymous mmap: page-aligned and already zero.  MAP_POPULATE faults
	 * the pages in now (as pinning at RDMA registration would), so the
	 * transfer's time measures the transfer, not first-touch faults. */
	void *p = mmap(NULL, buffer_span(len), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void buffer_free(void *buf, size_t len)
{
	if (buf)
		munmap(buf, buffer_span(len));
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint32_t buffer_crc(const void *buf, size_t len)
{
	return rma_crc32c(0, buf, len);
}

void one_line(char *msg, size_t cap)
{
	char tmp[1024];
	size_t i, o = 0;

	for (i = 0; msg[i] && o + 3 < sizeof(tmp); i++) {
		if (msg[i] == '\n') {
			if (msg[i + 1] == '\0')
				break;
			tmp[o++] = ';';
			tmp[o++] = ' ';
		} else {
			tmp[o++] = msg[i];
		}
	}
	tmp[o] = '\0';
	snprintf(msg, cap, "%s", tmp);
}

int parse_access(const char *s, unsigned *out)
{
	if (strcmp(s, "rw") == 0 || strcmp(s, "wr") == 0)
		*out = RMA_ACCESS_REMOTE_RW;
	else if (strcmp(s, "r") == 0)
		*out = RMA_ACCESS_REMOTE_READ;
	else if (strcmp(s, "w") == 0)
		*out = RMA_ACCESS_REMOTE_WRITE;
	else
		return -EINVAL;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t *out)
{
	static const struct {
		const char *unit;
		uint64_t ms;
	} units[] = { { "", 1 }, { "ms", 1 }, { "s", 1000 }, { "min", 60000 } };
	char *end;
	unsigned long long v;
	size_t i;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit) != 0)
			continue;
		if (v > UINT64_MAX / units[i].ms)
			return -ERANGE;
		*out = v * units[i].ms;
		return 0;
	}
	return -EINVAL;
}

void common_init(struct common_opts *o)
{
	o->secret_file = NULL;
	o->log_level = -1;
	o->secret[0] = '\0';
}

static int log_level_of(const char *s)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	int i;

	for (i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int common_option(const char *cmd, int c, const char *arg,
		  struct common_opts *o)
{
	switch (c) {
	case OPT_SECRET_FILE:
		o->secret_file = arg;
		return 1;
	case OPT_LOG:
		o->log_level = log_level_of(arg);
		if (o->log_level < 0)
			return tool_usage_error(cmd, "bad --log '%s' (error, warn, info or debug)", arg);
		return 1;
	default:
		return 0;
	}
}

/* The secret is the file's first line, without its line ending. */
static int read_secret(const char *cmd, const char *path, char *out, size_t cap)
{
	FILE *f = fopen(path, "re");
	size_t len;

	if (!f)
		return tool_fail(cmd, EXIT_RUNTIME, "--secret-file %s: %s", path, strerror(errno));
	if (!fgets(out, (int)cap, f))
		out[0] = '\0';
	fclose(f);
	len = strcspn(out, "\r\n");
	if (len == cap - 1)
		return tool_fail(cmd, EXIT_RUNTIME, "--secret-file %s: the secret is longer than %zu bytes",
				 path, cap - 2);
	out[len] = '\0';
	if (len == 0)
		return tool_fail(cmd, EXIT_RUNTIME, "--secret-file %s: the first line is empty", path);
	return 0;
}

int common_apply(const char *cmd, struct common_opts *o, struct rma_config *cfg)
{
	int rc;

	/* The library lets RMA_LOG and RMA_SECRET win over what it is given;
	 * an option on the command line is more specific than either. */
	if (o->log_level >= 0) {
		unsetenv("RMA_LOG");
		rma_set_log(o->log_level, NULL, NULL);
	}
	if (o->secret_file) {
		rc = read_secret(cmd, o->secret_file, o->secret, sizeof(o->secret));
		if (rc)
			return rc;
		unsetenv("RMA_SECRET");
		if (cfg)
			cfg->secret = o->secret;
	}
	if (cfg && cfg->transports)
		unsetenv("RMA_TRANSPORTS");
	if (cfg && cfg->listen)
		unsetenv("RMA_LISTEN");
	return 0;
}
