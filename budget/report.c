// SPDX-License-Identifier: GPL-2.0-only
/*
 * report.c - what budget/ tells people: the refusal line a guest reads in
 * its 429, the notes latchd writes to the audit log, and where every cap
 * stands for `latch usage`.
 *
 * A refusal line names the cap (sandbox or host-wide, provider), where it
 * stands in its window and when the oldest requests that must leave have
 * left it: the moment this request would fit if nothing else were
 * reserved meanwhile (open reservations are counted in full, so it is never
 * later than that; a settlement below its reservation can free it sooner).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

static void dump_fields(json_t *o, struct budget_note *note)
{
	size_t n = json_dumpb(o, note->fields, sizeof(note->fields) - 1, JSON_COMPACT | JSON_SORT_KEYS);

	if (!n || n >= sizeof(note->fields))
		snprintf(note->fields, sizeof(note->fields), "{}");
	else
		note->fields[n] = '\0';
	json_decref(o);
}

void budget_refusal_text(struct budget *b, const struct refusal *r, struct budget_note *note, char *line,
			 size_t linelen)
{
	const char *prov = budget_provider_name(r->provider), *cap = budget_cap_name(r->kind);
	char scope[128], limit[32], stand[256], when[192], hint[320] = "", key[48];

	if (r->host)
		snprintf(scope, sizeof(scope), "host-wide %s cap for %s", cap, prov);
	else
		snprintf(scope, sizeof(scope), "%s cap for %s in sandbox %s", cap, prov, r->sandbox);
	snprintf(key, sizeof(key), "budget_%s%s", r->host ? "host_" : "", cap);
	if (r->kind == CAP_DOLLARS_DAY) {
		char used[32], reserved[32], need[32];

		budget_format_dollars(r->cap, limit, sizeof(limit));
		budget_format_dollars(r->used, used, sizeof(used));
		budget_format_dollars(r->reserved, reserved, sizeof(reserved));
		budget_format_dollars(r->need, need, sizeof(need));
		snprintf(stand, sizeof(stand),
			 "%s spent and %s reserved in the last 24 hours, this request needs up to %s%s", used, reserved,
			 need,
			 r->tool_fees	     ? " (its tools' fees included)" :
			 r->web_searches > 0 ? " (its web searches' fees included)" :
					       "");
		if (!r->known)
			snprintf(hint, sizeof(hint), "; %s is priced at %s's highest prices: add it to %.200s",
				 r->format == BUDGET_FORMAT_UNKNOWN ? "this endpoint" :
				 *r->model			    ? r->model :
								      "a request without a model",
				 prov, r->format == BUDGET_FORMAT_UNKNOWN ? "the kit's paths" : b->prices_path);
	} else {
		snprintf(limit, sizeof(limit), "%lld", (long long)r->cap);
		snprintf(stand, sizeof(stand), "%lld requests in the last %s", (long long)r->used,
			 r->kind == CAP_REQ_HOUR ? "hour" : "24 hours");
	}
	if (r->frees_ns) {
		char t[32];

		budget_format_time(r->frees_ns, t, sizeof(t));
		snprintf(when, sizeof(when), "frees at %s (or raise %s)", t, key);
	} else if (r->cap == 0) {
		snprintf(when, sizeof(when), "it allows nothing; raise %s", key);
	} else if (r->format == BUDGET_FORMAT_FIXED) {
		snprintf(
			when, sizeof(when),
			"this request alone is more than the cap (its price is the kit's dollars_per_request); raise %s",
			key);
	} else {
		snprintf(when, sizeof(when),
			 "this request alone is more than the cap; lower its max tokens%s or raise %s",
			 (r->web_searches <= 0 && !r->tool_fees) || r->kind != CAP_DOLLARS_DAY ? "" :
			 r->provider == BUDGET_GEMINI		? " or leave out its google_search tool" :
			 r->format == BUDGET_FORMAT_OPENAI_CHAT ? " or ask a model that does not search" :
			 r->provider == BUDGET_OPENAI		? " or its max_tool_calls" :
								  " or its web_search max_uses",
			 key);
	}
	snprintf(line, linelen, "latch: %s is %s; %s; %s%s", scope, limit, stand, when, hint);

	snprintf(note->decision, sizeof(note->decision), "refuse");
	snprintf(note->reason, sizeof(note->reason), "budget.refused.%s%s", r->host ? "host." : "", cap);
	{
		char t[32];
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "scope",
				      r->host ? "host" : "sandbox", "cap", cap, "provider", prov, "model",
				      *r->model ? r->model : "-", "format", budget_format_name(r->format), "limit",
				      (json_int_t)r->cap, "used", (json_int_t)r->used, "reserved",
				      (json_int_t)r->reserved, "need", (json_int_t)r->need, "unit",
				      r->kind == CAP_DOLLARS_DAY ? "micro-dollars" : "requests");

		budget_format_time(r->frees_ns, t, sizeof(t));
		json_object_set_new(o, "frees_at", r->frees_ns ? json_string(t) : json_null());
		dump_fields(o, note);
	}
}

/*
 * The note of a settlement, written directly: it is made for most requests
 * (usage is nearly always below the worst case), and building it through
 * jansson cost more than the rest of the settlement.  Keys in sorted order,
 * as the audit log stores fields; every string is a model name that passed
 * budget_request_model_ok() or a fixed word, so nothing needs escaping.
 */
/* A note's text, appended piece by piece (snprintf's parsing of a format cost more than the settlement). */
struct note_buf {
	char *p;
	size_t len, cap;
	bool over;
};

static void put(struct note_buf *nb, const char *s, size_t n)
{
	if (nb->over || nb->len + n >= nb->cap) {
		nb->over = true;
		return;
	}
	memcpy(nb->p + nb->len, s, n);
	nb->len += n;
}

static void put_str(struct note_buf *nb, const char *s)
{
	put(nb, s, strlen(s));
}

static void put_int(struct note_buf *nb, int64_t v)
{
	char d[24], *e = d + sizeof(d), *q = e;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	do
		*--q = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--q = '-';
	put(nb, q, (size_t)(e - q));
}

#define PUT_LIT(nb, lit) put(nb, lit, sizeof(lit) - 1)

void budget_settle_note(const struct budget_ticket *t, const char *why, int64_t charge, const struct budget_tokens *tok,
			struct budget_note *note)
{
	struct note_buf nb = { .p = note->fields, .cap = sizeof(note->fields) };
	size_t n;

	PUT_LIT(&nb, "{\"charged_micros\":");
	put_int(&nb, charge);
	PUT_LIT(&nb, ",\"format\":\"");
	put_str(&nb, budget_format_name(t->format));
	PUT_LIT(&nb, "\",\"how\":\"");
	put_str(&nb, why);
	PUT_LIT(&nb, "\",\"model\":\"");
	put_str(&nb, *t->model ? t->model : "-");
	PUT_LIT(&nb, "\",\"provider\":\"");
	put_str(&nb, budget_provider_name(t->provider));
	PUT_LIT(&nb, "\",\"request\":");
	put_int(&nb, t->id);
	PUT_LIT(&nb, ",\"reserved_micros\":");
	put_int(&nb, t->reserved);
	PUT_LIT(&nb, ",\"status\":");
	put_int(&nb, t->status);
	if (!strcmp(why, "usage")) {
		PUT_LIT(&nb, ",\"tokens\":{\"cache_write\":");
		put_int(&nb, tok->cache_write);
		PUT_LIT(&nb, ",\"cache_write_1h\":");
		put_int(&nb, tok->cache_write_1h);
		PUT_LIT(&nb, ",\"cached\":");
		put_int(&nb, tok->cached);
		PUT_LIT(&nb, ",\"input\":");
		put_int(&nb, tok->input);
		PUT_LIT(&nb, ",\"output\":");
		put_int(&nb, tok->output);
		if (tok->web_searches) { /* only then: the lines of requests without are as they were */
			PUT_LIT(&nb, ",\"web_searches\":");
			put_int(&nb, tok->web_searches);
		}
		if (tok->file_searches) {
			PUT_LIT(&nb, ",\"file_searches\":");
			put_int(&nb, tok->file_searches);
		}
		if (tok->images) {
			PUT_LIT(&nb, ",\"images\":");
			put_int(&nb, tok->images);
		}
		if (tok->container_gb) {
			PUT_LIT(&nb, ",\"container_gb\":");
			put_int(&nb, tok->container_gb);
		}
		PUT_LIT(&nb, "}");
	}
	PUT_LIT(&nb, "}");
	if (nb.over) /* as snprintf's truncation was: an empty object */
		memcpy(note->fields, "{}", 3);
	else
		note->fields[nb.len] = '\0';
	memcpy(note->decision, "settle", sizeof("settle"));
	/* "budget.settled.WHY", cut as snprintf would cut it */
	n = strlen(why);
	if (n > sizeof(note->reason) - sizeof("budget.settled."))
		n = sizeof(note->reason) - sizeof("budget.settled.");
	memcpy(note->reason, "budget.settled.", sizeof("budget.settled.") - 1);
	memcpy(note->reason + sizeof("budget.settled.") - 1, why, n);
	note->reason[sizeof("budget.settled.") - 1 + n] = '\0';
}

/* ---- budget_report ---- */

static bool any_cap(const struct budget_caps *c)
{
	return c->requests_per_hour >= 0 || c->requests_per_day >= 0 || c->micros_per_day >= 0;
}

static void cap_state(const struct budget *b, int sbx, enum budget_provider p, const struct tally *t, enum cap_kind k,
		      int64_t cap, struct budget_cap_state *s)
{
	uint64_t w = k == CAP_REQ_HOUR ? BUDGET_HOUR_NS : BUDGET_DAY_NS;

	s->cap = cap;
	s->used = k == CAP_REQ_HOUR ? t->n_hour : k == CAP_REQ_DAY ? t->n_day : t->spent;
	s->reserved = k == CAP_DOLLARS_DAY ? t->reserved : 0;
	s->left = cap < 0 ? BUDGET_NO_CAP : cap - s->used - s->reserved > 0 ? cap - s->used - s->reserved : 0;
	s->frees_ns = 0;
	if (!(k == CAP_REQ_HOUR ? t->n_hour : t->n_day))
		return; /* nothing counted (and a sandbox without a slot matches nothing) */
	for (size_t i = k == CAP_REQ_HOUR ? b->hour_head : b->day_head; i < b->n; i++)
		if (budget_charge_matches(&b->ch[i], sbx, p)) {
			s->frees_ns = b->ch[i].time_ns + w;
			break;
		}
}

static int report_one(const struct budget *b, const char *name, int sbx, enum budget_provider p, const struct tally *t,
		      const struct budget_caps *caps, int (*fn)(const struct budget_usage *u, void *arg), void *arg)
{
	struct budget_usage u = { .provider = p };

	snprintf(u.sandbox, sizeof(u.sandbox), "%s", name);
	cap_state(b, sbx, p, t, CAP_REQ_HOUR, caps->requests_per_hour, &u.requests_hour);
	cap_state(b, sbx, p, t, CAP_REQ_DAY, caps->requests_per_day, &u.requests_day);
	cap_state(b, sbx, p, t, CAP_DOLLARS_DAY, caps->micros_per_day, &u.dollars_day);
	return fn(&u, arg);
}

static const struct budget *sort_b;

static int by_name(const void *x, const void *y)
{
	return strcmp(sort_b->sbx[*(const uint32_t *)x].name, sort_b->sbx[*(const uint32_t *)y].name);
}

int budget_report(struct budget *b, const char *sandbox, int (*fn)(const struct budget_usage *u, void *arg), void *arg)
{
	static const struct tally empty;
	uint32_t *order = NULL;
	bool found = false;
	/* a plain read: sqlite gives it one consistent snapshot (with a fold thread, memory holds every row and
	 * that thread has the connection) */
	int ret = b->folder ? 0 : budget_catch_up(b);

	if (ret)
		return ret;
	budget_expire(b, budget_now(b));
	if (b->n_sbx && !(order = malloc(b->n_sbx * sizeof(*order))))
		return -ENOMEM;
	for (uint32_t i = 0; i < b->n_sbx; i++)
		order[i] = i;
	sort_b = b;
	qsort(order, b->n_sbx, sizeof(*order), by_name);
	for (uint32_t i = 0; !ret && i < b->n_sbx; i++) {
		const struct sbx *s = &b->sbx[order[i]];

		if (sandbox && strcmp(sandbox, s->name))
			continue;
		found = true;
		for (int p = 0; !ret && p < BUDGET_PROVIDERS; p++) {
			const struct tally *t = &s->t[p];
			const struct budget_caps *caps = t->caps_known ? &t->caps : &b->o.sandbox[p];

			if (t->n_day || (sandbox && any_cap(caps)))
				ret = report_one(b, s->name, (int)order[i], p, t, caps, fn, arg);
		}
	}
	free(order);
	for (int p = 0; !ret && sandbox && !found && p < BUDGET_PROVIDERS; p++)
		if (any_cap(&b->o.sandbox[p]))
			ret = report_one(b, sandbox, -2, p, &empty, &b->o.sandbox[p], fn, arg);
	for (int p = 0; !ret && p < BUDGET_PROVIDERS; p++)
		if (b->host[p].n_day || any_cap(&b->o.host[p]))
			ret = report_one(b, "", -1, p, &b->host[p], &b->o.host[p], fn, arg);
	return ret;
}

/* A body the meter can't bound: refused, with one line and an audit note. */
int budget_body_refusal(struct budget_note *note, const char *why, const struct budget_request *rq,
			enum budget_format f, char *line, size_t linelen)
{
	snprintf(line, linelen,
		 "latch: the spend meter can't bound this %s request to %s: %s; send one JSON object with plain "
		 "integer counts",
		 budget_format_name(f), budget_provider_name(rq->provider), why);
	snprintf(note->decision, sizeof(note->decision), "refuse");
	snprintf(note->reason, sizeof(note->reason), "budget.refused.body");
	snprintf(note->fields, sizeof(note->fields), "{\"provider\":\"%s\",\"format\":\"%s\"}",
		 budget_provider_name(rq->provider), budget_format_name(f));
	return -EPROTO;
}

/* METHOD and PATH (its query left out) as a refusal names them: printable ASCII, at most 160 bytes of the path. */
static void endpoint_words(const struct budget_request *rq, char *method, size_t mlen, char *path, size_t plen)
{
	const char *src[2] = { rq->method ? rq->method : "", rq->path ? rq->path : "" };
	char *dst[2] = { method, path };
	size_t len[2] = { mlen, plen < 161 ? plen : 161 };

	for (int k = 0; k < 2; k++) {
		size_t n = 0;

		for (const char *s = src[k]; *s && *s != '?' && *s != '#' && n + 1 < len[k]; s++)
			dst[k][n++] = *s > 0x20 && *s < 0x7f && *s != '"' && *s != '\\' ? *s : '?';
		dst[k][n] = '\0';
	}
}

int budget_endpoint_refusal(struct budget_note *note, const struct budget_request *rq, char *line, size_t linelen)
{
	const char *prov = budget_provider_name(rq->provider);
	char method[17], path[161];

	endpoint_words(rq, method, sizeof(method), path, sizeof(path));
	snprintf(line, linelen,
		 "latch: %s %s is not an endpoint the spend meter can price for %s (a batch, a file, an image, audio "
		 "or video job is billed apart from any usage it reads), so it is not forwarded; to allow it at a "
		 "fixed price a request, add {method: %s, path: %s, dollars_per_request: AMOUNT} to the "
		 "priced_endpoints of the kit's credential \"%s\"",
		 method, path, prov, method, path, rq->credential ? rq->credential : "-");
	snprintf(note->decision, sizeof(note->decision), "refuse");
	snprintf(note->reason, sizeof(note->reason), "budget.refused.endpoint");
	dump_fields(json_pack("{s:s, s:s, s:s}", "provider", prov, "method", method, "path", path), note);
	return -EPERM;
}

int budget_tool_refusal(struct budget_note *note, const struct budget_request *rq, enum budget_format f, unsigned tools,
			char *line, size_t linelen)
{
	static const char *const asks[BUDGET_FETCH_TOOLS] = {
		[BUDGET_TOOL_WEB_FETCH] = "a web_fetch tool",
		[BUDGET_TOOL_MCP] = "a remote MCP server (mcp_servers, or a tool of type mcp)",
		[BUDGET_TOOL_URL_CONTEXT] = "the url_context tool",
	};
	const char *prov = budget_provider_name(rq->provider), *name;
	int t = 0;

	while (t < BUDGET_FETCH_TOOLS - 1 && !(tools & BUDGET_TOOL_BIT(t)))
		t++;
	name = budget_fetch_tool_name(t);
	snprintf(line, linelen,
		 "latch: this request asks %s to fetch from a URL it chooses itself (%s), which would carry data "
		 "past the sandbox's profile; it is not forwarded. To allow it, add %s to the allow_provider_tools "
		 "of the kit's credential \"%s\"",
		 prov, asks[t], name, rq->credential ? rq->credential : "-");
	snprintf(note->decision, sizeof(note->decision), "refuse");
	snprintf(note->reason, sizeof(note->reason), "budget.refused.tool");
	dump_fields(json_pack("{s:s, s:s, s:s}", "provider", prov, "format", budget_format_name(f), "tool", name),
		    note);
	return -EPERM;
}
