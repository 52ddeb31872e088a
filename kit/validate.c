// SPDX-License-Identifier: GPL-2.0-only
/*
 * validate.c - check a kit as read and build the struct latch_kit.
 *
 * Every rule a route depends on is checked here, at load time, so a bad kit
 * is refused before any sandbox gets it and `latch kit check` can say so.
 * The first failure is one line: the file, the credential, and the fix, in
 * kosa8's words where kosa8 has them.  The order is the order of the file:
 * the kit's name, description, command, provider and egress_allow, then
 * each credential's name, upstream, secret, header, scheme, methods, paths,
 * env, provider, caps, priced_endpoints, allow_provider_tools, ca_file and
 * alternatives (docs/kits.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit/raw.h"

int kit_fail(struct kit_ctx *c, const char *fmt, ...)
{
	char msg[LATCH_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return latch_errf(c->err, c->errlen, -EINVAL, "%s: %s%s", c->source, c->where, msg);
}

/* Copy S into a DST of LEN bytes, or fail naming FIELD. */
static int copy(struct kit_ctx *c, char *dst, size_t len, const char *s, const char *field)
{
	size_t n = strlen(s);

	if (n >= len)
		return kit_fail(c, "%s is longer than %zu characters", field, len - 1);
	memcpy(dst, s, n + 1);
	return 0;
}

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

bool kit_var_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > LATCH_KIT_VAR_MAX || (*s >= '0' && *s <= '9'))
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* kosa8's rule for credential names, so a route's URL segment is always plain. */
static bool route_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= LATCH_KIT_CRED_NAME_MAX && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* An RFC 9110 token: what a header name and a method are made of. */
bool kit_token_ok(const char *s)
{
	size_t n = strlen(s);

	return n && strspn(s, "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") == n;
}

/* ---- providers */

static const char *const provider_names[] = {
	[LATCH_PROVIDER_OTHER] = "other",
	[LATCH_PROVIDER_OPENAI] = "openai",
	[LATCH_PROVIDER_ANTHROPIC] = "anthropic",
	[LATCH_PROVIDER_GEMINI] = "gemini",
};

const char *latch_provider_name(enum latch_provider p)
{
	return (unsigned)p < sizeof(provider_names) / sizeof(provider_names[0]) ? provider_names[p] : "other";
}

static int parse_provider(struct kit_ctx *c, const char *s, enum latch_provider *out)
{
	for (size_t i = 0; i < sizeof(provider_names) / sizeof(provider_names[0]); i++)
		if (!strcmp(s, provider_names[i])) {
			*out = i;
			return 0;
		}
	return kit_fail(c, "provider \"%s\" must be one of openai, anthropic, gemini, other", s);
}

/* A kit from kosa8 names no provider: its upstream does, for the APIs budget/ prices. */
static enum latch_provider provider_of_host(const char *host)
{
	static const struct {
		const char *host;
		enum latch_provider p;
	} known[] = {
		{ "api.openai.com", LATCH_PROVIDER_OPENAI },
		{ "api.anthropic.com", LATCH_PROVIDER_ANTHROPIC },
		{ "generativelanguage.googleapis.com", LATCH_PROVIDER_GEMINI },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(host, known[i].host))
			return known[i].p;
	return LATCH_PROVIDER_OTHER;
}

/* ---- upstreams */

/* A host name: labels of 1-63 of a-z, 0-9 and '-', not at a label's ends; folded to lower case. */
static bool host_name_ok(char *h)
{
	size_t n = strlen(h), label = 0;

	if (!n || n > LATCH_KIT_HOST_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		char ch = h[i];

		if (ch == '.' || !ch) {
			if (!label || h[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (ch >= 'A' && ch <= 'Z')
			h[i] = ch - 'A' + 'a';
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
			return false;
		if ((!label && ch == '-') || ++label > 63)
			return false;
	}
	return true;
}

static bool loopback(const struct latch_kit_upstream *up)
{
	struct latch_addr a;

	if (!strcmp(up->host, "localhost"))
		return true;
	if (latch_parse_addr(up->host, &a, NULL, 0))
		return false;
	if (a.family == AF_INET)
		return a.bytes[0] == 127;
	return IN6_IS_ADDR_LOOPBACK(&a.v6);
}

/*
 * URL into up->host, port and tls: https://host[:port], an address in
 * brackets for IPv6, no user, no path (one trailing '/' is no path).  With
 * LOOPBACK_HTTP, also http:// to this host's loopback: a model server.
 */
static int parse_upstream(struct kit_ctx *c, const char *url, bool loopback_http, struct latch_kit_upstream *up)
{
	const char *want = loopback_http ? "https://host[:port] (or http:// to this host's loopback)" : "https://host";
	char auth[LATCH_KIT_HOST_MAX + 16], *host = auth, *port = NULL;
	const char *rest;
	struct latch_addr a;
	size_t n;

	if (!strncasecmp(url, "https://", 8)) {
		up->tls = true;
		rest = url + 8;
	} else if (loopback_http && !strncasecmp(url, "http://", 7)) {
		up->tls = false;
		rest = url + 7;
	} else {
		return kit_fail(c, "upstream \"%s\" must be %s with no path", url, want);
	}
	n = strcspn(rest, "/?#");
	if (rest[n] && strcmp(rest + n, "/"))
		return kit_fail(c, "upstream \"%s\" must be %s with no path", url, want);
	if (!n || n >= sizeof(auth))
		return kit_fail(c, "upstream \"%s\" has no host; write %s", url, want);
	memcpy(auth, rest, n);
	auth[n] = '\0';
	if (strchr(auth, '@'))
		return kit_fail(c, "upstream \"%s\" carries a user or password; the key goes in secret:, write %s", url,
				want);
	if (auth[0] == '[') {
		char *close = strchr(auth, ']');

		if (!close || (close[1] && close[1] != ':'))
			return kit_fail(
				c, "upstream \"%s\": an IPv6 address is written [2001:db8::1] or [2001:db8::1]:PORT",
				url);
		*close = '\0';
		host = auth + 1;
		port = close[1] ? close + 2 : NULL;
		if (latch_parse_addr(host, &a, NULL, 0) || a.family != AF_INET6)
			return kit_fail(c, "upstream \"%s\": '%s' is not an IPv6 address", url, host);
	} else {
		if ((port = strchr(auth, ':')))
			*port++ = '\0';
		if (strspn(auth, "0123456789.") == strlen(auth)) {
			if (latch_parse_addr(auth, &a, NULL, 0) || a.family != AF_INET)
				return kit_fail(c, "upstream \"%s\": '%s' is not an IPv4 address", url, auth);
		} else if (!host_name_ok(auth)) {
			return kit_fail(
				c, "upstream \"%s\": '%s' is not a host name; write %s, e.g. https://api.example.com",
				url, auth, want);
		}
	}
	up->port = up->tls ? 443 : 80;
	if (port) {
		uint32_t p;

		if (latch_parse_uint(port, 1, 65535, &p))
			return kit_fail(c, "upstream \"%s\": port '%s' must be 1-65535", url, port);
		up->port = p;
	}
	if (strlen(host) >= sizeof(up->host))
		return kit_fail(c, "upstream \"%s\": the host is longer than %d characters", url, LATCH_KIT_HOST_MAX);
	strcpy(up->host, host);
	if (!up->tls && !loopback(up))
		return kit_fail(c,
				"upstream \"%s\" is plain http to another host; http:// is only for a model server on "
				"this host's loopback (127.0.0.1, [::1], localhost): use https://",
				url);
	return 0;
}

void latch_kit_upstream_url(const struct latch_kit_upstream *up, char *buf, size_t len)
{
	bool v6 = strchr(up->host, ':') != NULL;
	bool dflt = up->port == (up->tls ? 443 : 80);
	char port[8] = "";

	if (!dflt)
		snprintf(port, sizeof(port), ":%u", up->port);
	snprintf(buf, len, "%s://%s%s%s%s%s", up->tls ? "https" : "http", v6 ? "[" : "", up->host, v6 ? "]" : "", port,
		 up->base_path);
}

/* ---- paths */

/*
 * An absolute path prefix, plain: no '.' or '..' segment, no empty segment,
 * no %-escape, nothing outside a URL path's characters.  The broker refuses
 * requests with two readings; a prefix with two readings is refused here.
 * One trailing '/' is dropped ("/v1/" is "/v1"); ALLOW_EMPTY for a base_path.
 */
int kit_check_path(struct kit_ctx *c, const char *field, const char *s, bool allow_empty, char *out, size_t outlen)
{
	size_t n = strlen(s);

	if (!n && allow_empty) {
		*out = '\0';
		return 0;
	}
	if (s[0] != '/')
		return kit_fail(c, "%s \"%s\" must be absolute: write /%s", field, s, s);
	if (strchr(s, '%'))
		return kit_fail(c, "%s \"%s\" has a %%-escape; write it decoded (the broker refuses encoded paths)",
				field, s);
	if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@/") != n)
		return kit_fail(c,
				"%s \"%s\" has a character a URL path can't hold plainly (a blank, ?, #, \\, a "
				"quote or a control); write the path alone, e.g. /v1/messages",
				field, s);
	for (const char *seg = s + 1; seg <= s + n; seg++) {
		size_t len = strcspn(seg, "/");

		if ((len == 1 && seg[0] == '.') || (len == 2 && !strncmp(seg, "..", 2)))
			return kit_fail(c, "%s \"%s\" has a . or .. segment; write the path it means", field, s);
		if (!len && seg[len] == '/')
			return kit_fail(c, "%s \"%s\" has an empty segment (//); write each '/' once", field, s);
		seg += len;
	}
	if (n > 1 && s[n - 1] == '/')
		n--;
	if (n >= outlen)
		return kit_fail(c, "%s \"%s\" is longer than %zu characters", field, s, outlen - 1);
	memcpy(out, s, n);
	out[n] = '\0';
	return 0;
}

/* ---- secrets, headers, files */

/* Header names that frame or route the request: the key must never be written there. */
static bool framing_header(const char *h)
{
	static const char *const framing[] = {
		"host", "content-length", "transfer-encoding", "connection", "keep-alive",	   "proxy-connection",
		"te",	"trailer",	  "upgrade",	       "expect",     "proxy-authorization"
	};

	for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++)
		if (!strcasecmp(h, framing[i]))
			return true;
	return false;
}

/* An absolute path with no . or .. in it: the file named is the file read, whatever the working directory. */
static int check_file_path(struct kit_ctx *c, const char *field, const char *s, char *out, size_t len)
{
	size_t n = strlen(s);
	bool dots = strstr(s, "/./") || strstr(s, "/../") || (n >= 2 && !strcmp(s + n - 2, "/.")) ||
		    (n >= 3 && !strcmp(s + n - 3, "/.."));

	if (s[0] != '/' || dots || has_control(s))
		return kit_fail(c, "%s \"%s\" must be an absolute path without . or .., e.g. /etc/latch/secrets/NAME",
				field, s);
	return copy(c, out, len, s, field);
}

/*
 * ca_file decides whom latchd trusts for this upstream: a regular file (not
 * a link) that root (or the caller) owns and nobody else may write.
 */
static int check_ca_file(struct kit_ctx *c, const char *path)
{
	char why[LATCH_ERR_MAX];
	struct stat st;

	if (lstat(path, &st))
		return kit_fail(c, "ca_file %s: %s; give the PEM file of the upstream's CA", path, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return kit_fail(c, "ca_file %s is a symbolic link; point ca_file at the file itself", path);
	if (latch_file_check(path, &st, LATCH_FILE_CONFIG, why, sizeof(why)))
		return kit_fail(c, "ca_file %s", why);
	return 0;
}

/*
 * The key of UP: secret VAR or secret_file PATH, exactly one, unless
 * NONE_OK (a loopback model server takes none).  HEADER and SCHEME, then
 * CA_FILE and PROVIDER (DFLT when not given, else the host's).
 */
static int check_auth(struct kit_ctx *c, struct latch_kit_upstream *up, const char *secret, const char *secret_file,
		      bool none_ok)
{
	if (secret && *secret && secret_file && *secret_file)
		return kit_fail(c, "secret and secret_file both given; keep one");
	if (secret && *secret) {
		if (!kit_var_name_ok(secret))
			return kit_fail(c,
					"secret \"%s\" is not an environment variable's name; write e.g. secret: "
					"WEATHER_API_KEY",
					secret);
		return copy(c, up->secret_var, sizeof(up->secret_var), secret, "secret");
	}
	if (secret_file && *secret_file)
		return check_file_path(c, "secret_file", secret_file, up->secret_file, sizeof(up->secret_file));
	if (none_ok)
		return 0;
	return kit_fail(c, "secret names nothing; write secret: VARIABLE (taken from the environment of latch up) or "
			   "secret_file: /PATH");
}

static int check_header(struct kit_ctx *c, struct latch_kit_upstream *up, const char *header, const char *scheme)
{
	size_t n;

	if (!header || !*header)
		return kit_fail(c, "header is missing; name the header the key goes in, e.g. header: Authorization");
	if (!kit_token_ok(header))
		return kit_fail(c,
				"header \"%s\" is not a header name (an RFC 9110 token: letters, digits and "
				"!#$%%&'*+-.^_`|~); write e.g. header: x-api-key",
				header);
	if (framing_header(header))
		return kit_fail(c,
				"header \"%s\" frames or routes the request; the key goes in an authentication header "
				"such as Authorization",
				header);
	if (copy(c, up->header, sizeof(up->header), header, "header"))
		return -EINVAL;
	if (!scheme)
		scheme = "";
	n = strlen(scheme);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)scheme[i] < 0x20 || (unsigned char)scheme[i] >= 0x7f)
			return kit_fail(c, "scheme \"%s\" must be plain printable text, e.g. \"Bearer \"", scheme);
	/* "Bearer" glued to the key is "Bearersk-...": the space is part of the scheme */
	if (n && ((scheme[n - 1] >= 'A' && scheme[n - 1] <= 'Z') || (scheme[n - 1] >= 'a' && scheme[n - 1] <= 'z')))
		return kit_fail(c, "scheme \"%s\" would be glued to the key; write \"%s \" (with the space)", scheme,
				scheme);
	return copy(c, up->scheme, sizeof(up->scheme), scheme, "scheme");
}

/* ---- methods, env */

static int check_methods(struct kit_ctx *c, const struct raw_cred *r, struct latch_kit_cred *cr)
{
	if (r->methods_count > LATCH_KIT_METHODS_MAX)
		return kit_fail(c, "more than %d methods", LATCH_KIT_METHODS_MAX);
	for (unsigned i = 0; i < r->methods_count; i++) {
		char m[LATCH_KIT_METHOD_MAX + 1];
		bool dup = false;

		if (strlen(r->methods[i]) > LATCH_KIT_METHOD_MAX || !kit_token_ok(r->methods[i]))
			return kit_fail(c, "method \"%s\" is not an HTTP method; write e.g. methods: [GET, POST]",
					r->methods[i]);
		/* methods are folded once, here; a request's method is compared exactly */
		for (size_t k = 0; k <= strlen(r->methods[i]); k++)
			m[k] = (r->methods[i][k] >= 'a' && r->methods[i][k] <= 'z') ? r->methods[i][k] - 32 :
										      r->methods[i][k];
		if (!strcmp(m, "TRACE"))
			return kit_fail(c, "method TRACE is never brokered: it echoes the request back, key included; "
					   "remove it");
		if (!strcmp(m, "CONNECT"))
			return kit_fail(c,
					"method CONNECT is not a route's: tunnels go through HTTPS_PROXY; remove it");
		for (int k = 0; k < cr->n_methods; k++)
			dup |= !strcmp(cr->methods[k], m);
		if (!dup)
			strcpy(cr->methods[cr->n_methods++], m);
	}
	return 0;
}

static bool proxy_var(const char *name)
{
	static const char *const own[] = { "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "ALL_PROXY" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcasecmp(name, own[i]))
			return true;
	return false;
}

/* Every "{{" must open {{url}} or {{placeholder}}; *placeholder says if the latter is there. */
static int check_template(struct kit_ctx *c, const struct raw_env *e, bool *placeholder)
{
	for (const char *p = e->value; (p = strstr(p, "{{")); p += 2) {
		if (!strncmp(p, "{{placeholder}}", 15))
			*placeholder = true;
		else if (strncmp(p, "{{url}}", 7))
			return kit_fail(c, "env %s has an unknown %.20s; write {{url}} or {{placeholder}}", e->name, p);
	}
	return 0;
}

static int check_env(struct kit_ctx *c, const struct raw_doc *doc, int i, const struct latch_kit *kit,
		     struct latch_kit_cred *cr)
{
	bool placeholder = false;
	int n = i < doc->n_creds ? doc->n_env[i] : 0;

	if (n > LATCH_KIT_ENV_MAX)
		return kit_fail(c, "env has more than %d variables", LATCH_KIT_ENV_MAX);
	for (int k = 0; k < n; k++) {
		const struct raw_env *e = &doc->env[i][k];
		struct latch_kit_env *out = &cr->env[cr->n_env];

		if (!kit_var_name_ok(e->name))
			return kit_fail(c, "env \"%s\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*, at most %d)",
					e->name, LATCH_KIT_VAR_MAX);
		if (proxy_var(e->name))
			return kit_fail(c, "env %s is latch's own: the sandbox's proxy is its broker; remove it",
					e->name);
		for (int j = 0; j < cr->n_env; j++)
			if (!strcmp(cr->env[j].name, e->name))
				return kit_fail(c, "env %s is given twice; keep one", e->name);
		for (int ci = 0; ci < kit->n_creds; ci++)
			for (int j = 0; j < kit->creds[ci].n_env; j++)
				if (!strcmp(kit->creds[ci].env[j].name, e->name))
					return kit_fail(c,
							"env %s is also given by credential \"%s\"; a variable has one "
							"source",
							e->name, kit->creds[ci].name);
		if (has_control(e->value))
			return kit_fail(c, "env %s must be one line of printable text", e->name);
		if (check_template(c, e, &placeholder))
			return -EINVAL;
		if (strlen(e->value) > LATCH_KIT_ENV_VALUE_MAX)
			return kit_fail(c, "env %s is longer than %d characters", e->name, LATCH_KIT_ENV_VALUE_MAX);
		strcpy(out->name, e->name);
		strcpy(out->value, e->value);
		cr->n_env++;
	}
	if (!placeholder)
		return kit_fail(c, "env must give the sandbox {{placeholder}} in some variable");
	return 0;
}

/* ---- credentials */

static int check_alt(struct kit_ctx *c, const struct raw_alt *r, const struct latch_kit_cred *cr,
		     struct latch_kit_alt *a)
{
	size_t base = strlen(c->where);

	if (!r->name || !route_name_ok(r->name))
		return kit_fail(c, "alternative name \"%s\" must be 1-32 characters of a-z, 0-9 and '-'",
				r->name ? r->name : "");
	for (int k = 0; k < cr->n_alts; k++)
		if (!strcmp(cr->alts[k].name, r->name))
			return kit_fail(c, "alternative \"%s\" is given twice; each needs a name of its own", r->name);
	strcpy(a->name, r->name);
	snprintf(c->where + base, sizeof(c->where) - base, "alternative \"%s\": ", r->name);
	if (!r->upstream)
		return kit_fail(c, "upstream is missing; write upstream: https://host");
	if (parse_upstream(c, r->upstream, true, &a->up) ||
	    kit_check_path(c, "base_path", r->base_path ? r->base_path : "", true, a->up.base_path,
			   sizeof(a->up.base_path)) ||
	    check_auth(c, &a->up, r->secret, r->secret_file, !a->up.tls) ||
	    check_header(c, &a->up, r->header ? r->header : cr->up.header, r->scheme ? r->scheme : cr->up.scheme))
		return -EINVAL;
	/* another upstream is another bill: its own provider, or its host's, never the credential's */
	a->up.provider = provider_of_host(a->up.host);
	if (r->provider && parse_provider(c, r->provider, &a->up.provider))
		return -EINVAL;
	if (r->ca_file && (check_file_path(c, "ca_file", r->ca_file, a->up.ca_file, sizeof(a->up.ca_file)) ||
			   check_ca_file(c, a->up.ca_file)))
		return -EINVAL;
	c->where[base] = '\0';
	return 0;
}

/* KIT_PROVIDER: the kit's `provider:`, or -1 when it names none. */
static int check_cred(struct kit_ctx *c, const struct raw_kit *raw, const struct raw_doc *doc, int i, int kit_provider,
		      const struct latch_kit *kit, struct latch_kit_cred *cr)
{
	const struct raw_cred *r = &raw->credentials[i];

	c->where[0] = '\0';
	if (!r->name || !*r->name)
		return kit_fail(c, "credential %d has no name; give it one of 1-32 characters of a-z, 0-9 and '-'",
				i + 1);
	if (!route_name_ok(r->name))
		return kit_fail(c, "credential name \"%s\" must be 1-32 characters of a-z, 0-9 and '-'", r->name);
	if (latch_kit_cred_find(kit, r->name))
		return kit_fail(c, "credential \"%s\" is given twice; each credential needs a name of its own",
				r->name);
	strcpy(cr->name, r->name);
	snprintf(c->where, sizeof(c->where), "credential \"%s\": ", r->name);
	if (!r->upstream || !*r->upstream)
		return kit_fail(c, "upstream is missing; write upstream: https://host");
	if (parse_upstream(c, r->upstream, false, &cr->up) ||
	    check_auth(c, &cr->up, r->secret, r->secret_file, false) ||
	    check_header(c, &cr->up, r->header, r->scheme) || check_methods(c, r, cr))
		return -EINVAL;
	if (r->paths_count > LATCH_KIT_PATHS_MAX)
		return kit_fail(c, "more than %d paths", LATCH_KIT_PATHS_MAX);
	for (unsigned k = 0; k < r->paths_count; k++)
		if (kit_check_path(c, "path", r->paths[k], false, cr->paths[cr->n_paths++], sizeof(cr->paths[0])))
			return -EINVAL;
	if (!cr->n_paths)
		strcpy(cr->paths[cr->n_paths++], "/");
	if (check_env(c, doc, i, kit, cr))
		return -EINVAL;
	cr->up.provider = kit_provider >= 0 ? (enum latch_provider)kit_provider : provider_of_host(cr->up.host);
	if (r->provider && parse_provider(c, r->provider, &cr->up.provider))
		return -EINVAL;
	if (kit_check_caps(c, r->caps, &cr->caps) || kit_check_priced(c, r, cr) || kit_check_tools(c, r, cr))
		return -EINVAL;
	if (r->ca_file && (check_file_path(c, "ca_file", r->ca_file, cr->up.ca_file, sizeof(cr->up.ca_file)) ||
			   check_ca_file(c, cr->up.ca_file)))
		return -EINVAL;
	if (r->alternatives_count > LATCH_KIT_ALTS_MAX)
		return kit_fail(c, "more than %d alternatives", LATCH_KIT_ALTS_MAX);
	for (unsigned k = 0; k < r->alternatives_count; k++)
		if (check_alt(c, &r->alternatives[k], cr, &cr->alts[cr->n_alts++]))
			return -EINVAL;
	c->where[0] = '\0';
	return 0;
}

/* ---- the kit */

static char **copy_list(char *const *v, unsigned n)
{
	char **out = calloc(n + 1, sizeof(*out));

	for (unsigned i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			while (i)
				free(out[--i]);
			free(out);
			return NULL;
		}
	return out;
}

/*
 * egress_allow entries are profile entries (host[:ports], *.domain[:ports],
 * CIDR[:ports]), so they go through profile/'s one parser, as a text of one
 * entry a line: blanks, '#' and line breaks were refused before, so line N
 * is entry N and no entry can become a comment or `# extends:`.
 */
static int parse_egress(const char *text, const char *source, char *err, size_t errlen)
{
	struct latch_pentry *entries = NULL;
	int n, ret = latch_profile_parse(text, source, &entries, &n, NULL, 0, err, errlen);

	free(entries);
	return ret ? -EINVAL : 0;
}

static int check_egress(struct kit_ctx *c, const struct raw_kit *raw, const struct latch_kit_opts *opts,
			struct latch_kit *kit)
{
	char source[PATH_MAX + 32];
	size_t len = 1;

	if (raw->egress_allow_count > LATCH_KIT_EGRESS_MAX)
		return kit_fail(c, "egress_allow has more than %d entries; use wildcards or CIDRs",
				LATCH_KIT_EGRESS_MAX);
	for (unsigned i = 0; i < raw->egress_allow_count; i++) {
		const char *e = raw->egress_allow[i];

		/* a blank, '#' or line break would change what the text means to the profile parser */
		if (!*e || strpbrk(e, " \t#") || has_control(e))
			return kit_fail(c,
					"egress_allow entry \"%s\" must be one entry without blanks or '#', e.g. "
					"pypi.org:443",
					e);
		len += strlen(e) + 1;
	}
	kit->egress = copy_list(raw->egress_allow, raw->egress_allow_count);
	kit->egress_text = calloc(1, len);
	if (!kit->egress || !kit->egress_text)
		return latch_errf(c->err, c->errlen, -ENOMEM, "%s: out of memory", c->source);
	kit->n_egress = raw->egress_allow_count;
	for (int i = 0; i < kit->n_egress; i++) {
		strcat(kit->egress_text, kit->egress[i]);
		strcat(kit->egress_text, "\n");
	}
	if (!kit->n_egress)
		return 0;
	snprintf(source, sizeof(source), "%s: egress_allow", c->source);
	return parse_egress(kit->egress_text, source, c->err, c->errlen);
}

int kit_build(const struct raw_kit *raw, const struct raw_doc *doc, const char *source, const char *default_name,
	      const struct latch_kit_opts *opts, struct latch_kit *kit, char *err, size_t errlen)
{
	struct kit_ctx c = { .source = source, .err = err, .errlen = errlen };
	enum latch_provider kit_provider = LATCH_PROVIDER_OTHER;
	const char *name = raw->name ? raw->name : default_name;
	char msg[LATCH_ERR_MAX];

	if (!name)
		return kit_fail(&c, "name is missing; write name: NAME");
	if (latch_parse_file_name("kit", name, msg, sizeof(msg)))
		return kit_fail(&c, "%s", msg);
	if (copy(&c, kit->name, sizeof(kit->name), name, "name"))
		return -EINVAL;
	if (raw->description && (has_control(raw->description) ||
				 copy(&c, kit->description, sizeof(kit->description), raw->description, "description")))
		return kit_fail(&c, "description must be one line of at most %d characters", LATCH_KIT_DESC_MAX);
	if (raw->command_count > LATCH_KIT_COMMAND_MAX)
		return kit_fail(&c, "command has more than %d words", LATCH_KIT_COMMAND_MAX);
	if (raw->command_count) {
		kit->command = copy_list(raw->command, raw->command_count);
		if (!kit->command)
			return latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
		kit->n_command = raw->command_count;
	}
	if (raw->provider && parse_provider(&c, raw->provider, &kit_provider))
		return -EINVAL;
	if (check_egress(&c, raw, opts, kit))
		return -EINVAL;
	if (raw->credentials_count > LATCH_KIT_CREDS_MAX)
		return kit_fail(&c, "more than %d credentials", LATCH_KIT_CREDS_MAX);
	kit->creds = calloc(raw->credentials_count + 1, sizeof(*kit->creds));
	if (!kit->creds)
		return latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
	for (unsigned i = 0; i < raw->credentials_count; i++) {
		if (check_cred(&c, raw, doc, i, raw->provider ? (int)kit_provider : -1, kit, &kit->creds[i]))
			return -EINVAL;
		kit->n_creds++;
	}
	if (kit_check_setup(&c, raw, kit))
		return -EINVAL;
	if (doc->unknown[0])
		snprintf(
			kit->warning, sizeof(kit->warning),
			"kit file %.150s: latch does not read %.270s (ignored; docs/kits.md lists the fields it reads)",
			source, doc->unknown);
	return 0;
}
