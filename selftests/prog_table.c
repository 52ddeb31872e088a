// SPDX-License-Identifier: GPL-2.0-only
/*
 * prog_table.c - the tc programs over a table of crafted packets.
 *
 * Invariant: a packet leaves the guest only if it is well-formed, carries the
 * guest's own MAC and IP, and goes to the host (ARP/ND, host services, the
 * resolver within its bucket) or to a destination the live policy allows on
 * that protocol and port -- no fragment, tag, option, extension header or
 * tunnel gets around the port check -- and a packet enters the guest only as
 * a reply on a flow the guest opened that the policy still allows, or as
 * ARP/ND from the host.  Every verdict is counted under exactly one reason,
 * and every deny is reported in the events ring buffer, rate-limited.
 *
 * Each row runs once through BPF_PROG_TEST_RUN on a privately loaded
 * skeleton (nothing is pinned), from a fresh state: baseline settings and
 * policy, no flows, full buckets.  A row's setup may then open a flow or
 * change the settings first.  Prints `ok NAME` or `FAIL NAME: ...` per row,
 * then `N passed, M failed`; exits 1 on any failure, 77 (skip) if not root.
 * A row with .bug is a known BPF bug: it prints `xfail` while it fails and
 * FAIL once it passes, so that the fix flips it.  -v shows libbpf debug.
 */
#include <arpa/inet.h>
#include <sched.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/latch_abi.h"
#include "latch_tc.skel.h"
#include "bpf/latch_tls.h"
#include "loader/sandbox.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

#define FROM LATCH_DIR_FROM_GUEST
#define TO LATCH_DIR_TO_GUEST
#define OK TC_ACT_OK
#define SHOT TC_ACT_SHOT

#define GUEST_MAC "02:00:00:00:00:02"
#define HOST_MAC "02:00:00:00:00:01"
#define GUEST4 "192.0.2.2"
#define HOST4 "192.0.2.1"
#define GUEST6 "2001:db8:1::2"
#define HOST6 "2001:db8:1::1"
#define GUEST_LL "fe80::2"
#define HOST_LL "fe80::1"

/*
 * The test namespace's own addresses (on its veth; lo is its loopback):
 * another address of the host's, and a subnet whose broadcast it owns.
 */
#define HOST_OTHER4 "198.51.100.77"
#define HOST_OTHER6 "2001:db8:9::77"
#define HOST_COVERED4 "203.0.113.77" /* inside the baseline's 203.0.113.0/24 entry */
static const char *const test_locals[] = { HOST_OTHER4 "/32", HOST_OTHER6 "/128", HOST_COVERED4 "/32",
					   "198.18.5.1/24" };

#define TCP_SYN 0x02
#define TCP_ACK 0x10

#define GUEST_PORT 40000
#define HOST_SERVICE_PORT 8080
#define DNS_RATE 1
#define DNS_BURST 3

/* A packet, described; build() turns it into an Ethernet frame. */
struct pkt {
	uint16_t ethertype; /* 0: IPv4/IPv6 from the address, ARP if arp_op */
	const char *smac; /* NULL: the guest's (FROM) or the host's (TO) */
	uint16_t vlan_tpid; /* non-zero: one tag with this TPID before the type */
	const char *src, *dst; /* IP addresses; ARP sender and target */
	uint8_t proto;
	uint16_t sport, dport;
	uint8_t tcp_flags;
	uint8_t icmp_type;
	uint16_t icmp_id;
	const char *nd_target;
	uint16_t frag; /* IPv4 frag_off field, host order */
	uint8_t ihl; /* 0: 5 */
	int16_t len_adj; /* added to tot_len / payload_len */
	uint16_t trunc; /* cut the frame to this many bytes */
	uint8_t hop_limit; /* 0: 64 */
	uint8_t n_ext; /* IPv6 extension headers before the transport */
	uint8_t ext[8];
	uint16_t arp_op;
	const char *arp_sha; /* NULL: the frame's source MAC */
	const struct pkt *quote; /* ICMP error: the packet it quotes */
	const struct hello *data; /* TCP: this payload after the header */
};

/* A TCP payload: a ClientHello from tests/fixtures/tls/, loaded by load_hellos(). */
struct hello {
	uint8_t b[2048];
	size_t len;
};

struct t;

struct row {
	const char *name;
	int dir;
	struct pkt pkt;
	int verdict;
	int reason;
	int (*setup)(struct t *t, const struct row *r);
	const char *bug; /* a known BPF bug: the row is expected to fail */
	/*
	 * Newer kernels refuse to TEST_RUN a frame shorter than its L3 header
	 * (-EINVAL); such a row is then skipped rather than failed.
	 */
	bool kernel_may_refuse;
};

struct t {
	struct latch_tc *skel;
	struct bpf_program *from_prog; /* latch_from_guest, or the variant for kernels before 6.2 */
	struct ring_buffer *rb;
	int ncpus;
	struct latch_event ev[16];
	int n_ev;
	struct latch_config cfg; /* baseline settings */
};

static bool verbose;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && !verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* Names come from the ABI's one list (bpf/latch_abi.h), like every other reader's. */
static const struct {
	int reason;
	const char *name;
} reasons[] = {
#define R(id, code, name, text) { LATCH_##id, name },
	LATCH_REASONS(R)
#undef R
};

static const char *reason_name(int reason)
{
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].reason == reason)
			return reasons[i].name;
	return "?";
}

static const char *verdict_name(int v)
{
	return v == OK ? "OK" : v == SHOT ? "SHOT" : "?";
}

static uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static void mac(const char *s, uint8_t *out)
{
	unsigned int b[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
		abort();
	for (int i = 0; i < 6; i++)
		out[i] = b[i];
}

static void ip4(const char *s, void *out)
{
	if (inet_pton(AF_INET, s, out) != 1)
		abort();
}

static void ip6(const char *s, void *out)
{
	if (inet_pton(AF_INET6, s, out) != 1)
		abort();
}

static bool is_v6(const char *s)
{
	return strchr(s, ':') != NULL;
}

static size_t build_ip4(const struct pkt *k, uint8_t *b);
static size_t build_ip6(const struct pkt *k, uint8_t *b);

/* The transport header and a little payload. */
static size_t build_l4(const struct pkt *k, uint8_t *b)
{
	switch (k->proto) {
	case IPPROTO_TCP:
		memset(b, 0, 20);
		put16(b, k->sport);
		put16(b + 2, k->dport);
		b[12] = 5 << 4;
		b[13] = k->tcp_flags;
		put16(b + 14, 65535);
		if (k->data)
			memcpy(b + 20, k->data->b, k->data->len);
		return 20 + (k->data ? k->data->len : 0);
	case IPPROTO_UDP:
		/* 32 bytes of payload, a DNS query's size: long enough for the fast paths' bound */
		memset(b, 0, 40);
		put16(b, k->sport);
		put16(b + 2, k->dport);
		put16(b + 4, 40);
		return 40;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		memset(b, 0, 24);
		b[0] = k->icmp_type;
		if (k->quote) {
			/* an error: its header, then the quoted IP header and 8 bytes */
			uint8_t q[256];
			size_t ql = is_v6(k->quote->src) ? build_ip6(k->quote, q) : build_ip4(k->quote, q);
			size_t keep = (is_v6(k->quote->src) ? 40 : 20) + 8;

			b[1] = k->proto == IPPROTO_ICMP ? 4 : 0; /* v4: fragmentation needed */
			put16(b + 6, 1280); /* the MTU it reports */
			memcpy(b + 8, q, keep < ql ? keep : ql);
			return 8 + (keep < ql ? keep : ql);
		}
		if (k->nd_target) {
			ip6(k->nd_target, b + 8);
			return 24;
		}
		put16(b + 4, k->icmp_id);
		put16(b + 6, 1);
		return 16; /* echo with 8 bytes of data; RA */
	default: /* tunnels and the like: a zeroed inner header */
		memset(b, 0, 20);
		if (k->proto == IPPROTO_IPIP)
			b[0] = 0x45;
		return 20;
	}
}

static size_t build_ip4(const struct pkt *k, uint8_t *b)
{
	uint8_t ihl = k->ihl ? k->ihl : 5;
	size_t hl = (ihl > 5 ? ihl : 5) * 4, l4 = build_l4(k, b + hl);

	memset(b, 0, hl);
	b[0] = 0x40 | ihl;
	put16(b + 2, hl + l4 + k->len_adj);
	put16(b + 4, 0x1234);
	put16(b + 6, k->frag);
	b[8] = 64;
	b[9] = k->proto;
	ip4(k->src, b + 12);
	ip4(k->dst, b + 16);
	for (size_t i = 20; i < hl; i++)
		b[i] = 1; /* NOP options */
	return hl + l4;
}

static size_t build_ip6(const struct pkt *k, uint8_t *b)
{
	size_t off = 40, l4;

	memset(b, 0, 40);
	b[0] = 0x60;
	b[6] = k->n_ext ? k->ext[0] : k->proto;
	b[7] = k->hop_limit ? k->hop_limit : 64;
	ip6(k->src, b + 8);
	ip6(k->dst, b + 24);
	for (int i = 0; i < k->n_ext; i++, off += 8) {
		memset(b + off, 0, 8);
		b[off] = i + 1 < k->n_ext ? k->ext[i + 1] : k->proto;
		switch (k->ext[i]) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
			b[off + 2] = 1; /* PadN over the rest */
			b[off + 3] = 4;
			break;
		case IPPROTO_FRAGMENT:
			b[off + 3] = 1; /* offset 0, more fragments */
			break;
		}
	}
	l4 = build_l4(k, b + off);
	put16(b + 4, off - 40 + l4 + k->len_adj);
	return off + l4;
}

static size_t build_arp(const struct pkt *k, const uint8_t *smac, uint8_t *b)
{
	memset(b, 0, 28);
	put16(b, 1);
	put16(b + 2, 0x0800);
	b[4] = 6;
	b[5] = 4;
	put16(b + 6, k->arp_op);
	if (k->arp_sha)
		mac(k->arp_sha, b + 8);
	else
		memcpy(b + 8, smac, 6);
	ip4(k->src, b + 14);
	ip4(k->dst, b + 24);
	return 28;
}

static size_t build(const struct pkt *k, int dir, uint8_t *b)
{
	uint8_t smac[6];
	uint16_t type;
	size_t off = 12;

	mac(dir == FROM ? HOST_MAC : GUEST_MAC, b);
	mac(k->smac ? k->smac : dir == FROM ? GUEST_MAC : HOST_MAC, smac);
	memcpy(b + 6, smac, 6);
	if (k->vlan_tpid) {
		put16(b + off, k->vlan_tpid);
		put16(b + off + 2, 100);
		off += 4;
	}
	type = k->ethertype ? k->ethertype : k->arp_op ? 0x0806 : is_v6(k->src) ? 0x86dd : 0x0800;
	put16(b + off, type);
	off += 2;
	switch (type) {
	case 0x0800:
		off += build_ip4(k, b + off);
		break;
	case 0x86dd:
		off += build_ip6(k, b + off);
		break;
	case 0x0806:
		off += build_arp(k, smac, b + off);
		break;
	default:
		/* addresses given: an IP packet under another type, as if it were one */
		if (k->src)
			off += is_v6(k->src) ? build_ip6(k, b + off) : build_ip4(k, b + off);
		else {
			memset(b + off, 0, 46);
			off += 46;
		}
	}
	return k->trunc ? k->trunc : off;
}

/* The same conversation seen from the other end. */
static void reverse(const struct pkt *in, struct pkt *out)
{
	*out = *in;
	out->src = in->dst;
	out->dst = in->src;
	out->sport = in->dport;
	out->dport = in->sport;
	if (in->tcp_flags == (TCP_SYN | TCP_ACK))
		out->tcp_flags = TCP_SYN;
	if (in->icmp_type == 0)
		out->icmp_type = 8;
	else if (in->icmp_type == 129)
		out->icmp_type = 128;
}

static int run(struct t *t, int dir, const struct pkt *k, size_t *len)
{
	const struct bpf_program *prog = dir == FROM ? t->from_prog : t->skel->progs.latch_to_guest;
	uint8_t buf[2560];
	size_t n = build(k, dir, buf);
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = buf, .data_size_in = n, .repeat = 1);
	int err;

	if (len)
		*len = n;
	err = bpf_prog_test_run_opts(bpf_program__fd(prog), &opts);
	if (err)
		return err < 0 ? err : -EIO;
	return opts.retval;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct t *t = ctx;

	if (size >= sizeof(struct latch_event) && t->n_ev < (int)(sizeof(t->ev) / sizeof(t->ev[0])))
		memcpy(&t->ev[t->n_ev++], data, sizeof(struct latch_event));
	return 0;
}

static void drain_events(struct t *t)
{
	ring_buffer__consume(t->rb);
	t->n_ev = 0;
}

/* Sum of the per-CPU packet and byte counts of every slot. */
static int read_counters(struct t *t, struct latch_counter *sum)
{
	struct latch_counter v[t->ncpus];
	int fd = bpf_map__fd(t->skel->maps.counters);

	for (__u32 slot = 0; slot < LATCH_COUNTER_SLOTS; slot++) {
		if (bpf_map_lookup_elem(fd, &slot, v))
			return -errno;
		sum[slot] = (struct latch_counter){ 0 };
		for (int c = 0; c < t->ncpus; c++) {
			sum[slot].packets += v[c].packets;
			sum[slot].bytes += v[c].bytes;
		}
	}
	return 0;
}

static int set_config(struct t *t, const struct latch_config *cfg)
{
	__u32 zero = 0;

	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.settings), &zero, cfg, BPF_ANY);
}

static int get_config(struct t *t, struct latch_config *cfg)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.settings), &zero, cfg);
}

static struct latch_rule tcp(uint16_t lo, uint16_t hi, uint64_t expires)
{
	return (struct latch_rule){ .proto = LATCH_PROTO_TCP, .port_lo = lo, .port_hi = hi, .expires_ns = expires };
}

static struct latch_rule udp(uint16_t lo, uint16_t hi)
{
	return (struct latch_rule){ .proto = LATCH_PROTO_UDP, .port_lo = lo, .port_hi = hi };
}

static struct latch_rule any_port(void)
{
	return (struct latch_rule){ .proto = LATCH_PROTO_ANY, .port_lo = 0, .port_hi = 65535 };
}

static struct latch_rule any_proto(uint16_t lo, uint16_t hi)
{
	return (struct latch_rule){ .proto = LATCH_PROTO_ANY, .port_lo = lo, .port_hi = hi };
}

static struct latch_rules rules(int n, const struct latch_rule *r)
{
	struct latch_rules rs = { .n = n };

	memcpy(rs.rule, r, n * sizeof(*r));
	return rs;
}

#define RULES(...)                                                                      \
	rules(sizeof((struct latch_rule[]){ __VA_ARGS__ }) / sizeof(struct latch_rule), \
	      (struct latch_rule[]){ __VA_ARGS__ })

static int exact4(struct t *t, uint32_t gen, const char *a, struct latch_rules rs)
{
	struct latch_exact4_key k = { .gen = gen };

	ip4(a, &k.addr);
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.exact4), &k, &rs, BPF_ANY);
}

static int exact6(struct t *t, uint32_t gen, const char *a, struct latch_rules rs)
{
	struct latch_exact6_key k = { .gen = gen };

	ip6(a, k.addr);
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.exact6), &k, &rs, BPF_ANY);
}

static int prefix4(struct t *t, uint32_t gen, const char *a, int plen, struct latch_rules rs)
{
	struct latch_prefix4_key k = { .prefixlen = 32 + plen, .gen = gen };

	ip4(a, &k.addr);
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.prefix4), &k, &rs, BPF_ANY);
}

static int prefix6(struct t *t, uint32_t gen, const char *a, int plen, struct latch_rules rs)
{
	struct latch_prefix6_key k = { .prefixlen = 32 + plen, .gen = gen };

	ip6(a, k.addr);
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.prefix6), &k, &rs, BPF_ANY);
}

static int timed4(struct t *t, const char *a, int plen, struct latch_rules rs)
{
	struct latch_timed4_key k = { .prefixlen = plen };

	ip4(a, &k.addr);
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.timed4), &k, &rs, BPF_ANY);
}

static int timed6(struct t *t, const char *a, int plen, struct latch_rules rs)
{
	struct latch_timed6_key k = { .prefixlen = plen };

	ip6(a, k.addr);
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.timed6), &k, &rs, BPF_ANY);
}

static int delete_exact4(struct t *t, const char *a)
{
	struct latch_exact4_key k = { .gen = 0 };

	ip4(a, &k.addr);
	return bpf_map_delete_elem(bpf_map__fd(t->skel->maps.exact4), &k);
}

static int delete_exact6(struct t *t, const char *a)
{
	struct latch_exact6_key k = { .gen = 0 };

	ip6(a, k.addr);
	return bpf_map_delete_elem(bpf_map__fd(t->skel->maps.exact6), &k);
}

static void clear_map(struct bpf_map *m)
{
	int fd = bpf_map__fd(m);
	uint8_t key[64];

	while (!bpf_map_get_next_key(fd, NULL, key))
		if (bpf_map_delete_elem(fd, key))
			break;
}

/* Forget every CPU's last flow: a per-CPU array can only be overwritten. */
static int clear_flow_hot(struct t *t)
{
	struct latch_flow_hot *v = calloc(t->ncpus, sizeof(*v));
	__u32 zero = 0;
	int err;

	if (!v)
		return -1;
	err = bpf_map_update_elem(bpf_map__fd(t->skel->maps.flow_hot), &zero, v, 0);
	free(v);
	return err;
}

/* The test namespace's IPv4 forwarding switch (latch_testnet_enter turned it on). */
static int forwarding(const char *on)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_forward", "w");
	int ok;

	if (!f)
		return -1;
	ok = fputs(on, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/*
 * The baseline policy (generation 0):
 *   198.51.100.10       TCP 443, UDP 5000-5010
 *   198.51.100.20       anything (ICMP echo included)
 *   198.51.100.30       TCP and UDP 1-65535 (not ICMP: not the full range)
 *   203.0.113.0/24      TCP 80 (prefix)
 *   198.51.100.128/26   TCP 443 for an hour (timed)
 *   198.51.100.192/26   TCP 443, expired a second ago (timed)
 *   198.51.100.0/24     anything, but in generation 1 (not live)
 * and the same shapes for IPv6 under 2001:db8:2::/48 .. 2001:db8:5::/64.
 */
static int reset(struct t *t)
{
	uint64_t now = boot_ns(), hour = now + 3600ULL * 1000000000ULL, past = now - 1000000000ULL;
	struct latch_bucket zero_bucket = { 0 };
	__u32 zero = 0;
	int err = 0;

	err |= forwarding("1");

	clear_map(t->skel->maps.flow4);
	clear_map(t->skel->maps.flow6);
	clear_map(t->skel->maps.names);
	err |= clear_flow_hot(t);
	err |= bpf_map_update_elem(bpf_map__fd(t->skel->maps.dns_bucket), &zero, &zero_bucket, 0);
	err |= bpf_map_update_elem(bpf_map__fd(t->skel->maps.event_bucket), &zero, &zero_bucket, 0);
	err |= set_config(t, &t->cfg);

	err |= exact4(t, 0, "198.51.100.10", RULES(tcp(443, 443, 0), udp(5000, 5010)));
	err |= exact4(t, 0, "198.51.100.20", RULES(any_port()));
	err |= exact4(t, 0, "198.51.100.30", RULES(any_proto(1, 65535)));
	err |= prefix4(t, 0, "203.0.113.0", 24, RULES(tcp(80, 80, 0)));
	err |= prefix4(t, 1, "198.51.100.0", 24, RULES(any_port()));
	err |= timed4(t, "198.51.100.128", 26, RULES(tcp(443, 443, hour)));
	err |= timed4(t, "198.51.100.192", 26, RULES(tcp(443, 443, past)));

	err |= exact6(t, 0, "2001:db8:2::10", RULES(tcp(443, 443, 0), udp(5000, 5010)));
	err |= exact6(t, 0, "2001:db8:2::20", RULES(any_port()));
	err |= prefix6(t, 0, "2001:db8:3::", 48, RULES(tcp(80, 80, 0)));
	err |= prefix6(t, 1, "2001:db8:2::", 48, RULES(any_port()));
	err |= timed6(t, "2001:db8:4::", 64, RULES(tcp(443, 443, hour)));
	err |= timed6(t, "2001:db8:5::", 64, RULES(tcp(443, 443, past)));
	drain_events(t);
	return err ? -1 : 0;
}

/* Setups: state a row needs beyond the baseline. */

static int bump_policy_version(struct t *t);

/* The host forwards nothing from this link: only local delivery is left to reach. */
static int forwarding_off(struct t *t, const struct row *r)
{
	return forwarding("0");
}

/* Warm flow_hot on an hour-long grant, then shorten it as the loader does: new deadline, version bumped. */
static int warm_then_shorten_grant(struct t *t, const struct row *r)
{
	uint64_t hour = boot_ns() + 3600ULL * 1000000000ULL;

	if (timed4(t, "198.51.100.128", 26, RULES(tcp(443, 443, hour))) || run(t, FROM, &r->pkt, NULL) != OK ||
	    run(t, FROM, &r->pkt, NULL) != OK)
		return -1;
	if (timed4(t, "198.51.100.128", 26, RULES(tcp(443, 443, boot_ns() + 200000000ULL))) || bump_policy_version(t))
		return -1;
	/* still before the new deadline: the flow passes, now under the new one */
	if (run(t, FROM, &r->pkt, NULL) != OK)
		return -1;
	usleep(300 * 1000);
	return 0;
}

/* The same grant lengthened instead: the flow keeps passing. */
static int warm_then_lengthen_grant(struct t *t, const struct row *r)
{
	uint64_t soon = boot_ns() + 200000000ULL, day = boot_ns() + 86400ULL * 1000000000ULL;

	if (timed4(t, "198.51.100.128", 26, RULES(tcp(443, 443, soon))) || run(t, FROM, &r->pkt, NULL) != OK ||
	    run(t, FROM, &r->pkt, NULL) != OK)
		return -1;
	if (timed4(t, "198.51.100.128", 26, RULES(tcp(443, 443, day))) || bump_policy_version(t))
		return -1;
	usleep(300 * 1000);
	return 0;
}

/* The guest sends the packet an ICMP error will quote. */
static int open_quoted_flow(struct t *t, const struct row *r)
{
	return run(t, FROM, r->pkt.quote, NULL) == OK ? 0 : -1;
}

/* The guest's flow to 198.51.100.10:443, whatever the row quotes. */
static int open_guest_tcp_flow(struct t *t, const struct row *r)
{
	const struct pkt k = { .src = GUEST4,
			       .dst = "198.51.100.10",
			       .proto = IPPROTO_TCP,
			       .sport = GUEST_PORT,
			       .dport = 443,
			       .tcp_flags = TCP_SYN };

	return run(t, FROM, &k, NULL) == OK ? 0 : -1;
}

static int open_flow(struct t *t, const struct row *r)
{
	struct pkt fwd;

	reverse(&r->pkt, &fwd);
	return run(t, FROM, &fwd, NULL) == OK ? 0 : -1;
}

static int bump_policy_version(struct t *t)
{
	struct latch_config cfg;

	if (get_config(t, &cfg))
		return -1;
	cfg.policy_version++;
	return set_config(t, &cfg);
}

/* Open the flow, then take away the entry that allowed it. */
static int open_flow_then_revoke(struct t *t, const struct row *r)
{
	if (open_flow(t, r) || bump_policy_version(t))
		return -1;
	return is_v6(r->pkt.src) ? delete_exact6(t, r->pkt.src) : delete_exact4(t, r->pkt.src);
}

/* Send the row's packet twice (the second one from this CPU's flow_hot), then revoke its entry. */
static int warm_then_revoke(struct t *t, const struct row *r)
{
	if (run(t, FROM, &r->pkt, NULL) != OK || run(t, FROM, &r->pkt, NULL) != OK || bump_policy_version(t))
		return -1;
	return delete_exact4(t, r->pkt.dst);
}

/* Warm flow_hot on a grant that runs out 200 ms later, and let it run out. */
static int warm_on_short_grant(struct t *t, const struct row *r)
{
	if (timed4(t, "198.51.100.128", 26, RULES(tcp(443, 443, boot_ns() + 200000000ULL))) ||
	    run(t, FROM, &r->pkt, NULL) != OK || run(t, FROM, &r->pkt, NULL) != OK)
		return -1;
	usleep(300000);
	return 0;
}

/*
 * The row's flow made hot (two clean packets: the second from flow_hot), so
 * that the row's packet -- the same flow with one header trick -- meets the
 * established-flow fast path first.
 */
static int warm_same_flow(struct t *t, const struct row *r)
{
	struct pkt clean = r->pkt;

	clean.ethertype = 0;
	clean.frag = 0;
	clean.ihl = 0;
	clean.smac = NULL;
	clean.vlan_tpid = 0;
	clean.len_adj = 0;
	clean.trunc = 0;
	clean.src = is_v6(r->pkt.dst) ? GUEST6 : GUEST4;
	return run(t, FROM, &clean, NULL) == OK && run(t, FROM, &clean, NULL) == OK ? 0 : -1;
}

/*
 * The guest opens the flow the row's packet -- one header trick on a reply
 * -- would return on, so that the reply meets the return fast path first.
 */
static int open_same_flow(struct t *t, const struct row *r)
{
	struct pkt clean = r->pkt, fwd;

	clean.ethertype = 0;
	clean.frag = 0;
	clean.ihl = 0;
	clean.vlan_tpid = 0;
	clean.len_adj = 0;
	clean.trunc = 0;
	clean.dst = is_v6(r->pkt.src) ? GUEST6 : GUEST4;
	reverse(&clean, &fwd);
	return run(t, FROM, &fwd, NULL) == OK ? 0 : -1;
}

/* The guest sends UDP to 198.51.100.10:5000 (an allowed range). */
static int open_udp_5000(struct t *t, const struct row *r)
{
	const struct pkt fwd = {
		.src = GUEST4, .dst = "198.51.100.10", .proto = IPPROTO_UDP, .sport = GUEST_PORT, .dport = 5000
	};

	return run(t, FROM, &fwd, NULL) == OK ? 0 : -1;
}

/* Make the flow to 198.51.100.10:443 hot, then the row sends to another port. */
static int warm_then_other_port(struct t *t, const struct row *r)
{
	struct pkt hot = r->pkt;

	hot.dport = 443;
	return run(t, FROM, &hot, NULL) == OK && run(t, FROM, &hot, NULL) == OK ? 0 : -1;
}

/* Open the flow, then remove something else from the policy. */
static int open_flow_then_unrelated_revoke(struct t *t, const struct row *r)
{
	if (open_flow(t, r) || bump_policy_version(t))
		return -1;
	return delete_exact4(t, "198.51.100.30");
}

/* Open the flow on a grant that runs out 200 ms later, and let it run out. */
static int open_flow_on_short_grant(struct t *t, const struct row *r)
{
	if (timed4(t, "198.51.100.128", 26, RULES(tcp(443, 443, boot_ns() + 200000000ULL))) || open_flow(t, r))
		return -1;
	usleep(300 * 1000);
	return 0;
}

/* A learned rule (an answer of the resolver): TCP 443 to ADDR until the deadline. */
static int learned4(struct t *t, const char *a, uint64_t deadline)
{
	struct latch_rule l = tcp(443, 443, deadline);

	l.origin = LATCH_ORIGIN_LEARNED;
	return exact4(t, 0, a, RULES(l));
}

static int learned_fresh(struct t *t, const struct row *r)
{
	return learned4(t, r->pkt.dst, boot_ns() + 3600ULL * 1000000000ULL);
}

static int learned_expired(struct t *t, const struct row *r)
{
	return learned4(t, r->pkt.dst, boot_ns() - 1000000000ULL);
}

/* The guest opens a flow on a learned rule whose TTL then runs out. */
static int flow_outlives_ttl(struct t *t, const struct row *r)
{
	const char *dst = r->dir == FROM ? r->pkt.dst : r->pkt.src;
	const struct pkt syn = {
		.src = GUEST4, .dst = dst, .proto = IPPROTO_TCP, .sport = GUEST_PORT, .dport = 443, .tcp_flags = TCP_SYN
	};

	if (learned4(t, dst, boot_ns() + 200000000ULL) || run(t, FROM, &syn, NULL) != OK)
		return -1;
	usleep(300 * 1000);
	return 0;
}

/* ... and then something unrelated is removed, so the flow is checked again. */
static int flow_outlives_ttl_recheck(struct t *t, const struct row *r)
{
	if (flow_outlives_ttl(t, r) || bump_policy_version(t))
		return -1;
	return delete_exact4(t, "198.51.100.30");
}

/* ... and then the learned rule itself is removed (a profile switch dropped its name). */
static int flow_outlives_ttl_then_removed(struct t *t, const struct row *r)
{
	if (flow_outlives_ttl(t, r) || bump_policy_version(t))
		return -1;
	return delete_exact4(t, r->pkt.dst);
}

/* The `open` profile. */
static int open_profile(struct t *t, const struct row *r)
{
	struct latch_config cfg;

	if (get_config(t, &cfg))
		return -1;
	cfg.flags |= LATCH_CFG_OPEN;
	return set_config(t, &cfg);
}

static int dns_burst(struct t *t, const struct row *r)
{
	for (int i = 0; i < DNS_BURST; i++)
		if (run(t, r->dir, &r->pkt, NULL) != OK)
			return -1;
	return 0;
}

static int dns_drain(struct t *t, const struct row *r)
{
	for (int i = 0; i < 4 * DNS_BURST; i++)
		if (run(t, r->dir, &r->pkt, NULL) < 0)
			return -1;
	return 0;
}

/*
 * The row's query sent twice, so that its flow is recorded and the second
 * one took the DNS fast path; then the settings change under the flow.
 */
static int dns_flow_then(struct t *t, const struct row *r, void (*change)(struct latch_config *cfg))
{
	struct latch_config cfg;

	if (run(t, r->dir, &r->pkt, NULL) != OK || run(t, r->dir, &r->pkt, NULL) != OK || get_config(t, &cfg))
		return -1;
	change(&cfg);
	return set_config(t, &cfg);
}

static void resolver_moved(struct latch_config *cfg)
{
	inet_pton(AF_INET, "192.0.2.53", &cfg->resolver_ip4);
}

static void dns_rate_zero(struct latch_config *cfg)
{
	cfg->dns_rate = 0;
}

static int dns_flow_then_resolver_moved(struct t *t, const struct row *r)
{
	return dns_flow_then(t, r, resolver_moved);
}

static int dns_flow_then_rate_zero(struct t *t, const struct row *r)
{
	return dns_flow_then(t, r, dns_rate_zero);
}

/* Port 53 of the host made a host service, then twice the bucket's depth of queries on one flow. */
static int dns_port_host_service(struct t *t, const struct row *r)
{
	struct latch_config cfg;

	if (get_config(t, &cfg) || cfg.n_host_ports >= LATCH_HOST_PORTS_MAX)
		return -1;
	cfg.host_ports[cfg.n_host_ports++] = htons(53);
	if (set_config(t, &cfg))
		return -1;
	for (int i = 0; i < 2 * DNS_BURST; i++)
		if (run(t, r->dir, &r->pkt, NULL) != OK)
			return -1;
	return 0;
}

static int not_ready(struct t *t, const struct row *r)
{
	struct latch_config cfg = t->cfg;

	cfg.flags &= ~LATCH_CFG_READY;
	return set_config(t, &cfg);
}

static int wrong_abi(struct t *t, const struct row *r)
{
	struct latch_config cfg = t->cfg;

	cfg.abi_version = LATCH_ABI_VERSION + 1;
	return set_config(t, &cfg);
}

/* Packet shorthands.  The guest's side always uses GUEST_PORT. */
/* ---- names all the way down: the ClientHello of a name-checked flow ---- */

#define TCP_PSH 0x08
#define SNI_NAME "api.example.com"
#define SNI_OTHER "www.example.com" /* the same length: the fixture's lengths stay right */
#define SNI4 "198.51.100.40"
#define SNI6 "2001:db8:6::40"

static struct hello hello_tls13, hello_tls12, hello_curl13, hello_curl12, hello_big, hello_other13, hello_other12,
	hello_nosni, hello_ech, hello_cut, hello_http;

/* tests/fixtures/tls/FILE, with its server name spelt AS (same length) when AS is not NULL. */
static int load_hello(const char *file, const char *as, struct hello *h)
{
	char path[256];
	FILE *f;
	uint8_t *at;

	snprintf(path, sizeof(path), "tests/fixtures/tls/%s", file);
	f = fopen(path, "rb");
	if (!f)
		return -1;
	h->len = fread(h->b, 1, sizeof(h->b), f);
	fclose(f);
	if (!as)
		return h->len > 9 ? 0 : -1;
	at = memmem(h->b, h->len, SNI_NAME, strlen(SNI_NAME));
	if (!at || strlen(as) != strlen(SNI_NAME))
		return -1;
	memcpy(at, as, strlen(as));
	return 0;
}

/* The first extension of type FROM in H becomes TO (curl's padding becomes ECH). */
static int retype_ext(struct hello *h, uint16_t from, uint16_t to)
{
	size_t off = 9 + 2 + 32, end;

	off += 1 + h->b[off];
	off += 2 + (h->b[off] << 8 | h->b[off + 1]);
	off += 1 + h->b[off];
	end = off + 2 + (h->b[off] << 8 | h->b[off + 1]);
	for (off += 2; off + 4 <= end; off += 4 + (h->b[off + 2] << 8 | h->b[off + 3]))
		if ((h->b[off] << 8 | h->b[off + 1]) == from) {
			put16(h->b + off, to);
			return 0;
		}
	return -1;
}

static int load_hellos(void)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: " SNI_NAME "\r\n\r\n";
	int err = 0;

	err |= load_hello("openssl_tls13.bin", NULL, &hello_tls13);
	err |= load_hello("openssl_tls12.bin", NULL, &hello_tls12);
	err |= load_hello("curl_tls13.bin", NULL, &hello_curl13);
	err |= load_hello("curl_tls12.bin", NULL, &hello_curl12);
	err |= load_hello("openssl_ffdhe8192.bin", NULL, &hello_big);
	err |= load_hello("openssl_tls13.bin", SNI_OTHER, &hello_other13);
	err |= load_hello("curl_tls12.bin", SNI_OTHER, &hello_other12);
	err |= load_hello("openssl_nosni.bin", NULL, &hello_nosni);
	err |= load_hello("curl_tls13.bin", NULL, &hello_ech);
	err |= retype_ext(&hello_ech, 0x0015, 0xfe0d);
	/* cut before its server name: the name would come in the next segment */
	err |= load_hello("openssl_tls13.bin", NULL, &hello_cut);
	hello_cut.len = 100;
	memcpy(hello_http.b, http, sizeof(http) - 1);
	hello_http.len = sizeof(http) - 1;
	return err ? -1 : 0;
}

/* Record NAME (NULL: the "checked" key) at ADDR:443 until DEADLINE, as latchd does for an answer. */
static int name_record(struct t *t, const char *a, const char *name, uint64_t deadline)
{
	struct latch_name_key k = { .port = LATCH_SNI_PORT, .family = is_v6(a) ? 6 : 4 };
	struct latch_name v = { .expires_ns = deadline };

	if (is_v6(a))
		ip6(a, k.addr);
	else
		ip4(a, k.addr);
	k.name_hash = name ? latch_tls_hash(name, strlen(name)) : 0;
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.names), &k, &v, 0);
}

/* The resolver answered SNI_NAME with the row's address (v4 or v6), names recorded, NAME_DEADLINE for the name. */
static int sni_answer(struct t *t, const struct row *r, uint64_t name_deadline)
{
	uint64_t hour = boot_ns() + 3600ULL * 1000000000ULL;
	struct latch_rule l = tcp(443, 443, hour);

	l.origin = LATCH_ORIGIN_LEARNED;
	if ((is_v6(r->pkt.dst) ? exact6(t, 0, r->pkt.dst, RULES(l)) : exact4(t, 0, r->pkt.dst, RULES(l))) ||
	    name_record(t, r->pkt.dst, NULL, hour))
		return -1;
	return name_record(t, r->pkt.dst, SNI_NAME, name_deadline);
}

/* The row's flow, opened: its SYN, from the guest. */
static int sni_syn(struct t *t, const struct row *r)
{
	struct pkt syn = r->pkt;

	syn.tcp_flags = TCP_SYN;
	syn.data = NULL;
	return run(t, FROM, &syn, NULL) == OK ? 0 : -1;
}

/* The row's flow, to an answered address, opened. */
static int sni_open(struct t *t, const struct row *r)
{
	return sni_answer(t, r, boot_ns() + 3600ULL * 1000000000ULL) || sni_syn(t, r);
}

/* ... the same, the name's answer past its deadline (the address's entry still good). */
static int sni_open_stale_name(struct t *t, const struct row *r)
{
	return sni_answer(t, r, boot_ns() - 1000000000ULL) || sni_syn(t, r);
}

/* ... and its ClientHello named D; the row is a later packet. */
static int sni_open_sent(struct t *t, const struct row *r, const struct hello *d, int want)
{
	struct pkt k = r->pkt;

	k.data = d;
	k.tcp_flags = TCP_ACK | TCP_PSH;
	return sni_open(t, r) || run(t, FROM, &k, NULL) != want ? -1 : 0;
}

static int sni_open_refused(struct t *t, const struct row *r)
{
	return sni_open_sent(t, r, &hello_other13, SHOT);
}

static int sni_open_passed(struct t *t, const struct row *r)
{
	return sni_open_sent(t, r, &hello_tls13, OK);
}

/* ... passed, and then a new SYN on the same ports: a new connection. */
static int sni_open_passed_then_syn(struct t *t, const struct row *r)
{
	return sni_open_passed(t, r) || sni_syn(t, r);
}

static int on_cpu(struct t *t, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % t->ncpus, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/*
 * ... passed and went hot on CPU 0 (a second packet stores it in flow_hot),
 * then a new SYN on the same ports from CPU 1; the row runs on CPU 0, whose
 * flow_hot the SYN must have cleared.
 */
static int sni_hot_then_syn_elsewhere(struct t *t, const struct row *r)
{
	struct pkt k = r->pkt;

	k.data = &hello_tls13;
	k.tcp_flags = TCP_ACK | TCP_PSH;
	if (on_cpu(t, 0) || sni_open_passed(t, r) || run(t, FROM, &k, NULL) != OK || on_cpu(t, 1) || sni_syn(t, r))
		return -1;
	return on_cpu(t, 0);
}

/* The address allowed by address (the baseline's exact entry), and names recorded for it anyway. */
static int sni_by_address(struct t *t, const struct row *r)
{
	uint64_t hour = boot_ns() + 3600ULL * 1000000000ULL;

	if (name_record(t, r->pkt.dst, NULL, hour) || name_record(t, r->pkt.dst, SNI_NAME, hour))
		return -1;
	return sni_syn(t, r);
}

#define TCP4(s, d, dp) .src = s, .dst = d, .proto = IPPROTO_TCP, .sport = GUEST_PORT, .dport = dp, .tcp_flags = TCP_SYN
#define UDP4(s, d, dp) .src = s, .dst = d, .proto = IPPROTO_UDP, .sport = GUEST_PORT, .dport = dp
#define PING4(s, d) .src = s, .dst = d, .proto = IPPROTO_ICMP, .icmp_type = 8, .icmp_id = 0x4242
/* a later segment of the guest's connection */
#define TCP4_ACK(s, d, dp) \
	.src = s, .dst = d, .proto = IPPROTO_TCP, .sport = GUEST_PORT, .dport = dp, .tcp_flags = TCP_ACK
#define TCP6 TCP4
#define UDP6 UDP4
#define PING6(s, d) .src = s, .dst = d, .proto = IPPROTO_ICMPV6, .icmp_type = 128, .icmp_id = 0x4242
#define ICMP6(s, d, type) .src = s, .dst = d, .proto = IPPROTO_ICMPV6, .icmp_type = type
/* Into the guest: from the remote port to GUEST_PORT. */
#define TCP4_IN(s, sp, flags) \
	.src = s, .dst = GUEST4, .proto = IPPROTO_TCP, .sport = sp, .dport = GUEST_PORT, .tcp_flags = flags
#define UDP4_IN(s, sp) .src = s, .dst = GUEST4, .proto = IPPROTO_UDP, .sport = sp, .dport = GUEST_PORT
#define TCP6_IN(s, sp, flags) \
	.src = s, .dst = GUEST6, .proto = IPPROTO_TCP, .sport = sp, .dport = GUEST_PORT, .tcp_flags = flags
#define ICMP4_IN(s, type) .src = s, .dst = GUEST4, .proto = IPPROTO_ICMP, .icmp_type = type, .icmp_id = 0x4242
#define ICMP6_IN(s, type) .src = s, .dst = GUEST6, .proto = IPPROTO_ICMPV6, .icmp_type = type, .icmp_id = 0x4242
#define ARP(op, s, d) .arp_op = op, .src = s, .dst = d
#define DO IPPROTO_DSTOPTS

#define ETH_IP 14
#define SYNACK (TCP_SYN | TCP_ACK)

static const struct row table[] = {
	/* policy, IPv4 */
	{ .name = "v4 tcp to an allowed address and port passes",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v4 udp to an allowed address and port range passes",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "198.51.100.10", 5010) },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v4 allowed address on another port is dropped",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 444) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v4 tcp rule does not open the port for udp",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "198.51.100.10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v4 unlisted address is dropped",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.99", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v4 entry of the inactive policy generation is ignored",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.99", 80) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v4 prefix entry allows its port",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "203.0.113.7", 80) },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v4 prefix entry keeps other ports closed",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "203.0.113.7", 81) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v4 timed entry passes before its deadline",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.130", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_TIMED },
	{ .name = "v4 timed entry is dead after its deadline",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.200", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	/* the per-CPU last-flow cache must not outlive a removal or a deadline */
	{ .name = "v4 established flow is cut on the packet after a revoke",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY,
	  .setup = warm_then_revoke },
	{ .name = "v4 established flow is cut when its grant runs out",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.140", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY,
	  .setup = warm_on_short_grant },
	{ .name = "v4 established flow is cut at a shortened grant's new deadline",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.150", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY,
	  .setup = warm_then_shorten_grant },
	{ .name = "v4 established flow outlives its grant's old deadline once lengthened",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.150", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_TIMED,
	  .setup = warm_then_lengthen_grant },
	{ .name = "v4 icmp echo passes an all-ports any rule",
	  .dir = FROM,
	  .pkt = { PING4(GUEST4, "198.51.100.20") },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v4 icmp echo is not allowed by a port-only rule",
	  .dir = FROM,
	  .pkt = { PING4(GUEST4, "198.51.100.10") },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v4 icmp echo is not allowed by an any rule short of all ports",
	  .dir = FROM,
	  .pkt = { PING4(GUEST4, "198.51.100.30") },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },

	/* an established flow's later packets get no header trick past the fast path */
	{ .name = "v4 established flow: a later packet of it passes from the fast path",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: a fragment of it is dropped",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443), .frag = 0x2000 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_FRAGMENT,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: a packet of it with options is dropped",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443), .ihl = 6 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_IP_OPTIONS,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: a packet of it from another mac is dropped",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443), .smac = "02:00:00:00:00:66" },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SPOOF_MAC,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: a packet of it from another address is dropped",
	  .dir = FROM,
	  .pkt = { TCP4_ACK("192.0.2.66", "198.51.100.10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SPOOF_IP,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: a tagged packet of it is dropped",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443), .vlan_tpid = 0x8100 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_VLAN,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: its packet under another ethertype is dropped",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443), .ethertype = 0x88b5 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ETHERTYPE,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: its ports past tot_len are not trusted",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443), .len_adj = -12 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: tot_len beyond the frame is malformed",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 443), .len_adj = 20 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED,
	  .setup = warm_same_flow },
	{ .name = "v4 established flow: another port of the same address is its own flow",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.10", 444) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY,
	  .setup = warm_then_other_port },

	/* ... and its replies none past the return fast path */
	{ .name = "v4 established flow: a reply on it passes from the fast path",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: a reply fragment is dropped",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK), .frag = 0x2000 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_FRAGMENT,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: a reply with options is dropped",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK), .ihl = 6 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_IP_OPTIONS,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: a tagged reply is dropped",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK), .vlan_tpid = 0x8100 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_VLAN,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: a reply under another ethertype is dropped",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK), .ethertype = 0x88b5 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ETHERTYPE,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: a reply's ports past tot_len are not trusted",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK), .len_adj = -12 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: a reply's tot_len beyond the frame is malformed",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK), .len_adj = 20 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: its reply to another address than the guest's is dropped",
	  .dir = TO,
	  .pkt = { .src = "198.51.100.10",
		   .dst = "192.0.2.66",
		   .proto = IPPROTO_TCP,
		   .sport = 443,
		   .dport = GUEST_PORT,
		   .tcp_flags = TCP_ACK },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW,
	  .setup = open_same_flow },
	{ .name = "v4 established flow: a udp reply from another port of the same address is dropped",
	  .dir = TO,
	  .pkt = { UDP4_IN("198.51.100.10", 5001) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW,
	  .setup = open_udp_5000 },

	/* policy, IPv6 */
	{ .name = "v6 tcp to an allowed address and port passes",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v6 allowed address on another port is dropped",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 444) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v6 udp to an allowed port range passes",
	  .dir = FROM,
	  .pkt = { UDP6(GUEST6, "2001:db8:2::10", 5000) },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v6 unlisted address is dropped",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::99", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v6 prefix entry allows its port",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:3:1::7", 80) },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v6 prefix entry keeps other ports closed",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:3:1::7", 81) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v6 timed entry passes before its deadline",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:4::9", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_TIMED },
	{ .name = "v6 timed entry is dead after its deadline",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:5::9", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v6 icmp echo passes an all-ports any rule",
	  .dir = FROM,
	  .pkt = { PING6(GUEST6, "2001:db8:2::20") },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v6 icmp echo is not allowed by a port-only rule",
	  .dir = FROM,
	  .pkt = { PING6(GUEST6, "2001:db8:2::10") },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },

	/* IPv6 extension headers */
	{ .name = "v6 hop-by-hop header does not hide an allowed port",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .n_ext = 1, .ext = { IPPROTO_HOPOPTS } },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v6 hop-by-hop header cannot skip the port check",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 444), .n_ext = 1, .ext = { IPPROTO_HOPOPTS } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v6 dest-options header does not hide an allowed port",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .n_ext = 1, .ext = { IPPROTO_DSTOPTS } },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v6 dest-options header cannot skip the port check",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 444), .n_ext = 1, .ext = { IPPROTO_DSTOPTS } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v6 six dest-options headers are walked to the port",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 444), .n_ext = 6, .ext = { DO, DO, DO, DO, DO, DO } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY },
	{ .name = "v6 seven dest-options headers are too deep a chain",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .n_ext = 7, .ext = { DO, DO, DO, DO, DO, DO, DO } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_EXT_HDR },
	{ .name = "v6 routing header cannot redirect an allowed packet",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .n_ext = 1, .ext = { IPPROTO_ROUTING } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_EXT_HDR },
	{ .name = "v6 routing header behind hop-by-hop is still refused",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .n_ext = 2, .ext = { IPPROTO_HOPOPTS, IPPROTO_ROUTING } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_EXT_HDR },
	{ .name = "v6 fragment header cannot skip the port check",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .n_ext = 1, .ext = { IPPROTO_FRAGMENT } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_FRAGMENT },
	{ .name = "v6 authentication header is refused",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .n_ext = 1, .ext = { IPPROTO_AH } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_EXT_HDR },
	{ .name = "v6 payload_len beyond the frame is malformed",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .len_adj = 8 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED },

	/* IPv4 header tricks */
	{ .name = "v4 first fragment cannot skip the port check",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .frag = 0x2000 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_FRAGMENT },
	{ .name = "v4 later fragment cannot skip the port check",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .frag = 185 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_FRAGMENT },
	{ .name = "v4 don't-fragment bit is not a fragment",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .frag = 0x4000 },
	  .verdict = OK,
	  .reason = LATCH_PASS_POLICY },
	{ .name = "v4 options cannot carry a source route",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .ihl = 6 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_IP_OPTIONS },
	{ .name = "v4 truncated header is malformed",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .trunc = ETH_IP + 10 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED,
	  .kernel_may_refuse = true },
	{ .name = "v4 ihl below 5 is malformed",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .ihl = 4 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED },
	{ .name = "v4 tot_len beyond the frame is malformed",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .len_adj = 20 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED },
	{ .name = "v4 truncated tcp header is malformed",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .len_adj = -12, .trunc = ETH_IP + 28 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED },
	/* ports in trailing bytes past tot_len, which the host stack trims, are not believed */
	{ .name = "v4 ports past tot_len are not trusted",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .len_adj = -12 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED },
	/* the same past payload_len */
	{ .name = "v6 ports past payload_len are not trusted",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, "2001:db8:2::10", 443), .len_adj = -12 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED },

	/* link layer and protocols */
	{ .name = "802.1Q tag cannot smuggle a frame",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .vlan_tpid = 0x8100 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_VLAN },
	{ .name = "802.1ad QinQ tag cannot smuggle a frame",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .vlan_tpid = 0x88a8 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_VLAN },
	{ .name = "unknown ethertype (LLDP) is dropped",
	  .dir = FROM,
	  .pkt = { .ethertype = 0x88cc },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ETHERTYPE },
	{ .name = "ip-in-ip to an allowed address is not a tunnel out",
	  .dir = FROM,
	  .pkt = { .src = GUEST4, .dst = "198.51.100.20", .proto = IPPROTO_IPIP },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_PROTO },
	{ .name = "gre to an allowed address is not a tunnel out",
	  .dir = FROM,
	  .pkt = { .src = GUEST4, .dst = "198.51.100.20", .proto = IPPROTO_GRE },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_PROTO },
	{ .name = "v6 esp to an allowed address is refused",
	  .dir = FROM,
	  .pkt = { .src = GUEST6, .dst = "2001:db8:2::20", .proto = IPPROTO_ESP },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_PROTO },
	{ .name = "v4 icmp other than echo is refused",
	  .dir = FROM,
	  .pkt = { .src = GUEST4, .dst = "198.51.100.20", .proto = IPPROTO_ICMP, .icmp_type = 13 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_PROTO },

	/* learned entries: the TTL bounds new flows, not the flows it admitted */
	{ .name = "v4 learned entry passes a new flow within its ttl",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.40", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_LEARNED,
	  .setup = learned_fresh },
	{ .name = "v4 learned entry past its ttl drops a new flow",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.41", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY,
	  .setup = learned_expired },
	{ .name = "v4 learned entry keeps other ports closed",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.40", 80) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY,
	  .setup = learned_fresh },
	{ .name = "v4 flow opened on a learned entry outlives its ttl",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.42", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = flow_outlives_ttl },
	{ .name = "v4 flow on a learned entry past its ttl survives a policy re-check",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.42", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_LEARNED,
	  .setup = flow_outlives_ttl_recheck },
	{ .name = "v4 reply on a learned flow past its ttl gets in after a re-check",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.42", 443, SYNACK) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = flow_outlives_ttl_recheck },
	{ .name = "v4 flow on a learned entry is cut once the entry is removed",
	  .dir = FROM,
	  .pkt = { TCP4_ACK(GUEST4, "198.51.100.42", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_POLICY,
	  .setup = flow_outlives_ttl_then_removed },

	/* the open profile: uncontained policy, but the link checks and DNS rules hold */
	{ .name = "open: an unlisted address passes, counted as open",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.99", 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_OPEN,
	  .setup = open_profile },
	{ .name = "open: v6 unlisted address passes",
	  .dir = FROM,
	  .pkt = { UDP6(GUEST6, "2001:db8:9::1", 4433) },
	  .verdict = OK,
	  .reason = LATCH_PASS_OPEN,
	  .setup = open_profile },
	{ .name = "open: a spoofed source is still dropped",
	  .dir = FROM,
	  .pkt = { TCP4("192.0.2.66", "198.51.100.99", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SPOOF_IP,
	  .setup = open_profile },
	{ .name = "open: dns to anything but the resolver is still dropped",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "198.51.100.99", 53) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_DNS_NOT_RESOLVER,
	  .setup = open_profile },
	{ .name = "open: a host port that is not a service is still dropped",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, HOST4, 22) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_PORT,
	  .setup = open_profile },

	/* open means the internet, not the host: every local address is guarded */
	{ .name = "open: another address of the host is guarded",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, HOST_OTHER4, 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "open: another v6 address of the host is guarded",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, HOST_OTHER6, 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "open: a subnet broadcast the host owns is guarded",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "198.18.5.255", 5000) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "open: a unicast address in that subnet still passes",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "198.18.5.7", 5000) },
	  .verdict = OK,
	  .reason = LATCH_PASS_OPEN,
	  .setup = open_profile },
	{ .name = "open: the limited broadcast is guarded",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "255.255.255.255", 5000) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "open: v4 multicast is guarded",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "224.0.0.251", 5353) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "open: v6 multicast is guarded",
	  .dir = FROM,
	  .pkt = { UDP6(GUEST6, "ff02::fb", 5353) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "open: v6 link-local is guarded",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, HOST_LL, 22) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "open: loopback is guarded",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "127.0.0.1", 22) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = open_profile },
	{ .name = "a prefix entry that covers a host address does not reach it",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, HOST_COVERED4, 80) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR },
	{ .name = "with forwarding off, an allowed destination is only the host's: dropped",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_ADDR,
	  .setup = forwarding_off },

	/* anti-spoofing */
	{ .name = "spoofed source mac is dropped",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443), .smac = "02:00:00:00:00:66" },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SPOOF_MAC },
	{ .name = "spoofed source ipv4 is dropped",
	  .dir = FROM,
	  .pkt = { TCP4("192.0.2.66", "198.51.100.10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SPOOF_IP },
	{ .name = "spoofed source ipv6 is dropped",
	  .dir = FROM,
	  .pkt = { TCP6("2001:db8:1::66", "2001:db8:2::10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SPOOF_IP },

	/* ARP */
	{ .name = "arp request guest to host passes",
	  .dir = FROM,
	  .pkt = { ARP(1, GUEST4, HOST4) },
	  .verdict = OK,
	  .reason = LATCH_PASS_ARP },
	{ .name = "arp claiming the gateway address is dropped",
	  .dir = FROM,
	  .pkt = { ARP(2, HOST4, GUEST4) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ARP },
	{ .name = "arp for a non-host address is dropped",
	  .dir = FROM,
	  .pkt = { ARP(1, GUEST4, "192.0.2.77") },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ARP },
	{ .name = "arp with a spoofed sender mac is dropped",
	  .dir = FROM,
	  .pkt = { ARP(1, GUEST4, HOST4), .arp_sha = "02:00:00:00:00:66" },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ARP },
	{ .name = "truncated arp is malformed",
	  .dir = FROM,
	  .pkt = { ARP(1, GUEST4, HOST4), .trunc = ETH_IP + 20 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_MALFORMED },
	{ .name = "arp from a spoofed frame source is dropped",
	  .dir = FROM,
	  .pkt = { ARP(1, GUEST4, HOST4), .smac = "02:00:00:00:00:66" },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SPOOF_MAC },
	{ .name = "arp host to guest passes",
	  .dir = TO,
	  .pkt = { ARP(2, HOST4, GUEST4) },
	  .verdict = OK,
	  .reason = LATCH_PASS_ARP },
	{ .name = "arp from a non-host sender into the guest is dropped",
	  .dir = TO,
	  .pkt = { ARP(1, "192.0.2.77", GUEST4) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ARP },

	/* neighbour discovery */
	{ .name = "nd solicitation for the host passes",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff02::1:ff00:1", 135), .nd_target = HOST6, .hop_limit = 255 },
	  .verdict = OK,
	  .reason = LATCH_PASS_ND },
	{ .name = "nd solicitation that crossed a router is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff02::1:ff00:1", 135), .nd_target = HOST6, .hop_limit = 64 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "nd solicitation for a non-host target is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff02::1:ff00:99", 135), .nd_target = "2001:db8:1::99", .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "nd advertisement for the guest's own address passes",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, HOST_LL, 136), .nd_target = GUEST6, .hop_limit = 255 },
	  .verdict = OK,
	  .reason = LATCH_PASS_ND },
	{ .name = "nd advertisement for another address is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, HOST_LL, 136), .nd_target = "2001:db8:1::99", .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "router advertisement from the guest is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff02::1", 134), .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	/* ND goes only where it is never forwarded: link-local, solicited-node, all-routers, the host */
	{ .name = "nd solicitation to the host's address passes",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST6, HOST6, 135), .nd_target = HOST6, .hop_limit = 255 },
	  .verdict = OK,
	  .reason = LATCH_PASS_ND },
	{ .name = "nd solicitation to a global address off the link is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST6, "2001:db8:99::1", 135), .nd_target = HOST6, .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "nd solicitation to the all-nodes group is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff02::1", 135), .nd_target = HOST6, .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "nd solicitation to a site-scope group is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff05::1:ff00:1", 135), .nd_target = HOST6, .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "nd solicitation to a near miss of the solicited-node group is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff02::1:fe00:1", 135), .nd_target = HOST6, .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "nd advertisement to a global address is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "2001:db8:99::1", 136), .nd_target = GUEST6, .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "router solicitation to all-routers passes",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "ff02::2", 133), .hop_limit = 255 },
	  .verdict = OK,
	  .reason = LATCH_PASS_ND },
	{ .name = "router solicitation to a global address is dropped",
	  .dir = FROM,
	  .pkt = { ICMP6(GUEST_LL, "2001:db8:99::1", 133), .hop_limit = 255 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },
	{ .name = "nd solicitation host to guest passes",
	  .dir = TO,
	  .pkt = { ICMP6(HOST_LL, "ff02::1:ff00:2", 135), .nd_target = GUEST6, .hop_limit = 255 },
	  .verdict = OK,
	  .reason = LATCH_PASS_ND },
	{ .name = "nd advertisement host to guest passes",
	  .dir = TO,
	  .pkt = { ICMP6(HOST_LL, GUEST_LL, 136), .nd_target = HOST6, .hop_limit = 255 },
	  .verdict = OK,
	  .reason = LATCH_PASS_ND },
	{ .name = "nd into the guest that crossed a router is dropped",
	  .dir = TO,
	  .pkt = { ICMP6(HOST_LL, GUEST_LL, 136), .nd_target = HOST6, .hop_limit = 64 },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_ND },

	/* host services */
	{ .name = "tcp to a host service passes",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, HOST4, HOST_SERVICE_PORT) },
	  .verdict = OK,
	  .reason = LATCH_PASS_HOST_SERVICE },
	{ .name = "v6 tcp to a host service passes",
	  .dir = FROM,
	  .pkt = { TCP6(GUEST6, HOST6, HOST_SERVICE_PORT) },
	  .verdict = OK,
	  .reason = LATCH_PASS_HOST_SERVICE },
	{ .name = "tcp to a host port that is not a service is dropped",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, HOST4, 22) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_PORT },
	{ .name = "icmp echo to the host is dropped",
	  .dir = FROM,
	  .pkt = { PING4(GUEST4, HOST4) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_PORT },

	/* DNS */
	{ .name = "dns to the resolver passes",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, HOST4, 53) },
	  .verdict = OK,
	  .reason = LATCH_PASS_DNS },
	{ .name = "v6 dns to the resolver passes",
	  .dir = FROM,
	  .pkt = { UDP6(GUEST6, HOST6, 53) },
	  .verdict = OK,
	  .reason = LATCH_PASS_DNS },
	{ .name = "dns to an allowed address that is not the resolver is dropped",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, "198.51.100.20", 53) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_DNS_NOT_RESOLVER },
	{ .name = "tcp dns to an allowed address that is not the resolver is dropped",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.20", 53) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_DNS_NOT_RESOLVER },
	{ .name = "dns query past the bucket depth is dropped",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, HOST4, 53) },
	  /* a bucket of depth 3 passes three queries in a row, not four */
	  .verdict = SHOT,
	  .reason = LATCH_DROP_DNS_RATE,
	  .setup = dns_burst },
	{ .name = "dns from a drained bucket is dropped",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, HOST4, 53) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_DNS_RATE,
	  .setup = dns_drain },
	/*
	 * A query on a flow already recorded skips the parse and the policy
	 * (fast_dns_v4), never the checks of the settings as they are now.
	 */
	{ .name = "dns on its recorded flow is dropped once the resolver moved",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, HOST4, 53) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_HOST_PORT,
	  .setup = dns_flow_then_resolver_moved },
	{ .name = "dns on its recorded flow is dropped once the rate is 0",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, HOST4, 53) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_DNS_RATE,
	  .setup = dns_flow_then_rate_zero },
	{ .name = "port 53 of the host as a host service stays one on its flow, never charged to the bucket",
	  .dir = FROM,
	  .pkt = { UDP4(GUEST4, HOST4, 53) },
	  .verdict = OK,
	  .reason = LATCH_PASS_HOST_SERVICE,
	  .setup = dns_port_host_service },

	/* into the guest */
	{ .name = "the resolver's answer to the guest's first query passes",
	  .dir = TO,
	  .pkt = { UDP4_IN(HOST4, 53) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_flow },
	{ .name = "tcp reply on a flow the guest opened passes",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, SYNACK) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_flow },
	{ .name = "udp reply on a flow the guest opened passes",
	  .dir = TO,
	  .pkt = { UDP4_IN("198.51.100.10", 5000) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_flow },
	{ .name = "v6 tcp reply on a flow the guest opened passes",
	  .dir = TO,
	  .pkt = { TCP6_IN("2001:db8:2::10", 443, SYNACK) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_flow },
	{ .name = "unsolicited tcp from an allowed address is dropped",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_SYN) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW },
	{ .name = "unsolicited v6 tcp from an allowed address is dropped",
	  .dir = TO,
	  .pkt = { TCP6_IN("2001:db8:2::10", 443, TCP_SYN) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW },
	{ .name = "revoking the entry cuts the established flow",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW,
	  .setup = open_flow_then_revoke },
	{ .name = "revoking the v6 entry cuts the established flow",
	  .dir = TO,
	  .pkt = { TCP6_IN("2001:db8:2::10", 443, TCP_ACK) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW,
	  .setup = open_flow_then_revoke },
	{ .name = "a grant's deadline cuts the flow it opened",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.130", 443, TCP_ACK) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW,
	  .setup = open_flow_on_short_grant },
	{ .name = "an unrelated revocation keeps the flow",
	  .dir = TO,
	  .pkt = { TCP4_IN("198.51.100.10", 443, TCP_ACK) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_flow_then_unrelated_revoke },
	{ .name = "icmp echo reply to the guest's ping passes",
	  .dir = TO,
	  .pkt = { ICMP4_IN("198.51.100.20", 0) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_flow },
	{ .name = "v6 icmp echo reply to the guest's ping passes",
	  .dir = TO,
	  .pkt = { ICMP6_IN("2001:db8:2::20", 129) },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_flow },
	{ .name = "icmp echo reply without a ping is dropped",
	  .dir = TO,
	  .pkt = { ICMP4_IN("198.51.100.20", 0) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW },
	{ .name = "icmp echo request into the guest is dropped",
	  .dir = TO,
	  .pkt = { ICMP4_IN("198.51.100.20", 8) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_PROTO },
	/* ICMP errors about the guest's own flows: path MTU discovery needs them */
	{ .name = "v4 fragmentation-needed for a guest flow passes",
	  .dir = TO,
	  .pkt = { ICMP4_IN("198.51.100.99", 3), .quote = &(const struct pkt){ TCP4(GUEST4, "198.51.100.10", 443) } },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_quoted_flow },
	{ .name = "v6 packet-too-big for a guest flow passes",
	  .dir = TO,
	  .pkt = { ICMP6_IN("2001:db8:99::1", 2), .quote = &(const struct pkt){ TCP6(GUEST6, "2001:db8:2::10", 443) } },
	  .verdict = OK,
	  .reason = LATCH_PASS_RETURN,
	  .setup = open_quoted_flow },
	{ .name = "v4 icmp error for a flow the guest never opened is dropped",
	  .dir = TO,
	  .pkt = { ICMP4_IN("198.51.100.99", 3), .quote = &(const struct pkt){ TCP4(GUEST4, "198.51.100.10", 443) } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW },
	{ .name = "v4 icmp error quoting another sender is dropped",
	  .dir = TO,
	  .pkt = { ICMP4_IN("198.51.100.99", 3),
		   .quote = &(const struct pkt){ TCP4("192.0.2.3", "198.51.100.10", 443) } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_FLOW,
	  .setup = open_guest_tcp_flow },
	{ .name = "v6 icmp error quoting a tunnel packet is dropped",
	  .dir = TO,
	  .pkt = { ICMP6_IN("2001:db8:99::1", 1),
		   .quote = &(const struct pkt){ .src = GUEST6, .dst = "2001:db8:2::10", .proto = 47 } },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_PROTO },

	/* configuration */
	{ .name = "no config drops everything",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_CONFIG,
	  .setup = not_ready },
	{ .name = "no config drops everything into the guest too",
	  .dir = TO,
	  .pkt = { ARP(2, HOST4, GUEST4) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_CONFIG,
	  .setup = not_ready },
	{ .name = "config of another abi version is no config",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, "198.51.100.10", 443) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_NO_CONFIG,
	  .setup = wrong_abi },
/*
	 * Names all the way down: a TCP flow to an address the resolver answered
	 * for a name passes its first data only if that data is a ClientHello
	 * naming a name answered for that address and port, without ECH.  Each
	 * refusal sits beside the allowed name on the same flow (control).
	 */
#define SNI_DATA(s, d, h)                                                                                            \
	.src = s, .dst = d, .proto = IPPROTO_TCP, .sport = GUEST_PORT, .dport = 443, .tcp_flags = TCP_ACK | TCP_PSH, \
	.data = h
	{ .name = "sni: v4 the answered name passes",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_tls13) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open },
	{ .name = "sni: v4 another name on the answered address is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_other13) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_OTHER,
	  .setup = sni_open },
	{ .name = "sni: v6 the answered name passes",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST6, SNI6, &hello_tls13) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open },
	{ .name = "sni: v6 another name on the answered address is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST6, SNI6, &hello_other13) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_OTHER,
	  .setup = sni_open },
	{ .name = "sni: curl's TLS 1.3 ClientHello passes",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_curl13) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open },
	{ .name = "sni: curl's TLS 1.2 ClientHello passes",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_curl12) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open },
	{ .name = "sni: openssl's TLS 1.2 ClientHello passes",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_tls12) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open },
	{ .name = "sni: TLS 1.2 naming another name is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_other12) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_OTHER,
	  .setup = sni_open },
	{ .name = "sni: a 1.2 KB ClientHello (8192-bit key share) in one segment passes",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_big) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open },
	{ .name = "sni: a ClientHello without a server name is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_nosni) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_NONE,
	  .setup = sni_open },
	{ .name = "sni: a ClientHello with encrypted_client_hello is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_ech) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_ECH,
	  .setup = sni_open },
	{ .name = "sni: a ClientHello whose name is in the next segment is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_cut) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_UNREAD,
	  .setup = sni_open },
	{ .name = "sni: plain text to a name-checked port is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_http) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_UNREAD,
	  .setup = sni_open },
	{ .name = "sni: a bare ACK before the ClientHello passes",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, NULL) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open },
	{ .name = "sni: a refused flow stays refused, whatever it sends next",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_tls13) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_OTHER,
	  .setup = sni_open_refused },
	{ .name = "sni: a new SYN on a refused flow's ports is a new flow",
	  .dir = FROM,
	  .pkt = { TCP4(GUEST4, SNI4, 443) },
	  .verdict = OK,
	  .reason = LATCH_PASS_LEARNED,
	  .setup = sni_open_refused },
	{ .name = "sni: a flow that passed its check passes its later data",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_other13) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_open_passed },
	{ .name = "sni: a new connection on a passed flow's ports is checked again",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_other13) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_OTHER,
	  .setup = sni_open_passed_then_syn },
	{ .name = "sni: a new connection's ClientHello is checked on a CPU whose flow_hot held its ports",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_other13) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_OTHER,
	  .setup = sni_hot_then_syn_elsewhere },
	{ .name = "sni: a name whose answer expired is refused",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, SNI4, &hello_tls13) },
	  .verdict = SHOT,
	  .reason = LATCH_DROP_SNI_OTHER,
	  .setup = sni_open_stale_name },
	{ .name = "sni: an address allowed as an address is not name-checked",
	  .dir = FROM,
	  .pkt = { SNI_DATA(GUEST4, "198.51.100.10", &hello_other13) },
	  .verdict = OK,
	  .reason = LATCH_PASS_FLOW,
	  .setup = sni_by_address },
};

/* Which reason slot(s) grew between two snapshots, for a message. */
static int grown_reason(const struct latch_counter *a, const struct latch_counter *b, int dir)
{
	int found = 0, n = 0;

	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
		int slot = latch_counter_slot(reasons[i].reason, dir);

		if (b[slot].packets != a[slot].packets) {
			found = reasons[i].reason;
			n++;
		}
	}
	return n == 1 ? found : 0;
}

enum outcome { PASSED, FAILED, SKIPPED };

static enum outcome run_row(struct t *t, const struct row *r, char *why, size_t whylen)
{
	struct latch_counter before[LATCH_COUNTER_SLOTS], after[LATCH_COUNTER_SLOTS];
	int slot = latch_counter_slot(r->reason, r->dir), verdict, got;
	size_t len;

	why[0] = 0;
	if (reset(t) || (r->setup && r->setup(t, r))) {
		snprintf(why, whylen, "setup failed");
		return FAILED;
	}
	drain_events(t);
	if (read_counters(t, before))
		return snprintf(why, whylen, "reading counters: %s", strerror(errno)), FAILED;
	verdict = run(t, r->dir, &r->pkt, &len);
	if (verdict == -EINVAL && r->kernel_may_refuse)
		return snprintf(why, whylen, "this kernel's TEST_RUN refuses the frame"), SKIPPED;
	if (verdict < 0)
		return snprintf(why, whylen, "test run: %s", strerror(-verdict)), FAILED;
	if (read_counters(t, after))
		return snprintf(why, whylen, "reading counters: %s", strerror(errno)), FAILED;
	ring_buffer__consume(t->rb);

	got = grown_reason(before, after, r->dir);
	if (verdict != r->verdict || got != r->reason) {
		snprintf(why, whylen, "expected %s/%s got %s/%s", verdict_name(r->verdict), reason_name(r->reason),
			 verdict_name(verdict), got ? reason_name(got) : "none");
		return FAILED;
	}
	for (int s = 0; s < LATCH_REASON_SLOTS * LATCH_DIR_COUNT; s++) {
		uint64_t dp = after[s].packets - before[s].packets;
		uint64_t db = after[s].bytes - before[s].bytes;

		if (s == slot ? dp != 1 || db != len : dp || db) {
			snprintf(why, whylen, "counter slot %d grew by %llu packets, %llu bytes", s,
				 (unsigned long long)dp, (unsigned long long)db);
			return FAILED;
		}
	}
	/* Every deny with a config is reported; passes never are. */
	if (r->reason < 0 && r->reason != LATCH_DROP_NO_CONFIG) {
		if (t->n_ev != 1 || t->ev[0].reason != r->reason || t->ev[0].dir != r->dir) {
			snprintf(why, whylen, "expected one %s event, got %d (first reason %s)", reason_name(r->reason),
				 t->n_ev, t->n_ev ? reason_name(t->ev[0].reason) : "-");
			return FAILED;
		}
	} else if (t->n_ev) {
		snprintf(why, whylen, "unexpected event (reason %s)", reason_name(t->ev[0].reason));
		return FAILED;
	}
	return PASSED;
}

struct tally {
	int passed, failed, xfailed, skipped;
};

static void report(struct tally *n, const char *name, bool ok, const char *why, const char *bug)
{
	if (bug && !ok) {
		printf("xfail %s: %s (known BPF bug: %s)\n", name, why, bug);
		n->xfailed++;
	} else if (bug) {
		printf("FAIL %s: passes but is marked as a known bug; drop .bug\n", name);
		n->failed++;
	} else if (ok) {
		printf("ok %s\n", name);
		n->passed++;
	} else {
		printf("FAIL %s: %s\n", name, why);
		n->failed++;
	}
}

static uint64_t stat_suppressed(struct t *t)
{
	struct latch_counter c[LATCH_COUNTER_SLOTS];

	if (read_counters(t, c))
		return ~0ULL;
	return c[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SUPPRESSED)].packets;
}

/*
 * Deny events: the first deny is reported with its addresses; at one event
 * per second with a depth of one, the next deny is only counted, and the
 * event after the refill says how many were suppressed.
 */
static void test_events(struct t *t, struct tally *n)
{
	const struct pkt deny = { TCP4(GUEST4, "198.51.100.99", 443) };
	struct latch_config cfg = t->cfg;
	uint8_t src[16] = { 0 }, dst[16] = { 0 };
	char why[256] = "";
	uint64_t s0, s1;
	bool ok;
	int i;

	cfg.event_rate = 1;
	cfg.event_burst = 1;
	if (reset(t) || set_config(t, &cfg)) {
		report(n, "deny event carries reason and addresses", false, "setup failed", NULL);
		return;
	}
	ip4(GUEST4, src);
	ip4("198.51.100.99", dst);

	run(t, FROM, &deny, NULL);
	ring_buffer__consume(t->rb);
	ok = t->n_ev == 1;
	if (ok) {
		const struct latch_event *e = &t->ev[0];

		ok = e->reason == LATCH_DROP_POLICY && e->dir == FROM && e->family == 4 && e->proto == IPPROTO_TCP &&
		     e->eth_proto == 0x0800 && ntohs(e->dst_port) == 443 && ntohs(e->src_port) == GUEST_PORT &&
		     !memcmp(e->src_addr, src, 16) && !memcmp(e->dst_addr, dst, 16) && e->suppressed == 0;
		if (!ok)
			snprintf(why, sizeof(why), "event reason %s dir %u family %u ports %u->%u",
				 reason_name(e->reason), e->dir, e->family, ntohs(e->src_port), ntohs(e->dst_port));
	} else {
		snprintf(why, sizeof(why), "%d events", t->n_ev);
	}
	report(n, "deny event carries reason and addresses", ok, why, NULL);

	t->n_ev = 0;
	s0 = stat_suppressed(t);
	run(t, FROM, &deny, NULL);
	s1 = stat_suppressed(t);
	ring_buffer__consume(t->rb);
	snprintf(why, sizeof(why), "suppressed grew by %llu, %d events sent", (unsigned long long)(s1 - s0), t->n_ev);
	/* a bucket of depth 1 lets exactly one event through */
	report(n, "second deny within the event burst is suppressed", s1 - s0 == 1 && !t->n_ev, why, NULL);

	/* Make sure at least one was suppressed, then wait for the next token. */
	for (i = 0; i < 4 && stat_suppressed(t) == s0; i++)
		run(t, FROM, &deny, NULL);
	t->n_ev = 0;
	ring_buffer__consume(t->rb);
	t->n_ev = 0;
	for (i = 0; i < 30 && !t->n_ev; i++) { /* at most 3 s */
		usleep(100 * 1000);
		run(t, FROM, &deny, NULL);
		ring_buffer__consume(t->rb);
	}
	ok = t->n_ev == 1 && t->ev[0].suppressed > 0 && t->ev[0].reason == LATCH_DROP_POLICY;
	snprintf(why, sizeof(why), "%d events after %d tries, suppressed %u", t->n_ev, i,
		 t->n_ev ? t->ev[0].suppressed : 0);
	report(n, "event after a refill reports the suppressed denies", ok, why, NULL);
}

/*
 * A refused server name is reported with the address and the hash of the
 * name the guest sent (latch_tls_hash), so that audit can say which.
 */
static void test_sni_event(struct t *t, struct tally *n)
{
	const struct row r = { .pkt = { SNI_DATA(GUEST4, SNI4, &hello_other13) } };
	uint8_t dst[16] = { 0 };
	char why[256] = "";
	bool ok;

	ip4(SNI4, dst);
	if (reset(t) || sni_open(t, &r)) {
		report(n, "sni: the refusal's event names the address and the name's hash", false, "setup failed",
		       NULL);
		return;
	}
	drain_events(t);
	run(t, FROM, &r.pkt, NULL);
	ring_buffer__consume(t->rb);
	ok = t->n_ev == 1 && t->ev[0].reason == LATCH_DROP_SNI_OTHER && !memcmp(t->ev[0].dst_addr, dst, 16) &&
	     ntohs(t->ev[0].dst_port) == 443 && t->ev[0].name_hash == latch_tls_hash(SNI_OTHER, strlen(SNI_OTHER));
	snprintf(why, sizeof(why), "%d events, first reason %s hash %llx", t->n_ev,
		 t->n_ev ? reason_name(t->ev[0].reason) : "-", t->n_ev ? (unsigned long long)t->ev[0].name_hash : 0ULL);
	report(n, "sni: the refusal's event names the address and the name's hash", ok, why, NULL);
}

/*
 * latch_from_guest_nocsum, loaded on kernels before 6.2, is latch_from_guest
 * without the checksum-offload check (which test runs can't reach: their
 * skbs are never CHECKSUM_PARTIAL).  Every row must get the same verdict
 * from it.
 */
static void test_nocsum_variant(struct t *t, struct tally *n)
{
	char why[256] = "", first[300] = "";
	int same = 0, differ = 0;

	t->from_prog = t->skel->progs.latch_from_guest_nocsum;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		enum outcome o = run_row(t, &table[i], why, sizeof(why));

		if (o == SKIPPED || table[i].bug)
			continue;
		if (o == PASSED) {
			same++;
		} else if (!differ++) {
			snprintf(first, sizeof(first), "%s: %s", table[i].name, why);
		}
	}
	t->from_prog = t->skel->progs.latch_from_guest;
	snprintf(why, sizeof(why), "%d rows differ, first %s", differ, first);
	report(n, "the variant for kernels before 6.2 gives every row the same verdict", !differ && same > 0, why,
	       NULL);
}

static void baseline_config(struct latch_config *c)
{
	memset(c, 0, sizeof(*c));
	c->abi_version = LATCH_ABI_VERSION;
	c->flags = LATCH_CFG_READY | LATCH_CFG_HAVE_IP4 | LATCH_CFG_HAVE_IP6 | LATCH_CFG_HAVE_RESOLVER4 |
		   LATCH_CFG_HAVE_RESOLVER6 | LATCH_CFG_HAVE_PREFIX4 | LATCH_CFG_HAVE_PREFIX6 | LATCH_CFG_HAVE_TIMED4 |
		   LATCH_CFG_HAVE_TIMED6;
	c->ifindex = 1;
	snprintf(c->ifname, sizeof(c->ifname), "latch-test");
	mac(GUEST_MAC, c->guest_mac);
	ip4(GUEST4, &c->guest_ip4);
	ip4(HOST4, &c->host_ip4);
	ip4(HOST4, &c->resolver_ip4); /* the resolver lives on the host address */
	ip6(GUEST6, c->guest_ip6);
	ip6(HOST6, c->host_ip6);
	ip6(HOST6, c->resolver_ip6);
	c->n_host_ports = 1;
	c->host_ports[0] = htons(HOST_SERVICE_PORT);
	c->dns_rate = DNS_RATE;
	c->dns_burst = DNS_BURST;
	c->event_rate = 1000;
	c->event_burst = 100;
}

int main(int argc, char **argv)
{
	struct tally n = { 0 };
	struct t t = { 0 };
	char why[256];
	int err;

	verbose = argc > 1 && !strcmp(argv[1], "-v");
	if (geteuid() != 0) {
		fprintf(stderr, "prog_table: needs root, skipping\n");
		return 77;
	}
	libbpf_set_print(libbpf_print);
	t.ncpus = libbpf_num_possible_cpus();
	if (t.ncpus <= 0) {
		fprintf(stderr, "prog_table: can't count CPUs\n");
		return 1;
	}
	/* verdicts must not depend on this host's routes: a namespace whose answers are known */
	if (latch_testnet_enter(test_locals, sizeof(test_locals) / sizeof(test_locals[0]), why, sizeof(why))) {
		fprintf(stderr, "prog_table: %s\n", why);
		return 1;
	}
	t.skel = latch_tc__open_and_load();
	if (!t.skel) {
		fprintf(stderr, "prog_table: loading latch_tc: %s\n", strerror(errno));
		return 1;
	}
	t.from_prog = t.skel->progs.latch_from_guest;
	t.rb = ring_buffer__new(bpf_map__fd(t.skel->maps.events), on_event, &t, NULL);
	if (!t.rb) {
		fprintf(stderr, "prog_table: ring buffer: %s\n", strerror(errno));
		latch_tc__destroy(t.skel);
		return 1;
	}
	baseline_config(&t.cfg);
	if (load_hellos()) {
		fprintf(stderr, "prog_table: cannot read tests/fixtures/tls/ (run from the source tree)\n");
		return 1;
	}

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		enum outcome o = run_row(&t, &table[i], why, sizeof(why));

		if (o == SKIPPED) {
			printf("skip %s: %s\n", table[i].name, why);
			n.skipped++;
		} else {
			report(&n, table[i].name, o == PASSED, why, table[i].bug);
		}
	}
	test_events(&t, &n);
	test_sni_event(&t, &n);
	test_nocsum_variant(&t, &n);

	if (n.skipped)
		printf("%d skipped\n", n.skipped);
	if (n.xfailed)
		printf("%d expected failures (known BPF bugs)\n", n.xfailed);
	printf("%d passed, %d failed\n", n.passed, n.failed);
	err = n.failed ? 1 : 0;
	ring_buffer__free(t.rb);
	latch_tc__destroy(t.skel);
	return err;
}
