/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * hook.h - loader-internal: latch's two programs on a sandbox's device, in
 * either attach mode, and the pin names that go with them.  Used by
 * sandbox.c (create, re-attach, detach) and posture.c (reading back).
 */
#ifndef LATCH_LOADER_HOOK_H
#define LATCH_LOADER_HOOK_H

#include <stdbool.h>
#include <stddef.h>

#include "loader/sandbox.h"
#include "loader/tc.h"

extern const char *const latch_prog_pin_names[LATCH_DIR_COUNT]; /* prog_from_guest, prog_to_guest */
extern const char *const latch_link_pin_names[LATCH_DIR_COUNT]; /* link_from_guest, link_to_guest (TCX) */

/* $LATCH_BPFFS/latch/NAME/FILE */
int latch_pin_path(const char *name, const char *file, char *buf, size_t len);

/*
 * Attach prog_fd[dir] to both directions of ifindex, from the guest first
 * (the direction that must never be open).  clsact: creates the qdisc when
 * missing (*own_qdisc says so) and adds latch's filters; TCX: links at the
 * head of each chain, pinned under the sandbox.  On failure nothing is left.
 */
int latch_hook_attach(const char *name, enum latch_tc_mode mode, int ifindex, const int prog_fd[LATCH_DIR_COUNT],
		      bool *own_qdisc, char *err, size_t errlen);
/*
 * Put prog_fd[] in place of latch's programs with no moment unfiltered:
 * clsact replaces the filter in place; TCX updates latch's link when it is
 * still attached at the head of the chain, and otherwise attaches a new link
 * at the head before it detaches the old one.  *created: the clsact qdisc
 * had to be made.
 */
int latch_hook_replace(const char *name, enum latch_tc_mode mode, int ifindex, const int prog_fd[LATCH_DIR_COUNT],
		       bool *created, char *err, size_t errlen);
/* Take latch's programs off ifindex (0: the device is gone) and drop the link pins. */
void latch_hook_remove(const char *name, enum latch_tc_mode mode, int ifindex, bool own_qdisc);

#endif
