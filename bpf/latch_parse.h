/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * latch_parse.h - header parsing and link-layer checks for the tc programs.
 *
 * Header-only (static __always_inline) so that each program inlines what it
 * needs.  latch_parse() reads a frame into struct latch_pkt and refuses
 * anything it can't vouch for: VLAN tags, unknown ethertypes, fragments,
 * IPv4 options, IPv6 routing headers and ext-header chains it can't walk to
 * the end.  check_link_*() then apply the anti-spoofing and ARP/ND rules.
 */
#ifndef LATCH_PARSE_H
#define LATCH_PARSE_H

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_ARP 0x0806
#define ETH_P_IPV6 0x86DD
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define ETH_P_QINQ1 0x9100

#define IPPROTO_HOPOPTS 0
#define IPPROTO_ICMP 1
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_ROUTING 43
#define IPPROTO_FRAGMENT 44
#define IPPROTO_ESP 50
#define IPPROTO_AH 51
#define IPPROTO_ICMPV6 58
#define IPPROTO_DSTOPTS 60

#define LATCH_EXT_HDR_MAX 6 /* IPv6 extension headers walked before giving up */

struct latch_pkt {
	__u32 saddr[4]; /* v4 in saddr[0] */
	__u32 daddr[4];
	__u32 nd_target[4];
	__u32 inner_src[4]; /* ICMP error: source of the packet it quotes */
	__be32 arp_spa;
	__be32 arp_tpa;
	__be16 sport; /* ICMP echo: the identifier is the local port */
	__be16 dport;
	__u16 eth_proto; /* host byte order */
	__u16 arp_op;
	__u8 smac[6];
	__u8 arp_sha[6];
	__u8 family; /* 4, 6, or 0 for ARP */
	__u8 proto; /* IP protocol number after extension headers */
	__u8 l4_class; /* LATCH_PROTO_TCP/UDP/ICMP, or 0: not a kind latch passes */
	__u8 tcp_syn; /* SYN without ACK */
	__u8 icmp_type;
	__u8 hop_limit;
	__u8 nd; /* ICMPv6 neighbour discovery or MLD */
	__u8 icmp_error; /* into the guest: an error about a guest packet */
	__u16 l4_off; /* where the transport header starts, from the frame's start */
	__u16 pad;
};

/*
 * Copy len bytes at off: straight from the linear area, else from the skb.
 * Headers in the linear area are copied with word loads: clang would
 * otherwise copy byte by byte, not knowing the alignment, and the kernel
 * allows unaligned packet loads on every JIT latch supports.
 */
static __always_inline int read_bytes(struct __sk_buff *skb, __u32 off, void *dst, __u32 len)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;

	if (off <= 256 && data + off + len <= end) {
		__builtin_memcpy(dst, __builtin_assume_aligned(data + off, 4), len);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, dst, len);
}

static __always_inline int addr4_eq(const __u32 *a, __be32 b)
{
	return a[0] == b;
}

static __always_inline int addr6_eq(const __u32 *a, const __u8 *b)
{
	const __u32 *w = (const __u32 *)b;

	return a[0] == w[0] && a[1] == w[1] && a[2] == w[2] && a[3] == w[3];
}

static __always_inline int addr6_is_linklocal(const __u32 *a)
{
	return (a[0] & bpf_htonl(0xffc00000)) == bpf_htonl(0xfe800000);
}

static __always_inline int addr6_is_unspecified(const __u32 *a)
{
	return !(a[0] | a[1] | a[2] | a[3]);
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	/* 16-bit reads: MACs sit at 2-byte alignment in packets and structs */
	const __u16 *x = (const __u16 *)a, *y = (const __u16 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2];
}

static __always_inline int icmp_is_error(int v6, __u8 type)
{
	/* v4: unreachable (incl. fragmentation needed), time exceeded, parameter
	 * problem; v6: unreachable, packet too big, time exceeded, parameter */
	return v6 ? type >= 1 && type <= 4 : type == 3 || type == 11 || type == 12;
}

/*
 * An ICMP error into the guest quotes the guest's own packet.  It is let in
 * as part of that packet's flow (path MTU discovery depends on it), so the
 * flow tuple is taken from the quote: its destination is the remote end.
 */
static __always_inline int parse_icmp_error(struct __sk_buff *skb, struct latch_pkt *p, __u32 off, __u32 end, int v6)
{
	__u8 inner_proto;
	__be16 ports[2];

	if (!v6) {
		struct iphdr in;

		if (off + sizeof(in) + 4 > end || read_bytes(skb, off, &in, sizeof(in)))
			return LATCH_DROP_MALFORMED;
		if (in.version != 4 || in.ihl != 5)
			return 0;
		inner_proto = in.protocol;
		p->inner_src[0] = in.saddr;
		p->saddr[0] = in.daddr;
		off += sizeof(in);
	} else {
		struct ipv6hdr in6;

		if (off + sizeof(in6) + 4 > end || read_bytes(skb, off, &in6, sizeof(in6)))
			return LATCH_DROP_MALFORMED;
		if (in6.version != 6)
			return 0;
		inner_proto = in6.nexthdr;
		__builtin_memcpy(p->inner_src, &in6.saddr, 16);
		__builtin_memcpy(p->saddr, &in6.daddr, 16);
		off += sizeof(in6);
	}
	if (inner_proto != IPPROTO_TCP && inner_proto != IPPROTO_UDP)
		return 0; /* l4_class stays 0: refused */
	if (read_bytes(skb, off, ports, 4))
		return LATCH_DROP_MALFORMED;
	p->proto = inner_proto;
	p->l4_class = inner_proto == IPPROTO_TCP ? LATCH_PROTO_TCP : LATCH_PROTO_UDP;
	p->sport = ports[1]; /* the remote port */
	p->dport = ports[0]; /* the guest's port */
	p->icmp_error = 1;
	return 0;
}

/*
 * Transport header at off: ports, ICMP echo identifiers, ND targets.  end is
 * where the IP packet ends by its own length field: bytes past it are
 * trimmed by the stack, so a port written there must not be believed.
 */
static __always_inline int parse_l4(struct __sk_buff *skb, struct latch_pkt *p, __u32 off, __u32 end, int dir)
{
	__u8 b[24];

	switch (p->proto) {
	case IPPROTO_TCP:
		if (off + 20 > end || read_bytes(skb, off, b, 14))
			return LATCH_DROP_MALFORMED;
		__builtin_memcpy(&p->sport, b, 2);
		__builtin_memcpy(&p->dport, b + 2, 2);
		p->tcp_syn = (b[13] & 0x12) == 0x02;
		p->l4_class = LATCH_PROTO_TCP;
		return 0;
	case IPPROTO_UDP:
		if (off + 8 > end || read_bytes(skb, off, b, 8))
			return LATCH_DROP_MALFORMED;
		__builtin_memcpy(&p->sport, b, 2);
		__builtin_memcpy(&p->dport, b + 2, 2);
		p->l4_class = LATCH_PROTO_UDP;
		return 0;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: {
		int v6 = p->proto == IPPROTO_ICMPV6;
		__u8 req = v6 ? 128 : 8, rep = v6 ? 129 : 0;

		if (off + 8 > end || read_bytes(skb, off, b, 8))
			return LATCH_DROP_MALFORMED;
		p->icmp_type = b[0];
		/* An echo identifier plays the local port, from the guest's side. */
		if (dir == LATCH_DIR_FROM_GUEST && b[0] == req) {
			__builtin_memcpy(&p->sport, b + 4, 2);
			p->l4_class = LATCH_PROTO_ICMP;
		} else if (dir == LATCH_DIR_TO_GUEST && b[0] == rep) {
			__builtin_memcpy(&p->dport, b + 4, 2);
			p->l4_class = LATCH_PROTO_ICMP;
		} else if (dir == LATCH_DIR_TO_GUEST && icmp_is_error(v6, b[0])) {
			return parse_icmp_error(skb, p, off + 8, end, v6);
		} else if (v6 && b[0] >= 130 && b[0] <= 143) {
			/* MLD (130-132, 143) and ND (133-137) */
			p->nd = 1;
			if ((b[0] == 135 || b[0] == 136) &&
			    (off + 24 > end || read_bytes(skb, off + 8, p->nd_target, 16)))
				return LATCH_DROP_MALFORMED;
		}
		return 0;
	}
	default:
		return 0; /* l4_class stays 0: refused by the link checks */
	}
}

static __always_inline int parse_ipv4(struct __sk_buff *skb, struct latch_pkt *p, int dir)
{
	struct iphdr ip;
	__u16 tot_len;

	if (read_bytes(skb, ETH_HLEN, &ip, sizeof(ip)))
		return LATCH_DROP_MALFORMED;
	if (ip.version != 4 || ip.ihl < 5)
		return LATCH_DROP_MALFORMED;
	/* Options can carry source routes; nothing a sandbox needs uses them. */
	if (ip.ihl != 5)
		return LATCH_DROP_IP_OPTIONS;
	tot_len = bpf_ntohs(ip.tot_len);
	if (tot_len < sizeof(ip) || tot_len > skb->len - ETH_HLEN)
		return LATCH_DROP_MALFORMED;
	/* Any fragment, first or later: ports must never be skipped. */
	if (ip.frag_off & bpf_htons(0x3fff))
		return LATCH_DROP_FRAGMENT;
	p->family = 4;
	p->proto = ip.protocol;
	p->saddr[0] = ip.saddr;
	p->daddr[0] = ip.daddr;
	p->l4_off = ETH_HLEN + sizeof(ip);
	return parse_l4(skb, p, ETH_HLEN + sizeof(ip), ETH_HLEN + tot_len, dir);
}

static __always_inline int parse_ipv6(struct __sk_buff *skb, struct latch_pkt *p, int dir)
{
	struct ipv6hdr ip6;
	__u32 off = ETH_HLEN + sizeof(ip6), end;
	__u8 nh;
	int i;

	if (read_bytes(skb, ETH_HLEN, &ip6, sizeof(ip6)))
		return LATCH_DROP_MALFORMED;
	if (ip6.version != 6)
		return LATCH_DROP_MALFORMED;
	/* payload_len 0 would be a jumbogram: not on a sandbox link */
	if (!ip6.payload_len || bpf_ntohs(ip6.payload_len) > skb->len - off)
		return LATCH_DROP_MALFORMED;
	end = off + bpf_ntohs(ip6.payload_len);
	p->family = 6;
	p->hop_limit = ip6.hop_limit;
	__builtin_memcpy(p->saddr, &ip6.saddr, 16);
	__builtin_memcpy(p->daddr, &ip6.daddr, 16);
	nh = ip6.nexthdr;

	/* Walk the extension headers so none can hide the transport header. */
	for (i = 0; i < LATCH_EXT_HDR_MAX; i++) {
		__u8 ext[2];

		switch (nh) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
			if (read_bytes(skb, off, ext, 2))
				return LATCH_DROP_MALFORMED;
			nh = ext[0];
			off += (ext[1] + 1) * 8;
			continue;
		case IPPROTO_ROUTING: /* could name another final destination */
		case IPPROTO_AH:
			return LATCH_DROP_EXT_HDR;
		case IPPROTO_FRAGMENT:
			return LATCH_DROP_FRAGMENT;
		default:
			break;
		}
		break;
	}
	if (nh == IPPROTO_HOPOPTS || nh == IPPROTO_DSTOPTS)
		return LATCH_DROP_EXT_HDR; /* chain longer than we walk */
	p->proto = nh;
	p->l4_off = off;
	return parse_l4(skb, p, off, end, dir);
}

static __always_inline int parse_arp(struct __sk_buff *skb, struct latch_pkt *p)
{
	/* Ethernet/IPv4 ARP only: htype 1, ptype 0x0800, hlen 6, plen 4. */
	__u8 a[28];

	if (read_bytes(skb, ETH_HLEN, a, sizeof(a)))
		return LATCH_DROP_MALFORMED;
	if (a[0] != 0 || a[1] != 1 || a[2] != 0x08 || a[3] != 0x00 || a[4] != 6 || a[5] != 4)
		return LATCH_DROP_ARP;
	p->arp_op = (a[6] << 8) | a[7];
	__builtin_memcpy(p->arp_sha, a + 8, 6);
	__builtin_memcpy(&p->arp_spa, a + 14, 4);
	__builtin_memcpy(&p->arp_tpa, a + 24, 4);
	p->saddr[0] = p->arp_spa;
	p->daddr[0] = p->arp_tpa;
	return 0;
}

/* Parse a frame into p; 0 or a negative drop reason. */
static __always_inline int latch_parse(struct __sk_buff *skb, struct latch_pkt *p, int dir)
{
	struct ethhdr eth;

	if (read_bytes(skb, 0, &eth, sizeof(eth)))
		return LATCH_DROP_MALFORMED;
	__builtin_memcpy(p->smac, eth.h_source, 6);
	p->eth_proto = bpf_ntohs(eth.h_proto);
	/* A tag may have been taken off into the skb by VLAN offload. */
	if (skb->vlan_present)
		return LATCH_DROP_VLAN;
	switch (p->eth_proto) {
	case ETH_P_IP:
		return parse_ipv4(skb, p, dir);
	case ETH_P_IPV6:
		return parse_ipv6(skb, p, dir);
	case ETH_P_ARP:
		return parse_arp(skb, p);
	case ETH_P_8021Q:
	case ETH_P_8021AD:
	case ETH_P_QINQ1:
		return LATCH_DROP_VLAN;
	default:
		return LATCH_DROP_ETHERTYPE;
	}
}

/*
 * Where guest ND may go: link-local unicast (the host's, on this
 * point-to-point link), a solicited-node group ff02::1:ffXX:XXXX, the
 * all-routers group ff02::2, or the host's address.  None of these is ever
 * forwarded; with IPv6 forwarding on, a solicitation to any other address
 * would be, and its payload with it.
 */
static __always_inline int nd_destination_ok(const struct latch_config *cfg, const struct latch_pkt *p)
{
	const __u32 *d = p->daddr;

	if (addr6_is_linklocal(d))
		return 1;
	if (d[0] == bpf_htonl(0xff020000) && !d[1]) {
		if (d[2] == bpf_htonl(1) && (d[3] & bpf_htonl(0xff000000)) == bpf_htonl(0xff000000))
			return 1; /* solicited-node */
		if (!d[2] && d[3] == bpf_htonl(2))
			return 1; /* all-routers */
	}
	return (cfg->flags & LATCH_CFG_HAVE_IP6) && addr6_eq(d, cfg->host_ip6);
}

/* ND from the guest: only with the host, only about the guest itself. */
static __always_inline int check_nd_from_guest(const struct latch_config *cfg, const struct latch_pkt *p)
{
	int src_ok = addr6_is_linklocal(p->saddr) ||
		     ((cfg->flags & LATCH_CFG_HAVE_IP6) && addr6_eq(p->saddr, cfg->guest_ip6));
	int target_is_guest = addr6_is_linklocal(p->nd_target) ||
			      ((cfg->flags & LATCH_CFG_HAVE_IP6) && addr6_eq(p->nd_target, cfg->guest_ip6));

	if (p->hop_limit != 255 || !nd_destination_ok(cfg, p))
		return LATCH_DROP_ND;
	switch (p->icmp_type) {
	case 133: /* router solicitation: harmless, the host answers or not */
		return src_ok || addr6_is_unspecified(p->saddr) ? LATCH_PASS_ND : LATCH_DROP_ND;
	case 135: /* neighbour solicitation */
		if (addr6_is_unspecified(p->saddr)) /* duplicate address detection */
			return target_is_guest ? LATCH_PASS_ND : LATCH_DROP_ND;
		if (!src_ok)
			return LATCH_DROP_ND;
		/* a point-to-point link: the host is the only neighbour */
		if (addr6_is_linklocal(p->nd_target) ||
		    ((cfg->flags & LATCH_CFG_HAVE_IP6) && addr6_eq(p->nd_target, cfg->host_ip6)))
			return LATCH_PASS_ND;
		return LATCH_DROP_ND;
	case 136: /* neighbour advertisement: only for the guest's own address */
		return src_ok && target_is_guest ? LATCH_PASS_ND : LATCH_DROP_ND;
	default: /* router advertisements, redirects, MLD */
		return LATCH_DROP_ND;
	}
}

/*
 * Link-layer and source checks for a packet leaving the guest.  0 means
 * "now decide by destination"; anything else is the verdict.
 */
static __always_inline int check_link_from_guest(const struct latch_config *cfg, const struct latch_pkt *p)
{
	if (!mac_eq(p->smac, cfg->guest_mac))
		return LATCH_DROP_SPOOF_MAC;
	if (p->eth_proto == ETH_P_ARP) {
		if (!(cfg->flags & LATCH_CFG_HAVE_IP4) || (p->arp_op != 1 && p->arp_op != 2) ||
		    !mac_eq(p->arp_sha, cfg->guest_mac) || p->arp_spa != cfg->guest_ip4 || p->arp_tpa != cfg->host_ip4)
			return LATCH_DROP_ARP;
		return LATCH_PASS_ARP;
	}
	if (p->family == 6 && p->nd)
		return check_nd_from_guest(cfg, p);
	if (p->family == 4 && !((cfg->flags & LATCH_CFG_HAVE_IP4) && addr4_eq(p->saddr, cfg->guest_ip4)))
		return LATCH_DROP_SPOOF_IP;
	if (p->family == 6 && !((cfg->flags & LATCH_CFG_HAVE_IP6) && addr6_eq(p->saddr, cfg->guest_ip6)))
		return LATCH_DROP_SPOOF_IP;
	if (!p->l4_class)
		return LATCH_DROP_PROTO;
	return 0;
}

/* Link-layer checks for a packet entering the guest. */
static __always_inline int check_link_to_guest(const struct latch_config *cfg, const struct latch_pkt *p)
{
	if (p->eth_proto == ETH_P_ARP) {
		if (!(cfg->flags & LATCH_CFG_HAVE_IP4) || (p->arp_op != 1 && p->arp_op != 2) ||
		    p->arp_spa != cfg->host_ip4 || p->arp_tpa != cfg->guest_ip4)
			return LATCH_DROP_ARP;
		return LATCH_PASS_ARP;
	}
	if (p->family == 6 && p->nd)
		return (p->icmp_type == 135 || p->icmp_type == 136) && p->hop_limit == 255 ? LATCH_PASS_ND :
											     LATCH_DROP_ND;
	if (p->family == 4 && !((cfg->flags & LATCH_CFG_HAVE_IP4) && addr4_eq(p->daddr, cfg->guest_ip4)))
		return LATCH_DROP_NO_FLOW;
	if (p->family == 6 && !((cfg->flags & LATCH_CFG_HAVE_IP6) && addr6_eq(p->daddr, cfg->guest_ip6)))
		return LATCH_DROP_NO_FLOW;
	if (!p->l4_class)
		return LATCH_DROP_PROTO;
	/* an error about a packet the guest did not send */
	if (p->icmp_error &&
	    (p->family == 4 ? !addr4_eq(p->inner_src, cfg->guest_ip4) : !addr6_eq(p->inner_src, cfg->guest_ip6)))
		return LATCH_DROP_NO_FLOW;
	return 0;
}

/* The same flow seen from the other end: for re-checking a reply. */
static __always_inline void latch_pkt_reverse(const struct latch_pkt *p, struct latch_pkt *out)
{
	*out = *p;
	__builtin_memcpy(out->saddr, p->daddr, 16);
	__builtin_memcpy(out->daddr, p->saddr, 16);
	out->sport = p->dport;
	out->dport = p->sport;
	out->tcp_syn = 0;
}

#endif /* LATCH_PARSE_H */
