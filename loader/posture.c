// SPDX-License-Identifier: GPL-2.0-only
/*
 * posture.c - what runs on a sandbox's device, read back from the kernel.
 *
 * Everything that can see a packet before latch's program, or instead of
 * it, is listed: the XDP program, the TCX chain of each direction and the
 * clsact filters.  `status`, `attach`, boot apply and the libvirt hook all
 * judge enforcement through latch_sandbox_posture(); the rules are on
 * struct latch_posture in sandbox.h.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loader/hook.h"

static const char *const dir_names[LATCH_DIR_COUNT] = { "ingress (from guest)", "egress (to guest)" };

static uint32_t pinned_prog_id(const char *name, int dir)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	char path[PATH_MAX];
	int fd;

	if (latch_pin_path(name, latch_prog_pin_names[dir], path, sizeof(path)))
		return 0;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		info.id = 0;
	close(fd);
	return info.id;
}

/* printf into p->why unless something was found wrong already */
__attribute__((format(printf, 2, 3))) static void wrong(struct latch_posture *p, const char *fmt, ...)
{
	va_list ap;

	if (*p->why)
		return;
	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
}

/* TCX mode: latch's pinned link must head the chain and run the pinned program. */
static int hook_tcx(const char *name, const char *dev, int d, const struct latch_tcx_prog *chain, int n,
		    struct latch_posture *p)
{
	struct latch_hook_state *h = &p->hook[d];
	struct latch_tcx_link info;
	char path[PATH_MAX];
	int fd, pos = -1;

	if (latch_pin_path(name, latch_link_pin_names[d], path, sizeof(path)))
		return -ENAMETOOLONG;
	fd = bpf_obj_get(path);
	if (fd < 0) {
		wrong(p, "latch's TCX link on %s %s is gone (no pin %s)", dev, dir_names[d], latch_link_pin_names[d]);
		return 0;
	}
	if (latch_tcx_link_info(fd, &info)) {
		close(fd);
		wrong(p, "the pin %s on %s is not a TCX link", latch_link_pin_names[d], dev);
		return 0;
	}
	close(fd);
	h->link_id = info.id;
	if (info.ifindex != p->ifindex) {
		wrong(p, "latch's TCX link %u on %s %s was detached", info.id, dev, dir_names[d]);
		return 0;
	}
	for (int i = 0; i < n && i < 16; i++)
		if (chain[i].link_id == info.id)
			pos = i;
	if (pos < 0) {
		wrong(p, "latch's TCX link %u is not in the TCX chain of %s %s", info.id, dev, dir_names[d]);
		return 0;
	}
	h->present = true;
	h->attached_id = chain[pos].prog_id;
	h->direct_action = true;
	h->first = pos == 0;
	if (pos > 0) {
		h->ahead_id = chain[0].prog_id;
		wrong(p, "TCX program %u runs before latch's on %s %s and can pass packets", chain[0].prog_id, dev,
		      dir_names[d]);
	} else if (h->attached_id != p->pinned_id[d]) {
		wrong(p, "latch's TCX link on %s %s runs program %u, not latch's pinned %u", dev, dir_names[d],
		      h->attached_id, p->pinned_id[d]);
	}
	return 0;
}

/* clsact mode: latch's filter first and direct-action, and no TCX program ahead of the whole hook. */
static void hook_clsact(const char *dev, int d, const struct latch_tc_filter *f, int n, struct latch_posture *p)
{
	struct latch_hook_state *h = &p->hook[d];

	h->present = true;
	h->n_filters = n;
	for (int i = 0; i < n && i < 16; i++) {
		if (f[i].prio == LATCH_TC_PRIORITY && f[i].handle == LATCH_TC_HANDLE) {
			h->attached_id = f[i].prog_id;
			h->direct_action = f[i].direct_action;
			h->first = i == 0;
			if (i > 0)
				h->ahead_id = f[0].prog_id;
		}
	}
	if (!h->attached_id)
		wrong(p, "no latch filter on %s %s", dev, dir_names[d]);
	else if (h->attached_id != p->pinned_id[d])
		wrong(p, "%s %s runs program %u, not latch's pinned %u", dev, dir_names[d], h->attached_id,
		      p->pinned_id[d]);
	else if (!h->first)
		wrong(p, "another filter runs before latch's on %s %s", dev, dir_names[d]);
	else if (!h->direct_action)
		wrong(p, "latch's filter on %s %s is not direct-action", dev, dir_names[d]);
}

int latch_sandbox_posture(const struct latch_sandbox *sb, struct latch_posture *p)
{
	const char *name = latch_sandbox_name(sb);
	struct latch_config cfg;
	const char *xmode;
	int ifindex;

	memset(p, 0, sizeof(*p));
	if (latch_sandbox_read_config(sb, &cfg)) {
		snprintf(p->why, sizeof(p->why), "config map unreadable");
		return 0;
	}
	if (!(cfg.flags & LATCH_CFG_READY)) {
		snprintf(p->why, sizeof(p->why), "config not marked ready: every packet is dropped");
		return 0;
	}
	p->mode = cfg.flags & LATCH_CFG_TCX ? LATCH_TC_TCX : LATCH_TC_CLSACT;
	p->csum_check = !(cfg.flags & LATCH_CFG_NO_CSUM);
	ifindex = if_nametoindex(cfg.ifname);
	p->ifindex = ifindex;
	p->device_present = ifindex != 0;
	p->device_matches = ifindex && (uint32_t)ifindex == cfg.ifindex;
	for (int d = 0; d < LATCH_DIR_COUNT; d++)
		p->pinned_id[d] = pinned_prog_id(name, d);
	if (!p->device_present) {
		wrong(p, "device %s does not exist", cfg.ifname);
		return 0;
	}
	/* XDP sees the guest's frames before any tc hook, and may redirect them elsewhere */
	if (latch_xdp_prog(ifindex, &p->xdp_id, &xmode) == 0 && p->xdp_id) {
		snprintf(p->xdp_mode, sizeof(p->xdp_mode), "%s", xmode);
		wrong(p, "XDP program %u (%s) on %s runs before tc and can send the guest's frames past latch",
		      p->xdp_id, xmode, cfg.ifname);
	}
	for (int d = 0; d < LATCH_DIR_COUNT; d++) {
		struct latch_tcx_prog chain[16];
		struct latch_tc_filter f[16];
		struct latch_hook_state *h = &p->hook[d];
		bool egress = d == LATCH_DIR_TO_GUEST;
		int nf = latch_tc_list(ifindex, egress, f, 16), nt = 0;

		if (nf < 0 && nf != -ENOENT)
			return nf;
		if (latch_tcx_supported()) {
			nt = latch_tcx_list(ifindex, egress, chain, 16);
			if (nt < 0)
				return nt;
		}
		h->n_tcx = nt;
		h->n_filters = nf > 0 ? nf : 0;
		if (p->mode == LATCH_TC_TCX) {
			int r = hook_tcx(name, cfg.ifname, d, chain, nt, p);

			if (r)
				return r;
			continue;
		}
		if (nt > 0) {
			h->ahead_id = chain[0].prog_id;
			wrong(p, "TCX program %u on %s %s runs before every clsact filter, latch's too",
			      chain[0].prog_id, cfg.ifname, dir_names[d]);
		}
		if (nf == -ENOENT)
			wrong(p, "no clsact qdisc on %s", cfg.ifname);
		else
			hook_clsact(cfg.ifname, d, f, nf, p);
	}
	p->enforced = !*p->why;
	return 0;
}

int latch_sandbox_posture_of(const char *name, struct latch_posture *p, char *err, size_t errlen)
{
	struct latch_sandbox *sb = latch_sandbox_open(name, err, errlen);
	int r;

	memset(p, 0, sizeof(*p));
	if (!sb)
		return -ENOENT;
	r = latch_sandbox_posture(sb, p);
	latch_sandbox_free(sb);
	return r;
}
