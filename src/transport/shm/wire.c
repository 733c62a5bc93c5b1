/*
 * wire.c - the advertisement blob and the control messages.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <stddef.h>

#include "transport/shm/shm.h"

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* u8 version | u8 flags | u16 0 | u32 slot | u32 pid | u32 region id |
 * u64 start | u64 ns dev | u64 ns ino | 16 boot id | u64 base |
 * u64 region addr | u64 region len */
void rma__shm_blob_encode(const struct shm_blob *b, uint8_t *o)
{
	memset(o, 0, SHM_BLOB_LEN);
	o[0] = SHM_BLOB_VERSION;
	o[1] = b->flags;
	put32(o + 4, b->slot);
	put32(o + 8, b->id.pid);
	put32(o + 12, b->region_id);
	put64(o + 16, b->id.start);
	put64(o + 24, b->id.ns_dev);
	put64(o + 32, b->id.ns_ino);
	memcpy(o + 40, b->id.boot, 16);
	put64(o + 56, b->base);
	put64(o + 64, b->region_addr);
	put64(o + 72, b->region_len);
}

int rma__shm_blob_decode(const void *buf, size_t len, struct shm_blob *b)
{
	const uint8_t *p = buf;

	if (len != SHM_BLOB_LEN || p[0] != SHM_BLOB_VERSION ||
	    (p[1] & ~SHM_BLOB_MEMFD) || p[2] || p[3])
		return -EBADMSG;
	b->flags = p[1];
	b->slot = get32(p + 4);
	b->id.pid = get32(p + 8);
	b->region_id = get32(p + 12);
	b->id.start = get64(p + 16);
	b->id.ns_dev = get64(p + 24);
	b->id.ns_ino = get64(p + 32);
	memcpy(b->id.boot, p + 40, 16);
	b->base = get64(p + 56);
	b->region_addr = get64(p + 64);
	b->region_len = get64(p + 72);
	if (!b->id.pid || (int32_t)b->id.pid < 0)
		return -EBADMSG;
	if (b->flags & SHM_BLOB_MEMFD) {
		/* the window lies inside its region */
		if (!b->region_id || !b->region_len || b->base < b->region_addr ||
		    b->base - b->region_addr > b->region_len)
			return -EBADMSG;
	} else if (b->region_id || b->region_addr || b->region_len) {
		return -EBADMSG;
	}
	return 0;
}

socklen_t rma__shm_sockname(uint32_t pid, uint64_t engine_id, void *sunp)
{
	struct sockaddr_un *sun = sunp;
	int n;

	memset(sun, 0, sizeof *sun);
	sun->sun_family = AF_UNIX;
	/* Abstract: gone with the process; per network namespace. */
	n = snprintf(sun->sun_path + 1, sizeof sun->sun_path - 1,
		     "rma-shm/%u/%016llx", pid, (unsigned long long)engine_id);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int rma__shm_send(int fd, const struct shm_msg *m, int pass_fd)
{
	uint8_t b[SHM_MSG_LEN];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {b, sizeof b};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	put32(b, m->type);
	put32(b + 4, (uint32_t)m->status);
	put64(b + 8, m->a);
	put64(b + 16, m->b);
	put64(b + 24, m->c);
	if (pass_fd >= 0) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof pass_fd);
	}
	ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return n == SHM_MSG_LEN ? 0 : -EPROTO;
}

int rma__shm_recv(int fd, struct shm_msg *m, int *fd_out)
{
	uint8_t b[SHM_MSG_LEN + 1];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {b, sizeof b};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	int got = -1, nfds = 0;

	ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	/* Every fd the kernel put in the control data is ours now, however
	 * many came (a truncated cmsg still holds those that fit): keep the
	 * first, close the rest, and refuse all but exactly one. */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t j = 0; j < k; j++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + j * sizeof f, sizeof f);
			if (nfds++)
				close(f);
			else
				got = f;
		}
	}
	if (n != SHM_MSG_LEN || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    nfds > 1 || (got >= 0 && !fd_out)) {
		if (got >= 0)
			close(got);
		return -EPROTO;
	}
	m->type = get32(b);
	m->status = (int32_t)get32(b + 4);
	m->a = get64(b + 8);
	m->b = get64(b + 16);
	m->c = get64(b + 24);
	if (fd_out)
		*fd_out = got;
	return 1;
}
