// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_compose.c - the policy union a profile switch makes live
 * (profile/compose.c, latch_profile_compose).
 *
 * The union decides what a sandbox can reach after a switch, so these tests
 * hold each source to the precedence profile.h writes down: the profile's
 * and the extras' CIDRs are permanent, host names carry their TTL, a learned
 * answer survives only while its name is still allowed (under the new
 * policy's ports) and its deadline plus grace has not passed, hand-added
 * rules are carried, grants are left in the timed maps, `open` keeps no
 * learned answer, and identical specs fold exactly as the loader would fold
 * their rules.  Profiles are loaded from a fresh mkdtemp directory, so that
 * name matching goes through the real name index.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "profile/profile.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define GRACE 100

/* Profile NAME made of TEXT, loaded the way latchd loads it (a file in a directory of its own). */
static struct latch_profile load(const char *name, const char *text)
{
	char dir[] = "/tmp/latch-compose-XXXXXX", path[128], err[LATCH_ERR_MAX] = "";
	struct latch_profile p;
	int fd, rc;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/%s.txt", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	rc = latch_profile_load(dir, name, NULL, &p, err, sizeof(err));
	unlink(path);
	rmdir(dir);
	cr_assert_eq(rc, 0, "load %s: %s", name, err);
	return p;
}

static struct latch_addr addr(const char *s)
{
	char err[LATCH_ERR_MAX];
	struct latch_addr a;

	cr_assert_eq(latch_parse_addr(s, &a, err, sizeof(err)), 0, "%s: %s", s, err);
	return a;
}

/* A rule of the live generation, as latch_policy_list() reports it: one port range each. */
static struct latch_policy_item item(const char *entry, uint64_t expires_ns, int origin, int timed)
{
	struct latch_policy_item it = { .timed = timed };
	char err[LATCH_ERR_MAX];

	cr_assert_eq(latch_parse_entry(entry, &it.entry, err, sizeof(err)), 0, "%s: %s", entry, err);
	cr_assert_leq(it.entry.n_ports, 1, "a live item has one rule");
	latch_entry_rule(&it.entry, 0, expires_ns, origin, &it.rule);
	return it;
}

static struct latch_compose_out compose(const struct latch_compose_in *in)
{
	struct latch_compose_out out;

	cr_assert_eq(latch_profile_compose(in, &out), 0);
	return out;
}

/* The spec spelled TEXT (latch_entry_format's spelling), or NULL. */
static const struct latch_policy_spec *find(const struct latch_compose_out *out, const char *text)
{
	for (int i = 0; i < out->n; i++) {
		char got[LATCH_ENTRY_TEXT_MAX];

		latch_entry_format(&out->specs[i].entry, got, sizeof(got));
		if (!strcmp(got, text))
			return &out->specs[i];
	}
	return NULL;
}

static void expect_spec(const struct latch_compose_out *out, const char *text, uint64_t expires_ns, int origin)
{
	const struct latch_policy_spec *sp = find(out, text);

	cr_assert_not_null(sp, "no spec %s", text);
	cr_expect_eq(sp->expires_ns, expires_ns, "%s: deadline %llu, want %llu", text,
		     (unsigned long long)sp->expires_ns, (unsigned long long)expires_ns);
	cr_expect_eq(sp->origin, origin, "%s: origin %u, want %d", text, sp->origin, origin);
}

/* N specs out, and every count as WANT says (the fields not named there are 0). */
static void expect_counts(const struct latch_compose_out *out, int n, struct latch_compose_counts want)
{
	const struct latch_compose_counts *got = &out->counts;

	cr_expect_eq(out->n, n, "%d specs, want %d", out->n, n);
#define COUNT(f) cr_expect_eq(got->f, want.f, #f ": %d, want %d", got->f, want.f)
	COUNT(profile);
	COUNT(extra);
	COUNT(hostname);
	COUNT(learned);
	COUNT(carried_egress);
	COUNT(carried_learned);
	COUNT(learned_expired);
	COUNT(learned_refused);
	COUNT(live_timed);
	COUNT(live_rebuilt);
	COUNT(folded);
#undef COUNT
}
_Static_assert(sizeof(struct latch_compose_counts) == 11 * sizeof(int), "a new count: check it in expect_counts()");

Test(compose, profile_cidrs_are_permanent_and_names_alone_add_nothing)
{
	struct latch_profile p =
		load("p", "203.0.113.0/24:443\nexample.com\n*.example.org\n[2001:db8::/32]:80\n192.0.2.9\n");
	struct latch_compose_in in = { .profile = &p };
	struct latch_compose_out out = compose(&in);

	expect_counts(&out, 3, (struct latch_compose_counts){ .profile = 3 });
	expect_spec(&out, "203.0.113.0/24:443", 0, LATCH_ORIGIN_PROFILE);
	expect_spec(&out, "[2001:db8::/32]:80", 0, LATCH_ORIGIN_PROFILE);
	expect_spec(&out, "192.0.2.9:443,80", 0, LATCH_ORIGIN_PROFILE);
	cr_expect(!out.open);
	latch_compose_out_free(&out);
	latch_profile_free(&p);
}

Test(compose, extra_cidrs_are_permanent_and_extra_names_allow_learned_answers)
{
	struct latch_profile p = load("p", "203.0.113.0/24:443\n");
	struct latch_pentry *extra;
	char err[LATCH_ERR_MAX];
	int n_extra;

	cr_assert_eq(latch_profile_parse("198.51.100.7:22/tcp\n*.kit.example:8443\n", "kit", &extra, &n_extra, NULL, 0,
					 err, sizeof(err)),
		     0, "%s", err);
	struct latch_compose_learned l[] = {
		{ "api.kit.example", addr("192.0.2.50"), 900 },
		{ "kit.example", addr("192.0.2.51"), 900 }, /* the apex is not under the wildcard */
	};
	struct latch_compose_in in = {
		.profile = &p,
		.extra = extra,
		.n_extra = n_extra,
		.learned = l,
		.n_learned = 2,
		.now_ns = 500,
		.grace_ns = GRACE,
	};
	struct latch_compose_out out = compose(&in);

	expect_spec(&out, "198.51.100.7:22/tcp", 0, LATCH_ORIGIN_PROFILE);
	expect_spec(&out, "192.0.2.50:8443", 900, LATCH_ORIGIN_LEARNED);
	cr_expect_null(find(&out, "192.0.2.51:8443"));
	expect_counts(&out, 3,
		      (struct latch_compose_counts){ .profile = 1, .extra = 1, .learned = 1, .learned_refused = 1 });
	latch_compose_out_free(&out);
	latch_profile_free(&p);
	free(extra);
}

Test(compose, a_host_name_is_one_spec_per_address_with_its_ports_and_ttl)
{
	struct latch_profile p = load("p", "api.example.com:443,8443/tcp\ndown.example.com:80\n");
	struct latch_addr api[] = { addr("203.0.113.10"), addr("2001:db8::10") };
	struct latch_compose_host hosts[] = {
		{ .pe = &p.entries[0], .addr = api, .n = 2, .expires_ns = 1000 },
		{ .pe = &p.entries[1], .addr = NULL, .n = 0 }, /* its lookup failed */
	};
	struct latch_compose_in in = { .profile = &p, .hosts = hosts, .n_hosts = 2 };
	struct latch_compose_out out = compose(&in);

	expect_counts(&out, 2, (struct latch_compose_counts){ .hostname = 2 });
	expect_spec(&out, "203.0.113.10:443,8443/tcp", 1000, LATCH_ORIGIN_HOSTNAME);
	expect_spec(&out, "[2001:db8::10]:443,8443/tcp", 1000, LATCH_ORIGIN_HOSTNAME);
	cr_expect_eq(find(&out, "[2001:db8::10]:443,8443/tcp")->entry.prefixlen, 128);
	latch_compose_out_free(&out);
	latch_profile_free(&p);
}

/* One learned answer, and the spec it must become (NULL: dropped). */
struct learned_case {
	const char *name, *addr;
	uint64_t expires_ns;
	const char *want;
};

/* Compose CASES as learned answers against a profile of TEXT at NOW, and check each and the counts. */
static void learned_cases(const char *text, uint64_t now, const struct learned_case *cases, int n, int expired,
			  int refused)
{
	struct latch_profile p = load("p", text);
	struct latch_compose_learned l[8];
	int kept = 0;

	cr_assert_leq(n, (int)ARRAY_SIZE(l));
	for (int i = 0; i < n; i++)
		l[i] = (struct latch_compose_learned){ cases[i].name, addr(cases[i].addr), cases[i].expires_ns };
	struct latch_compose_in in = { .profile = &p, .learned = l, .n_learned = n, .now_ns = now, .grace_ns = GRACE };
	struct latch_compose_out out = compose(&in);

	for (int i = 0; i < n; i++) {
		if (cases[i].want) {
			expect_spec(&out, cases[i].want, cases[i].expires_ns, LATCH_ORIGIN_LEARNED);
			kept++;
		}
	}
	expect_counts(&out, kept,
		      (struct latch_compose_counts){
			      .learned = kept, .learned_expired = expired, .learned_refused = refused });
	latch_compose_out_free(&out);
	latch_profile_free(&p);
}

/* A switch may narrow a name: its learned answers must not keep the ports of the profile they were learned under. */
Test(compose, a_learned_answer_survives_only_if_allowed_and_under_the_new_ports)
{
	static const struct learned_case cases[] = {
		{ "a.example.com", "203.0.113.1", 900, "203.0.113.1:8443" },
		{ "exact.example.net", "203.0.113.2", 900, "203.0.113.2:80,443" },
		{ "example.com", "203.0.113.3", 900, NULL }, /* apex: not under *.example.com */
		{ "other.example.net", "203.0.113.4", 900, NULL }, /* control: never allowed */
	};

	learned_cases("*.example.com:8443\nexact.example.net:443,80\n", 500, cases, ARRAY_SIZE(cases), 0, 2);
}

/* Kernel deadlines of resolved rules end at expires; latchd keeps them a grace period longer, not a tick more. */
Test(compose, a_learned_answer_is_kept_through_its_grace_and_no_longer)
{
	static const struct learned_case cases[] = {
		{ "in.example.com", "203.0.113.1", 9901, "203.0.113.1:443" }, /* 9901 + 100 > 10000 */
		{ "out.example.com", "203.0.113.2", 9900, NULL }, /* 9900 + 100 == 10000: gone */
		{ "old.example.com", "203.0.113.3", 10, NULL },
	};

	learned_cases("*.example.com:443\n", 10000, cases, ARRAY_SIZE(cases), 2, 0);
}

Test(compose, open_keeps_no_learned_answer_but_carries_what_was_added_by_hand)
{
	struct latch_profile p = { 0 };
	struct latch_pentry *extra;
	char err[LATCH_ERR_MAX];
	int n_extra;

	cr_assert_eq(latch_profile_load(NULL, LATCH_PROFILE_OPEN, NULL, &p, err, sizeof(err)), 0, "%s", err);
	/* a kit that names the learned answer's name: open needs no entries all the same */
	cr_assert_eq(latch_profile_parse("*.example.com:443\n", "kit", &extra, &n_extra, NULL, 0, err, sizeof(err)), 0);
	struct latch_compose_learned l[] = { { "a.example.com", addr("203.0.113.1"), 900 } };
	struct latch_policy_item live[] = {
		item("192.0.2.7:22/tcp", 0, LATCH_ORIGIN_EGRESS, 0),
		item("203.0.113.1:443", 900, LATCH_ORIGIN_LEARNED, 0),
		item("192.0.2.8:443", 5000, LATCH_ORIGIN_GRANT, 1),
	};
	struct latch_compose_in in = { .profile = &p,
				       .extra = extra,
				       .n_extra = n_extra,
				       .learned = l,
				       .n_learned = 1,
				       .live = live,
				       .n_live = 3,
				       .now_ns = 500,
				       .grace_ns = GRACE };
	struct latch_compose_out out = compose(&in);

	cr_expect(out.open);
	expect_spec(&out, "192.0.2.7:22/tcp", 0, LATCH_ORIGIN_EGRESS);
	expect_counts(&out, 1,
		      (struct latch_compose_counts){
			      .carried_egress = 1, .learned_refused = 1, .live_timed = 1, .live_rebuilt = 1 });
	latch_compose_out_free(&out);
	latch_profile_free(&p);
	free(extra);
}

Test(compose, live_rules_grants_stay_put_hand_added_carry_learned_only_at_startup)
{
	struct latch_profile p = load("p", "*.example.com:443\n");
	struct latch_policy_item live[] = {
		item("192.0.2.8:443", 5000, LATCH_ORIGIN_GRANT, 1), /* a grant: timed maps */
		item("192.0.2.9/32:80", 0, LATCH_ORIGIN_EGRESS, 1), /* allow --for, also timed */
		item("192.0.2.7:22/tcp", 0, LATCH_ORIGIN_EGRESS, 0), /* latch egress allow */
		item("198.51.100.0/24:53/udp", 0, LATCH_ORIGIN_EGRESS, 0),
		item("203.0.113.1:443", 900, LATCH_ORIGIN_LEARNED, 0), /* nameless here */
		item("203.0.113.0/24:443", 0, LATCH_ORIGIN_PROFILE, 0), /* the old profile's */
		item("203.0.113.5:443", 900, LATCH_ORIGIN_HOSTNAME, 0),
	};
	struct latch_compose_in in = { .profile = &p, .live = live, .n_live = ARRAY_SIZE(live), .now_ns = 500 };
	struct latch_compose_out out = compose(&in);

	expect_spec(&out, "192.0.2.7:22/tcp", 0, LATCH_ORIGIN_EGRESS);
	expect_spec(&out, "198.51.100.0/24:53/udp", 0, LATCH_ORIGIN_EGRESS);
	expect_counts(&out, 2,
		      (struct latch_compose_counts){ .carried_egress = 2, .live_timed = 2, .live_rebuilt = 3 });
	latch_compose_out_free(&out);

	/* at startup the nameless learned rule is carried once, with its deadline */
	in.carry_live_learned = true;
	out = compose(&in);
	expect_spec(&out, "203.0.113.1:443", 900, LATCH_ORIGIN_LEARNED);
	expect_counts(&out, 3,
		      (struct latch_compose_counts){
			      .carried_egress = 2, .carried_learned = 1, .live_timed = 2, .live_rebuilt = 2 });
	latch_compose_out_free(&out);
	latch_profile_free(&p);
}

/* latchd hands compose only the live rules it would carry: the filter must be rule 5's own. */
Test(compose, the_live_filter_is_the_carry_rule)
{
	static const struct {
		int origin, timed;
		bool plain, startup; /* wanted at a switch, and at startup */
	} cases[] = {
		{ LATCH_ORIGIN_EGRESS, 0, true, true },	   { LATCH_ORIGIN_EGRESS, 1, false, false },
		{ LATCH_ORIGIN_GRANT, 1, false, false },   { LATCH_ORIGIN_GRANT, 0, false, false },
		{ LATCH_ORIGIN_LEARNED, 0, false, true },  { LATCH_ORIGIN_LEARNED, 1, false, false },
		{ LATCH_ORIGIN_PROFILE, 0, false, false }, { LATCH_ORIGIN_HOSTNAME, 0, false, false },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct latch_policy_item it = item("192.0.2.1:443", 0, cases[i].origin, cases[i].timed);

		cr_expect_eq(latch_compose_live_wanted(&it, false), cases[i].plain, "case %zu", i);
		cr_expect_eq(latch_compose_live_wanted(&it, true), cases[i].startup, "case %zu at startup", i);
	}
}

/* The walk's callback keeps exactly what the filter wants, in order, past its first allocation. */
Test(compose, the_live_walk_keeps_what_the_filter_wants_in_order)
{
	struct latch_compose_live live = { .carry_live_learned = false };
	int wanted = 0;

	for (int i = 0; i < 1000; i++) {
		char text[32];
		struct latch_policy_item it;

		snprintf(text, sizeof(text), "192.0.2.%d:%d", i % 250, 1000 + i);
		it = item(text, 0, i % 3 ? LATCH_ORIGIN_EGRESS : LATCH_ORIGIN_PROFILE, i % 7 == 0);
		cr_assert_eq(latch_compose_live_keep(&it, &live), 0);
		if (latch_compose_live_wanted(&it, false)) {
			cr_assert_eq(live.n, wanted + 1);
			cr_assert_eq(live.items[wanted].entry.ports[0].lo, 1000 + i, "item %d kept out of order", i);
			wanted++;
		}
	}
	cr_expect_eq(live.walked, 1000);
	cr_expect_eq(live.n, wanted);
	cr_expect_gt(wanted, 256);
	cr_expect_eq(live.rc, 0);
	free(live.items);
}

Test(compose, identical_specs_fold_a_permanent_rule_beats_a_deadline_else_the_later_one)
{
	struct latch_profile p = load("p", "203.0.113.5:443\nh.example.com:443\n*.example.com:443\n");
	struct latch_addr h_addr[] = { addr("203.0.113.5"), addr("203.0.113.6"), addr("203.0.113.7") };
	struct latch_compose_host hosts[] = { { .pe = &p.entries[1], .addr = h_addr, .n = 3, .expires_ns = 700 } };
	struct latch_compose_learned l[] = {
		{ "x.example.com", addr("203.0.113.5"), 900 }, /* under the profile's permanent entry */
		{ "x.example.com", addr("203.0.113.6"), 900 }, /* later than the host name's 700 */
		{ "x.example.com", addr("203.0.113.7"), 600 }, /* earlier than 700 */
	};
	struct latch_policy_item live[] = {
		item("203.0.113.5:443/tcp", 0, LATCH_ORIGIN_EGRESS, 0), /* another proto: no fold */
		item("203.0.113.5:80", 0, LATCH_ORIGIN_EGRESS, 0), /* other ports: no fold */
		item("203.0.113.0/24:443", 0, LATCH_ORIGIN_EGRESS, 0), /* a covering prefix: no fold */
		item("203.0.113.7:443", 0, LATCH_ORIGIN_EGRESS, 0), /* permanent, late: wins */
	};
	struct latch_compose_in in = {
		.profile = &p,
		.hosts = hosts,
		.n_hosts = 1,
		.learned = l,
		.n_learned = 3,
		.live = live,
		.n_live = 4,
		.now_ns = 500,
		.grace_ns = GRACE,
	};
	struct latch_compose_out out = compose(&in);
	static const char *order[] = { "203.0.113.5:443",     "203.0.113.6:443", "203.0.113.7:443",
				       "203.0.113.5:443/tcp", "203.0.113.5:80",	 "203.0.113.0/24:443" };

	cr_assert_eq(out.n, 6);
	for (int i = 0; i < out.n; i++) {
		char got[LATCH_ENTRY_TEXT_MAX];

		latch_entry_format(&out.specs[i].entry, got, sizeof(got));
		cr_expect_str_eq(got, order[i], "spec %d: folded specs stay where they first appeared", i);
	}
	expect_spec(&out, "203.0.113.5:443", 0, LATCH_ORIGIN_PROFILE);
	expect_spec(&out, "203.0.113.6:443", 900, LATCH_ORIGIN_LEARNED);
	expect_spec(&out, "203.0.113.7:443", 0, LATCH_ORIGIN_EGRESS);
	/* folded: host .5, learned .5 .6 .7, hand-added .7 */
	expect_counts(&out, 6,
		      (struct latch_compose_counts){
			      .profile = 1, .hostname = 3, .learned = 3, .carried_egress = 4, .folded = 5 });
	latch_compose_out_free(&out);
	latch_profile_free(&p);
}

/* The rules of every address in SPECS, folded with the loader's own merge, in order. */
static void fold_like_the_loader(const struct latch_policy_spec *specs, int n, struct latch_rules *rules,
				 struct latch_addr *addrs, int *n_addrs)
{
	for (int i = 0; i < n; i++) {
		const struct latch_entry *e = &specs[i].entry;
		int a = 0;

		while (a < *n_addrs && memcmp(&addrs[a], &e->addr, sizeof(e->addr)))
			a++;
		if (a == *n_addrs) {
			addrs[a] = e->addr;
			memset(&rules[a], 0, sizeof(rules[a]));
			(*n_addrs)++;
		}
		for (int k = 0; k < (e->n_ports ? e->n_ports : 1); k++) {
			struct latch_rule r;

			latch_entry_rule(e, k, specs[i].expires_ns, specs[i].origin, &r);
			cr_assert_eq(latch_rules_merge_longer(&rules[a], &r), 0);
		}
	}
}

/*
 * Folding must never change what the kernel gets: the compose output, merged
 * by the loader, equals the unfolded sources merged by the loader.  Random
 * sources over a few addresses, ports and deadlines, so that folds are many.
 */
Test(compose, folding_leaves_every_address_the_rules_the_loader_would_make)
{
	static const char *const addrs[] = { "192.0.2.1", "192.0.2.2", "2001:db8::1" };
	static const uint16_t ports[] = { 22, 443, 8443 };
	static const uint64_t deadlines[] = { 0, 600, 700, 800 };
	static const uint8_t origins[] = { LATCH_ORIGIN_EGRESS, LATCH_ORIGIN_LEARNED };
	unsigned seed = 12345;

	for (int round = 0; round < 200; round++) {
		struct latch_policy_item live[24];
		struct latch_policy_spec raw[24];
		struct latch_rules want[4], got[4];
		struct latch_addr wa[4], ga[4];
		int n_want = 0, n_got = 0;
		struct latch_profile p = { 0 };

		for (int i = 0; i < 24; i++) {
			char text[64];
			uint64_t dl;
			int origin;

			seed = seed * 1103515245 + 12345;
			snprintf(text, sizeof(text), strchr(addrs[seed % 3], ':') ? "[%s]:%u" : "%s:%u",
				 addrs[seed % 3], ports[(seed >> 8) % 3]);
			dl = deadlines[(seed >> 12) % 4];
			origin = origins[(seed >> 16) % 2];
			live[i] = item(text, dl, origin, 0);
			raw[i] = (struct latch_policy_spec){ .entry = live[i].entry,
							     .expires_ns = dl,
							     .origin = origin };
		}
		struct latch_compose_in in = { .profile = &p, .live = live, .n_live = 24, .carry_live_learned = true };
		struct latch_compose_out out = compose(&in);

		cr_assert_eq(out.n + out.counts.folded, 24);
		fold_like_the_loader(raw, 24, want, wa, &n_want);
		fold_like_the_loader(out.specs, out.n, got, ga, &n_got);
		cr_assert_eq(n_got, n_want);
		for (int a = 0; a < n_want; a++) {
			cr_assert_eq(memcmp(&ga[a], &wa[a], sizeof(wa[a])), 0, "round %d: address order", round);
			cr_assert_eq(memcmp(&got[a], &want[a], sizeof(want[a])), 0, "round %d: rules of address %d",
				     round, a);
		}
		latch_compose_out_free(&out);
	}
}

/*
 * Over a switch, the operator's rules and grants outlive the profile that was
 * live, and nothing of that profile does unless the next one allows it too.
 */
Test(compose, carry_over_two_switches_keeps_the_operators_and_drops_the_old_profiles)
{
	struct latch_profile a = load("a", "203.0.113.0/24:443\nold.example.com:443\n*.shared.example:443\n");
	struct latch_profile b = load("b", "new.example.com:443\n*.shared.example:8443\n");
	struct latch_addr old_addr[] = { addr("198.51.100.1") }, new_addr[] = { addr("198.51.100.9") };
	struct latch_compose_host ha[] = { { .pe = &a.entries[1], .addr = old_addr, .n = 1, .expires_ns = 2000 } };
	struct latch_compose_host hb[] = { { .pe = &b.entries[0], .addr = new_addr, .n = 1, .expires_ns = 2100 } };
	struct latch_compose_learned l[] = {
		{ "old.example.com", addr("198.51.100.2"), 1900 },
		{ "www.shared.example", addr("198.51.100.3"), 1900 },
	};
	struct latch_policy_item live[16];
	int n_live = 0;

	/* switch 1, to a: what it writes becomes the live generation, one item per rule */
	struct latch_compose_in in = {
		.profile = &a, .hosts = ha, .n_hosts = 1, .learned = l, .n_learned = 2, .now_ns = 1000, .grace_ns = GRACE
	};
	struct latch_compose_out out = compose(&in);

	cr_assert_eq(out.n, 4);
	for (int i = 0; i < out.n; i++) {
		live[n_live].entry = out.specs[i].entry;
		latch_entry_rule(&out.specs[i].entry, 0, out.specs[i].expires_ns, out.specs[i].origin,
				 &live[n_live].rule);
		live[n_live++].timed = 0;
	}
	latch_compose_out_free(&out);
	live[n_live++] = item("192.0.2.7:22/tcp", 0, LATCH_ORIGIN_EGRESS, 0); /* latch egress allow */
	live[n_live++] = item("192.0.2.8:443", 5000, LATCH_ORIGIN_GRANT, 1); /* latch egress allow --for */

	/* switch 2, to b */
	in = (struct latch_compose_in){ .profile = &b,
					.hosts = hb,
					.n_hosts = 1,
					.learned = l,
					.n_learned = 2,
					.live = live,
					.n_live = n_live,
					.now_ns = 1500,
					.grace_ns = GRACE };
	out = compose(&in);
	expect_spec(&out, "198.51.100.9:443", 2100, LATCH_ORIGIN_HOSTNAME);
	expect_spec(&out, "198.51.100.3:8443", 1900, LATCH_ORIGIN_LEARNED); /* still allowed, b's ports */
	expect_spec(&out, "192.0.2.7:22/tcp", 0, LATCH_ORIGIN_EGRESS);
	cr_expect_null(find(&out, "203.0.113.0/24:443"), "a's CIDR went with a");
	cr_expect_null(find(&out, "198.51.100.1:443"), "a's host name went with a");
	cr_expect_null(find(&out, "198.51.100.2:443"), "a learned answer b does not allow went");
	cr_expect_null(find(&out, "198.51.100.3:443"), "nor did a's ports for an answer b allows");
	cr_expect_null(find(&out, "192.0.2.8:443"), "the grant stays in the timed maps, not in the switch");
	expect_counts(&out, 3,
		      (struct latch_compose_counts){ .hostname = 1,
						     .learned = 1,
						     .carried_egress = 1,
						     .learned_refused = 1,
						     .live_timed = 1,
						     .live_rebuilt = 4 });
	latch_compose_out_free(&out);
	latch_profile_free(&a);
	latch_profile_free(&b);
}

Test(compose, nothing_in_is_nothing_out_and_free_takes_a_zeroed_out)
{
	struct latch_profile p = { 0 };
	struct latch_compose_in in = { .profile = &p };
	struct latch_compose_out out = compose(&in), zero = { 0 };

	expect_counts(&out, 0, (struct latch_compose_counts){ 0 });
	cr_expect_not_null(out.specs);
	latch_compose_out_free(&out);
	cr_expect_null(out.specs);
	latch_compose_out_free(&zero);
	latch_compose_out_free(NULL);
}
