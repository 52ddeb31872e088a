// SPDX-License-Identifier: GPL-2.0-only
/*
 * latchd.c - the daemon: named policy, the per-sandbox resolvers, and the
 * kernel's deny events into the audit log.
 *
 * latchd finds the sandboxes by their pins (/sys/fs/bpf/latch/NAME) and, for
 * each, runs a filtering resolver on the sandbox's resolver address and
 * reads its ring buffer.  A sandbox whose profile is stored under
 * var/lib/latch/policy/ gets that profile compiled into its maps: CIDR
 * entries as they are, host names resolved here (never by the guest) with
 * their TTL as the kernel deadline, refreshed before it runs out.  Answers
 * the resolver gives the guest become learned entries.
 *
 * Enforcement never depends on latchd: everything it writes is in pinned
 * maps, and every deadline is checked by the program.  Killing latchd leaves
 * the boundary as it was; starting it again picks up the stored profiles.
 *
 * One thread, one libevent loop.  SIGHUP re-reads latch.conf and every
 * active profile and swaps them in only when all of them are valid; SIGTERM
 * and SIGINT shut down cleanly.  The socket is $LATCH_ROOT/run/latch/
 * latchd.sock, root-only; see broker/latchd_client.h for the protocol.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit/audit.h"
#include "broker/broker.h"
#include "profile/profile.h"
#include "broker/dns/resolver.h"
#include "loader/loader.h"
#include "config/config.h"

#define NS_PER_S 1000000000ULL
/* learned and host-name rules stay this long past their TTL (established flows re-checked find them) */
#define RESOLVED_GRACE_NS (3600ULL * NS_PER_S)
#define SCAN_INTERVAL_S 2
#define HOST_RETRY_S 5
#define REQUEST_MAX 65536

/* A profile's host name, resolved here and kept fresh. */
struct hostname {
	const struct latch_pentry *pe; /* in the sandbox's profile */
	struct latch_addr addr[LATCH_RESOLVER_ADDRS_MAX];
	int n;
	uint64_t expires_ns; /* boot clock; 0: never resolved */
	uint64_t retry_ns;   /* after a failure, not before */
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
#define LEARNED_BUCKETS 4096

struct client;
struct sandbox;

/* A profile switch waiting for its host names. */
struct pending_switch {
	struct sandbox *s;
	struct latch_profile prof;
	struct hostname *hosts;
	int n_hosts, waiting;
	bool carry_unknown_learned; /* at startup: learned rules in the maps have no name here */
	struct client *client;	    /* who asked, or NULL (startup, reload) */
	char from[LATCH_PROFILE_NAME_MAX + 1];
};

struct lookup_ctx {
	struct sandbox *s;
	struct pending_switch *sw; /* for a switch; NULL for a refresh */
	int idx;		   /* hostname index */
	unsigned generation;	   /* of s->hosts, for a refresh */
};

struct sandbox {
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
	int *learned_index; /* LEARNED_BUCKETS heads into learned[], by (name, address) */
	bool learned_dirty; /* to be written to NAME.learned on the next tick */
	struct pending_switch *sw;
	bool seen;
	struct sandbox *next;
};

struct client {
	struct bufferevent *bev;
	struct client *next;
	bool waiting; /* a reply is pending (a switch) */
};

static struct {
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
} d;

__attribute__((format(printf, 1, 2))) static void logf_(const char *fmt, ...)
{
	va_list ap;

	fputs("latchd: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* One audit entry; fields is taken (decref'd).  A failure is logged, never fatal. */
static void audit(const char *sandbox, const char *kind, const char *decision, const char *reason, json_t *fields)
{
	struct audit_entry e = { .sandbox = sandbox, .kind = kind, .decision = decision, .reason = reason };
	char *text = NULL;
	int rc;

	if (!d.audit) {
		json_decref(fields);
		return;
	}
	if (fields)
		text = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(fields);
	e.fields = text;
	rc = audit_append(d.audit, &e);
	if (rc && rc != -EAGAIN)
		logf_("audit log: %s (%s %s %s not recorded)", audit_error(d.audit), sandbox, kind, decision);
	free(text);
}

/*
 * Is there room in the audit log for (sandbox, kind) right now?  Busy paths
 * (every answer, refusal and kernel deny) ask first, so an entry the rate
 * limit would drop is never built; a skipped one is counted all the same.
 */
static bool audit_wanted(const char *sandbox, const char *kind)
{
	return d.audit && audit_room(d.audit, sandbox, kind);
}

static json_t *addr_json(const struct latch_addr *a)
{
	char buf[INET6_ADDRSTRLEN];

	latch_addr_format(a, buf, sizeof(buf));
	return json_string(buf);
}

/* ---- replies ---- */

static void client_free(struct client *c)
{
	for (struct client **pp = &d.clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	/* a switch still running for this client must not answer into freed memory */
	for (struct sandbox *s = d.sandboxes; s; s = s->next)
		if (s->sw && s->sw->client == c)
			s->sw->client = NULL;
	bufferevent_free(c->bev);
	free(c);
}

static void reply(struct client *c, json_t *obj)
{
	char *text;

	if (!c) {
		json_decref(obj);
		return;
	}
	text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (text) {
		evbuffer_add_printf(bufferevent_get_output(c->bev), "%s\n", text);
		free(text);
	}
	c->waiting = false;
}

__attribute__((format(printf, 2, 3))) static void reply_error(struct client *c, const char *fmt, ...)
{
	char msg[LATCH_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply(c, json_pack("{s:b, s:s}", "ok", 0, "error", msg));
}

/* ---- the policy a sandbox's resolver consults ---- */

static struct sandbox *sandbox_find(const char *name)
{
	for (struct sandbox *s = d.sandboxes; s; s = s->next)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

static bool name_allowed(void *arg, const char *name)
{
	struct sandbox *s = arg;
	struct latch_entry ports;

	if (!s->have_profile)
		return false; /* no named policy: the resolver answers nothing */
	return s->prof.open || latch_profile_match(&s->prof, name, &ports);
}

/* Does an explicit CIDR entry of the profile cover this address? */
static bool cidr_covers(const struct latch_profile *p, const struct latch_addr *a)
{
	for (int i = 0; i < p->n; i++) {
		const struct latch_pentry *pe = &p->entries[i];
		int bits = pe->entry.prefixlen, full = bits / 8;

		if (pe->kind != LATCH_PENTRY_CIDR || pe->entry.addr.family != a->family)
			continue;
		if (memcmp(pe->entry.addr.bytes, a->bytes, full))
			continue;
		if (bits % 8 && (pe->entry.addr.bytes[full] ^ a->bytes[full]) & (0xff00 >> (bits % 8)))
			continue;
		return true;
	}
	return false;
}

/*
 * The rebinding filter: a public name may not answer with a private,
 * loopback, link-local, CGNAT or metadata address, unless the profile allows
 * that range outright with a CIDR entry (then the name adds no reach).
 */
static const char *addr_refused(void *arg, const struct latch_addr *a)
{
	struct sandbox *s = arg;
	const char *why = latch_addr_nonpublic(a);

	if (why && s->have_profile && cidr_covers(&s->prof, a))
		return NULL;
	return why;
}

/* The kernel entry for one address of a name: that name's ports. */
static void address_entry(const struct latch_addr *a, const struct latch_entry *ports, struct latch_entry *e)
{
	*e = *ports;
	e->addr = *a;
	e->prefixlen = a->family == AF_INET ? 32 : 128;
}

static unsigned learned_hash(const char *name, const struct latch_addr *a)
{
	return latch_fnv1a(latch_fnv1a(LATCH_FNV1A_INIT, name, strlen(name)), a->bytes, 16) % LEARNED_BUCKETS;
}

/* Rebuild the index after entries were removed (swapped out of the array). */
static void learned_reindex(struct sandbox *s)
{
	if (!s->learned_index)
		return;
	for (int b = 0; b < LEARNED_BUCKETS; b++)
		s->learned_index[b] = -1;
	for (int i = 0; i < s->n_learned; i++) {
		unsigned h = learned_hash(s->learned[i].name, &s->learned[i].addr);

		s->learned[i].next = s->learned_index[h];
		s->learned_index[h] = i;
	}
}

/* Remember (name, address) until expires; every answer comes here, so it is a hash lookup. */
static void remember_learned(struct sandbox *s, const char *name, const struct latch_addr *a, uint64_t expires)
{
	unsigned h;

	if (!s->learned_index) {
		s->learned_index = malloc(LEARNED_BUCKETS * sizeof(*s->learned_index));
		if (!s->learned_index)
			return;
		learned_reindex(s);
	}
	h = learned_hash(name, a);
	for (int i = s->learned_index[h]; i >= 0; i = s->learned[i].next) {
		struct learned *l = &s->learned[i];

		if (l->addr.family == a->family && !memcmp(l->addr.bytes, a->bytes, 16) && !strcmp(l->name, name)) {
			if (expires > l->expires_ns) {
				l->expires_ns = expires;
				s->learned_dirty = true;
			}
			return;
		}
	}
	if (s->n_learned == s->cap_learned) {
		int cap = s->cap_learned ? s->cap_learned * 2 : 64;
		struct learned *n = realloc(s->learned, cap * sizeof(*n));

		if (!n)
			return;
		s->learned = n;
		s->cap_learned = cap;
	}
	snprintf(s->learned[s->n_learned].name, sizeof(s->learned[0].name), "%s", name);
	s->learned[s->n_learned].addr = *a;
	s->learned[s->n_learned].expires_ns = expires;
	s->learned[s->n_learned].next = s->learned_index[h];
	s->learned_index[h] = s->n_learned++;
	s->learned_dirty = true;
}

/*
 * The learned names outlive latchd in var/lib/latch/policy/NAME.learned, so
 * that a restarted latchd knows which name each learned entry in the maps
 * answered, and a later switch keeps the ones still allowed.  Deadlines are
 * on the boot clock: the file names the boot it belongs to, and a file of
 * another boot is ignored.
 */
static void boot_id(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (!f || !fgets(buf, len, f))
		snprintf(buf, len, "unknown");
	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static int learned_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, "var/lib/latch/policy/%s.learned", name);
}

static void learned_save(struct sandbox *s)
{
	char path[PATH_MAX], id[64], *text = NULL;
	size_t len = 0;
	FILE *f;

	if (learned_path(s->name, path, sizeof(path)) || !(f = open_memstream(&text, &len)))
		return;
	boot_id(id, sizeof(id));
	fprintf(f, "boot %s\n", id);
	for (int i = 0; i < s->n_learned; i++) {
		char a[INET6_ADDRSTRLEN];

		latch_addr_format(&s->learned[i].addr, a, sizeof(a));
		fprintf(f, "%llu %s %s\n", (unsigned long long)s->learned[i].expires_ns, a, s->learned[i].name);
	}
	/* a missing policy directory: it appears with the first profile */
	if (!fclose(f) && !latch_write_atomic(path, 0600, text, len))
		s->learned_dirty = false;
	free(text);
}

static void learned_load(struct sandbox *s)
{
	char path[PATH_MAX], line[512], id[64], want[80];
	uint64_t now = latch_now_boot_ns();
	FILE *f;

	if (learned_path(s->name, path, sizeof(path)) || !(f = fopen(path, "re")))
		return;
	boot_id(id, sizeof(id));
	snprintf(want, sizeof(want), "boot %s\n", id);
	if (!fgets(line, sizeof(line), f) || strcmp(line, want)) {
		fclose(f);
		return; /* another boot: its deadlines mean nothing now, and its maps are gone */
	}
	while (fgets(line, sizeof(line), f)) {
		char addr[INET6_ADDRSTRLEN + 1], raw[LATCH_DNS_NAME_MAX + 1], name[LATCH_DNS_NAME_MAX + 1];
		char e[LATCH_ERR_MAX];
		unsigned long long expires;
		struct latch_addr a;

		if (sscanf(line, "%llu %46s %253s", &expires, addr, raw) != 3 ||
		    latch_parse_addr(addr, &a, e, sizeof(e)) || latch_dns_name_normalize(raw, name, sizeof(name)))
			continue;
		if (expires + RESOLVED_GRACE_NS > now)
			remember_learned(s, name, &a, expires);
	}
	fclose(f);
	s->learned_dirty = false;
}

/*
 * How long a learned write waits for the policy lock, which `latch egress
 * allow|revoke` holds for a few milliseconds.  latchd is one event loop: the
 * wait holds up every sandbox's resolver, so it is short, and an answer
 * whose entry could not be written is still sent (its connections are then
 * dropped: fail closed) with a line in the log.
 */
#define LEARN_LOCK_WAIT_MS 2000

/*
 * A learned or host-name entry into the kernel.  The write is a
 * read-modify-write of the address's rules, so it holds the policy lock:
 * otherwise a `latch egress revoke` of a port on the same address, landing
 * between the read and the write, would be undone.  A cached answer, which
 * changes nothing, takes no lock.
 */
static int learn(struct sandbox *s, const struct latch_entry *e, uint64_t expires, int origin, char *err,
		 size_t errlen)
{
	int lock, rc = latch_policy_learn_needed(s->sb, e, expires, origin);

	if (rc <= 0)
		return rc < 0 ? latch_errf(err, errlen, rc, "cannot read the live entry: %s", strerror(-rc)) : 0;
	lock = latch_policy_lock_wait(s->name, LEARN_LOCK_WAIT_MS, err, errlen);
	if (lock < 0)
		return lock;
	rc = latch_policy_learn(s->sb, e, expires, origin, err, errlen);
	latch_policy_unlock(lock);
	return rc;
}

/*
 * Runs before the reply leaves latchd: the entry is in the kernel when the
 * guest connects.  0 when every address is (or needs not be) in the kernel;
 * the resolver then skips this for later cache hits of the same answer.
 */
static int answered(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl)
{
	struct sandbox *s = arg;
	uint64_t expires = latch_now_boot_ns() + ttl * NS_PER_S;
	struct latch_entry ports;
	char err[LATCH_ERR_MAX];
	json_t *list;
	bool want;
	int rc = 0;

	if (!s->have_profile || s->prof.open)
		return 0; /* open: the kernel passes everything already */
	if (!latch_profile_match(&s->prof, qname, &ports))
		return 0;
	want = audit_wanted(s->name, "learned");
	list = want ? json_array() : NULL;
	for (int i = 0; i < n; i++) {
		struct latch_entry e;

		address_entry(&addrs[i], &ports, &e);
		if (learn(s, &e, expires, LATCH_ORIGIN_LEARNED, err, sizeof(err))) {
			logf_("%s: learned entry for %s: %s", s->name, qname, err);
			rc = -EAGAIN;
		} else {
			remember_learned(s, qname, &addrs[i], expires);
		}
		if (want)
			json_array_append_new(list, addr_json(&addrs[i]));
	}
	if (want)
		audit(s->name, "learned", "allow", "latchd.dns.answer",
		      json_pack("{s:s, s:o, s:i}", "name", qname, "addresses", list, "ttl", (int)ttl));
	return rc;
}

static void refused(void *arg, const char *qname, uint16_t qtype, const char *reason)
{
	struct sandbox *s = arg;
	char code[AUDIT_TOKEN_MAX];

	if (!audit_wanted(s->name, "dns"))
		return;
	snprintf(code, sizeof(code), "latchd.dns.%s", reason);
	audit(s->name, "dns", "deny", code, json_pack("{s:s, s:i}", "name", qname, "qtype", qtype));
}

/* ---- profile switches ---- */

/* The host names of a profile, unresolved. */
static struct hostname *hosts_of(const struct latch_profile *p, int *n)
{
	struct hostname *h;
	int cnt = 0;

	for (int i = 0; i < p->n; i++)
		cnt += p->entries[i].kind == LATCH_PENTRY_HOST;
	h = calloc(cnt ? cnt : 1, sizeof(*h));
	if (!h)
		return NULL;
	cnt = 0;
	for (int i = 0; i < p->n; i++)
		if (p->entries[i].kind == LATCH_PENTRY_HOST)
			h[cnt++].pe = &p->entries[i];
	*n = cnt;
	return h;
}

struct carry {
	struct latch_policy_spec *specs;
	int n, cap;
	bool unknown_learned;
};

static int push_spec(struct carry *c, const struct latch_entry *e, uint64_t expires, int origin)
{
	if (c->n == c->cap) {
		int cap = c->cap ? c->cap * 2 : 256;
		struct latch_policy_spec *n = realloc(c->specs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		c->specs = n;
		c->cap = cap;
	}
	c->specs[c->n].entry = *e;
	c->specs[c->n].expires_ns = expires;
	c->specs[c->n].origin = origin;
	c->n++;
	return 0;
}

/*
 * What a switch keeps from the live generation: entries an operator added
 * with `latch egress allow` (they are not the profile's), and at startup the
 * learned answers whose names latchd no longer knows.  Grants live in the
 * timed maps, which a switch does not touch.
 */
static int carry_item(const struct latch_policy_item *it, void *arg)
{
	struct carry *c = arg;
	struct latch_entry e = it->entry;

	if (it->timed)
		return 0;
	if (it->rule.origin == LATCH_ORIGIN_EGRESS ||
	    (c->unknown_learned && it->rule.origin == LATCH_ORIGIN_LEARNED))
		push_spec(c, &e, it->rule.expires_ns, it->rule.origin);
	return 0;
}

static void switch_free(struct pending_switch *sw)
{
	if (!sw)
		return;
	latch_profile_free(&sw->prof);
	free(sw->hosts);
	free(sw);
}

/* Collect a switched sandbox's old generation (arg: its name, strdup'ed). */
static void gc_later(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *s = arg ? sandbox_find(arg) : NULL;

	if (s && !s->sw)
		latch_policy_gc(s->sb);
	free(arg);
}

static void switch_commit(struct pending_switch *sw)
{
	struct sandbox *s = sw->s;
	uint64_t now = latch_now_boot_ns();
	struct carry c = { .unknown_learned = sw->carry_unknown_learned };
	char err[LATCH_ERR_MAX];
	json_t *hosts = json_array();
	int rc = 0, n_learned = 0, lock = -1;

	/* 1. the profile's own entries */
	for (int i = 0; i < sw->prof.n && !rc; i++)
		if (sw->prof.entries[i].kind == LATCH_PENTRY_CIDR)
			rc = push_spec(&c, &sw->prof.entries[i].entry, 0, LATCH_ORIGIN_PROFILE);
	/* 2. its host names, as resolved just now */
	for (int i = 0; i < sw->n_hosts && !rc; i++) {
		struct hostname *h = &sw->hosts[i];
		json_t *addrs = json_array();

		for (int k = 0; k < h->n && !rc; k++) {
			struct latch_entry e;

			address_entry(&h->addr[k], &h->pe->entry, &e);
			rc = push_spec(&c, &e, h->expires_ns, LATCH_ORIGIN_HOSTNAME);
			json_array_append_new(addrs, addr_json(&h->addr[k]));
		}
		json_array_append_new(hosts, json_pack("{s:s, s:o, s:s?}", "name", h->pe->name, "addresses", addrs,
						       "error", h->why));
	}
	/* 3. learned answers whose names the new profile still allows */
	for (int i = 0; i < s->n_learned && !rc && !sw->prof.open; i++) {
		struct learned *l = &s->learned[i];
		struct latch_entry ports, e;

		if (l->expires_ns + RESOLVED_GRACE_NS <= now || !latch_profile_match(&sw->prof, l->name, &ports))
			continue;
		address_entry(&l->addr, &ports, &e);
		rc = push_spec(&c, &e, l->expires_ns, LATCH_ORIGIN_LEARNED);
		n_learned++;
	}
	/*
	 * 4. manual entries (and, at startup, nameless learned ones).  From this
	 * read to the flip, `latch egress allow|revoke` waits on the policy lock:
	 * otherwise an allow could land in the old generation, or a revoke be
	 * undone by this carry.
	 */
	if (!rc && (lock = latch_policy_lock(s->name, err, sizeof(err))) < 0) {
		reply_error(sw->client, "%s: %s", s->name, err);
		goto out;
	}
	if (!rc && latch_policy_list(s->sb, carry_item, &c) < 0)
		rc = -EIO;
	if (rc) {
		latch_policy_unlock(lock);
		reply_error(sw->client, "%s: cannot build the policy: %s", s->name, strerror(-rc));
		goto out;
	}
	rc = latch_policy_switch(s->sb, c.specs, c.n, sw->prof.open, err, sizeof(err));
	latch_policy_unlock(lock);
	if (rc) {
		reply_error(sw->client, "%s: %s", s->name, err);
		audit(s->name, "profile", "fail", "latchd.profile.switch",
		      json_pack("{s:s, s:s, s:s}", "from", sw->from, "to", sw->prof.name, "error", err));
		goto out;
	}
	/* the old generation is idle now; deleting it can wait until the client has its answer */
	event_base_once(d.base, -1, EV_TIMEOUT, gc_later, strdup(s->name), &(struct timeval){ 0, 0 });
	latch_sandbox_read_config(s->sb, &s->cfg);
	/* the sandbox now runs the new profile: swap it in, with its hosts */
	latch_profile_free(&s->prof);
	free(s->hosts);
	s->prof = sw->prof;
	memset(&sw->prof, 0, sizeof(sw->prof));
	s->hosts = sw->hosts;
	s->n_hosts = sw->n_hosts;
	/* the hosts point into the profile, which moved with its entries array: still valid */
	sw->hosts = NULL;
	s->hosts_generation++;
	s->have_profile = true;
	/* learned answers the new profile does not allow are gone from the kernel: forget them */
	for (int i = 0; i < s->n_learned;) {
		struct latch_entry ports;

		if (!s->prof.open && latch_profile_match(&s->prof, s->learned[i].name, &ports)) {
			i++;
			continue;
		}
		s->learned[i] = s->learned[--s->n_learned];
	}
	learned_reindex(s);
	s->learned_dirty = true;
	latch_resolver_flush(s->res);
	if (latch_profile_state_write(s->name, s->prof.name, err, sizeof(err)))
		logf_("%s: %s", s->name, err);
	audit(s->name, "profile", "switch", "latchd.profile.switch",
	      json_pack("{s:s, s:s, s:i, s:i, s:b}", "from", sw->from, "to", s->prof.name, "entries", c.n,
			"learned_kept", n_learned, "uncontained", s->prof.open));
	reply(sw->client, json_pack("{s:b, s:s, s:s, s:i, s:i, s:o, s:b}", "ok", 1, "sandbox", s->name, "profile",
				    s->prof.name, "entries", c.n, "learned_kept", n_learned, "hosts", hosts,
				    "uncontained", s->prof.open));
	hosts = NULL;
out:
	json_decref(hosts);
	free(c.specs);
	s->sw = NULL;
	switch_free(sw);
}

static void host_resolved(struct hostname *h, const struct latch_addr *addrs, int n, uint32_t ttl, const char *why)
{
	uint64_t now = latch_now_boot_ns();

	h->in_flight = false;
	if (n < 0) {
		h->why = why; /* static strings from the resolver */
		h->retry_ns = now + HOST_RETRY_S * NS_PER_S;
		return;
	}
	h->why = NULL;
	h->n = n > LATCH_RESOLVER_ADDRS_MAX ? LATCH_RESOLVER_ADDRS_MAX : n;
	memcpy(h->addr, addrs, h->n * sizeof(*addrs));
	h->expires_ns = now + ttl * NS_PER_S;
}

static void switch_lookup_done(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
			       const char *why)
{
	struct lookup_ctx *lc = arg;
	struct pending_switch *sw = lc->sw;

	host_resolved(&sw->hosts[lc->idx], addrs, n, ttl, why);
	free(lc);
	if (--sw->waiting == 0)
		switch_commit(sw);
}

/*
 * Start a switch of sandbox s to profile p (taken).  The host names are
 * looked up first; the switch is committed, and the client answered, when
 * the last answer (or timeout) is in.
 */
static void switch_begin(struct sandbox *s, struct latch_profile *p, struct client *c, bool carry_unknown_learned)
{
	struct pending_switch *sw = calloc(1, sizeof(*sw));

	if (!sw) {
		latch_profile_free(p);
		reply_error(c, "out of memory");
		return;
	}
	sw->s = s;
	sw->prof = *p;
	memset(p, 0, sizeof(*p));
	sw->client = c;
	sw->carry_unknown_learned = carry_unknown_learned;
	snprintf(sw->from, sizeof(sw->from), "%s", s->have_profile ? s->prof.name : "");
	sw->hosts = hosts_of(&sw->prof, &sw->n_hosts);
	if (!sw->hosts) {
		reply_error(c, "out of memory");
		switch_free(sw);
		return;
	}
	s->sw = sw;
	sw->waiting = 1; /* held until every lookup is asked */
	for (int i = 0; i < sw->n_hosts; i++) {
		struct lookup_ctx *lc = calloc(1, sizeof(*lc));
		int rc;

		if (!lc) {
			sw->hosts[i].why = "out of memory";
			continue;
		}
		lc->s = s;
		lc->sw = sw;
		lc->idx = i;
		sw->waiting++;
		sw->hosts[i].in_flight = true;
		rc = latch_resolver_lookup(s->res, sw->hosts[i].pe->name, switch_lookup_done, lc);
		if (rc) {
			sw->hosts[i].in_flight = false;
			sw->hosts[i].why = rc == -EBUSY ? "busy" : "not a host name";
			sw->waiting--;
			free(lc);
		}
	}
	if (--sw->waiting == 0)
		switch_commit(sw);
}

/* Load profile NAME for sandbox s; 0 or -errno with a line in err. */
static int load_profile(const char *name, struct latch_profile *p, char *err, size_t errlen)
{
	return latch_profile_load(d.profile_dir, name, d.overlay, p, err, errlen);
}

/* ---- host name refresh ---- */

static void refresh_done(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
			 const char *why)
{
	struct lookup_ctx *lc = arg;
	struct sandbox *s = lc->s;
	struct hostname *h;
	char err[LATCH_ERR_MAX];

	if (lc->generation != s->hosts_generation || lc->idx >= s->n_hosts) {
		free(lc); /* the profile changed meanwhile */
		return;
	}
	h = &s->hosts[lc->idx];
	free(lc);
	host_resolved(h, addrs, n, ttl, why);
	if (n < 0) {
		logf_("%s: cannot refresh %s: %s (its entries expire at their TTL)", s->name, name, why);
		return;
	}
	for (int i = 0; i < h->n; i++) {
		struct latch_entry e;

		address_entry(&h->addr[i], &h->pe->entry, &e);
		if (learn(s, &e, h->expires_ns, LATCH_ORIGIN_HOSTNAME, err, sizeof(err)))
			logf_("%s: %s: %s", s->name, name, err);
	}
}

/* Ask again for every host name whose TTL is about to run out (the last tenth, at least 5 s). */
static void refresh_hosts(struct sandbox *s, uint64_t now)
{
	if (!s->have_profile || s->sw)
		return;
	for (int i = 0; i < s->n_hosts; i++) {
		struct hostname *h = &s->hosts[i];
		uint64_t margin = 5 * NS_PER_S;
		struct lookup_ctx *lc;

		if (h->in_flight || now < h->retry_ns)
			continue;
		if (h->expires_ns) {
			uint64_t ttl_ns = (uint64_t)d.conf.dns_ttl_max * NS_PER_S;

			if (ttl_ns / 10 > margin)
				margin = ttl_ns / 10;
			if (now + margin < h->expires_ns)
				continue;
		}
		lc = calloc(1, sizeof(*lc));
		if (!lc)
			return;
		lc->s = s;
		lc->idx = i;
		lc->generation = s->hosts_generation;
		h->in_flight = true;
		if (latch_resolver_lookup(s->res, h->pe->name, refresh_done, lc)) {
			h->in_flight = false;
			h->retry_ns = now + HOST_RETRY_S * NS_PER_S;
			free(lc);
		}
	}
}

/* ---- kernel deny events ---- */

static int on_event(const struct latch_event *ev, void *ctx)
{
	struct sandbox *s = ctx;
	struct latch_addr src = { 0 }, dst = { 0 };
	json_t *f;

	if (!audit_wanted(s->name, "kernel"))
		return 0;
	f = json_pack("{s:s, s:i}", "dir", ev->dir == LATCH_DIR_FROM_GUEST ? "from-guest" : "to-guest", "suppressed",
		      (int)ev->suppressed);
	if (ev->family == 4 || ev->family == 6) {
		src.family = dst.family = ev->family == 4 ? AF_INET : AF_INET6;
		memcpy(src.bytes, ev->src_addr, 16);
		memcpy(dst.bytes, ev->dst_addr, 16);
		json_object_set_new(f, "src", addr_json(&src));
		json_object_set_new(f, "dst", addr_json(&dst));
		json_object_set_new(f, "proto", json_integer(ev->proto));
		if (ev->dst_port)
			json_object_set_new(f, "dport", json_integer(ntohs(ev->dst_port)));
	} else {
		json_object_set_new(f, "ethertype", json_integer(ev->eth_proto));
	}
	audit(s->name, "kernel", "deny", latch_reason_name(ev->reason), f);
	return 0;
}

static void on_ring(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *s = arg;

	latch_events_consume(s->events);
}

/* ---- sandboxes ---- */

static void resolver_opts(struct sandbox *s, struct latch_resolver_opts *o)
{
	memset(o, 0, sizeof(*o));
	if (s->cfg.flags & LATCH_CFG_HAVE_RESOLVER4) {
		o->listen[o->n_listen].family = AF_INET;
		memcpy(&o->listen[o->n_listen++].v4, &s->cfg.resolver_ip4, 4);
	}
	if (s->cfg.flags & LATCH_CFG_HAVE_RESOLVER6) {
		o->listen[o->n_listen].family = AF_INET6;
		memcpy(o->listen[o->n_listen++].bytes, s->cfg.resolver_ip6, 16);
	}
	o->port = d.dns_port;
	o->n_upstream = d.n_upstream;
	memcpy(o->upstream, d.upstream, sizeof(o->upstream));
	memcpy(o->upstream_port, d.upstream_port, sizeof(o->upstream_port));
	o->ttl_min = d.conf.dns_ttl_min;
	o->ttl_max = d.conf.dns_ttl_max;
	/* only the guest, on its link, may ask; TCP queries pay the kernel's DNS rate */
	memcpy(o->guest.dev, s->cfg.ifname, sizeof(o->guest.dev) - 1);
	if (s->cfg.flags & LATCH_CFG_HAVE_IP4) {
		o->guest.addr[o->guest.n_addr].family = AF_INET;
		memcpy(&o->guest.addr[o->guest.n_addr++].v4, &s->cfg.guest_ip4, 4);
	}
	if (s->cfg.flags & LATCH_CFG_HAVE_IP6) {
		o->guest.addr[o->guest.n_addr].family = AF_INET6;
		memcpy(o->guest.addr[o->guest.n_addr++].bytes, s->cfg.guest_ip6, 16);
	}
	o->guest.rate = s->cfg.dns_rate;
	o->guest.burst = s->cfg.dns_burst;
	o->policy = (struct latch_resolver_policy){ .arg = s,
						    .name_allowed = name_allowed,
						    .addr_refused = addr_refused,
						    .answered = answered,
						    .refused = refused };
}

static void sandbox_free(struct sandbox *s)
{
	if (s->sw) {
		reply_error(s->sw->client, "%s: the sandbox went away during the switch", s->name);
		switch_free(s->sw);
	}
	latch_resolver_free(s->res); /* cancels lookups: no callback after this */
	if (s->learned_dirty)
		learned_save(s);
	if (s->rb_ev)
		event_free(s->rb_ev);
	latch_events_free(s->events);
	latch_profile_free(&s->prof);
	free(s->hosts);
	free(s->learned);
	free(s->learned_index);
	latch_sandbox_free(s->sb);
	free(s);
}

static struct sandbox *sandbox_add(const char *name)
{
	struct sandbox *s = calloc(1, sizeof(*s));
	struct latch_resolver_opts o;
	char err[LATCH_ERR_MAX], pname[LATCH_PROFILE_NAME_MAX + 2];

	if (!s)
		return NULL;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->sb = latch_sandbox_open(name, err, sizeof(err));
	if (!s->sb || latch_sandbox_read_config(s->sb, &s->cfg)) {
		logf_("%s: %s", name, s->sb ? "cannot read its config" : err);
		sandbox_free(s);
		return NULL;
	}
	resolver_opts(s, &o);
	if (o.n_listen) {
		s->res = latch_resolver_new(d.base, &o, err, sizeof(err));
		if (!s->res)
			logf_("%s: resolver: %s (its guest gets no DNS answers)", name, err);
	}
	if ((s->events = latch_events_open(s->sb, on_event, s))) {
		s->rb_ev = event_new(d.base, latch_events_fd(s->events), EV_READ | EV_PERSIST, on_ring, s);
		if (s->rb_ev)
			event_add(s->rb_ev, NULL);
	} else {
		logf_("%s: cannot read its deny events", name);
	}
	s->next = d.sandboxes;
	d.sandboxes = s;
	logf_("%s: serving (resolver %s)", name, s->res ? "up" : "none");
	/* its stored profile: compiled in again, keeping what the maps learned meanwhile */
	learned_load(s);
	if (latch_profile_state_read(name, pname, sizeof(pname)) == 0) {
		struct latch_profile p;

		if (!s->res) {
			logf_("%s: profile %s not applied: no resolver to look its names up with", name, pname);
		} else if (load_profile(pname, &p, err, sizeof(err))) {
			logf_("%s: profile %s not applied: %s (the maps keep what they hold)", name, pname, err);
		} else {
			switch_begin(s, &p, NULL, true);
		}
	}
	return s;
}

static int scan_one(const char *name, void *arg)
{
	struct sandbox *s = sandbox_find(name);

	if (!s)
		s = sandbox_add(name);
	if (s)
		s->seen = true;
	return 0;
}

/* Serve every sandbox that has pins; drop those whose pins are gone. */
static void scan(void)
{
	char path[PATH_MAX];

	for (struct sandbox *s = d.sandboxes; s; s = s->next)
		s->seen = false;
	latch_sandbox_list(scan_one, NULL);
	for (struct sandbox **pp = &d.sandboxes; *pp;) {
		struct sandbox *s = *pp;

		if (s->seen) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		logf_("%s: pins gone, no longer served", s->name);
		/* what it learned goes with it */
		if (!learned_path(s->name, path, sizeof(path)))
			unlink(path);
		s->learned_dirty = false;
		sandbox_free(s);
	}
}

/* ---- configuration ---- */

/* /etc/resolv.conf's nameservers, when latch.conf names no dns_upstream. */
static int upstreams_from_resolv_conf(struct latch_addr *a, uint16_t *port, int max)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], e[LATCH_ERR_MAX];
	int n = 0;

	if (!f)
		return 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		char addr[128];

		if (sscanf(line, " nameserver %127s", addr) == 1 && !latch_parse_addr(addr, &a[n], e, sizeof(e)))
			port[n++] = 53;
	}
	fclose(f);
	return n;
}

_Static_assert(LATCH_CONF_UPSTREAM_MAX == LATCH_RESOLVER_UPSTREAM_MAX, "latch.conf's upstreams go to the resolver as they are");

/* Read latch.conf into c and the upstreams; nothing global changes on failure. */
static int read_conf(struct latch_conf *c, struct latch_addr *up, uint16_t *up_port, int *n_up, char *err,
		     size_t errlen)
{
	int rc = latch_conf_load(c, err, errlen);

	if (rc)
		return rc;
	if (c->n_dns_upstream) {
		*n_up = c->n_dns_upstream;
		memcpy(up, c->dns_upstream, sizeof(c->dns_upstream));
		memcpy(up_port, c->dns_upstream_port, sizeof(c->dns_upstream_port));
	} else {
		*n_up = upstreams_from_resolv_conf(up, up_port, LATCH_RESOLVER_UPSTREAM_MAX);
	}
	return 0;
}

/*
 * SIGHUP: read latch.conf and every active profile; when all are valid, swap
 * them in (resolvers reconfigured, profiles switched).  One bad file changes
 * nothing anywhere, and says why.
 */
static void reload(void)
{
	struct latch_conf c;
	struct latch_addr up[LATCH_RESOLVER_UPSTREAM_MAX];
	uint16_t up_port[LATCH_RESOLVER_UPSTREAM_MAX];
	char err[LATCH_ERR_MAX];
	int n_up = 0, n = 0, i = 0;
	struct latch_profile *loaded;

	if (read_conf(&c, up, up_port, &n_up, err, sizeof(err))) {
		logf_("reload refused, nothing changed: %s", err);
		audit("latchd", "config", "refuse", "latchd.reload", json_pack("{s:s}", "error", err));
		return;
	}
	for (struct sandbox *s = d.sandboxes; s; s = s->next)
		n++;
	loaded = calloc(n ? n : 1, sizeof(*loaded));
	if (!loaded)
		return;
	for (struct sandbox *s = d.sandboxes; s; s = s->next, i++) {
		if (!s->have_profile)
			continue;
		if (load_profile(s->prof.name, &loaded[i], err, sizeof(err))) {
			logf_("reload refused, nothing changed: %s: %s", s->name, err);
			audit("latchd", "config", "refuse", "latchd.reload",
			      json_pack("{s:s, s:s}", "sandbox", s->name, "error", err));
			for (int k = 0; k < n; k++)
				latch_profile_free(&loaded[k]);
			free(loaded);
			return;
		}
	}
	/* all valid: swap */
	d.conf = c;
	d.n_upstream = n_up;
	memcpy(d.upstream, up, sizeof(up));
	memcpy(d.upstream_port, up_port, sizeof(up_port));
	i = 0;
	for (struct sandbox *s = d.sandboxes; s; s = s->next, i++) {
		struct latch_resolver_opts o;

		if (s->res) {
			resolver_opts(s, &o);
			if (latch_resolver_reconfigure(s->res, &o, err, sizeof(err)))
				logf_("%s: resolver: %s", s->name, err);
		}
		if (!s->have_profile)
			continue;
		if (s->sw || !s->res) {
			logf_("%s: a switch is running; the reloaded profile applies at the next one", s->name);
			latch_profile_free(&loaded[i]);
			continue;
		}
		switch_begin(s, &loaded[i], NULL, false);
	}
	free(loaded);
	scan();
	audit("latchd", "config", "reload", "latchd.reload", json_pack("{s:i}", "upstreams", n_up));
	logf_("reloaded: %d upstream(s), %d sandbox(es)", n_up, n);
}

/* ---- the socket API ---- */

static json_t *sandbox_json(struct sandbox *s)
{
	struct latch_resolver_stats st = { 0 };

	if (s->res)
		latch_resolver_stats(s->res, &st);
	return json_pack("{s:s, s:s?, s:b, s:b, s:i, s:i, s:{s:I, s:I, s:I, s:I, s:I, s:I}}", "name", s->name,
			 "profile", s->have_profile ? s->prof.name : NULL, "uncontained",
			 s->have_profile && s->prof.open, "switching", s->sw != NULL, "hosts", s->n_hosts, "learned",
			 s->n_learned, "resolver", "queries", (json_int_t)st.queries, "answered",
			 (json_int_t)st.answered, "refused", (json_int_t)st.refused, "upstream_sent",
			 (json_int_t)st.upstream_sent, "cache_hits", (json_int_t)st.cache_hits, "failed",
			 (json_int_t)st.failed);
}

static void handle(struct client *c, json_t *req)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	const char *name = json_string_value(json_object_get(req, "sandbox"));
	char err[LATCH_ERR_MAX];
	struct sandbox *s;
	int rc;

	if (!op)
		return reply_error(c, "request without \"op\"");
	if (!strcmp(op, "ping")) {
		json_t *list = json_array();

		for (s = d.sandboxes; s; s = s->next)
			json_array_append_new(list, sandbox_json(s));
		return reply(c, json_pack("{s:b, s:i, s:o}", "ok", 1, "pid", (int)getpid(), "sandboxes", list));
	}
	if (!strcmp(op, "rescan")) {
		scan();
		return reply(c, json_pack("{s:b}", "ok", 1));
	}
	if (!strcmp(op, "reload")) {
		reload();
		return reply(c, json_pack("{s:b}", "ok", 1));
	}
	if (!strcmp(op, "switch")) {
		const char *pname = json_string_value(json_object_get(req, "profile"));
		struct latch_profile p;

		if (!name || !pname)
			return reply_error(c, "switch needs \"sandbox\" and \"profile\"");
		scan(); /* a sandbox attached a moment ago */
		s = sandbox_find(name);
		if (!s)
			return reply_error(c, "no sandbox '%s'", name);
		if (!s->res)
			return reply_error(c, "%s: no resolver (the sandbox has no resolver address); named policy "
					      "needs one",
					   name);
		if (s->sw)
			return reply_error(c, "%s: a switch is already running; try again", name);
		if (latch_profile_name_check(pname, err, sizeof(err)))
			return reply(c, json_pack("{s:b, s:s, s:b}", "ok", 0, "error", err, "usage", 1));
		rc = load_profile(pname, &p, err, sizeof(err));
		if (rc) /* an unknown profile is the caller's mistake; a bad file is the host's */
			return reply(c, json_pack("{s:b, s:s, s:b}", "ok", 0, "error", err, "usage", rc == -ENOENT));
		c->waiting = true;
		switch_begin(s, &p, c, false);
		return;
	}
	reply_error(c, "unknown op '%s'; known: ping, rescan, reload, switch", op);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t len;

	while (!c->waiting && (line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF))) {
		json_error_t je;
		json_t *req = json_loadb(line, len, 0, &je);

		free(line);
		if (!req || !json_is_object(req)) {
			json_decref(req);
			reply_error(c, "not a JSON object: %s", je.text);
			continue;
		}
		handle(c, req);
		json_decref(req);
	}
	if (evbuffer_get_length(in) > REQUEST_MAX)
		client_free(c);
}

static void on_conn_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		client_free(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct client *c;

	/* root only: the directory is 0700 already; the peer's uid is checked too */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) || cred.uid != 0) {
		evutil_closesocket(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		evutil_closesocket(fd);
		return;
	}
	c->bev = bufferevent_socket_new(d.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		free(c);
		evutil_closesocket(fd);
		return;
	}
	bufferevent_setcb(c->bev, on_read, NULL, on_conn_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->next = d.clients;
	d.clients = c;
}

static int listen_socket(char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[PATH_MAX];
	mode_t old;
	int rc;

	if (latchd_socket_path(d.sock_path, sizeof(d.sock_path)) || strlen(d.sock_path) >= sizeof(sa.sun_path) ||
	    latch_path(dir, sizeof(dir), "run/latch"))
		return latch_errf(err, errlen, -ENAMETOOLONG, "socket path is too long");
	rc = latch_mkdirs(dir, 0700);
	if (rc)
		return latch_errf(err, errlen, rc, "%s: %s", dir, strerror(-rc));
	chmod(dir, 0700); /* made 0755 by another part of latch first, perhaps */
	unlink(d.sock_path); /* a latchd killed before it could remove it */
	strcpy(sa.sun_path, d.sock_path);
	old = umask(0177);
	d.listener = evconnlistener_new_bind(d.base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
					     (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (!d.listener)
		return latch_errf(err, errlen, -errno, "%s: %s", d.sock_path, strerror(errno));
	return 0;
}

/* ---- guest state backups ---- */

/*
 * Every backup_interval seconds, each running VM sandbox's state directory
 * is copied to the host (what `down` does too), so a crash of the host or the
 * guest loses at most one interval of the agent's memory.  latchd never
 * talks to guests itself: it runs `latch --json backup --all` (guests and the
 * broker meet only through the kernel and the socket) and audits what that
 * reports.  The child's output goes to a memfd, read once it has exited.
 */
static struct {
	pid_t pid;	  /* running child, 0 none */
	int out;	  /* its stdout (a memfd) */
	uint64_t last_ns; /* start of the last run */
} backup;

/* The latch command beside this latchd (build/ or the install's bin directory), or $LATCH_BIN. */
static int latch_bin(char *buf, size_t len)
{
	const char *e = getenv("LATCH_BIN");
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (e && *e)
		return snprintf(buf, len, "%s", e) < (int)len ? 0 : -ENAMETOOLONG;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -errno;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return snprintf(buf, len, "%s/latch", exe) < (int)len ? 0 : -ENAMETOOLONG;
}

static void backup_start(void)
{
	char bin[PATH_MAX];
	pid_t pid;
	int out;

	if (latch_bin(bin, sizeof(bin)) || access(bin, X_OK)) {
		logf_("periodic backup: no latch command beside latchd (set LATCH_BIN)");
		return;
	}
	out = memfd_create("latch-backup", MFD_CLOEXEC);
	if (out < 0)
		return;
	pid = fork();
	if (pid == 0) {
		dup2(out, STDOUT_FILENO);
		execl(bin, bin, "--json", "backup", "--all", (char *)NULL);
		_exit(127);
	}
	if (pid < 0) {
		close(out);
		return;
	}
	backup.pid = pid;
	backup.out = out;
}

/* The child has exited: audit each sandbox it backed up. */
static void backup_finish(void)
{
	json_error_t jerr;
	json_t *res, *b;
	size_t i;

	lseek(backup.out, 0, SEEK_SET);
	res = json_loadfd(backup.out, 0, &jerr);
	close(backup.out);
	backup.pid = 0;
	if (!res) {
		audit(NULL, "backup", "fail", "latchd.backup.periodic", json_pack("{s:s}", "error", "no report"));
		return;
	}
	json_array_foreach(json_object_get(res, "backups"), i, b) {
		const char *name = json_string_value(json_object_get(b, "sandbox"));
		bool good = json_is_true(json_object_get(b, "ok"));

		if (name)
			audit(name, "backup", good ? "ok" : "fail", "latchd.backup.periodic", NULL);
	}
	json_decref(res);
}

static void backups_tick(uint64_t now)
{
	int status;

	if (backup.pid && waitpid(backup.pid, &status, WNOHANG) == backup.pid)
		backup_finish();
	if (!d.conf.backup_interval || backup.pid ||
	    (backup.last_ns && now < backup.last_ns + (uint64_t)d.conf.backup_interval * NS_PER_S))
		return;
	backup.last_ns = now;
	backup_start();
}

/* ---- main loop ---- */

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	if (sig == SIGHUP) {
		logf_("SIGHUP: reloading");
		reload();
		return;
	}
	logf_("%s: shutting down (enforcement stays in the kernel)", strsignal(sig));
	event_base_loopexit(d.base, NULL);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	static unsigned ticks;
	uint64_t now = latch_now_boot_ns();

	if (++ticks % SCAN_INTERVAL_S == 0)
		scan();
	backups_tick(now);
	audit_tick(d.audit); /* the audit log's head, anchored outside it once a period */
	for (struct sandbox *s = d.sandboxes; s; s = s->next) {
		refresh_hosts(s, now);
		if (s->learned_dirty)
			learned_save(s);
		if (ticks % 60 == 0 && now > RESOLVED_GRACE_NS) {
			latch_policy_prune_resolved(s->sb, now - RESOLVED_GRACE_NS);
			for (int i = 0; i < s->n_learned;)
				if (s->learned[i].expires_ns + RESOLVED_GRACE_NS <= now)
					s->learned[i] = s->learned[--s->n_learned];
				else
					i++;
			learned_reindex(s);
			s->learned_dirty = true;
		}
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: latchd [--dns-port PORT]\n"
		   "  Serves every latch sandbox: named policy, a filtering resolver on each\n"
		   "  sandbox's resolver address, kernel deny events into the audit log.\n"
		   "  Runs in the foreground (systemd's Type=simple); logs to stderr.\n"
		   "  SIGHUP re-reads latch.conf and the profiles; SIGTERM stops it.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "dns-port", required_argument, NULL, 'p' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	struct event *sig_hup, *sig_term, *sig_int, *tick;
	struct timeval one_s = { 1, 0 };
	char err[LATCH_ERR_MAX], path[PATH_MAX];
	uint32_t port = 53;
	int c;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (latch_parse_uint(optarg, 1, 65535, &port)) {
				fprintf(stderr, "latchd: --dns-port '%s' must be 1..65535\n", optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (geteuid()) {
		fprintf(stderr, "latchd: must run as root (it writes BPF maps and binds port 53)\n");
		return 1;
	}
	setvbuf(stderr, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	{
		/* each resolver may hold hundreds of upstream sockets in flight */
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	latch_loader_set_log(LATCH_LOG_QUIET);
	d.dns_port = port;
	if (read_conf(&d.conf, d.upstream, d.upstream_port, &d.n_upstream, err, sizeof(err))) {
		fprintf(stderr, "latchd: %s\n", err);
		return 1;
	}
	if (!d.n_upstream)
		logf_("warning: no upstream DNS server (dns_upstream in latch.conf, or /etc/resolv.conf)");
	latch_path(d.profile_dir, sizeof(d.profile_dir), "etc/latch/profiles");
	latch_path(d.overlay, sizeof(d.overlay), "etc/latch/allowlist.txt");
	if (latch_path(path, sizeof(path), AUDIT_DEFAULT_SUFFIX) == 0) {
		d.audit = audit_open(path, NULL, err, sizeof(err));
		if (!d.audit)
			logf_("warning: %s; decisions are not recorded", err);
	}
	d.base = event_base_new();
	if (!d.base) {
		fprintf(stderr, "latchd: cannot make the event loop\n");
		return 1;
	}
	if (listen_socket(err, sizeof(err))) {
		fprintf(stderr, "latchd: %s\n", err);
		return 1;
	}
	sig_hup = evsignal_new(d.base, SIGHUP, on_signal, NULL);
	sig_term = evsignal_new(d.base, SIGTERM, on_signal, NULL);
	sig_int = evsignal_new(d.base, SIGINT, on_signal, NULL);
	tick = event_new(d.base, -1, EV_PERSIST, on_tick, NULL);
	event_add(sig_hup, NULL);
	event_add(sig_term, NULL);
	event_add(sig_int, NULL);
	event_add(tick, &one_s);
	scan();
	audit("latchd", "daemon", "start", "latchd.start", json_pack("{s:i}", "pid", (int)getpid()));
	logf_("listening on %s", d.sock_path);
	event_base_dispatch(d.base);

	/* clean shutdown: stop taking requests, then let go of everything; the kernel keeps enforcing */
	evconnlistener_free(d.listener);
	unlink(d.sock_path);
	while (d.clients)
		client_free(d.clients);
	while (d.sandboxes) {
		struct sandbox *s = d.sandboxes;

		d.sandboxes = s->next;
		sandbox_free(s);
	}
	if (backup.pid) { /* a backup in flight finishes on its own; collect it */
		waitpid(backup.pid, NULL, 0);
		backup_finish();
	}
	audit("latchd", "daemon", "stop", "latchd.stop", json_pack("{s:i}", "pid", (int)getpid()));
	audit_close(d.audit);
	event_free(sig_hup);
	event_free(sig_term);
	event_free(sig_int);
	event_free(tick);
	event_base_free(d.base);
	return 0;
}
