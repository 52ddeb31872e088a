// SPDX-License-Identifier: GPL-2.0-only
/*
 * names.c - host name normalization, wildcard matching and the DNS
 * rebinding filter.
 *
 * The rebinding filter decides which resolver answers may become learned
 * entries.  Its tables are ordered: the first range that holds the address
 * gives the reason, so the narrow, specific ranges (metadata services) come
 * before the wide ones that contain them (link-local, private, cgnat).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "common/common.h"

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Check IN and, when OUT is given, write its normalized spelling there. */
static const char *name_check(const char *in, char *out, size_t len)
{
	size_t n = strlen(in), label = 0;

	if (n && in[n - 1] == '.')
		n--; /* the root: "example.com." is "example.com" */
	if (!n)
		return "is empty";
	if (n > LATCH_DNS_NAME_MAX)
		return "is longer than 253 characters";
	for (size_t i = 0; i <= n; i++) {
		char c = i < n ? lower(in[i]) : '.';

		if (c == '.') {
			if (!label)
				return "has an empty label (a leading dot, or two dots in a row)";
			if (lower(in[i - 1]) == '-')
				return "has a label ending in '-'";
			label = 0;
			continue;
		}
		if (!name_char(c))
			return "has a character other than a-z, 0-9, '-', '_' and '.'";
		if (!label && c == '-')
			return "has a label starting with '-'";
		if (++label > LATCH_DNS_LABEL_MAX)
			return "has a label longer than 63 characters";
	}
	if (out) {
		if (len <= n)
			return "does not fit the buffer";
		for (size_t i = 0; i < n; i++)
			out[i] = lower(in[i]);
		out[n] = '\0';
	}
	return NULL;
}

int latch_dns_name_normalize(const char *in, char *out, size_t len)
{
	return name_check(in, out, len) ? -EINVAL : 0;
}

const char *latch_dns_name_problem(const char *in)
{
	return name_check(in, NULL, 0);
}

bool latch_wildcard_match(const char *domain, const char *name)
{
	size_t d = strlen(domain), n = strlen(name);

	/* strictly below: at least one label and a dot before DOMAIN */
	if (!d || n < d + 2)
		return false;
	return name[n - d - 1] == '.' && !strcasecmp(name + n - d, domain);
}

struct range4 {
	uint32_t net;
	int plen;
	const char *why;
};

#define V4(a, b, c, d) (((uint32_t)(a) << 24) | ((b) << 16) | ((c) << 8) | (d))

static const struct range4 nonpublic4[] = {
	{ V4(0, 0, 0, 0), 32, "unspecified" },
	/* cloud metadata: ahead of the link-local, cgnat and public ranges around them */
	{ V4(169, 254, 169, 254), 32, "metadata" }, /* AWS, GCP, Azure, OpenStack, Oracle */
	{ V4(169, 254, 170, 2), 32, "metadata" }, /* AWS ECS task credentials */
	{ V4(100, 100, 100, 200), 32, "metadata" }, /* Alibaba Cloud */
	{ V4(168, 63, 129, 16), 32, "metadata" }, /* Azure WireServer: a public address, a host-local service */
	{ V4(0, 0, 0, 0), 8, "reserved" },
	{ V4(127, 0, 0, 0), 8, "loopback" },
	{ V4(10, 0, 0, 0), 8, "private" },
	{ V4(172, 16, 0, 0), 12, "private" },
	{ V4(192, 168, 0, 0), 16, "private" },
	{ V4(100, 64, 0, 0), 10, "cgnat" },
	{ V4(198, 18, 0, 0), 15, "benchmarking" }, /* RFC 2544: lab networks, often routed inside sites */
	{ V4(192, 0, 0, 0), 24, "reserved" }, /* IETF protocol assignments (DS-Lite B4, NAT64 discovery...) */
	{ V4(169, 254, 0, 0), 16, "link-local" },
	{ V4(224, 0, 0, 0), 4, "multicast" },
	{ V4(240, 0, 0, 0), 4, "reserved" }, /* and 255.255.255.255 */
};

static const char *nonpublic_v4(uint32_t ip)
{
	for (size_t i = 0; i < sizeof(nonpublic4) / sizeof(nonpublic4[0]); i++) {
		uint32_t mask = nonpublic4[i].plen ? ~0u << (32 - nonpublic4[i].plen) : 0;

		if ((ip & mask) == nonpublic4[i].net)
			return nonpublic4[i].why;
	}
	return NULL;
}

struct range6 {
	uint8_t net[16];
	int plen;
	const char *why;
};

/*
 * ::ffff:0:0/96 is refused whatever it embeds: the guest would reach an IPv4
 * destination through an IPv6 entry, past the IPv4 policy.  The NAT64
 * prefixes are decided by the address they embed, since a NAT64 gateway on
 * the host's network would carry 64:ff9b::10.0.0.1 to 10.0.0.1 (the local-use
 * 64:ff9b:1::/48 is always local).  6to4 (2002::/16) and Teredo (2001::/32)
 * are decided the same way, before this table: a 6to4 relay or a Teredo
 * client on the host's network unwraps 2002:0a00:0005:: to 10.0.0.5, so an
 * embedded address that is not public makes the whole address not public.
 */
static const struct range6 nonpublic6[] = {
	{ { 0 }, 128, "unspecified" },
	{ { [15] = 1 }, 128, "loopback" },
	{ { 0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54 }, 128, "metadata" }, /* AWS fd00:ec2::254 */
	{ { [10] = 0xff, [11] = 0xff }, 96, "ipv4-mapped" },
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48, "nat64" },
	{ { 0 }, 8, "reserved" }, /* the rest of ::/8, IPv4-compatible ::a.b.c.d too */
	{ { 0x01 }, 64, "reserved" }, /* 100::/64, discard-only */
	{ { 0xfc }, 7, "private" },
	{ { 0xfe, 0xc0 }, 10, "private" }, /* deprecated site-local */
	{ { 0xfe, 0x80 }, 10, "link-local" },
	{ { 0xff }, 8, "multicast" },
};

static const uint8_t nat64_wkp[12] = { 0x00, 0x64, 0xff, 0x9b };
static const uint8_t sixtofour[2] = { 0x20, 0x02 };
static const uint8_t teredo[4] = { 0x20, 0x01, 0x00, 0x00 };

/* The IPv4 address at p (Teredo stores its client's inverted). */
static uint32_t embedded_v4(const uint8_t *p, bool inverted)
{
	uint32_t v4;

	memcpy(&v4, p, 4);
	v4 = ntohl(v4);
	return inverted ? ~v4 : v4;
}

static bool in_prefix6(const uint8_t *a, const uint8_t *net, int plen)
{
	int bytes = plen / 8, bits = plen % 8;

	if (memcmp(a, net, bytes))
		return false;
	return !bits || ((a[bytes] ^ net[bytes]) & (0xff << (8 - bits))) == 0;
}

const char *latch_addr_nonpublic(const struct latch_addr *a)
{
	if (a->family == AF_INET)
		return nonpublic_v4(ntohl(a->v4.s_addr));
	if (a->family != AF_INET6)
		return "unspecified"; /* no address is no public address: fail closed */
	/* 64:ff9b::/96 sits inside ::/8, so it is decided before the table */
	if (!memcmp(a->bytes, nat64_wkp, sizeof(nat64_wkp)))
		return nonpublic_v4(embedded_v4(a->bytes + 12, false)) ? "nat64" : NULL;
	/* 6to4: 2002:AABB:CCDD::/48 is AA.BB.CC.DD's network */
	if (!memcmp(a->bytes, sixtofour, sizeof(sixtofour)))
		return nonpublic_v4(embedded_v4(a->bytes + 2, false)) ? "6to4" : NULL;
	/* Teredo: the server's address in bits 32-63, the client's (inverted) in the last 32 */
	if (!memcmp(a->bytes, teredo, sizeof(teredo)))
		return nonpublic_v4(embedded_v4(a->bytes + 4, false)) ||
				       nonpublic_v4(embedded_v4(a->bytes + 12, true)) ?
			       "teredo" :
			       NULL;
	for (size_t i = 0; i < sizeof(nonpublic6) / sizeof(nonpublic6[0]); i++)
		if (in_prefix6(a->bytes, nonpublic6[i].net, nonpublic6[i].plen))
			return nonpublic6[i].why;
	return NULL;
}
