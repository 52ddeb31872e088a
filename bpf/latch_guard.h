/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * latch_guard.h - two questions the from-guest program asks the kernel
 * itself, beyond the packet: would the host forward it (or keep it, on one
 * of its own addresses), and does it carry a checksum-offload request that
 * would have the host rewrite it after tc.  Header-only, like latch_parse.h.
 */
#ifndef LATCH_GUARD_H
#define LATCH_GUARD_H

#define AF_INET 2
#define AF_INET6 10
#define CHECKSUM_PARTIAL 3

/*
 * The skb behind the context, for the checksum-offload fields that
 * __sk_buff lacks (6.2+).  Weak: latch_from_guest_nocsum, the variant for
 * older kernels, never calls it, and libbpf leaves it unresolved there.
 */
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym __weak;

/*
 * Would the host forward this packet, rather than keep it?  Asked of the
 * kernel's own routing (bpf_fib_lookup, as if the packet arrived on this
 * link), so every local address of the host is guarded the moment it
 * exists, with no daemon keeping a list: a local, broadcast, multicast or
 * anycast route answers NOT_FWDED.  So does "no route", which the stack
 * would drop anyway.  FWD_DISABLED means the host forwards nothing from this
 * link, so only local delivery is left.  Multicast, limited broadcast,
 * 0.0.0.0/8, loopback, link-local and v4-mapped destinations are refused
 * before asking: the stack handles some of them before its route lookup.
 */
static __always_inline int host_would_forward(struct __sk_buff *skb, const struct latch_pkt *p)
{
	struct bpf_fib_lookup f;
	long r;

	__builtin_memset(&f, 0, sizeof(f));
	if (p->family == 4) {
		__u32 d = bpf_ntohl(p->daddr[0]);

		if ((d >> 28) == 0xe || d == 0xffffffff || !(d >> 24) || (d >> 24) == 127)
			return 0;
		f.family = AF_INET;
		f.ipv4_src = p->saddr[0];
		f.ipv4_dst = p->daddr[0];
	} else {
		const __u32 *d = p->daddr;
		int zero64 = !d[0] && !d[1];

		if ((d[0] & bpf_htonl(0xff000000)) == bpf_htonl(0xff000000) || addr6_is_linklocal(d))
			return 0; /* multicast, link-local */
		if (zero64 && ((!d[2] && (!d[3] || d[3] == bpf_htonl(1))) || d[2] == bpf_htonl(0xffff)))
			return 0; /* ::, ::1, v4-mapped */
		f.family = AF_INET6;
		__builtin_memcpy(f.ipv6_src, p->saddr, 16);
		__builtin_memcpy(f.ipv6_dst, p->daddr, 16);
	}
	f.l4_protocol = p->proto;
	f.sport = p->sport;
	f.dport = p->dport;
	f.ifindex = skb->ifindex;
	r = bpf_fib_lookup(skb, &f, sizeof(f), 0);
	return r >= 0 && r != BPF_FIB_LKUP_RET_NOT_FWDED && r != BPF_FIB_LKUP_RET_FWD_DISABLED;
}

/*
 * A checksum-offload request from the guest (virtio-net's NEEDS_CSUM, made
 * CHECKSUM_PARTIAL by tun) has the host write 16 bits at csum_start +
 * csum_offset after tc has run: anywhere in the packet, a port for instance,
 * unless it is the L4 checksum's place.  Anything else is dropped.
 */
static __always_inline int csum_request_ok(struct __sk_buff *ctx, __u16 l4_off, __u16 want)
{
	struct sk_buff *skb = bpf_cast_to_kern_ctx(ctx);

	if (BPF_CORE_READ_BITFIELD(skb, ip_summed) != CHECKSUM_PARTIAL)
		return 1;
	/* csum_start counts from skb->head, as mac_header does */
	return want && (__u16)(skb->csum_start - skb->mac_header) == l4_off && skb->csum_offset == want;
}

static __always_inline int check_csum_offload(struct __sk_buff *ctx, const struct latch_pkt *p)
{
	__u16 want = p->l4_class == LATCH_PROTO_TCP ? 16 : p->l4_class == LATCH_PROTO_UDP ? 6 : 0;

	return csum_request_ok(ctx, p->l4_off, p->icmp_error ? 0 : want) ? 0 : LATCH_DROP_CSUM;
}

#endif /* LATCH_GUARD_H */
