/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * log.h - the audit log's insides, shared by audit.c (the database, the
 * chain, the rate limit), anchor.c (the chain's head kept outside it) and
 * prune.c (the cut, the chain's new start after a prune) and read.c (queries,
 * verify).
 * Private to audit/; everyone else includes audit/audit.h.
 */
#ifndef LATCH_AUDIT_LOG_H
#define LATCH_AUDIT_LOG_H

#include <limits.h>
#include <sqlite3.h>
#include <stdint.h>

#include "audit/audit.h"

#define RL_BUCKETS 64

struct rl_slot;

struct audit_log {
	sqlite3 *db;
	struct audit_opts opts;
	struct rl_slot *rl[RL_BUCKETS];
	char errmsg[256];
	char path[PATH_MAX];
	char anchor_path[PATH_MAX];
	int64_t anchored_id; /* the head this process anchored last (0: none yet) */
	uint64_t anchored_ns; /* when, on the log's clock */
	int64_t appended_id; /* the newest entry this process appended (0: none) */
};

/* One anchor read back: the head's id and hash, and when and where it was anchored. */
struct audit_anchor_rec {
	int64_t id;
	char hash[AUDIT_HASH_HEX + 1];
	uint64_t time_ns;
	const char *by; /* "journal" or "file" */
};

struct audit_anchors {
	struct audit_anchor_rec *a; /* sorted by id, then time */
	int n, cap;
};

/* audit.c: the hash every chain that was never pruned starts from */
extern const char audit_genesis[AUDIT_HASH_HEX + 1];
/* Record sqlite's message for what in the log's error; returns -errno for rc. */
int audit_db_fail(struct audit_log *log, int rc, const char *what);

/*
 * prune.c: where the chain starts: entry 1 after the genesis hash, or, after
 * a prune, the cut's first entry after the hash of the last entry pruned.
 * 0; or -EBADMSG with res naming what is wrong (a cut no audited prune entry
 * records); other -errno when the database can't be read.
 */
int audit_chain_start(struct audit_log *log, int64_t *first_id, char prev[AUDIT_HASH_HEX + 1],
		      struct audit_verify_result *res);

/* anchor.c */
int audit_anchor_path_of(const char *path, const struct audit_opts *o, char *out, size_t len);
/* After an append of entry id: anchor at once when the last anchor is a period old, else leave it to audit_tick(). */
void audit_anchor_after_append(struct audit_log *log, int64_t id, uint64_t now);
/* Every anchor of the log at path that can be read (journal unless no_journal, and the file). */
int audit_anchors_read(const char *path, const char *anchor_path, const struct audit_opts *o,
		       struct audit_anchors *out);
void audit_anchors_free(struct audit_anchors *as);
/*
 * The verdict of the anchors on a log whose chain is whole up to entry last
 * (0: the log is gone; INT64_MAX: only fill in the newest anchor), with
 * mismatch the index of the first anchor whose hash disagreed (-1: none).
 * 0, or -EBADMSG with res naming the cut or the rewrite.
 */
int audit_anchors_judge(const struct audit_anchors *as, int64_t last, int mismatch, struct audit_verify_result *res);

#endif
