/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * audit.h - the audit log: one sqlite file (WAL mode) of hash-chained entries.
 *
 * Every decision latch makes (a grant, a revoke, an attach, a refusal, a
 * kernel deny) becomes one entry.  Each entry's hash covers all its columns
 * and the previous entry's hash, so audit_verify() can name the first entry
 * that was edited, deleted or moved by hand.  The chain's head is anchored
 * outside the database (anchor.c): within AUDIT_ANCHOR_PERIOD_NS (a second)
 * of any append, at most once per period, and at close, the id and hash of
 * the newest entry go to the systemd journal (root's entries there carry a _UID the writer can't
 * forge) and to a file beside the log, so audit_verify() also names a cut
 * tail, and a suffix rewritten before an anchor.  An entry reported as written is
 * on disk (synchronous=FULL), and each (sandbox, kind) may write at most
 * AUDIT_RATE_DEFAULT entries in any 60 s; the rest are counted and the count
 * rides on the next entry written for that pair as the field "suppressed".
 *
 * The log records enforcement; it never takes part in it.  Callers that
 * change policy do so first and treat a failed append as a warning.
 */
#ifndef LATCH_AUDIT_H
#define LATCH_AUDIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AUDIT_RATE_DEFAULT 120 /* entries per (sandbox, kind) per window */
#define AUDIT_WINDOW_NS 60000000000ULL /* the window: any 60 s, sliding */
#define AUDIT_TOKEN_MAX 64 /* sandbox, kind, decision, reason */
#define AUDIT_FIELDS_MAX 8192 /* the fields' JSON text, compact */
#define AUDIT_HASH_HEX 64 /* SHA-256 in lower-case hex */
/*
 * An append is anchored within one period, and anchors are at most one per
 * period: the first append after a quiet period is anchored at once, later
 * ones by audit_tick() when the period since the last anchor is over.  One
 * journal write a second bounds what a flood of appends costs; the entries
 * of the last second before a SIGKILL are what a cut can still take.
 */
#define AUDIT_ANCHOR_PERIOD_NS 1000000000ULL
/* The journal's MESSAGE_ID of an anchor: `journalctl MESSAGE_ID=... _UID=0` lists them. */
#define AUDIT_ANCHOR_MESSAGE_ID "6c617463686175646974616e63686f72"

struct audit_log;

struct audit_opts {
	/*
	 * Wall-clock time in ns since the epoch (UTC); NULL means
	 * CLOCK_REALTIME.  Both the entries' time and the rate limit read it,
	 * so a test can step through a window without sleeping.
	 */
	uint64_t (*clock)(void *arg);
	void *clock_arg;
	/* Owner the file and its directory must have: 0 (root) unless a test says otherwise. */
	uid_t owner;
	/* Entries per (sandbox, kind) per window; 0 means AUDIT_RATE_DEFAULT. */
	unsigned int rate;
	/* Open an existing log for reading only: never create it, -ENOENT when it is missing. */
	int readonly;
	/* The anchor period (0: AUDIT_ANCHOR_PERIOD_NS); tests stretch it to keep a head unanchored. */
	uint64_t anchor_period_ns;
	/* The file anchor; NULL: the log's path with ".anchor" appended. */
	const char *anchor_file;
	/* Neither write nor read the journal (unit tests: the host's journal is not theirs). */
	int no_journal;
};

struct audit_entry {
	int64_t id; /* set by audit_append(); 1, 2, 3... with no gaps */
	uint64_t time_ns; /* set by audit_append() from the clock */
	const char *sandbox;
	const char *kind; /* "egress", "attach", "dns", "broker", "kernel"... */
	const char *decision; /* "allow", "deny", "revoke", "attach"... */
	const char *reason; /* stable code, e.g. "cli.egress.allow"; never free text */
	const char *fields; /* a JSON object's text; NULL means {} */
	/* Only in entries handed to an audit_query() callback: */
	const char *prev_hash;
	const char *hash;
};

struct audit_filter {
	const char *sandbox; /* NULL: every sandbox */
	const char *kind; /* NULL: every kind */
	uint64_t since_ns; /* 0: from the start */
	int64_t after_id; /* 0: from the start; else only entries with a larger id (--follow) */
};

struct audit_verify_result {
	int64_t checked; /* entries walked */
	int64_t first_bad_id; /* 0 when the chain is whole */
	char why[200]; /* what is wrong at first_bad_id */
	int64_t first_id; /* where the chain starts: 1, or the first entry after a prune */
	/* the anchors read (journal and file), and the newest of them */
	int anchors;
	int64_t anchored_id; /* 0: no anchor could be read */
	uint64_t anchored_time_ns; /* when it was anchored (the journal's own time for a journal anchor) */
	char anchored_by[16]; /* "journal" or "file" */
};

/*
 * Open (creating when allowed) the log at path.  The file and its directory
 * must be owned by opts->owner and not group- or world-writable; otherwise
 * NULL with errno EPERM and one line in err naming the path and the fix.
 */
struct audit_log *audit_open(const char *path, const struct audit_opts *opts, char *err, size_t errlen);
void audit_close(struct audit_log *log);

/*
 * Append one entry and fill in its id and time.  0 when it is durably
 * written; -EAGAIN when the (sandbox, kind) is over its rate, so the entry
 * was only counted; -EINVAL for a bad token or fields; other -errno when the
 * database failed (audit_error() says how).
 */
int audit_append(struct audit_log *log, struct audit_entry *e);
/*
 * Would an entry of (sandbox, kind) be written now?  1: yes, append it; 0:
 * no, and it has been counted as suppressed, exactly as audit_append() would
 * have counted it (so a busy caller skips building the entry at all).
 */
int audit_room(struct audit_log *log, const char *sandbox, const char *kind);

/*
 * Call fn for each entry that passes the filter, oldest first.  A non-zero
 * return from fn stops the walk and is returned; otherwise the number of
 * entries seen, or -errno.
 */
int audit_query(struct audit_log *log, const struct audit_filter *f, int (*fn)(const struct audit_entry *e, void *arg),
		void *arg);

/*
 * Walk the whole chain, then hold it against every anchor that can be read.
 * 0 when it is whole and every anchored entry is in it with the anchored
 * hash; -EBADMSG with res naming the first broken entry, or the cut ("the log
 * ends at entry 812, but the journal anchored entry 840 at ...") or the
 * rewritten entry; other -errno when the database could not be read.
 */
int audit_verify(struct audit_log *log, struct audit_verify_result *res);
/*
 * The same against a log that is missing altogether: -EBADMSG when an anchor
 * says it held entries (it was deleted), else 0.  path is the log's path,
 * as the writers opened it (anchors are kept per path).
 */
int audit_verify_missing(const char *path, const struct audit_opts *opts, struct audit_verify_result *res);

/*
 * Anchor the head now, if it moved since this process last anchored it.
 * 0, or -errno when neither the journal nor the file took it.
 */
int audit_anchor(struct audit_log *log);
/*
 * Anchor the head if it moved and the last anchor is a period old.  A writer
 * that keeps the log open calls it when audit_anchor_due() says, or at least
 * once a period; 0, or -errno as audit_anchor().
 */
int audit_tick(struct audit_log *log);
/*
 * Does an entry this process appended wait for its anchor?  1 with *in_ns
 * the time from now until audit_tick() will anchor it (0: now); 0 when none
 * waits.  A daemon arms a timer for *in_ns after each append, so no append
 * stays unanchored much past a period, whatever its tick's phase.
 */
int audit_anchor_due(struct audit_log *log, uint64_t *in_ns);

/*
 * Prune: remove the entries written before before_ns, keeping the rest
 * verifiable.  The log must verify whole first (a broken log is evidence,
 * never pruned).  An entry (sandbox "latch", kind "audit", decision "prune",
 * the given reason) is appended first, recording the cut: the first entry
 * kept and the hash of the last one removed, which becomes the chain's new
 * genesis; then, in one transaction, the cut is stored and the entries
 * before it deleted.  audit_verify() checks the rest of the chain from the
 * cut and that the prune entry recording it is in the chain.  The entries
 * removed are a prefix: the oldest up to the first one written at or after
 * before_ns.  0 (res->pruned may be 0: nothing that old), -EBADMSG when the
 * log is broken (res->verify says where), or -errno.
 */
struct audit_prune_result {
	int64_t pruned; /* entries removed */
	int64_t first_id; /* the first entry kept */
	int64_t prune_id; /* the entry that records the cut */
	char anchor[AUDIT_HASH_HEX + 1]; /* the hash of the last entry removed */
	struct audit_verify_result verify;
};
int audit_prune(struct audit_log *log, uint64_t before_ns, const char *reason, struct audit_prune_result *res);

/* The id of the newest entry (0 when there is none) into *id; 0 or -errno.  For --follow. */
int audit_last_id(struct audit_log *log, int64_t *id);

/* The last database error of this log, for messages. */
const char *audit_error(const struct audit_log *log);

/* The hash of one entry as audit_append() computes it (exposed for tests). */
void audit_entry_hash(const struct audit_entry *e, const char *prev_hash, char out[AUDIT_HASH_HEX + 1]);

/*
 * Parse a --since value into ns since the epoch: "30s", "15m", "2h", "7d"
 * (that long before now_ns), "@1700000000" (epoch seconds), or
 * "2026-11-30", "2026-11-30T12:00", "2026-11-30T12:00:05[Z]" (UTC).
 */
int audit_parse_since(const char *s, uint64_t now_ns, uint64_t *out);

#endif
