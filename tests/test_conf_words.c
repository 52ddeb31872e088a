// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_conf_words.c - how latch.conf's words read: an unknown key's line
 * names the key meant and the man page, whole (it once cut its list of keys
 * in the middle of a name), and every key that holds a duration or a size
 * takes the one grammar the command line takes (common/units.c).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "conf_test.h"

TestSuite(conf_words, .init = conf_test_setup, .fini = conf_test_teardown);

/* Invariant: an unknown key is refused with the nearest known key and latch.conf(5), never a cut list. */
Test(conf_words, an_unknown_key_offers_the_nearest_and_the_man_page)
{
	static const struct {
		const char *text, *want;
	} rows[] = {
		{ "pool = 10.213.0.0/16\nuplink = eth0\nbrokr_body_max = 8\n",
		  "latch.conf:3: unknown key 'brokr_body_max' (did you mean 'broker_body_max'? see latch.conf(5))" },
		/* two letters swapped is one edit */
		{ "gnart_max = 5m\n",
		  "latch.conf:1: unknown key 'gnart_max' (did you mean 'grant_max'? see latch.conf(5))" },
		{ "dns_ttl_mn = 60\n",
		  "latch.conf:1: unknown key 'dns_ttl_mn' (did you mean 'dns_ttl_min'? see latch.conf(5))" },
		/* nothing near: no guess, the man page */
		{ "zzz = 1\n", "latch.conf:1: unknown key 'zzz' (see latch.conf(5) for the keys)" },
		{ "timeout = 5\n", "latch.conf:1: unknown key 'timeout' (see latch.conf(5) for the keys)" },
	};
	struct latch_conf c;
	char err[512];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cr_expect_eq(conf_of(rows[i].text, &c, err, sizeof(err)), -EINVAL, "row %zu accepted", i);
		cr_expect(strstr(err, rows[i].want) && !strcmp(strstr(err, rows[i].want), rows[i].want),
			  "row %zu: \"%s\", want it to end \"%s\"", i, err, rows[i].want);
	}
	/* control: the key spelt right is read */
	cr_expect_eq(conf_of("pool = 10.213.0.0/16\nuplink = eth0\nbroker_body_max = 8\n", &c, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(c.broker_body_max, 8);
}

/* Invariant: a duration key takes 60, 90s, 5m, 1h and refuses what is not one, naming the key. */
Test(conf_words, duration_keys_take_the_one_grammar)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "notify_timeout = nan\n", "latch.conf:1: notify_timeout: 'nan' is not a duration (60, 90s, 5m, 1h)" },
		{ "dns_ttl_max = 1e3\n", "latch.conf:1: dns_ttl_max: '1e3' is not a duration (60, 90s, 5m, 1h)" },
		{ "backup_interval = 0x10\n", "backup_interval: '0x10' is not a duration" },
		{ "grant_max = 1500ms\n", "grant_max: '1500ms' is not a whole number of seconds" },
		{ "notify_timeout = 3m\n", "notify_timeout: '3m' is out of range; give 1s to 2m" },
		{ "dns_ttl_min = 18446744073709551617\n", "dns_ttl_min: '18446744073709551617' is out of range" },
		{ "grant_ask_wait = -5\n", "grant_ask_wait: '-5' is not a duration" },
	};
	struct latch_conf c;
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(conf_of(bad[i].text, &c, err, sizeof(err)), -EINVAL, "row %zu accepted", i);
		cr_expect(strstr(err, bad[i].want), "row %zu: \"%s\" lacks \"%s\"", i, err, bad[i].want);
	}
	/* control: the same keys with durations, and a bare number is seconds */
	cr_assert_eq(conf_of("notify_timeout = 2m\ndns_ttl_min = 30s\ndns_ttl_max = 1d\nbackup_interval = 1h\n"
			     "grant_max = 1h\ngrant_ask_wait = 90\n",
			     &c, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(c.notify_timeout, 120);
	cr_expect_eq(c.dns_ttl_min, 30);
	cr_expect_eq(c.dns_ttl_max, 86400);
	cr_expect_eq(c.backup_interval, 3600);
	cr_expect_eq(c.grant_max, 3600);
	cr_expect_eq(c.grant_ask_wait, 90);
}

/* Invariant: kit setup fetches only over https, from one URL without a query; the default is npm's registry. */
Test(conf_words, npm_registry_is_https_only)
{
	static const char *const bad[] = {
		"npm_registry = http://registry.npmjs.org\n",
		"npm_registry = ftp://192.0.2.1/\n",
		"npm_registry = https://\n",
		"npm_registry = https://192.0.2.1/?token=x\n",
		"npm_registry = registry.npmjs.org\n",
		"npm_ca_file = ca.pem\n",
	};
	struct latch_conf c;
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(conf_of(bad[i], &c, err, sizeof(err)), -EINVAL, "accepted: %s", bad[i]);
		cr_expect(strstr(err, "latch.conf:1: ") &&
				  strstr(err, bad[i][4] == 'r' ? "npm_registry" : "npm_ca_file"),
			  "%s", err);
	}
	/* controls: the default, a mirror (a trailing '/' dropped), a CA file */
	cr_assert_eq(conf_of("pool = 10.213.0.0/16\n", &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(c.npm_registry, "https://registry.npmjs.org");
	cr_expect_str_eq(c.npm_ca_file, "");
	cr_assert_eq(conf_of("npm_registry = https://192.0.2.1:8443/npm/\nnpm_ca_file = /etc/latch/npm-ca.pem\n", &c,
			     err, sizeof(err)),
		     0, "%s", err);
	cr_expect_str_eq(c.npm_registry, "https://192.0.2.1:8443/npm");
	cr_expect_str_eq(c.npm_ca_file, "/etc/latch/npm-ca.pem");
}
