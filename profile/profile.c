// SPDX-License-Identifier: GPL-2.0-only
/*
 * profile.c - read egress profiles: parse the text, follow `# extends:`,
 * layer the overlay, and answer "may the sandbox ask for this name?".
 *
 * A profile decides where a sandbox may go, so a file is read only when root
 * (or, for the unit tests, the user running latch) owns it and nobody else
 * may write it, and one bad line refuses the whole load: a profile is never
 * half applied.  The entries come out as data; turning them into map entries
 * and learned addresses is the daemon's business.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/profile.h"
/* generated; its first comment quotes a glob, which -Wcomment would flag */
#include "profile/profiles_builtin.h"

#define N_BUILTIN (sizeof(latch_builtin_profiles) / sizeof(latch_builtin_profiles[0]))
#define ENTRY_FORMS "host[:port[,port]], *.domain[:ports] or CIDR[:ports]"

int latch_profile_name_check(const char *name, char *err, size_t errlen)
{
	return latch_parse_file_name("profile", name, err, errlen);
}

/* ---- parsing one text */

struct pvec {
	struct latch_pentry *v;
	int n, cap;
};

static int pvec_push(struct pvec *pv, const struct latch_pentry *pe)
{
	if (pv->n == pv->cap) {
		int cap = pv->cap ? pv->cap * 2 : 16;
		struct latch_pentry *v = realloc(pv->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		pv->v = v;
		pv->cap = cap;
	}
	pv->v[pv->n++] = *pe;
	return 0;
}

/* Room for CAP entries at once: a 65,536-entry profile is 32 MB, grown and copied only once. */
static int pvec_reserve(struct pvec *pv, int cap)
{
	struct latch_pentry *v;

	if (cap <= pv->cap)
		return 0;
	v = realloc(pv->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	pv->v = v;
	pv->cap = cap;
	return 0;
}

static void pvec_free(struct pvec *pv)
{
	free(pv->v);
	memset(pv, 0, sizeof(*pv));
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
	const char *colon = strchr(body, ':');
	size_t n = strcspn(body, "/:");

	if (body[0] == '[' || (colon && strchr(colon + 1, ':')))
		return true;
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(body[i] == '.' || (body[i] >= '0' && body[i] <= '9')))
			return false;
	return true;
}

/* No top-level domain is all digits; a name that ends in one is a mistyped address. */
static bool all_digit_tail(const char *name)
{
	const char *dot = strrchr(name, '.');

	name = dot ? dot + 1 : name;
	return strspn(name, "0123456789") == strlen(name);
}

/* One entry, trimmed, no blanks inside.  MSG names the entry and how to write it. */
static int parse_entry_line(const char *s, struct latch_pentry *pe, char *msg, size_t msglen)
{
	char body[LATCH_PROFILE_LINE_MAX], perrbuf[LATCH_ERR_MAX], *host, *ports = NULL, *colon;
	uint8_t proto;
	const char *why;

	memset(pe, 0, sizeof(*pe));
	if (strlen(s) >= sizeof(body))
		return latch_errf(msg, msglen, -EINVAL, "entry is too long");
	strcpy(body, s);
	proto = strip_proto(body);
	if (strstr(body, "://"))
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
	if (latch_dns_name_normalize(host, pe->name, sizeof(pe->name)))
		return latch_errf(msg, msglen, -EINVAL, "'%s': '%s' is not a host name", s, host);
	if (all_digit_tail(pe->name))
		return latch_errf(msg, msglen, -EINVAL,
				  "'%s' ends in an all-digit label, so it is no host name; write an address as "
				  "203.0.113.7 or a prefix as 203.0.113.0/24",
				  s);
	if (pe->kind == LATCH_PENTRY_WILDCARD && !strchr(pe->name, '.'))
		return latch_errf(msg, msglen, -EINVAL,
				  "'%s' would allow the whole top-level domain '%s'; name a domain under it, e.g. "
				  "*.example.%s",
				  s, pe->name, pe->name);
	pe->entry.proto = proto;
	if (!ports) {
		default_ports(&pe->entry);
		return 0;
	}
	if (proto == LATCH_PROTO_ICMP)
		return latch_errf(msg, msglen, -EINVAL, "'%s': ICMP has no ports; write %s/icmp", s, body);
	if (latch_parse_ports(ports, pe->entry.ports, LATCH_RULES_MAX, &pe->entry.n_ports, perrbuf,
			      sizeof(perrbuf)))
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
 */
static int parse_text(const char *text, const char *source, struct pvec *pv, int room, char *extends, int *ext_line,
		      char *err, size_t errlen)
{
	char line[LATCH_PROFILE_LINE_MAX], msg[LATCH_ERR_MAX], name[LATCH_PROFILE_NAME_MAX + 1];
	const char *p = text;
	int lineno = 0, added = 0, ret;

	*extends = '\0';
	*ext_line = 0;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		struct latch_pentry pe;
		char *s, *e;

		lineno++;
		if (len >= sizeof(line))
			return latch_errf_at(err, errlen, -EINVAL, source, lineno, "line is longer than %zu characters",
				    sizeof(line) - 1);
		memcpy(line, p, len);
		line[len] = '\0';
		p = nl ? nl + 1 : p + len;

		for (s = line; blank(*s); s++)
			;
		if (*s == '#') {
			ret = extends_directive(s, name, sizeof(name), msg, sizeof(msg));
			if (ret < 0)
				return latch_errf_at(err, errlen, ret, source, lineno, "%s", msg);
			if (ret && *extends)
				return latch_errf_at(err, errlen, -EINVAL, source, lineno,
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
		e = s + strlen(s);
		while (e > s && blank(e[-1]))
			*--e = '\0';
		if (!*s || !pv)
			continue;
		for (e = s; *e; e++)
			if (blank(*e))
				return latch_errf_at(err, errlen, -EINVAL, source, lineno,
					    "'%s' has a blank inside; write one entry a line: %s", s, ENTRY_FORMS);
		if (parse_entry_line(s, &pe, msg, sizeof(msg)))
			return latch_errf_at(err, errlen, -EINVAL, source, lineno, "%s", msg);
		if (added == room)
			return latch_errf_at(err, errlen, -E2BIG, source, lineno,
				    "more than %d entries in one profile with its chain and overlay; use CIDRs or "
				    "wildcards",
				    LATCH_PROFILE_ENTRIES_MAX);
		copy_source(pe.source, sizeof(pe.source), source);
		pe.line = lineno;
		if (pvec_push(pv, &pe))
			return latch_errf_at(err, errlen, -ENOMEM, source, lineno, "out of memory");
		added++;
	}
	return 0;
}

int latch_profile_parse(const char *text, const char *source, struct latch_pentry **out, int *n, char *extends,
			size_t extlen, char *err, size_t errlen)
{
	char ext[LATCH_PROFILE_NAME_MAX + 1];
	struct pvec pv = { 0 };
	int line, ret;

	*out = NULL;
	*n = 0;
	if (extends && extlen)
		*extends = '\0';
	ret = parse_text(text, source, &pv, LATCH_PROFILE_ENTRIES_MAX, ext, &line, err, errlen);
	if (!ret && extends && strlen(ext) >= extlen)
		ret = latch_errf_at(err, errlen, -ENOSPC, source, line, "no room for the extends name '%s'", ext);
	if (ret) {
		pvec_free(&pv);
		return ret;
	}
	if (extends)
		strcpy(extends, ext);
	*out = pv.v;
	*n = pv.n;
	return 0;
}

/* ---- files and built-ins */

/*
 * Read PATH whole, refusing anything but a regular file that root (or we)
 * own and nobody else may write.  -ENOENT, without a message, when there is
 * no such file.
 */
static int read_file(const char *path, char **text, char *err, size_t errlen)
{
	struct stat st;
	size_t len = 0;
	char *buf = NULL;
	int fd, ret = 0;

	*text = NULL;
	/* O_NOFOLLOW: a link could point anywhere; O_NONBLOCK: a FIFO must not hang us */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		if (errno == ELOOP)
			return latch_errf_at(err, errlen, -ELOOP, path, 0,
				    "is a symbolic link; a profile must be a regular file: replace the link with a copy");
		return latch_errf_at(err, errlen, -errno, path, 0, "cannot open: %s", strerror(errno));
	}
	if (fstat(fd, &st)) {
		ret = latch_errf_at(err, errlen, -errno, path, 0, "cannot stat: %s", strerror(errno));
		goto out;
	}
	/* it decides where sandbox traffic goes: nobody but root may have written it */
	ret = latch_file_check(path, &st, LATCH_FILE_CONFIG, err, errlen);
	if (ret)
		goto out;
	buf = malloc(LATCH_PROFILE_FILE_MAX + 1);
	if (!buf) {
		ret = latch_errf_at(err, errlen, -ENOMEM, path, 0, "out of memory");
		goto out;
	}
	/* read to EOF rather than trust st_size: the file may be growing */
	for (;;) {
		ssize_t r = read(fd, buf + len, LATCH_PROFILE_FILE_MAX + 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = latch_errf_at(err, errlen, -errno, path, 0, "read error: %s", strerror(errno));
			goto out;
		}
		if (!r)
			break;
		len += r;
		if (len > LATCH_PROFILE_FILE_MAX) {
			ret = latch_errf_at(err, errlen, -EFBIG, path, 0, "larger than %d bytes; use CIDRs or wildcards",
				   LATCH_PROFILE_FILE_MAX);
			goto out;
		}
	}
	if (memchr(buf, '\0', len)) {
		ret = latch_errf_at(err, errlen, -EINVAL, path, 0, "has a NUL byte; a profile is a text file");
		goto out;
	}
	buf[len] = '\0';
	*text = buf;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return ret;
}

static const char *builtin_text(const char *name)
{
	for (size_t i = 0; i < N_BUILTIN; i++)
		if (!strcmp(latch_builtin_profiles[i].name, name))
			return latch_builtin_profiles[i].text;
	return NULL;
}

/* "dev, open, research, sealed": for the message that says a name is unknown. */
static void builtin_names(char *buf, size_t len)
{
	struct latch_profile_info *v;
	size_t off = 0;
	int n;

	buf[0] = '\0';
	if (latch_profile_list(NULL, &v, &n, NULL, 0))
		return;
	for (int i = 0; i < n && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s", i ? ", " : "", v[i].name);
	free(v);
}

static int profile_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s.txt", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * The text of profile NAME, DIR/NAME.txt over the built-in.  SOURCE gets the
 * path or "builtin:NAME"; *owned is what the caller frees.  -ENOENT, without
 * a message, when neither exists.
 */
static int find_profile(const char *dir, const char *name, char **owned, const char **text, char *source,
			size_t srclen, char *err, size_t errlen)
{
	int ret;

	*owned = NULL;
	*text = NULL;
	if (dir && *dir) {
		if (profile_path(source, srclen, dir, name))
			return latch_errf_at(err, errlen, -ENAMETOOLONG, dir, 0, "path too long for profile '%s'", name);
		ret = read_file(source, owned, err, errlen);
		if (ret != -ENOENT) {
			*text = *owned;
			return ret;
		}
	}
	*text = builtin_text(name);
	if (!*text)
		return -ENOENT;
	snprintf(source, srclen, "builtin:%s", name);
	return 0;
}

/* The overlay layered over the active profile: no file (or no path) is no overlay. */
static int load_overlay(const char *path, struct pvec *pv, int room, char *err, size_t errlen)
{
	char ext[LATCH_PROFILE_NAME_MAX + 1], *text;
	int line, ret;

	if (!path || !*path)
		return 0;
	ret = read_file(path, &text, err, errlen);
	if (ret == -ENOENT)
		return 0;
	if (ret)
		return ret;
	ret = parse_text(text, path, pv, room, ext, &line, err, errlen);
	free(text);
	if (!ret && *ext)
		ret = latch_errf_at(err, errlen, -EINVAL, path, line,
			   "an overlay cannot '# extends:'; it is layered over whichever profile is active, so remove "
			   "the line or make this file a profile of its own");
	return ret;
}

struct layer {
	char name[LATCH_PROFILE_NAME_MAX + 1];
	char source[PATH_MAX];
	char extends[LATCH_PROFILE_NAME_MAX + 1];
	int ext_line;
	const char *text;
	char *owned; /* text, when read from a file */
};

static int count_lines(const char *text)
{
	int n = 1;

	for (const char *p = text; (p = strchr(p, '\n')); p++)
		n++;
	return n;
}

/* "a -> b -> a": the chain so far, then the name it would go on to. */
static void chain_text(const struct layer *layers, int depth, const char *next, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; i < depth && off < len; i++)
		off += snprintf(buf + off, len - off, "%s -> ", layers[i].name);
	if (off < len)
		snprintf(buf + off, len - off, "%s", next);
}

static int load_open(const char *dir, const char *overlay, struct latch_profile *out, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct pvec ov = { 0 };
	struct stat st;
	int ret;

	if (dir && *dir) {
		if (profile_path(path, sizeof(path), dir, LATCH_PROFILE_OPEN))
			return latch_errf_at(err, errlen, -ENAMETOOLONG, dir, 0, "path too long");
		if (!lstat(path, &st))
			return latch_errf_at(err, errlen, -EINVAL, path, 0,
				    "'open' is built in: it removes the policy, so no file may define it; rename "
				    "this file, e.g. to my-open.txt");
	}
	/* open has no entries, but a broken overlay is still reported now, not at the next switch */
	ret = load_overlay(overlay, &ov, LATCH_PROFILE_ENTRIES_MAX, err, errlen);
	pvec_free(&ov);
	if (ret)
		return ret;
	strcpy(out->name, LATCH_PROFILE_OPEN);
	out->open = true;
	return 0;
}

static struct latch_profile_index *index_make(const struct latch_profile *p);
static void index_free(struct latch_profile_index *x);

int latch_profile_load(const char *dir, const char *name, const char *overlay, struct latch_profile *out, char *err,
		       size_t errlen)
{
	char chain[LATCH_ERR_MAX], known[LATCH_ERR_MAX];
	struct pvec all = { 0 };
	struct layer *layers;
	const char *cur = name;
	int depth = 0, lines = 0, ret;

	memset(out, 0, sizeof(*out));
	ret = latch_profile_name_check(name, err, errlen);
	if (ret)
		return ret;
	if (!strcmp(name, LATCH_PROFILE_OPEN))
		return load_open(dir, overlay, out, err, errlen);
	layers = calloc(LATCH_PROFILE_DEPTH_MAX, sizeof(*layers));
	if (!layers)
		return latch_errf(err, errlen, -ENOMEM, "profile '%s': out of memory", name);

	/*
	 * The chain first: layers[0] is NAME, each next one the profile the
	 * previous extends.  Then the entries, base first (a later layer reads as
	 * adding to an earlier one), into one array sized from the line counts:
	 * copying 65,536 parsed entries from layer arrays into a fresh one cost a
	 * third of a load in first touches of memory.
	 */
	for (;;) {
		struct layer *l = &layers[depth];

		strcpy(l->name, cur);
		ret = find_profile(dir, cur, &l->owned, &l->text, l->source, sizeof(l->source), err, errlen);
		if (ret == -ENOENT && !depth) {
			builtin_names(known, sizeof(known));
			ret = latch_errf(err, errlen, -ENOENT,
					 "profile '%s' not found: there is no %s%s%s.txt and no built-in of that name "
					 "(built-in: %s)",
					 cur, dir && *dir ? dir : "", dir && *dir ? "/" : "", cur, known);
		} else if (ret == -ENOENT) {
			ret = latch_errf_at(err, errlen, -ENOENT, layers[depth - 1].source, layers[depth - 1].ext_line,
				   "extends '%s', which is neither %s%s%s.txt nor a built-in profile; fix the name or "
				   "add the file",
				   cur, dir && *dir ? dir : "", dir && *dir ? "/" : "", cur);
		}
		if (ret)
			goto out;
		ret = parse_text(l->text, l->source, NULL, 0, l->extends, &l->ext_line, err, errlen);
		if (ret)
			goto out;
		lines += count_lines(l->text);
		depth++;
		if (!*l->extends)
			break;
		for (int i = 0; i < depth; i++) {
			if (strcmp(layers[i].name, l->extends))
				continue;
			chain_text(layers, depth, l->extends, chain, sizeof(chain));
			ret = latch_errf_at(err, errlen, -ELOOP, l->source, l->ext_line,
				   "profile cycle %s; remove one of these '# extends:' lines", chain);
			goto out;
		}
		if (depth == LATCH_PROFILE_DEPTH_MAX) {
			chain_text(layers, depth, l->extends, chain, sizeof(chain));
			ret = latch_errf_at(err, errlen, -ELOOP, l->source, l->ext_line,
				   "more than %d profiles in one extends chain (%s); flatten it", LATCH_PROFILE_DEPTH_MAX,
				   chain);
			goto out;
		}
		cur = l->extends;
	}

	if (pvec_reserve(&all, lines < LATCH_PROFILE_ENTRIES_MAX ? lines : LATCH_PROFILE_ENTRIES_MAX)) {
		ret = latch_errf(err, errlen, -ENOMEM, "profile '%s': out of memory", name);
		goto out;
	}
	for (int i = depth - 1; i >= 0; i--) {
		char ext[LATCH_PROFILE_NAME_MAX + 1];
		int line;

		ret = parse_text(layers[i].text, layers[i].source, &all, LATCH_PROFILE_ENTRIES_MAX - all.n, ext, &line,
				 err, errlen);
		if (ret)
			goto out;
	}
	ret = load_overlay(overlay, &all, LATCH_PROFILE_ENTRIES_MAX - all.n, err, errlen);
	if (ret)
		goto out;
	out->entries = all.v;
	out->n = all.n;
	all.v = NULL;
	strcpy(out->name, name);
	out->index = index_make(out);
	if (!out->index && out->n) {
		ret = latch_errf(err, errlen, -ENOMEM, "profile '%s': out of memory", name);
		goto out;
	}
out:
	for (int i = 0; i < LATCH_PROFILE_DEPTH_MAX; i++)
		free(layers[i].owned);
	free(layers);
	pvec_free(&all);
	if (ret)
		latch_profile_free(out);
	return ret;
}

void latch_profile_free(struct latch_profile *p)
{
	if (!p)
		return;
	index_free(p->index);
	free(p->entries);
	memset(p, 0, sizeof(*p));
}

/* ---- listing */

static int info_add(struct latch_profile_info **v, int *n, const char *name, bool builtin, bool file)
{
	struct latch_profile_info *nv;

	for (int i = 0; i < *n; i++) {
		if (strcmp((*v)[i].name, name))
			continue;
		(*v)[i].builtin |= builtin;
		(*v)[i].file |= file;
		return 0;
	}
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	memset(&nv[*n], 0, sizeof(nv[*n]));
	strcpy(nv[*n].name, name);
	nv[*n].builtin = builtin;
	nv[*n].file = file;
	(*n)++;
	return 0;
}

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct latch_profile_info *)a)->name, ((const struct latch_profile_info *)b)->name);
}

int latch_profile_list(const char *dir, struct latch_profile_info **out, int *n, char *err, size_t errlen)
{
	struct latch_profile_info *v = NULL;
	struct dirent *de;
	int count = 0, ret = 0;
	DIR *d = NULL;

	*out = NULL;
	*n = 0;
	ret = info_add(&v, &count, LATCH_PROFILE_OPEN, true, false);
	for (size_t i = 0; i < N_BUILTIN && !ret; i++)
		ret = info_add(&v, &count, latch_builtin_profiles[i].name, true, false);
	if (ret)
		goto nomem;
	if (dir && *dir && !(d = opendir(dir)) && errno != ENOENT) {
		ret = latch_errf_at(err, errlen, -errno, dir, 0, "cannot read the profile directory: %s", strerror(errno));
		free(v);
		return ret;
	}
	while (d && (errno = 0, de = readdir(d))) {
		char name[LATCH_PROFILE_NAME_MAX + 1];
		size_t len = strlen(de->d_name);

		/* only names latch_profile_load() could be asked for */
		if (len <= 4 || len - 4 > LATCH_PROFILE_NAME_MAX || strcmp(de->d_name + len - 4, ".txt"))
			continue;
		memcpy(name, de->d_name, len - 4);
		name[len - 4] = '\0';
		if (latch_profile_name_check(name, NULL, 0))
			continue;
		if (info_add(&v, &count, name, false, true))
			goto nomem;
	}
	if (d && errno) {
		ret = latch_errf_at(err, errlen, -errno, dir, 0, "cannot read the profile directory: %s", strerror(errno));
		closedir(d);
		free(v);
		return ret;
	}
	if (d)
		closedir(d);
	qsort(v, count, sizeof(*v), info_cmp);
	*out = v;
	*n = count;
	return 0;
nomem:
	if (d)
		closedir(d);
	free(v);
	return latch_errf(err, errlen, -ENOMEM, "listing profiles: out of memory");
}

/* ---- matching names */

static bool pentry_matches(const struct latch_pentry *pe, const char *norm)
{
	if (pe->kind == LATCH_PENTRY_HOST)
		return !strcmp(pe->name, norm);
	if (pe->kind == LATCH_PENTRY_WILDCARD)
		return latch_wildcard_match(pe->name, norm);
	return false;
}

/*
 * The smallest index past AFTER, in the chain of entries of KIND named NAME.
 * The index keys every HOST and WILDCARD entry on (kind, name); a name then
 * matches the HOST chain of itself and the WILDCARD chains of each domain
 * strictly above it.  A profile of 65,536 names answered a match in 250 us
 * by scanning; the resolver asks twice per query.
 */
#define INDEX_NONE (-1)

struct latch_profile_index {
	uint32_t mask;
	int32_t *slot; /* the first entry of a (kind, name), or INDEX_NONE */
	int32_t *next; /* per entry: the next entry of its (kind, name), ascending */
};

/* The slot of (kind, name): the one holding its first entry, or the empty one where it would go. */
static int32_t *index_slot(const struct latch_profile_index *x, const struct latch_pentry *entries, int kind,
			   const char *name)
{
	uint32_t h = latch_fnv1a(LATCH_FNV1A_INIT ^ (uint32_t)kind, name, strlen(name)) & x->mask;

	while (x->slot[h] != INDEX_NONE &&
	       (entries[x->slot[h]].kind != (enum latch_pentry_kind)kind || strcmp(entries[x->slot[h]].name, name)))
		h = (h + 1) & x->mask;
	return &x->slot[h];
}

static void index_free(struct latch_profile_index *x)
{
	if (!x)
		return;
	free(x->slot);
	free(x->next);
	free(x);
}

/* NULL when out of memory (or for a profile without entries). */
static struct latch_profile_index *index_make(const struct latch_profile *p)
{
	struct latch_profile_index *x;
	int32_t *tail;
	uint32_t size = 1;

	if (!p->n)
		return NULL;
	while (size < 2 * (uint32_t)p->n)
		size <<= 1;
	x = calloc(1, sizeof(*x));
	tail = malloc(p->n * sizeof(*tail));
	if (x) {
		x->slot = malloc(size * sizeof(*x->slot));
		x->next = malloc(p->n * sizeof(*x->next));
	}
	if (!x || !tail || !x->slot || !x->next) {
		free(tail);
		index_free(x);
		return NULL;
	}
	x->mask = size - 1;
	memset(x->slot, 0xff, size * sizeof(*x->slot)); /* INDEX_NONE */
	for (int i = 0; i < p->n; i++) {
		const struct latch_pentry *pe = &p->entries[i];
		int32_t *slot;

		x->next[i] = INDEX_NONE;
		if (pe->kind != LATCH_PENTRY_HOST && pe->kind != LATCH_PENTRY_WILDCARD)
			continue;
		slot = index_slot(x, p->entries, pe->kind, pe->name);
		if (*slot == INDEX_NONE)
			*slot = i;
		else
			x->next[tail[*slot]] = i;
		tail[*slot] = i;
	}
	free(tail);
	return x;
}

static int chain_after(const struct latch_profile *p, int kind, const char *name, int after)
{
	for (int32_t i = *index_slot(p->index, p->entries, kind, name); i != INDEX_NONE; i = p->index->next[i])
		if (i > after)
			return i;
	return INDEX_NONE;
}

const struct latch_pentry *latch_profile_next_match(const struct latch_profile *p, const char *name,
						    const struct latch_pentry *after)
{
	char norm[LATCH_DNS_NAME_MAX + 1];
	int i = after ? (int)(after - p->entries) + 1 : 0, best;

	if (latch_dns_name_normalize(name, norm, sizeof(norm)))
		return NULL;
	if (!p->index) { /* a profile not made by latch_profile_load */
		for (; i < p->n; i++)
			if (pentry_matches(&p->entries[i], norm))
				return &p->entries[i];
		return NULL;
	}
	best = chain_after(p, LATCH_PENTRY_HOST, norm, i - 1);
	for (const char *dot = strchr(norm, '.'); dot; dot = strchr(dot + 1, '.')) {
		int w = dot > norm ? chain_after(p, LATCH_PENTRY_WILDCARD, dot + 1, i - 1) : INDEX_NONE;

		if (w != INDEX_NONE && (best == INDEX_NONE || w < best))
			best = w;
	}
	return best == INDEX_NONE ? NULL : &p->entries[best];
}

static int range_cmp(const void *a, const void *b)
{
	const struct latch_port_range *x = a, *y = b;

	return x->lo != y->lo ? x->lo - y->lo : x->hi - y->hi;
}

/* Add [lo, hi] to E's ports, kept sorted and coalesced; past the limit the highest go. */
static void ports_add(struct latch_entry *e, uint16_t lo, uint16_t hi)
{
	struct latch_port_range r[LATCH_RULES_MAX + 1];
	int n = e->n_ports, out = 0;

	memcpy(r, e->ports, n * sizeof(r[0]));
	r[n++] = (struct latch_port_range){ lo, hi };
	qsort(r, n, sizeof(r[0]), range_cmp);
	for (int i = 1; i < n; i++) {
		if ((int)r[i].lo <= (int)r[out].hi + 1) {
			if (r[i].hi > r[out].hi)
				r[out].hi = r[i].hi;
		} else {
			r[++out] = r[i];
		}
	}
	n = out + 1;
	if (n > LATCH_RULES_MAX)
		n = LATCH_RULES_MAX; /* fewer ports, never wider ones */
	memcpy(e->ports, r, n * sizeof(r[0]));
	e->n_ports = n;
}

bool latch_profile_match(const struct latch_profile *p, const char *name, struct latch_entry *ports_out)
{
	const struct latch_pentry *pe = NULL, *first = NULL;

	memset(ports_out, 0, sizeof(*ports_out));
	while ((pe = latch_profile_next_match(p, name, pe))) {
		if (!first) {
			first = pe;
			ports_out->proto = pe->entry.proto;
		}
		if (pe->entry.proto != first->entry.proto)
			continue;
		for (int i = 0; i < pe->entry.n_ports; i++)
			ports_add(ports_out, pe->entry.ports[i].lo, pe->entry.ports[i].hi);
	}
	return first != NULL;
}

void latch_pentry_format(const struct latch_pentry *pe, char *buf, size_t len)
{
	const struct latch_entry *e = &pe->entry;
	size_t off;

	if (pe->kind == LATCH_PENTRY_CIDR) {
		latch_entry_format(e, buf, len);
		return;
	}
	off = snprintf(buf, len, "%s%s", pe->kind == LATCH_PENTRY_WILDCARD ? "*." : "", pe->name);
	for (int i = 0; i < e->n_ports && off < len; i++) {
		if (e->ports[i].lo == e->ports[i].hi)
			off += snprintf(buf + off, len - off, "%c%u", i ? ',' : ':', e->ports[i].lo);
		else
			off += snprintf(buf + off, len - off, "%c%u-%u", i ? ',' : ':', e->ports[i].lo, e->ports[i].hi);
	}
	if (off < len)
		snprintf(buf + off, len - off, "%s",
			 e->proto == LATCH_PROTO_TCP   ? "/tcp"
			 : e->proto == LATCH_PROTO_UDP ? "/udp"
			 : e->proto == LATCH_PROTO_ICMP ? "/icmp"
							: "");
}
