// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_run.c - `latch run`: one command in a bounded room (room/room.h).
 *
 * The options become a struct latch_room_opts; a profile is loaded here (the
 * room module takes entries, not files).  Text mode streams the command's
 * output as it comes and says on stderr what latch did (truncation, the
 * deadline, the workspace's changes); --json prints one object, the
 * interface an agent runtime calls (docs/rooms.md has its schema).
 *
 * Exit status: the command's own, 128+N when a signal killed it, and of
 * latch's own: 124 the deadline passed, 125 latch failed (bad option, the
 * room could not be made or verified), 126 the command could not be
 * executed, 127 it was not found.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "kit/kit.h"
#include "profile/profile.h"
#include "cli/cli.h"
#include "room/room.h"
#include "sandbox/sandbox.h"
#include "config/config.h"

enum {
	RUN_EXIT_TIMEOUT = 124,
	RUN_EXIT_LATCH = 125,
	RUN_EXIT_NOEXEC = 126,
	RUN_EXIT_NOTFOUND = 127,
};

/* A room's bounds (latch(8), "Durations and sizes" has the grammar) */
#define RUN_TIMEOUT_MAX_MS (7 * 86400 * 1000ull)
#define RUN_OUTPUT_LIMIT_MAX (1ull << 30)
#define RUN_MEMORY_MIN (8ull << 20)
#define RUN_MEMORY_MAX (64ull << 40)

static int parse_user(const char *s, struct latch_room_opts *o)
{
	unsigned long u, g;
	char *end;

	if (!strcmp(s, "root")) {
		o->uid = o->gid = 0;
	} else if (isdigit((unsigned char)*s)) {
		u = strtoul(s, &end, 10);
		g = u;
		if (*end == ':')
			g = strtoul(end + 1, &end, 10);
		if (*end || u > 0xfffffffeul || g > 0xfffffffeul)
			return -1;
		o->uid = u;
		o->gid = g;
	} else {
		struct passwd *pw = getpwnam(s);

		if (!pw)
			return -1;
		o->uid = pw->pw_uid;
		o->gid = pw->pw_gid;
	}
	o->uid_set = true;
	return 0;
}

/*
 * A profile's entries as policy specs.  A profile with host names is
 * latchd's to serve (*names is set, and specs are left to latchd).
 */
static int load_profile(const char *name, struct latch_room_opts *o, struct latch_policy_spec **specs, char *names,
			size_t nameslen)
{
	char dir[PATH_MAX], overlay[PATH_MAX], err[LATCH_ERR_MAX];
	struct latch_profile p = { 0 };
	int n = 0;

	latch_path(dir, sizeof(dir), LATCH_PROFILES_DIR);
	latch_path(overlay, sizeof(overlay), LATCH_ALLOWLIST_FILE);
	if (latch_profile_load(dir, name, overlay, &p, err, sizeof(err)))
		return latch_err(RUN_EXIT_LATCH, "%s", err);
	*specs = calloc(p.n ? p.n : 1, sizeof(**specs));
	if (!*specs) {
		latch_profile_free(&p);
		return latch_err(RUN_EXIT_LATCH, "out of memory");
	}
	*names = 0;
	for (int i = 0; i < p.n; i++) {
		const struct latch_pentry *pe = &p.entries[i];

		if (pe->kind != LATCH_PENTRY_CIDR) {
			char text[LATCH_ENTRY_TEXT_MAX];

			if (!*names) {
				latch_pentry_format(pe, text, sizeof(text));
				snprintf(names, nameslen, "%s:%d: %s", pe->source, pe->line, text);
			}
			continue;
		}
		(*specs)[n].entry = pe->entry;
		(*specs)[n].origin = LATCH_ORIGIN_PROFILE;
		n++;
	}
	o->policy = *specs;
	o->n_policy = n;
	o->open = p.open;
	latch_profile_free(&p);
	return 0;
}

/* ---- latchd's services for the room (latchd/room.c) ---- */

struct run_latchd {
	struct latchd_conn *conn;
	char name[LATCH_NAME_MAX + 1];
	json_t *open_reply; /* holds the env strings the room's opts point into */
	char ready_err[LATCH_ERR_MAX];
	/* the kit's secret_files, hidden in the room (o->hide points here) */
	char hidden[LATCH_ROOM_HIDE_MAX][LATCH_KIT_FILE_PATH_MAX + 1];
};

/* A secret_file of the kit: the room never sees it (a root room would own it). 0, or -E2BIG. */
static int hide_secret_file(struct run_latchd *ld, struct latch_room_opts *o, const char *path)
{
	if (!*path)
		return 0;
	if (o->n_hide >= LATCH_ROOM_HIDE_MAX)
		return -E2BIG;
	snprintf(ld->hidden[o->n_hide], sizeof(ld->hidden[0]), "%s", path);
	o->hide[o->n_hide] = ld->hidden[o->n_hide];
	o->n_hide++;
	return 0;
}

/*
 * The kit's `secret: VAR`s from this environment, for latchd (which reads
 * secret_files itself); its secret_files go to o->hide.
 */
static json_t *kit_secrets(const char *kit_name, struct run_latchd *ld, struct latch_room_opts *o, char *err,
			   size_t errlen)
{
	struct latch_kit_secrets sec = { 0 };
	struct latch_kit *kit = latch_sandbox_kit_open(kit_name, err, errlen);
	json_t *out;
	int rc = 0;

	for (int i = 0; kit && i < kit->n_creds && !rc; i++) {
		rc = hide_secret_file(ld, o, kit->creds[i].up.secret_file);
		for (int j = 0; j < kit->creds[i].n_alts && !rc; j++)
			rc = hide_secret_file(ld, o, kit->creds[i].alts[j].up.secret_file);
	}
	if (rc)
		latch_errf(err, errlen, rc, "more than %d secret_files to hide from the room", LATCH_ROOM_HIDE_MAX);
	if (!kit || rc || latch_kit_secrets_from_env(kit, NULL, &sec, NULL, NULL, err, errlen)) {
		latch_kit_free(kit);
		return NULL;
	}
	out = json_array();
	for (int i = 0; i < sec.n; i++)
		if (sec.v[i].value)
			json_array_append_new(out, json_pack("{s:s, s:s%}", "route", sec.v[i].route, "value",
							     sec.v[i].value, sec.v[i].len));
	latch_kit_secrets_wipe(&sec);
	latch_kit_free(kit);
	return out;
}

/* room_open: the room's service address, ports and env into o.  0, or latch's exit status. */
static int services_open(struct run_latchd *ld, const char *profile, const char *kit, const char *names,
			 struct latch_room_opts *o)
{
	char err[LATCH_ERR_MAX];
	json_t *req, *secrets = json_null(), *env;
	const char *addr;
	size_t i;
	int rc;

	ld->conn = latchd_connect(err, sizeof(err));
	if (!ld->conn)
		return latch_err(RUN_EXIT_LATCH, "%s%s needs latchd, which serves a room's names and kit: %s",
				 kit ? "--kit " : names, kit ? kit : "", err);
	if (kit && !(secrets = kit_secrets(kit, ld, o, err, sizeof(err))))
		return latch_err(RUN_EXIT_LATCH, "--kit %s: %s", kit, err);
	latch_room_name_make(ld->name, sizeof(ld->name));
	req = json_pack("{s:s, s:s, s:s, s:s?, s:o}", "op", latchd_op_name(LATCHD_OP_ROOM_OPEN), "room", ld->name,
			"profile", profile, "kit", kit, "secrets", secrets);
	rc = latchd_conn_call(ld->conn, req, &ld->open_reply, 10000, err, sizeof(err));
	json_decref(req); /* its secrets are wiped with the request line by latchd_conn_call */
	if (rc)
		return latch_err(RUN_EXIT_LATCH, "latchd: %s", err);
	if (!json_is_true(json_object_get(ld->open_reply, "ok")))
		return latch_err(RUN_EXIT_LATCH, "latchd: %s",
				 json_string_value(json_object_get(ld->open_reply, "error")) ?: "room_open refused");
	addr = json_string_value(json_object_get(ld->open_reply, "address"));
	if (!addr || latch_parse_addr(addr, &o->net.host_ip4, err, sizeof(err)))
		return latch_err(RUN_EXIT_LATCH, "latchd gave the room no service address");
	o->net.resolver_ip4 = o->net.host_ip4;
	if (json_integer_value(json_object_get(ld->open_reply, "broker_port")) > 0)
		o->net.host_ports[o->net.n_host_ports++] =
			json_integer_value(json_object_get(ld->open_reply, "broker_port"));
	json_array_foreach(json_object_get(ld->open_reply, "env"), i, env) {
		if (o->n_env >= LATCH_ROOM_ENV_MAX)
			return latch_err(RUN_EXIT_LATCH, "the kit's variables and --env are more than %d",
					 LATCH_ROOM_ENV_MAX);
		o->env[o->n_env++] = json_string_value(env);
	}
	/* latchd writes the whole policy, names and addresses alike, at room_ready */
	o->policy = NULL;
	o->n_policy = 0;
	o->open = false;
	o->name = ld->name;
	return 0;
}

/* The room's programs are on: latchd looks its names up and writes its policy before the command starts. */
static int services_ready(void *arg, const char *name, char *err, size_t errlen)
{
	struct run_latchd *ld = arg;
	json_t *req = json_pack("{s:s, s:s}", "op", latchd_op_name(LATCHD_OP_ROOM_READY), "room", name), *rep = NULL;
	int rc = latchd_conn_call(ld->conn, req, &rep, 60000, err, errlen);

	json_decref(req);
	if (!rc && !json_is_true(json_object_get(rep, "ok")))
		rc = latch_errf(err, errlen, -EPERM, "latchd: %s",
				json_string_value(json_object_get(rep, "error")) ?: "room_ready refused");
	json_decref(rep);
	return rc;
}

static json_t *limit_json(const struct latch_room_limit *l, double scale);

/* What the audit log keeps of a run (kind `room`). */
static json_t *audit_fields(const struct latch_room_opts *o, const char *kit, const struct latch_room_result *res,
			    int code)
{
	json_t *argv = json_array();
	uint64_t dropped = 0;

	for (int i = 0; o->argv[i]; i++)
		json_array_append_new(argv, json_string(o->argv[i]));
	for (int r = LATCH_DROP_LAST; r <= LATCH_DROP_MALFORMED; r++)
		for (int k = 0; k < LATCH_DIR_COUNT; k++)
			dropped += res->counters[latch_counter_slot(r, k)].packets;
	return json_pack("{s:o, s:i, s:o, s:o, s:f, s:b, s:b, s:I, s:b, s:b, s:s, s:s?, s:I, s:{s:o, s:o, s:o}}",
			 "command", argv, "exit", code, "exit_code",
			 res->exited && !res->exec_errno ? json_integer(res->exit_code) : json_null(), "signal",
			 res->exited ? json_null() : json_integer(res->signal), "duration_ms", res->duration_ns / 1e6,
			 "timed_out", res->timed_out, "truncated", res->truncated, "output_bytes",
			 (json_int_t)res->output_total, "oom_killed", res->oom_killed, "pids_limit_hit", res->pids_max,
			 "profile", o->profile ? o->profile : "sealed", "kit", kit, "network_refused",
			 (json_int_t)dropped, "limits", "memory_bytes", limit_json(&res->limits.memory, 1), "cpus",
			 limit_json(&res->limits.cpu, 1000), "pids", limit_json(&res->limits.pids, 1));
}

/*
 * Every run is audited: through latchd when it runs (it holds the log), by
 * latch itself otherwise.  room_done also ends the services latchd gave the
 * room.  latch hands the record over and does not wait for latchd's write
 * (a durable write is an fsync, tens of milliseconds on some disks: a
 * tool call's whole run); latchd reads it before it sees the connection go.
 */
static void services_done(struct run_latchd *ld, const char *room, json_t *fields)
{
	char err[LATCH_ERR_MAX];
	json_t *req;
	bool own = ld->conn != NULL;

	if (!ld->conn)
		ld->conn = latchd_connect(err, sizeof(err));
	if (ld->conn) {
		req = json_pack("{s:s, s:s, s:O, s:b}", "op", latchd_op_name(LATCHD_OP_ROOM_DONE), "room", room,
				"result", fields, "noreply", 1);
		if (!latchd_conn_send(ld->conn, req, err, sizeof(err))) {
			json_decref(req);
			json_decref(fields);
			return;
		}
		json_decref(req);
		if (own)
			fprintf(stderr, "latch: warning: latchd did not take the room's end (%s)\n", err);
	}
	latch_audit_note(room, "room", json_is_true(json_object_get(fields, "timed_out")) ? "timeout" : "exit",
			 "latch.room.run", fields);
}

static const char *change_name(enum latch_room_change_kind c)
{
	return c == LATCH_CHANGE_ADDED ? "added" : c == LATCH_CHANGE_MODIFIED ? "modified" : "deleted";
}

static const char *kind_name(enum latch_room_file_kind k)
{
	return k == LATCH_FILE_REGULAR ? "file" :
	       k == LATCH_FILE_DIR     ? "dir" :
	       k == LATCH_FILE_SYMLINK ? "symlink" :
					 "other";
}

/* A limit as asked and as read back; bytes and counts as integers, CPUs (scale 1000) as a number */
static json_t *limit_json(const struct latch_room_limit *l, double scale)
{
	if (scale == 1)
		return json_pack("{s:s, s:I, s:I, s:s}", "via", latch_room_via_name(l->via), "asked",
				 (json_int_t)l->asked, "observed", (json_int_t)l->observed, "file", l->file);
	return json_pack("{s:s, s:f, s:f, s:s}", "via", latch_room_via_name(l->via), "asked", l->asked / scale,
			 "observed", l->observed / scale, "file", l->file);
}

static json_t *network_json(const struct latch_room_opts *o, const struct latch_room_result *res)
{
	const struct latch_cg_posture *p = &res->posture;
	json_t *hooks = json_object(), *counters = json_array();

	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		const struct latch_cg_hook_state *h = &p->hook[i];

		if (h->wanted)
			json_object_set_new(hooks, latch_cg_hook_names[i],
					    json_pack("{s:i, s:b, s:i, s:i}", "prog_id", h->pinned_id, "runs",
						      h->in_effective, "flags", h->attach_flags, "others",
						      h->n_others));
	}
	for (int r = LATCH_DROP_LAST; r <= LATCH_PASS_LAST; r++)
		for (int k = 0; k < LATCH_DIR_COUNT; k++) {
			const struct latch_counter *c = &res->counters[latch_counter_slot(r, k)];

			if (c->packets && strcmp(latch_reason_name(r), "unknown"))
				json_array_append_new(
					counters, json_pack("{s:s, s:s, s:I}", "reason", latch_reason_name(r), "hook",
							    k == LATCH_ROOM_SLOT_PACKET ? "packet" : "sockaddr",
							    "count", (json_int_t)c->packets));
		}
	return json_pack("{s:s, s:b, s:i, s:b, s:o, s:s, s:o}", "profile", o->profile ? o->profile : "sealed",
			 "uncontained", p->open, "entries", o->n_policy, "enforced", p->enforced, "hooks", hooks,
			 "note", p->note, "counters", counters);
}

static json_t *workspace_json(const struct latch_room_opts *o, const struct latch_room_result *res)
{
	json_t *changes = json_array();
	char mode[8];

	if (!o->workspace)
		return json_null();
	for (int i = 0; i < res->n_changes; i++) {
		const struct latch_room_change *c = &res->changes[i];
		json_t *j = json_pack("{s:s, s:s, s:s}", "path", c->path, "change", change_name(c->change), "kind",
				      kind_name(c->kind));

		if (c->change != LATCH_CHANGE_DELETED) {
			snprintf(mode, sizeof(mode), "%04o", c->mode);
			json_object_set_new(j, "mode", json_string(mode));
			snprintf(mode, sizeof(mode), "%04o", c->applied_mode);
			json_object_set_new(j, "applied_mode", json_string(mode));
			json_object_set_new(j, "size", json_integer(c->size));
		}
		if (c->kind == LATCH_FILE_REGULAR && c->change != LATCH_CHANGE_DELETED) {
			json_object_set_new(j, "binary", json_boolean(c->binary));
			json_object_set_new(j, "diff", c->diff ? json_string(c->diff) : json_null());
			if (c->diff_truncated)
				json_object_set_new(j, "diff_truncated", json_true());
		}
		if (c->target)
			json_object_set_new(j, "target", json_string(c->target));
		json_array_append_new(changes, j);
	}
	return json_pack("{s:s, s:s, s:o, s:b, s:b, s:o}", "path", o->workspace, "mode", o->workspace_rw ? "rw" : "ro",
			 "changes", changes, "changes_truncated", res->changes_truncated, "applied", res->applied,
			 "apply_error", *res->apply_error ? json_string(res->apply_error) : json_null());
}

/* The output as a JSON string: invalid UTF-8 bytes become U+FFFD (output_utf8 says so). */
static json_t *output_json(const char *s, size_t n, bool *lossy)
{
	json_t *j = json_stringn(s, n);
	char *fixed;
	size_t o = 0;

	*lossy = false;
	if (j)
		return j;
	*lossy = true;
	fixed = malloc(n * 3 + 1);
	if (!fixed)
		return json_string("");
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		json_t *probe = len && i + len <= n ? json_stringn(s + i, len) : NULL;

		if (probe) {
			memcpy(fixed + o, s + i, len);
			o += len;
			i += len;
			json_decref(probe);
		} else {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	j = json_stringn(fixed, o);
	free(fixed);
	return j ? j : json_string("");
}

static int exit_of(const struct latch_room_result *res)
{
	if (res->exec_errno)
		return res->exec_errno == ENOENT ? RUN_EXIT_NOTFOUND : RUN_EXIT_NOEXEC;
	if (res->timed_out)
		return RUN_EXIT_TIMEOUT;
	if (!res->exited)
		return 128 + res->signal;
	return res->exit_code;
}

static void print_json(const struct latch_room_opts *o, const struct latch_room_result *res, int code)
{
	json_t *argv = json_array(), *out;
	bool lossy;

	for (int i = 0; o->argv[i]; i++)
		json_array_append_new(argv, json_string(o->argv[i]));
	out = json_object();
	json_object_set_new(out, "room", json_string(res->name));
	json_object_set_new(out, "command", argv);
	json_object_set_new(out, "exit_code",
			    res->exited && !res->exec_errno ? json_integer(res->exit_code) : json_null());
	if (res->exited) {
		json_object_set_new(out, "signal", json_null());
	} else {
		char sig[24];

		snprintf(sig, sizeof(sig), "SIG%s", sigabbrev_np(res->signal) ?: "?");
		json_object_set_new(out, "signal", json_string(sig));
	}
	json_object_set_new(out, "exec_error", res->exec_errno ? json_string(strerror(res->exec_errno)) : json_null());
	json_object_set_new(out, "timed_out", json_boolean(res->timed_out));
	json_object_set_new(out, "oom_killed", json_boolean(res->oom_killed));
	json_object_set_new(out, "pids_limit_hit", json_boolean(res->pids_max));
	json_object_set_new(out, "duration_ms", json_real(res->duration_ns / 1e6));
	json_object_set_new(out, "output", output_json(res->output, res->output_len, &lossy));
	json_object_set_new(out, "output_utf8", json_boolean(!lossy));
	json_object_set_new(out, "output_bytes", json_integer(res->output_total));
	json_object_set_new(out, "output_limit",
			    json_integer(o->output_limit ? o->output_limit : LATCH_ROOM_OUTPUT_LIMIT));
	json_object_set_new(out, "truncated", json_boolean(res->truncated));
	json_object_set_new(out, "peak_memory_bytes", res->peak_memory ? json_integer(res->peak_memory) : json_null());
	json_object_set_new(out, "peak_memory_via", json_string(latch_room_via_name(res->peak_memory_via)));
	json_object_set_new(out, "user", json_pack("{s:i, s:i}", "uid", res->uid, "gid", res->gid));
	json_object_set_new(out, "limits",
			    json_pack("{s:o, s:o, s:o}", "memory_bytes", limit_json(&res->limits.memory, 1), "cpus",
				      limit_json(&res->limits.cpu, 1000), "pids", limit_json(&res->limits.pids, 1)));
	json_object_set_new(out, "network", network_json(o, res));
	json_object_set_new(out, "seccomp", json_string(res->seccomp));
	json_object_set_new(out, "workspace", workspace_json(o, res));
	json_object_set_new(out, "exit", json_integer(code));
	latch_json_out(out);
}

static void print_text(const struct latch_room_opts *o, const struct latch_room_result *res)
{
	if (res->truncated)
		fprintf(stderr, "\nlatch: output truncated: %zu of %" PRIu64 " bytes shown (--output-limit)\n",
			res->output_len, res->output_total);
	if (res->exec_errno)
		fprintf(stderr, "latch: cannot run %s: %s\n", o->argv[0], strerror(res->exec_errno));
	if (res->timed_out)
		fprintf(stderr, "latch: the deadline passed after %.1f s: every process of the room was killed\n",
			res->duration_ns / 1e9);
	if (res->oom_killed)
		fprintf(stderr, "latch: the memory limit (%" PRIu64 " bytes, %s) killed a process of the room\n",
			res->limits.memory.observed, latch_room_via_name(res->limits.memory.via));
	if (res->pids_max)
		fprintf(stderr, "latch: the pids limit (%" PRIu64 ") refused a fork\n", res->limits.pids.observed);
	if (!o->workspace_rw)
		return;
	fprintf(stderr, "latch: %d change(s) in the workspace%s%s\n", res->n_changes,
		res->changes_truncated ? " (more not listed)" : "",
		res->applied	  ? ", applied" :
		*res->apply_error ? "" :
		o->apply	  ? "" :
				    " (not applied: --apply writes them)");
	if (*res->apply_error)
		fprintf(stderr, "latch: not applied: %s\n", res->apply_error);
	for (int i = 0; i < res->n_changes; i++) {
		const struct latch_room_change *c = &res->changes[i];

		fprintf(stderr, "  %c %s%s%s%s", "AMD"[c->change], c -> path, c -> kind == LATCH_FILE_DIR ? "/" : "",
			c->target ? " -> " : "", c->target ? c->target : "");
		if (c->change != LATCH_CHANGE_DELETED && c->kind != LATCH_FILE_SYMLINK && c->mode != c->applied_mode)
			fprintf(stderr, "  (mode %04o; set-id and sticky bits are never applied: %04o)",
				(unsigned)c->mode, (unsigned)c->applied_mode);
		else if (c->change != LATCH_CHANGE_DELETED && c->kind != LATCH_FILE_SYMLINK)
			fprintf(stderr, "  (mode %04o)", (unsigned)c->mode);
		fputc('\n', stderr);
		if (c->diff)
			fputs(c->diff, stderr);
		else if (c->binary)
			fprintf(stderr, "    (binary, %" PRIu64 " bytes)\n", c->size);
	}
}

static int run_check(void)
{
	struct latch_room_probe p;
	char err[LATCH_ERR_MAX];
	int rc = latch_room_probe(&p, err, sizeof(err));
	const struct latch_room_limit *l[3] = { &p.limits.memory, &p.limits.cpu, &p.limits.pids };
	static const char *const names[3] = { "memory", "cpus", "pids" };

	if (latch_json) {
		latch_json_out(json_pack("{s:b, s:s, s:b, s:b, s:b, s:{s:s, s:s, s:s}, s:s}", "ok", !rc && !*p.why,
					 "cgroup2", p.cgroup2, "hooks_enforced", p.hooks_enforced, "unix_hooks",
					 p.unix_hooks, "cgroup_kill", p.kill_v2, "limits", "memory",
					 latch_room_via_name(p.limits.memory.via), "cpus",
					 latch_room_via_name(p.limits.cpu.via), "pids",
					 latch_room_via_name(p.limits.pids.via), "why", p.why));
	} else {
		printf("rooms: %s\n", !rc && !*p.why ? "ok" : p.why);
		printf("  cgroup2:       %s\n", *p.cgroup2 ? p.cgroup2 : "not mounted");
		printf("  network hooks: %s%s\n", p.hooks_enforced ? "attached and read back" : "NOT VERIFIED",
		       p.unix_hooks ? ", abstract unix sockets too" : ", no unix-socket hooks (Linux < 6.7)");
		printf("  kill:          %s\n", p.kill_v2 ? "cgroup.kill" : "freeze and SIGKILL each process");
		for (int i = 0; i < 3; i++)
			printf("  %-14s %s (%s)\n", names[i], latch_room_via_name(l[i]->via), l[i]->file);
	}
	return !rc && !*p.why ? 0 : RUN_EXIT_LATCH;
}

/* `run --sweep`: the rooms a killed latch left behind. */
static int run_sweep(void)
{
	char err[LATCH_ERR_MAX];
	int rc = latch_room_sweep(err, sizeof(err));

	if (rc < 0)
		return latch_err(RUN_EXIT_LATCH, "%s", err);
	if (latch_json)
		latch_json_out(json_pack("{s:i}", "swept", rc));
	else
		printf("%d room(s) left behind were removed\n", rc);
	return 0;
}

/* The command in its room, shown and recorded; latchd serves the room's names and kit when it needs them. */
static int run_in_room(struct latch_room_opts *o, struct run_latchd *svc, const char *kit)
{
	struct latch_room_result res;
	char err[LATCH_ERR_MAX];
	int rc;

	if (svc->conn) {
		o->ready = services_ready;
		o->ready_arg = svc;
	}
	if (!latch_json)
		o->output_fd = STDOUT_FILENO;
	rc = latch_room_run(o, &res, err, sizeof(err));
	if (rc) {
		services_done(svc, o->name ? o->name : res.name,
			      json_pack("{s:s, s:s, s:s?}", "error", err, "profile", o->profile, "kit", kit));
		rc = latch_err(RUN_EXIT_LATCH, "%s", err);
	} else {
		rc = exit_of(&res);
		if (o->apply && !res.applied)
			rc = RUN_EXIT_LATCH; /* asked to apply, and nothing was: latch's failure */
		if (latch_json)
			print_json(o, &res, rc);
		else
			print_text(o, &res);
		services_done(svc, res.name, audit_fields(o, kit, &res, rc));
	}
	latch_room_result_free(&res);
	return rc;
}

/* run once its options are read: the workspace, the profile, latchd's services, then the room. */
static int run_room(struct latch_room_opts *o, char *ws, const char *profile, const char *kit)
{
	struct latch_policy_spec *specs = NULL;
	struct run_latchd svc = { 0 };
	char names[LATCH_ERR_MAX];
	int rc;

	if (ws) {
		char *colon = strrchr(ws, ':');

		if (colon && (!strcmp(colon, ":rw") || !strcmp(colon, ":ro"))) {
			o->workspace_rw = !strcmp(colon, ":rw");
			*colon = 0;
		}
		o->workspace = ws;
	}
	if (o->apply && !o->workspace_rw)
		return latch_err(RUN_EXIT_LATCH,
				 "--apply needs --workspace DIR:rw (a read-only workspace has no changes)");
	o->profile = profile ? profile : "sealed";
	rc = load_profile(o->profile, o, &specs, names, sizeof(names));
	/* names and kits are latchd's to serve: without it the room is refused, naming the fix */
	if (!rc && (*names || kit))
		rc = services_open(&svc, o->profile, kit, names, o);
	if (!rc)
		rc = run_in_room(o, &svc, kit);
	latchd_conn_close(svc.conn);
	json_decref(svc.open_reply);
	free(specs);
	return rc;
}

/*
 * One of the room's own options (its limits, user, environment, resolver)
 * into O: 0, an exit code with its line printed, or -1 when C is none of them.
 */
static int room_opt(int c, char *arg, struct latch_room_opts *o)
{
	char err[LATCH_ERR_MAX];

	switch (c) {
	case 'a':
		o->apply = true;
		return 0;
	case 't':
		if (latch_parse_duration_ms("--timeout", arg, 1, RUN_TIMEOUT_MAX_MS, &o->timeout_ms, err, sizeof(err)))
			return latch_err(RUN_EXIT_LATCH, "%s", err);
		return 0;
	case 'o': {
		uint64_t v;

		if (latch_parse_size("--output-limit", arg, 1, 1, RUN_OUTPUT_LIMIT_MAX, &v, err, sizeof(err)))
			return latch_err(RUN_EXIT_LATCH, "%s", err);
		o->output_limit = v;
		return 0;
	}
	case 'm':
		if (latch_parse_size("--memory", arg, 1, RUN_MEMORY_MIN, RUN_MEMORY_MAX, &o->memory, err, sizeof(err)))
			return latch_err(RUN_EXIT_LATCH, "%s", err);
		return 0;
	case 'c': {
		int64_t micros;

		/* a decimal, never strtod(): it took "nan", "1e0" and "0x1" */
		if (*arg == '$' || latch_parse_micros(arg, 1024 * 1000000ll, &micros) || micros % 1000 ||
		    micros < 10000)
			return latch_err(RUN_EXIT_LATCH,
					 "--cpus: '%s' is not a number of CPUs from 0.01 to 1024 (1, 0.5, 2.25)", arg);
		o->cpu_milli = (uint32_t)(micros / 1000);
		return 0;
	}
	case 'n': {
		uint32_t v;

		if (latch_parse_uint(arg, 1, 1u << 22, &v))
			return latch_err(RUN_EXIT_LATCH, "--pids %s: give a number of processes, like 64", arg);
		o->pids = v;
		return 0;
	}
	case 'u':
		if (parse_user(arg, o))
			return latch_err(RUN_EXIT_LATCH, "--user %s: give root, a user name or UID[:GID]", arg);
		return 0;
	case 'e':
		if (!strchr(arg, '=') || arg[0] == '=' || o->n_env >= LATCH_ROOM_ENV_MAX)
			return latch_err(RUN_EXIT_LATCH, "--env %s: give NAME=VALUE (at most %d)", arg,
					 LATCH_ROOM_ENV_MAX);
		o->env[o->n_env++] = arg;
		return 0;
	case 'r': {
		struct latch_addr *a;

		a = strchr(arg, ':') ? &o->net.resolver_ip6 : &o->net.resolver_ip4;
		if (latch_parse_addr(arg, a, err, sizeof(err)))
			return latch_err(RUN_EXIT_LATCH, "--resolver: %s", err);
		return 0;
	}
	default:
		return -1;
	}
}

int cmd_run(int argc, char **argv)
{
	struct latch_room_opts o = { .output_fd = -1 };
	char *ws = NULL;
	const char *profile = NULL, *kit = NULL;
	bool check = false, sweep = false;
	int c;

	optind = 1;
	while ((c = latch_getopt(argc, argv, "run")) != -1) {
		switch (c) {
		case 'k':
			kit = optarg;
			break;
		case 'p':
			profile = optarg;
			break;
		case 'w':
			ws = optarg;
			break;
		case 'C':
			check = true;
			break;
		case 'S':
			sweep = true;
			break;
		default: {
			int rc = room_opt(c, optarg, &o);

			if (rc < 0)
				return latch_err(RUN_EXIT_LATCH,
						 "usage: latch run [OPTIONS] -- CMD... (see `latch help run`)");
			if (rc)
				return rc;
		}
		}
	}
	if (geteuid())
		return latch_err(RUN_EXIT_LATCH,
				 "latch run needs root (namespaces, cgroups and BPF); run it with sudo");
	if (sweep)
		return run_sweep();
	if (check)
		return run_check();
	if (optind >= argc)
		return latch_err(RUN_EXIT_LATCH, "no command: latch run [OPTIONS] -- CMD...");
	o.argv = argv + optind;
	return run_room(&o, ws, profile, kit);
}
