// SPDX-License-Identifier: GPL-2.0-only
/*
 * addr.c - addresses, prefixes, MACs, numbers and names, as an operator
 * types them.  Errors say what was wrong and how to write it.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

uint32_t latch_fnv1a(uint32_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

int latch_parse_addr(const char *s, struct latch_addr *a, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, s, &a->v4) == 1) {
		a->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, &a->v6) == 1) {
		a->family = AF_INET6;
		return 0;
	}
	return latch_errf(err, errlen, -EINVAL, "'%s' is not an IPv4 or IPv6 address", s);
}

void latch_addr_format(const struct latch_addr *a, char *buf, size_t len)
{
	if (!inet_ntop(a->family, a->bytes, buf, len))
		snprintf(buf, len, "?");
}

int latch_parse_prefix(const char *s, int family, int min, int max, struct latch_addr *a, int *len, char *err,
		       size_t errlen)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash;
	int bits = family == AF_INET ? 32 : 128;
	uint32_t l;

	if (strlen(s) >= sizeof(buf) || !(slash = strchr(strcpy(buf, s), '/')))
		return latch_errf(err, errlen, -EINVAL, "'%s' is not a prefix; write ADDR/LEN", s);
	*slash = '\0';
	if (latch_parse_addr(buf, a, NULL, 0) || a->family != family)
		return latch_errf(err, errlen, -EINVAL, "'%s' is not an %s prefix", s,
				  family == AF_INET ? "IPv4" : "IPv6");
	if (latch_parse_uint(slash + 1, min, max, &l))
		return latch_errf(err, errlen, -EINVAL, "prefix length of '%s' must be %d..%d", s, min, max);
	for (int b = l; b < bits; b++)
		if (a->bytes[b / 8] & (0x80 >> (b % 8)))
			return latch_errf(err, errlen, -EINVAL, "'%s' has bits set past /%u; write the network address",
					  s, l);
	*len = l;
	return 0;
}

int latch_parse_mac(const char *s, uint8_t mac[6], char *err, size_t errlen)
{
	/* exactly xx:xx:xx:xx:xx:xx; sscanf alone would take signs, blanks, 0x */
	if (strlen(s) != 17)
		return latch_errf(err, errlen, -EINVAL, "MAC '%s' is not of the form 52:54:00:12:34:56", s);
	for (int i = 0; i < 17; i++)
		if (i % 3 == 2 ? s[i] != ':' : !isxdigit((unsigned char)s[i]))
			return latch_errf(err, errlen, -EINVAL, "MAC '%s' is not of the form 52:54:00:12:34:56", s);
	for (int i = 0; i < 6; i++) {
		char hex[3] = { s[i * 3], s[i * 3 + 1], 0 };

		mac[i] = strtoul(hex, NULL, 16);
	}
	if (mac[0] & 1)
		return latch_errf(err, errlen, -EINVAL, "MAC '%s' is a multicast address; give the guest's unicast MAC",
				  s);
	return 0;
}

int latch_parse_uint(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long v;

	if (!*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int latch_parse_micros(const char *s, int64_t max, int64_t *out)
{
	int64_t v = 0;
	int decimals = -1; /* -1: no '.' seen yet */

	if (*s == '$')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	for (; *s; s++) {
		if (*s == '.' && decimals < 0) {
			decimals = 0;
			continue;
		}
		if (!isdigit((unsigned char)*s) || decimals == 6)
			return -EINVAL;
		if (v > (INT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (*s - '0');
		if (decimals >= 0)
			decimals++;
	}
	if (decimals == 0) /* "5." */
		return -EINVAL;
	for (int d = decimals < 0 ? 0 : decimals; d < 6; d++) {
		if (v > INT64_MAX / 10)
			return -ERANGE;
		v *= 10;
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int latch_parse_name(const char *s, char *err, size_t errlen)
{
	size_t n = strlen(s);

	if (n < 1 || n > LATCH_NAME_MAX)
		return latch_errf(err, errlen, -EINVAL, "sandbox name '%s' must be 1-%d characters of a-z, 0-9 and '-'",
				  s, LATCH_NAME_MAX);
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return latch_errf(err, errlen, -EINVAL, "sandbox name '%s' has '%c'; use only a-z, 0-9 and '-'",
					  s, s[i]);
	return 0;
}

#define FILE_NAME_MAX 64

int latch_parse_file_name(const char *what, const char *name, char *err, size_t errlen)
{
	size_t n = strlen(name);

	if (n < 1 || n > FILE_NAME_MAX)
		return latch_errf(err, errlen, -EINVAL,
				  "%s name '%s' must be 1-%d characters of A-Z, a-z, 0-9, '.', '_' and '-'", what, name,
				  FILE_NAME_MAX);
	/* the name becomes DIR/NAME.EXT: nothing that could leave DIR or hide in it */
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (c == '/')
			return latch_errf(err, errlen, -EINVAL,
					  "%s name '%s' has '/'; name a file in the %s directory, without a path", what,
					  name, what);
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return latch_errf(err, errlen, -EINVAL,
					  "%s name '%s' has '%c'; use only A-Z, a-z, 0-9, '.', '_' and '-'", what, name,
					  c);
	}
	if (name[0] == '.' || name[0] == '-')
		return latch_errf(err, errlen, -EINVAL, "%s name '%s' must not start with '.' or '-'", what, name);
	if (strstr(name, ".."))
		return latch_errf(err, errlen, -EINVAL, "%s name '%s' has '..'; use a single '.'", what, name);
	return 0;
}
