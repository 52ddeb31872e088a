// SPDX-License-Identifier: GPL-2.0-only
/*
 * prune.c - keeping the audit log's growth in hand without losing the proof:
 * audit_prune() cuts the oldest entries, and audit_chain_start() tells
 * audit_verify() where the chain starts after a cut.
 *
 * A cut is a row of the `cuts` table: the first entry kept and the anchor,
 * the hash of the last entry removed (the first kept entry's prev_hash).
 * The cut is also an entry of the chain itself, written before anything is
 * removed: kind "audit", decision "prune", fields {first_id, anchor, before,
 * pruned}.  So a cut row nobody audited (someone deleted the head of the
 * log and wrote a row to cover it) does not verify: audit_chain_start()
 * wants the prune entry that names the same first_id and anchor, and the
 * walk then proves that entry with the rest.  A crash between the entry and
 * the deletion leaves the entry and every old entry: the log still verifies
 * from 1, and a second prune finishes the job.
 *
 * Anchors (anchor.c) outlive a prune: the journal still holds the heads
 * anchored before it.  An anchor below the cut names an entry the audited
 * prune removed, so it is no cut tail; the one on the last entry removed is
 * still checked (its hash is the cut's), and the prune entry is anchored as
 * soon as the cut is made, so rewriting the cut afterwards shows.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/log.h"

static const char cuts_schema[] = "CREATE TABLE IF NOT EXISTS cuts ("
				  " first_id INTEGER PRIMARY KEY,"
				  " anchor TEXT NOT NULL,"
				  " before_ns INTEGER NOT NULL,"
				  " prune_id INTEGER NOT NULL,"
				  " pruned INTEGER NOT NULL)";

/* One int64 from sql with up to two int64 parameters; *out untouched when the row is NULL. */
static int scalar(struct audit_log *log, const char *sql, int64_t a, int64_t b, int64_t *out, bool *null)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(log->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return audit_db_fail(log, rc, "prune");
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (null)
			*null = sqlite3_column_type(st, 0) == SQLITE_NULL;
		if (sqlite3_column_type(st, 0) != SQLITE_NULL)
			*out = sqlite3_column_int64(st, 0);
		rc = SQLITE_DONE;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : audit_db_fail(log, rc, "prune");
}

static bool have_cuts(struct audit_log *log)
{
	int64_t n = 0;

	return !scalar(log, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'cuts'", 0, 0, &n,
		       NULL) &&
	       n > 0;
}

/* Does the prune entry that records (first_id, anchor) exist at or after first_id? */
static int prune_entry_found(struct audit_log *log, int64_t first_id, const char *anchor, bool *found)
{
	static const char sql[] = "SELECT fields FROM entries WHERE kind = 'audit' AND decision = 'prune' AND id >= ?";
	sqlite3_stmt *st;
	int rc;

	*found = false;
	rc = sqlite3_prepare_v2(log->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return audit_db_fail(log, rc, "verify");
	sqlite3_bind_int64(st, 1, first_id);
	while (!*found && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		json_t *f = json_loads((const char *)sqlite3_column_text(st, 0), 0, NULL);
		const char *a = json_string_value(json_object_get(f, "anchor"));

		*found = a && !strcmp(a, anchor) && json_integer_value(json_object_get(f, "first_id")) == first_id;
		json_decref(f);
	}
	sqlite3_finalize(st);
	return *found || rc == SQLITE_DONE ? 0 : audit_db_fail(log, rc, "verify");
}

int audit_chain_start(struct audit_log *log, int64_t *first_id, char prev[AUDIT_HASH_HEX + 1],
		      struct audit_verify_result *res)
{
	static const char sql[] = "SELECT first_id, anchor FROM cuts ORDER BY first_id DESC LIMIT 1";
	sqlite3_stmt *st;
	bool found;
	int rc, ret;

	*first_id = 1;
	memcpy(prev, audit_genesis, AUDIT_HASH_HEX + 1);
	if (!have_cuts(log))
		return 0;
	rc = sqlite3_prepare_v2(log->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return audit_db_fail(log, rc, "verify");
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*first_id = sqlite3_column_int64(st, 0);
		snprintf(prev, AUDIT_HASH_HEX + 1, "%s", (const char *)sqlite3_column_text(st, 1));
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return audit_db_fail(log, rc, "verify");
	if (rc == SQLITE_DONE)
		return 0;
	ret = prune_entry_found(log, *first_id, prev, &found);
	if (ret)
		return ret;
	if (!found) {
		res->first_bad_id = *first_id;
		snprintf(res->why, sizeof(res->why),
			 "the log was cut before entry %lld, but no prune entry in the chain records that cut",
			 (long long)*first_id);
		return -EBADMSG;
	}
	return 0;
}

int audit_last_id(struct audit_log *log, int64_t *id)
{
	*id = 0;
	return scalar(log, "SELECT max(id) FROM entries", 0, 0, id, NULL);
}

/* The entry that records the cut, written before anything is removed. */
static int record_cut(struct audit_log *log, const char *reason, uint64_t before_ns, struct audit_prune_result *res)
{
	struct audit_entry e = { .sandbox = "latch", .kind = "audit", .decision = "prune", .reason = reason };
	json_t *f = json_pack("{s:I, s:s, s:I, s:I}", "first_id", (json_int_t)res->first_id, "anchor", res->anchor,
			      "before_ns", (json_int_t)before_ns, "pruned", (json_int_t)res->pruned);
	char *text = json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS);
	int ret;

	json_decref(f);
	if (!text)
		return -ENOMEM;
	e.fields = text;
	ret = audit_append(log, &e);
	free(text);
	if (ret == -EAGAIN)
		return -EBUSY; /* the rate limit of ("latch", "audit"): nothing was cut */
	res->prune_id = e.id;
	return ret;
}

static int cut(struct audit_log *log, uint64_t before_ns, const struct audit_prune_result *res)
{
	static const char ins[] =
		"INSERT INTO cuts (first_id, anchor, before_ns, prune_id, pruned) VALUES (?, ?, ?, ?, ?)";
	sqlite3 *db = log->db;
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return audit_db_fail(log, rc, "prune: begin");
	rc = sqlite3_exec(db, cuts_schema, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, ins, -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, res->first_id);
		sqlite3_bind_text(st, 2, res->anchor, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)before_ns);
		sqlite3_bind_int64(st, 4, res->prune_id);
		sqlite3_bind_int64(st, 5, res->pruned);
		rc = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_OK) {
		char del[64];

		snprintf(del, sizeof(del), "DELETE FROM entries WHERE id < %lld", (long long)res->first_id);
		rc = sqlite3_exec(db, del, NULL, NULL, NULL);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		int ret = audit_db_fail(log, rc, "prune");

		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return ret;
	}
	return 0;
}

int audit_prune(struct audit_log *log, uint64_t before_ns, const char *reason, struct audit_prune_result *res)
{
	int64_t start = 1, last = 0, keep = 0;
	char prev[AUDIT_HASH_HEX + 1];
	sqlite3_stmt *st;
	bool none = false;
	int ret, rc;

	memset(res, 0, sizeof(*res));
	ret = audit_verify(log, &res->verify);
	if (ret)
		return ret;
	ret = audit_chain_start(log, &start, prev, &res->verify);
	if (!ret)
		ret = audit_last_id(log, &last);
	/* the first entry kept: the oldest written at or after before_ns (or the next to be written) */
	if (!ret)
		ret = scalar(log, "SELECT min(id) FROM entries WHERE time_ns >= ?", (int64_t)before_ns, 0, &keep,
			     &none);
	if (ret)
		return ret;
	if (none)
		keep = last + 1;
	if (keep <= start)
		return 0; /* nothing that old */
	res->first_id = keep;
	res->pruned = keep - start;
	rc = sqlite3_prepare_v2(log->db, "SELECT hash FROM entries WHERE id = ?", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return audit_db_fail(log, rc, "prune");
	sqlite3_bind_int64(st, 1, keep - 1);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		snprintf(res->anchor, sizeof(res->anchor), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		return rc == SQLITE_DONE ? -ENOENT : audit_db_fail(log, rc, "prune");
	ret = record_cut(log, reason, before_ns, res);
	if (!ret)
		ret = cut(log, before_ns, res);
	if (!ret)
		audit_anchor(log); /* the journal vouches for the prune entry, and so for the cut, at once */
	return ret;
}
