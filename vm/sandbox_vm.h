/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sandbox_vm.h - the lifecycle of a VM sandbox: up, down, destroy, and what
 * is observed of it.
 *
 * `up` runs in one order, always:
 *   allocate a /30 and a MAC (state written first) -> create the tap ->
 *   attach the kernel enforcement -> read it back and require `enforced` ->
 *   route -> build the image if missing -> define and start the domain ->
 *   wait for the guest agent.
 * A failure at any step removes everything made before it, in reverse.  No
 * domain is defined, let alone started, unless the enforcement on its tap was
 * verified in the kernel.
 */
#ifndef LATCH_VM_SANDBOX_VM_H
#define LATCH_VM_SANDBOX_VM_H

#include <stdbool.h>
#include <stdint.h>

#include "loader/loader.h"
#include "vm/libvirt.h"
#include "vm/net.h"
#include "vm/state.h"

/* Why a lifecycle call failed; the values are latch's exit codes. */
enum latch_vm_fail {
	LATCH_VM_FAIL_RUNTIME = 1,
	LATCH_VM_FAIL_INPUT = 2,   /* bad input or a name in use: nothing was created */
	LATCH_VM_FAIL_POSTURE = 3, /* enforcement not verified: nothing was started */
};

#define LATCH_VM_DEFAULT_IMAGE "default"
#define LATCH_VM_DEFAULT_MEMORY 256
#define LATCH_VM_DEFAULT_CPUS 1
#define LATCH_VM_BOOT_TIMEOUT_MS 60000
#define LATCH_VM_DOWN_TIMEOUT_MS 15000
/* lt-NAME must fit in IFNAMSIZ */
#define LATCH_VM_NAME_MAX (IF_NAMESIZE - 1 - 3)

struct latch_vm_up_opts {
	char name[LATCH_NAME_MAX + 1];
	char image[LATCH_IMAGE_NAME_MAX + 1];
	uint32_t memory_mib, cpus;
	char workspace[PATH_MAX]; /* "" : none */
	int boot_timeout_ms;
};

struct latch_vm_observed {
	struct latch_vm_state st;
	bool have_state;
	bool pins;			/* pinned enforcement exists */
	struct latch_posture posture;	/* valid when pins */
	struct latch_domain_info dom;
	bool libvirt_ok;		/* dom is valid */
	struct latch_net_observed net;
};

struct latch_vm_up_result {
	struct latch_vm_observed obs;	/* read back after the agent answered */
	char release[64];		/* guest uname -r, from the agent */
	char accel_why[128];		/* why kvm or tcg was chosen */
	bool image_built;
	int64_t ms_enforced;		/* from the start of up to enforcement verified */
	int64_t ms_domain;		/* ... to the domain started */
	int64_t ms_agent;		/* ... to the agent answering */
	bool restored;			/* the host copy of the guest state was put back */
	uint64_t restored_bytes;
	char restore_note[LATCH_ERR_MAX]; /* why it was not, when there was one to restore */
};

struct latch_vm_down_result {
	bool forced;			/* destroyed after the shutdown timeout */
	bool backed_up;			/* the guest state was copied to the host first */
	uint64_t backup_bytes;
	uint32_t backup_files;
	char backup_note[LATCH_ERR_MAX]; /* why it was not */
};

int latch_vm_up(const struct latch_vm_up_opts *o, struct latch_vm_up_result *res, enum latch_vm_fail *fail,
		char *err, size_t errlen);
/*
 * Back the guest state up (latch_guest_state_backup; a failure is reported in
 * dr, not fatal), shut the guest down (bounded), then destroy it; tap, pins
 * and state stay.
 */
int latch_vm_down(const char *name, int timeout_ms, struct latch_vm_down_result *dr, enum latch_vm_fail *fail,
		  char *err, size_t errlen);
/* Remove domain, routing, masquerade, pins, tap and state; what exists of them. */
int latch_vm_destroy(const char *name, enum latch_vm_fail *fail, char *err, size_t errlen);

/* Read what is there now.  -ENOENT when NAME is no VM sandbox. */
int latch_vm_observe(const char *name, struct latch_vm_observed *obs);
/* The agent's socket for NAME. */
int latch_vm_agent_path(const char *name, char *buf, size_t len);
/*
 * Create NAME's enforcement on its tap from its state alone, with an empty
 * policy (default deny): for `boot apply` when the pins are gone, and
 * what `up` does.  The tap must exist.
 */
int latch_vm_enforce_fresh(const struct latch_vm_state *st, char *err, size_t errlen);
/* Fill the net options of a state (for latch_net_*). */
void latch_vm_net_opts(const struct latch_vm_state *st, struct latch_net_opts *n);

#endif
