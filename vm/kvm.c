// SPDX-License-Identifier: GPL-2.0-only
/*
 * kvm.c - is KVM usable here, and can libvirt's qemu user open /dev/kvm?
 *
 * The second question is why a fresh machine started guests a minute late.
 * Without udev, /dev/kvm stays 0600 root:root.  libvirtd probes QEMU as
 * root and records KVM in its capability cache; on every later API call it
 * checks the cache against what its qemu user may open, finds KVM unusable,
 * throws the cache away and probes again (4-10 s a time).  So the answer
 * must come from the qemu user itself: a child takes that user's uid, gid
 * and groups and opens the device, as libvirt's own check does.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm/libvirt.h"

#define KVM_DEV "/dev/kvm"
#define QEMU_CONF "/etc/libvirt/qemu.conf"
#define QEMU_USER_DEFAULT "libvirt-qemu" /* Debian's build of libvirt */

static bool cpu_has_virt(void)
{
	char line[4096];
	bool flag = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return false;
	while (!flag && fgets(line, sizeof(line), f))
		if (!strncmp(line, "flags", 5) && (strstr(line, " vmx") || strstr(line, " svm")))
			flag = true;
	fclose(f);
	return flag;
}

bool latch_kvm_usable(char *why, size_t len)
{
	int fd = open(KVM_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, len, KVM_DEV ": %s", strerror(errno));
		return false;
	}
	close(fd);
	if (!cpu_has_virt()) {
		/* a nested setup can offer /dev/kvm and still hang every guest after the BIOS */
		snprintf(why, len, KVM_DEV " is present but the CPU shows neither vmx nor svm");
		return false;
	}
	snprintf(why, len, KVM_DEV " and hardware virtualisation flags present");
	return true;
}

/* qemu.conf's `KEY = "VALUE"` (uncommented), or def. */
static void qemu_conf_value(const char *key, char *buf, size_t len, const char *def)
{
	char line[512], k[64], v[64];
	FILE *f = fopen(QEMU_CONF, "re");

	snprintf(buf, len, "%s", def);
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, " %63[a-z_] = \"%63[^\"]\"", k, v) == 2 && !strcmp(k, key))
			snprintf(buf, len, "%s", v);
	if (f)
		fclose(f);
}

/* Open /dev/kvm read-write as uid/gid with the user's groups, in a child: 0 or -errno. */
static int open_as(const char *user, uid_t uid, gid_t gid)
{
	gid_t groups[64];
	int n = 64, status;
	pid_t pid;

	if (getgrouplist(user, gid, groups, &n) < 0)
		n = 64; /* more than 64: the first 64 are enough to decide */
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd;

		if (setgroups(n, groups) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
			_exit(125);
		fd = open(KVM_DEV, O_RDWR | O_CLOEXEC);
		_exit(fd >= 0 ? 0 : errno > 0 && errno < 125 ? errno : 124);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 125 || WEXITSTATUS(status) == 124)
		return -ECHILD;
	return -WEXITSTATUS(status);
}

int latch_vm_kvm_probe(struct latch_vm_kvm *k)
{
	char group[64], owner[32], grp[32];
	struct passwd *pw;
	struct group *gr;
	struct stat sb;
	gid_t gid;
	int r;

	memset(k, 0, sizeof(*k));
	k->cpu_virt = cpu_has_virt();
	qemu_conf_value("user", k->qemu_user, sizeof(k->qemu_user), QEMU_USER_DEFAULT);
	if (stat(KVM_DEV, &sb)) {
		snprintf(k->why, sizeof(k->why), KVM_DEV ": %s", strerror(errno));
		return 0;
	}
	k->present = true;
	pw = getpwuid(sb.st_uid);
	snprintf(owner, sizeof(owner), "%s", pw ? pw->pw_name : "?");
	gr = getgrgid(sb.st_gid);
	snprintf(grp, sizeof(grp), "%s", gr ? gr->gr_name : "?");
	snprintf(k->mode, sizeof(k->mode), "%04o %s:%s", sb.st_mode & 07777, owner, grp);
	k->usable = latch_kvm_usable(k->why, sizeof(k->why));

	pw = getpwnam(k->qemu_user);
	if (!pw) {
		snprintf(k->why, sizeof(k->why), "libvirt's qemu user '%s' does not exist (is libvirt installed?)",
			 k->qemu_user);
		return 0;
	}
	k->qemu_user_known = true;
	gid = pw->pw_gid;
	qemu_conf_value("group", group, sizeof(group), "");
	if (*group && (gr = getgrnam(group)))
		gid = gr->gr_gid;
	if (pw->pw_uid == 0) {
		k->qemu_user_opens = true;
		return 0;
	}
	if (geteuid() != 0)
		return -EPERM; /* only root can ask as another user */
	r = open_as(k->qemu_user, pw->pw_uid, gid);
	k->qemu_user_opens = r == 0;
	if (r)
		snprintf(k->why, sizeof(k->why), "%s (uid %u) can't open " KVM_DEV " (%s): it is %s", k->qemu_user,
			 (unsigned int)pw->pw_uid, r == -ECHILD ? "the check failed" : strerror(-r), k->mode);
	return 0;
}
