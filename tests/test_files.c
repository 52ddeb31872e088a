// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_files.c - the one opener of a file latch trusts (common/files.c's
 * latch_open_trusted) and the readers that go through it.
 *
 * Invariant: a file that decides what a sandbox may do (latch.conf, a
 * profile, a kit, a secret, the price table) is read only when it is a
 * regular file, reached without a symbolic link, owned by root (or the
 * caller) and writable by nobody else; a FIFO is refused at once, never
 * waited on.  Each refusal has one errno whoever reads the file: -ELOOP for
 * a link, -EINVAL for what is not a regular file, -EPERM for the owner or
 * the mode.  Each attack has a control beside it that opens.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "budget/internal.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/latch-files-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(open_trusted, .init = setup, .fini = teardown, .timeout = 10);
TestSuite(trusted_readers, .init = setup, .fini = teardown, .timeout = 10);

/* DIR/NAME holding TEXT with MODE (exactly: no umask); the path is in buf */
static const char *file_at(char *buf, size_t len, const char *name, mode_t mode, const char *text)
{
	FILE *f;

	snprintf(buf, len, "%s/%s", dir, name);
	f = fopen(buf, "w");
	cr_assert_not_null(f, "%s: %s", buf, strerror(errno));
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(buf, mode), 0);
	return buf;
}

static const char *fifo_at(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
	cr_assert_eq(mkfifo(buf, 0600), 0, "%s: %s", buf, strerror(errno));
	return buf;
}

static const char *link_to(char *buf, size_t len, const char *name, const char *target)
{
	snprintf(buf, len, "%s/%s", dir, name);
	cr_assert_eq(symlink(target, buf), 0);
	return buf;
}

/* latch_open_trusted(path, kind) is REFUSED with that errno and a line naming the file, or opens */
static void expect_open(const char *path, enum latch_file_kind kind, int refused, const char *words)
{
	char err[LATCH_ERR_MAX] = "";
	struct stat st;
	int fd = latch_open_trusted(path, kind, NULL, &st, err, sizeof(err));

	if (!refused) {
		cr_expect_geq(fd, 0, "%s refused (%d): %s", path, fd, err);
		cr_expect(fd < 0 || S_ISREG(st.st_mode), "%s: st is not the file's", path);
		if (fd >= 0)
			close(fd);
		return;
	}
	if (fd >= 0)
		close(fd);
	cr_expect_eq(fd, refused, "%s: %d (%s), not %d", path, fd, err, refused);
	cr_expect(!strncmp(err, path, strlen(path)), "the line names no file: %s", err);
	cr_expect_not_null(strstr(err, words), "'%s' not in: %s", words, err);
}

Test(open_trusted, a_symbolic_link_is_eloop_even_to_a_good_file)
{
	char good[128], link[128];

	file_at(good, sizeof(good), "good", 0644, "x = 1\n");
	link_to(link, sizeof(link), "link", good);
	expect_open(good, LATCH_FILE_CONFIG, 0, NULL); /* control */
	expect_open(link, LATCH_FILE_CONFIG, -ELOOP, "is a symbolic link; replace it with the file");
	expect_open(link, LATCH_FILE_SECRET, -ELOOP, "is a symbolic link");
	expect_open(link, LATCH_FILE_PLAIN, -ELOOP, "is a symbolic link");
}

Test(open_trusted, a_link_line_names_what_the_file_is)
{
	char good[128], link[128], err[LATCH_ERR_MAX];

	file_at(good, sizeof(good), "good", 0644, "");
	link_to(link, sizeof(link), "link", good);
	cr_expect_eq(latch_open_trusted(link, LATCH_FILE_CONFIG, "a profile", NULL, err, sizeof(err)), -ELOOP);
	cr_expect_not_null(
		strstr(err, "is a symbolic link; a profile must be a regular file: replace the link with the file"),
		"%s", err);
}

/* a FIFO with no writer: a blocking open would wait forever (the suite's timeout catches it) */
Test(open_trusted, a_fifo_is_einval_at_once_never_waited_on)
{
	char fifo[128], good[128];

	fifo_at(fifo, sizeof(fifo), "fifo");
	file_at(good, sizeof(good), "good", 0600, "");
	expect_open(good, LATCH_FILE_SECRET, 0, NULL); /* control */
	expect_open(fifo, LATCH_FILE_CONFIG, -EINVAL, "not a regular file");
	expect_open(fifo, LATCH_FILE_SECRET, -EINVAL, "not a regular file");
	expect_open(fifo, LATCH_FILE_PLAIN, -EINVAL, "not a regular file");
	expect_open("/dev/null", LATCH_FILE_CONFIG, -EINVAL, "not a regular file");
	expect_open(dir, LATCH_FILE_CONFIG, -EINVAL, "not a regular file");
}

Test(open_trusted, a_file_others_may_write_is_eperm)
{
	char g[128], o[128], ok[128];

	file_at(ok, sizeof(ok), "ok", 0644, "");
	file_at(g, sizeof(g), "group", 0664, "");
	file_at(o, sizeof(o), "world", 0646, "");
	expect_open(ok, LATCH_FILE_CONFIG, 0, NULL); /* control: others may read a config */
	expect_open(g, LATCH_FILE_CONFIG, -EPERM, "writable by group or others (mode 0664); run chmod go-w");
	expect_open(o, LATCH_FILE_CONFIG, -EPERM, "writable by group or others (mode 0646); run chmod go-w");
	expect_open(g, LATCH_FILE_SECRET, -EPERM, "run chmod 600");
	/* latch's own state files: owner and mode are not asked */
	expect_open(o, LATCH_FILE_PLAIN, 0, NULL);
}

Test(open_trusted, a_secret_others_may_read_is_eperm)
{
	char s[128], ok[128];

	file_at(ok, sizeof(ok), "ok", 0600, "");
	file_at(s, sizeof(s), "readable", 0640, "");
	expect_open(ok, LATCH_FILE_SECRET, 0, NULL); /* control */
	expect_open(s, LATCH_FILE_SECRET, -EPERM, "a secret readable by group or others (mode 0640); run chmod 600");
	expect_open(s, LATCH_FILE_CONFIG, 0, NULL); /* a config may be read by others */
}

Test(open_trusted, a_file_of_another_user_is_eperm)
{
	char other[128], root[128];

	if (geteuid())
		cr_skip_test("chown to another user needs root (make check runs as root)");
	file_at(root, sizeof(root), "root", 0600, "");
	file_at(other, sizeof(other), "other", 0600, "");
	cr_assert_eq(chown(other, 65534, 65534), 0);
	expect_open(root, LATCH_FILE_SECRET, 0, NULL); /* control: a 0600 file of root's opens */
	expect_open(other, LATCH_FILE_CONFIG, -EPERM, "owned by uid 65534, not root; run chown root");
	expect_open(other, LATCH_FILE_SECRET, -EPERM, "owned by uid 65534, not root");
	expect_open(other, LATCH_FILE_PLAIN, 0, NULL);
}

Test(open_trusted, no_file_is_enoent_and_writes_no_line)
{
	char err[LATCH_ERR_MAX] = "untouched", path[128];

	snprintf(path, sizeof(path), "%s/none", dir);
	cr_expect_eq(latch_open_trusted(path, LATCH_FILE_CONFIG, NULL, NULL, err, sizeof(err)), -ENOENT);
	cr_expect_str_eq(err, "untouched");
}

/* ---- the readers keep the opener's errnos ---- */

struct conf {
	uint32_t x;
};
static const struct latch_kv_key conf_keys[] = { LATCH_KV_U32("x", struct conf, x, 0, 9, "0-9") };

static int kv_read(const char *path, unsigned flags, char *err, size_t errlen)
{
	struct conf c = { 0 };

	return latch_kv_read(path, conf_keys, 1, flags, NULL, &c, err, errlen);
}

/* latch.conf and the state files: a link was -EPERM here and -ELOOP in the profile and kit readers */
Test(trusted_readers, the_key_value_reader_refuses_a_link_as_eloop)
{
	char good[128], link[128], err[LATCH_ERR_MAX];

	file_at(good, sizeof(good), "good", 0644, "x = 1\n");
	link_to(link, sizeof(link), "link", good);
	cr_expect_eq(kv_read(good, LATCH_KV_SAFE_FILE, err, sizeof(err)), 0, "%s", err); /* control */
	cr_expect_eq(kv_read(link, LATCH_KV_SAFE_FILE, err, sizeof(err)), -ELOOP, "%s", err);
	cr_expect_not_null(strstr(err, "is a symbolic link; replace it with the file"), "%s", err);
	cr_expect_eq(kv_read(link, 0, err, sizeof(err)), -ELOOP, "%s", err);
}

/* a FIFO at latch.conf's path hung the reader in open(2) until a writer came */
Test(trusted_readers, the_key_value_reader_refuses_a_fifo_at_once)
{
	char fifo[128], err[LATCH_ERR_MAX];

	fifo_at(fifo, sizeof(fifo), "fifo");
	cr_expect_eq(kv_read(fifo, LATCH_KV_SAFE_FILE, err, sizeof(err)), -EINVAL, "%s", err);
	cr_expect_not_null(strstr(err, "not a regular file"), "%s", err);
	cr_expect_eq(kv_read(fifo, 0, err, sizeof(err)), -EINVAL, "%s", err);
}

Test(trusted_readers, the_price_table_refuses_a_link_as_eloop_and_a_fifo_at_once)
{
	char good[128], link[128], fifo[128], err[LATCH_ERR_MAX];
	struct price_table t = { 0 };

	file_at(good, sizeof(good), "prices", 0644, "");
	link_to(link, sizeof(link), "link", good);
	fifo_at(fifo, sizeof(fifo), "fifo");
	cr_expect_eq(budget_prices_load(&t, good, err, sizeof(err)), 0, "%s", err); /* control */
	budget_prices_free(&t);
	memset(&t, 0, sizeof(t));
	cr_expect_eq(budget_prices_load(&t, link, err, sizeof(err)), -ELOOP, "%s", err);
	cr_expect_not_null(strstr(err, "is a symbolic link; replace it with the file"), "%s", err);
	memset(&t, 0, sizeof(t));
	cr_expect_eq(budget_prices_load(&t, fifo, err, sizeof(err)), -EINVAL, "%s", err);
	cr_expect_not_null(strstr(err, "not a regular file"), "%s", err);
}

/* the checkers that only lstat (a notify command run as root, a kit's ca_file) refuse a link the same way */
Test(open_trusted, a_link_handed_to_the_check_by_lstat_is_eloop)
{
	char good[128], link[128], err[LATCH_ERR_MAX];
	struct stat st;

	file_at(good, sizeof(good), "good", 0755, "");
	link_to(link, sizeof(link), "link", good);
	cr_assert_eq(lstat(good, &st), 0);
	cr_expect_eq(latch_file_check(good, &st, LATCH_FILE_CONFIG, err, sizeof(err)), 0, "%s", err); /* control */
	cr_assert_eq(lstat(link, &st), 0);
	cr_expect_eq(latch_file_check(link, &st, LATCH_FILE_CONFIG, err, sizeof(err)), -ELOOP, "%s", err);
	cr_expect_not_null(strstr(err, "is a symbolic link"), "%s", err);
}
