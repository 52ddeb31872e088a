/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sandbox.h - the orchestration of a sandbox: what joins vm/, kit/, profile/,
 * the pinned enforcement (loader/) and latchd (ctl/) into one step a
 * command asks for.  It owns: `up` after its options are parsed (profile and
 * kit chosen and checked before anything exists, the guest booted, the kit
 * handed to latchd, the profile stored and switched, the guest's
 * environment), `down` and `destroy` with their kit and profile state,
 * `attach` with its kit, a sandbox's kit hand-over to latchd (the kit
 * state's one writer), verify's name rows, and latchd's confinement report.
 *
 * Struct in, struct out; it prints nothing.  A failure is -errno with one
 * line in err, and (where a command's exit code depends on it) what kind
 * of failure it was.  Progress and warnings a command shows while the
 * work goes on come out through a struct latch_sandbox_say, in order.
 */
#ifndef LATCH_SANDBOX_H
#define LATCH_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kit/kit.h"
#include "loader/loader.h"
#include "profile/profile.h"
#include "vm/vm.h"

/* An error line here may carry the sandbox's name and a lower layer's whole line. */
#define LATCH_SANDBOX_ERR_MAX (LATCH_ERR_MAX + 256)

/*
 * A line said while the work goes on, without "latch: " and newline: a NOTE
 * is progress (a --json caller may drop it), a WARN a warning that costs
 * nothing of the work (always shown, after "warning: ").  fn NULL: silent.
 */
enum latch_sandbox_say_kind {
	LATCH_SANDBOX_NOTE,
	LATCH_SANDBOX_WARN,
};
struct latch_sandbox_say {
	void (*fn)(void *arg, enum latch_sandbox_say_kind kind, const char *line);
	void *arg;
};
/* One line through S (nothing when S or its fn is NULL), printf-style. */
void latch_sandbox_sayf(const struct latch_sandbox_say *s, enum latch_sandbox_say_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- a sandbox's kit */

/* The kit directory $LATCH_ROOT/etc/latch/kits into dir, as kit/'s load options (dir NULL if unset). */
struct latch_kit_opts latch_sandbox_kit_opts(char *dir, size_t len);
/*
 * Kit NAME as `latch up --kit NAME` loads it (the kit directory, then the
 * built-ins), its egress_allow checked by the profile parser.  NULL with
 * errno and one line in err; free with latch_kit_free().
 */
struct latch_kit *latch_sandbox_kit_open(const char *name, char *err, size_t errlen);
/*
 * The one verdict on a loaded kit, for up, attach, `kits` and `kit check`
 * alike: a secret_file latchd would refuse (a link, not 0600, not root's)
 * makes the kit unusable.  Takes KIT (NULL passes through); NULL with errno
 * EPERM and err when refused.
 */
struct latch_kit *latch_sandbox_kit_verdict(struct latch_kit *kit, char *err, size_t errlen);
/* latch_sandbox_kit_open() with latch_sandbox_kit_verdict(). */
struct latch_kit *latch_sandbox_kit_open_checked(const char *name, char *err, size_t errlen);
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
 * After a kit was stored (or a sandbox came up): hand it to latchd with the
 * keys of `secret: VAR`s from this environment (KIT may be NULL: no keys,
 * the broker follows the state), say what the sandbox is given, and
 * (SWITCH_AFTER) switch to the stored profile again when the kit's
 * egress_allow changed.  Adds "kit" to OUT (may be NULL).  latchd not
 * running is no failure (the note says so).  0, or -errno with "NAME: ..."
 * in err.
 */
int latch_sandbox_kit_give(const char *name, const struct latch_kit *kit, bool switch_after, json_t *out,
			   const struct latch_sandbox_say *say, char *err, size_t errlen);
/*
 * Every installer of KIT's setup, fetched (or taken from the cache) and held
 * to its sha512 (kit/kit.h, latch_npm_fetch), in order, into out[0..n_setup):
 * all or none.  Says one line a package.  0, or -errno with the failing
 * package's line in err (nothing is open then).
 */
int latch_sandbox_setup_fetch(const struct latch_kit *kit, struct latch_npm_tarball *out,
			      const struct latch_sandbox_say *say, char *err, size_t errlen);
void latch_sandbox_setup_close(const struct latch_kit *kit, struct latch_npm_tarball *t);
/*
 * `latch kit NAME setup` (and `latch agent run` before the agent starts):
 * KIT's installers fetched and verified (latch_sandbox_setup_fetch), all of
 * them, then each streamed from its hashed descriptor into NAME's running
 * guest: unpacked at /opt/latch/npm/PKG@VERSION, its bins linked into
 * /usr/local/bin.  Nothing runs in the guest unless every installer
 * verified.  A kit without setup is 0 at once.  0 or -errno with one line
 * in err (an agent without stdin: -EPROTONOSUPPORT, "rebuild the image").
 */
int latch_sandbox_kit_setup(const char *name, const struct latch_kit *kit, const struct latch_sandbox_say *say,
			    char *err, size_t errlen);
/*
 * A warm start's template for KIT (vm/template.h) with its setup in it: vm's
 * template tag, inputs (written to buf) and the step that installs the setup,
 * verified as for a sandbox, into the template's guest before it is saved.
 * Nothing for a kit without setup.
 */
void latch_sandbox_setup_template(const struct latch_kit *kit, struct latch_vm_up_opts *vm, char *buf, size_t len);
/*
 * `latch kit pin KIT NAME@VERSION`: the registry's sha512 integrity of that
 * version (latch.conf's npm_registry), written with the version into KIT's
 * setup entry for NAME in $LATCH_ROOT/etc/latch/kits/KIT.yaml (a copy of
 * the built-in when KIT is one; the rest of the text unchanged), atomically.
 * PATH gets the file, INTEGRITY (LATCH_NPM_INTEGRITY_MAX + 1) the hash.
 * 0 or -errno with one line in err.
 */
int latch_sandbox_kit_pin(const char *kit_name, const char *spec, char *path, size_t pathlen, char *integrity,
			  const struct latch_sandbox_say *say, char *err, size_t errlen);
/* `down` (stopped) or `destroy` (REMOVE): the kit state says so, and latchd wipes the keys now. */
int latch_sandbox_kit_stop(const char *name, bool remove, const struct latch_sandbox_say *say);
/*
 * Credential CRED of NAME's kit (its state ST, read by the caller) goes to
 * alternative BACKEND ("": its own upstream): stored first, so a latchd that
 * starts now serves it, then told to latchd.  0 with *applied false when
 * latchd is not running; -errno with a line in err.
 */
int latch_sandbox_kit_backend(const char *name, struct latch_kit_state *st, const char *cred, const char *backend,
			      bool *applied, char *err, size_t errlen);
/*
 * For `status`: NAME's kit as stored and, when latchd answered (LATCHD_UP),
 * as it serves it (BROKER, its ping's "broker"), as "kit" in O (null when
 * the sandbox has no kit).
 */
void latch_sandbox_kit_status(const char *name, const json_t *broker, bool latchd_up, json_t *o);
/*
 * What NAME is given: "NAME=VALUE" lines (latch_kit_env_free them), *n of
 * them, and its kit state in ST.  No kit: *env NULL and 0.  -errno with a line in err.
 */
int latch_sandbox_env(const char *name, char ***env, int *n, struct latch_kit_state *st, char *err, size_t errlen);

/* ---- up, down, destroy */

struct latch_sandbox_up_opts {
	struct latch_vm_up_opts vm; /* the guest; its step callback says each boot step */
	const char *profile; /* NULL: the one stored for the name, else latch.conf's */
	const char *kit; /* NULL: the one stored for the name (a fresh sandbox: none) */
	struct latch_sandbox_say say;
};

struct latch_sandbox_up_result {
	/* on a failure, its kind: bad input (nothing was created), runtime, posture not verified */
	enum latch_vm_fail fail;
	bool boot_failed; /* latch_vm_up itself failed: vm says what was kept and the console's tail */
	/* it was up already: the kit's keys were handed to latchd again, nothing was booted */
	bool again;
	struct latch_vm_up_result vm; /* the boot, read back */
	const char *profile; /* the profile it was given: o->profile, or stored_profile */
	char stored_profile[LATCH_PROFILE_NAME_MAX + 2];
	const char *profile_note; /* "applied by latchd", or why not */
	char kit[LATCH_KIT_NAME_MAX + 1]; /* "" : no kit */
	json_t *kit_json; /* what "kit" the JSON document gets (NULL: none); the caller frees it */
	bool env_file; /* the kit's environment was written into the guest */
};

/*
 * Bring a VM sandbox up: the profile (o->profile, else the stored one,
 * else latch.conf's) and the kit (o->kit, else the stored one) are loaded
 * and checked before anything is created; a sandbox already running with
 * that kit gets its keys handed again (res->again) and nothing else.  Then
 * the guest boots sealed (latch_vm_up), its kit is stored and handed to
 * latchd, the profile stored and switched by latchd (without latchd it
 * stays sealed: closed, not open), and the kit's environment written into
 * the guest.  0, or -errno with the line in err and res->fail.
 */
int latch_sandbox_up(const struct latch_sandbox_up_opts *o, struct latch_sandbox_up_result *res, char *err,
		     size_t errlen);
/* Stop NAME's guest (latch_vm_down), and stop its kit: latchd wipes its keys. */
int latch_sandbox_down(const char *name, int timeout_ms, const struct latch_sandbox_say *say,
		       struct latch_vm_down_result *dr, enum latch_vm_fail *fail, char *err, size_t errlen);
/* Destroy NAME whole (latch_vm_destroy), its stored profile and its kit state with it. */
int latch_sandbox_destroy(const char *name, bool purge, const struct latch_sandbox_say *say,
			  struct latch_vm_destroy_result *dr, enum latch_vm_fail *fail, char *err, size_t errlen);

/* ---- does an image carry what a kit's agent needs (sandbox/image_fit.c) */

/*
 * The node major KIT's agent needs (0: none), and in *glibc whether it is a
 * native glibc build: by its setup's packages, else its command's program.
 */
int latch_sandbox_kit_needs(const struct latch_kit *kit, bool *glibc);
/* The node major IMAGE_DIR's manifest.txt says the image carries (0: none; -errno: no manifest); *glibc: Debian's libc. */
int latch_sandbox_image_node_major(const char *image_dir, bool *glibc);
/*
 * 0 when IMAGE (a name in latch.conf's images) carries what KIT needs; else
 * -ENOEXEC and one line in err naming the image to build.  For `up` and `agent run`.
 */
int latch_sandbox_image_fits(const struct latch_kit *kit, const char *image, char *err, size_t errlen);

/* ---- attach */

/*
 * Attach the enforcement to an existing link as O says (its input already
 * parsed and checked), with kit KIT_NAME (NULL: none), and read the posture
 * back.  The kit is loaded and checked, and latch.conf's broker port added
 * to the host services, before anything exists.  On success *kit holds the
 * kit for latch_sandbox_attach_kit() (NULL: none).  -errno with err and
 * *fail: INPUT (nothing was created), RUNTIME, POSTURE (attached, NOT
 * enforced).
 */
int latch_sandbox_attach(struct latch_sandbox_opts *o, const char *kit_name, struct latch_kit **kit,
			 enum latch_vm_fail *fail, char *err, size_t errlen);
/*
 * After the attach: a kit stored with fresh placeholders (or any old kit
 * state of the name removed), the profile `sealed` when none is stored (the
 * kit's network joins it), and the kit handed to latchd, whose switch then
 * composes both.  Adds "kit" to OUT.  0 or -errno with err.
 */
int latch_sandbox_attach_kit(const char *name, const struct latch_kit *kit, json_t *out,
			     const struct latch_sandbox_say *say, char *err, size_t errlen);
/* Re-attach NAME from its pins and read the posture back.  -errno with err and *fail (NO_SANDBOX, RUNTIME, POSTURE). */
int latch_sandbox_attach_again(const char *name, enum latch_vm_fail *fail, char *err, size_t errlen);

/* ---- verify's name rows */

struct latch_config;
/* one row of verify's name checks: an attack (or its control), what it should see and what it saw */
struct latch_verify_name_row {
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
typedef int (*latch_verify_ask_fn)(void *arg, const char *name, char *out, size_t len);
/*
 * What the sandbox's resolver does with a name the policy does not list,
 * and with answers that rebind, each beside its control: the rows into
 * out[max] (ask NULL: --offline, latchd's test-run only); how many.
 */
int latch_sandbox_verify_names(const char *name, const struct latch_config *cfg, latch_verify_ask_fn ask, void *arg,
			       const char *rebind_name, struct latch_verify_name_row *out, int max);

/* ---- latchd's confinement */

/*
 * latchd's confinement read back from the kernel, for status and doctor:
 * the line into line, *level 0 confined, 1 not running, 2 running NOT
 * confined (or not verified); the JSON object returned.
 */
json_t *latch_confinement_report(char *line, size_t len, int *level);

/* ---- latch agent run (agent.c) */

/*
 * An agent's guest memory unless --memory says otherwise: Claude Code's
 * native build dies for want of memory in up's default (256 MiB), and node
 * agents want as much.
 */
#define LATCH_AGENT_DEFAULT_MEMORY 1024

struct latch_sandbox_agent_opts {
	const char *kit; /* a kit name, or a kit file in the kits directory */
	char workspace[PATH_MAX]; /* the host directory the guest gets at /workspace, resolved */
	const char *name; /* NULL: agent-KIT-N, the first free (KIT-N when that is too long for a tap) */
	const char *image; /* NULL: the default image */
	uint32_t memory_mib; /* 0: LATCH_AGENT_DEFAULT_MEMORY */
	const char *const *args; /* after the kit's command words, NULL-terminated (may be NULL) */
	bool keep; /* the sandbox stays after the agent exited on its own */
	bool dry_run; /* resolve and say everything, create nothing */
	bool cold; /* boot the guest; else restore the image's template (vm/template.h), booting if that fails */
	void (*step)(const char *line, void *arg); /* up's boot steps (NULL: quiet) */
	void *step_arg;
	struct latch_sandbox_say say;
	/*
	 * NULL: stdin is not a terminal, the command gets no pty.  Else the
	 * command runs under a pty of stdin's size, and this puts the user's
	 * terminal in raw mode (raw true) before it and back after it.
	 */
	void (*terminal)(void *arg, bool raw);
	void *terminal_arg;
};

struct latch_sandbox_agent_result {
	char name[LATCH_NAME_MAX + 1];
	enum latch_vm_fail fail; /* on a failure of latch's own, its kind */
	bool ran; /* the command ran to its end: status is its */
	int status; /* as a shell reports it: its exit code, or 128 + signal */
	int signal; /* the run was stopped by this signal (SIGINT, SIGTERM, SIGHUP), else 0 */
	bool removed; /* the sandbox is gone again */
	bool warm; /* the guest was restored from a template, not booted */
	bool setup_in_template; /* ... one that holds the kit's setup, so none ran */
	char template_id[48]; /* which; "" when booted */
	int64_t ms_template; /* making the template first took (0: it was there) */
	/* from the run's start: up began, enforcement verified, domain started, agent answered, ready, setup, command */
	int64_t ms_up_began, ms_enforced, ms_domain, ms_agent, ms_ready, ms_setup, ms_command;
};

/*
 * `latch agent run`: the kit (a name, or its file in the kits directory)
 * and the workspace checked, kosa8's lines said, sandboxes of killed runs
 * removed; then (unless dry_run) the sandbox claimed with an owner mark, up
 * with the kit, the workspace and profile sealed, the kit's setup, the
 * kit's command in the guest; then the sandbox removed (unless keep and
 * the command ended on its own).  SIGINT, SIGTERM and SIGHUP are blocked
 * for the call and stop it at the next step (res->signal).  0 when the
 * command ran or a signal stopped it; -errno with a line in err and
 * res->fail.
 */
int latch_sandbox_agent_run(const struct latch_sandbox_agent_opts *o, struct latch_sandbox_agent_result *res, char *err,
			    size_t errlen);
/*
 * fn for each sandbox whose `latch agent run` is gone (killed: its PID is
 * no longer that process); fn returning non-zero stops.  The count, or -errno.
 */
int latch_sandbox_agent_orphans(int (*fn)(const char *name, const char *kit, uint32_t pid, void *arg), void *arg);
/* Remove an agent sandbox whole: as `latch destroy --purge`, its kit state and owner mark too. */
int latch_sandbox_agent_remove(const char *name, const struct latch_sandbox_say *say, char *err, size_t errlen);

#endif
