// SPDX-License-Identifier: GPL-2.0-only
/*
 * testrun.c - per-packet cost of latch_from_guest through BPF_PROG_TEST_RUN.
 *
 *   testrun [-d DST] [-p PORT] [-m MISS_ADDR] [-r REPS] [-n REPEAT] [-s PAIRS] LIST...
 *
 * For each LIST (lines "A.B.C.D PORT"; its length is the size reported), a
 * private copy of bpf/latch_tc.bpf.c is loaded from the skeleton (nothing is
 * pinned or attached), given a sandbox config (guest 02:00:00:00:00:02 /
 * 198.18.128.2, host address 198.18.128.254 so that DST is decided by the
 * policy; the process runs in a network namespace of its own, where DST is
 * routed, not local: latch_testnet_enter), and its exact4 map is filled with the list, one /32 with one port
 * each, exactly as latch_policy_replace writes them (latch_parse_entry +
 * latch_entry_rule + latch_rules_merge, generation 0).  Then, per rep, a
 * TCP SYN from the guest is run through latch_from_guest:
 *
 *   hit_cached   to DST:PORT, REPEAT times in one test run.  The first packet
 *                records a flow in flow4, so every later one takes the flow
 *                fast path (LATCH_PASS_FLOW): this is the steady state of an
 *                established flow.
 *   hit_policy   the first packet of a flow (LATCH_PASS_POLICY): flow4 lookup
 *                misses, exact4 is looked up, the rules checked and the flow
 *                stored.  One test run cannot repeat this (the first run
 *                stores the flow), so it is measured by difference: PAIRS
 *                times, the flow entry is deleted from user space and one
 *                packet run (repeat=1, takes the policy path), next to one
 *                repeat=1 run of the empty tc program on the same packet.  A
 *                repeat=1 figure carries the test-run framework's fixed cost
 *                (~100 ns of clock reads and setup, in steps of ~10 ns here);
 *                it is the same in both runs of a pair, so
 *                    hit_policy = tc_pass + median(policy_1 - empty_1),
 *                measured like tc_pass and hit_cached: the whole program.
 *                (An earlier version subtracted a repeat=1 run of latch's
 *                own flow path instead; that run alone moved by 50 ns from
 *                one loaded copy to the next, and with it the result.)
 *                The raw repeat=1 medians are printed too (hit_policy_r1,
 *                hit_cached_r1, tc_pass_r1).  The counters confirm which
 *                path was taken.
 *   port_miss    to DST:80 (address listed, port not) -> TC_ACT_SHOT
 *   addr_miss    to MISS_ADDR:PORT (in no list)        -> TC_ACT_SHOT
 *                Misses store no flow, so REPEAT runs are all alike; each one
 *                also pays deny_event, which after the event burst is the
 *                rate-limited (suppressed) path -- what a flood costs.
 *   addr_miss_noevents  the address miss with the config's event_rate at 0
 *                (diagnostic: what the deny-event rate limiter costs a drop)
 *   dns_cached   a UDP query to the resolver (the host address, port 53) on
 *                its recorded flow, REPEAT times (LATCH_PASS_DNS): the parse
 *                and the policy are skipped, the DNS bucket is charged each
 *                time (its rate set out of the run's reach meanwhile).
 *   sni_first    the first data of a name-checked flow (a learned rule for
 *                DST:443, the name recorded): curl's 517-byte ClientHello
 *                read and its name looked up, measured by difference as
 *                hit_policy is, the flow put back to waiting each pair.
 *   sni_cached   that flow's later packets, REPEAT times: a name-checked
 *                flow never enters flow_hot, so each takes the flow table.
 *   tc_pass      bench_progs' one-instruction tc program: the framework floor.
 *
 * Prints one line per measurement: "n=N case=CASE rep=R ns=NS".
 * Exits non-zero when a verdict or a counter is not what the case expects.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf/latch_abi.h"
#include "bpf/latch_tls.h"
#include "loader/loader.h"
#include "latch_tc.skel.h"
#include "bench_progs.skel.h"

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2
#define GUEST_MAC "\x02\x00\x00\x00\x00\x02"
#define GUEST_IP "198.18.128.2"
#define HOST_IP "198.18.128.254" /* not DST: DST is decided by the policy */
#define GUEST_PORT 40000

static const char *dst = "198.18.128.1", *miss = "198.19.7.1";
static int port = 5201, reps = 3, pairs = 20000;
static unsigned int repeat = 1000000;
static int ncpus;

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_DEBUG ? 0 : vfprintf(stderr, fmt, ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "testrun: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* Ethernet and an IPv4 header from the guest to daddr, for a frame of len bytes; returns the transport header. */
static uint8_t *eth_ip4(uint8_t *b, size_t len, uint8_t proto, const char *daddr)
{
	uint8_t *ip = b + 14;

	memset(b, 0, len);
	memcpy(b, "\x02\x00\x00\x00\x00\x01", 6);
	memcpy(b + 6, GUEST_MAC, 6);
	b[12] = 0x08;
	ip[0] = 0x45;
	ip[3] = len - 14;
	ip[6] = 0x40; /* DF */
	ip[8] = 64;
	ip[9] = proto;
	inet_pton(AF_INET, GUEST_IP, ip + 12);
	if (inet_pton(AF_INET, daddr, ip + 16) != 1)
		die("bad address %s", daddr);
	return ip + 20;
}

/* Ethernet + IPv4 + TCP SYN, 54 bytes. */
static size_t syn(uint8_t *b, const char *daddr, int dport)
{
	uint8_t *tcp = eth_ip4(b, 54, IPPROTO_TCP, daddr);

	tcp[0] = GUEST_PORT >> 8;
	tcp[1] = GUEST_PORT & 0xff;
	tcp[2] = dport >> 8;
	tcp[3] = dport & 0xff;
	tcp[7] = 1;
	tcp[12] = 5 << 4;
	tcp[13] = 0x02;
	tcp[14] = tcp[15] = 0xff;
	return 54;
}

/* Ethernet + IPv4 + UDP to the resolver (the host address) with a DNS query's 32 bytes, 74 bytes. */
static size_t dns_query(uint8_t *b)
{
	uint8_t *udp = eth_ip4(b, 74, IPPROTO_UDP, HOST_IP);

	udp[0] = GUEST_PORT >> 8;
	udp[1] = GUEST_PORT & 0xff;
	udp[3] = 53;
	udp[5] = 40;
	return 74;
}

/* One test run; returns the kernel's average ns per run, checks the verdict. */
static unsigned int run(int prog_fd, const uint8_t *pkt, size_t len, unsigned int rep, int want)
{
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = len, .repeat = rep);

	if (bpf_prog_test_run_opts(prog_fd, &o))
		die("BPF_PROG_TEST_RUN: %s", strerror(errno));
	if ((int)o.retval != want)
		die("verdict %u, expected %d", o.retval, want);
	return o.duration;
}

static uint64_t counter(struct latch_tc *s, int reason)
{
	struct latch_counter v[ncpus];
	__u32 slot = latch_counter_slot(reason, LATCH_DIR_FROM_GUEST);
	uint64_t sum = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(s->maps.counters), &slot, v))
		die("counters: %s", strerror(errno));
	for (int c = 0; c < ncpus; c++)
		sum += v[c].packets;
	return sum;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

static long median(long *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_long);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Fill exact4 (generation 0) from a list; returns the number of entries. */
static int fill(struct latch_tc *s, const char *path)
{
	FILE *f = fopen(path, "r");
	struct latch_exact4_key *keys = NULL;
	struct latch_rules *vals = NULL;
	char addr[64], text[96], err[LATCH_ERR_MAX];
	unsigned int p;
	int n = 0, cap = 0;

	if (!f)
		die("%s: %s", path, strerror(errno));
	while (fscanf(f, "%63s %u", addr, &p) == 2) {
		struct latch_entry e;
		struct latch_rule r;

		snprintf(text, sizeof(text), "%s:%u", addr, p);
		if (latch_parse_entry(text, &e, err, sizeof(err)) || e.addr.family != AF_INET || e.prefixlen != 32)
			die("%s: %s", text, err);
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			keys = realloc(keys, cap * sizeof(*keys));
			vals = realloc(vals, cap * sizeof(*vals));
			if (!keys || !vals)
				die("out of memory");
		}
		keys[n] = (struct latch_exact4_key){ .gen = 0, .addr = e.addr.v4.s_addr };
		memset(&vals[n], 0, sizeof(vals[n]));
		latch_entry_rule(&e, 0, 0, LATCH_ORIGIN_PROFILE, &r);
		latch_rules_merge(&vals[n], &r);
		n++;
	}
	fclose(f);
	__u32 count = n;
	if (n && bpf_map_update_batch(bpf_map__fd(s->maps.exact4), keys, vals, &count, NULL))
		die("exact4 batch update: %s (after %u)", strerror(errno), count);
	free(keys);
	free(vals);
	return n;
}

static void configure(struct latch_tc *s)
{
	struct latch_config c = { .abi_version = LATCH_ABI_VERSION };
	__u32 zero = 0;

	c.flags = LATCH_CFG_READY | LATCH_CFG_HAVE_IP4 | LATCH_CFG_HAVE_RESOLVER4;
	c.ifindex = 1;
	snprintf(c.ifname, sizeof(c.ifname), "bench0");
	memcpy(c.guest_mac, GUEST_MAC, 6);
	inet_pton(AF_INET, GUEST_IP, &c.guest_ip4);
	inet_pton(AF_INET, HOST_IP, &c.host_ip4);
	c.resolver_ip4 = c.host_ip4;
	c.dns_rate = LATCH_DEFAULT_DNS_RATE;
	c.dns_burst = LATCH_DEFAULT_DNS_BURST;
	c.event_rate = LATCH_DEFAULT_EVENT_RATE;
	c.event_burst = LATCH_DEFAULT_EVENT_BURST;
	if (bpf_map_update_elem(bpf_map__fd(s->maps.settings), &zero, &c, BPF_ANY))
		die("settings: %s", strerror(errno));
}

static void set_event_rate(struct latch_tc *s, __u32 rate)
{
	struct latch_config c;
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(s->maps.settings), &zero, &c))
		die("settings: %s", strerror(errno));
	c.event_rate = rate;
	if (bpf_map_update_elem(bpf_map__fd(s->maps.settings), &zero, &c, BPF_ANY))
		die("settings: %s", strerror(errno));
}

static void set_dns_rate(struct latch_tc *s, __u32 rate, __u32 burst)
{
	struct latch_config c;
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(s->maps.settings), &zero, &c))
		die("settings: %s", strerror(errno));
	c.dns_rate = rate;
	c.dns_burst = burst;
	if (bpf_map_update_elem(bpf_map__fd(s->maps.settings), &zero, &c, BPF_ANY))
		die("settings: %s", strerror(errno));
}

static void out(int n, const char *c, int rep, double ns)
{
	printf("n=%d case=%s rep=%d ns=%.1f\n", n, c, rep, ns);
	fflush(stdout);
}

struct size_ctx {
	struct latch_tc *s;
	int n;
};

static struct size_ctx setup(const char *path)
{
	struct size_ctx c;

	c.s = latch_tc__open_and_load();
	if (!c.s)
		die("cannot load latch_tc: %s", strerror(errno));
	configure(c.s);
	c.n = fill(c.s, path);
	return c;
}

/* Forget every CPU's last flow (flow_hot), so the next packet looks further. */
static void clear_flow_hot(const struct size_ctx *c)
{
	static struct latch_flow_hot *v;
	__u32 zero = 0;

	if (!v && !(v = calloc(ncpus, sizeof(*v))))
		die("out of memory");
	if (bpf_map_update_elem(bpf_map__fd(c->s->maps.flow_hot), &zero, v, 0))
		die("flow_hot clear: %s", strerror(errno));
}

/* The ClientHello the name-checked cases send: curl's, TLS 1.3, naming api.example.com (517 bytes). */
#define SNI_HELLO "tests/fixtures/tls/curl_tls13.bin"
#define SNI_NAME "api.example.com"

/* Ethernet + IPv4 + TCP (ACK, PSH) to daddr:443 carrying the ClientHello; its length. */
static size_t hello_segment(uint8_t *b, size_t cap, const char *daddr)
{
	uint8_t hello[2048], *tcp;
	FILE *f = fopen(SNI_HELLO, "rb");
	size_t n;

	if (!f)
		die("%s: %s (run from the top of the tree)", SNI_HELLO, strerror(errno));
	n = fread(hello, 1, sizeof(hello), f);
	fclose(f);
	if (54 + n > cap || 54 + n > 0xffff)
		die("%s: too long", SNI_HELLO);
	tcp = eth_ip4(b, 54 + n, IPPROTO_TCP, daddr);
	b[14 + 2] = (40 + n) >> 8;
	b[14 + 3] = (40 + n) & 0xff;
	tcp[0] = GUEST_PORT >> 8;
	tcp[1] = GUEST_PORT & 0xff;
	tcp[2] = 443 >> 8;
	tcp[3] = 443 & 0xff;
	tcp[12] = 5 << 4;
	tcp[13] = 0x18;
	tcp[14] = tcp[15] = 0xff;
	memcpy(tcp + 20, hello, n);
	return 54 + n;
}

/*
 * The resolver answered SNI_NAME with DST: a learned rule for TCP 443 beside
 * the list's rule, and the name recorded in the names map (loader/names.c).
 */
static void sni_answer(const struct size_ctx *c)
{
	struct latch_exact4_key k = { .gen = 0 };
	struct latch_name_key nk = { .port = 443, .family = 4 };
	struct latch_name nv = { .expires_ns = ~0ULL };
	struct latch_rule r = {
		.port_lo = 443, .port_hi = 443, .proto = LATCH_PROTO_TCP, .origin = LATCH_ORIGIN_LEARNED
	};
	struct latch_rules v;

	inet_pton(AF_INET, dst, &k.addr);
	if (bpf_map_lookup_elem(bpf_map__fd(c->s->maps.exact4), &k, &v))
		die("exact4: DST is not in the list");
	r.expires_ns = ~0ULL;
	latch_rules_merge(&v, &r);
	if (bpf_map_update_elem(bpf_map__fd(c->s->maps.exact4), &k, &v, BPF_ANY))
		die("exact4: %s", strerror(errno));
	memcpy(nk.addr, &k.addr, 4);
	nk.name_hash = 0;
	if (bpf_map_update_elem(bpf_map__fd(c->s->maps.names), &nk, &nv, BPF_ANY))
		die("names: %s", strerror(errno));
	nk.name_hash = latch_tls_hash(SNI_NAME, strlen(SNI_NAME));
	if (bpf_map_update_elem(bpf_map__fd(c->s->maps.names), &nk, &nv, BPF_ANY))
		die("names: %s", strerror(errno));
}

/*
 * Names all the way down: a name-checked flow's first data (its
 * ClientHello read and the name looked up), by difference as hit_policy
 * is (the flow put back to waiting before each pair), and its later
 * packets, which take the flow table (never flow_hot).
 */
static void bench_sni(const struct size_ctx *c, int r, int floor_fd, unsigned int floor_ns, long *diff)
{
	uint8_t seg[2048];
	size_t len = hello_segment(seg, sizeof(seg), dst);
	struct latch_flow4_key fk = { .remote_port = htons(443),
				      .local_port = htons(GUEST_PORT),
				      .proto = IPPROTO_TCP };
	struct latch_config cfg;
	struct latch_flow waiting = { .reason = LATCH_PASS_LEARNED, .sni = LATCH_FLOW_SNI_WAIT };
	int fd = bpf_program__fd(c->s->progs.latch_from_guest), flow_fd = bpf_map__fd(c->s->maps.flow4);
	__u32 zero = 0;
	uint64_t before;

	sni_answer(c);
	if (bpf_map_lookup_elem(bpf_map__fd(c->s->maps.settings), &zero, &cfg))
		die("settings: %s", strerror(errno));
	waiting.policy_version = cfg.policy_version;
	inet_pton(AF_INET, dst, &fk.remote_addr);
	before = counter(c->s, LATCH_PASS_FLOW);
	for (int i = 0; i < pairs; i++) {
		if (bpf_map_update_elem(flow_fd, &fk, &waiting, BPF_ANY))
			die("flow4: %s", strerror(errno));
		clear_flow_hot(c);
		diff[i] = -(long)run(floor_fd, seg, len, 1, TC_ACT_OK);
		diff[i] += run(fd, seg, len, 1, TC_ACT_OK);
	}
	if (counter(c->s, LATCH_PASS_FLOW) - before != (uint64_t)pairs)
		die("sni_first: the ClientHello was not passed once per pair");
	out(c->n, "sni_first", r, floor_ns + median(diff, pairs));
	before = counter(c->s, LATCH_PASS_FLOW);
	out(c->n, "sni_cached", r, run(fd, seg, len, repeat, TC_ACT_OK));
	if (counter(c->s, LATCH_PASS_FLOW) - before != repeat)
		die("sni_cached: not every packet took the flow path");
}

/* One rep of every case on one loaded copy. */
static void bench_rep(const struct size_ctx *c, int r, int floor_fd)
{
	static long *diff, *p1, *c1, *t1;
	uint8_t hit[64], pmiss[64], amiss[64];
	size_t len = syn(hit, dst, port);
	struct latch_flow4_key fk = { .remote_port = htons(port),
				      .local_port = htons(GUEST_PORT),
				      .proto = IPPROTO_TCP };
	int fd = bpf_program__fd(c->s->progs.latch_from_guest), flow_fd = bpf_map__fd(c->s->maps.flow4);
	uint64_t before;
	unsigned int cached;

	if (!diff) {
		diff = calloc(pairs, sizeof(long));
		p1 = calloc(pairs, sizeof(long));
		c1 = calloc(pairs, sizeof(long));
		t1 = calloc(pairs, sizeof(long));
		if (!diff || !p1 || !c1 || !t1)
			die("out of memory");
	}
	syn(pmiss, dst, 80);
	syn(amiss, miss, port);
	inet_pton(AF_INET, dst, &fk.remote_addr);

	unsigned int floor_ns = run(floor_fd, hit, len, repeat, TC_ACT_OK);

	out(c->n, "tc_pass", r, floor_ns);

	/* prime the flow, then the steady state */
	run(fd, hit, len, 1, TC_ACT_OK);
	before = counter(c->s, LATCH_PASS_FLOW);
	cached = run(fd, hit, len, repeat, TC_ACT_OK);
	if (counter(c->s, LATCH_PASS_FLOW) - before != repeat)
		die("hit_cached: not every packet took the flow path");
	out(c->n, "hit_cached", r, cached);

	before = counter(c->s, LATCH_PASS_POLICY);
	for (int i = 0; i < pairs; i++) {
		if (bpf_map_delete_elem(flow_fd, &fk) && errno != ENOENT)
			die("flow4 delete: %s", strerror(errno));
		clear_flow_hot(c);
		t1[i] = run(floor_fd, hit, len, 1, TC_ACT_OK);
		p1[i] = run(fd, hit, len, 1, TC_ACT_OK);
		c1[i] = run(fd, hit, len, 1, TC_ACT_OK);
		diff[i] = p1[i] - t1[i];
	}
	if (counter(c->s, LATCH_PASS_POLICY) - before != (uint64_t)pairs)
		die("hit_policy: the policy path was not taken once per pair");
	out(c->n, "hit_policy", r, floor_ns + median(diff, pairs));
	out(c->n, "hit_policy_r1", r, median(p1, pairs));
	out(c->n, "hit_cached_r1", r, median(c1, pairs));
	out(c->n, "tc_pass_r1", r, median(t1, pairs));

	before = counter(c->s, LATCH_DROP_POLICY);
	out(c->n, "port_miss", r, run(fd, pmiss, len, repeat, TC_ACT_SHOT));
	out(c->n, "addr_miss", r, run(fd, amiss, len, repeat, TC_ACT_SHOT));
	if (counter(c->s, LATCH_DROP_POLICY) - before != 2ull * repeat)
		die("misses: not every packet was dropped by the policy");

	/*
	 * Diagnostic: the same address miss with deny events switched off
	 * (event_rate 0: bucket_take returns before its spin lock and clock
	 * read).  The difference is what the event rate limiter costs a drop.
	 */
	set_event_rate(c->s, 0);
	out(c->n, "addr_miss_noevents", r, run(fd, amiss, len, repeat, TC_ACT_SHOT));
	set_event_rate(c->s, LATCH_DEFAULT_EVENT_RATE);

	/*
	 * A DNS query to the resolver on its recorded flow, REPEAT times: the
	 * bucket is charged every time (a rate the run can't reach, so that
	 * all pass); the policy is not asked.
	 */
	uint8_t q[80];
	size_t qlen = dns_query(q);

	set_dns_rate(c->s, 4000000000u, 4000000000u);
	run(fd, q, qlen, 1, TC_ACT_OK);
	before = counter(c->s, LATCH_PASS_DNS);
	out(c->n, "dns_cached", r, run(fd, q, qlen, repeat, TC_ACT_OK));
	if (counter(c->s, LATCH_PASS_DNS) - before != repeat)
		die("dns_cached: not every query passed as DNS");
	set_dns_rate(c->s, LATCH_DEFAULT_DNS_RATE, LATCH_DEFAULT_DNS_BURST);

	bench_sni(c, r, floor_fd, floor_ns, diff);
}

int main(int argc, char **argv)
{
	struct bench_progs *bp;
	int opt;

	while ((opt = getopt(argc, argv, "d:p:m:r:n:s:")) != -1) {
		switch (opt) {
		case 'd':
			dst = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'm':
			miss = optarg;
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'n':
			repeat = strtoul(optarg, NULL, 0);
			break;
		case 's':
			pairs = atoi(optarg);
			break;
		default:
			fprintf(stderr,
				"usage: %s [-d DST] [-p PORT] [-m MISS] [-r REPS] [-n REPEAT] [-s PAIRS] LIST...\n",
				argv[0]);
			return 2;
		}
	}
	if (optind >= argc || reps < 1 || pairs < 1 || repeat < 1)
		die("need at least one LIST, and positive -r, -n, -s");
	libbpf_set_print(quiet_print);
	ncpus = libbpf_num_possible_cpus();
	if (ncpus < 1)
		die("cannot count CPUs");
	{
		char err[LATCH_ERR_MAX];

		/* the policy path asks the routing whether DST is forwarded: known answers, not the host's */
		if (latch_testnet_enter(NULL, 0, err, sizeof(err)))
			die("%s", err);
	}
	bp = bench_progs__open_and_load();
	if (!bp)
		die("cannot load bench_progs: %s", strerror(errno));
	/*
	 * The reps go round all sizes (starting one further each rep) so that
	 * machine noise spreads over all of them, and every rep loads and fills
	 * a fresh copy: where the kernel happens to place one copy's program
	 * and map memory moved its first-packet figure by 50 ns, the same in
	 * every rep of that copy, which a median over reps of one copy can't
	 * take out.
	 */
	int nsz = argc - optind;

	for (int r = 1; r <= reps; r++)
		for (int i = 0; i < nsz; i++) {
			struct size_ctx c = setup(argv[optind + (i + r - 1) % nsz]);

			bench_rep(&c, r, bpf_program__fd(bp->progs.tc_pass));
			latch_tc__destroy(c.s);
		}
	bench_progs__destroy(bp);
	return 0;
}
