// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_audit.c - `latch audit [NAME] [--since T] [--kind K]`, `latch audit
 * verify`, and latch_audit_note(), which the commands that change
 * enforcement call after they succeed.
 *
 * A note that can't be written is a warning, never a failure: the kernel
 * already enforces the change when the note is written, and failing the
 * command then would report a change as not made when it was.  Enforcement
 * never depends on the audit log; the warning says the record is missing.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit/audit.h"
#include "cli/cli.h"
#include "loader/loader.h"
#include "config/config.h"

static int log_path(char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_AUDIT_DB);
}

void latch_audit_note(const char *sandbox, const char *kind, const char *decision, const char *reason, json_t *fields)
{
	char path[4096], err[512] = "";
	struct audit_entry e = { .sandbox = sandbox, .kind = kind, .decision = decision, .reason = reason };
	struct audit_log *log;
	const char *sudo = getenv("SUDO_USER");
	char *text;
	int rc;

	if (!fields)
		fields = json_object();
	/* who asked: the uid that ran latch, and the sudo user behind it when there is one */
	json_object_set_new(fields, "uid", json_integer(getuid()));
	if (sudo && *sudo)
		json_object_set_new(fields, "sudo_user", json_string(sudo));
	text = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(fields);
	if (log_path(path, sizeof(path))) {
		fprintf(stderr, "latch: warning: audit log path too long; %s %s was done but not recorded\n", kind,
			decision);
		free(text);
		return;
	}
	log = audit_open(path, NULL, err, sizeof(err));
	if (!log) {
		fprintf(stderr, "latch: warning: %s; %s %s was done but not recorded\n", err, kind, decision);
		free(text);
		return;
	}
	e.fields = text;
	rc = audit_append(log, &e);
	if (rc && rc != -EAGAIN)
		fprintf(stderr, "latch: warning: audit log %s: %s; %s %s was done but not recorded\n", path,
			audit_error(log), kind, decision);
	audit_close(log);
	free(text);
}

static void fmt_time(uint64_t ns, char *buf, size_t len)
{
	time_t s = (time_t)(ns / 1000000000ULL);
	struct tm tm;
	char day[32];

	gmtime_r(&s, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%06lluZ", day, (unsigned long long)(ns % 1000000000ULL) / 1000ULL);
}

static int print_one(const struct audit_entry *e, void *arg)
{
	json_t *arr = arg;
	char when[48];

	fmt_time(e->time_ns, when, sizeof(when));
	if (latch_json) {
		json_t *f = json_loads(e->fields, 0, NULL);
		json_t *j = json_pack("{s:I, s:s, s:I, s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "id", (json_int_t)e->id,
				      "time", when, "time_ns", (json_int_t)e->time_ns, "sandbox", e->sandbox, "kind",
				      e->kind, "decision", e->decision, "reason", e->reason, "fields",
				      f ? f : json_string(e->fields), "prev_hash", e->prev_hash, "hash", e->hash);

		if (arr)
			json_array_append_new(arr, j);
		else
			latch_json_line(j); /* --follow: one object per line */
	} else {
		printf("%-6lld %s  %-12s %-8s %-8s %-24s %s\n", (long long)e->id, when, e->sandbox, e->kind,
		       e->decision, e->reason, e->fields);
	}
	return 0;
}

static struct audit_log *open_ro(char *path, size_t len, int *missing)
{
	char err[512];
	struct audit_opts o = { .readonly = 1 };
	struct audit_log *log;

	*missing = 0;
	if (log_path(path, len)) {
		latch_err(LATCH_EXIT_USAGE, "LATCH_ROOT is too long");
		return NULL;
	}
	log = audit_open(path, &o, err, sizeof(err));
	if (!log) {
		if (errno == ENOENT)
			*missing = 1;
		else
			latch_err(LATCH_EXIT_FAILED, "%s", err);
	}
	return log;
}

static int audit_verify_cmd(void)
{
	struct audit_verify_result r;
	struct audit_log *log;
	char path[4096], when[48] = "";
	int missing, rc;

	log = open_ro(path, sizeof(path), &missing);
	if (!log && !missing)
		return LATCH_EXIT_FAILED;
	/* a log that is gone is no proof of nothing recorded: its anchors say what it held */
	rc = log ? audit_verify(log, &r) : audit_verify_missing(path, NULL, &r);
	if (rc && rc != -EBADMSG) {
		latch_err(LATCH_EXIT_FAILED, "audit log %s: %s", path, log ? audit_error(log) : strerror(-rc));
		audit_close(log);
		return LATCH_EXIT_FAILED;
	}
	audit_close(log);
	if (r.anchored_id)
		fmt_time(r.anchored_time_ns, when, sizeof(when));
	if (rc) {
		if (latch_json) {
			latch_json_out(
				json_pack("{s:s, s:b, s:I, s:I, s:s, s:i, s:o, s:o}", "path", path, "ok", 0, "checked",
					  (json_int_t)r.checked, "first_bad_id", (json_int_t)r.first_bad_id, "why",
					  r.why, "anchors", r.anchors, "anchored_id",
					  r.anchored_id ? json_integer(r.anchored_id) : json_null(), "anchored_by",
					  r.anchored_id ? json_string(r.anchored_by) : json_null()));
			return LATCH_EXIT_FAILED;
		}
		return latch_err(LATCH_EXIT_FAILED, "audit log %s is broken at entry %lld: %s", path,
				 (long long)r.first_bad_id, r.why);
	}
	if (!latch_json) {
		printf("audit log %s: chain whole, %lld entries%s\n", path, (long long)r.checked,
		       r.first_id > 1 ? " (from the cut of the last prune)" : "");
		if (r.anchored_id)
			printf("anchored: entry %lld at %s (%s; %d anchors read, each matches)\n",
			       (long long)r.anchored_id, when, r.anchored_by, r.anchors);
		else if (r.checked)
			printf("not anchored: no anchor could be read (journal or %s.anchor), so a cut tail would go "
			       "unnoticed\n",
			       path);
	}
	latch_json_out(json_pack("{s:s, s:b, s:I, s:I, s:i, s:o, s:o, s:o}", "path", path, "ok", 1, "checked",
				 (json_int_t)r.checked, "first_id", (json_int_t)(r.first_id ? r.first_id : 1),
				 "anchors", r.anchors, "anchored_id",
				 r.anchored_id ? json_integer(r.anchored_id) : json_null(), "anchored_by",
				 r.anchored_id ? json_string(r.anchored_by) : json_null(), "anchored_at",
				 r.anchored_id ? json_string(when) : json_null()));
	return 0;
}

int cmd_audit(int argc, char **argv)
{
	struct audit_filter f = { 0 };
	char err[LATCH_ERR_MAX], path[4096];
	struct audit_log *log;
	json_t *arr;
	int c, n, missing, follow = 0;

	if (argc >= 2 && !strcmp(argv[1], "verify")) {
		if (argc != 2)
			return latch_err(LATCH_EXIT_USAGE, "audit verify takes no arguments");
		return audit_verify_cmd();
	}
	if (argc >= 2 && !strcmp(argv[1], "prune"))
		return latch_audit_prune_cmd(argc - 1, argv + 1);
	optind = 1;
	opterr = 0;
	while ((c = latch_getopt(argc, argv, "audit")) != -1) {
		switch (c) {
		case 's': {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			if (audit_parse_since(optarg, (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec,
					      &f.since_ns))
				return latch_err(
					LATCH_EXIT_USAGE,
					"--since '%s': give 30s, 15m, 2h, 7d, @EPOCH or 2026-11-30[T12:00[:05]] "
					"(UTC)",
					optarg);
			break;
		}
		case 'k':
			f.kind = optarg;
			break;
		case 'f':
			follow = 1;
			break;
		default:
			return latch_err(LATCH_EXIT_USAGE,
					 "audit: unknown or incomplete option '%s'; see `latch help audit`",
					 argv[optind - 1]);
		}
	}
	if (optind < argc - 1)
		return latch_err(LATCH_EXIT_USAGE, "audit takes at most one NAME; see `latch help audit`");
	if (optind == argc - 1) {
		if (latch_parse_name(argv[optind], err, sizeof(err)))
			return latch_err(LATCH_EXIT_USAGE, "%s", err);
		f.sandbox = argv[optind];
	}
	if (follow)
		return latch_audit_follow(&f, print_one);
	log = open_ro(path, sizeof(path), &missing);
	if (!log && !missing)
		return LATCH_EXIT_FAILED;
	arr = json_array();
	n = log ? audit_query(log, &f, print_one, arr) : 0;
	if (n < 0) {
		json_decref(arr);
		latch_err(LATCH_EXIT_FAILED, "audit log %s: %s", path, audit_error(log));
		audit_close(log);
		return LATCH_EXIT_FAILED;
	}
	audit_close(log);
	if (!latch_json && n == 0)
		printf("no audit entries%s\n", missing ? " (nothing recorded yet)" : " match");
	latch_json_out(json_pack("{s:s, s:o}", "path", path, "entries", arr));
	return 0;
}
