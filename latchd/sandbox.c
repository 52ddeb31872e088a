// SPDX-License-Identifier: GPL-2.0-only
/*
 * sandbox.c - one served sandbox, from its pins appearing to their going:
 * latchd opens the pinned maps, starts a resolver on the sandbox's resolver
 * address, reads its deny events and applies its stored profile again; when
 * the pins are gone it lets go of all of it (and of what it learned, and of
 * its kit).  Also the policy the resolver and the broker consult for that
 * sandbox: which names it may answer and which addresses an answer may not
 * carry.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "latchd/latchd.h"

struct sandbox *latchd_sandbox_find(struct latchd *ld, const char *name)
{
	for (struct sandbox *s = ld->sandboxes; s; s = s->next)
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

/* ---- the policy a sandbox's resolver and broker consult ---- */

/* A kit entry that allows NAME (normalized), as compose matches its extras. */
static bool extra_matches(const struct latch_pentry *pe, const char *name)
{
	if (pe->kind == LATCH_PENTRY_HOST)
		return !strcmp(pe->name, name);
	return pe->kind == LATCH_PENTRY_WILDCARD && latch_wildcard_match(pe->name, name);
}

int latchd_sandbox_name_ports(const struct sandbox *s, const char *name, struct latch_entry *ports, int max)
{
	char norm[LATCH_DNS_NAME_MAX + 1];
	int n = 0;

	if (!s->have_profile || s->prof.open || max < 1 || latch_dns_name_normalize(name, norm, sizeof(norm)))
		return 0;
	if (latch_profile_match(&s->prof, norm, &ports[0]))
		n++;
	for (int i = 0; i < s->n_extra && n < max; i++)
		if (extra_matches(&s->extra[i], norm))
			ports[n++] = s->extra[i].entry;
	return n;
}

/*
 * Does the sandbox's policy allow this name (profile and overlay, `open`,
 * the kit's egress_allow)?  What the resolver and the broker's CONNECT ask.
 */
static bool sandbox_name_allowed(void *arg, const char *name)
{
	struct sandbox *s = arg;
	struct latch_entry ports[1];

	if (latchd_grant_name_allowed(s, name))
		return true; /* until the grant's deadline */
	if (!s->have_profile)
		return false; /* no named policy: the resolver answers nothing, the broker connects nowhere */
	return s->prof.open || latchd_sandbox_name_ports(s, name, ports, 1) > 0;
}

bool latchd_entry_takes_tcp(const struct latch_entry *e, uint16_t port)
{
	if (e->proto != LATCH_PROTO_ANY && e->proto != LATCH_PROTO_TCP)
		return false;
	if (!e->n_ports)
		return true; /* an entry of any port */
	for (int i = 0; i < e->n_ports; i++)
		if (e->ports[i].lo <= port && port <= e->ports[i].hi)
			return true;
	return false;
}

bool latchd_sandbox_name_port_allowed(void *arg, const char *name, uint16_t port)
{
	struct sandbox *s = arg;
	char norm[LATCH_DNS_NAME_MAX + 1];
	const struct latch_pentry *pe = NULL;

	if (latchd_grant_name_port_allowed(s, name, port))
		return true; /* until the grant's deadline */
	if (!s->have_profile)
		return false;
	if (s->prof.open)
		return true;
	if (latch_dns_name_normalize(name, norm, sizeof(norm)))
		return false;
	/* each matching entry on its own: a udp entry's ports lend nothing to tcp */
	while ((pe = latch_profile_next_match(&s->prof, norm, pe)))
		if (latchd_entry_takes_tcp(&pe->entry, port))
			return true;
	for (int i = 0; i < s->n_extra; i++)
		if (extra_matches(&s->extra[i], norm) && latchd_entry_takes_tcp(&s->extra[i].entry, port))
			return true;
	return false;
}

/* Does this CIDR entry cover this address? */
static bool entry_covers(const struct latch_pentry *pe, const struct latch_addr *a)
{
	int bits = pe->entry.prefixlen, full = bits / 8;

	if (pe->kind != LATCH_PENTRY_CIDR || pe->entry.addr.family != a->family)
		return false;
	if (memcmp(pe->entry.addr.bytes, a->bytes, full))
		return false;
	return !(bits % 8 && (pe->entry.addr.bytes[full] ^ a->bytes[full]) & (0xff00 >> (bits % 8)));
}

bool latchd_cidr_covers(const struct latch_profile *p, const struct latch_addr *a)
{
	for (int i = 0; i < p->n; i++)
		if (entry_covers(&p->entries[i], a))
			return true;
	return false;
}

/* Does an explicit CIDR entry of the profile or the kit cover this address? */
static bool cidr_covers(const struct sandbox *s, const struct latch_addr *a)
{
	if (latchd_cidr_covers(&s->prof, a))
		return true;
	for (int i = 0; i < s->n_extra; i++)
		if (entry_covers(&s->extra[i], a))
			return true;
	return false;
}

/*
 * The rebinding filter: a public name may not answer with a private,
 * loopback, link-local, CGNAT or metadata address, unless the profile allows
 * that range outright with a CIDR entry, or the kit does (then the name adds no reach).
 */
static const char *addr_refused(void *arg, const struct latch_addr *a)
{
	struct sandbox *s = arg;
	const char *why = latch_addr_nonpublic(a);

	if (why && s->have_profile && cidr_covers(s, a))
		return NULL;
	return why;
}

static void refused(void *arg, const char *qname, uint16_t qtype, const char *reason)
{
	struct sandbox *s = arg;

	latchd_audit_dns_refused(s->ld, s->name, qname, qtype, reason);
}

void latchd_sandbox_resolver_opts(struct sandbox *s, struct latch_resolver_opts *o)
{
	struct latchd *ld = s->ld;

	memset(o, 0, sizeof(*o));
	if (s->cfg.flags & LATCH_CFG_HAVE_RESOLVER4) {
		o->listen[o->n_listen].family = AF_INET;
		memcpy(&o->listen[o->n_listen++].v4, &s->cfg.resolver_ip4, 4);
	}
	if (s->cfg.flags & LATCH_CFG_HAVE_RESOLVER6) {
		o->listen[o->n_listen].family = AF_INET6;
		memcpy(o->listen[o->n_listen++].bytes, s->cfg.resolver_ip6, 16);
	}
	o->port = ld->dns_port;
	o->n_upstream = ld->n_upstream;
	memcpy(o->upstream, ld->upstream, sizeof(o->upstream));
	memcpy(o->upstream_port, ld->upstream_port, sizeof(o->upstream_port));
	o->ttl_min = ld->conf.dns_ttl_min;
	o->ttl_max = ld->conf.dns_ttl_max;
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
						    .name_allowed = sandbox_name_allowed,
						    .addr_refused = addr_refused,
						    .answered = latchd_learned_answered,
						    .refused = refused };
}

/* ---- lifecycle ---- */

void latchd_sandbox_free(struct sandbox *s)
{
	latchd_switch_abandon(s);
	latchd_switch_gc_stop(s);
	latchd_broker_close(s); /* wipes its keys */
	latch_resolver_free(s->res); /* cancels lookups: no callback after this */
	latchd_grants_close(s);
	if (s->learned_dirty)
		latchd_learned_save(s);
	latchd_events_close(s);
	latch_profile_free(&s->prof);
	free(s->extra);
	free(s->hosts);
	latchd_learned_free(s);
	latch_sandbox_free(s->sb);
	free(s);
}

/* Its stored profile: compiled in again, keeping what the maps learned meanwhile. */
static void apply_stored_profile(struct sandbox *s)
{
	char err[LATCH_ERR_MAX], pname[LATCH_PROFILE_NAME_MAX + 2];
	struct latch_profile p;

	if (latch_profile_state_read(s->name, pname, sizeof(pname)))
		return;
	if (!s->res)
		latchd_log("%s: profile %s not applied: no resolver to look its names up with", s->name, pname);
	else if (latchd_switch_load_profile(s->ld, pname, &p, err, sizeof(err)))
		latchd_log("%s: profile %s not applied: %s (the maps keep what they hold)", s->name, pname, err);
	else
		latchd_switch_begin(s, &p, NULL, true);
}

static struct sandbox *sandbox_add(struct latchd *ld, const char *name)
{
	struct sandbox *s = calloc(1, sizeof(*s));
	struct latch_resolver_opts o;
	char err[LATCH_ERR_MAX];

	if (!s)
		return NULL;
	s->ld = ld;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->sb = latch_sandbox_open(name, err, sizeof(err));
	if (!s->sb || latch_sandbox_read_config(s->sb, &s->cfg)) {
		latchd_log("%s: %s", name, s->sb ? "cannot read its config" : err);
		latchd_sandbox_free(s);
		return NULL;
	}
	/*
	 * Its maps are pinned while the programs load, before the config is
	 * written: one seen then has no addresses yet (no resolver, no broker
	 * address, for good).  A later scan takes it, as the caller's own
	 * request does once attach is done.
	 */
	if (!s->cfg.abi_version) {
		latchd_sandbox_free(s);
		return NULL;
	}
	latchd_sandbox_resolver_opts(s, &o);
	if (o.n_listen) {
		s->res = latch_resolver_new(ld->base, &o, err, sizeof(err));
		if (!s->res)
			latchd_log("%s: resolver: %s (its guest gets no DNS answers)", name, err);
	}
	latchd_events_open(s);
	s->next = ld->sandboxes;
	ld->sandboxes = s;
	latchd_log("%s: serving (resolver %s)", name, s->res ? "up" : "none");
	latchd_learned_load(s);
	latchd_grants_open(s);
	/* the kit before the profile: the switch composes the kit's egress_allow in */
	latchd_broker_open(s);
	apply_stored_profile(s);
	return s;
}

/* A sandbox latchd serves is seen when its name is pinned with the maps latchd holds. */
static int scan_seen(const char *name, void *arg)
{
	struct sandbox *s = latchd_sandbox_find(arg, name);

	if (s && latch_sandbox_still_pinned(s->sb))
		s->seen = true;
	return 0;
}

static int scan_new(const char *name, void *arg)
{
	struct latchd *ld = arg;
	struct sandbox *s = latchd_sandbox_find(ld, name);

	if (!s && (s = sandbox_add(ld, name)))
		s->seen = true;
	return 0;
}

/*
 * Pins that are gone let go of, then the new ones served.  A name pinned
 * again since the last scan (detach and attach, a CNI DEL and ADD) is a new
 * sandbox: kept, latchd would write its policy into the old maps, which
 * nothing enforces with, and the new ones would stay empty.
 */
void latchd_sandboxes_scan(struct latchd *ld)
{
	for (struct sandbox *s = ld->sandboxes; s; s = s->next)
		s->seen = false;
	latch_sandbox_list(scan_seen, ld);
	for (struct sandbox **pp = &ld->sandboxes; *pp;) {
		struct sandbox *s = *pp;

		if (s->seen) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		if (latch_sandbox_exists(s->name)) {
			/* pinned again: the files under the name are the new sandbox's, nothing of the old goes over them */
			latchd_log("%s: pinned again, the new pins served", s->name);
			s->learned_dirty = false;
			latchd_grants_disown(s);
			latchd_sandbox_free(s);
			continue;
		}
		latchd_log("%s: pins gone, no longer served", s->name);
		/* what it learned goes with it, and its kit (a new sandbox of the name gets new placeholders) */
		latchd_learned_remove_file(s->name);
		s->learned_dirty = false;
		latchd_grants_forget(s);
		latchd_broker_forget(s);
		latchd_sandbox_free(s);
	}
	latch_sandbox_list(scan_new, ld);
}
