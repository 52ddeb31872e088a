// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_conf_file.c - the latch.conf that `make install` ships
 * (config/latch.conf) and its man page (docs/man/latch.conf.5.md) keep in
 * step with config/config.c's key table: every key is in both, commented
 * out with its default, and the defaults written there are the ones the
 * code uses.  Run from the top of the tree (make unit does).
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"

#define SHIPPED "config/latch.conf"
#define MANPAGE "docs/man/latch.conf.5.md"

/* How many lines of FILE start with PREFIX followed by KEY and " =". */
static int lines_with(const char *file, const char *prefix, const char *key)
{
	FILE *f = fopen(file, "re");
	char line[512], want[128];
	int n = 0;

	cr_assert_not_null(f, "%s: run the unit tests from the top of the tree", file);
	snprintf(want, sizeof(want), "%s%s =", prefix, key);
	/* "#KEY =" starts a line of the shipped file; "**KEY =" may stand anywhere in the man page */
	while (fgets(line, sizeof(line), f))
		n += *prefix == '#' ? !strncmp(line, want, strlen(want)) : strstr(line, want) != NULL;
	fclose(f);
	return n;
}

/* Invariant: every key of the table is in the shipped file, once, commented out. */
Test(conf_file, every_key_is_in_the_shipped_file_once)
{
	for (size_t i = 0; latch_conf_key(i); i++)
		cr_expect_eq(lines_with(SHIPPED, "#", latch_conf_key(i)), 1, "%s: key '%s' is missing or repeated",
			     SHIPPED, latch_conf_key(i));
}

/* Invariant: the shipped file names no key the table does not know. */
Test(conf_file, the_shipped_file_has_no_unknown_key)
{
	FILE *f = fopen(SHIPPED, "re");
	char line[512], key[64];

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		bool known = false;

		if (sscanf(line, "#%63[a-z0-9_] =", key) != 1 || !strstr(line, " ="))
			continue;
		for (size_t i = 0; latch_conf_key(i); i++)
			known |= !strcmp(latch_conf_key(i), key);
		cr_expect(known, "%s: '%s' is not a key of config/config.c", SHIPPED, key);
	}
	fclose(f);
}

/* Invariant: latch.conf(5) documents every key. */
Test(conf_file, every_key_is_in_the_man_page)
{
	for (size_t i = 0; latch_conf_key(i); i++)
		cr_expect_geq(lines_with(MANPAGE, "**", latch_conf_key(i)), 1, "%s: no `**%s = ...**` entry", MANPAGE,
			      latch_conf_key(i));
}

/*
 * Invariant: the defaults written in the shipped file are the code's: the
 * file with every `#key = value` line uncommented parses to exactly the
 * defaults of no file at all.
 */
Test(conf_file, the_defaults_written_are_the_defaults)
{
	char tmp[] = "/tmp/latch-conf-XXXXXX", line[512], err[LATCH_ERR_MAX];
	struct latch_conf from_file, defaults;
	FILE *in, *out;
	int fd, used = 0;

	if (geteuid())
		cr_skip_test("latch.conf must be root's: run as root (make check does)");
	unsetenv("LATCH_ROOT");
	fd = mkstemp(tmp);
	cr_assert_geq(fd, 0);
	out = fdopen(fd, "w");
	in = fopen(SHIPPED, "re");
	cr_assert_not_null(in);
	while (fgets(line, sizeof(line), in)) {
		char *eq = strstr(line, " = ");

		if (line[0] == '#' && islower((unsigned char)line[1]) && eq && eq[3] != '\n') {
			fputs(line + 1, out);
			used++;
		}
	}
	fclose(in);
	fclose(out);
	chmod(tmp, 0644);
	cr_assert_gt(used, 5, "no defaults found in %s", SHIPPED);
	cr_assert_eq(latch_conf_parse_file(tmp, &from_file, err, sizeof(err)), 0, "%s", err);
	unlink(tmp);
	/* a missing file gives the defaults */
	setenv("LATCH_ROOT", "/nonexistent-latch-root", 1);
	cr_assert_eq(latch_conf_load(&defaults, err, sizeof(err)), 0, "%s", err);
	unsetenv("LATCH_ROOT");
	memset(defaults.images, 0, sizeof(defaults.images));
	snprintf(defaults.images, sizeof(defaults.images), "/var/lib/latch/images");
	memset(from_file.path, 0, sizeof(from_file.path));
	memset(defaults.path, 0, sizeof(defaults.path));
	cr_assert_eq(memcmp(&from_file, &defaults, sizeof(defaults)), 0,
		     "%s: a default written there is not the code's (compare pool, table_base, rule_priority, "
		     "images, dns_ttl_min, dns_ttl_max, profile, backup_interval)",
		     SHIPPED);
}
