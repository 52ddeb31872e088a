// SPDX-License-Identifier: GPL-2.0-only
/*
 * inject.c - per-packet cost of a device's whole receive path, filters
 * included, measured in place.
 *
 *   inject IFNAME DST_MAC SRC_MAC SRC_IP DST_IP DPORT COUNT
 *
 * Run inside the network namespace that owns IFNAME.  COUNT copies of one
 * UDP/IPv4 frame (64-byte payload, like iperf3 -l 64) are injected into
 * IFNAME's receive path with BPF_PROG_TEST_RUN + BPF_F_TEST_XDP_LIVE_FRAMES
 * on bench_progs' xdp_pass: each frame becomes an skb that passes tc ingress
 * (latch), the nftables ingress hook, IP input, and is queued to -- or, once
 * its small buffer is full, dropped at -- a UDP socket bound here to
 * DST_IP:DPORT.  The same path with and without a filter gives the filter's
 * cost per packet, free of the sender-side syscall noise of iperf3.
 *
 * Prints: pkts=COUNT kernel_ns_per_pkt=<test-run duration> wall_ns_per_pkt=<wall clock / COUNT>
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
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

static double mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	uint8_t frame[ETH_HLEN + sizeof(struct iphdr) + sizeof(struct udphdr) + PAYLOAD] = { 0 };
	struct ethhdr *eth = (struct ethhdr *)frame;
	struct iphdr *ip = (struct iphdr *)(frame + ETH_HLEN);
	struct udphdr *udp = (struct udphdr *)(ip + 1);
	struct sockaddr_in sink = { .sin_family = AF_INET };
	struct bench_progs *skel;
	unsigned int ifindex, count;
	int dport, sock, rcvbuf = 4096, err;
	double t0, t1;

	if (argc != 8) {
		fprintf(stderr, "usage: %s IFNAME DST_MAC SRC_MAC SRC_IP DST_IP DPORT COUNT\n", argv[0]);
		return 2;
	}
	ifindex = if_nametoindex(argv[1]);
	dport = atoi(argv[6]);
	count = strtoul(argv[7], NULL, 0);
	if (!ifindex) {
		fprintf(stderr, "inject: no device %s in this namespace\n", argv[1]);
		return 1;
	}
	if (get_mac(argv[2], eth->h_dest) || get_mac(argv[3], eth->h_source)) {
		fprintf(stderr, "inject: bad MAC address\n");
		return 2;
	}
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(sizeof(frame) - ETH_HLEN);
	if (inet_pton(AF_INET, argv[4], &ip->saddr) != 1 || inet_pton(AF_INET, argv[5], &ip->daddr) != 1) {
		fprintf(stderr, "inject: bad IPv4 address\n");
		return 2;
	}
	ip->check = ip_csum(ip, sizeof(*ip));
	udp->source = htons(40000);
	udp->dest = htons(dport);
	udp->len = htons(sizeof(*udp) + PAYLOAD);
	memset(udp + 1, 'x', PAYLOAD); /* checksum 0: none, valid for UDP/IPv4 */

	/* The sink: same end of the path for every configuration. */
	sock = socket(AF_INET, SOCK_DGRAM, 0);
	sink.sin_port = htons(dport);
	sink.sin_addr.s_addr = ip->daddr;
	setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(sock, (struct sockaddr *)&sink, sizeof(sink)))
		fprintf(stderr, "inject: bind %s:%d: %s (continuing without a sink)\n", argv[5], dport,
			strerror(errno));

	libbpf_set_print(quiet_print);
	skel = bench_progs__open_and_load();
	if (!skel) {
		fprintf(stderr, "inject: cannot load bench_progs: %s\n", strerror(errno));
		return 1;
	}
	struct xdp_md ctx = { .data_end = sizeof(frame), .ingress_ifindex = ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = sizeof(frame), .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = count, .flags = BPF_F_TEST_XDP_LIVE_FRAMES,
		    .batch_size = 64);
	t0 = mono_ns();
	err = bpf_prog_test_run_opts(bpf_program__fd(skel->progs.xdp_pass), &opts);
	t1 = mono_ns();
	if (err) {
		fprintf(stderr, "inject: BPF_PROG_TEST_RUN (live frames): %s\n", strerror(errno));
		bench_progs__destroy(skel);
		return 1;
	}
	printf("pkts=%u kernel_ns_per_pkt=%u wall_ns_per_pkt=%.1f\n", count, opts.duration, (t1 - t0) / count);
	bench_progs__destroy(skel);
	close(sock);
	return 0;
}
