// SPDX-License-Identifier: GPL-2.0-only
/*
 * tcx.c - TCX links (Linux 6.6+), the XDP query, and which attach mode to use.
 *
 * TCX runs a chain of programs per direction before any clsact filter; a
 * program at the head of the chain that returns a verdict ends it.  libbpf
 * 1.1 knows neither the TCX attach types nor the query's link ids, so the
 * three commands used here go to bpf(2) directly with the layouts of
 * loader/tcx_uapi.h.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loader/entry.h"
#include "loader/tc.h"
#include "loader/tcx_uapi.h"

static int sys_bpf(int cmd, void *attr, unsigned int size)
{
	int r = syscall(__NR_bpf, cmd, attr, size);

	return r < 0 ? -errno : r;
}

static __u32 tcx_type(bool egress)
{
	return egress ? LATCH_BPF_TCX_EGRESS : LATCH_BPF_TCX_INGRESS;
}

bool latch_tcx_supported(void)
{
	static int known = -1;

	if (known < 0) {
		/* A kernel without TCX refuses the attach type; lo exists in every netns. */
		struct latch_mprog_query_attr q = { .target_ifindex = 1, .attach_type = LATCH_BPF_TCX_INGRESS };

		known = sys_bpf(BPF_PROG_QUERY, &q, sizeof(q)) == 0;
	}
	return known;
}

int latch_tcx_link_create(int ifindex, bool egress, int prog_fd)
{
	/* BEFORE with no relative program: the head of the chain, ahead of anything there */
	struct latch_tcx_link_create_attr a = {
		.prog_fd = prog_fd,
		.target_ifindex = ifindex,
		.attach_type = tcx_type(egress),
		.flags = LATCH_BPF_F_BEFORE,
	};

	return sys_bpf(BPF_LINK_CREATE, &a, sizeof(a));
}

int latch_tcx_list(int ifindex, bool egress, struct latch_tcx_prog *out, int max)
{
	__u32 progs[64] = { 0 }, links[64] = { 0 };
	struct latch_mprog_query_attr q = {
		.target_ifindex = ifindex,
		.attach_type = tcx_type(egress),
		.prog_ids = (__u64)(unsigned long)progs,
		.link_ids = (__u64)(unsigned long)links,
		.count = 64,
	};
	int r = sys_bpf(BPF_PROG_QUERY, &q, sizeof(q));

	/* ENOSPC: more than 64 programs; the first 64 are filled in, which is all the order check needs */
	if (r < 0 && r != -ENOSPC)
		return r;
	for (__u32 i = 0; i < q.count && i < 64 && (int)i < max; i++) {
		out[i].prog_id = progs[i];
		out[i].link_id = links[i];
	}
	return q.count;
}

int latch_tcx_link_info(int link_fd, struct latch_tcx_link *out)
{
	struct latch_tcx_link_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	memset(out, 0, sizeof(*out));
	if (bpf_obj_get_info_by_fd(link_fd, &info, &len))
		return -errno;
	if (info.type != LATCH_BPF_LINK_TYPE_TCX)
		return -EINVAL;
	out->id = info.id;
	out->prog_id = info.prog_id;
	out->ifindex = info.ifindex;
	out->egress = info.attach_type == LATCH_BPF_TCX_EGRESS;
	return 0;
}

int latch_xdp_prog(int ifindex, uint32_t *prog_id, const char **mode)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int r = bpf_xdp_query(ifindex, 0, &q);

	*prog_id = 0;
	if (mode)
		*mode = "";
	if (r)
		return r;
	/* a device can hold one program per mode; any of them runs before tc */
	if (q.drv_prog_id) {
		*prog_id = q.drv_prog_id;
		if (mode)
			*mode = "driver";
	} else if (q.hw_prog_id) {
		*prog_id = q.hw_prog_id;
		if (mode)
			*mode = "offloaded";
	} else if (q.skb_prog_id) {
		*prog_id = q.skb_prog_id;
		if (mode)
			*mode = "generic";
	}
	return 0;
}

const char *latch_tc_mode_name(enum latch_tc_mode m)
{
	return m == LATCH_TC_TCX ? "tcx" : "clsact";
}

int latch_tc_mode_choose(enum latch_tc_mode *mode, char *err, size_t errlen)
{
	const char *want = getenv("LATCH_TC_MODE");

	if (!want || !*want || !strcmp(want, "auto")) {
		*mode = latch_tcx_supported() ? LATCH_TC_TCX : LATCH_TC_CLSACT;
		return 0;
	}
	if (!strcmp(want, "clsact")) {
		*mode = LATCH_TC_CLSACT;
		return 0;
	}
	if (!strcmp(want, "tcx")) {
		if (!latch_tcx_supported())
			return latch_errf(err, errlen, -EOPNOTSUPP,
					  "LATCH_TC_MODE=tcx, but this kernel has no TCX (6.6 and later); unset it");
		*mode = LATCH_TC_TCX;
		return 0;
	}
	return latch_errf(err, errlen, -EINVAL, "LATCH_TC_MODE='%s': write tcx, clsact or auto", want);
}
