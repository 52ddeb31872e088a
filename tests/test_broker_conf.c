// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_broker_conf.c - latch.conf's limits on what latchd's broker holds for
 * the spend meter (broker_body_max, broker_metered_hold_max): their
 * defaults, their units, and the file refused whole, naming the line or the
 * two keys and the fix, when a value is out of range or the two disagree.
 */
#include "conf_test.h"

TestSuite(broker_conf, .init = conf_test_setup, .fini = conf_test_teardown);

/* 32 MiB: a request Anthropic takes (a PDF inline) is one the meter takes; 64 MiB: two of them at once */
Test(broker_conf, the_defaults_hold_a_providers_largest_request)
{
	struct latch_conf c;
	char err[512];

	cr_assert_eq(conf_of("", &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.broker_body_max, 32);
	cr_expect_eq(c.broker_metered_hold_max, 64);
	cr_assert_eq(conf_of("broker_body_max = 100\nbroker_metered_hold_max = 400\n", &c, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(c.broker_body_max, 100);
	cr_expect_eq(c.broker_metered_hold_max, 400);
	/* the size grammar: a bare number is MiB, and 512M or 1G say the same */
	cr_assert_eq(conf_of("broker_body_max = 512M\nbroker_metered_hold_max = 1G\n", &c, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(c.broker_body_max, 512);
	cr_expect_eq(c.broker_metered_hold_max, 1024);
	/* control: equal is enough, one body of the largest size fits */
	cr_expect_eq(conf_of("broker_body_max = 8\nbroker_metered_hold_max = 8\n", &c, err, sizeof(err)), 0, "%s", err);
}

Test(broker_conf, bad_values_name_the_line_or_both_keys_and_the_fix)
{
	static const struct {
		const char *text, *want;
	} rows[] = {
		{ "broker_body_max = 0\n", "latch.conf:1: broker_body_max" },
		{ "broker_body_max = 1025\n", "broker_body_max: '1025' is out of range; give 1M to 1G" },
		{ "broker_body_max = 32MB\n",
		  "broker_body_max: '32MB' is not a size (512M, 2G; a bare number is in MiB)" },
		{ "broker_body_max = 1536K\n", "broker_body_max: '1536K' is not a whole number of MiB" },
		{ "broker_body_max = 17179869185G\n", "is out of range" },
		{ "broker_metered_hold_max = 4096\n",
		  "broker_metered_hold_max: '4096' is out of range; give 1M to 4095M" },
		/* a hold below one body: no body of the largest size could ever be held */
		{ "broker_body_max = 65\n", "broker_metered_hold_max (64 MiB) is below broker_body_max (65 MiB)" },
		{ "broker_body_max = 16\nbroker_metered_hold_max = 8\n", "raise broker_metered_hold_max" },
	};
	struct latch_conf c;
	char err[512];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cr_expect_neq(conf_of(rows[i].text, &c, err, sizeof(err)), 0, "row %zu accepted", i);
		cr_expect_not_null(strstr(err, rows[i].want), "row %zu: \"%s\" lacks \"%s\"", i, err, rows[i].want);
		cr_expect_null(strchr(err, '\n'), "row %zu: one line", i);
	}
}

/* the broker's waits on a guest that stops in the middle (issue 34): seconds, 30 and 10 unless set, never 0 */
Test(broker_conf, the_waits_on_a_silent_guest_are_seconds_and_never_none)
{
	struct latch_conf c;
	char err[512];

	cr_assert_eq(conf_of("", &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.broker_request_idle, 30);
	cr_expect_eq(c.broker_hello_timeout, 10);
	cr_assert_eq(conf_of("broker_request_idle = 5\nbroker_hello_timeout = 2\n", &c, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(c.broker_request_idle, 5);
	cr_expect_eq(c.broker_hello_timeout, 2);
	cr_expect_neq(conf_of("broker_request_idle = 0\n", &c, err, sizeof(err)), 0, "no wait is no bound");
	cr_expect_not_null(strstr(err, "latch.conf:1: broker_request_idle"), "%s", err);
	cr_expect_neq(conf_of("broker_hello_timeout = 601\n", &c, err, sizeof(err)), 0);
	cr_expect_not_null(strstr(err, "latch.conf:1: broker_hello_timeout: '601' is out of range; give 1s to 10m"),
			   "%s", err);
}
