// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_audit.c - the audit log's promises, on a log in a fresh temp dir.
 *
 * The log must: chain every entry to the one before so that an edit, a
 * deletion or a move made with raw sqlite is named at the right id; keep the
 * chain across a close and reopen (a latchd restart); stay in WAL mode; refuse
 * a file or directory that someone else could rewrite; and hold each
 * (sandbox, kind) to 120 entries in any minute, carrying the count of the
 * rest on the next entry written.  The clock is a variable here, so a window
 * passes without sleeping, and the owner is the test's own uid, so no root.
 *
 * The anchors: the file anchor beside the log names a cut tail and a suffix
 * rewritten before it, and a cut log can't pull it back down.  The journal
 * is the host's, not a unit test's: these logs are opened with no_journal,
 * and selftests/live_audit.sh holds the journal anchors against a journald
 * of its own.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"

static char dir[64], path[128];
static uint64_t fake_now;

static uint64_t fake_clock(void *arg)
{
	return fake_now;
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/latch-audit-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.db", dir);
	fake_now = 1764500000ULL * 1000000000ULL;
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		cr_log_warn("could not remove %s", dir);
}

static struct audit_log *open_log(void)
{
	struct audit_opts o = { .clock = fake_clock, .owner = getuid(), .no_journal = 1 };
	char err[256] = "";
	struct audit_log *log = audit_open(path, &o, err, sizeof(err));

	cr_assert_not_null(log, "audit_open: %s", err);
	return log;
}

static int64_t add(struct audit_log *log, const char *sb, const char *kind, const char *fields)
{
	struct audit_entry e = {
		.sandbox = sb,
		.kind = kind,
		.decision = "allow",
		.reason = "test.add",
		.fields = fields,
	};
	int rc = audit_append(log, &e);

	cr_assert_eq(rc, 0, "append %s/%s: %d %s", sb, kind, rc, audit_error(log));
	fake_now += 1000;
	return e.id;
}

static void raw_exec(const char *sql)
{
	sqlite3 *db;
	char *msg = NULL;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, &msg), SQLITE_OK, "%s: %s", sql, msg ? msg : "");
	sqlite3_close(db);
}

struct collect {
	int n;
	int64_t ids[512];
	char fields[512][256];
};

static int collect_one(const struct audit_entry *e, void *arg)
{
	struct collect *c = arg;

	if (c->n < 512) {
		c->ids[c->n] = e->id;
		snprintf(c->fields[c->n], sizeof(c->fields[0]), "%s", e->fields);
	}
	c->n++;
	return 0;
}

static int64_t verify_bad(struct audit_log *log, char *why, size_t len)
{
	struct audit_verify_result r;
	int rc = audit_verify(log, &r);

	if (why)
		snprintf(why, len, "%s", r.why);
	cr_assert(rc == 0 || rc == -EBADMSG, "verify failed to read: %d %s", rc, audit_error(log));
	return rc ? r.first_bad_id : 0;
}

TestSuite(audit, .init = setup, .fini = teardown);

Test(audit, test_append_then_query_filters_by_sandbox_kind_and_since)
{
	struct audit_log *log = open_log();
	struct audit_filter f = { 0 };
	struct collect *c = calloc(1, sizeof(*c));
	uint64_t mid;

	cr_assert_eq(add(log, "alpha", "egress", "{\"entry\":\"10.0.0.1:443\"}"), 1);
	cr_assert_eq(add(log, "beta", "egress", NULL), 2);
	mid = fake_now;
	cr_assert_eq(add(log, "alpha", "attach", "{\"device\":\"veth0\"}"), 3);
	cr_assert_eq(add(log, "alpha", "egress", "{\"b\":1,\"a\":2}"), 4);

	cr_assert_eq(audit_query(log, &f, collect_one, c), 4);
	cr_assert_str_eq(c->fields[1], "{}");
	/* stored canonical: compact, keys sorted */
	cr_assert_str_eq(c->fields[3], "{\"a\":2,\"b\":1}");

	memset(c, 0, sizeof(*c));
	f.sandbox = "alpha";
	cr_assert_eq(audit_query(log, &f, collect_one, c), 3);
	memset(c, 0, sizeof(*c));
	f.kind = "egress";
	cr_assert_eq(audit_query(log, &f, collect_one, c), 2);
	cr_assert_eq(c->ids[0], 1);
	cr_assert_eq(c->ids[1], 4);
	memset(c, 0, sizeof(*c));
	f.since_ns = mid;
	cr_assert_eq(audit_query(log, &f, collect_one, c), 1);
	cr_assert_eq(c->ids[0], 4);
	free(c);
	audit_close(log);
}

Test(audit, test_append_refuses_free_text_tokens_and_non_object_fields)
{
	struct audit_log *log = open_log();
	struct audit_entry e = { .sandbox = "a", .kind = "egress", .decision = "allow", .reason = "has space" };

	cr_assert_eq(audit_append(log, &e), -EINVAL);
	e.reason = "ok";
	e.fields = "[1,2]";
	cr_assert_eq(audit_append(log, &e), -EINVAL);
	e.fields = "{\"a\":1,\"a\":2}";
	cr_assert_eq(audit_append(log, &e), -EINVAL);
	cr_assert_eq(verify_bad(log, NULL, 0), 0);
	cr_assert_eq(audit_query(log, NULL, NULL, NULL), 0, "a refused entry must not be written");
	audit_close(log);
}

Test(audit, test_chain_verifies_and_hash_covers_prev)
{
	struct audit_log *log = open_log();
	struct audit_verify_result r;

	for (int i = 0; i < 10; i++)
		add(log, "alpha", i % 2 ? "egress" : "attach", "{\"i\":1}");
	cr_assert_eq(audit_verify(log, &r), 0, "%s", r.why);
	cr_assert_eq(r.checked, 10);
	cr_assert_eq(r.first_bad_id, 0);
	audit_close(log);
}

Test(audit, test_verify_names_the_row_edited_by_raw_sqlite)
{
	struct audit_log *log = open_log();
	char why[160];

	for (int i = 0; i < 6; i++)
		add(log, "alpha", "egress", "{\"entry\":\"10.0.0.1:443\"}");
	raw_exec("UPDATE entries SET fields = '{\"entry\":\"0.0.0.0/0\"}' WHERE id = 4");
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 4, "%s", why);
	cr_assert(strstr(why, "edited"), "why: %s", why);
	audit_close(log);
}

Test(audit, test_verify_catches_an_edit_whose_hash_was_recomputed_at_the_next_row)
{
	struct audit_log *log = open_log();
	struct audit_entry e = {
		.id = 3, .sandbox = "alpha", .kind = "egress", .decision = "deny", .reason = "test.add", .fields = "{}"
	};
	struct collect *c = calloc(1, sizeof(*c));
	char h[AUDIT_HASH_HEX + 1], sql[512], prev[AUDIT_HASH_HEX + 1];
	sqlite3 *db;
	sqlite3_stmt *st;

	for (int i = 0; i < 5; i++)
		add(log, "alpha", "egress", NULL);
	/* a forger who knows the scheme rewrites row 3 and its own hash... */
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT prev_hash, time_ns FROM entries WHERE id = 3", -1, &st, NULL),
		     SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	snprintf(prev, sizeof(prev), "%s", sqlite3_column_text(st, 0));
	e.time_ns = sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	sqlite3_close(db);
	audit_entry_hash(&e, prev, h);
	snprintf(sql, sizeof(sql), "UPDATE entries SET decision = 'deny', hash = '%s' WHERE id = 3", h);
	raw_exec(sql);
	/* ...and the link from row 4 breaks instead */
	cr_assert_eq(verify_bad(log, NULL, 0), 4);
	free(c);
	audit_close(log);
}

Test(audit, test_verify_catches_a_delete_in_the_middle)
{
	struct audit_log *log = open_log();
	char why[160];

	for (int i = 0; i < 5; i++)
		add(log, "alpha", "egress", NULL);
	raw_exec("DELETE FROM entries WHERE id = 3");
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 4, "%s", why);
	cr_assert(strstr(why, "deleted"), "why: %s", why);
	audit_close(log);
}

Test(audit, test_verify_catches_a_delete_of_the_first_row)
{
	struct audit_log *log = open_log();

	for (int i = 0; i < 3; i++)
		add(log, "alpha", "egress", NULL);
	raw_exec("DELETE FROM entries WHERE id = 1");
	cr_assert_eq(verify_bad(log, NULL, 0), 2);
	audit_close(log);
}

Test(audit, test_verify_catches_two_rows_swapped)
{
	struct audit_log *log = open_log();

	add(log, "alpha", "egress", "{\"n\":1}");
	add(log, "alpha", "egress", "{\"n\":2}");
	add(log, "alpha", "egress", "{\"n\":3}");
	add(log, "alpha", "egress", "{\"n\":4}");
	/* move rows 2 and 3, columns and hashes, to each other's ids */
	raw_exec("UPDATE entries SET id = -2 WHERE id = 2;"
		 "UPDATE entries SET id = 2 WHERE id = 3;"
		 "UPDATE entries SET id = 3 WHERE id = -2;");
	cr_assert_eq(verify_bad(log, NULL, 0), 2);
	audit_close(log);
}

Test(audit, test_chain_survives_close_and_reopen)
{
	struct audit_log *log = open_log();
	struct audit_verify_result r;

	add(log, "alpha", "egress", NULL);
	add(log, "alpha", "egress", NULL);
	audit_close(log);
	log = open_log();
	cr_assert_eq(add(log, "alpha", "egress", NULL), 3);
	cr_assert_eq(audit_verify(log, &r), 0, "%s", r.why);
	cr_assert_eq(r.checked, 3);
	audit_close(log);
}

Test(audit, test_two_handles_appending_build_one_chain)
{
	struct audit_log *a = open_log(), *b = open_log();
	struct audit_verify_result r;

	for (int i = 0; i < 20; i++)
		add(i % 2 ? a : b, "alpha", "egress", NULL);
	cr_assert_eq(audit_verify(a, &r), 0, "%s", r.why);
	cr_assert_eq(r.checked, 20);
	audit_close(a);
	audit_close(b);
}

Test(audit, test_log_is_in_wal_mode)
{
	struct audit_log *log = open_log();
	sqlite3 *db;
	sqlite3_stmt *st;

	add(log, "alpha", "egress", NULL);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	sqlite3_close(db);
	audit_close(log);
}

Test(audit, test_121st_entry_in_a_minute_is_counted_and_rides_on_the_next)
{
	struct audit_log *log = open_log();
	struct audit_entry e = { .sandbox = "alpha", .kind = "dns", .decision = "deny", .reason = "dns.refused" };
	struct audit_filter f = { .sandbox = "alpha", .kind = "dns" };
	struct collect *c = calloc(1, sizeof(*c));
	uint64_t start = fake_now;
	json_t *o;

	for (int i = 0; i < 120; i++) {
		e.fields = NULL;
		cr_assert_eq(audit_append(log, &e), 0, "entry %d: %s", i + 1, audit_error(log));
		fake_now += 100000000ULL; /* 12 s for all 120 */
	}
	cr_assert_eq(audit_append(log, &e), -EAGAIN, "the 121st within a minute must be suppressed");
	cr_assert_eq(audit_append(log, &e), -EAGAIN);
	cr_assert_eq(audit_append(log, &e), -EAGAIN);
	/* the window slides: a minute after the first, one slot frees */
	fake_now = start + AUDIT_WINDOW_NS - 1;
	cr_assert_eq(audit_append(log, &e), -EAGAIN, "59.999... s after the first is still inside the window");
	fake_now = start + AUDIT_WINDOW_NS;
	e.fields = "{\"name\":\"exfil.example\"}";
	cr_assert_eq(audit_append(log, &e), 0, "%s", audit_error(log));
	cr_assert_eq(audit_query(log, &f, collect_one, c), 121);
	o = json_loads(c->fields[120], 0, NULL);
	cr_assert_not_null(o);
	cr_assert_eq(json_integer_value(json_object_get(o, "suppressed")), 4, "fields: %s", c->fields[120]);
	cr_assert_str_eq(json_string_value(json_object_get(o, "name")), "exfil.example");
	json_decref(o);
	/* the count went with that entry: the next one, 0.1 s on as a second slot frees, carries none */
	fake_now += 100000000ULL;
	e.fields = NULL;
	cr_assert_eq(audit_append(log, &e), 0);
	memset(c, 0, sizeof(*c));
	cr_assert_eq(audit_query(log, &f, collect_one, c), 122);
	cr_assert_str_eq(c->fields[121], "{}");
	cr_assert_eq(verify_bad(log, NULL, 0), 0);
	free(c);
	audit_close(log);
}

Test(audit, test_room_says_what_append_would_do_and_counts_the_skipped)
{
	struct audit_log *log = open_log();
	struct audit_entry e = { .sandbox = "alpha", .kind = "learned", .decision = "allow", .reason = "r" };
	struct audit_filter f = { .sandbox = "alpha", .kind = "learned" };
	struct collect *c = calloc(1, sizeof(*c));
	uint64_t start = fake_now;
	json_t *o;

	for (int i = 0; i < 120; i++) {
		cr_assert_eq(audit_room(log, "alpha", "learned"), 1, "entry %d has room", i + 1);
		cr_assert_eq(audit_append(log, &e), 0);
	}
	cr_assert_eq(audit_room(log, "alpha", "learned"), 0, "the 121st has no room");
	cr_assert_eq(audit_room(log, "alpha", "learned"), 0);
	cr_assert_eq(audit_room(log, "beta", "learned"), 1, "control: another sandbox has room");
	cr_assert_eq(audit_room(log, "alpha", "Bad Kind"), 0, "a bad token never has room");
	fake_now = start + AUDIT_WINDOW_NS;
	cr_assert_eq(audit_room(log, "alpha", "learned"), 1);
	cr_assert_eq(audit_append(log, &e), 0);
	cr_assert_eq(audit_query(log, &f, collect_one, c), 121);
	o = json_loads(c->fields[120], 0, NULL);
	cr_assert_eq(json_integer_value(json_object_get(o, "suppressed")), 2,
		     "the two skipped by audit_room ride on the next: %s", c->fields[120]);
	json_decref(o);
	free(c);
	audit_close(log);
}

Test(audit, test_room_checks_tokens_and_keeps_pairs_apart)
{
	struct audit_log *log = open_log();
	struct audit_entry e = { .sandbox = "ab", .kind = "c", .decision = "allow", .reason = "r" };
	char longest[AUDIT_TOKEN_MAX + 2];

	memset(longest, 'x', AUDIT_TOKEN_MAX + 1);
	longest[AUDIT_TOKEN_MAX + 1] = '\0';
	cr_assert_eq(audit_room(log, longest, "kind"), 0, "a sandbox one past the longest token");
	cr_assert_eq(audit_room(log, "alpha", longest), 0, "a kind one past the longest token");
	longest[AUDIT_TOKEN_MAX] = '\0';
	cr_assert_eq(audit_room(log, longest, longest), 1, "control: the longest tokens");
	cr_assert_eq(audit_room(log, "", "kind"), 0);
	cr_assert_eq(audit_room(log, "alpha", ""), 0);
	cr_assert_eq(audit_room(log, NULL, "kind"), 0);
	cr_assert_eq(audit_room(log, "alpha", NULL), 0);
	cr_assert_eq(audit_room(log, "Alpha", "kind"), 0, "upper case is not a token");
	cr_assert_eq(audit_room(log, "al pha", "kind"), 0);
	/* ("ab", "c") and ("a", "bc") spell the same letters: two pairs all the same */
	for (int i = 0; i < 120; i++)
		cr_assert_eq(audit_append(log, &e), 0);
	cr_assert_eq(audit_room(log, "ab", "c"), 0, "(ab, c) has used its window");
	cr_assert_eq(audit_room(log, "a", "bc"), 1, "(a, bc) has not");
	audit_close(log);
}

Test(audit, test_rate_is_per_sandbox_and_kind)
{
	struct audit_log *log = open_log();
	struct audit_entry e = { .decision = "deny", .reason = "dns.refused" };

	e.sandbox = "alpha";
	e.kind = "dns";
	for (int i = 0; i < 120; i++)
		cr_assert_eq(audit_append(log, &e), 0);
	cr_assert_eq(audit_append(log, &e), -EAGAIN);
	e.kind = "egress"; /* same sandbox, other kind */
	cr_assert_eq(audit_append(log, &e), 0, "a flood of one kind must not crowd out another");
	e.sandbox = "beta"; /* other sandbox, same kind */
	e.kind = "dns";
	cr_assert_eq(audit_append(log, &e), 0, "one sandbox's flood must not silence another");
	audit_close(log);
}

Test(audit, test_refuses_world_writable_directory_with_the_fix)
{
	struct audit_opts o = { .clock = fake_clock, .owner = getuid(), .no_journal = 1 };
	char err[256] = "";

	cr_assert_eq(chmod(dir, 0777), 0);
	cr_assert_null(audit_open(path, &o, err, sizeof(err)));
	cr_assert_eq(errno, EPERM);
	cr_assert(strstr(err, dir) && strstr(err, "chmod go-w"), "err: %s", err);
}

Test(audit, test_refuses_group_writable_file_with_the_fix)
{
	struct audit_log *log = open_log();
	struct audit_opts o = { .clock = fake_clock, .owner = getuid(), .no_journal = 1 };
	char err[256] = "";

	audit_close(log);
	cr_assert_eq(chmod(path, 0660), 0);
	cr_assert_null(audit_open(path, &o, err, sizeof(err)));
	cr_assert_eq(errno, EPERM);
	cr_assert(strstr(err, path) && strstr(err, "chmod go-w"), "err: %s", err);
}

Test(audit, test_refuses_a_file_of_another_owner)
{
	struct audit_opts o = { .clock = fake_clock, .owner = getuid() + 1 };
	char err[256] = "";

	cr_assert_null(audit_open(path, &o, err, sizeof(err)));
	cr_assert_eq(errno, EPERM);
	cr_assert(strstr(err, "chown"), "err: %s", err);
}

Test(audit, test_creates_the_file_0600_whatever_the_umask)
{
	struct stat st;
	mode_t old = umask(0);
	struct audit_log *log = open_log();

	umask(old);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	audit_close(log);
}

Test(audit, test_readonly_open_of_a_missing_log_creates_nothing)
{
	struct audit_opts o = { .owner = getuid(), .readonly = 1 };
	char err[256] = "";

	cr_assert_null(audit_open(path, &o, err, sizeof(err)));
	cr_assert_eq(errno, ENOENT);
	cr_assert_neq(access(path, F_OK), 0);
}

Test(audit, test_parse_since)
{
	uint64_t now = 1764500000ULL * 1000000000ULL, t;

	cr_assert_eq(audit_parse_since("15m", now, &t), 0);
	cr_assert_eq(t, now - 900ULL * 1000000000ULL);
	cr_assert_eq(audit_parse_since("2d", now, &t), 0);
	cr_assert_eq(t, now - 172800ULL * 1000000000ULL);
	cr_assert_eq(audit_parse_since("@1700000000", now, &t), 0);
	cr_assert_eq(t, 1700000000ULL * 1000000000ULL);
	cr_assert_eq(audit_parse_since("2026-11-30", now, &t), 0);
	cr_assert_eq(t, 1795996800ULL * 1000000000ULL);
	cr_assert_eq(audit_parse_since("2026-11-30T12:00:05Z", now, &t), 0);
	cr_assert_eq(t, (1795996800ULL + 43205) * 1000000000ULL);
	cr_assert_eq(audit_parse_since("15", now, &t), -EINVAL);
	cr_assert_eq(audit_parse_since("15x", now, &t), -EINVAL);
	cr_assert_eq(audit_parse_since("yesterday", now, &t), -EINVAL);
	cr_assert_eq(audit_parse_since("2026-13-01", now, &t), -EINVAL);
}

/* ---- prune: the log's growth cut, the proof kept (audit/prune.c) ---- */

/* Ten entries one second apart; returns the time of the sixth. */
static uint64_t ten_entries(struct audit_log *log)
{
	uint64_t sixth = 0;

	for (int i = 1; i <= 10; i++) {
		if (i == 6)
			sixth = fake_now;
		add(log, "alpha", "egress", NULL);
		fake_now += 1000000000ULL;
	}
	return sixth;
}

/* Invariant: a prune removes the entries before T and the rest still verifies, from the cut. */
Test(audit, test_prune_cuts_before_t_and_the_rest_verifies)
{
	struct audit_log *log = open_log();
	struct audit_prune_result r;
	struct audit_verify_result v;
	struct collect *c = calloc(1, sizeof(*c));
	uint64_t t = ten_entries(log);

	cr_assert_eq(audit_prune(log, t, "test.prune", &r), 0, "%s", audit_error(log));
	cr_assert_eq(r.pruned, 5);
	cr_assert_eq(r.first_id, 6);
	cr_assert_eq(r.prune_id, 11, "the cut is recorded as the next entry of the chain");
	cr_assert_eq(audit_query(log, NULL, collect_one, c), 6);
	cr_assert_eq(c->ids[0], 6);
	cr_assert_eq(audit_verify(log, &v), 0, "%s", v.why);
	cr_assert_eq(v.first_id, 6);
	cr_assert_eq(v.checked, 6);
	/* the chain goes on after the cut, and a second prune cuts from the first one's cut */
	add(log, "alpha", "egress", NULL);
	cr_assert_eq(audit_prune(log, fake_now, "test.prune", &r), 0, "%s", audit_error(log));
	cr_assert_eq(r.first_id, 13);
	cr_assert_eq(r.pruned, 7);
	cr_assert_eq(audit_verify(log, &v), 0, "%s", v.why);
	cr_assert_eq(v.first_id, 13);
	/* control: nothing older than T, nothing pruned, nothing written */
	cr_assert_eq(audit_prune(log, 1, "test.prune", &r), 0);
	cr_assert_eq(r.pruned, 0);
	free(c);
	audit_close(log);
}

/* Invariant: deleting the head of the log by hand is caught even with a cut row written to cover it. */
Test(audit, test_a_cut_that_no_prune_entry_records_does_not_verify)
{
	struct audit_log *log = open_log();
	struct audit_prune_result r;
	char why[160];
	uint64_t t = ten_entries(log);

	/* control: a real prune verifies */
	cr_assert_eq(audit_prune(log, t, "test.prune", &r), 0);
	cr_assert_eq(verify_bad(log, NULL, 0), 0);
	/* the attack: delete more of the head and move the cut row to match, without a prune entry */
	raw_exec("INSERT INTO cuts (first_id, anchor, before_ns, prune_id, pruned) "
		 "SELECT 8, hash, 0, 11, 2 FROM entries WHERE id = 7;"
		 "DELETE FROM entries WHERE id < 8;");
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 8, "%s", why);
	cr_assert(strstr(why, "no prune entry"), "%s", why);
	audit_close(log);
}

/* Invariant: the prune entry is part of the chain: editing it breaks the proof. */
Test(audit, test_editing_the_prune_entry_breaks_the_chain)
{
	struct audit_log *log = open_log();
	struct audit_prune_result r;
	uint64_t t = ten_entries(log);

	cr_assert_eq(audit_prune(log, t, "test.prune", &r), 0);
	raw_exec("UPDATE entries SET fields = replace(fields, '\"pruned\":5', '\"pruned\":4') WHERE id = 11");
	cr_assert_eq(verify_bad(log, NULL, 0), 11);
	audit_close(log);
}

/* Invariant: a broken log is evidence: prune refuses it and removes nothing. */
Test(audit, test_prune_refuses_a_broken_log)
{
	struct audit_log *log = open_log();
	struct audit_prune_result r;
	struct collect *c = calloc(1, sizeof(*c));
	uint64_t t = ten_entries(log);

	raw_exec("UPDATE entries SET reason = 'edited' WHERE id = 3");
	cr_assert_eq(audit_prune(log, t, "test.prune", &r), -EBADMSG);
	cr_assert_eq(r.verify.first_bad_id, 3);
	cr_assert_eq(audit_query(log, NULL, collect_one, c), 10, "nothing was removed");
	free(c);
	audit_close(log);
}

/* --follow's building blocks: the newest id, and entries past an id only. */
Test(audit, test_last_id_and_after_id_filter)
{
	struct audit_log *log = open_log();
	struct audit_filter f = { .after_id = 7 };
	struct collect *c = calloc(1, sizeof(*c));
	int64_t last = -1;

	cr_assert_eq(audit_last_id(log, &last), 0);
	cr_assert_eq(last, 0);
	ten_entries(log);
	cr_assert_eq(audit_last_id(log, &last), 0);
	cr_assert_eq(last, 10);
	cr_assert_eq(audit_query(log, &f, collect_one, c), 3);
	cr_assert_eq(c->ids[0], 8);
	free(c);
	audit_close(log);
}

/* ---- anchors ---- */

static struct audit_log *open_log_period(uint64_t period_ns)
{
	struct audit_opts o = { .clock = fake_clock, .owner = getuid(), .no_journal = 1, .anchor_period_ns = period_ns };
	char err[256] = "";
	struct audit_log *log = audit_open(path, &o, err, sizeof(err));

	cr_assert_not_null(log, "audit_open: %s", err);
	return log;
}

/* The entry id the anchor file holds, or 0. */
static long long anchor_entry(void)
{
	char p[160], line[128];
	long long id = 0;
	FILE *f;

	snprintf(p, sizeof(p), "%s.anchor", path);
	f = fopen(p, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		sscanf(line, "entry = %lld", &id);
	fclose(f);
	return id;
}

/* Rewrite entries from..to with decision 'deny' and hashes recomputed down the chain, as root could. */
static void rewrite_suffix(int from, int to)
{
	char prev[AUDIT_HASH_HEX + 1], h[AUDIT_HASH_HEX + 1], sql[512];
	sqlite3 *db;
	sqlite3_stmt *st;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	snprintf(sql, sizeof(sql), "SELECT prev_hash FROM entries WHERE id = %d", from);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	snprintf(prev, sizeof(prev), "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	for (int id = from; id <= to; id++) {
		struct audit_entry e = { .id = id, .decision = "deny" };

		snprintf(sql, sizeof(sql), "SELECT time_ns, sandbox, kind, reason, fields FROM entries WHERE id = %d",
			 id);
		cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
		cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
		e.time_ns = sqlite3_column_int64(st, 0);
		e.sandbox = strdup((const char *)sqlite3_column_text(st, 1));
		e.kind = strdup((const char *)sqlite3_column_text(st, 2));
		e.reason = strdup((const char *)sqlite3_column_text(st, 3));
		e.fields = strdup((const char *)sqlite3_column_text(st, 4));
		sqlite3_finalize(st);
		audit_entry_hash(&e, prev, h);
		snprintf(sql, sizeof(sql),
			 "UPDATE entries SET decision = 'deny', prev_hash = '%s', hash = '%s' WHERE id = %d", prev, h,
			 id);
		cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		memcpy(prev, h, sizeof(prev));
		free((char *)e.sandbox);
		free((char *)e.kind);
		free((char *)e.reason);
		free((char *)e.fields);
	}
	sqlite3_close(db);
}

/* Invariant: deleting the newest entries no longer verifies once an anchor names one of them. */
Test(audit, test_anchor_names_a_cut_tail)
{
	struct audit_log *log = open_log();
	char why[256];

	for (int i = 0; i < 70; i++)
		add(log, "alpha", "egress", NULL);
	audit_close(log); /* anchors the head at close */
	cr_assert_eq(anchor_entry(), 70);
	log = open_log();
	cr_assert_eq(verify_bad(log, NULL, 0), 0, "control: the whole log verifies against its anchor");
	raw_exec("DELETE FROM entries WHERE id > 59");
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 60);
	cr_assert(strstr(why, "the log ends at entry 59, but the file anchored entry 70 at "), "%s", why);
	audit_close(log);
}

/* Invariant: a suffix rewritten with fresh hashes, up to an anchored entry, is named. */
Test(audit, test_anchor_names_a_suffix_rewritten_with_fresh_hashes)
{
	struct audit_log *log = open_log();
	struct audit_verify_result r;
	char why[256], anchor[160];

	for (int i = 0; i < 10; i++)
		add(log, "alpha", "egress", NULL);
	audit_close(log);
	rewrite_suffix(5, 10);
	log = open_log();
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 10);
	cr_assert(strstr(why, "entry 10 is not the entry the file anchored at "), "%s", why);
	audit_close(log);
	/* control: without its anchor the rewritten chain is whole, which is why the anchor exists */
	snprintf(anchor, sizeof(anchor), "%s.anchor", path);
	cr_assert_eq(unlink(anchor), 0);
	log = open_log();
	cr_assert_eq(audit_verify(log, &r), 0, "%s", r.why);
	cr_assert_eq(r.anchors, 0);
	audit_close(log);
}

/* Invariant: a cut log that is appended to again can't pull its anchor back down. */
Test(audit, test_appending_after_a_cut_does_not_launder_it)
{
	struct audit_log *log = open_log();
	char why[256];

	for (int i = 0; i < 20; i++)
		add(log, "alpha", "egress", NULL);
	audit_close(log);
	raw_exec("DELETE FROM entries WHERE id > 12");
	log = open_log();
	for (int i = 0; i < 3; i++)
		add(log, "alpha", "egress", NULL); /* 13, 14, 15: new entries where the cut ones were */
	audit_close(log);
	cr_assert_eq(anchor_entry(), 20);
	log = open_log();
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 16);
	cr_assert(strstr(why, "the log ends at entry 15, but the file anchored entry 20"), "%s", why);
	audit_close(log);
}

/*
 * Invariant: any append is anchored within one period (a second) of it, by
 * the writer's tick or timer, and a flood of appends makes at most one
 * anchor a period.
 */
Test(audit, test_anchor_within_a_period_of_any_append_at_most_one_a_period)
{
	struct audit_log *log = open_log();
	uint64_t in_ns, start = fake_now;
	int anchors = 0;
	long long last = 0;

	cr_assert_eq(audit_anchor_due(log, &in_ns), 0, "control: nothing appended, nothing waits");
	add(log, "alpha", "egress", NULL);
	cr_assert_eq(anchor_entry(), 1, "the first append after a quiet period is anchored at once");
	cr_assert_eq(audit_anchor_due(log, &in_ns), 0);
	add(log, "alpha", "egress", NULL);
	add(log, "alpha", "egress", NULL);
	cr_assert_eq(anchor_entry(), 1, "appends within the period wait for it");
	cr_assert_eq(audit_anchor_due(log, &in_ns), 1, "... and say so");
	cr_assert_eq(in_ns, AUDIT_ANCHOR_PERIOD_NS - (fake_now - start), "... with the time left of the period");
	cr_assert_eq(audit_tick(log), 0);
	cr_assert_eq(anchor_entry(), 1, "a tick before the period is over anchors nothing");
	fake_now = start + AUDIT_ANCHOR_PERIOD_NS;
	cr_assert_eq(audit_tick(log), 0);
	cr_assert_eq(anchor_entry(), 3, "the period is over: the tick anchors the head");
	cr_assert_eq(audit_anchor_due(log, &in_ns), 0);

	/* a flood: 40 appends a second for 5 s, the tick every 100 ms (each append fsyncs: kept short) */
	for (int i = 0; i < 200; i++) {
		char sb[16];

		snprintf(sb, sizeof(sb), "flood%d", i % 4); /* 50 each in 5 s: under the rate limit */
		add(log, sb, "test", NULL); /* 1 us each */
		fake_now += 25000000 - 1000;
		if (i % 4 == 3)
			audit_tick(log);
		if (anchor_entry() != last) {
			last = anchor_entry();
			anchors++;
		}
		cr_assert_leq(audit_anchor_due(log, &in_ns) ? in_ns : 0, AUDIT_ANCHOR_PERIOD_NS);
	}
	cr_assert_leq(anchors, 6, "at most one anchor a period under a flood: %d anchors in 5 s", anchors);
	cr_assert_geq(anchors, 4, "control: the flood was anchored as it went: %d anchors in 5 s", anchors);
	cr_assert_geq(last, 3 + 200 - 40, "no anchor lags more than a period: %lld", last);
	audit_close(log);
	cr_assert_eq(anchor_entry(), 203, "close anchors the head");
}

/* Invariant: a log that is gone is not "nothing recorded" when an anchor says it held entries. */
Test(audit, test_verify_of_a_deleted_log_names_its_anchor)
{
	struct audit_log *log = open_log();
	struct audit_verify_result r;
	struct audit_opts o = { .owner = getuid(), .no_journal = 1 };
	char other[160];

	for (int i = 0; i < 3; i++)
		add(log, "alpha", "egress", NULL);
	audit_close(log);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(audit_verify_missing(path, &o, &r), -EBADMSG);
	cr_assert(strstr(r.why, "the log is empty or gone, but the file anchored entry 3"), "%s", r.why);
	/* control: a log that never was */
	snprintf(other, sizeof(other), "%s/never.db", dir);
	cr_assert_eq(audit_verify_missing(other, &o, &r), 0);
}

/* ---- anchors across a prune ---- */

/* The stored hash of entry id, read with raw sqlite. */
static void hash_of(int64_t id, char out[AUDIT_HASH_HEX + 1])
{
	char sql[96];
	sqlite3 *db;
	sqlite3_stmt *st;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	snprintf(sql, sizeof(sql), "SELECT hash FROM entries WHERE id = %lld", (long long)id);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	snprintf(out, AUDIT_HASH_HEX + 1, "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* Put an anchor file back as an older anchor (the journal keeps those across a prune; the file only moves up). */
static void write_anchor(int64_t id, const char *hash)
{
	char p[160];
	FILE *f;

	snprintf(p, sizeof(p), "%s.anchor", path);
	unlink(p);
	f = fopen(p, "w");
	cr_assert_not_null(f);
	fprintf(f, "entry = %lld\nhash = %s\ntime_ns = %llu\n", (long long)id, hash, (unsigned long long)fake_now);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(chmod(p, 0600), 0);
}

/* The prune entry is anchored at once, so the cut it records is vouched for outside the log. */
Test(audit, test_prune_anchors_its_own_entry)
{
	struct audit_log *log = open_log_period(1000 * AUDIT_ANCHOR_PERIOD_NS);
	struct audit_prune_result r;
	uint64_t t = ten_entries(log);

	cr_assert_lt(anchor_entry(), 10, "control: the head is not anchored yet");
	cr_assert_eq(audit_prune(log, t, "test.prune", &r), 0, "%s", audit_error(log));
	cr_assert_eq(anchor_entry(), r.prune_id);
	cr_assert_eq(verify_bad(log, NULL, 0), 0);
	audit_close(log);
}

/*
 * Invariant: an anchor on an entry a recorded prune removed is no cut tail
 * (the journal keeps anchors older than any prune); the one on the last entry
 * removed must still carry the cut's hash, or the cut was forged.
 */
Test(audit, test_anchors_below_the_cut_after_a_prune)
{
	struct audit_log *log = open_log_period(1000 * AUDIT_ANCHOR_PERIOD_NS);
	struct audit_prune_result r;
	char why[256], h3[AUDIT_HASH_HEX + 1], h5[AUDIT_HASH_HEX + 1], forged[AUDIT_HASH_HEX + 1];
	uint64_t t = ten_entries(log);

	hash_of(3, h3);
	hash_of(5, h5);
	cr_assert_eq(audit_prune(log, t, "test.prune", &r), 0, "%s", audit_error(log));
	cr_assert_eq(r.first_id, 6);
	/* an anchor on a pruned entry: verifies */
	write_anchor(3, h3);
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 0, "%s", why);
	/* the anchor on the last pruned entry, with its real hash: verifies */
	write_anchor(5, h5);
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 0, "%s", why);
	/* the cut's hash disagrees with what was anchored for entry 5: named */
	memcpy(forged, h5, sizeof(forged));
	forged[0] = forged[0] == 'a' ? 'b' : 'a';
	write_anchor(5, forged);
	cr_assert_eq(verify_bad(log, why, sizeof(why)), 5, "%s", why);
	cr_assert(strstr(why, "entry 5 is not the entry the file anchored"), "%s", why);
	audit_close(log);
}
