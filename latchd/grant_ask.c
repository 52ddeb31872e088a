// SPDX-License-Identifier: GPL-2.0-only
/*
 * grant_ask.c - the sandbox asks: POST /latch/grant on its broker listener.
 *
 * The listener serves the sandbox's guest address only (broker), and
 * this endpoint can only ask.  A valid ask becomes a pending grant, the
 * person hears of it (grant_notify.c), and the request is held until a
 * decision comes over the root-only socket (grant_ops.c), the wait runs out
 * (grant_ask_wait), or the guest leaves (the ask is withdrawn).  Nothing a
 * request carries decides anything: another path, another method, an "id"
 * or an "approve" field are refused like any other mistake.
 *
 *	POST /latch/grant  {"hosts": ["docs.example"], "ports": [443], "seconds": 60, "reason": "..."}
 *	200 {"decision": "approved", "seconds": 60, "seconds_left": 59.9, "expires_at": EPOCH, "hosts": [...]}
 *	403 {"decision": "denied" | "timeout" | "refused", "message": "latch: ..."}
 *	400, 404, 405, 429, 503 {"decision": "refused", "message": "latch: ..."}
 *
 * Refused asks are audited, at most ASK_REFUSALS_RECORDED a minute per
 * sandbox; the rest are counted and the count rides on the next one, so a
 * flood can't crowd the decisions out of the audit log's rate limit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latchd/grant.h"

#define ASK_REFUSALS_RECORDED 10

static void answer(struct latch_http_local *req, int status, const char *decision, const char *message, json_t *more)
{
	json_t *o = more ? more : json_object();
	char *text;

	json_object_set_new(o, "decision", json_string(decision));
	if (message) {
		char line[LATCH_ERR_MAX + 8];

		snprintf(line, sizeof(line), "latch: %s", message);
		json_object_set_new(o, "message", json_string(line));
	}
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	latch_http_local_answer(req, status, text ? text : "{\"decision\":\"refused\"}");
	free(text);
}

void latchd_grant_ask_answer(struct grant *g, int status, const char *decision, const char *message)
{
	json_t *more = NULL;

	if (!g->http)
		return;
	if (status == 200) {
		more = latchd_grant_json(g, latch_now_boot_ns());
		/* the id is for the person's side; the guest has no use for it */
		json_object_del(more, "id");
	}
	answer(g->http, status, decision, message, more);
	g->http = NULL;
}

/* A refused ask: answered, and audited within the per-minute allowance. */
static void refused(struct sandbox *s, struct latch_http_local *req, int status, const char *code, const char *msg,
		    json_t *fields)
{
	struct grants *gs = s->grants;
	uint64_t now = latch_now_boot_ns();

	answer(req, status, "refused", msg, NULL);
	if (!gs) {
		json_decref(fields);
		return;
	}
	if (now >= gs->refused_minute + 60 * NS_PER_S) {
		gs->refused_minute = now;
		gs->refused_recorded = 0;
	}
	if (gs->refused_recorded >= ASK_REFUSALS_RECORDED) {
		gs->refused_unrecorded++;
		json_decref(fields);
		return;
	}
	gs->refused_recorded++;
	if (!fields)
		fields = json_object();
	json_object_set_new(fields, "error", json_string(msg));
	if (gs->refused_unrecorded) {
		json_object_set_new(fields, "refused_unrecorded", json_integer(gs->refused_unrecorded));
		gs->refused_unrecorded = 0;
	}
	latchd_audit(s->ld, s->name, "grant", "refuse", code, fields);
}

/* The hosts as the guest sent them, for the audit of a refusal (each cut to 80 bytes). */
static json_t *raw_hosts(json_t *hosts)
{
	json_t *list = json_array(), *v;
	size_t i;

	json_array_foreach(hosts, i, v) {
		char cut[81];

		if (i >= GRANT_HOSTS_MAX)
			break;
		snprintf(cut, sizeof(cut), "%s", json_is_string(v) ? json_string_value(v) : "(not a string)");
		json_array_append_new(list, json_string(cut) ?: json_string("(not UTF-8)"));
	}
	return list;
}

/* "ports": absent (443), or 1..GRANT_PORTS_MAX numbers 1..65535; any protocol. */
static int ports_of(json_t *v, struct latch_entry *def, char *err, size_t errlen)
{
	json_t *p;
	size_t i;

	memset(def, 0, sizeof(*def));
	if (!v) {
		def->n_ports = 1;
		def->ports[0] = (struct latch_port_range){ 443, 443 };
		return 0;
	}
	if (!json_is_array(v) || !json_array_size(v) || json_array_size(v) > GRANT_PORTS_MAX)
		return latch_errf(err, errlen, -EINVAL, "\"ports\" is a list of 1 to %d port numbers", GRANT_PORTS_MAX);
	json_array_foreach(v, i, p) {
		json_int_t n = json_integer_value(p);

		if (!json_is_integer(p) || n < 1 || n > 65535)
			return latch_errf(err, errlen, -EINVAL, "\"ports\" holds port numbers, 1 to 65535");
		def->ports[def->n_ports++] = (struct latch_port_range){ (uint16_t)n, (uint16_t)n };
	}
	return 0;
}

/* The ask's fields into g (hosts, seconds, reason); 0, or -EINVAL with the line. */
static int ask_fields(struct sandbox *s, json_t *root, struct grant *g, char *err, size_t errlen)
{
	static const char *const known[] = { "hosts", "ports", "seconds", "reason" };
	json_t *seconds = json_object_get(root, "seconds"), *reason = json_object_get(root, "reason"), *v;
	struct latch_entry def;
	const char *key;

	json_object_foreach(root, key, v) {
		bool ok = false;

		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok = ok || !strcmp(key, known[i]);
		if (!ok)
			return latch_errf(err, errlen, -EINVAL,
					  "unknown field '%.40s': an ask has hosts, ports, seconds and reason, and "
					  "decides nothing",
					  key);
	}
	if (ports_of(json_object_get(root, "ports"), &def, err, errlen) ||
	    latchd_grant_hosts_set(g, json_object_get(root, "hosts"), &def, err, errlen))
		return -EINVAL;
	/* what a person approves is a short list of ports: "docs.example:1-65535" is not one */
	for (int i = 0; i < g->n_hosts; i++) {
		const struct latch_entry *p = &g->host[i].ports;

		if (p->n_ports > GRANT_PORTS_MAX)
			return latch_errf(err, errlen, -EINVAL, "%s: at most %d ports", g->host[i].name,
					  GRANT_PORTS_MAX);
		for (int k = 0; k < p->n_ports; k++)
			if (p->ports[k].lo != p->ports[k].hi)
				return latch_errf(err, errlen, -EINVAL,
						  "%s: an ask names single ports, not the range %u-%u", g->host[i].name,
						  p->ports[k].lo, p->ports[k].hi);
	}
	g->seconds = s->ld->conf.grant_default;
	if (seconds) {
		json_int_t n = json_integer_value(seconds);

		if (!json_is_integer(seconds) || n < 1)
			return latch_errf(err, errlen, -EINVAL, "\"seconds\" is a number of seconds, 1 or more");
		if (n > s->ld->conf.grant_max)
			return latch_errf(err, errlen, -EINVAL,
					  "%lld s is over the longest grant, %u s (grant_max); ask for less",
					  (long long)n, s->ld->conf.grant_max);
		g->seconds = (uint32_t)n;
	}
	if (reason && !json_is_string(reason))
		return latch_errf(err, errlen, -EINVAL, "\"reason\" is a string");
	if (reason && latchd_grant_reason_check(json_string_value(reason), err, errlen))
		return -EINVAL;
	snprintf(g->reason, sizeof(g->reason), "%s", reason ? json_string_value(reason) : "");
	return 0;
}

void latchd_grant_ask_local(void *arg, struct latch_http_local *req, const struct latch_http_local_request *rq)
{
	struct sandbox *s = arg;
	uint64_t now = latch_now_boot_ns();
	char err[LATCH_ERR_MAX];
	struct grant *g;
	json_error_t je;
	json_t *root;

	if (strcmp(rq->path, "/latch/grant")) {
		snprintf(err, sizeof(err),
			 "no endpoint %.100s; POST /latch/grant asks for a grant, and nothing here "
			 "decides one",
			 rq->path);
		return refused(s, req, 404, "latchd.grant.ask.path", err, json_pack("{s:s}", "path", rq->path));
	}
	if (strcmp(rq->method, "POST"))
		return refused(s, req, 405, "latchd.grant.ask.method", "POST an ask to /latch/grant",
			       json_pack("{s:s}", "method", rq->method));
	if (!s->grants)
		return answer(req, 503, "refused", "latchd does not serve this sandbox's grants now; ask again", NULL);
	root = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(root)) {
		json_decref(root);
		snprintf(err, sizeof(err), "the body is not a JSON object (%s); send {\"hosts\": [\"docs.example\"]}",
			 root ? "another JSON value" : je.text);
		return refused(s, req, 400, "latchd.grant.ask.json", err, NULL);
	}
	g = latchd_grant_new(s, true);
	if (!g) {
		json_decref(root);
		return answer(req, 503, "refused", "out of memory; ask again", NULL);
	}
	if (ask_fields(s, root, g, err, sizeof(err))) {
		refused(s, req, 400, "latchd.grant.ask.invalid", err,
			json_pack("{s:o}", "hosts", raw_hosts(json_object_get(root, "hosts"))));
		goto drop;
	}
	if (latchd_grant_cap_ask(s, now, err, sizeof(err))) {
		refused(s, req, 429, "latchd.grant.ask.cap", err,
			json_pack("{s:o}", "hosts", raw_hosts(json_object_get(root, "hosts"))));
		goto drop;
	}
	if (!s->res) {
		refused(s, req, 503, "latchd.grant.ask.resolver", "this sandbox has no resolver to look names up with",
			NULL);
		goto drop;
	}
	json_decref(root);
	g->state = GRANT_PENDING;
	g->wait_until_ns = now + (uint64_t)s->ld->conf.grant_ask_wait * NS_PER_S;
	g->http = req;
	latchd_grant_history_ask(s, now);
	latchd_grant_audit(g, "ask", "latchd.grant.ask",
			   json_pack("{s:i}", "decide_within_s", (int)s->ld->conf.grant_ask_wait));
	latchd_grant_notify(g);
	return;
drop:
	json_decref(root);
	latchd_grant_drop(g);
}

void latchd_grant_ask_gone(void *arg, struct latch_http_local *req)
{
	struct sandbox *s = arg;

	for (struct grant *g = s->grants ? s->grants->list : NULL; g; g = g->next) {
		if (g->http != req)
			continue;
		g->http = NULL;
		if (g->state == GRANT_PENDING) { /* nobody waits for the answer any more: the ask is withdrawn */
			latchd_grant_audit(g, "withdraw", "latchd.grant.withdraw", NULL);
			latchd_grant_drop(g);
		}
		return;
	}
}
