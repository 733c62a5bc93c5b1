/*
 * cmd_xfer.c - `rma put` and `rma get`: one transfer to or from an
 * advertised buffer, with its size, time, throughput and crc32c.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct xfer_args {
	const char *cmd;  /* "put" or "get" */
	unsigned kind;    /* RMA_OP_PUT or RMA_OP_GET */
	const char *token;
	/* A plain libfabric target's triple, in place of a token. */
	bool fabric;
	struct tool_fabric fab;
	const char *transports;
	bool has_size;
	uint64_t size;
	uint64_t offset;
	bool fill;
	bool zero;        /* put: zeros, asked for explicitly */
	uint64_t seed;
	const char *file; /* put: source file */
	bool stream;      /* put: --file is no regular file: read to its end */
	uint64_t stream_max; /* ... taking at most this many bytes */
	const char *out;  /* get: destination file */
	int timeout_ms;   /* 0 = the engine's default, RMA_NONE = none */
	struct common_opts common;
};

/* The plain libfabric target form, the same for put and get. */
#define FABRIC_HELP                                                             \
	"A plain libfabric target (an RDM endpoint, no rma engine) is named by the\n" \
	"triple it hands out instead of a token: its fabric address in hex, the\n"  \
	"key of its registration, and the remote address of the window's first\n" \
	"byte (0x hex or decimal).  --transport names the one transport spec to\n"  \
	"use (e.g. ofi:tcp, the same provider as the target's) and --size is\n"    \
	"needed, except for a put with --file naming a regular file, which\n"    \
	"moves the file's size (the window's length is not known here; the\n"    \
	"target's fabric checks bounds and key).  No secret can be proved to\n"  \
	"such a target.\n\n"

static void usage(FILE *f, unsigned kind)
{
	if (kind == RMA_OP_PUT)
		fprintf(f,
			"usage: rma put TOKEN (--fill SEED | --file PATH | --zero) [--size BYTES]\n"
			"               [--offset BYTES] [--timeout DURATION] [--transport LIST]\n"
			"               [--secret-file PATH] [--log LEVEL]\n"
			"       rma put --transport SPEC ADDRESS-HEX RKEY REMOTE-ADDR\n"
			"               (--fill SEED --size BYTES | --file PATH [--size BYTES] |\n"
			"                --zero --size BYTES) [options]\n\n"
			"Write bytes into the buffer advertised by TOKEN at --offset (default 0).\n"
			"Say what to write: the --fill pattern of SEED, the contents of PATH, or\n"
			"zeros with --zero (nothing is written without one of them).  Size defaults\n"
			"to the file size with --file (a pipe, FIFO or /proc file is read to its\n"
			"end), else to the advertised length minus the offset.\n\n"
			FABRIC_HELP);
	else
		fprintf(f,
			"usage: rma get TOKEN [--size BYTES] [--offset BYTES] [--out PATH]\n"
			"               [--timeout DURATION] [--transport LIST]\n"
			"               [--secret-file PATH] [--log LEVEL]\n"
			"       rma get --transport SPEC ADDRESS-HEX RKEY REMOTE-ADDR --size BYTES\n"
			"               [options]\n\n"
			"Read bytes out of the buffer advertised by TOKEN from --offset (default 0),\n"
			"optionally saving them to PATH.  Size defaults to the advertised length\n"
			"minus the offset.\n\n"
			FABRIC_HELP);
	fprintf(f,
		"On success prints:\n"
		"  bytes: N\n"
		"  time: X.XXX ms             (the transfer alone: the connection is made first)\n"
		"  throughput: X.XX MB/s      (MB = 10^6 bytes)\n"
		"  crc32c: HEX                (of the bytes moved)\n"
		"On failure prints one line 'rma %s: REASON' on stderr and exits 1.\n\n"
		"options:\n", kind == RMA_OP_PUT ? "put" : "get");
	if (kind == RMA_OP_PUT)
		fprintf(f,
			"  -f, --fill SEED          write the deterministic pattern of SEED\n"
			"  -F, --file PATH          write the bytes of PATH\n"
			"  -z, --zero               write zeros\n");
	else
		fprintf(f,
			"  -O, --out PATH           save the bytes read to PATH\n");
	fprintf(f,
		"  -s, --size BYTES         bytes to move\n"
		"  -o, --offset BYTES       offset within the advertised window (default 0)\n"
		"  -T, --timeout DURATION   deadline for connecting and for the transfer, or\n"
		"                           'none' (default: the engine's, 30s or RMA_TIMEOUT_MS)\n"
		"  -t, --transport LIST     transports this side may use (default: all)\n"
		COMMON_HELP "\n" UNITS_HELP);
}

/* ADDRESS-HEX RKEY REMOTE-ADDR of a plain libfabric target. */
static int parse_triple(struct xfer_args *a, char **w)
{
	int rc = parse_fabric_triple(a->cmd, w, a->transports, &a->fab);

	if (rc)
		return rc;
	if (!a->has_size && !a->file)
		return tool_usage_error(a->cmd, "a fabric address needs --size (the "
					"target's window length is not known here)");
	a->fabric = true;
	return 0;
}

static int parse_args(int argc, char **argv, struct xfer_args *a)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "offset", required_argument, NULL, 'o' },
		{ "fill", required_argument, NULL, 'f' },
		{ "file", required_argument, NULL, 'F' },
		{ "zero", no_argument, NULL, 'z' },
		{ "out", required_argument, NULL, 'O' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "transport", required_argument, NULL, 't' },
		COMMON_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	bool put = a->kind == RMA_OP_PUT;
	uint64_t v;
	int c, rc;

	common_init(&a->common);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:f:F:zO:T:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (rma__parse_size(optarg, &a->size) < 0)
				return tool_usage_error(a->cmd, "bad --size '%s'", optarg);
			a->has_size = true;
			break;
		case 'o':
			if (rma__parse_size(optarg, &a->offset) < 0)
				return tool_usage_error(a->cmd, "bad --offset '%s'", optarg);
			break;
		case 'f':
			if (!put)
				return tool_usage_error(a->cmd, "--fill is for put");
			if (parse_u64(optarg, &a->seed) < 0)
				return tool_usage_error(a->cmd, "bad --fill seed '%s'", optarg);
			a->fill = true;
			break;
		case 'F':
			if (!put)
				return tool_usage_error(a->cmd, "--file is for put (get uses --out)");
			a->file = optarg;
			break;
		case 'z':
			if (!put)
				return tool_usage_error(a->cmd, "--zero is for put");
			a->zero = true;
			break;
		case 'O':
			if (put)
				return tool_usage_error(a->cmd, "--out is for get");
			a->out = optarg;
			break;
		case 'T':
			if (strcmp(optarg, "none") == 0) {
				a->timeout_ms = RMA_NONE;
				break;
			}
			if (parse_duration_ms(optarg, &v) < 0 || v == 0 || v > INT32_MAX)
				return tool_usage_error(a->cmd, "bad --timeout '%s' (e.g. 500ms, 5s; > 0)",
							optarg);
			a->timeout_ms = (int)v;
			break;
		case 't': a->transports = optarg; break;
		case 'h':
			usage(stdout, a->kind);
			return -1;
		default:
			rc = common_option(a->cmd, c, optarg, &a->common);
			if (rc == 1)
				break;
			return rc ? rc : tool_getopt_error(a->cmd, c, argv);
		}
	}
	if (a->fill + !!a->file + a->zero > 1)
		return tool_usage_error(a->cmd, "--fill, --file and --zero exclude each other");
	if (put && !a->fill && !a->file && !a->zero)
		return tool_usage_error(a->cmd, "say what to write: --fill SEED, --file PATH, "
					"or --zero (nothing was written)");
	if (optind >= argc)
		return tool_usage_error(a->cmd, "missing TOKEN (the target's advertisement)");
	if (argc - optind == 3)
		return parse_triple(a, argv + optind);
	a->token = argv[optind++];
	if (optind < argc)
		return tool_usage_error(a->cmd, "unexpected argument '%s' (give a TOKEN, or "
					"ADDRESS-HEX RKEY REMOTE-ADDR)", argv[optind]);
	return 0;
}

/*
 * A token says how long its window is: check a size against it before the
 * buffer is allocated (and faulted in), which a size past the window's end
 * would make the library refuse only after.  A triple's length is unknown.
 */
static int check_window(const struct xfer_args *a, uint64_t remote_len)
{
	if (a->fabric)
		return 0;
	if (a->offset > remote_len || a->size > remote_len - a->offset)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s (%" PRIu64 " bytes at offset %"
				 PRIu64 "; the window is %" PRIu64 " bytes)",
				 rma_strerror(-ERANGE), a->size, a->offset, remote_len);
	return 0;
}

/* Work out how many bytes to move; returns 0 or an exit code. */
static int decide_size(struct xfer_args *a, const rma_remote *r)
{
	uint64_t remote_len = rma_remote_length(r);
	struct stat st;

	if (a->file && stat(a->file, &st) < 0)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s: %s", a->file, strerror(errno));
	/* A pipe, FIFO or /proc file stats as 0 bytes: read_stream() takes
	 * what it holds, up to --size or the window's end past the offset. */
	if (a->file && !S_ISREG(st.st_mode)) {
		a->stream = true;
		if (a->has_size) {
			if (check_window(a, remote_len))
				return EXIT_RUNTIME;
			a->stream_max = a->size;
		} else if (a->fabric) {
			/* The window's length is unknown: a stream with no end
			 * (/dev/zero) would be read until memory runs out. */
			return tool_fail(a->cmd, EXIT_USAGE, "%s is not a regular file: "
					 "--size is needed with a plain target", a->file);
		} else if (a->offset > remote_len) {
			return tool_fail(a->cmd, EXIT_RUNTIME, "offset %" PRIu64
					 " is beyond the advertised length %" PRIu64,
					 a->offset, remote_len);
		} else {
			a->stream_max = remote_len - a->offset;
		}
		return 0;
	}
	if (a->file && a->has_size && a->size > (uint64_t)st.st_size)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s has only %lld bytes, --size is %"
				 PRIu64, a->file, (long long)st.st_size, a->size);
	if (!a->has_size && a->file) {
		a->size = (uint64_t)st.st_size;
	} else if (!a->has_size) {
		if (a->offset > remote_len)
			return tool_fail(a->cmd, EXIT_RUNTIME, "offset %" PRIu64
					 " is beyond the advertised length %" PRIu64,
					 a->offset, remote_len);
		a->size = remote_len - a->offset;
	}
	if (check_window(a, remote_len))
		return EXIT_RUNTIME;
	if ((uint64_t)(size_t)a->size != a->size)
		return tool_fail(a->cmd, EXIT_RUNTIME, "size %" PRIu64 " too large", a->size);
	return 0;
}

static int read_file(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t done = 0;

	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = read(fd, (char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? -errno : -ENODATA; /* file shrank */

			close(fd);
			return err;
		}
		done += (size_t)n;
	}
	close(fd);
	return 0;
}

/* A stream's buffer starts this large and doubles as bytes come. */
#define STREAM_CHUNK ((size_t)64 << 10)

static ssize_t read_retry(int fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

/*
 * Read a --file that is no regular file to its end, at most a->stream_max
 * bytes, into a new buffer of *cap bytes; a->size becomes the count read.
 * Returns 0 or an exit code (reported).
 */
static int read_stream(struct xfer_args *a, unsigned char **bufp, size_t *cap)
{
	uint64_t max = a->stream_max;
	size_t len = max < STREAM_CHUNK ? (size_t)max : STREAM_CHUNK;
	size_t done = 0;
	unsigned char *buf;
	ssize_t n = 0;
	char extra;
	int fd, err = 0;

	fd = open(a->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s: %s", a->file, strerror(errno));
	buf = buffer_alloc(len);
	if (!buf) {
		err = errno;
		close(fd);
		return tool_fail(a->cmd, EXIT_RUNTIME, "allocating %zu bytes: %s", len,
				 strerror(err));
	}
	for (;;) {
		if (done == len) {
			size_t more = max - len < len ? (size_t)max : len * 2;
			void *p;

			if (len == max)
				break;
			p = mremap(buf, len, more, MREMAP_MAYMOVE);
			if (p == MAP_FAILED) {
				err = errno;
				break;
			}
			buf = p;
			len = more;
		}
		n = read_retry(fd, buf + done, len - done);
		if (n <= 0) {
			err = n < 0 ? errno : 0;
			break;
		}
		done += (size_t)n;
	}
	/* Filled to the window's end: one byte more would not fit in it. */
	if (!err && done == max && !a->has_size && !a->fabric) {
		n = read_retry(fd, &extra, 1);
		if (n < 0)
			err = errno;
	}
	close(fd);
	*bufp = buf;
	*cap = len;
	a->size = done;
	if (err)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s: %s", a->file, strerror(err));
	if (n > 0 && done == max && !a->has_size)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s holds more than the %" PRIu64
				 " bytes the window has past offset %" PRIu64, a->file,
				 max, a->offset);
	if (a->has_size && done < max)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s has only %zu bytes, --size is %"
				 PRIu64, a->file, done, max);
	return 0;
}

/* Write all of buf to fd and close it: 0 or -errno. */
static int write_close(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
		done += (size_t)n;
	}
	return close(fd) < 0 ? -errno : 0;
}

/* PATH written as it is: our own standard output (/dev/stdout, even when
 * that is a file opened for appending) through fd 1, else opened and
 * truncated. */
static int write_direct(const struct xfer_args *a, const struct stat *st,
			const void *buf, size_t len)
{
	struct stat o;
	int fd, err;

	if (fstat(STDOUT_FILENO, &o) == 0 && o.st_dev == st->st_dev &&
	    o.st_ino == st->st_ino)
		fd = dup(STDOUT_FILENO);
	else
		fd = open(a->out, O_WRONLY | O_TRUNC | O_CLOEXEC);
	err = fd < 0 ? -errno : write_close(fd, buf, len);
	if (err < 0)
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s: %s", a->out, strerror(-err));
	return 0;
}

/*
 * Save a get's bytes to --out.  A regular file, or a new one, is written
 * under a temporary name beside it and renamed over it, so that a failed
 * write leaves PATH as it was; anything else (a symlink such as
 * /dev/stdout, a FIFO, a file in a directory we may not write) is written
 * as it is.  Returns 0 or an exit code (reported).
 */
static int write_out(const struct xfer_args *a, const void *buf, size_t len)
{
	const char *slash;
	char *path = NULL, *tmp = NULL;
	struct stat st, lst;
	bool exists = stat(a->out, &st) == 0;
	mode_t mode;
	int fd, err;

	/* A symlink (/dev/stdout is one) or anything not a regular file is
	 * written through as it is: what it names may be a stream, and a
	 * rename would replace the link, not the file. */
	if (exists && (!S_ISREG(st.st_mode) ||
		       (lstat(a->out, &lst) == 0 && S_ISLNK(lst.st_mode))))
		return write_direct(a, &st, buf, len);
	path = strdup(a->out);
	if (!path) {
		err = errno;
		return tool_fail(a->cmd, EXIT_RUNTIME, "%s: %s", a->out, strerror(err));
	}
	slash = strrchr(path, '/');
	if (asprintf(&tmp, "%.*s.%s.XXXXXX", slash ? (int)(slash - path + 1) : 0,
		     path, slash ? slash + 1 : path) < 0) {
		tmp = NULL;
		err = -ENOMEM;
		goto fail;
	}
	if (exists) {
		mode = st.st_mode & 07777;
	} else {
		mode = umask(0);
		umask(mode);
		mode = 0644 & ~mode;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0 && exists && (errno == EACCES || errno == EPERM || errno == EROFS)) {
		/* A writable file in a directory we may not write: in place. */
		free(tmp);
		free(path);
		return write_direct(a, &st, buf, len);
	}
	if (fd < 0) {
		err = -errno;
		free(tmp);
		tmp = NULL; /* nothing made to remove */
		goto fail;
	}
	if (fchmod(fd, mode) < 0) {
		err = -errno;
		close(fd);
		goto fail;
	}
	err = write_close(fd, buf, len);
	if (err == 0 && rename(tmp, path) < 0)
		err = -errno;
	if (err == 0) {
		free(tmp);
		free(path);
		return 0;
	}
fail:
	if (tmp)
		unlink(tmp);
	free(tmp);
	free(path);
	return tool_fail(a->cmd, EXIT_RUNTIME, "%s: %s (%s %s)", a->out, strerror(-err),
			 a->out, exists ? "is left as it was" : "was not made");
}

/*
 * One line naming why the op failed, led by rma_strerror()'s text.  For a
 * single op the batch report says nothing more than that, so only the op's
 * own coordinates are added.
 */
static int report_failure(const struct xfer_args *a, int64_t result)
{
	const char *hint = a->fabric ? fabric_hint((int)result) : "";
	return tool_fail(a->cmd, EXIT_RUNTIME, "%s (%" PRIu64 " bytes at offset %"
			 PRIu64 ")%s", rma_strerror((int)result), a->size, a->offset,
			 hint);
}

static void print_result(const void *buf, uint64_t bytes, uint64_t ns)
{
	double ms = (double)ns / 1e6;
	double mbps = ns ? (double)bytes / ((double)ns / 1e9) / 1e6 : 0.0;

	printf("bytes: %" PRIu64 "\n", bytes);
	printf("time: %.3f ms\n", ms);
	printf("throughput: %.2f MB/s\n", mbps);
	printf("crc32c: %08" PRIx32 "\n", buffer_crc(buf, (size_t)bytes));
	fflush(stdout);
}

/* Connect first so that the time printed is the transfer's alone. */
static int connect_peer(const struct xfer_args *a, rma_engine *e,
			const rma_remote *r)
{
	int rc = rma_peer_connect(e, r, a->timeout_ms); /* 0: engine default */

	if (rc < 0 && rc != -EOPNOTSUPP && rc != -EISCONN && rc != -EALREADY)
		return tool_fail(a->cmd, EXIT_RUNTIME, "connecting to the target: %s",
				 rma_strerror(rc));
	return 0;
}

static int transfer(const struct xfer_args *a, rma_engine *e,
		    const rma_remote *r, unsigned char *buf)
{
	struct rma_op op = {
		.kind = a->kind,
		.remote = r,
		.remote_off = a->offset,
		.len = a->size,
	};
	int64_t result = 0;
	uint64_t t0 = 0, t1 = 0;
	int rc;

	rc = rma_region_register(e, buf, a->size ? (size_t)a->size : 1, 0, &op.local);
	if (rc < 0)
		return tool_fail(a->cmd, EXIT_RUNTIME, "registering the local buffer: %s",
				 rma_strerror(rc));
	rc = connect_peer(a, e, r);
	if (rc == 0) {
		t0 = now_ns();
		rc = rma_submit(e, &op, 1, a->timeout_ms, &result, NULL, 0);
		t1 = now_ns();
		if (rc < 0 && result >= 0)
			result = rc; /* the call itself failed */
		if (rc != 0)
			rc = report_failure(a, result);
	}
	rma_region_release(op.local);
	if (rc)
		return rc;
	if (a->out && (rc = write_out(a, buf, (size_t)result)))
		return rc;
	print_result(buf, (uint64_t)result, t1 - t0);
	return EXIT_OK;
}

/* Everything after argument parsing: remote, buffer, engine, transfer. */
static int run(struct xfer_args *a)
{
	struct rma_config cfg;
	rma_remote *r;
	rma_engine *e = NULL;
	unsigned char *buf = NULL;
	size_t buf_len = 0;
	int rc;

	if (a->fabric) /* the window's length is unknown: 0 */
		rc = rma_remote_from_fabric(a->transports, a->fab.addr, a->fab.addr_len,
					    a->fab.rkey, a->fab.raddr, 0, &r);
	else
		rc = rma_remote_parse(a->token, &r);
	if (rc < 0)
		return tool_fail(a->cmd, EXIT_RUNTIME, "invalid %s: %s",
				 a->fabric ? "fabric address" : "advertisement",
				 rma_strerror(rc));
	rc = decide_size(a, r);
	if (rc)
		goto out;
	if (a->stream) {
		rc = read_stream(a, &buf, &buf_len);
		if (rc)
			goto out;
	} else {
		buf_len = (size_t)a->size;
		buf = buffer_alloc(buf_len);
	}
	if (!buf) {
		rc = tool_fail(a->cmd, EXIT_RUNTIME, "allocating %" PRIu64 " bytes: %s",
			       a->size, strerror(errno));
		goto out;
	}
	if (a->fill)
		fill_pattern(buf, (size_t)a->size, a->seed);
	if (a->file && !a->stream && (rc = read_file(a->file, buf, (size_t)a->size)) < 0) {
		rc = tool_fail(a->cmd, EXIT_RUNTIME, "%s: %s", a->file, strerror(-rc));
		goto out;
	}
	rma_config_init(&cfg);
	cfg.transports = a->transports;
	rc = common_apply(a->cmd, &a->common, &cfg);
	if (rc)
		goto out;
	rc = rma_engine_create(&cfg, &e);
	if (rc < 0) {
		rc = tool_fail(a->cmd, EXIT_RUNTIME, "creating the engine: %s",
			       rma_strerror(rc));
		e = NULL;
		goto out;
	}
	rc = transfer(a, e, r, buf);
out:
	if (e)
		rma_engine_destroy(e);
	buffer_free(buf, buf_len);
	rma_remote_free(r);
	return rc;
}

static int cmd_xfer(int argc, char **argv, unsigned kind)
{
	struct xfer_args a = {
		.cmd = kind == RMA_OP_PUT ? "put" : "get",
		.kind = kind,
	};
	int rc = parse_args(argc, argv, &a);

	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	return run(&a);
}

int cmd_put(int argc, char **argv)
{
	return cmd_xfer(argc, argv, RMA_OP_PUT);
}

int cmd_get(int argc, char **argv)
{
	return cmd_xfer(argc, argv, RMA_OP_GET);
}
