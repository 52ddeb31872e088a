// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_rules.c - the rule set of one address or prefix, as loader/policy.c
 * keeps it.
 *
 * A map value holds at most LATCH_RULES_MAX rules, some the operator's own
 * and some copied down from a covering prefix (LATCH_RULE_INHERITED).  These
 * tests hold the bookkeeping to its promises: no duplicates, the newest
 * deadline wins, inherited copies are never touched by a revoke, and expired
 * rules go at exactly the moment the kernel stops honouring them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "loader/loader.h"

static struct latch_rule mk(uint8_t proto, uint16_t lo, uint16_t hi, uint64_t expires_ns, uint16_t flags)
{
	struct latch_rule r = {
		.expires_ns = expires_ns,
		.port_lo = lo,
		.port_hi = hi,
		.proto = proto,
		.origin = LATCH_ORIGIN_EGRESS,
		.flags = flags,
	};

	return r;
}

static void add(struct latch_rules *rs, struct latch_rule r)
{
	cr_assert_eq(latch_rules_merge(rs, &r), 0, "merging proto %u ports %u-%u failed", r.proto, r.port_lo,
		     r.port_hi);
}

static struct latch_entry entry(const char *s)
{
	struct latch_entry e;
	char err[LATCH_ERR_MAX] = "";

	cr_assert_eq(latch_parse_entry(s, &e, err, sizeof(err)), 0, "'%s': %s", s, err);
	return e;
}

/* How many rules of the set match (proto, lo, hi, inherited). */
static int count(const struct latch_rules *rs, uint8_t proto, uint16_t lo, uint16_t hi, uint16_t flags)
{
	int n = 0;

	for (uint32_t i = 0; i < rs->n; i++)
		n += rs->rule[i].proto == proto && rs->rule[i].port_lo == lo && rs->rule[i].port_hi == hi &&
		     (rs->rule[i].flags & LATCH_RULE_INHERITED) == (flags & LATCH_RULE_INHERITED);
	return n;
}

/* The map value is written whole: slots past n must stay zero. */
static void expect_tail_zero(const struct latch_rules *rs)
{
	static const struct latch_rule zero;

	for (uint32_t i = rs->n; i < LATCH_RULES_MAX; i++)
		cr_expect_eq(memcmp(&rs->rule[i], &zero, sizeof(zero)), 0, "slot %u past n=%u is not zero", i, rs->n);
}

/* ---- merge */

Test(merge, adds_a_new_rule)
{
	struct latch_rules rs = { 0 };
	struct latch_rule r = mk(LATCH_PROTO_TCP, 443, 443, 0, 0);

	cr_assert_eq(latch_rules_merge(&rs, &r), 0);
	cr_assert_eq(rs.n, 1);
	cr_expect_eq(memcmp(&rs.rule[0], &r, sizeof(r)), 0);
	add(&rs, mk(LATCH_PROTO_UDP, 53, 53, 0, 0));
	cr_expect_eq(rs.n, 2);
}

Test(merge, same_proto_and_ports_updates_the_deadline_without_duplicating)
{
	struct latch_rules rs = { 0 };
	struct latch_rule r = mk(LATCH_PROTO_TCP, 443, 443, 1000, 0);

	add(&rs, r);
	r.expires_ns = 5000;
	r.origin = LATCH_ORIGIN_GRANT;
	add(&rs, r);
	cr_assert_eq(rs.n, 1, "same rule merged twice gave %u rules", rs.n);
	cr_expect_eq(rs.rule[0].expires_ns, 5000);
	cr_expect_eq(rs.rule[0].origin, LATCH_ORIGIN_GRANT);
}

/* The newest word wins even when it is shorter: a grant may be cut back. */
Test(merge, newest_deadline_wins_even_when_shorter_or_permanent)
{
	struct latch_rules rs = { 0 };

	add(&rs, mk(LATCH_PROTO_ANY, 0, 65535, 9000, 0));
	add(&rs, mk(LATCH_PROTO_ANY, 0, 65535, 2000, 0));
	cr_assert_eq(rs.n, 1);
	cr_expect_eq(rs.rule[0].expires_ns, 2000);
	add(&rs, mk(LATCH_PROTO_ANY, 0, 65535, 0, 0));
	cr_assert_eq(rs.n, 1);
	cr_expect_eq(rs.rule[0].expires_ns, 0, "a permanent allow must replace the deadline");
}

Test(merge, different_proto_or_ports_are_separate_rules)
{
	struct latch_rules rs = { 0 };

	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 0, 0));
	add(&rs, mk(LATCH_PROTO_UDP, 443, 443, 0, 0));
	add(&rs, mk(LATCH_PROTO_ANY, 443, 443, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 80, 80, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 443, 444, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 442, 443, 0, 0));
	cr_expect_eq(rs.n, 6);
}

Test(merge, inherited_and_own_copies_are_kept_apart)
{
	struct latch_rules rs = { 0 };

	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 7000, LATCH_RULE_INHERITED));
	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 3000, 0));
	cr_assert_eq(rs.n, 2, "own rule folded into the inherited copy");
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 443, 443, LATCH_RULE_INHERITED), 1);
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 443, 443, 0), 1);
	for (uint32_t i = 0; i < rs.n; i++)
		if (rs.rule[i].flags & LATCH_RULE_INHERITED)
			cr_expect_eq(rs.rule[i].expires_ns, 7000, "own merge changed the inherited deadline");
		else
			cr_expect_eq(rs.rule[i].expires_ns, 3000);

	/* And the other way round: an inherited copy never rewrites an own rule. */
	add(&rs, mk(LATCH_PROTO_UDP, 53, 53, 0, 0));
	add(&rs, mk(LATCH_PROTO_UDP, 53, 53, 4000, LATCH_RULE_INHERITED));
	cr_expect_eq(rs.n, 4);
	cr_expect_eq(count(&rs, LATCH_PROTO_UDP, 53, 53, 0), 1);
	cr_expect_eq(count(&rs, LATCH_PROTO_UDP, 53, 53, LATCH_RULE_INHERITED), 1);
	for (uint32_t i = 0; i < rs.n; i++)
		if (rs.rule[i].proto == LATCH_PROTO_UDP && !(rs.rule[i].flags & LATCH_RULE_INHERITED))
			cr_expect_eq(rs.rule[i].expires_ns, 0, "inherited merge changed the own deadline");
}

Test(merge, identical_inherited_copy_is_not_duplicated)
{
	struct latch_rules rs = { 0 };

	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 7000, LATCH_RULE_INHERITED));
	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 7000, LATCH_RULE_INHERITED));
	cr_expect_eq(rs.n, 1);
}

Test(merge, rule_beyond_LATCH_RULES_MAX_refused_with_E2BIG)
{
	struct latch_rules rs = { 0 }, before;
	struct latch_rule r;

	for (int i = 0; i < LATCH_RULES_MAX; i++)
		add(&rs, mk(LATCH_PROTO_TCP, 1000 + i, 1000 + i, 0, 0));
	cr_assert_eq(rs.n, LATCH_RULES_MAX);
	before = rs;

	r = mk(LATCH_PROTO_TCP, 2000, 2000, 0, 0);
	cr_expect_eq(latch_rules_merge(&rs, &r), -E2BIG);
	r = mk(LATCH_PROTO_TCP, 1000, 1000, 0, LATCH_RULE_INHERITED);
	cr_expect_eq(latch_rules_merge(&rs, &r), -E2BIG);
	cr_expect_eq(memcmp(&rs, &before, sizeof(rs)), 0, "a refused merge changed the set");

	/* A full set can still have a deadline updated. */
	r = mk(LATCH_PROTO_TCP, 1005, 1005, 8000, 0);
	cr_expect_eq(latch_rules_merge(&rs, &r), 0);
	cr_expect_eq(rs.n, LATCH_RULES_MAX);
	cr_expect_eq(rs.rule[5].expires_ns, 8000);
}

/* ---- remove */

Test(remove, by_ports_removes_only_matching_own_rules_and_counts_them)
{
	struct latch_rules rs = { 0 };
	struct latch_entry e = entry("203.0.113.7:443,8000-8100/tcp");

	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 8000, 8100, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 80, 80, 0, 0));
	add(&rs, mk(LATCH_PROTO_UDP, 443, 443, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 8000, 8050, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 0, LATCH_RULE_INHERITED));

	cr_expect_eq(latch_rules_remove(&rs, &e), 2);
	cr_assert_eq(rs.n, 4);
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 443, 443, 0), 0);
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 8000, 8100, 0), 0);
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 80, 80, 0), 1);
	cr_expect_eq(count(&rs, LATCH_PROTO_UDP, 443, 443, 0), 1);
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 8000, 8050, 0), 1, "a sub-range is not the range");
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 443, 443, LATCH_RULE_INHERITED), 1);
	expect_tail_zero(&rs);

	cr_expect_eq(latch_rules_remove(&rs, &e), 0, "second revoke found something");
}

Test(remove, by_proto_without_ports_removes_all_own_rules_of_that_proto)
{
	struct latch_rules rs = { 0 };
	struct latch_entry e = entry("203.0.113.7/tcp");

	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 0, 65535, 0, 0));
	add(&rs, mk(LATCH_PROTO_UDP, 53, 53, 0, 0));
	add(&rs, mk(LATCH_PROTO_ANY, 0, 65535, 0, 0));
	add(&rs, mk(LATCH_PROTO_TCP, 22, 22, 0, LATCH_RULE_INHERITED));

	cr_expect_eq(latch_rules_remove(&rs, &e), 2);
	cr_assert_eq(rs.n, 3);
	cr_expect_eq(count(&rs, LATCH_PROTO_UDP, 53, 53, 0), 1);
	cr_expect_eq(count(&rs, LATCH_PROTO_ANY, 0, 65535, 0), 1);
	cr_expect_eq(count(&rs, LATCH_PROTO_TCP, 22, 22, LATCH_RULE_INHERITED), 1);
	expect_tail_zero(&rs);
}

Test(remove, bare_address_removes_every_own_rule_and_leaves_inherited)
{
	struct latch_rules rs = { 0 };
	struct latch_entry e = entry("203.0.113.0/24");

	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 0, LATCH_RULE_INHERITED));
	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 0, 0));
	add(&rs, mk(LATCH_PROTO_UDP, 53, 53, 5000, 0));
	add(&rs, mk(LATCH_PROTO_ICMP, 0, 65535, 0, 0));
	add(&rs, mk(LATCH_PROTO_ANY, 0, 65535, 0, LATCH_RULE_INHERITED));
	add(&rs, mk(LATCH_PROTO_ANY, 1, 1024, 0, 0));

	cr_expect_eq(latch_rules_remove(&rs, &e), 4);
	cr_assert_eq(rs.n, 2);
	for (uint32_t i = 0; i < rs.n; i++)
		cr_expect(rs.rule[i].flags & LATCH_RULE_INHERITED, "own rule %u survived a bare revoke", i);
	/* The survivors keep their order. */
	cr_expect_eq(rs.rule[0].proto, LATCH_PROTO_TCP);
	cr_expect_eq(rs.rule[1].proto, LATCH_PROTO_ANY);
	expect_tail_zero(&rs);
}

Test(remove, never_touches_inherited_rules)
{
	struct latch_rules rs = { 0 };
	struct latch_entry e = entry("203.0.113.7:443/tcp");
	struct latch_entry all = entry("203.0.113.7");

	add(&rs, mk(LATCH_PROTO_TCP, 443, 443, 0, LATCH_RULE_INHERITED));
	add(&rs, mk(LATCH_PROTO_ANY, 0, 65535, 0, LATCH_RULE_INHERITED));
	cr_expect_eq(latch_rules_remove(&rs, &e), 0);
	cr_expect_eq(latch_rules_remove(&rs, &all), 0);
	cr_expect_eq(rs.n, 2);
}

Test(remove, on_an_empty_set_returns_zero)
{
	struct latch_rules rs = { 0 };
	struct latch_entry e = entry("203.0.113.7");

	cr_expect_eq(latch_rules_remove(&rs, &e), 0);
	cr_expect_eq(rs.n, 0);
}

/* ---- prune: the kernel stops honouring a rule once now >= expires_ns */

Test(prune, drops_expired_rules_only_and_counts_them)
{
	struct latch_rules rs = { 0 };

	add(&rs, mk(LATCH_PROTO_TCP, 1, 1, 0, 0)); /* permanent */
	add(&rs, mk(LATCH_PROTO_TCP, 2, 2, 999, 0)); /* expired */
	add(&rs, mk(LATCH_PROTO_TCP, 3, 3, 1000, 0)); /* at the deadline: expired */
	add(&rs, mk(LATCH_PROTO_TCP, 4, 4, 1001, 0)); /* still live */
	add(&rs, mk(LATCH_PROTO_TCP, 5, 5, 1, LATCH_RULE_INHERITED)); /* expired copy */
	add(&rs, mk(LATCH_PROTO_TCP, 6, 6, 0, LATCH_RULE_INHERITED));

	cr_expect_eq(latch_rules_prune(&rs, 1000), 3);
	cr_assert_eq(rs.n, 3);
	cr_expect_eq(rs.rule[0].port_lo, 1);
	cr_expect_eq(rs.rule[1].port_lo, 4);
	cr_expect_eq(rs.rule[2].port_lo, 6);
	expect_tail_zero(&rs);

	cr_expect_eq(latch_rules_prune(&rs, 1000), 0, "pruning twice removed more");
	cr_expect_eq(latch_rules_prune(&rs, UINT64_MAX), 1, "only the timed rule should go at the end of time");
	cr_expect_eq(rs.n, 2);
}

Test(prune, keeps_everything_before_any_deadline)
{
	struct latch_rules rs = { 0 };

	add(&rs, mk(LATCH_PROTO_UDP, 53, 53, 5000, 0));
	add(&rs, mk(LATCH_PROTO_ANY, 0, 65535, 0, 0));
	cr_expect_eq(latch_rules_prune(&rs, 4999), 0);
	cr_expect_eq(rs.n, 2);
	cr_expect_eq(latch_rules_prune(&rs, 0), 0);
	cr_expect_eq(rs.n, 2);
}
