// SPDX-License-Identifier: GPL-2.0-only
/*
 * policy_gen.c - a whole policy at once: written under the idle
 * generation, made live with one config update, the old one deleted after.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/policy_int.h"

/*
 * The collection of an idle generation, in steps: latchd answers its
 * clients and resolvers between them instead of stalling for the ~90 ms a
 * 65,536-entry generation takes to delete.  The hash maps are walked with
 * the batch cursor, a batch a step; the tries hold real prefixes only, so
 * each goes in one step.  A step that finds the live generation flipped
 * (a switch happened) or the idle one clean (someone collected it) stops:
 * the idle generation is no longer the one this collection began on.
 */
enum { GC_BATCH = 4096 };

struct latch_policy_gc {
	struct latch_sandbox *sb;
	__u32 live_gen; /* when the collection began */
	int kind; /* loader_pm_kinds[0..3] (exact, prefix; v4, v6); 4: done */
	__u64 cursor; /* the hash map's batch cursor, valid when resume */
	bool resume;
	uint8_t *keys, *del;
	struct latch_rules *vals;
};

/* A collection's state and buffers, for sb; NULL with errno. */
static struct latch_policy_gc *gc_new(struct latch_sandbox *sb, __u32 live_gen)
{
	struct latch_policy_gc *gc = calloc(1, sizeof(*gc));

	if (!gc)
		return NULL;
	gc->sb = sb;
	gc->live_gen = live_gen;
	/* exact6's key is the larger of the two hash keys */
	gc->keys = malloc(GC_BATCH * sizeof(struct latch_exact6_key));
	gc->del = malloc(GC_BATCH * sizeof(struct latch_exact6_key));
	gc->vals = malloc(GC_BATCH * sizeof(*gc->vals));
	if (!gc->keys || !gc->del || !gc->vals) {
		latch_policy_gc_free(gc);
		errno = ENOMEM;
		return NULL;
	}
	return gc;
}

struct latch_policy_gc *latch_policy_gc_begin(struct latch_sandbox *sb)
{
	struct latch_config cfg;

	if (latch_sandbox_read_config(sb, &cfg)) {
		errno = EIO;
		return NULL;
	}
	if (!(cfg.flags & LATCH_CFG_IDLE_DIRTY)) {
		errno = 0; /* nothing to collect */
		return NULL;
	}
	return gc_new(sb, cfg.policy_gen);
}

void latch_policy_gc_free(struct latch_policy_gc *gc)
{
	if (!gc)
		return;
	free(gc->keys);
	free(gc->del);
	free(gc->vals);
	free(gc);
}

/* One batch of a hash map: its keys of generation gen deleted.  1 more to come, 0 at the map's end, -errno. */
static int drop_hash_batch(struct latch_policy_gc *gc, const struct kind *k, __u32 gen, __u32 batch)
{
	size_t ks = loader_pm_key_size(k);
	__u32 count = batch, n_del = 0;
	__u64 out = 0;
	int more = 1;
	LIBBPF_OPTS(bpf_map_batch_opts, bo);

	if (bpf_map_lookup_batch(loader_pm_fd_of(gc->sb, k), gc->resume ? &gc->cursor : NULL, &out, gc->keys, gc->vals,
				 &count, &bo)) {
		if (errno != ENOENT)
			return -errno;
		more = 0; /* the last, possibly partial, batch */
	}
	for (__u32 i = 0; i < count; i++) {
		__u32 g;

		memcpy(&g, gc->keys + i * ks, sizeof(g)); /* gen is the first field */
		if (g == gen)
			memcpy(gc->del + n_del++ * ks, gc->keys + i * ks, ks);
	}
	if (n_del && bpf_map_delete_batch(loader_pm_fd_of(gc->sb, k), gc->del, &n_del, &bo))
		return -errno;
	gc->cursor = out;
	gc->resume = more;
	return more;
}

/* Every key of generation gen of a trie (few: real prefixes only).  0 or -errno. */
static int drop_trie(struct latch_sandbox *sb, const struct kind *k, __u32 gen)
{
	struct pm_trie_key *del;
	int n = loader_pm_trie_keys(sb, k, gen, NULL, 0, &del);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		bpf_map_delete_elem(loader_pm_fd_of(sb, k), del[i].key);
	free(del);
	return 0;
}

/* Every key of generation gen of one map, now: a failed write's rollback.  0 or -errno. */
static int drop_generation(struct latch_sandbox *sb, const struct kind *k, __u32 gen)
{
	struct latch_policy_gc *gc;
	int rc;

	if (k->lpm)
		return drop_trie(sb, k, gen);
	gc = gc_new(sb, gen ^ 1);
	if (!gc)
		return -errno;
	while ((rc = drop_hash_batch(gc, k, gen, GC_BATCH)) > 0)
		;
	latch_policy_gc_free(gc);
	return rc;
}

int latch_policy_gc_step(struct latch_policy_gc *gc, unsigned budget)
{
	struct latch_config cfg;
	unsigned done = 0;
	int rc;

	if (latch_sandbox_read_config(gc->sb, &cfg))
		return -EIO;
	if (cfg.policy_gen != gc->live_gen || !(cfg.flags & LATCH_CFG_IDLE_DIRTY))
		return 0;
	while (gc->kind < 4 && done < budget) {
		const struct kind *k = &loader_pm_kinds[gc->kind];

		if (k->lpm) {
			rc = drop_trie(gc->sb, k, gc->live_gen ^ 1);
			done += GC_BATCH;
		} else {
			rc = drop_hash_batch(gc, k, gc->live_gen ^ 1,
					     GC_BATCH < budget - done ? GC_BATCH : budget - done);
			done += GC_BATCH;
			if (rc > 0)
				continue;
		}
		if (rc < 0)
			return rc;
		gc->kind++;
		gc->resume = false;
	}
	if (gc->kind < 4)
		return 1;
	/* re-read: only this one bit changes, everything else stays as the kernel has it */
	if (latch_sandbox_read_config(gc->sb, &cfg))
		return -EIO;
	cfg.flags &= ~LATCH_CFG_IDLE_DIRTY;
	return latch_sandbox_write_config(gc->sb, &cfg);
}

int latch_policy_gc(struct latch_sandbox *sb)
{
	struct latch_policy_gc *gc = latch_policy_gc_begin(sb);
	int rc;

	if (!gc)
		return errno ? -errno : 0;
	while ((rc = latch_policy_gc_step(gc, UINT32_MAX)) > 0)
		;
	latch_policy_gc_free(gc);
	return rc;
}

/*
 * One item of a whole-policy write: either a plain entry (permanent, PROFILE)
 * or a spec.  Keeps latch_policy_replace() from copying 65,536 entries.
 */
struct item_src {
	const struct latch_entry *entries;
	const struct latch_policy_spec *specs;
};

static const struct latch_entry *item_entry(const struct item_src *src, int i)
{
	return src->specs ? &src->specs[i].entry : &src->entries[i];
}

static void item_rule(const struct item_src *src, const struct latch_entry *e, int p, struct latch_rule *r)
{
	const struct latch_policy_spec *sp = src->specs ? (const struct latch_policy_spec *)e : NULL;

	/* spec.entry is the first member: e points at its spec */
	latch_entry_rule(e, p, sp ? sp->expires_ns : 0, sp ? sp->origin : LATCH_ORIGIN_PROFILE, r);
	r->flags = 0;
}

/*
 * The exact entries of one family, written under gen: merged per address,
 * then sent in batches of EXACT_CHUNK.  Addresses are grouped through an
 * open-addressing table in one pass (a sort of 65,536 entries was a fifth of
 * a whole load), and values are built a chunk at a time in one reused
 * buffer: a value is 264 bytes, and first touches of 17 MB of fresh memory
 * cost more than the map updates on a paravirtualized machine.
 */
#define EXACT_CHUNK 1024
#define GROUP_NONE UINT32_MAX

static int write_exact(struct latch_sandbox *sb, const struct kind *k, const struct item_src *src, int n, __u32 gen,
		       char *err, size_t errlen)
{
	size_t ks = loader_pm_key_size(k);
	uint32_t mask = 1, *slots = NULL, *first = NULL, *next = NULL;
	uint8_t *keys = NULL;
	struct latch_rules *vals = NULL;
	__u32 groups = 0;
	int rc = 0;

	while (mask < 2 * (uint32_t)n)
		mask <<= 1;
	slots = malloc(mask * sizeof(*slots));
	first = malloc((n ? n : 1) * sizeof(*first));
	next = malloc((n ? n : 1) * sizeof(*next));
	keys = malloc((n ? n : 1) * ks);
	vals = malloc(EXACT_CHUNK * sizeof(*vals));
	if (!slots || !first || !next || !keys || !vals) {
		rc = latch_errf(err, errlen, -EINVAL, "out of memory");
		goto out;
	}
	memset(slots, 0xff, mask * sizeof(*slots));
	mask--;
	/* Group: one key per address, and the list of its entries (first[], next[]). */
	for (int i = 0; i < n; i++) {
		const struct latch_entry *e = item_entry(src, i);
		uint32_t h;

		if (e->addr.family != k->family || e->prefixlen != loader_pm_alen(k) * 8)
			continue;
		/* the address sits after the 4-byte generation in both exact keys */
		h = latch_fnv1a(LATCH_FNV1A_INIT, e->addr.bytes, loader_pm_alen(k)) & mask;
		while (slots[h] != GROUP_NONE && memcmp(keys + slots[h] * ks + 4, e->addr.bytes, loader_pm_alen(k)))
			h = (h + 1) & mask;
		if (slots[h] == GROUP_NONE) {
			slots[h] = groups;
			first[groups] = GROUP_NONE;
			loader_pm_key_make(k, gen, e->addr.bytes, e->prefixlen, keys + groups * ks);
			groups++;
		}
		next[i] = first[slots[h]];
		first[slots[h]] = i;
	}
	/* Merge and write, a chunk of addresses at a time. */
	for (__u32 base = 0; base < groups && !rc; base += EXACT_CHUNK) {
		__u32 count = groups - base < EXACT_CHUNK ? groups - base : EXACT_CHUNK;
		LIBBPF_OPTS(bpf_map_batch_opts, bo);

		for (__u32 g = 0; g < count && !rc; g++) {
			memset(&vals[g], 0, sizeof(vals[g]));
			for (uint32_t i = first[base + g]; i != GROUP_NONE && !rc; i = next[i]) {
				const struct latch_entry *e = item_entry(src, i);

				for (int p = 0; p < (e->n_ports ? e->n_ports : 1); p++) {
					struct latch_rule r;
					char text[LATCH_ENTRY_TEXT_MAX];

					item_rule(src, e, p, &r);
					if (latch_rules_merge_longer(&vals[g], &r)) {
						latch_entry_format(e, text, sizeof(text));
						rc = latch_errf(err, errlen, -EINVAL,
								"%s: more than %d port rules on one address", text,
								LATCH_RULES_MAX);
						break;
					}
				}
			}
		}
		if (!rc && bpf_map_update_batch(loader_pm_fd_of(sb, k), keys + base * ks, vals, &count, &bo))
			rc = errno == E2BIG ?
				     latch_errf(err, errlen, -E2BIG,
						"%u addresses do not fit in %s beside the live policy (%d "
						"for both generations); nothing was changed",
						groups, latch_map_names[k->map], LATCH_POLICY_MAX) :
				     latch_errf(err, errlen, -EINVAL, "batch update of %s failed after %u entries: %s",
						latch_map_names[k->map], base + count, strerror(errno));
	}
out:
	free(slots);
	free(first);
	free(next);
	free(keys);
	free(vals);
	return rc;
}

static int policy_write(struct latch_sandbox *sb, const struct item_src *src, int n, bool open, char *err,
			size_t errlen)
{
	struct latch_config cfg;
	__u32 next_gen, flags = 0;
	int rc = 0;

	if (latch_sandbox_read_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot read the config of '%s'", latch_sandbox_name(sb));
	next_gen = cfg.policy_gen ^ 1;
	/* Leftovers under the idle generation (a switch not yet collected, or cut short) */
	if (cfg.flags & LATCH_CFG_IDLE_DIRTY) {
		rc = latch_policy_gc(sb);
		if (rc)
			return latch_errf(err, errlen, -EINVAL, "cannot clear the idle policy generation: %s",
					  strerror(-rc));
	}
	cfg.flags |= LATCH_CFG_IDLE_DIRTY;
	if (latch_sandbox_write_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot update the config of '%s'", latch_sandbox_name(sb));

	/* Exact entries: merged per address, written in batches per family. */
	for (int fam = 0; fam < 2 && !rc; fam++)
		rc = write_exact(sb, &loader_pm_kinds[fam], src, n, next_gen, err, errlen);
	/* Prefixes: one by one, so that covering rules are copied down. */
	for (int i = 0; i < n && !rc; i++) {
		const struct latch_entry *e = item_entry(src, i);
		const struct kind *k;
		struct latch_rules v = { 0 };
		uint8_t key[32];

		if (e->prefixlen == (e->addr.family == AF_INET ? 32 : 128))
			continue;
		k = loader_pm_kind_for(e->addr.family, 0, 0);
		flags |= loader_pm_have_flag(k);
		loader_pm_key_make(k, next_gen, e->addr.bytes, e->prefixlen, key);
		if (!loader_pm_lookup_exact(sb, k, key, &v))
			memset(&v, 0, sizeof(v));
		for (int p = 0; p < (e->n_ports ? e->n_ports : 1) && !rc; p++) {
			struct latch_rule r;

			item_rule(src, e, p, &r);
			if (latch_rules_merge_longer(&v, &r))
				rc = latch_errf(err, errlen, -EINVAL, "too many port rules on one prefix");
		}
		if (!rc && loader_pm_set_flags(sb, flags, 0))
			rc = latch_errf(err, errlen, -EINVAL, "cannot update the config");
		if (!rc && (loader_pm_lpm_refresh(sb, k, next_gen, e->addr.bytes, e->prefixlen, &v) ||
			    loader_pm_lpm_refresh_below(sb, k, next_gen, e->addr.bytes, e->prefixlen)))
			rc = latch_errf(err, errlen, -EINVAL, "prefix update failed: %s", strerror(errno));
	}
	if (rc) {
		for (int i = 0; i < 4; i++)
			drop_generation(sb, &loader_pm_kinds[i], next_gen);
		return rc;
	}
	/* The switch: one update of the config map. */
	latch_sandbox_read_config(sb, &cfg);
	cfg.policy_gen = next_gen;
	cfg.policy_version++;
	cfg.flags |= flags;
	if (open)
		cfg.flags |= LATCH_CFG_OPEN;
	else
		cfg.flags &= ~LATCH_CFG_OPEN;
	if (latch_sandbox_write_config(sb, &cfg)) {
		rc = latch_errf(err, errlen, -EINVAL, "cannot switch the policy generation: %s", strerror(errno));
		for (int i = 0; i < 4; i++)
			drop_generation(sb, &loader_pm_kinds[i], next_gen);
		return rc;
	}
	/* The old generation is now the idle one: latch_policy_gc() removes it. */
	return 0;
}

int latch_policy_replace(struct latch_sandbox *sb, const struct latch_entry *entries, int n, char *err, size_t errlen)
{
	const struct item_src src = { .entries = entries };

	return policy_write(sb, &src, n, false, err, errlen);
}

int latch_policy_switch(struct latch_sandbox *sb, const struct latch_policy_spec *specs, int n, bool open, char *err,
			size_t errlen)
{
	const struct item_src src = { .specs = specs };

	return policy_write(sb, &src, n, open, err, errlen);
}
