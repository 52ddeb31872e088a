// SPDX-License-Identifier: GPL-2.0-only
/*
 * anchor.c - the audit chain's head, kept outside the database.
 *
 * The chain proves that the entries in the database are consistent with each
 * other; it can't prove that none are missing at its end, nor that a suffix
 * was not rewritten with fresh hashes.  So within a period (a second) of any
 * append, and at close, the head (id and hash of the newest entry) is
 * written down where the database's writer can't take it back:
 *
 *   the journal  sd_journal_send() with MESSAGE_ID=AUDIT_ANCHOR_MESSAGE_ID and
 *                the fields LATCH_AUDIT_DB, LATCH_AUDIT_ENTRY, LATCH_AUDIT_HASH.
 *                journald stamps each entry with the sender's _UID from the
 *                socket's credentials, so only anchors whose _UID is the log's
 *                owner (root) are believed; another user can't plant one.
 *   a file       PATH.anchor beside the log, key = value, rewritten only
 *                upwards (a lower id never replaces a higher one).  It is
 *                what a host without journald has, and it stops only an
 *                accident: whoever can rewrite the log can rewrite it too.
 *
 * audit_verify() reads every anchor back and holds the database against
 * each: an anchored entry that is missing is a cut tail, one whose hash
 * differs was rewritten.  Root can still rewrite what came after the newest
 * anchor (the last period's appends), and can delete journal files: see
 * docs/audit.md.
 *
 * Why a period and not every append: each anchor is a journal datagram and a
 * file fsynced, and a flood of appends must not become a flood of those.  So
 * the first append after a quiet period is anchored at once, and the rest
 * wait for the period to end (audit_tick(), on the writer's timer): at most
 * one anchor a period, and no append waits longer than one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-journal.h>

#include "audit/audit.h"
#include "audit/log.h"
#include "common/common.h"

/* The file anchor, as latch_kv reads and writes it. */
struct anchor_file {
	char entry[24];
	char hash[AUDIT_HASH_HEX + 1];
	char time_ns[24];
};

static const struct latch_kv_key anchor_keys[] = {
	LATCH_KV_STR("entry", struct anchor_file, entry, "the id of the newest entry"),
	LATCH_KV_STR("hash", struct anchor_file, hash, "its hash"),
	LATCH_KV_STR("time_ns", struct anchor_file, time_ns, "when it was anchored, ns since the epoch"),
};

int audit_anchor_path_of(const char *path, const struct audit_opts *o, char *out, size_t len)
{
	int n = o->anchor_file ? snprintf(out, len, "%s", o->anchor_file) : snprintf(out, len, "%s.anchor", path);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void anchor_time_text(uint64_t ns, char *buf, size_t len)
{
	time_t s = (time_t)(ns / 1000000000ULL);
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int parse_id(const char *s, int64_t *id)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 1)
		return -EINVAL;
	*id = v;
	return 0;
}

static bool hash_ok(const char *h)
{
	if (strlen(h) != AUDIT_HASH_HEX)
		return false;
	for (; *h; h++)
		if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
			return false;
	return true;
}

static int read_file(const char *anchor_path, struct audit_anchor_rec *rec)
{
	struct anchor_file f = { "", "", "" };
	char err[LATCH_ERR_MAX];
	int64_t t;

	if (latch_kv_read(anchor_path, anchor_keys, 3, LATCH_KV_SAFE_FILE | LATCH_KV_UNKNOWN_OK, NULL, &f, err,
			  sizeof(err)))
		return -ENOENT;
	if (parse_id(f.entry, &rec->id) || !hash_ok(f.hash) || parse_id(f.time_ns, &t))
		return -EINVAL;
	memcpy(rec->hash, f.hash, sizeof(rec->hash));
	rec->time_ns = (uint64_t)t;
	rec->by = "file";
	return 0;
}

/* The newest entry: id, hash.  0 with *id = 0 for an empty log. */
static int read_head(struct audit_log *log, int64_t *id, char hash[AUDIT_HASH_HEX + 1])
{
	sqlite3_stmt *st;
	int rc;

	*id = 0;
	rc = sqlite3_prepare_v2(log->db, "SELECT id, hash FROM entries ORDER BY id DESC LIMIT 1", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return -EIO;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *h = sqlite3_column_text(st, 1);

		*id = sqlite3_column_int64(st, 0);
		snprintf(hash, AUDIT_HASH_HEX + 1, "%s", h ? (const char *)h : "");
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -EIO;
}

/* The file keeps the highest head ever anchored: a cut log must not pull it back down. */
static int write_file(struct audit_log *log, int64_t id, const char *hash, uint64_t now)
{
	struct audit_anchor_rec old;
	struct anchor_file f;
	char err[LATCH_ERR_MAX];

	if (read_file(log->anchor_path, &old) == 0 && old.id >= id)
		return 0;
	snprintf(f.entry, sizeof(f.entry), "%" PRId64, id);
	snprintf(f.hash, sizeof(f.hash), "%s", hash);
	snprintf(f.time_ns, sizeof(f.time_ns), "%" PRIu64, now);
	return latch_kv_write(log->anchor_path, 0600, "latch audit anchor: the head of the log beside this file",
			      anchor_keys, 3, &f, err, sizeof(err));
}

int audit_anchor(struct audit_log *log)
{
	char hash[AUDIT_HASH_HEX + 1] = "";
	uint64_t now;
	int64_t id;
	int jr = -ENOSYS, fr;

	if (!log || log->opts.readonly)
		return 0;
	if (read_head(log, &id, hash))
		return -EIO;
	if (log->appended_id > id)
		log->appended_id = id; /* cut under us: nothing past the head is left to wait for an anchor */
	if (!id || id == log->anchored_id)
		return 0;
	now = log->opts.clock(log->opts.clock_arg);
	if (!log->opts.no_journal)
		jr = sd_journal_send("MESSAGE_ID=" AUDIT_ANCHOR_MESSAGE_ID,
				     "MESSAGE=latch audit log %s anchored at entry %" PRId64, log->path, id,
				     "PRIORITY=6", "SYSLOG_IDENTIFIER=latch-audit", "LATCH_AUDIT_DB=%s", log->path,
				     "LATCH_AUDIT_ENTRY=%" PRId64, id, "LATCH_AUDIT_HASH=%s", hash, NULL);
	fr = write_file(log, id, hash, now);
	if (jr && fr)
		return fr;
	log->anchored_id = id;
	log->anchored_ns = now;
	return 0;
}

static uint64_t anchor_period(const struct audit_log *log)
{
	return log->opts.anchor_period_ns ? log->opts.anchor_period_ns : AUDIT_ANCHOR_PERIOD_NS;
}

int audit_tick(struct audit_log *log)
{
	if (!log || log->opts.readonly)
		return 0;
	if (log->opts.clock(log->opts.clock_arg) - log->anchored_ns < anchor_period(log))
		return 0;
	return audit_anchor(log);
}

int audit_anchor_due(struct audit_log *log, uint64_t *in_ns)
{
	uint64_t since;

	if (!log || log->opts.readonly || log->appended_id <= log->anchored_id)
		return 0;
	since = log->opts.clock(log->opts.clock_arg) - log->anchored_ns;
	*in_ns = since < anchor_period(log) ? anchor_period(log) - since : 0;
	return 1;
}

void audit_anchor_after_append(struct audit_log *log, int64_t id, uint64_t now)
{
	log->appended_id = id;
	if (now - log->anchored_ns >= anchor_period(log))
		audit_anchor(log); /* a failure is no failure of the append: the next tick tries again */
}

static int anchors_add(struct audit_anchors *as, const struct audit_anchor_rec *rec)
{
	if (as->n == as->cap) {
		int cap = as->cap ? as->cap * 2 : 16;
		struct audit_anchor_rec *a = realloc(as->a, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		as->a = a;
		as->cap = cap;
	}
	as->a[as->n++] = *rec;
	return 0;
}

/* Field FIELD of the journal entry under j's cursor, without "FIELD=", into out. */
static int journal_field(sd_journal *j, const char *field, char *out, size_t len)
{
	const void *data;
	size_t n, fl = strlen(field);
	int rc = sd_journal_get_data(j, field, &data, &n);

	if (rc < 0)
		return rc;
	if (n <= fl + 1 || n - fl - 1 >= len)
		return -EINVAL;
	memcpy(out, (const char *)data + fl + 1, n - fl - 1);
	out[n - fl - 1] = '\0';
	return 0;
}

/* The journal's anchors of this log, written by its owner only (journald's _UID, not the sender's word). */
static int journal_read(const char *path, uid_t owner, struct audit_anchors *as)
{
	char match[PATH_MAX + 32], id[24];
	sd_journal *j;
	int rc;

	if (sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY) < 0)
		return 0; /* no journal here: the file is all there is */
	snprintf(match, sizeof(match), "LATCH_AUDIT_DB=%s", path);
	rc = sd_journal_add_match(j, "MESSAGE_ID=" AUDIT_ANCHOR_MESSAGE_ID, 0);
	if (rc >= 0)
		rc = sd_journal_add_match(j, match, 0);
	snprintf(match, sizeof(match), "_UID=%u", (unsigned)owner);
	if (rc >= 0)
		rc = sd_journal_add_match(j, match, 0);
	if (rc < 0) {
		sd_journal_close(j);
		return rc;
	}
	SD_JOURNAL_FOREACH(j)
	{
		struct audit_anchor_rec rec = { .by = "journal" };
		uint64_t usec;

		if (journal_field(j, "LATCH_AUDIT_ENTRY", id, sizeof(id)) || parse_id(id, &rec.id) ||
		    journal_field(j, "LATCH_AUDIT_HASH", rec.hash, sizeof(rec.hash)) || !hash_ok(rec.hash) ||
		    sd_journal_get_realtime_usec(j, &usec) < 0)
			continue;
		rec.time_ns = usec * 1000;
		rc = anchors_add(as, &rec);
		if (rc)
			break;
	}
	sd_journal_close(j);
	return rc < 0 ? rc : 0;
}

static int rec_cmp(const void *x, const void *y)
{
	const struct audit_anchor_rec *a = x, *b = y;

	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return a->time_ns < b->time_ns ? -1 : a->time_ns > b->time_ns;
}

int audit_anchors_read(const char *path, const char *anchor_path, const struct audit_opts *o, struct audit_anchors *out)
{
	struct audit_anchor_rec rec;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!o->no_journal)
		rc = journal_read(path, o->owner, out);
	if (!rc && read_file(anchor_path, &rec) == 0)
		rc = anchors_add(out, &rec);
	if (rc) {
		audit_anchors_free(out);
		return rc;
	}
	qsort(out->a, out->n, sizeof(*out->a), rec_cmp);
	return 0;
}

void audit_anchors_free(struct audit_anchors *as)
{
	free(as->a);
	memset(as, 0, sizeof(*as));
}

int audit_anchors_judge(const struct audit_anchors *as, int64_t last, int mismatch, struct audit_verify_result *res)
{
	const struct audit_anchor_rec *top, *m;
	char when[40];

	res->anchors = as->n;
	if (!as->n)
		return 0;
	top = &as->a[as->n - 1];
	res->anchored_id = top->id;
	res->anchored_time_ns = top->time_ns;
	snprintf(res->anchored_by, sizeof(res->anchored_by), "%s", top->by);
	if (last == INT64_MAX)
		return 0;
	if (top->id > last) {
		anchor_time_text(top->time_ns, when, sizeof(when));
		res->first_bad_id = last + 1;
		if (last)
			snprintf(res->why, sizeof(res->why),
				 "the log ends at entry %" PRId64 ", but the %s anchored entry %" PRId64
				 " at %s: entries after %" PRId64 " were deleted",
				 last, top->by, top->id, when, last);
		else
			snprintf(res->why, sizeof(res->why),
				 "the log is empty or gone, but the %s anchored entry %" PRId64 " at %s", top->by,
				 top->id, when);
		return -EBADMSG;
	}
	if (mismatch >= 0) {
		m = &as->a[mismatch];
		anchor_time_text(m->time_ns, when, sizeof(when));
		res->first_bad_id = m->id;
		snprintf(res->why, sizeof(res->why),
			 "entry %" PRId64 " is not the entry the %s anchored at %s: the log was rewritten at or "
			 "before it",
			 m->id, m->by, when);
		return -EBADMSG;
	}
	return 0;
}
