// SPDX-License-Identifier: GPL-2.0-only
/*
 * commit.c - a sole writer's reservations: decided in memory, written in
 * groups.
 *
 * latchd is the only process that writes its ledger (the writer lock,
 * ledger.c), so memory already holds every row the ledger holds and a
 * decision needs no read-back.  What stays expensive is the commit (about
 * 7 us here, most of it sqlite's WAL locks and two writes), so the
 * reservations latchd decides in one turn of its event loop share one: each
 * is counted against the caps the moment it is decided (the next decision
 * sees it), its row is queued with the next ledger id, and budget_commit()
 * writes the queue in one transaction.  The caller forwards a request only
 * after the commit that holds its row.  Settlements are applied to the caps
 * at once; their rows go with a commit once eight are waiting, with the
 * commit of their own reservation, or with budget_tick(): most commits
 * write one reservation's row and nothing else.
 *
 * latchd itself runs with the journal (budget_opts.journal, journal.c):
 * budget_journal_reserve() and budget_journal_settle() below append each row to it as it
 * is decided, the request goes at once, and budget_tick() folds the rows
 * into sqlite; budget_commit() then has nothing to do.
 *
 * A failed commit undoes its reservations: they are the newest charges,
 * removed from the windows again, their tickets made void (the caller
 * refuses those requests; budget_settle() frees them, charging nothing),
 * and a settlement already queued for one of them is dropped with it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

int budget_queue_reservation(struct budget *b, struct budget_ticket *t, int sbx, uint64_t now,
			     const struct budget_caps *caps, const char *how)
{
	int64_t id = b->last_id + (int64_t)b->n_queue + 1;
	struct queued *q;

	if (b->n_queue == b->cap_queue) {
		size_t cap = b->cap_queue ? b->cap_queue * 2 : 64;

		q = realloc(b->queue, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		b->queue = q;
		b->cap_queue = cap;
	}
	if (budget_charge_add(b, id, now, sbx, t->provider, t->reserved))
		return -ENOMEM;
	q = &b->queue[b->n_queue++];
	*q = (struct queued){ .t = t,
			      .id = id,
			      .time_ns = b->ch[b->n - 1].time_ns,
			      .micros = t->reserved,
			      .caps = *caps,
			      .sbx = (uint32_t)sbx,
			      .provider = (uint8_t)t->provider,
			      .how = how };
	snprintf(q->model, sizeof(q->model), "%s", *t->model ? t->model : "-");
	b->last_time = q->time_ns; /* no later row may be stamped earlier */
	b->sbx[sbx].t[t->provider].caps = *caps;
	b->sbx[sbx].t[t->provider].caps_known = true;
	t->id = id;
	t->sbx = (uint32_t)sbx;
	t->queued = true;
	budget_usage_reuse(&t->usage, t->format);
	return 0;
}

/* The ticket is being settled before its row was written: the row keeps its place, without the ticket. */
void budget_queue_forget(struct budget *b, struct budget_ticket *t)
{
	for (size_t i = b->n_queue; i-- > 0;)
		if (b->queue[i].t == t) {
			b->queue[i].t = NULL;
			break;
		}
	t->queued = false;
}

static void charge_pop(struct budget *b)
{
	struct charge *c = &b->ch[b->n - 1];
	struct tally *ts = &b->sbx[c->sbx].t[c->provider], *th = &b->host[c->provider];
	int64_t *pool_s = c->open ? &ts->reserved : &ts->spent, *pool_h = c->open ? &th->reserved : &th->spent;

	if (b->n - 1 >= b->hour_head) {
		ts->n_hour--;
		th->n_hour--;
	}
	if (b->n - 1 >= b->day_head) {
		ts->n_day--;
		th->n_day--;
		*pool_s -= c->micros;
		*pool_h -= c->micros;
	}
	b->n--;
	if (b->hour_head > b->n)
		b->hour_head = b->n;
	if (b->day_head > b->n)
		b->day_head = b->n;
}

/* The commit failed: take the queued reservations out of the windows again, newest first. */
static void undo_queue(struct budget *b)
{
	size_t keep = 0;

	for (size_t i = b->n_queue; i-- > 0;) {
		struct queued *q = &b->queue[i];

		if (!b->n || b->ch[b->n - 1].id != q->id)
			break; /* cannot happen: queued charges are the newest */
		charge_pop(b);
		if (q->t) {
			q->t->queued = false;
			q->t->void_ = true;
		}
	}
	/* settlements of reservations that were never written go with them */
	for (size_t i = 0; i < b->n_pending; i++)
		if (b->pending[i].request <= b->last_id)
			b->pending[keep++] = b->pending[i];
	b->n_pending = keep;
	b->n_queue = 0;
}

/*
 * With a journal (budget_opts.journal): the reservation's row is appended
 * before this returns, and the caller may forward at once.  A full journal
 * is folded first (on the request's path: the tick folds long before, at
 * any rate the meter can see); a fold that fails refuses the request.
 */
int budget_journal_reserve(struct budget *b, struct budget_ticket *t, int sbx, uint64_t now,
			   const struct budget_caps *caps, const char *how)
{
	struct ledger_row row;
	int64_t id;
	int ret = budget_journal_make_room(b);

	if (ret)
		return ret;
	id = b->last_id + 1;
	if (budget_charge_add(b, id, now, sbx, t->provider, t->reserved))
		return -ENOMEM;
	row = (struct ledger_row){ .id = id,
				   .time_ns = b->ch[b->n - 1].time_ns,
				   .sandbox = b->sbx[sbx].name,
				   .provider = budget_provider_name(t->provider),
				   .model = *t->model ? t->model : "-",
				   .micros = t->reserved,
				   .how = how,
				   .caps = *caps };
	ret = budget_journal_append(b->j, &row);
	if (ret) {
		charge_pop(b);
		return ret;
	}
	b->last_id = id;
	b->last_time = row.time_ns;
	b->sbx[sbx].t[t->provider].caps = *caps;
	b->sbx[sbx].t[t->provider].caps_known = true;
	t->id = id;
	t->sbx = (uint32_t)sbx;
	budget_usage_reuse(&t->usage, t->format);
	return 0;
}

/* A settlement's row; an error leaves it to the caller (queued for the next fold). */
int budget_journal_settle(struct budget *b, const struct pending *p)
{
	struct ledger_row row = budget_settle_row(b, p, b->last_id + 1, budget_now(b));
	int ret = budget_journal_make_room(b);

	if (ret)
		return ret;
	row.id = b->last_id + 1; /* the fold may have written queued settlements */
	ret = budget_journal_append(b->j, &row);
	if (!ret) {
		b->last_id = row.id;
		b->last_time = row.time_ns;
	}
	return ret;
}

int budget_commit(struct budget *b, struct budget_note *note, char *line, size_t linelen)
{
	return budget_commit_rows(b, false, note, line, linelen);
}

int budget_commit_rows(struct budget *b, bool all, struct budget_note *note, char *line, size_t linelen)
{
	/*
	 * Settlements ride along once there are enough to fill half a
	 * statement, or when one settles a reservation of this very commit (an
	 * exchange gone before its row: the row and its end are written
	 * together); else the tick writes them.
	 */
	bool settlements = all || b->n_pending >= LEDGER_BATCH / 2;
	int64_t next = b->last_id + (int64_t)b->n_queue + 1;
	struct row_batch rb = { .l = b->l, .n = 0 };
	uint64_t now;
	int ret;

	note_reset(note);
	if (linelen)
		line[0] = '\0';
	if (!b->o.sole_writer || !b->l)
		return b->n_queue ? -EINVAL : 0;
	if (b->j && b->folder) /* the rows are in the journal already; the fold thread folds them */
		return all ? budget_fold(b, 1) : 0;
	if (b->j) /* the rows are in the journal already; the tick folds them */
		return all ? budget_journal_fold(b, true) : 0;
	for (size_t i = b->n_pending; !settlements && i-- > 0;)
		settlements = b->pending[i].request > b->last_id;
	if (!b->n_queue && !(settlements && b->n_pending))
		return 0;
	now = budget_now(b);
	ret = budget_ledger_begin(b->l);
	for (size_t i = 0; !ret && i < b->n_queue; i++) {
		const struct queued *q = &b->queue[i];
		struct ledger_row row = { .id = q->id,
					  .time_ns = q->time_ns,
					  .sandbox = b->sbx[q->sbx].name,
					  .provider = budget_provider_name(q->provider),
					  .model = q->model,
					  .micros = q->micros,
					  .how = q->how,
					  .caps = q->caps,
					  .owner = b->self };

		ret = budget_batch_add(&rb, &row);
	}
	if (!ret && settlements) /* in the same statements as the reservations */
		ret = budget_write_pending(b, &rb, &next, now);
	else if (!ret)
		ret = budget_batch_flush(&rb);
	if (!ret)
		ret = budget_ledger_commit(b->l);
	if (ret) {
		budget_ledger_rollback(b->l);
		undo_queue(b);
		return budget_ledger_refusal(b, note, line, linelen, ret);
	}
	for (size_t i = 0; i < b->n_queue; i++)
		if (b->queue[i].t)
			b->queue[i].t->queued = false;
	b->n_queue = 0;
	if (settlements)
		b->n_pending = 0;
	b->last_id = next - 1;
	b->last_time = now;
	return 0;
}
