// SPDX-License-Identifier: GPL-2.0-only
/*
 * window.c - caps over rolling windows: the tallies a decision reads.
 *
 * Memory holds the last 24 hours of requests as the ledger has them: one
 * charge per reservation, in id (= time) order, with running counts per
 * (sandbox, provider) and per provider host-wide, so a decision costs O(1)
 * and the windows slide by moving two heads.  Memory follows the ledger:
 * budget_catch_up reads the rows other processes wrote.
 *
 * A window of W ns holds the requests reserved less than W ns ago, so a
 * request reserved at t frees its place at exactly t + W: that is the
 * "frees at" of a refusal.
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

int budget_sbx_find(struct budget *b, const char *name, bool create)
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

int budget_charge_add(struct budget *b, int64_t id, uint64_t time_ns, int sbx, enum budget_provider p, int64_t micros)
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

void budget_charge_settle(struct budget *b, int64_t id, int64_t micros)
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

void budget_expire(struct budget *b, uint64_t now)
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
		budget_charge_settle(b, r->request, r->micros);
		return 0;
	}
	s = budget_sbx_find(b, r->sandbox, true);
	if (s < 0 || budget_charge_add(b, r->id, r->time_ns, s, p, r->micros))
		return -ENOMEM;
	b->sbx[s].t[p].caps = r->caps;
	b->sbx[s].t[p].caps_known = true;
	return 0;
}

/* Read what others wrote since we last looked (inside the write lock for a decision). */
int budget_catch_up(struct budget *b)
{
	return b->l ? budget_ledger_each_after(b->l, b->last_id, apply_row, b) : 0;
}

/* A reader: the journals' rows the ledger does not hold yet, the older journal's first. */
int budget_catch_up_journal(struct budget *b)
{
	struct journal *js[2];
	int ret = 0;

	budget_journals_in_order(b, js);
	for (int i = 0; !ret && i < 2; i++)
		ret = js[i] ? budget_journal_each(js[i], b->last_id, apply_row, b) : 0;
	return ret;
}

/* ---- caps ---- */

static const char *const cap_names[CAP_KINDS] = { "requests_per_hour", "requests_per_day", "dollars_per_day" };

const char *budget_cap_name(enum cap_kind k)
{
	return cap_names[k];
}

int64_t budget_cap_value(const struct budget_caps *c, enum cap_kind k)
{
	return k == CAP_REQ_HOUR ? c->requests_per_hour : k == CAP_REQ_DAY ? c->requests_per_day : c->micros_per_day;
}

struct budget_caps budget_caps_in_force(const struct budget *b, enum budget_provider p, const struct budget_caps *ov)
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

bool budget_charge_matches(const struct charge *c, int sbx, enum budget_provider p)
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

		if (!budget_charge_matches(c, sbx, p))
			continue;
		excess -= k == CAP_DOLLARS_DAY ? c->micros : 1;
		if (excess <= 0)
			return c->time_ns + w;
	}
	return 0;
}

/* The first sandbox cap, then host cap, this request does not fit under; the latest to free wins. */
bool budget_check_caps(struct budget *b, int sbx, enum budget_provider p, const struct budget_caps *caps, int64_t need,
		       struct refusal *r)
{
	bool refused = false;

	for (int host = 0; host < 2; host++) {
		const struct tally *t = host ? &b->host[p] : &b->sbx[sbx].t[p];
		const struct budget_caps *c = host ? &b->o.host[p] : caps;

		for (int k = 0; k < CAP_KINDS; k++) {
			int64_t cap = budget_cap_value(c, k);
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
