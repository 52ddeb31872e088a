/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * state.h - what latch assigned to a VM sandbox, kept on disk.
 *
 * $LATCH_ROOT/var/lib/latch/sandboxes/NAME/sandbox holds the sandbox's /30
 * (and /64), MAC, routing table, the uplink as it was when routing was set
 * up, and the guest's image, memory, cpus and workspace.  It is written
 * atomically (temp file, fsync, rename), and it is written before anything
 * is created in the kernel, so `destroy` always knows what to remove even
 * after a crash half way through `up`.
 *
 * Allocation and every lifecycle change happen under one lock
 * (latch_state_lock), so two `latch up`s never get the same /30.
 */
#ifndef LATCH_VM_STATE_H
#define LATCH_VM_STATE_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "loader/loader.h"
#include "config/config.h"

#define LATCH_IMAGE_NAME_MAX 32

struct latch_vm_state {
	char name[LATCH_NAME_MAX + 1];
	uint32_t index;			/* position in the pool */
	char tap[IF_NAMESIZE];		/* lt-NAME */
	uint8_t mac[6];			/* the guest's */
	struct latch_addr subnet4, host4, guest4; /* a /30: network, .1, .2 */
	struct latch_addr subnet6, host6, guest6; /* a /64: ::, ::1, ::2; family 0 without pool6 */
	uint32_t table;			/* routing table of its own */
	uint32_t rule_priority;
	char uplink[IF_NAMESIZE];	/* "" : unreachable default */
	struct latch_addr gateway4, gateway6;
	char image[LATCH_IMAGE_NAME_MAX + 1];
	char image_dir[PATH_MAX];
	uint32_t memory_mib;
	uint32_t cpus;
	char workspace[PATH_MAX];	/* "" : none */
};

/* Take the lifecycle lock; returns an fd to close() to release it, or -errno. */
int latch_state_lock(char *err, size_t errlen);

int latch_state_dir(const char *name, char *buf, size_t len);
bool latch_state_exists(const char *name);
/* -ENOENT when there is none; other errors with a line in err. */
int latch_state_load(const char *name, struct latch_vm_state *st, char *err, size_t errlen);
int latch_state_save(const struct latch_vm_state *st, char *err, size_t errlen);
/* Remove the state directory; 0 when it is already gone. */
int latch_state_remove(const char *name);
/* fn for each sandbox with a state, sorted; returns the count or -errno. */
int latch_state_list(int (*fn)(const char *name, void *arg), void *arg);

/*
 * Give st (name, image, memory... already set) the lowest free slot of the
 * pool: addresses, a MAC, a table, and the uplink from the config.  Call with
 * the lock held.  -ENOSPC when the pool is exhausted.
 */
int latch_state_allocate(const struct latch_conf *c, struct latch_vm_state *st, char *err, size_t errlen);

#endif
