// SPDX-License-Identifier: GPL-2.0-only
/*
 * switch.c - a sandbox's profile into its maps, and kept there.
 *
 * A switch looks the host names of the profile and of the kit's
 * egress_allow up here (never in the guest), composes the new policy with
 * latch_profile_compose() (profile/profile.h
 * has the precedence), writes it under the idle generation and makes it live
 * with one config update; the client that asked is answered then.  The
 * sandbox's policy lock is held from reading the live generation (for what
 * to carry) to the flip, and around every learned or host-name write, so
 * that `latch egress allow|revoke` never lands in between.  Between switches
 * each host name is asked again before its TTL runs out.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latchd/latchd.h"

#define HOST_RETRY_S 5

/*
 * How long a learned write waits for the policy lock, which `latch egress
 * allow|revoke` holds for a few milliseconds.  latchd is one event loop: the
 * wait holds up every sandbox's resolver, so it is short, and an answer
 * whose entry could not be written is still sent (its connections are then
 * dropped: fail closed) with a line in the log.
 */
#define LEARN_LOCK_WAIT_MS 2000

struct lookup_ctx {
	struct sandbox *s;
	struct pending_switch *sw; /* for a switch; NULL for a refresh */
	int idx; /* hostname index */
	unsigned generation; /* of s->hosts, for a refresh */
};

int latchd_switch_load_profile(struct latchd *ld, const char *name, struct latch_profile *p, char *err, size_t errlen)
{
	return latch_profile_load(ld->profile_dir, name, ld->overlay, p, err, errlen);
}

/*
 * A learned or host-name entry into the kernel.  The write is a
 * read-modify-write of the address's rules, so it holds the policy lock:
 * otherwise a `latch egress revoke` of a port on the same address, landing
 * between the read and the write, would be undone.  A cached answer, which
 * changes nothing, takes no lock.
 */
int latchd_switch_learn(struct sandbox *s, const struct latch_entry *e, uint64_t expires, int origin, char *err,
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

/* ---- composing and committing ---- */

/* The host names of a profile and of the kit's entries, unresolved. */
static struct hostname *hosts_of(const struct latch_profile *p, const struct latch_pentry *extra, int n_extra, int *n)
{
	struct hostname *h;
	int cnt = 0;

	for (int i = 0; i < p->n; i++)
		cnt += p->entries[i].kind == LATCH_PENTRY_HOST;
	for (int i = 0; i < n_extra; i++)
		cnt += extra[i].kind == LATCH_PENTRY_HOST;
	h = calloc(cnt ? cnt : 1, sizeof(*h));
	if (!h)
		return NULL;
	cnt = 0;
	for (int i = 0; i < p->n; i++)
		if (p->entries[i].kind == LATCH_PENTRY_HOST)
			h[cnt++].pe = &p->entries[i];
	for (int i = 0; i < n_extra; i++)
		if (extra[i].kind == LATCH_PENTRY_HOST)
			h[cnt++].pe = &extra[i];
	*n = cnt;
	return h;
}

static void switch_free(struct pending_switch *sw)
{
	if (!sw)
		return;
	latch_profile_free(&sw->prof);
	free(sw->extra);
	free(sw->hosts);
	free(sw);
}

void latchd_switch_abandon(struct sandbox *s)
{
	if (!s->sw)
		return;
	latchd_control_reply_error(s->sw->client, "%s: the sandbox went away during the switch", s->name);
	switch_free(s->sw);
	s->sw = NULL;
}

/*
 * Collect a switched sandbox's old generation, once the client has its
 * answer: a step of GC_STEP_KEYS keys every millisecond, under the policy
 * lock, so that a 65,536-entry generation (~90 ms of map deletes) never
 * holds up the client, the resolvers or another sandbox's switch.
 */
#define GC_STEP_KEYS 4096
static const struct timeval gc_step_interval = { 0, 1000 }; /* 1 ms */

void latchd_switch_gc_stop(struct sandbox *s)
{
	if (s->gc_ev)
		event_free(s->gc_ev);
	latch_policy_gc_free(s->gc);
	s->gc_ev = NULL;
	s->gc = NULL;
}

static void gc_step(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *s = arg;
	char err[LATCH_ERR_MAX];
	int lock, rc = 1;

	/* a switch running now writes the idle generation itself; try again after it */
	if (!s->sw && (lock = latch_policy_lock_wait(s->name, 0, err, sizeof(err))) >= 0) {
		rc = latch_policy_gc_step(s->gc, GC_STEP_KEYS);
		latch_policy_unlock(lock);
	}
	if (rc < 0)
		latchd_log("%s: collecting the old policy generation: %s (the next switch collects it)", s->name,
			   strerror(-rc));
	if (rc <= 0)
		latchd_switch_gc_stop(s);
	else
		evtimer_add(s->gc_ev, &gc_step_interval);
}

static void gc_schedule(struct sandbox *s)
{
	latchd_switch_gc_stop(s);
	s->gc = latch_policy_gc_begin(s->sb);
	if (!s->gc)
		return; /* clean already, or no memory: the next switch's write collects it */
	s->gc_ev = evtimer_new(s->ld->base, gc_step, s);
	if (!s->gc_ev) {
		latchd_switch_gc_stop(s);
		return;
	}
	evtimer_add(s->gc_ev, &gc_step_interval);
}

/* What compose needs from the switch and the sandbox, besides the live rules; 0 or -ENOMEM. */
static int compose_inputs(struct pending_switch *sw, struct latch_compose_in *in)
{
	struct sandbox *s = sw->s;
	struct latch_compose_host *hosts = calloc(sw->n_hosts ? sw->n_hosts : 1, sizeof(*hosts));
	struct latch_compose_learned *learned = calloc(s->n_learned ? s->n_learned : 1, sizeof(*learned));

	*in = (struct latch_compose_in){ .profile = &sw->prof,
					 .extra = sw->extra,
					 .n_extra = sw->n_extra,
					 .hosts = hosts,
					 .n_hosts = sw->n_hosts,
					 .learned = learned,
					 .n_learned = s->n_learned,
					 .now_ns = latch_now_boot_ns(),
					 .grace_ns = RESOLVED_GRACE_NS };
	if (!hosts || !learned)
		return -ENOMEM;
	for (int i = 0; i < sw->n_hosts; i++)
		hosts[i] = (struct latch_compose_host){ .pe = sw->hosts[i].pe,
							.addr = sw->hosts[i].addr,
							.n = sw->hosts[i].n,
							.expires_ns = sw->hosts[i].expires_ns };
	for (int i = 0; i < s->n_learned; i++)
		learned[i] = (struct latch_compose_learned){ .name = s->learned[i].name,
							     .addr = s->learned[i].addr,
							     .expires_ns = s->learned[i].expires_ns };
	return 0;
}

/* The reply's "hosts": each name with its addresses as just resolved, or why not. */
static json_t *hosts_json(const struct pending_switch *sw)
{
	json_t *hosts = json_array();

	for (int i = 0; i < sw->n_hosts; i++) {
		const struct hostname *h = &sw->hosts[i];
		json_t *addrs = json_array();

		for (int k = 0; k < h->n; k++)
			json_array_append_new(addrs, latchd_addr_json(&h->addr[k]));
		json_array_append_new(hosts, json_pack("{s:s, s:o, s:s?}", "name", h->pe->name, "addresses", addrs,
						       "error", h->why));
	}
	return hosts;
}

/* The sandbox now runs the switch's profile: swap it in, with its hosts. */
static void switch_adopt(struct pending_switch *sw)
{
	struct sandbox *s = sw->s;
	char err[LATCH_ERR_MAX];

	latch_sandbox_read_config(s->sb, &s->cfg);
	latch_profile_free(&s->prof);
	free(s->hosts);
	s->prof = sw->prof;
	memset(&sw->prof, 0, sizeof(sw->prof));
	s->hosts = sw->hosts;
	s->n_hosts = sw->n_hosts;
	free(s->extra);
	s->extra = sw->extra;
	s->n_extra = sw->n_extra;
	/* the hosts point into the profile and the kit's entries, which moved with their arrays: still valid */
	sw->hosts = NULL;
	sw->extra = NULL;
	s->hosts_generation++;
	s->have_profile = true;
	latchd_learned_keep_allowed(s);
	latch_resolver_flush(s->res);
	if (latch_profile_state_write(s->name, s->prof.name, err, sizeof(err)))
		latchd_log("%s: %s", s->name, err);
}

/* The profile's host names, recorded at their addresses before the policy lets the guest reach them. */
static int record_host_names(struct sandbox *s, const struct latch_compose_in *in, char *err, size_t errlen)
{
	for (int i = 0; i < in->n_hosts; i++) {
		const struct latch_compose_host *h = &in->hosts[i];

		for (int k = 0; k < h->n; k++) {
			struct latch_entry e;
			int rc;

			latch_profile_address_entry(&h->addr[k], &h->pe->entry, &e);
			rc = latchd_learned_name(s, h->pe->name, &e, h->expires_ns, err, errlen);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static void switch_commit(struct pending_switch *sw)
{
	struct sandbox *s = sw->s;
	struct latch_compose_live live = { .carry_live_learned = sw->carry_live_learned };
	struct latch_compose_in in;
	struct latch_compose_out out = { 0 };
	char err[LATCH_ERR_MAX];
	json_t *hosts;
	int rc = compose_inputs(sw, &in), lock = -1;

	/*
	 * From reading the live generation to the flip, `latch egress
	 * allow|revoke` waits on the policy lock: otherwise an allow could land
	 * in the old generation, or a revoke be undone by the carry.
	 */
	if (!rc && (lock = latch_policy_lock(s->name, err, sizeof(err))) < 0) {
		latchd_control_reply_error(sw->client, "%s: %s", s->name, err);
		goto out;
	}
	if (!rc)
		rc = latch_policy_list(s->sb, latch_compose_live_keep, &live) < 0 ? -EIO : live.rc;
	if (!rc) {
		in.live = live.items;
		in.n_live = live.n;
		rc = latch_profile_compose(&in, &out);
	}
	if (!rc)
		rc = record_host_names(s, &in, err, sizeof(err));
	if (rc) {
		latch_policy_unlock(lock);
		latchd_control_reply_error(sw->client, "%s: cannot build the policy: %s", s->name, strerror(-rc));
		goto out;
	}
	rc = latch_policy_switch(s->sb, out.specs, out.n, out.open, err, sizeof(err));
	latch_policy_unlock(lock);
	if (rc) {
		latchd_control_reply_error(sw->client, "%s: %s", s->name, err);
		latchd_audit(s->ld, s->name, "profile", "fail", "latchd.profile.switch",
			     json_pack("{s:s, s:s, s:s}", "from", sw->from, "to", sw->prof.name, "error", err));
		goto out;
	}
	/* the old generation is idle now; deleting it can wait until the client has its answer */
	gc_schedule(s);
	hosts = hosts_json(sw); /* before the hosts move to the sandbox */
	switch_adopt(sw);
	latchd_audit(s->ld, s->name, "profile", "switch", "latchd.profile.switch",
		     json_pack("{s:s, s:s, s:i, s:i, s:i, s:b}", "from", sw->from, "to", s->prof.name, "entries", out.n,
			       "kit_entries", s->n_extra, "learned_kept", out.counts.learned, "uncontained",
			       s->prof.open));
	latchd_control_reply(sw->client, json_pack("{s:b, s:s, s:s, s:i, s:i, s:i, s:o, s:b}", "ok", 1, "sandbox",
						   s->name, "profile", s->prof.name, "entries", out.n, "kit_entries",
						   s->n_extra, "learned_kept", out.counts.learned, "hosts", hosts,
						   "uncontained", s->prof.open));
out:
	latch_compose_out_free(&out);
	free(live.items);
	free((void *)in.hosts);
	free((void *)in.learned);
	s->sw = NULL;
	switch_free(sw);
}

/* ---- host names ---- */

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
void latchd_switch_begin(struct sandbox *s, struct latch_profile *p, struct client *c, bool carry_live_learned)
{
	struct pending_switch *sw = calloc(1, sizeof(*sw));

	if (!sw) {
		latch_profile_free(p);
		latchd_control_reply_error(c, "out of memory");
		return;
	}
	sw->s = s;
	sw->prof = *p;
	memset(p, 0, sizeof(*p));
	sw->client = c;
	sw->carry_live_learned = carry_live_learned;
	snprintf(sw->from, sizeof(sw->from), "%s", s->have_profile ? s->prof.name : "");
	sw->hosts = NULL;
	if (!latchd_broker_kit_egress(s, &sw->extra, &sw->n_extra))
		sw->hosts = hosts_of(&sw->prof, sw->extra, sw->n_extra, &sw->n_hosts);
	if (!sw->hosts) {
		latchd_control_reply_error(c, "out of memory");
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
		latchd_log("%s: cannot refresh %s: %s (its entries expire at their TTL)", s->name, name, why);
		return;
	}
	for (int i = 0; i < h->n; i++) {
		struct latch_entry e;

		latch_profile_address_entry(&h->addr[i], &h->pe->entry, &e);
		if (latchd_learned_name(s, h->pe->name, &e, h->expires_ns, err, sizeof(err)) ||
		    latchd_switch_learn(s, &e, h->expires_ns, LATCH_ORIGIN_HOSTNAME, err, sizeof(err)))
			latchd_log("%s: %s: %s", s->name, name, err);
	}
}

/* Ask again for every host name whose TTL is about to run out (the last tenth, at least 5 s). */
void latchd_switch_refresh_hosts(struct sandbox *s, uint64_t now)
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
			uint64_t ttl_ns = (uint64_t)s->ld->conf.dns_ttl_max * NS_PER_S;

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
