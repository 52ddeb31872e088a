// SPDX-License-Identifier: GPL-2.0-only
/*
 * meter.c - the spend caps in latchd: budget/ on the credential broker's
 * meter seam (broker/broker.h, struct latch_http_meter).
 *
 * latchd opens the ledger at start as its sole writer (budget/budget.h):
 * caps from latch.conf, the price table, the replay of the last 24 hours.
 * A bad price table or an unsafe ledger stops latchd before it serves
 * anything; nothing is ever forwarded unmetered.
 *
 * Every credential route with an upstream whose provider is openai,
 * anthropic or gemini (the kit's `provider`, or derived from the host; an
 * alternative has its own) gets a meter; so does one whose provider is
 * `other` when latch.conf or the credential caps it.  For each request:
 *
 *   request()   budget_reserve() for the provider of the route's ACTIVE
 *               upstream (the one the engine picked), with the credential's
 *               caps (0 in the kit: latch.conf's).  A cap that refuses
 *               answers at once: 429 with budget/'s one `latch:` line, and
 *               the note to the audit log (kind budget).  Else the
 *               reservation is in the ledger's journal when it returns (it
 *               survives kill -9 of latchd: budget_opts.journal), and the
 *               request is forwarded at once, never held.  An endpoint
 *               neither budget/ nor the kit's priced_endpoints prices, or
 *               a tool that has the provider fetch a URL the kit does not
 *               allow_provider_tools, is refused with a 403 instead;
 *   response()  budget_response(): the status, then every body chunk as it
 *               goes to the guest, never buffered;
 *   end()       budget_settle() with the engine's ending; a settlement that
 *               differs from its reservation goes to the audit log.
 *
 * The route's upstreams are asked for `Accept-Encoding: identity` (the
 * engine does it for every route: its key scrubber reads bodies too), so
 * budget/ reads what the guest reads.  SIGHUP re-reads the price table and
 * latch.conf's caps; at a request's end, once the journal holds FOLD_ROWS
 * records, it is handed to budget/'s fold thread (budget_opts.fold_thread)
 * and a second journal takes the rows, and the tick hands over what is
 * left once a second; the ledger's checkpoints run on a thread of their
 * own (budget_opts.checkpoint_thread): latchd's thread runs no sqlite.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latchd/latchd.h"
#include "broker/broker.h"
#include "budget/budget.h"
#include "kit/kit.h"

#define FOLD_ROWS 1024 /* a fold thread's 1-2 ms of sqlite, after every 512 requests (bench/budget.c) */

struct meter {
	struct latchd *ld;
	struct budget *b;
	unsigned tick_failures; /* logged once a minute at most */
};

/* One credential route's meter (the engine's arg): whose, and the provider of each upstream. */
struct route_meter {
	struct meter *m;
	char who[LATCH_NAME_MAX + 1];
	char route[LATCH_KIT_CRED_NAME_MAX + 1];
	struct {
		char name[LATCH_KIT_CRED_NAME_MAX + 1]; /* "" for the credential's own */
		enum budget_provider provider;
		bool metered;
	} up[LATCH_HTTP_UPSTREAMS_MAX];
	int n_up;
	struct budget_caps caps; /* the credential's; BUDGET_INHERIT: latch.conf's */
	struct latch_kit_priced priced[LATCH_KIT_PRICED_MAX]; /* the kit's priced_endpoints, which fixed[] points into */
	struct budget_fixed fixed[LATCH_KIT_PRICED_MAX];
	int n_fixed;
	unsigned allow_tools; /* BUDGET_TOOL_BIT()s: the kit's allow_provider_tools */
};

/* ---- the audit */

static void audit_note(struct meter *m, const char *who, const struct budget_note *note)
{
	json_error_t jerr;

	if (note->warning[0]) {
		latchd_log("%s: %s", who, note->warning);
		if (latchd_audit_wanted(m->ld, who, "budget"))
			latchd_audit(m->ld, who, "budget", "warn", "budget.price.missing",
				     json_pack("{s:s}", "warning", note->warning));
	}
	if (!note->decision[0] || !latchd_audit_wanted(m->ld, who, "budget"))
		return;
	latchd_audit(m->ld, who, "budget", note->decision, note->reason, json_loads(note->fields, 0, &jerr));
}

/* ---- the engine's meter callbacks */

static int meter_request(void *arg, const struct latch_http_meter_request *rq, void **token, char *refusal,
			 size_t refusal_len)
{
	struct route_meter *rm = arg;
	struct meter *m = rm->m;
	struct budget_request br = { .sandbox = rm->who,
				     .method = rq->method,
				     .path = rq->path,
				     .body = rq->body,
				     .body_len = rq->body_len,
				     .caps = &rm->caps,
				     .fixed = rm->fixed,
				     .n_fixed = (size_t)rm->n_fixed,
				     .allow_tools = rm->allow_tools,
				     .credential = rm->route };
	struct budget_ticket *t;
	struct budget_note note;
	int i, ret;

	*token = NULL;
	for (i = 0; i < rm->n_up && strcmp(rm->up[i].name, rq->upstream ? rq->upstream : ""); i++)
		;
	if (i == rm->n_up || !rm->up[i].metered)
		return 0; /* an upstream no cap covers (an uncapped `other`) */
	br.provider = rm->up[i].provider;
	ret = budget_reserve(m->b, &br, &t, &note, refusal, refusal_len);
	audit_note(m, rm->who, &note);
	if (!ret)
		*token = t; /* in the journal: forwarded at once */
	/* an endpoint or a tool the route does not allow: a 403, not a 429 that clients retry */
	return ret == -EPERM ? LATCH_HTTP_METER_FORBID : ret;
}

static void meter_response(void *arg, void *token, int status, const void *data, size_t len)
{
	budget_response(token, status, data, len);
}

static enum budget_end end_of(enum latch_http_end how)
{
	switch (how) {
	case LATCH_HTTP_END_COMPLETE:
		return BUDGET_END_COMPLETE;
	case LATCH_HTTP_END_GUEST_CUT:
		return BUDGET_END_GUEST_CUT;
	case LATCH_HTTP_END_UPSTREAM_CUT:
		return BUDGET_END_UPSTREAM_CUT;
	default:
		return BUDGET_END_ERROR;
	}
}

/* Will the audit log take a settlement note of this sandbox now? (Asked only when there is one.) */
static bool settle_wanted(void *arg)
{
	struct route_meter *rm = arg;

	return latchd_audit_wanted(rm->m->ld, rm->who, "budget");
}

static void meter_end(void *arg, void *token, enum latch_http_end how)
{
	struct route_meter *rm = arg;
	struct budget_note note; /* its strings are budget_settle()'s to clear: 1.5 KB not zeroed here */

	if (!token)
		return;
	note.want = settle_wanted;
	note.want_arg = rm;
	budget_settle(rm->m->b, token, end_of(how), &note);
	audit_note(rm->m, rm->who, &note);
	/*
	 * The guest has its last bytes: hand the journal to the fold thread
	 * once it holds FOLD_ROWS (smaller folds cost more a row: 2.7 us a
	 * request at 256 rows, 2.0 at 2048).  A failure is the tick's to report.
	 */
	budget_fold(rm->m->b, FOLD_ROWS);
}

/* ---- routes */

static enum budget_provider provider_of(enum latch_provider p)
{
	enum budget_provider bp = BUDGET_OTHER;

	/* by name: kit/'s enum orders the providers differently */
	budget_provider_parse(latch_provider_name(p), &bp);
	return bp;
}

static bool any_cap(const struct latch_conf_caps *c)
{
	return c->requests_per_hour >= 0 || c->requests_per_day >= 0 || c->micros_per_day >= 0;
}

static int64_t cap_or_inherit(uint64_t v)
{
	return v ? (int64_t)v : BUDGET_INHERIT;
}

bool latchd_meter_route(struct latchd *ld, const char *who, const struct latch_kit_cred *cr,
			struct latch_http_meter *out)
{
	const struct latch_kit_caps *kc = &cr->caps;
	bool own_caps = kc->requests_per_hour || kc->requests_per_day || kc->microdollars_per_day, any = false;
	bool other_capped = any_cap(&ld->conf.budget_sandbox[BUDGET_OTHER]) ||
			    any_cap(&ld->conf.budget_host[BUDGET_OTHER]) || own_caps;
	struct route_meter *rm;

	memset(out, 0, sizeof(*out));
	if (!ld->meter)
		return false;
	rm = calloc(1, sizeof(*rm));
	if (!rm)
		return false;
	rm->m = ld->meter;
	snprintf(rm->who, sizeof(rm->who), "%s", who);
	snprintf(rm->route, sizeof(rm->route), "%s", cr->name);
	rm->caps = (struct budget_caps){ cap_or_inherit(kc->requests_per_hour), cap_or_inherit(kc->requests_per_day),
					 cap_or_inherit(kc->microdollars_per_day) };
	for (int i = 0; i < cr->n_priced && i < LATCH_KIT_PRICED_MAX; i++) {
		rm->priced[i] = cr->priced[i];
		rm->fixed[i] = (struct budget_fixed){ .method = rm->priced[i].method,
						      .path = rm->priced[i].path,
						      .micros = cr->priced[i].microdollars > INT64_MAX ?
									INT64_MAX :
									(int64_t)cr->priced[i].microdollars };
		rm->n_fixed++;
	}
	/* by name: kit/ and budget/ each keep the list, and tests/test_kit.c holds them to the same names */
	for (int k = 0; k < LATCH_KIT_TOOLS; k++) {
		enum budget_fetch_tool bt;

		if ((cr->provider_tools & (1u << k)) && !budget_fetch_tool_parse(latch_kit_tool_name(k), &bt))
			rm->allow_tools |= BUDGET_TOOL_BIT(bt);
	}
	/* the engine's upstreams in latchd_broker_route_add()'s order: the credential's own, then its TLS alternatives */
	for (int a = -1; a < cr->n_alts && rm->n_up < LATCH_HTTP_UPSTREAMS_MAX; a++) {
		const struct latch_kit_upstream *up = a < 0 ? &cr->up : &cr->alts[a].up;

		if (a >= 0 && !up->tls)
			continue;
		snprintf(rm->up[rm->n_up].name, sizeof(rm->up[0].name), "%s", a < 0 ? "" : cr->alts[a].name);
		rm->up[rm->n_up].provider = provider_of(up->provider);
		rm->up[rm->n_up].metered = rm->up[rm->n_up].provider != BUDGET_OTHER || other_capped;
		any |= rm->up[rm->n_up].metered;
		rm->n_up++;
	}
	if (!any) {
		free(rm);
		return false;
	}
	*out = (struct latch_http_meter){
		.arg = rm, .request = meter_request, .response = meter_response, .end = meter_end, .release = free
	};
	return true;
}

/* ---- latchd's side */

int latchd_meter_open(struct latchd *ld, char *err, size_t errlen)
{
	struct budget_opts o = { .sole_writer = true, .checkpoint_thread = true, .journal = true, .fold_thread = true };
	struct meter *m = calloc(1, sizeof(*m));

	if (!m)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	budget_caps_from_conf(&o, &ld->conf);
	m->ld = ld;
	m->b = budget_open(&o, err, errlen);
	if (!m->b) {
		int ret = -errno;

		free(m);
		return ret;
	}
	ld->meter = m;
	return 0;
}

void latchd_meter_tick(struct latchd *ld)
{
	struct meter *m = ld->meter;
	int ret = m ? budget_tick(m->b) : 0;

	if (ret && m->tick_failures++ % 60 == 0)
		latchd_log("spend ledger: pending settlements not written yet (%s); they are counted, and written with "
			   "the next commit",
			   strerror(-ret));
	if (!ret && m)
		m->tick_failures = 0;
}

int latchd_meter_reload(struct latchd *ld, char *err, size_t errlen)
{
	struct budget_opts o = { 0 };

	if (!ld->meter)
		return 0;
	budget_caps_from_conf(&o, &ld->conf);
	budget_set_caps(ld->meter->b, o.sandbox, o.host);
	if (budget_reload_prices(ld->meter->b, err, errlen)) {
		latchd_log_err("price table not reloaded, the one in force stays: %s", err);
		latchd_audit(ld, "latchd", "config", "refuse", "latchd.reload.prices",
			     json_pack("{s:s}", "error", err));
		return -EINVAL;
	}
	return 0;
}

void latchd_meter_close(struct latchd *ld)
{
	struct meter *m = ld->meter;

	if (!m)
		return;
	budget_close(m->b); /* folds the journal */
	free(m);
	ld->meter = NULL;
}
