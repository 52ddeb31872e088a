/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cli.h - what the `latch` commands share: the noun table entry, exit codes,
 * and one way to print results and errors (text, or JSON under --json).
 */
#ifndef LATCH_CLI_H
#define LATCH_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/*
 * Exit codes (docs/exit-codes.md has the table, per command).  The commands
 * that relay a command's own status (exec, task, run) keep 0..124 for it and
 * use 124..127 for their own outcomes instead, as `docker exec` does.
 */
enum latch_exit {
	LATCH_EXIT_OK = 0,
	LATCH_EXIT_FAILED = 1,
	LATCH_EXIT_USAGE = 2,
	LATCH_EXIT_UNVERIFIED = 3,
	LATCH_EXIT_NO_SANDBOX = 4, /* the NAME given is no sandbox (of that kind) */
	LATCH_EXIT_CMD_TIMEOUT = 124, /* exec/task/run: the deadline passed */
	LATCH_EXIT_CMD_LATCH = 125, /* exec/task/run: latch itself failed (no sandbox, no answer...) */
	LATCH_EXIT_CMD_NOEXEC = 126, /* exec/task/run: CMD could not be executed */
	LATCH_EXIT_CMD_NOTFOUND = 127, /* exec/task/run: CMD was not found */
};

/*
 * One row of the command table (cli/latch.c).  Rows written with the first
 * four fields alone still work: no options listed, no verbs matched.
 */
struct latch_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
	const char *help;
	/* every option the command takes: its getopt table, `latch CMD --help` and the completion read it */
	const struct latch_opt *opts;
	/* "latch CMD ..." lines, at least one */
	const char *examples;
	/* sub-verbs, NULL-terminated, matched by unique prefix at argv[verb_at] (`latch eg NAME a ENTRY`) */
	const char *const *verbs;
	int verb_at;
	/* options stop at the first word that is none (`run sh -c ...` leaves sh's options alone) */
	bool opts_in_order;
};

extern const struct latch_cmd latch_cmds[];
extern const size_t latch_n_cmds;
extern bool latch_json;

/*
 * Print "latch: ..." on stderr, or under --json record {"error": ...} in the
 * command's one JSON document; returns code.
 */
__attribute__((format(printf, 2, 3))) int latch_err(int code, const char *fmt, ...);
/*
 * Under --json: obj becomes the command's one JSON document (a second object
 * is merged into it, keys already there win); main prints it once, with
 * "version" and "exit", when the command returns.  In text mode obj is only
 * freed.  Takes ownership.
 */
void latch_json_out(json_t *obj);
/*
 * For a command that streams (audit --follow): print obj now, compact, on one
 * line with "version", and flush; the command then prints no document at the
 * end, unless an error ends the stream (one more line).  Takes ownership.
 */
void latch_json_line(json_t *obj);
/* The one "no such sandbox" error: LATCH_EXIT_NO_SANDBOX (what is "sandbox" or "VM sandbox"). */
int latch_err_no_sandbox(const char *what, const char *name);
/*
 * Text that came from a guest (or anything else latch does not control) made
 * safe for a terminal: every byte that is not printable ASCII becomes \xHH
 * (so does '\\'); newlines are kept when keep_nl.  Returns out.
 */
char *latch_guest_text(const char *in, char *out, size_t len, bool keep_nl);
/*
 * Is this process looking at the host's /sys and bpffs?  `ip netns exec`
 * mounts a /sys of its own, and a bpffs mounted or pinned under it vanishes
 * with the command.  0, or -EXDEV with the reason and the fix in why.
 */
int latch_host_view_check(char *why, size_t len);
/*
 * getopt_long() over the options of command CMD's row, the rows with a key:
 * returns a key, '?' for an option the row lacks (or a missing argument), or
 * -1 at the end; optind and opterr are the caller's, as with getopt_long().
 */
int latch_getopt(int argc, char **argv, const char *cmd);
/* `latch --json CMD --help`: the row as one JSON object. */
json_t *latch_cmd_help_json(const struct latch_cmd *c);
/* `latch completion bash`: the bash completion script, from the command table. */
int latch_completion_bash(FILE *f);
/* `latch help [CMD]` and `latch CMD --help`. */
void latch_usage(FILE *f);
void latch_cmd_help(FILE *f, const struct latch_cmd *c);
/* The version this latch was built as (git describe, or the VERSION file of a tarball). */
extern const char latch_version[];
/* Refuse early, with one line, when the caller can't touch BPF or links. */
int latch_need_root(const char *what);

int cmd_attach(int argc, char **argv);
int cmd_detach(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_egress(int argc, char **argv);
/* `egress NAME profile [P]` (cmd_profile.c) */
int cmd_egress_profile(const char *name, int argc, char **argv);
/* Load-check PROFILE here (file:line errors), then have latchd switch NAME to it. */
int latch_profile_switch_cli(const char *name, const char *profile, bool quiet);
int latch_profile_check_cli(const char *profile);
int cmd_doctor(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_down(int argc, char **argv);
int cmd_destroy(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_backup(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_task(int argc, char **argv);
int cmd_boot(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_usage(int argc, char **argv);
int cmd_kits(int argc, char **argv);
int cmd_kit(int argc, char **argv);
/*
 * Kit NAME as `latch up --kit NAME` loads it ($LATCH_ROOT/etc/latch/kits, then
 * the built-ins), its egress_allow checked by the profile parser.  NULL with
 * errno and one line in err; free with latch_kit_free().
 */
struct latch_kit *latch_kit_open_cli(const char *name, char *err, size_t errlen);
/* latch_kit_open_cli(), refusing a kit whose secret_file latchd would refuse (a link, not 0600, not root's). */
struct latch_kit *latch_kit_open_checked(const char *name, char *err, size_t errlen);
int cmd_env(int argc, char **argv); /* cmd_env.c */

/* ---- a sandbox's kit (sandbox_kit.c) */
struct latch_kit_state;
/* NAME's kit state and its kit (free with latch_kit_free); -ENOENT, quiet, when it has none. */
int latch_sandbox_kit(const char *name, struct latch_kit_state *st, struct latch_kit **kit, char *err, size_t errlen);
/*
 * Store KIT as NAME's kit, not stopped: the placeholders (and port) NAME's
 * kit state has for the same kit are kept unless FRESH (a new sandbox);
 * others are new, the port is latch.conf's broker_port.  0 or -errno.
 */
int latch_sandbox_kit_store(const char *name, const struct latch_kit *kit, bool fresh, struct latch_kit_state *st,
			    char *err, size_t errlen);
/* Admit PORT as a host service of NAME (its config, under the policy lock).  0 or -errno. */
int latch_sandbox_admit_port(const char *name, uint16_t port, char *err, size_t errlen);
/*
 * Hand latchd NAME's kit as stored, with the keys of `secret: VAR`s from
 * this environment (KIT may be NULL: no keys, the broker follows the state;
 * a missing variable is a warning on stderr, and in WARNINGS).  Returns as
 * latchd_call() (-ENOENT/-ECONNREFUSED: latchd is not running); latchd's
 * refusal is -EIO with its line.
 */
int latch_sandbox_kit_hand(const char *name, const struct latch_kit *kit, json_t *warnings, json_t **reply, char *err,
			   size_t errlen);
/*
 * After a kit was stored (or a sandbox came up): hand it to latchd, say on
 * stderr what the sandbox is given, and (SWITCH_AFTER) switch to the stored
 * profile again when the kit's egress_allow changed.  Adds "kit" to OUT (may
 * be NULL).  0 or an exit code, already printed.
 */
int latch_sandbox_kit_give(const char *name, const struct latch_kit *kit, bool switch_after, json_t *out);
/*
 * Hand NAME's kit (KIT, taken) to latchd again with this environment's keys
 * (after a latchd restart), switching to the stored profile if its network
 * changed; prints "NAME: SAIDkit K's keys handed to latchd again".  0 or an
 * exit code, printed.
 */
int latch_sandbox_kit_again(const char *name, struct latch_kit *kit, const char *said);
/*
 * For `status`: NAME's kit as stored and, when latchd answered (LATCHD_UP),
 * as it serves it (BROKER, its ping's "broker"), as "kit" in O; printed by
 * latch_sandbox_kit_print() (nothing when the sandbox has no kit).
 */
void latch_sandbox_kit_status(const char *name, const json_t *broker, bool latchd_up, json_t *o);
void latch_sandbox_kit_print(const json_t *kit);
/* `down` (stopped) or `destroy` (REMOVE): the kit state says so, and latchd wipes the keys now. */
int latch_sandbox_kit_stop(const char *name, bool remove);
/*
 * What NAME is given: "NAME=VALUE" lines (latch_kit_env_free them), *n of
 * them, and its kit state in ST.  No kit: *env NULL and 0.  -errno with a line in err.
 */
int latch_sandbox_env(const char *name, char ***env, int *n, struct latch_kit_state *st, char *err, size_t errlen);
int cmd_run(int argc, char **argv); /* cmd_run.c */
int cmd_completion(int argc, char **argv); /* help.c */
/* latchd's confinement read back from the kernel: a line, level 0 ok, 1 not running, 2 not confined (cmd_run.c). */
json_t *latch_confinement_report(char *line, size_t len, int *level);
int cmd_verify(int argc, char **argv);
struct latch_config;
/* verify_names.c: verify's name rows (an unlisted name, rebinding answers), beside their controls */
struct verify_row {
	char name[96];
	bool attack;
	char want[40], saw[160];
	int res; /* enum latch_verify_result (loader/verify.h) */
};
/*
 * The guest asks NAME through its resolver (A): the answer's word into out,
 * "REFUSED", "NXDOMAIN", "SERVFAIL", "NOERROR ADDRESS" (its first), "NOERROR"
 * (an answer whose address could not be read), "NOERROR no-address", "no
 * answer" or "unreadable".  0, or -errno: it could not ask.
 */
typedef int (*verify_ask_fn)(void *arg, const char *name, char *out, size_t len);
/* The rows into out[max] (ask NULL: --offline, latchd's test-run only); how many. */
int verify_names(const char *name, const struct latch_config *cfg, verify_ask_fn ask, void *arg,
		 const char *rebind_name, struct verify_row *out, int max);
/* cmd_grant.c: grants through latchd (docs/grants.md) */
int cmd_grant(int argc, char **argv);
int cmd_grants(int argc, char **argv);
int cmd_approve(int argc, char **argv);
int cmd_deny(int argc, char **argv);
/*
 * Record a change that was made in the audit log; takes ownership of fields
 * (NULL for none).  A log that can't be written costs one warning line on
 * stderr, never the command: enforcement does not depend on the log.
 */
void latch_audit_note(const char *sandbox, const char *kind, const char *decision, const char *reason, json_t *fields);
/* `audit prune --before T` and `audit --follow` (cmd_audit_ops.c); print is called with a NULL arg. */
int latch_audit_prune_cmd(int argc, char **argv);
struct audit_filter;
struct audit_entry;
int latch_audit_follow(struct audit_filter *f, int (*print)(const struct audit_entry *e, void *arg));
/* For `status`: a VM sandbox's domain, accelerator and routing; -ENOENT when NAME is no VM. */
int latch_vm_status_lines(const char *name, json_t *o);

#endif
