/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * latch_abi.h - the one header shared by the kernel and user-space sides.
 *
 * Everything that crosses the kernel boundary lives here: map keys and
 * values, the verdict and reason codes, and the event struct.  Every struct
 * is checked with _Static_assert so that a layout change breaks the build
 * instead of silently mis-reading a pinned map.  docs/maps.md describes each
 * map and how to read it with bpftool.
 */
#ifndef LATCH_ABI_H
#define LATCH_ABI_H

#ifdef __BPF__
/* vmlinux.h already provides the __u8.. / __be16.. types. */
#else
#include <linux/bpf.h> /* struct bpf_spin_lock */
#include <linux/types.h>
#include <stddef.h>
#endif

/* Bumped whenever a pinned map's layout changes; stored in the config map. */
#define LATCH_ABI_VERSION 4

/* Sizes; overridable at build time. */
#ifndef LATCH_POLICY_MAX
#define LATCH_POLICY_MAX 131072 /* per map; two policy generations fit */
#endif
#ifndef LATCH_TIMED_MAX
#define LATCH_TIMED_MAX 16384
#endif
#ifndef LATCH_FLOW_MAX
#define LATCH_FLOW_MAX 65536
#endif
#define LATCH_RULES_MAX 16 /* port rules per address or prefix */
#define LATCH_HOST_PORTS_MAX 8
#define LATCH_RINGBUF_BYTES (256 * 1024)
#define LATCH_IFNAMSIZ 16

/*
 * Verdict reasons: the one list.  Each line is X(ID, code, name, meaning);
 * it generates enum latch_reason here, and latch_reason_name() (loader),
 * the CLI's counters, the audit log's kernel rows and selftests/prog_table
 * all take their names from it.  docs/maps.md lists the same rows, and
 * tests/test_reasons.c checks that it does.
 *
 * Pass reasons are small positive numbers; drop reasons are negative and
 * start at -200, so they can never be mistaken for a TC_ACT_* value
 * (-1..8).  The tc programs return TC_ACT_OK or TC_ACT_SHOT; the reason goes
 * to the counters and to deny events.  Codes are dense in each half:
 * latch_counter_slot() depends on it.
 */
#define LATCH_REASONS(X)                                                                                           \
	X(PASS_FLOW, 1, "pass_flow", "packet of a flow already allowed")                                           \
	X(PASS_HOST_SERVICE, 2, "pass_host_service", "to a configured host-address port")                          \
	X(PASS_DNS, 3, "pass_dns", "to the resolver, within the bucket")                                           \
	X(PASS_POLICY, 4, "pass_policy", "permanent exact or prefix entry")                                        \
	X(PASS_TIMED, 5, "pass_timed", "timed entry before its deadline")                                          \
	X(PASS_ARP, 6, "pass_arp", "ARP between guest and host")                                                   \
	X(PASS_ND, 7, "pass_nd", "IPv6 neighbour discovery with the host")                                         \
	X(PASS_RETURN, 8, "pass_return", "into the guest: reply on a guest flow")                                  \
	X(PASS_LEARNED, 9, "pass_learned", "address the latch resolver answered, within its TTL")                  \
	X(PASS_OPEN, 10, "pass_open", "the sandbox runs the `open` profile: uncontained")                          \
	X(DROP_MALFORMED, -200, "drop_malformed", "truncated or inconsistent headers")                             \
	X(DROP_VLAN, -201, "drop_vlan", "802.1Q/802.1ad tag, in-band or offloaded")                                \
	X(DROP_ETHERTYPE, -202, "drop_ethertype", "not IPv4, IPv6 or ARP")                                         \
	X(DROP_SPOOF_MAC, -203, "drop_spoof_mac", "source MAC is not the assigned one")                            \
	X(DROP_SPOOF_IP, -204, "drop_spoof_ip", "source IP is not the assigned one")                               \
	X(DROP_ARP, -205, "drop_arp", "ARP not between guest and host")                                            \
	X(DROP_ND, -206, "drop_nd", "ICMPv6 ND/MLD not towards the host")                                          \
	X(DROP_FRAGMENT, -207, "drop_fragment", "IPv4 fragment or IPv6 fragment header")                           \
	X(DROP_IP_OPTIONS, -208, "drop_ip_options", "IPv4 options (source routing etc.)")                          \
	X(DROP_EXT_HDR, -209, "drop_ext_hdr", "IPv6 routing header or too deep a chain")                           \
	X(DROP_PROTO, -210, "drop_proto", "not TCP, UDP or ICMP echo (tunnels too)")                               \
	X(DROP_HOST_PORT, -211, "drop_host_port", "host address, port not a host service")                         \
	X(DROP_DNS_NOT_RESOLVER, -212, "drop_dns_not_resolver", "port 53 to anything but the resolver")            \
	X(DROP_DNS_RATE, -213, "drop_dns_rate", "DNS bucket empty")                                                \
	X(DROP_POLICY, -214, "drop_policy", "no entry allows the destination")                                     \
	X(DROP_NO_FLOW, -215, "drop_no_flow", "into the guest, not a reply")                                       \
	X(DROP_NO_CONFIG, -216, "drop_no_config", "config map missing or unset")                                   \
	X(DROP_HOST_ADDR, -217, "drop_host_addr",                                                                  \
	  "another address of the host, broadcast or multicast: the host would not forward it")                    \
	X(DROP_CSUM, -218, "drop_csum", "checksum offload request whose start or offset is not the L4 checksum's") \
	X(DROP_SNI_OTHER, -219, "drop_sni_other", "TLS server name not answered for that address")                 \
	X(DROP_SNI_NONE, -220, "drop_sni_none", "ClientHello without a server name, name-checked")                 \
	X(DROP_SNI_ECH, -221, "drop_sni_ech", "ClientHello with encrypted_client_hello, name-checked")             \
	X(DROP_SNI_UNREAD, -222, "drop_sni_unread", "first data, name-checked: no ClientHello read")

enum latch_reason {
#define LATCH_REASON_ENUM(id, code, name, text) LATCH_##id = (code),
	LATCH_REASONS(LATCH_REASON_ENUM)
#undef LATCH_REASON_ENUM
		LATCH_PASS_LAST = LATCH_PASS_OPEN,
	LATCH_DROP_LAST = LATCH_DROP_SNI_UNREAD,
};

#define LATCH_PASS_COUNT LATCH_PASS_LAST
#define LATCH_DROP_COUNT (LATCH_DROP_MALFORMED - LATCH_DROP_LAST + 1)
#define LATCH_REASON_SLOTS (1 + LATCH_PASS_COUNT + LATCH_DROP_COUNT)
#define LATCH_REASON_ONE(id, code, name, text) +1
_Static_assert(0 LATCH_REASONS(LATCH_REASON_ONE) == LATCH_PASS_COUNT + LATCH_DROP_COUNT,
	       "reason codes must be dense: 1..PASS_LAST and -200..DROP_LAST");
#undef LATCH_REASON_ONE

/* Direction of a packet, seen from the guest. */
enum latch_dir {
	LATCH_DIR_FROM_GUEST = 0, /* tc ingress of the host end */
	LATCH_DIR_TO_GUEST = 1, /* tc egress of the host end */
	LATCH_DIR_COUNT = 2,
};

/* Index into the per-CPU counter array for (reason, direction). */
static inline int latch_counter_slot(int reason, int dir)
{
	int r;

	if (reason > 0 && reason <= LATCH_PASS_LAST)
		r = reason;
	else if (reason <= LATCH_DROP_MALFORMED && reason >= LATCH_DROP_LAST)
		r = LATCH_PASS_COUNT + 1 + (LATCH_DROP_MALFORMED - reason);
	else
		r = 0; /* unknown: its own slot, never expected */
	return r * LATCH_DIR_COUNT + dir;
}

/* Extra counters that are not packet verdicts. */
enum latch_stat {
	LATCH_STAT_EVENTS_SENT = 0,
	LATCH_STAT_EVENTS_SUPPRESSED = 1, /* over the event rate limit */
	LATCH_STAT_EVENTS_LOST = 2, /* ring buffer reservation failed */
	LATCH_STAT_COUNT = 3,
};
#define LATCH_COUNTER_SLOTS (LATCH_REASON_SLOTS * LATCH_DIR_COUNT + LATCH_STAT_COUNT)
#define LATCH_STAT_SLOT(s) (LATCH_REASON_SLOTS * LATCH_DIR_COUNT + (s))

struct latch_counter {
	__u64 packets;
	__u64 bytes;
};
_Static_assert(sizeof(struct latch_counter) == 16, "latch_counter layout");

/*
 * Per-sandbox configuration: the one element of the "settings" array.  Written by
 * the loader before the programs are attached; flags & LATCH_CFG_READY must be
 * set or every packet is dropped with LATCH_DROP_NO_CONFIG.
 */
#define LATCH_CFG_READY (1u << 0)
#define LATCH_CFG_HAVE_IP4 (1u << 1)
#define LATCH_CFG_HAVE_IP6 (1u << 2)
#define LATCH_CFG_HAVE_RESOLVER4 (1u << 3)
#define LATCH_CFG_HAVE_RESOLVER6 (1u << 4)
#define LATCH_CFG_HAVE_PREFIX4 (1u << 5) /* sticky: prefix4 may hold entries */
#define LATCH_CFG_HAVE_PREFIX6 (1u << 6)
#define LATCH_CFG_HAVE_TIMED4 (1u << 7)
#define LATCH_CFG_HAVE_TIMED6 (1u << 8)
/* The `open` profile: policy passes every destination (checks 1-5 still hold). */
#define LATCH_CFG_OPEN (1u << 9)
/*
 * A room slot that is latchd's own cgroup (latch_cg.bpf.c only): what its
 * listeners send from one of host_ports is an answer and passes; everything
 * else it sends, DNS to its upstreams included, goes by the policy alone.
 */
#define LATCH_CFG_LATCHD (1u << 10)
/*
 * Bits 16 and up are the loader's bookkeeping, kept in the same map so that
 * they live and die with the pins.  The programs ignore them.
 */
#define LATCH_CFG_USER_MASK 0xffff0000u
#define LATCH_CFG_OWN_QDISC (1u << 16) /* latch created the clsact qdisc and may remove it */
#define LATCH_CFG_IDLE_DIRTY (1u << 17) /* the idle policy generation may hold entries */
#define LATCH_CFG_TCX (1u << 18) /* attached as TCX links (pinned), not clsact filters */
#define LATCH_CFG_NO_CSUM (1u << 19) /* the kernel can't read csum_start: the program without that check */

struct latch_config {
	__u32 abi_version;
	__u32 flags;
	/*
	 * The policy generation that lookups use (0 or 1).  A whole new policy
	 * is written under the other generation and made live by flipping this
	 * one field.
	 */
	__u32 policy_gen;
	/*
	 * Bumped whenever something is removed from the policy or a deadline
	 * moves earlier.  Flows carry the version they were allowed under; a
	 * flow from an older version is checked against the policy again before
	 * its packet passes.
	 */
	__u32 policy_version;
	__u32 ifindex; /* the link the programs were attached to */
	char ifname[LATCH_IFNAMSIZ];
	__u8 guest_mac[6];
	__u16 n_host_ports;
	__be32 guest_ip4;
	__be32 host_ip4;
	__be32 resolver_ip4;
	__u8 guest_ip6[16];
	__u8 host_ip6[16];
	__u8 resolver_ip6[16];
	__be16 host_ports[LATCH_HOST_PORTS_MAX];
	__u32 dns_rate; /* DNS packets per second */
	__u32 dns_burst; /* bucket depth, packets */
	__u32 event_rate; /* deny events per second */
	__u32 event_burst; /* event bucket depth */
};
/* What the established-flow fast path reads (flags, version, MAC, IPv4) sits in the first 64 bytes. */
_Static_assert(sizeof(struct latch_config) == 136, "latch_config layout");
_Static_assert(__builtin_offsetof(struct latch_config, policy_version) == 12, "latch_config layout");
_Static_assert(__builtin_offsetof(struct latch_config, guest_mac) == 36, "latch_config layout");
_Static_assert(__builtin_offsetof(struct latch_config, guest_ip4) == 44, "latch_config layout");
_Static_assert(__builtin_offsetof(struct latch_config, guest_ip6) == 56, "latch_config layout");

/* Protocol values in rules: ANY matches TCP, UDP and ICMP echo. */
#define LATCH_PROTO_ANY 0
#define LATCH_PROTO_ICMP 1 /* echo only; ICMPv6 echo for v6 entries */
#define LATCH_PROTO_TCP 6
#define LATCH_PROTO_UDP 17

/*
 * One port rule.  An address or prefix carries up to LATCH_RULES_MAX of
 * them.  port_lo..port_hi is inclusive (host byte order); 0..65535 is any
 * port.  ICMP echo matches a rule whose proto is ICMP, or ANY with the full
 * port range.  expires_ns is on the boot clock (bpf_ktime_get_boot_ns,
 * CLOCK_BOOTTIME); 0 means no deadline.
 */
struct latch_rule {
	__u64 expires_ns;
	__u16 port_lo;
	__u16 port_hi;
	__u8 proto;
	__u8 origin; /* enum latch_origin: who asked for it, for `show` */
	__u16 flags; /* LATCH_RULE_*: user-space bookkeeping, ignored by the programs */
};
_Static_assert(sizeof(struct latch_rule) == 16, "latch_rule layout");

/* Copied from a covering prefix so the longest match alone decides. */
#define LATCH_RULE_INHERITED (1u << 0)

/*
 * Who asked for a rule.  The programs look at it for one thing: a LEARNED or
 * HOSTNAME rule (an address a name resolved to) bounds only new flows by its
 * deadline, the record's TTL; a flow it admitted keeps working after the TTL, as long as
 * the rule is still in the map when the flow is checked again.  Every other
 * deadline (a grant) cuts established flows too.
 */
enum latch_origin {
	LATCH_ORIGIN_EGRESS = 0, /* latch egress ... allow */
	LATCH_ORIGIN_GRANT = 1,
	LATCH_ORIGIN_LEARNED = 2,
	LATCH_ORIGIN_PROFILE = 3,
	LATCH_ORIGIN_HOSTNAME = 4, /* a profile's host name, resolved by the host; refreshed at its TTL */
};
/* Learned and host-name rules carry a DNS TTL, which bounds new flows only. */
#define latch_origin_resolved(o) ((o) == LATCH_ORIGIN_LEARNED || (o) == LATCH_ORIGIN_HOSTNAME)

struct latch_rules {
	__u32 n;
	__u32 pad;
	struct latch_rule rule[LATCH_RULES_MAX];
};
_Static_assert(sizeof(struct latch_rules) == 8 + 16 * LATCH_RULES_MAX, "latch_rules layout");

/* exact4: HASH, one address of one policy generation. */
struct latch_exact4_key {
	__u32 gen;
	__be32 addr;
};
_Static_assert(sizeof(struct latch_exact4_key) == 8, "latch_exact4_key layout");

struct latch_exact6_key {
	__u32 gen;
	__u8 addr[16];
};
_Static_assert(sizeof(struct latch_exact6_key) == 20, "latch_exact6_key layout");

/*
 * prefix4/prefix6: LPM_TRIE.  prefixlen counts the 32 generation bits plus
 * the address prefix, so a lookup of (gen, addr) with prefixlen 32+32 finds
 * the longest prefix of that generation only.
 */
struct latch_prefix4_key {
	__u32 prefixlen;
	__u32 gen;
	__be32 addr;
};
_Static_assert(sizeof(struct latch_prefix4_key) == 12, "latch_prefix4_key layout");

struct latch_prefix6_key {
	__u32 prefixlen;
	__u32 gen;
	__u8 addr[16];
};
_Static_assert(sizeof(struct latch_prefix6_key) == 24, "latch_prefix6_key layout");

/* timed4/timed6: LPM_TRIE of timed entries (grants, learned); no generation. */
struct latch_timed4_key {
	__u32 prefixlen;
	__be32 addr;
};
_Static_assert(sizeof(struct latch_timed4_key) == 8, "latch_timed4_key layout");

struct latch_timed6_key {
	__u32 prefixlen;
	__u8 addr[16];
};
_Static_assert(sizeof(struct latch_timed6_key) == 20, "latch_timed6_key layout");

/*
 * flow4/flow6: LRU_HASH of flows the guest opened, keyed from the guest's
 * side.  The guest address is not in the key: anti-spoofing guarantees it.
 * For ICMP echo, local_port is the echo identifier and remote_port is 0.
 */
struct latch_flow4_key {
	__be32 remote_addr;
	__be16 remote_port;
	__be16 local_port;
	__u8 proto;
	__u8 pad[3];
};
_Static_assert(sizeof(struct latch_flow4_key) == 12, "latch_flow4_key layout");

struct latch_flow6_key {
	__u8 remote_addr[16];
	__be16 remote_port;
	__be16 local_port;
	__u8 proto;
	__u8 pad[3];
};
_Static_assert(sizeof(struct latch_flow6_key) == 24, "latch_flow6_key layout");

struct latch_flow {
	__u64 expires_ns; /* deadline of the entry that allowed it; 0 none */
	__u32 policy_version; /* config.policy_version when allowed */
	/*
	 * The pass reason that allowed it; for a flow LATCH_FLOW_SNI_REFUSED,
	 * the drop reason every later packet gets.  (Was an __s32: a pinned
	 * entry of before reads the same, its upper half being 0.)
	 */
	__s16 reason;
	__u8 sni; /* enum latch_flow_sni */
	__u8 pad;
};
_Static_assert(sizeof(struct latch_flow) == 16, "latch_flow layout");

/*
 * Names all the way down: a TCP flow that a resolved name's entry passed,
 * to an address and port in the names map, shows its ClientHello before
 * anything else of it passes the fast paths.
 */
enum latch_flow_sni {
	LATCH_FLOW_SNI_NONE = 0, /* not name-checked, or checked and passed */
	LATCH_FLOW_SNI_WAIT = 1, /* name-checked: its first data must name an answered name */
	LATCH_FLOW_SNI_REFUSED = 2, /* refused: every later packet drops under flow.reason */
	LATCH_FLOW_SNI_PASSED = 3, /* checked and passed */
	/* the same two, on a host of more CPUs than hot_forget() clears: never in flow_hot */
	LATCH_FLOW_SNI_WAIT_NOHOT = 4,
	LATCH_FLOW_SNI_NOHOT = 5,
};

/* The one port whose flows are name-checked (docs/INVARIANTS.md says why only it). */
#define LATCH_SNI_PORT 443

/*
 * names: HASH, the names the resolver answered at each address and port
 * (resolver/, latchd/learned.c).  name_hash is latch_tls_hash() of the
 * name (bpf/latch_tls.h); the key with name_hash 0 says the address and
 * port are name-checked at all (today every key is at LATCH_SNI_PORT).  The
 * value is the answer's deadline on the boot clock.
 */
#ifndef LATCH_NAMES_MAX
#define LATCH_NAMES_MAX 16384
#endif
struct latch_name_key {
	__u8 addr[16]; /* v4 in the first 4 bytes, the rest 0 */
	__u16 port; /* host byte order */
	__u8 family; /* 4 or 6 */
	__u8 pad[5];
	__u64 name_hash; /* 0: the address and port are name-checked */
};
_Static_assert(sizeof(struct latch_name_key) == 32, "latch_name_key layout");

struct latch_name {
	__u64 expires_ns; /* boot clock */
};
_Static_assert(sizeof(struct latch_name) == 8, "latch_name layout");

/*
 * flow_hot: per-CPU, the last flow that passed from the guest on this CPU.
 * A packet of the same flow under the same policy version passes on one
 * compare instead of a hash lookup.  The flow table entry is still looked
 * up every LATCH_FLOW_HOT_USES packets, so the LRU keeps the flow (replies
 * depend on it, and refresh it themselves).  Nothing else rests on the
 * count: the version and the deadline are checked on every packet.  At 64
 * that lookup, with the parse around it, was about 3 ns a packet of the
 * fast path on average (test-run, 2026-12-02); at 1,024 it is a few tenths.
 */
#define LATCH_FLOW_HOT_USES 1024

struct latch_flow_hot {
	__u32 key[6]; /* latch_flow4_key or latch_flow6_key, zero-padded */
	__u32 family; /* 4 or 6; 0 when empty */
	__u32 policy_version; /* as in struct latch_flow */
	__u64 expires_ns;
	/*
	 * IPv4 only, for the fast path: the flow as its packets carry it, the
	 * 8 bytes at frame offset 30 (destination address, source port,
	 * destination port), and the protocol.  Both 0 for IPv6: no packet
	 * matches them.
	 */
	__u64 wire4;
	__u32 uses; /* packets since the flow table was last consulted */
	__u8 proto4;
	__u8 pad[3];
};
_Static_assert(sizeof(struct latch_flow_hot) == 56, "latch_flow_hot layout");
_Static_assert(__builtin_offsetof(struct latch_flow_hot, wire4) == 40, "latch_flow_hot layout");

/* A token bucket (GCRA): one element of dns_bucket and event_bucket. */
struct latch_bucket {
	struct bpf_spin_lock lock;
	__u32 suppressed; /* event bucket: refusals since the last event sent */
	__u64 tat_ns; /* theoretical arrival time of the next packet */
};

/* Deny event, sent through the ring buffer "events". */
struct latch_event {
	__u64 time_ns; /* boot clock */
	__s32 reason;
	__u8 dir;
	__u8 family; /* 4 or 6; 0 for non-IP frames */
	__u8 proto;
	__u8 pad;
	__u32 suppressed; /* events dropped by the rate limit since the last one */
	__u16 eth_proto; /* host byte order */
	__be16 src_port;
	__be16 dst_port;
	__u16 pad2;
	__u8 src_addr[16]; /* v4 in the first 4 bytes */
	__u8 dst_addr[16];
	__u8 src_mac[6];
	__u8 pad3[2];
	__u64 name_hash; /* DROP_SNI_*: latch_tls_hash() of the name the guest sent, 0 none */
};
_Static_assert(sizeof(struct latch_event) == 80, "latch_event layout");
_Static_assert(__builtin_offsetof(struct latch_event, src_addr) == 28, "latch_event layout");

/* ====================================================================
 * Rooms: the cgroup programs of bpf/latch_cg.bpf.c (loader/cgroup.c).
 * Kept apart from the tc ABI above so that both can change without
 * stepping on each other.  A room reuses the tc layouts: struct
 * latch_config (ifname holds the room's name), the policy keys and
 * struct latch_rules, and the counter slots of latch_counter_slot().
 * ==================================================================== */

/* Rooms at once (slots of room state), and the room policy maps (both generations). */
#ifndef LATCH_ROOM_MAX
#define LATCH_ROOM_MAX 256
#endif
#define LATCH_ROOM_SLOTS_PREMADE 2 /* slots made when the programs are loaded */
#ifndef LATCH_ROOM_POLICY_MAX
#define LATCH_ROOM_POLICY_MAX 4096
#endif
#ifndef LATCH_ROOM_TIMED_MAX
#define LATCH_ROOM_TIMED_MAX 1024
#endif

/*
 * A room's counters use the tc slots with the direction as the kind of hook:
 * the socket-address hooks (connect4/6, sendmsg4/6, connect_unix,
 * sendmsg_unix) count one verdict per call, cgroup_skb/egress one per packet.
 */
#define LATCH_ROOM_SLOT_PACKET LATCH_DIR_FROM_GUEST
#define LATCH_ROOM_SLOT_SOCKADDR LATCH_DIR_TO_GUEST

/*
 * Room services.  A room's resolver and broker live on an address of its own
 * in 127.76.0.0/16, 127.76.A.B.  The room's egress program stamps every
 * packet it sends to its own host or resolver address with the mark
 * LATCH_ROOM_MARK_BASE | (A << 8 | B); latch_room_gate, attached where the
 * services listen (latchd's cgroup), drops packets to 127.76.0.0/16 that do
 * not carry the mark of their destination.  Unprivileged processes cannot
 * set a mark (SO_MARK needs CAP_NET_ADMIN) and a room cannot stamp another
 * room's: so a packet on 127.76.A.B came from room A.B.  docs/rooms.md.
 */
#define LATCH_ROOM_SERVICE_NET 0x7f4c0000u /* 127.76.0.0, host byte order */
#define LATCH_ROOM_SERVICE_MASK 0xffff0000u
#define LATCH_ROOM_MARK_BASE 0x1a7c0000u
#define LATCH_ROOM_MARK_MASK 0xffff0000u
#define latch_room_mark_of(addr_host_order) (LATCH_ROOM_MARK_BASE | ((addr_host_order)&0xffffu))

/* room_meta: one element, written when the programs are loaded and pinned. */
struct latch_room_meta {
	__u32 abi_version;
	__u32 btf_obj_id; /* the object's BTF, for typed per-room maps */
	__u32 type_config; /* BTF type ids in that BTF, 0 when not found */
	__u32 type_exact4_key;
	__u32 type_exact6_key;
	__u32 type_prefix4_key;
	__u32 type_prefix6_key;
	__u32 type_timed4_key;
	__u32 type_timed6_key;
	__u32 type_rules;
	__u32 type_counter;
	__u32 type_u32;
};
_Static_assert(sizeof(struct latch_room_meta) == 48, "latch_room_meta layout");

/*
 * room_owners: HASH slot -> the room holding it.  User space's bookkeeping
 * (a slot is claimed by inserting with BPF_NOEXIST); no program reads it.
 */
struct latch_room_owner {
	__u64 cgroup_id;
	char name[32];
};
_Static_assert(sizeof(struct latch_room_owner) == 40, "latch_room_owner layout");

/* room_state: HASH by cgroup id.  The room's DNS bucket, as in the tc's dns_bucket. */
struct latch_room_state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 dns_tat_ns; /* theoretical arrival time of the next DNS packet */
};
_Static_assert(sizeof(struct latch_room_state) == 16, "latch_room_state layout");

/*
 * sock_verdicts: SK_STORAGE on each socket of a room, the last destination
 * that passed.  A packet to the same destination under the same policy
 * version, before the deadline, passes on one compare; DNS is never cached.
 */
struct latch_sock_verdict {
	__u32 addr[4]; /* v4 in addr[0] */
	__u64 expires_ns; /* 0: none */
	__u32 policy_version;
	__u16 port; /* host byte order */
	__u8 proto; /* LATCH_PROTO_* */
	__u8 family; /* 4 or 6; 0 when empty */
};
_Static_assert(sizeof(struct latch_sock_verdict) == 32, "latch_sock_verdict layout");

/* room_gate_counters: PERCPU_ARRAY of latch_room_gate's verdicts. */
enum latch_room_gate_slot {
	LATCH_ROOM_GATE_PASS = 0, /* to a room service, with its room's mark */
	LATCH_ROOM_GATE_DROP = 1, /* to a room service, without it */
	LATCH_ROOM_GATE_OTHER = 2, /* not to a room service: not the gate's business */
	LATCH_ROOM_GATE_SLOTS = 3,
};

#endif /* LATCH_ABI_H */
