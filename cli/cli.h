/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cli.h - what the `latch` commands share: the noun table entry, exit codes,
 * and one way to print results and errors (text, or JSON under --json).
 */
#ifndef LATCH_CLI_H
#define LATCH_CLI_H

#include <jansson.h>
#include <stdbool.h>

enum latch_exit {
	LATCH_EXIT_OK = 0,
	LATCH_EXIT_FAILED = 1,
	LATCH_EXIT_USAGE = 2,
	LATCH_EXIT_UNVERIFIED = 3,
};

struct latch_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *usage;
	const char *help;
};

extern bool latch_json;

/* Print "latch: ..." (or {"error": ...} under --json) and return code. */
__attribute__((format(printf, 2, 3))) int latch_err(int code, const char *fmt, ...);
/* Under --json: print the object; in text mode it is only freed. Takes ownership. */
void latch_json_out(json_t *obj);
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
int cmd_run(int argc, char **argv); /* cmd_run.c */
/* latchd's confinement read back from the kernel: a line, level 0 ok, 1 not running, 2 not confined (cmd_run.c). */
json_t *latch_confinement_report(char *line, size_t len, int *level);
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
void latch_audit_note(const char *sandbox, const char *kind, const char *decision, const char *reason,
		      json_t *fields);
/* For `status`: a VM sandbox's domain, accelerator and routing; -ENOENT when NAME is no VM. */
int latch_vm_status_lines(const char *name, json_t *o);

#endif
