// SPDX-License-Identifier: GPL-2.0-only
/*
 * parse.c - one profile text into entries: the line format, the `# extends:`
 * directive, and the one allocation that holds the entries and their strings.
 *
 * This is the hot part of a profile switch: a profile of 65,536 addresses is
 * 65,536 lines, and loading it was most of the time latchd took before the
 * kernel's part began.  What made it slow, and what is done about it: memory
 * (an entry was 488 bytes with its name and source inside; now 128 with both
 * in an arena beside the array, so 8 MB are touched, not 32), a memset and a
 * copy of each entry (now parsed in place), and a few string scans per line
 * (now one pass each).  See docs/bench.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "profile/internal.h"
#include "profile/profile.h"

#define ENTRY_FORMS "host[:port[,port]], *.domain[:ports] or CIDR[:ports]"

/* ---- parsing one text */

/*
 * Parsed entries, and the strings they point to (names, sources), in one
 * allocation: CAP entries, then an arena of ARENA bytes.  Both are sized from
 * the texts before parsing (an entry is at most a line, a name at most its
 * line's bytes), so nothing moves once pointed to, and free(v) frees all.
 */
static const char empty_name[] = "";

int profile_pvec_init(struct pvec *pv, int cap, size_t arena)
{
	memset(pv, 0, sizeof(*pv));
	if (cap < 1)
		cap = 1;
	pv->v = malloc((size_t)cap * sizeof(*pv->v) + arena + 1);
	if (!pv->v)
		return -ENOMEM;
	pv->cap = cap;
	pv->arena = (char *)(pv->v + cap);
	pv->size = arena + 1;
	return 0;
}

/* A copy of S in the arena, or NULL when the sizing was wrong (never: a bug, not an input). */
static const char *pvec_str(struct pvec *pv, const char *s, size_t len)
{
	char *d;

	if (pv->used + len + 1 > pv->size)
		return NULL;
	d = pv->arena + pv->used;
	memcpy(d, s, len);
	d[len] = '\0';
	pv->used += len + 1;
	return d;
}

void profile_pvec_free(struct pvec *pv)
{
	free(pv->v);
	memset(pv, 0, sizeof(*pv));
}

/* Lines of TEXT (an upper bound on its entries) and its bytes (on the strings of them). */
void profile_text_size(const char *text, int *lines, size_t *bytes)
{
	size_t len = strlen(text);
	int n = 1;

	for (size_t i = 0; i < len; i++)
		n += text[i] == '\n';
	*lines += n;
	*bytes += len + 1;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* A path that does not fit keeps its tail: the file name is what a reader needs. */
static void copy_source(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n < len) {
		memcpy(dst, src, n + 1);
		return;
	}
	memcpy(dst, "...", 3);
	memcpy(dst + 3, src + n - (len - 4), len - 4);
	dst[len - 1] = '\0';
}

static void default_ports(struct latch_entry *e)
{
	if (e->proto == LATCH_PROTO_ICMP) {
		e->n_ports = 0; /* echo has no ports */
		return;
	}
	e->n_ports = 2;
	e->ports[0] = (struct latch_port_range){ 443, 443 };
	e->ports[1] = (struct latch_port_range){ 80, 80 };
}

/* Take a /tcp, /udp or /icmp suffix off BODY. */
static uint8_t strip_proto(char *body)
{
	static const struct {
		const char *suffix;
		uint8_t proto;
	} protos[] = { { "/tcp", LATCH_PROTO_TCP }, { "/udp", LATCH_PROTO_UDP }, { "/icmp", LATCH_PROTO_ICMP } };
	size_t n = strlen(body);

	if (!n || (body[n - 1] | 0x20) != 'p') /* every suffix ends in 'p': most lines have none */
		return LATCH_PROTO_ANY;
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++) {
		size_t sl = strlen(protos[i].suffix);

		if (n > sl && !strcasecmp(body + n - sl, protos[i].suffix)) {
			body[n - sl] = '\0';
			return protos[i].proto;
		}
	}
	return LATCH_PROTO_ANY;
}

/*
 * Is BODY (proto suffix removed) an address or prefix rather than a name?
 * Brackets or two colons are IPv6; digits and dots before any '/' or ':' are
 * IPv4.  A host name never ends in an all-digit label, so "10.0.0.300" goes
 * to the address parser and is refused there, not taken as a name.
 */
static bool address_like(const char *body)
{
	const char *c;
	bool v4 = true;
	int colons = 0;

	if (body[0] == '[')
		return true;
	/* one pass each way: this runs for every line of a profile */
	for (c = body; *c && *c != '/' && *c != ':'; c++)
		if (!(*c == '.' || (*c >= '0' && *c <= '9')))
			v4 = false;
	if (c == body)
		v4 = false;
	for (; *c; c++)
		if (*c == ':' && ++colons == 2)
			return true;
	return v4;
}

/* "scheme://": a URL where a host was meant. */
static bool url_like(const char *body)
{
	for (const char *c = strchr(body, ':'); c; c = strchr(c + 1, ':'))
		if (c[1] == '/' && c[2] == '/')
			return true;
	return false;
}

/* No top-level domain is all digits; a name that ends in one is a mistyped address. */
static bool all_digit_tail(const char *name)
{
	const char *dot = strrchr(name, '.');

	name = dot ? dot + 1 : name;
	return strspn(name, "0123456789") == strlen(name);
}

/*
 * One entry, trimmed, no blanks inside, into PE; a host name goes to NAME
 * (LATCH_DNS_NAME_MAX + 1 bytes), "" for an address.  MSG names the entry and
 * how to write it.
 */
static int parse_entry_line(const char *s, struct latch_pentry *pe, char *name, char *msg, size_t msglen)
{
	char body[LATCH_PROFILE_LINE_MAX], perrbuf[LATCH_ERR_MAX], *host, *ports = NULL, *colon;
	uint8_t proto;
	const char *why;

	pe->kind = LATCH_PENTRY_CIDR;
	name[0] = '\0';
	memset(&pe->entry, 0, sizeof(pe->entry));
	if (strlen(s) >= sizeof(body))
		return latch_errf(msg, msglen, -EINVAL, "entry is too long");
	strcpy(body, s);
	proto = strip_proto(body);
	if (url_like(body))
		return latch_errf(msg, msglen, -EINVAL,
				  "'%s' is a URL; write the host alone, e.g. pypi.org or pypi.org:443", s);
	if (address_like(body)) {
		if (latch_parse_entry(s, &pe->entry, msg, msglen))
			return -EINVAL;
		pe->kind = LATCH_PENTRY_CIDR;
		if (!pe->entry.n_ports)
			default_ports(&pe->entry);
		return 0;
	}

	if ((colon = strchr(body, ':'))) {
		*colon = '\0';
		ports = colon + 1;
	}
	host = body;
	if (strchr(host, '/'))
		return latch_errf(msg, msglen, -EINVAL, "'%s' has a path; write the host alone, e.g. pypi.org:443", s);
	pe->kind = LATCH_PENTRY_HOST;
	if (host[0] == '*') {
		if (!host[1])
			return latch_errf(msg, msglen, -EINVAL,
					  "'%s': '*' alone would allow every name; the built-in profile 'open' is the "
					  "way to remove the policy",
					  s);
		if (host[1] != '.')
			return latch_errf(msg, msglen, -EINVAL,
					  "'%s': a wildcard is '*.' and then a domain, e.g. *.example.com", s);
		host += 2;
		pe->kind = LATCH_PENTRY_WILDCARD;
	}
	if (strchr(host, '*'))
		return latch_errf(msg, msglen, -EINVAL,
				  "'%s': '*' may only be the whole first label, e.g. *.example.com", s);
	if ((why = latch_dns_name_problem(host)))
		return latch_errf(msg, msglen, -EINVAL, "'%s': '%s' %s; write %s", s, host, why, ENTRY_FORMS);
	if (latch_dns_name_normalize(host, name, LATCH_DNS_NAME_MAX + 1))
		return latch_errf(msg, msglen, -EINVAL, "'%s': '%s' is not a host name", s, host);
	if (all_digit_tail(name))
		return latch_errf(msg, msglen, -EINVAL,
				  "'%s' ends in an all-digit label, so it is no host name; write an address as "
				  "203.0.113.7 or a prefix as 203.0.113.0/24",
				  s);
	if (pe->kind == LATCH_PENTRY_WILDCARD && !strchr(name, '.'))
		return latch_errf(msg, msglen, -EINVAL,
				  "'%s' would allow the whole top-level domain '%s'; name a domain under it, e.g. "
				  "*.example.%s",
				  s, name, name);
	pe->entry.proto = proto;
	if (!ports) {
		default_ports(&pe->entry);
		return 0;
	}
	if (proto == LATCH_PROTO_ICMP)
		return latch_errf(msg, msglen, -EINVAL, "'%s': ICMP has no ports; write %s/icmp", s, body);
	if (latch_parse_ports(ports, pe->entry.ports, LATCH_RULES_MAX, &pe->entry.n_ports, perrbuf, sizeof(perrbuf)))
		return latch_errf(msg, msglen, -EINVAL, "'%s': %s", s, perrbuf);
	return 0;
}

/*
 * LINE starts with '#'.  1 and NAME for `# extends: NAME` (a comment, so
 * Kagebox files keep working), 0 for any other comment, -EINVAL with MSG for
 * a directive that is wrong.
 */
static int extends_directive(const char *line, char *name, size_t len, char *msg, size_t msglen)
{
	const char *s = line + 1, *e, *rest;

	while (blank(*s))
		s++;
	if (strncasecmp(s, "extends", 7))
		return 0;
	s += 7;
	while (blank(*s))
		s++;
	if (*s != ':')
		return 0; /* prose: "# extends the base set" */
	s++;
	while (blank(*s))
		s++;
	for (e = s; *e && !blank(*e) && *e != '#'; e++)
		;
	if (e == s)
		return latch_errf(msg, msglen, -EINVAL, "'# extends:' needs a profile name, e.g. # extends: research");
	for (rest = e; blank(*rest); rest++)
		;
	if (*rest && *rest != '#')
		return latch_errf(msg, msglen, -EINVAL, "'# extends:' takes one profile name; got '%s'", s);
	if ((size_t)(e - s) > LATCH_PROFILE_NAME_MAX || (size_t)(e - s) >= len)
		return latch_errf(msg, msglen, -EINVAL, "extends '%.*s': a profile name is at most %d characters",
				  (int)(e - s), s, LATCH_PROFILE_NAME_MAX);
	memcpy(name, s, e - s);
	name[e - s] = '\0';
	if (latch_profile_name_check(name, msg, msglen))
		return -EINVAL;
	if (!strcmp(name, LATCH_PROFILE_OPEN))
		return latch_errf(msg, msglen, -EINVAL,
				  "a profile cannot extend 'open': open is no policy at all, not a list to build on; "
				  "extend sealed, research or dev");
	return 1;
}

/*
 * Append TEXT's entries to PV, at most ROOM of them.  EXTENDS (at least
 * LATCH_PROFILE_NAME_MAX + 1 bytes) gets the `# extends:` name or "", and
 * EXT_LINE its line.  With PV NULL only the comments are read: the extends
 * chain is known before any entry is parsed.
 *
 * Each entry is parsed straight into its slot of PV (reserved from the line
 * count, so a 65,536-line profile is never grown and copied), and lines are
 * found with memchr() and copied only when they are entries.
 */
int profile_parse_text(const char *text, const char *source, struct pvec *pv, int room, char *extends, int *ext_line,
		       char *err, size_t errlen)
{
	char line[LATCH_PROFILE_LINE_MAX], msg[LATCH_ERR_MAX], name[LATCH_PROFILE_NAME_MAX + 1];
	char src[128], host[LATCH_DNS_NAME_MAX + 1];
	const char *p = text, *end = text + strlen(text), *src_kept = NULL;
	int lineno = 0, added = 0, ret;

	*extends = '\0';
	*ext_line = 0;
	copy_source(src, sizeof(src), source);
	while (p < end) {
		const char *nl = memchr(p, '\n', end - p), *q;
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct latch_pentry *pe;
		char *s, *e;

		lineno++;
		if (len >= sizeof(line))
			return latch_errf_at(err, errlen, -EINVAL, source, lineno, "line is longer than %zu characters",
					     sizeof(line) - 1);
		for (q = p; q < p + len && blank(*q); q++)
			;
		if (q == p + len || (!pv && *q != '#')) { /* blank, or an entry on the pass that reads comments */
			p = nl ? nl + 1 : end;
			continue;
		}
		memcpy(line, p, len);
		line[len] = '\0';
		s = line + (q - p); /* past the leading blanks */
		p = nl ? nl + 1 : end;
		if (*s == '#') {
			ret = extends_directive(s, name, sizeof(name), msg, sizeof(msg));
			if (ret < 0)
				return latch_errf_at(err, errlen, ret, source, lineno, "%s", msg);
			if (ret && *extends)
				return latch_errf_at(
					err, errlen, -EINVAL, source, lineno,
					"a second '# extends:' (the first is on line %d); a profile extends at most "
					"one other",
					*ext_line);
			if (ret) {
				strcpy(extends, name);
				*ext_line = lineno;
			}
			continue;
		}
		if ((e = strchr(s, '#'))) /* a trailing comment; '#' is in no name or address */
			*e = '\0';
		else
			e = line + len;
		while (e > s && blank(e[-1]))
			*--e = '\0';
		if (!*s)
			continue;
		for (e = s; *e; e++)
			if (blank(*e))
				return latch_errf_at(err, errlen, -EINVAL, source, lineno,
						     "'%s' has a blank inside; write one entry a line: %s", s,
						     ENTRY_FORMS);
		if (added == room)
			return latch_errf_at(
				err, errlen, -E2BIG, source, lineno,
				"more than %d entries in one profile with its chain and overlay; use CIDRs or "
				"wildcards",
				LATCH_PROFILE_ENTRIES_MAX);
		if (pv->n == pv->cap || (!src_kept && !(src_kept = pvec_str(pv, src, strlen(src)))))
			return latch_errf_at(err, errlen, -ENOMEM, source, lineno, "no room for the entry (a bug)");
		pe = &pv->v[pv->n];
		if (parse_entry_line(s, pe, host, msg, sizeof(msg)))
			return latch_errf_at(err, errlen, -EINVAL, source, lineno, "%s", msg);
		pe->name = *host ? pvec_str(pv, host, strlen(host)) : empty_name;
		if (!pe->name)
			return latch_errf_at(err, errlen, -ENOMEM, source, lineno, "no room for the name (a bug)");
		pe->source = src_kept;
		pe->line = lineno;
		pv->n++;
		added++;
	}
	return 0;
}

int latch_profile_parse(const char *text, const char *source, struct latch_pentry **out, int *n, char *extends,
			size_t extlen, char *err, size_t errlen)
{
	char ext[LATCH_PROFILE_NAME_MAX + 1];
	struct pvec pv;
	size_t bytes = 128; /* the source */
	int lines = 0, line, ret;

	*out = NULL;
	*n = 0;
	if (extends && extlen)
		*extends = '\0';
	profile_text_size(text, &lines, &bytes);
	if (profile_pvec_init(&pv, lines < LATCH_PROFILE_ENTRIES_MAX ? lines : LATCH_PROFILE_ENTRIES_MAX, bytes))
		return latch_errf_at(err, errlen, -ENOMEM, source, 0, "out of memory");
	ret = profile_parse_text(text, source, &pv, LATCH_PROFILE_ENTRIES_MAX, ext, &line, err, errlen);
	if (!ret && extends && strlen(ext) >= extlen)
		ret = latch_errf_at(err, errlen, -ENOSPC, source, line, "no room for the extends name '%s'", ext);
	if (ret) {
		profile_pvec_free(&pv);
		return ret;
	}
	if (extends)
		strcpy(extends, ext);
	*out = pv.v;
	*n = pv.n;
	return 0;
}
