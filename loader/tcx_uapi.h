/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tcx_uapi.h - the parts of Linux 6.6's BPF uapi that TCX needs and that
 * this system's headers (6.1) and libbpf (1.1) don't have yet.
 *
 * The one place they are written down: loader/tcx.c and the selftests'
 * tamper tool include this instead of spelling them again.  Values and
 * offsets are the kernel's (include/uapi/linux/bpf.h, 6.6 and later); the
 * asserts below keep the layouts honest.  Once the build headers are 6.6+
 * this file can go.
 */
#ifndef LATCH_LOADER_TCX_UAPI_H
#define LATCH_LOADER_TCX_UAPI_H

#include <linux/bpf.h>
#include <linux/types.h>
#include <stddef.h>

/* enum bpf_attach_type */
#define LATCH_BPF_TCX_INGRESS 46
#define LATCH_BPF_TCX_EGRESS 47
/* enum bpf_link_type */
#define LATCH_BPF_LINK_TYPE_TCX 11

/* Where a program goes in a multi-program (mprog) chain. */
#define LATCH_BPF_F_BEFORE (1U << 3)
#define LATCH_BPF_F_AFTER (1U << 4)
#define LATCH_BPF_F_ID (1U << 5)

/* BPF_LINK_CREATE with the link_create.tcx member. */
struct latch_tcx_link_create_attr {
	__u32 prog_fd;
	__u32 target_ifindex;
	__u32 attach_type;
	__u32 flags;
	__u32 relative_fd; /* or relative_id with LATCH_BPF_F_ID; 0: the chain's end */
	__u32 pad;
	__u64 expected_revision;
};
_Static_assert(offsetof(struct latch_tcx_link_create_attr, relative_fd) == 16, "link_create.tcx layout");
_Static_assert(offsetof(struct latch_tcx_link_create_attr, expected_revision) == 24, "link_create.tcx layout");

/* BPF_PROG_ATTACH / BPF_PROG_DETACH with relative_fd (a link-less mprog attach). */
struct latch_mprog_attach_attr {
	__u32 target_ifindex;
	__u32 attach_bpf_fd;
	__u32 attach_type;
	__u32 attach_flags;
	__u32 replace_bpf_fd;
	__u32 relative_fd;
	__u64 expected_revision;
};
_Static_assert(offsetof(struct latch_mprog_attach_attr, expected_revision) == 24, "prog_attach layout");

/* BPF_PROG_QUERY with the link ids and the revision. */
struct latch_mprog_query_attr {
	__u32 target_ifindex;
	__u32 attach_type;
	__u32 query_flags;
	__u32 attach_flags;
	__u64 prog_ids;
	__u32 count;
	__u32 pad;
	__u64 prog_attach_flags;
	__u64 link_ids;
	__u64 link_attach_flags;
	__u64 revision;
};
_Static_assert(offsetof(struct latch_mprog_query_attr, link_ids) == 40, "query layout");
_Static_assert(offsetof(struct latch_mprog_query_attr, revision) == 56, "query layout");

/* struct bpf_link_info, with its tcx member; the tail room is for newer kernels' longer union. */
struct latch_tcx_link_info {
	__u32 type;
	__u32 id;
	__u32 prog_id;
	__u32 pad;
	__u32 ifindex; /* 0 once the link is detached */
	__u32 attach_type;
	__u8 rest[104];
};
_Static_assert(offsetof(struct latch_tcx_link_info, ifindex) == 16, "bpf_link_info.tcx layout");

#endif
