// SPDX-License-Identifier: GPL-2.0-only
/*
 * rules.c - the rule set of one address or prefix: merge, remove, prune.
 * Pure (no kernel), so tests/test_rules.c exercises every corner.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/policy_int.h"

static int same_ports(const struct latch_rule *a, const struct latch_rule *b)
{
	return a->proto == b->proto && a->port_lo == b->port_lo && a->port_hi == b->port_hi;
}

/* The next rule of R from index *from on with RULE's ports and inherited flag, or NULL. */
static struct latch_rule *rules_find(struct latch_rules *r, const struct latch_rule *rule, __u32 *from)
{
	for (; *from < r->n; (*from)++) {
		struct latch_rule *x = &r->rule[*from];

		if (same_ports(x, rule) && (x->flags & LATCH_RULE_INHERITED) == (rule->flags & LATCH_RULE_INHERITED))
			return x;
	}
	return NULL;
}

static int rules_append(struct latch_rules *r, const struct latch_rule *rule)
{
	if (r->n >= LATCH_RULES_MAX)
		return -E2BIG;
	r->rule[r->n++] = *rule;
	return 0;
}

int latch_rules_merge(struct latch_rules *r, const struct latch_rule *rule)
{
	struct latch_rule *x;
	__u32 i = 0;

	/* Inherited copies of different covering prefixes stand side by side. */
	if (rule->flags & LATCH_RULE_INHERITED) {
		for (; (x = rules_find(r, rule, &i)); i++)
			if (x->expires_ns == rule->expires_ns)
				return 0;
		return rules_append(r, rule);
	}
	x = rules_find(r, rule, &i);
	if (!x)
		return rules_append(r, rule);
	/* The newest word on an entry wins: a grant may be shortened too. */
	x->expires_ns = rule->expires_ns;
	x->origin = rule->origin;
	return 0;
}

/* Would merging rule into r move one of its own deadlines earlier (a permanent one included)? */
bool loader_pm_rules_shortened(struct latch_rules *r, const struct latch_rule *rule)
{
	__u32 i = 0;
	const struct latch_rule *x = rules_find(r, rule, &i);

	return x && rule->expires_ns && (!x->expires_ns || rule->expires_ns < x->expires_ns);
}

int latch_rules_merge_longer(struct latch_rules *r, const struct latch_rule *rule)
{
	__u32 i = 0;
	struct latch_rule *x = rules_find(r, rule, &i);

	if (!x)
		return rules_append(r, rule);
	/* a permanent rule stays; otherwise the later deadline wins */
	if (x->expires_ns && (!rule->expires_ns || rule->expires_ns > x->expires_ns)) {
		x->expires_ns = rule->expires_ns;
		x->origin = rule->origin;
	}
	return 0;
}

void loader_pm_rules_delete_at(struct latch_rules *r, __u32 i)
{
	memmove(&r->rule[i], &r->rule[i + 1], (r->n - i - 1) * sizeof(r->rule[0]));
	r->n--;
	memset(&r->rule[r->n], 0, sizeof(r->rule[0]));
}

int latch_rules_remove(struct latch_rules *r, const struct latch_entry *e)
{
	int removed = 0;

	for (__u32 i = 0; i < r->n;) {
		struct latch_rule *x = &r->rule[i];
		int match = 0;

		if (!(x->flags & LATCH_RULE_INHERITED)) {
			if (e->n_ports == 0)
				match = e->proto == LATCH_PROTO_ANY || x->proto == e->proto;
			for (int p = 0; p < e->n_ports && !match; p++)
				match = x->proto == e->proto && x->port_lo == e->ports[p].lo &&
					x->port_hi == e->ports[p].hi;
		}
		if (match) {
			loader_pm_rules_delete_at(r, i);
			removed++;
		} else {
			i++;
		}
	}
	return removed;
}

int latch_rules_prune(struct latch_rules *r, uint64_t now_ns)
{
	int removed = 0;

	for (__u32 i = 0; i < r->n;) {
		if (r->rule[i].expires_ns && r->rule[i].expires_ns <= now_ns) {
			loader_pm_rules_delete_at(r, i);
			removed++;
		} else {
			i++;
		}
	}
	return removed;
}
