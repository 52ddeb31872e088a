// SPDX-License-Identifier: GPL-2.0-only
/*
 * life.c - a struct budget from open to close: the replay of the last 24
 * hours, the reservations that died with their process, the settlements
 * that ride on the next commit, and the tick that writes them and
 * checkpoints the WAL off every request's path.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

#include "budget/internal.h"
#include "config/config.h"

uint64_t budget_clock_realtime(void *arg)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Inside a write transaction, after budget_catch_up: append the settlements waiting
 * for a commit, from id *next on.  Memory (last_id) moves only after the
 * commit, so a rollback leaves nothing to undo.
 */
int budget_batch_flush(struct row_batch *rb)
{
	int ret = rb->n ? budget_ledger_insert_rows(rb->l, rb->r, rb->n) : 0;

	rb->n = 0;
	return ret;
}

int budget_batch_add(struct row_batch *rb, const struct ledger_row *r)
{
	rb->r[rb->n++] = *r;
	return rb->n == LEDGER_BATCH ? budget_batch_flush(rb) : 0;
}

struct ledger_row budget_settle_row(const struct budget *b, const struct pending *p, int64_t id, uint64_t now)
{
	return (struct ledger_row){ .id = id,
				    .time_ns = now,
				    .request = p->request,
				    .settle = true,
				    .sandbox = b->sbx[p->sbx].name,
				    .provider = budget_provider_name(p->provider),
				    .model = p->model,
				    .micros = p->micros,
				    .how = p->how,
				    .tokens = p->tokens };
}

int budget_write_pending(struct budget *b, struct row_batch *rb, int64_t *next, uint64_t now)
{
	for (size_t i = 0; i < b->n_pending; i++) {
		struct ledger_row row = budget_settle_row(b, &b->pending[i], (*next)++, now);
		int ret = budget_batch_add(rb, &row);

		if (ret)
			return ret;
	}
	return budget_batch_flush(rb);
}

static int fold_row(const struct ledger_row *r, void *arg)
{
	return budget_batch_add(arg, r);
}

/*
 * The journal's rows after the ledger's last id, then the settlements the
 * journal could not take, in one transaction: the ledger's largest id is
 * the last record folded, so a fold cut short is done again whole and
 * nothing twice.  reset: a sole writer empties the journal after.
 */
int budget_journal_fold(struct budget *b, bool reset)
{
	struct row_batch rb = { .l = b->l, .n = 0 };
	int64_t next = b->last_id + 1;
	int ret;

	if (!b->j || (!budget_journal_count(b->j) && !b->n_pending))
		return 0;
	ret = budget_ledger_begin(b->l);
	if (!ret)
		ret = budget_journal_each(b->j, budget_ledger_last_id(b->l), fold_row, &rb);
	if (!ret)
		ret = budget_batch_flush(&rb);
	if (!ret && reset && b->n_pending)
		ret = budget_write_pending(b, &rb, &next, budget_now(b));
	if (!ret)
		ret = budget_ledger_commit(b->l);
	if (ret) {
		budget_ledger_rollback(b->l);
		return ret;
	}
	if (reset) {
		b->last_id = next - 1;
		b->n_pending = 0;
		budget_journal_reset(b->j, b->last_id + 1, b->self);
	}
	return 0;
}

int budget_journal_fold_into(struct ledger *l, struct journal *j)
{
	struct row_batch rb = { .l = l, .n = 0 };
	int ret;

	if (!budget_journal_count(j))
		return 0;
	ret = budget_ledger_begin(l);
	if (!ret)
		ret = budget_journal_each(j, budget_ledger_last_id(l), fold_row, &rb);
	if (!ret)
		ret = budget_batch_flush(&rb);
	if (!ret)
		ret = budget_ledger_commit(l);
	if (ret)
		budget_ledger_rollback(l);
	return ret;
}

void budget_journals_in_order(const struct budget *b, struct journal *js[2])
{
	bool swap = b->j && b->j2 && budget_journal_start(b->j2) < budget_journal_start(b->j);

	js[0] = swap ? b->j2 : b->j;
	js[1] = swap ? b->j : b->j2;
	if (!js[0]) {
		js[0] = js[1];
		js[1] = NULL;
	}
}

/* Settlements the full journal could not take, into the emptied one (budget_fold()). */
static int append_pending(struct budget *b)
{
	uint64_t now = budget_now(b);
	size_t done = 0;
	int ret = 0;

	while (done < b->n_pending && !budget_journal_full(b->j)) {
		struct ledger_row row = budget_settle_row(b, &b->pending[done], b->last_id + 1, now);

		ret = budget_journal_append(b->j, &row);
		if (ret)
			break;
		b->last_id = row.id;
		b->last_time = now > b->last_time ? now : b->last_time;
		done++;
	}
	memmove(b->pending, b->pending + done, (b->n_pending - done) * sizeof(*b->pending));
	b->n_pending -= done;
	return ret;
}

/*
 * With a fold thread: once the folder is done with the other journal and
 * this one holds min rows, the other is emptied and takes the rows from
 * now on, and this one goes to the folder.  A failed fold is handed over
 * again, and its error returned (the tick's to report).
 */
static int fold_swap(struct budget *b, unsigned min)
{
	struct journal *full = b->j;
	int ret;

	/*
	 * Nothing handed over that is not known done and folded (j2_dirty is
	 * cleared only by a fold that worked): the folder has nothing to say,
	 * and asking it (its lock, its error copied) cost ~600 instructions a
	 * request.
	 */
	if (!b->j2_dirty && budget_journal_count(b->j) < (min ? min : 1))
		return 0;
	if (!budget_folder_done(b->folder, &ret, b->fold_error, sizeof(b->fold_error)))
		return 0;
	if (b->j2_dirty && ret) {
		budget_folder_give(b->folder, b->j2);
		return ret;
	}
	b->j2_dirty = false;
	if (!budget_journal_count(b->j) || budget_journal_count(b->j) < min)
		return 0;
	budget_journal_reset(b->j2, b->last_id + 1, b->self);
	b->j = b->j2;
	b->j2 = full;
	b->j2_dirty = true;
	budget_folder_give(b->folder, full);
	return append_pending(b);
}

int budget_journal_make_room(struct budget *b)
{
	int ret;

	if (!budget_journal_full(b->j))
		return 0;
	if (!b->folder)
		return budget_journal_fold(b, true);
	budget_folder_wait(b->folder); /* the folder is a whole journal behind: wait for it rather than refuse */
	ret = fold_swap(b, 1);
	return budget_journal_full(b->j) ? (ret ? ret : -ENOSPC) : 0;
}

int budget_fold(struct budget *b, unsigned min)
{
	if (b->folder)
		return fold_swap(b, min);
	return b->j && b->o.journal && budget_journal_count(b->j) >= min ? budget_journal_fold(b, true) : 0;
}

/* The settlements waiting for a commit, written now (the tick, and close). */
static int flush_pending(struct budget *b)
{
	struct budget_note note;
	struct row_batch rb = { .l = b->l, .n = 0 };
	char line[8];
	int64_t next;
	uint64_t now;
	int ret;

	if (b->o.sole_writer && b->l)
		return budget_commit_rows(b, true, &note, line, sizeof(line));
	if (!b->n_pending || !b->l || b->o.readonly)
		return 0;
	ret = budget_ledger_begin(b->l);
	if (!ret)
		ret = budget_catch_up(b);
	now = budget_now(b);
	next = b->last_id + 1;
	if (!ret)
		ret = budget_write_pending(b, &rb, &next, now);
	if (!ret)
		ret = budget_ledger_commit(b->l);
	if (ret) {
		budget_ledger_rollback(b->l);
		return ret;
	}
	b->last_id = next - 1;
	b->last_time = now;
	b->n_pending = 0;
	return 0;
}

int budget_tick(struct budget *b)
{
	int ret = flush_pending(b);

	if (b->l && !b->o.readonly) {
		int rc = budget_ledger_checkpoint(b->l);

		ret = ret ? ret : rc;
	}
	return ret;
}

/* ---- open and close ---- */

/* At open: whatever both journals hold beyond the ledger, the older rows first (*failed: the journal that failed). */
static int fold_both(struct budget *b, struct journal **failed)
{
	struct journal *js[2];
	int ret = 0;

	budget_journals_in_order(b, js);
	for (int i = 0; !ret && i < 2 && js[i]; i++) {
		ret = budget_journal_fold_into(b->l, js[i]);
		*failed = js[i];
	}
	return ret;
}

/* Open reservations whose process is gone: settled at their full amount ("lost"). */
static int settle_orphans(struct budget *b)
{
	struct row_batch rb = { .l = b->l, .n = 0 };
	char owner[160];
	int64_t next;
	uint64_t now;
	int ret = budget_ledger_begin(b->l);

	if (!ret)
		ret = budget_catch_up(b); /* under the write lock: two openers never settle the same one twice */
	for (size_t i = b->day_head; !ret && i < b->n; i++) {
		const struct charge *c = &b->ch[i];

		if (!c->open || budget_ledger_owner_of(b->l, c->id, owner, sizeof(owner)) || !strcmp(owner, b->self) ||
		    budget_ledger_owner_alive(owner))
			continue;
		if (!budget_queue_pending(b, c->id, c->micros, "lost", NULL, c->sbx, c->provider, "-"))
			ret = -ENOMEM;
	}
	now = budget_now(b);
	next = b->last_id + 1;
	if (!ret)
		ret = budget_write_pending(b, &rb, &next, now);
	if (!ret)
		ret = budget_ledger_prune(b->l, now - (uint64_t)BUDGET_KEEP_DAYS * BUDGET_DAY_NS);
	if (!ret)
		ret = budget_ledger_commit(b->l);
	if (ret) {
		budget_ledger_rollback(b->l);
		b->n_pending = 0;
		return ret;
	}
	for (size_t i = 0; i < b->n_pending; i++)
		budget_charge_settle(b, b->pending[i].request, b->pending[i].micros);
	b->last_id = next - 1;
	b->last_time = now;
	b->n_pending = 0;
	return 0;
}

struct budget *budget_open(const struct budget_opts *o, char *err, size_t errlen)
{
	struct budget *b = calloc(1, sizeof(*b));
	uint64_t now;
	int ret = -ENOMEM;

	if (!b)
		goto fail;
	b->o = *o;
	if (!b->o.clock)
		b->o.clock = budget_clock_realtime;
	if ((o->ledger ? snprintf(b->ledger_path, sizeof(b->ledger_path), "%s", o->ledger) >= PATH_MAX :
			 latch_path(b->ledger_path, sizeof(b->ledger_path), LATCH_LEDGER_DB) != 0) ||
	    (o->prices ? snprintf(b->prices_path, sizeof(b->prices_path), "%s", o->prices) >= PATH_MAX :
			 latch_path(b->prices_path, sizeof(b->prices_path), LATCH_PRICES_FILE) != 0)) {
		ret = latch_errf(err, errlen, -ENAMETOOLONG, "ledger or price table path is too long");
		goto fail;
	}
	ret = budget_prices_load(&b->prices, b->prices_path, err, errlen);
	if (ret)
		goto fail;
	b->l = budget_ledger_open(b->ledger_path, o->readonly, o->sync_full, o->owner,
				  o->sole_writer ? LOCK_EX : LOCK_SH, err, errlen);
	if (!b->l && !(o->readonly && errno == ENOENT)) { /* read-only without a ledger: nothing metered yet */
		ret = -errno;
		goto fail;
	}
	if (o->fold_thread && !(o->journal && o->sole_writer && o->checkpoint_thread && !o->readonly)) {
		ret = latch_errf(err, errlen, -EINVAL,
				 "a fold thread is for a journaling sole writer with a checkpoint thread");
		goto fail;
	}
	if (b->l || o->readonly) { /* journals a crash left: folded by any writer, read by a reader */
		struct journal *failed = NULL;

		ret = budget_journal_open(b->ledger_path, 0, !o->journal, o->readonly, o->owner, &b->j, err, errlen);
		if (!ret)
			ret = budget_journal_open(b->ledger_path, 1, !o->fold_thread, o->readonly, o->owner, &b->j2,
						  err, errlen);
		if (ret)
			goto fail;
		ret = b->l && !o->readonly ? fold_both(b, &failed) : 0;
		if (ret) {
			latch_errf(err, errlen, ret, "ledger %s: folding %s: %s", b->ledger_path,
				   budget_journal_path(failed), budget_ledger_error(b->l));
			goto fail;
		}
	}
	if (b->l && o->checkpoint_thread && !o->readonly) {
		ret = budget_ledger_checkpoint_thread(b->l, err, errlen);
		if (ret)
			goto fail;
	}
	if (err && errlen)
		err[0] = '\0';
	budget_ledger_self(b->self, sizeof(b->self));
	/* replay: the rows of the last 24 hours, as the ledger has them */
	b->last_time = b->l ? budget_ledger_last_time(b->l) : 0;
	now = budget_now(b);
	b->last_id = b->l ? budget_ledger_first_since(b->l, now > BUDGET_DAY_NS ? now - BUDGET_DAY_NS : 0) - 1 : 0;
	ret = budget_catch_up(b);
	if (!ret && b->j && o->readonly) /* a reader: what latchd has not folded yet counts as well */
		ret = budget_catch_up_journal(b);
	if (!ret) {
		budget_expire(b, budget_now(b));
		if (!o->readonly)
			ret = settle_orphans(b);
	}
	if (!ret && !o->journal) { /* folded: only a journaling sole writer keeps it open */
		budget_journal_close(b->j);
		b->j = NULL;
	}
	if (!ret && !o->fold_thread) { /* and the second only with its fold thread */
		budget_journal_close(b->j2);
		b->j2 = NULL;
	}
	if (!ret && b->j && !o->readonly)
		budget_journal_reset(b->j, b->last_id + 1, b->self);
	if (!ret && b->j2 && !o->readonly)
		budget_journal_reset(b->j2, b->last_id + 1, b->self);
	if (!ret && o->fold_thread) {
		b->folder = budget_folder_start(b->l, err, errlen);
		ret = b->folder ? 0 : -EIO;
		if (ret)
			goto fail;
	}
	if (ret) {
		latch_errf(err, errlen, ret, "ledger %s: %s", b->ledger_path, budget_ledger_error(b->l));
		goto fail;
	}
	return b;
fail:
	budget_close(b);
	errno = ret < 0 ? -ret : ENOMEM;
	return NULL;
}

void budget_close(struct budget *b)
{
	if (!b)
		return;
	if (b->folder) { /* the thread's fold ends first; then the older journal, then the rest as without it */
		budget_folder_stop(b->folder);
		b->folder = NULL;
		if (b->j2 && budget_journal_fold_into(b->l, b->j2) == 0)
			b->j2_dirty = false;
	}
	flush_pending(b);
	budget_journal_close(b->j);
	budget_journal_close(b->j2);
	budget_ledger_close(b->l);
	free(b->pending);
	free(b->queue);
	budget_prices_free(&b->prices);
	free(b->ch);
	free(b->sbx);
	free(b->index);
	while (b->n_spare) {
		struct budget_ticket *t = b->spare[--b->n_spare];

		budget_usage_free(&t->usage);
		free(t);
	}
	free(b);
}

int budget_reload_prices(struct budget *b, char *err, size_t errlen)
{
	return budget_prices_load(&b->prices, b->prices_path, err, errlen);
}

void budget_set_caps(struct budget *b, const struct budget_caps sandbox[BUDGET_PROVIDERS],
		     const struct budget_caps host[BUDGET_PROVIDERS])
{
	memcpy(b->o.sandbox, sandbox, sizeof(b->o.sandbox));
	memcpy(b->o.host, host, sizeof(b->o.host));
}

_Static_assert(LATCH_CONF_PROVIDERS == BUDGET_PROVIDERS && LATCH_CONF_OTHER == BUDGET_OTHER &&
		       LATCH_CONF_NO_CAP == BUDGET_NO_CAP,
	       "latch.conf's providers are budget/'s, in its order, and its 'none' is budget/'s");

void budget_caps_from_conf(struct budget_opts *o, const struct latch_conf *c)
{
	for (int p = 0; p < BUDGET_PROVIDERS; p++) {
		const struct latch_conf_caps *s = &c->budget_sandbox[p], *h = &c->budget_host[p];

		o->sandbox[p] = (struct budget_caps){ s->requests_per_hour, s->requests_per_day, s->micros_per_day };
		o->host[p] = (struct budget_caps){ h->requests_per_hour, h->requests_per_day, h->micros_per_day };
	}
}

int budget_prices_each(struct budget *b, int (*fn)(const struct budget_price *p, void *arg), void *arg)
{
	for (int i = 0; i < b->prices.n; i++) {
		int ret = fn(&b->prices.rows[i], arg);

		if (ret)
			return ret;
	}
	return 0;
}

int budget_fees_each(struct budget *b, int (*fn)(const struct budget_fee *f, void *arg), void *arg)
{
	for (int k = 0; k < BUDGET_FEES; k++) {
		int ret = b->prices.fees[k].tool ? fn(&b->prices.fees[k], arg) : 0;

		if (ret)
			return ret;
	}
	return 0;
}
