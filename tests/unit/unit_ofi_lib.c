/* libfabric is loaded by ofi's probe, never linked (ofi/lib.c): neither
 * this program (librma's objects) nor librma.so brings it in at start,
 * nor does a default engine on a host without an RDMA device (ofi would
 * not start there); a library that cannot be loaded leaves ofi
 * unavailable with the reason, an engine asked for ofi fails and one
 * without it works; loaded, each symbol is the library's default
 * version, the one the linker binds. */
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
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
