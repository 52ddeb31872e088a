/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vm.h - VM sandboxes: the one header other modules include.
 *
 * A VM sandbox is a libvirt guest whose only NIC is a tap that latch made
 * and filtered before the guest existed.  This header is what the command
 * line needs: the lifecycle (up, down, destroy) and what is observed of a
 * sandbox, commands run in the guest, the guest's state backups, throwaway
 * clones (`task`), the boundary at boot, guest images, and the host checks
 * behind `latch doctor`.  Everything under it (libvirt, the tap and its
 * routing, the agent protocol, the state file) is private to vm/.
 *
 * Functions return 0 or -errno; those that take (err, errlen) write one
 * line there naming what went wrong and the fix.
 */
#ifndef LATCH_VM_H
#define LATCH_VM_H

#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/loader.h"

#define LATCH_VM_DEFAULT_IMAGE "default"
#define LATCH_VM_DEFAULT_MEMORY 256
#define LATCH_VM_DEFAULT_CPUS 1
/* How long `up` waits from starting the domain to the agent's answer, by accelerator. */
#define LATCH_VM_BOOT_TIMEOUT_KVM_MS 60000
#define LATCH_VM_BOOT_TIMEOUT_TCG_MS 180000
#define LATCH_VM_DOWN_TIMEOUT_MS 15000
/* lt-NAME must fit in IFNAMSIZ */
#define LATCH_VM_NAME_MAX (IF_NAMESIZE - 1 - 3)
#define LATCH_IMAGE_NAME_MAX 32
#define LATCH_DOMAIN_PREFIX "latch-"
/* The agent's memory in the guest: what backup copies out and restore puts back. */
#define LATCH_GUEST_STATE_DIR "/var/lib/agent-state"

/* Why a lifecycle call failed; the values are latch's exit codes. */
enum latch_vm_fail {
	LATCH_VM_FAIL_RUNTIME = 1,
	LATCH_VM_FAIL_INPUT = 2, /* bad input or a name in use: nothing was created */
	LATCH_VM_FAIL_POSTURE = 3, /* enforcement not verified: nothing was started */
	LATCH_VM_FAIL_NO_SANDBOX = 4, /* NAME is no VM sandbox: nothing was done */
};

/* What latch assigned to a sandbox, as recorded on disk. */
struct latch_vm_state {
	char name[LATCH_NAME_MAX + 1];
	uint32_t index; /* position in the pool */
	char tap[IF_NAMESIZE]; /* lt-NAME */
	uint8_t mac[6]; /* the guest's */
	struct latch_addr subnet4, host4, guest4; /* a /30: network, .1, .2 */
	struct latch_addr subnet6, host6, guest6; /* a /64: ::, ::1, ::2; family 0 without pool6 */
	uint32_t table; /* routing table of its own */
	uint32_t rule_priority;
	char uplink[IF_NAMESIZE]; /* "" : unreachable default */
	struct latch_addr gateway4, gateway6;
	char image[LATCH_IMAGE_NAME_MAX + 1];
	char image_dir[PATH_MAX];
	uint32_t memory_mib;
	uint32_t cpus;
	char workspace[PATH_MAX]; /* "" : none */
	char template_id[48]; /* "" : booted; else the template it was restored from (vm/template.h) */
};

/* A domain as libvirt reports it now. */
struct latch_domain_info {
	bool exists;
	bool latch_managed; /* carries latch's metadata element */
	char state[16]; /* running, shutoff, paused, ... */
	char accel[8]; /* "kvm" or "tcg", from the live XML; "" when not running */
	char cpu_mode[48]; /* the live XML's <cpu mode=> ("custom MODEL" for a named model); "" : none seen */
};

/* The host side of a sandbox's link, read back. */
struct latch_net_observed {
	bool tap;
	bool up;
	bool rule4, rule6;
	bool default4; /* a default route in the table */
	bool unreachable4; /* ... and it is `unreachable` */
	bool masq4;
};

struct latch_vm_observed {
	struct latch_vm_state st;
	bool have_state;
	bool pins; /* pinned enforcement exists */
	struct latch_posture posture; /* valid when pins */
	struct latch_domain_info dom;
	bool libvirt_ok; /* dom is valid */
	struct latch_net_observed net;
};

/* ---- up, down, destroy, observe ---- */

struct latch_vm_up_opts {
	char name[LATCH_NAME_MAX + 1];
	char image[LATCH_IMAGE_NAME_MAX + 1];
	uint32_t memory_mib, cpus;
	char workspace[PATH_MAX]; /* "" : none */
	int boot_timeout_ms; /* domain start to the agent's answer; 0: by accelerator */
	/* a guest that fails to boot is left as it is (still filtered) for inspection */
	bool keep_on_failure;
	/* restore the image's template guest instead of a boot (vm/template.h); a boot when that fails */
	bool warm;
	/*
	 * What the template holds beyond the image (a kit's setup): its mark in
	 * the template's id ("" : nothing), the exact inputs it is made from,
	 * and what puts it into the template's guest (named guest: exec it as
	 * a sandbox of that name) before the save.
	 */
	char template_tag[24];
	const char *template_inputs;
	int (*template_prepare)(const char *guest, void *arg, char *err, size_t errlen);
	void *template_arg;
	/* each step as it happens, one line without a newline (may be NULL) */
	void (*step)(const char *line, void *arg);
	void *step_arg;
};

struct latch_vm_up_result {
	struct latch_vm_observed obs; /* read back after the agent answered */
	char release[64]; /* guest uname -r, from the agent */
	char accel_why[128]; /* why kvm or tcg was chosen */
	bool image_built;
	int boot_timeout_ms; /* the timeout applied */
	int64_t ms_enforced; /* from the start of up to enforcement verified */
	int64_t ms_domain; /* ... to the domain started */
	int64_t ms_agent; /* ... to the agent answering */
	bool restored; /* the host copy of the guest state was put back */
	uint64_t restored_bytes;
	char restore_note[LATCH_ERR_MAX]; /* why it was not, when there was one to restore */
	/* opts.warm: */
	bool warm; /* the guest was restored from a template, not booted */
	char template_id[48]; /* the template asked for (vm/template.h) */
	bool template_made; /* the template was made (booted and saved) first */
	int64_t ms_template; /* making it took */
	char warm_note[LATCH_ERR_MAX]; /* why the warm start failed and the guest was booted */
	/* on a failed boot */
	bool kept; /* keep_on_failure: the guest was left for inspection */
	char console_log[PATH_MAX]; /* the serial console's log file */
	char console_tail[2048]; /* its last lines, non-printable bytes escaped */
};

struct latch_vm_down_result {
	bool forced; /* destroyed after the shutdown timeout */
	bool backed_up; /* the guest state was copied to the host first */
	uint64_t backup_bytes;
	uint32_t backup_files;
	char backup_note[LATCH_ERR_MAX]; /* why it was not */
};

struct latch_vm_destroy_result {
	bool backup_kept; /* the guest-state backup stays (no purge) */
	char backup_dir[PATH_MAX]; /* where it is */
};

/*
 * Start NAME: allocate a /30 and a MAC (state written first), create the
 * tap, attach the kernel enforcement, read it back and require `enforced`,
 * route, build the image if missing, define and start the domain, wait for
 * the guest agent.  A failure at any step removes everything made before it,
 * in reverse, unless keep_on_failure and the domain was started.  No domain
 * is defined, let alone started, unless the enforcement on its tap was
 * verified in the kernel.  A sandbox that is down is started again behind
 * the same enforcement.
 */
int latch_vm_up(const struct latch_vm_up_opts *o, struct latch_vm_up_result *res, enum latch_vm_fail *fail, char *err,
		size_t errlen);
/*
 * Back the guest state up (a failure is reported in dr, not fatal), shut the
 * guest down (bounded), then destroy it; tap, pins and state stay.
 */
int latch_vm_down(const char *name, int timeout_ms, struct latch_vm_down_result *dr, enum latch_vm_fail *fail,
		  char *err, size_t errlen);
/*
 * Remove domain, routing, masquerade, pins, tap, console log and state;
 * what exists of them.  The guest-state backup stays unless purge (dr says).
 */
int latch_vm_destroy(const char *name, bool purge, struct latch_vm_destroy_result *dr, enum latch_vm_fail *fail,
		     char *err, size_t errlen);

/* Read what is there now.  -ENOENT when NAME is no VM sandbox. */
int latch_vm_observe(const char *name, struct latch_vm_observed *obs);
bool latch_vm_exists(const char *name);
/* fn for each VM sandbox, sorted by name; returns the count or -errno. */
int latch_vm_list(int (*fn)(const char *name, void *arg), void *arg);
/* Its guest runs: the agent's channel exists (libvirt made it when the domain started). */
bool latch_vm_running(const char *name);

/* ---- commands in the guest ---- */

#define LATCH_AGENT_IO_STDIN (1u << 0) /* relay stdin_fd to the command's stdin until EOF, then EOF */
/* run under a pty in the guest; stdout+stderr arrive as stdout; window size from stdin_fd's terminal, and its changes */
#define LATCH_AGENT_IO_TTY (1u << 1)
/* SIGINT, SIGTERM, SIGHUP and SIGQUIT at this process go to the command's process group while it runs */
#define LATCH_AGENT_IO_SIGNALS (1u << 2)

struct latch_vm_exec_opts {
	/* stdout's / stderr's control characters written visibly (^[ for ESC): for a terminal the guest must not drive */
	bool escape_out, escape_err;
	uint32_t timeout_ms; /* 0: none; the guest kills the command at this */
	uint32_t output_limit; /* stdout+stderr bytes relayed; 0: the agent's cap, or none with io (streamed) */
	/* "NAME=VALUE"s for the command's environment (a kit's), NULL-terminated; NULL: none */
	const char *const *env;
	unsigned int io; /* LATCH_AGENT_IO_*; 0: stdin is /dev/null */
	int stdin_fd; /* with io: what the command reads, and the terminal whose size a pty takes */
	const char *cwd; /* NULL: the workspace, else / ; or this directory in the guest */
};

struct latch_vm_exec_result {
	int status; /* as a shell reports it: the exit code, or 128 + signal */
	bool signaled;
	bool truncated; /* output was dropped (the limit, in the guest or here) */
	bool timed_out; /* the guest killed it at timeout_ms */
	uint32_t duration_ms; /* as the guest measured it */
	bool answered; /* the agent answered: a failure after it happened to the command, not to the channel */
};

/*
 * Run argv (NULL-terminated) in NAME's guest with stdin from /dev/null (or
 * as opts->io says: latch_agent_exec()),
 * writing its stdout and stderr to out_fd and err_fd as they arrive (-1
 * discards).  0 when the command ran (its status in *res); -EINTR when a
 * signal interrupted the wait (the command is cancelled); -ETIMEDOUT when the
 * guest overran timeout_ms; else -errno with a line in err (the agent does
 * not answer, it refused the command).  The caller ignores SIGPIPE if the fds
 * may be pipes.
 */
int latch_vm_exec(const char *name, const char *const argv[], const struct latch_vm_exec_opts *opts, int out_fd,
		  int err_fd, struct latch_vm_exec_result *res, char *err, size_t errlen);

/* Where the default image's shells read the sandbox's environment from. */
#define LATCH_VM_ENV_FILE "/etc/profile.d/latch.sh"
/*
 * Write env ("NAME=VALUE"s, NULL-terminated) into NAME's guest as
 * LATCH_VM_ENV_FILE, `export NAME='VALUE'` lines that a login shell reads
 * (/etc/profile sources /etc/profile.d/ *.sh); an empty env removes the file.
 * Through the agent, which must answer.  0 or -errno with a line in err.
 */
int latch_vm_set_env(const char *name, const char *const *env, char *err, size_t errlen);

/* ---- the guest's state: backup and restore ---- */

/* The host copy of NAME's guest state (LATCH_GUEST_STATE_DIR in the guest). */
int latch_vm_backup_dir(const char *name, char *buf, size_t len);
/*
 * Copy NAME's guest state directory (its agent must answer) to the host
 * copy, replacing it only when the whole copy succeeded.  The tarball the
 * guest sends is parsed in a confined child.  bytes and files (may be NULL)
 * say what was stored.
 */
int latch_vm_backup(const char *name, uint64_t *bytes, uint32_t *files, char *err, size_t errlen);
/*
 * Copy the host copy found at src_dir (NULL: NAME's own) into NAME's guest,
 * replacing the guest's state directory.  -ENOENT when there is no host copy.
 */
int latch_vm_restore(const char *name, const char *src_dir, uint64_t *bytes, char *err, size_t errlen);

/* ---- throwaway clones: `latch task` ---- */

struct latch_vm_task_opts {
	const char *source; /* the sandbox whose image and state the clone gets */
	const char *const *argv; /* the command, NULL-terminated */
	uint32_t timeout_ms; /* the command's; 0: none */
	/* set by the caller's signal handler: stop, remove the clone, return -EINTR */
	volatile sig_atomic_t *stop;
	void (*step)(const char *line, void *arg); /* as latch_vm_up_opts.step */
	void *step_arg;
};

struct latch_vm_task_result {
	char clone[LATCH_NAME_MAX + 1];
	bool stale_state; /* the source's guest did not answer: its last backup was used */
	char state_note[LATCH_ERR_MAX];
	bool removed; /* the clone is gone again */
	struct latch_vm_exec_result run;
};

/*
 * Make a clone of source (its image, memory and cpus, its guest state,
 * nothing of the host's but its services: sealed), run argv in it with its
 * stdout and stderr on ours, and destroy it, also when stop is set half way.
 * 0 when the command ran (its status in res->run); -EINTR when stopped;
 * else -errno with a line in err and *fail set.  res->removed says whether
 * the clone is gone; when not, err names it.
 */
int latch_vm_task(const struct latch_vm_task_opts *o, struct latch_vm_task_result *res, enum latch_vm_fail *fail,
		  char *err, size_t errlen);

/* ---- the boundary at boot ---- */

struct latch_boot_result {
	bool tap_created; /* the tap was missing and was made again */
	bool from_pins; /* re-attached from the pins (else: fresh, empty policy) */
	bool enforced; /* observed in the kernel afterwards */
	bool routed;
	char note[LATCH_ERR_MAX]; /* what went wrong */
};

/*
 * `boot apply`: for every sandbox with a state, mount bpffs if needed,
 * re-create the tap (down and bare), re-attach the pinned programs (or, when
 * the pins are gone, fresh enforcement with an empty policy: default deny),
 * read the posture back and require `enforced`, then route.  It never talks
 * to libvirt: it runs before libvirtd.  fn gets each result; the return is
 * the number of sandboxes not enforced, or -errno.
 */
int latch_vm_boot_apply(void (*fn)(const char *name, int ret, const struct latch_boot_result *r, void *arg), void *arg);
/*
 * `boot install`, for an installed latch_bin (latch_vm_boot_bin_check()):
 * enable latch-boot.service (`latch boot apply` before libvirtd) and
 * latchd.service, as `make install` put them beside latch_bin
 * (PREFIX/lib/systemd/system), or written under $LATCH_ROOT/etc/systemd/
 * system from the same templates (vm/units/) when there are none or
 * LATCH_ROOT/LATCH_BPFFS must be carried; and the libvirt hook
 * etc/libvirt/hooks/qemu.d/latch, which lets every domain that is not
 * latch's through without running latch, and runs `latch_bin boot hook`
 * for latch's own (libvirt runs hooks with an empty environment, so
 * LATCH_ROOT/LATCH_BPFFS are baked in).  The single-file hook an older
 * latch wrote (hooks/qemu) is removed.  Refused, writing nothing, when
 * latchd is not beside latch_bin (latchd.service's ExecStart).  Each path
 * written goes to wrote.
 */
int latch_vm_boot_install(const char *latch_bin, void (*wrote)(const char *path, void *arg), void *arg, char *err,
			  size_t errlen);
/*
 * `boot uninstall`: undo `boot install` under $LATCH_ROOT: the units' links
 * in the wants directories, the units it wrote into etc/systemd/system and
 * the hook, each only when it is latch's (a unit whose head names it, the
 * hook with its marker line); a file of someone else's at one of those
 * paths stays.  Each path goes to done, removed or kept.  Units installed
 * by `make install` are make uninstall's.
 */
int latch_vm_boot_uninstall(void (*done)(const char *path, bool removed, void *arg), void *arg, char *err,
			    size_t errlen);
/*
 * The qemu hook's decision for domain DOM at operation OP, with the domain
 * XML read from xml_fd: 0 to let it start, -EPERM (reason in err) to refuse.
 * Domains that are not latch's, and operations other than prepare, start
 * and restore, are always let through.  It reads only latch's state and the
 * kernel: libvirtd holds the domain while it runs the hook.
 */
/*
 * Refuse a binary that must not be the hook's: one in a build tree (beside
 * build/arrows.ok, or under a directory that holds cli/latch.c), or one that
 * it, or a directory above it, lets a user other than root replace.  0 or
 * -EPERM with the reason and the fix in err.
 */
int latch_vm_boot_bin_check(const char *bin, char *err, size_t errlen);
int latch_vm_boot_hook(const char *dom, const char *op, int xml_fd, char *err, size_t errlen);

/* ---- guest images ---- */

/*
 * The recipe script of IMAGE: $LATCH_IMAGE_SH (default) or
 * $LATCH_IMAGE_DEBIAN_SH (debian), vm/images/ beside the source tree of this
 * binary (build/latch), or the installed one in /usr/lib/latch.  -EINVAL for
 * an image latch has no recipe for (err names those it has), -ENOENT with a line in err when the
 * script is nowhere.
 */
int latch_vm_image_script(const char *image, char *buf, size_t len, char *err, size_t errlen);
/*
 * Build IMAGE into its directory of the image cache (latch.conf `images`),
 * the recipe's progress on our stderr.  A current image is kept unless
 * force.  0, or -errno with a line in err; *recipe_exit gets the script's
 * exit status (2: it was used wrongly) when it ran.
 */
int latch_vm_image_build(const char *image, bool force, char *dir, size_t dirlen, int *recipe_exit, char *err,
			 size_t errlen);

/* ---- the host, for `latch doctor` ---- */

/* Longer than this for one capabilities call means libvirt re-probes QEMU each time. */
#define LATCH_VM_CAPS_SLOW_MS 2000

struct latch_vm_libvirt_probe {
	unsigned long version; /* libvirt's, e.g. 9000000 */
	int64_t connect_ms;
	int64_t caps_ms; /* the faster of up to two capabilities calls */
	int64_t caps_first_ms; /* the first (a re-probe after a fix is slow once) */
};
/* Connect read-only and time capabilities calls.  0, or -errno with a line in err (libvirt missing, down). */
int latch_vm_libvirt_probe(struct latch_vm_libvirt_probe *p, char *err, size_t errlen);

struct latch_vm_kvm {
	bool present; /* /dev/kvm exists */
	bool cpu_virt; /* vmx or svm among the CPU flags */
	bool usable; /* latch would start guests under KVM */
	char mode[80]; /* /dev/kvm's, e.g. "0660 root:kvm" */
	char qemu_user[64]; /* libvirt's qemu user (qemu.conf `user`, else libvirt-qemu) */
	bool qemu_user_known; /* that user exists */
	bool qemu_user_opens; /* opened /dev/kvm read-write as that user, its groups */
	char why[256]; /* what was found, one line */
};
/* Probe /dev/kvm: its mode, the CPU flags, and an open as libvirt's qemu user in a child. */
int latch_vm_kvm_probe(struct latch_vm_kvm *k);

#endif
