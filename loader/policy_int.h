/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * policy_int.h - the policy maps' key layouts and the helpers that read and
 * write them, shared by policy.c (single entries), policy_gen.c (whole
 * generations) and policy_map.c.  Private to loader/.
 */
#ifndef LATCH_LOADER_POLICY_INT_H
#define LATCH_LOADER_POLICY_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/policy.h"

/* One kind of policy map and how its keys are laid out. */
struct kind {
	enum latch_map_id map;
	int family;
	int lpm;
	int gen;
};

/* the six policy maps: exact, prefix (both with a generation) and timed, v4 and v6 */
extern const struct kind loader_pm_kinds[6];

int loader_pm_alen(const struct kind *k);
const struct kind *loader_pm_kind_for(int family, int full, int timed);
void loader_pm_key_make(const struct kind *k, __u32 gen, const uint8_t *addr, int plen, uint8_t *key);
void loader_pm_key_parse(const struct kind *k, const uint8_t *key, __u32 *gen, uint8_t *addr, int *plen);
int loader_pm_covers(const uint8_t *net, int plen, const uint8_t *addr);
int loader_pm_fd_of(struct latch_sandbox *sb, const struct kind *k);
size_t loader_pm_key_size(const struct kind *k);
int loader_pm_lookup_exact(struct latch_sandbox *sb, const struct kind *k, const uint8_t *key, struct latch_rules *v);
int loader_pm_lpm_ancestor(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
			   struct latch_rules *out);
int loader_pm_lpm_refresh(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
			  const struct latch_rules *own_in);
int loader_pm_lpm_refresh_below(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr,
				int plen);
int loader_pm_set_flags(struct latch_sandbox *sb, __u32 flags, int bump_version);
__u32 loader_pm_have_flag(const struct kind *k);
/* A key of a trie, and what it says. */
struct pm_trie_key {
	uint8_t key[32];
	uint8_t addr[16];
	int plen;
};
/*
 * The keys of generation gen of trie k strictly under (addr, plen), or all
 * of gen when addr is NULL, in *out (the caller frees it).  The count, or
 * -ENOMEM.
 */
int loader_pm_trie_keys(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
			struct pm_trie_key **out);

/* rules.c: would merging rule shorten the deadline of a rule already there? */
bool loader_pm_rules_shortened(struct latch_rules *r, const struct latch_rule *rule);
void loader_pm_rules_delete_at(struct latch_rules *r, __u32 i);

#endif
