/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sandbox_vm.h - what the parts of vm/ share about a sandbox's lifecycle
 * (sandbox_vm.c, boot.c, clone.c, image.c); the lifecycle itself is in vm.h.
 */
#ifndef LATCH_VM_SANDBOX_VM_H
#define LATCH_VM_SANDBOX_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/net.h"
#include "vm/vm.h"

/*
 * Create NAME's enforcement on its tap from its state alone, with an empty
 * policy (default deny): for `boot apply` when the pins are gone, and
 * what `up` does.  The tap must exist.
 */
int latch_vm_enforce_fresh(const struct latch_vm_state *st, char *err, size_t errlen);
/* Fill the net options of a state (for latch_net_*). */
void latch_vm_net_opts(const struct latch_vm_state *st, struct latch_net_opts *n);
/* The serial console's log file of NAME (virtlogd writes it while the guest runs). */
int latch_vm_console_path(const char *name, char *buf, size_t len);

struct latch_virt;
/* The boot timeout: o's, else by accelerator. */
int latch_vm_boot_timeout(const struct latch_vm_up_opts *o, bool kvm);
/* latch_agent_wait()'s question between attempts: a guest that stopped never answers (a line in err). */
struct latch_vm_domain_watch {
	struct latch_virt *v;
	const char *name;
	char *err;
	size_t errlen;
};
int latch_vm_domain_alive(void *arg);

/* up's progress line, through o->step when there is one. */
__attribute__((format(printf, 2, 3))) void latch_vm_step(const struct latch_vm_up_opts *o, const char *fmt, ...);
/* The domain a cold boot of st gets; accel_why says why KVM or TCG. */
struct latch_domain_opts;
int latch_vm_domain_opts(const struct latch_vm_state *st, struct latch_domain_opts *d, char *accel_why, size_t whylen);
/*
 * Steps 7 and 8 of up as a warm start (vm/template.h): the template made if
 * there is none, restored on st's tap, the guest adopted, the domain made
 * persistent for a later cold start.  On failure nothing of it is left, the
 * step line and res->warm_note say why, and the caller boots instead.
 */
int latch_vm_warm_start(struct latch_virt *v, struct latch_vm_state *st, const struct latch_vm_up_opts *o,
			struct latch_vm_up_result *res, int64_t t0);

/* The image in dir is there: its vmlinuz and initrd.img are readable. */
bool latch_vm_image_present(const char *dir);
/* latch_vm_image_build() into a given directory (a sandbox's recorded image_dir). */
int latch_vm_image_build_into(const char *image, const char *dir, bool force, int *recipe_exit, char *err,
			      size_t errlen);

#endif
