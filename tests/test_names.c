// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_names.c - host names, wildcards and the DNS rebinding filter, the
 * rules common/ gives every module.
 *
 * The resolver and the profiles meet in these functions: a name that
 * normalizes two ways, or a wildcard that reaches its apex or a look-alike
 * suffix, would let a sandbox ask for something nobody allowed.  The
 * rebinding table holds each reason word to its ranges, and keeps the
 * documentation ranges public because the live tests use them as the
 * internet.  No address here is ever contacted.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- normalization */

Test(dns_name, lowercases_and_drops_one_trailing_dot)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "example.com", "example.com" },
		{ "Example.COM", "example.com" },
		{ "example.com.", "example.com" },
		{ "WWW.Example.Com.", "www.example.com" },
		{ "localhost", "localhost" },
		{ "_dmarc.example.com", "_dmarc.example.com" },
		{ "xn--bcher-kva.example", "xn--bcher-kva.example" },
		{ "a-b.c-d.e", "a-b.c-d.e" },
		{ "1password.com", "1password.com" },
	};
	char out[LATCH_DNS_NAME_MAX + 1];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cr_expect_eq(latch_dns_name_normalize(cases[i].in, out, sizeof(out)), 0, "'%s' refused: %s",
			     cases[i].in, latch_dns_name_problem(cases[i].in));
		cr_expect_str_eq(out, cases[i].want, "'%s' normalized to '%s'", cases[i].in, out);
		cr_expect_null(latch_dns_name_problem(cases[i].in), "'%s' has a problem", cases[i].in);
	}
}

Test(dns_name, refuses_what_is_not_a_host_name)
{
	static const char *const bad[] = {
		"",
		".",
		"example.com..",
		".example.com",
		"a..b",
		"-a.com",
		"a-.com",
		"a.-b.com",
		"a.b-.com",
		"exa mple.com",
		"exa/mple.com",
		"ex*ample.com",
		"*.example.com",
		"example.com:443",
		"ex@mple.com",
		"exämple.com",
		"a\tb",
		"a\nb",
	};
	char out[LATCH_DNS_NAME_MAX + 1];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		cr_expect_eq(latch_dns_name_normalize(bad[i], out, sizeof(out)), -EINVAL, "'%s' accepted", bad[i]);
		cr_expect_not_null(latch_dns_name_problem(bad[i]), "'%s' has no problem", bad[i]);
	}
}

/* A name of n characters: labels of 63 'a's joined by dots, then filler. */
static void long_name(char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (i % 64 == 63) ? '.' : 'a';
	buf[n] = '\0';
	if (buf[n - 1] == '.')
		buf[n - 1] = 'a';
}

Test(dns_name, label_limit_is_63_and_name_limit_is_253)
{
	char label63[64], label64[65], name[300], out[LATCH_DNS_NAME_MAX + 1], with_dot[302];

	memset(label63, 'a', 63);
	label63[63] = '\0';
	memset(label64, 'a', 64);
	label64[64] = '\0';
	cr_expect_eq(latch_dns_name_normalize(label63, out, sizeof(out)), 0);
	cr_expect_eq(latch_dns_name_normalize(label64, out, sizeof(out)), -EINVAL);

	long_name(name, 253);
	cr_expect_eq(latch_dns_name_normalize(name, out, sizeof(out)), 0, "253: %s", latch_dns_name_problem(name));
	snprintf(with_dot, sizeof(with_dot), "%s.", name); /* the root dot does not count */
	cr_expect_eq(latch_dns_name_normalize(with_dot, out, sizeof(out)), 0);
	long_name(name, 254);
	cr_expect_eq(latch_dns_name_normalize(name, out, sizeof(out)), -EINVAL);
}

Test(dns_name, refuses_an_output_buffer_too_small)
{
	char out[8];

	cr_expect_eq(latch_dns_name_normalize("example.com", out, sizeof(out)), -EINVAL);
	cr_expect_eq(latch_dns_name_normalize("example", out, sizeof(out)), 0);
	cr_expect_str_eq(out, "example");
}

/* ---- wildcards: *.DOMAIN covers names below DOMAIN, never DOMAIN or a look-alike */

Test(wildcard, matches_below_the_domain_only)
{
	static const struct {
		const char *domain, *name;
		bool match;
	} cases[] = {
		{ "example.com", "a.example.com", true },
		{ "example.com", "a.b.example.com", true },
		{ "example.com", "www.example.com", true },
		{ "example.com", "A.Example.COM", true }, /* compared without regard to case */
		{ "example.com", "example.com", false }, /* the apex is not below itself */
		{ "example.com", "badexample.com", false },
		{ "example.com", "a.badexample.com", false },
		{ "example.com", ".example.com", false },
		{ "example.com", "example.com.evil.net", false },
		{ "example.com", "example.co", false },
		{ "example.com", "com", false },
		{ "example.com", "", false },
		{ "b.example.com", "a.example.com", false },
		{ "b.example.com", "a.b.example.com", true },
		{ "", "example.com", false },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		cr_expect_eq(latch_wildcard_match(cases[i].domain, cases[i].name), cases[i].match,
			     "*.%s vs '%s': want %s", cases[i].domain, cases[i].name,
			     cases[i].match ? "match" : "none");
}

/* ---- the rebinding filter */

static const char *nonpublic(const char *text)
{
	struct latch_addr a;

	cr_assert_eq(latch_parse_addr(text, &a, NULL, 0), 0, "bad test address %s", text);
	return latch_addr_nonpublic(&a);
}

Test(rebinding, each_nonpublic_range_has_its_reason)
{
	static const struct {
		const char *addr, *why;
	} cases[] = {
		{ "0.0.0.0", "unspecified" },
		{ "::", "unspecified" },
		{ "127.0.0.1", "loopback" },
		{ "127.255.255.254", "loopback" },
		{ "::1", "loopback" },
		{ "10.0.0.1", "private" },
		{ "10.255.255.255", "private" },
		{ "172.16.0.1", "private" },
		{ "172.31.255.255", "private" },
		{ "192.168.1.1", "private" },
		{ "fc00::1", "private" },
		{ "fd12:3456::1", "private" },
		{ "fec0::1", "private" },
		{ "100.64.0.1", "cgnat" },
		{ "100.127.255.255", "cgnat" },
		{ "169.254.1.1", "link-local" },
		{ "fe80::1", "link-local" },
		{ "febf::1", "link-local" },
		{ "169.254.169.254", "metadata" },
		{ "169.254.170.2", "metadata" },
		{ "100.100.100.200", "metadata" },
		{ "168.63.129.16", "metadata" },
		{ "fd00:ec2::254", "metadata" },
		{ "224.0.0.1", "multicast" },
		{ "239.255.255.250", "multicast" },
		{ "ff02::1", "multicast" },
		{ "ff0e::1", "multicast" },
		{ "0.1.2.3", "reserved" },
		{ "240.0.0.1", "reserved" },
		{ "255.255.255.255", "reserved" },
		{ "::10.0.0.1", "reserved" },
		{ "100::1", "reserved" },
		{ "::ffff:10.0.0.1", "ipv4-mapped" },
		{ "::ffff:127.0.0.1", "ipv4-mapped" },
		{ "::ffff:169.254.169.254", "ipv4-mapped" },
		{ "::ffff:198.51.100.8", "ipv4-mapped" }, /* v4 reached through a v6 entry: refused even when public */
		{ "64:ff9b::10.0.0.1", "nat64" },
		{ "64:ff9b::127.0.0.1", "nat64" },
		{ "64:ff9b::169.254.169.254", "nat64" },
		{ "64:ff9b:1::198.51.100.8", "nat64" }, /* local-use NAT64 is always local */
		{ "198.18.0.1", "benchmarking" },
		{ "198.19.255.255", "benchmarking" },
		{ "192.0.0.1", "reserved" },
		{ "192.0.0.255", "reserved" },
		{ "2002:a00:5::1", "6to4" }, /* 10.0.0.5 */
		{ "2002:a9fe:a9fe::1", "6to4" }, /* 169.254.169.254 */
		{ "2002:7f00:1::", "6to4" }, /* 127.0.0.1 */
		{ "2002:c612:1::1", "6to4" }, /* 198.18.0.1 */
		{ "2001:0:a00:1::", "teredo" }, /* server 10.0.0.1 */
		{ "2001:0:c633:6408::f5ff:fffa", "teredo" }, /* client ~f5fffffa = 10.0.0.5 */
		{ "2001:0:c633:6408::5601:5601", "teredo" }, /* client ~56015601 = 169.254.169.254 */
		{ "2001::1", "teredo" }, /* server 0.0.0.0, client 255.255.255.254 */
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *why = nonpublic(cases[i].addr);

		cr_expect(why && !strcmp(why, cases[i].why), "%s: want '%s', got '%s'", cases[i].addr, cases[i].why,
			  why ? why : "(public)");
	}
}

Test(rebinding, documentation_ranges_and_public_addresses_are_public)
{
	static const char *const pub[] = {
		"192.0.2.1", "198.51.100.7", "203.0.113.254", "2001:db8::1", "2001:db8:ffff::1", "198.51.100.8",
		"203.0.113.1", "2001:db8:4700::1111", "172.15.255.255", "172.32.0.1", "100.63.255.255", "100.128.0.1",
		"169.253.255.255", "169.255.0.1", "11.0.0.1", "126.255.255.255", "128.0.0.1", "223.255.255.255",
		"192.167.255.255", "192.169.0.1", "64:ff9b::198.51.100.8",
		/* the edges of the ranges refused above */
		"198.17.255.255", "198.20.0.0", "191.255.255.255", "192.0.1.0",
		/* 6to4 and Teredo around public IPv4 addresses: decided by what they embed */
		"2002:c633:6408::1", /* 198.51.100.8 */
		"2002:c633:a05::1", /* 198.51.10.5 (its next 32 bits would read 10.5.0.0) */
		"2001:0:c633:6408::34ff:8efa", /* server 198.51.100.8, client ~34ff8efa = 203.0.113.5 */
		"2001:1::1", /* outside Teredo's /32 */
	};

	for (size_t i = 0; i < ARRAY_SIZE(pub); i++) {
		const char *why = nonpublic(pub[i]);

		cr_expect_null(why, "%s should be public, got '%s'", pub[i], why);
	}
}

Test(rebinding, an_address_without_a_family_is_not_public)
{
	struct latch_addr a;

	memset(&a, 0, sizeof(a));
	cr_expect_not_null(latch_addr_nonpublic(&a));
}
