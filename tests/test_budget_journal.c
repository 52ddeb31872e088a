// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_journal.c - latchd's reservations in the ledger's journal
 * (budget_opts.journal): appended before budget_reserve() returns, folded
 * into sqlite by the tick.
 *
 * Invariant 39 through the journal: a sole writer killed (SIGKILL) after
 * its appends and before any fold hands out nothing at the next open (the
 * journal's reservations are folded, their open ones charged in full); a
 * record cut by the kill is ignored only as the journal's last one; a
 * journal someone else can write, or a symlink, is refused with one line
 * naming it; a journal a crash left is folded exactly once however many
 * times the ledger is opened after.  Each attack has its control beside it.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <zlib.h>

#include "budget_test.h"

TestSuite(budget_journal, .init = bt_setup, .fini = bt_teardown);

static const char body[] = "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1000,\"messages\":[]}";
static const char resp[] = "{\"type\":\"message\",\"usage\":{\"input_tokens\":100,\"output_tokens\":100}}";

#define REC_SIZE 256
#define HEAD_SIZE 4096

static char *journal_file(void)
{
	static char path[160];

	snprintf(path, sizeof(path), "%s.journal", bt_ledger);
	return path;
}

static void journaled(struct budget_opts *o, int64_t rph)
{
	bt_opts(o);
	o->sole_writer = true;
	o->journal = true;
	o->sandbox[BUDGET_ANTHROPIC].requests_per_hour = rph;
}

static int reserve(struct budget *b, struct budget_ticket **t, char *line, size_t len)
{
	struct budget_request rq = bt_request("s1", BUDGET_ANTHROPIC, "/v1/messages", body);
	struct budget_note note;

	return budget_reserve(b, &rq, t, &note, line, len);
}

static int64_t rows(const char *kind)
{
	char q[160];

	snprintf(q, sizeof(q), "SELECT count(*) FROM ledger WHERE kind = '%s'", kind);
	return bt_sql(q);
}

/*
 * A latchd in a child: n reservations, the first settled with its usage,
 * then SIGKILL before any fold (no tick, no close).  The ledger's sqlite
 * holds nothing of them when it dies: only the journal does.
 */
static void run_and_kill(int n)
{
	struct budget_opts o;
	int fds[2], st;
	pid_t kid;
	char c;

	journaled(&o, BUDGET_NO_CAP);
	cr_assert_eq(pipe(fds), 0);
	kid = fork();
	cr_assert_geq(kid, 0);
	if (!kid) {
		struct budget_ticket *t;
		struct budget_note note = { 0 };
		char err[256], line[512];
		struct budget *b;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		b = budget_open(&o, err, sizeof(err));
		if (!b)
			_exit(1);
		for (int i = 0; i < n; i++) {
			if (reserve(b, &t, line, sizeof(line)))
				_exit(2);
			if (i == 0) {
				budget_response(t, 200, NULL, 0);
				budget_response(t, 200, resp, strlen(resp));
				budget_settle(b, t, BUDGET_END_COMPLETE, &note);
			}
		}
		if (write(fds[1], "r", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(fds[0], &c, 1), 1, "the child could not reserve");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 0, "rows reached sqlite before any fold");
	kill(kid, SIGKILL);
	cr_assert_eq(waitpid(kid, &st, 0), kid);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	close(fds[0]);
	close(fds[1]);
}

/* Overwrite one byte of journal record slot with its complement. */
static void damage(int slot)
{
	FILE *f = fopen(journal_file(), "r+b");
	int ch;

	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, HEAD_SIZE + (long)slot * REC_SIZE + 100, SEEK_SET), 0);
	ch = fgetc(f);
	cr_assert_eq(fseek(f, HEAD_SIZE + (long)slot * REC_SIZE + 100, SEEK_SET), 0);
	fputc(~ch & 0xff, f);
	fclose(f);
}

Test(budget_journal, a_kill_after_appends_and_before_any_fold_hands_out_nothing, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	struct budget_ticket *t;
	char line[512];

	run_and_kill(5);
	journaled(&o, 5);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 5, "a restart forgot reservations the journal held");
	cr_expect_eq(reserve(b, &t, line, sizeof(line)), -EDQUOT, "a cap of 5 admitted a sixth after the kill");
	budget_close(b);
	cr_expect_eq(rows("reserve"), 5);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE how = 'usage'"), 1, "the journaled settlement");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE how = 'lost'"), 4, "open ones are charged in full");
	cr_expect_eq(bt_sql("SELECT sum(micros) FROM ledger WHERE how = 'lost'"),
		     bt_sql("SELECT sum(micros) FROM ledger WHERE kind = 'reserve' AND id NOT IN "
			    "(SELECT request FROM ledger WHERE how = 'usage')"));
}

/* control: without its journal the same crash leaves nothing, so the journal is what carried the spend */
Test(budget_journal, control_the_same_kill_without_its_journal_leaves_nothing, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	char away[200];

	run_and_kill(5);
	snprintf(away, sizeof(away), "%s.away", journal_file());
	cr_assert_eq(rename(journal_file(), away), 0);
	journaled(&o, 5);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 0);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 0);
}

/* A record cut by the kill is the last one: ignored (it was never forwarded); the rest count. */
Test(budget_journal, a_torn_last_record_is_ignored, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;

	run_and_kill(5); /* slots 0-5: five reservations and one settlement (slot 1) */
	damage(5);
	journaled(&o, BUDGET_NO_CAP);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 4);
	budget_close(b);
	cr_expect_eq(rows("reserve"), 4);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE how = 'lost'"), 3);
}

/*
 * The journal as the previous release wrote it: magic "latchj1", each record
 * summed with CRC-32 (zlib) over its bytes after the sum.  The records are
 * the ones run_and_kill() left, summed again the old way.
 */
static void rewrite_as_v1(int n)
{
	FILE *f = fopen(journal_file(), "r+b");
	unsigned char rec[REC_SIZE];

	cr_assert_not_null(f);
	cr_assert_eq(fwrite("latchj1", 1, 8, f), 8);
	for (int i = 0; i < n; i++) {
		uint32_t sum;

		cr_assert_eq(fseek(f, HEAD_SIZE + (long)i * REC_SIZE, SEEK_SET), 0);
		cr_assert_eq(fread(rec, 1, REC_SIZE, f), REC_SIZE);
		sum = (uint32_t)crc32(0, rec + 4, REC_SIZE - 4);
		memcpy(rec, &sum, 4);
		cr_assert_eq(fseek(f, HEAD_SIZE + (long)i * REC_SIZE, SEEK_SET), 0);
		cr_assert_eq(fwrite(rec, 1, REC_SIZE, f), REC_SIZE);
	}
	fclose(f);
}

static void journal_magic(char magic[8])
{
	FILE *f = fopen(journal_file(), "rb");

	cr_assert_not_null(f);
	cr_assert_eq(fread(magic, 1, 8, f), 8);
	fclose(f);
}

/*
 * An upgrade: a journal the previous release left (CRC-32 sums) is folded
 * whole by the new one, once, and written with the new sums from then on;
 * control: the same records read with the new sum alone are not records.
 */
Test(budget_journal, a_journal_of_the_previous_release_is_folded_then_upgraded, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	struct budget_ticket *t;
	char line[512], magic[8];

	run_and_kill(5); /* slots 0-5 */
	rewrite_as_v1(6);
	journaled(&o, BUDGET_NO_CAP);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 5, "the old journal's reservations were not read");
	journal_magic(magic);
	cr_expect_str_eq(magic, "latchj2", "the emptied journal kept the old format");
	cr_expect_eq(reserve(b, &t, line, sizeof(line)), 0);
	budget_close(b);
	cr_expect_eq(rows("reserve"), 6, "folded once, plus the new reservation");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE how = 'usage'"), 1);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 6, "a reopen counted the journal again or lost the new row");
	budget_close(b);
}

Test(budget_journal, control_old_sums_under_the_new_magic_are_not_records, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	FILE *f;

	run_and_kill(5);
	rewrite_as_v1(6);
	f = fopen(journal_file(), "r+b");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite("latchj2", 1, 8, f), 8);
	fclose(f);
	journaled(&o, BUDGET_NO_CAP);
	b = bt_open(&o);
	cr_expect_eq(bt_requests_hour(b), 0, "records with CRC-32 sums passed the new check");
	budget_close(b);
}

/* A damaged record with whole ones after it is not a cut write: the journal is refused, by name. */
Test(budget_journal, a_damaged_record_before_whole_ones_is_refused, .timeout = 60)
{
	struct budget_opts o;
	char err[LATCH_ERR_MAX] = "";

	run_and_kill(5);
	damage(2);
	journaled(&o, BUDGET_NO_CAP);
	cr_expect_null(budget_open(&o, err, sizeof(err)), "a journal damaged in the middle was used");
	cr_expect(strstr(err, journal_file()) && strstr(err, "record 2 is damaged"), "%s", err);
	cr_expect_null(strchr(err, '\n'), "one line: %s", err);
	/* a reader of latch usage, too, and an ordinary writer */
	o.journal = false;
	o.sole_writer = false;
	cr_expect_null(budget_open(&o, err, sizeof(err)), "an ordinary writer folded a damaged journal");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 0, "the refusal wrote rows");
}

Test(budget_journal, a_journal_others_can_write_or_a_symlink_is_refused)
{
	struct budget_opts o;
	struct budget *b;
	char err[LATCH_ERR_MAX] = "", away[200];

	journaled(&o, BUDGET_NO_CAP);
	budget_close(bt_open(&o)); /* made 0600 */
	cr_assert_eq(chmod(journal_file(), 0644), 0);
	cr_expect_null(budget_open(&o, err, sizeof(err)), "a world-readable journal was used");
	cr_expect(strstr(err, journal_file()) && strstr(err, "chmod 600"), "%s", err);
	cr_expect_null(strchr(err, '\n'), "one line: %s", err);
	cr_assert_eq(chmod(journal_file(), 0600), 0);
	snprintf(away, sizeof(away), "%s.real", journal_file());
	cr_assert_eq(rename(journal_file(), away), 0);
	cr_assert_eq(symlink(away, journal_file()), 0);
	err[0] = '\0';
	cr_expect_null(budget_open(&o, err, sizeof(err)), "a symlinked journal was followed");
	cr_expect(strstr(err, journal_file()) && strstr(err, "not a regular file"), "%s", err);
	/* control: the same file, 0600 and in its place, opens */
	cr_assert_eq(unlink(journal_file()), 0);
	cr_assert_eq(rename(away, journal_file()), 0);
	b = budget_open(&o, err, sizeof(err));
	cr_expect_not_null(b, "control: %s", err);
	budget_close(b);
}

/* A journal a crash left is folded once: opened again and again (latchd, a tool, latchd), charged once. */
Test(budget_journal, a_journal_a_crash_left_is_folded_exactly_once, .timeout = 60)
{
	struct budget_opts o, plain;
	struct budget *b;

	run_and_kill(5);
	journaled(&o, BUDGET_NO_CAP);
	plain = o;
	plain.journal = false;
	plain.sole_writer = false;
	for (int i = 0; i < 3; i++) {
		b = bt_open(i == 1 ? &plain : &o);
		cr_expect_eq(bt_requests_hour(b), 5, "open %d", i);
		budget_close(b);
		cr_expect_eq(rows("reserve"), 5, "open %d", i);
		cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE how = 'lost'"), 4, "open %d", i);
		cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle'"), 5, "open %d", i);
	}
}

/* The steady state: nothing in sqlite until the tick folds it; a reader sees the journal meanwhile. */
Test(budget_journal, the_tick_folds_and_a_reader_sees_the_journal_before)
{
	struct budget_opts o, ro;
	struct budget *b, *r;
	struct budget_ticket *t;
	struct budget_note note = { 0 };
	char line[512];

	journaled(&o, BUDGET_NO_CAP);
	b = bt_open(&o);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(reserve(b, &t, line, sizeof(line)), 0, "%s", line);
		cr_assert_eq(budget_settle(b, t, BUDGET_END_GUEST_CUT, &note), 0);
	}
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 0);
	cr_assert_eq(budget_fold(b, 7), 0);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 0, "folded below its minimum");
	ro = o;
	ro.readonly = true;
	ro.sole_writer = ro.journal = false;
	r = bt_open(&ro);
	cr_expect_eq(bt_requests_hour(r), 3, "latch usage did not see the journal");
	budget_close(r);
	cr_assert_eq(budget_tick(b), 0);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 6);
	cr_expect_eq(bt_sql("SELECT max(id) - min(id) + 1 FROM ledger"), 6, "ids in order, no gap");
	cr_assert_eq(reserve(b, &t, line, sizeof(line)), 0, "%s", line);
	cr_assert_eq(budget_fold(b, 1), 0);
	cr_expect_eq(bt_sql("SELECT max(id) FROM ledger WHERE kind = 'reserve'"), 7,
		     "the journal went on after a fold");
	cr_assert_eq(budget_settle(b, t, BUDGET_END_GUEST_CUT, &note), 0);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), 8, "close folds what is left");
}

/* A journal cut before its header was written (a kill at latchd's first start) is new, not refused. */
Test(budget_journal, a_journal_cut_before_its_header_starts_afresh)
{
	struct budget_opts o;
	struct budget *b;
	char err[LATCH_ERR_MAX] = "";
	int fd;

	journaled(&o, BUDGET_NO_CAP);
	budget_close(bt_open(&o));
	fd = open(journal_file(), O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, HEAD_SIZE + 16384 * REC_SIZE), 0);
	close(fd);
	b = budget_open(&o, err, sizeof(err));
	cr_expect_not_null(b, "%s", err);
	budget_close(b);
	/* control: a header that is not latch's is refused */
	fd = open(journal_file(), O_WRONLY);
	cr_assert_eq(write(fd, "not-latch", 9), 9);
	close(fd);
	cr_expect_null(budget_open(&o, err, sizeof(err)));
	cr_expect(strstr(err, "is not latch's"), "%s", err);
}
