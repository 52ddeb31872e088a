/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * resolver.h - the per-sandbox filtering DNS resolver.
 *
 * Each sandbox gets one resolver on its host address, port 53, UDP and TCP.
 * It answers only names that the sandbox's policy allows and REFUSES every
 * other query without sending anything upstream, which closes DNS as a
 * whisper channel out of the sandbox.  Allowed queries are forwarded to the
 * configured upstreams; the answer is checked (every name of the CNAME chain
 * against the policy, every address against the rebinding filter), rebuilt
 * with clamped TTLs and reported to latchd, which installs the addresses in
 * the kernel as learned entries before the guest gets the reply.
 *
 * All resolvers of a process share one libevent event_base and run on its
 * thread; nothing here is thread-safe and there is no global state.
 */
#ifndef LATCH_BROKER_RESOLVER_H
#define LATCH_BROKER_RESOLVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

struct event_base;
struct latch_resolver;

#define LATCH_RESOLVER_LISTEN_MAX 2
#define LATCH_RESOLVER_UPSTREAM_MAX 4
#define LATCH_RESOLVER_CNAME_MAX 8  /* CNAMEs followed from the question; more is refused */
#define LATCH_RESOLVER_ADDRS_MAX 32 /* addresses kept from one answer, the rest are dropped */
#define LATCH_RESOLVER_NAME_MAX 254 /* a normalized name and its NUL */

/*
 * The sandbox's side of every decision.  name_allowed and addr_refused are
 * required (a resolver without a policy would fail open); answered and
 * refused may be NULL.  Callbacks run on the event_base's thread and must
 * not call latch_resolver_free() on the resolver that called them.
 *
 * Reasons passed to refused(): "not-allowed" (the question's name),
 * "qtype" (anything but A, AAAA and CNAME), "qclass" (not IN), "qname" (a
 * name that is not a host name: bytes outside a-z 0-9 - _, empty labels),
 * "cname-not-allowed" (a name of the CNAME chain), "cname-chain" (longer
 * than LATCH_RESOLVER_CNAME_MAX) and "rebinding" (addr_refused said no to an
 * address of the answer).
 */
struct latch_resolver_policy {
	void *arg;
	/* May this sandbox resolve this normalized name (lowercase, no trailing dot)? */
	bool (*name_allowed)(void *arg, const char *name);
	/* May this address be the answer for a public name? NULL = yes, else a reason word (rebinding filter). */
	const char *(*addr_refused)(void *arg, const struct latch_addr *a);
	/*
	 * An answer that is being sent to the client: the normalized qname, the
	 * A/AAAA addresses at the end of the CNAME chain (n >= 1) and the TTL
	 * already clamped to [ttl_min, ttl_max].  Called for cache hits too,
	 * with the remaining TTL.  It runs BEFORE the reply leaves, so a learned
	 * entry installed here is in the kernel when the guest connects.  Not
	 * called for NXDOMAIN, NODATA or a CNAME query (no addresses).
	 */
	void (*answered)(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl);
	/* A refused query, for the audit log; qname is normalized when it could be, else "". */
	void (*refused)(void *arg, const char *qname, uint16_t qtype, const char *reason);
};

struct latch_resolver_opts {
	struct latch_addr listen[LATCH_RESOLVER_LISTEN_MAX]; /* the sandbox's host v4 and/or v6 address */
	int n_listen;
	uint16_t port; /* 53; tests use others */
	struct latch_addr upstream[LATCH_RESOLVER_UPSTREAM_MAX];
	uint16_t upstream_port[LATCH_RESOLVER_UPSTREAM_MAX]; /* 0 = 53 */
	int n_upstream;
	uint32_t ttl_min, ttl_max; /* clamp for reported/learned TTLs, seconds; 0 < ttl_max, ttl_min <= ttl_max */
	uint32_t timeout_ms;	   /* per upstream try; 0 = 1500 */
	/* 0 = the default for each of these */
	uint32_t tcp_idle_ms; /* a TCP client that sends nothing for this long is closed (10000) */
	int tcp_clients_max;  /* concurrent TCP clients per resolver; more are closed on accept (64) */
	int cache_max;	      /* cached answers, least recently used evicted first (1024) */
	struct latch_resolver_policy policy;
};

/*
 * Open the sockets (IP_FREEBIND: the address may not exist yet) and
 * register them with base.  Returns NULL with errno set and a line in err.
 */
struct latch_resolver *latch_resolver_new(struct event_base *base, const struct latch_resolver_opts *o, char *err,
					  size_t errlen);
/*
 * New upstreams, timeout, TTL clamp and policy (SIGHUP), keeping sockets and
 * cache; cached answers are cut to the new ttl_max.  The listen addresses
 * and port must stay the same (-EINVAL: make a new resolver instead).
 * Queries already in flight finish their current try.  Returns 0 or -errno.
 */
int latch_resolver_reconfigure(struct latch_resolver *r, const struct latch_resolver_opts *o, char *err,
			       size_t errlen);
/*
 * Close every socket and cancel every pending query and lookup; no callback
 * runs after this.  Accepts NULL.
 */
void latch_resolver_free(struct latch_resolver *r);

/*
 * queries: client messages received (UDP and TCP), parsable or not;
 * answered: NOERROR/NXDOMAIN replies sent; refused: REFUSED replies sent;
 * upstream_sent: messages sent upstream (retries and TCP included);
 * cache_hits: queries and lookups answered from the cache; failed: SERVFAIL,
 * FORMERR and NOTIMP replies and dropped messages.
 */
struct latch_resolver_stats {
	uint64_t queries, answered, refused, upstream_sent, cache_hits, failed;
};
void latch_resolver_stats(const struct latch_resolver *r, struct latch_resolver_stats *s);
/* Drop the answer cache (policy switch). */
void latch_resolver_flush(struct latch_resolver *r);

/*
 * A host-side lookup for latchd (resolving a profile's or a grant's host
 * names itself), through the same upstreams and cache.  Asks for A and
 * AAAA and calls cb exactly once, always later from the event loop (never
 * from inside this call): with the addresses that passed addr_refused (the
 * others are dropped, not fatal here) and the clamped TTL, or with n = -1
 * and a reason: "rebinding" (every address was refused), "nxdomain",
 * "no-address", "cname-chain", "timeout", "servfail" or "unreachable".
 * name_allowed is not asked: the host chose the name, and CNAMEs are
 * followed freely.  Returns 0, -EINVAL for a name that is not a host name,
 * -EBUSY when too many queries are in flight, or -ENOMEM.
 */
typedef void (*latch_lookup_cb)(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
				const char *why);
int latch_resolver_lookup(struct latch_resolver *r, const char *name, latch_lookup_cb cb, void *arg);

#endif
