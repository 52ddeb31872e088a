// SPDX-License-Identifier: GPL-2.0-only
/*
 * confine.c - the confinement of the child that parses a guest's tarball
 * (confine.h): chroot, no capabilities, no_new_privs, a byte cap on files,
 * and a seccomp allow-list written with libseccomp.
 *
 * The allow-list is what libarchive's tar reader and disk writer, and
 * glibc's malloc under them, were seen to call (strace of a backup), plus
 * the calls to report and exit.  No socket, no exec, no fork, no ptrace, no
 * mount or chroot of its own, no setuid, no executable memory: whatever a
 * malformed tar makes of the parser, it can write files in one directory
 * and nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "vm/confine.h"
#include "vm/vm.h"

/* What extracting a tar into a directory needs. */
static const int allowed[] = {
	SCMP_SYS(read),		SCMP_SYS(write),      SCMP_SYS(readv),	      SCMP_SYS(writev),
	SCMP_SYS(pread64),	SCMP_SYS(lseek),      SCMP_SYS(close),	      SCMP_SYS(openat),
	SCMP_SYS(open),		SCMP_SYS(fstat),      SCMP_SYS(newfstatat),   SCMP_SYS(lstat),
	SCMP_SYS(stat),		SCMP_SYS(statx),      SCMP_SYS(mkdir),	      SCMP_SYS(mkdirat),
	SCMP_SYS(fchmod),	SCMP_SYS(fchmodat),   SCMP_SYS(chmod),	      SCMP_SYS(ftruncate),
	SCMP_SYS(fcntl),	SCMP_SYS(umask),      SCMP_SYS(getcwd),	      SCMP_SYS(chdir),
	SCMP_SYS(fchdir),	SCMP_SYS(brk),	      SCMP_SYS(munmap),	      SCMP_SYS(mremap),
	SCMP_SYS(madvise),	SCMP_SYS(getuid),     SCMP_SYS(geteuid),      SCMP_SYS(getgid),
	SCMP_SYS(getegid),	SCMP_SYS(getpid),     SCMP_SYS(futex),	      SCMP_SYS(clock_gettime),
	SCMP_SYS(gettimeofday), SCMP_SYS(time),	      SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask),
	SCMP_SYS(exit),		SCMP_SYS(exit_group),
};

static int seccomp_in(char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	int r = ctx ? 0 : -ENOMEM;

	for (size_t i = 0; !r && i < sizeof(allowed) / sizeof(allowed[0]); i++)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
	/* memory for malloc, never executable: nothing the parser is tricked into writing can run */
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (!r)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				     SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (!r)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	return r ? latch_errf(err, errlen, r, "seccomp: %s", strerror(-r)) : 0;
}

static int drop_caps(char *err, size_t errlen)
{
	cap_t none = cap_init(); /* all clear */
	int r = 0;

	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) && errno != EINVAL && errno != EPERM)
			r = -errno;
	if (!none || cap_set_proc(none))
		r = errno ? -errno : -EPERM;
	cap_free(none);
	return r ? latch_errf(err, errlen, r, "dropping capabilities: %s", strerror(-r)) : 0;
}

int latch_confine(const char *dir, int keep_fd, uint64_t max_file, char *err, size_t errlen)
{
	struct rlimit fsize = { max_file, max_file };
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(nul, 2) < 0)
		return latch_errf(err, errlen, -errno, "/dev/null: %s", strerror(errno));
	if ((keep_fd > 3 && close_range(3, keep_fd - 1, 0)) || close_range(keep_fd < 3 ? 3 : keep_fd + 1, ~0U, 0))
		return latch_errf(err, errlen, -errno, "close_range: %s", strerror(errno));
	signal(SIGXFSZ, SIG_IGN); /* a file at the cap fails with EFBIG instead of killing */
	if (chdir(dir))
		return latch_errf(err, errlen, -errno, "cd %s: %s", dir, strerror(errno));
	if (geteuid() == 0 && (chroot(".") || chdir("/")))
		return latch_errf(err, errlen, -errno, "chroot %s: %s", dir, strerror(errno));
	if (geteuid() == 0 && drop_caps(err, errlen))
		return -EPERM;
	if (setrlimit(RLIMIT_FSIZE, &fsize) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return latch_errf(err, errlen, -errno, "rlimit or no_new_privs: %s", strerror(errno));
	return seccomp_in(err, errlen);
}
