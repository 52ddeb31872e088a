/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * chain.h - private to audit/: what audit.c shares with prune.c, which keeps
 * the chain verifiable across a prune (the cut's new genesis).
 */
#ifndef LATCH_AUDIT_CHAIN_H
#define LATCH_AUDIT_CHAIN_H

#include <sqlite3.h>

#include "audit/audit.h"

/* The hash every chain that was never pruned starts from. */
extern const char audit_genesis[AUDIT_HASH_HEX + 1];

sqlite3 *audit_db(struct audit_log *log);
/* Record sqlite's message for what in the log's error; returns -errno for rc. */
int audit_db_fail(struct audit_log *log, int rc, const char *what);

/*
 * Where the chain starts: entry 1 after the genesis hash, or, after a prune,
 * the cut's first entry after the hash of the last entry pruned.  0; or
 * -EBADMSG with res naming what is wrong (a cut no audited prune entry
 * records); other -errno when the database can't be read.
 */
int audit_chain_start(struct audit_log *log, int64_t *first_id, char prev[AUDIT_HASH_HEX + 1],
		      struct audit_verify_result *res);

#endif
