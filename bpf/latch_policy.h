/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * latch_policy.h - the policy walk, written once for the tc programs
 * (latch_tc.bpf.c) and the room programs (latch_cg.bpf.c), so that the order
 * of the maps and what each pass is called cannot drift apart between a tap
 * and a room.  As Cilium's policy.h does, the walk takes its maps as
 * parameters: a tc program owns one sandbox's maps and passes them; a room
 * program holds every room's maps as inner maps of ARRAY_OF_MAPS outer maps,
 * and passes the outer maps with the room's slot.
 */
#ifndef LATCH_POLICY_H
#define LATCH_POLICY_H

#include "latch_rules.h"

/*
 * The six maps one walk reads, with the key layouts of latch_abi.h.  With
 * `in_slot` set each is an ARRAY_OF_MAPS, and the walk reads its inner map at
 * `slot`; an inner map is looked up only when the walk comes to it, as a map
 * of the tc program is.
 */
struct latch_policy_maps {
	void *exact4, *exact6; /* HASH: permanent single addresses, per generation */
	void *prefix4, *prefix6; /* LPM_TRIE: permanent CIDRs, per generation */
	void *timed4, *timed6; /* LPM_TRIE: entries with a deadline (grants, learned names) */
	__u32 slot;
	__u8 in_slot;
};

/* The rules under KEY in MAP (or in MAP's inner map at the slot), or NULL. */
static __always_inline const struct latch_rules *latch_policy_rules(const struct latch_policy_maps *m, void *map,
								    const void *key)
{
	if (m->in_slot) {
		__u32 slot = m->slot;

		map = bpf_map_lookup_elem(map, &slot);
		if (!map)
			return NULL;
	}
	return bpf_map_lookup_elem(map, key);
}

/*
 * The policy decision for a destination, in this order: the permanent exact
 * entry of the active generation (a hash: names resolve to these), then the
 * longest permanent prefix, then the longest timed entry.  An entry whose
 * rules don't match falls through to the next map, and the loader copies a
 * prefix's rules into the more specific prefixes under it, so the longest
 * match alone is enough inside one trie.  The tries are skipped while
 * nothing was ever put in them.  DADDR holds an IPv4 address in its first
 * word (network byte order) when FAMILY is 4, else 16 bytes of IPv6.
 */
static __always_inline int latch_policy_lookup(const struct latch_policy_maps *m, const struct latch_config *cfg,
					       __u8 family, const __u32 *daddr, struct rule_query *q)
{
	const struct latch_rules *r;

	if (family == 4) {
		struct latch_exact4_key ek = { .gen = cfg->policy_gen, .addr = daddr[0] };

		r = latch_policy_rules(m, m->exact4, &ek);
		if (r && latch_rules_allow(r, q))
			return policy_pass(q);
		if (cfg->flags & LATCH_CFG_HAVE_PREFIX4) {
			struct latch_prefix4_key pk = { .prefixlen = 64, .gen = cfg->policy_gen, .addr = daddr[0] };

			r = latch_policy_rules(m, m->prefix4, &pk);
			if (r && latch_rules_allow(r, q))
				return policy_pass(q);
		}
		if (cfg->flags & LATCH_CFG_HAVE_TIMED4) {
			struct latch_timed4_key tk = { .prefixlen = 32, .addr = daddr[0] };

			r = latch_policy_rules(m, m->timed4, &tk);
			if (r && latch_rules_allow(r, q))
				return LATCH_PASS_TIMED;
		}
		return LATCH_DROP_POLICY;
	}

	struct latch_exact6_key ek = { .gen = cfg->policy_gen };

	__builtin_memcpy(ek.addr, daddr, 16);
	r = latch_policy_rules(m, m->exact6, &ek);
	if (r && latch_rules_allow(r, q))
		return policy_pass(q);
	if (cfg->flags & LATCH_CFG_HAVE_PREFIX6) {
		struct latch_prefix6_key pk = { .prefixlen = 32 + 128, .gen = cfg->policy_gen };

		__builtin_memcpy(pk.addr, daddr, 16);
		r = latch_policy_rules(m, m->prefix6, &pk);
		if (r && latch_rules_allow(r, q))
			return policy_pass(q);
	}
	if (cfg->flags & LATCH_CFG_HAVE_TIMED6) {
		struct latch_timed6_key tk = { .prefixlen = 128 };

		__builtin_memcpy(tk.addr, daddr, 16);
		r = latch_policy_rules(m, m->timed6, &tk);
		if (r && latch_rules_allow(r, q))
			return LATCH_PASS_TIMED;
	}
	return LATCH_DROP_POLICY;
}

/*
 * The policy's verdict on (destination, PROTO, PORT): `open` passes
 * everything, else the walk above decides.  PORT is in host byte order,
 * PROTO a LATCH_PROTO_* class; ESTABLISHED is 1 when the flow (or the
 * socket's verdict) exists already, where a learned rule's TTL no longer
 * applies.  *NOW is the boot clock, 0 until read, and stays read for the
 * caller; *EXPIRES gets the deadline the flow inherits (left alone on
 * `open`: the caller zeroes it).
 */
static __always_inline int latch_policy_decide(const struct latch_policy_maps *m, const struct latch_config *cfg,
					       __u8 family, const __u32 *daddr, __u8 proto, __u16 port, int established,
					       __u64 *now, __u64 *expires)
{
	struct rule_query q = { .now = *now, .port = port, .proto = proto, .established = !!established };
	int reason;

	if (cfg->flags & LATCH_CFG_OPEN)
		return LATCH_PASS_OPEN;
	reason = latch_policy_lookup(m, cfg, family, daddr, &q);
	*now = q.now;
	*expires = q.expires;
	return reason;
}

#endif /* LATCH_POLICY_H */
