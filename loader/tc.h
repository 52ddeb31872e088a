/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tc.h - the hooks latch's programs run on, and reading back what runs there.
 *
 * Two ways to run a program on a device's tc hook:
 *   - TCX links (Linux 6.6+): a chain of programs per direction, each held
 *     by a link that latch pins in bpffs; the chain runs before any clsact
 *     filter.  Attach, query and link info go to bpf(2) (loader/tcx.c).
 *   - clsact filters: cls_bpf in direct-action mode, attached through
 *     libbpf's bpf_tc_* (netlink) and listed with a netlink dump (libnl).
 * An XDP program on the device runs before either.  Reading back lists
 * everything on each hook, so that a program someone put in front of
 * latch's is seen, not assumed away.
 */
#ifndef LATCH_LOADER_TC_H
#define LATCH_LOADER_TC_H

#include <stdbool.h>
#include <stdint.h>

struct latch_tc_filter {
	uint32_t prio;
	uint32_t handle;
	char kind[16];
	uint32_t prog_id; /* cls_bpf only */
	bool direct_action;
};

/* Create clsact on ifindex; *created says whether it was not there before. */
int latch_tc_hook_create(int ifindex, bool *created);
int latch_tc_hook_destroy(int ifindex);
/* Attach (or replace, when replace is set) latch's filter; egress selects the direction. */
int latch_tc_attach(int ifindex, bool egress, int prog_fd, bool replace);
int latch_tc_detach(int ifindex, bool egress);
/*
 * All filters on one direction of the clsact hook, in run order (lowest
 * priority first).  Returns the count, 0 for none, -ENOENT when there is no
 * clsact qdisc, or -errno.
 */
int latch_tc_list(int ifindex, bool egress, struct latch_tc_filter *out, int max);

/* TCX */
struct latch_tcx_prog {
	uint32_t prog_id;
	uint32_t link_id; /* 0: attached without a link */
};

struct latch_tcx_link {
	uint32_t id;
	uint32_t prog_id;
	uint32_t ifindex; /* 0 once detached */
	bool egress;
};

/* Does this kernel have TCX?  (Probed once: a query of lo's ingress chain.) */
bool latch_tcx_supported(void);
/* A TCX link at the head of ifindex's chain; returns its fd or -errno. */
int latch_tcx_link_create(int ifindex, bool egress, int prog_fd);
/* The TCX chain of one direction in run order; returns its length (may exceed max) or -errno. */
int latch_tcx_list(int ifindex, bool egress, struct latch_tcx_prog *out, int max);
/* What a TCX link holds and where; -EINVAL when fd is not a TCX link. */
int latch_tcx_link_info(int link_fd, struct latch_tcx_link *out);

/* The XDP program on ifindex (any mode), 0 when none; mode names it ("generic", ...). */
int latch_xdp_prog(int ifindex, uint32_t *prog_id, const char **mode);

enum latch_tc_mode {
	LATCH_TC_CLSACT = 0,
	LATCH_TC_TCX = 1,
};

const char *latch_tc_mode_name(enum latch_tc_mode m);
/*
 * The mode a new attachment uses: $LATCH_TC_MODE (tcx, clsact or auto), by
 * default TCX where the kernel has it.  -EINVAL/-EOPNOTSUPP with a line in
 * err for a value that can't be honoured.
 */
int latch_tc_mode_choose(enum latch_tc_mode *mode, char *err, size_t errlen);

/*
 * Probe attaching latch's programs in mode: load them and attach both
 * directions to lo of a throwaway network namespace, in a child process.
 * 0 when it worked; otherwise -1 with what failed in detail.
 */
int latch_tc_probe(enum latch_tc_mode mode, bool *loaded, char *detail, size_t len);

#endif
