// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_grant_conf.c - the grant caps and the notifier in latch.conf
 * (docs/grants.md): the essay's defaults, durations as the command line
 * writes them, and one `file:line:` error for each bad value.
 */
#include "conf_test.h"

TestSuite(grant_conf, .init = conf_test_setup, .fini = conf_test_teardown);

Test(grant_conf, the_essays_defaults)
{
	struct latch_conf c;
	char err[512];

	cr_assert_eq(conf_of("", &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.grant_default, 60);
	cr_expect_eq(c.grant_max, 300);
	cr_expect_eq(c.grants_per_hour, 8);
	cr_expect_eq(c.grant_ask_wait, 120);
	cr_expect_eq(c.grant_asks_per_hour, 8);
	cr_expect_eq(c.grant_asks_pending, 2);
	cr_expect_str_empty(c.notify_command);
	cr_expect_str_empty(c.notify_url);
}

Test(grant_conf, durations_as_the_command_line_writes_them)
{
	struct latch_conf c;
	char err[512];

	cr_assert_eq(conf_of("grant_default = 90s\ngrant_max = 5m\ngrant_ask_wait = 45\n"
			     "notify_command = /usr/local/lib/latch/notify-desktop.sh\n"
			     "notify_url = https://hooks.example/latch   # the phone\n",
			     &c, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(c.grant_default, 90);
	cr_expect_eq(c.grant_max, 300);
	cr_expect_eq(c.grant_ask_wait, 45);
	cr_expect_str_eq(c.notify_command, "/usr/local/lib/latch/notify-desktop.sh");
	cr_expect_str_eq(c.notify_url, "https://hooks.example/latch");
}

Test(grant_conf, bad_values_name_the_line_and_the_fix)
{
	struct latch_conf c;
	char err[512];

	cr_expect_neq(conf_of("profile = research\ngrant_max = 2h\n", &c, err, sizeof(err)), 0);
	cr_expect(strstr(err, "latch.conf:2: grant_max: '2h' is out of range; give 1s to 1h"), "%s", err);
	cr_expect_neq(conf_of("grant_default = 0\n", &c, err, sizeof(err)), 0);
	cr_expect_neq(conf_of("grant_default = 10m\n", &c, err, sizeof(err)), 0);
	cr_expect(strstr(err, "grant_default (600 s) is above grant_max (300 s)"), "%s", err);
	cr_expect_neq(conf_of("notify_command = notify-send\n", &c, err, sizeof(err)), 0);
	cr_expect(strstr(err, "absolute path of one program"), "%s", err);
	cr_expect_neq(conf_of("notify_command = /bin/sh -c x\n", &c, err, sizeof(err)), 0);
	cr_expect_neq(conf_of("notify_url = ftp://hooks.example/\n", &c, err, sizeof(err)), 0);
	cr_expect(strstr(err, "http:// or https://"), "%s", err);
	cr_expect_neq(conf_of("grant_asks_pending = 0\n", &c, err, sizeof(err)), 0);
	cr_expect_neq(conf_of("notify_timeout = 0\n", &c, err, sizeof(err)), 0);
	cr_expect_neq(conf_of("grants_per_hour = 8\ngrants_per_hour = 9\n", &c, err, sizeof(err)), 0);
}
