// SPDX-License-Identifier: GPL-2.0-only
/*
 * policy_map.c - the policy maps' keys, and the prefix tries' inherited
 * rules: inside one trie only the longest match is seen, so every prefix
 * carries copies of the rules of the prefixes that cover it.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/policy_int.h"

const struct kind loader_pm_kinds[] = {
	{ LATCH_MAP_EXACT4, AF_INET, 0, 1 },  { LATCH_MAP_EXACT6, AF_INET6, 0, 1 },
	{ LATCH_MAP_PREFIX4, AF_INET, 1, 1 }, { LATCH_MAP_PREFIX6, AF_INET6, 1, 1 },
	{ LATCH_MAP_TIMED4, AF_INET, 1, 0 },  { LATCH_MAP_TIMED6, AF_INET6, 1, 0 },
};

int loader_pm_alen(const struct kind *k)
{
	return k->family == AF_INET ? 4 : 16;
}

const struct kind *loader_pm_kind_for(int family, int full, int timed)
{
	int base = timed ? 4 : full ? 0 : 2;

	return &loader_pm_kinds[base + (family == AF_INET6)];
}

/* Keys are {[prefixlen][gen] addr}; see latch_abi.h. */
void loader_pm_key_make(const struct kind *k, __u32 gen, const uint8_t *addr, int plen, uint8_t *key)
{
	size_t off = 0;

	if (k->lpm) {
		__u32 pl = plen + (k->gen ? 32 : 0);

		memcpy(key, &pl, 4);
		off = 4;
	}
	if (k->gen) {
		memcpy(key + off, &gen, 4);
		off += 4;
	}
	memcpy(key + off, addr, loader_pm_alen(k));
}

void loader_pm_key_parse(const struct kind *k, const uint8_t *key, __u32 *gen, uint8_t *addr, int *plen)
{
	size_t off = 0;
	__u32 pl = loader_pm_alen(k) * 8;

	*gen = 0;
	if (k->lpm) {
		memcpy(&pl, key, 4);
		off = 4;
		if (k->gen)
			pl -= 32;
	}
	if (k->gen) {
		memcpy(gen, key + off, 4);
		off += 4;
	}
	memset(addr, 0, 16);
	memcpy(addr, key + off, loader_pm_alen(k));
	*plen = pl;
}

int loader_pm_covers(const uint8_t *net, int plen, const uint8_t *addr)
{
	for (int i = 0; i < plen; i++)
		if ((net[i / 8] ^ addr[i / 8]) & (0x80 >> (i % 8)))
			return 0;
	return 1;
}

int loader_pm_fd_of(struct latch_sandbox *sb, const struct kind *k)
{
	return latch_sandbox_map_fd(sb, k->map);
}

size_t loader_pm_key_size(const struct kind *k)
{
	return (k->lpm ? 4 : 0) + (k->gen ? 4 : 0) + loader_pm_alen(k);
}

/*
 * The value stored under exactly this key.  A trie lookup answers with the
 * longest covering prefix instead, which would hand a parent's rules to a
 * child as its own, so tries are walked for the key itself.
 */
int loader_pm_lookup_exact(struct latch_sandbox *sb, const struct kind *k, const uint8_t *key, struct latch_rules *v)
{
	uint8_t cur[32], next[32];
	void *prev = NULL;

	if (!k->lpm)
		return bpf_map_lookup_elem(loader_pm_fd_of(sb, k), key, v) == 0;
	while (bpf_map_get_next_key(loader_pm_fd_of(sb, k), prev, next) == 0) {
		memcpy(cur, next, sizeof(cur));
		prev = cur;
		if (!memcmp(cur, key, loader_pm_key_size(k)))
			return bpf_map_lookup_elem(loader_pm_fd_of(sb, k), key, v) == 0;
	}
	return 0;
}

/* Rules of the nearest covering prefix, if any. */
int loader_pm_lpm_ancestor(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
			   struct latch_rules *out)
{
	uint8_t key[32];

	if (plen == 0)
		return 0;
	loader_pm_key_make(k, gen, addr, plen - 1, key);
	return bpf_map_lookup_elem(loader_pm_fd_of(sb, k), key, out) == 0;
}

/* Rewrite one prefix: its own rules plus its nearest ancestor's, or delete it. */
int loader_pm_lpm_refresh(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
			  const struct latch_rules *own_in)
{
	struct latch_rules v = { 0 }, anc;
	uint8_t key[32];

	for (__u32 i = 0; i < own_in->n; i++)
		if (!(own_in->rule[i].flags & LATCH_RULE_INHERITED))
			v.rule[v.n++] = own_in->rule[i];
	loader_pm_key_make(k, gen, addr, plen, key);
	if (!v.n)
		return bpf_map_delete_elem(loader_pm_fd_of(sb, k), key) && errno != ENOENT ? -errno : 0;
	if (loader_pm_lpm_ancestor(sb, k, gen, addr, plen, &anc)) {
		for (__u32 i = 0; i < anc.n; i++) {
			struct latch_rule r = anc.rule[i];

			r.flags |= LATCH_RULE_INHERITED;
			if (latch_rules_merge(&v, &r))
				return -E2BIG;
		}
	}
	return bpf_map_update_elem(loader_pm_fd_of(sb, k), key, &v, BPF_ANY) ? -errno : 0;
}

int loader_pm_trie_keys(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
			struct pm_trie_key **out)
{
	uint8_t key[32], next[32];
	struct pm_trie_key *v = NULL, t;
	int n = 0, cap = 0;
	void *prev = NULL;
	__u32 g;

	while (bpf_map_get_next_key(loader_pm_fd_of(sb, k), prev, next) == 0) {
		memcpy(key, next, sizeof(key));
		prev = key;
		loader_pm_key_parse(k, key, &g, t.addr, &t.plen);
		if (g != gen || (addr && (t.plen <= plen || !loader_pm_covers(addr, plen, t.addr))))
			continue;
		if (n == cap) {
			struct pm_trie_key *nv = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));

			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		memcpy(t.key, key, sizeof(t.key));
		v[n++] = t;
	}
	*out = v;
	return n;
}

static int shortest_first(const void *a, const void *b)
{
	return ((const struct pm_trie_key *)a)->plen - ((const struct pm_trie_key *)b)->plen;
}

/* Refresh every prefix strictly under (addr, plen), shortest first. */
int loader_pm_lpm_refresh_below(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr,
				int plen)
{
	struct pm_trie_key *d;
	int n = loader_pm_trie_keys(sb, k, gen, addr, plen, &d), rc = 0;

	if (n < 0)
		return n;
	qsort(d, n, sizeof(*d), shortest_first);
	for (int i = 0; i < n && !rc; i++) {
		struct latch_rules v;

		if (bpf_map_lookup_elem(loader_pm_fd_of(sb, k), d[i].key, &v) == 0)
			rc = loader_pm_lpm_refresh(sb, k, gen, d[i].addr, d[i].plen, &v);
	}
	free(d);
	return rc;
}

int loader_pm_set_flags(struct latch_sandbox *sb, __u32 flags, int bump_version)
{
	struct latch_config cfg;
	int err = latch_sandbox_read_config(sb, &cfg);

	if (err)
		return err;
	if ((cfg.flags & flags) == flags && !bump_version)
		return 0;
	cfg.flags |= flags;
	if (bump_version)
		cfg.policy_version++;
	return latch_sandbox_write_config(sb, &cfg);
}

__u32 loader_pm_have_flag(const struct kind *k)
{
	if (k->map == LATCH_MAP_PREFIX4)
		return LATCH_CFG_HAVE_PREFIX4;
	if (k->map == LATCH_MAP_PREFIX6)
		return LATCH_CFG_HAVE_PREFIX6;
	if (k->map == LATCH_MAP_TIMED4)
		return LATCH_CFG_HAVE_TIMED4;
	if (k->map == LATCH_MAP_TIMED6)
		return LATCH_CFG_HAVE_TIMED6;
	return 0;
}
