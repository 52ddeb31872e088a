// SPDX-License-Identifier: GPL-2.0-only
/*
 * read.c - the audit log read back: queries by filter, and the chain
 * verified from its start (or a prune's cut) to its head and against the
 * newest anchor kept outside the database (anchor.c).
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/log.h"
#include "common/common.h"

static const char *col(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t ? (const char *)t : "";
}

/*
 * The entry a row of "id, time_ns, sandbox, kind, decision, reason, fields,
 * prev_hash, hash" holds (its strings live until the next step).
 */
static struct audit_entry row_entry(sqlite3_stmt *st)
{
	return (struct audit_entry){
		.id = sqlite3_column_int64(st, 0),
		.time_ns = (uint64_t)sqlite3_column_int64(st, 1),
		.sandbox = col(st, 2),
		.kind = col(st, 3),
		.decision = col(st, 4),
		.reason = col(st, 5),
		.fields = col(st, 6),
		.prev_hash = col(st, 7),
		.hash = col(st, 8),
	};
}

int audit_query(struct audit_log *log, const struct audit_filter *f, int (*fn)(const struct audit_entry *e, void *arg),
		void *arg)
{
	static const char sql[] = "SELECT id, time_ns, sandbox, kind, decision, reason, fields, prev_hash, hash "
				  "FROM entries WHERE (?1 IS NULL OR sandbox = ?1) AND (?2 IS NULL OR kind = ?2) "
				  "AND time_ns >= ?3 AND id > ?4 ORDER BY id";
	static const struct audit_filter all;
	sqlite3_stmt *st;
	int rc, n = 0, ret = 0;

	if (!f)
		f = &all;
	rc = sqlite3_prepare_v2(log->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return audit_db_fail(log, rc, "query");
	if (f->sandbox)
		sqlite3_bind_text(st, 1, f->sandbox, -1, SQLITE_STATIC);
	if (f->kind)
		sqlite3_bind_text(st, 2, f->kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)f->since_ns);
	sqlite3_bind_int64(st, 4, f->after_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct audit_entry e = row_entry(st);

		n++;
		ret = fn ? fn(&e, arg) : 0;
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = audit_db_fail(log, rc, "query");
	sqlite3_finalize(st);
	return ret ? ret : n;
}

static int broken(struct audit_verify_result *res, int64_t id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int broken(struct audit_verify_result *res, int64_t id, const char *fmt, ...)
{
	va_list ap;

	res->first_bad_id = id;
	va_start(ap, fmt);
	vsnprintf(res->why, sizeof(res->why), fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/*
 * Three checks per entry, in the order that names the cause best: ids run
 * 1, 2, 3 with no gap (a deleted entry), prev_hash is the previous entry's
 * hash (a deleted or moved entry), and the hash matches the columns (an
 * edited entry, or one moved to another id, since the id is hashed too).
 * Then the anchors (anchor.c), read before the walk so that none can name an
 * entry appended after the walk began: each anchored entry must be there,
 * with the anchored hash.  After a prune the walk starts at the cut
 * (prune.c); an anchor below it names an entry the audited prune removed,
 * and only the last one removed can still be checked: its hash is the cut's.
 */
int audit_verify(struct audit_log *log, struct audit_verify_result *res)
{
	static const char sql[] = "SELECT id, time_ns, sandbox, kind, decision, reason, fields, prev_hash, hash "
				  "FROM entries ORDER BY id";
	char prev[AUDIT_HASH_HEX + 1], hash[AUDIT_HASH_HEX + 1];
	struct audit_anchors as;
	int64_t want = 1;
	sqlite3_stmt *st;
	int rc, ret = 0, k = 0, mismatch = -1;

	memset(res, 0, sizeof(*res));
	ret = audit_anchors_read(log->path, log->anchor_path, &log->opts, &as);
	if (ret) {
		snprintf(log->errmsg, sizeof(log->errmsg), "reading the anchors: %s", strerror(-ret));
		return ret;
	}
	/* one read transaction: a writer appending or pruning meanwhile can't split the cut from the walk */
	rc = sqlite3_exec(log->db, "BEGIN", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		audit_anchors_free(&as);
		return audit_db_fail(log, rc, "verify");
	}
	ret = audit_chain_start(log, &want, prev, res); /* after a prune: the cut (prune.c) */
	if (ret) {
		sqlite3_exec(log->db, "COMMIT", NULL, NULL, NULL);
		audit_anchors_judge(&as, INT64_MAX, -1, res);
		audit_anchors_free(&as);
		return ret;
	}
	res->first_id = want;
	/* anchors below the cut vouch for pruned entries; the last one pruned must be the cut's hash */
	for (; k < as.n && as.a[k].id < want; k++)
		if (as.a[k].id == want - 1 && mismatch < 0 && strcmp(as.a[k].hash, prev))
			mismatch = k;
	rc = sqlite3_prepare_v2(log->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		ret = audit_db_fail(log, rc, "verify");
		sqlite3_exec(log->db, "COMMIT", NULL, NULL, NULL);
		audit_anchors_free(&as);
		return ret;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct audit_entry e = row_entry(st);
		const char *stored_prev = col(st, 7), *stored = col(st, 8);

		res->checked++;
		if (e.id != want) {
			ret = res->checked == 1 ? broken(res, e.id,
							 "the chain starts at entry %lld, not %lld: entries "
							 "before it were deleted",
							 (long long)e.id, (long long)want) :
						  broken(res, e.id, "entry %lld follows %lld: an entry was deleted",
							 (long long)e.id, (long long)want - 1);
			break;
		}
		if (strcmp(stored_prev, prev)) {
			ret = broken(res, e.id,
				     "its prev_hash is not the hash of entry %lld: an entry was moved or "
				     "replaced",
				     (long long)e.id - 1);
			break;
		}
		audit_entry_hash(&e, prev, hash);
		if (strcmp(stored, hash)) {
			ret = broken(res, e.id, "its hash does not match its contents: the entry was edited");
			break;
		}
		memcpy(prev, hash, sizeof(prev));
		want++;
		/* the anchors of this entry: the first that disagrees is the one to name */
		for (; k < as.n && as.a[k].id <= e.id; k++)
			if (as.a[k].id == e.id && mismatch < 0 && strcmp(as.a[k].hash, hash))
				mismatch = k;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = audit_db_fail(log, rc, "verify");
	sqlite3_finalize(st);
	sqlite3_exec(log->db, "COMMIT", NULL, NULL, NULL);
	if (!ret)
		ret = audit_anchors_judge(&as, want - 1, mismatch, res);
	else
		audit_anchors_judge(&as, INT64_MAX, -1, res); /* the newest anchor, for the report */
	audit_anchors_free(&as);
	return ret;
}

int audit_verify_missing(const char *path, const struct audit_opts *opts, struct audit_verify_result *res)
{
	static const struct audit_opts defaults;
	char anchor_path[PATH_MAX];
	struct audit_anchors as;
	int ret;

	if (!opts)
		opts = &defaults;
	memset(res, 0, sizeof(*res));
	if (audit_anchor_path_of(path, opts, anchor_path, sizeof(anchor_path)))
		return -ENAMETOOLONG;
	ret = audit_anchors_read(path, anchor_path, opts, &as);
	if (ret)
		return ret;
	ret = audit_anchors_judge(&as, 0, -1, res);
	audit_anchors_free(&as);
	return ret;
}
