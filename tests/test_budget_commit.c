// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_commit.c - latchd's way of writing the ledger: the sole
 * writer, its decisions in memory, and one commit for the reservations of
 * one turn of its event loop.
 *
 * Invariants: while a sole writer has the ledger, no other process may write
 * it (its decisions read nothing back, so another writer's rows would go
 * unseen), but readers may; a reservation counts against the caps the moment
 * it is decided, before its row is written, so the reservations of one turn
 * can't pass a cap together; no row exists before budget_commit() (the
 * caller forwards only after it), and the rows it writes are in id and time
 * order, reservations before the settlements that refer to them; a failed
 * commit leaves nothing counted and nothing to settle; a sole writer killed
 * with requests in flight loses nothing at the next open.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "budget_test.h"
#include "config/config.h"

TestSuite(budget_commit, .init = bt_setup, .fini = bt_teardown);

static const char body[] = "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1000,\"messages\":[]}";
static const char resp[] = "{\"type\":\"message\",\"usage\":{\"input_tokens\":100,\"output_tokens\":100}}";

static struct budget *open_sole(struct budget_opts *o, int64_t rph)
{
	bt_opts(o);
	o->sole_writer = true;
	o->sandbox[BUDGET_ANTHROPIC].requests_per_hour = rph;
	return bt_open(o);
}

static int later(struct budget *b, struct budget_ticket **t, char *line, size_t len)
{
	struct budget_request rq = bt_request("s1", BUDGET_ANTHROPIC, "/v1/messages", body);
	struct budget_note note;

	return budget_reserve_later(b, &rq, t, &note, line, len);
}

static void complete(struct budget *b, struct budget_ticket *t, struct budget_note *note)
{
	budget_response(t, 200, NULL, 0);
	budget_response(t, 200, resp, strlen(resp));
	cr_assert_eq(budget_settle(b, t, BUDGET_END_COMPLETE, note), 0);
}

static int64_t rows(const char *kind)
{
	char q[128];

	snprintf(q, sizeof(q), "SELECT count(*) FROM ledger WHERE kind = '%s'", kind);
	return bt_sql(q);
}

static int requests_hour(const struct budget_usage *u, void *arg)
{
	if (*u->sandbox)
		*(int64_t *)arg = u->requests_hour.used;
	return 0;
}

/* One sole writer at a time, and no ordinary writer beside it; readers are welcome. */
Test(budget_commit, the_sole_writer_keeps_every_other_writer_out)
{
	struct budget_opts o, plain, ro;
	struct budget *b = open_sole(&o, BUDGET_NO_CAP), *other;
	char err[LATCH_ERR_MAX] = "";

	other = budget_open(&o, err, sizeof(err));
	cr_expect_null(other, "a second sole writer opened the ledger");
	cr_expect_eq(errno, EBUSY);
	cr_expect(strstr(err, "being written by another process") != NULL, "%s", err);
	plain = o;
	plain.sole_writer = false;
	other = budget_open(&plain, err, sizeof(err));
	cr_expect_null(other, "an ordinary writer opened a ledger a sole writer holds");
	ro = plain;
	ro.readonly = true;
	other = budget_open(&ro, err, sizeof(err));
	cr_expect_not_null(other, "control: a reader opens it beside the writer: %s", err);
	budget_close(other);
	budget_close(b);
	/* control: once it is gone, others write again, and ordinary writers share */
	b = budget_open(&plain, err, sizeof(err));
	cr_assert_not_null(b, "%s", err);
	other = budget_open(&plain, err, sizeof(err));
	cr_expect_not_null(other, "two ordinary writers: %s", err);
	budget_close(other);
	other = budget_open(&o, err, sizeof(err));
	cr_expect_null(other, "a sole writer opened a ledger an ordinary writer holds");
	budget_close(b);
}

/* The reservations of one turn: counted at once, written together, in order, before anything else. */
Test(budget_commit, a_turn_is_counted_at_once_and_written_by_one_commit)
{
	struct budget_ticket *t[4] = { 0 };
	struct budget_note note;
	struct budget_opts o;
	struct budget *b = open_sole(&o, 3);
	char line[512];
	int64_t used = -1;

	for (int i = 0; i < 3; i++)
		cr_assert_eq(later(b, &t[i], line, sizeof(line)), 0, "%s", line);
	cr_expect_eq(later(b, &t[3], line, sizeof(line)), -EDQUOT, "three decided, not written, and a fourth fit");
	cr_expect(strstr(line, "requests_per_hour cap for anthropic in sandbox s1 is 3") != NULL, "%s", line);
	cr_expect_eq(rows("reserve"), 0, "a row before the commit");
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0, "%s", line);
	cr_expect_eq(rows("reserve"), 3);
	cr_expect_eq(bt_sql("SELECT max(id) FROM ledger"), 3);
	cr_expect_eq(
		bt_sql("SELECT count(*) FROM ledger a JOIN ledger b ON b.id = a.id + 1 WHERE b.time_ns < a.time_ns"), 0,
		"times go backwards");
	for (int i = 0; i < 3; i++)
		complete(b, t[i], &note);
	cr_expect_eq(rows("settle"), 0, "a settlement waits for the next commit or tick");
	cr_assert_eq(budget_tick(b), 0);
	cr_expect_eq(rows("settle"), 3);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger s JOIN ledger r ON r.id = s.request "
			    "WHERE s.kind = 'settle' AND r.kind = 'reserve' AND s.id > r.id AND s.how = 'usage'"),
		     3);
	cr_expect_eq(budget_commit(b, &note, line, sizeof(line)), 0, "nothing to write is not an error");
	budget_report(b, "s1", requests_hour, &used);
	cr_expect_eq(used, 3);
	budget_close(b);
}

/* A request whose exchange ends before its commit: its row and its settlement come in order, charged in full. */
Test(budget_commit, an_exchange_gone_before_its_commit_is_settled_after_its_row)
{
	struct budget_ticket *t = NULL;
	struct budget_note note;
	struct budget_opts o;
	struct budget *b = open_sole(&o, BUDGET_NO_CAP);
	char line[512];

	cr_assert_eq(later(b, &t, line, sizeof(line)), 0);
	cr_assert_eq(budget_settle(b, t, BUDGET_END_GUEST_CUT, &note), 0);
	cr_expect_str_eq(note.decision, "", "charged its reservation: nothing to note");
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0);
	cr_expect_eq(bt_sql("SELECT id FROM ledger WHERE kind = 'reserve'"), 1);
	cr_expect_eq(bt_sql("SELECT id FROM ledger WHERE kind = 'settle' AND request = 1 AND how = 'cut_guest'"), 2);
	cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE id = 2"),
		     bt_sql("SELECT micros FROM ledger WHERE id = 1"));
	budget_close(b);
}

static void rename_table(const char *from, const char *to)
{
	char q[128];
	sqlite3 *db;

	snprintf(q, sizeof(q), "ALTER TABLE %s RENAME TO %s", from, to);
	cr_assert_eq(sqlite3_open(bt_ledger, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, q, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
}

/* A commit that fails undoes its turn: nothing counted, nothing settled later, the next turn fits. */
Test(budget_commit, a_failed_commit_undoes_its_reservations)
{
	struct budget_ticket *t[3] = { 0 }, *gone = NULL;
	struct budget_note note;
	struct budget_opts o;
	struct budget *b = open_sole(&o, 2);
	char line[512];
	int64_t used = -1;

	/* a written request before, whose settlement rides on the failing commit */
	cr_assert_eq(later(b, &t[0], line, sizeof(line)), 0);
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0);
	complete(b, t[0], &note);
	/* one that is settled before the commit, and one that waits for it */
	cr_assert_eq(later(b, &gone, line, sizeof(line)), 0);
	cr_assert_eq(budget_settle(b, gone, BUDGET_END_GUEST_CUT, &note), 0);
	cr_expect_eq(later(b, &t[1], line, sizeof(line)), -EDQUOT, "control: the cap of 2 is full");
	/* the ledger can't take rows now: its table is gone (a disk error would do the same) */
	rename_table("ledger", "ledger_away");
	cr_expect_lt(budget_commit(b, &note, line, sizeof(line)), 0);
	cr_expect(strncmp(line, "latch: the spend ledger ", 24) == 0, "%s", line);
	cr_expect_str_eq(note.reason, "budget.refused.ledger");
	rename_table("ledger_away", "ledger");
	budget_report(b, "s1", requests_hour, &used);
	cr_expect_eq(used, 1, "the failed turn is still counted");
	cr_assert_eq(later(b, &t[1], line, sizeof(line)), 0, "the room the failed turn held is free again: %s", line);
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0, "%s", line);
	complete(b, t[1], &note);
	cr_assert_eq(budget_tick(b), 0);
	cr_expect_eq(rows("reserve"), 2);
	cr_expect_eq(rows("settle"), 2, "the settlement of a request that was never written was kept");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger s WHERE kind = 'settle' AND NOT EXISTS "
			    "(SELECT 1 FROM ledger r WHERE r.id = s.request AND r.kind = 'reserve')"),
		     0);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE how = 'cut_guest'"), 0);
	budget_close(b);
}

/* A void ticket: its request was never forwarded, so settling it charges nothing and notes nothing. */
Test(budget_commit, a_void_ticket_is_freed_without_a_charge)
{
	struct budget_ticket *t = NULL;
	struct budget_note note;
	struct budget_opts o;
	struct budget *b = open_sole(&o, BUDGET_NO_CAP);
	char line[512];

	cr_assert_eq(later(b, &t, line, sizeof(line)), 0);
	rename_table("ledger", "ledger_away");
	cr_expect_lt(budget_commit(b, &note, line, sizeof(line)), 0);
	rename_table("ledger_away", "ledger");
	budget_response(t, 200, NULL, 0);
	cr_assert_eq(budget_settle(b, t, BUDGET_END_ERROR, &note), 0);
	cr_expect_str_eq(note.decision, "");
	cr_assert_eq(budget_tick(b), 0);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 0);
	budget_close(b);
}

/* A sole writer killed with a request in flight: the next open settles it in full, and the day never drops. */
Test(budget_commit, a_sole_writer_killed_in_flight_loses_nothing, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	int fds[2], st;
	pid_t kid;
	char c;

	bt_opts(&o);
	o.sole_writer = true;
	o.clock = NULL;
	cr_assert_eq(pipe(fds), 0);
	kid = fork();
	cr_assert_geq(kid, 0);
	if (!kid) {
		struct budget_ticket *t, *u;
		struct budget_note note;
		char err[256], line[512];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		b = budget_open(&o, err, sizeof(err));
		if (!b || later(b, &t, line, sizeof(line)) || budget_commit(b, &note, line, sizeof(line)) ||
		    later(b, &u, line, sizeof(line)))
			_exit(1);
		budget_response(t, 200, NULL, 0);
		if (write(fds[1], "r", 1) != 1) /* one in flight, one decided but never written */
			_exit(1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(fds[0], &c, 1), 1);
	cr_expect_null(budget_open(&o, NULL, 0), "control: the live sole writer keeps a second one out");
	kill(kid, SIGKILL);
	cr_assert_eq(waitpid(kid, &st, 0), kid);
	b = bt_open(&o);
	budget_close(b);
	cr_expect_eq(rows("reserve"), 1, "a reservation that was never committed (never forwarded) appeared");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle' AND how = 'lost'"), 1);
	cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE kind = 'settle'"),
		     bt_sql("SELECT micros FROM ledger WHERE kind = 'reserve'"));
}

/* latch.conf's caps reach budget/ through its one reader, in budget/'s provider order. */
Test(budget_commit, latch_conf_caps_map_to_the_budget)
{
	char conf[160];
	struct latch_conf c;
	struct budget_opts o = { 0 };
	char err[LATCH_ERR_MAX];
	FILE *f;

	snprintf(conf, sizeof(conf), "%s/latch.conf", bt_dir);
	f = fopen(conf, "w");
	cr_assert_not_null(f);
	fputs("budget_dollars_per_day = 2.50, anthropic:10\nbudget_requests_per_hour = none\n"
	      "budget_host_requests_per_day = 100, other:7\n",
	      f);
	fclose(f);
	cr_assert_eq(latch_conf_parse_file(conf, &c, err, sizeof(err)), 0, "%s", err);
	budget_caps_from_conf(&o, &c);
	cr_expect_eq(o.sandbox[BUDGET_OPENAI].micros_per_day, 2500000);
	cr_expect_eq(o.sandbox[BUDGET_ANTHROPIC].micros_per_day, 10 * BUDGET_MICROS);
	cr_expect_eq(o.sandbox[BUDGET_GEMINI].requests_per_hour, BUDGET_NO_CAP);
	cr_expect_eq(o.sandbox[BUDGET_GEMINI].requests_per_day, 2000);
	cr_expect_eq(o.sandbox[BUDGET_OTHER].micros_per_day, BUDGET_NO_CAP);
	cr_expect_eq(o.host[BUDGET_OTHER].requests_per_day, 7);
	cr_expect_eq(o.host[BUDGET_GEMINI].requests_per_day, 100);
}

static bool no(void *arg)
{
	(*(int *)arg)++;
	return false;
}

static bool yes(void *arg)
{
	(*(int *)arg)++;
	return true;
}

/* A settlement note is written only when its reader wants it, and asked for only when there is one. */
Test(budget_commit, a_note_nobody_wants_is_not_written)
{
	struct budget_ticket *t = NULL;
	int asked = 0;
	struct budget_note note = { .want = no, .want_arg = &asked };
	struct budget_opts o;
	struct budget *b = open_sole(&o, BUDGET_NO_CAP);
	char line[512];

	cr_assert_eq(later(b, &t, line, sizeof(line)), 0);
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0);
	note = (struct budget_note){ .want = no, .want_arg = &asked };
	complete(b, t, &note);
	cr_expect_eq(asked, 1);
	cr_expect_str_eq(note.decision, "", "a note nobody wanted was written");
	cr_expect(note.want == no, "the caller's want was not kept");
	cr_assert_eq(later(b, &t, line, sizeof(line)), 0);
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0);
	note = (struct budget_note){ .want = yes, .want_arg = &asked };
	complete(b, t, &note);
	cr_expect_eq(asked, 2);
	cr_expect_str_eq(note.reason, "budget.settled.usage");
	/* charged its reservation: nothing to note, nobody asked */
	cr_assert_eq(later(b, &t, line, sizeof(line)), 0);
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0);
	note = (struct budget_note){ .want = yes, .want_arg = &asked };
	cr_assert_eq(budget_settle(b, t, BUDGET_END_UPSTREAM_CUT, &note), 0);
	cr_expect_eq(asked, 2);
	cr_expect_str_eq(note.decision, "");
	budget_close(b);
}

/* Many rows in one commit (more than a statement takes): all of them, in order. */
Test(budget_commit, a_large_turn_is_written_whole)
{
	struct budget_ticket *t[45];
	struct budget_note note;
	struct budget_opts o;
	struct budget *b = open_sole(&o, BUDGET_NO_CAP);
	char line[512];

	for (int i = 0; i < 45; i++)
		cr_assert_eq(later(b, &t[i], line, sizeof(line)), 0);
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0);
	for (int i = 0; i < 45; i++)
		complete(b, t[i], &note);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(later(b, &t[i], line, sizeof(line)), 0);
	cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0, "45 settlements and 3 reservations");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 93);
	cr_expect_eq(bt_sql("SELECT max(id) - min(id) + 1 FROM ledger"), 93);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle' AND how = 'usage'"), 45);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger s JOIN ledger r ON r.id = s.request WHERE s.kind = 'settle' "
			    "AND s.id > r.id AND r.owner IS NOT NULL AND s.owner IS NULL"),
		     45);
	for (int i = 0; i < 3; i++)
		budget_settle(b, t[i], BUDGET_END_GUEST_CUT, &note);
	budget_close(b);
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : (long)st.st_size;
}

/* latchd's checkpoints run on a thread of their own: the WAL reaches the database without the writer's help. */
Test(budget_commit, the_checkpoint_thread_copies_the_wal, .timeout = 60)
{
	struct budget_ticket *t;
	struct budget_note note;
	struct budget_opts o;
	struct budget *b;
	char line[512], wal[160];
	long db0;

	bt_opts(&o);
	o.sole_writer = true;
	for (int pass = 0; pass < 2; pass++) {
		o.checkpoint_thread = pass == 1;
		b = bt_open(&o);
		db0 = file_size(bt_ledger);
		for (int i = 0; i < 1500; i++) {
			cr_assert_eq(later(b, &t, line, sizeof(line)), 0);
			cr_assert_eq(budget_commit(b, &note, line, sizeof(line)), 0);
			complete(b, t, &note);
		}
		if (pass == 0) {
			/* control: nobody has checkpointed, so the rows are still only in the WAL */
			cr_expect_eq(file_size(bt_ledger), db0, "the writer checkpointed on its own");
			budget_close(b);
			continue;
		}
		cr_assert_eq(budget_tick(b), 0);
		for (int i = 0; i < 500 && file_size(bt_ledger) <= db0; i++)
			usleep(10000);
		cr_expect_gt(file_size(bt_ledger), db0, "the checkpoint thread never copied the WAL");
		snprintf(wal, sizeof(wal), "%s-wal", bt_ledger);
		cr_expect_lt(file_size(wal), 32L << 20, "the WAL grew to %ld bytes", file_size(wal));
		budget_close(b);
	}
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle' AND how = 'usage'"), 3000);
}
