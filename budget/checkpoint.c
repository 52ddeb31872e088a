// SPDX-License-Identifier: GPL-2.0-only
/*
 * checkpoint.c - the ledger's WAL copied into its database by a thread of
 * its own (latchd: budget_opts.checkpoint_thread).
 *
 * Every commit appends the pages it changed to the WAL; a checkpoint copies
 * them into the database file and fsyncs it, and lets the WAL start over.
 * Done on the writer's thread it stalls whatever that thread serves: in
 * latchd, every request in flight, for milliseconds each second at a few
 * thousand requests a second.  So the writer's connection only counts (its
 * WAL hook, after each commit) and wakes this thread when the WAL passes
 * CKPT_FRAMES, or once a second; the thread checkpoints through a
 * connection of its own (PASSIVE: it never waits for a reader, and the
 * writer goes on appending meanwhile; sqlite allows one checkpointer beside
 * one writer), at SCHED_IDLE (budget_thread_start()).  Should the thread
 * fall far behind, the writer checkpoints itself at
 * LEDGER_AUTOCHECKPOINT_PAGES, as sqlite's own automatic checkpoint (which
 * the hook replaces) would.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget/internal.h"

#define CKPT_FRAMES 4096 /* 16 MiB of WAL at 4 KiB pages, within journal_size_limit */

struct checkpointer {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool wake, stop, started;
	sqlite3 *db; /* the thread's own connection */
	sqlite3 *writer;
	unsigned long runs;
};

static void *run(void *arg)
{
	struct checkpointer *c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1; /* at least once a second, as budget_tick() did */
		while (!c->wake && !c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &until) != ETIMEDOUT)
			;
		if (c->stop)
			break;
		c->wake = false;
		pthread_mutex_unlock(&c->mu);
		sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		pthread_mutex_lock(&c->mu);
		c->runs++;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

void budget_checkpointer_kick(struct checkpointer *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	if (!c->wake) {
		c->wake = true;
		pthread_cond_signal(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
}

/* The writer's WAL hook, after each of its commits: nframes is the WAL's length. */
static int on_commit(void *arg, sqlite3 *db, const char *name, int nframes)
{
	struct checkpointer *c = arg;

	if (nframes >= LEDGER_AUTOCHECKPOINT_PAGES) /* the thread is far behind: the backstop */
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	else if (nframes >= CKPT_FRAMES)
		budget_checkpointer_kick(c);
	return SQLITE_OK;
}

struct checkpointer *budget_checkpointer_start(sqlite3 *writer, const char *path, char *err, size_t errlen)
{
	struct checkpointer *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		latch_errf(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->writer = writer;
	rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, NULL);
	/* a connection learns that the file is in WAL mode when it first reads it; till then it checkpoints nothing */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(c->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		latch_errf(err, errlen, -EIO, "ledger %s: the checkpoint connection: %s", path,
			   c->db ? sqlite3_errmsg(c->db) : "cannot open");
		budget_checkpointer_stop(c);
		return NULL;
	}
	rc = budget_thread_start(&c->thread, run, c);
	if (rc) {
		latch_errf(err, errlen, -rc, "ledger %s: the checkpoint thread: %s", path, strerror(rc));
		budget_checkpointer_stop(c);
		return NULL;
	}
	c->started = true;
	sqlite3_wal_hook(writer, on_commit, c);
	return c;
}

void budget_checkpointer_stop(struct checkpointer *c)
{
	if (!c)
		return;
	if (c->writer) /* sqlite's own automatic checkpoint again */
		sqlite3_wal_autocheckpoint(c->writer, LEDGER_AUTOCHECKPOINT_PAGES);
	if (c->started) {
		budget_thread_idle(c->thread, false); /* a checkpoint under way ends at the normal policy */
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	sqlite3_close(c->db);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

int budget_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, was;
	int rc;

	/* every signal stays with the caller's thread (latchd's loop): the thread starts with all blocked */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &was);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (!rc)
		budget_thread_idle(*t, true);
	return rc;
}

void budget_thread_idle(pthread_t t, bool idle)
{
	struct sched_param none = { 0 };

	pthread_setschedparam(t, idle ? SCHED_IDLE : SCHED_OTHER, &none);
}
