// SPDX-License-Identifier: GPL-2.0-only
/*
 * latch_cg.bpf.c - the egress latch on a room's cgroup.
 *
 * A room is one command in a cgroup v2 directory of its own.  These programs
 * are loaded and pinned once (loader/cgroup.c) and attached to every room's
 * directory: a room costs a few map updates and the attaches, not a load and
 * a verification.  A room's state lives in a slot: room_slots maps its cgroup
 * id to the slot, and ARRAY_OF_MAPS outer maps hold each slot's inner maps,
 * which have the tc program's layouts, so loader/policy.c writes a room's
 * policy exactly as it writes a sandbox's.  Slots are made once and reused:
 * an update of a map-in-map waits for an RCU grace period (milliseconds),
 * an update of room_slots does not.
 *
 * The socket-address hooks (connect4/6, sendmsg4/6) refuse a destination
 * before a packet exists, with EPERM to the caller; cgroup_skb/egress checks
 * every packet the room's sockets send, so nothing that skips a hook (or a
 * destination rewritten by someone else's program after ours) gets out.  The
 * egress verdict of a socket's last destination is cached in its socket
 * storage, the way the tc program keeps flows.  connect_unix and
 * sendmsg_unix refuse abstract unix sockets, which live in the network
 * namespace where no mount namespace can hide them.
 *
 * Order of the checks (the tc program's, DESIGN.md): host services, then DNS
 * (the room's resolver only; the bucket is charged per packet at egress),
 * then the policy.  A room without state, or with a config not ready or of
 * another ABI, passes nothing (drop_no_config).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "latch_abi.h"
#include "latch_parse.h" /* ETH_P_*, IPPROTO_*, LATCH_EXT_HDR_MAX */
#include "latch_rules.h"
#include "latch_policy.h"

char LICENSE[] SEC("license") = "GPL";

#define IPPROTO_MPTCP 262

/*
 * Inner map templates.  libbpf 1.1 cannot size an inner map declared with
 * __type(key, ...), so these give sizes; the loader creates each room's maps
 * with the same sizes and BTF types of their own (struct latch_room_meta).
 */
#define ROOM_OUTER(name, inner_type, ksize, vsize, max, flags) \
	struct {                                               \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);      \
		__uint(max_entries, LATCH_ROOM_MAX);           \
		__type(key, __u32);                            \
		__array(                                       \
			values, struct {                       \
				__uint(type, inner_type);      \
				__uint(max_entries, max);      \
				__uint(map_flags, flags);      \
				__uint(key_size, ksize);       \
				__uint(value_size, vsize);     \
			});                                    \
	} name SEC(".maps")

/* room_slots: cgroup id -> the slot of the room's state. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LATCH_ROOM_MAX);
	__type(key, __u64);
	__type(value, __u32);
} room_slots SEC(".maps");

/* room_owners: slot -> the room holding it (loader/cgroup.c's bookkeeping). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LATCH_ROOM_MAX);
	__type(key, __u32);
	__type(value, struct latch_room_owner);
} room_owners SEC(".maps");

/* room_settings: slot -> ARRAY[1] of struct latch_config. */
ROOM_OUTER(room_settings, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct latch_config), 1, 0);
/* room_exact4/6: permanent single addresses, per policy generation. */
ROOM_OUTER(room_exact4, BPF_MAP_TYPE_HASH, sizeof(struct latch_exact4_key), sizeof(struct latch_rules),
	   LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC);
ROOM_OUTER(room_exact6, BPF_MAP_TYPE_HASH, sizeof(struct latch_exact6_key), sizeof(struct latch_rules),
	   LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC);
/* room_prefix4/6: permanent CIDR entries, per policy generation. */
ROOM_OUTER(room_prefix4, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_prefix4_key), sizeof(struct latch_rules),
	   LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC);
ROOM_OUTER(room_prefix6, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_prefix6_key), sizeof(struct latch_rules),
	   LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC);
/* room_timed4/6: entries with a deadline (grants, learned names). */
ROOM_OUTER(room_timed4, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_timed4_key), sizeof(struct latch_rules),
	   LATCH_ROOM_TIMED_MAX, BPF_F_NO_PREALLOC);
ROOM_OUTER(room_timed6, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_timed6_key), sizeof(struct latch_rules),
	   LATCH_ROOM_TIMED_MAX, BPF_F_NO_PREALLOC);
/* room_counters: slot -> PERCPU_ARRAY of counters, the tc's slots. */
ROOM_OUTER(room_counters, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct latch_counter), LATCH_COUNTER_SLOTS, 0);

/* room_state: the DNS bucket of each room (a spin lock needs BTF, so not an inner map). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LATCH_ROOM_MAX);
	__type(key, __u64);
	__type(value, struct latch_room_state);
} room_state SEC(".maps");

/* room_meta: what the loader needs to give a room typed maps of its own. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct latch_room_meta);
} room_meta SEC(".maps");

/* room_orphans: verdicts of sockets whose cgroup has no room state (drop_no_config). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LATCH_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct latch_counter);
} room_orphans SEC(".maps");

/* sock_verdicts: per socket, the last destination that passed. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct latch_sock_verdict);
} sock_verdicts SEC(".maps");

/*
 * room_types: never read.  Its value names the types of a room's own maps,
 * so that they are in this object's BTF for the loader to give those maps
 * (bpftool then prints a room's settings and policy typed).
 */
struct latch_room_types {
	struct latch_config config;
	struct latch_exact4_key exact4;
	struct latch_exact6_key exact6;
	struct latch_prefix4_key prefix4;
	struct latch_prefix6_key prefix6;
	struct latch_timed4_key timed4;
	struct latch_timed6_key timed6;
	struct latch_rules rules;
	struct latch_counter counter;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct latch_room_types);
} room_types SEC(".maps");

/* room_gate_counters: latch_room_gate's verdicts (enum latch_room_gate_slot). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LATCH_ROOM_GATE_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} room_gate_counters SEC(".maps");

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* The room a program runs for, found once per call. */
struct room {
	__u64 id; /* cgroup id */
	__u32 slot; /* of its state */
	__u32 pad;
	const struct latch_config *cfg;
};

/* One destination, from a sockaddr or a packet. */
struct dest {
	__u32 addr[4]; /* v4 in addr[0], network byte order */
	__u16 port; /* host byte order; ICMP echo: 0 */
	__u8 family; /* 4 or 6 */
	__u8 l4; /* LATCH_PROTO_TCP/UDP/ICMP, or 0: nothing latch passes */
	__u8 tcp_syn; /* SYN without ACK */
	__u8 pad;
	__u16 sport; /* the sending socket's port, host byte order; 0 unbound */
	__be32 saddr4; /* egress, IPv4: the packet's source */
};

static __always_inline int room_find(__u64 id, struct room *r)
{
	__u32 zero = 0, *slot = bpf_map_lookup_elem(&room_slots, &id);
	const struct latch_config *cfg;
	void *inner;

	r->id = id;
	r->cfg = NULL;
	if (!slot)
		return 0;
	r->slot = *slot;
	inner = bpf_map_lookup_elem(&room_settings, &r->slot);
	if (!inner)
		return 0;
	cfg = bpf_map_lookup_elem(inner, &zero);
	if (!cfg || !(cfg->flags & LATCH_CFG_READY) || cfg->abi_version != LATCH_ABI_VERSION)
		return 0;
	r->cfg = cfg;
	return 1;
}

static __always_inline void count(const struct room *r, int reason, int slot_kind, __u64 bytes)
{
	__u32 slot = latch_counter_slot(reason, slot_kind);
	struct latch_counter *c = NULL;
	void *inner = r->cfg ? bpf_map_lookup_elem(&room_counters, &r->slot) : NULL;

	if (inner)
		c = bpf_map_lookup_elem(inner, &slot);
	else
		c = bpf_map_lookup_elem(&room_orphans, &slot);
	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

/* The room's DNS bucket: burst at once, then rate per second. */
static __always_inline int dns_take(const struct room *r, __u64 now)
{
	struct latch_room_state *st = bpf_map_lookup_elem(&room_state, &r->id);
	__u32 rate = r->cfg->dns_rate, burst = r->cfg->dns_burst;
	int ok;

	if (!st || !rate || !burst)
		return 0;
	bpf_spin_lock(&st->lock);
	ok = latch_gcra(&st->dns_tat_ns, rate, burst, now);
	bpf_spin_unlock(&st->lock);
	return ok;
}

/* The policy walk (latch_policy.h) over the room's inner maps. */
static __always_inline int policy_decide(const struct room *r, const struct dest *d, int established, __u64 *now,
					 __u64 *expires)
{
	const struct latch_policy_maps maps = {
		.exact4 = &room_exact4,
		.exact6 = &room_exact6,
		.prefix4 = &room_prefix4,
		.prefix6 = &room_prefix6,
		.timed4 = &room_timed4,
		.timed6 = &room_timed6,
		.slot = r->slot,
		.in_slot = 1,
	};

	return latch_policy_decide(&maps, r->cfg, d->family, d->addr, d->l4, d->port, established, now, expires);
}

static __always_inline int addr_is(const struct dest *d, int family, __be32 a4, const __u8 *a6)
{
	if (d->family != family)
		return 0;
	if (family == 4)
		return d->addr[0] == a4;
	return d->addr[0] == ((const __u32 *)a6)[0] && d->addr[1] == ((const __u32 *)a6)[1] &&
	       d->addr[2] == ((const __u32 *)a6)[2] && d->addr[3] == ((const __u32 *)a6)[3];
}

static __always_inline int is_host(const struct latch_config *cfg, const struct dest *d)
{
	return ((cfg->flags & LATCH_CFG_HAVE_IP4) && addr_is(d, 4, cfg->host_ip4, NULL)) ||
	       ((cfg->flags & LATCH_CFG_HAVE_IP6) && addr_is(d, 6, 0, cfg->host_ip6));
}

static __always_inline int is_resolver(const struct latch_config *cfg, const struct dest *d)
{
	return ((cfg->flags & LATCH_CFG_HAVE_RESOLVER4) && addr_is(d, 4, cfg->resolver_ip4, NULL)) ||
	       ((cfg->flags & LATCH_CFG_HAVE_RESOLVER6) && addr_is(d, 6, 0, cfg->resolver_ip6));
}

/* Is PORT one of the config's host ports (TCP or UDP)? */
static __always_inline int in_host_ports(const struct latch_config *cfg, const struct dest *d, __u16 port)
{
	if (d->l4 != LATCH_PROTO_TCP && d->l4 != LATCH_PROTO_UDP)
		return 0;
	for (int i = 0; i < LATCH_HOST_PORTS_MAX; i++) {
		if (i >= cfg->n_host_ports)
			break;
		if (bpf_ntohs(cfg->host_ports[i]) == port)
			return 1;
	}
	return 0;
}

static __always_inline int is_host_service(const struct latch_config *cfg, const struct dest *d)
{
	return in_host_ports(cfg, d, d->port);
}

/* latchd's own cgroup: is this sent from one of its listeners' ports (an answer)? */
static __always_inline int is_answer(const struct latch_config *cfg, const struct dest *d)
{
	return d->sport && in_host_ports(cfg, d, d->sport);
}

static __always_inline int is_dns(const struct dest *d)
{
	return (d->l4 == LATCH_PROTO_TCP || d->l4 == LATCH_PROTO_UDP) && d->port == 53;
}

/*
 * Where may the room send?  Host services, then DNS (the resolver only;
 * `charge` takes a token from the bucket: egress does, per UDP datagram and
 * per TCP SYN), then the policy.
 */
static __always_inline int decide(const struct room *r, const struct dest *d, int charge, int established, __u64 *now,
				  __u64 *expires)
{
	const struct latch_config *cfg = r->cfg;

	*expires = 0;
	if (!d->l4)
		return LATCH_DROP_PROTO;
	if (cfg->flags & LATCH_CFG_LATCHD) {
		/* latchd: its answers go back to whoever asked; what it opens, DNS too, only by policy */
		if (is_answer(cfg, d))
			return LATCH_PASS_HOST_SERVICE;
		goto policy;
	}
	if (is_host(cfg, d)) {
		if (is_host_service(cfg, d))
			return LATCH_PASS_HOST_SERVICE;
		if (!(is_dns(d) && is_resolver(cfg, d)))
			return LATCH_DROP_HOST_PORT;
	}
	if (is_dns(d)) {
		if (!is_resolver(cfg, d))
			return LATCH_DROP_DNS_NOT_RESOLVER;
		if (!charge || (d->l4 == LATCH_PROTO_TCP && !d->tcp_syn))
			return LATCH_PASS_DNS;
		if (!*now)
			*now = bpf_ktime_get_boot_ns();
		return dns_take(r, *now) ? LATCH_PASS_DNS : LATCH_DROP_DNS_RATE;
	}
policy:
	return policy_decide(r, d, established, now, expires);
}

static __always_inline int same_dest(const struct latch_sock_verdict *v, const struct dest *d)
{
	return v->family == d->family && v->port == d->port && v->proto == d->l4 && v->addr[0] == d->addr[0] &&
	       v->addr[1] == d->addr[1] && v->addr[2] == d->addr[2] && v->addr[3] == d->addr[3];
}

static __always_inline void remember(struct latch_sock_verdict *v, const struct dest *d, const struct latch_config *cfg,
				     __u64 expires)
{
	__builtin_memcpy(v->addr, d->addr, 16);
	v->port = d->port;
	v->proto = d->l4;
	v->family = d->family;
	v->policy_version = cfg->policy_version;
	v->expires_ns = expires;
}

/* ------------------------------------------------------------ socket-address hooks */

static __always_inline __u8 l4_of_socket(const struct bpf_sock_addr *ctx)
{
	__u32 proto = ctx->protocol;

	if (proto == IPPROTO_TCP || proto == IPPROTO_MPTCP)
		return LATCH_PROTO_TCP;
	if (proto == IPPROTO_UDP)
		return LATCH_PROTO_UDP;
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) /* ping sockets */
		return LATCH_PROTO_ICMP;
	return 0;
}

/*
 * The verdict of a connect() or sendmsg() to D.  1 lets the call go on, 0
 * fails it with EPERM.  A pass is remembered in the socket's storage so
 * that its packets pass at egress on one compare.
 */
static __always_inline int sockaddr_verdict(struct bpf_sock_addr *ctx, struct dest *d)
{
	struct latch_sock_verdict *v = NULL;
	struct room r;
	__u64 now = 0, expires = 0;
	int reason, established = 0;

	if (!room_find(bpf_get_current_cgroup_id(), &r)) {
		count(&r, LATCH_DROP_NO_CONFIG, LATCH_ROOM_SLOT_SOCKADDR, 0);
		return 0;
	}
	if (ctx->sk)
		v = bpf_sk_storage_get(&sock_verdicts, ctx->sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (v && same_dest(v, d))
		established = 1;
	reason = decide(&r, d, 0, established, &now, &expires);
	count(&r, reason, LATCH_ROOM_SLOT_SOCKADDR, 0);
	if (reason < 0)
		return 0;
	if (v && !is_dns(d))
		remember(v, d, r.cfg, expires);
	return 1;
}

static __always_inline int sockaddr4(struct bpf_sock_addr *ctx)
{
	struct dest d = { .family = 4, .l4 = l4_of_socket(ctx) };

	d.addr[0] = ctx->user_ip4;
	d.port = d.l4 == LATCH_PROTO_ICMP ? 0 : bpf_ntohs(ctx->user_port);
	if (ctx->sk)
		d.sport = ctx->sk->src_port;
	return sockaddr_verdict(ctx, &d);
}

static __always_inline int sockaddr6(struct bpf_sock_addr *ctx)
{
	struct dest d = { .family = 6, .l4 = l4_of_socket(ctx) };

	d.addr[0] = ctx->user_ip6[0];
	d.addr[1] = ctx->user_ip6[1];
	d.addr[2] = ctx->user_ip6[2];
	d.addr[3] = ctx->user_ip6[3];
	/* ::ffff:a.b.c.d from a dual-stack socket is IPv4 on the wire: judge it as such */
	if (d.addr[0] == 0 && d.addr[1] == 0 && d.addr[2] == bpf_htonl(0xffff)) {
		d.family = 4;
		d.addr[0] = d.addr[3];
		d.addr[2] = d.addr[3] = 0;
	}
	d.port = d.l4 == LATCH_PROTO_ICMP ? 0 : bpf_ntohs(ctx->user_port);
	if (ctx->sk)
		d.sport = ctx->sk->src_port;
	return sockaddr_verdict(ctx, &d);
}

SEC("cgroup/connect4")
int latch_room_connect4(struct bpf_sock_addr *ctx)
{
	return sockaddr4(ctx);
}

SEC("cgroup/connect6")
int latch_room_connect6(struct bpf_sock_addr *ctx)
{
	return sockaddr6(ctx);
}

SEC("cgroup/sendmsg4")
int latch_room_sendmsg4(struct bpf_sock_addr *ctx)
{
	return sockaddr4(ctx);
}

SEC("cgroup/sendmsg6")
int latch_room_sendmsg6(struct bpf_sock_addr *ctx)
{
	return sockaddr6(ctx);
}

/*
 * connect_unix and sendmsg_unix (Linux 6.7+; libbpf 1.1 has no section name
 * for them, so the loader sets their attach type before the load).  A path
 * socket is reachable only if the room's mount namespace shows it; an
 * abstract one (sun_path[0] == 0) lives in the network namespace, where the
 * host's are (containerd's shims were reached that way: CVE-2020-15257), so
 * it is refused and counted as a protocol latch does not pass.
 */
static __always_inline int unix_verdict(struct bpf_sock_addr *ctx)
{
	struct bpf_sock_addr_kern *sa = bpf_cast_to_kern_ctx(ctx);
	struct sockaddr_un *un;
	struct room r;

	if (!room_find(bpf_get_current_cgroup_id(), &r)) {
		count(&r, LATCH_DROP_NO_CONFIG, LATCH_ROOM_SLOT_SOCKADDR, 0);
		return 0;
	}
	if (sa->uaddrlen <= (int)__builtin_offsetof(struct sockaddr_un, sun_path))
		return 1; /* no name: nothing to reach */
	un = bpf_rdonly_cast(sa->uaddr, bpf_core_type_id_kernel(struct sockaddr_un));
	if (un->sun_path[0] != 0)
		return 1;
	count(&r, LATCH_DROP_PROTO, LATCH_ROOM_SLOT_SOCKADDR, 0);
	return 0;
}

SEC("cgroup/connect4")
int latch_room_connect_unix(struct bpf_sock_addr *ctx)
{
	return unix_verdict(ctx);
}

SEC("cgroup/sendmsg4")
int latch_room_sendmsg_unix(struct bpf_sock_addr *ctx)
{
	return unix_verdict(ctx);
}

/* ------------------------------------------------------------ egress */

/*
 * LEN bytes at OFF of the packet (from its IP header: skb->data there in a
 * cgroup_skb program), read in place when they are in its linear part (the
 * headers of a packet this host made are) and by bpf_skb_load_bytes()
 * otherwise: the same bytes and the same failure, without a helper call.
 */
static __always_inline int pkt_read(struct __sk_buff *skb, __u32 off, void *buf, __u32 len)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;

	if (off <= 1024 && data + off + len <= end) {
		__builtin_memcpy(buf, data + off, len);
		return 0;
	}
	return bpf_skb_load_bytes(skb, off, buf, len);
}

/*
 * The destination of a packet a room socket sends, from its IP header on.
 * Returns 0 or a drop reason.  Locally made packets are not yet fragmented
 * here, so a fragment is someone's craft; IPv4 options (source routes) and
 * IPv6 routing headers (a segment routing header is allowed to unprivileged
 * sockets) would make the header's destination a first hop only.
 */
static __always_inline int parse_dest(struct __sk_buff *skb, struct dest *d)
{
	__u32 off;
	__u8 proto;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		if (pkt_read(skb, 0, &ip, sizeof(ip)))
			return LATCH_DROP_MALFORMED;
		if (ip.version != 4)
			return LATCH_DROP_MALFORMED;
		if (ip.ihl != 5)
			return LATCH_DROP_IP_OPTIONS;
		if (ip.frag_off & bpf_htons(0x3fff))
			return LATCH_DROP_FRAGMENT;
		d->family = 4;
		d->addr[0] = ip.daddr;
		d->saddr4 = ip.saddr;
		proto = ip.protocol;
		off = sizeof(ip);
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (pkt_read(skb, 0, &ip6, sizeof(ip6)))
			return LATCH_DROP_MALFORMED;
		d->family = 6;
		__builtin_memcpy(d->addr, &ip6.daddr, 16);
		proto = ip6.nexthdr;
		off = sizeof(ip6);
		for (int i = 0; i < LATCH_EXT_HDR_MAX; i++) {
			struct ipv6_opt_hdr eh;

			if (proto == IPPROTO_ROUTING)
				return LATCH_DROP_EXT_HDR;
			if (proto == IPPROTO_FRAGMENT)
				return LATCH_DROP_FRAGMENT;
			if (proto != IPPROTO_HOPOPTS && proto != IPPROTO_DSTOPTS)
				break;
			if (bpf_skb_load_bytes(skb, off, &eh, sizeof(eh)))
				return LATCH_DROP_MALFORMED;
			proto = eh.nexthdr;
			off += (eh.hdrlen + 1) * 8;
		}
		if (proto == IPPROTO_HOPOPTS || proto == IPPROTO_DSTOPTS || proto == IPPROTO_ROUTING ||
		    proto == IPPROTO_FRAGMENT)
			return LATCH_DROP_EXT_HDR;
	} else {
		return LATCH_DROP_ETHERTYPE;
	}

	if (proto == IPPROTO_TCP) {
		struct tcphdr th;

		if (pkt_read(skb, off, &th, sizeof(th)))
			return LATCH_DROP_MALFORMED;
		d->l4 = LATCH_PROTO_TCP;
		d->port = bpf_ntohs(th.dest);
		d->sport = bpf_ntohs(th.source);
		d->tcp_syn = th.syn && !th.ack;
	} else if (proto == IPPROTO_UDP) {
		struct udphdr uh;

		if (pkt_read(skb, off, &uh, sizeof(uh)))
			return LATCH_DROP_MALFORMED;
		d->l4 = LATCH_PROTO_UDP;
		d->port = bpf_ntohs(uh.dest);
		d->sport = bpf_ntohs(uh.source);
	} else if ((proto == IPPROTO_ICMP && d->family == 4) || (proto == IPPROTO_ICMPV6 && d->family == 6)) {
		__u8 type;

		if (bpf_skb_load_bytes(skb, off, &type, 1))
			return LATCH_DROP_MALFORMED;
		/* a room's ping socket sends echo requests; nothing else of ICMP is its own */
		if (type != (d->family == 4 ? 8 : 128))
			return LATCH_DROP_PROTO;
		d->l4 = LATCH_PROTO_ICMP;
	} else {
		return LATCH_DROP_PROTO;
	}
	return 0;
}

/*
 * Stamp packets to the room's own services with the room's mark (see
 * latch_abi.h).  Only from a loopback source, as the room's sockets send
 * there: a source the room made up (IP_FREEBIND needs no privilege) would
 * have latchd answer someone else, so such a packet gets no mark and the
 * gate drops it.
 */
static __always_inline void stamp(struct __sk_buff *skb, const struct room *r, const struct dest *d)
{
	const struct latch_config *cfg = r->cfg;

	if ((bpf_ntohl(d->saddr4) >> 24) != 127)
		return;
	if (d->family == 4 && (((cfg->flags & LATCH_CFG_HAVE_IP4) && d->addr[0] == cfg->host_ip4) ||
			       ((cfg->flags & LATCH_CFG_HAVE_RESOLVER4) && d->addr[0] == cfg->resolver_ip4)))
		skb->mark = latch_room_mark_of(bpf_ntohl(d->addr[0]));
}

SEC("cgroup_skb/egress")
int latch_room_egress(struct __sk_buff *skb)
{
	struct latch_sock_verdict *v = NULL;
	struct bpf_sock *sk = skb->sk;
	struct dest d = {};
	struct room r;
	__u64 now = 0, expires = 0;
	int reason, established;

	/* the socket's cgroup, not the current task's: retransmits and ACKs run in softirq */
	if (!room_find(bpf_skb_cgroup_id(skb), &r)) {
		count(&r, LATCH_DROP_NO_CONFIG, LATCH_ROOM_SLOT_PACKET, skb->len);
		return 0;
	}
	reason = parse_dest(skb, &d);
	if (reason) {
		count(&r, reason, LATCH_ROOM_SLOT_PACKET, skb->len);
		return 0;
	}
	if (sk)
		sk = bpf_sk_fullsock(sk);
	if (sk)
		v = bpf_sk_storage_get(&sock_verdicts, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	established = v && same_dest(v, &d);
	/* DNS is never cached: every query is charged to the bucket */
	if (established && !is_dns(&d) && v->policy_version == r.cfg->policy_version &&
	    (!v->expires_ns || (now = bpf_ktime_get_boot_ns()) < v->expires_ns)) {
		count(&r, LATCH_PASS_FLOW, LATCH_ROOM_SLOT_PACKET, skb->len);
		stamp(skb, &r, &d);
		return 1;
	}
	reason = decide(&r, &d, 1, established, &now, &expires);
	count(&r, reason, LATCH_ROOM_SLOT_PACKET, skb->len);
	if (reason < 0)
		return 0;
	if (v && !is_dns(&d))
		remember(v, &d, r.cfg, expires);
	stamp(skb, &r, &d);
	return 1;
}

/* ------------------------------------------------------------ the gate of the room services */

static __always_inline void gate_count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&room_gate_counters, &slot);

	if (c)
		(*c)++;
}

/*
 * Attached (cgroup_skb/ingress) where room services listen: a packet to
 * 127.76.A.B passes only with room A.B's mark.  Everything else is not the
 * gate's business and passes.
 */
SEC("cgroup_skb/ingress")
int latch_room_gate(struct __sk_buff *skb)
{
	struct iphdr ip;
	__u32 daddr;

	if (skb->protocol != bpf_htons(ETH_P_IP) || pkt_read(skb, 0, &ip, sizeof(ip))) {
		gate_count(LATCH_ROOM_GATE_OTHER);
		return 1;
	}
	daddr = bpf_ntohl(ip.daddr);
	if ((daddr & LATCH_ROOM_SERVICE_MASK) != LATCH_ROOM_SERVICE_NET) {
		gate_count(LATCH_ROOM_GATE_OTHER);
		return 1;
	}
	if (skb->mark == latch_room_mark_of(daddr)) {
		gate_count(LATCH_ROOM_GATE_PASS);
		return 1;
	}
	gate_count(LATCH_ROOM_GATE_DROP);
	return 0;
}
