// SPDX-License-Identifier: GPL-2.0-only
/*
 * bench_progs.bpf.c - two trivial programs used only by the benchmarks.
 *
 * xdp_pass: the packet source of bench/inject.c.  Under BPF_PROG_TEST_RUN
 * with BPF_F_TEST_XDP_LIVE_FRAMES every XDP_PASS verdict turns the test frame
 * into an skb that enters the chosen device's ordinary receive path (tc
 * ingress, nft ingress, IP, UDP socket) on the calling CPU.
 *
 * tc_pass: a tc program that returns TC_ACT_OK at once; bench/testrun.c runs
 * it to show the floor of the BPF_PROG_TEST_RUN framework itself.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("tc")
int tc_pass(struct __sk_buff *skb)
{
	return 0; /* TC_ACT_OK */
}
