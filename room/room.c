// SPDX-License-Identifier: GPL-2.0-only
/*
 * room.c - making a room, running one command in it, taking it down.
 *
 * The steps of latch_room_run(), in order, each undone by teardown():
 *   1. sweep what rooms of dead `latch run`s left behind;
 *   2. the run directory (a lock that says this room is alive, the mount
 *      point of the room's root, the overlay's upper tmpfs, resolv.conf);
 *   3. the cgroups (v2 directory, v1 directories);
 *   4. for a room with network, the supervisor that makes its IP sockets in
 *      the host's network namespace (sockets.c); the room's first process,
 *      cloned straight into the v2 directory with new mount, PID, UTS, IPC,
 *      cgroup and network namespaces (clone_room()); it builds the file
 *      system while the parent, at the same time,
 *   5. makes the room's BPF state, writes its policy, attaches the programs,
 *      reads the posture back (not enforced: the room is torn down), writes
 *      and reads back the limits, and builds the seccomp filter;
 *   6. says go (with the filter): the command starts;
 *   7. copies output up to the cap, kills the room at the deadline, and
 *      collects the status when the room's first process ends;
 *   8. reads the accounting and counters, lists the workspace changes and
 *      applies them when asked.
 * The deadline is counted from the go.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "room/room_int.h"
#include "config/config.h"

const char *latch_room_via_name(enum latch_room_via v)
{
	switch (v) {
	case LATCH_ROOM_VIA_CGROUP2:
		return "cgroup2";
	case LATCH_ROOM_VIA_CGROUP1:
		return "cgroup1";
	case LATCH_ROOM_VIA_RLIMIT:
		return "rlimit";
	default:
		return "none";
	}
}

static int rooms_run_dir(char *buf, size_t len, const char *name)
{
	return latch_path(buf, len, LATCH_ROOMS_DIR "%s%s", name ? "/" : "", name ? name : "");
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* rm -r that stays on its own file system (a mount point left behind is unmounted first) */
static void rm_tree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	rmdir(dir);
}

static void mark(struct room *r, const char *step)
{
	if (r->n_marks < 16) {
		r->mark_name[r->n_marks] = step;
		r->mark_ns[r->n_marks++] = latch_now_ns();
	}
}

static void print_marks(const struct room *r, uint64_t t0)
{
	if (!getenv("LATCH_ROOM_TIMING"))
		return;
	for (int i = 0; i < r->n_marks; i++)
		fprintf(stderr, "latch: room %-14s %8.3f ms\n", r->mark_name[i], (r->mark_ns[i] - t0) / 1e6);
}

/* ------------------------------------------------------------ step 2: the run directory */

static int run_dir_make(struct room *r, char *err, size_t errlen)
{
	char path[PATH_MAX + 16], opts[64];
	struct stat st;
	int fd, e;

	if (rooms_run_dir(r->run_dir, sizeof(r->run_dir), r->name) ||
	    snprintf(r->root_dir, sizeof(r->root_dir), "%s/root", r->run_dir) >= (int)sizeof(r->root_dir) ||
	    snprintf(r->upper_mnt, sizeof(r->upper_mnt), "%s/upper", r->run_dir) >= (int)sizeof(r->upper_mnt))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	e = latch_mkdirs(r->run_dir, 0700);
	if (e)
		return latch_errf(err, errlen, e, "cannot create %s: %s", r->run_dir, strerror(-e));
	/* held until the end: a sweep that can take it knows this room's latch is gone */
	snprintf(path, sizeof(path), "%s/lock", r->run_dir);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB))
		return latch_errf(err, errlen, -errno, "cannot lock %s: %s", path, strerror(errno));
	/* the descriptor stays open (and locked) for the life of this process */
	if (mkdir(r->root_dir, 0700))
		return latch_errf(err, errlen, -errno, "cannot create %s: %s", r->root_dir, strerror(errno));
	if (r->o->workspace_rw) {
		/* the upper layer in a tmpfs of the room's memory size, charged to the room's memory cgroup */
		snprintf(opts, sizeof(opts), "mode=0700,size=%llu", (unsigned long long)r->memory);
		if (mkdir(r->upper_mnt, 0700) || mount("tmpfs", r->upper_mnt, "tmpfs", MS_NOSUID | MS_NODEV, opts))
			return latch_errf(err, errlen, -errno, "cannot mount the overlay's tmpfs on %s: %s",
					  r->upper_mnt, strerror(errno));
		r->upper_mounted = true;
		snprintf(path, sizeof(path), "%s/upper", r->upper_mnt);
		/* the merged root takes the upper root's owner and mode: make them the workspace's */
		if (mkdir(path, 0755) || fstat(r->workspace_fd, &st) || chown(path, st.st_uid, st.st_gid) ||
		    chmod(path, st.st_mode & 07777))
			return latch_errf(err, errlen, -errno, "cannot create %s: %s", path, strerror(errno));
		snprintf(path, sizeof(path), "%s/work", r->upper_mnt);
		if (mkdir(path, 0700))
			return latch_errf(err, errlen, -errno, "cannot create %s: %s", path, strerror(errno));
	}
	if (r->o->net.resolver_ip4.family || r->o->net.resolver_ip6.family) {
		char a4[64] = "", a6[64] = "", text[256];
		FILE *f;

		latch_addr_format(&r->o->net.resolver_ip4, a4, sizeof(a4));
		latch_addr_format(&r->o->net.resolver_ip6, a6, sizeof(a6));
		if (snprintf(r->resolv, sizeof(r->resolv), "%s/resolv.conf", r->run_dir) >= (int)sizeof(r->resolv))
			return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
		snprintf(text, sizeof(text), "# latch room %s: its resolver only\n%s%s%s%s%s", r->name,
			 r->o->net.resolver_ip4.family ? "nameserver " : "", r->o->net.resolver_ip4.family ? a4 : "",
			 r->o->net.resolver_ip4.family ? "\n" : "", r->o->net.resolver_ip6.family ? "nameserver " : "",
			 r->o->net.resolver_ip6.family ? a6 : "");
		f = fopen(r->resolv, "we");
		if (!f || fprintf(f, "%s%s", text, r->o->net.resolver_ip6.family ? "\n" : "") < 0 || fclose(f))
			return latch_errf(err, errlen, -EIO, "cannot write %s", r->resolv);
	}
	return 0;
}

static void run_dir_remove(struct room *r)
{
	if (r->upper_mounted && umount2(r->upper_mnt, MNT_DETACH) == 0)
		r->upper_mounted = false;
	if (*r->run_dir)
		rm_tree(r->run_dir);
}

/* ------------------------------------------------------------ step 5: enforcement */

static int enforce(struct room *r, char *err, size_t errlen)
{
	struct latch_sandbox_opts net = r->o->net;
	struct latch_sandbox *sb;

	char warm[PATH_MAX + 16];
	int fd;

	r->set = latch_cg_open(err, errlen);
	if (!r->set)
		return -EINVAL;
	snprintf(warm, sizeof(warm), "%s/%s/warm", r->cg2_root, room_cg_name());
	if (mkdir(warm, 0755) && errno != EEXIST)
		return latch_errf(err, errlen, -errno, "cannot create %s: %s", warm, strerror(errno));
	fd = open(warm, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || latch_cg_keep_warm(r->set, fd, err, errlen)) {
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	close(fd);
	snprintf(net.name, sizeof(net.name), "%s", r->name);
	r->cg = latch_cg_room_new(r->set, &net, r->cg2_fd, err, errlen);
	if (!r->cg)
		return -EINVAL;
	sb = latch_cg_room_sandbox(r->cg);
	/* sealed is the fresh state: an empty policy of a ready config */
	if ((r->o->n_policy || r->o->open) &&
	    latch_policy_switch(sb, r->o->policy, r->o->n_policy, r->o->open, err, errlen))
		return -EINVAL;
	if (latch_cg_room_attach(r->cg, err, errlen))
		return -EINVAL;
	latch_cg_room_posture(r->cg, &r->res->posture);
	if (!r->res->posture.enforced)
		return latch_errf(err, errlen, -EPERM, "the room's network enforcement did not verify: %s",
				  r->res->posture.why);
	return 0;
}

/* ------------------------------------------------------------ steps 4 and 6: the room's first process */

/*
 * Does the room reach anything on the network?  Only through the host's
 * network namespace, where its cgroup hooks judge each destination: entries,
 * `open`, or latchd's services (resolver, broker) on a host address.
 */
static bool needs_host_net(const struct room *r)
{
	const struct latch_sandbox_opts *n = &r->o->net;

	return r->o->open || r->o->n_policy || n->host_ip4.family || n->host_ip6.family || n->resolver_ip4.family ||
	       n->resolver_ip6.family;
}

/*
 * Every room gets a network namespace of its own: abstract unix socket names
 * are per network namespace, and no cgroup hook sees a bind() of one, so only
 * this keeps a room from squatting a name a host service will bind (or a host
 * client connect to).  A room that reaches nothing makes every socket there
 * (only `lo`: nothing to reach); one with network makes its IP sockets through
 * the supervisor, in the host's namespace (sockets.c).
 */
static pid_t clone_room(struct room *r)
{
	struct clone_args a = {
		.flags = CLONE_INTO_CGROUP | CLONE_PIDFD | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC |
			 CLONE_NEWCGROUP | CLONE_NEWNET,
		.pidfd = (uintptr_t)&r->pidfd,
		.exit_signal = SIGCHLD,
		.cgroup = (uint64_t)r->cg2_fd,
	};

	return syscall(SYS_clone3, &a, sizeof(a));
}

static int read_msg(int fd, struct room_msg *m)
{
	ssize_t n = read(fd, m, sizeof(*m));

	return n == sizeof(*m) ? 0 : n == 0 ? -EPIPE : -EIO;
}

/* Wait for init's READY (the file system is built), or the reason it failed. */
static int wait_ready(struct room *r, char *err, size_t errlen)
{
	struct pollfd p = { .fd = r->status_pipe[0], .events = POLLIN };
	struct room_msg m;

	if (poll(&p, 1, 10000) != 1)
		return latch_errf(err, errlen, -ETIMEDOUT, "the room's first process did not get ready in 10 s");
	if (read_msg(r->status_pipe[0], &m))
		return latch_errf(err, errlen, -EPIPE, "the room's first process died while setting up");
	if (m.kind == ROOM_MSG_SETUP)
		return latch_errf(err, errlen, -m.value, "setting up the room failed at %s: %s", m.text,
				  strerror(m.value));
	return m.kind == ROOM_MSG_READY ? 0 : latch_errf(err, errlen, -EPROTO, "unexpected message from the room");
}

/*
 * A root room's first process has unshared a user namespace (after its
 * mounts, which stay the host's to make); it needs host privilege over that
 * namespace's parent to be given ids, so latch writes them: the room's uid and
 * gid, 0 as ROOM_ROOT_HOST_ID.  Host root is mapped to nothing in the room:
 * root's files of the host are the overflow uid there, and the room's root
 * reads only what any user may.
 */
static int map_ids(struct room *r, char *err, size_t errlen)
{
	static const char *const files[] = { "uid_map", "gid_map" };
	unsigned ids[2] = { r->uid, r->gid };
	char path[64], line[64];

	if (!room_needs_userns(r->uid, r->gid))
		return 0;
	for (int i = 0; i < 2; i++) {
		int fd, n, e = 0;

		snprintf(path, sizeof(path), "/proc/%d/%s", (int)r->init_pid, files[i]);
		n = snprintf(line, sizeof(line), "%u %u 1\n", ids[i], room_host_id(ids[i]));
		errno = 0; /* a short write sets none */
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, line, n) != n)
			e = errno ? -errno : -EIO;
		if (fd >= 0)
			close(fd);
		if (e)
			return latch_errf(err, errlen, e, "cannot map the room's ids in %s: %s", path, strerror(-e));
	}
	return 0;
}

static int say_go(struct room *r, const void *filter, uint32_t n_insns, char *err, size_t errlen)
{
	struct room_go go = { .magic = ROOM_GO_MAGIC, .filter_len = n_insns };
	size_t len = (size_t)n_insns * 8;

	if (write(r->go_pipe[1], &go, sizeof(go)) != sizeof(go) || write(r->go_pipe[1], filter, len) != (ssize_t)len)
		return latch_errf(err, errlen, -EPIPE, "cannot hand the seccomp filter to the room: %s",
				  strerror(errno));
	close(r->go_pipe[1]);
	r->go_pipe[1] = -1;
	return 0;
}

/* ------------------------------------------------------------ step 7: the run */

static void output_take(struct room *r, const char *buf, size_t n)
{
	struct latch_room_result *res = r->res;
	size_t room_left = r->output_limit - res->output_len, keep = n < room_left ? n : room_left;

	res->output_total += n;
	if (keep) {
		memcpy(res->output + res->output_len, buf, keep);
		res->output_len += keep;
		res->output[res->output_len] = 0;
		if (r->o->output_fd >= 0 && write(r->o->output_fd, buf, keep) < 0) {
			/* a closed stdout costs the copy, never the run */
		}
	}
	if (keep < n)
		res->truncated = true;
}

static void status_take(struct room *r, bool *have_status)
{
	struct room_msg m;

	while (read_msg(r->status_pipe[0], &m) == 0) {
		if (m.kind == ROOM_MSG_EXEC)
			r->res->exec_errno = m.value;
		if (m.kind == ROOM_MSG_SETUP)
			snprintf(r->setup_error, sizeof(r->setup_error), "%s: %s", m.text, strerror(m.value));
		if (m.kind != ROOM_MSG_STATUS)
			continue;
		mark(r, "command exited");
		*have_status = true;
		r->res->exited = WIFEXITED(m.value);
		r->res->exit_code = WIFEXITED(m.value) ? WEXITSTATUS(m.value) : -1;
		r->res->signal = WIFSIGNALED(m.value) ? WTERMSIG(m.value) : 0;
	}
}

/*
 * Copy output and watch the deadline until the room's first process ends,
 * then drain what is left.  Returns 0, or -EINTR when latch itself was told
 * to stop (the room is killed all the same).
 */
static int run_loop(struct room *r, int sig_fd)
{
	uint64_t deadline = r->start_ns + r->timeout_ms * 1000000ull, drain_end = 0;
	bool init_done = false, out_open = true, have_status = false, interrupted = false;
	char buf[65536];

	fcntl(r->status_pipe[0], F_SETFL, O_NONBLOCK);
	while (out_open || !init_done) {
		struct pollfd p[4] = { { .fd = out_open ? r->out_pipe[0] : -1, .events = POLLIN },
				       { .fd = r->status_pipe[0], .events = POLLIN },
				       { .fd = init_done ? -1 : r->pidfd, .events = POLLIN },
				       { .fd = sig_fd, .events = POLLIN } };
		uint64_t now = latch_now_ns(), until = init_done ? drain_end : deadline;
		int wait_ms = until > now ? (int)((until - now) / 1000000) + 1 : 0;

		if (!r->res->timed_out && !init_done && now >= deadline) {
			/* the whole room: the command and everything it forked, daemons included */
			r->res->timed_out = true;
			room_kill(r);
			deadline = now + 2000000000ull; /* the kill takes effect; then teardown kills again */
			continue;
		}
		if (init_done && now >= drain_end)
			break; /* a writer left after the room's end (never expected: the namespace is gone) */
		if (poll(p, 4, r->res->timed_out && !init_done ? 50 : wait_ms) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			ssize_t n = read(r->out_pipe[0], buf, sizeof(buf));

			if (n > 0)
				output_take(r, buf, n);
			else if (n == 0 || errno != EINTR)
				out_open = false;
		}
		if (p[1].revents)
			status_take(r, &have_status);
		if (p[2].revents & POLLIN) {
			siginfo_t si = { 0 };

			waitid(P_PIDFD, r->pidfd, &si, WEXITED);
			mark(r, "room's init gone");
			init_done = true;
			r->res->duration_ns = latch_now_ns() - r->start_ns;
			drain_end = latch_now_ns() + 1000000000ull;
			status_take(r, &have_status);
		}
		if (p[3].revents) {
			struct signalfd_siginfo si;

			if (read(sig_fd, &si, sizeof(si)) > 0 && !interrupted) {
				interrupted = true;
				room_kill(r);
			}
		}
	}
	status_take(r, &have_status);
	if (!have_status) {
		/* the room's first process was killed (deadline, interrupt): so was the command */
		r->res->exited = false;
		r->res->exit_code = -1;
		r->res->signal = SIGKILL;
	}
	return interrupted ? -EINTR : 0;
}

/* ------------------------------------------------------------ the whole */

static void teardown(struct room *r)
{
	if (r->init_pid > 0) {
		room_kill(r);
		if (r->pidfd >= 0) {
			siginfo_t si;

			waitid(P_PIDFD, r->pidfd, &si, WEXITED | WNOHANG);
		}
		room_wait_empty(r, 2000);
		waitpid(r->init_pid, NULL, WNOHANG);
	}
	room_sockets_stop(r); /* killed with the cgroup by now, or before the room was cloned */
	for (int i = 0; i < 2; i++) {
		if (r->out_pipe[i] >= 0)
			close(r->out_pipe[i]);
		if (r->status_pipe[i] >= 0)
			close(r->status_pipe[i]);
		if (r->go_pipe[i] >= 0)
			close(r->go_pipe[i]);
	}
	if (r->pidfd >= 0)
		close(r->pidfd);
	if (r->workspace_fd >= 0)
		close(r->workspace_fd);
	latch_cg_room_remove(r->cg); /* state and pins; the attachments go with the cgroup */
	r->cg = NULL;
	room_cgroups_remove(r);
	latch_cg_close(r->set);
	r->set = NULL;
	run_dir_remove(r);
}

void latch_room_name_make(char *buf, size_t len)
{
	unsigned short rnd = 0;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (unsigned short)latch_now_ns();
	snprintf(buf, len, "room-%d-%04x", (int)getpid(), rnd);
}

/*
 * Can UID:GID (no other groups, no capabilities: the room's command) list
 * and enter directory ST?  By its mode bits; an ACL that grants more is not
 * read, and such a workspace is refused.  A room whose workspace its user
 * cannot read runs for nothing, so it is refused before it is made.
 */
static bool can_enter(const struct stat *st, uid_t uid, gid_t gid)
{
	mode_t m = st->st_uid == uid ? st->st_mode >> 6 : st->st_gid == gid ? st->st_mode >> 3 : st->st_mode;

	return (m & (S_IROTH | S_IXOTH)) == (S_IROTH | S_IXOTH);
}

static int open_workspace(struct room *r, char *err, size_t errlen)
{
	struct stat st;

	r->workspace_fd = -1;
	if (!r->o->workspace)
		return 0;
	r->workspace_fd = open(r->o->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (r->workspace_fd < 0 || fstat(r->workspace_fd, &st))
		return latch_errf(err, errlen, -errno, "workspace %s: %s (give an existing directory)", r->o->workspace,
				  strerror(errno));
	if (!r->o->uid_set && st.st_uid != 0) {
		/* the workspace's owner: what the room writes (through the overlay) it could write itself */
		r->uid = st.st_uid;
		r->gid = st.st_gid;
	}
	/* as the host ids the room runs as: a root room's are not root's */
	if (!can_enter(&st, room_host_id(r->uid), room_host_id(r->gid)) && st.st_uid == 0)
		return latch_errf(err, errlen, -EACCES,
				  "workspace %s (mode %04o, owner 0:%u) cannot be read by the room's uid %u: a room's "
				  "root owns nothing of the host's, so make it readable (chmod o+rx %s)",
				  r->o->workspace, (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid,
				  (unsigned)r->uid, r->o->workspace);
	if (!can_enter(&st, room_host_id(r->uid), room_host_id(r->gid)))
		return latch_errf(
			err, errlen, -EACCES,
			"workspace %s (mode %04o, owner %u:%u) cannot be read by the room's uid %u: run as its "
			"owner (--user %u) or make it readable (chmod o+rx %s)",
			r->o->workspace, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid,
			(unsigned)r->uid, (unsigned)st.st_uid, r->o->workspace);
	return 0;
}

static void defaults(struct room *r, const struct latch_room_opts *o, struct latch_room_result *res)
{
	memset(r, 0, sizeof(*r));
	memset(res, 0, sizeof(*res));
	r->o = o;
	r->res = res;
	r->timeout_ms = o->timeout_ms ? o->timeout_ms : LATCH_ROOM_TIMEOUT_MS;
	r->output_limit = o->output_limit ? o->output_limit : LATCH_ROOM_OUTPUT_LIMIT;
	r->memory = o->memory ? o->memory : LATCH_ROOM_MEMORY;
	r->cpu_milli = o->cpu_milli ? o->cpu_milli : LATCH_ROOM_CPU_MILLI;
	r->pids = o->pids ? o->pids : LATCH_ROOM_PIDS;
	r->uid = o->uid_set ? o->uid : LATCH_ROOM_UID;
	r->gid = o->uid_set ? o->gid : LATCH_ROOM_UID;
	r->cg2_fd = r->pidfd = r->workspace_fd = -1;
	for (int i = 0; i < V1_COUNT; i++)
		r->v1[i].tasks_fd = -1;
	for (int i = 0; i < 2; i++)
		r->out_pipe[i] = r->status_pipe[i] = r->go_pipe[i] = r->sup_sock[i] = -1;
}

/* Steps 5 and 6, while the room's first process builds its file system. */
static int prepare_and_go(struct room *r, char *err, size_t errlen)
{
	void *filter = NULL;
	uint32_t n_insns = 0;
	int n_rules = 0, rc;

	rc = enforce(r, err, errlen);
	mark(r, "enforced");
	if (!rc && r->o->ready) {
		rc = r->o->ready(r->o->ready_arg, r->name, err, errlen);
		mark(r, "latchd ready");
	}
	if (!rc)
		rc = room_limits_apply(r, err, errlen);
	mark(r, "limits");
	if (!rc)
		rc = room_seccomp_build(r->host_sockets, &filter, &n_insns, &n_rules, err, errlen);
	mark(r, "seccomp");
	if (!rc)
		snprintf(r->res->seccomp, sizeof(r->res->seccomp), "deny list, %d rules", n_rules);
	if (!rc)
		rc = wait_ready(r, err, errlen);
	mark(r, "inside ready");
	if (!rc)
		rc = map_ids(r, err, errlen);
	if (!rc) {
		r->start_ns = latch_now_ns();
		rc = say_go(r, filter, n_insns, err, errlen);
	}
	free(filter);
	return rc;
}

int latch_room_run(const struct latch_room_opts *o, struct latch_room_result *res, char *err, size_t errlen)
{
	uint64_t t0 = latch_now_ns();
	struct room r;
	sigset_t sigs, old;
	int rc, sig_fd = -1;

	defaults(&r, o, res);
	if (!o->argv || !o->argv[0])
		return latch_errf(err, errlen, -EINVAL, "no command to run");
	if (o->name)
		snprintf(r.name, sizeof(r.name), "%s", o->name);
	else
		latch_room_name_make(r.name, sizeof(r.name));
	snprintf(res->name, sizeof(res->name), "%s", r.name);
	latch_room_sweep(NULL, 0);
	mark(&r, "sweep");
	res->output = calloc(1, r.output_limit + 1);
	if (!res->output)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	/* Ctrl-C and SIGTERM end the room, not latch before its cleanup */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, &old);
	sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);

	rc = open_workspace(&r, err, errlen);
	res->uid = r.uid;
	res->gid = r.gid;
	if (!rc)
		rc = run_dir_make(&r, err, errlen);
	mark(&r, "run dir");
	if (!rc)
		rc = room_cgroups_make(&r, err, errlen);
	mark(&r, "cgroups");
	if (!rc && (pipe2(r.out_pipe, O_CLOEXEC) || pipe2(r.status_pipe, O_CLOEXEC) || pipe2(r.go_pipe, O_CLOEXEC)))
		rc = latch_errf(err, errlen, -errno, "pipe: %s", strerror(errno));
	r.host_sockets = needs_host_net(&r);
	if (!rc && r.host_sockets)
		rc = room_sockets_start(&r, err, errlen);
	mark(&r, "sockets");
	if (!rc) {
		r.init_pid = clone_room(&r);
		if (r.init_pid == 0) {
			sigprocmask(SIG_SETMASK, &old, NULL);
			room_inside(&r);
		}
		if (r.init_pid < 0)
			rc = latch_errf(err, errlen, -errno, "cannot clone the room's first process: %s",
					strerror(errno));
		mark(&r, "cloned");
	}
	if (!rc) {
		close(r.out_pipe[1]);
		close(r.status_pipe[1]);
		close(r.go_pipe[0]);
		r.out_pipe[1] = r.status_pipe[1] = r.go_pipe[0] = -1;
		if (r.sup_sock[0] >= 0)
			close(r.sup_sock[0]); /* the command's end, handed to the room */
		r.sup_sock[0] = -1;
		room_v1_close(&r);
		rc = prepare_and_go(&r, err, errlen);
	}
	mark(&r, "go");
	if (!rc) {
		rc = run_loop(&r, sig_fd);
		mark(&r, "command done");
		if (rc == -EINTR)
			latch_errf(err, errlen, rc, "interrupted: the room was killed");
		else if (*r.setup_error)
			rc = latch_errf(err, errlen, -EIO, "setting up the command failed at %s", r.setup_error);
	}
	if (!rc || rc == -EINTR) {
		room_kill(&r);
		room_wait_empty(&r, 2000);
		room_account(&r);
		latch_sandbox_counters(latch_cg_room_sandbox(r.cg), res->counters);
	}
	if (!rc && r.upper_mounted) {
		rc = room_changes_collect(&r, err, errlen);
		if (!rc && o->apply)
			room_changes_apply(&r, res->apply_error, sizeof(res->apply_error));
	}
	mark(&r, "accounted");
	teardown(&r);
	mark(&r, "torn down");
	print_marks(&r, t0);
	if (sig_fd >= 0)
		close(sig_fd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void latch_room_result_free(struct latch_room_result *res)
{
	if (!res)
		return;
	free(res->output);
	res->output = NULL;
	room_changes_free(res);
}

/* ------------------------------------------------------------ sweep */

/* A room is stale when nobody holds its lock: the `latch run` that made it is gone. */
static bool stale(const char *run_dir)
{
	char path[PATH_MAX + 8];
	int fd;
	bool free_lock;

	if (snprintf(path, sizeof(path), "%s/lock", run_dir) >= (int)sizeof(path))
		return false;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false; /* being made right now, or not a room */
	free_lock = flock(fd, LOCK_EX | LOCK_NB) == 0;
	close(fd);
	return free_lock;
}

int latch_room_sweep(char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX * 2], e[LATCH_ERR_MAX];
	struct latch_cg_set *set = NULL;
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (rooms_run_dir(dir, sizeof(dir), NULL))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "room-", 5) || latch_parse_name(de->d_name, NULL, 0))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!stale(path))
			continue;
		room_cgroups_sweep(de->d_name);
		if (!set)
			set = latch_cg_open(e, sizeof(e));
		if (set)
			latch_cg_room_sweep(set, de->d_name);
		snprintf(path, sizeof(path), "%s/%s/upper", dir, de->d_name);
		umount2(path, MNT_DETACH);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		rm_tree(path);
		n++;
	}
	closedir(d);
	latch_cg_close(set);
	return n;
}

/* ------------------------------------------------------------ probe */

int latch_room_probe(struct latch_room_probe *p, char *err, size_t errlen)
{
	static char *const argv[] = { "true", NULL };
	struct latch_room_opts o = { .argv = argv, .timeout_ms = 2000, .output_fd = -1 };
	struct latch_room_result res;
	int rc;

	memset(p, 0, sizeof(*p));
	room_cg2_mount(p->cgroup2, sizeof(p->cgroup2));
	rc = latch_room_run(&o, &res, err, errlen);
	if (!rc) {
		p->limits = res.limits;
		p->hooks_enforced = res.posture.enforced;
		p->unix_hooks = res.posture.hook[LATCH_CG_CONNECT_UNIX].in_effective;
		if (!res.exited || res.exit_code)
			snprintf(p->why, sizeof(p->why), "`true` in a room did not exit 0");
	} else {
		snprintf(p->why, sizeof(p->why), "%s", err);
	}
	{
		char path[PATH_MAX + 32];

		/* the root has no cgroup.kill; latch's own directory has, on a kernel that has it */
		snprintf(path, sizeof(path), "%s/%s/rooms/cgroup.kill", p->cgroup2, room_cg_name());
		p->kill_v2 = access(path, F_OK) == 0;
	}
	latch_room_result_free(&res);
	return rc;
}
