// SPDX-License-Identifier: GPL-2.0-only
/*
 * seccomp.c - the system calls a room's command is refused.
 *
 * A deny list, built with libseccomp: what a tool call never needs and what
 * the kernel's attack surface or the room's own walls are made of.  Each is
 * refused with EPERM, so that a program sees an ordinary error and the tests
 * see the refusal; clone3 gets ENOSYS (its flags sit in memory a filter
 * cannot read, and libc falls back to clone, whose namespace flags are
 * checked).  Calls of another architecture's ABI (int 0x80 on x86-64, x32)
 * kill the process: libseccomp's default for a foreign architecture.  The
 * filter is exported as BPF in the parent, so the room's process only loads
 * it.
 *
 * Sockets are an allow list by family: the room's network hooks judge IP
 * (connect4/6, sendmsg4/6, egress) and unix sockets, and nothing else, so
 * socket() and socketpair() of any other family (AF_VSOCK to the host's
 * hypervisor, AF_TIPC, AF_RDS, AF_CAN, AF_PACKET...) get EAFNOSUPPORT, as
 * from a kernel without it.  AF_NETLINK is kept for NETLINK_ROUTE alone
 * (glibc's getaddrinfo asks it which address families the host has), any
 * other netlink protocol gets EPROTONOSUPPORT.  In a room with network,
 * socket() of AF_INET, AF_INET6 and route netlink is a user notification:
 * the room's own network namespace has only `lo`, and the supervisor
 * (sockets.c) makes those sockets in the host's, where the hooks judge them.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "room/room_int.h"

/* Refused with EPERM. */
/* clang-format off */
static const char *const denied[] = {
	/* kernel modules and a new kernel */
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	/* kernel attack surface a tool call does not need */
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"keyctl", "add_key", "request_key", "lookup_dcookie", "fanotify_init", "uselib", "personality",
	/* the room's walls: mounts, namespaces, roots */
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr", "unshare", "setns",
	/* other processes, and handles that walk around the mount namespace */
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "name_to_handle_at",
	"open_by_handle_at",
	/* the machine itself */
	"reboot", "swapon", "swapoff", "iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime",
	"adjtimex", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "nfsservctl", "sethostname",
	"setdomainname", "_sysctl",
};
/* clang-format on */

/* The socket families a room may open (what its hooks judge, and route netlink), ascending. */
static const int families_allowed[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
#define N_ALLOWED (sizeof(families_allowed) / sizeof(families_allowed[0]))

/*
 * socket() and socketpair() of a family not allowed: EAFNOSUPPORT.  The
 * families between the allowed ones are refused in aligned power-of-two
 * blocks (one masked compare each: 0, 3, 4-7, 8-9, 11, 12-15), everything
 * above the last allowed by range; libseccomp compares all 64 bits of the
 * argument, so a family with high bits set is above.  Netlink other than
 * NETLINK_ROUTE: EPROTONOSUPPORT.  With NOTIFY (a room with network),
 * socket() of AF_INET, AF_INET6 and route netlink goes to the supervisor.
 * Adds to *rules.  0 or -errno.
 */
static int socket_rules(scmp_filter_ctx ctx, bool notify, int *rules)
{
	static const int calls[] = { SCMP_SYS(socket), SCMP_SYS(socketpair) };
	const uint64_t top = families_allowed[N_ALLOWED - 1] + 1;

	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
		uint64_t lo = 0;

		for (size_t a = 0; a <= N_ALLOWED; a++) {
			uint64_t hi = a < N_ALLOWED ? (uint64_t)families_allowed[a] : top; /* refuse [lo, hi) */

			while (lo < hi) {
				uint64_t size = 1;

				while (lo % (size * 2) == 0 && lo + size * 2 <= hi)
					size *= 2;
				if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1,
						     SCMP_A0(SCMP_CMP_MASKED_EQ, ~(size - 1), lo)))
					return -EINVAL;
				(*rules)++;
				lo += size;
			}
			lo = hi + 1;
		}
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), calls[c], 1, SCMP_A0(SCMP_CMP_GE, top)) ||
		    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), calls[c], 2,
				     SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_NE, NETLINK_ROUTE)))
			return -EINVAL;
		*rules += 2;
	}
	if (!notify)
		return 0;
	/* made by the supervisor in the host's namespace (sockets.c); socketpair() stays the room's */
	if (seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET)) ||
	    seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_INET6)) ||
	    seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
			     SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE)))
		return -EINVAL;
	*rules += 3;
	return 0;
}

/* Namespace flags a clone() may not carry: one rule each (CLONE_NEWCGROUP, CLONE_NEWTIME by value). */
static const unsigned long ns_flags[] = { CLONE_NEWNS,	CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
					  CLONE_NEWPID, CLONE_NEWNET, 0x02000000,   0x00000080 };

int room_seccomp_build(bool notify, void **prog, uint32_t *n_insns, int *n_rules, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rules = 0, rc = -EINVAL, fd = -1;
	off_t size;

	*prog = NULL;
	if (!ctx)
		return latch_errf(err, errlen, -ENOMEM, "seccomp_init failed");
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not a system call of this architecture */
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) {
			latch_errf(err, errlen, -EINVAL, "seccomp: cannot deny %s", denied[i]);
			goto out;
		}
		rules++;
	}
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) {
		latch_errf(err, errlen, -EINVAL, "seccomp: cannot add the clone3 rule");
		goto out;
	}
	rules++;
	for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++, rules++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) {
			latch_errf(err, errlen, -EINVAL, "seccomp: cannot add the clone rules");
			goto out;
		}
	if (socket_rules(ctx, notify, &rules)) {
		latch_errf(err, errlen, -EINVAL, "seccomp: cannot add the socket family rules");
		goto out;
	}
	/* TIOCSTI and TIOCLINUX push input into a terminal someone else reads */
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI)) ||
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX))) {
		latch_errf(err, errlen, -EINVAL, "seccomp: cannot add the ioctl rules");
		goto out;
	}
	rules += 2;
	fd = memfd_create("latch-seccomp", MFD_CLOEXEC);
	if (fd < 0 || seccomp_export_bpf(ctx, fd) || (size = lseek(fd, 0, SEEK_END)) <= 0 || size % 8) {
		latch_errf(err, errlen, -EIO, "seccomp: cannot export the filter");
		goto out;
	}
	*prog = malloc(size);
	if (!*prog || pread(fd, *prog, size, 0) != size) {
		latch_errf(err, errlen, -EIO, "seccomp: cannot read the filter back");
		goto out;
	}
	*n_insns = size / 8;
	*n_rules = rules;
	rc = 0;
out:
	if (rc) {
		free(*prog);
		*prog = NULL;
	}
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return rc;
}
