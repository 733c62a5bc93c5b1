/*
 * unit_shm_owner - the shm owner's control connections, in one process: an
 * owner engine with manual progress, and either raw initiators speaking the
 * control protocol by hand or a second engine.
 *
 *   rows   a row whose connection the owner closed is not handed to another
 *          initiator while the first lives (it still maps the row writable),
 *          even though it was not inside a copy; a row whose initiator closed
 *          the connection is.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "testlib.h"
#include "transport/shm/shm.h"

static rma_engine *owner(void)
{
	struct rma_config cfg;
	rma_engine *e;

	rma_config_init(&cfg);
	cfg.transports = "shm";
	cfg.flags = RMA_ENGINE_MANUAL_PROGRESS;
	CHECK_RC(rma_engine_create(&cfg, &e), 0);
	return e;
}

/* The owner's next message on c, driving its progress; 1, or what
 * rma__shm_recv said (-ECONNRESET: closed). */
static int recv_msg(rma_engine *a, int c, struct shm_msg *m, int *fd)
{
	int64_t t0 = test_now_ms();
	int rc;

	while ((rc = rma__shm_recv(c, m, fd)) == 0) {
		CHECKF(test_now_ms() - t0 < 5000, "owner silent");
		rma_progress(a, 1);
	}
	return rc;
}

/* A raw initiator: connect, the secret handshake, HELLO; *row from WELCOME. */
static int raw_connect(rma_engine *a, int *row)
{
	const struct rma__engine_params *ep = rma__engine_params(a);
	struct sockaddr_un sun;
	static struct rma__setup su;
	uint8_t key[16];
	struct shm_msg m = {.type = SHM_HELLO, .a = 0x5eed, .b = ep->engine_id};
	int c, tfd = -1, rc;
	int64_t t0 = test_now_ms();

	c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(c >= 0);
	socklen_t sl = rma__shm_sockname((uint32_t)getpid(), ep->engine_id, &sun);
	CHECK(connect(c, (struct sockaddr *)&sun, sl) == 0);
	rma__setup_key(ep->secret, key);
	struct rma__setup_params sp = {
		.key = key, .kind = SHM_SETUP_KIND, .engine_id = 0x5eed,
		.expect_id = ep->engine_id,
	};
	CHECK_RC(rma__setup_init(&su, c, false, &sp), 0);
	while ((rc = rma__setup_run(&su)) == -EINPROGRESS) {
		CHECKF(test_now_ms() - t0 < 5000, "handshake stalled");
		rma_progress(a, 1);
	}
	CHECK_RC(rc, 0);
	CHECK_RC(rma__shm_send(c, &m, -1), 0);
	CHECK_RC(recv_msg(a, c, &m, &tfd), 1);
	CHECK(m.type == SHM_WELCOME);
	CHECK_RC(m.status, 0);
	CHECK(tfd >= 0 && m.b < SHM_ROWS);
	close(tfd);
	*row = (int)m.b;
	return c;
}

static int case_rows(void)
{
	rma_engine *a = owner();
	struct shm_msg m = {.type = 99};
	int r1, r2, r3, fd;

	int c1 = raw_connect(a, &r1);
	/* The owner closes c1 (a bad message) while its row reads 0. */
	CHECK_RC(rma__shm_send(c1, &m, -1), 0);
	CHECK_RC(recv_msg(a, c1, &m, &fd), -ECONNRESET);
	int c2 = raw_connect(a, &r2);
	printf("rows: %d, then %d after the owner closed the first\n", r1, r2);
	CHECKF(r2 != r1, "row %d given to a second initiator while the first "
	       "(alive) still maps it", r1);

	/* c2 closes itself: its row is free again at once. */
	close(c2);
	for (int i = 0; i < 5; i++)
		rma_progress(a, 1);
	int c3 = raw_connect(a, &r3);
	CHECKF(r3 == r2, "an initiator's own close left row %d unused (got %d)",
	       r2, r3);
	close(c3);
	close(c1);
	rma_engine_destroy(a);
	return 0;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "";
	struct rma_transport_info info[16];
	int n = rma_transports(info, 16);

	test_watchdog(60);
	for (int i = 0; i < n && i < 16; i++)
		if (!strcmp(info[i].name, "shm") && !info[i].available)
			SKIP("shm not available: %s", info[i].detail);
	if (!strcmp(c, "rows"))
		return case_rows();
	fprintf(stderr, "usage: %s rows\n", argv[0]);
	return 1;
}
