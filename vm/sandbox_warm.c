// SPDX-License-Identifier: GPL-2.0-only
/*
 * sandbox_warm.c - `up`'s warm start: the sandbox's guest restored from its
 * image's template on the tap whose enforcement `up` has already verified,
 * then adopted (vm/template.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "vm/agent_client.h"
#include "vm/libvirt.h"
#include "vm/sandbox_vm.h"
#include "vm/state.h"
#include "vm/template.h"

/* How long a restored guest's agent gets to answer: it was running when it was saved. */
#define WARM_AGENT_TIMEOUT_MS 30000

static int template_ready(struct latch_virt *v, const struct latch_vm_state *st, const struct latch_vm_up_opts *o,
			  struct latch_vm_up_result *res, const struct latch_domain_opts *d, struct latch_template *t,
			  char *err, size_t errlen)
{
	int64_t t1 = latch_now_ms();
	int timeout = latch_vm_boot_timeout(o, d->kvm);
	int r = latch_template_locate(st, d->kvm, o, t, err, errlen);

	snprintf(res->template_id, sizeof(res->template_id), "%s", t->id);
	if (!r)
		r = latch_template_ensure(v, st, d->kvm, timeout, o, t, &res->template_made, err, errlen);
	if (r || !res->template_made)
		return r;
	res->ms_template = latch_now_ms() - t1;
	latch_vm_step(o, "template %s of image %s made in %.1f s (a boot and a save, once per image and size)", t->id,
		      st->image, res->ms_template / 1000.0);
	return 0;
}

int latch_vm_warm_start(struct latch_virt *v, struct latch_vm_state *st, const struct latch_vm_up_opts *o,
			struct latch_vm_up_result *res, int64_t t0)
{
	char e[LATCH_ERR_MAX] = "", uuid[40], rm[LATCH_ERR_MAX];
	struct latch_agent_wait_stats seen;
	struct latch_domain_opts d;
	struct latch_template t;
	bool restored = false;
	int64_t t1;
	int r;

	r = latch_vm_domain_opts(st, &d, res->accel_why, sizeof(res->accel_why));
	if (r) {
		latch_errf(e, sizeof(e), r, "image path %s is too long", st->image_dir);
		goto fail;
	}
	r = template_ready(v, st, o, res, &d, &t, e, sizeof(e));
	if (r)
		goto fail;
	t1 = latch_now_ms();
	unlink(d.agent_sock);
	r = latch_template_restore(v, &t, st, uuid, e, sizeof(e));
	if (r) {
		unlink(t.save); /* a template libvirt no longer takes is made again next time */
		goto fail;
	}
	restored = true;
	res->ms_domain = latch_now_ms() - t0;
	latch_vm_step(o, "domain " LATCH_DOMAIN_PREFIX "%s restored from template %s in %.1f s", st->name, t.id,
		      (latch_now_ms() - t1) / 1000.0);
	r = latch_agent_wait(d.agent_sock, WARM_AGENT_TIMEOUT_MS, NULL, NULL, res->release, sizeof(res->release),
			     &seen);
	if (r) {
		latch_errf(e, sizeof(e), r, "the restored guest's agent did not answer in %d s",
			   WARM_AGENT_TIMEOUT_MS / 1000);
		goto fail;
	}
	r = latch_template_adopt(st, e, sizeof(e));
	if (r)
		goto fail;
	/* what a later `up` of a stopped sandbox boots: a cold start under the same UUID */
	snprintf(d.uuid, sizeof(d.uuid), "%s", uuid);
	r = latch_domain_define(v, &d, e, sizeof(e));
	snprintf(st->template_id, sizeof(st->template_id), "%s", t.id);
	if (!r)
		r = latch_state_save(st, e, sizeof(e));
	if (r)
		goto fail;
	res->warm = true;
	res->ms_agent = latch_now_ms() - t0;
	latch_vm_step(o,
		      "guest adopted in %.1f s after the restore began: clock, addresses, workspace, "
		      "random generator reseeded; guest kernel %s",
		      (latch_now_ms() - t1) / 1000.0, res->release);
	return 0;

fail:
	if (restored)
		latch_domain_remove(v, st->name, rm, sizeof(rm));
	latch_template_overlay_remove(st->name);
	*st->template_id = '\0';
	res->ms_domain = res->ms_agent = 0;
	snprintf(res->warm_note, sizeof(res->warm_note), "%s", e);
	latch_vm_step(o, "warm start failed: %s; booting instead", e);
	return r ? r : -EIO;
}
