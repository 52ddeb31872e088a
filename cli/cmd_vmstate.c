// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_vmstate.c - `latch backup`, `restore`, `task` and `boot`: a VM
 * sandbox's guest state, throwaway clones, and the boundary at boot.
 *
 * `task` makes a clone: a fresh sandbox from the same image with the
 * source's guest state restored into it, and nothing but the host services
 * allowed (a fresh sandbox's policy is empty: sealed).  SIGINT, SIGTERM and
 * SIGHUP only set a flag; whatever was made is destroyed before the exit.
 * A SIGKILL leaves the clone behind; `latch destroy task-N` removes it.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "vm/vm.h"

static int need_vm(int argc, char **argv, const char *what)
{
	char err[LATCH_ERR_MAX];

	if (argc != 2)
		return latch_err(LATCH_EXIT_USAGE, "%s takes one NAME; see `latch help %s`", what, what);
	if (latch_parse_name(argv[1], err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (latch_need_root(what))
		return LATCH_EXIT_USAGE;
	if (!latch_state_exists(argv[1]))
		return latch_err(LATCH_EXIT_USAGE, "no VM sandbox '%s' (see `latch ls`)", argv[1]);
	return 0;
}

/* One sandbox of `backup --all`: only a running guest (its agent's socket exists) is asked. */
static int backup_running(const char *name, void *arg)
{
	json_t *list = arg;
	char agent[PATH_MAX], err[LATCH_ERR_MAX];
	uint64_t bytes = 0;
	uint32_t files = 0;
	int rc;

	if (latch_vm_agent_path(name, agent, sizeof(agent)) || access(agent, F_OK))
		return 0;
	rc = latch_guest_state_backup(name, &bytes, &files, err, sizeof(err));
	if (rc && !latch_json)
		fprintf(stderr, "latch: backup %s: %s\n", name, err);
	else if (!latch_json)
		printf("%s: backed up (%u entries, %llu bytes)\n", name, files, (unsigned long long)bytes);
	json_array_append_new(list, json_pack("{s:s, s:b, s:s?, s:i, s:I}", "sandbox", name, "ok", rc == 0, "error",
					      rc ? err : NULL, "entries", files, "bytes", (json_int_t)bytes));
	return 0;
}

/*
 * `latch backup --all`: every running VM sandbox, one after another.  latchd
 * runs it every backup_interval (it never touches guests itself) and reads
 * the --json result.
 */
static int backup_all(void)
{
	json_t *list = json_array();
	size_t i;
	json_t *b;
	int failed = 0, n;

	if (latch_need_root("backup"))
		return LATCH_EXIT_USAGE;
	n = latch_state_list(backup_running, list);
	if (n < 0) {
		json_decref(list);
		return latch_err(LATCH_EXIT_FAILED, "backup --all: cannot list sandboxes: %s", strerror(-n));
	}
	json_array_foreach(list, i, b)
		failed += !json_is_true(json_object_get(b, "ok"));
	latch_json_out(json_pack("{s:o}", "backups", list)); /* takes list */
	return failed ? LATCH_EXIT_FAILED : LATCH_EXIT_OK;
}

int cmd_backup(int argc, char **argv)
{
	char err[LATCH_ERR_MAX], dir[PATH_MAX];
	uint64_t bytes = 0;
	uint32_t files = 0;
	int rc;

	if (argc == 2 && !strcmp(argv[1], "--all"))
		return backup_all();
	rc = need_vm(argc, argv, "backup");
	if (rc)
		return rc;
	if (latch_guest_state_backup(argv[1], &bytes, &files, err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "backup %s: %s", argv[1], err);
	latch_guest_state_dir(argv[1], dir, sizeof(dir));
	if (!latch_json)
		printf("%s: %s backed up to %s (%u entries, %llu bytes)\n", argv[1], LATCH_GUEST_STATE_DIR, dir, files,
		       (unsigned long long)bytes);
	latch_json_out(json_pack("{s:s, s:s, s:s, s:i, s:I}", "sandbox", argv[1], "guest_dir", LATCH_GUEST_STATE_DIR,
				 "host_dir", dir, "entries", files, "bytes", (json_int_t)bytes));
	return 0;
}

int cmd_restore(int argc, char **argv)
{
	char err[LATCH_ERR_MAX];
	uint64_t bytes = 0;
	int rc = need_vm(argc, argv, "restore"), r;

	if (rc)
		return rc;
	r = latch_guest_state_restore(argv[1], NULL, &bytes, err, sizeof(err));
	if (r)
		return latch_err(r == -ENOENT ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "restore %s: %s", argv[1], err);
	if (!latch_json)
		printf("%s: %s restored in the guest (%llu bytes of tar)\n", argv[1], LATCH_GUEST_STATE_DIR,
		       (unsigned long long)bytes);
	latch_json_out(json_pack("{s:s, s:s, s:I}", "sandbox", argv[1], "guest_dir", LATCH_GUEST_STATE_DIR, "bytes",
				 (json_int_t)bytes));
	return 0;
}

static volatile sig_atomic_t task_stop;

static void on_task_signal(int sig)
{
	task_stop = sig;
}

static int task_run(const char *clone, char **cmd, uint32_t timeout_ms)
{
	struct latch_agent_exec_opts eo = { .timeout_ms = timeout_ms };
	struct latch_agent_result r;
	struct latch_agent *a = NULL;
	char sock[PATH_MAX];
	int ret;

	latch_vm_agent_path(clone, sock, sizeof(sock));
	ret = latch_agent_connect(sock, &a);
	if (!ret)
		ret = latch_agent_ping(a, 5000, NULL, 0);
	if (!ret && !task_stop)
		ret = latch_agent_exec(a, (const char *const *)cmd, &eo, STDOUT_FILENO, STDERR_FILENO, &r);
	latch_agent_close(a); /* cancels a command still running */
	if (task_stop)
		return -EINTR;
	if (ret)
		return latch_err(LATCH_EXIT_FAILED, "task in %s: %s", clone, strerror(-ret)), -EIO;
	return latch_agent_status(&r);
}

int cmd_task(int argc, char **argv)
{
	static struct latch_vm_up_result res;
	struct latch_vm_up_opts o = { .boot_timeout_ms = LATCH_VM_BOOT_TIMEOUT_MS };
	struct sigaction sa = { .sa_handler = on_task_signal };
	struct latch_vm_state st;
	enum latch_vm_fail fail;
	char err[LATCH_ERR_MAX], src[PATH_MAX], e2[LATCH_ERR_MAX];
	const char *name;
	uint32_t u, timeout_ms = 0;
	int i = 2, status = LATCH_EXIT_FAILED, r;
	bool have_copy;

	if (argc < 2)
		return latch_err(LATCH_EXIT_USAGE, "usage: latch task NAME [--timeout S] -- CMD...");
	name = argv[1];
	if (latch_parse_name(name, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (i + 1 < argc && !strcmp(argv[i], "--timeout")) {
		if (latch_parse_uint(argv[i + 1], 1, 86400, &u))
			return latch_err(LATCH_EXIT_USAGE, "--timeout '%s': give 1..86400 seconds", argv[i + 1]);
		timeout_ms = u * 1000;
		i += 2;
	}
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc)
		return latch_err(LATCH_EXIT_USAGE, "task needs a command: latch task NAME -- CMD...");
	if (latch_need_root("task"))
		return LATCH_EXIT_USAGE;
	if (latch_state_load(name, &st, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "no VM sandbox '%s' (see `latch ls`)", name);

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* the source's memory, fresh when its guest runs, else its last backup */
	if (latch_guest_state_backup(name, NULL, NULL, e2, sizeof(e2)) && !latch_json)
		fprintf(stderr, "latch: task: no fresh backup of %s (%s); using the last one if any\n", name, e2);
	latch_guest_state_dir(name, src, sizeof(src));
	have_copy = access(src, F_OK) == 0;

	snprintf(o.name, sizeof(o.name), "task-%u", (unsigned int)getpid() % 100000);
	snprintf(o.image, sizeof(o.image), "%s", st.image);
	o.memory_mib = st.memory_mib;
	o.cpus = st.cpus;
	/* no workspace: a clone touches nothing of the host's but its services */
	if (!latch_json)
		fprintf(stderr, "latch: task: clone %s of %s, sealed\n", o.name, name);
	if (task_stop)
		return 128 + task_stop;
	r = latch_vm_up(&o, &res, &fail, err, sizeof(err));
	if (r) {
		/* up rolls back what it made; a name in use means it was not ours to remove */
		if (fail != LATCH_VM_FAIL_INPUT)
			latch_vm_destroy(o.name, &fail, e2, sizeof(e2));
		return task_stop ? 128 + task_stop : latch_err((int)fail, "task: clone %s: %s", o.name, err);
	}
	if (!res.obs.pins || !res.obs.posture.enforced) {
		latch_err(LATCH_EXIT_UNVERIFIED, "task: enforcement on clone %s not verified", o.name);
		status = LATCH_EXIT_UNVERIFIED;
		goto out;
	}
	if (have_copy && !task_stop && latch_guest_state_restore(o.name, src, NULL, err, sizeof(err))) {
		latch_err(LATCH_EXIT_FAILED, "task: restoring %s's state into %s: %s", name, o.name, err);
		goto out;
	}
	if (!task_stop)
		status = task_run(o.name, argv + i, timeout_ms);
	if (status == -EIO)
		status = LATCH_EXIT_FAILED;
out:
	if (task_stop) {
		fprintf(stderr, "latch: task: signal %d, removing clone %s\n", (int)task_stop, o.name);
		status = 128 + task_stop;
	}
	if (latch_vm_destroy(o.name, &fail, e2, sizeof(e2))) {
		latch_err(LATCH_EXIT_FAILED, "task: clone %s NOT removed: %s; `latch destroy %s`", o.name, e2, o.name);
		if (!status)
			status = LATCH_EXIT_FAILED;
	}
	return status;
}

struct apply_ctx {
	json_t *arr;
	int failed;
};

static int apply_cb(const char *name, void *arg)
{
	struct apply_ctx *c = arg;
	struct latch_boot_result r;
	int ret = latch_boot_apply_one(name, &r);

	if (ret)
		c->failed++;
	if (!latch_json)
		printf("%s: %s%s%s%s%s\n", name, r.enforced ? "enforced (verified in the kernel)" : "NOT ENFORCED",
		       r.tap_created ? ", tap re-created" : "",
		       r.enforced ? (r.from_pins ? ", from the pins" : ", fresh default-deny (no pins)") : "",
		       *r.note ? ": " : "", r.note);
	json_array_append_new(c->arr, json_pack("{s:s, s:b, s:b, s:b, s:b, s:s}", "sandbox", name, "enforced",
						r.enforced, "tap_created", r.tap_created, "from_pins", r.from_pins,
						"routed", r.routed, "note", r.note));
	return 0;
}

static void wrote_cb(const char *path, void *arg)
{
	json_array_append_new(arg, json_string(path));
	if (!latch_json)
		printf("wrote %s\n", path);
}

static int boot_hook(int argc, char **argv)
{
	static char xml[1 << 20];
	char err[LATCH_ERR_MAX];
	size_t n = 0, k;

	if (argc < 4)
		return fprintf(stderr, "latch boot hook: usage: DOMAIN OP [SUBOP EXTRA]\n"), 1;
	while (n < sizeof(xml) - 1 && (k = fread(xml + n, 1, sizeof(xml) - 1 - n, stdin)) > 0)
		n += k;
	xml[n] = '\0';
	if (latch_boot_hook_check(argv[2], argv[3], xml, err, sizeof(err))) {
		fprintf(stderr, "latch: refusing to start %s: %s\n", argv[2], err);
		return 1;
	}
	return 0;
}

int cmd_boot(int argc, char **argv)
{
	char err[LATCH_ERR_MAX], exe[PATH_MAX];
	ssize_t n;

	if (argc >= 2 && !strcmp(argv[1], "hook"))
		return boot_hook(argc, argv);
	if (argc != 2 || (strcmp(argv[1], "apply") && strcmp(argv[1], "install")))
		return latch_err(LATCH_EXIT_USAGE, "usage: latch boot install | boot apply");
	if (latch_need_root("boot"))
		return LATCH_EXIT_USAGE;
	if (!strcmp(argv[1], "install")) {
		json_t *paths = json_array();

		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0) {
			json_decref(paths);
			return latch_err(LATCH_EXIT_FAILED, "cannot find latch's own path");
		}
		exe[n] = '\0';
		if (latch_boot_install(exe, wrote_cb, paths, err, sizeof(err))) {
			json_decref(paths);
			return latch_err(LATCH_EXIT_FAILED, "boot install: %s", err);
		}
		if (!latch_json)
			printf("libvirtd reads new hooks only when it starts or gets SIGHUP\n");
		latch_json_out(json_pack("{s:o}", "wrote", paths));
		return 0;
	}
	struct apply_ctx c = { .arr = json_array() };
	int count = latch_state_list(apply_cb, &c);

	if (count < 0) {
		json_decref(c.arr);
		return latch_err(LATCH_EXIT_FAILED, "boot apply: cannot list sandboxes: %s", strerror(-count));
	}
	latch_json_out(json_pack("{s:o, s:b}", "sandboxes", c.arr, "verified", c.failed == 0));
	return c.failed ? LATCH_EXIT_UNVERIFIED : 0;
}
