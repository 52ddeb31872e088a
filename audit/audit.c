// SPDX-License-Identifier: GPL-2.0-only
/*
 * audit.c - the hash-chained audit log in sqlite, with its rate limit.
 *
 * Appends take sqlite's write lock (BEGIN IMMEDIATE) before reading the last
 * entry, so latchd and a CLI writing at once still build one chain.  The
 * database runs in WAL mode with synchronous=FULL: every commit fsyncs the
 * WAL, so an entry reported as written survives a crash of latchd and of the
 * machine.  NORMAL would survive a crash of latchd only (the WAL sits in the
 * page cache) and could lose the last entries to a power cut; the rate limit
 * bounds the fsyncs, so the stronger promise costs little.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "audit/log.h"
#include "common/common.h"

const char audit_genesis[AUDIT_HASH_HEX + 1] = "0000000000000000000000000000000000000000000000000000000000000000";

/*
 * The rate limit is a sliding log: the times of the last `rate` entries
 * written for one (sandbox, kind), in a ring.  A fixed minute would let 240
 * through across a boundary; the log keeps "at most rate in any 60 s" exact
 * for rate * 8 bytes per pair.
 */
struct rl_slot {
	struct rl_slot *next;
	uint64_t suppressed; /* counted since the last entry written */
	unsigned int head, count;
	uint64_t *times;
	char key[]; /* "sandbox\0kind\0" */
};

static uint64_t realtime_ns(void *arg)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(const struct audit_log *log)
{
	return log->opts.clock(log->opts.clock_arg);
}

static int db_fail(struct audit_log *log, int rc, const char *what)
{
	snprintf(log->errmsg, sizeof(log->errmsg), "%s: %s", what, sqlite3_errmsg(log->db));
	return latch_sqlite_errno(rc);
}

int audit_db_fail(struct audit_log *log, int rc, const char *what)
{
	return db_fail(log, rc, what);
}

const char *audit_error(const struct audit_log *log)
{
	return log && *log->errmsg ? log->errmsg : "no error";
}

/*
 * Config hygiene (STYLE.md): whoever can write the file or its directory can
 * rewrite history, so both must belong to the owner and be writable by no one
 * else.  A symlink is refused too: it would move the log somewhere unchecked.
 */
static int check_owner(const char *path, const struct stat *st, uid_t owner, int is_dir, char *err, size_t errlen)
{
	if (!is_dir && !S_ISREG(st->st_mode))
		return latch_errf(err, errlen, -1,
				  "audit log %s is not a regular file; remove it and let latch create it", path);
	if (st->st_uid != owner)
		return latch_errf(err, errlen, -1, "audit log %s %s is owned by uid %u, not %u; fix: chown %u %s",
				  is_dir ? "directory" : "file", path, (unsigned)st->st_uid, (unsigned)owner,
				  (unsigned)owner, path);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return latch_errf(err, errlen, -1,
				  "audit log %s %s is group- or world-writable (mode %04o); fix: chmod go-w %s",
				  is_dir ? "directory" : "file", path, (unsigned)(st->st_mode & 07777), path);
	return 0;
}

static int check_paths(const char *path, const struct audit_opts *o, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct stat st;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		latch_errf(err, errlen, -1, "audit log path %s is too long", path);
		return -ENAMETOOLONG;
	}
	dirname(dir);
	if (stat(dir, &st)) {
		int e = errno;

		if (e != ENOENT || o->readonly) {
			latch_errf(err, errlen, -1, "audit log directory %s: %s", dir, strerror(e));
			return -e;
		}
		e = latch_mkdirs(dir, 0755); /* a fresh LATCH_ROOT has no var/lib yet */
		if (e) {
			latch_errf(err, errlen, -1, "audit log directory %s: mkdir: %s", dir, strerror(-e));
			return e;
		}
		if (stat(dir, &st)) {
			e = errno;
			latch_errf(err, errlen, -1, "audit log directory %s: %s", dir, strerror(e));
			return -e;
		}
	}
	if (!S_ISDIR(st.st_mode)) {
		latch_errf(err, errlen, -1, "audit log directory %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (check_owner(dir, &st, o->owner, 1, err, errlen))
		return -EPERM;
	if (lstat(path, &st)) {
		int e = errno, fd;

		if (e != ENOENT || o->readonly) {
			latch_errf(err, errlen, -1,
				   e == ENOENT ? "no audit log at %s yet: nothing has been recorded" :
						 "audit log %s: %s",
				   path, strerror(e));
			return -e;
		}
		/* Create it ourselves so its mode never depends on the umask. */
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno != EEXIST) {
			e = errno;
			latch_errf(err, errlen, -1, "audit log %s: create: %s", path, strerror(e));
			return -e;
		}
		if (fd >= 0)
			close(fd);
		if (lstat(path, &st)) {
			e = errno;
			latch_errf(err, errlen, -1, "audit log %s: %s", path, strerror(e));
			return -e;
		}
	}
	if (check_owner(path, &st, o->owner, 0, err, errlen))
		return -EPERM;
	return 0;
}

static const char schema[] = "CREATE TABLE IF NOT EXISTS entries ("
			     " id INTEGER PRIMARY KEY,"
			     " time_ns INTEGER NOT NULL,"
			     " sandbox TEXT NOT NULL,"
			     " kind TEXT NOT NULL,"
			     " decision TEXT NOT NULL,"
			     " reason TEXT NOT NULL,"
			     " fields TEXT NOT NULL,"
			     " prev_hash TEXT NOT NULL,"
			     " hash TEXT NOT NULL);"
			     "CREATE INDEX IF NOT EXISTS entries_sandbox ON entries (sandbox, kind, time_ns);";

struct audit_log *audit_open(const char *path, const struct audit_opts *opts, char *err, size_t errlen)
{
	static const struct audit_opts defaults;
	struct audit_log *log;
	char *msg = NULL;
	int rc, e;

	if (!opts)
		opts = &defaults;
	e = check_paths(path, opts, err, errlen);
	if (e) {
		errno = -e;
		return NULL;
	}
	log = calloc(1, sizeof(*log));
	if (!log) {
		latch_errf(err, errlen, -1, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	log->opts = *opts;
	if (!log->opts.clock)
		log->opts.clock = realtime_ns;
	if (snprintf(log->path, sizeof(log->path), "%s", path) >= (int)sizeof(log->path) ||
	    audit_anchor_path_of(path, opts, log->anchor_path, sizeof(log->anchor_path))) {
		latch_errf(err, errlen, -1, "audit log path %s is too long", path);
		free(log);
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (!log->opts.rate)
		log->opts.rate = AUDIT_RATE_DEFAULT;

	rc = sqlite3_open_v2(path, &log->db,
			     (opts->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOFOLLOW |
				     SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		latch_errf(err, errlen, -1, "audit log %s: %s", path,
			   log->db ? sqlite3_errmsg(log->db) : "cannot open");
		e = latch_sqlite_errno(rc);
		goto fail_db;
	}
	sqlite3_busy_timeout(log->db, 5000);
	if (!opts->readonly) {
		/* journal_mode=WAL is stored in the file; synchronous is per connection. */
		rc = sqlite3_exec(log->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL, &msg);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(log->db, schema, NULL, NULL, &msg);
		if (rc != SQLITE_OK) {
			latch_errf(err, errlen, -1, "audit log %s: %s", path, msg ? msg : sqlite3_errmsg(log->db));
			sqlite3_free(msg);
			e = latch_sqlite_errno(rc);
			goto fail_db;
		}
	}
	return log;

fail_db:
	sqlite3_close(log->db);
	free(log);
	errno = -e;
	return NULL;
}

void audit_close(struct audit_log *log)
{
	if (!log)
		return;
	audit_anchor(log); /* the head at shutdown */
	for (int b = 0; b < RL_BUCKETS; b++) {
		struct rl_slot *s = log->rl[b], *n;

		for (; s; s = n) {
			n = s->next;
			free(s->times);
			free(s);
		}
	}
	sqlite3_close(log->db);
	free(log);
}

/*
 * The canonical form that is hashed: a version tag, then each column as
 * "<length>:<bytes>;" in table order, with prev_hash last.  Lengths make it
 * unambiguous: no choice of text in one column can imitate another split.
 */
static void hash_put(EVP_MD_CTX *c, const char *s)
{
	char len[24];

	if (!s)
		s = "";
	snprintf(len, sizeof(len), "%zu:", strlen(s));
	EVP_DigestUpdate(c, len, strlen(len));
	EVP_DigestUpdate(c, s, strlen(s));
	EVP_DigestUpdate(c, ";", 1);
}

void audit_entry_hash(const struct audit_entry *e, const char *prev_hash, char out[AUDIT_HASH_HEX + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char num[24];
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	EVP_DigestUpdate(c, "latch-audit-v1;", 15);
	snprintf(num, sizeof(num), "%lld", (long long)e->id);
	hash_put(c, num);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)e->time_ns);
	hash_put(c, num);
	hash_put(c, e->sandbox);
	hash_put(c, e->kind);
	hash_put(c, e->decision);
	hash_put(c, e->reason);
	hash_put(c, e->fields);
	hash_put(c, prev_hash);
	EVP_DigestFinal_ex(c, md, &mdlen);
	EVP_MD_CTX_free(c);
	for (unsigned int i = 0; i < mdlen && i < AUDIT_HASH_HEX / 2; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
	out[AUDIT_HASH_HEX] = '\0';
}

/* Tokens are codes that scripts match on: short, lower-case, no spaces. */
static const bool token_chars[256] = {
	['a' ... 'z'] = true, ['0' ... '9'] = true, ['-'] = true, ['_'] = true, ['.'] = true, [':'] = true,
};

static inline bool token_char(unsigned char ch)
{
	return token_chars[ch];
}

static int token_ok(const char *s)
{
	size_t n = 0;

	if (!s)
		return 0;
	for (; s[n]; n++)
		if (n == AUDIT_TOKEN_MAX || !token_char(s[n]))
			return 0;
	return n > 0;
}

/*
 * The rate limit's key of (sandbox, kind), "sandbox\0kind\0", into key, and
 * its FNV-1a hash; both checked as tokens on the way, in one pass (the
 * broker asks audit_room() several times a request).  Returns the key's
 * length, or 0 when either is not a token.
 */
static size_t rl_key(const char *sandbox, const char *kind, char key[2 * AUDIT_TOKEN_MAX + 2], uint32_t *hash)
{
	const char *part[2] = { sandbox, kind };
	uint32_t h = LATCH_FNV1A_INIT;
	char *out = key;

	for (int k = 0; k < 2; k++) {
		const unsigned char *p = (const unsigned char *)part[k];
		const unsigned char *end;

		if (!p || !*p)
			return 0;
		end = p + AUDIT_TOKEN_MAX;
		for (; *p; p++) {
			if (p == end || !token_char(*p))
				return 0;
			*out++ = (char)*p;
			h = (h ^ *p) * 16777619u; /* latch_fnv1a's step */
		}
		*out++ = '\0';
		h *= 16777619u; /* the NUL: h ^ 0 */
	}
	*hash = h;
	return (size_t)(out - key);
}

static struct rl_slot *rl_get(struct audit_log *log, const char *key, size_t len, uint32_t hash)
{
	unsigned int b = hash % RL_BUCKETS;
	struct rl_slot *s;

	for (s = log->rl[b]; s; s = s->next)
		if (!memcmp(s->key, key, len))
			return s;
	s = calloc(1, sizeof(*s) + len);
	if (!s)
		return NULL;
	s->times = calloc(log->opts.rate, sizeof(*s->times));
	if (!s->times) {
		free(s);
		return NULL;
	}
	memcpy(s->key, key, len);
	s->next = log->rl[b];
	log->rl[b] = s;
	return s;
}

/* Room for one more entry now?  The oldest of the last `rate` must be a window old. */
static int rl_room(const struct audit_log *log, const struct rl_slot *s, uint64_t now)
{
	uint64_t oldest;

	if (s->count < log->opts.rate)
		return 1;
	oldest = s->times[s->head];
	/* a clock stepped back leaves the window as it was, never wider */
	return now >= oldest && now - oldest >= AUDIT_WINDOW_NS;
}

static void rl_record(const struct audit_log *log, struct rl_slot *s, uint64_t now)
{
	if (s->count < log->opts.rate) {
		s->times[(s->head + s->count) % log->opts.rate] = now;
		s->count++;
	} else {
		s->times[s->head] = now;
		s->head = (s->head + 1) % log->opts.rate;
	}
	s->suppressed = 0;
}

/* The fields as stored: compact with sorted keys, so equal objects hash alike. */
static char *fields_text(struct audit_log *log, const char *in, uint64_t suppressed)
{
	json_error_t jerr;
	json_t *o = in ? json_loads(in, JSON_REJECT_DUPLICATES, &jerr) : json_object();
	char *s;

	if (!o || !json_is_object(o)) {
		snprintf(log->errmsg, sizeof(log->errmsg), "fields must be a JSON object%s%s", o ? "" : ": ",
			 o ? "" : jerr.text);
		json_decref(o);
		return NULL;
	}
	if (suppressed)
		json_object_set_new(o, "suppressed", json_integer((json_int_t)suppressed));
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (s && strlen(s) > AUDIT_FIELDS_MAX) {
		snprintf(log->errmsg, sizeof(log->errmsg), "fields are %zu bytes, more than %d", strlen(s),
			 AUDIT_FIELDS_MAX);
		free(s);
		return NULL;
	}
	return s;
}

static int insert_chained(struct audit_log *log, struct audit_entry *e)
{
	static const char last_sql[] = "SELECT id, hash FROM entries ORDER BY id DESC LIMIT 1";
	static const char ins_sql[] = "INSERT INTO entries (id, time_ns, sandbox, kind, decision, reason, fields, "
				      "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
	char prev[AUDIT_HASH_HEX + 1], hash[AUDIT_HASH_HEX + 1];
	sqlite3_stmt *st = NULL;
	int rc, ret;

	/* IMMEDIATE: the write lock is ours before we read the tail we chain to. */
	rc = sqlite3_exec(log->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return db_fail(log, rc, "begin");
	rc = sqlite3_prepare_v2(log->db, last_sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		ret = db_fail(log, rc, "read the last entry");
		goto rollback;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const unsigned char *h = sqlite3_column_text(st, 1);

		e->id = sqlite3_column_int64(st, 0) + 1;
		snprintf(prev, sizeof(prev), "%s", h ? (const char *)h : "");
	} else if (rc == SQLITE_DONE) {
		e->id = 1;
		memcpy(prev, audit_genesis, sizeof(prev));
	} else {
		ret = db_fail(log, rc, "read the last entry");
		goto rollback;
	}
	sqlite3_finalize(st);
	st = NULL;

	audit_entry_hash(e, prev, hash);
	rc = sqlite3_prepare_v2(log->db, ins_sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		ret = db_fail(log, rc, "insert");
		goto rollback;
	}
	sqlite3_bind_int64(st, 1, e->id);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)e->time_ns);
	sqlite3_bind_text(st, 3, e->sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, e->kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, e->decision, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, e->reason, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, e->fields, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, prev, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 9, hash, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		ret = db_fail(log, rc, "insert");
		goto rollback;
	}
	sqlite3_finalize(st);
	st = NULL;
	rc = sqlite3_exec(log->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		ret = db_fail(log, rc, "commit");
		goto rollback;
	}
	return 0;

rollback:
	sqlite3_finalize(st);
	sqlite3_exec(log->db, "ROLLBACK", NULL, NULL, NULL);
	e->id = 0;
	return ret;
}

/*
 * The rate limit's word on one more (sandbox, kind) entry: 0 with its slot,
 * or -EAGAIN (counted), -ENOMEM, -EINVAL (not tokens).  *now is read only
 * when the window is full (0: not read yet).
 */
static int rl_admit(struct audit_log *log, const char *sandbox, const char *kind, uint64_t *now, struct rl_slot **slot)
{
	char key[2 * AUDIT_TOKEN_MAX + 2];
	uint32_t hash;
	size_t len = rl_key(sandbox, kind, key, &hash);
	struct rl_slot *s;

	if (!len)
		return -EINVAL;
	s = rl_get(log, key, len, hash);
	if (!s)
		return -ENOMEM;
	if (s->count >= log->opts.rate && !*now)
		*now = now_ns(log);
	if (!rl_room(log, s, *now)) {
		s->suppressed++;
		return -EAGAIN;
	}
	*slot = s;
	return 0;
}

int audit_room(struct audit_log *log, const char *sandbox, const char *kind)
{
	struct rl_slot *s;
	uint64_t now = 0;

	return log && rl_admit(log, sandbox, kind, &now, &s) == 0;
}

int audit_append(struct audit_log *log, struct audit_entry *e)
{
	struct audit_entry w;
	struct rl_slot *s;
	uint64_t now;
	char *fields;
	int ret;

	if (!log || !e)
		return -EINVAL;
	if (!token_ok(e->sandbox) || !token_ok(e->kind) || !token_ok(e->decision) || !token_ok(e->reason)) {
		snprintf(log->errmsg, sizeof(log->errmsg),
			 "sandbox, kind, decision and reason must be 1-%d characters of a-z, 0-9, '-', '_', '.', ':'",
			 AUDIT_TOKEN_MAX);
		return -EINVAL;
	}
	if (log->opts.readonly) {
		snprintf(log->errmsg, sizeof(log->errmsg), "the log was opened read-only");
		return -EROFS;
	}
	now = now_ns(log);
	ret = rl_admit(log, e->sandbox, e->kind, &now, &s);
	if (ret)
		return ret;
	fields = fields_text(log, e->fields, s->suppressed);
	if (!fields)
		return -EINVAL;
	w = *e;
	w.time_ns = now;
	w.fields = fields;
	ret = insert_chained(log, &w);
	free(fields);
	if (ret)
		return ret;
	/* only a written entry uses up the rate and carries the count away */
	rl_record(log, s, now);
	e->id = w.id;
	e->time_ns = now;
	audit_anchor_after_append(log, w.id, now);
	return 0;
}

static int parse_utc(const char *s, uint64_t *out)
{
	static const char *const fmts[] = {
		"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%MZ",
		"%Y-%m-%dT%H:%M",     "%Y-%m-%d %H:%M",	   "%Y-%m-%d"
	};

	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		struct tm tm = { 0 };
		const char *end = strptime(s, fmts[i], &tm);
		time_t t;

		if (!end || *end)
			continue;
		t = timegm(&tm);
		if (t < 0)
			return -EINVAL;
		*out = (uint64_t)t * 1000000000ULL;
		return 0;
	}
	return -EINVAL;
}

int audit_parse_since(const char *s, uint64_t now_ns, uint64_t *out)
{
	unsigned long long v;
	uint64_t ms;
	char *end;

	if (!s || !*s)
		return -EINVAL;
	if (*s == '@') {
		if (s[1] < '0' || s[1] > '9')
			return -EINVAL;
		errno = 0;
		v = strtoull(s + 1, &end, 10);
		if (errno || *end || v > UINT64_MAX / 1000000000ULL)
			return -EINVAL;
		*out = v * 1000000000ULL;
		return 0;
	}
	if (strchr(s, '-'))
		return parse_utc(s, out);
	/*
	 * the one duration grammar (common/units.c): 30s, 15m, 2h, 7d ago; but a
	 * bare number is refused here, where 1700000000 would read as 54 years
	 * ago rather than the epoch second it looks like (that is @1700000000)
	 */
	if (s[strlen(s) - 1] >= '0' && s[strlen(s) - 1] <= '9')
		return -EINVAL;
	if (latch_parse_duration_ms("--since", s, 0, UINT64_MAX / 1000000ULL, &ms, NULL, 0))
		return -EINVAL;
	v = ms * 1000000ULL;
	*out = v > now_ns ? 0 : now_ns - v;
	return 0;
}
