// SPDX-License-Identifier: GPL-2.0-only
/*
 * budget.c - reservations and settlements: each request's decision against
 * the caps, made on window.c's tallies.
 *
 * The ledger stays the truth: every decision is made inside its write
 * transaction after reading the rows other processes wrote (budget_catch_up), and
 * memory only changes after a commit (a sole writer, which memory holds all
 * of, decides in memory and writes in groups: commit.c).  A request counts
 * from the moment it was reserved; an open reservation counts at its full
 * amount until it is settled, and a settlement replaces it with the charge.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

/* ---- tickets ---- */

static struct budget_ticket *ticket_new(struct budget *b)
{
	struct budget_ticket *t;
	struct jscan *js;
	struct sse *sse;

	if (!b->n_spare)
		return calloc(1, sizeof(*t));
	t = b->spare[--b->n_spare];
	js = t->usage.js_buf;
	sse = t->usage.sse_buf;
	memset(t, 0, sizeof(*t)); /* as calloc left it, but for its scanners' memory */
	t->usage.js_buf = js;
	t->usage.sse_buf = sse;
	return t;
}

static void ticket_free(struct budget *b, struct budget_ticket *t)
{
	if (!t)
		return;
	if (b->n_spare == TICKET_SPARE) {
		budget_usage_free(&t->usage);
		free(t);
		return;
	}
	if (t->usage.z) { /* an inflate's state is per stream */
		inflateEnd(t->usage.z);
		free(t->usage.z);
		t->usage.z = NULL;
	}
	b->spare[b->n_spare++] = t;
}

/* ---- reserving ---- */

/* A model name into a BUDGET_MODEL_MAX + 1 array, cut as snprintf would cut it (without its format's parse). */
static void copy_model(char *dst, const char *src)
{
	size_t n = strnlen(src, BUDGET_MODEL_MAX);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Name a model the table lacks, once per model (and bounded: the names come from the guest). */
static void warn_missing(struct budget *b, enum budget_provider p, const char *model, struct budget_note *note)
{
	char key[BUDGET_MODEL_MAX + 16];

	snprintf(key, sizeof(key), "%s/%s", budget_provider_name(p), *model ? model : "");
	for (int i = 0; i < b->n_warned; i++)
		if (!strcmp(b->warned[i], key))
			return;
	if (b->n_warned == WARN_MAX) {
		if (!b->warned_full)
			snprintf(note->warning, sizeof(note->warning),
				 "latch: more models missing from the price table are charged at their provider's "
				 "highest prices without being named");
		b->warned_full = true;
		return;
	}
	snprintf(b->warned[b->n_warned++], sizeof(b->warned[0]), "%s", key);
	if (*model)
		snprintf(note->warning, sizeof(note->warning),
			 "latch: model '%s' of %s is not in the price table; it is charged at %s's highest prices; "
			 "add it to %.160s",
			 model, budget_provider_name(p), budget_provider_name(p), b->prices_path);
	else
		snprintf(note->warning, sizeof(note->warning),
			 "latch: a request to %s names no model latch can read; it is charged at %s's highest prices",
			 budget_provider_name(p), budget_provider_name(p));
}

/*
 * The worst case of a request, in micro-dollars: input from the body (one
 * token per 2 bytes and IMAGE_TOKENS an image, or the model's whole context
 * when the provider holds input the body doesn't show), output from its
 * max-tokens fields (or the model's maximum) times the outputs it asks for,
 * every input token at the dearest input price (twice the input's when a
 * cache write may last an hour), and the web searches, file searches,
 * images and code interpreter containers its tools allow at the provider's
 * fees.  -1, and *why, when the body can't bound it: a metered endpoint's
 * body latch can't read (the upstream may read in it a count of outputs, a
 * model, a limit that latch did not see), or a count of outputs that is not
 * a number.
 */
static int64_t worst_case(struct budget *b, const struct budget_request *rq, const struct budget_class *cls,
			  struct budget_ticket *t, const char **why, unsigned *fetch_tools)
{
	struct request_facts facts = { .choices = 1 };
	const struct budget_price *row = NULL, *base;
	struct budget_price priced;
	struct budget_tokens tok = { 0 };
	int64_t in = 0;

	*why = NULL;
	*fetch_tools = 0;
	if (cls->format == BUDGET_FORMAT_FREE) {
		t->known = true;
		return 0;
	}
	budget_request_inspect(cls->format, rq->body, rq->body_len, &facts);
	if ((cls->format != BUDGET_FORMAT_UNKNOWN || facts.object) && !facts.readable) {
		*why = facts.ambiguous ? "it names a member latch reads twice (which one would the upstream take?)" :
					 "it is not one JSON object latch can read";
		return -1;
	}
	if (facts.unbounded) {
		*why = "its count of outputs (n, best_of, candidateCount) is not a number";
		return -1;
	}
	*fetch_tools = facts.fetch_tools;
	if (cls->format != BUDGET_FORMAT_UNKNOWN) {
		copy_model(t->model, *cls->model ? cls->model : facts.model);
		base = budget_prices_find(&b->prices, rq->provider, t->model, 0);
		in = budget_request_input(rq->body_len, &facts);
		if (base && (facts.server_state || in > base->context))
			in = base->context;
		if (base)
			row = budget_prices_tier(&b->prices, base, in);
	}
	t->known = row != NULL;
	if (!row) {
		row = budget_prices_worst(&b->prices, rq->provider);
		in = budget_request_input(rq->body_len, &facts);
		if (facts.server_state || in > row->context)
			in = row->context;
	}
	tok.input = in;
	/*
	 * Chat Completions' usage never says a search: a search model searches
	 * before each answer, whatever the body's tools say, and Gemini's
	 * OpenAI-compatible endpoint grounds as its own API does when a tool
	 * asks Google (nothing bounds its queries).  Each is charged as reserved.
	 */
	if (cls->format == BUDGET_FORMAT_OPENAI_CHAT && budget_prices_search_model(rq->provider, t->model))
		facts.web_searches = facts.choices;
	if (cls->format == BUDGET_FORMAT_OPENAI_CHAT && rq->provider == BUDGET_GEMINI && facts.grounding)
		facts.web_searches = REQUEST_WEB_SEARCH_USES;
	tok.web_searches = t->web_searches = facts.web_searches;
	tok.file_searches = facts.file_searches;
	tok.images = facts.images_generated;
	tok.container_gb = t->container_gb = facts.container_gb;
	t->tool_fees = facts.file_searches > 0 || facts.container_gb > 0 || facts.images_generated > 0;
	tok.output = facts.max_output > 0 && facts.max_output < row->max_output ? facts.max_output : row->max_output;
	if (cls->format == BUDGET_FORMAT_OPENAI_EMBEDDINGS)
		tok.output = 0;
	if (__builtin_mul_overflow(tok.output, facts.choices, &tok.output))
		tok.output = INT64_MAX; /* priced at BUDGET_COST_MAX: no cap admits it */
	priced = *row;
	/* OpenAI's priority processing, when the body asks it (or any tier latch does not know) */
	t->priority = rq->provider == BUDGET_OPENAI && facts.priority;
	if (t->priority)
		budget_prices_priority(&priced);
	if (priced.cache_write > priced.input)
		priced.input = priced.cache_write;
	if (priced.cached_input > priced.input)
		priced.input = priced.cached_input;
	if (priced.image_input > priced.input) /* an input token may be an image's, an output token too */
		priced.input = priced.image_input;
	if (priced.image_output > priced.output)
		priced.output = priced.image_output;
	if (facts.long_cache && priced.input < row->input * 2)
		priced.input = row->input * 2; /* budget_cost's price of a 1-hour write */
	return budget_cost(&priced, &tok);
}

int budget_ledger_refusal(struct budget *b, struct budget_note *note, char *line, size_t linelen, int ret)
{
	snprintf(line, linelen, "latch: the spend ledger %s can't be written (%s); nothing is forwarded until it can",
		 b->ledger_path, b->folder && *b->fold_error ? b->fold_error : budget_ledger_error(b->l));
	snprintf(note->decision, sizeof(note->decision), "refuse");
	snprintf(note->reason, sizeof(note->reason), "budget.refused.ledger");
	snprintf(note->fields, sizeof(note->fields), "{}");
	return ret ? ret : -EIO;
}

/* Drop the write transaction of a decision, if one was begun (a sole writer begins none). */
static void decision_abort(struct budget *b)
{
	if (!b->o.sole_writer)
		budget_ledger_rollback(b->l);
}

/*
 * Price request RQ into ticket T (its reservation, model and format) and
 * CLS.  Returns 0, or a refusal's -errno with NOTE and LINE set.
 */
static int reserve_price(struct budget *b, const struct budget_request *rq, struct budget_ticket *t,
			 struct budget_class *cls, struct budget_note *note, char *line, size_t linelen)
{
	const char *why;
	unsigned fetch;

	budget_classify(rq->provider, rq->method, rq->path, cls);
	/*
	 * What the meter can't price is not forwarded (a batch is billed later,
	 * for far more than one request's worst case), unless the kit prices
	 * it: then that price, whatever the body says.
	 */
	if (cls->format == BUDGET_FORMAT_UNKNOWN) {
		const struct budget_fixed *f = NULL;

		for (size_t i = 0; !f && rq->fixed && i < rq->n_fixed; i++)
			if (budget_fixed_match(&rq->fixed[i], rq->method, rq->path))
				f = &rq->fixed[i];
		if (!f || f->micros < 0)
			return budget_endpoint_refusal(note, rq, line, linelen);
		cls->format = BUDGET_FORMAT_FIXED;
		t->known = true;
		t->reserved = f->micros;
	}
	t->provider = rq->provider;
	t->format = cls->format;
	if (cls->format != BUDGET_FORMAT_FIXED) {
		t->reserved = worst_case(b, rq, cls, t, &why, &fetch);
		if (t->reserved < 0)
			return budget_body_refusal(note, why, rq, cls->format, line, linelen);
		if (fetch & ~rq->allow_tools)
			return budget_tool_refusal(note, rq, cls->format, fetch & ~rq->allow_tools, line, linelen);
	}
	if (!t->known && cls->format != BUDGET_FORMAT_UNKNOWN)
		warn_missing(b, rq->provider, t->model, note);
	return 0;
}

/* Whether sandbox S's CAPS leave room for ticket T; -EDQUOT with NOTE and LINE set when not. */
static int reserve_fits(struct budget *b, int s, const struct budget_request *rq, const struct budget_ticket *t,
			const struct budget_class *cls, const struct budget_caps *caps, struct budget_note *note,
			char *line, size_t linelen)
{
	struct refusal refusal;

	if (!budget_check_caps(b, s, rq->provider, caps, t->reserved, &refusal))
		return 0;
	refusal.need = t->reserved;
	refusal.sandbox = rq->sandbox;
	refusal.provider = rq->provider;
	refusal.model = t->model;
	refusal.known = t->known || cls->format == BUDGET_FORMAT_UNKNOWN;
	refusal.format = cls->format;
	refusal.web_searches = t->web_searches;
	refusal.tool_fees = t->tool_fees;
	budget_refusal_text(b, &refusal, note, line, linelen);
	return -EDQUOT;
}

/*
 * One of several writers, inside its write transaction: the pending
 * settlements first, then ticket T's row, in one commit; then memory
 * follows the ledger.  Returns 0, or -errno with the transaction rolled back.
 */
static int reserve_commit_row(struct budget *b, const struct budget_request *rq, struct budget_ticket *t, int s,
			      uint64_t now, const struct budget_caps *caps, enum budget_format format)
{
	struct row_batch rb = { .l = b->l, .n = 0 }; /* here: zeroing its 16 rows cost ~300 instructions */
	struct ledger_row row;
	int64_t next = b->last_id + 1;
	int ret;

	ret = budget_write_pending(b, &rb, &next, now);
	if (ret) {
		budget_ledger_rollback(b->l);
		return ret;
	}
	row = (struct ledger_row){ .id = next,
				   .time_ns = now,
				   .sandbox = rq->sandbox,
				   .provider = budget_provider_name(rq->provider),
				   .model = *t->model ? t->model : "-",
				   .micros = t->reserved,
				   .how = budget_format_name(format),
				   .caps = *caps };
	ret = budget_ledger_insert(b->l, &row, b->self);
	if (!ret)
		ret = budget_ledger_commit(b->l);
	if (ret) {
		budget_ledger_rollback(b->l);
		return ret;
	}
	b->n_pending = 0;
	b->last_id = row.id;
	b->last_time = now;
	if (budget_charge_add(b, row.id, now, s, rq->provider, t->reserved))
		b->last_id = row.id - 1; /* out of memory: the next catch-up reads it again */
	b->sbx[s].t[rq->provider].caps = *caps;
	b->sbx[s].t[rq->provider].caps_known = true;
	t->id = row.id;
	t->sbx = (uint32_t)s;
	budget_usage_reuse(&t->usage, format);
	return 0;
}

/*
 * One decision.  A sole writer decides in memory (memory holds all the
 * ledger holds) and queues the row; with later false it commits at once.
 * Others decide inside the write transaction, after reading what other
 * writers wrote, and commit the row before returning.
 */
static int reserve(struct budget *b, const struct budget_request *rq, bool later, struct budget_ticket **ticket,
		   struct budget_note *note, char *line, size_t linelen)
{
	struct budget_class cls;
	struct budget_caps caps;
	struct budget_ticket *t;
	uint64_t now;
	int ret = 0, s;

	note_reset(note);
	*ticket = NULL;
	if (linelen)
		line[0] = '\0';
	if (b->o.readonly || !rq->sandbox || latch_parse_name(rq->sandbox, NULL, 0) ||
	    (unsigned)rq->provider >= BUDGET_PROVIDERS || (later && !b->o.sole_writer)) {
		snprintf(line, linelen, "latch: the spend cap can't place this request (sandbox or provider unknown)");
		return -EINVAL;
	}
	t = ticket_new(b);
	if (!t)
		return -ENOMEM;
	ret = reserve_price(b, rq, t, &cls, note, line, linelen);
	if (ret) {
		ticket_free(b, t);
		return ret;
	}
	caps = budget_caps_in_force(b, rq->provider, rq->caps);

	if (!b->o.sole_writer) {
		ret = budget_ledger_begin(b->l);
		if (!ret)
			ret = budget_catch_up(b);
	}
	if (ret) {
		budget_ledger_rollback(b->l);
		ticket_free(b, t);
		return budget_ledger_refusal(b, note, line, linelen, ret);
	}
	now = budget_now(b);
	budget_expire(b, now);
	s = budget_sbx_find(b, rq->sandbox, true);
	if (s < 0) {
		decision_abort(b);
		ticket_free(b, t);
		return -ENOMEM;
	}
	ret = reserve_fits(b, s, rq, t, &cls, &caps, note, line, linelen);
	if (ret) {
		decision_abort(b);
		ticket_free(b, t);
		return ret;
	}
	if (b->j) { /* in the journal when this returns: forward at once */
		ret = budget_journal_reserve(b, t, s, now, &caps, budget_format_name(cls.format));
		if (ret) {
			ticket_free(b, t);
			return ret == -ENOMEM ? ret : budget_ledger_refusal(b, note, line, linelen, ret);
		}
	} else if (b->o.sole_writer) {
		ret = budget_queue_reservation(b, t, s, now, &caps, budget_format_name(cls.format));
		if (!ret && !later)
			ret = budget_commit(b, note, line, linelen); /* on failure, its reservation was undone */
		if (ret) {
			ticket_free(b, t);
			return ret;
		}
	} else {
		ret = reserve_commit_row(b, rq, t, s, now, &caps, cls.format);
		if (ret) {
			ticket_free(b, t);
			return budget_ledger_refusal(b, note, line, linelen, ret);
		}
	}
	*ticket = t;
	return 0;
}

int budget_reserve(struct budget *b, const struct budget_request *rq, struct budget_ticket **ticket,
		   struct budget_note *note, char *line, size_t linelen)
{
	return reserve(b, rq, false, ticket, note, line, linelen);
}

int budget_reserve_later(struct budget *b, const struct budget_request *rq, struct budget_ticket **ticket,
			 struct budget_note *note, char *line, size_t linelen)
{
	return reserve(b, rq, true, ticket, note, line, linelen);
}

void budget_response(struct budget_ticket *t, int status, const void *data, size_t len)
{
	if (!t)
		return;
	if (!data && !len) {
		t->status = status;
		return;
	}
	if (t->format != BUDGET_FORMAT_FREE && t->format != BUDGET_FORMAT_UNKNOWN && t->format != BUDGET_FORMAT_FIXED &&
	    status >= 200 && status < 300)
		budget_usage_feed(&t->usage, data, len);
}

/* ---- settling ---- */

static const char *end_name(enum budget_end how)
{
	switch (how) {
	case BUDGET_END_COMPLETE:
		return "complete";
	case BUDGET_END_GUEST_CUT:
		return "cut_guest";
	case BUDGET_END_UPSTREAM_CUT:
		return "cut_upstream";
	default:
		return "error";
	}
}

/* What the exchange costs, and why: never less than the usage, and the reservation whenever in doubt. */
static int64_t charge_of(struct budget *b, struct budget_ticket *t, enum budget_end how, struct budget_tokens *tok,
			 const char **why)
{
	const struct budget_price *row;
	enum usage_result r;

	memset(tok, 0, sizeof(*tok));
	if (t->format == BUDGET_FORMAT_FREE) {
		*why = "free";
		return 0;
	}
	/*
	 * A client that stops reading at a stream's last event (Codex at
	 * response.completed) cuts before the upstream's closing chunk: the
	 * provider finished and billed the usage read, so it is charged.  A cut
	 * anywhere earlier, or by the upstream, is charged the reservation.
	 */
	if (how == BUDGET_END_GUEST_CUT && t->status >= 200 && t->status < 300 && budget_usage_ended(&t->usage))
		how = BUDGET_END_COMPLETE;
	if (how != BUDGET_END_COMPLETE) {
		*why = end_name(how);
		return t->reserved;
	}
	if (t->status >= 400 && t->status < 500) { /* the provider refused it: providers bill no 4xx */
		*why = "upstream_refused";
		return 0;
	}
	if (t->status < 200 || t->status >= 300) {
		*why = "upstream_status";
		return t->reserved;
	}
	if (t->format == BUDGET_FORMAT_UNKNOWN) {
		*why = "unmetered";
		return t->reserved;
	}
	if (t->format == BUDGET_FORMAT_FIXED) { /* the kit's price, whatever the response says */
		*why = "fixed";
		return t->reserved;
	}
	r = budget_usage_finish(&t->usage, tok);
	*why = budget_usage_result_name(r);
	if (r != USAGE_OK)
		return t->reserved;
	if (tok->web_searches < 0 || t->format == BUDGET_FORMAT_OPENAI_CHAT) /* chat usage never says them */
		tok->web_searches = t->web_searches; /* searches the usage did not say: all it allowed */
	if (tok->container_gb < 0) /* code ran: every container reserved may be new (none reserved: the largest) */
		tok->container_gb = t->container_gb > 0 ? t->container_gb : REQUEST_CONTAINER_GB_MAX;
	row = t->known ? budget_prices_find(&b->prices, t->provider, t->model,
					    tok->input + tok->cached + tok->cache_write + tok->cache_write_1h) :
			 NULL;
	if (!row)
		row = budget_prices_worst(&b->prices, t->provider);
	/* priority processing: asked for, or the response says so (a project's default tier may be priority) */
	if (t->provider == BUDGET_OPENAI && (t->priority || t->usage.tier_dear)) {
		struct budget_price dear = *row;

		budget_prices_priority(&dear);
		return budget_cost(&dear, tok);
	}
	return budget_cost(row, tok);
}

/* A settlement for the next commit; NULL when memory ran out. */
struct pending *budget_queue_pending(struct budget *b, int64_t request, int64_t micros, const char *how,
				     const struct budget_tokens *tok, uint32_t sbx, enum budget_provider p,
				     const char *model)
{
	struct pending *q;

	if (b->n_pending == b->cap_pending) {
		size_t cap = b->cap_pending ? b->cap_pending * 2 : 64;

		q = realloc(b->pending, cap * sizeof(*q));
		if (!q)
			return NULL;
		b->pending = q;
		b->cap_pending = cap;
	}
	q = &b->pending[b->n_pending++];
	*q = (struct pending){ .request = request, .micros = micros, .how = how, .sbx = sbx, .provider = (uint8_t)p };
	if (tok)
		q->tokens = *tok;
	copy_model(q->model, model);
	return q;
}

int budget_settle(struct budget *b, struct budget_ticket *t, enum budget_end how, struct budget_note *note)
{
	bool (*want)(void *arg) = note->want;
	void *want_arg = note->want_arg;
	struct budget_tokens tok;
	const char *why;
	int64_t charge;
	bool kept;

	note_clear(note);
	if (!t)
		return 0;
	if (t->void_) { /* its commit failed: never forwarded, nothing to settle */
		ticket_free(b, t);
		return 0;
	}
	if (t->queued)
		budget_queue_forget(b, t);
	charge = charge_of(b, t, how, &tok, &why);
	/*
	 * Out of memory, the reservation stays open: counted in full, settled
	 * in full at the next open.  With a journal the row goes there now
	 * (queued for the next fold when it can't).
	 */
	if (b->j) {
		struct pending p = { .request = t->id,
				     .micros = charge,
				     .how = why,
				     .tokens = tok,
				     .sbx = t->sbx,
				     .provider = t->provider };

		copy_model(p.model, *t->model ? t->model : "-");
		kept = !budget_journal_settle(b, &p) ||
		       budget_queue_pending(b, t->id, charge, why, &tok, t->sbx, t->provider, p.model);
	} else {
		kept = budget_queue_pending(b, t->id, charge, why, &tok, t->sbx, t->provider,
					    *t->model ? t->model : "-");
	}
	if (kept)
		budget_charge_settle(b, t->id, charge);
	if (charge != t->reserved && (!want || want(want_arg)))
		budget_settle_note(t, why, charge, &tok, note);
	ticket_free(b, t);
	return 0;
}
