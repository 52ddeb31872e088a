/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * latch_rules.h - one policy question and its answer, and the token bucket,
 * shared by the tc programs (latch_tc.bpf.c) and the room programs
 * (latch_cg.bpf.c), so that a rule's ports, protocol and deadline, and a DNS
 * rate, mean the same on a tap and in a room.
 */
#ifndef LATCH_RULES_H
#define LATCH_RULES_H

/* One policy question, asked of each map in turn (see latch_rules_allow). */
struct rule_query {
	__u64 now; /* boot clock, 0 until first read */
	__u64 expires; /* out: the deadline the flow (or socket verdict) inherits, 0 none */
	__u16 port; /* destination port, host order */
	__u8 proto; /* LATCH_PROTO_* class of the packet */
	__u8 established; /* the flow exists already */
	__u8 origin; /* out: origin of the matching rule */
	__u8 pad[3];
};

/*
 * Does one of the rules allow (proto, port)?  Rules with a deadline count
 * only before it, except a learned rule re-checked for an established flow
 * (see enum latch_origin).  q->expires gets the deadline the flow inherits:
 * the matching rule's, or none for a learned rule; q->origin the rule's
 * origin.  The clock is read only when a timed rule is looked at.
 *
 * A global function: the verifier checks it once, on its own, instead of at
 * each of the six lookups of each program (inlined, the loop over 16 rules
 * at six call sites ran past the verifier's budget).
 */
__noinline int latch_rules_allow(const struct latch_rules *r, struct rule_query *q)
{
	if (!r || !q)
		return 0;
	for (int i = 0; i < LATCH_RULES_MAX; i++) {
		const struct latch_rule *rule = &r->rule[i];
		int learned;

		if (i >= r->n)
			break;
		if (q->proto == LATCH_PROTO_ICMP) {
			if (rule->proto != LATCH_PROTO_ICMP &&
			    !(rule->proto == LATCH_PROTO_ANY && rule->port_lo == 0 && rule->port_hi == 0xffff))
				continue;
		} else {
			if (rule->proto != LATCH_PROTO_ANY && rule->proto != q->proto)
				continue;
			if (q->port < rule->port_lo || q->port > rule->port_hi)
				continue;
		}
		learned = latch_origin_resolved(rule->origin);
		if (rule->expires_ns && !(learned && q->established)) {
			if (!q->now)
				q->now = bpf_ktime_get_boot_ns();
			if (q->now >= rule->expires_ns)
				continue;
		}
		q->expires = learned ? 0 : rule->expires_ns;
		q->origin = rule->origin;
		return 1;
	}
	return 0;
}

/* A pass by an exact or prefix rule: a resolved name's, or the policy's own. */
static __always_inline int policy_pass(const struct rule_query *q)
{
	return latch_origin_resolved(q->origin) ? LATCH_PASS_LEARNED : LATCH_PASS_POLICY;
}

/*
 * GCRA token bucket: room for one more packet of `rate` per second inside a
 * burst of `burst`?  Advances *tat_ns (the theoretical arrival time of the
 * next packet) when there is.  The caller holds the bucket's lock and has
 * refused a rate or burst of 0.
 */
static __always_inline int latch_gcra(__u64 *tat_ns, __u32 rate, __u32 burst, __u64 now)
{
	__u64 interval = 1000000000ULL / rate, tat = *tat_ns > now ? *tat_ns : now;

	if (tat + interval - now > interval * burst)
		return 0;
	*tat_ns = tat + interval;
	return 1;
}

#endif /* LATCH_RULES_H */
