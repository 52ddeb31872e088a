/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * guest_state.h - the agent's memory: a state directory in the guest
 * (LATCH_GUEST_STATE_DIR), copied to the host and back through the guest
 * agent (latch_vm_backup and latch_vm_restore in vm.h).
 *
 * The host copy is $LATCH_ROOT/var/lib/latch/sandboxes/NAME/state/ (the
 * sandbox's own record is NAME/sandbox, vm/state.h); it outlives `destroy`
 * unless purged, and `up` puts it back into a new guest of that name.  Backup streams a
 * `tar c` out of the guest over the agent's stdout; that tarball is hostile
 * and is extracted with libarchive under strict rules: regular files and
 * directories only, no absolute paths, no '..', nothing through a symlink,
 * no owners or set-id bits, and caps on the total size and the entry count,
 * by a child process that can do nothing else (confine.h).
 * Restore packs the host copy with libarchive and sends it in base64 chunks
 * as exec arguments, so the agent protocol needs no stdin.
 */
#ifndef LATCH_VM_GUEST_STATE_H
#define LATCH_VM_GUEST_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/vm.h"

/* A backup larger than this is refused (the agent's output cap, too). */
#define LATCH_GUEST_STATE_MAX (16u << 20)
#define LATCH_GUEST_STATE_MAX_ENTRIES 10000

/*
 * Extract a tar held in buf into dir (which must not exist), with the rules
 * above, in a child confined to dir (confine.h) before it reads a byte of
 * the tar.  0, or -errno with a line in err; a child that the seccomp filter
 * killed is -ECHILD.  For tests too.
 */
int latch_guest_state_extract(const void *buf, size_t len, const char *dir, uint64_t *bytes, uint32_t *files, char *err,
			      size_t errlen);

#endif
