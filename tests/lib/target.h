/*
 * target.h - a forked target process for two-process tests.
 *
 * The child creates an engine (its own progress thread), registers
 *   "rw"   opts.rw_size bytes, remote read+write, filled with opts.rw_seed
 *   "ro"   1 MiB, remote read only, pattern TARGET_RO_SEED
 *   "wo"   1 MiB, remote write only, zeros
 *   "none" 64 KiB, no remote access
 * and then answers one-line commands on a pipe (see target.c).
 */
#ifndef RMA_TEST_TARGET_H
#define RMA_TEST_TARGET_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define TARGET_SMALL (1u << 20)
#define TARGET_NONE_SIZE (64u << 10)
#define TARGET_RO_SEED 11

struct target_opts {
	const char *transports; /* engine transports */
	const char *listen;     /* NULL = default */
	const char *secret;     /* NULL = none */
	size_t rw_size;         /* 0 = 64 MiB */
	uint64_t rw_seed;       /* pattern of "rw"; 0 = zeros */
	bool alloc;             /* regions from rma_region_alloc (memfd) */
	const char *netns;      /* NULL, or a network namespace file
				 * (/run/netns/NAME) the target joins first */
};

struct target {
	pid_t pid;
	int cmd, resp;
};

/* Start it and wait until it serves.  0, or 77 (TEST_SKIP) if the transport
 * is not available here (reason printed), or -errno. */
int target_start(struct target *t, const struct target_opts *o);

/* Send a command; the reply's text after "ok " lands in reply.  Returns 0
 * on "ok", else fails the test (printing the reply). */
void target_cmd(struct target *t, char *reply, size_t cap, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));

/* Like target_cmd, but a failure returns -1 with the reply's text after
 * "err " in reply. */
int target_try(struct target *t, char *reply, size_t cap, const char *fmt,
	       ...) __attribute__((format(printf, 4, 5)));

/* Advertise a window of a target region (len 0 = to its end). */
void target_token(struct target *t, const char *region, uint64_t off,
		  uint64_t len, unsigned access, char *tok, size_t cap);
uint32_t target_crc(struct target *t, const char *region, uint64_t off,
		    uint64_t len);

/* Ask it to exit cleanly; SIGKILL after 5 s. */
void target_stop(struct target *t);

#endif
