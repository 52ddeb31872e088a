// SPDX-License-Identifier: GPL-2.0-only
/*
 * latch_tc.bpf.c - the egress latch on a sandbox link.
 *
 * Two tc programs sit on the host end of a sandbox's link (a VM's tap, a
 * container's veth).  latch_from_guest runs on clsact ingress and sees every
 * packet the guest sends; latch_to_guest runs on clsact egress and sees every
 * packet the guest would receive.  (Or on TCX ingress and egress, on kernels
 * that have TCX: the same programs, the same verdicts.)  Everything is dropped unless a check below
 * says otherwise, and every verdict is counted under its reason.
 *
 * One loaded copy of this object serves one sandbox: its maps are pinned
 * under /sys/fs/bpf/latch/NAME/ and the config map holds that sandbox's
 * addresses, so no lookup needs a sandbox key.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "latch_abi.h"
#include "latch_parse.h"
#include "latch_rules.h"
#include "latch_policy.h"
#include "latch_guard.h"
#include "latch_tls.h"

char LICENSE[] SEC("license") = "GPL";

/* settings: the sandbox's addresses, ports, rates and policy generation. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct latch_config);
} settings SEC(".maps");

/* exact4/exact6: permanent single-address entries, per policy generation. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LATCH_POLICY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct latch_exact4_key);
	__type(value, struct latch_rules);
} exact4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LATCH_POLICY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct latch_exact6_key);
	__type(value, struct latch_rules);
} exact6 SEC(".maps");

/* prefix4/prefix6: permanent CIDR entries, per policy generation. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, LATCH_POLICY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct latch_prefix4_key);
	__type(value, struct latch_rules);
} prefix4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, LATCH_POLICY_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct latch_prefix6_key);
	__type(value, struct latch_rules);
} prefix6 SEC(".maps");

/* timed4/timed6: entries with a deadline (grants, learned names). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, LATCH_TIMED_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct latch_timed4_key);
	__type(value, struct latch_rules);
} timed4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, LATCH_TIMED_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct latch_timed6_key);
	__type(value, struct latch_rules);
} timed6 SEC(".maps");

/* flow4/flow6: flows the guest opened; replies may come back in. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LATCH_FLOW_MAX);
	__type(key, struct latch_flow4_key);
	__type(value, struct latch_flow);
} flow4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LATCH_FLOW_MAX);
	__type(key, struct latch_flow6_key);
	__type(value, struct latch_flow);
} flow6 SEC(".maps");

/* flow_hot: per-CPU, the last flow that passed from the guest. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct latch_flow_hot);
} flow_hot SEC(".maps");

/* names: the names the resolver answered at each address and port (latch_abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LATCH_NAMES_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct latch_name_key);
	__type(value, struct latch_name);
} names SEC(".maps");

/* tls_scratch: per-CPU, the first data of a name-checked flow, for latch_tls_parse(). */
struct tls_scratch {
	__u8 b[LATCH_TLS_READ];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tls_scratch);
} tls_scratch SEC(".maps");

/* counters: per-CPU packets and bytes by (reason, direction), plus stats. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LATCH_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, struct latch_counter);
} counters SEC(".maps");

/* dns_bucket: the sandbox's DNS token bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct latch_bucket);
} dns_bucket SEC(".maps");

/* event_bucket: rate limit of deny events for this sandbox. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct latch_bucket);
} event_bucket SEC(".maps");

/* events: deny events for latchd and `latch monitor`. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, LATCH_RINGBUF_BYTES);
} events SEC(".maps");

static __always_inline void count(__u32 slot, __u64 bytes)
{
	struct latch_counter *c = bpf_map_lookup_elem(&counters, &slot);

	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

/*
 * GCRA token bucket: allows `burst` packets at once and `rate` per second
 * after that.  A rate of 0 allows nothing.  Returns 1 to allow.
 */
static __always_inline int bucket_take(struct latch_bucket *b, __u32 rate, __u32 burst, __u64 now, __u32 *suppressed)
{
	int ok;

	if (!rate || !burst)
		return 0;
	bpf_spin_lock(&b->lock);
	ok = latch_gcra(&b->tat_ns, rate, burst, now);
	if (ok && suppressed) {
		*suppressed = b->suppressed;
		b->suppressed = 0;
	} else if (!ok) {
		b->suppressed++;
	}
	bpf_spin_unlock(&b->lock);
	return ok;
}

static __always_inline void deny_event(const struct latch_config *cfg, const struct latch_pkt *p, int reason, int dir,
				       __u64 name_hash)
{
	__u32 zero = 0, suppressed = 0;
	struct latch_bucket *b = bpf_map_lookup_elem(&event_bucket, &zero);
	struct latch_event *e;

	if (!b)
		return;
	if (!bucket_take(b, cfg->event_rate, cfg->event_burst, bpf_ktime_get_boot_ns(), &suppressed)) {
		count(LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SUPPRESSED), 0);
		return;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(LATCH_STAT_SLOT(LATCH_STAT_EVENTS_LOST), 0);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->time_ns = bpf_ktime_get_boot_ns();
	e->reason = reason;
	e->dir = dir;
	e->family = p->family;
	e->proto = p->proto;
	e->suppressed = suppressed;
	e->eth_proto = p->eth_proto;
	e->src_port = p->sport;
	e->dst_port = p->dport;
	__builtin_memcpy(e->src_addr, p->saddr, 16);
	__builtin_memcpy(e->dst_addr, p->daddr, 16);
	__builtin_memcpy(e->src_mac, p->smac, 6);
	e->name_hash = name_hash;
	bpf_ringbuf_submit(e, 0);
	count(LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SENT), 0);
}

/* The verdict, counted; a drop also sends an event naming NAME_HASH (a refused server name's, else 0). */
static __always_inline int verdict_named(struct __sk_buff *skb, const struct latch_config *cfg,
					 const struct latch_pkt *p, int reason, int dir, __u64 name_hash)
{
	count(latch_counter_slot(reason, dir), skb->len);
	if (reason > 0)
		return TC_ACT_OK;
	if (cfg)
		deny_event(cfg, p, reason, dir, name_hash);
	return TC_ACT_SHOT;
}

static __always_inline int verdict(struct __sk_buff *skb, const struct latch_config *cfg, const struct latch_pkt *p,
				   int reason, int dir)
{
	return verdict_named(skb, cfg, p, reason, dir, 0);
}

/* The policy walk (latch_policy.h) over this sandbox's own maps. */
static __always_inline int policy_decide(const struct latch_config *cfg, const struct latch_pkt *p, int established,
					 __u64 *now, __u64 *expires)
{
	const struct latch_policy_maps maps = {
		.exact4 = &exact4,
		.exact6 = &exact6,
		.prefix4 = &prefix4,
		.prefix6 = &prefix6,
		.timed4 = &timed4,
		.timed6 = &timed6,
	};

	return latch_policy_decide(&maps, cfg, p->family, p->daddr, p->l4_class, bpf_ntohs(p->dport), established, now,
				   expires);
}

static __always_inline int is_host(const struct latch_config *cfg, const struct latch_pkt *p)
{
	if (p->family == 4)
		return (cfg->flags & LATCH_CFG_HAVE_IP4) && addr4_eq(p->daddr, cfg->host_ip4);
	return (cfg->flags & LATCH_CFG_HAVE_IP6) && addr6_eq(p->daddr, cfg->host_ip6);
}

static __always_inline int is_resolver(const struct latch_config *cfg, const struct latch_pkt *p)
{
	if (p->family == 4)
		return (cfg->flags & LATCH_CFG_HAVE_RESOLVER4) && addr4_eq(p->daddr, cfg->resolver_ip4);
	return (cfg->flags & LATCH_CFG_HAVE_RESOLVER6) && addr6_eq(p->daddr, cfg->resolver_ip6);
}

static __always_inline int host_port_listed(const struct latch_config *cfg, __be16 port)
{
	for (int i = 0; i < LATCH_HOST_PORTS_MAX; i++) {
		if (i >= cfg->n_host_ports)
			break;
		if (cfg->host_ports[i] == port)
			return 1;
	}
	return 0;
}

static __always_inline int is_host_service(const struct latch_config *cfg, const struct latch_pkt *p)
{
	if (p->l4_class != LATCH_PROTO_TCP && p->l4_class != LATCH_PROTO_UDP)
		return 0;
	return host_port_listed(cfg, p->dport);
}

static __always_inline int is_dns(const struct latch_pkt *p)
{
	return (p->l4_class == LATCH_PROTO_TCP || p->l4_class == LATCH_PROTO_UDP) && p->dport == bpf_htons(53);
}

/*
 * Where may the guest send this packet?  The order is the contract in
 * DESIGN.md: host services, then DNS (resolver only, within the bucket), then
 * policy; what the policy passes must also be something the host forwards
 * (host_would_forward), so that no entry, not even `open`, reaches the
 * host's other addresses.  `fresh` is 0 when re-checking an existing flow for a reply, where
 * the DNS bucket must not be charged again; `established` is 1 whenever the
 * flow exists already (a learned rule's TTL no longer applies to it).
 */
static __always_inline int decide_destination(struct __sk_buff *skb, const struct latch_config *cfg,
					      const struct latch_pkt *p, int fresh, int established, __u64 *now,
					      __u64 *expires)
{
	__u32 zero = 0;
	int reason;

	*expires = 0;
	if (is_host(cfg, p)) {
		if (is_host_service(cfg, p))
			return LATCH_PASS_HOST_SERVICE;
		if (!(is_dns(p) && is_resolver(cfg, p)))
			return LATCH_DROP_HOST_PORT;
	}
	if (is_dns(p)) {
		struct latch_bucket *b;

		if (!is_resolver(cfg, p))
			return LATCH_DROP_DNS_NOT_RESOLVER;
		if (!fresh)
			return LATCH_PASS_DNS;
		/* TCP DNS is charged per connection (its SYN), UDP per datagram. */
		if (p->l4_class == LATCH_PROTO_TCP && !p->tcp_syn)
			return LATCH_PASS_DNS;
		b = bpf_map_lookup_elem(&dns_bucket, &zero);
		if (!b)
			return LATCH_DROP_NO_CONFIG;
		if (!*now)
			*now = bpf_ktime_get_boot_ns();
		return bucket_take(b, cfg->dns_rate, cfg->dns_burst, *now, NULL) ? LATCH_PASS_DNS : LATCH_DROP_DNS_RATE;
	}
	reason = policy_decide(cfg, p, established, now, expires);
	if (reason > 0 && !host_would_forward(skb, p))
		return LATCH_DROP_HOST_ADDR;
	return reason;
}

/* The flow key of a packet, from the guest's side. */
static __always_inline void flow_key4(const struct latch_pkt *p, int from_guest, struct latch_flow4_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->proto = p->proto;
	if (from_guest) {
		__builtin_memcpy(&k->remote_addr, p->daddr, 4);
		k->remote_port = p->dport;
		k->local_port = p->sport;
	} else {
		__builtin_memcpy(&k->remote_addr, p->saddr, 4);
		k->remote_port = p->sport;
		k->local_port = p->dport;
	}
}

static __always_inline void flow_key6(const struct latch_pkt *p, int from_guest, struct latch_flow6_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->proto = p->proto;
	if (from_guest) {
		__builtin_memcpy(k->remote_addr, p->daddr, 16);
		k->remote_port = p->dport;
		k->local_port = p->sport;
	} else {
		__builtin_memcpy(k->remote_addr, p->saddr, 16);
		k->remote_port = p->sport;
		k->local_port = p->dport;
	}
}

static __always_inline void *flow_lookup(const struct latch_pkt *p, int from_guest, void *key)
{
	if (p->family == 4) {
		flow_key4(p, from_guest, key);
		return bpf_map_lookup_elem(&flow4, key);
	}
	flow_key6(p, from_guest, key);
	return bpf_map_lookup_elem(&flow6, key);
}

static __always_inline void flow_store(const struct latch_pkt *p, void *key, __u32 version, int reason, __u64 expires,
				       __u8 sni)
{
	struct latch_flow f = { .expires_ns = expires, .policy_version = version, .reason = reason, .sni = sni };

	if (p->family == 4)
		bpf_map_update_elem(&flow4, key, &f, BPF_ANY);
	else
		bpf_map_update_elem(&flow6, key, &f, BPF_ANY);
}

/* ---- names all the way down: the ClientHello of a name-checked flow ---- */

/* Is NAME_HASH (0: any name) recorded for the packet's destination and port, and, unless 0, before its deadline? */
static __always_inline int name_recorded(const struct latch_pkt *p, __u64 name_hash, __u64 now)
{
	struct latch_name_key k;
	struct latch_name *v;

	__builtin_memset(&k, 0, sizeof(k));
	if (p->family == 4)
		__builtin_memcpy(k.addr, p->daddr, 4);
	else
		__builtin_memcpy(k.addr, p->daddr, 16);
	k.family = p->family;
	k.port = bpf_ntohs(p->dport);
	k.name_hash = name_hash;
	v = bpf_map_lookup_elem(&names, &k);
	if (!v)
		return 0;
	/* the "checked" key counts however old: a name gone stale must not turn the check off */
	return !name_hash || now < v->expires_ns;
}

/*
 * A new TCP flow that a resolved name's entry passed, to a port where the
 * resolver recorded names for that address: its first data is judged
 * before anything else of it passes.  Flows passed by an address (exact,
 * prefix, grant) are never name-checked.
 */
static __always_inline __u8 sni_wanted(const struct latch_pkt *p, int reason)
{
	if (reason != LATCH_PASS_LEARNED || p->proto != IPPROTO_TCP || p->dport != bpf_htons(LATCH_SNI_PORT))
		return LATCH_FLOW_SNI_NONE;
	return name_recorded(p, 0, 0) ? LATCH_FLOW_SNI_WAIT : LATCH_FLOW_SNI_NONE;
}

/*
 * Judge the TCP payload of a name-checked flow's packet.  0: no payload (a
 * bare ACK: the flow still waits); 1: a ClientHello naming a name the
 * resolver answered for this address and port, before its deadline; else
 * the drop reason, with *name_hash the name the guest sent (0 none).  The
 * whole ClientHello must sit in this one segment up to its last extension
 * header; one split before that is refused (docs/INVARIANTS.md).
 *
 * A global function, as latch_rules_allow is: the verifier walks the
 * reader once, on its own, instead of at each call site.
 */
__noinline int latch_sni_judge(struct __sk_buff *skb, const struct latch_pkt *p, __u64 *now, __u64 *name_hash)
{
	struct latch_tls_hello hello;
	struct tls_scratch *sc;
	__u32 zero = 0, end, off, n;
	__be16 ip_len;
	__u8 doff;
	int v;

	if (!skb || !p || !now || !name_hash)
		return LATCH_DROP_SNI_UNREAD;
	/* where the IP packet ends: what follows it in the frame is padding */
	if (bpf_skb_load_bytes(skb, ETH_HLEN + (p->family == 4 ? 2 : 4), &ip_len, 2) ||
	    bpf_skb_load_bytes(skb, p->l4_off + 12, &doff, 1))
		return LATCH_DROP_MALFORMED;
	end = ETH_HLEN + bpf_ntohs(ip_len) + (p->family == 4 ? 0 : 40);
	if (end > skb->len)
		end = skb->len;
	off = p->l4_off + (doff >> 4) * 4;
	if (off >= end)
		return 0;
	n = end - off;
	if (n > LATCH_TLS_READ)
		n = LATCH_TLS_READ;
	/* 1..LATCH_TLS_READ as the verifier can see it (n is that already) */
	n = ((n - 1) & LATCH_TLS_MASK) + 1;
	sc = bpf_map_lookup_elem(&tls_scratch, &zero);
	if (!sc || bpf_skb_load_bytes(skb, off, sc->b, n))
		return LATCH_DROP_SNI_UNREAD;
	v = latch_tls_parse(sc->b, n, &hello);
	if (v == LATCH_TLS_NO_SNI)
		return LATCH_DROP_SNI_NONE;
	if (v == LATCH_TLS_ECH)
		return LATCH_DROP_SNI_ECH;
	if (v != LATCH_TLS_NAME)
		return LATCH_DROP_SNI_UNREAD;
	*name_hash = hello.name_hash;
	if (!*now)
		*now = bpf_ktime_get_boot_ns();
	return name_recorded(p, hello.name_hash, *now) ? 1 : LATCH_DROP_SNI_OTHER;
}

/*
 * A packet of flow F, which waits for its ClientHello: judge it, and
 * remember the verdict in F.  A pass counts under PASS (the flow's, or the
 * new flow's own reason for its SYN).
 */
static __always_inline int sni_verdict(struct __sk_buff *skb, const struct latch_config *cfg, const struct latch_pkt *p,
				       struct latch_flow *f, __u64 *now, int pass)
{
	__u64 name_hash = 0;
	int r = latch_sni_judge(skb, p, now, &name_hash);

	if (r >= 0) {
		if (r > 0)
			f->sni = f->sni == LATCH_FLOW_SNI_WAIT ? LATCH_FLOW_SNI_PASSED : LATCH_FLOW_SNI_NOHOT;
		return verdict(skb, cfg, p, pass, LATCH_DIR_FROM_GUEST);
	}
	f->reason = r;
	f->sni = LATCH_FLOW_SNI_REFUSED;
	return verdict_named(skb, cfg, p, r, LATCH_DIR_FROM_GUEST, name_hash);
}

/* Is a recorded flow still good without asking the policy again? */
static __always_inline int flow_current(const struct latch_flow *f, __u32 version, __u64 *now)
{
	if (f->policy_version != version)
		return 0;
	if (!f->expires_ns)
		return 1;
	if (!*now)
		*now = bpf_ktime_get_boot_ns();
	return *now < f->expires_ns;
}

union flow_key {
	struct latch_flow4_key k4;
	struct latch_flow6_key k6;
	__u32 w[6];
};

static __always_inline int hot_matches(const struct latch_flow_hot *h, const union flow_key *k, __u32 family)
{
	return h->family == family && h->key[0] == k->w[0] && h->key[1] == k->w[1] && h->key[2] == k->w[2] &&
	       h->key[3] == k->w[3] && h->key[4] == k->w[4] && h->key[5] == k->w[5];
}

static __always_inline void hot_store(struct latch_flow_hot *h, const union flow_key *k, const struct latch_pkt *p,
				      __u32 version, __u64 expires)
{
	__builtin_memcpy(h->key, k->w, sizeof(h->key));
	h->family = p->family;
	h->policy_version = version;
	h->expires_ns = expires;
	h->uses = 0;
	h->wire4 = 0;
	h->proto4 = 0;
	if (p->family == 4 && p->l4_off == ETH_HLEN + 20) {
		/* the frame's bytes 30..37: destination address, then source and destination port */
		__builtin_memcpy(&h->wire4, p->daddr, 4);
		__builtin_memcpy((__u8 *)&h->wire4 + 4, &p->sport, 2);
		__builtin_memcpy((__u8 *)&h->wire4 + 6, &p->dport, 2);
		h->proto4 = p->proto;
	}
}

/* CPUs whose flow_hot a new name-checked flow clears; past it, the flow never goes hot. */
#define LATCH_HOT_CPUS_MAX 8192

struct hot_forget_ctx {
	union flow_key key;
	__u32 family;
	__u32 done; /* set at the first CPU past the last */
};

static long hot_forget_cpu(__u32 cpu, void *arg)
{
	struct hot_forget_ctx *c = arg;
	__u32 zero = 0;
	struct latch_flow_hot *h = bpf_map_lookup_percpu_elem(&flow_hot, &zero, cpu);

	if (!h) {
		c->done = 1;
		return 1;
	}
	if (hot_matches(h, &c->key, c->family)) {
		h->family = 0;
		h->wire4 = 0;
		h->proto4 = 0;
	}
	return 0;
}

/*
 * A new name-checked flow: no CPU's flow_hot may still hold its ports (an
 * earlier connection's on them, allowed or checked), or there its
 * ClientHello would pass unread.  Runs before the SYN is passed on, so
 * before any data of the new connection can reach another CPU.  Returns 0
 * when every CPU was looked at, -1 when there were more than
 * LATCH_HOT_CPUS_MAX (the flow must then stay out of flow_hot).
 */
static __always_inline int hot_forget(const union flow_key *k, __u32 family)
{
	struct hot_forget_ctx c = { .key = *k, .family = family };

	bpf_loop(LATCH_HOT_CPUS_MAX, hot_forget_cpu, &c, 0);
	return c.done ? 0 : -1;
}

/*
 * The policy version a packet is judged under, read once at its start.  A
 * packet that began before user space changed a map and bumped the version
 * records its flow under the old version, so the next packet asks again; one
 * that began after sees the changed map.  (Read through a volatile pointer:
 * the compiler must not load it again later.)
 */
static __always_inline __u32 policy_version(const struct latch_config *cfg)
{
	return *(const volatile __u32 *)&cfg->policy_version;
}

static __always_inline const struct latch_config *get_config(void)
{
	__u32 zero = 0;
	const struct latch_config *cfg = bpf_map_lookup_elem(&settings, &zero);

	if (!cfg || !(cfg->flags & LATCH_CFG_READY) || cfg->abi_version != LATCH_ABI_VERSION)
		return NULL;
	return cfg;
}

/*
 * The checks of an IPv4 frame that the fast paths make straight from the
 * packet, as the full path's parse would make them: 20 bytes past the IP
 * header in the linear part, no VLAN tag, IPv4 without options, no fragment,
 * TCP or UDP, and a tot_len that holds the transport header and stays inside
 * the frame.  Returns the protocol, or 0: take the full path.
 */
static __always_inline __u8 plain_ip4(struct __sk_buff *skb, void *data, void *data_end)
{
	const struct iphdr *ip = data + ETH_HLEN;
	__u32 tot;

	if (data + ETH_HLEN + sizeof(*ip) + 20 > data_end || skb->vlan_present ||
	    *(const __be16 *)(data + 12) != bpf_htons(ETH_P_IP))
		return 0;
	if (*(const __u8 *)ip != 0x45 || (ip->frag_off & bpf_htons(0x3fff)) ||
	    (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP))
		return 0;
	tot = bpf_ntohs(ip->tot_len);
	if (tot > skb->len - ETH_HLEN || tot < sizeof(*ip) + (ip->protocol == IPPROTO_TCP ? 20 : 8))
		return 0;
	return ip->protocol;
}

/* Is the IPv4 flow (from the guest's side) recorded and current under version? */
static __always_inline int flow4_current(__u8 proto, __be32 remote_addr, __be16 remote_port, __be16 local_port,
					 __u32 version, __u64 *now)
{
	struct latch_flow4_key k;
	struct latch_flow *f;

	__builtin_memset(&k, 0, sizeof(k));
	k.proto = proto;
	k.remote_addr = remote_addr;
	k.remote_port = remote_port;
	k.local_port = local_port;
	f = bpf_map_lookup_elem(&flow4, &k);
	return f && flow_current(f, version, now);
}

/*
 * A UDP query from the guest (its frame already checked by fast_flow_v4) to
 * the resolver, on a flow recorded under this policy version.  For such a
 * query the full path finds the flow current (nothing to store) and, unless
 * port 53 of the host is a host service (which comes first), charges the
 * bucket; that charge is all that is left to do.  Every query is still
 * charged: the flow spares the parse and the policy, never the bucket.
 * Returns 1: passed; -1: the bucket refused it (charged: the caller must not
 * ask the bucket again); 0: take the full path.
 */
static __always_inline int fast_dns_v4(struct __sk_buff *skb, const struct latch_config *cfg, __u32 version,
				       const struct iphdr *ip)
{
	const __be16 *ports = (const void *)(ip + 1); /* source, destination: inside plain_ip4's bound */
	struct latch_bucket *b;
	__u64 now = 0;
	__u32 zero = 0;

	if (!(cfg->flags & LATCH_CFG_HAVE_RESOLVER4) || ip->daddr != cfg->resolver_ip4 ||
	    (ip->daddr == cfg->host_ip4 && host_port_listed(cfg, ports[1])))
		return 0;
	if (!flow4_current(IPPROTO_UDP, ip->daddr, ports[1], ports[0], version, &now))
		return 0;
	b = bpf_map_lookup_elem(&dns_bucket, &zero);
	if (!b)
		return 0;
	if (!now)
		now = bpf_ktime_get_boot_ns();
	if (!bucket_take(b, cfg->dns_rate, cfg->dns_burst, now, NULL))
		return -1;
	count(latch_counter_slot(LATCH_PASS_DNS, LATCH_DIR_FROM_GUEST), skb->len);
	return 1;
}

/*
 * The established-flow fast path: an IPv4 TCP or UDP packet of this CPU's
 * last flow passes after the checks the full path would make on it, read
 * straight from the packet: no VLAN tag, IPv4 from the guest's MAC and
 * address, no options, no fragment, a length that holds the transport
 * header, a checksum request (if any) at the L4 checksum, and the flow, the
 * policy version and the deadline of flow_hot (the flow compared as the
 * packet carries it: flow_hot.wire4 and proto4).  Anything else -- a miss
 * included -- returns 0 and takes the full path, which decides it alone.
 * DNS never matches flow_hot (it never holds a port-53 flow); a UDP query
 * goes on to fast_dns_v4.  Returns 1: passed; -1: a query the DNS bucket
 * refused; 0: take the full path.
 */
static __always_inline int fast_flow_v4(struct __sk_buff *skb, const struct latch_config *cfg, __u32 version,
					const bool csum_check)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	const struct iphdr *ip = data + ETH_HLEN;
	struct latch_flow_hot *hot;
	__u8 proto = plain_ip4(skb, data, data_end);
	__u32 zero = 0;

	if (!proto)
		return 0;
	/* the source MAC in two loads: 4 bytes at 6 and 2 at 10, as guest_mac is laid out */
	if (*(const __u32 *)(data + 6) != *(const __u32 *)cfg->guest_mac ||
	    *(const __u16 *)(data + 10) != *(const __u16 *)(cfg->guest_mac + 4))
		return 0;
	if (!(cfg->flags & LATCH_CFG_HAVE_IP4) || ip->saddr != cfg->guest_ip4)
		return 0;
	if (csum_check && !csum_request_ok(skb, ETH_HLEN + sizeof(*ip), proto == IPPROTO_TCP ? 16 : 6))
		return 0;
	if (proto == IPPROTO_UDP && *(const __be16 *)(data + ETH_HLEN + sizeof(*ip) + 2) == bpf_htons(53))
		return fast_dns_v4(skb, cfg, version, ip);
	hot = bpf_map_lookup_elem(&flow_hot, &zero);
	if (!hot || hot->wire4 != *(const __u64 *)(data + ETH_HLEN + 16) || hot->proto4 != proto ||
	    hot->policy_version != version || ++hot->uses >= LATCH_FLOW_HOT_USES)
		return 0;
	if (hot->expires_ns && bpf_ktime_get_boot_ns() >= hot->expires_ns)
		return 0;
	count(latch_counter_slot(LATCH_PASS_FLOW, LATCH_DIR_FROM_GUEST), skb->len);
	return 1;
}

static __always_inline int from_guest(struct __sk_buff *skb, const bool csum_check)
{
	const struct latch_config *cfg = get_config();
	struct latch_flow_hot *hot;
	struct latch_pkt p;
	union flow_key key;
	struct latch_flow *f;
	__u64 now = 0, expires = 0;
	__u32 zero = 0, version;
	int reason, fast = 0;

	if (cfg) {
		version = policy_version(cfg);
		fast = fast_flow_v4(skb, cfg, version, csum_check);
		if (fast > 0)
			return TC_ACT_OK;
	}
	__builtin_memset(&p, 0, sizeof(p));
	if (!cfg)
		return verdict(skb, NULL, &p, LATCH_DROP_NO_CONFIG, LATCH_DIR_FROM_GUEST);
	reason = latch_parse(skb, &p, LATCH_DIR_FROM_GUEST);
	if (reason < 0)
		return verdict(skb, cfg, &p, reason, LATCH_DIR_FROM_GUEST);
	if (csum_check) {
		reason = check_csum_offload(skb, &p);
		if (reason)
			return verdict(skb, cfg, &p, reason, LATCH_DIR_FROM_GUEST);
	}
	reason = check_link_from_guest(cfg, &p);
	if (reason)
		return verdict(skb, cfg, &p, reason, LATCH_DIR_FROM_GUEST);
	/* fast_dns_v4's refusal, parsed only now for its event (the bucket was charged once) */
	if (fast < 0)
		return verdict(skb, cfg, &p, LATCH_DROP_DNS_RATE, LATCH_DIR_FROM_GUEST);

	/*
	 * Established flows skip the policy lookups while nothing was removed:
	 * first this CPU's last flow, then the flow table.  DNS is never cached:
	 * every query is charged to the bucket.
	 */
	__builtin_memset(&key, 0, sizeof(key));
	hot = bpf_map_lookup_elem(&flow_hot, &zero);
	if (p.family == 4)
		flow_key4(&p, 1, &key.k4);
	else
		flow_key6(&p, 1, &key.k6);
	if (hot && !is_dns(&p) && hot_matches(hot, &key, p.family) && hot->policy_version == version &&
	    ++hot->uses < LATCH_FLOW_HOT_USES &&
	    (!hot->expires_ns || (now = bpf_ktime_get_boot_ns()) < hot->expires_ns))
		return verdict(skb, cfg, &p, LATCH_PASS_FLOW, LATCH_DIR_FROM_GUEST);

	f = p.family == 4 ? bpf_map_lookup_elem(&flow4, &key.k4) : bpf_map_lookup_elem(&flow6, &key.k6);
	if (f && f->sni != LATCH_FLOW_SNI_NONE) {
		/* a new SYN on a name-checked flow's ports is a new flow, with a ClientHello of its own */
		if (p.tcp_syn)
			f = NULL;
		else if (f->sni == LATCH_FLOW_SNI_REFUSED)
			return verdict(skb, cfg, &p, f->reason, LATCH_DIR_FROM_GUEST);
	}
	/*
	 * A name-checked flow enters flow_hot once it passed its check (its
	 * SYN cleared every CPU's flow_hot of its ports: hot_forget);
	 * one LATCH_FLOW_SNI_NOHOT never does.
	 */
	if (f && !is_dns(&p) && flow_current(f, version, &now)) {
		if (f->sni == LATCH_FLOW_SNI_WAIT || f->sni == LATCH_FLOW_SNI_WAIT_NOHOT)
			return sni_verdict(skb, cfg, &p, f, &now, LATCH_PASS_FLOW);
		if (hot && (f->sni == LATCH_FLOW_SNI_NONE || f->sni == LATCH_FLOW_SNI_PASSED))
			hot_store(hot, &key, &p, version, f->expires_ns);
		return verdict(skb, cfg, &p, LATCH_PASS_FLOW, LATCH_DIR_FROM_GUEST);
	}

	reason = decide_destination(skb, cfg, &p, 1, f != NULL, &now, &expires);
	if (reason > 0 && !(f && flow_current(f, version, &now))) {
		__u8 sni = f ? f->sni : sni_wanted(&p, reason);

		if (sni == LATCH_FLOW_SNI_WAIT && !f && hot_forget(&key, p.family))
			sni = LATCH_FLOW_SNI_WAIT_NOHOT;
		flow_store(&p, &key, version, reason, expires, sni);
		if (sni == LATCH_FLOW_SNI_WAIT || sni == LATCH_FLOW_SNI_WAIT_NOHOT) {
			f = p.family == 4 ? bpf_map_lookup_elem(&flow4, &key.k4) : bpf_map_lookup_elem(&flow6, &key.k6);
			if (!f)
				return verdict(skb, cfg, &p, LATCH_DROP_SNI_UNREAD, LATCH_DIR_FROM_GUEST);
			return sni_verdict(skb, cfg, &p, f, &now, reason);
		}
		if (hot && !is_dns(&p) && (sni == LATCH_FLOW_SNI_NONE || sni == LATCH_FLOW_SNI_PASSED))
			hot_store(hot, &key, &p, version, expires);
	}
	return verdict(skb, cfg, &p, reason, LATCH_DIR_FROM_GUEST);
}

/*
 * The return fast path: an IPv4 TCP or UDP packet to the guest's address on
 * a flow recorded under this policy version passes after the checks the
 * full path would make on it, read straight from the packet (no VLAN tag,
 * IPv4 without options, no fragment, a length that holds the transport
 * header).  The full path would parse it, find the flow current and pass it
 * as a return; anything else (a miss, a flow to check again, ICMP, ARP,
 * IPv6) returns 0 and takes the full path.
 */
static __always_inline int fast_return_v4(struct __sk_buff *skb, const struct latch_config *cfg, __u32 version)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	const struct iphdr *ip = data + ETH_HLEN;
	const __be16 *ports = (const void *)(ip + 1);
	__u8 proto = plain_ip4(skb, data, data_end);
	__u64 now = 0;

	if (!proto || !(cfg->flags & LATCH_CFG_HAVE_IP4) || ip->daddr != cfg->guest_ip4)
		return 0;
	if (!flow4_current(proto, ip->saddr, ports[0], ports[1], version, &now))
		return 0;
	count(latch_counter_slot(LATCH_PASS_RETURN, LATCH_DIR_TO_GUEST), skb->len);
	return 1;
}

/* On tc ingress of the host end: every packet the guest sends. */
SEC("tc")
int latch_from_guest(struct __sk_buff *skb)
{
	return from_guest(skb, true);
}

/* The same for kernels before 6.2, which can't read the checksum-offload fields (see docs/INVARIANTS.md). */
SEC("tc")
int latch_from_guest_nocsum(struct __sk_buff *skb)
{
	return from_guest(skb, false);
}

/* On tc egress of the host end: every packet the guest would receive. */
SEC("tc")
int latch_to_guest(struct __sk_buff *skb)
{
	const struct latch_config *cfg = get_config();
	struct latch_pkt p, out;
	union flow_key key;
	struct latch_flow *f;
	__u64 now = 0, expires = 0;
	__u32 version;
	int reason;

	if (cfg) {
		version = policy_version(cfg);
		if (fast_return_v4(skb, cfg, version))
			return TC_ACT_OK;
	}
	__builtin_memset(&p, 0, sizeof(p));
	if (!cfg)
		return verdict(skb, NULL, &p, LATCH_DROP_NO_CONFIG, LATCH_DIR_TO_GUEST);
	reason = latch_parse(skb, &p, LATCH_DIR_TO_GUEST);
	if (reason < 0)
		return verdict(skb, cfg, &p, reason, LATCH_DIR_TO_GUEST);
	reason = check_link_to_guest(cfg, &p);
	if (reason)
		return verdict(skb, cfg, &p, reason, LATCH_DIR_TO_GUEST);

	f = flow_lookup(&p, 0, &key);
	if (!f)
		return verdict(skb, cfg, &p, LATCH_DROP_NO_FLOW, LATCH_DIR_TO_GUEST);
	if (flow_current(f, version, &now))
		return verdict(skb, cfg, &p, LATCH_PASS_RETURN, LATCH_DIR_TO_GUEST);

	/*
	 * The policy changed or the entry's deadline passed since the flow was
	 * recorded: ask again, as if the guest were sending to the remote end.
	 */
	latch_pkt_reverse(&p, &out);
	reason = decide_destination(skb, cfg, &out, 0, 1, &now, &expires);
	if (reason < 0) {
		if (p.family == 4)
			bpf_map_delete_elem(&flow4, &key);
		else
			bpf_map_delete_elem(&flow6, &key);
		return verdict(skb, cfg, &p, LATCH_DROP_NO_FLOW, LATCH_DIR_TO_GUEST);
	}
	/* a refused flow keeps its refusal (the reason its packets drop under) */
	flow_store(&out, &key, version, f->sni == LATCH_FLOW_SNI_REFUSED ? f->reason : reason, expires, f->sni);
	return verdict(skb, cfg, &p, LATCH_PASS_RETURN, LATCH_DIR_TO_GUEST);
}
