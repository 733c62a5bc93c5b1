/*
 * A target out of file descriptors neither spins nor stops: with every
 * accepted connection authenticated there is nothing to shed, so the
 * listener rests (the process uses little CPU while connections wait in
 * the backlog); once fds are free again it accepts the waiting ones.
 * (Handshakes under way when fds run out are shed instead; their
 * initiators connect again.)
 * The clients are a child process, so only the target's fds count.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"
#include "testlib.h"
#include "transport/setup.h"
#include "transport/tcp/tcp.h"

#define SECRET "emfile"
#define NCONN 40
#define FIRST 12 /* connections made before the target runs out of fds */

static int top_fd(void)
{
	int top = 0;
	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			top = fd;
	return top;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Child: FIRST authenticated connections, then, once the target says it is
 * out of fds (a byte on go), NCONN in all, held until killed; one the
 * target sheds is opened again, as an initiator would. */
static void clients(struct sockaddr_in sa, uint64_t id, int go)
{
	static struct rma__setup s[NCONN];
	uint8_t key[16];
	struct rma__setup_params p = {.key = key, .expect_id = id};

	rma__setup_key(SECRET, key);
	for (int i = 0; i < NCONN; i++)
		s[i].fd = -1;
	for (int n = FIRST;;) {
		char byte;
		if (n == FIRST && read(go, &byte, 1) == 1)
			n = NCONN;
		for (int i = 0; i < n; i++) {
			if (s[i].fd < 0) {
				int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
				if (fd < 0)
					_exit(2);
				if (connect(fd, (struct sockaddr *)&sa, sizeof sa) &&
				    errno != EINPROGRESS)
					_exit(3);
				rma__setup_init(&s[i], fd, false, &p);
			}
			int rc = rma__setup_run(&s[i]);
			if (rc && rc != -EINPROGRESS) {
				close(s[i].fd);
				s[i].fd = -1;
			}
		}
		usleep(5000);
	}
}

int main(void)
{
	static char mem[4096];
	rma_region *r;
	struct rlimit rl, low;

	test_watchdog(60);
	rma_engine *t = test_tcp_engine((struct rma_config){.secret = SECRET});
	struct tcp_tr *tt = container_of(t->tr[0], struct tcp_tr, base);
	CHECK_RC(rma_region_register(t, mem, sizeof mem, RMA_ACCESS_REMOTE_RW, &r), 0);
	rma_remote *rem = test_remote_of(r);
	const uint8_t *b = rem->ent[0].blob;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	sa.sin_port = htons(rma__le16(b + 1));
	memcpy(&sa.sin_addr, b + 3, 4);

	int go[2];
	CHECK_RC(pipe2(go, O_NONBLOCK), 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		clients(sa, rem->engine_id, go[0]);
	}

	unsigned served = 0, hs = 1;
	for (int64_t end = test_now_ms() + 10000;
	     test_now_ms() < end && (served != FIRST || hs);) {
		test_sleep_ms(10);
		pthread_mutex_lock(&t->mu);
		served = tt->nserved;
		hs = tt->admit.nhandshakes;
		pthread_mutex_unlock(&t->mu);
	}
	CHECK_EQ(served, FIRST);
	CHECK_EQ(hs, 0);
	/* Out of fds, with every connection authenticated: nothing to shed. */
	CHECK_RC(getrlimit(RLIMIT_NOFILE, &rl), 0);
	low = rl;
	low.rlim_cur = (rlim_t)top_fd() + 1;
	CHECK_RC(setrlimit(RLIMIT_NOFILE, &low), 0);
	static int fill[4096];
	int nfill = 0; /* no free number below the limit either */
	while (nfill < 4096 && (fill[nfill] = dup(0)) >= 0)
		nfill++;
	CHECK_RC(write(go[1], "", 1), 1);
	test_sleep_ms(1000); /* the child's other connections arrive */
	double c0 = cpu_s();
	test_sleep_ms(1000);
	double used = cpu_s() - c0;
	pthread_mutex_lock(&t->mu);
	served = tt->nserved;
	hs = tt->admit.nhandshakes;
	bool resting = tt->listen_paused;
	pthread_mutex_unlock(&t->mu);
	printf("out of fds: %u connections served (%u in the handshake), "
	       "%.2f s of CPU in 1 s\n", served, hs, used);
	CHECKF(used < 0.25, "%.2f s of CPU in 1 s: the listener spins", used);
	CHECK_EQ(served, FIRST);
	CHECK(resting);

	CHECK_RC(setrlimit(RLIMIT_NOFILE, &rl), 0); /* fds again */
	while (nfill)
		close(fill[--nfill]);
	int64_t end = test_now_ms() + 5000;
	unsigned armed = 0;
	while (test_now_ms() < end) {
		pthread_mutex_lock(&t->mu);
		served = tt->nserved;
		resting = tt->listen_paused;
		armed = tt->tick.slot;
		pthread_mutex_unlock(&t->mu);
		if (served == NCONN)
			break;
		test_sleep_ms(20);
	}
	printf("with fds again: %u served (listener resting: %d, tick armed: %u)\n",
	       served, resting, armed);
	CHECK_EQ(served, NCONN);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rma_remote_free(rem);
	rma_region_release(r);
	rma_engine_destroy(t);
	printf("ok\n");
	return 0;
}
