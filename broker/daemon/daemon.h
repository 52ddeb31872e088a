/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * daemon.h - what latchd's parts share (private to broker/daemon/).
 *
 * main.c owns the one struct latchd and hands it on: every part gets it as
 * an argument, or through the sandbox (s->ld) or client it was called for.
 * No part keeps state of its own in a global.  The parts, by job:
 *
 *	main.c		arguments, latch.conf, signals, the loop and its tick, SIGHUP
 *	control.c	the root-only control socket: one JSON request per line
 *	sandbox.c	per-sandbox lifecycle (scan the pins, add, free) and the
 *			policy its resolver consults
 *	switch.c	profile switches (host names looked up, the union composed by
 *			profile/compose.c, the policy lock around the flip) and the
 *			refresh of host names before their TTL runs out
 *	learned.c	answers the guest got: remembered, indexed, written to
 *			policy/NAME.learned with the boot id, read back, pruned
 *	events.c	kernel deny events and the audit helper with its rate limit
 *	periodic.c	the jobs of the tick: `latch --json backup --all` every
 *			backup_interval, host name refreshes, learned saves and pruning
 *
 * The credential broker (broker/http/) is not wired in yet; its places are
 * latchd.http and sandbox.broker below, and main.c's top comment says how.
 */
#ifndef LATCH_DAEMON_H
#define LATCH_DAEMON_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "broker/dns/resolver.h"
#include "config/config.h"
#include "loader/loader.h"
#include "profile/profile.h"

#define NS_PER_S 1000000000ULL
/* learned and host-name rules stay this long past their TTL (established flows re-checked find them) */
#define RESOLVED_GRACE_NS (3600ULL * NS_PER_S)
#define SCAN_INTERVAL_S 2

struct event;
struct event_base;
struct evconnlistener;
struct client; /* control.c */
struct sandbox;
struct latch_http; /* the credential broker's engine (broker/http/), not wired in yet */
struct latch_http_sandbox; /* one sandbox's broker listener, likewise */
struct room_svc; /* room.c */
struct confine;	 /* confine.c */

/* A profile's host name, resolved here and kept fresh. */
struct hostname {
	const struct latch_pentry *pe; /* in the sandbox's profile */
	struct latch_addr addr[LATCH_RESOLVER_ADDRS_MAX];
	int n;
	uint64_t expires_ns; /* boot clock; 0: never resolved */
	uint64_t retry_ns; /* after a failure, not before */
	bool in_flight;
	const char *why; /* the last failure, or NULL */
};

/* An answer the guest got, remembered so a switch can keep what is still allowed. */
struct learned {
	char name[LATCH_DNS_NAME_MAX + 1];
	struct latch_addr addr;
	uint64_t expires_ns;
	int next; /* the next in its hash bucket, -1 at the end */
};

/* A profile switch waiting for its host names. */
struct pending_switch {
	struct sandbox *s;
	struct latch_profile prof;
	struct hostname *hosts;
	int n_hosts, waiting;
	bool carry_live_learned; /* at startup: learned rules in the maps have no name here */
	struct client *client; /* who asked, or NULL (startup, reload) */
	char from[LATCH_PROFILE_NAME_MAX + 1];
};

struct sandbox {
	struct latchd *ld;
	char name[LATCH_NAME_MAX + 1];
	struct latch_sandbox *sb;
	struct latch_config cfg;
	struct latch_resolver *res;
	struct latch_events *events;
	struct event *rb_ev;
	bool have_profile;
	struct latch_profile prof;
	struct hostname *hosts;
	int n_hosts;
	unsigned hosts_generation;
	struct learned *learned;
	int n_learned, cap_learned;
	int *learned_index; /* heads of the hash buckets into learned[], by (name, address) */
	bool learned_dirty; /* to be written to NAME.learned on the next tick */
	struct pending_switch *sw;
	/* the old generation's collection after a switch, a step at a time (switch.c) */
	struct latch_policy_gc *gc;
	struct event *gc_ev;
	/*
	 * The credential broker's listener for this sandbox (broker/http/): to be
	 * opened in sandbox_add() beside the resolver, on the sandbox's host
	 * address and broker port with its kit's routes, and freed in
	 * sandbox_free() (which wipes its secrets) when the pins go.  NULL until
	 * the broker is wired in.
	 */
	struct latch_http_sandbox *broker;
	bool seen;
	struct sandbox *next;
};

/* periodic.c's `latch --json backup --all` child. */
struct backup_child {
	pid_t pid; /* running child, 0 none */
	int out; /* its stdout (a memfd) */
	uint64_t last_ns; /* start of the last run */
};

struct latchd {
	struct event_base *base;
	struct evconnlistener *listener;
	struct latch_conf conf;
	struct audit_log *audit;
	struct sandbox *sandboxes;
	struct client *clients;
	char sock_path[PATH_MAX];
	char profile_dir[PATH_MAX];
	char overlay[PATH_MAX];
	struct latch_addr upstream[LATCH_RESOLVER_UPSTREAM_MAX];
	uint16_t upstream_port[LATCH_RESOLVER_UPSTREAM_MAX];
	int n_upstream;
	uint16_t dns_port;
	unsigned ticks; /* seconds since start */
	struct backup_child backup;
	/*
	 * The credential broker's engine (broker/http/), one per latchd on base:
	 * made in main() after the event loop, freed after the sandboxes.  NULL
	 * until the broker is wired in.
	 */
	struct latch_http *http;
	/* room.c's rooms; confine.c's state (NULL: latchd runs unconfined) */
	struct room_svc *rooms;
	bool rooms_own_http; /* room.c made http (the VM broker has not yet) */
	struct confine *confine;
};

/* main.c */
__attribute__((format(printf, 1, 2))) void latchd_log(const char *fmt, ...);
void latchd_reload(struct latchd *ld);

/* control.c */
int control_listen(struct latchd *ld, char *err, size_t errlen);
void control_close(struct latchd *ld);
/* Answer a client; NULL (a switch nobody asked for) is fine.  obj is taken. */
void control_reply(struct client *c, json_t *obj);
__attribute__((format(printf, 2, 3))) void control_reply_error(struct client *c, const char *fmt, ...);
/* The reply comes later (control_reply): read nothing more from c until then. */
void control_wait(struct client *c);
struct latchd *client_latchd(const struct client *c);

/* events.c */
/* One audit entry; fields is taken (decref'd).  A failure is logged, never fatal. */
void latchd_audit(struct latchd *ld, const char *sandbox, const char *kind, const char *decision, const char *reason,
		  json_t *fields);
bool latchd_audit_wanted(struct latchd *ld, const char *sandbox, const char *kind);
/* A query a resolver refused (its reason, as resolver.h names it), kind dns. */
void latchd_audit_dns_refused(struct latchd *ld, const char *who, const char *qname, uint16_t qtype,
			     const char *reason);
json_t *latchd_addr_json(const struct latch_addr *a);
void events_open(struct sandbox *s);
void events_close(struct sandbox *s);

/* sandbox.c */
struct sandbox *sandbox_find(struct latchd *ld, const char *name);
void sandbox_resolver_opts(struct sandbox *s, struct latch_resolver_opts *o);
void sandbox_free(struct sandbox *s);
/* Does an explicit CIDR entry of the profile cover this address? (the rebinding filter's exception) */
bool profile_cidr_covers(const struct latch_profile *p, const struct latch_addr *a);
/* Serve every sandbox that has pins; drop those whose pins are gone. */
void sandboxes_scan(struct latchd *ld);

/* switch.c */
int switch_load_profile(struct latchd *ld, const char *name, struct latch_profile *p, char *err, size_t errlen);
void switch_begin(struct sandbox *s, struct latch_profile *p, struct client *c, bool carry_live_learned);
/* The sandbox goes away: answer the switch's client, if any, and drop the switch. */
void switch_abandon(struct sandbox *s);
/* Stop the stepwise collection of an old policy generation (sandbox going away). */
void switch_gc_stop(struct sandbox *s);
void switch_refresh_hosts(struct sandbox *s, uint64_t now);
int switch_learn(struct sandbox *s, const struct latch_entry *e, uint64_t expires, int origin, char *err,
		 size_t errlen);

/* learned.c */
int learned_answered(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl);
void learned_keep_allowed(struct sandbox *s);
void learned_prune(struct sandbox *s, uint64_t now);
void learned_load(struct sandbox *s);
void learned_save(struct sandbox *s);
void learned_remove_file(const char *name);
void learned_free(struct sandbox *s);

/* periodic.c */
void periodic_run(struct latchd *ld, uint64_t now);
void periodic_stop(struct latchd *ld);

#endif
