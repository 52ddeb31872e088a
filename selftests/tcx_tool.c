// SPDX-License-Identifier: GPL-2.0-only
/*
 * tcx_tool.c - what an operator (or an intruder) with root can do to a
 * device's hooks, for selftests/live_tamper.sh and live_restart.sh:
 *
 *   tcx_tool list DEV ingress|egress        one line per TCX program in run
 *                                           order: "PROG_ID LINK_ID"
 *   tcx_tool add DEV ingress|egress first|last
 *                                           attach a foreign accept-all
 *                                           program (TC_ACT_OK) to the TCX
 *                                           chain, without a link; prints its id
 *   tcx_tool del DEV ingress|egress PROG_ID take that program off again
 *   tcx_tool detach-link LINK_ID            BPF_LINK_DETACH: the link stays
 *                                           (pinned) but runs nowhere
 *   tcx_tool update-link LINK_ID            make the link run an accept-all
 *                                           program instead; prints its id
 *   tcx_tool xdp DEV                        attach an XDP program (generic
 *                                           mode) that passes every frame
 *   tcx_tool xdp-off DEV                    remove it
 *
 * The foreign programs are two instructions, loaded here (no object file).
 * Run inside the device's network namespace.  Exit 0 on success; errors
 * go to stderr.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "loader/tc.h"
#include "loader/tcx_uapi.h"

/* r0 = verdict; exit */
static int accept_all(enum bpf_prog_type type, int verdict)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = verdict },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	return bpf_prog_load(type, "lt_foreign", "GPL", insns, 2, NULL);
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static int mprog(int cmd, int ifindex, int egress, int prog_fd, __u32 flags)
{
	struct latch_mprog_attach_attr a = {
		.target_ifindex = ifindex,
		.attach_bpf_fd = prog_fd,
		.attach_type = egress ? LATCH_BPF_TCX_EGRESS : LATCH_BPF_TCX_INGRESS,
		.attach_flags = flags,
	};

	return syscall(__NR_bpf, cmd, &a, sizeof(a)) < 0 ? -errno : 0;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "tcx_tool: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

int main(int argc, char **argv)
{
	int ifindex = 0, egress = 0, fd, r;

	if (argc < 3) {
		fprintf(stderr, "usage: see the top of selftests/tcx_tool.c\n");
		return 2;
	}
	if (strcmp(argv[1], "detach-link") && strcmp(argv[1], "update-link")) {
		ifindex = if_nametoindex(argv[2]);
		if (!ifindex)
			return fail(argv[2], ENODEV);
		egress = argc > 3 && !strcmp(argv[3], "egress");
	}
	if (!strcmp(argv[1], "list") && argc == 4) {
		struct latch_tcx_prog p[64];
		int n = latch_tcx_list(ifindex, egress, p, 64);

		if (n < 0)
			return fail("query", n);
		for (int i = 0; i < n && i < 64; i++)
			printf("%u %u\n", p[i].prog_id, p[i].link_id);
		return 0;
	}
	if (!strcmp(argv[1], "add") && argc == 5) {
		fd = accept_all(BPF_PROG_TYPE_SCHED_CLS, 0);
		if (fd < 0)
			return fail("load", fd);
		/* no relative program: BEFORE puts it at the head, AFTER at the end */
		r = mprog(BPF_PROG_ATTACH, ifindex, egress, fd,
			  !strcmp(argv[4], "first") ? LATCH_BPF_F_BEFORE : LATCH_BPF_F_AFTER);
		if (r)
			return fail("attach", r);
		printf("%u\n", prog_id(fd));
		return 0;
	}
	if (!strcmp(argv[1], "del") && argc == 5) {
		fd = bpf_prog_get_fd_by_id(strtoul(argv[4], NULL, 10));
		if (fd < 0)
			return fail("prog id", -errno);
		r = mprog(BPF_PROG_DETACH, ifindex, egress, fd, 0);
		return r ? fail("detach", r) : 0;
	}
	if (!strcmp(argv[1], "detach-link") || !strcmp(argv[1], "update-link")) {
		fd = bpf_link_get_fd_by_id(strtoul(argv[2], NULL, 10));
		if (fd < 0)
			return fail("link id", -errno);
		if (!strcmp(argv[1], "detach-link"))
			return bpf_link_detach(fd) ? fail("link detach", -errno) : 0;
		r = accept_all(BPF_PROG_TYPE_SCHED_CLS, 0);
		if (r < 0)
			return fail("load", r);
		if (bpf_link_update(fd, r, NULL))
			return fail("link update", -errno);
		printf("%u\n", prog_id(r));
		return 0;
	}
	if (!strcmp(argv[1], "xdp")) {
		fd = accept_all(BPF_PROG_TYPE_XDP, 2 /* XDP_PASS */);
		if (fd < 0)
			return fail("load", fd);
		r = bpf_xdp_attach(ifindex, fd, XDP_FLAGS_SKB_MODE, NULL);
		if (r)
			return fail("xdp attach", r);
		printf("%u\n", prog_id(fd));
		return 0;
	}
	if (!strcmp(argv[1], "xdp-off")) {
		r = bpf_xdp_detach(ifindex, XDP_FLAGS_SKB_MODE, NULL);
		return r ? fail("xdp detach", r) : 0;
	}
	fprintf(stderr, "tcx_tool: unknown command; see the top of selftests/tcx_tool.c\n");
	return 2;
}
