// SPDX-License-Identifier: GPL-2.0-only
/*
 * grant_store.c - a grant as others see it: the JSON of the socket's
 * replies, the audit entries (kind "grant") and NAME.grants on disk.
 *
 * An ask's reason is the sandbox's words.  Wherever it goes it is labelled
 * so ("sandbox_says"), never as latch's own finding: a person approves the
 * destination, which they can judge, not the sentence, which they can't.
 *
 * NAME.grants (LATCH_STATE_GRANTS of the state API) holds the boot id, the last
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

/*
 * The file, in the state API's `key = value` lines:
 *   boot = ID                  the boot it was written in; another boot's lines are ignored
 *   asked = NS, granted = NS   the last hour's asks and grants (boot clock), one a line
 *   grant = ID ASKED SECONDS ASKED_AT DEADLINE_NS EXPIRES_AT REASON...
 *   host = NAME PROTO PORTS ADDRESSES   of the grant line above it; PORTS "any" or
 *                                        LO-HI,...; ADDRESSES A,... or "-"
 * The reason is last because it may hold blanks (latchd_grant_reason_check()
 * keeps newlines and controls out of it).
 */
struct grants_file {
	struct sandbox *s;
	uint64_t now;
	bool this_boot;
	struct grant *cur; /* the grant the next host lines belong to; NULL: skip them */
};

static int boot_parse(void *obj, const char *value, char *msg, size_t msglen)
{
	struct grants_file *gf = obj;
	char id[64];

	latchd_boot_id(id, sizeof(id));
	gf->this_boot = !strcmp(value, id);
	return 0;
}

static void boot_print(FILE *f, const void *obj)
{
	char id[64];

	latchd_boot_id(id, sizeof(id));
	fprintf(f, "boot = %s\n", id);
}

/* A time of the last hour, kept; anything else is skipped (it no longer counts). */
static void time_keep(uint64_t *t, int *n, uint64_t x, uint64_t now)
{
	if (*n < GRANT_HISTORY_MAX && x <= now && x + GRANT_HOUR_NS > now)
		t[(*n)++] = x;
}

static int asked_parse(void *obj, const char *value, char *msg, size_t msglen)
{
	struct grants_file *gf = obj;

	if (gf->this_boot)
		time_keep(gf->s->grants->asked, &gf->s->grants->n_asked, strtoull(value, NULL, 10), gf->now);
	return 0;
}

static int granted_parse(void *obj, const char *value, char *msg, size_t msglen)
{
	struct grants_file *gf = obj;

	if (gf->this_boot)
		time_keep(gf->s->grants->granted, &gf->s->grants->n_granted, strtoull(value, NULL, 10), gf->now);
	return 0;
}

static void times_print(FILE *f, const char *key, const uint64_t *t, int n)
{
	for (int i = 0; i < n; i++)
		fprintf(f, "%s = %llu\n", key, (unsigned long long)t[i]);
}

static void asked_print(FILE *f, const void *obj)
{
	const struct grants_file *gf = obj;

	times_print(f, "asked", gf->s->grants->asked, gf->s->grants->n_asked);
}

static void granted_print(FILE *f, const void *obj)
{
	const struct grants_file *gf = obj;

	times_print(f, "granted", gf->s->grants->granted, gf->s->grants->n_granted);
}

/* A stored grant whose deadline is still ahead, of this boot, not already known; else NULL. */
static struct grant *grant_restore(struct sandbox *s, const char *id, bool asked, uint64_t deadline, uint64_t now)
{
	struct grant *g;

	if (strlen(id) != GRANT_ID_CHARS || deadline <= now || latchd_grant_find(s->ld, id))
		return NULL;
	g = latchd_grant_new(s, asked);
	if (!g)
		return NULL;
	snprintf(g->id, sizeof(g->id), "%s", id);
	g->deadline_ns = deadline;
	g->state = GRANT_ACTIVE;
	return g;
}

/* The reason as stored; one an older latch let through is shown escaped from now on. */
static void reason_restore(struct grant *g, const char *reason)
{
	snprintf(g->reason, sizeof(g->reason), "%s", reason);
	if (latchd_grant_reason_check(g->reason, NULL, 0))
		latch_text_escape(reason, g->reason, sizeof(g->reason));
}

static int grant_parse(void *obj, const char *value, char *msg, size_t msglen)
{
	struct grants_file *gf = obj;
	unsigned long long deadline, asked_at, expires;
	char id[GRANT_ID_CHARS + 2];
	unsigned asked, seconds;
	int reason_at = -1;

	gf->cur = NULL;
	if (!gf->this_boot ||
	    sscanf(value, "%17s %u %u %llu %llu %llu %n", id, &asked, &seconds, &asked_at, &deadline, &expires,
		   &reason_at) != 6 ||
	    reason_at < 0)
		return 0; /* a line latchd did not write is skipped, as a spent grant is */
	gf->cur = grant_restore(gf->s, id, asked, deadline, gf->now);
	if (!gf->cur)
		return 0;
	gf->cur->seconds = seconds;
	gf->cur->asked_wall = (time_t)asked_at;
	gf->cur->deadline_wall = (time_t)expires;
	reason_restore(gf->cur, value + reason_at);
	return 0;
}

/* "any" or "LO-HI,..." into e's ports; -EINVAL when it is neither. */
static int ports_parse(const char *text, struct latch_entry *e)
{
	const char *p = text;

	if (!strcmp(text, "any"))
		return 0;
	while (*p && e->n_ports < LATCH_RULES_MAX) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi;

		if (*end != '-')
			return -EINVAL;
		hi = strtoul(end + 1, &end, 10);
		if (lo > hi || hi > 65535 || (*end && *end != ','))
			return -EINVAL;
		e->ports[e->n_ports].lo = lo;
		e->ports[e->n_ports++].hi = hi;
		p = *end ? end + 1 : end;
	}
	return 0;
}

_Static_assert(LATCH_RESOLVER_ADDRS_MAX *INET6_ADDRSTRLEN < 1600, "host_parse's addrs holds every address");

static int host_parse(void *obj, const char *value, char *msg, size_t msglen)
{
	struct grants_file *gf = obj;
	char name[LATCH_DNS_NAME_MAX + 2], ports[512], addrs[1600];
	struct grant_host *h;
	unsigned proto;
	char *a, *save;

	if (!gf->cur || gf->cur->n_hosts >= GRANT_HOSTS_MAX ||
	    sscanf(value, "%254s %u %511s %1599s", name, &proto, ports, addrs) != 4)
		return 0;
	h = &gf->cur->host[gf->cur->n_hosts];
	memset(h, 0, sizeof(*h));
	h->ports.proto = proto;
	if (latch_dns_name_normalize(name, h->name, sizeof(h->name)) || ports_parse(ports, &h->ports))
		return 0;
	for (a = strtok_r(addrs, ",", &save); a && h->n < LATCH_RESOLVER_ADDRS_MAX; a = strtok_r(NULL, ",", &save)) {
		char e[LATCH_ERR_MAX];

		if (strcmp(a, "-") && !latch_parse_addr(a, &h->addr[h->n], e, sizeof(e)))
			h->n++;
	}
	h->ttl_ns = gf->now; /* the TTL is unknown now: ask again soon */
	gf->cur->n_hosts++;
	return 0;
}

static void host_print(FILE *f, const struct grant_host *h)
{
	fprintf(f, "host = %s %d ", h->name, h->ports.proto);
	if (!h->ports.n_ports)
		fputs("any", f);
	for (int p = 0; p < h->ports.n_ports; p++)
		fprintf(f, "%s%u-%u", p ? "," : "", h->ports.ports[p].lo, h->ports.ports[p].hi);
	fputc(' ', f);
	if (!h->n)
		fputc('-', f);
	for (int k = 0; k < h->n; k++) {
		char a[INET6_ADDRSTRLEN];

		latch_addr_format(&h->addr[k], a, sizeof(a));
		fprintf(f, "%s%s", k ? "," : "", a);
	}
	fputc('\n', f);
}

/* Every active grant, each followed by its host lines (so "host" itself prints nothing). */
static void grants_print(FILE *f, const void *obj)
{
	const struct grants_file *gf = obj;

	for (const struct grant *g = gf->s->grants->list; g; g = g->next) {
		if (g->state != GRANT_ACTIVE)
			continue;
		fprintf(f, "grant = %s %d %u %lld %llu %lld %s\n", g->id, g->asked, g->seconds,
			(long long)g->asked_wall, (unsigned long long)g->deadline_ns, (long long)g->deadline_wall,
			g->reason);
		for (int i = 0; i < g->n_hosts; i++)
			host_print(f, &g->host[i]);
	}
}

static void nothing_print(FILE *f, const void *obj)
{
}

/* ---- the JSON document a latch before the state API's format wrote ---- */

static void legacy_times(json_t *a, uint64_t *t, int *n, uint64_t now)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v)
		time_keep(t, n, (uint64_t)json_integer_value(v), now);
}

static void legacy_grant(struct grants_file *gf, json_t *o)
{
	const char *id = json_string_value(json_object_get(o, "id"));
	json_t *hosts = json_object_get(o, "hosts"), *h;
	struct grant *g;
	size_t i;

	if (!id || !json_array_size(hosts) || json_array_size(hosts) > GRANT_HOSTS_MAX)
		return;
	g = grant_restore(gf->s, id, json_is_true(json_object_get(o, "asked")),
			  (uint64_t)json_integer_value(json_object_get(o, "deadline_ns")), gf->now);
	if (!g)
		return;
	reason_restore(g, json_string_value(json_object_get(o, "reason")) ?: "");
	g->seconds = json_integer_value(json_object_get(o, "seconds"));
	g->asked_wall = json_integer_value(json_object_get(o, "asked_at"));
	g->deadline_wall = json_integer_value(json_object_get(o, "expires_at"));
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
		gh->ttl_ns = gf->now;
		g->n_hosts++;
	}
}

static int legacy_read(const char *path, char *text, void *obj, char *err, size_t errlen)
{
	struct grants_file *gf = obj;
	json_t *doc = json_loads(text, 0, NULL), *o;
	char id[64];
	size_t i;

	if (!doc) {
		snprintf(err, errlen, "%s:1: neither `key = value` lines nor the JSON an older latchd wrote", path);
		return -EINVAL;
	}
	latchd_boot_id(id, sizeof(id));
	if (!strcmp(json_string_value(json_object_get(doc, "boot")) ?: "", id)) {
		legacy_times(json_object_get(doc, "asked"), gf->s->grants->asked, &gf->s->grants->n_asked, gf->now);
		legacy_times(json_object_get(doc, "granted"), gf->s->grants->granted, &gf->s->grants->n_granted,
			     gf->now);
		json_array_foreach(json_object_get(doc, "grants"), i, o)
			legacy_grant(gf, o);
	}
	json_decref(doc);
	return 0;
}

static const struct latch_kv_key grants_keys[] = {
	LATCH_KV_FN("boot", boot_parse, boot_print),
	LATCH_KV_LIST_FN("asked", asked_parse, asked_print),
	LATCH_KV_LIST_FN("granted", granted_parse, granted_print),
	LATCH_KV_LIST_FN("grant", grant_parse, grants_print),
	LATCH_KV_LIST_FN("host", host_parse, nothing_print),
};
static const struct latch_state_format grants_format = { grants_keys, 5, LATCH_KV_UNKNOWN_OK, legacy_read };

void latchd_grants_save(struct sandbox *s)
{
	struct grants_file gf = { .s = s };
	char err[LATCH_ERR_MAX];

	if (!latch_state_file_write(s->name, LATCH_STATE_GRANTS, &grants_format,
				    "latchd: this sandbox's asks and active grants; written by latchd", &gf, err,
				    sizeof(err)))
		s->grants->dirty = false; /* else the next tick tries again */
}

/* A grant restored without a host it could name is spent: nothing of it can be opened. */
static void drop_hostless(struct sandbox *s)
{
	struct grant *g = s->grants->list, *next;

	for (; g; g = next) {
		next = g->next;
		if (!g->n_hosts)
			latchd_grant_drop(g);
	}
}

void latchd_grants_open(struct sandbox *s)
{
	struct grants_file gf = { .s = s, .now = latch_now_boot_ns() };
	char err[LATCH_ERR_MAX];
	int ret;

	s->grants = calloc(1, sizeof(*s->grants));
	if (!s->grants)
		return;
	ret = latch_state_file_read(s->name, LATCH_STATE_GRANTS, &grants_format, &gf, err, sizeof(err));
	if (ret && ret != -ENOENT)
		latchd_log("%s: grants not restored: %s", s->name, err);
	drop_hostless(s);
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

void latchd_grants_disown(struct sandbox *s)
{
	if (s->grants)
		s->grants->dirty = false;
}

void latchd_grants_forget(struct sandbox *s)
{
	char err[LATCH_ERR_MAX];

	if (latch_state_file_remove(s->name, LATCH_STATE_GRANTS, err, sizeof(err)))
		latchd_log("%s: %s", s->name, err);
	if (s->grants)
		s->grants->dirty = false;
}
