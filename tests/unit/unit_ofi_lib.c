/* libfabric is loaded by ofi's probe, never linked (ofi/lib.c): neither
 * this program (librma's objects) nor librma.so brings it in at start,
 * nor does a default engine on a host without an RDMA device (ofi would
 * not start there); a library that cannot be loaded leaves ofi
 * unavailable with the reason, an engine asked for ofi fails and one
 * without it works; loaded, each symbol is the library's default
 * version, the one the linker binds.  Loading it turns off rxm's shared
 * receive context (FI_OFI_RXM_USE_SRX=0) where that is safe, and the
 * provider takes it; never over the user's value, with another thread
 * running, or when the program loaded libfabric itself. */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "transport/ofi/ofi.h"

static bool fabric_loaded(void)
{
	void *h = dlopen(RMA_FI_SONAME, RTLD_NOW | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	return h != NULL;
}

static int engine(const char *transports)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = transports;
	int rc = rma_engine_create(&cfg, &e);
	if (rc == 0)
		rma_engine_destroy(e);
	return rc;
}

static bool rdma_device(void)
{
	glob_t g;
	bool dev = glob("/sys/class/infiniband/*", 0, NULL, &g) == 0;
	if (dev)
		globfree(&g);
	return dev;
}

/* In children: this process's loader has not run yet, and runs once. */
static void default_engine(void)
{
	pid_t pid = fork();
	int st;
	CHECK(pid >= 0);
	if (pid == 0) {
		CHECK_RC(engine(NULL), 0);
		CHECK(!fabric_loaded());
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

static void unloadable(const struct rma__transport_ops *ofi)
{
	pid_t pid = fork();
	int st;
	CHECK(pid >= 0);
	if (pid == 0) {
		const char *why = NULL;
		rma__fi_soname = "librma-test-no-such-libfabric.so.1";
		CHECK_RC(ofi->probe(&why), -EOPNOTSUPP);
		CHECKF(why && strstr(why, "cannot be loaded") &&
		       strstr(why, "no-such-libfabric"), "why: %s", why);
		CHECK(rma__fi.getinfo == NULL);
		CHECK_RC(engine("ofi:tcp"), -EOPNOTSUPP);
		CHECK_RC(engine("tcp"), 0);
		CHECK_RC(engine(NULL), 0); /* every available one: ofi skipped */
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

/* Sanitizers' shadow memory multiplies what a memset makes resident. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static long status_field(const char *name)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	size_t n = strlen(name);
	long v = -1;
	CHECK(f);
	while (fgets(line, sizeof line, f))
		if (strncmp(line, name, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static long rss_kb(void)
{
	return status_field("VmRSS");
}

/* What an ofi:tcp engine (its serving endpoint) adds to the resident set,
 * in MB: with a shared receive context tcp;ofi_rxm posts 4096 receives of
 * 16 KiB at fi_enable, without one none until a connection; -1 where the engine does not start or a
 * sanitizer's shadow memory would swell the figure. */
static long engine_mb(void)
{
	struct rma_config cfg;
	rma_engine *e;
	long before = rss_kb(), mb;
#ifdef SANITIZED
	return -1;
#endif
	rma_config_init(&cfg);
	cfg.transports = "ofi:tcp";
	if (rma_engine_create(&cfg, &e))
		return -1;
	mb = (rss_kb() - before) / 1024;
	rma_engine_destroy(e);
	return mb;
}

static void *parked(void *arg)
{
	char c;
	(void)!read(*(int *)arg, &c, 1);
	return NULL;
}

enum { RXM_SET, RXM_USER, RXM_THREAD, RXM_PROGRAM };

static void rxm_buffers(int how)
{
	pid_t pid = fork();
	int st;
	CHECK(pid >= 0);
	if (pid == 0) {
		const char *why = NULL, *v;
		int fds[2];
		pthread_t t;
		unsetenv("FI_OFI_RXM_USE_SRX");
		unsetenv("FI_UNIVERSE_SIZE");
		if (how == RXM_USER) {
			setenv("FI_OFI_RXM_USE_SRX", "1", 1);
			setenv("FI_UNIVERSE_SIZE", "300", 1);
		}
		if (how == RXM_THREAD) {
			CHECK(pipe(fds) == 0);
			CHECK(pthread_create(&t, NULL, parked, &fds[0]) == 0);
		}
		if (how == RXM_PROGRAM)
			CHECKF(dlopen(RMA_FI_SONAME, RTLD_NOW | RTLD_LOCAL), "%s", dlerror());
		/* TSan's runtime runs a thread of its own from the start. */
		int expect = how == RXM_SET && status_field("Threads") != 1 ?
			     RXM_THREAD : how;
		CHECKF(rma__fi_load(&why) == 0, "%s", why);
		v = getenv("FI_OFI_RXM_USE_SRX");
		const char *u = getenv("FI_UNIVERSE_SIZE");
		/* Measured: 5 MB without the shared context, 70 with. */
		long mb = engine_mb();
		switch (expect) {
		case RXM_SET:
			CHECKF(v && strcmp(v, "0") == 0, "%s", v ? v : "unset");
			CHECKF(u && strcmp(u, "64") == 0, "universe %s", u ? u : "unset");
			CHECKF(mb == -1 || mb < 25, "engine %ld MB", mb);
			break;
		case RXM_USER:
			CHECKF(v && strcmp(v, "1") == 0, "%s", v ? v : "unset");
			CHECKF(u && strcmp(u, "300") == 0, "universe %s", u ? u : "unset");
			CHECKF(mb == -1 || mb >= 55, "engine %ld MB", mb);
			break;
		default:
			CHECKF(!v, "set to %s", v);
			CHECKF(!u, "universe set to %s", u);
			CHECKF(mb == -1 || mb >= 55, "engine %ld MB", mb);
		}
		if (how == RXM_THREAD) {
			CHECK(write(fds[1], "x", 1) == 1);
			pthread_join(t, NULL);
		}
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "case %d: child status %#x",
	       how, st);
}

int main(void)
{
	const struct rma__transport_ops *ofi = rma__transport_by_name("ofi", 3);
	const char *why = NULL;

	if (!ofi || !ofi->init)
		SKIP("ofi not built");
	CHECK(!fabric_loaded());
	void *lib = dlopen(RMA_LIB_PATH, RTLD_NOW | RTLD_LOCAL);
	CHECKF(lib, "%s", dlerror());
	CHECK(!fabric_loaded());
	dlclose(lib);

	if (!rdma_device())
		default_engine();
	unloadable(ofi);
	for (int how = RXM_SET; how <= RXM_PROGRAM; how++)
		rxm_buffers(how);

	/* Built with ofi, so libfabric is installed: not loading it fails. */
	CHECKF(rma__fi_load(&why) == 0, "%s", why);
	CHECK(fabric_loaded());
	void *h = dlopen(RMA_FI_SONAME, RTLD_NOW | RTLD_NOLOAD);
	CHECK(h);
	CHECK((void *)rma__fi.getinfo == dlsym(h, "fi_getinfo"));
	CHECK((void *)rma__fi.freeinfo == dlsym(h, "fi_freeinfo"));
	CHECK((void *)rma__fi.dupinfo == dlsym(h, "fi_dupinfo"));
	CHECK((void *)rma__fi.fabric == dlsym(h, "fi_fabric"));
	CHECK((void *)rma__fi.strerror == dlsym(h, "fi_strerror"));
	CHECK(strcmp(rma__fi.strerror(FI_EAGAIN), "") != 0);
	struct fi_info *info = rma__fi.dupinfo(NULL);
	CHECK(info && info->ep_attr);
	rma__fi.freeinfo(info);
	dlclose(h);
	return 0;
}
