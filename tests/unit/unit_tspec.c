/* Transport specs and options: "name[:opt=value...]" with values that hold
 * colons, a bare first word for the first option, unknown names and options
 * refused, per-instance levels, several instances of one transport, the old
 * config fields as tcp's defaults, and rma_transports() listing options. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "fake_transport.h"
#include "testlib.h"

static void parse(const char *spec, int want, const char *opt, const char *val)
{
	struct rma__topts o;
	CHECK_RC(rma__tspec_parse(spec, strlen(spec), &o), want);
	if (want == 0 && opt) {
		const char *v = rma__topt(&o, opt);
		CHECKF(v && !strcmp(v, val), "%s: %s = %s, expected %s", spec,
		       opt, v ? v : "(none)", val);
	}
}

static rma_engine *engine(const char *transports, int want)
{
	struct rma_config cfg;
	rma_engine *e = NULL;
	rma_config_init(&cfg);
	cfg.transports = transports;
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), want);
	return e;
}

int main(void)
{
	test_watchdog(60);
	fake_register();
	fake_reset(0);

	parse("tcp", 0, NULL, NULL);
	parse("tcp:listen=0.0.0.0:7000:stripes=4", 0, "listen", "0.0.0.0:7000");
	parse("tcp:listen=0.0.0.0:7000:stripes=4", 0, "stripes", "4");
	parse("tcp:stripes=2:listen=[::1]:0", 0, "listen", "[::1]:0");
	parse("tcp:127.0.0.1:0", 0, "listen", "127.0.0.1:0"); /* bare word */
	parse("fake:nic", 0, "level", "nic");
	parse("nosuch", -ENOENT, NULL, NULL);
	parse("tcpx:listen=1", -ENOENT, NULL, NULL);
	parse("tcp:bogus=1", -EINVAL, NULL, NULL);
	parse("tcp:stripes=1:stripes=2", -EINVAL, NULL, NULL);

	/* Values are checked by the transport. */
	engine("tcp:stripes=0", -EINVAL);
	engine("tcp:stripes=x", -EINVAL);
	engine("tcp:listen=nohost", -EINVAL);
	engine("tcp,nosuch", -ENOENT);
	engine("", -EINVAL);

	/* tcp on a port of our choosing, through its option. */
	int port = test_free_port();
	char spec[64];
	snprintf(spec, sizeof spec, "tcp:listen=127.0.0.1:%d:stripes=2", port);
	rma_engine *e = engine(spec, 0);
	uint8_t addr[RMA_ADVERTISEMENT_MAX];
	int n = rma_engine_address(e, addr, sizeof addr);
	CHECK(n >= 8 + 3 + 7);
	/* id, then wire id 1, length, tcp blob: family 4, port (LE). */
	CHECK_EQ(addr[8], 1);
	CHECK_EQ(addr[11], 4);
	CHECK_EQ(addr[12] | addr[13] << 8, port);
	rma_engine_destroy(e);

	/* Two instances of one transport, each with its own level. */
	e = engine("fake:level=tcp,fake:level=nic", 0);
	char *buf = test_alloc(4096);
	rma_region *r;
	CHECK_RC(rma_region_register(e, buf, 4096, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = fake_remote(r, 0, 0);
	CHECK_EQ(rem->nent, 2);
	CHECK_EQ(rem->ent[0].instance, 0);
	CHECK_EQ(rem->ent[1].instance, 1);
	struct rma_route_info ri;
	CHECK_RC(rma_peer_route(e, rem, &ri), 0);
	CHECK(!strcmp(ri.transport, "fake:level=nic"));
	CHECK_EQ(ri.level, RMA_LEVEL_NIC);
	rma_remote_free(rem);
	rma_engine_destroy(e);

	/* rma_transports() says what each one takes. */
	struct rma_transport_info info[16];
	int nt = rma_transports(info, 16);
	int seen = 0;
	for (int i = 0; i < nt && i < 16; i++)
		if (!strcmp(info[i].name, "tcp")) {
			CHECK(strstr(info[i].options, "listen") != NULL);
			CHECK(strstr(info[i].options, "stripes") != NULL);
			seen = 1;
		}
	CHECK(seen);
	return 0;
}
