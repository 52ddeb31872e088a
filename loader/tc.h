/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tc.h - clsact hooks and the filters on them, through rtnetlink.
 *
 * Attaching goes through libbpf's bpf_tc_* (netlink cls_bpf, direct-action).
 * Reading back lists every filter on a hook with a netlink dump (libnl), so
 * that a filter someone put in front of latch's is seen, not assumed away.
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

#endif
