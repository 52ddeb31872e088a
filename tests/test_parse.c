// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_parse.c - the words an operator types, checked by common/addr.c and
 * loader/entry.c.
 *
 * Everything a sandbox name, MAC, address, port list or egress entry may be
 * is accepted here, and the near misses an operator is likely to type are
 * refused with a message that names what was typed.  An entry must also
 * survive being printed and read back, because `show` output is what people
 * paste into the next command.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "loader/loader.h"

/* A refusal is -EINVAL with a non-empty message that quotes the input. */
static void expect_refused(int rc, const char *input, const char *err)
{
	cr_expect_eq(rc, -EINVAL, "'%s' should be refused with -EINVAL, got %d", input, rc);
	if (rc != -EINVAL)
		return;
	cr_expect_neq(err[0], '\0', "refusing '%s' left no message", input);
	cr_expect_not_null(strstr(err, input), "message for '%s' does not name it: %s", input, err);
}

static void expect_v4(const struct latch_addr *a, const char *text)
{
	struct in_addr want;

	cr_assert_eq(inet_pton(AF_INET, text, &want), 1);
	cr_expect_eq(a->family, AF_INET, "%s: family %d", text, a->family);
	cr_expect_eq(a->v4.s_addr, want.s_addr, "%s: wrong address bytes", text);
}

static void expect_v6(const struct latch_addr *a, const char *text)
{
	struct in6_addr want;

	cr_assert_eq(inet_pton(AF_INET6, text, &want), 1);
	cr_expect_eq(a->family, AF_INET6, "%s: family %d", text, a->family);
	cr_expect_arr_eq(a->v6.s6_addr, want.s6_addr, 16, "%s: wrong address bytes", text);
}

/* ---- sandbox names: they become bpffs directories, so no '/', '..' or '_' */

Test(name, accepts_1_to_32_chars_of_lowercase_digits_and_dash)
{
	static const char *const ok[] = {
		"a", "0", "-", "web", "web-1", "ci-runner-42", "abcdefghijklmnopqrstuvwxyz012345", /* 32 */
	};
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		cr_expect_eq(latch_parse_name(ok[i], err, sizeof(err)), 0, "'%s' refused: %s", ok[i], err);
}

Test(name, refuses_uppercase_underscore_slash_and_dots)
{
	static const char *const bad[] = { "Web", "WEB", "web_1", "web/1", "/", "..", "../etc", "a.b", "web 1", "wéb" };
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_name(bad[i], err, sizeof(err)), bad[i], err);
	}
}

Test(name, refuses_empty_and_33_chars)
{
	const char *const long33 = "abcdefghijklmnopqrstuvwxyz0123456";
	char err[LATCH_ERR_MAX] = "";

	cr_assert_eq(strlen(long33), LATCH_NAME_MAX + 1);
	expect_refused(latch_parse_name(long33, err, sizeof(err)), long33, err);
	err[0] = '\0';
	cr_expect_eq(latch_parse_name("", err, sizeof(err)), -EINVAL);
	cr_expect_neq(err[0], '\0', "empty name refused without a message");
}

/* ---- MACs: the guest's unicast address, written 52:54:00:12:34:56 */

Test(mac, accepts_unicast_colon_form_in_either_case)
{
	static const uint8_t want[6] = { 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef };
	uint8_t mac[6];
	char err[LATCH_ERR_MAX];

	cr_assert_eq(latch_parse_mac("52:54:00:ab:cd:ef", mac, err, sizeof(err)), 0, "%s", err);
	cr_expect_arr_eq(mac, want, 6);
	memset(mac, 0, sizeof(mac));
	cr_assert_eq(latch_parse_mac("52:54:00:AB:CD:EF", mac, err, sizeof(err)), 0, "%s", err);
	cr_expect_arr_eq(mac, want, 6);
}

Test(mac, refuses_other_forms)
{
	static const char *const bad[] = {
		"",
		"52:54:00:12:34",
		"52:54:00:12:34:56:78",
		"52-54-00-12-34-56",
		"5254.0012.3456",
		"525400123456",
		"52:54:00:12:34:5g",
		"52:54:00:12:34:567",
		"52:54:00:12:34:56 ",
		"52:54:0:12:34:56",
		"g2:54:00:12:34:56",
	};
	uint8_t mac[6];
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_mac(bad[i], mac, err, sizeof(err)), bad[i], err);
	}
}

/* Each octet is two hex digits: no sign, no blank, no 0x. */
Test(mac, refuses_signs_blanks_and_0x_inside_octets)
{
	static const char *const bad[] = {
		"+2:54:00:12:34:56", "52:54:00:12:34:-6", "52:54:00:12:34:+6",
		" 2:54:00:12:34:56", "52: 4:00:12:34:56", "0x:54:00:12:34:56",
	};
	uint8_t mac[6];
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_mac(bad[i], mac, err, sizeof(err)), bad[i], err);
	}
}

Test(mac, refuses_multicast_and_broadcast)
{
	static const char *const bad[] = { "01:00:5e:00:00:01", "33:33:00:00:00:01", "ff:ff:ff:ff:ff:ff",
					   "53:54:00:12:34:56" };
	uint8_t mac[6];
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_mac(bad[i], mac, err, sizeof(err)), bad[i], err);
		cr_expect_not_null(strstr(err, "multicast"), "'%s': %s", bad[i], err);
	}
}

/* ---- addresses */

Test(addr, parses_ipv4_in_network_order)
{
	struct latch_addr a;
	char err[LATCH_ERR_MAX];

	cr_assert_eq(latch_parse_addr("203.0.113.7", &a, err, sizeof(err)), 0, "%s", err);
	expect_v4(&a, "203.0.113.7");
	cr_expect_eq(a.bytes[0], 203);
	cr_expect_eq(a.bytes[3], 7);
}

Test(addr, parses_ipv6_including_mapped_v4_as_v6)
{
	static const char *const ok[] = {
		"2001:db8::1", "::1", "::", "fe80::1", "::ffff:192.0.2.1", "2001:0DB8:0000:0000:0000:0000:0000:0001"
	};
	struct latch_addr a;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_assert_eq(latch_parse_addr(ok[i], &a, err, sizeof(err)), 0, "'%s' refused: %s", ok[i], err);
		expect_v6(&a, ok[i]);
	}
}

Test(addr, refuses_non_addresses)
{
	static const char *const bad[] = { "203.0.113",	    "203.0.113.256", "203.0.113.7/32", "2001:db8:::1",
					   "[2001:db8::1]", "example.com",   " 203.0.113.7",   "2001:db8::g" };
	struct latch_addr a;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_addr(bad[i], &a, err, sizeof(err)), bad[i], err);
	}
	err[0] = '\0';
	cr_expect_eq(latch_parse_addr("", &a, err, sizeof(err)), -EINVAL);
	cr_expect_neq(err[0], '\0');
}

/* ---- ports */

Test(port, accepts_1_to_65535)
{
	uint16_t p = 0;
	char err[LATCH_ERR_MAX];

	cr_expect_eq(latch_parse_port("1", &p, err, sizeof(err)), 0);
	cr_expect_eq(p, 1);
	cr_expect_eq(latch_parse_port("443", &p, err, sizeof(err)), 0);
	cr_expect_eq(p, 443);
	cr_expect_eq(latch_parse_port("65535", &p, err, sizeof(err)), 0);
	cr_expect_eq(p, 65535);
}

Test(port, refuses_zero_out_of_range_negative_and_trailing_junk)
{
	static const char *const bad[] = { "0",	  "65536", "70000", "-1",	  "80x",
					   " 80", "+80",   "0x50",  "4294967297", "99999999999999999999" };
	uint16_t p = 7;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_port(bad[i], &p, err, sizeof(err)), bad[i], err);
		cr_expect_eq(p, 7, "'%s' wrote the port though refused", bad[i]);
	}
	err[0] = '\0';
	cr_expect_eq(latch_parse_port("", &p, err, sizeof(err)), -EINVAL);
	cr_expect_neq(err[0], '\0');
}

/* ---- port lists */

Test(ports, single_port_is_a_range_of_one)
{
	struct latch_port_range r[LATCH_RULES_MAX];
	int n = -1;
	char err[LATCH_ERR_MAX];

	cr_assert_eq(latch_parse_ports("443", r, LATCH_RULES_MAX, &n, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(n, 1);
	cr_expect_eq(r[0].lo, 443);
	cr_expect_eq(r[0].hi, 443);
}

Test(ports, comma_list_and_ranges_keep_their_order)
{
	struct latch_port_range r[LATCH_RULES_MAX];
	int n = -1;
	char err[LATCH_ERR_MAX];

	cr_assert_eq(latch_parse_ports("80,443,8000-8100,53-53,1-65535", r, LATCH_RULES_MAX, &n, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(n, 5);
	cr_expect(r[0].lo == 80 && r[0].hi == 80);
	cr_expect(r[1].lo == 443 && r[1].hi == 443);
	cr_expect(r[2].lo == 8000 && r[2].hi == 8100);
	cr_expect(r[3].lo == 53 && r[3].hi == 53);
	cr_expect(r[4].lo == 1 && r[4].hi == 65535);
}

Test(ports, backwards_range_refused_with_the_right_order_suggested)
{
	struct latch_port_range r[LATCH_RULES_MAX];
	int n;
	char err[LATCH_ERR_MAX] = "";

	expect_refused(latch_parse_ports("8100-8000", r, LATCH_RULES_MAX, &n, err, sizeof(err)), "8100-8000", err);
	cr_expect_not_null(strstr(err, "8000-8100"), "no fix suggested: %s", err);
}

Test(ports, more_parts_than_max_refused)
{
	struct latch_port_range r[LATCH_RULES_MAX + 1];
	char list[256] = "", err[LATCH_ERR_MAX] = "";
	int n;

	for (int i = 0; i < LATCH_RULES_MAX; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%d", i ? "," : "", 1000 + i);
	cr_assert_eq(latch_parse_ports(list, r, LATCH_RULES_MAX, &n, err, sizeof(err)), 0, "%d parts: %s",
		     LATCH_RULES_MAX, err);
	cr_expect_eq(n, LATCH_RULES_MAX);

	strcat(list, ",2000");
	err[0] = '\0';
	expect_refused(latch_parse_ports(list, r, LATCH_RULES_MAX, &n, err, sizeof(err)), list, err);

	err[0] = '\0';
	expect_refused(latch_parse_ports("1,2,3", r, 2, &n, err, sizeof(err)), "1,2,3", err);
}

Test(ports, empty_or_malformed_list_refused)
{
	static const char *const bad[] = { ",", ",,", "80-", "-80", "1-2-3", "0-80", "80-70000", "80;443", "http" };
	struct latch_port_range r[LATCH_RULES_MAX];
	char err[LATCH_ERR_MAX];
	int n;

	err[0] = '\0';
	cr_expect_eq(latch_parse_ports("", r, LATCH_RULES_MAX, &n, err, sizeof(err)), -EINVAL);
	cr_expect_neq(err[0], '\0', "empty list refused without a message");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		cr_expect_eq(latch_parse_ports(bad[i], r, LATCH_RULES_MAX, &n, err, sizeof(err)), -EINVAL,
			     "'%s' accepted", bad[i]);
		cr_expect_neq(err[0], '\0', "'%s' refused without a message", bad[i]);
	}
}

/* ---- entries: ADDR|CIDR[:PORTS][/tcp|udp|icmp] */

static void parse_ok(const char *s, struct latch_entry *e)
{
	char err[LATCH_ERR_MAX] = "";

	cr_assert_eq(latch_parse_entry(s, e, err, sizeof(err)), 0, "'%s' refused: %s", s, err);
}

Test(entry, v4_address_is_a_32_bit_prefix_any_proto_any_port)
{
	struct latch_entry e;

	parse_ok("203.0.113.7", &e);
	expect_v4(&e.addr, "203.0.113.7");
	cr_expect_eq(e.prefixlen, 32);
	cr_expect_eq(e.proto, LATCH_PROTO_ANY);
	cr_expect_eq(e.n_ports, 0);
}

Test(entry, v4_address_with_ports)
{
	struct latch_entry e;

	parse_ok("203.0.113.7:443,8000-8100", &e);
	expect_v4(&e.addr, "203.0.113.7");
	cr_expect_eq(e.prefixlen, 32);
	cr_expect_eq(e.proto, LATCH_PROTO_ANY);
	cr_assert_eq(e.n_ports, 2);
	cr_expect(e.ports[0].lo == 443 && e.ports[0].hi == 443);
	cr_expect(e.ports[1].lo == 8000 && e.ports[1].hi == 8100);
}

Test(entry, v4_cidr_with_ports_and_proto)
{
	struct latch_entry e;

	parse_ok("203.0.113.0/24:443/tcp", &e);
	expect_v4(&e.addr, "203.0.113.0");
	cr_expect_eq(e.prefixlen, 24);
	cr_expect_eq(e.proto, LATCH_PROTO_TCP);
	cr_assert_eq(e.n_ports, 1);
	cr_expect(e.ports[0].lo == 443 && e.ports[0].hi == 443);

	parse_ok("0.0.0.0/0/UDP", &e);
	cr_expect_eq(e.prefixlen, 0);
	cr_expect_eq(e.proto, LATCH_PROTO_UDP);
	cr_expect_eq(e.n_ports, 0);
}

Test(entry, v6_bare_address_and_cidr)
{
	struct latch_entry e;

	parse_ok("2001:db8::1", &e);
	expect_v6(&e.addr, "2001:db8::1");
	cr_expect_eq(e.prefixlen, 128);
	cr_expect_eq(e.proto, LATCH_PROTO_ANY);
	cr_expect_eq(e.n_ports, 0);

	parse_ok("2001:db8::/32", &e);
	expect_v6(&e.addr, "2001:db8::");
	cr_expect_eq(e.prefixlen, 32);
	cr_expect_eq(e.n_ports, 0);

	parse_ok("2001:db8::/32/udp", &e);
	cr_expect_eq(e.prefixlen, 32);
	cr_expect_eq(e.proto, LATCH_PROTO_UDP);
}

Test(entry, bracketed_v6_address_with_ports)
{
	struct latch_entry e;

	parse_ok("[2001:db8::1]:443", &e);
	expect_v6(&e.addr, "2001:db8::1");
	cr_expect_eq(e.prefixlen, 128);
	cr_expect_eq(e.proto, LATCH_PROTO_ANY);
	cr_assert_eq(e.n_ports, 1);
	cr_expect(e.ports[0].lo == 443 && e.ports[0].hi == 443);

	parse_ok("[2001:db8::1]", &e);
	expect_v6(&e.addr, "2001:db8::1");
	cr_expect_eq(e.n_ports, 0);
}

Test(entry, bracketed_v6_cidr_with_ports_and_proto)
{
	struct latch_entry e;

	parse_ok("[2001:db8::/32]:443,80/tcp", &e);
	expect_v6(&e.addr, "2001:db8::");
	cr_expect_eq(e.prefixlen, 32);
	cr_expect_eq(e.proto, LATCH_PROTO_TCP);
	cr_assert_eq(e.n_ports, 2);
	cr_expect(e.ports[0].lo == 443 && e.ports[0].hi == 443);
	cr_expect(e.ports[1].lo == 80 && e.ports[1].hi == 80);
}

Test(entry, icmp_without_ports)
{
	struct latch_entry e;

	parse_ok("203.0.113.7/icmp", &e);
	cr_expect_eq(e.proto, LATCH_PROTO_ICMP);
	cr_expect_eq(e.n_ports, 0);
	parse_ok("203.0.113.0/24/icmp", &e);
	cr_expect_eq(e.prefixlen, 24);
	cr_expect_eq(e.proto, LATCH_PROTO_ICMP);
	parse_ok("2001:db8::1/icmp", &e);
	cr_expect_eq(e.addr.family, AF_INET6);
	cr_expect_eq(e.proto, LATCH_PROTO_ICMP);
}

Test(entry, icmp_with_ports_refused)
{
	static const char *const bad[] = { "203.0.113.7:443/icmp", "203.0.113.0/24:1-100/icmp",
					   "[2001:db8::1]:443/icmp" };
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_entry(bad[i], &e, err, sizeof(err)), bad[i], err);
		cr_expect_not_null(strstr(err, "ICMP"), "'%s': %s", bad[i], err);
	}
}

Test(entry, prefix_length_beyond_the_family_refused)
{
	static const char *const bad[] = { "203.0.113.0/33", "2001:db8::/129", "203.0.113.0/",
					   "203.0.113.0/x",  "203.0.113.0/-1", "203.0.113.0/24/24" };
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_entry(bad[i], &e, err, sizeof(err)), bad[i], err);
	}
}

Test(entry, host_bits_set_refused_with_the_network_suggested)
{
	struct latch_entry e;
	char err[LATCH_ERR_MAX] = "";

	expect_refused(latch_parse_entry("203.0.113.5/24", &e, err, sizeof(err)), "203.0.113.5/24", err);
	cr_expect_not_null(strstr(err, "did you mean 203.0.113.0/24"), "no hint: %s", err);

	err[0] = '\0';
	expect_refused(latch_parse_entry("203.0.113.5/24:443/tcp", &e, err, sizeof(err)), "203.0.113.5/24:443/tcp",
		       err);
	cr_expect_not_null(strstr(err, "did you mean 203.0.113.0/24"), "no hint: %s", err);

	err[0] = '\0';
	expect_refused(latch_parse_entry("2001:db8::1/32", &e, err, sizeof(err)), "2001:db8::1/32", err);
	cr_expect_not_null(strstr(err, "did you mean 2001:db8::/32"), "no hint: %s", err);
}

Test(entry, bracket_mistakes_refused)
{
	static const char *const bad[] = {
		"[2001:db8::1:443", /* no ']' */
		"[2001:db8::1]443", /* no ':' after ']' */
		"[2001:db8::1]:", /* empty port list */
		"[2001:db8::1]:0",  "[2001:db8::1]:70000", "2001:db8::1]:443", "[]:443",
	};
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_entry(bad[i], &e, err, sizeof(err)), bad[i], err);
	}
}

Test(entry, ipv4_in_brackets_refused)
{
	struct latch_entry e;
	char err[LATCH_ERR_MAX] = "";

	expect_refused(latch_parse_entry("[203.0.113.7]:443", &e, err, sizeof(err)), "[203.0.113.7]:443", err);
	cr_expect_not_null(strstr(err, "IPv6"), "message does not say why: %s", err);
	err[0] = '\0';
	expect_refused(latch_parse_entry("[203.0.113.0/24]", &e, err, sizeof(err)), "[203.0.113.0/24]", err);
}

Test(entry, junk_refused_with_a_message_naming_the_input)
{
	static const char *const bad[] = {
		"example.com",		 "example.com:443",
		"203.0.113.7:",		 "203.0.113.7:0",
		"203.0.113.7:70000",	 "203.0.113.7:-1",
		"203.0.113.7:80x",	 "203.0.113.7:443:80",
		"203.0.113.7/sctp",	 "/tcp",
		"203.0.113.7:8100-8000", "tcp",
	};
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		expect_refused(latch_parse_entry(bad[i], &e, err, sizeof(err)), bad[i], err);
	}
	err[0] = '\0';
	cr_expect_eq(latch_parse_entry("", &e, err, sizeof(err)), -EINVAL);
	cr_expect_neq(err[0], '\0', "empty entry refused without a message");
}

/* ---- formatting: what `show` prints must parse back to the same entry */

static void expect_same_entry(const struct latch_entry *a, const struct latch_entry *b, const char *input)
{
	cr_expect_eq(a->addr.family, b->addr.family, "%s: family", input);
	cr_expect_arr_eq(a->addr.bytes, b->addr.bytes, 16, "%s: address", input);
	cr_expect_eq(a->prefixlen, b->prefixlen, "%s: prefixlen %d vs %d", input, a->prefixlen, b->prefixlen);
	cr_expect_eq(a->proto, b->proto, "%s: proto %u vs %u", input, a->proto, b->proto);
	cr_expect_eq(a->n_ports, b->n_ports, "%s: %d ports vs %d", input, a->n_ports, b->n_ports);
	for (int i = 0; i < a->n_ports && i < b->n_ports; i++)
		cr_expect(a->ports[i].lo == b->ports[i].lo && a->ports[i].hi == b->ports[i].hi,
			  "%s: port %d is %u-%u, read back as %u-%u", input, i, a->ports[i].lo, a->ports[i].hi,
			  b->ports[i].lo, b->ports[i].hi);
}

Test(format, parse_format_parse_gives_the_same_entry)
{
	static const char *const in[] = {
		"203.0.113.7",
		"203.0.113.7:443",
		"203.0.113.7:443,8000-8100/tcp",
		"203.0.113.0/24",
		"203.0.113.0/24:53/udp",
		"203.0.113.7/icmp",
		"0.0.0.0/0",
		"0.0.0.0/0:1-65535",
		"2001:db8::1",
		"2001:db8::/32",
		"2001:db8::/32/tcp",
		"2001:db8::1/icmp",
		"[2001:db8::1]:443",
		"[2001:db8::/32]:443,80/tcp",
		"[::]:1-65535/udp",
		"::/0",
		"203.0.113.7:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16",
		"[2001:db8::/32]:65535,65534,65533,65532,65531,65530,65529,65528,65527,65526,65525,65524,65523,"
		"65522,65521,65520/udp",
		/* The longest legal port list: 16 five-digit ranges. */
		"203.0.113.7:10000-10001,10002-10003,10004-10005,10006-10007,10008-10009,10010-10011,10012-10013,"
		"10014-10015,10016-10017,10018-10019,10020-10021,10022-10023,10024-10025,10026-10027,10028-10029,"
		"10030-10031/tcp",
	};
	struct latch_entry a, b;
	char text[1024], err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		parse_ok(in[i], &a);
		latch_entry_format(&a, text, sizeof(text));
		err[0] = '\0';
		cr_expect_eq(latch_parse_entry(text, &b, err, sizeof(err)), 0, "'%s' printed as '%s', refused: %s",
			     in[i], text, err);
		expect_same_entry(&a, &b, in[i]);
	}
}

Test(format, prints_the_canonical_spelling)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "203.0.113.7", "203.0.113.7" },
		{ "203.0.113.7:443/TCP", "203.0.113.7:443/tcp" },
		{ "203.0.113.0/24:8000-8100,53/udp", "203.0.113.0/24:8000-8100,53/udp" },
		{ "203.0.113.7/32", "203.0.113.7" },
		{ "2001:DB8:0::1", "2001:db8::1" },
		{ "2001:db8::1/128/icmp", "2001:db8::1/icmp" },
		{ "[2001:db8::1]", "2001:db8::1" },
		{ "[2001:db8::/32]:443,80/tcp", "[2001:db8::/32]:443,80/tcp" },
	};
	struct latch_entry e;
	char text[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		parse_ok(cases[i].in, &e);
		latch_entry_format(&e, text, sizeof(text));
		cr_expect_str_eq(text, cases[i].out, "'%s' printed as '%s'", cases[i].in, text);
	}
}

/* ---- the kernel rule an entry becomes */

Test(rule, entry_without_ports_covers_0_to_65535)
{
	struct latch_entry e;
	struct latch_rule r;

	parse_ok("203.0.113.7/tcp", &e);
	memset(&r, 0xaa, sizeof(r));
	latch_entry_rule(&e, 0, 123456789ull, LATCH_ORIGIN_GRANT, &r);
	cr_expect_eq(r.port_lo, 0);
	cr_expect_eq(r.port_hi, 65535);
	cr_expect_eq(r.proto, LATCH_PROTO_TCP);
	cr_expect_eq(r.expires_ns, 123456789ull);
	cr_expect_eq(r.origin, LATCH_ORIGIN_GRANT);
	cr_expect_eq(r.flags, 0, "a fresh rule must not be marked inherited");
}

Test(rule, each_port_range_becomes_its_own_rule)
{
	struct latch_entry e;
	struct latch_rule r;

	parse_ok("203.0.113.0/24:443,8000-8100/udp", &e);
	latch_entry_rule(&e, 0, 0, LATCH_ORIGIN_EGRESS, &r);
	cr_expect(r.port_lo == 443 && r.port_hi == 443);
	cr_expect_eq(r.proto, LATCH_PROTO_UDP);
	cr_expect_eq(r.expires_ns, 0);
	latch_entry_rule(&e, 1, 0, LATCH_ORIGIN_EGRESS, &r);
	cr_expect(r.port_lo == 8000 && r.port_hi == 8100);
	cr_expect_eq(r.proto, LATCH_PROTO_UDP);
}
