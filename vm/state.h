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

#include <stdbool.h>

#include "config/config.h"
#include "vm/vm.h"

/* Take the lifecycle lock; returns an fd to close() to release it, or -errno. */
int latch_state_lock(char *err, size_t errlen);

int latch_state_dir(const char *name, char *buf, size_t len);
/* -ENOENT when there is none; other errors with a line in err. */
int latch_state_load(const char *name, struct latch_vm_state *st, char *err, size_t errlen);
/* Refuses a value with a control character: a newline in one would write a key of its own. */
int latch_state_save(const struct latch_vm_state *st, char *err, size_t errlen);
/*
 * Remove the sandbox's record and whatever else is in its directory but the
 * guest-state backup (guest_state.h), which outlives the sandbox unless
 * purged; the directory goes when nothing is left in it.  0 when already gone.
 */
int latch_state_remove(const char *name);
/* Remove the directory with the guest-state backup in it. */
int latch_state_purge(const char *name);
/* rm -r PATH without following symlinks; 0 when it is already gone. */
int latch_rm_tree(const char *path);

/*
 * Give st (name, image, memory... already set) the lowest free slot of the
 * pool: addresses, a MAC, a table, and the uplink from the config.  Call with
 * the lock held.  -ENOSPC when the pool is exhausted.
 */
int latch_state_allocate(const struct latch_conf *c, struct latch_vm_state *st, char *err, size_t errlen);

#endif
