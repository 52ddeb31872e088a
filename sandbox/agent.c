// SPDX-License-Identifier: GPL-2.0-only
/*
 * agent.c - `latch agent run`: a throwaway VM sandbox for one agent.  The
 * kit and workspace are checked first, the sandbox comes up on the path
 * `latch up NAME --kit K --workspace DIR` takes, the kit's setup runs, then
 * the kit's command; when it exits the sandbox is destroyed on the path
 * `latch destroy --purge` takes (domain, tap, pins, routes, kit state and
 * the broker's routes with it), unless --keep.
 *
 * SIGINT, SIGTERM and SIGHUP are blocked for the whole run and taken with
 * sigtimedwait, so one that arrives while `up` works is not lost: `up`
 * finishes (it is bounded by the boot timeout) and the sandbox is torn down
 * before anything else runs.  The command runs in a child, so that the
 * parent can wait for it and for a signal at once without a race.
 *
 * A run killed outright (SIGKILL) can't clean up: the sandbox carries an
 * owner mark (policy/NAME.agent: the PID and its start time, so a reused
 * PID is not taken for the owner), and the next run removes the sandboxes
 * whose owner is gone; `latch doctor` names them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "sandbox/sandbox.h"

/* A child that ignores SIGTERM this long after it was sent one gets SIGKILL. */
#define AGENT_CHILD_GRACE_MS 2000

/* ---- the owner mark */

struct agent_mark {
	uint32_t pid;
	char start[24]; /* /proc/PID/stat's starttime, in clock ticks since boot */
	char kit[LATCH_KIT_NAME_MAX + 1];
};

static const struct latch_kv_key mark_keys[] = {
	LATCH_KV_U32("pid", struct agent_mark, pid, 1, INT32_MAX, "the owning latch's PID"),
	LATCH_KV_STR("start", struct agent_mark, start, "its start time in clock ticks"),
	LATCH_KV_STR("kit", struct agent_mark, kit, "the kit it runs"),
};
static const struct latch_state_format mark_format = { mark_keys, 3, LATCH_KV_UNKNOWN_OK, NULL };

/* PID's start time (field 22 of /proc/PID/stat) into buf; -ENOENT when there is no such process. */
static int proc_start(pid_t pid, char *buf, size_t len)
{
	char path[64], stat[1024], *p;
	unsigned long long start;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	if (n <= 0)
		return -ENOENT;
	stat[n] = '\0';
	/* the command name may hold spaces and ')': the fields start after the last ')' */
	p = strrchr(stat, ')');
	if (!p)
		return -EINVAL;
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	if (sscanf(p + 1, "%llu", &start) != 1)
		return -EINVAL;
	snprintf(buf, len, "%llu", start);
	return 0;
}

/*
 * Claim NAME for this process: the mark is created exclusively (two runs
 * that picked the same free name can't both have it), then written whole.
 * -EEXIST when another run has it.
 */
static int mark_claim(const char *name, const char *kit, char *err, size_t errlen)
{
	struct agent_mark m = { .pid = (uint32_t)getpid() };
	char path[PATH_MAX];
	int fd, ret;

	snprintf(m.kit, sizeof(m.kit), "%s", kit);
	if ((ret = proc_start(getpid(), m.start, sizeof(m.start))))
		return latch_errf(err, errlen, ret, "cannot read this process's start time: %s", strerror(-ret));
	if ((ret = latch_state_file_path(name, LATCH_STATE_AGENT, path, sizeof(path))))
		return latch_errf(err, errlen, ret, "'%s': no state path", name);
	/* the directory exists once any sandbox had a profile; write_raw makes it otherwise */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		if ((ret = latch_state_file_write_raw(name, LATCH_STATE_AGENT, "", 0, err, errlen)))
			return ret;
		return latch_state_file_write(name, LATCH_STATE_AGENT, &mark_format, "latch agent run's owner", &m, err,
					      errlen);
	}
	if (fd < 0)
		return latch_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	close(fd);
	return latch_state_file_write(name, LATCH_STATE_AGENT, &mark_format, "latch agent run's owner", &m, err,
				      errlen);
}

/* NAME's mark names an owner that is gone (no such PID, or a PID reused by another process). */
static bool mark_orphaned(const char *name, struct agent_mark *m)
{
	char e[LATCH_ERR_MAX], now[24];

	memset(m, 0, sizeof(*m));
	if (latch_state_file_read(name, LATCH_STATE_AGENT, &mark_format, m, e, sizeof(e)))
		return false;
	if (proc_start((pid_t)m->pid, now, sizeof(now)))
		return true;
	return strcmp(now, m->start) != 0;
}

int latch_sandbox_agent_orphans(int (*fn)(const char *name, const char *kit, uint32_t pid, void *arg), void *arg)
{
	static const char suffix[] = ".agent";
	char dir[PATH_MAX];
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (latch_path(dir, sizeof(dir), LATCH_POLICY_DIR))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char name[LATCH_NAME_MAX + 1];
		struct agent_mark m;

		if (len <= sizeof(suffix) - 1 || len - (sizeof(suffix) - 1) > LATCH_NAME_MAX ||
		    strcmp(de->d_name + len - (sizeof(suffix) - 1), suffix))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(len - (sizeof(suffix) - 1)), de->d_name);
		if (latch_parse_name(name, NULL, 0) || !mark_orphaned(name, &m))
			continue;
		n++;
		if (fn && fn(name, m.kit, m.pid, arg))
			break;
	}
	closedir(d);
	return n;
}

/* ---- choosing */

/* NAME is free: no sandbox, no mark, no guest-state backup a new guest of the name would be given. */
static bool name_free(const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	if (latch_vm_exists(name))
		return false;
	if (!latch_state_file_path(name, LATCH_STATE_AGENT, path, sizeof(path)) && lstat(path, &st) == 0)
		return false;
	if (!latch_state_file_path(name, LATCH_STATE_KIT, path, sizeof(path)) && lstat(path, &st) == 0)
		return false;
	return latch_vm_backup_dir(name, path, sizeof(path)) || lstat(path, &st) != 0;
}

/*
 * The first free agent-KIT-N (N from 1); a VM sandbox's name is at most
 * LATCH_VM_NAME_MAX long (its tap's name), so a long kit's is KIT-N, its
 * name cut to fit.
 */
static int name_pick(const char *kit, char *out, size_t len, char *err, size_t errlen)
{
	for (int n = 1; n <= 999; n++) {
		char num[8], cand[LATCH_KIT_NAME_MAX + 16];
		int room;

		snprintf(num, sizeof(num), "-%d", n);
		room = LATCH_VM_NAME_MAX - (int)strlen(num);
		if ((int)strlen("agent-") + (int)strlen(kit) <= room)
			snprintf(cand, sizeof(cand), "agent-%s%s", kit, num);
		else
			snprintf(cand, sizeof(cand), "%.*s%s", room, kit, num);
		if (strlen(cand) >= len)
			return -ENAMETOOLONG;
		memcpy(out, cand, strlen(cand) + 1);
		if (name_free(out))
			return 0;
	}
	return latch_errf(err, errlen, -EEXIST,
			  "no free sandbox name for kit %s (agent-%s-1 .. -999 are taken); "
			  "give one with --name",
			  kit, kit);
}

/*
 * KIT as a name (the kits directory, then the built-ins) or a file, through
 * the loader `latch kit check` uses.  latchd serves a sandbox's kit by name
 * from the kits directory, so a file elsewhere is refused: it would not be
 * the kit the broker serves.
 */
static struct latch_kit *kit_resolve(const char *arg, char *err, size_t errlen)
{
	char dir[PATH_MAX], real_dir[PATH_MAX], real_file[PATH_MAX], e[LATCH_ERR_MAX];
	struct latch_kit_opts o = latch_sandbox_kit_opts(dir, sizeof(dir));
	struct latch_kit *kit;
	char *slash;

	if (!strchr(arg, '/') && !strstr(arg, ".yaml") && !strstr(arg, ".yml"))
		return latch_sandbox_kit_open_checked(arg, err, errlen);
	kit = latch_sandbox_kit_verdict(latch_kit_load_file(arg, &o, err, errlen), err, errlen);
	if (!kit)
		return NULL;
	snprintf(real_file, sizeof(real_file), "%s", arg);
	if (!realpath(arg, real_file) || !o.dir || !realpath(o.dir, real_dir) || !(slash = strrchr(real_file, '/')))
		goto elsewhere;
	*slash = '\0';
	if (strcmp(real_file, real_dir))
		goto elsewhere;
	/* in the kits directory, carrying its file's name: the very kit `--kit NAME` loads (and latchd serves) */
	snprintf(e, sizeof(e), "%s", kit->name);
	latch_kit_free(kit);
	return latch_sandbox_kit_open_checked(e, err, errlen);
elsewhere:
	latch_errf(err, errlen, -EINVAL,
		   "kit file %s is not in the kits directory %s: latchd serves a sandbox's kit from there by name; "
		   "copy it to %s/%s.yaml (root's, 0644) and run `latch agent run %s`",
		   arg, o.dir ? o.dir : "(LATCH_ROOT too long)", o.dir ? o.dir : "", kit->name, kit->name);
	latch_kit_free(kit);
	errno = EINVAL;
	return NULL;
}

/* ---- removing */

int latch_sandbox_agent_remove(const char *name, const struct latch_sandbox_say *say, char *err, size_t errlen)
{
	struct latch_vm_destroy_result dr;
	enum latch_vm_fail fail;
	char e[LATCH_ERR_MAX];
	int ret = 0;

	/* --purge: a guest-state backup latchd took would be given to the next sandbox of the name */
	if (latch_vm_exists(name))
		ret = latch_sandbox_destroy(name, true, say, &dr, &fail, err, errlen);
	else /* up failed before the guest existed, or after vm/ removed it: the rest of what it made */
		latch_sandbox_kit_stop(name, true, say);
	if (ret)
		return ret;
	latch_state_forget(name, e, sizeof(e));
	return latch_state_file_remove(name, LATCH_STATE_AGENT, err, errlen);
}

/* Remove a sandbox whose `agent run` was killed, saying so in one line. */
static int orphan_remove(const char *name, const char *kit, uint32_t pid, void *arg)
{
	const struct latch_sandbox_say *say = arg;
	char e[LATCH_SANDBOX_ERR_MAX];

	if (latch_sandbox_agent_remove(name, NULL, e, sizeof(e)))
		latch_sandbox_sayf(say, LATCH_SANDBOX_WARN,
				   "sandbox %s of a killed `latch agent run` (pid %u) NOT removed: %s", name, pid, e);
	else
		latch_sandbox_sayf(say, LATCH_SANDBOX_NOTE,
				   "removed sandbox %s (kit %s): its `latch agent run` (pid %u) was killed", name, kit,
				   pid);
	return 0;
}

/* ---- saying the plan */

/* What up says of the kit was said before up began: during up only warnings pass. */
static void say_quiet(void *arg, enum latch_sandbox_say_kind kind, const char *line)
{
	const struct latch_sandbox_say *to = arg;

	if (kind == LATCH_SANDBOX_WARN || !strncmp(line, "warning: ", 9))
		to->fn(to->arg, kind, line);
}

static void say_list(const struct latch_sandbox_say *s, const char *head, char *const *words, int n,
		     const char *const *more, const char *tail)
{
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);

	if (!f)
		return;
	fputs(head, f);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? ", " : "", words[i]);
	/* a word the shell would split is shown quoted, as it would be typed */
	for (int i = 0; more && more[i]; i++)
		fprintf(f, strpbrk(more[i], " \t'\"") || !*more[i] ? " '%s'" : " %s", more[i]);
	fputs(tail, f);
	if (!fclose(f))
		latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "%s", line);
	free(line);
}

/* kosa8's lines: the kit, the workspace, the network, what is brokered; under --dry-run each route too. */
static void say_plan(const struct latch_sandbox_agent_opts *o, const struct latch_kit *kit, const char *name,
		     uint16_t port)
{
	const struct latch_sandbox_say *s = &o->say;

	latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "kit %s (%s), image %s, sandbox %s", kit->name, kit->source,
			   o->image ? o->image : LATCH_VM_DEFAULT_IMAGE, name);
	latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "workspace %s -> /workspace (nothing else on the host is visible)",
			   o->workspace);
	if (kit->n_egress)
		say_list(s, "network closed except the kit's egress_allow (", kit->egress, kit->n_egress, NULL,
			 ") and the egress broker");
	else
		latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "network closed except through the egress broker");
	for (int i = 0; i < kit->n_creds; i++) {
		const struct latch_kit_cred *cr = &kit->creds[i];
		char url[LATCH_KIT_HOST_MAX + LATCH_KIT_PATH_MAX + 32];

		latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE,
				   "brokering %s -> %s (the sandbox holds a placeholder, never the key)",
				   cr->up.secret_var[0] ? cr->up.secret_var : cr->up.secret_file, cr->up.host);
		if (!o->dry_run)
			continue;
		latch_kit_upstream_url(&cr->up, url, sizeof(url));
		latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE, "  route /%s on the broker (port %u) -> %s%s", cr->name, port,
				   url, cr->n_paths ? "" : " (every path)");
	}
	for (int i = 0; i < kit->n_setup; i++)
		latch_sandbox_sayf(s, LATCH_SANDBOX_NOTE,
				   "setup %s@%s, held to %.*s... (fetched and checked on the host)", kit->setup[i].name,
				   kit->setup[i].version, 22, kit->setup[i].integrity);
	say_list(s, "command: ", kit->command, kit->n_command, o->args, "");
}

/* ---- the run */

static int run_fail(struct latch_sandbox_agent_result *res, enum latch_vm_fail fail, int ret, char *err, size_t errlen,
		    const char *e)
{
	res->fail = fail;
	return latch_errf(err, errlen, ret < 0 ? ret : -EIO, "%s", e);
}

/* The kit, the workspace, the name: everything checked before anything exists. */
static int run_resolve(const struct latch_sandbox_agent_opts *o, struct latch_kit **kit, uint16_t *port,
		       struct latch_sandbox_agent_result *res, char *err, size_t errlen)
{
	char e[LATCH_SANDBOX_ERR_MAX];
	struct latch_conf conf;
	struct stat st;
	int ret;

	*kit = kit_resolve(o->kit, e, sizeof(e));
	if (!*kit)
		return run_fail(res, errno == ENOMEM ? LATCH_VM_FAIL_RUNTIME : LATCH_VM_FAIL_INPUT, -errno, err, errlen,
				e);
	if (!(*kit)->n_command) {
		res->fail = LATCH_VM_FAIL_INPUT;
		return latch_errf(err, errlen, -EINVAL,
				  "kit %s (%s) has no command: nothing for `agent run` to run; give it `command:`",
				  (*kit)->name, (*kit)->source);
	}
	if ((ret = stat(o->workspace, &st) ? -errno : 0) || !S_ISDIR(st.st_mode)) {
		res->fail = LATCH_VM_FAIL_INPUT;
		return latch_errf(err, errlen, -ENOTDIR, "workspace %s: %s; give a directory with -w DIR", o->workspace,
				  ret ? strerror(-ret) : "not a directory");
	}
	if ((ret = latch_conf_load(&conf, e, sizeof(e))))
		return run_fail(res, LATCH_VM_FAIL_INPUT, ret, err, errlen, e);
	*port = (uint16_t)conf.broker_port;
	/* a kit whose agent the image can't run, said now (--dry-run too), not after a boot */
	if ((ret = latch_sandbox_image_fits(*kit, o->image ? o->image : LATCH_VM_DEFAULT_IMAGE, e, sizeof(e))))
		return run_fail(res, LATCH_VM_FAIL_INPUT, ret, err, errlen, e);
	return 0;
}

/* The sandbox's name: --name, checked and free, or the first free agent-KIT-N. */
static int run_name(const struct latch_sandbox_agent_opts *o, const struct latch_kit *kit,
		    struct latch_sandbox_agent_result *res, char *err, size_t errlen)
{
	char e[LATCH_SANDBOX_ERR_MAX];

	if (!o->name)
		return name_pick(kit->name, res->name, sizeof(res->name), e, sizeof(e)) ?
			       run_fail(res, LATCH_VM_FAIL_INPUT, -EEXIST, err, errlen, e) :
			       0;
	snprintf(res->name, sizeof(res->name), "%s", o->name);
	if (latch_parse_name(o->name, e, sizeof(e)))
		return run_fail(res, LATCH_VM_FAIL_INPUT, -EINVAL, err, errlen, e);
	if (strlen(o->name) > LATCH_VM_NAME_MAX) {
		snprintf(e, sizeof(e), "--name %s: a VM sandbox's name is at most %d characters", o->name,
			 LATCH_VM_NAME_MAX);
		return run_fail(res, LATCH_VM_FAIL_INPUT, -ENAMETOOLONG, err, errlen, e);
	}
	if (!name_free(o->name)) {
		snprintf(e, sizeof(e),
			 "--name %s is in use (a sandbox, its state or its backup); `latch destroy "
			 "--purge %s` or another name",
			 o->name, o->name);
		return run_fail(res, LATCH_VM_FAIL_INPUT, -EEXIST, err, errlen, e);
	}
	return 0;
}

/* A stop signal already delivered (blocked, pending): its number, else 0. */
static int stop_pending(const sigset_t *stops)
{
	struct timespec now = { 0 };
	int sig = sigtimedwait(stops, NULL, &now);

	return sig > 0 ? sig : 0;
}

/*
 * The kit's command in the guest, with the kit's environment, in
 * /workspace, our stdin its stdin and its output on ours, unbounded (it is
 * streamed).  With a terminal on stdin it gets a pty of the terminal's size
 * (Ctrl-C is then a byte for the guest's line discipline, as over ssh -t).
 */
static int command_exec(const char *name, const char *const *argv, const char *const *env, bool tty,
			struct latch_vm_exec_result *r, char *err, size_t errlen)
{
	struct latch_vm_exec_opts eo = {
		.env = env,
		.io = LATCH_AGENT_IO_STDIN | (tty ? LATCH_AGENT_IO_TTY : 0),
		.stdin_fd = STDIN_FILENO,
		/* without a pty, the guest's bytes must not drive a terminal: a pipe or file gets them exact */
		.escape_out = !tty && isatty(STDOUT_FILENO),
		.escape_err = !tty && isatty(STDERR_FILENO),
	};

	return latch_vm_exec(name, argv, &eo, STDOUT_FILENO, STDERR_FILENO, r, err, errlen);
}

/* What the child that ran the command tells its parent. */
struct command_report {
	int ret;
	int status;
	char err[LATCH_ERR_MAX];
};

static volatile sig_atomic_t child_stop;

static void on_child_stop(int sig)
{
	child_stop = sig;
}

/* The child: the command, then its report on fd; never returns. */
static __attribute__((noreturn)) void command_child(const char *name, const char *const *argv, const char *const *env,
						    bool tty, const sigset_t *old, int fd, pid_t parent)
{
	struct sigaction sa = { .sa_handler = on_child_stop }; /* no SA_RESTART: the wait ends with -EINTR */
	struct command_report rep = { 0 };
	struct latch_vm_exec_result r;

	/* the run's owner is the parent: killed, it takes the command with it (the agent's channel closes) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	sigaction(SIGTERM, &sa, NULL);
	/* the parent takes these and stops us with SIGTERM */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	sigprocmask(SIG_SETMASK, old, NULL);
	rep.ret = command_exec(name, argv, env, tty, &r, rep.err, sizeof(rep.err));
	rep.status = r.status;
	if (write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		_exit(1);
	_exit(0);
}

/* Wait for PID, at most ms (-1: no bound); true when it was reaped. */
static bool child_reaped(pid_t pid, int ms)
{
	int64_t deadline = latch_now_ms() + ms;
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		struct timespec ts = { .tv_nsec = 100 * 1000 * 1000 };
		int st;

		if (waitpid(pid, &st, WNOHANG) == pid)
			return true;
		if (ms >= 0 && latch_now_ms() >= deadline)
			return false;
		sigtimedwait(&chld, NULL, &ts);
	}
}

/*
 * Run the command in a child and wait for it or for a stop signal, which
 * stops the child (SIGTERM, then SIGKILL after a grace) and is returned in
 * res->signal.  0 when the command ran (res->status) or was stopped.
 */
static int command_run(const struct latch_sandbox_agent_opts *o, const char *name, const char *const *argv,
		       const char *const *env, const sigset_t *stops, const sigset_t *old,
		       struct latch_sandbox_agent_result *res, char *err, size_t errlen)
{
	struct command_report rep = { .ret = -ECHILD };
	sigset_t waitset = *stops;
	pid_t parent = getpid(), pid;
	int pfd[2];

	if (pipe2(pfd, O_CLOEXEC))
		return latch_errf(err, errlen, -errno, "pipe: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return latch_errf(err, errlen, -errno, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(pfd[0]);
		command_child(name, argv, env, o->terminal != NULL, old, pfd[1], parent);
	}
	close(pfd[1]);
	sigaddset(&waitset, SIGCHLD);
	for (;;) {
		struct timespec ts = { .tv_sec = 1 };
		int sig = sigtimedwait(&waitset, NULL, &ts);

		if (sig > 0 && sig != SIGCHLD) {
			res->signal = sig;
			kill(pid, SIGTERM);
			if (!child_reaped(pid, AGENT_CHILD_GRACE_MS)) {
				kill(pid, SIGKILL);
				child_reaped(pid, -1);
			}
			close(pfd[0]);
			return 0;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			break;
	}
	if (read(pfd[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
		rep.ret = -ECHILD;
	close(pfd[0]);
	if (rep.ret == -ECHILD)
		return latch_errf(err, errlen, -ECHILD, "the command's relay ended without a report");
	if (rep.ret)
		return latch_errf(err, errlen, rep.ret, "%s", rep.err);
	res->ran = true;
	res->status = rep.status;
	return 0;
}

/* The kit's command line (its command, then ARGS) and its environment for the guest. */
static int command_line(const struct latch_sandbox_agent_opts *o, const char *name, const struct latch_kit *kit,
			char ***argv, char ***env, char *err, size_t errlen)
{
	struct latch_kit_state st;
	int n = 0, n_args = 0, n_env;

	while (o->args && o->args[n_args])
		n_args++;
	*argv = calloc((size_t)(kit->n_command + n_args + 1), sizeof(char *));
	if (!*argv)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	for (int i = 0; i < kit->n_command; i++)
		(*argv)[n++] = kit->command[i];
	for (int i = 0; i < n_args; i++)
		(*argv)[n++] = (char *)o->args[i];
	return latch_sandbox_env(name, env, &n_env, &st, err, errlen);
}

/* The sandbox up as `latch up NAME --kit K --workspace DIR --profile sealed` brings it, its times in res. */
static int run_up(const struct latch_sandbox_agent_opts *o, const struct latch_kit *kit,
		  struct latch_sandbox_agent_result *res, int64_t t0, char *err, size_t errlen)
{
	static struct latch_sandbox_up_opts uo;
	static struct latch_sandbox_up_result ur;
	static char inputs[LATCH_KIT_SETUP_MAX * 1024];
	int ret;

	memset(&uo, 0, sizeof(uo));
	snprintf(uo.vm.name, sizeof(uo.vm.name), "%s", res->name);
	snprintf(uo.vm.image, sizeof(uo.vm.image), "%s", o->image ? o->image : LATCH_VM_DEFAULT_IMAGE);
	uo.vm.memory_mib = o->memory_mib ? o->memory_mib : LATCH_AGENT_DEFAULT_MEMORY;
	uo.vm.cpus = LATCH_VM_DEFAULT_CPUS;
	snprintf(uo.vm.workspace, sizeof(uo.vm.workspace), "%s", o->workspace);
	uo.vm.warm = !o->cold;
	/* a warm start of a kit with setup restores a guest that has it installed, verified when it was made */
	if (uo.vm.warm)
		latch_sandbox_setup_template(kit, &uo.vm, inputs, sizeof(inputs));
	uo.vm.step = o->step;
	uo.vm.step_arg = o->step_arg;
	/* the kit's network and its broker, nothing else */
	uo.profile = "sealed";
	uo.kit = kit->name;
	uo.say = (struct latch_sandbox_say){ .fn = o->say.fn ? say_quiet : NULL, .arg = (void *)&o->say };
	res->ms_up_began = latch_now_ms() - t0;
	ret = latch_sandbox_up(&uo, &ur, err, errlen);
	json_decref(ur.kit_json);
	if (!ret && ur.again) /* the name was claimed, so this can't be ours */
		ret = latch_errf(err, errlen, -EEXIST, "sandbox %s was up already: not this run's", res->name);
	if (ret) {
		res->fail = ur.fail ? ur.fail : LATCH_VM_FAIL_RUNTIME;
		return ret;
	}
	if (!ur.vm.obs.pins || !ur.vm.obs.posture.enforced) {
		res->fail = LATCH_VM_FAIL_POSTURE;
		return latch_errf(err, errlen, -EPERM, "sandbox %s: enforcement NOT verified after boot: %s", res->name,
				  ur.vm.obs.pins ? ur.vm.obs.posture.why : "no pinned enforcement");
	}
	res->ms_enforced = res->ms_up_began + ur.vm.ms_enforced;
	res->ms_domain = res->ms_up_began + ur.vm.ms_domain;
	res->ms_agent = res->ms_up_began + ur.vm.ms_agent;
	res->ms_ready = latch_now_ms() - t0;
	if (ur.vm.template_made)
		latch_sandbox_sayf(
			&o->say, LATCH_SANDBOX_NOTE,
			"template %s of image %s made in %lld ms: later runs of this image and size restore it",
			ur.vm.template_id, uo.vm.image, (long long)ur.vm.ms_template);
	if (!o->cold && !ur.vm.warm)
		latch_sandbox_sayf(&o->say, LATCH_SANDBOX_WARN, "warm start failed (%s): the guest was booted",
				   ur.vm.warm_note);
	res->warm = ur.vm.warm;
	res->setup_in_template = ur.vm.warm && uo.vm.template_prepare;
	res->ms_template = ur.vm.ms_template;
	snprintf(res->template_id, sizeof(res->template_id), "%s", ur.vm.obs.st.template_id);
	return 0;
}

/* The kit's setup in the guest before its command (sandbox/setup.c); its failure fails the run. */
static int run_setup(const struct latch_sandbox_agent_opts *o, const struct latch_kit *kit,
		     struct latch_sandbox_agent_result *res, char *err, size_t errlen)
{
	int ret = latch_sandbox_kit_setup(res->name, kit, &o->say, err, errlen);

	if (ret)
		res->fail = LATCH_VM_FAIL_RUNTIME;
	return ret;
}

/*
 * Every installer fetched (or found in the cache) and held to its pin
 * before the sandbox exists: an unverifiable one refuses the run with
 * nothing started, and the install after boot reads the cache.
 */
static int run_verify_setup(const struct latch_sandbox_agent_opts *o, const struct latch_kit *kit,
			    struct latch_sandbox_agent_result *res, char *err, size_t errlen)
{
	struct latch_npm_tarball t[LATCH_KIT_SETUP_MAX];
	int ret = latch_sandbox_setup_fetch(kit, t, &o->say, err, errlen);

	if (ret) {
		res->fail = LATCH_VM_FAIL_RUNTIME;
		return ret;
	}
	latch_sandbox_setup_close(kit, t);
	return 0;
}

/* After up: setup, then the command, each only when no stop signal came first. */
static int run_in_guest(const struct latch_sandbox_agent_opts *o, const struct latch_kit *kit, const sigset_t *stops,
			const sigset_t *old, struct latch_sandbox_agent_result *res, int64_t t0, char *err,
			size_t errlen)
{
	char **argv = NULL, **env = NULL;
	int ret = 0;

	latch_sandbox_sayf(&o->say, LATCH_SANDBOX_NOTE, "sandbox %s ready in %lld ms (%s%s)", res->name,
			   (long long)res->ms_ready, res->warm ? "restored from template " : "booted",
			   res->warm ? res->template_id : "");
	if ((res->signal = stop_pending(stops)))
		return 0;
	if (res->setup_in_template)
		latch_sandbox_sayf(
			&o->say, LATCH_SANDBOX_NOTE,
			"setup: in the template (its %d installer%s verified and installed when it was made)",
			kit->n_setup, kit->n_setup == 1 ? "" : "s");
	else
		ret = run_setup(o, kit, res, err, errlen);
	res->ms_setup = latch_now_ms() - t0;
	if (ret || (res->signal = stop_pending(stops)))
		return ret;
	ret = command_line(o, res->name, kit, &argv, &env, err, errlen);
	if (!ret) {
		say_list(&o->say, "running kit setup, then: ", argv, kit->n_command, o->args, "");
		res->ms_command = latch_now_ms() - t0;
		if (o->terminal)
			o->terminal(o->terminal_arg, true);
		ret = command_run(o, res->name, (const char *const *)argv, (const char *const *)env, stops, old, res,
				  err, errlen);
		if (o->terminal)
			o->terminal(o->terminal_arg, false);
	}
	free(argv);
	latch_kit_env_free(env);
	if (ret)
		res->fail = LATCH_VM_FAIL_RUNTIME;
	return ret;
}

/* The sandbox removed (or kept, unmarked: a kept sandbox is the user's, not an orphan). */
static void run_end(const struct latch_sandbox_agent_opts *o, struct latch_sandbox_agent_result *res, bool keep,
		    char *err, size_t errlen, int ret)
{
	char e[LATCH_SANDBOX_ERR_MAX];

	if (keep) {
		latch_state_file_remove(res->name, LATCH_STATE_AGENT, e, sizeof(e));
		latch_sandbox_sayf(&o->say, LATCH_SANDBOX_NOTE,
				   "sandbox %s kept (`latch destroy --purge %s` removes it)", res->name, res->name);
		return;
	}
	if (latch_sandbox_agent_remove(res->name, NULL, e, sizeof(e))) {
		latch_sandbox_sayf(&o->say, LATCH_SANDBOX_WARN, "sandbox %s NOT removed: %s", res->name, e);
		if (!ret) /* the agent's status would hide it: a leftover is latch's failure */
			latch_errf(err, errlen, -EIO, "sandbox %s NOT removed: %s", res->name, e);
		return;
	}
	res->removed = true;
	latch_sandbox_sayf(&o->say, LATCH_SANDBOX_NOTE, "sandbox %s removed", res->name);
}

int latch_sandbox_agent_run(const struct latch_sandbox_agent_opts *o, struct latch_sandbox_agent_result *res, char *err,
			    size_t errlen)
{
	int64_t t0 = latch_now_ms();
	struct latch_kit *kit = NULL;
	sigset_t stops, old;
	uint16_t port = 0;
	int ret;

	memset(res, 0, sizeof(*res));
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	/* from here a stop signal waits for us: none can end the process half way through up */
	sigprocmask(SIG_BLOCK, &stops, &old);
	if ((ret = run_resolve(o, &kit, &port, res, err, errlen)))
		goto out;
	/* first, so that their names are free again */
	if (!o->dry_run)
		latch_sandbox_agent_orphans(orphan_remove, (void *)&o->say);
	if ((ret = run_name(o, kit, res, err, errlen)))
		goto out;
	say_plan(o, kit, res->name, port);
	if (o->dry_run) {
		latch_sandbox_sayf(&o->say, LATCH_SANDBOX_NOTE, "--dry-run, stopping before creating the sandbox");
		goto out;
	}
	if ((ret = run_verify_setup(o, kit, res, err, errlen)))
		goto out;
	if ((ret = mark_claim(res->name, kit->name, err, errlen))) {
		res->fail = LATCH_VM_FAIL_RUNTIME;
		goto out;
	}
	ret = run_up(o, kit, res, t0, err, errlen);
	if (!ret)
		ret = run_in_guest(o, kit, &stops, &old, res, t0, err, errlen);
	/* a failed up or a stop removes it whatever --keep says: no agent ran to keep it for */
	run_end(o, res, o->keep && !ret && !res->signal && res->ran, err, errlen, ret);
	if (!ret && !res->removed && !(o->keep && res->ran && !res->signal)) {
		res->fail = LATCH_VM_FAIL_RUNTIME;
		ret = -EIO;
	}
	if (res->signal)
		latch_sandbox_sayf(&o->say, LATCH_SANDBOX_NOTE, "stopped by signal %d", res->signal);
out:
	latch_kit_free(kit);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}
