// SPDX-License-Identifier: GPL-2.0-only
/*
 * inside.c - the room's first process, PID 1 of its namespace.
 *
 * It moves itself into the v1 cgroups of a hybrid host (their `tasks` files
 * opened by the parent), builds the room's file system and waits for the
 * parent's word that the room is enforced (and for the seccomp filter).  Then
 * it forks the command and reaps until the command ends; when it exits, the
 * kernel kills everything left in the PID namespace, so a daemonised child
 * does not outlive the run.  It dies with latch (PR_SET_PDEATHSIG).
 *
 * The root is a fresh tmpfs holding read-only, recursive binds of /usr, /etc
 * and /opt (and the /bin, /lib... links of a merged-/usr system), a new
 * /proc, a private /dev and /tmp, and /workspace; nothing of /run, /var,
 * /home, /root, /srv, /mnt or /media, so no host socket that lives there.
 * Everything is set up before pivot_root, the root itself is made read-only
 * after it.  Every failure is sent to the parent on the status pipe, which
 * reports it: the command never runs in a half-built room.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "room/room_int.h"

extern char **environ;

void room_send(int fd, int kind, int value, const char *text)
{
	struct room_msg m = { .kind = kind, .value = value };

	snprintf(m.text, sizeof(m.text), "%s", text ? text : "");
	if (write(fd, &m, sizeof(m)) != sizeof(m))
		_exit(125);
}

/* Report a failed setup step to the parent and end the room. */
__attribute__((noreturn)) static void fail(const struct room *r, const char *what)
{
	room_send(r->status_pipe[1], ROOM_MSG_SETUP, errno, what);
	_exit(125);
}

static void join_path(char *buf, size_t len, const char *a, const char *b)
{
	snprintf(buf, len, "%s/%s", a, b);
}

static void mkdirs_in(const struct room *r, const char *rel, mode_t mode)
{
	char path[PATH_MAX * 2], *p;

	join_path(path, sizeof(path), r->root_dir, rel);
	for (p = path + strlen(r->root_dir) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		if (mkdir(path, 0755) && errno != EEXIST)
			fail(r, path);
		*p = '/';
	}
	if (mkdir(path, mode) && errno != EEXIST)
		fail(r, path);
	if (chmod(path, mode)) /* mkdir's mode goes through the umask */
		fail(r, path);
}

static void set_attr(const struct room *r, const char *path, __u64 set, bool recursive)
{
	struct mount_attr a = { .attr_set = set };

	if (mount_setattr(AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a, sizeof(a)))
		fail(r, path);
}

/* SRC read-only (recursively, with nosuid and nodev unless it is a device) at REL in the new root. */
static void bind_ro(const struct room *r, const char *src, const char *rel, bool dev)
{
	char dst[PATH_MAX * 2];

	join_path(dst, sizeof(dst), r->root_dir, rel);
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL))
		fail(r, dst);
	set_attr(r, dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (dev ? 0 : MOUNT_ATTR_NODEV), true);
}

static void tmpfs_at(const struct room *r, const char *rel, const char *opts, unsigned long flags)
{
	char dst[PATH_MAX * 2];

	join_path(dst, sizeof(dst), r->root_dir, rel);
	if (mount("tmpfs", dst, "tmpfs", flags, opts))
		fail(r, dst);
}

/* The host's top level, as far as a tool needs it: links replicated, directories bound read-only. */
static void host_tree(const struct room *r)
{
	static const char *const tops[] = { "usr", "etc", "opt", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
	char src[64], dst[PATH_MAX * 2], target[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
		snprintf(src, sizeof(src), "/%s", tops[i]);
		if (lstat(src, &st))
			continue;
		join_path(dst, sizeof(dst), r->root_dir, tops[i]);
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(src, target, sizeof(target) - 1);

			if (n < 0)
				fail(r, src);
			target[n] = 0;
			if (symlink(target, dst))
				fail(r, dst);
		} else if (S_ISDIR(st.st_mode)) {
			mkdirs_in(r, tops[i], 0755);
			bind_ro(r, src, tops[i], false);
		}
	}
	/*
	 * latch's own configuration and secrets: an empty, read-only directory
	 * in their place.  The host's /etc/latch, not $LATCH_ROOT's: the room
	 * binds the host's /etc, and that is what it must not read.
	 */
	if (access("/" LATCH_ETC_DIR, F_OK) == 0)
		tmpfs_at(r, LATCH_ETC_DIR, "mode=000,size=4k", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

/*
 * What the host keeps from other users and latch knows to be secret, hidden
 * from every room: `--user root` is uid 0, which owns them (no capability is
 * needed to read a 0600 file of one's own).  Glob patterns.
 */
static const char *const host_secrets[] = {
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
};

/* Where the room sees host path REAL (resolved): its path in the room, or NULL when it does not. */
static const char *room_view(const struct room *r, const char *real, char *buf, size_t len)
{
	static const char *const tops[] = { "/usr/", "/etc/", "/opt/" };
	char ws[PATH_MAX];
	size_t n;

	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++)
		if (!strncmp(real, tops[i], strlen(tops[i])))
			return snprintf(buf, len, "%s", real + 1) < (int)len ? buf : NULL;
	if (r->o->workspace && realpath(r->o->workspace, ws) && (n = strlen(ws)) && !strncmp(real, ws, n) &&
	    real[n] == '/')
		return snprintf(buf, len, "%s%s", LATCH_ROOM_WORKDIR + 1, real + n) < (int)len ? buf : NULL;
	return NULL;
}

/*
 * Hide host path PATH in the room, wherever the room would see it: an empty
 * directory of mode 000 over a directory, an empty file of mode 000 over
 * anything else, each read-only.  A path that does not exist is skipped.
 */
static void hide_path(const struct room *r, const char *path)
{
	char real[PATH_MAX], rel[PATH_MAX], dst[PATH_MAX * 2], empty[PATH_MAX + 16];
	struct stat st;
	int fd;

	if (!realpath(path, real) || lstat(real, &st) || !room_view(r, real, rel, sizeof(rel)))
		return;
	join_path(dst, sizeof(dst), r->root_dir, rel);
	if (S_ISDIR(st.st_mode)) {
		tmpfs_at(r, rel, "mode=000,size=4k,nr_inodes=1", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
		return;
	}
	/* the empty file lives in the run directory, out of the room's tree */
	snprintf(empty, sizeof(empty), "%s/hidden", r->run_dir);
	fd = open(empty, O_CREAT | O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		fail(r, empty);
	close(fd);
	if (mount(empty, dst, NULL, MS_BIND, NULL))
		fail(r, dst);
	set_attr(r, dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, false);
}

/* The host's secrets and the kit's (the workspace is mounted by now: a secret in it is hidden too). */
static void hide_secrets(const struct room *r)
{
	for (size_t i = 0; i < sizeof(host_secrets) / sizeof(host_secrets[0]); i++) {
		glob_t g;

		if (glob(host_secrets[i], GLOB_NOSORT, NULL, &g) == 0)
			for (size_t j = 0; j < g.gl_pathc; j++)
				hide_path(r, g.gl_pathv[j]);
		globfree(&g);
	}
	for (int i = 0; i < r->o->n_hide; i++)
		hide_path(r, r->o->hide[i]);
}

static void proc_tree(const struct room *r)
{
	static const char *const ro[] = { "sys", "sysrq-trigger", "irq", "bus" };
	char p[PATH_MAX * 2];

	mkdirs_in(r, "proc", 0555);
	join_path(p, sizeof(p), r->root_dir, "proc");
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
		fail(r, p);
	/* what root in the room (--user 0, no capabilities) could still write by file mode */
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		join_path(p, sizeof(p), r->root_dir, "proc");
		snprintf(p + strlen(p), sizeof(p) - strlen(p), "/%s", ro[i]);
		if (access(p, F_OK))
			continue;
		if (mount(p, p, NULL, MS_BIND | MS_REC, NULL))
			fail(r, p);
		set_attr(r, p, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, true);
	}
	/* CPU topology (nproc, os.cpu_count()); nothing else of /sys */
	if (access("/sys/devices/system/cpu", F_OK) == 0) {
		mkdirs_in(r, "sys/devices/system/cpu", 0755);
		bind_ro(r, "/sys/devices/system/cpu", "sys/devices/system/cpu", false);
	}
}

static void dev_tree(const struct room *r)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	static const char *const links[][2] = {
		{ "/proc/self/fd", "fd" },
		{ "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" },
		{ "/proc/self/fd/2", "stderr" },
	};
	char src[64], dst[PATH_MAX * 2];

	mkdirs_in(r, "dev", 0755);
	tmpfs_at(r, "dev", "mode=0755,size=64k,nr_inodes=64", MS_NOSUID | MS_NOEXEC);
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		int fd;

		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		snprintf(dst, sizeof(dst), "%s/dev/%s", r->root_dir, nodes[i]);
		if (access(src, F_OK))
			continue;
		fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
		if (fd < 0)
			fail(r, dst);
		close(fd);
		if (mount(src, dst, NULL, MS_BIND, NULL))
			fail(r, dst);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(dst, sizeof(dst), "%s/dev/%s", r->root_dir, links[i][1]);
		if (symlink(links[i][0], dst))
			fail(r, dst);
	}
	mkdirs_in(r, "dev/shm", 01777);
	tmpfs_at(r, "dev/shm", "mode=1777,size=64m", MS_NOSUID | MS_NODEV);
	snprintf(dst, sizeof(dst), "%s/dev", r->root_dir);
	set_attr(r, dst, MOUNT_ATTR_RDONLY, false);
}

static void workspace(const struct room *r)
{
	char dst[PATH_MAX * 2], opts[PATH_MAX * 3];
	/* by name: a descriptor opened before the namespace was made is of another one, which a bind refuses */
	const char *src = r->o->workspace;

	if (!src)
		return;
	mkdirs_in(r, LATCH_ROOM_WORKDIR + 1, 0755);
	if (!r->o->workspace_rw) {
		bind_ro(r, src, LATCH_ROOM_WORKDIR + 1, false);
		return;
	}
	if (strchr(src, ',') || strchr(src, ':')) {
		errno = EINVAL; /* the overlay's option syntax cannot carry them */
		fail(r, "a workspace path with ',' or ':' (the overlay's options cannot carry it)");
	}
	/* plain upper layer: no index, no redirects, no metacopy, so changes.c reads it as files and whiteouts */
	snprintf(opts, sizeof(opts),
		 "lowerdir=%s,upperdir=%s/upper,workdir=%s/work,index=off,redirect_dir=off,metacopy=off", src,
		 r->upper_mnt, r->upper_mnt);
	join_path(dst, sizeof(dst), r->root_dir, LATCH_ROOM_WORKDIR + 1);
	if (mount("overlay", dst, "overlay", MS_NOSUID | MS_NODEV, opts))
		fail(r, "overlay on /workspace");
}

/*
 * /etc/resolv.conf names the room's resolver.  /etc is a read-only bind, so
 * the file is bound over it; a resolv.conf that is a link into /run (as with
 * systemd-resolved) is followed into the room's empty /run instead.
 */
static void resolver(const struct room *r)
{
	char path[PATH_MAX * 2], target[PATH_MAX];
	ssize_t n;

	if (!*r->resolv)
		return;
	join_path(path, sizeof(path), r->root_dir, "etc/resolv.conf");
	n = readlink(path, target, sizeof(target) - 1);
	if (n > 0) {
		const char *rel;
		char *slash;

		target[n] = 0;
		rel = target[0] == '/' ? target + 1 : !strncmp(target, "../", 3) ? target + 3 : NULL;
		if (!rel || strncmp(rel, "run/", 4) || strstr(rel, ".."))
			return; /* points somewhere else: the room has no resolv.conf and no DNS */
		mkdirs_in(r, "run", 0755);
		tmpfs_at(r, "run", "mode=0755,size=64k", MS_NOSUID | MS_NODEV | MS_NOEXEC);
		slash = strrchr(target, '/');
		*slash = 0;
		mkdirs_in(r, rel, 0755);
		*slash = '/';
		join_path(path, sizeof(path), r->root_dir, rel);
		n = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (n < 0)
			fail(r, path);
		close(n);
	} else if (access(path, F_OK)) {
		return;
	}
	if (mount(r->resolv, path, NULL, MS_BIND, NULL))
		fail(r, path);
	set_attr(r, path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, false);
}

static void build_fs(const struct room *r)
{
	char dst[PATH_MAX * 2];

	/* nothing mounted from here on is seen by the host, nor the host's new mounts by the room */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		fail(r, "make / private");
	if (mount("tmpfs", r->root_dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m,nr_inodes=256"))
		fail(r, "the room's root tmpfs");
	host_tree(r);
	proc_tree(r);
	dev_tree(r);
	mkdirs_in(r, "tmp", 01777);
	snprintf(dst, sizeof(dst), "mode=1777,size=%llu", (unsigned long long)r->memory);
	tmpfs_at(r, "tmp", dst, MS_NOSUID | MS_NODEV);
	mkdirs_in(r, "var", 0755);
	join_path(dst, sizeof(dst), r->root_dir, "var/tmp");
	if (symlink("../tmp", dst))
		fail(r, dst);
	workspace(r);
	resolver(r);
	hide_secrets(r);
	if (chdir(r->root_dir) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) || chdir("/"))
		fail(r, "pivot_root into the room's root");
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL))
		fail(r, "make the room's root read-only");
}

/*
 * Before the go, in the room's first process (the command inherits it all):
 * an empty bounding set and locked securebits, so that nothing is regained
 * by exec or a uid change, ever; and not dumpable, so that a command of the
 * same uid cannot open /proc/1/mem of this unfiltered process.
 */
static void drop_bounds(const struct room *r)
{
	for (cap_value_t c = 0; c < cap_max_bits(); c++)
		if (cap_drop_bound(c) && errno != EINVAL)
			fail(r, "dropping the capability bounding set");
	if (cap_reset_ambient() || cap_set_secbits(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
						   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
						   SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED))
		fail(r, "securebits");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
		fail(r, "PR_SET_DUMPABLE");
}

/* The command's process: its descriptors, limits and privileges, then exec. */
__attribute__((noreturn)) static void command(struct room *r, const struct sock_fprog *filter)
{
	static char *env[LATCH_ROOM_ENV_MAX + 4];
	int n = 0, status_fd, devnull, sup_fd = -1;
	cap_t none;

	setsid();
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	status_fd = fcntl(r->status_pipe[1], F_DUPFD_CLOEXEC, 3);
	/* above 4, so that the dups below leave it alone */
	if (r->host_sockets && (sup_fd = fcntl(r->sup_sock[0], F_DUPFD_CLOEXEC, 5)) < 0)
		fail(r, "the socket supervisor's descriptor");
	if (devnull < 0 || status_fd < 0 || dup2(devnull, 0) < 0 || dup2(r->out_pipe[1], 1) < 0 ||
	    dup2(r->out_pipe[1], 2) < 0)
		fail(r, "the command's standard descriptors");
	if (status_fd != 3 && (dup3(status_fd, 3, O_CLOEXEC) < 0 || close(status_fd)))
		fail(r, "the command's status descriptor");
	r->status_pipe[1] = 3; /* for fail() */
	if (r->host_sockets && dup3(sup_fd, 4, O_CLOEXEC) < 0)
		fail(r, "the socket supervisor's descriptor");
	if (syscall(SYS_close_range, r->host_sockets ? 5 : 4, ~0u, 0))
		fail(r, "closing inherited descriptors");
	if (chdir(r->workspace_fd >= 0 ? LATCH_ROOM_WORKDIR : "/tmp"))
		fail(r, "chdir");
	umask(022);
	if (room_rlimits_apply(r))
		fail(r, "rlimits");
	if (setgroups(0, NULL) || setresgid(r->gid, r->gid, r->gid) || setresuid(r->uid, r->uid, r->uid))
		fail(r, "setting the room's uid and gid");
	none = cap_init();
	if (!none || cap_set_proc(none))
		fail(r, "dropping every capability");
	cap_free(none);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		fail(r, "no_new_privs");
	if (r->host_sockets) {
		/* the listener goes to the supervisor before anything of the command's runs, never kept */
		int listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, filter);

		if (listener < 0)
			fail(r, "the seccomp filter and its listener");
		errno = -room_sockets_hand_over(4, listener);
		if (errno)
			fail(r, "handing the seccomp listener to the socket supervisor");
		close(listener);
		close(4);
	} else if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, filter)) {
		fail(r, "the seccomp filter");
	}
	env[n++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	env[n++] = "HOME=/tmp";
	env[n++] = "LANG=C.UTF-8";
	for (int i = 0; i < r->o->n_env && n < LATCH_ROOM_ENV_MAX + 3; i++)
		env[n++] = (char *)r->o->env[i];
	env[n] = NULL;
	environ = env;
	execvp(r->o->argv[0], r->o->argv);
	room_send(3, ROOM_MSG_EXEC, errno, r->o->argv[0]);
	_exit(errno == ENOENT ? 127 : 126);
}

void room_inside(struct room *r)
{
	struct sock_filter *insns = NULL;
	struct sock_fprog filter;
	struct room_go go;
	pid_t cmd, pid;
	int st = 0;
	cap_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(r->out_pipe[0]);
	close(r->status_pipe[0]);
	close(r->go_pipe[1]);
	errno = -room_v1_join_self(r);
	if (errno)
		fail(r, "joining the v1 cgroups");
	room_v1_close(r);
	build_fs(r);
	if (sethostname("room", 4))
		fail(r, "sethostname");
	/*
	 * A root room's root owns nothing of the host's: a user namespace, made
	 * after the mounts (they and the namespaces cloned above stay the host's,
	 * so nothing in the room can change them), in which latch maps 0 to
	 * ROOM_ROOT_HOST_ID.  Its capabilities there go with the bounds below.
	 */
	if (room_needs_userns(r->uid, r->gid) && unshare(CLONE_NEWUSER))
		fail(r, "the root room's user namespace");
	drop_bounds(r);
	room_send(r->status_pipe[1], ROOM_MSG_READY, 0, NULL);
	/* the parent says go once the room is enforced and read back; EOF means it gave up or died */
	if (read(r->go_pipe[0], &go, sizeof(go)) != sizeof(go) || go.magic != ROOM_GO_MAGIC || !go.filter_len ||
	    go.filter_len > BPF_MAXINSNS)
		_exit(125);
	insns = malloc(go.filter_len * sizeof(*insns));
	if (!insns ||
	    read(r->go_pipe[0], insns, go.filter_len * sizeof(*insns)) != (ssize_t)(go.filter_len * sizeof(*insns)))
		_exit(125);
	close(r->go_pipe[0]);
	filter.len = go.filter_len;
	filter.filter = insns;
	cmd = fork();
	if (cmd < 0)
		fail(r, "fork");
	if (cmd == 0)
		command(r, &filter);
	close(r->out_pipe[1]);
	if (r->sup_sock[0] >= 0)
		close(r->sup_sock[0]);
	/* PID 1 needs no privilege to reap */
	none = cap_init();
	if (none)
		cap_set_proc(none);
	for (;;) {
		pid = waitpid(-1, &st, 0);
		if (pid == cmd)
			break;
		if (pid < 0 && errno != EINTR)
			_exit(125);
	}
	room_send(r->status_pipe[1], ROOM_MSG_STATUS, st, NULL);
	_exit(0);
}
