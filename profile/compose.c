// SPDX-License-Identifier: GPL-2.0-only
/*
 * compose.c - the policy union a profile switch makes live, as one pure
 * function: profile, extra entries, resolved host names, learned answers and
 * what the live generation carries, in, and the specs for
 * latch_policy_switch() out.  No I/O and no clock (the caller passes now), so
 * tests/test_compose.c can hold each rule; profile.h states the precedence.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "profile/profile.h"

void latch_profile_address_entry(const struct latch_addr *a, const struct latch_entry *ports, struct latch_entry *e)
{
	*e = *ports;
	e->addr = *a;
	e->prefixlen = a->family == AF_INET ? 32 : 128;
}

/*
 * The specs so far, and an open-addressing index over them by (address,
 * prefix, proto, ports), so that folding an identical spec is one lookup
 * even for a profile of 65,536 entries.
 */
struct spec_set {
	struct latch_policy_spec *specs;
	int n, cap;
	int *slot; /* index into specs, -1 empty; a power of two, at least twice cap */
	unsigned mask;
};

/* The bytes that make two entries the same kernel rules; the rest of latch_entry is ignored. */
#define ENTRY_KEY_MAX (4 + 16 + sizeof(((struct latch_entry *)0)->ports))
static size_t entry_key(const struct latch_entry *e, uint8_t *buf)
{
	size_t alen = e->addr.family == AF_INET ? 4 : 16, off = 0;

	buf[off++] = e->addr.family == AF_INET ? 4 : 6;
	memcpy(buf + off, e->addr.bytes, alen);
	off += alen;
	buf[off++] = (uint8_t)e->prefixlen;
	buf[off++] = e->proto;
	buf[off++] = (uint8_t)e->n_ports;
	memcpy(buf + off, e->ports, e->n_ports * sizeof(e->ports[0]));
	return off + e->n_ports * sizeof(e->ports[0]);
}

static int set_init(struct spec_set *set, size_t bound)
{
	size_t slots = 16;

	while (slots < 2 * bound)
		slots *= 2;
	set->specs = malloc((bound ? bound : 1) * sizeof(*set->specs));
	set->slot = malloc(slots * sizeof(*set->slot));
	if (!set->specs || !set->slot)
		return -ENOMEM;
	memset(set->slot, 0xff, slots * sizeof(*set->slot));
	set->cap = bound;
	set->mask = slots - 1;
	return 0;
}

/* Add a spec, or fold it into an identical one as latch_rules_merge_longer() would.  1 when folded. */
static int set_add(struct spec_set *set, const struct latch_entry *e, uint64_t expires_ns, int origin)
{
	uint8_t key[ENTRY_KEY_MAX], other[ENTRY_KEY_MAX];
	size_t len = entry_key(e, key);
	unsigned h = latch_fnv1a(LATCH_FNV1A_INIT, key, len) & set->mask;
	struct latch_policy_spec *sp;

	for (; set->slot[h] >= 0; h = (h + 1) & set->mask) {
		sp = &set->specs[set->slot[h]];
		if (entry_key(&sp->entry, other) != len || memcmp(key, other, len))
			continue;
		/* a permanent rule stays; otherwise the later deadline wins */
		if (sp->expires_ns && (!expires_ns || expires_ns > sp->expires_ns)) {
			sp->expires_ns = expires_ns;
			sp->origin = origin;
		}
		return 1;
	}
	sp = &set->specs[set->n];
	sp->entry = *e;
	sp->expires_ns = expires_ns;
	sp->origin = origin;
	set->slot[h] = set->n++;
	return 0;
}

/* Count a spec where it came from, or as folded. */
static void add_counted(struct spec_set *set, struct latch_compose_counts *c, int *source, const struct latch_entry *e,
			uint64_t expires_ns, int origin)
{
	(*source)++;
	c->folded += set_add(set, e, expires_ns, origin);
}

static bool extra_matches(const struct latch_pentry *pe, const char *name)
{
	if (pe->kind == LATCH_PENTRY_HOST)
		return !strcmp(pe->name, name);
	return pe->kind == LATCH_PENTRY_WILDCARD && latch_wildcard_match(pe->name, name);
}

/* 4: one learned answer, under the ports the new policy gives its name. */
static void add_learned(struct spec_set *set, const struct latch_compose_in *in, const struct latch_compose_learned *l,
			struct latch_compose_counts *c)
{
	struct latch_entry ports, e;
	bool kept = false;

	if (l->expires_ns + in->grace_ns <= in->now_ns) {
		c->learned_expired++;
		return;
	}
	if (in->profile->open) {
		c->learned_refused++;
		return;
	}
	if (latch_profile_match(in->profile, l->name, &ports)) {
		latch_profile_address_entry(&l->addr, &ports, &e);
		c->folded += set_add(set, &e, l->expires_ns, LATCH_ORIGIN_LEARNED);
		kept = true;
	}
	for (int i = 0; i < in->n_extra; i++) {
		if (!extra_matches(&in->extra[i], l->name))
			continue;
		latch_profile_address_entry(&l->addr, &in->extra[i].entry, &e);
		c->folded += set_add(set, &e, l->expires_ns, LATCH_ORIGIN_LEARNED);
		kept = true;
	}
	if (kept)
		c->learned++;
	else
		c->learned_refused++;
}

bool latch_compose_live_wanted(const struct latch_policy_item *it, bool carry_live_learned)
{
	return !it->timed && (it->rule.origin == LATCH_ORIGIN_EGRESS ||
			      (carry_live_learned && it->rule.origin == LATCH_ORIGIN_LEARNED));
}

int latch_compose_live_keep(const struct latch_policy_item *it, void *arg)
{
	struct latch_compose_live *l = arg;

	l->walked++;
	if (!latch_compose_live_wanted(it, l->carry_live_learned))
		return 0;
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 256;
		struct latch_policy_item *n = realloc(l->items, cap * sizeof(*n));

		if (!n) {
			l->rc = -ENOMEM;
			return 0;
		}
		l->items = n;
		l->cap = cap;
	}
	l->items[l->n++] = *it;
	return 0;
}

/* 5: one rule of the live generation: carried, left alone, or rebuilt. */
static void add_live(struct spec_set *set, const struct latch_compose_in *in, const struct latch_policy_item *it,
		     struct latch_compose_counts *c)
{
	if (it->timed)
		c->live_timed++;
	else if (!latch_compose_live_wanted(it, in->carry_live_learned))
		c->live_rebuilt++;
	else
		add_counted(set, c, it->rule.origin == LATCH_ORIGIN_EGRESS ? &c->carried_egress : &c->carried_learned,
			    &it->entry, it->rule.expires_ns, it->rule.origin);
}

/* How many specs the sources can give at most: the size of the output before folding. */
static size_t bound_of(const struct latch_compose_in *in)
{
	size_t n = in->profile->n + in->n_extra + in->n_live;

	for (int i = 0; i < in->n_hosts; i++)
		n += in->hosts[i].n;
	return n + (size_t)in->n_learned * (1 + in->n_extra);
}

int latch_profile_compose(const struct latch_compose_in *in, struct latch_compose_out *out)
{
	struct spec_set set = { 0 };
	struct latch_compose_counts *c = &out->counts;

	memset(out, 0, sizeof(*out));
	if (set_init(&set, bound_of(in))) {
		free(set.specs);
		free(set.slot);
		return -ENOMEM;
	}
	for (int i = 0; i < in->profile->n; i++)
		if (in->profile->entries[i].kind == LATCH_PENTRY_CIDR)
			add_counted(&set, c, &c->profile, &in->profile->entries[i].entry, 0, LATCH_ORIGIN_PROFILE);
	for (int i = 0; i < in->n_extra; i++)
		if (in->extra[i].kind == LATCH_PENTRY_CIDR)
			add_counted(&set, c, &c->extra, &in->extra[i].entry, 0, LATCH_ORIGIN_PROFILE);
	for (int i = 0; i < in->n_hosts; i++) {
		const struct latch_compose_host *h = &in->hosts[i];

		for (int k = 0; k < h->n; k++) {
			struct latch_entry e;

			latch_profile_address_entry(&h->addr[k], &h->pe->entry, &e);
			add_counted(&set, c, &c->hostname, &e, h->expires_ns, LATCH_ORIGIN_HOSTNAME);
		}
	}
	for (int i = 0; i < in->n_learned; i++)
		add_learned(&set, in, &in->learned[i], c);
	for (int i = 0; i < in->n_live; i++)
		add_live(&set, in, &in->live[i], c);
	free(set.slot);
	out->specs = set.specs;
	out->n = set.n;
	out->open = in->profile->open;
	return 0;
}

void latch_compose_out_free(struct latch_compose_out *out)
{
	if (!out)
		return;
	free(out->specs);
	memset(out, 0, sizeof(*out));
}
