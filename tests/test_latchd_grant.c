// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_latchd_grant.c - latchd's pure grant logic: what a host in a grant
 * may be, and the hourly caps (latchd/grant.c).
 *
 * Invariants: a grant names hosts, never an address, a wildcard, a URL or a
 * single label (the host resolves names; an address would dodge the
 * rebinding filter, a single label a search domain); and a sandbox's grants
 * and asks are capped over any hour, a grant still being resolved counting
 * already.  Each refusal has a control beside it that passes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "latchd/grant.h"

static const struct latch_entry default_port = { .n_ports = 1, .ports = { { 443, 443 } } };

Test(latchd_grant, a_grant_names_hosts_and_nothing_else)
{
	static const char *const refused[] = {
		"*.docs.example", "[2001:db8::1]:443",	  "2001:db8::1",	"192.0.2.1",
		"192.0.2.1:443",  "https://docs.example", "docs.example/path",	"localhost",
		"docs",		  "docs.example:0",	  "docs.example:70000", "docs..example",
	};
	struct grant_host h;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		err[0] = 0;
		cr_expect_eq(latchd_grant_parse_host(refused[i], &default_port, &h, err, sizeof(err)), -EINVAL, "%s",
			     refused[i]);
		cr_expect(err[0], "%s: refused without a line", refused[i]);
	}
	/* controls: a host alone takes the default port; a port given is the one granted; names are folded */
	cr_assert_eq(latchd_grant_parse_host("Docs.Example", &default_port, &h, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(h.name, "docs.example");
	cr_expect_eq(h.ports.n_ports, 1);
	cr_expect_eq(h.ports.ports[0].lo, 443);
	cr_assert_eq(latchd_grant_parse_host("docs.example:7100", &default_port, &h, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(h.ports.ports[0].lo, 7100);
	cr_expect_eq(h.ports.ports[0].hi, 7100);
}

static struct latchd ld;
static struct grants history;
static struct sandbox sb = { .ld = &ld, .name = "lts-cap", .grants = &history };

static void caps_reset(uint32_t per_hour, uint32_t asks_per_hour, uint32_t pending)
{
	memset(&history, 0, sizeof(history));
	ld.conf.grants_per_hour = per_hour;
	ld.conf.grant_asks_per_hour = asks_per_hour;
	ld.conf.grant_asks_pending = pending;
}

Test(latchd_grant, grants_are_capped_over_any_hour)
{
	const uint64_t t0 = 10 * GRANT_HOUR_NS;
	char err[LATCH_ERR_MAX];

	caps_reset(2, 10, 3);
	history.granted[history.n_granted++] = t0;
	cr_expect_eq(latchd_grant_cap_granted(&sb, t0 + 1, err, sizeof(err)), 0, "one of two: %s", err);
	history.granted[history.n_granted++] = t0 + NS_PER_S;
	cr_expect_eq(latchd_grant_cap_granted(&sb, t0 + 2 * NS_PER_S, err, sizeof(err)), -EDQUOT);
	cr_expect(strstr(err, "grants_per_hour = 2"), "%s", err);
	/* an hour after the first, one place is free again; not a second before */
	cr_expect_eq(latchd_grant_cap_granted(&sb, t0 + GRANT_HOUR_NS - NS_PER_S, err, sizeof(err)), -EDQUOT);
	cr_expect_eq(latchd_grant_cap_granted(&sb, t0 + GRANT_HOUR_NS, err, sizeof(err)), 0, "%s", err);
}

Test(latchd_grant, a_grant_being_resolved_counts_already)
{
	struct grant resolving = { .s = &sb, .state = GRANT_RESOLVING };
	struct grant pending = { .s = &sb, .state = GRANT_PENDING };
	char err[LATCH_ERR_MAX];

	caps_reset(1, 10, 3);
	history.list = &pending; /* control: an ask waiting for a person is no grant yet */
	cr_expect_eq(latchd_grant_cap_granted(&sb, GRANT_HOUR_NS, err, sizeof(err)), 0, "%s", err);
	pending.next = &resolving;
	cr_expect_eq(latchd_grant_cap_granted(&sb, GRANT_HOUR_NS, err, sizeof(err)), -EDQUOT);
	history.list = NULL;
}

Test(latchd_grant, asks_are_capped_per_hour_and_while_they_wait)
{
	struct grant waiting[2] = { { .s = &sb, .state = GRANT_PENDING }, { .s = &sb, .state = GRANT_PENDING } };
	char err[LATCH_ERR_MAX];

	caps_reset(10, 2, 2);
	history.asked[history.n_asked++] = GRANT_HOUR_NS;
	cr_expect_eq(latchd_grant_cap_ask(&sb, GRANT_HOUR_NS + 1, err, sizeof(err)), 0, "%s", err);
	history.asked[history.n_asked++] = GRANT_HOUR_NS + 1;
	cr_expect_eq(latchd_grant_cap_ask(&sb, GRANT_HOUR_NS + 2, err, sizeof(err)), -EDQUOT);
	cr_expect(strstr(err, "grant_asks_per_hour = 2"), "%s", err);
	/* two hours on, the asks are forgotten; two asks still waiting are the cap on their own */
	history.list = &waiting[0];
	waiting[0].next = &waiting[1];
	cr_expect_eq(latchd_grant_cap_ask(&sb, 3 * GRANT_HOUR_NS, err, sizeof(err)), -EDQUOT);
	cr_expect(strstr(err, "grant_asks_pending = 2"), "%s", err);
	waiting[0].next = NULL;
	cr_expect_eq(latchd_grant_cap_ask(&sb, 3 * GRANT_HOUR_NS, err, sizeof(err)), 0, "%s", err);
	history.list = NULL;
}
