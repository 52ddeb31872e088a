// SPDX-License-Identifier: GPL-2.0-only
/*
 * hostview.c - refuse to work on a /sys or a bpffs that is not the host's.
 *
 * `ip netns exec NS latch ...` runs latch in a mount namespace of its own
 * with a fresh sysfs on /sys.  latch would find no bpffs there, mount one,
 * pin the sandbox's maps and links into it, say "attached", and exit: the
 * bpffs goes with the namespace, the filters stay on the link with nothing
 * to find them by, and every later command says "no sandbox".
 *
 * The check compares what this process sees with what PID 1 sees, through
 * /proc/1/root (the root of PID 1's mount namespace), or the oldest ancestor
 * we may look into where PID 1 refuses: /sys and the bpffs root must be the
 * same filesystems (st_dev) in both.  `ip netns exec` execs latch (or the
 * shell that runs it) from a process that still has the host's mounts.  A systemd unit's own
 * mount namespace (ProtectSystem=, PrivateTmp=) keeps the host's /sys and
 * bpffs as bind mounts, with the same st_dev, and passes.  Without the right
 * to look into /proc/1/root (not root) there is nothing to compare, and the
 * command's own root check speaks instead.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli/cli.h"
#include "loader/loader.h"

/* The /run/netns name of this process's network namespace, or "NAME" when it has none there. */
static void netns_name(char *buf, size_t len)
{
	struct stat self, st;
	struct dirent *de;
	DIR *d;

	snprintf(buf, len, "NAME");
	if (stat("/proc/self/ns/net", &self))
		return;
	d = opendir("/run/netns");
	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[PATH_MAX];

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/run/netns/%s", de->d_name);
		if (!stat(path, &st) && st.st_ino == self.st_ino && st.st_dev == self.st_dev) {
			snprintf(buf, len, "%s", de->d_name);
			break;
		}
	}
	closedir(d);
}

/* The parent of pid, from /proc/PID/stat; 0 when unknown. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	int ppid = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && sscanf(p + 1, " %*c %d", &ppid) != 1)
		ppid = 0;
	fclose(f);
	return ppid;
}

/*
 * The host's view: /proc/PID/root of PID 1, or else of the oldest ancestor
 * whose root we may look into (PID 1 of a sandboxed machine may refuse
 * that); "" when there is none, and nothing to compare with.
 */
static void host_root(char *buf, size_t len)
{
	struct stat st;

	*buf = '\0';
	for (pid_t p = getppid(); p > 0; p = p == 1 ? 0 : parent_of(p)) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/root/", (int)p);
		if (!stat(path, &st))
			snprintf(buf, len, "/proc/%d/root", (int)p);
	}
}

/* The device of path here and under the host's root; 1 when they differ, 0 when alike, -1 when unknown. */
static int differs(const char *host_root_dir, const char *path, dev_t *here_dev, dev_t *host_dev)
{
	char host[PATH_MAX];
	struct stat here, there;

	if (snprintf(host, sizeof(host), "%s%s", host_root_dir, path) >= (int)sizeof(host))
		return -1;
	if (stat(path, &here))
		return -1;
	*here_dev = here.st_dev;
	if (stat(host, &there))
		return errno == ENOENT ? 1 : -1;
	*host_dev = there.st_dev;
	return here.st_dev != there.st_dev;
}

int latch_host_view_check(char *why, size_t len)
{
	char root[PATH_MAX], host[64], ns[NAME_MAX + 1];
	struct stat st;
	dev_t a = 0, b = 0;
	const char *what = NULL;

	host_root(host, sizeof(host));
	if (!*host)
		return 0; /* no view of the host to compare with */
	if (differs(host, "/sys", &a, &b) == 1) {
		what = "/sys";
	} else {
		/* the bpffs root, or the nearest directory above it that exists (latch may create the rest) */
		snprintf(root, sizeof(root), "%s", latch_bpffs_root());
		while (stat(root, &st) && strrchr(root, '/') && strrchr(root, '/') != root)
			*strrchr(root, '/') = '\0';
		if (differs(host, root, &a, &b) == 1)
			what = root;
	}
	if (!what)
		return 0;
	netns_name(ns, sizeof(ns));
	snprintf(why, len,
		 "%s here is not the host's (device %u:%u, the host's %u:%u): `ip netns exec` mounts a /sys of its "
		 "own, and pins made in it vanish when latch exits; run latch with the host's mounts: "
		 "`nsenter --net=/run/netns/%s latch ...`",
		 what, major(a), minor(a), major(b), minor(b), ns);
	return -EXDEV;
}
