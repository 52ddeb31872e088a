/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * guest_state.h - the agent's memory: a state directory in the guest
 * (LATCH_GUEST_STATE_DIR), copied to the host and back through the guest
 * agent.
 *
 * The host copy is $LATCH_ROOT/var/lib/latch/sandboxes/NAME/state/ (the
 * sandbox's own record is NAME/sandbox, vm/state.h).  Backup streams a
 * `tar c` out of the guest over the agent's stdout; that tarball is hostile
 * and is extracted with libarchive under strict rules: regular files and
 * directories only, no absolute paths, no '..', nothing through a symlink,
 * no owners or set-id bits, and caps on the total size and the entry count.
 * Restore packs the host copy with libarchive and sends it in base64 chunks
 * as exec arguments, so the agent protocol needs no stdin.
 *
 * All functions return 0 or -errno with a line in err.
 */
#ifndef LATCH_VM_GUEST_STATE_H
#define LATCH_VM_GUEST_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LATCH_GUEST_STATE_DIR "/var/lib/agent-state"
/* A backup larger than this is refused (the agent's output cap, too). */
#define LATCH_GUEST_STATE_MAX (16u << 20)
#define LATCH_GUEST_STATE_MAX_ENTRIES 10000

/* The host copy of NAME's guest state. */
int latch_guest_state_dir(const char *name, char *buf, size_t len);

/*
 * Copy the guest's state directory of NAME (whose agent must answer) to
 * the host copy, replacing it only when the whole copy succeeded.
 * bytes and files (may be NULL) say what was stored.
 */
int latch_guest_state_backup(const char *name, uint64_t *bytes, uint32_t *files, char *err, size_t errlen);

/*
 * Copy the host copy found at src_dir (NULL: NAME's own) into NAME's
 * guest, replacing the guest's state directory.  -ENOENT when there is no
 * host copy.
 */
int latch_guest_state_restore(const char *name, const char *src_dir, uint64_t *bytes, char *err,
			      size_t errlen);

/* Extract a tar held in buf into dir (which must not exist), with the rules above.  For tests too. */
int latch_guest_state_extract(const void *buf, size_t len, const char *dir, uint64_t *bytes, uint32_t *files,
			      char *err, size_t errlen);

#endif
