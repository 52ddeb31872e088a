// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_folder.c - latchd's journals folded by a thread of their own
 * (budget_opts.fold_thread): one journal takes the rows while the other is
 * folded, and they swap.
 *
 * Invariant 39 through the fold thread: every row reaches the ledger
 * exactly once and in id order however the swaps fall; a sole writer
 * killed (SIGKILL) while both journals hold rows the ledger doesn't
 * (its fold blocked) loses none of them: the next open folds both, the
 * older first, and charges the open reservations in full.  Control: the
 * same kill with the second journal moved away leaves only the first's
 * rows, so the second journal is what carried them.
 *
 * The fold and checkpoint threads run at SCHED_IDLE, so a busy host's
 * requests go first; a writer that has to wait for a fold (its journal
 * full) lends the fold thread SCHED_OTHER for the wait, else a host busy
 * with other work would stall latchd behind a thread that gets no CPU.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "budget_test.h"

TestSuite(budget_folder, .init = bt_setup, .fini = bt_teardown);

static const char body[] = "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1000,\"messages\":[]}";
static const char resp[] = "{\"type\":\"message\",\"usage\":{\"input_tokens\":100,\"output_tokens\":100}}";

static void folding(struct budget_opts *o)
{
	bt_opts(o);
	o->sole_writer = true;
	o->journal = true;
	o->checkpoint_thread = true;
	o->fold_thread = true;
}

static void one_request(struct budget *b)
{
	struct budget_request rq = bt_request("s1", BUDGET_ANTHROPIC, "/v1/messages", body);
	struct budget_ticket *t;
	struct budget_note note;
	char line[512];

	cr_assert_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), 0, "%s", line);
	budget_response(t, 200, NULL, 0);
	budget_response(t, 200, resp, strlen(resp));
	memset(&note, 0, sizeof(note));
	cr_assert_eq(budget_settle(b, t, BUDGET_END_COMPLETE, &note), 0);
}

static char *journal2(void)
{
	static char path[160];

	snprintf(path, sizeof(path), "%s.journal2", bt_ledger);
	return path;
}

/*
 * The ledger's rows, after asking budget_fold() (as latchd's tick does) until
 * the thread has written want of them or 10 s have passed: a journal is
 * handed over only when budget_fold() is asked and the thread is done.
 */
static int64_t rows_reaching(struct budget *b, int64_t want)
{
	int64_t n = 0;

	for (int i = 0; i < 1000 && (n = bt_sql("SELECT count(*) FROM ledger")) < want; i++) {
		cr_assert_eq(budget_fold(b, 1), 0);
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
	}
	return n;
}

Test(budget_folder, every_row_reaches_the_ledger_once_in_order_while_appends_go_on, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	struct stat st;
	int64_t n;

	folding(&o);
	b = bt_open(&o);
	for (int i = 0; i < 3000; i++) {
		one_request(b);
		cr_assert_eq(budget_fold(b, 256), 0); /* latchd's meter: at a request's end */
	}
	/* the thread folds every row while this one goes on: all of them reach sqlite before any close */
	n = rows_reaching(b, 6000);
	cr_expect_eq(n, 6000, "the fold thread wrote %lld rows of 6000 before the close", (long long)n);
	cr_assert_eq(budget_tick(b), 0);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 6000);
	cr_expect_eq(bt_sql("SELECT max(id) - min(id) + 1 FROM ledger"), 6000, "a gap or a row twice");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle' AND how = 'usage'"), 3000);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger s JOIN ledger r ON r.id = s.request "
			    "WHERE s.kind = 'settle' AND r.kind = 'reserve' AND s.id > r.id"),
		     3000, "a settlement before its reservation, or of no reservation");
	cr_assert_eq(stat(journal2(), &st), 0, "no second journal");
	cr_expect_eq(st.st_mode & 07777, 0600, "the second journal is %o, not the ledger's 0600", st.st_mode & 07777);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 3000, "a reopen counted a journal again or lost rows");
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 6000, "the reopen folded rows a second time");
}

/*
 * A latchd with a fold thread, in a child: 100 reservations, a swap (the
 * first journal handed to the thread, whose fold the parent's write lock
 * holds back), 200 more into the second journal; then SIGKILL.
 */
static void run_blocked_and_kill(void)
{
	struct budget_opts o;
	int ready[2], go[2], st;
	sqlite3 *db;
	pid_t kid;
	char c;

	folding(&o);
	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(go), 0);
	kid = fork();
	cr_assert_geq(kid, 0);
	if (!kid) {
		char err[256];
		struct budget *b;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		b = budget_open(&o, err, sizeof(err));
		if (!b || write(ready[1], "o", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		for (int i = 0; i < 300; i++) {
			struct budget_request rq = bt_request("s1", BUDGET_ANTHROPIC, "/v1/messages", body);
			struct budget_ticket *t;
			struct budget_note note;
			char line[512];

			if (budget_reserve(b, &rq, &t, &note, line, sizeof(line)))
				_exit(2);
			if (i == 99 && budget_fold(b, 100)) /* the swap: the first journal to the thread */
				_exit(3);
		}
		if (write(ready[1], "r", 1) != 1)
			_exit(4);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(ready[0], &c, 1), 1, "the child could not open the ledger");
	cr_assert_eq(sqlite3_open_v2(bt_ledger, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	cr_assert_eq(write(go[1], "g", 1), 1);
	cr_assert_eq(read(ready[0], &c, 1), 1, "the child could not reserve");
	cr_expect_eq(c, 'r');
	kill(kid, SIGKILL);
	cr_assert_eq(waitpid(kid, &st, 0), kid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(db);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 0, "the blocked fold wrote rows");
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(go[i]);
	}
}

Test(budget_folder, a_kill_with_both_journals_unfolded_loses_no_row, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;

	run_blocked_and_kill();
	folding(&o);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 300, "a restart forgot reservations a journal held");
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'reserve'"), 300);
	cr_expect_eq(bt_sql("SELECT max(id) - min(id) + 1 FROM ledger WHERE kind = 'reserve'"), 300,
		     "the journals were folded out of order");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE how = 'lost'"), 300, "open ones are charged in full");
}

/* control: the second journal moved away, only the first's 100 are left */
Test(budget_folder, control_without_the_second_journal_its_rows_are_gone, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	char away[200];

	run_blocked_and_kill();
	snprintf(away, sizeof(away), "%s.away", journal2());
	cr_assert_eq(rename(journal2(), away), 0);
	folding(&o);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 100);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'reserve'"), 100);
}

/* This process's threads (their TIDs, at most max): which are budget/'s is told by a list before and after. */
static int thread_ids(pid_t *tids, int max)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)) && n < max)
		if (e->d_name[0] != '.')
			tids[n++] = atoi(e->d_name);
	closedir(d);
	return n;
}

static bool listed(const pid_t *tids, int n, pid_t tid)
{
	for (int i = 0; i < n; i++)
		if (tids[i] == tid)
			return true;
	return false;
}

struct lender_watch {
	pid_t tids[2]; /* budget/'s two threads */
	sqlite3 *lock; /* holds the ledger's write lock, so the fold can't end */
	_Atomic bool lent; /* a budget/ thread was seen at SCHED_OTHER */
};

static int policy_of(pid_t tid)
{
	return sched_getscheduler(tid);
}

/* A reservation left open (the journal's record is what counts here). */
static void reserve_one(struct budget *b, int i)
{
	struct budget_request rq = bt_request("s1", BUDGET_ANTHROPIC, "/v1/messages", body);
	struct budget_ticket *t;
	struct budget_note note;
	char line[512];

	cr_assert_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), 0, "reservation %d: %s", i, line);
}

/* Until a budget/ thread is at SCHED_OTHER (at most 5 s, every ms): then the write lock goes, and the fold ends. */
static void *watch_for_the_lend(void *arg)
{
	struct lender_watch *w = arg;

	for (int i = 0; i < 5000 && !w->lent; i++) {
		w->lent = policy_of(w->tids[0]) == SCHED_OTHER || policy_of(w->tids[1]) == SCHED_OTHER;
		if (!w->lent)
			nanosleep(&(struct timespec){ .tv_nsec = 1000 * 1000 }, NULL);
	}
	sqlite3_exec(w->lock, "ROLLBACK", NULL, NULL, NULL);
	return NULL;
}

Test(budget_folder, a_writer_waiting_on_the_idle_fold_lends_it_the_normal_policy, .timeout = 60)
{
	struct budget_opts o;
	struct lender_watch w = { .lent = false };
	pid_t before[64], after[64];
	int nb, na, found = 0, reserved = 0;
	struct budget *b;
	pthread_t watcher;

	folding(&o);
	nb = thread_ids(before, 64);
	b = bt_open(&o);
	na = thread_ids(after, 64);
	for (int i = 0; i < na; i++)
		if (!listed(before, nb, after[i]) && found < 2)
			w.tids[found++] = after[i];
	cr_assert_eq(found, 2, "budget/ started %d threads, not its fold and checkpoint threads", found);
	cr_expect_eq(policy_of(w.tids[0]), SCHED_IDLE, "a budget/ thread is not at SCHED_IDLE");
	cr_expect_eq(policy_of(w.tids[1]), SCHED_IDLE, "a budget/ thread is not at SCHED_IDLE");
	cr_expect_eq(policy_of(0), SCHED_OTHER, "control: the caller's own thread keeps its policy");

	/* the first journal handed to the fold, which the held write lock keeps from ending */
	cr_assert_eq(sqlite3_open_v2(bt_ledger, &w.lock, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(w.lock, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	for (; reserved < 100; reserved++)
		reserve_one(b, reserved);
	cr_assert_eq(budget_fold(b, 100), 0);
	nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
	/* control: a fold under way that nobody waits for stays at SCHED_IDLE */
	cr_expect(policy_of(w.tids[0]) == SCHED_IDLE && policy_of(w.tids[1]) == SCHED_IDLE,
		  "a fold nobody waits for left SCHED_IDLE");

	/* the second journal filled: the next reservation waits for the fold, and lends it the normal policy */
	cr_assert_eq(pthread_create(&watcher, NULL, watch_for_the_lend, &w), 0);
	for (int i = 0; i < 20000 && !w.lent; i++, reserved++)
		reserve_one(b, reserved);
	pthread_join(watcher, NULL);
	sqlite3_close(w.lock);
	cr_expect(w.lent, "a reservation waited on the fold (%d reserved) and the fold stayed at SCHED_IDLE", reserved);
	cr_expect(policy_of(w.tids[0]) == SCHED_IDLE && policy_of(w.tids[1]) == SCHED_IDLE,
		  "the fold was not put back at SCHED_IDLE after the wait");
	cr_expect_eq(rows_reaching(b, reserved), reserved, "the reservations did not all reach the ledger");
	budget_close(b);
}

/* A fold thread needs the journal, a sole writer and the checkpoint thread: else the open is refused, by line. */
Test(budget_folder, a_fold_thread_without_its_journal_is_refused)
{
	struct budget_opts o;
	char err[LATCH_ERR_MAX] = "";

	folding(&o);
	o.journal = false;
	cr_expect_null(budget_open(&o, err, sizeof(err)));
	cr_expect(strstr(err, "fold thread"), "%s", err);
	folding(&o);
	budget_close(bt_open(&o)); /* control */
}
