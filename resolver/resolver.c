// SPDX-License-Identifier: GPL-2.0-only
/*
 * resolver.c - the per-sandbox filtering DNS resolver (see resolver.h): its
 * options, its life (new, reconfigure, free) and its counters.
 *
 * A query goes through, in order: header sanity, one question of class IN,
 * a host-name spelling, the policy's name_allowed, the qtype, the cache, and
 * only then an upstream (listen.c).  The reply is never the upstream's
 * bytes: it is rebuilt from the question, the CNAME chain and the A/AAAA
 * records, each checked, with one clamped TTL, so nothing the upstream adds
 * (authority, additional, EDNS options, stray records) reaches the guest
 * (answer.c).  Upstream queries and host-side lookups are upstream.c's, the
 * answer cache is cache.c's; dns.h lists who does what.
 *
 * Packets are parsed and written with ldns; all I/O is non-blocking libevent.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "resolver/dns.h"

/* ------------------------------------------------------------ small helpers */

struct timeval dns_ms_tv(uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	return tv;
}

uint32_t dns_clamp_ttl(const struct latch_resolver *r, uint32_t ttl)
{
	if (ttl < r->o.ttl_min)
		return r->o.ttl_min;
	return ttl > r->o.ttl_max ? r->o.ttl_max : ttl;
}

socklen_t dns_addr_sockaddr(const struct latch_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;

		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		s->sin_addr = a->v4;
		return sizeof(*s);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	s6->sin6_addr = a->v6;
	return sizeof(*s6);
}

/* ------------------------------------------------------------ setup */

static int opts_check(const struct latch_resolver_opts *o, char *err, size_t errlen)
{
	if (o->n_listen < 1 || o->n_listen > LATCH_RESOLVER_LISTEN_MAX)
		return latch_errf(err, errlen, -EINVAL, "resolver: give 1 or 2 listen addresses (got %d)", o->n_listen);
	if (o->n_upstream < 1 || o->n_upstream > LATCH_RESOLVER_UPSTREAM_MAX)
		return latch_errf(err, errlen, -EINVAL, "resolver: give 1 to %d upstreams (got %d)",
				  LATCH_RESOLVER_UPSTREAM_MAX, o->n_upstream);
	for (int i = 0; i < o->n_listen; i++)
		if (o->listen[i].family != AF_INET && o->listen[i].family != AF_INET6)
			return latch_errf(err, errlen, -EINVAL, "resolver: listen address %d has no family", i);
	for (int i = 0; i < o->n_upstream; i++)
		if (o->upstream[i].family != AF_INET && o->upstream[i].family != AF_INET6)
			return latch_errf(err, errlen, -EINVAL, "resolver: upstream %d has no family", i);
	if (!o->ttl_max || o->ttl_min > o->ttl_max)
		return latch_errf(err, errlen, -EINVAL, "resolver: the TTL clamp [%u, %u] needs 0 < max and min <= max",
				  o->ttl_min, o->ttl_max);
	if (!o->policy.name_allowed || !o->policy.addr_refused)
		return latch_errf(err, errlen, -EINVAL, "resolver: the policy needs name_allowed and addr_refused");
	/* a resolver that answered anyone could be made to write its sandbox's audit log */
	if (o->guest.gated)
		; /* the kernel's gate admits the room's packets only */
	else if (!o->guest.dev[0] || strnlen(o->guest.dev, sizeof(o->guest.dev)) == sizeof(o->guest.dev))
		return latch_errf(err, errlen, -EINVAL, "resolver: name the guest's link (an interface name)");
	else if (o->guest.n_addr < 1 || o->guest.n_addr > LATCH_RESOLVER_GUEST_ADDRS_MAX)
		return latch_errf(err, errlen, -EINVAL, "resolver: give 1 to %d guest addresses (got %d)",
				  LATCH_RESOLVER_GUEST_ADDRS_MAX, o->guest.n_addr);
	for (int i = 0; i < o->guest.n_addr; i++)
		if (o->guest.addr[i].family != AF_INET && o->guest.addr[i].family != AF_INET6)
			return latch_errf(err, errlen, -EINVAL, "resolver: guest address %d has no family", i);
	return 0;
}

/* Copy opts, with the defaults filled in. */
static void opts_set(struct latch_resolver *r, const struct latch_resolver_opts *o)
{
	r->o = *o;
	for (int i = 0; i < r->o.n_upstream; i++)
		if (!r->o.upstream_port[i])
			r->o.upstream_port[i] = 53;
	if (!r->o.timeout_ms)
		r->o.timeout_ms = TIMEOUT_MS_DEFAULT;
	if (!r->o.tcp_idle_ms)
		r->o.tcp_idle_ms = TCP_IDLE_MS_DEFAULT;
	if (r->o.tcp_clients_max <= 0)
		r->o.tcp_clients_max = TCP_CLIENTS_DEFAULT;
	if (r->o.cache_max <= 0)
		r->o.cache_max = CACHE_DEFAULT;
	if (r->o.tcp_conn_queries <= 0)
		r->o.tcp_conn_queries = TCP_CONN_TOTAL_DEFAULT;
	if (!r->o.guest.rate) {
		r->o.guest.rate = RATE_DEFAULT;
		r->o.guest.burst = BURST_DEFAULT;
	}
	if (!r->o.guest.burst)
		r->o.guest.burst = 1;
	r->rate_cost_ns = (1000000000ull + r->o.guest.rate - 1) / r->o.guest.rate;
}

struct latch_resolver *latch_resolver_new(struct event_base *base, const struct latch_resolver_opts *o, char *err,
					  size_t errlen)
{
	struct latch_resolver *r;
	int ret;

	ret = opts_check(o, err, errlen);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->base = base;
	TAILQ_INIT(&r->queries);
	TAILQ_INIT(&r->lookups);
	TAILQ_INIT(&r->conns);
	TAILQ_INIT(&r->lru);
	opts_set(r, o);
	ret = dns_cache_init(r);
	if (ret) {
		latch_errf(err, errlen, ret, "resolver: out of memory");
		goto fail;
	}
	ret = dns_hostaddrs_open(r, err, errlen);
	if (!ret) {
		dns_guest_link(r, true); /* the link may come later: looked up again then */
		ret = dns_listeners_open(r, err, errlen);
	}
	if (ret)
		goto fail;
	return r;
fail:
	latch_resolver_free(r);
	errno = -ret;
	return NULL;
}

int latch_resolver_reconfigure(struct latch_resolver *r, const struct latch_resolver_opts *o, char *err, size_t errlen)
{
	int ret = opts_check(o, err, errlen);

	if (ret)
		return ret;
	if (o->n_listen != r->o.n_listen || o->port != r->o.port ||
	    memcmp(o->listen, r->o.listen, sizeof(o->listen[0]) * o->n_listen))
		return latch_errf(err, errlen, -EINVAL,
				  "resolver: the listen addresses and port can't change; make a new resolver");
	opts_set(r, o);
	dns_guest_link(r, true);
	/* the guest must never hold an answer longer than the new clamp allows */
	dns_cache_clamp(r, latch_now_ms() + (uint64_t)r->o.ttl_max * 1000);
	return 0;
}

void latch_resolver_free(struct latch_resolver *r)
{
	if (!r)
		return;
	/* connections first: their queries then have no client to wake */
	while (!TAILQ_EMPTY(&r->conns))
		dns_tcp_conn_close(TAILQ_FIRST(&r->conns));
	while (!TAILQ_EMPTY(&r->queries))
		dns_query_free(TAILQ_FIRST(&r->queries));
	while (!TAILQ_EMPTY(&r->lookups))
		dns_lookup_free(TAILQ_FIRST(&r->lookups));
	dns_listeners_close(r);
	dns_hostaddrs_close(r);
	if (r->buckets)
		latch_resolver_flush(r);
	free(r->buckets);
	explicit_bzero(r->rnd, sizeof(r->rnd));
	free(r);
}

void latch_resolver_stats(const struct latch_resolver *r, struct latch_resolver_stats *s)
{
	*s = r->st;
}
