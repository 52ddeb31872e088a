// SPDX-License-Identifier: GPL-2.0-only
/*
 * meter.c - the spend caps in latchd: budget/ on the credential broker's
 * meter seam (broker/http/http_broker.h, struct latch_http_meter).
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
 *   request()   budget_reserve_later() for the provider of the route's
 *               ACTIVE upstream (the one the engine picked), with the
 *               credential's caps (0 in the kit: latch.conf's).  A cap that
 *               refuses answers at once: 429 with budget/'s one `latch:`
 *               line, and the note to the audit log (kind budget).  Else the
 *               exchange is held (LATCH_HTTP_METER_HOLD) until the commit;
 *   commit      one per pass of the event loop (an event made active by the
 *               first hold of the pass, run after the callbacks already
 *               queued): budget_commit() writes every reservation decided
 *               since, then each held exchange goes on, or is refused with
 *               the ledger's line when the commit failed.  A request that
 *               is the last callback of its pass with nothing held is
 *               committed at once and forwarded without a hold: no other
 *               request could share its commit;
 *   response()  budget_response(): the status, then every body chunk as it
 *               goes to the guest, never buffered;
 *   end()       budget_settle() with the engine's ending; a settlement that
 *               differs from its reservation goes to the audit log.
 *
 * The route's upstreams are asked for `Accept-Encoding: identity` (the
 * engine does it for every route: its key scrubber reads bodies too), so
 * budget/ reads what the guest reads.  SIGHUP re-reads the price table and
 * latch.conf's caps; the tick writes pending settlements, and the
 * ledger's checkpoints run on a thread of budget/'s own
 * (budget_opts.checkpoint_thread), off every request's path.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/daemon/daemon.h"
#include "broker/http/http_broker.h"
#include "budget/budget.h"
#include "kit/kit.h"

struct meter_ticket;

struct meter {
	struct latchd *ld;
	struct budget *b;
	struct event *commit_ev; /* the lowest priority: runs once the loop has nothing else to do */
	struct event *commit_timer; /* or COMMIT_WAIT_US after the first hold, whichever comes first */
	/* exchanges waiting for the commit that writes their reservation; NULL: ended meanwhile */
	struct meter_ticket **held;
	size_t n_held, cap_held;
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
};

/* One exchange (the engine's token). */
struct meter_ticket {
	struct route_meter *rm;
	struct budget_ticket *bt;
	struct latch_http_hold *hold;
	size_t slot; /* its place in held[] while held */
	bool held;
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

/* ---- holding until the commit */

/*
 * When a held request's reservation is written.  The commit costs the same
 * for one row or sixteen (it is sqlite's WAL locks and writes, about 7 us
 * here), so it waits while the loop has other work (the lowest priority:
 * libevent runs it only when no other callback is ready), and the
 * reservations decided meanwhile share it; a loop that never runs out of
 * work (a bulk response streaming through) still commits COMMIT_WAIT_US
 * after the first hold.  An idle loop commits at once: one request alone
 * waits one more poll of the loop.
 */
#define COMMIT_WAIT_US 200

static void commit_soon(struct meter *m)
{
	struct timeval wait = { 0, COMMIT_WAIT_US };

	event_active(m->commit_ev, EV_TIMEOUT, 0);
	if (!evtimer_pending(m->commit_timer, NULL))
		evtimer_add(m->commit_timer, &wait);
}

static int hold(struct meter *m, struct meter_ticket *t)
{
	if (m->n_held == m->cap_held) {
		size_t cap = m->cap_held ? m->cap_held * 2 : 64;
		struct meter_ticket **grown = realloc(m->held, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		m->held = grown;
		m->cap_held = cap;
	}
	t->slot = m->n_held;
	t->held = true;
	m->held[m->n_held++] = t;
	commit_soon(m);
	return 0;
}

static void on_commit(evutil_socket_t fd, short what, void *arg)
{
	struct meter *m = arg;
	struct budget_note note;
	char line[512];
	size_t n = m->n_held, keep = 0;
	int ret;

	event_del(m->commit_ev); /* the one of the two that did not run */
	event_del(m->commit_timer);
	ret = budget_commit(m->b, &note, line, sizeof(line));

	if (ret) {
		latchd_log("%s", line);
		audit_note(m, "latchd", &note);
	}
	/*
	 * Resuming may end the exchange (a refusal, an upstream that fails at
	 * once: end() empties its slot) or read the guest's next request (a new
	 * hold, after n: it waits for the next commit).
	 */
	for (size_t i = 0; i < n; i++) {
		struct meter_ticket *t = m->held[i];

		if (!t)
			continue;
		m->held[i] = NULL;
		t->held = false;
		latch_http_meter_resume(t->hold, ret ? line : NULL);
	}
	for (size_t i = n; i < m->n_held; i++)
		if (m->held[i]) {
			m->held[keep] = m->held[i];
			m->held[keep]->slot = keep;
			keep++;
		}
	m->n_held = keep;
	if (keep)
		commit_soon(m);
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
				     .caps = &rm->caps };
	struct budget_note note;
	struct meter_ticket *t;
	int i, ret;

	*token = NULL;
	for (i = 0; i < rm->n_up && strcmp(rm->up[i].name, rq->upstream ? rq->upstream : ""); i++)
		;
	if (i == rm->n_up || !rm->up[i].metered)
		return 0; /* an upstream no cap covers (an uncapped `other`) */
	br.provider = rm->up[i].provider;
	t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(refusal, refusal_len, "latch: out of memory metering this request; try again");
		return -ENOMEM;
	}
	ret = budget_reserve_later(m->b, &br, &t->bt, &note, refusal, refusal_len);
	audit_note(m, rm->who, &note);
	if (!ret && !m->n_held && !event_base_get_num_events(m->ld->base, EVENT_BASE_COUNT_ACTIVE)) {
		/* the last callback of this pass, and nothing waits: no other request can share the commit */
		ret = budget_commit(m->b, &note, refusal, refusal_len);
		if (!ret) {
			t->rm = rm;
			*token = t;
			return 0;
		}
		latchd_log("%s", refusal);
		audit_note(m, "latchd", &note);
		budget_settle(m->b, t->bt, BUDGET_END_ERROR, &note); /* void: frees it, charges nothing */
		free(t);
		return ret;
	}
	if (!ret) {
		t->rm = rm;
		t->hold = rq->hold;
		ret = hold(m, t);
		if (!ret) {
			*token = t;
			return LATCH_HTTP_METER_HOLD;
		}
		/* never held, never forwarded: let its reservation go as a request cut at once */
		budget_settle(m->b, t->bt, BUDGET_END_ERROR, &note);
		snprintf(refusal, refusal_len, "latch: out of memory metering this request; try again");
	}
	free(t);
	return ret;
}

static void meter_response(void *arg, void *token, int status, const void *data, size_t len)
{
	struct meter_ticket *t = token;

	if (t)
		budget_response(t->bt, status, data, len);
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
	struct meter_ticket *t = token;
	struct budget_note note = { .want = settle_wanted, .want_arg = rm };

	if (!t)
		return;
	if (t->held) /* gone before its commit: the commit writes its row, then this settlement */
		rm->m->held[t->slot] = NULL;
	budget_settle(rm->m->b, t->bt, end_of(how), &note);
	audit_note(rm->m, rm->who, &note);
	free(t);
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

bool meter_route(struct latchd *ld, const char *who, const struct latch_kit_cred *cr, struct latch_http_meter *out)
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
	/* the engine's upstreams in broker_route_add()'s order: the credential's own, then its TLS alternatives */
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

int meter_open(struct latchd *ld, char *err, size_t errlen)
{
	struct budget_opts o = { .sole_writer = true, .checkpoint_thread = true };
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

int meter_start(struct latchd *ld, char *err, size_t errlen)
{
	struct meter *m = ld->meter;

	m->commit_ev = event_new(ld->base, -1, 0, on_commit, m);
	m->commit_timer = evtimer_new(ld->base, on_commit, m);
	if (!m->commit_ev || !m->commit_timer)
		return latch_errf(err, errlen, -ENOMEM, "cannot make the meter's commit events");
	/* the lowest priority main.c made (without them, the end of each pass of the loop) */
	if (event_base_get_npriorities(ld->base) > 1)
		event_priority_set(m->commit_ev, event_base_get_npriorities(ld->base) - 1);
	return 0;
}

void meter_tick(struct latchd *ld)
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

void meter_reload(struct latchd *ld)
{
	struct budget_opts o = { 0 };
	char err[LATCH_ERR_MAX];

	if (!ld->meter)
		return;
	budget_caps_from_conf(&o, &ld->conf);
	budget_set_caps(ld->meter->b, o.sandbox, o.host);
	if (budget_reload_prices(ld->meter->b, err, sizeof(err))) {
		latchd_log("price table not reloaded, the one in force stays: %s", err);
		latchd_audit(ld, "latchd", "config", "refuse", "latchd.reload.prices",
			     json_pack("{s:s}", "error", err));
	}
}

void meter_close(struct latchd *ld)
{
	struct meter *m = ld->meter;

	if (!m)
		return;
	budget_close(m->b); /* writes the settlements still pending */
	if (m->commit_ev)
		event_free(m->commit_ev);
	if (m->commit_timer)
		event_free(m->commit_timer);
	free(m->held);
	free(m);
	ld->meter = NULL;
}
