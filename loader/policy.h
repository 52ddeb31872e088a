/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * policy.h - egress entries in a sandbox's policy maps.
 *
 * Single addresses go to the exact hash maps, prefixes to the prefix tries,
 * and anything with a deadline to the timed tries.  Inside a trie the longest
 * match decides alone, so this module copies a prefix's rules into every
 * more specific prefix under it (marked LATCH_RULE_INHERITED) and keeps those
 * copies right as entries come and go.
 */
#ifndef LATCH_LOADER_POLICY_H
#define LATCH_LOADER_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/entry.h"
#include "loader/sandbox.h"

/* Merge a rule into a set: same proto and ports updates the deadline. */
int latch_rules_merge(struct latch_rules *r, const struct latch_rule *rule);
/* Merge, never shortening: a permanent rule stays, else the later deadline wins. */
int latch_rules_merge_longer(struct latch_rules *r, const struct latch_rule *rule);
/* Remove own rules matching the entry (all own rules when it has no ports); returns how many. */
int latch_rules_remove(struct latch_rules *r, const struct latch_entry *e);
/* Drop rules whose deadline has passed; returns how many. */
int latch_rules_prune(struct latch_rules *r, uint64_t now_ns);

/*
 * Allow an entry; expires_ns 0 for a permanent entry, else a CLOCK_BOOTTIME
 * deadline.  Returns 0, or -errno with a line in err.
 */
int latch_policy_allow(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin,
		       char *err, size_t errlen);
/* Remove an entry's rules from the permanent and timed maps; bumps the policy version. */
int latch_policy_revoke(struct latch_sandbox *sb, const struct latch_entry *e, char *err, size_t errlen);

/*
 * Replace the whole permanent policy with entries[]: written under the idle
 * generation and made live with one config update.  Timed entries are kept.
 * The old generation stays behind, idle and marked dirty, until
 * latch_policy_gc() deletes it; call that right after, off the critical path.
 */
int latch_policy_replace(struct latch_sandbox *sb, const struct latch_entry *entries, int n, char *err, size_t errlen);
int latch_policy_gc(struct latch_sandbox *sb);
/*
 * latch_policy_gc() in steps, for a daemon that must answer in between:
 * begin is NULL with errno 0 when the idle generation is clean already;
 * each step deletes about budget keys and returns 1 while more remain, 0
 * when the idle generation is empty and marked clean (or a switch made the
 * collection moot), or -errno.  Hold the policy lock around each step.
 */
struct latch_policy_gc;
struct latch_policy_gc *latch_policy_gc_begin(struct latch_sandbox *sb);
int latch_policy_gc_step(struct latch_policy_gc *gc, unsigned budget);
void latch_policy_gc_free(struct latch_policy_gc *gc);

/* One entry of a whole policy, with its own deadline and origin. */
struct latch_policy_spec {
	struct latch_entry entry; /* first member: policy.c relies on it */
	uint64_t expires_ns; /* 0: permanent; else a CLOCK_BOOTTIME deadline */
	uint8_t origin; /* enum latch_origin */
};
/*
 * latch_policy_replace() for a named policy: each spec keeps its deadline
 * and origin (a profile's host names and learned answers carry their TTL),
 * and the same config update that makes the new generation live sets or
 * clears LATCH_CFG_OPEN (the `open` profile: specs are then usually none).
 * Duplicate addresses merge; a permanent rule beats a deadline.
 */
int latch_policy_switch(struct latch_sandbox *sb, const struct latch_policy_spec *specs, int n, bool open, char *err,
			size_t errlen);
/*
 * Add a learned answer (one address, ports, deadline) to the live
 * generation's exact map, never shortening a rule already there.  It reads,
 * merges and writes back the address's rules: a caller racing `latch egress
 * revoke` on the same address takes the policy lock around it (latchd does,
 * when latch_policy_learn_needed() says there is something to write).
 */
int latch_policy_learn(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin,
		       char *err, size_t errlen);
/*
 * 1 when latch_policy_learn() with these arguments would write to the map,
 * 0 when the live entry already holds it (a cached answer), or -errno.
 */
int latch_policy_learn_needed(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin);
/*
 * Drop learned and host-name rules of the live generation whose deadline was
 * before before_ns (callers leave a grace period: established flows re-checked
 * after the TTL still find their rule).  Returns how many, or -errno.
 */
int latch_policy_prune_resolved(struct latch_sandbox *sb, uint64_t before_ns);

struct latch_policy_item {
	struct latch_entry entry; /* address/prefix; ports and proto of the one rule */
	struct latch_rule rule;
	int timed;
};
/* Calls fn for each own (not inherited) rule that has not expired; returns the count. */
int latch_policy_list(struct latch_sandbox *sb, int (*fn)(const struct latch_policy_item *it, void *arg), void *arg);

/*
 * The policy lock of sandbox NAME ($LATCH_ROOT/run/latch/NAME.policy.lock):
 * taken by `latch egress allow|revoke` around its map writes and by latchd
 * around a switch (from reading the live generation for entries to carry to
 * the flip) and around each learned write, so that neither an allow is left
 * behind in the old generation nor a revoke undone by the carry or by a
 * learned answer's read-modify-write of the same address.  Waits up to 10 s.  Returns an fd to
 * pass to latch_policy_unlock(), or -errno with a line in err.
 */
int latch_policy_lock(const char *name, char *err, size_t errlen);
/* latch_policy_lock(), waiting up to wait_ms instead of 10 s. */
int latch_policy_lock_wait(const char *name, int wait_ms, char *err, size_t errlen);
void latch_policy_unlock(int fd);

#endif
