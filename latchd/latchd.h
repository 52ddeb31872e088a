/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * latchd.h - what latchd's parts share (private to latchd/).
 *
 * main.c owns the one struct latchd and hands it on: every part gets it as
 * an argument, or through the sandbox (s->ld) or client it was called for.
 * No part keeps state of its own in a global.  The parts, by job:
 *
 *	main.c		arguments, signals, the loop and its tick
 *	log.c		the log lines (journal priorities or "latchd: " on stderr)
 *	reload.c	latch.conf and the active profiles, at start and on SIGHUP
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
 *	broker.c	the credential broker: the engine (broker/) on the loop,
 *			each kit sandbox's listener and routes, the kit and backend ops
 *	meter.c		the spend caps: budget/ on each AI provider route's meter seam
 *	verify_op.c	`latch verify`'s name rows: the resolver's decisions test-run
 *	room.c		rooms' services: a resolver and a broker on each room's own
 *			address (room.h)
 *	confine.c	latchd in a cgroup of its own under the room programs, and
 *			the addresses it may connect to (room.h)
 *	grant*.c	grants: timed openings of host names the host resolves, made
 *			with `latch grant` or asked for by the sandbox and approved from
 *			outside (grant.h lists the files)
 */
#ifndef LATCH_LATCHD_H
#define LATCH_LATCHD_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "resolver/resolver.h"
#include "config/config.h"
#include "loader/loader.h"
#include "profile/profile.h"

#define NS_PER_S 1000000000ULL
/* learned and host-name rules stay this long past their TTL (established flows re-checked find them) */
#define RESOLVED_GRACE_NS (3600ULL * NS_PER_S)
#define SCAN_INTERVAL_S 2
/* the profile's ports for a name and those of the kit entries naming it (more kit entries: fewer ports) */
#define SANDBOX_NAME_PORTS_MAX 33

struct event;
struct event_base;
struct evconnlistener;
struct client; /* control.c */
struct sandbox;
struct latch_http; /* the credential broker's engine (broker/) */
struct broker; /* one sandbox's kit as the broker serves it (broker.c) */
struct latch_http_sandbox;
struct latch_http_event;
struct latch_kit;
struct latch_kit_cred;
struct latch_kit_secrets;
struct room_svc; /* room.c */
struct confine; /* confine.c */
struct meter; /* meter.c */
struct latch_http_meter;

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
	struct latch_pentry *extra; /* the kit's egress_allow as it was when the switch began */
	int n_extra;
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
	 * The kit's egress_allow entries in force: composed into the policy
	 * with the profile (they moved in with it from the switch), and what
	 * the name checks consult beside the profile.  Host names in hosts[]
	 * may point into them.
	 */
	struct latch_pentry *extra;
	int n_extra;
	/*
	 * The sandbox's kit as the credential broker serves it (broker.c): its
	 * listener on the host address(es) and the routes, opened by
	 * sandbox_add() beside the resolver from the stored kit state, replaced
	 * by the kit op, and freed (every key wiped) by latchd_sandbox_free() or when
	 * the sandbox stops.  NULL: no kit.
	 */
	struct broker *broker;
	struct grants *grants; /* grant.h: its grants, asks and their caps' history */
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
	struct event *audit_anchor_ev; /* the deferred anchor of the audit log's head (events.c) */
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
	/* The credential broker's engine (broker/), one per latchd on base; broker.c */
	struct latch_http *http;
	/* room.c's rooms; confine.c's state (NULL: latchd runs unconfined) */
	struct room_svc *rooms;
	struct confine *confine;
	/* meter.c: the spend caps (budget/, the ledger's sole writer) */
	struct meter *meter;
	struct notifier *notifier; /* grant_notify.c: the notifier processes running */
};

/*
 * log.c: one line on stderr.  Under systemd (stderr is the journal's
 * stream) it carries a syslog priority ("<3>", SyslogLevelPrefix) and no
 * "latchd: " of its own, which the journal adds; elsewhere "latchd: ".
 * latchd_log is notice, or warning when the line starts "warning:";
 * latchd_log_err is an error (`journalctl -p err` shows it).
 */
__attribute__((format(printf, 1, 2))) void latchd_log(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void latchd_log_err(const char *fmt, ...);
/* reload.c: latch.conf into C and the upstreams; nothing of latchd changes on failure */
int latchd_read_conf(struct latch_conf *c, struct latch_addr *up, uint16_t *up_port, int *n_up, char *err,
		     size_t errlen);
int latchd_reload(struct latchd *ld, char *err, size_t errlen);
/* latchd_reload, then the price table: SIGHUP and the control socket's reload */
int latchd_reload_all(struct latchd *ld, char *err, size_t errlen);

/* control.c */
int latchd_control_listen(struct latchd *ld, char *err, size_t errlen);
void latchd_control_close(struct latchd *ld);
/* Answer a client; NULL (a switch nobody asked for) is fine.  obj is taken. */
void latchd_control_reply(struct client *c, json_t *obj);
__attribute__((format(printf, 2, 3))) void latchd_control_reply_error(struct client *c, const char *fmt, ...);
/* The reply comes later (latchd_control_reply): read nothing more from c until then. */
void latchd_control_wait(struct client *c);
struct latchd *latchd_of_client(const struct client *c);

/* events.c */
/* One audit entry; fields is taken (decref'd).  A failure is logged, never fatal. */
void latchd_audit(struct latchd *ld, const char *sandbox, const char *kind, const char *decision, const char *reason,
		  json_t *fields);
bool latchd_audit_wanted(struct latchd *ld, const char *sandbox, const char *kind);
/* Stop the deferred anchor's timer (shutdown: audit_close() anchors the head itself). */
void latchd_audit_stop(struct latchd *ld);
/* A query a resolver refused (its reason, as resolver.h names it), kind dns. */
void latchd_audit_dns_refused(struct latchd *ld, const char *who, const char *qname, uint16_t qtype,
			      const char *reason);
json_t *latchd_addr_json(const struct latch_addr *a);
void latchd_events_open(struct sandbox *s);
void latchd_events_close(struct sandbox *s);

/* sandbox.c */
struct sandbox *latchd_sandbox_find(struct latchd *ld, const char *name);
/*
 * The ports an answer for NAME is learned under, as compose gives them
 * (profile/profile.h, rule 4): the profile's union, then each matching kit
 * entry's.  Returns how many of ports[max] it filled; 0: not allowed (and
 * always under `open`, which needs no entries).
 */
int latchd_sandbox_name_ports(const struct sandbox *s, const char *name, struct latch_entry *ports, int max);
/*
 * Does the policy allow NAME on TCP port PORT (CONNECT)?  The port is part
 * of the match: an entry's ports (443 and 80 when it names none), a grant's
 * ports, `open`.
 */
bool latchd_sandbox_name_port_allowed(void *arg, const char *name, uint16_t port);
/* Does the entry E (a profile's, a kit's, a grant's) take TCP to PORT? */
bool latchd_entry_takes_tcp(const struct latch_entry *e, uint16_t port);
void latchd_sandbox_resolver_opts(struct sandbox *s, struct latch_resolver_opts *o);
void latchd_sandbox_free(struct sandbox *s);
/* Does an explicit CIDR entry of the profile cover this address? (the rebinding filter's exception) */
bool latchd_cidr_covers(const struct latch_profile *p, const struct latch_addr *a);
/* Serve every sandbox that has pins; drop those whose pins are gone. */
void latchd_sandboxes_scan(struct latchd *ld);

/* switch.c */
int latchd_switch_load_profile(struct latchd *ld, const char *name, struct latch_profile *p, char *err, size_t errlen);
void latchd_switch_begin(struct sandbox *s, struct latch_profile *p, struct client *c, bool carry_live_learned);
/* The sandbox goes away: answer the switch's client, if any, and drop the switch. */
void latchd_switch_abandon(struct sandbox *s);
/* Stop the stepwise collection of an old policy generation (sandbox going away). */
void latchd_switch_gc_stop(struct sandbox *s);
void latchd_switch_refresh_hosts(struct sandbox *s, uint64_t now);
int latchd_switch_learn(struct sandbox *s, const struct latch_entry *e, uint64_t expires, int origin, char *err,
			size_t errlen);

/* learned.c */
int latchd_learned_answered(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl);
/* Record NAME at E's address in the names map when E reaches the TLS port (learned.c); 0 or -errno. */
int latchd_learned_name(struct sandbox *s, const char *name, const struct latch_entry *e, uint64_t expires, char *err,
			size_t errlen);
void latchd_learned_keep_allowed(struct sandbox *s);
void latchd_learned_prune(struct sandbox *s, uint64_t now);
void latchd_learned_load(struct sandbox *s);
void latchd_learned_save(struct sandbox *s);
void latchd_learned_remove_file(const char *name);
void latchd_learned_free(struct sandbox *s);
void latchd_boot_id(char *buf, size_t len);

/* grant.c, grant_ops.c, grant_notify.c (grant.h has the rest) */
void latchd_grants_open(struct sandbox *s); /* its grants back from NAME.grants */
void latchd_grants_close(struct sandbox *s); /* saved; waiting asks and clients answered */
void latchd_grants_forget(struct sandbox *s); /* the sandbox is gone: NAME.grants goes */
void latchd_grants_disown(struct sandbox *s); /* NAME was pinned again: its NAME.grants is the new one's */
/* Does an active grant open this normalized name?  The resolver may answer it then. */
bool latchd_grant_name_allowed(const struct sandbox *s, const char *name);
/* The same, on TCP port PORT among the grant's ports (CONNECT). */
bool latchd_grant_name_port_allowed(const struct sandbox *s, const char *name, uint16_t port);
/* The resolver answered a granted name: its addresses join the grant, with its deadline. */
int latchd_grant_answered(struct sandbox *s, const char *qname, const struct latch_addr *addrs,
			  int n); /* 0 or -errno */
void latchd_grants_tick(struct sandbox *s, uint64_t now); /* timeouts, expiry, refreshes, NAME.grants */
/* ops grant, grants, approve, deny; false when OP is none of them */
void latchd_grant_op_grant(struct client *c, json_t *req);
void latchd_grant_op_grants(struct client *c, json_t *req);
void latchd_grant_op_approve(struct client *c, json_t *req);
void latchd_grant_op_deny(struct client *c, json_t *req);
void latchd_grant_client_gone(struct latchd *ld, struct client *c);
void latchd_notifier_tick(struct latchd *ld, uint64_t now);
void latchd_notifier_stop(struct latchd *ld);

/* broker.c */
/* First thing in main(): no core dumps or ptrace, and jansson's frees wiped (keys pass through). */
void latchd_broker_harden(void);
int latchd_broker_init(struct latchd *ld, char *err, size_t errlen);
void latchd_broker_limits(struct latchd *ld); /* latch.conf's broker_body_max and broker_metered_hold_max, again */
void latchd_broker_fini(struct latchd *ld); /* after the sandboxes */
/* Serve the sandbox's stored kit (secret_files only: env keys must be handed again). */
void latchd_broker_open(struct sandbox *s);
/* Close its listener and wipe its keys. */
void latchd_broker_close(struct sandbox *s);
/* The sandbox is gone (its pins): close, and remove its kit state. */
void latchd_broker_forget(struct sandbox *s);
/* A copy of the kit's egress_allow entries (none: *out NULL); free() it.  0 or -ENOMEM. */
int latchd_broker_kit_egress(const struct sandbox *s, struct latch_pentry **out, int *n);
json_t *latchd_broker_json(const struct sandbox *s);
/*
 * A kit credential CR as a route on listener HS (a sandbox's or a room's):
 * PLACEHOLDER, its methods and paths, its own upstream and its TLS
 * alternatives (plain-HTTP ones are left out, logged for WHO), each with
 * its key from SEC or the variable or file it should have come from, and
 * the spend meter when an upstream is an AI provider's (meter.c).
 */
int latchd_broker_route_add(struct latchd *ld, struct latch_http_sandbox *hs, const char *who,
			    const struct latch_kit_cred *cr, const char *placeholder,
			    const struct latch_kit_secrets *sec, char *err, size_t errlen);
/* The ports of KIT's upstreams (credentials' and alternatives') on host NAME, into PORTS (TCP); how many. */
int latchd_broker_kit_ports(const struct latch_kit *kit, const char *name, struct latch_entry *ports);
/* One broker decision as WHO's audit entry: kind route, other or refused (rate-limited). */
void latchd_broker_event_audit(struct latchd *ld, const char *who, const struct latch_http_event *ev);
void latchd_broker_op_kit(struct client *c, json_t *req);
void latchd_broker_op_backend(struct client *c, json_t *req);

/* meter.c */
/* Open the ledger as its sole writer, with latch.conf's caps (before any socket: a second latchd stops here). */
int latchd_meter_open(struct latchd *ld, char *err, size_t errlen);
void latchd_meter_tick(struct latchd *ld);
int latchd_meter_reload(struct latchd *ld, char *err,
			size_t errlen); /* SIGHUP: the price table, and latch.conf's caps as ld->conf has them */
void latchd_meter_close(struct latchd *ld); /* after every listener */
/* The meter of credential CR's route for WHO into OUT; false when no upstream of it is metered. */
bool latchd_meter_route(struct latchd *ld, const char *who, const struct latch_kit_cred *cr,
			struct latch_http_meter *out);

/* verify_op.c: {"op":"verify_names"}, `latch verify`'s test-runs of the resolver's decisions */
void latchd_verify_op(struct client *c, json_t *req);

/* periodic.c */
void latchd_periodic_run(struct latchd *ld, uint64_t now);
void latchd_periodic_stop(struct latchd *ld);

#endif
