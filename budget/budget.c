// SPDX-License-Identifier: GPL-2.0-only
/*
 * budget.c - caps over rolling windows, reservations and settlements.
 *
 * Memory holds the last 24 hours of requests as the ledger has them: one
 * charge per reservation, in id (= time) order, with running counts per
 * (sandbox, provider) and per provider host-wide, so a decision costs O(1)
 * and the windows slide by moving two heads.  The ledger stays the truth:
 * every decision is made inside its write transaction after reading the rows
 * other processes wrote (catch_up), and memory only changes after a commit.
 *
 * A request counts in a window from the moment it was reserved; an open
 * reservation counts at its full amount until it is settled, and a
 * settlement replaces it with the charge.  A window of W ns holds the
 * requests reserved less than W ns ago, so a request reserved at t frees
 * its place at exactly t + W: that is the "frees at" of a refusal.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

uint64_t budget_now(struct budget *b)
{
	uint64_t now = b->o.clock(b->o.clock_arg);

	return now > b->last_time ? now : b->last_time;
}

/* ---- sandboxes and their tallies ---- */

static uint32_t name_hash(const char *name)
{
	return latch_fnv1a(LATCH_FNV1A_INIT, name, strlen(name));
}

static int index_grow(struct budget *b)
{
	uint32_t size = b->index_size ? b->index_size * 2 : 64, *idx = calloc(size, sizeof(*idx));

	if (!idx)
		return -ENOMEM;
	for (uint32_t s = 0; s < b->n_sbx; s++) {
		uint32_t h = name_hash(b->sbx[s].name) & (size - 1);

		while (idx[h])
			h = (h + 1) & (size - 1);
		idx[h] = s + 1;
	}
	free(b->index);
	b->index = idx;
	b->index_size = size;
	return 0;
}

int sbx_find(struct budget *b, const char *name, bool create)
{
	uint32_t h;
	struct sbx *grown;

	if (b->index_size) {
		for (h = name_hash(name) & (b->index_size - 1); b->index[h]; h = (h + 1) & (b->index_size - 1))
			if (!strcmp(b->sbx[b->index[h] - 1].name, name))
				return (int)b->index[h] - 1;
	}
	if (!create || strlen(name) > LATCH_NAME_MAX)
		return -1;
	if (b->n_sbx == b->cap_sbx) {
		uint32_t cap = b->cap_sbx ? b->cap_sbx * 2 : 16;

		grown = realloc(b->sbx, cap * sizeof(*grown));
		if (!grown)
			return -1;
		b->sbx = grown;
		b->cap_sbx = cap;
	}
	memset(&b->sbx[b->n_sbx], 0, sizeof(b->sbx[0]));
	strcpy(b->sbx[b->n_sbx].name, name);
	b->n_sbx++;
	if ((b->n_sbx * 2 > b->index_size && index_grow(b)) || !b->index_size) {
		b->n_sbx--;
		return -1;
	}
	for (h = name_hash(name) & (b->index_size - 1); b->index[h]; h = (h + 1) & (b->index_size - 1))
		;
	b->index[h] = b->n_sbx;
	return (int)b->n_sbx - 1;
}

/* ---- charges and windows ---- */

static void tally_add(struct tally *t, int64_t micros, bool open, int sign)
{
	t->n_hour += sign;
	t->n_day += sign;
	if (open)
		t->reserved += sign * micros;
	else
		t->spent += sign * micros;
}

int charge_add(struct budget *b, int64_t id, uint64_t time_ns, int sbx, enum budget_provider p, int64_t micros)
{
	struct charge *c;

	if (b->n == b->cap) {
		/* drop what has left the day window before growing */
		if (b->day_head > 0) {
			memmove(b->ch, b->ch + b->day_head, (b->n - b->day_head) * sizeof(*c));
			b->n -= b->day_head;
			b->hour_head -= b->day_head;
			b->day_head = 0;
		}
		if (b->n == b->cap) {
			size_t cap = b->cap ? b->cap * 2 : 1024;

			c = realloc(b->ch, cap * sizeof(*c));
			if (!c)
				return -ENOMEM;
			b->ch = c;
			b->cap = cap;
		}
	}
	/* id order is time order; a row stamped earlier than the one before (edited by hand) counts later, never earlier */
	if (b->n && time_ns < b->ch[b->n - 1].time_ns)
		time_ns = b->ch[b->n - 1].time_ns;
	c = &b->ch[b->n++];
	*c = (struct charge){
		.id = id, .time_ns = time_ns, .micros = micros, .sbx = (uint32_t)sbx, .provider = p, .open = true
	};
	tally_add(&b->sbx[sbx].t[p], micros, true, 1);
	tally_add(&b->host[p], micros, true, 1);
	return 0;
}

static struct charge *charge_find(struct budget *b, int64_t id)
{
	size_t lo = b->day_head, hi = b->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->ch[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < b->n && b->ch[lo].id == id ? &b->ch[lo] : NULL;
}

void charge_settle(struct budget *b, int64_t id, int64_t micros)
{
	struct charge *c = charge_find(b, id);
	struct tally *ts, *th;

	if (!c || !c->open)
		return; /* out of the window already, or settled twice (only the first counts) */
	ts = &b->sbx[c->sbx].t[c->provider];
	th = &b->host[c->provider];
	ts->reserved -= c->micros;
	th->reserved -= c->micros;
	ts->spent += micros;
	th->spent += micros;
	c->micros = micros;
	c->open = false;
}

void expire(struct budget *b, uint64_t now)
{
	while (b->hour_head < b->n && b->ch[b->hour_head].time_ns + BUDGET_HOUR_NS <= now) {
		struct charge *c = &b->ch[b->hour_head++];

		b->sbx[c->sbx].t[c->provider].n_hour--;
		b->host[c->provider].n_hour--;
	}
	while (b->day_head < b->n && b->ch[b->day_head].time_ns + BUDGET_DAY_NS <= now) {
		struct charge *c = &b->ch[b->day_head++];
		struct tally *ts = &b->sbx[c->sbx].t[c->provider], *th = &b->host[c->provider];

		ts->n_day--;
		th->n_day--;
		if (c->open) {
			ts->reserved -= c->micros;
			th->reserved -= c->micros;
		} else {
			ts->spent -= c->micros;
			th->spent -= c->micros;
		}
	}
}

/* One row of the ledger, written by this process or another. */
static int apply_row(const struct ledger_row *r, void *arg)
{
	struct budget *b = arg;
	enum budget_provider p;
	int s;

	b->last_id = r->id;
	if (r->time_ns > b->last_time)
		b->last_time = r->time_ns;
	if (budget_provider_parse(r->provider, &p))
		return 0; /* not a row latch wrote */
	if (r->settle) {
		charge_settle(b, r->request, r->micros);
		return 0;
	}
	s = sbx_find(b, r->sandbox, true);
	if (s < 0 || charge_add(b, r->id, r->time_ns, s, p, r->micros))
		return -ENOMEM;
	b->sbx[s].t[p].caps = r->caps;
	b->sbx[s].t[p].caps_known = true;
	return 0;
}

/* Read what others wrote since we last looked (inside the write lock for a decision). */
int catch_up(struct budget *b)
{
	return b->l ? ledger_each_after(b->l, b->last_id, apply_row, b) : 0;
}

/* A reader: the journals' rows the ledger does not hold yet, the older journal's first. */
int catch_up_journal(struct budget *b)
{
	struct journal *js[2];
	int ret = 0;

	journals_in_order(b, js);
	for (int i = 0; !ret && i < 2; i++)
		ret = js[i] ? journal_each(js[i], b->last_id, apply_row, b) : 0;
	return ret;
}

/* ---- caps ---- */

static const char *const cap_names[CAP_KINDS] = { "requests_per_hour", "requests_per_day", "dollars_per_day" };

const char *cap_name(enum cap_kind k)
{
	return cap_names[k];
}

int64_t cap_value(const struct budget_caps *c, enum cap_kind k)
{
	return k == CAP_REQ_HOUR ? c->requests_per_hour : k == CAP_REQ_DAY ? c->requests_per_day : c->micros_per_day;
}

static struct budget_caps caps_in_force(const struct budget *b, enum budget_provider p, const struct budget_caps *ov)
{
	struct budget_caps c = b->o.sandbox[p];

	if (ov && ov->requests_per_hour != BUDGET_INHERIT)
		c.requests_per_hour = ov->requests_per_hour;
	if (ov && ov->requests_per_day != BUDGET_INHERIT)
		c.requests_per_day = ov->requests_per_day;
	if (ov && ov->micros_per_day != BUDGET_INHERIT)
		c.micros_per_day = ov->micros_per_day;
	return c;
}

static bool over_cap(const struct tally *t, enum cap_kind k, int64_t cap, int64_t need)
{
	if (cap < 0)
		return false; /* BUDGET_NO_CAP */
	if (k == CAP_REQ_HOUR)
		return t->n_hour + 1 > cap;
	if (k == CAP_REQ_DAY)
		return t->n_day + 1 > cap;
	return need > cap - t->spent - t->reserved; /* no overflow: all three are at most INT64_MAX */
}

bool charge_matches(const struct charge *c, int sbx, enum budget_provider p)
{
	return c->provider == p && (sbx < 0 || (int)c->sbx == sbx);
}

/*
 * When the request fits under this cap, if nothing else is reserved: the
 * time the oldest requests that must leave the window have left it.  0:
 * never (the cap is 0, or this request alone is more than the cap).
 */
static uint64_t frees_at(const struct budget *b, int sbx, enum budget_provider p, enum cap_kind k,
			 const struct tally *t, int64_t cap, int64_t need)
{
	uint64_t w = k == CAP_REQ_HOUR ? BUDGET_HOUR_NS : BUDGET_DAY_NS;
	int64_t excess = k == CAP_REQ_HOUR ? t->n_hour + 1 - cap :
			 k == CAP_REQ_DAY  ? t->n_day + 1 - cap :
					     t->spent + t->reserved - (cap - need);

	if (cap <= 0 || (k == CAP_DOLLARS_DAY && need > cap))
		return 0;
	for (size_t i = k == CAP_REQ_HOUR ? b->hour_head : b->day_head; i < b->n; i++) {
		const struct charge *c = &b->ch[i];

		if (!charge_matches(c, sbx, p))
			continue;
		excess -= k == CAP_DOLLARS_DAY ? c->micros : 1;
		if (excess <= 0)
			return c->time_ns + w;
	}
	return 0;
}

/* The first sandbox cap, then host cap, this request does not fit under; the latest to free wins. */
static bool check_caps(struct budget *b, int sbx, enum budget_provider p, const struct budget_caps *caps, int64_t need,
		       struct refusal *r)
{
	bool refused = false;

	for (int host = 0; host < 2; host++) {
		const struct tally *t = host ? &b->host[p] : &b->sbx[sbx].t[p];
		const struct budget_caps *c = host ? &b->o.host[p] : caps;

		for (int k = 0; k < CAP_KINDS; k++) {
			int64_t cap = cap_value(c, k);
			uint64_t when;

			if (!over_cap(t, k, cap, need))
				continue;
			when = frees_at(b, host ? -1 : sbx, p, k, t, cap, need);
			if (!refused || (r->frees_ns && (!when || when > r->frees_ns))) {
				*r = (struct refusal){ .host = host,
						       .kind = k,
						       .cap = cap,
						       .frees_ns = when,
						       .used = k == CAP_REQ_HOUR ? t->n_hour :
							       k == CAP_REQ_DAY	 ? t->n_day :
										   t->spent,
						       .reserved = k == CAP_DOLLARS_DAY ? t->reserved : 0 };
				refused = true;
			}
		}
	}
	return refused;
}

/* ---- tickets ---- */

struct budget_ticket *ticket_new(struct budget *b)
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

void ticket_free(struct budget *b, struct budget_ticket *t)
{
	if (!t)
		return;
	if (b->n_spare == TICKET_SPARE) {
		usage_free(&t->usage);
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
	request_inspect(cls->format, rq->body, rq->body_len, &facts);
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
		base = prices_find(&b->prices, rq->provider, t->model, 0);
		in = request_input(rq->body_len, &facts);
		if (base && (facts.server_state || in > base->context))
			in = base->context;
		if (base)
			row = prices_tier(&b->prices, base, in);
	}
	t->known = row != NULL;
	if (!row) {
		row = prices_worst(&b->prices, rq->provider);
		in = request_input(rq->body_len, &facts);
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
	if (cls->format == BUDGET_FORMAT_OPENAI_CHAT && prices_search_model(rq->provider, t->model))
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
		prices_priority(&priced);
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

int ledger_refusal(struct budget *b, struct budget_note *note, char *line, size_t linelen, int ret)
{
	snprintf(line, linelen, "latch: the spend ledger %s can't be written (%s); nothing is forwarded until it can",
		 b->ledger_path, b->folder && *b->fold_error ? b->fold_error : ledger_error(b->l));
	snprintf(note->decision, sizeof(note->decision), "refuse");
	snprintf(note->reason, sizeof(note->reason), "budget.refused.ledger");
	snprintf(note->fields, sizeof(note->fields), "{}");
	return ret ? ret : -EIO;
}

/* Drop the write transaction of a decision, if one was begun (a sole writer begins none). */
static void decision_abort(struct budget *b)
{
	if (!b->o.sole_writer)
		ledger_rollback(b->l);
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
			return endpoint_refusal(note, rq, line, linelen);
		cls->format = BUDGET_FORMAT_FIXED;
		t->known = true;
		t->reserved = f->micros;
	}
	t->provider = rq->provider;
	t->format = cls->format;
	if (cls->format != BUDGET_FORMAT_FIXED) {
		t->reserved = worst_case(b, rq, cls, t, &why, &fetch);
		if (t->reserved < 0)
			return body_refusal(note, why, rq, cls->format, line, linelen);
		if (fetch & ~rq->allow_tools)
			return tool_refusal(note, rq, cls->format, fetch & ~rq->allow_tools, line, linelen);
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

	if (!check_caps(b, s, rq->provider, caps, t->reserved, &refusal))
		return 0;
	refusal.need = t->reserved;
	refusal.sandbox = rq->sandbox;
	refusal.provider = rq->provider;
	refusal.model = t->model;
	refusal.known = t->known || cls->format == BUDGET_FORMAT_UNKNOWN;
	refusal.format = cls->format;
	refusal.web_searches = t->web_searches;
	refusal.tool_fees = t->tool_fees;
	refusal_text(b, &refusal, note, line, linelen);
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

	ret = write_pending(b, &rb, &next, now);
	if (ret) {
		ledger_rollback(b->l);
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
	ret = ledger_insert(b->l, &row, b->self);
	if (!ret)
		ret = ledger_commit(b->l);
	if (ret) {
		ledger_rollback(b->l);
		return ret;
	}
	b->n_pending = 0;
	b->last_id = row.id;
	b->last_time = now;
	if (charge_add(b, row.id, now, s, rq->provider, t->reserved))
		b->last_id = row.id - 1; /* out of memory: the next catch-up reads it again */
	b->sbx[s].t[rq->provider].caps = *caps;
	b->sbx[s].t[rq->provider].caps_known = true;
	t->id = row.id;
	t->sbx = (uint32_t)s;
	usage_reuse(&t->usage, format);
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
	caps = caps_in_force(b, rq->provider, rq->caps);

	if (!b->o.sole_writer) {
		ret = ledger_begin(b->l);
		if (!ret)
			ret = catch_up(b);
	}
	if (ret) {
		ledger_rollback(b->l);
		ticket_free(b, t);
		return ledger_refusal(b, note, line, linelen, ret);
	}
	now = budget_now(b);
	expire(b, now);
	s = sbx_find(b, rq->sandbox, true);
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
		ret = journal_reserve(b, t, s, now, &caps, budget_format_name(cls.format));
		if (ret) {
			ticket_free(b, t);
			return ret == -ENOMEM ? ret : ledger_refusal(b, note, line, linelen, ret);
		}
	} else if (b->o.sole_writer) {
		ret = queue_reservation(b, t, s, now, &caps, budget_format_name(cls.format));
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
			return ledger_refusal(b, note, line, linelen, ret);
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
		usage_feed(&t->usage, data, len);
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
	r = usage_finish(&t->usage, tok);
	*why = usage_result_name(r);
	if (r != USAGE_OK)
		return t->reserved;
	if (tok->web_searches < 0 || t->format == BUDGET_FORMAT_OPENAI_CHAT) /* chat usage never says them */
		tok->web_searches = t->web_searches; /* searches the usage did not say: all it allowed */
	if (tok->container_gb < 0) /* code ran: every container reserved may be new (none reserved: the largest) */
		tok->container_gb = t->container_gb > 0 ? t->container_gb : REQUEST_CONTAINER_GB_MAX;
	row = t->known ? prices_find(&b->prices, t->provider, t->model,
				     tok->input + tok->cached + tok->cache_write + tok->cache_write_1h) :
			 NULL;
	if (!row)
		row = prices_worst(&b->prices, t->provider);
	/* priority processing: asked for, or the response says so (a project's default tier may be priority) */
	if (t->provider == BUDGET_OPENAI && (t->priority || t->usage.tier_dear)) {
		struct budget_price dear = *row;

		prices_priority(&dear);
		return budget_cost(&dear, tok);
	}
	return budget_cost(row, tok);
}

/* A settlement for the next commit; NULL when memory ran out. */
struct pending *queue_pending(struct budget *b, int64_t request, int64_t micros, const char *how,
			      const struct budget_tokens *tok, uint32_t sbx, enum budget_provider p, const char *model)
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
		queue_forget(b, t);
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
		kept = !journal_settle(b, &p) ||
		       queue_pending(b, t->id, charge, why, &tok, t->sbx, t->provider, p.model);
	} else {
		kept = queue_pending(b, t->id, charge, why, &tok, t->sbx, t->provider, *t->model ? t->model : "-");
	}
	if (kept)
		charge_settle(b, t->id, charge);
	if (charge != t->reserved && (!want || want(want_arg)))
		settle_note(t, why, charge, &tok, note);
	ticket_free(b, t);
	return 0;
}
