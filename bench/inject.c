// SPDX-License-Identifier: GPL-2.0-only
/*
 * inject.c - per-packet cost of a device's whole receive path, filters
 * included, measured in place, for several configurations in turns.
 *
 *   inject SRC_IP DST_IP DPORT COUNT ROUNDS LABEL=NETNS,IFNAME,DST_MAC,SRC_MAC...
 *
 * Each target is a device in its own network namespace (NETNS: a path such
 * as /run/netns/NAME), set up alike but for the filter on it.  COUNT copies
 * of one UDP/IPv4 frame (64-byte payload, like iperf3 -l 64) are injected
 * into the device's receive path with BPF_PROG_TEST_RUN +
 * BPF_F_TEST_XDP_LIVE_FRAMES on bench_progs' xdp_pass: each frame becomes an
 * skb that passes tc ingress (latch), the nftables ingress hook, IP input,
 * and is queued to -- or, once its small buffer is full, dropped at -- a UDP
 * socket bound in that namespace to DST_IP:DPORT.
 *
 * One round runs every target once, in an order rotated by one each round,
 * and ROUNDS rounds follow each other in this one process.  Targets measured
 * a few milliseconds apart see the same machine, so the difference between a
 * filter and no filter within a round is free of the drift between runs that
 * dwarfs a 50 ns overhead on a shared VM.
 *
 * Prints per target and round: label=LABEL round=R kernel_ns_per_pkt=NS
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_progs.skel.h"

#define PAYLOAD 64

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_DEBUG ? 0 : vfprintf(stderr, fmt, ap);
}

static int get_mac(const char *s, uint8_t m[6])
{
	unsigned int b[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		m[i] = b[i];
	return 0;
}

static uint16_t ip_csum(const void *p, size_t len)
{
	const uint16_t *w = p;
	uint32_t s = 0;

	for (; len > 1; len -= 2)
		s += *w++;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s;
}

#define TARGETS_MAX 16

struct target {
	char label[32];
	int netns; /* fd of the namespace */
	int sink; /* the UDP socket at the end of the path, in that namespace */
	unsigned int ifindex;
	uint8_t dst_mac[6], src_mac[6];
};

/* LABEL=NETNS,IFNAME,DST_MAC,SRC_MAC: enters NETNS to find IFNAME and bind the sink there. */
static int target_open(char *spec, struct target *t, struct sockaddr_in *sink)
{
	char *eq = strchr(spec, '='), *f[4];
	int rcvbuf = 4096;

	if (!eq || eq - spec >= (long)sizeof(t->label))
		return -1;
	memcpy(t->label, spec, eq - spec);
	t->label[eq - spec] = 0;
	f[0] = strtok(eq + 1, ",");
	for (int i = 1; i < 4; i++)
		if (!f[i - 1] || !(f[i] = strtok(NULL, ",")))
			return -1;
	if (get_mac(f[2], t->dst_mac) || get_mac(f[3], t->src_mac))
		return -1;
	t->netns = open(f[0], O_RDONLY | O_CLOEXEC);
	if (t->netns < 0 || setns(t->netns, CLONE_NEWNET)) {
		fprintf(stderr, "inject: %s: cannot enter %s: %s\n", t->label, f[0], strerror(errno));
		return -1;
	}
	t->ifindex = if_nametoindex(f[1]);
	if (!t->ifindex) {
		fprintf(stderr, "inject: %s: no device %s in %s\n", t->label, f[1], f[0]);
		return -1;
	}
	t->sink = socket(AF_INET, SOCK_DGRAM, 0);
	setsockopt(t->sink, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(t->sink, (struct sockaddr *)sink, sizeof(*sink)))
		fprintf(stderr, "inject: %s: bind: %s (continuing without a sink)\n", t->label, strerror(errno));
	return 0;
}

int main(int argc, char **argv)
{
	uint8_t frame[ETH_HLEN + sizeof(struct iphdr) + sizeof(struct udphdr) + PAYLOAD] = { 0 };
	struct ethhdr *eth = (struct ethhdr *)frame;
	struct iphdr *ip = (struct iphdr *)(frame + ETH_HLEN);
	struct udphdr *udp = (struct udphdr *)(ip + 1);
	struct sockaddr_in sink = { .sin_family = AF_INET };
	struct target tg[TARGETS_MAX];
	struct bench_progs *skel;
	unsigned int count, rounds;
	int dport, nt = argc - 6, rc = 0;

	if (argc < 7 || nt > TARGETS_MAX) {
		fprintf(stderr,
			"usage: %s SRC_IP DST_IP DPORT COUNT ROUNDS LABEL=NETNS,IFNAME,DST_MAC,SRC_MAC... (1-%d)\n",
			argv[0], TARGETS_MAX);
		return 2;
	}
	dport = atoi(argv[3]);
	count = strtoul(argv[4], NULL, 0);
	rounds = strtoul(argv[5], NULL, 0);
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(sizeof(frame) - ETH_HLEN);
	if (inet_pton(AF_INET, argv[1], &ip->saddr) != 1 || inet_pton(AF_INET, argv[2], &ip->daddr) != 1) {
		fprintf(stderr, "inject: bad IPv4 address\n");
		return 2;
	}
	ip->check = ip_csum(ip, sizeof(*ip));
	udp->source = htons(40000);
	udp->dest = htons(dport);
	udp->len = htons(sizeof(*udp) + PAYLOAD);
	memset(udp + 1, 'x', PAYLOAD); /* checksum 0: none, valid for UDP/IPv4 */
	sink.sin_port = htons(dport);
	sink.sin_addr.s_addr = ip->daddr;
	for (int i = 0; i < nt; i++)
		if (target_open(argv[6 + i], &tg[i], &sink)) {
			fprintf(stderr, "inject: bad target '%s' (LABEL=NETNS,IFNAME,DST_MAC,SRC_MAC)\n", argv[6 + i]);
			return 2;
		}

	libbpf_set_print(quiet_print);
	skel = bench_progs__open_and_load();
	if (!skel) {
		fprintf(stderr, "inject: cannot load bench_progs: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned int r = 0; r < rounds && !rc; r++) {
		for (int j = 0; j < nt && !rc; j++) {
			struct target *t = &tg[(j + r) % nt]; /* rotated: no target always runs first */
			struct xdp_md ctx = { .data_end = sizeof(frame), .ingress_ifindex = t->ifindex };
			LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = sizeof(frame),
				    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = count,
				    .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = 64);

			memcpy(eth->h_dest, t->dst_mac, 6);
			memcpy(eth->h_source, t->src_mac, 6);
			/* test-run finds the device in the caller's namespace */
			if (setns(t->netns, CLONE_NEWNET) ||
			    bpf_prog_test_run_opts(bpf_program__fd(skel->progs.xdp_pass), &opts)) {
				fprintf(stderr, "inject: %s: %s\n", t->label, strerror(errno));
				rc = 1;
				break;
			}
			printf("label=%s round=%u kernel_ns_per_pkt=%u\n", t->label, r + 1, opts.duration);
		}
	}
	bench_progs__destroy(skel);
	for (int i = 0; i < nt; i++) {
		close(tg[i].sink);
		close(tg[i].netns);
	}
	return rc;
}
