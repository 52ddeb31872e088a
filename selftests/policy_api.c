// SPDX-License-Identifier: GPL-2.0-only
/*
 * policy_api.c - the loader's policy maps, judged by the pinned program.
 *
 * Invariant: what loader/policy.c writes is what the kernel enforces.  A
 * prefix's rules reach the more specific prefixes under it in whichever
 * order they were added and after either is revoked; a revoke cuts what it
 * named and nothing else; a timed entry dies at its deadline; a whole-policy
 * replace is live after one switch, keeps timed entries, and its collection
 * leaves only the live generation behind.
 *
 * Every verdict comes from the sandbox's own pinned latch_from_guest, run
 * with BPF_PROG_TEST_RUN on a crafted SYN, so a bookkeeping slip in user
 * space shows up as a wrong verdict.  The sandbox is attached to a veth in a
 * private network namespace this process makes (unshare), under a private
 * LATCH_BPFFS, and removed at the end.  Prints ok/FAIL lines and
 * `N passed, M failed`; exits 77 when not root.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/loader.h"

#define NAME "pol-api"
#define GUEST_MAC "02:00:00:00:00:02"
#define GUEST4 "192.0.2.2"

static int passed, failed;
static int prog_fd = -1;

static void check(const char *what, int ok)
{
	printf("%s %s\n", ok ? "ok" : "FAIL", what);
	if (ok)
		passed++;
	else
		failed++;
}

/*
 * A TCP SYN (or a UDP datagram: proto 17) of a new flow (a source port of
 * its own) from the guest to dst:port through the pinned program: 1 if it
 * passes.
 */
static int passes_proto(const char *dst, int port, int proto)
{
	static uint16_t next_sport = 40000;
	uint16_t sport = next_sport++;
	uint8_t f[54] = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f, .data_size_in = sizeof(f), .repeat = 1);

	memcpy(f, "\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00", 14);
	f[14] = 0x45;
	f[17] = 40; /* tot_len: 20 + a TCP header, or a UDP header and 12 bytes */
	f[22] = 64;
	f[23] = proto;
	inet_pton(AF_INET, GUEST4, f + 26);
	inet_pton(AF_INET, dst, f + 30);
	f[34] = sport >> 8;
	f[35] = sport & 0xff;
	f[36] = port >> 8;
	f[37] = port & 0xff;
	if (proto == 17) {
		f[39] = 20; /* UDP length */
	} else {
		f[46] = 5 << 4;
		f[47] = 0x02;
	}
	if (bpf_prog_test_run_opts(prog_fd, &o))
		return -1;
	return o.retval == 0;
}

static int passes(const char *dst, int port)
{
	return passes_proto(dst, port, 6);
}

static int udp_passes(const char *dst, int port)
{
	return passes_proto(dst, port, 17);
}

static struct latch_entry entry(const char *s)
{
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	if (latch_parse_entry(s, &e, err, sizeof(err))) {
		fprintf(stderr, "policy_api: %s\n", err);
		exit(1);
	}
	return e;
}

static int allow(struct latch_sandbox *sb, const char *s, uint64_t expires)
{
	struct latch_entry e = entry(s);
	char err[LATCH_ERR_MAX];

	return latch_policy_allow(sb, &e, expires, LATCH_ORIGIN_EGRESS, err, sizeof(err));
}

static int revoke_entry(struct latch_sandbox *sb, const char *s)
{
	struct latch_entry e = entry(s);
	char err[LATCH_ERR_MAX];

	return latch_policy_revoke(sb, &e, err, sizeof(err));
}

/* Keys of one generation in a map. */
static int count_gen(struct latch_sandbox *sb, enum latch_map_id id, __u32 gen)
{
	struct latch_exact4_key k, next;
	void *prev = NULL;
	int n = 0;

	while (bpf_map_get_next_key(latch_sandbox_map_fd(sb, id), prev, &next) == 0) {
		k = next;
		prev = &k;
		n += k.gen == gen;
	}
	return n;
}

static void test_prefixes(struct latch_sandbox *sb)
{
	/* the broader prefix first, then a narrower one with another port */
	check("allow 198.51.100.0/24:80", allow(sb, "198.51.100.0/24:80", 0) == 0);
	check("allow 198.51.100.128/25:8080", allow(sb, "198.51.100.128/25:8080", 0) == 0);
	check("inside the /25, the /24's port 80 still passes", passes("198.51.100.200", 80) == 1);
	check("inside the /25, its own 8080 passes", passes("198.51.100.200", 8080) == 1);
	check("outside the /25, 8080 is dropped", passes("198.51.100.10", 8080) == 0);
	check("revoke 198.51.100.0/24:80", revoke_entry(sb, "198.51.100.0/24:80") == 0);
	check("after the revoke, port 80 inside the /25 is dropped", passes("198.51.100.200", 80) == 0);
	check("after the revoke, the /25's 8080 still passes", passes("198.51.100.200", 8080) == 1);
	check("revoke 198.51.100.128/25:8080", revoke_entry(sb, "198.51.100.128/25:8080") == 0);

	/* the narrower first: the broader one must reach down into it */
	check("allow 203.0.113.64/26:22 first", allow(sb, "203.0.113.64/26:22", 0) == 0);
	check("then allow 203.0.113.0/24:443", allow(sb, "203.0.113.0/24:443", 0) == 0);
	check("inside the /26, the /24's 443 passes", passes("203.0.113.70", 443) == 1);
	check("inside the /26, its own 22 passes", passes("203.0.113.70", 22) == 1);
	check("outside the /26, 22 is dropped", passes("203.0.113.7", 22) == 0);

	/* an exact entry falls through to the prefix that covers it */
	check("allow 203.0.113.5:25 (exact)", allow(sb, "203.0.113.5:25", 0) == 0);
	check("the exact entry's 25 passes", passes("203.0.113.5", 25) == 1);
	check("the covering prefix's 443 passes for the exact address", passes("203.0.113.5", 443) == 1);
	check("revoking what was never allowed is refused", revoke_entry(sb, "203.0.113.5:26") == -ENOENT);
	check("revoke 203.0.113.0/24:443", revoke_entry(sb, "203.0.113.0/24:443") == 0);
	check("after it, 443 to the exact address is dropped", passes("203.0.113.5", 443) == 0);
	check("and the exact entry's 25 still passes", passes("203.0.113.5", 25) == 1);
}

static void test_timed(struct latch_sandbox *sb)
{
	uint64_t soon = latch_now_boot_ns() + 600000000ULL;

	check("allow 198.51.100.77:443 for 0.6 s", allow(sb, "198.51.100.77:443", soon) == 0);
	check("the timed entry passes before its deadline", passes("198.51.100.77", 443) == 1);
	usleep(800000);
	check("the timed entry is dropped after its deadline", passes("198.51.100.77", 443) == 0);
}

static void test_replace(struct latch_sandbox *sb)
{
	static const char *const a[] = { "198.51.100.1:443", "198.51.100.2:443", "198.51.100.0/28:853" };
	static const char *const b[] = { "198.51.100.3:443", "198.51.100.4:80,443/tcp" };
	struct latch_entry ea[3], eb[2];
	struct latch_config cfg;
	char err[LATCH_ERR_MAX];
	uint64_t hour = latch_now_boot_ns() + 3600ULL * 1000000000ULL;
	__u32 gen;

	for (int i = 0; i < 3; i++)
		ea[i] = entry(a[i]);
	for (int i = 0; i < 2; i++)
		eb[i] = entry(b[i]);
	check("a timed entry before the switches", allow(sb, "198.51.100.99:443", hour) == 0);
	check("replace with policy A", latch_policy_replace(sb, ea, 3, err, sizeof(err)) == 0);
	check("collect after A", latch_policy_gc(sb) == 0);
	check("A's entry passes", passes("198.51.100.2", 443) == 1);
	check("A's prefix entry passes", passes("198.51.100.9", 853) == 1);
	check("what came before A is gone", passes("203.0.113.5", 25) == 0);
	latch_sandbox_read_config(sb, &cfg);
	gen = cfg.policy_gen;
	check("replace with policy B", latch_policy_replace(sb, eb, 2, err, sizeof(err)) == 0);
	latch_sandbox_read_config(sb, &cfg);
	check("the switch flipped the generation", cfg.policy_gen == (gen ^ 1));
	check("B is live before the old generation is collected", passes("198.51.100.4", 80) == 1);
	check("A is dead before the old generation is collected", passes("198.51.100.2", 443) == 0);
	check("A's prefix is dead too", passes("198.51.100.9", 853) == 0);
	check("the timed entry survived the switch", passes("198.51.100.99", 443) == 1);
	check("the old generation is still there, marked idle",
	      count_gen(sb, LATCH_MAP_EXACT4, gen) == 2 && (cfg.flags & LATCH_CFG_IDLE_DIRTY));
	check("collect after B", latch_policy_gc(sb) == 0);
	latch_sandbox_read_config(sb, &cfg);
	check("only B's generation is left, and the mark is cleared",
	      count_gen(sb, LATCH_MAP_EXACT4, gen) == 0 && count_gen(sb, LATCH_MAP_EXACT4, gen ^ 1) == 2 &&
		      !(cfg.flags & LATCH_CFG_IDLE_DIRTY));
	check("B still passes after the collection", passes("198.51.100.3", 443) == 1);
	check("B's /tcp entry keeps UDP-only ports closed: port 22 dropped", passes("198.51.100.4", 22) == 0);
}

/*
 * A replace merges the entries of one address wherever they sit in the list,
 * also when the address's entries are thousands apart and the exact map is
 * written in several batches; an address with a 17th rule refuses the whole
 * replace, and what was live stays live.
 */
static void test_replace_grouped(struct latch_sandbox *sb)
{
	enum { ADDRS = 3000 };
	struct latch_entry *e = calloc(ADDRS + 100 + 17, sizeof(*e));
	struct latch_config cfg;
	char text[64], err[LATCH_ERR_MAX];
	int n = 0, ok = 1;

	if (!e) {
		check("memory for the grouped replace", 0);
		return;
	}
	/* 198.18.X.Y:1000+i, then a second port for every 30th address at the end */
	for (int i = 0; i < ADDRS; i++) {
		snprintf(text, sizeof(text), "198.18.%d.%d:%d", i / 250, 1 + i % 250, 1000 + i);
		e[n++] = entry(text);
	}
	for (int i = 0; i < ADDRS; i += 30) {
		snprintf(text, sizeof(text), "198.18.%d.%d:%d/udp", i / 250, 1 + i % 250, 5000 + i);
		e[n++] = entry(text);
	}
	check("replace with 3,100 entries on 3,000 addresses", latch_policy_replace(sb, e, n, err, sizeof(err)) == 0);
	latch_policy_gc(sb);
	latch_sandbox_read_config(sb, &cfg);
	check("one exact key per address", count_gen(sb, LATCH_MAP_EXACT4, cfg.policy_gen) == ADDRS);
	for (int i = 0; i < ADDRS; i += 299) {
		snprintf(text, sizeof(text), "198.18.%d.%d", i / 250, 1 + i % 250);
		ok &= passes(text, 1000 + i) == 1 && passes(text, 1001 + i) == 0;
	}
	check("the first rule of addresses across the batches passes, a neighbour's port does not", ok);
	ok = 1;
	for (int i = 0; i < ADDRS; i += 30 * 17) {
		snprintf(text, sizeof(text), "198.18.%d.%d", i / 250, 1 + i % 250);
		ok &= udp_passes(text, 5000 + i) == 1 && passes(text, 5000 + i) == 0 && passes(text, 1000 + i) == 1;
	}
	check("a second entry of the same address, 3,000 entries later, merged into its rules", ok);
	n = 0;
	for (int p = 0; p < 17; p++) {
		snprintf(text, sizeof(text), "198.51.100.66:%d", 2000 + p);
		e[n++] = entry(text);
	}
	e[n++] = entry("198.51.100.67:443");
	err[0] = 0;
	check("17 rules on one address refuse the replace",
	      latch_policy_replace(sb, e, n, err, sizeof(err)) != 0 && strstr(err, "more than 16 port rules"));
	check("... and the policy before it stays live",
	      passes("198.18.0.1", 1000) == 1 && passes("198.51.100.67", 443) == 0);
	free(e);
}

/*
 * A replace that does not fit beside the live generation (two generations
 * share LATCH_POLICY_MAX) fails part-way through its batches: it is refused
 * whole, the live policy keeps passing, and the idle generation is left
 * empty.
 */
static void test_replace_full(struct latch_sandbox *sb)
{
	const int n = LATCH_POLICY_MAX / 2 + 5000;
	struct latch_entry *e = calloc(n, sizeof(*e));
	struct latch_config cfg;
	char err[LATCH_ERR_MAX];
	__u32 gen;
	int rc;

	if (!e) {
		check("memory for the full replace", 0);
		return;
	}
	for (int i = 0; i < n; i++) { /* 198.18.0.0/15 holds 131,072 addresses */
		e[i].addr.family = AF_INET;
		e[i].addr.v4.s_addr = htonl(0xc6120000u + i);
		e[i].prefixlen = 32;
		e[i].proto = LATCH_PROTO_TCP;
		e[i].n_ports = 1;
		e[i].ports[0].lo = e[i].ports[0].hi = 443;
	}
	check("a replace of more than half the map's room, into an empty idle generation",
	      latch_policy_replace(sb, e, n, err, sizeof(err)) == 0 && latch_policy_gc(sb) == 0);
	latch_sandbox_read_config(sb, &cfg);
	gen = cfg.policy_gen;
	for (int i = 0; i < n; i++)
		e[i].ports[0].lo = e[i].ports[0].hi = 8443;
	err[0] = 0;
	rc = latch_policy_replace(sb, e, n, err, sizeof(err));
	check("the same again beside it does not fit, and says so", rc == -E2BIG && strstr(err, "do not fit"));
	latch_sandbox_read_config(sb, &cfg);
	check("... the live generation did not move", cfg.policy_gen == gen);
	check("... the live policy still passes", passes("198.18.0.7", 443) == 1 && passes("198.19.19.7", 443) == 1);
	check("... nothing of the refused one passes", passes("198.18.0.7", 8443) == 0);
	check("... and its partial batches were taken out again", count_gen(sb, LATCH_MAP_EXACT4, gen ^ 1) == 0);
	free(e);
}

/* A spec for latch_policy_switch. */
static struct latch_policy_spec spec(const char *s, uint64_t expires, int origin)
{
	return (struct latch_policy_spec){ .entry = entry(s), .expires_ns = expires, .origin = origin };
}

/*
 * A named-policy switch keeps each entry's deadline (host names and learned
 * answers expire in the kernel), a permanent rule beats a deadline on the
 * same address, `open` is set and cleared by the same update, a learned
 * answer never shortens what is there, and pruning takes only old answers.
 */
/* A resolver's answer: ADDR on TCP 443, learned with a deadline an hour from now. */
static int learn_for_an_hour(struct latch_sandbox *sb, const char *addr, char *err, size_t errlen)
{
	struct latch_entry e = { .addr = entry(addr).addr, .prefixlen = 32, .n_ports = 1, .ports = { { 443, 443 } } };

	return latch_policy_learn(sb, &e, latch_now_boot_ns() + 3600ULL * 1000000000ULL, LATCH_ORIGIN_LEARNED, err,
				  errlen);
}

static void test_switch(struct latch_sandbox *sb)
{
	uint64_t now = latch_now_boot_ns(), soon = now + 300000000ULL, hour = now + 3600ULL * 1000000000ULL;
	struct latch_policy_spec sp[] = {
		spec("198.51.100.50:443", soon, LATCH_ORIGIN_HOSTNAME),
		spec("198.51.100.51:443", soon, LATCH_ORIGIN_LEARNED),
		spec("198.51.100.51:443", 0, LATCH_ORIGIN_PROFILE),
		spec("198.51.100.52:443", hour, LATCH_ORIGIN_LEARNED),
	};
	struct latch_entry e = entry("198.51.100.52:443");
	struct latch_config cfg;
	char err[LATCH_ERR_MAX];

	check("switch to a policy with deadlines", latch_policy_switch(sb, sp, 4, false, err, sizeof(err)) == 0);
	latch_policy_gc(sb);
	check("a host-name entry passes before its ttl", passes("198.51.100.50", 443) == 1);
	check("switch to open", latch_policy_switch(sb, NULL, 0, true, err, sizeof(err)) == 0);
	latch_sandbox_read_config(sb, &cfg);
	check("open: the flag is set, and an unlisted address passes",
	      (cfg.flags & LATCH_CFG_OPEN) && passes("203.0.113.99", 8080) == 1);
	check("switch back", latch_policy_switch(sb, sp, 4, false, err, sizeof(err)) == 0);
	latch_policy_gc(sb);
	latch_sandbox_read_config(sb, &cfg);
	check("back from open: the flag is cleared, the unlisted address is dropped",
	      !(cfg.flags & LATCH_CFG_OPEN) && passes("203.0.113.99", 8080) == 0);
	check("a learned answer does not shorten an hour-long one",
	      latch_policy_learn(sb, &e, now + 1000000ULL, LATCH_ORIGIN_LEARNED, err, sizeof(err)) == 0);
	usleep(400 * 1000);
	check("the host-name entry is dead after its ttl", passes("198.51.100.50", 443) == 0);
	check("the permanent rule beat the deadline on the same address", passes("198.51.100.51", 443) == 1);
	check("the hour-long answer still passes", passes("198.51.100.52", 443) == 1);
	check("pruning takes the expired host-name rule and nothing else",
	      latch_policy_prune_resolved(sb, latch_now_boot_ns()) == 1 && passes("198.51.100.51", 443) == 1 &&
		      passes("198.51.100.52", 443) == 1);
	check("a learned answer on a fresh address passes",
	      learn_for_an_hour(sb, "198.51.100.53", err, sizeof(err)) == 0 && passes("198.51.100.53", 443) == 1 &&
		      passes("198.51.100.53", 80) == 0);
}

/*
 * Invariant: a full policy map takes a new learned answer by dropping the
 * learned answers already past their deadline, which stay in the map until
 * pruned: else a host that resolved more addresses than the map holds over
 * its life (latchd's own room: every upstream address it reached) could
 * learn nothing more.  Control: while every answer in it is live, a full
 * map refuses (fails closed), and a live answer survives the drop.
 */
static void test_full(struct latch_sandbox *sb)
{
	uint64_t start = latch_now_boot_ns(), deadline = start + 5ULL * 1000000000ULL;
	struct latch_entry e = entry("198.18.0.0:443");
	char err[LATCH_ERR_MAX] = "", what[160];
	int rc = 0, n = 0;

	/* 198.18.0.0/15 (RFC 2544's benchmark range) has as many addresses as the map has entries */
	for (uint32_t i = 0; i < 2 * LATCH_POLICY_MAX && !rc; i++, n++) {
		e.addr.v4.s_addr = htonl(0xc6120000u + (i % (2 * 65536)));
		rc = latch_policy_learn(sb, &e, deadline, LATCH_ORIGIN_LEARNED, err, sizeof(err));
	}
	snprintf(what, sizeof(what),
		 "a map full of live learned answers refuses the next one (E2BIG, after %d in %.1f s)", n - 1,
		 (latch_now_boot_ns() - start) / 1e9);
	/* what the test's other checks left in it, then this fill: the map's size, give or take those */
	check(what, rc == -E2BIG && n > LATCH_POLICY_MAX - 100 && !strstr(err, "port rules"));
	if (latch_now_boot_ns() >= deadline) {
		check("the map filled before its answers' deadline (5 s)", 0);
		return;
	}
	usleep((deadline - latch_now_boot_ns()) / 1000 + 100000);
	check("once they are past their deadline, a new answer is learned in the full map",
	      learn_for_an_hour(sb, "203.0.113.77", err, sizeof(err)) == 0 && passes("203.0.113.77", 443) == 1);
	check("control: an answer learned before them, still live, passes", passes("198.51.100.53", 443) == 1);
	check("control: the expired answers do not", passes("198.18.0.7", 443) == 0);
}

int main(void)
{
	char bpffs[64], err[LATCH_ERR_MAX], path[PATH_MAX];
	struct latch_sandbox_opts o = { .name = NAME,
					.ifname = "pa-host",
					.n_host_ports = 0,
					.dns_rate = 1,
					.dns_burst = 1,
					.event_rate = 10,
					.event_burst = 10 };
	struct latch_sandbox *sb;

	if (geteuid()) {
		printf("skip policy_api: needs root\n");
		return 77;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	libbpf_set_print(NULL);
	/* a private netns: the veth and everything on it vanish with this process */
	if (latch_testnet_enter(NULL, 0, err, sizeof(err)) ||
	    system("ip link add pa-host type veth peer name pa-guest && ip link set pa-host up"))
		return fprintf(stderr, "policy_api: cannot make the private netns and veth\n"), 1;
	/* a fresh host has no bpffs at /sys/fs/bpf yet: mount it there, as latch and lib.sh do */
	if (system("grep -qs ' /sys/fs/bpf bpf ' /proc/mounts || mount -t bpf bpf /sys/fs/bpf"))
		return fprintf(stderr, "policy_api: no bpffs at /sys/fs/bpf and mounting one failed\n"), 1;
	snprintf(bpffs, sizeof(bpffs), "/sys/fs/bpf/latch-polapi-%d", getpid());
	setenv("LATCH_BPFFS", bpffs, 1);
	mkdir(bpffs, 0700);
	latch_parse_mac(GUEST_MAC, o.guest_mac, NULL, 0);
	latch_parse_addr(GUEST4, &o.guest_ip4, NULL, 0);
	latch_parse_addr("192.0.2.1", &o.host_ip4, NULL, 0);
	o.resolver_ip4 = o.host_ip4;
	if (latch_sandbox_create(&o, err, sizeof(err))) {
		fprintf(stderr, "policy_api: %s\n", err);
		snprintf(path, sizeof(path), "%s/latch", bpffs); /* made before the load failed */
		rmdir(path);
		rmdir(bpffs);
		return 1;
	}
	sb = latch_sandbox_open(NAME, err, sizeof(err));
	snprintf(path, sizeof(path), "%s/latch/%s/prog_from_guest", bpffs, NAME);
	prog_fd = bpf_obj_get(path);
	if (!sb || prog_fd < 0) {
		fprintf(stderr, "policy_api: cannot open the pins\n");
		failed++;
	} else {
		check("default deny before any entry", passes("198.51.100.200", 80) == 0);
		test_prefixes(sb);
		test_timed(sb);
		test_replace(sb);
		test_replace_grouped(sb);
		test_replace_full(sb);
		test_switch(sb);
		test_full(sb);
	}
	latch_sandbox_free(sb);
	latch_sandbox_detach(NAME, err, sizeof(err));
	snprintf(path, sizeof(path), "%s/latch", bpffs);
	rmdir(path);
	rmdir(bpffs);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
