// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_vmstate.c - `latch backup`, `restore` and `boot`: a VM sandbox's
 * guest state, and the boundary at boot.  The work is in vm/
 * (guest_state.c, boot.c); this file parses and prints.
 */
#include <errno.h>
#include <limits.h>
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
	if (!latch_vm_exists(argv[1]))
		return latch_err_no_sandbox("VM sandbox", argv[1]);
	return 0;
}

/* One sandbox of `backup --all`: only a running guest (its agent's socket exists) is asked. */
static int backup_running(const char *name, void *arg)
{
	json_t *list = arg;
	char err[LATCH_ERR_MAX];
	uint64_t bytes = 0;
	uint32_t files = 0;
	int rc;

	if (!latch_vm_running(name))
		return 0;
	rc = latch_vm_backup(name, &bytes, &files, err, sizeof(err));
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
	n = latch_vm_list(backup_running, list);
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
	if (latch_vm_backup(argv[1], &bytes, &files, err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "backup %s: %s", argv[1], err);
	latch_vm_backup_dir(argv[1], dir, sizeof(dir));
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
	r = latch_vm_restore(argv[1], NULL, &bytes, err, sizeof(err));
	if (r)
		return latch_err(r == -ENOENT ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "restore %s: %s", argv[1], err);
	if (!latch_json)
		printf("%s: %s restored in the guest (%llu bytes of tar)\n", argv[1], LATCH_GUEST_STATE_DIR,
		       (unsigned long long)bytes);
	latch_json_out(json_pack("{s:s, s:s, s:I}", "sandbox", argv[1], "guest_dir", LATCH_GUEST_STATE_DIR, "bytes",
				 (json_int_t)bytes));
	return 0;
}

static void apply_cb(const char *name, int ret, const struct latch_boot_result *r, void *arg)
{
	json_array_append_new(arg, json_pack("{s:s, s:b, s:b, s:b, s:b, s:s}", "sandbox", name, "enforced", r->enforced,
					     "tap_created", r->tap_created, "from_pins", r->from_pins, "routed",
					     r->routed, "note", r->note));
	if (!latch_json)
		printf("%s: %s%s%s%s%s\n", name, r->enforced ? "enforced (verified in the kernel)" : "NOT ENFORCED",
		       r->tap_created ? ", tap re-created" : "",
		       r->enforced ? (r->from_pins ? ", from the pins" : ", fresh default-deny (no pins)") : "",
		       *r->note ? ": " : "", r->note);
}

static void wrote_cb(const char *path, void *arg)
{
	json_array_append_new(arg, json_string(path));
	if (!latch_json)
		printf("wrote %s\n", path);
}

struct uninstall_lists {
	json_t *removed, *kept;
};

static void uninstalled_cb(const char *path, bool removed, void *arg)
{
	struct uninstall_lists *l = arg;

	json_array_append_new(removed ? l->removed : l->kept, json_string(path));
	if (!latch_json)
		printf(removed ? "removed %s\n" : "kept %s: not written by latch\n", path);
}

int cmd_boot(int argc, char **argv)
{
	char err[LATCH_ERR_MAX], exe[PATH_MAX];
	json_t *list;
	ssize_t n;
	int failed;

	if (argc >= 2 && !strcmp(argv[1], "hook")) {
		if (argc < 4)
			return fprintf(stderr, "latch boot hook: usage: DOMAIN OP [SUBOP EXTRA]\n"), 1;
		if (latch_vm_boot_hook(argv[2], argv[3], STDIN_FILENO, err, sizeof(err)))
			return fprintf(stderr, "latch: refusing to start %s: %s\n", argv[2], err), 1;
		return 0;
	}
	if (argc != 2 || (strcmp(argv[1], "apply") && strcmp(argv[1], "install") && strcmp(argv[1], "uninstall")))
		return latch_err(LATCH_EXIT_USAGE, "usage: latch boot install | boot uninstall | boot apply");
	if (latch_need_root("boot"))
		return LATCH_EXIT_USAGE;
	list = json_array();
	if (!strcmp(argv[1], "uninstall")) {
		json_t *kept = json_array();
		struct uninstall_lists l = { list, kept };

		if (latch_vm_boot_uninstall(uninstalled_cb, &l, err, sizeof(err))) {
			json_decref(list);
			json_decref(kept);
			return latch_err(LATCH_EXIT_FAILED, "boot uninstall: %s", err);
		}
		if (!latch_json && !json_array_size(list))
			printf("nothing of latch's boot install was there\n");
		latch_json_out(json_pack("{s:o, s:o}", "removed", list, "kept", kept));
		return 0;
	}
	if (!strcmp(argv[1], "install")) {
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0) {
			json_decref(list);
			return latch_err(LATCH_EXIT_FAILED, "cannot find latch's own path");
		}
		exe[n] = '\0';
		if (latch_vm_boot_install(exe, wrote_cb, list, err, sizeof(err))) {
			json_decref(list);
			return latch_err(LATCH_EXIT_FAILED, "boot install: %s", err);
		}
		if (!latch_json)
			printf("libvirtd reads new hooks only when it starts or gets SIGHUP\n");
		latch_json_out(json_pack("{s:o}", "wrote", list));
		return 0;
	}
	failed = latch_vm_boot_apply(apply_cb, list);
	if (failed < 0) {
		json_decref(list);
		return latch_err(LATCH_EXIT_FAILED, "boot apply: cannot list sandboxes: %s", strerror(-failed));
	}
	latch_json_out(json_pack("{s:o, s:b}", "sandboxes", list, "verified", failed == 0));
	return failed ? LATCH_EXIT_UNVERIFIED : 0;
}
