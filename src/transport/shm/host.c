/*
 * host.c - who we are on this host (boot, pid namespace, pid, start time)
 * and whether cross-memory attach is allowed here.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/shm/shm.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

static int read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return (int)n;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Field 22 of /proc/<pid>/stat, counted after the command's last ')'. */
int rma__shm_start_time(pid_t pid, uint64_t *out)
{
	char path[64], buf[1024], *p;
	int rc;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	rc = read_small(path, buf, sizeof buf);
	if (rc < 0)
		return rc == -ENOENT ? -ESRCH : rc;
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	/* after ") " come field 3 (state) .. field 22 (starttime) */
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	*out = strtoull(p + 1, NULL, 10);
	return 0;
}

int rma__shm_ident(struct shm_ident *id)
{
	char buf[64];
	struct stat st;
	int rc, j = 0;

	memset(id, 0, sizeof *id);
	rc = read_small("/proc/sys/kernel/random/boot_id", buf, sizeof buf);
	if (rc < 0)
		return rc;
	for (int i = 0; buf[i] && j < 32; i++) {
		int v = hexval(buf[i]);
		if (v < 0)
			continue;
		id->boot[j / 2] |= (uint8_t)(v << (j % 2 ? 0 : 4));
		j++;
	}
	if (j != 32)
		return -EIO;
	if (stat("/proc/self/ns/pid", &st))
		return -errno;
	id->ns_dev = st.st_dev;
	id->ns_ino = st.st_ino;
	id->pid = (uint32_t)getpid();
	return rma__shm_start_time(getpid(), &id->start);
}

int rma__shm_probe(const char **why)
{
	char buf[16];
	struct shm_ident id;
	int scope = 0, src = 42, dst = 0;

	if (rma__shm_ident(&id)) {
		*why = "cannot read the boot id, pid namespace or /proc/self/stat";
		return -ENOENT;
	}
	if (read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) > 0)
		scope = atoi(buf);
	if (scope >= 2) {
		*why = "kernel.yama.ptrace_scope >= 2 forbids cross-memory attach";
		return -EPERM;
	}
	if (prctl(PR_GET_DUMPABLE) != 1) {
		*why = "this process is not dumpable (PR_SET_DUMPABLE 0, or it changed "
		       "uid): peers cannot attach to it";
		return -EPERM;
	}
	struct iovec l = {&dst, sizeof dst}, r = {&src, sizeof src};
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != sizeof dst || dst != 42) {
		*why = "process_vm_readv is not permitted here (seccomp or LSM)";
		return errno ? -errno : -EPERM;
	}
	*why = scope == 1 ? "same-host copies; ptrace_scope 1: each process lets "
			    "any same-user process attach (PR_SET_PTRACER_ANY)"
			  : "same-host copies (cross-memory attach, memfd)";
	return 0;
}

/* A pidfd for the process at the other end of sock: the kernel's own
 * (SO_PEERPIDFD, race-free), else pidfd_open of the credentials' pid. */
int rma__shm_pidfd(int sock, pid_t pid)
{
	int fd = -1;
	socklen_t len = sizeof fd;

	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0)
		return fd;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	return fd >= 0 ? fd : -errno;
}

/* A pidfd is readable once its process has exited. */
bool rma__shm_pid_dead(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}
