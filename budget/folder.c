// SPDX-License-Identifier: GPL-2.0-only
/*
 * folder.c - a sole writer's journal folded into the ledger by a thread of
 * its own (latchd: budget_opts.fold_thread).
 *
 * A fold is sqlite's work, about 7,000 instructions a row and two rows a
 * request; on latchd's one thread it was the largest part of what the
 * spend meter costs a request.  So latchd keeps two journals
 * (LEDGER.journal and LEDGER.journal2): its thread appends to one while
 * this thread folds the other, through the writer's own connection, which
 * latchd's thread does not touch while a fold runs (budget_fold() asks
 * budget_folder_done() first, and a full journal waits in budget_folder_wait()).  When
 * the fold is done, budget_fold() empties that journal and the two swap.
 * The thread runs at SCHED_IDLE (budget_thread_start()): a journal holds
 * 16,384 records, a fifth of a second of requests at the broker's fastest
 * and far more at an agent's pace, so the fold can wait for a CPU that
 * nothing else wants; one that falls a whole journal behind is lent the
 * normal policy while latchd's thread waits in budget_folder_wait().
 *
 * Nothing here decides anything: every cap was counted in memory when the
 * row was appended, and the journal the rows are in survives kill -9 (at
 * open, both journals are folded, the older rows first, and a row already
 * in the ledger is skipped).  A fold that fails leaves its journal as it
 * was; budget_fold() hands it over again and reports the error.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

struct folder {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* work given, a fold done, or stop */
	struct ledger *l;
	struct journal *todo; /* given and not yet folded */
	bool busy, stop, started;
	int result; /* of the last fold */
	char msg[256]; /* and its error, copied: the thread may be writing the ledger's own again */
};

static void *run(void *arg)
{
	struct folder *f = arg;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		struct journal *j;
		int ret;

		while (!f->todo && !f->stop)
			pthread_cond_wait(&f->cv, &f->mu);
		if (!f->todo)
			break; /* stop, with nothing given */
		j = f->todo;
		pthread_mutex_unlock(&f->mu);
		ret = budget_journal_fold_into(f->l, j);
		pthread_mutex_lock(&f->mu);
		f->result = ret;
		snprintf(f->msg, sizeof(f->msg), "%s", ret ? budget_ledger_error(f->l) : "");
		f->todo = NULL;
		f->busy = false;
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

struct folder *budget_folder_start(struct ledger *l, char *err, size_t errlen)
{
	struct folder *f = calloc(1, sizeof(*f));
	int rc;

	if (!f) {
		latch_errf(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	f->l = l;
	rc = budget_thread_start(&f->thread, run, f);
	if (rc) {
		latch_errf(err, errlen, -rc, "the ledger's fold thread: %s", strerror(rc));
		budget_folder_stop(f);
		return NULL;
	}
	f->started = true;
	return f;
}

void budget_folder_give(struct folder *f, struct journal *j)
{
	pthread_mutex_lock(&f->mu);
	f->todo = j;
	f->busy = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

bool budget_folder_done(struct folder *f, int *result, char *msg, size_t msglen)
{
	bool done;

	pthread_mutex_lock(&f->mu);
	done = !f->busy;
	*result = done ? f->result : 0;
	if (done)
		snprintf(msg, msglen, "%s", f->msg);
	pthread_mutex_unlock(&f->mu);
	return done;
}

void budget_folder_wait(struct folder *f)
{
	pthread_mutex_lock(&f->mu);
	if (f->busy) { /* the caller waits on an idle-priority thread: lend it the normal policy meanwhile */
		budget_thread_idle(f->thread, false);
		while (f->busy)
			pthread_cond_wait(&f->cv, &f->mu);
		budget_thread_idle(f->thread, true);
	}
	pthread_mutex_unlock(&f->mu);
}

void budget_folder_stop(struct folder *f)
{
	if (!f)
		return;
	if (f->started) {
		budget_thread_idle(f->thread, false); /* a fold under way ends at the normal policy */
		pthread_mutex_lock(&f->mu);
		f->stop = true;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->thread, NULL); /* a fold under way ends first: the loop takes todo before stop */
	}
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}
