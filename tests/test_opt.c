// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_opt.c - getopt's tables made from an option table (common/opt.c):
 * getopt_long() over them takes exactly the table's keyed options, with an
 * argument where the table names one, and refuses every other.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "common/common.h"

static const struct latch_opt table[] = {
	{ "dev", 'd', "IFACE", "the link", false },
	{ "check", 'n', NULL, "check only", true },
	{ "port", 'p', "PORT", "a port", true },
	{ "later", 0, "T", "read by hand, not by getopt", false },
	{ NULL, 0, NULL, NULL, false },
};

/* getopt_long() over argv with the tables from table; the keys it returned, '?' for a refusal. */
static void parse(int argc, char **argv, bool in_order, char *keys, size_t len)
{
	struct option longopts[8];
	char optstring[16];
	size_t n = 0;
	int c;

	cr_assert_eq(latch_opt_getopt(table, in_order, longopts, 8, optstring, sizeof(optstring)), 0);
	optind = 0; /* glibc: 0 starts a new scan, its state reset */
	opterr = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1 && n + 1 < len)
		keys[n++] = (char)c;
	keys[n] = '\0';
}

Test(opt, the_optstring_has_the_short_options_and_their_arguments)
{
	struct option longopts[8];
	char optstring[16];

	cr_assert_eq(latch_opt_getopt(table, false, longopts, 8, optstring, sizeof(optstring)), 0);
	cr_expect_str_eq(optstring, "np:");
	cr_assert_eq(latch_opt_getopt(table, true, longopts, 8, optstring, sizeof(optstring)), 0);
	cr_expect_str_eq(optstring, "+np:");
	/* the keyed rows, in order, and the end row; "later" (key 0) is not getopt's */
	cr_expect_str_eq(longopts[0].name, "dev");
	cr_expect_eq(longopts[0].has_arg, required_argument);
	cr_expect_eq(longopts[1].has_arg, no_argument);
	cr_expect_str_eq(longopts[2].name, "port");
	cr_expect_null(longopts[3].name);
}

Test(opt, every_table_option_is_taken_and_no_other)
{
	char *ok[] = { "cmd", "--dev", "veth0", "-n", "--check", "-p", "53", "--port=80", NULL };
	char *bad[] = { "cmd", "--later", "1", "--nosuch", "-d", "x", NULL };
	char keys[16];

	parse(8, ok, false, keys, sizeof(keys));
	cr_expect_str_eq(keys, "dnnpp");
	/* control: a key-0 row, an option of no row, and -d (no short form) are refused */
	parse(6, bad, false, keys, sizeof(keys));
	cr_expect_str_eq(keys, "???");
}

Test(opt, in_order_stops_at_the_first_word)
{
	char *argv[] = { "cmd", "--check", "sh", "--dev", "x", NULL };
	char keys[16];

	parse(5, argv, true, keys, sizeof(keys));
	cr_expect_str_eq(keys, "n");
	/* control: without it, getopt reads past "sh" */
	parse(5, argv, false, keys, sizeof(keys));
	cr_expect_str_eq(keys, "nd");
}

Test(opt, tables_too_small_are_refused)
{
	struct option longopts[8];
	char optstring[16];

	cr_expect_eq(latch_opt_getopt(table, false, longopts, 3, optstring, sizeof(optstring)), -ENOSPC);
	cr_expect_eq(latch_opt_getopt(table, false, longopts, 8, optstring, 4), -ENOSPC);
	/* control: exactly enough (three keyed rows and the end row) */
	cr_expect_eq(latch_opt_getopt(table, false, longopts, 4, optstring, sizeof(optstring)), 0);
}

Test(opt, the_spelling_is_the_help_s)
{
	char buf[64];

	latch_opt_spelling(&table[0], buf, sizeof(buf));
	cr_expect_str_eq(buf, "--dev IFACE");
	latch_opt_spelling(&table[1], buf, sizeof(buf));
	cr_expect_str_eq(buf, "-n, --check");
	latch_opt_spelling(&table[2], buf, sizeof(buf));
	cr_expect_str_eq(buf, "-p, --port PORT");
}
