// SPDX-License-Identifier: GPL-2.0-only
/*
 * grant_ops.c - grants on latchd's root-only socket: the only place a
 * grant is made or an ask approved.
 *
 *	{"op":"grant","sandbox":S,"hosts":["docs.example:443"],"seconds":N,"reason":T}
 *	{"op":"grants","sandbox":S}
 *	{"op":"approve","id":ID[,"seconds":N]}
 *	{"op":"deny","id":ID}
 *
 * The socket is root's alone (control.c); nothing the sandbox can reach
 * leads here: its ask endpoint (grant_ask.c) creates a pending ask and has
 * no verb that decides one.  grant and approve answer once the names are
 * resolved and the kernel holds their addresses (latchd_grant_settled()).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "latchd/grant.h"

static void refuse(struct client *c, const char *err, bool usage)
{
	latchd_control_reply(c, json_pack("{s:b, s:s, s:b}", "ok", 0, "error", err, "usage", usage));
}

/* The sandbox a request names, served and able to resolve; NULL after refusing. */
static struct sandbox *sandbox_of(struct latchd *ld, struct client *c, json_t *req, bool need_resolver)
{
	const char *name = json_string_value(json_object_get(req, "sandbox"));
	struct sandbox *s;

	if (!name) {
		refuse(c, "the request needs \"sandbox\"", true);
		return NULL;
	}
	latchd_sandboxes_scan(ld); /* one attached a moment ago */
	s = latchd_sandbox_find(ld, name);
	if (!s || !s->grants) {
		char err[LATCH_ERR_MAX];

		snprintf(err, sizeof(err), "no sandbox '%s' is served by latchd (see `latch status`)", name);
		refuse(c, err, true);
		return NULL;
	}
	if (need_resolver && !s->res) {
		latchd_control_reply_error(c,
					   "%s: no resolver (the sandbox has no resolver address); a grant's names are "
					   "resolved through it",
					   name);
		return NULL;
	}
	return s;
}

/* seconds: absent or 0 means the default; over grant_max is the caller's mistake. */
static int seconds_of(struct latchd *ld, json_t *v, uint32_t dflt, uint32_t *out, char *err, size_t errlen)
{
	json_int_t n = json_integer_value(v);

	if (v && !json_is_integer(v))
		return latch_errf(err, errlen, -EINVAL, "\"seconds\" must be a number");
	if (!v || !n) {
		*out = dflt;
		return 0;
	}
	if (n < 0 || n > ld->conf.grant_max)
		return latch_errf(
			err, errlen, -EINVAL,
			"%lld s is over the longest grant (grant_max = %u s in latch.conf); ask for %u s or less",
			(long long)n, ld->conf.grant_max, ld->conf.grant_max);
	*out = (uint32_t)n;
	return 0;
}

/* The hosts of a request into g; 0, or -EINVAL with the line. */
int latchd_grant_hosts_set(struct grant *g, json_t *hosts, const struct latch_entry *def, char *err, size_t errlen)
{
	size_t i;
	json_t *v;

	if (!json_is_array(hosts) || !json_array_size(hosts) || json_array_size(hosts) > GRANT_HOSTS_MAX)
		return latch_errf(err, errlen, -EINVAL, "name 1 to %d hosts", GRANT_HOSTS_MAX);
	json_array_foreach(hosts, i, v) {
		struct grant_host *h = &g->host[g->n_hosts];

		if (!json_is_string(v))
			return latch_errf(err, errlen, -EINVAL, "every host is a string, e.g. \"docs.example\"");
		if (latchd_grant_parse_host(json_string_value(v), def, h, err, errlen))
			return -EINVAL;
		for (int k = 0; k < g->n_hosts; k++)
			if (!strcmp(g->host[k].name, h->name))
				return latch_errf(err, errlen, -EINVAL, "%s is named twice", h->name);
		g->n_hosts++;
	}
	return 0;
}

void latchd_grant_op_grant(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	const struct latch_entry def = { .n_ports = 1, .ports = { { 443, 443 } } };
	const char *reason = json_string_value(json_object_get(req, "reason"));
	struct sandbox *s = sandbox_of(ld, c, req, true);
	char err[LATCH_ERR_MAX];
	struct grant *g;
	uint32_t seconds;

	if (!s)
		return;
	if (seconds_of(ld, json_object_get(req, "seconds"), ld->conf.grant_default, &seconds, err, sizeof(err)) ||
	    (reason && latchd_grant_reason_check(reason, err, sizeof(err))))
		return refuse(c, err, true);
	if (latchd_grant_cap_granted(s, latch_now_boot_ns(), err, sizeof(err))) {
		latchd_audit(ld, s->name, "grant", "refuse", "latchd.grant.cap", json_pack("{s:s}", "error", err));
		return refuse(c, err, true);
	}
	g = latchd_grant_new(s, false);
	if (!g)
		return latchd_control_reply_error(c, "out of memory");
	if (latchd_grant_hosts_set(g, json_object_get(req, "hosts"), &def, err, sizeof(err))) {
		latchd_grant_drop(g);
		return refuse(c, err, true);
	}
	snprintf(g->reason, sizeof(g->reason), "%s", reason ? reason : "");
	g->client = c;
	latchd_control_wait(c);
	latchd_grant_resolve(g, seconds); /* answered by latchd_grant_settled() */
}

void latchd_grant_settled(struct grant *g, const char *error, bool usage)
{
	if (g->client) {
		if (error)
			refuse(g->client, error, usage);
		else
			latchd_control_reply(g->client, json_pack("{s:b, s:o}", "ok", 1, "grant",
								  latchd_grant_json(g, latch_now_boot_ns())));
		g->client = NULL;
	}
	if (error)
		latchd_grant_ask_answer(g, 403, "refused", error);
	else
		latchd_grant_ask_answer(g, 200, "approved", NULL);
}

void latchd_grant_op_grants(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	struct sandbox *s = sandbox_of(ld, c, req, false);
	const struct latch_conf *cf = &ld->conf;
	uint64_t now = latch_now_boot_ns();
	json_t *list;

	if (!s)
		return;
	list = json_array();
	for (struct grant *g = s->grants->list; g; g = g->next)
		json_array_append_new(list, latchd_grant_json(g, now));
	latchd_control_reply(c, json_pack("{s:b, s:s, s:o, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}}", "ok", 1,
					  "sandbox", s->name, "grants", list, "caps", "grant_default",
					  cf->grant_default, "grant_max", cf->grant_max, "grants_per_hour",
					  cf->grants_per_hour, "granted_last_hour", latchd_grant_count_granted(s, now),
					  "grant_asks_per_hour", cf->grant_asks_per_hour, "asked_last_hour",
					  latchd_grant_count_asked(s, now), "grant_asks_pending",
					  cf->grant_asks_pending, "grant_ask_wait", cf->grant_ask_wait));
}

/* The grant an approve or deny names; NULL after refusing. */
static struct grant *grant_of(struct latchd *ld, struct client *c, json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "id"));
	struct grant *g = id ? latchd_grant_find(ld, id) : NULL;
	char err[LATCH_ERR_MAX];

	if (!g) {
		snprintf(err, sizeof(err),
			 "no ask or grant '%s' (it timed out, expired, or was decided; see `latch "
			 "grants NAME`)",
			 id ? id : "");
		refuse(c, err, true);
	}
	return g;
}

void latchd_grant_op_approve(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	struct grant *g = grant_of(ld, c, req);
	char err[LATCH_ERR_MAX];
	uint32_t seconds;

	if (!g)
		return;
	if (g->state != GRANT_PENDING) {
		snprintf(err, sizeof(err), "%s is %s, not waiting for a decision", g->id,
			 g->state == GRANT_ACTIVE ? "already open" : "being resolved");
		return refuse(c, err, true);
	}
	if (seconds_of(ld, json_object_get(req, "seconds"), g->seconds, &seconds, err, sizeof(err)))
		return refuse(c, err, true);
	if (!g->s->res)
		return latchd_control_reply_error(c, "%s: no resolver to look the names up with", g->s->name);
	if (latchd_grant_cap_granted(g->s, latch_now_boot_ns(), err, sizeof(err))) {
		latchd_grant_audit(g, "refuse", "latchd.grant.cap", json_pack("{s:s}", "error", err));
		return refuse(c, err, true); /* the ask still waits: deny it, or approve once there is room */
	}
	g->client = c;
	latchd_control_wait(c);
	latchd_grant_resolve(g, seconds);
}

void latchd_grant_op_deny(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	struct grant *g = grant_of(ld, c, req);
	char err[LATCH_ERR_MAX];

	if (!g)
		return;
	if (g->state == GRANT_RESOLVING) {
		snprintf(err, sizeof(err), "%s is being resolved; deny it again in a moment to close it", g->id);
		return refuse(c, err, false);
	}
	if (g->state == GRANT_PENDING) {
		latchd_grant_audit(g, "deny", "latchd.grant.deny", NULL);
		latchd_grant_ask_answer(g, 403, "denied", "a person denied the ask");
		latchd_control_reply(c, json_pack("{s:b, s:s, s:s, s:s}", "ok", 1, "id", g->id, "sandbox", g->s->name,
						  "decision", "denied"));
		latchd_grant_drop(g);
		return;
	}
	if (latchd_grant_close_now(g, err, sizeof(err))) {
		latchd_grant_audit(g, "fail", "latchd.grant.close", json_pack("{s:s}", "error", err));
		return latchd_control_reply_error(c, "%s: %s", g->id, err);
	}
	latchd_grant_audit(g, "close", "latchd.grant.close", NULL);
	latchd_control_reply(c, json_pack("{s:b, s:s, s:s, s:s}", "ok", 1, "id", g->id, "sandbox", g->s->name,
					  "decision", "closed"));
	latchd_grant_drop(g);
}

void latchd_grant_client_gone(struct latchd *ld, struct client *c)
{
	for (struct sandbox *s = ld->sandboxes; s; s = s->next)
		for (struct grant *g = s->grants ? s->grants->list : NULL; g; g = g->next)
			if (g->client == c)
				g->client = NULL;
}
