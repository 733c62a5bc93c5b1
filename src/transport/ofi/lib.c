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
#include <stdlib.h>
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

/* The threads of this process (/proc/self/status), or -1. */
static int threads(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	int n = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

/*
 * tcp;ofi_rxm gives each endpoint a shared receive context with 4096
 * eager-message buffers of 16 KiB posted at fi_enable, from pools grown
 * 1024 at a time: about 70 MB per endpoint, zeroed there (tens of
 * milliseconds), connected or not.  rma sends no messages.  Without the
 * shared context (FI_OFI_RXM_USE_SRX=0) each connection posts 128 of its
 * own, one 17 MB pool for an endpoint's first, and an endpoint without
 * connections (a serving one not yet used) holds none.  Smaller buffers
 * (FI_OFI_RXM_BUFFER_SIZE) would save more, but rxm peers refuse to
 * connect unless their eager limits match, which follow that size (on
 * tcp unless FI_OFI_RXM_EAGER_LIMIT is set too; on verbs always).  The
 * provider reads the variable from the environment only, when it
 * initialises (our first fi_getinfo), so it is set here, where
 * that is safe and surprises nobody: it is unset, libfabric is not yet in
 * the process (else the program may use it for its own messages), and no
 * other thread runs (setenv may free the array a concurrent getenv
 * reads).  Children the program starts later inherit it, as any variable.
 */
/*
 * rxm sizes one message CQ per endpoint for every peer it may have: the
 * universe size (FI_UNIVERSE_SIZE, 256 by default) times its per-connection
 * send and receive queues (128 each), 65,536 entries, past what some
 * devices allow (rxe's max_cqe is 32,767): verbs;ofi_rxm then fails
 * fi_enable with EINVAL.  64 keeps that within every device's limit; a
 * connection's queues, not the universe, bound what is in flight.  Read
 * once, like the variable above.
 */
static const struct { const char *name, *value, *cost; } rxm_env[] = {
	{ "FI_OFI_RXM_USE_SRX", "0", "each ofi:tcp endpoint then holds about "
	  "70 MB of message buffers rma does not use" },
	{ "FI_UNIVERSE_SIZE", "64", "ofi:verbs endpoints may then fail to "
	  "start on devices with small completion queues" },
};

static void rxm_buffers(void)
{
	const char *skip = NULL;
	void *h;

	if ((h = dlopen(rma__fi_soname, RTLD_NOW | RTLD_NOLOAD))) {
		dlclose(h);
		skip = "the program loaded libfabric itself";
	} else if (threads() != 1) {
		skip = "other threads run";
	}
	for (unsigned i = 0; i < RMA_ARRAY_SIZE(rxm_env); i++) {
		const char *no = skip;
		if (getenv(rxm_env[i].name))
			continue;
		if (!no && setenv(rxm_env[i].name, rxm_env[i].value, 0))
			no = strerror(errno);
		if (no)
			rma__info("ofi: %s left unset (%s): %s; %s=%s before "
				  "the first engine avoids it", rxm_env[i].name,
				  no, rxm_env[i].cost, rxm_env[i].name,
				  rxm_env[i].value);
	}
}

static void load(void)
{
	rxm_buffers();
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
