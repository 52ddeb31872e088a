// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_audit_ops.c - the audit log's upkeep: `latch audit prune --before T`
 * (audit/prune.c keeps the chain verifiable across the cut) and `latch audit
 * --follow`, which prints entries as they are written.
 *
 * --follow polls the log (a read transaction every FOLLOW_POLL_MS, asking
 * only for ids past the last one printed: sqlite's WAL lets it read while
 * latchd writes).  Under --json it prints one compact JSON object per line,
 * each with "version", instead of one document (docs/json.md).  It starts at
 * the end of the log, or at --since T when given, and runs until SIGINT or
 * SIGTERM, which end it with exit 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "cli/cli.h"
#include "common/common.h"

#define FOLLOW_POLL_MS 250

static volatile sig_atomic_t follow_stop;

static void on_stop(int sig)
{
	follow_stop = sig;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int latch_audit_prune_cmd(int argc, char **argv)
{
	struct audit_prune_result r;
	struct audit_log *log;
	char path[4096], err[512];
	uint64_t before = 0;
	int rc;

	if (argc != 3 || strcmp(argv[1], "--before") || audit_parse_since(argv[2], now_ns(), &before))
		return latch_err(LATCH_EXIT_USAGE, "usage: latch audit prune --before T (30d, 12h, @EPOCH or "
						   "2026-11-30[T12:00], UTC)");
	if (geteuid())
		return latch_err(LATCH_EXIT_USAGE, "audit prune needs root; run it with sudo");
	if (latch_path(path, sizeof(path), LATCH_AUDIT_DB))
		return latch_err(LATCH_EXIT_USAGE, "LATCH_ROOT is too long");
	log = audit_open(path, &(struct audit_opts){ .readonly = 1 }, err, sizeof(err));
	if (!log)
		return errno == ENOENT ? latch_err(LATCH_EXIT_FAILED, "no audit log at %s: nothing to prune", path) :
					 latch_err(LATCH_EXIT_FAILED, "%s", err);
	audit_close(log);
	log = audit_open(path, NULL, err, sizeof(err));
	if (!log)
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	rc = audit_prune(log, before, "cli.audit.prune", &r);
	if (rc == -EBADMSG) {
		audit_close(log);
		return latch_err(LATCH_EXIT_FAILED,
				 "audit log %s is broken at entry %lld (%s): a broken log is evidence, not pruned",
				 path, (long long)r.verify.first_bad_id, r.verify.why);
	}
	if (rc) {
		rc = latch_err(LATCH_EXIT_FAILED, "audit log %s: prune: %s", path,
			       rc == -EBUSY ? "the log's rate limit for audit entries; try again in a minute" :
					      audit_error(log));
		audit_close(log);
		return rc;
	}
	audit_close(log);
	if (!latch_json) {
		if (r.pruned)
			printf("audit log %s: %lld entries before entry %lld pruned; the cut is entry %lld, and "
			       "`latch audit verify` proves the chain from %lld\n",
			       path, (long long)r.pruned, (long long)r.first_id, (long long)r.prune_id,
			       (long long)r.first_id);
		else
			printf("audit log %s: no entry that old; nothing pruned\n", path);
	}
	latch_json_out(json_pack("{s:s, s:I, s:o, s:o, s:o}", "path", path, "pruned", (json_int_t)r.pruned, "first_id",
				 r.pruned ? json_integer(r.first_id) : json_null(), "prune_id",
				 r.pruned ? json_integer(r.prune_id) : json_null(), "anchor",
				 r.pruned ? json_string(r.anchor) : json_null()));
	return 0;
}

struct follow {
	int (*print)(const struct audit_entry *e, void *arg);
	int64_t last;
};

static int follow_one(const struct audit_entry *e, void *arg)
{
	struct follow *f = arg;

	f->last = e->id;
	return f->print(e, NULL);
}

int latch_audit_follow(struct audit_filter *filter, int (*print)(const struct audit_entry *e, void *arg))
{
	struct sigaction sa = { .sa_handler = on_stop };
	struct timespec tick = { 0, FOLLOW_POLL_MS * 1000000L };
	struct follow f = { .print = print };
	struct audit_log *log = NULL;
	char path[4096], err[512];
	int n;

	if (latch_path(path, sizeof(path), LATCH_AUDIT_DB))
		return latch_err(LATCH_EXIT_USAGE, "LATCH_ROOT is too long");
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (!follow_stop) {
		if (!log) {
			log = audit_open(path, &(struct audit_opts){ .readonly = 1 }, err, sizeof(err));
			if (!log && errno != ENOENT)
				return latch_err(LATCH_EXIT_FAILED, "%s", err);
			/* without --since: only what is written from now on */
			if (log && !filter->since_ns && audit_last_id(log, &f.last))
				return latch_err(LATCH_EXIT_FAILED, "audit log %s: %s", path, audit_error(log));
		}
		if (log) {
			filter->after_id = f.last;
			n = audit_query(log, filter, follow_one, &f);
			if (n < 0) {
				n = latch_err(LATCH_EXIT_FAILED, "audit log %s: %s", path, audit_error(log));
				audit_close(log);
				return n;
			}
			if (fflush(stdout) || ferror(stdout))
				break; /* the reader went away */
		}
		nanosleep(&tick, NULL);
	}
	audit_close(log);
	return 0;
}
