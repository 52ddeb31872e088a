// SPDX-License-Identifier: GPL-2.0-only
/*
 * cache.c - the resolver's answer cache: a hash of chains keyed by (name,
 * qtype) and an LRU list, at most cache_max entries.  It holds what the
 * upstream said, before any policy decision, so a policy switch needs only a
 * flush and a cached answer is judged again on every hit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resolver/dns.h"

/* ------------------------------------------------------------ the cache */

static uint32_t cache_hash(const char *name, uint16_t qtype)
{
	return latch_fnv1a(LATCH_FNV1A_INIT ^ qtype, name, strlen(name));
}

static void cache_unlink(struct latch_resolver *r, struct centry *e)
{
	struct centry **pp = &r->buckets[e->hash & (r->n_buckets - 1)];

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	TAILQ_REMOVE(&r->lru, e, lru);
	r->n_cache--;
	r->cache_epoch++;
	dns_answer_clear(&e->a);
	free(e);
}

/* A live entry and its remaining TTL (at least 1), or NULL; expired entries go. */
struct centry *dns_cache_get(struct latch_resolver *r, const char *name, uint16_t qtype, uint32_t *left)
{
	uint32_t h = cache_hash(name, qtype);
	struct centry *e = r->buckets[h & (r->n_buckets - 1)];
	uint64_t now = latch_now_ms();

	for (; e; e = e->next)
		if (e->hash == h && e->qtype == qtype && !strcmp(e->name, name))
			break;
	if (!e)
		return NULL;
	if (e->expires_ms <= now) {
		cache_unlink(r, e);
		return NULL;
	}
	*left = (e->expires_ms - now + 999) / 1000;
	TAILQ_REMOVE(&r->lru, e, lru);
	TAILQ_INSERT_HEAD(&r->lru, e, lru);
	return e;
}

/* Cache a (copied) under (name, qtype); the new entry, or NULL when it was not kept. */
struct centry *dns_cache_put(struct latch_resolver *r, const char *name, uint16_t qtype, const struct answer *a)
{
	struct centry *e, *old;
	uint32_t left;

	if (!a->ttl || r->o.cache_max <= 0)
		return NULL;
	old = dns_cache_get(r, name, qtype, &left);
	if (old)
		cache_unlink(r, old);
	while (r->n_cache >= r->o.cache_max && !TAILQ_EMPTY(&r->lru))
		cache_unlink(r, TAILQ_LAST(&r->lru, centry_list));
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	if (dns_answer_copy(&e->a, a)) {
		free(e);
		return NULL;
	}
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->qtype = qtype;
	e->hash = cache_hash(name, qtype);
	e->expires_ms = latch_now_ms() + (uint64_t)a->ttl * 1000;
	e->next = r->buckets[e->hash & (r->n_buckets - 1)];
	r->buckets[e->hash & (r->n_buckets - 1)] = e;
	TAILQ_INSERT_HEAD(&r->lru, e, lru);
	r->n_cache++;
	return e;
}

void latch_resolver_flush(struct latch_resolver *r)
{
	while (r && !TAILQ_EMPTY(&r->lru))
		cache_unlink(r, TAILQ_FIRST(&r->lru));
}

int dns_cache_init(struct latch_resolver *r)
{
	for (r->n_buckets = 64; (int)r->n_buckets < r->o.cache_max; r->n_buckets *= 2)
		;
	r->buckets = calloc(r->n_buckets, sizeof(*r->buckets));
	return r->buckets ? 0 : -ENOMEM;
}

/* No cached answer lives past expires_ms (a lower TTL clamp). */
void dns_cache_clamp(struct latch_resolver *r, uint64_t expires_ms)
{
	struct centry *e;

	TAILQ_FOREACH(e, &r->lru, lru)
	if (e->expires_ms > expires_ms)
		e->expires_ms = expires_ms;
}
