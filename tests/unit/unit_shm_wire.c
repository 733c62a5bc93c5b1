/* shm control messages on a real SOCK_SEQPACKET pair: a message with one fd
 * passes it on; every other fd count (two in one cmsg, more than the receive
 * buffer holds, one where none is expected) refuses the message and leaves
 * no fd open in the receiver. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "testlib.h"
#include "transport/shm/shm.h"

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	CHECK(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A valid 32-byte MAPPED carrying nfds copies of /dev/null. */
static void send_fds(int s, int nfds)
{
	struct shm_msg m = {.type = SHM_MAPPED, .a = 7, .b = 4096};
	uint8_t b[SHM_MSG_LEN] = {0};
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {b, sizeof b};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	int fds[8];

	memcpy(b, &m.type, 4); /* little-endian host */
	memcpy(b + 8, &m.a, 8);
	memcpy(b + 16, &m.b, 8);
	for (int i = 0; i < nfds; i++)
		CHECK((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
	if (nfds) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	CHECK(sendmsg(s, &mh, MSG_NOSIGNAL) == SHM_MSG_LEN);
	for (int i = 0; i < nfds; i++)
		close(fds[i]); /* in flight, the socket holds them */
}

int main(void)
{
	int sv[2], fd, base;
	struct shm_msg m;

	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	base = open_fds();

	/* One fd, expected: passed on. */
	send_fds(sv[0], 1);
	fd = -1;
	CHECK_RC(rma__shm_recv(sv[1], &m, &fd), 1);
	CHECK(fd >= 0 && m.type == SHM_MAPPED && m.a == 7 && m.b == 4096);
	close(fd);
	CHECK_EQ(open_fds(), base);

	/* None: fine, fd_out -1. */
	send_fds(sv[0], 0);
	CHECK_RC(rma__shm_recv(sv[1], &m, &fd), 1);
	CHECK_EQ(fd, -1);

	/* Two in one cmsg: fits the receive buffer, but is not one fd. */
	send_fds(sv[0], 2);
	fd = -1;
	CHECK_RC(rma__shm_recv(sv[1], &m, &fd), -EPROTO);
	CHECK_EQ(fd, -1);
	CHECK_EQ(open_fds(), base);

	/* Three and eight: truncated control data; those that fit are closed. */
	for (int n = 3; n <= 8; n += 5) {
		send_fds(sv[0], n);
		CHECK_RC(rma__shm_recv(sv[1], &m, &fd), -EPROTO);
		CHECK_EQ(open_fds(), base);
	}

	/* One where the caller expects none. */
	send_fds(sv[0], 1);
	CHECK_RC(rma__shm_recv(sv[1], &m, NULL), -EPROTO);
	CHECK_EQ(open_fds(), base);

	/* Nothing queued. */
	CHECK_RC(rma__shm_recv(sv[1], &m, &fd), 0);
	close(sv[0]);
	close(sv[1]);
	printf("ok\n");
	return 0;
}
