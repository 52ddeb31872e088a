// SPDX-License-Identifier: GPL-2.0-only
/*
 * sockets.c - the IP sockets of a room with network, made outside it.
 *
 * Every room has a network namespace of its own (only `lo`), so the abstract
 * unix names it binds are its own and never the host's (no cgroup hook sees a
 * unix bind()).  A room that reaches something still needs its IP sockets in
 * the host's namespace, where its cgroup hooks judge each destination: its
 * seccomp filter turns socket() of AF_INET, AF_INET6 and route netlink
 * (glibc's getaddrinfo asks it which address families the host has) into a
 * user notification, and this supervisor makes the socket and installs it in
 * the caller (SECCOMP_ADDFD_FLAG_SEND: the descriptor and the return value in
 * one step).  socket()'s arguments are integers, read by the kernel for the
 * filter and the supervisor alike: no time-of-check race.
 *
 * The supervisor is cloned by latch straight into the room's cgroup (a socket
 * is charged to the cgroup of the task that makes it, so the room's hooks
 * judge its sockets as the room's own), runs as the room's host uid and gid with
 * no capability, and lives outside the room's PID namespace, where nothing
 * in the room can signal or trace it.  It dies with latch, and with the room
 * (cgroup.kill); when it is gone, the room's socket() calls of those families
 * fail with ENOSYS: closed, never open.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "room/room_int.h"

/* The descriptor the supervisor reads the room's listener from. */
#define SUP_FD 3

/* Receive one descriptor over unix socket SOCK: the descriptor, or -errno (-EPIPE at EOF). */
static int recv_fd(int sock)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t n;
	int fd;

	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return n == 0 ? -EPIPE : -errno;
	c = CMSG_FIRSTHDR(&mh);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

int room_sockets_hand_over(int sock, int listener)
{
	char byte = 'L', cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &listener, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

/*
 * The socket a notification asks for, made here: its descriptor, or -errno
 * for the room's caller.  Only socket() of the native ABI, of the families
 * the filter hands over, with 32-bit arguments (the kernel reads ints).
 */
static int make_socket(const struct seccomp_notif *n)
{
	const __u64 *a = n->data.args;
	int domain, type, protocol, fd;

	if (n->data.nr != SYS_socket || n->data.arch != AUDIT_ARCH_X86_64)
		return -ENOSYS;
	if (a[0] >> 32 || a[1] >> 32 || a[2] >> 32)
		return -EINVAL;
	domain = (int)a[0];
	type = (int)a[1];
	protocol = (int)a[2];
	if (domain != AF_INET && domain != AF_INET6 && !(domain == AF_NETLINK && protocol == NETLINK_ROUTE))
		return -EAFNOSUPPORT;
	/* the kernel judges type and protocol (raw sockets need a capability nobody here has) */
	fd = socket(domain, type | SOCK_CLOEXEC, protocol);
	return fd < 0 ? -errno : fd;
}

/* Answer one notification.  0, or -errno when the listener itself failed. */
static int serve_one(int listener)
{
	struct seccomp_notif n;
	struct seccomp_notif_resp resp;
	struct seccomp_notif_addfd add;
	int fd;

	memset(&n, 0, sizeof(n));
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n))
		return errno == EINTR || errno == ENOENT ? 0 : -errno; /* ENOENT: the caller is gone */
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &n.id))
		return 0;
	fd = make_socket(&n);
	if (fd >= 0) {
		add = (struct seccomp_notif_addfd){
			.id = n.id,
			.flags = SECCOMP_ADDFD_FLAG_SEND,
			.srcfd = fd,
			.newfd_flags = (n.data.args[1] & SOCK_CLOEXEC) ? O_CLOEXEC : 0,
		};
		/* installed and returned as socket()'s value at once; ENOENT: the caller died meanwhile */
		int rc = ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);

		close(fd);
		if (rc >= 0 || errno == ENOENT)
			return 0;
		fd = -errno; /* EMFILE and the like: the caller gets the error */
	}
	memset(&resp, 0, sizeof(resp));
	resp.id = n.id;
	resp.error = fd;
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) && errno != ENOENT)
		return -errno;
	return 0;
}

/* The supervisor's life: drop to the room's host uid, take the listener, serve until the room is gone. */
__attribute__((noreturn)) static void supervise(const struct room *r, pid_t latch)
{
	struct pollfd p = { .events = POLLIN };
	uid_t uid = room_host_id(r->uid);
	gid_t gid = room_host_id(r->gid);
	cap_t none;

	if (dup2(r->sup_sock[1], SUP_FD) != SUP_FD || syscall(SYS_close_range, SUP_FD + 1, ~0u, 0))
		_exit(125);
	/* the host ids the room runs as: a root room's sockets are its unprivileged host uid's, not root's */
	if (setgroups(0, NULL) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
		_exit(125);
	none = cap_init();
	if (!none || cap_set_proc(none) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		_exit(125);
	/* after the uid change, which clears it; latch gone before this: end now */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != latch)
		_exit(125);
	p.fd = recv_fd(SUP_FD);
	close(SUP_FD);
	if (p.fd < 0)
		_exit(0); /* the command never started */
	for (;;) {
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(125);
		}
		if (p.revents & POLLIN) {
			if (serve_one(p.fd))
				_exit(125);
			continue;
		}
		if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
			_exit(0); /* no process of the room is left under the filter */
	}
}

int room_sockets_start(struct room *r, char *err, size_t errlen)
{
	pid_t latch = getpid();
	struct clone_args a = {
		.flags = CLONE_INTO_CGROUP,
		.exit_signal = SIGCHLD,
		.cgroup = (uint64_t)r->cg2_fd,
	};

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, r->sup_sock))
		return latch_errf(err, errlen, -errno, "socketpair for the room's socket supervisor: %s",
				  strerror(errno));
	r->sup_pid = syscall(SYS_clone3, &a, sizeof(a));
	if (r->sup_pid < 0)
		return latch_errf(err, errlen, -errno, "cannot clone the room's socket supervisor: %s",
				  strerror(errno));
	if (r->sup_pid == 0)
		supervise(r, latch);
	close(r->sup_sock[1]);
	r->sup_sock[1] = -1;
	return 0;
}

void room_sockets_stop(struct room *r)
{
	for (int i = 0; i < 2; i++)
		if (r->sup_sock[i] >= 0) {
			close(r->sup_sock[i]);
			r->sup_sock[i] = -1;
		}
	if (r->sup_pid > 0) {
		kill(r->sup_pid, SIGKILL); /* our child, not yet reaped: the pid is still its own */
		waitpid(r->sup_pid, NULL, 0);
		r->sup_pid = 0;
	}
}
