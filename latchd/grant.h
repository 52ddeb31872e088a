/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * grant.h - grants in latchd (private to latchd/; docs/grants.md).
 *
 * A grant opens host names for a short window.  The host resolves them
 * (the rebinding filter and the host's own addresses refused), the kernel
 * gets their addresses as timed entries of origin GRANT whose deadline it
 * checks on every packet, and the sandbox's resolver may answer those names
 * until the deadline.  A grant is made on the host (`latch grant`) or asked
 * for by the sandbox (POST /latch/grant on its broker listener) and then
 * approved from outside (`latch approve ID` on the root-only socket).
 *
 *	grant.c		a sandbox's grants: the caps, resolving on the host, the
 *			kernel entries, approval, denial, timeouts, expiry, the names
 *			the resolver may answer, and NAME.grants on disk
 *	grant_store.c	a grant as JSON (replies, audit, notifier) and NAME.grants
 *	grant_ops.c	the control socket's ops: grant, grants, approve, deny
 *	grant_ask.c	the sandbox's ask: its JSON, its checks, its answer
 *	grant_notify.c	telling the person: notify_command and notify_url
 */
#ifndef LATCH_LATCHD_GRANT_H
#define LATCH_LATCHD_GRANT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "latchd/latchd.h"
#include "broker/broker.h"

#define GRANT_HOSTS_MAX 8
#define GRANT_PORTS_MAX 8 /* ports an ask may name */
#define GRANT_ID_CHARS 16 /* base32: 80 random bits */
#define GRANT_REASON_MAX 300 /* bytes of the reason */
#define GRANT_HISTORY_MAX 1001 /* grants_per_hour and grant_asks_per_hour are at most 1000 */
#define GRANT_HOUR_NS (3600ULL * NS_PER_S)

enum grant_state {
	GRANT_NEW, /* being checked; counts against no cap yet */
	GRANT_PENDING, /* an ask waiting for a person */
	GRANT_RESOLVING, /* approved or made: its names are being looked up on the host */
	GRANT_ACTIVE, /* in the kernel until deadline_ns */
};

struct grant_host {
	char name[LATCH_DNS_NAME_MAX + 1];
	struct latch_entry ports; /* proto and ports; no address */
	struct latch_addr addr[LATCH_RESOLVER_ADDRS_MAX]; /* given to the kernel (active), or just resolved */
	int n;
	uint64_t ttl_ns; /* the last lookup's TTL runs out: asked again before it (boot clock) */
	uint64_t retry_ns; /* after a failed refresh, not before */
	bool in_flight;
	const char *why; /* the last lookup's failure (a static word), or NULL */
};

struct grant {
	struct grant *next;
	struct sandbox *s;
	char id[GRANT_ID_CHARS + 1];
	enum grant_state state;
	bool asked; /* the sandbox asked; else `latch grant` made it */
	struct grant_host host[GRANT_HOSTS_MAX];
	int n_hosts;
	uint32_t seconds; /* asked for, then granted */
	char reason[GRANT_REASON_MAX +
		    1]; /* the sandbox's words: never their truth, only their characters checked; "" none */
	time_t asked_wall; /* when it was asked or made (epoch) */
	uint64_t wait_until_ns; /* pending: denied by timeout then */
	uint64_t deadline_ns; /* active: the kernel's deadline (boot clock) */
	time_t deadline_wall;
	int lookups; /* resolving: answers still to come */
	struct latch_http_local *http; /* the sandbox's request waiting for the decision */
	struct client *client; /* the `latch grant` or `latch approve` waiting for the outcome */
};

/* One sandbox's grants, asks and the last hour's history (the caps). */
struct grants {
	struct grant *list;
	uint64_t asked[GRANT_HISTORY_MAX]; /* boot-clock times of asks, the last hour's */
	int n_asked;
	uint64_t granted[GRANT_HISTORY_MAX]; /* of grants made or approved */
	int n_granted;
	uint64_t refused_minute; /* start of the minute whose refused asks are counted */
	unsigned refused_recorded; /* refused asks written to the audit log this minute */
	unsigned refused_unrecorded; /* beyond that: counted, and carried by the next entry */
	bool dirty; /* NAME.grants to be written on the next tick */
};

/* grant.c */
struct grant *latchd_grant_new(struct sandbox *s, bool asked);
/* Out of the list and freed; its waiting request and client must have been answered. */
void latchd_grant_drop(struct grant *g);
struct grant *latchd_grant_find(struct latchd *ld, const char *id);
/* "HOST" or "HOST:PORTS" (no address literal, no wildcard) into h; ports default to def. 0 or -EINVAL. */
int latchd_grant_parse_host(const char *text, const struct latch_entry *def, struct grant_host *h, char *err,
			    size_t errlen);
/*
 * A reason fit to show a person inside latch's words: at most GRANT_REASON_MAX
 * bytes of UTF-8, one line, no double quote, control, direction or invisible
 * character (latch_text_check()).  0, or -EINVAL with the line.
 */
int latchd_grant_reason_check(const char *reason, char *err, size_t errlen);
/* 0, or -EDQUOT with the line naming the cap: grants_per_hour; for an ask also grant_asks_per_hour and _pending. */
int latchd_grant_cap_granted(struct sandbox *s, uint64_t now, char *err, size_t errlen);
int latchd_grant_cap_ask(struct sandbox *s, uint64_t now, char *err, size_t errlen);
/* How many of the sandbox's grants and asks count against each cap now. */
int latchd_grant_count_granted(struct sandbox *s, uint64_t now);
int latchd_grant_count_asked(struct sandbox *s, uint64_t now);
void latchd_grant_history_ask(struct sandbox *s, uint64_t now); /* an ask reached the person: it counts */
/*
 * Look the names up on the host and put the grant in the kernel for SECONDS
 * from the moment its addresses are in; then latchd_grant_settled() tells the asker.
 * On failure (a name that does not resolve, or only to non-public or host
 * addresses) nothing is installed and the grant is dropped.
 */
void latchd_grant_resolve(struct grant *g, uint32_t seconds);
/*
 * Close an active grant now: its addresses get the latest deadline of the
 * other grants that hold them, or now.  The kernel cuts new flows at once
 * (established ones at their next re-check).
 */
int latchd_grant_close_now(struct grant *g, char *err, size_t errlen);

/* grant_store.c */
/* "443,8000-8100" and "/tcp" or "/udp" when the proto is one */
void latchd_grant_ports_text(const struct latch_entry *ports, char *buf, size_t len);
json_t *latchd_grant_json(const struct grant *g, uint64_t now);
/* The audit entry of a grant's step (kind "grant"); extra is taken and merged in. */
void latchd_grant_audit(const struct grant *g, const char *decision, const char *reason, json_t *extra);
void latchd_grants_save(struct sandbox *s);

/* grant_ask.c */
void latchd_grant_ask_local(void *arg, struct latch_http_local *req, const struct latch_http_local_request *rq);
void latchd_grant_ask_gone(void *arg, struct latch_http_local *req);
/* Answer the sandbox's waiting request (if any) with the grant's outcome. */
void latchd_grant_ask_answer(struct grant *g, int status, const char *decision, const char *message);

/* grant_ops.c: a request's "hosts" (strings, 1..GRANT_HOSTS_MAX, none twice) into g; 0 or -EINVAL */
int latchd_grant_hosts_set(struct grant *g, json_t *hosts, const struct latch_entry *def, char *err, size_t errlen);
/* grant_ops.c: the outcome of a grant resolved for the client or the ask that waits */
void latchd_grant_settled(struct grant *g, const char *error, bool usage);

/* grant_notify.c */
void latchd_grant_notify(struct grant *g);

#endif
