/*
 * integ_fault.h - shared by the fault matrix (integ_fault_*.c).
 *
 * Each fault test is written once against the public API and takes the
 * transport spec as argv[1] ("tcp" when absent), so a new transport is one
 * more entry in RMA_FAULT_TRANSPORTS (tests/CMakeLists.txt).  Bounds are in
 * seconds, never tighter: the tests must hold on a loaded 2-core machine.
 */
#ifndef RMA_INTEG_FAULT_H
#define RMA_INTEG_FAULT_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "integ_common.h"

static inline const char *fault_transport(int argc, char **argv)
{
	const char *tr = argc > 1 ? argv[1] : "tcp";
	printf("transport: %s\n", tr);
	return tr;
}

static inline rma_engine *fault_engine(const char *tr)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = tr;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

/* Wait for n completions up to timeout_ms; returns how many arrived. */
static inline int fault_collect(rma_engine *e, struct rma_completion *c,
				int n, int timeout_ms)
{
	int got = 0;
	int64_t end = test_now_ms() + timeout_ms;
	while (got < n && test_now_ms() < end) {
		int r = rma_poll(e, c + got, (size_t)(n - got));
		CHECK_OK(r);
		got += r;
		if (!r)
			test_sleep_ms(1);
	}
	return got;
}

/* Open file descriptors of a process (entries of /proc/PID/fd). */
static inline int fault_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		FAIL("opendir %s: %s", path, strerror(errno));
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Resident memory of a process in KiB (VmRSS of /proc/PID/status). */
static inline long fault_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		FAIL("fopen %s: %s", path, strerror(errno));
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	CHECKF(kb >= 0, "no VmRSS in %s", path);
	return kb;
}

static inline const char *fault_err(int64_t r)
{
	return r < 0 ? rma_strerror((int)r) : "ok";
}

#endif
