/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * boot.h - the boundary at boot: `latch boot install` and `latch boot apply`,
 * and the check behind the libvirt qemu hook.
 *
 * install writes, under $LATCH_ROOT (default /):
 *   etc/systemd/system/latch-boot.service   DefaultDependencies=no, before
 *       libvirtd and virqemud, runs `latch boot apply` (oneshot)
 *   etc/systemd/system/{sysinit.target,libvirtd.service,virtqemud.service}.wants/
 *       links to it (what `systemctl enable` would make)
 *   etc/libvirt/hooks/qemu                  runs `latch boot hook`
 * with the absolute path of this latch and its LATCH_ROOT/LATCH_BPFFS baked
 * in, since libvirt runs hooks with an empty environment.
 *
 * apply, per sandbox with a state: mount bpffs if needed, re-create the tap
 * (down and bare), re-attach the pinned programs (or, when the pins are gone,
 * load fresh enforcement with an empty policy: default deny), read the
 * posture back and require `enforced`, then route.  It never talks to
 * libvirt: it runs before libvirtd.
 *
 * The hook must not call back into libvirt (libvirtd holds the domain while
 * it runs the hook), so the check reads only latch's state and the kernel.
 */
#ifndef LATCH_VM_BOOT_H
#define LATCH_VM_BOOT_H

#include <stdbool.h>
#include <stddef.h>

#include "loader/loader.h"

struct latch_boot_result {
	bool tap_created;	/* the tap was missing and was made again */
	bool from_pins;		/* re-attached from the pins (else: fresh, empty policy) */
	bool enforced;		/* observed in the kernel afterwards */
	bool routed;
	char note[LATCH_ERR_MAX]; /* what went wrong */
};

/* Re-create NAME's boundary.  0 when enforced (routing failures are in note), else -errno. */
int latch_boot_apply_one(const char *name, struct latch_boot_result *r);

/* Write the unit, the wants links and the hook; paths written go to the callback. */
int latch_boot_install(const char *latch_bin, void (*wrote)(const char *path, void *arg), void *arg, char *err,
		       size_t errlen);

/*
 * The hook's decision for domain DOM at operation OP with its XML: 0 to let
 * it start, -EPERM (reason in err) to refuse.  Domains that are not latch's
 * and operations other than prepare/start/restore are always let through.
 */
int latch_boot_hook_check(const char *dom, const char *op, const char *xml, char *err, size_t errlen);

#endif
