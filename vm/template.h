/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * template.h - a warm start: one guest booted per image and size, saved, and
 * restored for each sandbox instead of a boot (`latch agent run`).
 *
 * The template is booted on a tap that stays down and bare, with no address,
 * no workspace mounted (its 9p tag is one the guest does not mount at boot)
 * and no kit: nothing of any sandbox is ever in its memory.  It is saved to
 * IMAGE_DIR/templates/mMEM-cCPUS-ACCEL.save (root, 0600), beside the inputs
 * it was made from (the image's manifest, the size, the accelerator and
 * libvirt's and QEMU's versions); any change makes a new one.  An image with
 * a disk gets a qcow2 of the template's own over it, since libvirt saves no
 * guest with a transient disk; each restore gets a copy of it.
 *
 * A restore rewrites the XML inside the save file (libvirt's format keeps
 * room for that) with the sandbox's name, UUID, tap, channel, console log,
 * workspace and a new VM generation ID, then restores it onto the sandbox's
 * tap, whose enforcement is verified before.  The guest keeps the
 * template's MAC (virtio-net's state is in the saved memory), so a warm
 * sandbox is given that MAC from the start (LATCH_TEMPLATE_MAC).  Then the
 * guest is adopted over its agent: its clock set, its addresses and resolver
 * set, the workspace mounted, and the kernel's "reseeded due to virtual
 * machine fork" seen, so no two sandboxes share a random generator state.
 */
#ifndef LATCH_VM_TEMPLATE_H
#define LATCH_VM_TEMPLATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "vm/libvirt.h"
#include "vm/vm.h"

/* The MAC every template's NIC has, and so every warm sandbox's guest. */
#define LATCH_TEMPLATE_MAC                         \
	{                                          \
		0x52, 0x54, 0x00, 0x6c, 0x74, 0x01 \
	}
/* The 9p tag of a template's workspace device: the guest's boot mounts only "workspace". */
#define LATCH_TEMPLATE_WORKSPACE_TAG "workspace-late"
/* How long an adopted guest gets to show its kernel reseeded. */
#define LATCH_TEMPLATE_RESEED_WAIT_MS 3000

struct latch_template {
	char id[48]; /* mMEM-cCPUS-ACCEL[-TAG]: what status shows */
	char token[16]; /* tpl-XXXXXXXX: the template domain's name while it boots */
	char dir[PATH_MAX]; /* IMAGE_DIR/templates */
	char save[PATH_MAX]; /* dir/ID.save */
	char inputs[PATH_MAX]; /* dir/ID.inputs: what it was made from */
	char overlay[PATH_MAX]; /* dir/ID.qcow2; "" for an image without a disk */
	char lock[PATH_MAX]; /* dir/ID.lock */
	char empty[PATH_MAX]; /* dir/empty: the template's workspace, and a restored one's without */
};

/* Names and paths of the template for st's image, size and accelerator, and what o adds to it. */
int latch_template_locate(const struct latch_vm_state *st, bool kvm, const struct latch_vm_up_opts *o,
			  struct latch_template *t, char *err, size_t errlen);

/*
 * Make the template when there is none current (a boot, o's prepare step,
 * then a save; the template's domain and tap are gone after).  *made says
 * whether it was made now.  boot_timeout_ms bounds the boot.  Holds the
 * template's lock.
 */
int latch_template_ensure(struct latch_virt *v, const struct latch_vm_state *st, bool kvm, int boot_timeout_ms,
			  const struct latch_vm_up_opts *o, const struct latch_template *t, bool *made, char *err,
			  size_t errlen);

/*
 * Restore the template as st's domain, on st's tap, under a new UUID (written
 * to uuid, 37 bytes) and VM generation ID.  The domain is transient and
 * running when this returns 0.
 */
int latch_template_restore(struct latch_virt *v, const struct latch_template *t, const struct latch_vm_state *st,
			   char *uuid, char *err, size_t errlen);

/*
 * Over st's guest agent: set its clock, addresses, routes and resolver,
 * mount st's workspace, and wait for its kernel's reseed.
 */
int latch_template_adopt(const struct latch_vm_state *st, char *err, size_t errlen);

/* st's copy of a template's disk, and its removal (0 when there is none). */
int latch_template_overlay_path(const char *name, char *buf, size_t len);
int latch_template_overlay_remove(const char *name);

#endif
