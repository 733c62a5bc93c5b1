/*
 * integ_shm_select - which route a same-host peer takes.
 *
 *   same     a target with every transport advertises shm and tcp; a
 *            default initiator routes to shm, RMA_TRANSPORTS=tcp forces tcp,
 *            and either moves the bytes.
 *   pidns    a target in another pid namespace: shm declines it
 *            (reachable), tcp carries the ops.  Needs root (else skip).
 *   full     an owner with every grant-table slot taken (4096 windows)
 *            advertises the next window by tcp alone; release frees the
 *            slots for shm again.  One process, two engines.
 *   secret   a target with a shared secret: shm checks it as tcp does (the
 *            setup handshake); a wrong one is refused on every route.
 *   netns    a target in another network namespace, joined by a veth pair
 *            (its shm socket is out of reach although boot and pid
 *            namespace match): the connect fails, ops fall back to tcp with
 *            one log line.  Needs root and ip(8); runs in a private network
 *            namespace of its own, leaving the host's untouched.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rma.h"
#include "target.h"
#include "testlib.h"

#define SIZE (1u << 20)

static rma_engine *engine_with(const char *transports)
{
	struct rma_config cfg;
	rma_engine *e;
	rma_config_init(&cfg);
	cfg.transports = transports;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

static const char *route_of(rma_engine *e, const rma_remote *r)
{
	static struct rma_route_info ri;
	CHECK_RC(rma_peer_route(e, r, &ri), 0);
	return ri.transport;
}

/* A put of SIZE bytes of pattern seed, then a get that must match. */
static void roundtrip(rma_engine *e, const rma_remote *r, uint64_t seed)
{
	char *buf = test_alloc(2 * SIZE);
	rma_region *l;
	int64_t res[2];
	CHECK_RC(rma_region_register(e, buf, 2 * SIZE, 0, &l), 0);
	test_fill(buf, SIZE, seed);
	struct rma_op put = { .kind = RMA_OP_PUT, .local = l, .remote = r,
			      .len = SIZE };
	struct rma_op get = { .kind = RMA_OP_GET, .local = l, .local_off = SIZE,
			      .remote = r, .len = SIZE };
	CHECK_RC(rma_submit(e, &put, 1, 20000, res, NULL, 0), 0);
	CHECK_RC(rma_submit(e, &get, 1, 20000, res + 1, NULL, 0), 0);
	CHECK_RC(res[0], SIZE);
	CHECK_RC(res[1], SIZE);
	CHECK_EQ(test_check_fill(buf + SIZE, SIZE, seed), -1);
	CHECK_RC(rma_region_release(l), 0);
	test_free(buf, 2 * SIZE);
}

static int case_same(void)
{
	static struct target_opts o = { .rw_size = SIZE }; /* every transport */
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	struct target t;
	rma_remote *r;
	int rc;

	if ((rc = target_start(&t, &o)))
		return rc;
	target_token(&t, "rw", 0, 0, 0, tok, sizeof tok);
	CHECK_RC(rma_remote_parse(tok, &r), 0);

	rma_engine *e = engine_with(NULL);
	CHECKF(!strcmp(route_of(e, r), "shm"), "default route: %s", route_of(e, r));
	roundtrip(e, r, 1);
	char *want = test_alloc(SIZE);
	test_fill(want, SIZE, 1);
	CHECK_EQ_U64(target_crc(&t, "rw", 0, SIZE), rma_crc32c(0, want, SIZE));
	rma_engine_destroy(e);

	/* The advertisement has a tcp entry too: forced, tcp carries it. */
	setenv("RMA_TRANSPORTS", "tcp", 1);
	e = engine_with(NULL);
	unsetenv("RMA_TRANSPORTS");
	CHECKF(!strcmp(route_of(e, r), "tcp"), "RMA_TRANSPORTS=tcp route: %s",
	       route_of(e, r));
	roundtrip(e, r, 2);
	rma_engine_destroy(e);

	rma_remote_free(r);
	target_stop(&t);
	return 0;
}

static rma_remote *advertised(rma_region *r, uint64_t off)
{
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	rma_remote *rem;
	CHECK_OK(rma_advertise_text(r, off, 1, 0, tok, sizeof tok));
	CHECK_RC(rma_remote_parse(tok, &rem), 0);
	return rem;
}

static int case_full(void)
{
	const unsigned slots = 4096;
	rma_engine *owner = engine_with(NULL), *e = engine_with(NULL);
	char *mem = test_alloc(2 * slots), *buf = test_alloc(4096);
	rma_region *r, *l;
	rma_remote *rem;

	CHECK_RC(rma_region_register(e, buf, 4096, 0, &l), 0);
	/* The region's whole-extent grant takes one slot; windows the rest. */
	CHECK_RC(rma_region_register(owner, mem, 2 * slots, RMA_ACCESS_REMOTE_RW, &r), 0);
	for (unsigned i = 0; i < slots - 1; i++) {
		rem = advertised(r, i);
		if (i == 0 || i == slots - 2)
			CHECKF(!strcmp(route_of(e, rem), "shm"), "window %u: %s", i,
			       route_of(e, rem));
		rma_remote_free(rem);
	}
	rem = advertised(r, slots); /* no slot left */
	CHECKF(!strcmp(route_of(e, rem), "tcp"), "window past the table: %s",
	       route_of(e, rem));
	int64_t res;
	struct rma_op op = { .kind = RMA_OP_GET, .local = l, .remote = rem,
			     .len = 1 };
	CHECK_RC(rma_submit(e, &op, 1, 10000, &res, NULL, 0), 0);
	CHECK_RC(res, 1);
	rma_remote_free(rem);
	CHECK_RC(rma_region_release(r), 0);

	CHECK_RC(rma_region_register(owner, mem, 2 * slots, RMA_ACCESS_REMOTE_RW, &r), 0);
	rem = advertised(r, 5);
	CHECKF(!strcmp(route_of(e, rem), "shm"), "after release: %s", route_of(e, rem));
	rma_remote_free(rem);
	rma_engine_destroy(e);
	rma_engine_destroy(owner);
	return 0;
}

static int case_secret(void)
{
	static struct target_opts o = { .rw_size = SIZE, .secret = "open sesame" };
	char tok[RMA_ADVERTISEMENT_TEXT_MAX];
	struct target t;
	struct rma_config cfg;
	rma_remote *r;
	rma_engine *e;
	int rc;

	if ((rc = target_start(&t, &o)))
		return rc;
	target_token(&t, "rw", 0, 0, 0, tok, sizeof tok);
	CHECK_RC(rma_remote_parse(tok, &r), 0);

	/* The right secret: shm. */
	rma_config_init(&cfg);
	cfg.secret = "open sesame";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	roundtrip(e, r, 4);
	CHECKF(!strcmp(route_of(e, r), "shm"), "route: %s", route_of(e, r));
	rma_engine_destroy(e);

	/* A wrong one, shm alone: refused. */
	rma_config_init(&cfg);
	cfg.secret = "guess";
	cfg.transports = "shm";
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	char *buf = test_alloc(4096);
	rma_region *l;
	int64_t res;
	CHECK_RC(rma_region_register(e, buf, 4096, 0, &l), 0);
	struct rma_op op = { .kind = RMA_OP_PUT, .local = l, .remote = r,
			     .len = 4096 };
	CHECK_RC(rma_submit(e, &op, 1, 10000, &res, NULL, 0), 1);
	CHECK_RC(res, -EACCES);
	rma_engine_destroy(e);

	rma_remote_free(r);
	target_stop(&t);
	return 0;
}

/* ---- a target in other namespaces, relayed by a child ---- */

/* The child: enter the namespace(s), start a target, pass its token up,
 * serve "crc" relays until "stop". */
struct relay_opts {
	int flags;          /* CLONE_NEWPID / CLONE_NEWNET */
	const char *setup;  /* shell run inside, after the parent's "go" */
	const char *listen;
};

static int relay_main(void *arg, int in, int out)
{
	const struct relay_opts *ro = arg;
	static struct target_opts o = { .rw_size = SIZE };
	char line[256], tok[RMA_ADVERTISEMENT_TEXT_MAX];
	struct target t;

	if (unshare(ro->flags)) {
		test_send_line(out, "skip unshare: %s", strerror(errno));
		return 0;
	}
	test_send_line(out, "ns %d", (int)getpid());
	if (test_recv_line(in, line, sizeof line, 20000) <= 0 || strcmp(line, "go"))
		return 1;
	if (ro->setup && system(ro->setup) != 0) {
		test_send_line(out, "err setup failed: %s", ro->setup);
		return 1;
	}
	o.listen = ro->listen;
	if (target_start(&t, &o)) {
		test_send_line(out, "err target");
		return 1;
	}
	target_token(&t, "rw", 0, 0, 0, tok, sizeof tok);
	test_send_line(out, "token %s", tok);
	while (test_recv_line(in, line, sizeof line, 60000) > 0 &&
	       strcmp(line, "stop")) {
		test_send_line(out, "crc %08x", target_crc(&t, "rw", 0, SIZE));
	}
	target_stop(&t);
	return 0;
}

static int logged_fallback;
static void log_cb(void *arg, int level, const char *msg)
{
	if (strstr(msg, "falling back to tcp"))
		logged_fallback++;
	fprintf(stderr, "log: %s\n", msg);
}

static int case_other_ns(bool net)
{
	static struct relay_opts ro;
	char line[1024], cmd[512];
	int in, out;
	rma_remote *r;

	if (geteuid() != 0)
		SKIP("needs root for namespaces");
	ro.flags = net ? CLONE_NEWNET : CLONE_NEWPID;
	if (net) {
		if (system("ip -V >/dev/null 2>&1"))
			SKIP("no ip(8)");
		/* A private network namespace: the veth pair never touches
		 * the host's. */
		if (unshare(CLONE_NEWNET))
			SKIP("unshare(CLONE_NEWNET): %s", strerror(errno));
		CHECK(system("ip link set lo up") == 0);
		ro.setup = "ip addr add 10.231.0.2/24 dev rmav1 && "
			   "ip link set rmav1 up && ip link set lo up";
		ro.listen = "10.231.0.2:0";
	}
	pid_t pid = test_fork(relay_main, &ro, &in, &out);
	CHECKF(test_recv_line(out, line, sizeof line, 20000) > 0, "relay silent");
	if (!strncmp(line, "skip", 4)) {
		test_reap(pid, 5000);
		SKIP("%s", line);
	}
	int cpid;
	CHECKF(sscanf(line, "ns %d", &cpid) == 1, "relay: %s", line);
	if (net) {
		snprintf(cmd, sizeof cmd,
			 "ip link add rmav0 type veth peer name rmav1 netns %d && "
			 "ip addr add 10.231.0.1/24 dev rmav0 && ip link set rmav0 up",
			 cpid);
		CHECKF(system(cmd) == 0, "veth setup failed");
	}
	test_send_line(in, "go");
	CHECKF(test_recv_line(out, line, sizeof line, 20000) > 0, "relay silent");
	CHECKF(!strncmp(line, "token ", 6), "relay: %s", line);
	CHECK_RC(rma_remote_parse(line + 6, &r), 0);

	rma_set_log(RMA_LOG_INFO, log_cb, NULL);
	rma_engine *e = engine_with(NULL);
	char before[64];
	snprintf(before, sizeof before, "%s", route_of(e, r));
	roundtrip(e, r, 3);
	const char *after = route_of(e, r);
	printf("route before: %s, after: %s, fallback lines: %d\n", before,
	       after, logged_fallback);
	if (net) {
		CHECKF(!strcmp(before, "shm"), "route before: %s", before);
		/* Same boot and pid namespace: shm is tried first, fails to
		 * connect, and says so once. */
		CHECKF(logged_fallback == 1, "%d fallback log lines, want 1",
		       logged_fallback);
	} else {
		CHECKF(!strcmp(before, "tcp"), "route to another pid namespace: %s",
		       before);
		CHECK_EQ(logged_fallback, 0);
	}
	CHECKF(!strcmp(after, "tcp"), "route after: %s", after);
	test_send_line(in, "crc");
	CHECK(test_recv_line(out, line, sizeof line, 20000) > 0);
	char *buf = test_alloc(SIZE);
	test_fill(buf, SIZE, 3);
	snprintf(cmd, sizeof cmd, "crc %08x", rma_crc32c(0, buf, SIZE));
	CHECKF(!strcmp(line, cmd), "target %s, want %s", line, cmd);
	rma_engine_destroy(e);
	rma_set_log(RMA_LOG_WARN, NULL, NULL);
	rma_remote_free(r);
	test_send_line(in, "stop");
	CHECK_RC(test_reap(pid, 20000), 0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	struct rma_transport_info info[16];
	int n = rma_transports(info, 16);

	test_watchdog(100);
	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(info[i].name, "shm") && !info[i].available)
			SKIP("shm not available: %s", info[i].detail);
	if (!strcmp(c, "same"))
		return case_same();
	if (!strcmp(c, "full"))
		return case_full();
	if (!strcmp(c, "secret"))
		return case_secret();
	if (!strcmp(c, "pidns"))
		return case_other_ns(false);
	if (!strcmp(c, "netns"))
		return case_other_ns(true);
	fprintf(stderr, "usage: %s same | full | secret | pidns | netns\n", argv[0]);
	return 1;
}
