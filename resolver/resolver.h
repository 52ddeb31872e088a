/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * resolver.h - the per-sandbox filtering DNS resolver.
 *
 * Each sandbox gets one resolver on its host address, port 53, UDP and TCP.
 * It answers only its own guest (the guest's addresses, arriving on the
 * guest's link; anyone else gets no answer at all), only names that the
 * sandbox's policy allows, and REFUSES every other query without sending
 * anything upstream, which closes DNS as a whisper channel out of the
 * sandbox.  Allowed queries are forwarded to the configured upstreams; the
 * answer is reduced to the CNAME chain from the question and the addresses
 * at its end (the chain's names may lie outside the policy, as CDNs answer,
 * but they never become names the guest may ask for), each address is
 * checked (the rebinding filter, and never one of the host's own
 * addresses), rebuilt with clamped TTLs and reported to latchd, which
 * installs the addresses in the kernel as learned entries, under the asked
 * name's ports, before the guest gets the reply.
 *
 * All resolvers of a process share one libevent event_base and run on its
 * thread; nothing here is thread-safe and there is no global state.
 */
#ifndef LATCH_RESOLVER_H
#define LATCH_RESOLVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

struct event_base;
struct latch_resolver;

#define LATCH_RESOLVER_LISTEN_MAX 2
#define LATCH_RESOLVER_UPSTREAM_MAX 4
#define LATCH_RESOLVER_CNAME_MAX 8 /* CNAMEs followed from the question; more is refused */
#define LATCH_RESOLVER_GUEST_ADDRS_MAX 4
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
 * "cname-chain" (longer than LATCH_RESOLVER_CNAME_MAX, two targets for one
 * name, or a target that is not a host name), "cname-loop", "rebinding"
 * (addr_refused said no to an address of the answer), "host-address" (an
 * address of the answer is one of the host's own), and, for a TCP
 * connection that was cut (qname "", qtype 0), "tcp-queries" (it asked more
 * than tcp_conn_queries) and "tcp-rate" (the sandbox's query rate is spent).
 */
struct latch_resolver_policy {
	void *arg;
	/* May this sandbox resolve this normalized name (lowercase, no trailing dot)? */
	bool (*name_allowed)(void *arg, const char *name);
	/*
	 * May this address be the answer for a public name?  NULL = yes, else a
	 * reason word (the rebinding filter).  It may let a non-public address
	 * through (a CIDR entry of the profile covers it): the guest then gets
	 * it, but it is never reported to answered() or a lookup, because that
	 * entry already reaches it, on its own ports only.
	 */
	const char *(*addr_refused)(void *arg, const struct latch_addr *a);
	/*
	 * An answer that is being sent to the client: the normalized qname, the
	 * public A/AAAA addresses at the end of the CNAME chain (n >= 1) and the
	 * TTL already clamped to [ttl_min, ttl_max].  It runs BEFORE the reply
	 * leaves, so a learned entry installed here is in the kernel when the
	 * guest connects.  Return 0 when every address is in the kernel until
	 * ttl from now: later cache hits of the same answer (whose remaining TTL
	 * ends no later) are then not reported again; -errno (an entry could
	 * not be written) and the next hit reports them again, with the
	 * remaining TTL.  Not called for NXDOMAIN, NODATA, a CNAME query or an
	 * answer whose every address a CIDR entry covers (no address to learn).
	 * A cache flush (a policy switch) starts reporting afresh.
	 */
	int (*answered)(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl);
	/* A refused query, for the audit log; qname is normalized when it could be, else "". */
	void (*refused)(void *arg, const char *qname, uint16_t qtype, const char *reason);
};

/*
 * Who may ask, and how fast.  Queries are answered only when they come from
 * one of addr, on the link dev: UDP by the datagram's source and its
 * arrival interface (IP_PKTINFO), TCP by the peer's address and a listener
 * bound to dev.  Anything else is dropped unanswered and unreported (it
 * can't spend the sandbox's audit budget or its TCP slots).  rate/burst is
 * the sandbox's query rate (GCRA): UDP queries draw from it without being
 * held to it (the kernel's DNS bucket has judged each datagram already), TCP
 * queries must find room in it, or their connection is cut ("tcp-rate"):
 * the kernel charged only the connection's SYN.
 */
struct latch_resolver_guest {
	/*
	 * A room's resolver: its listen address is a room service address that
	 * the kernel's gate (loader/cgroup.h) admits only the room's own packets
	 * to, so whoever reaches it is the room; dev and addr are then unused.
	 */
	bool gated;
	char dev[16]; /* IFNAMSIZ: the sandbox's tap or veth, host side */
	struct latch_addr addr[LATCH_RESOLVER_GUEST_ADDRS_MAX];
	int n_addr;
	uint32_t rate, burst; /* queries/s and depth; 0 = 20 and 40 */
};

struct latch_resolver_opts {
	struct latch_addr listen[LATCH_RESOLVER_LISTEN_MAX]; /* the sandbox's host v4 and/or v6 address */
	int n_listen;
	uint16_t port; /* 53; tests use others */
	struct latch_addr upstream[LATCH_RESOLVER_UPSTREAM_MAX];
	uint16_t upstream_port[LATCH_RESOLVER_UPSTREAM_MAX]; /* 0 = 53 */
	int n_upstream;
	uint32_t ttl_min, ttl_max; /* clamp for reported/learned TTLs, seconds; 0 < ttl_max, ttl_min <= ttl_max */
	uint32_t timeout_ms; /* per upstream try; 0 = 1500 */
	/* 0 = the default for each of these */
	uint32_t tcp_idle_ms; /* a TCP client that sends nothing for this long is closed (10000) */
	int tcp_clients_max; /* concurrent TCP clients per resolver; more are closed on accept (64) */
	int cache_max; /* cached answers, least recently used evicted first (1024) */
	int tcp_conn_queries; /* queries one TCP connection may ask; the next cuts it (64) */
	struct latch_resolver_guest guest; /* required (or gated): a resolver answers its guest only */
	/*
	 * latchd's own resolver (latchd/confine.c): lookups report every
	 * address, the host's own and non-public ones too, because the caller
	 * judges them and the kernel's confinement of latchd enforces that.
	 */
	bool report_all;
	struct latch_resolver_policy policy;
};

/*
 * Open the sockets (IP_FREEBIND: the address may not exist yet; the guest's
 * link may not either, it is looked up again when it is needed) and
 * register them with base.  Returns NULL with errno set and a line in err.
 */
struct latch_resolver *latch_resolver_new(struct event_base *base, const struct latch_resolver_opts *o, char *err,
					  size_t errlen);
/*
 * New upstreams, timeout, TTL clamp, guest and policy (SIGHUP), keeping
 * sockets and cache; cached answers are cut to the new ttl_max.  The listen
 * addresses and port must stay the same (-EINVAL: make a new resolver).
 * Queries already in flight finish their current try.  Returns 0 or -errno.
 */
int latch_resolver_reconfigure(struct latch_resolver *r, const struct latch_resolver_opts *o, char *err, size_t errlen);
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
 * FORMERR and NOTIMP replies and dropped messages; foreign: datagrams and
 * connections from anyone but the guest on its link, dropped unanswered
 * (not in queries); tcp_cut: TCP connections cut for their query count or
 * the sandbox's rate.
 */
struct latch_resolver_stats {
	uint64_t queries, answered, refused, upstream_sent, cache_hits, failed, foreign, tcp_cut;
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
 * "no-address", "cname-chain", "cname-loop", "timeout", "servfail" or
 * "unreachable".  n may be 0 without a reason: every address found is
 * covered by a CIDR entry (see addr_refused), so there is nothing to add.
 * name_allowed is not asked: the host chose the name, and CNAMEs are
 * followed freely.  Returns 0, -EINVAL for a name that is not a host name,
 * -EBUSY when too many queries are in flight, or -ENOMEM.
 */
typedef void (*latch_lookup_cb)(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
				const char *why);
int latch_resolver_lookup(struct latch_resolver *r, const char *name, latch_lookup_cb cb, void *arg);

/*
 * `latch verify`'s test-runs of the resolver's own decisions, with nothing
 * done: no query upstream, no reply, no cache entry, no answered() or
 * refused() callback (so nothing is learned into the kernel or audited).
 * try_name: the decision on a question for NAME (text), as a guest's query
 * gets it: NULL (it would be asked upstream), "qname" or "not-allowed".
 * try_answer: the decision on an upstream's answer of these n addresses
 * (A and AAAA alike) for a name already allowed, the same judgement a real
 * answer gets (the host's own addresses, then addr_refused): NULL (the guest
 * would get it, and *n_learn of them would be learned) or the reason
 * ("rebinding", "host-address").
 */
const char *latch_resolver_try_name(struct latch_resolver *r, const char *name);
const char *latch_resolver_try_answer(struct latch_resolver *r, const struct latch_addr *addrs, int n, int *n_learn);

#endif
