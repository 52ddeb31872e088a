// SPDX-License-Identifier: GPL-2.0-only
/*
 * policy.c - entries into the exact, prefix and timed maps, and back out.
 *
 * The programs look up the exact hash, then the longest prefix, then the
 * longest timed entry, and an entry whose rules don't match falls through
 * to the next map.  Inside one trie only the longest match is seen, so every
 * prefix carries copies of the rules of the prefixes that cover it.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/policy_int.h"

int latch_policy_allow(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin,
		       char *err, size_t errlen)
{
	int full = e->prefixlen == (e->addr.family == AF_INET ? 32 : 128);
	const struct kind *k = loader_pm_kind_for(e->addr.family, full, expires_ns != 0);
	struct latch_rules v = { 0 };
	struct latch_config cfg;
	uint8_t key[32];
	char text[LATCH_ENTRY_TEXT_MAX];
	bool shortened = false;
	int rc;

	if (latch_sandbox_read_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot read the config of '%s'", latch_sandbox_name(sb));
	latch_entry_format(e, text, sizeof(text));
	loader_pm_key_make(k, cfg.policy_gen, e->addr.bytes, e->prefixlen, key);
	if (!loader_pm_lookup_exact(sb, k, key, &v))
		memset(&v, 0, sizeof(v));
	if (expires_ns)
		latch_rules_prune(&v, latch_now_boot_ns());
	for (int i = 0; i < (e->n_ports ? e->n_ports : 1); i++) {
		struct latch_rule r;

		latch_entry_rule(e, i, expires_ns, origin, &r);
		shortened |= loader_pm_rules_shortened(&v, &r);
		if (latch_rules_merge(&v, &r))
			return latch_errf(err, errlen, -EINVAL,
					  "%s: more than %d port rules on one address; use a range", text,
					  LATCH_RULES_MAX);
	}
	/* Flags first: a trie entry must never sit where the program skips it. */
	rc = loader_pm_set_flags(sb, loader_pm_have_flag(k), 0);
	if (!rc && k->lpm) {
		rc = loader_pm_lpm_refresh(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen, &v);
		if (!rc)
			rc = loader_pm_lpm_refresh_below(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen);
	} else if (!rc) {
		rc = bpf_map_update_elem(loader_pm_fd_of(sb, k), key, &v, BPF_ANY) ? -errno : 0;
	}
	/*
	 * A deadline moved earlier: flows carry the deadline they were allowed
	 * under (flow4/6 and flow_hot), so send them back to the policy, after
	 * the map holds the new deadline.
	 */
	if (!rc && shortened)
		rc = loader_pm_set_flags(sb, 0, 1);
	if (rc == -E2BIG)
		return latch_errf(err, errlen, -EINVAL, "%s: with the prefixes that cover it, more than %d port rules",
				  text, LATCH_RULES_MAX);
	if (rc)
		return latch_errf(err, errlen, -EINVAL, "%s: map update failed: %s", text, strerror(-rc));
	return 0;
}

int latch_policy_revoke(struct latch_sandbox *sb, const struct latch_entry *e, char *err, size_t errlen)
{
	int full = e->prefixlen == (e->addr.family == AF_INET ? 32 : 128);
	struct latch_config cfg;
	char text[LATCH_ENTRY_TEXT_MAX];
	int removed = 0, rc = 0;

	if (latch_sandbox_read_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot read the config of '%s'", latch_sandbox_name(sb));
	latch_entry_format(e, text, sizeof(text));
	for (int timed = 0; timed < 2 && !rc; timed++) {
		const struct kind *k = loader_pm_kind_for(e->addr.family, full, timed);
		struct latch_rules v;
		uint8_t key[32];
		int n;

		loader_pm_key_make(k, cfg.policy_gen, e->addr.bytes, e->prefixlen, key);
		if (!loader_pm_lookup_exact(sb, k, key, &v))
			continue;
		n = latch_rules_remove(&v, e);
		if (!n)
			continue;
		removed += n;
		if (k->lpm) {
			rc = loader_pm_lpm_refresh(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen, &v);
			if (!rc)
				rc = loader_pm_lpm_refresh_below(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen);
		} else if (v.n) {
			rc = bpf_map_update_elem(loader_pm_fd_of(sb, k), key, &v, BPF_ANY) ? -errno : 0;
		} else {
			rc = bpf_map_delete_elem(loader_pm_fd_of(sb, k), key) ? -errno : 0;
		}
	}
	if (rc)
		return latch_errf(err, errlen, -EINVAL, "%s: map update failed: %s", text, strerror(-rc));
	if (!removed) {
		latch_errf(err, errlen, -EINVAL, "%s: no such entry (see `latch egress %s show`)", text,
			   latch_sandbox_name(sb));
		return -ENOENT;
	}
	/* Established flows to what was removed must be checked again. */
	rc = loader_pm_set_flags(sb, 0, 1);
	return rc ? latch_errf(err, errlen, -EINVAL, "cannot bump the policy version: %s", strerror(-rc)) : 0;
}

/*
 * The live exact key of a learned entry, and its rules before (*before) and
 * after (*v) the merge.  0, or -errno with a line in err.
 */
static int learn_merge(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin,
		       uint8_t *key, struct latch_rules *before, struct latch_rules *v, char *err, size_t errlen)
{
	const struct kind *k = loader_pm_kind_for(e->addr.family, 1, 0);
	struct latch_config cfg;

	if (e->prefixlen != loader_pm_alen(k) * 8 || !expires_ns)
		return latch_errf(err, errlen, -EINVAL, "a learned entry is one address with a deadline");
	if (latch_sandbox_read_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot read the config of '%s'", latch_sandbox_name(sb));
	loader_pm_key_make(k, cfg.policy_gen, e->addr.bytes, e->prefixlen, key);
	if (!loader_pm_lookup_exact(sb, k, key, v))
		memset(v, 0, sizeof(*v));
	memcpy(before, v, sizeof(*v));
	for (int i = 0; i < (e->n_ports ? e->n_ports : 1); i++) {
		struct latch_rule r;

		latch_entry_rule(e, i, expires_ns, origin, &r);
		if (latch_rules_merge_longer(v, &r)) {
			/* full: make room by dropping what has expired, then try once more */
			latch_rules_prune(v, latch_now_boot_ns());
			if (latch_rules_merge_longer(v, &r))
				return latch_errf(err, errlen, -E2BIG, "more than %d port rules on one address",
						  LATCH_RULES_MAX);
		}
	}
	return 0;
}

/* a cached answer repeats what the map holds: no write */
static bool learn_changes(const struct latch_rules *before, const struct latch_rules *v)
{
	return !before->n || memcmp(before, v, sizeof(*v));
}

int latch_policy_learn_needed(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin)
{
	struct latch_rules before, v;
	char err[LATCH_ERR_MAX];
	uint8_t key[32];
	int rc = learn_merge(sb, e, expires_ns, origin, key, &before, &v, err, sizeof(err));

	return rc == -E2BIG ? 1 : rc ? rc : learn_changes(&before, &v); /* E2BIG: let learn say it */
}

int latch_policy_learn(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin,
		       char *err, size_t errlen)
{
	const struct kind *k = loader_pm_kind_for(e->addr.family, 1, 0);
	struct latch_rules before, v;
	uint8_t key[32];
	int rc = learn_merge(sb, e, expires_ns, origin, key, &before, &v, err, errlen);

	if (rc || !learn_changes(&before, &v))
		return rc;
	if (!bpf_map_update_elem(loader_pm_fd_of(sb, k), key, &v, BPF_ANY))
		return 0;
	/*
	 * Full: answers past their deadline stay in the map until pruned, so a
	 * host that resolved more addresses than it holds (latchd's own room:
	 * every upstream address it ever reached) would learn nothing more.
	 * Drop them, merge again (this key's own may have gone) and try once more.
	 */
	rc = -errno;
	if (rc == -E2BIG && latch_policy_prune_resolved(sb, latch_now_boot_ns()) > 0) {
		rc = learn_merge(sb, e, expires_ns, origin, key, &before, &v, err, errlen);
		if (rc || !bpf_map_update_elem(loader_pm_fd_of(sb, k), key, &v, BPF_ANY))
			return rc;
		rc = -errno;
	}
	return latch_errf(err, errlen, rc, "learned entry: map update failed: %s", strerror(-rc));
}

int latch_policy_prune_resolved(struct latch_sandbox *sb, uint64_t before_ns)
{
	struct latch_config cfg;
	int pruned = 0;

	if (latch_sandbox_read_config(sb, &cfg))
		return -EIO;
	for (int ki = 0; ki < 2; ki++) {
		const struct kind *k = &loader_pm_kinds[ki];
		uint8_t key[32], next[32];
		void *prev = NULL;

		while (bpf_map_get_next_key(loader_pm_fd_of(sb, k), prev, next) == 0) {
			struct latch_rules v;
			int removed = 0;
			__u32 g;

			memcpy(key, next, sizeof(key));
			prev = key;
			memcpy(&g, key, sizeof(g));
			if (g != cfg.policy_gen || bpf_map_lookup_elem(loader_pm_fd_of(sb, k), key, &v))
				continue;
			for (__u32 i = 0; i < v.n;) {
				const struct latch_rule *x = &v.rule[i];

				if (latch_origin_resolved(x->origin) && x->expires_ns && x->expires_ns <= before_ns) {
					loader_pm_rules_delete_at(&v, i);
					removed++;
				} else {
					i++;
				}
			}
			if (!removed)
				continue;
			pruned += removed;
			/* nothing left: the key goes (the program treats an empty set as no entry) */
			if (v.n ? bpf_map_update_elem(loader_pm_fd_of(sb, k), key, &v, BPF_EXIST) :
				  bpf_map_delete_elem(loader_pm_fd_of(sb, k), key))
				return -errno;
		}
	}
	return pruned;
}

/* One map element's own live rules, to fn. */
static int list_one(const struct kind *k, const uint8_t *key, const struct latch_rules *v, __u32 live_gen, uint64_t now,
		    int (*fn)(const struct latch_policy_item *it, void *arg), void *arg)
{
	struct latch_policy_item it = { 0 };
	int count = 0;
	__u32 g;

	it.entry.addr.family = k->family;
	loader_pm_key_parse(k, key, &g, it.entry.addr.bytes, &it.entry.prefixlen);
	if (k->gen && g != live_gen)
		return 0;
	it.timed = !k->gen;
	for (__u32 i = 0; i < v->n && i < LATCH_RULES_MAX; i++) {
		const struct latch_rule *r = &v->rule[i];

		if ((r->flags & LATCH_RULE_INHERITED) || (r->expires_ns && r->expires_ns <= now))
			continue;
		it.rule = *r;
		it.entry.proto = r->proto;
		it.entry.n_ports = !(r->port_lo == 0 && r->port_hi == 0xffff);
		it.entry.ports[0].lo = r->port_lo;
		it.entry.ports[0].hi = r->port_hi;
		count++;
		if (fn)
			fn(&it, arg);
	}
	return count;
}

/*
 * A hash map in batches of 4,096: a walk with get_next_key and a lookup per
 * key costs two system calls an element (a 65,536-entry policy: 230 ms
 * against 40 ms).  Returns the count, or -1 when the kernel has no batch
 * lookup for the map (the caller walks instead).
 */
static int list_hash_batched(struct latch_sandbox *sb, const struct kind *k, __u32 live_gen, uint64_t now,
			     int (*fn)(const struct latch_policy_item *it, void *arg), void *arg)
{
	size_t ks = k->family == AF_INET ? sizeof(struct latch_exact4_key) : sizeof(struct latch_exact6_key);
	enum { CHUNK = 4096 };
	uint8_t *keys = malloc(CHUNK * ks);
	struct latch_rules *vals = malloc(CHUNK * sizeof(*vals));
	__u64 in = 0, out = 0;
	void *inp = NULL;
	int count = 0, done = 0;

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -1;
	}
	while (!done) {
		__u32 n = CHUNK;
		LIBBPF_OPTS(bpf_map_batch_opts, bo);

		if (bpf_map_lookup_batch(loader_pm_fd_of(sb, k), inp, &out, keys, vals, &n, &bo)) {
			if (errno != ENOENT) {
				count = inp ? count : -1; /* no batch support at all: walk */
				break;
			}
			done = 1; /* the last, possibly partial, batch */
		}
		for (__u32 i = 0; i < n; i++) {
			uint8_t key[32] = { 0 };

			memcpy(key, keys + i * ks, ks);
			count += list_one(k, key, &vals[i], live_gen, now, fn, arg);
		}
		in = out;
		inp = &in;
	}
	free(keys);
	free(vals);
	return count;
}

int latch_policy_list(struct latch_sandbox *sb, int (*fn)(const struct latch_policy_item *it, void *arg), void *arg)
{
	uint64_t now = latch_now_boot_ns();
	struct latch_config cfg;
	int count = 0;

	if (latch_sandbox_read_config(sb, &cfg))
		return -EIO;
	for (size_t ki = 0; ki < sizeof(loader_pm_kinds) / sizeof(loader_pm_kinds[0]); ki++) {
		const struct kind *k = &loader_pm_kinds[ki];
		uint8_t key[32], next[32];
		void *prev = NULL;

		if (!k->lpm) {
			int n = list_hash_batched(sb, k, cfg.policy_gen, now, fn, arg);

			if (n >= 0) {
				count += n;
				continue;
			}
		}
		/* tries have no batch lookup; they hold real prefixes only, so few keys */
		while (bpf_map_get_next_key(loader_pm_fd_of(sb, k), prev, next) == 0) {
			struct latch_rules v;

			memcpy(key, next, sizeof(key));
			prev = key;
			if (bpf_map_lookup_elem(loader_pm_fd_of(sb, k), key, &v))
				continue;
			count += list_one(k, key, &v, cfg.policy_gen, now, fn, arg);
		}
	}
	return count;
}
