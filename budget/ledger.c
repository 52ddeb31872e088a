// SPDX-License-Identifier: GPL-2.0-only
/*
 * ledger.c - the spend ledger: one sqlite file in WAL mode, one row per
 * reservation and one per settlement, never edited.
 *
 * Writers take sqlite's write lock first (BEGIN IMMEDIATE), then read the
 * rows others wrote since they last looked, then decide and append: that is
 * what makes a reservation atomic across processes.  Row times never go
 * backwards (a writer stamps max(clock, last row)), so id order is time
 * order and "the last 24 hours" is a range of ids.
 *
 * Durability is synchronous=NORMAL unless asked for FULL: in WAL mode a
 * commit is then written to the WAL before it returns, so it survives the
 * death of the process (kill -9), which is what the caps must survive; only
 * a power cut can lose the last commits (they are not fsynced).  FULL adds
 * an fsync to every commit; bench/budget.c measures both.  latchd's rows
 * reach it through the journal (journal.c), folded once a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "budget/internal.h"

enum { Q_INSERT, Q_AFTER, Q_RANGE, Q_MAX, Q_AT, Q_LAST, Q_OWNER, Q_PRUNE, Q_BEGIN, Q_COMMIT, Q_ROLLBACK, Q_N };

static const char *const sql[Q_N] = {
	/* the id is given: the caller has read every row under the write lock, so it knows the next one */
	[Q_INSERT] = "INSERT INTO ledger (id, time_ns, request, kind, sandbox, provider, model, micros, how,"
		     " cap_requests_hour, cap_requests_day, cap_micros_day, input_tokens, cached_tokens,"
		     " cache_write_tokens, cache_write_1h_tokens, output_tokens, owner)"
		     " VALUES (?18, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
	[Q_AFTER] = "SELECT id, time_ns, request, kind, sandbox, provider, model, micros, how,"
		    " cap_requests_hour, cap_requests_day, cap_micros_day FROM ledger WHERE id > ? ORDER BY id",
	/* no index on time: ids are in time order, so a time is found by bisecting the ids */
	[Q_RANGE] = "SELECT ifnull(min(id), 0), ifnull(max(id), 0) FROM ledger",
	/* alone: sqlite reads max() off the b-tree's end only when it is the query's one aggregate */
	[Q_MAX] = "SELECT max(id) FROM ledger",
	[Q_AT] = "SELECT time_ns FROM ledger WHERE id >= ? ORDER BY id LIMIT 1",
	[Q_LAST] = "SELECT time_ns FROM ledger ORDER BY id DESC LIMIT 1",
	[Q_OWNER] = "SELECT owner FROM ledger WHERE id = ?",
	/* never the newest row: ids must keep growing (no AUTOINCREMENT needed) */
	[Q_PRUNE] = "DELETE FROM ledger WHERE id < ? AND id < (SELECT max(id) FROM ledger)",
	[Q_BEGIN] = "BEGIN IMMEDIATE",
	[Q_COMMIT] = "COMMIT",
	[Q_ROLLBACK] = "ROLLBACK",
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS ledger ("
	" id INTEGER PRIMARY KEY,"
	" time_ns INTEGER NOT NULL,"
	" request INTEGER NOT NULL,"
	" kind TEXT NOT NULL CHECK (kind IN ('reserve', 'settle')),"
	" sandbox TEXT NOT NULL,"
	" provider TEXT NOT NULL,"
	" model TEXT NOT NULL,"
	" micros INTEGER NOT NULL CHECK (micros >= 0),"
	" how TEXT NOT NULL,"
	" cap_requests_hour INTEGER, cap_requests_day INTEGER, cap_micros_day INTEGER,"
	" input_tokens INTEGER, cached_tokens INTEGER, cache_write_tokens INTEGER, cache_write_1h_tokens INTEGER,"
	" output_tokens INTEGER,"
	" owner TEXT);"
	"DROP INDEX IF EXISTS ledger_time;"; /* a page write per row that nothing needs (ids are in time order) */

/*
 * Rows are also written several to one INSERT (LEDGER_BATCH, then fewer):
 * most of an INSERT's cost is the statement's own start and finish, not
 * the row (callgrind: 9k instructions for a one-row INSERT, about 3k a row
 * in a 16-row one), and a sole writer's commit carries a turn's
 * reservations with the settlements that wait.
 */
#define LEDGER_COLS 18
static const int batch_sizes[] = { LEDGER_BATCH, 8, 4, 2, 1 };
#define N_BATCH (int)(sizeof(batch_sizes) / sizeof(batch_sizes[0]))

struct ledger {
	sqlite3 *db;
	struct checkpointer *ckpt; /* NULL: checkpoints run on the caller's thread */
	sqlite3_stmt *many[N_BATCH]; /* INSERT of batch_sizes[i] rows */
	int lock_fd; /* the flock(2) of a writer, or -1 */
	sqlite3_stmt *st[Q_N];
	char path[PATH_MAX];
	char errmsg[256];
};

static int prepare_many(struct ledger *l, int n, sqlite3_stmt **st);

static int fail(struct ledger *l, int rc, const char *what)
{
	int e = latch_sqlite_errno(rc);

	snprintf(l->errmsg, sizeof(l->errmsg), "%s: %s", what, sqlite3_errmsg(l->db));
	return e ? e : -EIO;
}

const char *budget_ledger_error(const struct ledger *l)
{
	return l && *l->errmsg ? l->errmsg : "no error";
}

/*
 * WHAT (the ledger, its journal) at PATH: a regular file of the owner's,
 * 0600, never a symlink; made here when CREATE (so its mode never depends
 * on the umask).  -ENOENT, with nothing in err, when it is missing and not
 * to be made.
 */
int budget_ledger_file_check(const char *what, const char *path, bool create, uid_t owner, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	if (lstat(path, &st)) {
		if (errno != ENOENT)
			return latch_errf(err, errlen, -errno, "%s %s: %s", what, path, strerror(errno));
		if (!create)
			return -ENOENT;
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno != EEXIST)
			return latch_errf(err, errlen, -errno, "%s %s: create: %s", what, path, strerror(errno));
		if (fd >= 0)
			close(fd);
		if (lstat(path, &st))
			return latch_errf(err, errlen, -errno, "%s %s: %s", what, path, strerror(errno));
	}
	if (!S_ISREG(st.st_mode))
		return latch_errf(err, errlen, -EINVAL, "%s %s is not a regular file; move it away", what, path);
	if (st.st_uid != owner || (st.st_mode & 077))
		return latch_errf(err, errlen, -EPERM,
				  "%s %s is owned by uid %u with mode %04o; fix: chown %u %s && chmod 600 %s", what,
				  path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)owner, path,
				  path);
	return 0;
}

/*
 * Whoever can write the ledger or its directory can hand out a fresh day:
 * both belong to the owner, the directory writable by no one else, the file
 * 0600, and neither a symlink.
 */
static int check_paths(const char *path, bool readonly, uid_t owner, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct stat st;
	int ret;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return latch_errf(err, errlen, -ENAMETOOLONG, "ledger path %s is too long", path);
	dirname(dir);
	if (!readonly && latch_mkdirs(dir, 0755))
		return latch_errf(err, errlen, -errno, "ledger directory %s: mkdir: %s", dir, strerror(errno));
	if (lstat(dir, &st))
		return latch_errf(err, errlen, -errno, "ledger directory %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return latch_errf(err, errlen, -ENOTDIR, "ledger directory %s is not a directory", dir);
	if (st.st_uid != owner || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return latch_errf(err, errlen, -EPERM,
				  "ledger directory %s is owned by uid %u with mode %04o; fix: chown %u %s && chmod "
				  "go-w %s",
				  dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)owner, dir, dir);
	ret = budget_ledger_file_check("ledger", path, !readonly, owner, err, errlen);
	if (ret == -ENOENT)
		return latch_errf(err, errlen, ret, "ledger %s: no requests have been metered yet", path);
	return ret;
}

/*
 * Writers keep apart: a sole writer (latchd) decides in memory, so no other
 * process may write while it runs; several ordinary writers may share.  The
 * lock is flock(2) on the ledger itself, held on a descriptor of its own
 * until after sqlite has closed (closing any descriptor of the file would
 * drop sqlite's fcntl locks with it).
 */
static int take_lock(struct ledger *l, const char *path, int lock, char *err, size_t errlen)
{
	l->lock_fd = -1;
	if (!lock)
		return 0;
	l->lock_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (l->lock_fd < 0)
		return latch_errf(err, errlen, -errno, "ledger %s: %s", path, strerror(errno));
	if (!flock(l->lock_fd, lock | LOCK_NB))
		return 0;
	if (errno == EWOULDBLOCK)
		return latch_errf(
			err, errlen, -EBUSY,
			"ledger %s is being written by another process%s; one latchd per LATCH_ROOT (stop the "
			"other one first)",
			path, lock == LOCK_EX ? "" : " that must write it alone (latchd)");
	return latch_errf(err, errlen, -errno, "ledger %s: flock: %s", path, strerror(errno));
}

struct ledger *budget_ledger_open(const char *path, bool readonly, bool sync_full, uid_t owner, int lock, char *err,
				  size_t errlen)
{
	struct ledger *l;
	char *msg = NULL, pragmas[256];
	int rc, e;

	e = check_paths(path, readonly, owner, err, errlen);
	if (e) {
		errno = -e;
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		latch_errf(err, errlen, -ENOMEM, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	snprintf(l->path, sizeof(l->path), "%s", path);
	e = take_lock(l, path, readonly ? 0 : lock, err, errlen);
	if (e) {
		budget_ledger_close(l);
		errno = -e;
		return NULL;
	}
	/* NOMUTEX: a struct budget belongs to one thread (budget.h) */
	rc = sqlite3_open_v2(path, &l->db,
			     (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOFOLLOW |
				     SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(l->db, 10000);
	if (!readonly) {
		/* journal_mode is kept in the file; synchronous belongs to the connection */
		/*
		 * A checkpoint fsyncs: left to sqlite it lands on whichever request
		 * fills 1000 pages.  budget_tick() runs it from latchd's tick;
		 * the automatic one is only a backstop (about 40 MB of WAL).
		 */
		snprintf(pragmas, sizeof(pragmas),
			 "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA wal_autocheckpoint=%d;"
			 " PRAGMA journal_size_limit=%d;",
			 sync_full ? "FULL" : "NORMAL", LEDGER_AUTOCHECKPOINT_PAGES, 32 << 20);
		rc = sqlite3_exec(l->db, pragmas, NULL, NULL, &msg);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(l->db, schema, NULL, NULL, &msg);
		if (rc != SQLITE_OK)
			goto fail;
	}
	for (int q = 0; q < Q_N; q++) {
		if (readonly && (q == Q_INSERT || q == Q_PRUNE))
			continue;
		rc = sqlite3_prepare_v3(l->db, sql[q], -1, SQLITE_PREPARE_PERSISTENT, &l->st[q], NULL);
		if (rc != SQLITE_OK)
			goto fail;
	}
	for (int i = 0; !readonly && i < N_BATCH; i++) {
		rc = prepare_many(l, batch_sizes[i], &l->many[i]);
		if (rc != SQLITE_OK)
			goto fail;
	}
	return l;
fail:
	latch_errf(err, errlen, -EIO, "ledger %s: %s", path, msg ? msg : l->db ? sqlite3_errmsg(l->db) : "cannot open");
	sqlite3_free(msg);
	e = latch_sqlite_errno(rc);
	budget_ledger_close(l);
	errno = e ? -e : EIO;
	return NULL;
}

void budget_ledger_close(struct ledger *l)
{
	if (!l)
		return;
	budget_checkpointer_stop(l->ckpt);
	for (int q = 0; q < Q_N; q++)
		sqlite3_finalize(l->st[q]);
	for (int i = 0; i < N_BATCH; i++)
		sqlite3_finalize(l->many[i]);
	sqlite3_close(l->db);
	if (l->lock_fd >= 0)
		close(l->lock_fd); /* after sqlite: its fcntl locks are gone with its descriptors */
	free(l);
}

/* Run a statement that returns no rows we want. */
static int step_done(struct ledger *l, int q, const char *what)
{
	int rc = sqlite3_step(l->st[q]);

	sqlite3_reset(l->st[q]);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return fail(l, rc, what);
	return 0;
}

int budget_ledger_begin(struct ledger *l)
{
	return step_done(l, Q_BEGIN, "begin");
}

int budget_ledger_commit(struct ledger *l)
{
	int ret = step_done(l, Q_COMMIT, "commit");

	if (ret)
		budget_ledger_rollback(l);
	return ret;
}

void budget_ledger_rollback(struct ledger *l)
{
	if (!sqlite3_get_autocommit(l->db))
		step_done(l, Q_ROLLBACK, "rollback");
}

static int64_t col_cap(sqlite3_stmt *s, int c)
{
	return sqlite3_column_type(s, c) == SQLITE_NULL ? BUDGET_NO_CAP : sqlite3_column_int64(s, c);
}

int budget_ledger_each_after(struct ledger *l, int64_t after, int (*fn)(const struct ledger_row *r, void *arg),
			     void *arg)
{
	sqlite3_stmt *s = l->st[Q_AFTER];
	int rc, ret = 0;

	sqlite3_bind_int64(s, 1, after);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct ledger_row r = {
			.id = sqlite3_column_int64(s, 0),
			.time_ns = (uint64_t)sqlite3_column_int64(s, 1),
			.request = sqlite3_column_int64(s, 2),
			.settle = !strcmp((const char *)sqlite3_column_text(s, 3), "settle"),
			.sandbox = (const char *)sqlite3_column_text(s, 4),
			.provider = (const char *)sqlite3_column_text(s, 5),
			.model = (const char *)sqlite3_column_text(s, 6),
			.micros = sqlite3_column_int64(s, 7),
			.how = (const char *)sqlite3_column_text(s, 8),
			.caps = { col_cap(s, 9), col_cap(s, 10), col_cap(s, 11) },
		};

		ret = fn(&r, arg);
		if (ret)
			break;
	}
	if (!ret && rc != SQLITE_DONE)
		ret = fail(l, rc, "read the ledger");
	sqlite3_reset(s);
	return ret;
}

/* The time of the first row at or after id; false when there is none. */
static bool time_at(struct ledger *l, int64_t id, uint64_t *t)
{
	sqlite3_stmt *s = l->st[Q_AT];
	bool found;

	sqlite3_bind_int64(s, 1, id);
	found = sqlite3_step(s) == SQLITE_ROW;
	if (found)
		*t = (uint64_t)sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return found;
}

int64_t budget_ledger_first_since(struct ledger *l, uint64_t time_ns)
{
	sqlite3_stmt *s = l->st[Q_RANGE];
	int64_t lo = 0, hi = 0, mid;
	uint64_t t;

	if (sqlite3_step(s) == SQLITE_ROW) {
		lo = sqlite3_column_int64(s, 0);
		hi = sqlite3_column_int64(s, 1) + 1; /* past the last row: "none", which counts as late enough */
	}
	sqlite3_reset(s);
	if (hi <= 1)
		return 1;
	/* the smallest id whose first row at or after it is recent enough (that only grows with id) */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (!time_at(l, mid, &t) || t >= time_ns)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

int64_t budget_ledger_last_id(struct ledger *l)
{
	sqlite3_stmt *s = l->st[Q_MAX];
	int64_t id = 0;

	if (sqlite3_step(s) == SQLITE_ROW)
		id = sqlite3_column_int64(s, 0); /* NULL (empty) reads as 0 */
	sqlite3_reset(s);
	return id;
}

uint64_t budget_ledger_last_time(struct ledger *l)
{
	sqlite3_stmt *s = l->st[Q_LAST];
	uint64_t t = 0;

	if (sqlite3_step(s) == SQLITE_ROW)
		t = (uint64_t)sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return t;
}

static void bind_opt(sqlite3_stmt *s, int c, int64_t v, bool present)
{
	if (present && v >= 0)
		sqlite3_bind_int64(s, c, v);
	else
		sqlite3_bind_null(s, c);
}

/* Row r's values as parameters base+1 .. base+LEDGER_COLS (Q_INSERT's order). */
static void bind_row(sqlite3_stmt *s, int base, const struct ledger_row *r)
{
	sqlite3_bind_int64(s, base + 1, (int64_t)r->time_ns);
	sqlite3_bind_int64(s, base + 18, r->id);
	sqlite3_bind_int64(s, base + 2, r->settle ? r->request : r->id); /* a reservation is its own request */
	sqlite3_bind_text(s, base + 3, r->settle ? "settle" : "reserve", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, base + 4, r->sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, base + 5, r->provider, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, base + 6, r->model, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, base + 7, r->micros);
	sqlite3_bind_text(s, base + 8, r->how, -1, SQLITE_STATIC);
	bind_opt(s, base + 9, r->caps.requests_per_hour, !r->settle);
	bind_opt(s, base + 10, r->caps.requests_per_day, !r->settle);
	bind_opt(s, base + 11, r->caps.micros_per_day, !r->settle);
	bind_opt(s, base + 12, r->tokens.input, r->settle);
	bind_opt(s, base + 13, r->tokens.cached, r->settle);
	bind_opt(s, base + 14, r->tokens.cache_write, r->settle);
	bind_opt(s, base + 15, r->tokens.cache_write_1h, r->settle);
	bind_opt(s, base + 16, r->tokens.output, r->settle);
	if (r->owner)
		sqlite3_bind_text(s, base + 17, r->owner, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, base + 17);
}

/* INSERT of n rows: Q_INSERT's columns, then n groups of LEDGER_COLS parameters. */
static int prepare_many(struct ledger *l, int n, sqlite3_stmt **st)
{
	const char *values = strstr(sql[Q_INSERT], " VALUES");
	size_t head = (size_t)(values - sql[Q_INSERT]), len = head + 16 + (size_t)n * LEDGER_COLS * 8;
	char *q = malloc(len);
	int rc, at;

	if (!q)
		return SQLITE_NOMEM;
	at = snprintf(q, len, "%.*s VALUES ", (int)head, sql[Q_INSERT]);
	for (int r = 0; r < n; r++) {
		int b = r * LEDGER_COLS;

		/* Q_INSERT's order: the id (?18) first */
		at += snprintf(q + at, len - at, "%s(?%d", r ? "," : "", b + 18);
		for (int c = 1; c < LEDGER_COLS; c++)
			at += snprintf(q + at, len - at, ",?%d", b + c);
		at += snprintf(q + at, len - at, ")");
	}
	rc = sqlite3_prepare_v3(l->db, q, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
	free(q);
	return rc;
}

int budget_ledger_insert(struct ledger *l, struct ledger_row *r, const char *owner)
{
	r->owner = owner;
	return budget_ledger_insert_rows(l, r, 1);
}

int budget_ledger_insert_rows(struct ledger *l, struct ledger_row *rows, size_t n)
{
	size_t done = 0;

	while (done < n) {
		int i = 0, rc;
		sqlite3_stmt *s;

		while ((size_t)batch_sizes[i] > n - done)
			i++;
		s = l->many[i];
		for (int r = 0; r < batch_sizes[i]; r++)
			bind_row(s, r * LEDGER_COLS, &rows[done + r]);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
		if (rc != SQLITE_DONE)
			return fail(l, rc, "write the ledger");
		for (int r = 0; r < batch_sizes[i]; r++)
			if (!rows[done + r].settle)
				rows[done + r].request = rows[done + r].id;
		done += (size_t)batch_sizes[i];
	}
	return 0;
}

int budget_ledger_owner_of(struct ledger *l, int64_t id, char *buf, size_t len)
{
	sqlite3_stmt *s = l->st[Q_OWNER];
	int ret = -ENOENT;

	buf[0] = '\0';
	sqlite3_bind_int64(s, 1, id);
	if (sqlite3_step(s) == SQLITE_ROW) {
		snprintf(buf, len, "%s",
			 sqlite3_column_type(s, 0) == SQLITE_NULL ? "" : (const char *)sqlite3_column_text(s, 0));
		ret = 0;
	}
	sqlite3_reset(s);
	return ret;
}

int budget_ledger_checkpoint(struct ledger *l)
{
	int rc;

	if (l->ckpt) {
		budget_checkpointer_kick(l->ckpt);
		return 0;
	}
	rc = sqlite3_wal_checkpoint_v2(l->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	return rc == SQLITE_OK || rc == SQLITE_BUSY ? 0 : fail(l, rc, "checkpoint");
}

int budget_ledger_checkpoint_thread(struct ledger *l, char *err, size_t errlen)
{
	l->ckpt = budget_checkpointer_start(l->db, l->path, err, errlen);
	return l->ckpt ? 0 : -EIO;
}

int budget_ledger_prune(struct ledger *l, uint64_t time_ns)
{
	sqlite3_bind_int64(l->st[Q_PRUNE], 1, budget_ledger_first_since(l, time_ns));
	return step_done(l, Q_PRUNE, "prune the ledger");
}

/* ---- owners: which process holds an open reservation ---- */

static void boot_id(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	buf[0] = '\0';
	if (f) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = '\0';
		fclose(f);
	}
}

/*
 * From /proc/PID/stat: when the process started (field 22, clock ticks since
 * boot), 0 when it is gone or a zombie (killed, not yet reaped: it holds
 * nothing any more).
 */
static unsigned long long start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	FILE *f;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')'); /* the command name may hold blanks and parentheses */
	if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
		return 0;
	for (field = 2, p++; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (sscanf(p, "%llu", &t) != 1)
		return 0;
	return t;
}

void budget_ledger_self(char *buf, size_t len)
{
	char boot[64];

	boot_id(boot, sizeof(boot));
	snprintf(buf, len, "%s:%d:%llu", boot, (int)getpid(), start_time(getpid()));
}

bool budget_ledger_owner_alive(const char *owner)
{
	char boot[64], mine[64];
	unsigned long long start;
	int pid;
	const char *colon = strchr(owner, ':');

	if (!colon || (size_t)(colon - owner) >= sizeof(boot))
		return false;
	snprintf(boot, sizeof(boot), "%.*s", (int)(colon - owner), owner);
	boot_id(mine, sizeof(mine));
	if (strcmp(boot, mine) || sscanf(colon + 1, "%d:%llu", &pid, &start) != 2 || pid <= 0)
		return false; /* another boot: every process of it is gone */
	if (kill(pid, 0) && errno == ESRCH)
		return false;
	/* the same pid reused by another process is not the owner */
	return start && start_time(pid) == start;
}
