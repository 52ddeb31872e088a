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

#include "loader/policy.h"

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
static bool rules_shortened(struct latch_rules *r, const struct latch_rule *rule)
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

static void rules_delete_at(struct latch_rules *r, __u32 i)
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
			rules_delete_at(r, i);
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
			rules_delete_at(r, i);
			removed++;
		} else {
			i++;
		}
	}
	return removed;
}

/* One kind of policy map and how its keys are laid out. */
struct kind {
	enum latch_map_id map;
	int family;
	int lpm;
	int gen;
};

static const struct kind kinds[] = {
	{ LATCH_MAP_EXACT4, AF_INET, 0, 1 },  { LATCH_MAP_EXACT6, AF_INET6, 0, 1 },
	{ LATCH_MAP_PREFIX4, AF_INET, 1, 1 }, { LATCH_MAP_PREFIX6, AF_INET6, 1, 1 },
	{ LATCH_MAP_TIMED4, AF_INET, 1, 0 },  { LATCH_MAP_TIMED6, AF_INET6, 1, 0 },
};

static int alen(const struct kind *k)
{
	return k->family == AF_INET ? 4 : 16;
}

static const struct kind *kind_for(int family, int full, int timed)
{
	int base = timed ? 4 : full ? 0 : 2;

	return &kinds[base + (family == AF_INET6)];
}

/* Keys are {[prefixlen][gen] addr}; see latch_abi.h. */
static void key_make(const struct kind *k, __u32 gen, const uint8_t *addr, int plen, uint8_t *key)
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
	memcpy(key + off, addr, alen(k));
}

static void key_parse(const struct kind *k, const uint8_t *key, __u32 *gen, uint8_t *addr, int *plen)
{
	size_t off = 0;
	__u32 pl = alen(k) * 8;

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
	memcpy(addr, key + off, alen(k));
	*plen = pl;
}

static int covers(const uint8_t *net, int plen, const uint8_t *addr)
{
	for (int i = 0; i < plen; i++)
		if ((net[i / 8] ^ addr[i / 8]) & (0x80 >> (i % 8)))
			return 0;
	return 1;
}

static int fd_of(struct latch_sandbox *sb, const struct kind *k)
{
	return latch_sandbox_map_fd(sb, k->map);
}

static size_t key_size(const struct kind *k)
{
	return (k->lpm ? 4 : 0) + (k->gen ? 4 : 0) + alen(k);
}

/*
 * The value stored under exactly this key.  A trie lookup answers with the
 * longest covering prefix instead, which would hand a parent's rules to a
 * child as its own, so tries are walked for the key itself.
 */
static int lookup_exact(struct latch_sandbox *sb, const struct kind *k, const uint8_t *key, struct latch_rules *v)
{
	uint8_t cur[32], next[32];
	void *prev = NULL;

	if (!k->lpm)
		return bpf_map_lookup_elem(fd_of(sb, k), key, v) == 0;
	while (bpf_map_get_next_key(fd_of(sb, k), prev, next) == 0) {
		memcpy(cur, next, sizeof(cur));
		prev = cur;
		if (!memcmp(cur, key, key_size(k)))
			return bpf_map_lookup_elem(fd_of(sb, k), key, v) == 0;
	}
	return 0;
}

/* Rules of the nearest covering prefix, if any. */
static int lpm_ancestor(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
			struct latch_rules *out)
{
	uint8_t key[32];

	if (plen == 0)
		return 0;
	key_make(k, gen, addr, plen - 1, key);
	return bpf_map_lookup_elem(fd_of(sb, k), key, out) == 0;
}

/* Rewrite one prefix: its own rules plus its nearest ancestor's, or delete it. */
static int lpm_refresh(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen,
		       const struct latch_rules *own_in)
{
	struct latch_rules v = { 0 }, anc;
	uint8_t key[32];

	for (__u32 i = 0; i < own_in->n; i++)
		if (!(own_in->rule[i].flags & LATCH_RULE_INHERITED))
			v.rule[v.n++] = own_in->rule[i];
	key_make(k, gen, addr, plen, key);
	if (!v.n)
		return bpf_map_delete_elem(fd_of(sb, k), key) && errno != ENOENT ? -errno : 0;
	if (lpm_ancestor(sb, k, gen, addr, plen, &anc)) {
		for (__u32 i = 0; i < anc.n; i++) {
			struct latch_rule r = anc.rule[i];

			r.flags |= LATCH_RULE_INHERITED;
			if (latch_rules_merge(&v, &r))
				return -E2BIG;
		}
	}
	return bpf_map_update_elem(fd_of(sb, k), key, &v, BPF_ANY) ? -errno : 0;
}

struct desc {
	uint8_t addr[16];
	int plen;
};

static int cmp_desc(const void *a, const void *b)
{
	return ((const struct desc *)a)->plen - ((const struct desc *)b)->plen;
}

/* Refresh every prefix strictly under (addr, plen), shortest first. */
static int lpm_refresh_below(struct latch_sandbox *sb, const struct kind *k, __u32 gen, const uint8_t *addr, int plen)
{
	uint8_t key[32], next[32], a[16];
	struct desc *d = NULL;
	int n = 0, cap = 0, rc = 0, pl;
	void *prev = NULL;
	__u32 g;

	while (bpf_map_get_next_key(fd_of(sb, k), prev, next) == 0) {
		memcpy(key, next, sizeof(key));
		prev = key;
		key_parse(k, key, &g, a, &pl);
		if (g != gen || pl <= plen || !covers(addr, plen, a))
			continue;
		if (n == cap) {
			struct desc *nd = realloc(d, (cap = cap ? cap * 2 : 16) * sizeof(*d));

			if (!nd) {
				free(d);
				return -ENOMEM;
			}
			d = nd;
		}
		memcpy(d[n].addr, a, 16);
		d[n++].plen = pl;
	}
	qsort(d, n, sizeof(*d), cmp_desc);
	for (int i = 0; i < n && !rc; i++) {
		struct latch_rules v;

		key_make(k, gen, d[i].addr, d[i].plen, key);
		if (bpf_map_lookup_elem(fd_of(sb, k), key, &v) == 0)
			rc = lpm_refresh(sb, k, gen, d[i].addr, d[i].plen, &v);
	}
	free(d);
	return rc;
}

static int set_flags(struct latch_sandbox *sb, __u32 flags, int bump_version)
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

static __u32 have_flag(const struct kind *k)
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

int latch_policy_allow(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin,
		       char *err, size_t errlen)
{
	int full = e->prefixlen == (e->addr.family == AF_INET ? 32 : 128);
	const struct kind *k = kind_for(e->addr.family, full, expires_ns != 0);
	struct latch_rules v = { 0 };
	struct latch_config cfg;
	uint8_t key[32];
	char text[LATCH_ENTRY_TEXT_MAX];
	bool shortened = false;
	int rc;

	if (latch_sandbox_read_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot read the config of '%s'", latch_sandbox_name(sb));
	latch_entry_format(e, text, sizeof(text));
	key_make(k, cfg.policy_gen, e->addr.bytes, e->prefixlen, key);
	if (!lookup_exact(sb, k, key, &v))
		memset(&v, 0, sizeof(v));
	if (expires_ns)
		latch_rules_prune(&v, latch_now_boot_ns());
	for (int i = 0; i < (e->n_ports ? e->n_ports : 1); i++) {
		struct latch_rule r;

		latch_entry_rule(e, i, expires_ns, origin, &r);
		shortened |= rules_shortened(&v, &r);
		if (latch_rules_merge(&v, &r))
			return latch_errf(err, errlen, -EINVAL, "%s: more than %d port rules on one address; use a range", text,
				    LATCH_RULES_MAX);
	}
	/* Flags first: a trie entry must never sit where the program skips it. */
	rc = set_flags(sb, have_flag(k), 0);
	if (!rc && k->lpm) {
		rc = lpm_refresh(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen, &v);
		if (!rc)
			rc = lpm_refresh_below(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen);
	} else if (!rc) {
		rc = bpf_map_update_elem(fd_of(sb, k), key, &v, BPF_ANY) ? -errno : 0;
	}
	/*
	 * A deadline moved earlier: flows carry the deadline they were allowed
	 * under (flow4/6 and flow_hot), so send them back to the policy, after
	 * the map holds the new deadline.
	 */
	if (!rc && shortened)
		rc = set_flags(sb, 0, 1);
	if (rc == -E2BIG)
		return latch_errf(err, errlen, -EINVAL, "%s: with the prefixes that cover it, more than %d port rules", text,
			    LATCH_RULES_MAX);
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
		const struct kind *k = kind_for(e->addr.family, full, timed);
		struct latch_rules v;
		uint8_t key[32];
		int n;

		key_make(k, cfg.policy_gen, e->addr.bytes, e->prefixlen, key);
		if (!lookup_exact(sb, k, key, &v))
			continue;
		n = latch_rules_remove(&v, e);
		if (!n)
			continue;
		removed += n;
		if (k->lpm) {
			rc = lpm_refresh(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen, &v);
			if (!rc)
				rc = lpm_refresh_below(sb, k, cfg.policy_gen, e->addr.bytes, e->prefixlen);
		} else if (v.n) {
			rc = bpf_map_update_elem(fd_of(sb, k), key, &v, BPF_ANY) ? -errno : 0;
		} else {
			rc = bpf_map_delete_elem(fd_of(sb, k), key) ? -errno : 0;
		}
	}
	if (rc)
		return latch_errf(err, errlen, -EINVAL, "%s: map update failed: %s", text, strerror(-rc));
	if (!removed) {
		latch_errf(err, errlen, -EINVAL, "%s: no such entry (see `latch egress %s show`)", text, latch_sandbox_name(sb));
		return -ENOENT;
	}
	/* Established flows to what was removed must be checked again. */
	rc = set_flags(sb, 0, 1);
	return rc ? latch_errf(err, errlen, -EINVAL, "cannot bump the policy version: %s", strerror(-rc)) : 0;
}

/* Delete every key of one generation from an exact (hash) map, in batches. */
static int drop_generation_hash(struct latch_sandbox *sb, const struct kind *k, __u32 gen)
{
	size_t ks = k->family == AF_INET ? sizeof(struct latch_exact4_key) : sizeof(struct latch_exact6_key);
	enum { CHUNK = 4096 };
	uint8_t *keys = malloc(CHUNK * ks), *del = malloc(CHUNK * ks);
	struct latch_rules *vals = malloc(CHUNK * sizeof(*vals));
	__u64 in = 0, out = 0;
	void *inp = NULL;
	int rc = 0, done = 0;

	if (!keys || !del || !vals) {
		rc = -ENOMEM;
		goto out;
	}
	while (!done) {
		__u32 count = CHUNK, n_del = 0;
		LIBBPF_OPTS(bpf_map_batch_opts, bo);

		if (bpf_map_lookup_batch(fd_of(sb, k), inp, &out, keys, vals, &count, &bo)) {
			if (errno != ENOENT) {
				rc = -errno;
				break;
			}
			done = 1; /* the last, possibly partial, batch */
		}
		for (__u32 i = 0; i < count; i++) {
			__u32 g;

			memcpy(&g, keys + i * ks, sizeof(g)); /* gen is the first field */
			if (g == gen)
				memcpy(del + n_del++ * ks, keys + i * ks, ks);
		}
		if (n_del && bpf_map_delete_batch(fd_of(sb, k), del, &n_del, &bo)) {
			rc = -errno;
			break;
		}
		in = out;
		inp = &in;
	}
out:
	free(keys);
	free(del);
	free(vals);
	return rc;
}

/* Delete every key of one generation from a map. */
static int drop_generation(struct latch_sandbox *sb, const struct kind *k, __u32 gen)
{
	uint8_t key[32], next[32], a[16];
	uint8_t *del = NULL;
	size_t ks = key_size(k);
	int n = 0, cap = 0, pl;
	void *prev = NULL;
	__u32 g;

	if (!k->lpm)
		return drop_generation_hash(sb, k, gen);
	/* tries have no batch lookup; they hold real prefixes only, so few keys */
	while (bpf_map_get_next_key(fd_of(sb, k), prev, next) == 0) {
		memcpy(key, next, sizeof(key));
		prev = key;
		key_parse(k, key, &g, a, &pl);
		if (g != gen)
			continue;
		if (n == cap) {
			uint8_t *nd = realloc(del, (cap = cap ? cap * 2 : 1024) * ks);

			if (!nd) {
				free(del);
				return -ENOMEM;
			}
			del = nd;
		}
		memcpy(del + n * ks, key, ks);
		n++;
	}
	for (int i = 0; i < n; i++)
		bpf_map_delete_elem(fd_of(sb, k), del + i * ks);
	free(del);
	return 0;
}

int latch_policy_gc(struct latch_sandbox *sb)
{
	struct latch_config cfg;
	int rc = 0;

	if (latch_sandbox_read_config(sb, &cfg))
		return -EIO;
	if (!(cfg.flags & LATCH_CFG_IDLE_DIRTY))
		return 0;
	for (int i = 0; i < 4 && !rc; i++)
		rc = drop_generation(sb, &kinds[i], cfg.policy_gen ^ 1);
	if (rc)
		return rc;
	/* re-read: only this one bit changes, everything else stays as the kernel has it */
	if (latch_sandbox_read_config(sb, &cfg))
		return -EIO;
	cfg.flags &= ~LATCH_CFG_IDLE_DIRTY;
	return latch_sandbox_write_config(sb, &cfg);
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
	size_t ks = key_size(k);
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

		if (e->addr.family != k->family || e->prefixlen != alen(k) * 8)
			continue;
		/* the address sits after the 4-byte generation in both exact keys */
		h = latch_fnv1a(LATCH_FNV1A_INIT, e->addr.bytes, alen(k)) & mask;
		while (slots[h] != GROUP_NONE && memcmp(keys + slots[h] * ks + 4, e->addr.bytes, alen(k)))
			h = (h + 1) & mask;
		if (slots[h] == GROUP_NONE) {
			slots[h] = groups;
			first[groups] = GROUP_NONE;
			key_make(k, gen, e->addr.bytes, e->prefixlen, keys + groups * ks);
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
		if (!rc && bpf_map_update_batch(fd_of(sb, k), keys + base * ks, vals, &count, &bo))
			rc = errno == E2BIG ? latch_errf(err, errlen, -E2BIG,
							 "%u addresses do not fit in %s beside the live policy (%d "
							 "for both generations); nothing was changed",
							 groups, latch_map_names[k->map], LATCH_POLICY_MAX)
					    : latch_errf(err, errlen, -EINVAL, "batch update of %s failed after %u entries: %s",
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
			return latch_errf(err, errlen, -EINVAL, "cannot clear the idle policy generation: %s", strerror(-rc));
	}
	cfg.flags |= LATCH_CFG_IDLE_DIRTY;
	if (latch_sandbox_write_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot update the config of '%s'", latch_sandbox_name(sb));

	/* Exact entries: merged per address, written in batches per family. */
	for (int fam = 0; fam < 2 && !rc; fam++)
		rc = write_exact(sb, &kinds[fam], src, n, next_gen, err, errlen);
	/* Prefixes: one by one, so that covering rules are copied down. */
	for (int i = 0; i < n && !rc; i++) {
		const struct latch_entry *e = item_entry(src, i);
		const struct kind *k;
		struct latch_rules v = { 0 };
		uint8_t key[32];

		if (e->prefixlen == (e->addr.family == AF_INET ? 32 : 128))
			continue;
		k = kind_for(e->addr.family, 0, 0);
		flags |= have_flag(k);
		key_make(k, next_gen, e->addr.bytes, e->prefixlen, key);
		if (!lookup_exact(sb, k, key, &v))
			memset(&v, 0, sizeof(v));
		for (int p = 0; p < (e->n_ports ? e->n_ports : 1) && !rc; p++) {
			struct latch_rule r;

			item_rule(src, e, p, &r);
			if (latch_rules_merge_longer(&v, &r))
				rc = latch_errf(err, errlen, -EINVAL, "too many port rules on one prefix");
		}
		if (!rc && set_flags(sb, flags, 0))
			rc = latch_errf(err, errlen, -EINVAL, "cannot update the config");
		if (!rc && (lpm_refresh(sb, k, next_gen, e->addr.bytes, e->prefixlen, &v) ||
			    lpm_refresh_below(sb, k, next_gen, e->addr.bytes, e->prefixlen)))
			rc = latch_errf(err, errlen, -EINVAL, "prefix update failed: %s", strerror(errno));
	}
	if (rc) {
		for (int i = 0; i < 4; i++)
			drop_generation(sb, &kinds[i], next_gen);
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
			drop_generation(sb, &kinds[i], next_gen);
		return rc;
	}
	/* The old generation is now the idle one: latch_policy_gc() removes it. */
	return 0;
}

int latch_policy_replace(struct latch_sandbox *sb, const struct latch_entry *entries, int n, char *err,
			 size_t errlen)
{
	const struct item_src src = { .entries = entries };

	return policy_write(sb, &src, n, false, err, errlen);
}

int latch_policy_switch(struct latch_sandbox *sb, const struct latch_policy_spec *specs, int n, bool open,
			char *err, size_t errlen)
{
	const struct item_src src = { .specs = specs };

	return policy_write(sb, &src, n, open, err, errlen);
}

/*
 * The live exact key of a learned entry, and its rules before (*before) and
 * after (*v) the merge.  0, or -errno with a line in err.
 */
static int learn_merge(struct latch_sandbox *sb, const struct latch_entry *e, uint64_t expires_ns, int origin,
		       uint8_t *key, struct latch_rules *before, struct latch_rules *v, char *err, size_t errlen)
{
	const struct kind *k = kind_for(e->addr.family, 1, 0);
	struct latch_config cfg;

	if (e->prefixlen != alen(k) * 8 || !expires_ns)
		return latch_errf(err, errlen, -EINVAL, "a learned entry is one address with a deadline");
	if (latch_sandbox_read_config(sb, &cfg))
		return latch_errf(err, errlen, -EINVAL, "cannot read the config of '%s'", latch_sandbox_name(sb));
	key_make(k, cfg.policy_gen, e->addr.bytes, e->prefixlen, key);
	if (!lookup_exact(sb, k, key, v))
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
	const struct kind *k = kind_for(e->addr.family, 1, 0);
	struct latch_rules before, v;
	uint8_t key[32];
	int rc = learn_merge(sb, e, expires_ns, origin, key, &before, &v, err, errlen);

	if (rc || !learn_changes(&before, &v))
		return rc;
	if (bpf_map_update_elem(fd_of(sb, k), key, &v, BPF_ANY))
		return latch_errf(err, errlen, -errno, "learned entry: map update failed: %s", strerror(errno));
	return 0;
}

int latch_policy_prune_resolved(struct latch_sandbox *sb, uint64_t before_ns)
{
	struct latch_config cfg;
	int pruned = 0;

	if (latch_sandbox_read_config(sb, &cfg))
		return -EIO;
	for (int ki = 0; ki < 2; ki++) {
		const struct kind *k = &kinds[ki];
		uint8_t key[32], next[32];
		void *prev = NULL;

		while (bpf_map_get_next_key(fd_of(sb, k), prev, next) == 0) {
			struct latch_rules v;
			int removed = 0;
			__u32 g;

			memcpy(key, next, sizeof(key));
			prev = key;
			memcpy(&g, key, sizeof(g));
			if (g != cfg.policy_gen || bpf_map_lookup_elem(fd_of(sb, k), key, &v))
				continue;
			for (__u32 i = 0; i < v.n;) {
				const struct latch_rule *x = &v.rule[i];

				if (latch_origin_resolved(x->origin) && x->expires_ns && x->expires_ns <= before_ns) {
					rules_delete_at(&v, i);
					removed++;
				} else {
					i++;
				}
			}
			if (!removed)
				continue;
			pruned += removed;
			/* nothing left: the key goes (the program treats an empty set as no entry) */
			if (v.n ? bpf_map_update_elem(fd_of(sb, k), key, &v, BPF_EXIST) :
				  bpf_map_delete_elem(fd_of(sb, k), key))
				return -errno;
		}
	}
	return pruned;
}

/* One map element's own live rules, to fn. */
static int list_one(const struct kind *k, const uint8_t *key, const struct latch_rules *v, __u32 live_gen,
		    uint64_t now, int (*fn)(const struct latch_policy_item *it, void *arg), void *arg)
{
	struct latch_policy_item it = { 0 };
	int count = 0;
	__u32 g;

	it.entry.addr.family = k->family;
	key_parse(k, key, &g, it.entry.addr.bytes, &it.entry.prefixlen);
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

		if (bpf_map_lookup_batch(fd_of(sb, k), inp, &out, keys, vals, &n, &bo)) {
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
	for (size_t ki = 0; ki < sizeof(kinds) / sizeof(kinds[0]); ki++) {
		const struct kind *k = &kinds[ki];
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
		while (bpf_map_get_next_key(fd_of(sb, k), prev, next) == 0) {
			struct latch_rules v;

			memcpy(key, next, sizeof(key));
			prev = key;
			if (bpf_map_lookup_elem(fd_of(sb, k), key, &v))
				continue;
			count += list_one(k, key, &v, cfg.policy_gen, now, fn, arg);
		}
	}
	return count;
}
