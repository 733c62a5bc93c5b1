/* Engine configuration: bad structs and flags are refused with -EINVAL, a
 * transport list naming nothing built in is refused, and the documented
 * RMA_* environment overrides win over the struct (bad values refused). */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "testlib.h"

static int create(struct rma_config *cfg)
{
	rma_engine *e;
	int rc = rma_engine_create(cfg, &e);
	if (rc == 0)
		rma_engine_destroy(e);
	return rc;
}

static struct rma_config base(void)
{
	struct rma_config cfg;
	rma_config_init(&cfg);
	cfg.transports = "tcp";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	return cfg;
}

int main(void)
{
	struct rma_config cfg;
	rma_engine *e = (rma_engine *)&cfg;

	test_watchdog(60);
	rma_set_log(RMA_LOG_ERROR, NULL, NULL);
	cfg = base();
	CHECK_EQ(cfg.size, sizeof cfg);
	CHECK_RC(create(&cfg), 0);
	CHECK_RC(rma_engine_create(&cfg, NULL), -EINVAL);

	cfg = base();
	cfg.size = 3;
	CHECK_RC(rma_engine_create(&cfg, &e), -EINVAL);
	CHECK(e == (rma_engine *)&cfg); /* not written on failure */
	cfg = base();
	cfg.flags = 1u << 30;
	CHECK_RC(create(&cfg), -EINVAL);
	cfg = base();
	cfg.max_msg_size = 100;
	CHECK_RC(create(&cfg), -EINVAL);
	cfg = base();
	cfg.timeout_ms = -5;
	CHECK_RC(create(&cfg), -EINVAL);
	cfg = base();
	cfg.transports = "no-such-transport";
	CHECK(create(&cfg) < 0);
	cfg = base();
	cfg.transports = "tcp,no-such-transport";
	CHECK(create(&cfg) < 0);
	cfg = base();
	cfg.listen = "not an address";
	CHECK(create(&cfg) < 0);

	/* Environment overrides win over the struct. */
	cfg = base();
	setenv("RMA_TRANSPORTS", "no-such-transport", 1);
	CHECK(create(&cfg) < 0);
	unsetenv("RMA_TRANSPORTS");
	CHECK_RC(create(&cfg), 0);
	setenv("RMA_LISTEN", "not an address", 1);
	CHECK(create(&cfg) < 0);
	unsetenv("RMA_LISTEN");
	static const char *bad_ms[] = { "abc", "-1", "0", "12x", "" };
	for (size_t i = 0; i < sizeof bad_ms / sizeof bad_ms[0]; i++) {
		setenv("RMA_TIMEOUT_MS", bad_ms[i], 1);
		int rc = create(&cfg);
		if (bad_ms[i][0])
			CHECKF(rc == -EINVAL, "RMA_TIMEOUT_MS='%s': %d", bad_ms[i], rc);
		else
			CHECK_RC(rc, 0); /* empty = unset */
	}
	setenv("RMA_TIMEOUT_MS", "2500", 1);
	CHECK_RC(create(&cfg), 0);
	unsetenv("RMA_TIMEOUT_MS");
	setenv("RMA_STRIPES", "0", 1);
	CHECK_RC(create(&cfg), -EINVAL);
	unsetenv("RMA_STRIPES");
	setenv("RMA_LOG", "loud", 1);
	CHECK_RC(create(&cfg), -EINVAL);
	setenv("RMA_LOG", "error", 1);
	CHECK_RC(create(&cfg), 0);
	unsetenv("RMA_LOG");
	printf("ok\n");
	return 0;
}
