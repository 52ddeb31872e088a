// SPDX-License-Identifier: GPL-2.0-only
/*
 * verify.c - `latch verify`'s battery: frames a guest could send, built from
 * the sandbox's own config, and their verdicts read back from the kernel.
 *
 * Every attack stands beside a control that differs from it in the one
 * thing the attack tries: a spoofed source beside the same frame from the
 * guest's own, a DNS query to another server beside one to the resolver.
 * A control that does not pass makes its attack prove nothing, and is said
 * so; only an attack that passes is a leak.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <limits.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loader/hook.h"
#include "loader/policy.h"
#include "loader/verify.h"

#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_GRE 47
#define PROTO_ICMP6 58

/* Destinations no sandbox's policy should allow: documentation addresses kept for verify. */
#define DENIED4 "203.0.113.251"
#define DENIED6 "2001:db8:ffff::251"
#define OTHER_SRC4 "198.51.100.66"
static const uint8_t spoof_mac[6] = { 0x02, 0x00, 0x5e, 0x10, 0x00, 0x66 };

/* One frame, described. */
struct spec {
	int family; /* 4 or 6 */
	uint8_t smac[6], dmac[6];
	uint8_t saddr[16], daddr[16];
	uint8_t proto;
	uint16_t dport;
	uint16_t vlan; /* non-zero: an 802.1Q tag with this id */
	uint16_t frag; /* IPv4 frag_off, host order */
	uint8_t ihl; /* 0: 5 */
	uint16_t ethertype; /* non-zero: a bare frame of this type */
	uint8_t icmp6; /* ICMPv6 type (ND) */
	uint8_t target[16]; /* ND target */
};

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
}

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return ~s & 0xffff;
}

/* The transport part: a TCP SYN, a DNS query over UDP, an empty GRE header, an ND solicitation. */
static size_t build_l4(const struct spec *s, uint8_t *b)
{
	static const uint8_t query[] = { 0x4c, 0x56, 0x01, 0x00, 0,   1,   0,	0,   0,	  0,   0,   0,	 12,
					 'l',  'a',  't',  'c',	 'h', '-', 'v', 'e', 'r', 'i', 'f', 'y', 7,
					 'i',  'n',  'v',  'a',	 'l', 'i', 'd', 0,   0,	  1,   0,   1 };

	switch (s->proto) {
	case PROTO_TCP:
		memset(b, 0, 20);
		put16(b, 40123);
		put16(b + 2, s->dport);
		b[7] = 1;
		b[12] = 5 << 4;
		b[13] = 0x02; /* SYN */
		put16(b + 14, 64240);
		return 20;
	case PROTO_UDP:
		put16(b, 40123);
		put16(b + 2, s->dport);
		put16(b + 4, 8 + sizeof(query));
		put16(b + 6, 0);
		memcpy(b + 8, query, sizeof(query));
		return 8 + sizeof(query);
	case PROTO_ICMP6:
		memset(b, 0, 24);
		b[0] = s->icmp6;
		memcpy(b + 8, s->target, 16);
		return 24;
	default:
		memset(b, 0, 4);
		return 4;
	}
}

/* The L4 checksum over the pseudo header; the program ignores it, the host's stack does not. */
static void l4_checksum(const struct spec *s, uint8_t *l4, size_t len)
{
	int off = s->proto == PROTO_TCP ? 16 : s->proto == PROTO_UDP ? 6 : s->proto == PROTO_ICMP6 ? 2 : -1;
	uint8_t ph[40] = { 0 };
	size_t phl;
	uint16_t c;

	if (off < 0)
		return;
	if (s->family == 4) {
		memcpy(ph, s->saddr, 4);
		memcpy(ph + 4, s->daddr, 4);
		ph[9] = s->proto;
		put16(ph + 10, len);
		phl = 12;
	} else {
		memcpy(ph, s->saddr, 16);
		memcpy(ph + 16, s->daddr, 16);
		put16(ph + 34, len);
		ph[39] = s->proto;
		phl = 40;
	}
	c = fold(sum16(l4, len, sum16(ph, phl, 0)));
	put16(l4 + off, c || s->proto != PROTO_UDP ? c : 0xffff);
}

static size_t build(const struct spec *s, uint8_t *b)
{
	size_t off = 12, l4;

	memcpy(b, s->dmac, 6);
	memcpy(b + 6, s->smac, 6);
	if (s->vlan) {
		put16(b + off, 0x8100);
		put16(b + off + 2, s->vlan);
		off += 4;
	}
	if (s->ethertype) {
		put16(b + off, s->ethertype);
		memset(b + off + 2, 0, 46);
		return off + 48;
	}
	put16(b + off, s->family == 4 ? 0x0800 : 0x86dd);
	off += 2;
	if (s->family == 4) {
		uint8_t *ip = b + off;
		size_t hl = (s->ihl ? s->ihl : 5) * 4;

		memset(ip, 0, hl);
		memset(ip + 20, 1, hl - 20); /* NOP options */
		l4 = build_l4(s, ip + hl);
		ip[0] = 0x40 | (hl / 4);
		put16(ip + 2, hl + l4);
		put16(ip + 4, 0x4c56);
		put16(ip + 6, s->frag);
		ip[8] = 64;
		ip[9] = s->proto;
		memcpy(ip + 12, s->saddr, 4);
		memcpy(ip + 16, s->daddr, 4);
		put16(ip + 10, fold(sum16(ip, hl, 0)));
		l4_checksum(s, ip + hl, l4);
		return off + hl + l4;
	}
	uint8_t *ip6 = b + off;

	memset(ip6, 0, 40);
	l4 = build_l4(s, ip6 + 40);
	ip6[0] = 0x60;
	put16(ip6 + 4, l4);
	ip6[6] = s->proto;
	ip6[7] = s->proto == PROTO_ICMP6 ? 255 : 64;
	memcpy(ip6 + 8, s->saddr, 16);
	memcpy(ip6 + 24, s->daddr, 16);
	l4_checksum(s, ip6 + 40, l4);
	return off + 40 + l4;
}

static void addr_in(int family, const char *text, uint8_t *out)
{
	inet_pton(family == 4 ? AF_INET : AF_INET6, text, out);
}

struct battery {
	struct latch_verify_case *out;
	int max, n;
};

static void add(struct battery *b, const char *name, bool attack, bool policy_bound, int want, const struct spec *s)
{
	struct latch_verify_case *c;

	if (b->n >= b->max)
		return;
	c = &b->out[b->n++];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->attack = attack;
	c->policy_bound = policy_bound;
	c->want = want;
	c->len = build(s, c->frame);
	if (!s->vlan && !s->ethertype && !s->frag && (s->proto == PROTO_TCP || s->proto == PROTO_UDP))
		c->l4_off = ETH_HLEN + (s->family == 4 ? (s->ihl ? s->ihl : 5) * 4 : 40), c->l4_proto = s->proto;
}

void latch_verify_sport(struct latch_verify_case *c, uint16_t sport)
{
	uint8_t *l4 = c->frame + c->l4_off;
	uint8_t *ck = l4 + (c->l4_proto == PROTO_TCP ? 16 : 6);
	uint16_t old = (uint16_t)(l4[0] << 8 | l4[1]), sum = (uint16_t)(ck[0] << 8 | ck[1]);

	if (!c->l4_off)
		return;
	put16(l4, sport);
	/* RFC 1624: HC' = ~(~HC + ~m + m'); a UDP checksum never becomes 0 (none) */
	sum = fold((uint32_t)(uint16_t)~sum + (uint16_t)~old + sport);
	put16(ck, sum || c->l4_proto == PROTO_TCP ? sum : 0xffff);
}

/* An allowed IPv4 destination of the live policy with a closed port beside it, for "wrong port". */
struct allowed4 {
	bool found;
	uint8_t addr[4];
	uint16_t open_port, closed_port;
};

static int find_allowed4(const struct latch_policy_item *it, void *arg)
{
	struct allowed4 *a = arg;
	const struct latch_rule *r = &it->rule;

	if (a->found || it->entry.addr.family != AF_INET || it->entry.prefixlen != 32 || it->timed ||
	    r->proto != LATCH_PROTO_TCP || (r->port_lo == 0 && r->port_hi == 0xffff))
		return 0;
	a->found = true;
	memcpy(a->addr, &it->entry.addr.v4, 4);
	a->open_port = r->port_lo;
	a->closed_port = r->port_hi < 0xffff ? r->port_hi + 1 : r->port_lo - 1;
	return 0;
}

static void tap_mac(const char *ifname, uint8_t *mac)
{
	char path[128];
	unsigned int m[6];
	FILE *f;

	memset(mac, 0, 6);
	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifname);
	f = fopen(path, "r");
	if (f && fscanf(f, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6)
		for (int i = 0; i < 6; i++)
			mac[i] = m[i];
	if (f)
		fclose(f);
}

/* The IPv4 pairs: each attack after the control it varies. */
static void battery4(struct battery *b, const struct latch_config *cfg, const struct spec *base,
		     struct latch_sandbox *sb)
{
	struct allowed4 a = { 0 };
	struct spec s;
	uint16_t port = 22;

	add(b, "DNS to the resolver", false, false, LATCH_PASS_DNS, base);
	s = *base;
	memcpy(s.smac, spoof_mac, 6);
	add(b, "spoofed source MAC", true, false, LATCH_DROP_SPOOF_MAC, &s);
	s = *base;
	addr_in(4, OTHER_SRC4, s.saddr);
	if (!memcmp(s.saddr, &cfg->guest_ip4, 4))
		s.saddr[3]++;
	add(b, "spoofed source IPv4", true, false, LATCH_DROP_SPOOF_IP, &s);
	s = *base;
	s.vlan = 7;
	add(b, "802.1Q-tagged frame", true, false, LATCH_DROP_VLAN, &s);
	s = *base;
	s.frag = 0x2000;
	add(b, "IPv4 fragment", true, false, LATCH_DROP_FRAGMENT, &s);
	s = *base;
	s.ihl = 6;
	add(b, "IPv4 options", true, false, LATCH_DROP_IP_OPTIONS, &s);
	s = *base;
	addr_in(4, DENIED4, s.daddr);
	add(b, "DNS to another server", true, false, LATCH_DROP_DNS_NOT_RESOLVER, &s);
	s = *base;
	addr_in(4, DENIED4, s.daddr);
	s.proto = PROTO_GRE;
	add(b, "GRE tunnel", true, false, LATCH_DROP_PROTO, &s);
	s = *base;
	s.ethertype = 0x88b5;
	add(b, "unknown ethertype", true, false, LATCH_DROP_ETHERTYPE, &s);

	/* the policy's own: a denied address and port, beside what it allows */
	latch_policy_list(sb, find_allowed4, &a);
	s = *base;
	s.proto = PROTO_TCP;
	if (a.found) {
		memcpy(s.daddr, a.addr, 4);
		s.dport = a.open_port;
		add(b, "an allowed IPv4 destination", false, false, LATCH_PASS_POLICY, &s);
		s.dport = a.closed_port;
		add(b, "an allowed address on another port", true, true, LATCH_DROP_POLICY, &s);
	} else {
		add(b, "DNS to the resolver", false, false, LATCH_PASS_DNS, base);
	}
	addr_in(4, DENIED4, s.daddr);
	s.dport = 9;
	add(b, "denied IPv4 destination", true, true, LATCH_DROP_POLICY, &s);

	/* the host address: a port that is no service, beside one that is */
	for (int i = 0; i < cfg->n_host_ports && i < LATCH_HOST_PORTS_MAX; i++)
		if (ntohs(cfg->host_ports[i]) == port)
			port = 23;
	s = *base;
	s.proto = PROTO_TCP;
	memcpy(s.daddr, &cfg->host_ip4, 4);
	if (cfg->n_host_ports) {
		s.dport = ntohs(cfg->host_ports[0]);
		add(b, "a host service", false, false, LATCH_PASS_HOST_SERVICE, &s);
	} else {
		add(b, "DNS to the resolver", false, false, LATCH_PASS_DNS, base);
	}
	s.dport = port;
	add(b, "a host port that is no service", true, false, LATCH_DROP_HOST_PORT, &s);
}

static void battery6(struct battery *b, const struct latch_config *cfg, const struct spec *base6)
{
	struct spec s = *base6;

	/* ND to the host, and the same solicitation sent off the link */
	s.proto = PROTO_ICMP6;
	s.icmp6 = 135;
	memcpy(s.daddr, cfg->host_ip6, 16);
	memcpy(s.target, cfg->host_ip6, 16);
	add(b, "ND solicitation to the host", false, false, LATCH_PASS_ND, &s);
	addr_in(6, DENIED6, s.daddr);
	add(b, "ND solicitation off the link", true, false, LATCH_DROP_ND, &s);
	s = *base6;
	if (cfg->flags & LATCH_CFG_HAVE_RESOLVER6) {
		add(b, "DNS to the IPv6 resolver", false, false, LATCH_PASS_DNS, &s);
	} else {
		s.proto = PROTO_ICMP6;
		s.icmp6 = 135;
		memcpy(s.daddr, cfg->host_ip6, 16);
		memcpy(s.target, cfg->host_ip6, 16);
		add(b, "ND solicitation to the host", false, false, LATCH_PASS_ND, &s);
		s = *base6;
	}
	s.proto = PROTO_TCP;
	addr_in(6, DENIED6, s.daddr);
	s.dport = 9;
	add(b, "denied IPv6 destination", true, true, LATCH_DROP_POLICY, &s);
}

int latch_verify_battery(const struct latch_sandbox *sb, struct latch_verify_case *out, int max, char *err,
			 size_t errlen)
{
	struct battery b = { .out = out, .max = max };
	struct latch_config cfg;
	struct spec base = { 0 };

	if (latch_sandbox_read_config(sb, &cfg))
		return latch_errf(err, errlen, -EIO, "cannot read the config of '%s'", latch_sandbox_name(sb));
	memcpy(base.smac, cfg.guest_mac, 6);
	tap_mac(cfg.ifname, base.dmac);
	base.proto = PROTO_UDP;
	base.dport = 53;
	if ((cfg.flags & LATCH_CFG_HAVE_IP4) && (cfg.flags & LATCH_CFG_HAVE_RESOLVER4)) {
		base.family = 4;
		memcpy(base.saddr, &cfg.guest_ip4, 4);
		memcpy(base.daddr, &cfg.resolver_ip4, 4);
		/* latch_policy_list reads the maps only: the cast drops a const the API lacks */
		battery4(&b, &cfg, &base, (struct latch_sandbox *)sb);
	}
	if (cfg.flags & LATCH_CFG_HAVE_IP6) {
		base.family = 6;
		memcpy(base.saddr, cfg.guest_ip6, 16);
		memcpy(base.daddr, cfg.resolver_ip6, 16);
		battery6(&b, &cfg, &base);
	}
	if (!b.n)
		return latch_errf(err, errlen, -EINVAL,
				  "'%s' has no IPv4 resolver and no IPv6 address: nothing to verify",
				  latch_sandbox_name(sb));
	return b.n;
}

/*
 * Could c's frame be counted under reason?  ARP and ND are told apart by the
 * frame's outer ethertype.  And what the frame brings back makes the guest's
 * own stack answer in the same window: an ICMP error (drop_proto) for a
 * reply to a port it has no socket on, a RST (pass_flow) for a SYN-ACK.  A
 * plain TCP or UDP frame is never counted under drop_proto itself, nor a
 * control's SYN, sent from a port no earlier try used, under pass_flow (an
 * attack's window keeps every pass reason: a leak is never hidden).
 */
static bool frame_may_count(const struct latch_verify_case *c, int reason)
{
	uint16_t type = c && c->len >= 14 ? (uint16_t)(c->frame[12] << 8 | c->frame[13]) : 0;

	if (!c || c->len < 14)
		return true;
	if (reason == LATCH_DROP_PROTO && c->l4_off)
		return false;
	if (reason == LATCH_PASS_FLOW && c->l4_off && c->l4_proto == PROTO_TCP && !c->attack)
		return false;
	if (reason == LATCH_PASS_ARP || reason == LATCH_DROP_ARP)
		return type == ETH_P_ARP;
	if (reason == LATCH_PASS_ND || reason == LATCH_DROP_ND)
		return type == ETH_P_IPV6;
	return true;
}

void latch_verify_diff(const struct latch_counter *before, const struct latch_counter *after,
		       const struct latch_verify_case *c, struct latch_verify_seen *seen)
{
	uint64_t packets = 0;

	seen->n = 0;
#define LATCH_VERIFY_GREW(id, code, name, text)                                                      \
	do {                                                                                         \
		int slot = latch_counter_slot(LATCH_##id, LATCH_DIR_FROM_GUEST);                     \
		if (frame_may_count(c, LATCH_##id) && after[slot].packets != before[slot].packets) { \
			packets += after[slot].packets - before[slot].packets;                       \
			if (seen->n < 4)                                                             \
				seen->reason[seen->n++] = LATCH_##id;                                \
		}                                                                                    \
	} while (0);
	LATCH_REASONS(LATCH_VERIFY_GREW)
#undef LATCH_VERIFY_GREW
	seen->noisy = packets != 1;
}

int latch_verify_testrun(const struct latch_sandbox *sb, const struct latch_verify_case *c,
			 struct latch_verify_seen *seen)
{
	static struct latch_counter before[LATCH_COUNTER_SLOTS], after[LATCH_COUNTER_SLOTS];
	struct __sk_buff ctx = { 0 };
	struct latch_config cfg;
	char path[PATH_MAX];
	int fd, r;

	memset(seen, 0, sizeof(*seen));
	seen->verdict = -1;
	if (latch_sandbox_read_config(sb, &cfg))
		return -EIO;
	/* as if it arrived on the sandbox's device: its routes and forwarding decide the host-address check */
	ctx.ifindex = if_nametoindex(cfg.ifname);
	if (!ctx.ifindex)
		return -ENODEV;
	if (latch_pin_path(latch_sandbox_name(sb), latch_prog_pin_names[LATCH_DIR_FROM_GUEST], path, sizeof(path)))
		return -ENAMETOOLONG;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = c->frame, .data_size_in = c->len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = 1);
	r = latch_sandbox_counters(sb, before);
	if (!r)
		r = bpf_prog_test_run_opts(fd, &o) ? -errno : 0;
	close(fd);
	if (!r)
		r = latch_sandbox_counters(sb, after);
	if (r)
		return r;
	seen->verdict = o.retval;
	latch_verify_diff(before, after, c, seen);
	return 0;
}

static bool has(const struct latch_verify_seen *s, int reason)
{
	for (int i = 0; i < s->n; i++)
		if (s->reason[i] == reason)
			return true;
	return false;
}

static bool any_pass(const struct latch_verify_seen *s)
{
	for (int i = 0; i < s->n; i++)
		if (s->reason[i] > 0)
			return true;
	return false;
}

enum latch_verify_result latch_verify_judge(const struct latch_verify_case *c, const struct latch_verify_seen *seen,
					    bool open)
{
	/*
	 * Offline the program's verdict decides.  Live, the counters do, and
	 * only a window in which exactly one packet was counted: the frame
	 * alone.  A noisy window proves nothing either way (the caller tries
	 * again), so it can never be called a leak.
	 */
	bool passed = seen->verdict >= 0 ? seen->verdict == 0 : !seen->noisy && any_pass(seen);
	bool stopped = seen->verdict >= 0 ? seen->verdict != 0 : !seen->noisy && seen->n && !any_pass(seen);

	if (!c->attack)
		return passed ? LATCH_VERIFY_OK : stopped ? LATCH_VERIFY_CONTROL_FAIL : LATCH_VERIFY_UNSEEN;
	if (stopped)
		return LATCH_VERIFY_OK;
	if (passed)
		return open && c->policy_bound && has(seen, LATCH_PASS_OPEN) ? LATCH_VERIFY_UNCONTAINED :
									       LATCH_VERIFY_LEAK;
	return LATCH_VERIFY_UNSEEN;
}

const char *latch_verify_result_name(enum latch_verify_result r)
{
	switch (r) {
	case LATCH_VERIFY_OK:
		return "ok";
	case LATCH_VERIFY_LEAK:
		return "FAIL";
	case LATCH_VERIFY_UNCONTAINED:
		return "UNCONTAINED";
	case LATCH_VERIFY_CONTROL_FAIL:
		return "control-failed";
	case LATCH_VERIFY_NOT_TRIED:
		return "not-tried";
	default:
		return "unseen";
	}
}
