// SPDX-License-Identifier: GPL-2.0-only
/*
 * grant.c - a sandbox's grants, from the ask to the deadline.
 *
 * The host resolves: a grant names hosts, never addresses, and latchd looks
 * them up through the sandbox's resolver (its upstreams, its rebinding
 * filter), then drops anything that is not a public address or that is one
 * of the host's own.  A name left with nothing refuses the whole grant.
 *
 * The window closes in the kernel: every address goes into the timed maps
 * with origin GRANT and the grant's deadline, which the program checks on
 * every packet, established flows included.  latchd only keeps the names
 * (so the resolver may answer them until the deadline, and refreshes them as
 * their TTL runs out) and the history that the caps count; a SIGKILL of
 * latchd changes nothing in the kernel.  An address held by two grants
 * keeps the later deadline, port range by port range.
 *
 * NAME.grants (var/lib/latch/policy/, written within a second of a change)
 * keeps the active grants and the last hour's history across a restart of
 * latchd, for the boot it names.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "latchd/grant.h"

#define GRANT_LOCK_WAIT_MS 2000
#define GRANT_REFRESH_MARGIN_NS (5 * NS_PER_S)
#define GRANT_RETRY_NS (5 * NS_PER_S)
#define LOCAL_ADDRS_MAX 128

/* ---- the list ---- */

/* 80 random bits in base32 (a-z, 2-7): not guessable, and short enough to type from a phone's message. */
static void grant_id(char *out)
{
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	uint8_t r[10];
	size_t have = 0;
	uint64_t acc = 0;
	int bits = 0, k = 0;

	while (have < sizeof(r)) {
		ssize_t n = getrandom(r + have, sizeof(r) - have, 0);

		if (n > 0)
			have += n;
		else if (errno != EINTR)
			abort(); /* no entropy at all: never hand out a guessable id */
	}
	for (size_t i = 0; i < sizeof(r); i++) {
		acc = acc << 8 | r[i];
		bits += 8;
		while (bits >= 5) {
			out[k++] = b32[(acc >> (bits - 5)) & 31];
			bits -= 5;
		}
	}
	out[k] = '\0';
}

struct grant *latchd_grant_find(struct latchd *ld, const char *id)
{
	for (struct sandbox *s = ld->sandboxes; s; s = s->next)
		for (struct grant *g = s->grants ? s->grants->list : NULL; g; g = g->next)
			if (!strcmp(g->id, id))
				return g;
	return NULL;
}

struct grant *latchd_grant_new(struct sandbox *s, bool asked)
{
	struct grant *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	do
		grant_id(g->id);
	while (latchd_grant_find(s->ld, g->id));
	g->s = s;
	g->asked = asked;
	g->asked_wall = time(NULL);
	g->next = s->grants->list;
	s->grants->list = g;
	s->grants->dirty = true;
	return g;
}

void latchd_grant_drop(struct grant *g)
{
	struct grants *gs = g->s->grants;

	for (struct grant **pp = &gs->list; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	gs->dirty = true;
	free(g);
}

/* ---- what a grant may name ---- */

/*
 * Digits and dots only, or a last label of digits only: an IPv4 address in
 * one of its spellings ("10.1", "0x7f.1", "2130706433"); no top-level
 * domain is all digits.
 */
static bool ipv4_like(const char *s)
{
	size_t n = strlen(s);
	const char *last;

	while (n && s[n - 1] == '.') /* "docs.example." is docs.example */
		n--;
	last = memrchr(s, '.', n);
	last = last ? last + 1 : s;
	return n && strspn(last, "0123456789") == (size_t)(s + n - last);
}

int latchd_grant_parse_host(const char *text, const struct latch_entry *def, struct grant_host *h, char *err,
			    size_t errlen)
{
	char buf[LATCH_DNS_NAME_MAX + 80], perr[LATCH_ERR_MAX], *colon, *ports = NULL;
	const char *why;

	memset(h, 0, sizeof(*h));
	if (strlen(text) >= sizeof(buf))
		return latch_errf(err, errlen, -EINVAL, "'%.40s...' is too long for a host name", text);
	strcpy(buf, text);
	if (strchr(buf, '*'))
		return latch_errf(err, errlen, -EINVAL,
				  "'%s' is a wildcard; a grant names each host (the host resolves names, not patterns)",
				  text);
	colon = strchr(buf, ':');
	if (buf[0] == '[' || (colon && strchr(colon + 1, ':')))
		return latch_errf(err, errlen, -EINVAL,
				  "'%s' is an address; a grant names hosts and the host resolves them", text);
	if (colon) {
		*colon = '\0';
		ports = colon + 1;
	}
	if (strstr(text, "://") || strchr(buf, '/'))
		return latch_errf(err, errlen, -EINVAL,
				  "'%s': write the host alone, e.g. docs.example or docs.example:443", text);
	if (ipv4_like(buf))
		return latch_errf(err, errlen, -EINVAL,
				  "'%s' is an address; a grant names hosts and the host resolves them", text);
	if ((why = latch_dns_name_problem(buf)) || latch_dns_name_normalize(buf, h->name, sizeof(h->name)))
		return latch_errf(err, errlen, -EINVAL, "'%s' %s", buf, why ? why : "is not a host name");
	if (!strchr(h->name, '.'))
		return latch_errf(err, errlen, -EINVAL,
				  "'%s' is a single label; name the host in full (a search domain could make it an "
				  "inside name)",
				  h->name);
	h->ports = *def;
	if (ports && latch_parse_ports(ports, h->ports.ports, LATCH_RULES_MAX, &h->ports.n_ports, perr, sizeof(perr)))
		return latch_errf(err, errlen, -EINVAL, "'%s': %s", text, perr);
	return 0;
}

int latchd_grant_reason_check(const char *r, char *err, size_t errlen)
{
	/* the sandbox's words go into a notification inside latch's own: nothing that could pass for latch's */
	return latch_text_check("the reason", r, GRANT_REASON_MAX, err, errlen);
}

/* ---- the caps ---- */

/* Drop history older than an hour; the count of what is left. */
static int history_count(uint64_t *t, int *n, uint64_t now)
{
	int k = 0;

	for (int i = 0; i < *n; i++)
		if (t[i] + GRANT_HOUR_NS > now)
			t[k++] = t[i];
	*n = k;
	return k;
}

static void history_add(uint64_t *t, int *n, uint64_t now)
{
	if (*n == GRANT_HISTORY_MAX) /* full: the oldest goes (the caps are at most GRANT_HISTORY_MAX - 1) */
		memmove(t, t + 1, --*n * sizeof(*t));
	t[(*n)++] = now;
}

void latchd_grant_history_ask(struct sandbox *s, uint64_t now)
{
	history_add(s->grants->asked, &s->grants->n_asked, now);
	latchd_grants_save(s);
}

int latchd_grant_count_granted(struct sandbox *s, uint64_t now)
{
	int n = history_count(s->grants->granted, &s->grants->n_granted, now);

	/* being resolved: they count already, or two approvals at once could pass the cap */
	for (struct grant *g = s->grants->list; g; g = g->next)
		n += g->state == GRANT_RESOLVING;
	return n;
}

int latchd_grant_count_asked(struct sandbox *s, uint64_t now)
{
	return history_count(s->grants->asked, &s->grants->n_asked, now);
}

static int grant_count_pending(struct sandbox *s)
{
	int n = 0;

	for (struct grant *g = s->grants->list; g; g = g->next)
		n += g->state == GRANT_PENDING;
	return n;
}

/* Seconds until the oldest of the last hour's times leaves the window. */
static unsigned next_free_s(const uint64_t *t, int n, uint64_t now)
{
	return n && t[0] + GRANT_HOUR_NS > now ? (unsigned)((t[0] + GRANT_HOUR_NS - now) / NS_PER_S) + 1 : 0;
}

int latchd_grant_cap_granted(struct sandbox *s, uint64_t now, char *err, size_t errlen)
{
	const struct latch_conf *c = &s->ld->conf;
	int n = latchd_grant_count_granted(s, now);

	if (n < (int)c->grants_per_hour)
		return 0;
	return latch_errf(err, errlen, -EDQUOT,
			  "%s has had %d grant(s) in the last hour, the cap (grants_per_hour = %u in latch.conf); "
			  "the next is possible in %u s",
			  s->name, n, c->grants_per_hour, next_free_s(s->grants->granted, s->grants->n_granted, now));
}

int latchd_grant_cap_ask(struct sandbox *s, uint64_t now, char *err, size_t errlen)
{
	const struct latch_conf *c = &s->ld->conf;
	int asked = latchd_grant_count_asked(s, now), pending = grant_count_pending(s);

	if (asked >= (int)c->grant_asks_per_hour)
		return latch_errf(err, errlen, -EDQUOT,
				  "this sandbox has asked %d time(s) in the last hour, the cap (grant_asks_per_hour = "
				  "%u); ask again in %u s",
				  asked, c->grant_asks_per_hour,
				  next_free_s(s->grants->asked, s->grants->n_asked, now));
	if (pending >= (int)c->grant_asks_pending)
		return latch_errf(err, errlen, -EDQUOT,
				  "%d ask(s) of this sandbox already wait for a person, the cap (grant_asks_pending = "
				  "%u); wait for their answer",
				  pending, c->grant_asks_pending);
	return latchd_grant_cap_granted(s, now, err, errlen);
}

/* ---- addresses ---- */

struct local_addrs {
	struct latch_addr a[LOCAL_ADDRS_MAX];
	int n;
};

/* The host's own addresses (every interface of latchd's namespace) and the sandbox's host side. */
static void local_addrs(const struct sandbox *s, struct local_addrs *l)
{
	struct ifaddrs *ifs = NULL;

	l->n = 0;
	if (s->cfg.flags & LATCH_CFG_HAVE_IP4) {
		l->a[l->n].family = AF_INET;
		memcpy(&l->a[l->n++].v4, &s->cfg.host_ip4, 4);
	}
	if (s->cfg.flags & LATCH_CFG_HAVE_IP6) {
		l->a[l->n].family = AF_INET6;
		memcpy(l->a[l->n++].bytes, s->cfg.host_ip6, 16);
	}
	if (getifaddrs(&ifs))
		return;
	for (struct ifaddrs *i = ifs; i && l->n < LOCAL_ADDRS_MAX; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET) {
			l->a[l->n].family = AF_INET;
			l->a[l->n++].v4 = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			l->a[l->n].family = AF_INET6;
			l->a[l->n++].v6 = ((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		}
	}
	freeifaddrs(ifs);
}

static bool addr_eq(const struct latch_addr *a, const struct latch_addr *b)
{
	return a->family == b->family && !memcmp(a->bytes, b->bytes, a->family == AF_INET ? 4 : 16);
}

/* NULL when a grant may open A; else why not: latch_addr_nonpublic()'s word, or "host". */
static const char *addr_unusable(const struct latch_addr *a, const struct local_addrs *l)
{
	const char *why = latch_addr_nonpublic(a);

	if (why)
		return why;
	for (int i = 0; i < l->n; i++)
		if (addr_eq(a, &l->a[i]))
			return "host";
	return NULL;
}

/* Keep the usable addresses of a[n]; the count left, and in *why the reason of the last one dropped. */
static int keep_usable(struct latch_addr *a, int n, const struct local_addrs *l, const char **why)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		const char *w = addr_unusable(&a[i], l);

		if (w)
			*why = w;
		else
			a[k++] = a[i];
	}
	return k;
}

/* ---- the kernel ---- */

/*
 * The deadline one port range of an address must have: the latest among the
 * active grants holding it (SELF's own deadline counts unless it closes),
 * or now when none does.  latch_policy_allow() takes the newest word for a
 * rule, so without this a short grant would cut a longer one's address.
 */
static uint64_t range_deadline(const struct sandbox *s, const struct latch_addr *a, uint8_t proto,
			       const struct latch_port_range *r, const struct grant *self, bool closing, uint64_t now)
{
	uint64_t d = 0;

	for (const struct grant *g = s->grants->list; g; g = g->next) {
		if ((g->state != GRANT_ACTIVE && g != self) || (g == self && closing) || g->deadline_ns <= now)
			continue;
		for (int i = 0; i < g->n_hosts; i++) {
			const struct grant_host *h = &g->host[i];
			bool have = false;

			for (int k = 0; k < h->n && !have; k++)
				have = addr_eq(&h->addr[k], a);
			for (int p = 0; have && p < (h->ports.n_ports ? h->ports.n_ports : 1); p++) {
				bool same = h->ports.proto == proto &&
					    (h->ports.n_ports ?
						     h->ports.ports[p].lo == r->lo && h->ports.ports[p].hi == r->hi :
						     r->lo == 0 && r->hi == 0xffff);

				if (same && g->deadline_ns > d)
					d = g->deadline_ns;
			}
		}
	}
	return d ? d : now;
}

/* Write one address of host H of grant G into the timed map, range by range. */
static int put_addr(struct grant *g, const struct grant_host *h, const struct latch_addr *a, bool closing, char *err,
		    size_t errlen)
{
	struct sandbox *s = g->s;
	uint64_t now = latch_now_boot_ns();
	struct latch_entry full, one;
	int n = h->ports.n_ports ? h->ports.n_ports : 1;

	latch_profile_address_entry(a, &h->ports, &full);
	for (int p = 0; p < n; p++) {
		struct latch_port_range any = { 0, 0xffff };
		const struct latch_port_range *r = full.n_ports ? &full.ports[p] : &any;
		int rc;

		one = full;
		one.n_ports = full.n_ports ? 1 : 0;
		one.ports[0] = *r;
		rc = latch_policy_allow(s->sb, &one, range_deadline(s, a, full.proto, r, g, closing, now),
					LATCH_ORIGIN_GRANT, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* Every address of G at its deadline (or closed); under the policy lock.  0 or -errno with err. */
static int put_all(struct grant *g, bool closing, char *err, size_t errlen)
{
	int lock = latch_policy_lock_wait(g->s->name, GRANT_LOCK_WAIT_MS, err, errlen), rc = 0;

	if (lock < 0)
		return lock;
	for (int i = 0; i < g->n_hosts; i++)
		for (int k = 0; k < g->host[i].n; k++) {
			int e = put_addr(g, &g->host[i], &g->host[i].addr[k], closing, err, errlen);

			if (e && !rc)
				rc = e;
			if (rc && !closing)
				goto out; /* the caller closes what went in */
		}
out:
	latch_policy_unlock(lock);
	return rc;
}

int latchd_grant_close_now(struct grant *g, char *err, size_t errlen)
{
	int rc = put_all(g, true, err, errlen);

	g->deadline_ns = latch_now_boot_ns();
	g->deadline_wall = time(NULL);
	return rc;
}

/* ---- resolving ---- */

struct lookup_ctx {
	struct latchd *ld;
	char sandbox[LATCH_NAME_MAX + 1];
	char id[GRANT_ID_CHARS + 1];
	int idx;
	bool refresh;
};

static void grant_commit(struct grant *g);
static void refresh_done(struct grant *g, struct grant_host *h, const struct latch_addr *addrs, int n, uint32_t ttl);

/* A lookup's answer finds its grant again by name and id: a grant may be gone by then. */
static void lookup_done(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
			const char *why)
{
	struct lookup_ctx *lc = arg;
	struct sandbox *s = latchd_sandbox_find(lc->ld, lc->sandbox);
	struct grant *g = s && s->grants ? latchd_grant_find(lc->ld, lc->id) : NULL;
	struct grant_host *h;
	bool refresh = lc->refresh;

	if (g && g->s != s)
		g = NULL;
	h = g ? &g->host[lc->idx] : NULL;
	free(lc);
	if (!h)
		return;
	h->in_flight = false;
	if (refresh) {
		if (g->state == GRANT_ACTIVE)
			refresh_done(g, h, n < 0 ? NULL : addrs, n, ttl);
		return;
	}
	if (g->state != GRANT_RESOLVING)
		return;
	h->n = n < 0 ? 0 : n > LATCH_RESOLVER_ADDRS_MAX ? LATCH_RESOLVER_ADDRS_MAX : n;
	memcpy(h->addr, addrs, h->n * sizeof(*addrs));
	h->why = n < 0 ? why : NULL;
	h->ttl_ns = latch_now_boot_ns() + (uint64_t)ttl * NS_PER_S;
	if (--g->lookups == 0)
		grant_commit(g);
}

static int lookup_start(struct grant *g, int idx, bool refresh)
{
	struct lookup_ctx *lc = calloc(1, sizeof(*lc));
	int rc;

	if (!lc)
		return -ENOMEM;
	lc->ld = g->s->ld;
	snprintf(lc->sandbox, sizeof(lc->sandbox), "%s", g->s->name);
	snprintf(lc->id, sizeof(lc->id), "%s", g->id);
	lc->idx = idx;
	lc->refresh = refresh;
	rc = latch_resolver_lookup(g->s->res, g->host[idx].name, lookup_done, lc);
	if (rc)
		free(lc);
	else
		g->host[idx].in_flight = true;
	return rc;
}

void latchd_grant_resolve(struct grant *g, uint32_t seconds)
{
	g->state = GRANT_RESOLVING;
	g->seconds = seconds;
	g->lookups = 1; /* held until every lookup is asked */
	for (int i = 0; i < g->n_hosts; i++) {
		int rc = lookup_start(g, i, false);

		g->host[i].n = 0;
		g->host[i].why = NULL;
		if (rc)
			g->host[i].why = rc == -EBUSY ? "busy" : "not a host name";
		else
			g->lookups++;
	}
	if (--g->lookups == 0)
		grant_commit(g);
}

/* Every name resolved: check the addresses, put them in the kernel, tell whoever waits. */
static void grant_commit(struct grant *g)
{
	struct sandbox *s = g->s;
	struct local_addrs *l = malloc(sizeof(*l));
	char err[LATCH_ERR_MAX] = "";
	bool refused = false;
	uint64_t now;

	if (!l) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	local_addrs(s, l);
	for (int i = 0; i < g->n_hosts && !err[0]; i++) {
		struct grant_host *h = &g->host[i];
		const char *why = h->why;
		bool had = h->n > 0;

		if (had)
			h->n = keep_usable(h->addr, h->n, l, &why);
		if (h->n)
			continue;
		/* the policy's refusal (the caller can't fix it by trying again), or a lookup that failed */
		refused = had || (why && !strcmp(why, "rebinding"));
		if (refused)
			snprintf(err, sizeof(err), "%s %s; nothing was opened", h->name,
				 !strcmp(why, "host")	   ? "resolves to an address of this host" :
				 !strcmp(why, "rebinding") ? "resolves only to non-public addresses or this host's own "
							     "(DNS rebinding)" :
							     "resolves only to non-public addresses (DNS rebinding)");
		else if (why)
			snprintf(err, sizeof(err), "%s did not resolve (%s); nothing was opened", h->name, why);
		else
			snprintf(err, sizeof(err),
				 "%s resolves only to addresses a CIDR entry already allows; nothing "
				 "was opened",
				 h->name);
	}
	free(l);
	if (err[0])
		goto fail;
	now = latch_now_boot_ns();
	g->deadline_ns = now + (uint64_t)g->seconds * NS_PER_S;
	g->deadline_wall = time(NULL) + g->seconds;
	if (put_all(g, false, err, sizeof(err))) {
		char ignored[LATCH_ERR_MAX];

		put_all(g, true, ignored, sizeof(ignored)); /* what went in comes out */
		goto fail;
	}
	g->state = GRANT_ACTIVE;
	history_add(s->grants->granted, &s->grants->n_granted, now);
	latchd_grants_save(s); /* now, not at the tick: a SIGKILL must not hand out a fresh hour */
	latchd_grant_audit(g, g->asked ? "approve" : "grant", g->asked ? "latchd.grant.approve" : "latchd.grant.grant",
			   NULL);
	latchd_grant_settled(g, NULL, false);
	return;
fail:
	latchd_grant_audit(g, "refuse", refused ? "latchd.grant.rebinding" : "latchd.grant.resolve",
			   json_pack("{s:s}", "error", err));
	latchd_grant_settled(g, err, refused);
	latchd_grant_drop(g);
}

/* ---- the resolver's side ---- */

static bool host_open(const struct grant *g, const char *name, uint64_t now)
{
	if (g->state != GRANT_ACTIVE || g->deadline_ns <= now)
		return false;
	for (int i = 0; i < g->n_hosts; i++)
		if (!strcmp(g->host[i].name, name))
			return true;
	return false;
}

bool latchd_grant_name_allowed(const struct sandbox *s, const char *name)
{
	uint64_t now = latch_now_boot_ns();

	for (const struct grant *g = s->grants ? s->grants->list : NULL; g; g = g->next)
		if (host_open(g, name, now))
			return true;
	return false;
}

bool latchd_grant_name_port_allowed(const struct sandbox *s, const char *name, uint16_t port)
{
	uint64_t now = latch_now_boot_ns();

	for (const struct grant *g = s->grants ? s->grants->list : NULL; g; g = g->next) {
		if (g->state != GRANT_ACTIVE || g->deadline_ns <= now)
			continue;
		for (int i = 0; i < g->n_hosts; i++)
			if (!strcmp(g->host[i].name, name) && latchd_entry_takes_tcp(&g->host[i].ports, port))
				return true;
	}
	return false;
}

/* New usable addresses of a granted name join the host's list and the kernel, with the grant's deadline. */
static int host_add_addrs(struct grant *g, struct grant_host *h, const struct latch_addr *addrs, int n)
{
	struct local_addrs *l = NULL;
	char err[LATCH_ERR_MAX];
	int lock = -1, rc = 0;

	for (int i = 0; i < n && h->n < LATCH_RESOLVER_ADDRS_MAX && !rc; i++) {
		bool have = false;

		for (int k = 0; k < h->n && !have; k++)
			have = addr_eq(&h->addr[k], &addrs[i]);
		if (have)
			continue;
		if (!l && !(l = calloc(1, sizeof(*l)))) {
			rc = -ENOMEM;
			break;
		}
		if (l->n == 0)
			local_addrs(g->s, l);
		if (addr_unusable(&addrs[i], l))
			continue;
		if (lock < 0 && (lock = latch_policy_lock_wait(g->s->name, GRANT_LOCK_WAIT_MS, err, sizeof(err))) < 0) {
			rc = lock;
		} else {
			h->addr[h->n++] = addrs[i]; /* range_deadline() finds it here */
			rc = put_addr(g, h, &addrs[i], false, err, sizeof(err));
			if (rc)
				h->n--;
			else
				g->s->grants->dirty = true;
		}
		if (rc)
			latchd_log("%s: grant %s: %s: %s", g->s->name, g->id, h->name, err);
	}
	if (lock >= 0)
		latch_policy_unlock(lock);
	free(l);
	return rc;
}

int latchd_grant_answered(struct sandbox *s, const char *qname, const struct latch_addr *addrs, int n)
{
	uint64_t now = latch_now_boot_ns();
	int rc = 0;

	for (struct grant *g = s->grants ? s->grants->list : NULL; g; g = g->next) {
		if (!host_open(g, qname, now))
			continue;
		for (int i = 0; i < g->n_hosts; i++)
			if (!strcmp(g->host[i].name, qname) && host_add_addrs(g, &g->host[i], addrs, n))
				rc = -EAGAIN; /* the resolver reports this answer again on its next hit */
	}
	return rc;
}

static void refresh_done(struct grant *g, struct grant_host *h, const struct latch_addr *addrs, int n, uint32_t ttl)
{
	uint64_t now = latch_now_boot_ns();

	if (n < 0) {
		h->retry_ns = now + GRANT_RETRY_NS;
		return;
	}
	h->ttl_ns = now + (uint64_t)ttl * NS_PER_S;
	host_add_addrs(g, h, addrs, n);
}

/* Ask again for a name whose TTL runs out before the grant's deadline; never past it. */
static void refresh_hosts(struct grant *g, uint64_t now)
{
	for (int i = 0; i < g->n_hosts; i++) {
		struct grant_host *h = &g->host[i];

		if (h->in_flight || now < h->retry_ns || !h->ttl_ns || h->ttl_ns >= g->deadline_ns ||
		    now + GRANT_REFRESH_MARGIN_NS < h->ttl_ns)
			continue;
		if (lookup_start(g, i, true))
			h->retry_ns = now + GRANT_RETRY_NS;
	}
}

/* ---- the tick ---- */

void latchd_grants_tick(struct sandbox *s, uint64_t now)
{
	struct grants *gs = s->grants;

	if (!gs)
		return;
	for (struct grant *g = gs->list, *next; g; g = next) {
		next = g->next;
		if (g->state == GRANT_PENDING && now >= g->wait_until_ns) {
			latchd_grant_audit(g, "timeout", "latchd.grant.timeout",
					   json_pack("{s:i}", "waited_s", (int)s->ld->conf.grant_ask_wait));
			latchd_grant_ask_answer(g, 403, "timeout", "nobody decided in time; the ask is denied");
			latchd_grant_drop(g);
		} else if (g->state == GRANT_ACTIVE && now >= g->deadline_ns) {
			latchd_grant_audit(g, "expire", "latchd.grant.expire", NULL);
			latchd_grant_drop(g);
		} else if (g->state == GRANT_ACTIVE && s->res) {
			refresh_hosts(g, now);
		}
	}
	if (gs->dirty)
		latchd_grants_save(s);
}
