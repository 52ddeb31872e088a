// SPDX-License-Identifier: GPL-2.0-only
/*
 * entry.c - egress entries: ADDR|CIDR[:PORTS][/tcp|udp|icmp], the words an
 * operator types, and the kernel rules they become.
 *
 * Errors say what was wrong and how to write it, because the operator is
 * usually typing these by hand.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "loader/entry.h"

int latch_parse_port(const char *s, uint16_t *port, char *err, size_t errlen)
{
	uint32_t v;

	if (latch_parse_uint(s, 1, 65535, &v))
		return latch_errf(err, errlen, -EINVAL, "port '%s' must be a number from 1 to 65535", s);
	*port = v;
	return 0;
}

int latch_parse_ports(const char *s, struct latch_port_range *out, int max, int *n, char *err, size_t errlen)
{
	char buf[256], *save = NULL, *tok;

	*n = 0;
	if (strlen(s) >= sizeof(buf))
		return latch_errf(err, errlen, -EINVAL, "port list '%s' is too long", s);
	if (!*s)
		return latch_errf(err, errlen, -EINVAL,
				  "empty port list after ':'; write e.g. :443 or :80,443 or :8000-8100");
	if (s[0] == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
		return latch_errf(err, errlen, -EINVAL, "port list '%s' has an empty part; write e.g. 80,443", s);
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		uint16_t lo = 0, hi = 0;

		if (dash) {
			*dash = '\0';
			if (latch_parse_port(tok, &lo, err, errlen) || latch_parse_port(dash + 1, &hi, err, errlen))
				return -EINVAL;
			if (lo > hi)
				return latch_errf(err, errlen, -EINVAL, "port range %u-%u runs backwards; write %u-%u",
						  lo, hi, hi, lo);
		} else {
			if (latch_parse_port(tok, &lo, err, errlen))
				return -EINVAL;
			hi = lo;
		}
		if (*n >= max)
			return latch_errf(err, errlen, -EINVAL, "port list '%s' has more than %d parts; use a range", s,
					  max);
		out[*n].lo = lo;
		out[*n].hi = hi;
		(*n)++;
	}
	if (!*n)
		return latch_errf(err, errlen, -EINVAL, "empty port list '%s'", s);
	return 0;
}

static int host_bits_clear(const struct latch_addr *a, int plen)
{
	int bits = a->family == AF_INET ? 32 : 128;

	for (int i = plen; i < bits; i++)
		if (a->bytes[i / 8] & (0x80 >> (i % 8)))
			return 0;
	return 1;
}

static void clear_host_bits(struct latch_addr *a, int plen)
{
	int bits = a->family == AF_INET ? 32 : 128;

	for (int i = plen; i < bits; i++)
		a->bytes[i / 8] &= ~(0x80 >> (i % 8));
}

/* ADDR or ADDR/PLEN */
static int parse_cidr(char *s, const char *whole, struct latch_entry *e, char *err, size_t errlen)
{
	char *slash = strchr(s, '/');
	int max;
	uint32_t plen;

	if (slash)
		*slash = '\0';
	if (latch_parse_addr(s, &e->addr, NULL, 0))
		return latch_errf(err, errlen, -EINVAL,
				  "'%s': '%s' is not an IPv4 or IPv6 address (write ADDR|CIDR[:PORTS][/tcp|udp|icmp], "
				  "IPv6 with ports in brackets: [2001:db8::1]:443)",
				  whole, s);
	max = e->addr.family == AF_INET ? 32 : 128;
	e->prefixlen = max;
	if (slash) {
		if (latch_parse_uint(slash + 1, 0, max, &plen))
			return latch_errf(err, errlen, -EINVAL, "'%s': prefix length '%s' must be 0 to %d", whole,
					  slash + 1, max);
		e->prefixlen = plen;
		if (!host_bits_clear(&e->addr, plen)) {
			char fixed[INET6_ADDRSTRLEN];
			struct latch_addr net = e->addr;

			clear_host_bits(&net, plen);
			latch_addr_format(&net, fixed, sizeof(fixed));
			return latch_errf(err, errlen, -EINVAL, "'%s' has host bits set; did you mean %s/%u?", whole,
					  fixed, plen);
		}
	}
	return 0;
}

int latch_parse_entry(const char *s, struct latch_entry *e, char *err, size_t errlen)
{
	char buf[512], *addr, *ports = NULL, *p;
	size_t n = strlen(s);
	static const struct {
		const char *suffix;
		uint8_t proto;
	} protos[] = { { "/tcp", LATCH_PROTO_TCP }, { "/udp", LATCH_PROTO_UDP }, { "/icmp", LATCH_PROTO_ICMP } };

	memset(e, 0, sizeof(*e));
	if (n == 0 || n >= sizeof(buf))
		return latch_errf(err, errlen, -EINVAL, "entry '%s' is empty or too long", s);
	strcpy(buf, s);
	e->proto = LATCH_PROTO_ANY;
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++) {
		size_t sl = strlen(protos[i].suffix);

		if (n > sl && !strcasecmp(buf + n - sl, protos[i].suffix)) {
			e->proto = protos[i].proto;
			buf[n - sl] = '\0';
			break;
		}
	}

	if (buf[0] == '[') {
		p = strchr(buf, ']');
		if (!p)
			return latch_errf(err, errlen, -EINVAL, "'%s': '[' without ']'; write [2001:db8::1]:443", s);
		*p = '\0';
		addr = buf + 1;
		if (p[1] == ':')
			ports = p + 2;
		else if (p[1])
			return latch_errf(err, errlen, -EINVAL, "'%s': expected ':PORTS' after ']'", s);
		if (!strchr(addr, ':'))
			return latch_errf(err, errlen, -EINVAL,
					  "'%s': brackets are for IPv6; write IPv4 as 203.0.113.7:443", s);
	} else if ((p = strchr(buf, ':')) && strchr(p + 1, ':')) {
		addr = buf; /* bare IPv6: no ports without brackets */
	} else {
		addr = buf;
		if (p) {
			*p = '\0';
			ports = p + 1;
		}
	}
	if (parse_cidr(addr, s, e, err, errlen))
		return -EINVAL;
	if (ports) {
		char perr[LATCH_ERR_MAX];

		if (latch_parse_ports(ports, e->ports, LATCH_RULES_MAX, &e->n_ports, perr, sizeof(perr)))
			return latch_errf(err, errlen, -EINVAL, "'%s': %s", s, perr);
		if (e->proto == LATCH_PROTO_ICMP)
			return latch_errf(err, errlen, -EINVAL, "'%s': ICMP has no ports; write ADDR/icmp", s);
	}
	return 0;
}

void latch_entry_format(const struct latch_entry *e, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN], cidr[INET6_ADDRSTRLEN + 8], ports[LATCH_ENTRY_TEXT_MAX] = "";
	int full = e->prefixlen == (e->addr.family == AF_INET ? 32 : 128);
	size_t off = 0;

	latch_addr_format(&e->addr, a, sizeof(a));
	if (full)
		snprintf(cidr, sizeof(cidr), "%s", a);
	else
		snprintf(cidr, sizeof(cidr), "%s/%d", a, e->prefixlen);
	for (int i = 0; i < e->n_ports && off < sizeof(ports); i++) {
		if (e->ports[i].lo == e->ports[i].hi)
			off += snprintf(ports + off, sizeof(ports) - off, "%s%u", i ? "," : "", e->ports[i].lo);
		else
			off += snprintf(ports + off, sizeof(ports) - off, "%s%u-%u", i ? "," : "", e->ports[i].lo,
					e->ports[i].hi);
	}
	snprintf(buf, len, "%s%s%s%s%s%s", e->addr.family == AF_INET6 && *ports ? "[" : "", cidr,
		 e->addr.family == AF_INET6 && *ports ? "]" : "", *ports ? ":" : "", ports,
		 e->proto == LATCH_PROTO_TCP  ? "/tcp" :
		 e->proto == LATCH_PROTO_UDP  ? "/udp" :
		 e->proto == LATCH_PROTO_ICMP ? "/icmp" :
						"");
}

void latch_entry_rule(const struct latch_entry *e, int i, uint64_t expires_ns, int origin, struct latch_rule *out)
{
	memset(out, 0, sizeof(*out));
	out->expires_ns = expires_ns;
	out->proto = e->proto;
	out->origin = origin;
	if (e->n_ports == 0) {
		out->port_lo = 0;
		out->port_hi = 0xffff;
	} else {
		out->port_lo = e->ports[i].lo;
		out->port_hi = e->ports[i].hi;
	}
}
