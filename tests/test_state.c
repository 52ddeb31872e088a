// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_state.c - the per-sandbox state API (common/state.c): one path
 * scheme, one atomic write, one format, and the files it refuses.
 *
 * Each test runs under a fresh LATCH_ROOT (mkdtemp), owned by whoever runs
 * the tests (the file check accepts root's files or the caller's own).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

static char root[64];
static char *old_root;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	const char *was = getenv("LATCH_ROOT");

	old_root = was ? strdup(was) : NULL;
	strcpy(root, "/tmp/latch-state-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	setenv("LATCH_ROOT", root, 1);
}

static void teardown(void)
{
	if (old_root)
		setenv("LATCH_ROOT", old_root, 1);
	else
		unsetenv("LATCH_ROOT");
	free(old_root);
	nftw(root, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(sandbox_state, .init = setup, .fini = teardown);

/* A format of the shape the owners use: a value and a list. */
struct thing {
	char label[32];
	uint32_t port;
	int n_items;
	char items[4][16];
	bool legacy;
};

static int item_parse(void *obj, const char *v, char *msg, size_t msglen)
{
	struct thing *t = obj;

	if (t->n_items == 4)
		return latch_errf(msg, msglen, -EINVAL, "more than 4 items");
	snprintf(t->items[t->n_items++], sizeof(t->items[0]), "%s", v);
	return 0;
}

static void item_print(FILE *f, const void *obj)
{
	const struct thing *t = obj;

	for (int i = 0; i < t->n_items; i++)
		fprintf(f, "item = %s\n", t->items[i]);
}

/* The old format: "label PORT", one line. */
static int thing_legacy(const char *path, char *text, void *obj, char *err, size_t errlen)
{
	struct thing *t = obj;

	if (sscanf(text, "%31s %u", t->label, &t->port) != 2)
		return latch_errf_at(err, errlen, -EINVAL, path, 1, "not 'LABEL PORT'");
	t->legacy = true;
	return 0;
}

static const struct latch_kv_key thing_keys[] = {
	LATCH_KV_STR("label", struct thing, label, NULL),
	LATCH_KV_U32("port", struct thing, port, 1, 65535, "1..65535"),
	LATCH_KV_LIST_FN("item", item_parse, item_print),
};
static const struct latch_state_format thing_format = { thing_keys, 3, 0, thing_legacy };

static const char *path_of(const char *name, enum latch_state_kind kind)
{
	static char path[PATH_MAX];

	cr_assert_eq(latch_state_file_path(name, kind, path, sizeof(path)), 0);
	return path;
}

static void put(const char *name, enum latch_state_kind kind, const char *text, mode_t mode)
{
	char dir[PATH_MAX];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s", path_of(name, kind));
	*strrchr(dir, '/') = '\0';
	cr_assert_eq(latch_mkdirs(dir, 0700), 0);
	f = fopen(path_of(name, kind), "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(path_of(name, kind), mode), 0);
}

/* Each kind's file is where latch has always kept it: a host upgraded in place finds its state. */
Test(sandbox_state, paths_are_the_ones_latch_kept)
{
	char want[PATH_MAX];

	snprintf(want, sizeof(want), "%s/var/lib/latch/policy/sb1.profile", root);
	cr_expect_str_eq(path_of("sb1", LATCH_STATE_PROFILE), want);
	snprintf(want, sizeof(want), "%s/var/lib/latch/policy/sb1.kit", root);
	cr_expect_str_eq(path_of("sb1", LATCH_STATE_KIT), want);
	snprintf(want, sizeof(want), "%s/var/lib/latch/policy/sb1.learned", root);
	cr_expect_str_eq(path_of("sb1", LATCH_STATE_LEARNED), want);
	snprintf(want, sizeof(want), "%s/var/lib/latch/policy/sb1.grants", root);
	cr_expect_str_eq(path_of("sb1", LATCH_STATE_GRANTS), want);
	snprintf(want, sizeof(want), "%s/var/lib/latch/sandboxes/sb1/sandbox", root);
	cr_expect_str_eq(path_of("sb1", LATCH_STATE_VM), want);
	snprintf(want, sizeof(want), "%s/var/lib/latch/policy/sb1.agent", root);
	cr_expect_str_eq(path_of("sb1", LATCH_STATE_AGENT), want);
}

/* Invariant: a name never walks out of the state directory. */
Test(sandbox_state, name_that_is_a_path_refused)
{
	char path[PATH_MAX], err[LATCH_ERR_MAX] = "";
	struct thing t = { 0 };

	cr_expect_eq(latch_state_file_path("../../etc/x", LATCH_STATE_PROFILE, path, sizeof(path)), -EINVAL);
	cr_expect_eq(latch_state_file_read("../x", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), -EINVAL);
	cr_expect_not_null(strstr(err, "not a sandbox name"), "%s", err);
	cr_expect_eq(latch_state_file_write("a/b", LATCH_STATE_PROFILE, &thing_format, "x", &t, err, sizeof(err)),
		     -EINVAL);
	cr_expect_eq(latch_state_file_path("sb-1", LATCH_STATE_PROFILE, path, sizeof(path)), 0, "control");
}

/* What is written is read back whole, a list included; 0600 in a 0700 directory. */
Test(sandbox_state, round_trip)
{
	struct thing t = { .label = "claude", .port = 8119, .n_items = 2, .items = { "a b", "c" } }, back = { 0 };
	char err[LATCH_ERR_MAX] = "", dir[PATH_MAX];
	struct stat st;

	cr_assert_eq(latch_state_file_write("sb1", LATCH_STATE_KIT, &thing_format, "test", &t, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(stat(path_of("sb1", LATCH_STATE_KIT), &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0600);
	snprintf(dir, sizeof(dir), "%s/var/lib/latch/policy", root);
	cr_assert_eq(stat(dir, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0700);
	cr_assert_eq(latch_state_file_read("sb1", LATCH_STATE_KIT, &thing_format, &back, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_str_eq(back.label, "claude");
	cr_expect_eq(back.port, 8119);
	cr_assert_eq(back.n_items, 2);
	cr_expect_str_eq(back.items[0], "a b");
	cr_expect_str_eq(back.items[1], "c");
	cr_expect_not(back.legacy, "the current format is not the old one");
	cr_expect_eq(latch_state_file_remove("sb1", LATCH_STATE_KIT, err, sizeof(err)), 0);
	cr_expect_eq(latch_state_file_read("sb1", LATCH_STATE_KIT, &thing_format, &back, err, sizeof(err)), -ENOENT);
	cr_expect_eq(latch_state_file_remove("sb1", LATCH_STATE_KIT, err, sizeof(err)), 0, "already gone: 0");
}

/* Invariant: a write replaces the file in one step; a reader holding the old one reads it whole. */
Test(sandbox_state, write_replaces_atomically)
{
	struct thing t = { .label = "old", .port = 1 };
	char err[LATCH_ERR_MAX] = "", buf[256] = "";
	struct stat before, after;
	int fd;
	ssize_t n;

	cr_assert_eq(latch_state_file_write("sb1", LATCH_STATE_PROFILE, &thing_format, "h", &t, err, sizeof(err)), 0);
	fd = open(path_of("sb1", LATCH_STATE_PROFILE), O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &before), 0);
	strcpy(t.label, "new");
	cr_assert_eq(latch_state_file_write("sb1", LATCH_STATE_PROFILE, &thing_format, "h", &t, err, sizeof(err)), 0);
	cr_assert_eq(stat(path_of("sb1", LATCH_STATE_PROFILE), &after), 0);
	cr_expect_neq(before.st_ino, after.st_ino, "a new file renamed over the old, not the old rewritten");
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(n, 0);
	cr_expect_not_null(strstr(buf, "label = old\n"), "the old file stays whole for its reader: %s", buf);
}

/* Invariant: a state file someone else could have written is refused; latch's own 0600 file is read. */
Test(sandbox_state, file_others_may_write_refused)
{
	struct thing t;
	char err[LATCH_ERR_MAX];

	put("sb1", LATCH_STATE_PROFILE, "label = x\nport = 2\n", 0620);
	memset(&t, 0, sizeof(t));
	err[0] = '\0';
	cr_expect_eq(latch_state_file_read("sb1", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), -EPERM,
		     "%s", err);
	cr_expect_not_null(strstr(err, "chmod"), "the line says the fix: %s", err);
	cr_expect_str_eq(t.label, "", "nothing read from it");
	chmod(path_of("sb1", LATCH_STATE_PROFILE), 0600);
	cr_expect_eq(latch_state_file_read("sb1", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), 0,
		     "control: %s", err);
	cr_expect_str_eq(t.label, "x");
	/* a kit's state is a secret: group-readable is enough to refuse it */
	put("sb1", LATCH_STATE_KIT, "label = x\nport = 2\n", 0640);
	cr_expect_eq(latch_state_file_read("sb1", LATCH_STATE_KIT, &thing_format, &t, err, sizeof(err)), -EPERM, "%s",
		     err);
}

/* Invariant: a link or a FIFO in a state file's place is refused, each with its own errno, and never hangs. */
Test(sandbox_state, link_and_fifo_refused)
{
	struct thing t = { 0 };
	char err[LATCH_ERR_MAX] = "", target[PATH_MAX];

	put("sb1", LATCH_STATE_PROFILE, "label = x\nport = 2\n", 0600);
	snprintf(target, sizeof(target), "%s", path_of("sb1", LATCH_STATE_PROFILE));
	cr_assert_eq(symlink(target, path_of("sb2", LATCH_STATE_PROFILE)), 0);
	cr_expect_eq(latch_state_file_read("sb2", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), -ELOOP,
		     "%s", err);
	cr_expect_not_null(strstr(err, "symbolic link"), "%s", err);
	cr_assert_eq(mkfifo(path_of("sb3", LATCH_STATE_PROFILE), 0600), 0);
	cr_expect_eq(latch_state_file_read("sb3", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), -EINVAL,
		     "%s", err);
	cr_expect_not_null(strstr(err, "not a regular file"), "%s", err);
	cr_expect_eq(latch_state_file_read("sb1", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), 0,
		     "control: the file itself: %s", err);
}

/* A file an older latch wrote is read by the owner's fallback; a current one never reaches it. */
Test(sandbox_state, old_format_fallback)
{
	struct thing t = { 0 };
	char err[LATCH_ERR_MAX] = "";

	put("sb1", LATCH_STATE_PROFILE, "research 8119\n", 0600);
	cr_assert_eq(latch_state_file_read("sb1", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect(t.legacy);
	cr_expect_str_eq(t.label, "research");
	cr_expect_eq(t.port, 8119);
	memset(&t, 0, sizeof(t));
	put("sb1", LATCH_STATE_PROFILE, "# a comment\n\nport = 7\nlabel = research\n", 0600);
	cr_assert_eq(latch_state_file_read("sb1", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_not(t.legacy, "control: the current format");
	cr_expect_eq(t.port, 7);
	/* a current file with a bad line is refused with its line, not handed to the fallback */
	put("sb1", LATCH_STATE_PROFILE, "label = x\nport = 0\n", 0600);
	cr_expect_eq(latch_state_file_read("sb1", LATCH_STATE_PROFILE, &thing_format, &t, err, sizeof(err)), -EINVAL);
	cr_expect_not_null(strstr(err, ":2: "), "%s", err);
	/* and without a fallback an old file is an unknown key */
	put("sb1", LATCH_STATE_PROFILE, "research 8119\n", 0600);
	{
		struct latch_state_format no_legacy = thing_format;

		no_legacy.legacy = NULL;
		cr_expect_eq(latch_state_file_read("sb1", LATCH_STATE_PROFILE, &no_legacy, &t, err, sizeof(err)),
			     -EINVAL);
	}
}

/* A sandbox that is gone leaves nothing a new one of its name would inherit; its kit has its own removal. */
Test(sandbox_state, forget_removes_what_was_kept)
{
	char err[LATCH_ERR_MAX] = "";

	put("sb1", LATCH_STATE_PROFILE, "p\n", 0600);
	put("sb1", LATCH_STATE_LEARNED, "l\n", 0600);
	put("sb1", LATCH_STATE_GRANTS, "{}\n", 0600);
	put("sb1", LATCH_STATE_KIT, "k\n", 0600);
	put("sb1", LATCH_STATE_AGENT, "pid = 1\n", 0600);
	put("sb2", LATCH_STATE_LEARNED, "other\n", 0600);
	cr_assert_eq(latch_state_forget("sb1", err, sizeof(err)), 0, "%s", err);
	cr_expect_neq(access(path_of("sb1", LATCH_STATE_PROFILE), F_OK), 0);
	cr_expect_neq(access(path_of("sb1", LATCH_STATE_LEARNED), F_OK), 0);
	cr_expect_neq(access(path_of("sb1", LATCH_STATE_GRANTS), F_OK), 0);
	/* an agent run's owner mark: a new sandbox of the name is no killed run's */
	cr_expect_neq(access(path_of("sb1", LATCH_STATE_AGENT), F_OK), 0);
	cr_expect_eq(access(path_of("sb1", LATCH_STATE_KIT), F_OK), 0, "the kit goes by latch_kit_state_remove");
	cr_expect_eq(access(path_of("sb2", LATCH_STATE_LEARNED), F_OK), 0, "another sandbox's files stay");
	cr_expect_eq(latch_state_forget("sb1", err, sizeof(err)), 0, "already gone: 0");
}
