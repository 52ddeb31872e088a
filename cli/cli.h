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
/* Have latchd switch NAME to PROFILE (it loads it: file:line errors come back from it). */
int latch_profile_switch_cli(const char *name, const char *profile, bool quiet);
int cmd_doctor(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_down(int argc, char **argv);
int cmd_destroy(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_shell(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_backup(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_task(int argc, char **argv);
int cmd_agent(int argc, char **argv); /* cmd_agent.c */
int cmd_boot(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_usage(int argc, char **argv);
int cmd_kits(int argc, char **argv);
int cmd_kit(int argc, char **argv);
int cmd_env(int argc, char **argv); /* cmd_env.c */

/*
 * How the commands show what sandbox/ says while it works: a note on
 * stderr in text mode, a warning always ("latch: warning: ...").
 */
struct latch_sandbox_say;
extern const struct latch_sandbox_say latch_say;
/* "NAME: SAIDkit KIT's keys handed to latchd again", and its JSON document ("kit": KIT_JSON, taken). */
void latch_kit_again_print(const char *name, const char *kit, const char *said, json_t *kit_json);
int cmd_run(int argc, char **argv); /* cmd_run.c */
int cmd_completion(int argc, char **argv); /* help.c */
int cmd_verify(int argc, char **argv);
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

/*
 * The terminal on fd in raw mode (cli/tty.c) until latch_tty_restore(), which
 * also runs at exit and on SIGTERM, SIGHUP, SIGQUIT and SIGINT.  0 or -errno.
 */
int latch_tty_raw(int fd);
void latch_tty_restore(void);

#endif
