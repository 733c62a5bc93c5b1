/*
 * lib.c - libfabric, loaded when the ofi transport is first probed.
 *
 * Linked in, libfabric and its providers' libraries load with every
 * program that uses librma, whatever transports it asks for; Debian's
 * pulls in libpsm2 and libinfinipath, whose constructors sleep about
 * 200 ms between them at each start, even with no such hardware.  Loaded
 * here, only a process that probes ofi pays, and librma runs on a host
 * without libfabric (ofi then says why it is unavailable).
 *
 * Only five of the calls used are libfabric's symbols; the rest of its
 * API is inline calls through each object's ops.  Each is bound at the
 * version the build's linker would have chosen (RMA_FI_VER_*, read from
 * the library at configure time): libfabric keeps old versions of
 * fi_getinfo and its kin for binaries built with older struct layouts,
 * and a plain dlsym would return the newest, whatever our headers say.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "transport/ofi/ofi.h"

struct rma__fi rma__fi;
const char *rma__fi_soname = RMA_FI_SONAME;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char why[320];

static void *sym(void *h, const char *name, const char *ver)
{
	void *p = dlvsym(h, name, ver);
	if (!p && !why[0])
		snprintf(why, sizeof why, "%s has no %s@%s (built against "
			 "libfabric %s)", rma__fi_soname, name, ver,
			 RMA_FI_BUILT);
	return p;
}

static void load(void)
{
	/* RTLD_LOCAL: nothing of it leaks into the program's namespace.
	 * Never closed: providers start threads and register handlers. */
	void *h = dlopen(rma__fi_soname, RTLD_NOW | RTLD_LOCAL);
	struct rma__fi f;

	if (!h) {
		snprintf(why, sizeof why, "libfabric cannot be loaded (%s; "
			 "install libfabric1)", dlerror());
		return;
	}
#define BIND(x, ver) f.x = (__typeof__(f.x))sym(h, "fi_" #x, ver)
	BIND(getinfo, RMA_FI_VER_GETINFO);
	BIND(freeinfo, RMA_FI_VER_FREEINFO);
	BIND(dupinfo, RMA_FI_VER_DUPINFO);
	BIND(fabric, RMA_FI_VER_FABRIC);
	BIND(strerror, RMA_FI_VER_STRERROR);
#undef BIND
	if (why[0]) {
		dlclose(h);
		return;
	}
	rma__fi = f;
}

int rma__fi_load(const char **reason)
{
	pthread_once(&once, load);
	if (!rma__fi.getinfo) {
		*reason = why;
		return -EOPNOTSUPP;
	}
	return 0;
}
