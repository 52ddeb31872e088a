// SPDX-License-Identifier: GPL-2.0-only
/*
 * grant_store.c - a grant as others see it: the JSON of the socket's
 * replies, the audit entries (kind "grant") and NAME.grants on disk.
 *
 * An ask's reason is the sandbox's words.  Wherever it goes it is labelled
 * so ("sandbox_says"), never as latch's own finding: a person approves the
 * destination, which they can judge, not the sentence, which they can't.
 *
 * NAME.grants (LATCH_STATE_GRANTS of the state API, a JSON document) holds the boot id, the last
 * hour's asks and grants (what the caps count) and the active grants with
 * their boot-clock deadlines, so a restarted latchd still knows the names
 * the kernel's GRANT entries were opened for.  A file of another boot is
 * ignored: its deadlines mean nothing now, and its maps are gone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "latchd/grant.h"

static const char *state_name(enum grant_state st)
{
	return st == GRANT_NEW	     ? "new" :
	       st == GRANT_PENDING   ? "pending" :
	       st == GRANT_RESOLVING ? "resolving" :
				       "active";
}

void latchd_grant_ports_text(const struct latch_entry *ports, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (!ports->n_ports)
		n = snprintf(buf, len, "any");
	for (int i = 0; i < ports->n_ports && n < len; i++) {
		const struct latch_port_range *r = &ports->ports[i];

		n += r->lo == r->hi ? snprintf(buf + n, len - n, "%s%u", i ? "," : "", r->lo) :
				      snprintf(buf + n, len - n, "%s%u-%u", i ? "," : "", r->lo, r->hi);
	}
	if (n < len && (ports->proto == LATCH_PROTO_TCP || ports->proto == LATCH_PROTO_UDP))
		snprintf(buf + n, len - n, "/%s", ports->proto == LATCH_PROTO_TCP ? "tcp" : "udp");
}

static json_t *hosts_json(const struct grant *g, bool addresses)
{
	json_t *list = json_array();

	for (int i = 0; i < g->n_hosts; i++) {
		const struct grant_host *h = &g->host[i];
		char ports[160];
		json_t *o;

		latchd_grant_ports_text(&h->ports, ports, sizeof(ports));
		o = json_pack("{s:s, s:s}", "name", h->name, "ports", ports);
		if (addresses) {
			json_t *a = json_array();

			for (int k = 0; k < h->n; k++)
				json_array_append_new(a, latchd_addr_json(&h->addr[k]));
			json_object_set_new(o, "addresses", a);
		}
		json_array_append_new(list, o);
	}
	return list;
}

/* The reason under the label that says whose words they are. */
static void reason_set(json_t *o, const struct grant *g)
{
	if (g->reason[0])
		json_object_set_new(o, g->asked ? "sandbox_says" : "note", json_string(g->reason));
}

json_t *latchd_grant_json(const struct grant *g, uint64_t now)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:I}", "id", g->id, "sandbox", g->s->name, "state",
			      state_name(g->state), "by", g->asked ? "sandbox" : "host", "hosts",
			      hosts_json(g, g->state == GRANT_ACTIVE), "seconds", (int)g->seconds, "asked_at",
			      (json_int_t)g->asked_wall);

	reason_set(o, g);
	if (g->state == GRANT_PENDING) {
		double left = g->wait_until_ns > now ? (double)(g->wait_until_ns - now) / 1e9 : 0;

		json_object_set_new(o, "decide_within_s", json_real(left));
		json_object_set_new(o, "decide_by", json_integer(time(NULL) + (json_int_t)left));
	}
	if (g->state == GRANT_ACTIVE) {
		json_object_set_new(o, "seconds_left",
				    json_real(g->deadline_ns > now ? (double)(g->deadline_ns - now) / 1e9 : 0));
		json_object_set_new(o, "expires_at", json_integer(g->deadline_wall));
	}
	return o;
}

void latchd_grant_audit(const struct grant *g, const char *decision, const char *reason, json_t *extra)
{
	json_t *f = json_pack("{s:s, s:s, s:o, s:i}", "id", g->id, "by", g->asked ? "sandbox" : "host", "hosts",
			      hosts_json(g, g->state == GRANT_ACTIVE), "seconds", (int)g->seconds);

	reason_set(f, g);
	if (g->state == GRANT_ACTIVE)
		json_object_set_new(f, "expires_at", json_integer(g->deadline_wall));
	if (extra) {
		json_object_update(f, extra);
		json_decref(extra);
	}
	latchd_audit(g->s->ld, g->s->name, "grant", decision, reason, f);
}

/* ---- NAME.grants ---- */

static json_t *times_json(const uint64_t *t, int n)
{
	json_t *a = json_array();

	for (int i = 0; i < n; i++)
		json_array_append_new(a, json_integer((json_int_t)t[i]));
	return a;
}

static json_t *stored_json(const struct grant *g)
{
	json_t *hosts = json_array();

	for (int i = 0; i < g->n_hosts; i++) {
		const struct grant_host *h = &g->host[i];
		json_t *ports = json_array(), *addrs = json_array();

		for (int p = 0; p < h->ports.n_ports; p++)
			json_array_append_new(ports, json_pack("[i, i]", h->ports.ports[p].lo, h->ports.ports[p].hi));
		for (int k = 0; k < h->n; k++)
			json_array_append_new(addrs, latchd_addr_json(&h->addr[k]));
		json_array_append_new(hosts, json_pack("{s:s, s:i, s:o, s:o}", "name", h->name, "proto", h->ports.proto,
						       "ports", ports, "addresses", addrs));
	}
	return json_pack("{s:s, s:b, s:i, s:s, s:I, s:I, s:I, s:o}", "id", g->id, "asked", g->asked, "seconds",
			 (int)g->seconds, "reason", g->reason, "asked_at", (json_int_t)g->asked_wall, "deadline_ns",
			 (json_int_t)g->deadline_ns, "expires_at", (json_int_t)g->deadline_wall, "hosts", hosts);
}

void latchd_grants_save(struct sandbox *s)
{
	struct grants *gs = s->grants;
	char id[64], err[LATCH_ERR_MAX], *text;
	json_t *list = json_array(), *doc;

	for (struct grant *g = gs->list; g; g = g->next)
		if (g->state == GRANT_ACTIVE)
			json_array_append_new(list, stored_json(g));
	latchd_boot_id(id, sizeof(id));
	doc = json_pack("{s:s, s:o, s:o, s:o}", "boot", id, "asked", times_json(gs->asked, gs->n_asked), "granted",
			times_json(gs->granted, gs->n_granted), "grants", list);
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (text && !latch_state_file_write_raw(s->name, LATCH_STATE_GRANTS, text, strlen(text), err, sizeof(err)))
		gs->dirty = false;
	free(text);
}

static void times_load(json_t *a, uint64_t *t, int *n, uint64_t now)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) {
		uint64_t x = (uint64_t)json_integer_value(v);

		if (*n < GRANT_HISTORY_MAX && x <= now && x + GRANT_HOUR_NS > now)
			t[(*n)++] = x;
	}
}

/* One stored active grant back into the list; false when it is spent or malformed. */
static bool grant_load(struct sandbox *s, json_t *o, uint64_t now)
{
	uint64_t deadline = (uint64_t)json_integer_value(json_object_get(o, "deadline_ns"));
	const char *id = json_string_value(json_object_get(o, "id"));
	json_t *hosts = json_object_get(o, "hosts"), *h;
	struct grant *g;
	size_t i;

	if (!id || strlen(id) != GRANT_ID_CHARS || deadline <= now || !json_array_size(hosts) ||
	    json_array_size(hosts) > GRANT_HOSTS_MAX || latchd_grant_find(s->ld, id))
		return false;
	g = latchd_grant_new(s, json_is_true(json_object_get(o, "asked")));
	if (!g)
		return false;
	snprintf(g->id, sizeof(g->id), "%s", id);
	snprintf(g->reason, sizeof(g->reason), "%s", json_string_value(json_object_get(o, "reason")) ?: "");
	if (latchd_grant_reason_check(g->reason, NULL,
				      0)) /* a state file of an older latch: shown escaped from now on */
		latch_text_escape(json_string_value(json_object_get(o, "reason")), g->reason, sizeof(g->reason));
	g->seconds = json_integer_value(json_object_get(o, "seconds"));
	g->asked_wall = json_integer_value(json_object_get(o, "asked_at"));
	g->deadline_ns = deadline;
	g->deadline_wall = json_integer_value(json_object_get(o, "expires_at"));
	g->state = GRANT_ACTIVE;
	json_array_foreach(hosts, i, h) {
		struct grant_host *gh = &g->host[g->n_hosts];
		const char *name = json_string_value(json_object_get(h, "name"));
		char e[LATCH_ERR_MAX];
		json_t *v;
		size_t k;

		if (!name || latch_dns_name_normalize(name, gh->name, sizeof(gh->name)))
			continue;
		gh->ports.proto = json_integer_value(json_object_get(h, "proto"));
		json_array_foreach(json_object_get(h, "ports"), k, v) {
			if (gh->ports.n_ports < LATCH_RULES_MAX) {
				gh->ports.ports[gh->ports.n_ports].lo = json_integer_value(json_array_get(v, 0));
				gh->ports.ports[gh->ports.n_ports++].hi = json_integer_value(json_array_get(v, 1));
			}
		}
		json_array_foreach(json_object_get(h, "addresses"), k, v) {
			if (gh->n < LATCH_RESOLVER_ADDRS_MAX && json_is_string(v) &&
			    !latch_parse_addr(json_string_value(v), &gh->addr[gh->n], e, sizeof(e)))
				gh->n++;
		}
		gh->ttl_ns = now; /* the TTL is unknown now: ask again soon */
		g->n_hosts++;
	}
	return true;
}

void latchd_grants_open(struct sandbox *s)
{
	char id[64], err[LATCH_ERR_MAX], *text = NULL;
	uint64_t now = latch_now_boot_ns();
	json_t *doc = NULL, *o;
	size_t i, len;
	int ret;

	s->grants = calloc(1, sizeof(*s->grants));
	if (!s->grants)
		return;
	ret = latch_state_file_read_raw(s->name, LATCH_STATE_GRANTS, &text, &len, err, sizeof(err));
	if (ret && ret != -ENOENT)
		latchd_log("%s: grants not restored: %s", s->name, err);
	if (text)
		doc = json_loads(text, 0, NULL);
	free(text);
	if (!doc)
		return;
	latchd_boot_id(id, sizeof(id));
	if (!strcmp(json_string_value(json_object_get(doc, "boot")) ?: "", id)) {
		times_load(json_object_get(doc, "asked"), s->grants->asked, &s->grants->n_asked, now);
		times_load(json_object_get(doc, "granted"), s->grants->granted, &s->grants->n_granted, now);
		json_array_foreach(json_object_get(doc, "grants"), i, o)
			grant_load(s, o, now);
	}
	json_decref(doc);
	s->grants->dirty = false;
}

void latchd_grants_close(struct sandbox *s)
{
	if (!s->grants)
		return;
	if (s->grants->dirty) /* the active grants stay on disk for the next latchd (unless forgotten) */
		latchd_grants_save(s);
	while (s->grants->list) {
		struct grant *g = s->grants->list;

		latchd_control_reply_error(g->client, "%s: the sandbox went away", s->name);
		g->client = NULL;
		latchd_grant_ask_answer(g, 503, "refused", "latchd let go of this sandbox; ask again");
		s->grants->list = g->next;
		free(g);
	}
	free(s->grants);
	s->grants = NULL;
}

void latchd_grants_forget(struct sandbox *s)
{
	char err[LATCH_ERR_MAX];

	if (latch_state_file_remove(s->name, LATCH_STATE_GRANTS, err, sizeof(err)))
		latchd_log("%s: %s", s->name, err);
	if (s->grants)
		s->grants->dirty = false;
}
