// SPDX-License-Identifier: GPL-2.0-only
/*
 * check.c - the route checks, the CONNECT target, the ClientHello's server
 * name and the secret scrubber: pure functions over bytes (check.h).
 *
 * A path with two readings is refused, never tidied: the broker cannot know
 * which reading the upstream would take, and a prefix check on one reading
 * says nothing about the other.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "broker/check.h"
#include "common/common.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A path's bytes by class, one load a byte (a compare chain and strchr()
 * per byte before): URL_UNRESERVED the RFC 3986 unreserved, URL_PCHAR pchar
 * without pct-encoded (unreserved, sub-delims, ':' and '@').
 */
enum { URL_UNRESERVED = 1, URL_PCHAR = 2 };
#define URL_UP (URL_UNRESERVED | URL_PCHAR)
static const unsigned char url_class[256] = {
	['!'] = URL_PCHAR,	['$'] = URL_PCHAR,	['&' ... ','] = URL_PCHAR,
	['-' ... '.'] = URL_UP, ['0' ... '9'] = URL_UP, [':' ... ';'] = URL_PCHAR,
	['='] = URL_PCHAR,	['@'] = URL_PCHAR,	['A' ... 'Z'] = URL_UP,
	['_'] = URL_UP,		['a' ... 'z'] = URL_UP, ['~'] = URL_UP,
};

static bool is_unreserved(unsigned char c)
{
	return url_class[c] & URL_UNRESERVED;
}

static bool is_pchar(unsigned char c)
{
	return url_class[c] & URL_PCHAR;
}

enum hb_refusal hb_target_spelling(const char *t, size_t len)
{
	size_t q = 0, seg = 1;

	if (!len || t[0] != '/')
		return HB_PATH_BYTES;
	while (q < len && t[q] != '?')
		q++;
	for (size_t i = 0; i < q; i++) {
		unsigned char c = t[i];
		int hi, lo, v;

		if (c == '\\')
			return HB_PATH_BACKSLASH;
		if (c == '/' || is_pchar(c))
			continue;
		if (c != '%')
			return HB_PATH_BYTES;
		hi = i + 1 < q ? hexval(t[i + 1]) : -1;
		lo = i + 2 < q ? hexval(t[i + 2]) : -1;
		if (hi < 0 || lo < 0)
			return HB_PATH_BYTES;
		v = hi << 4 | lo;
		/*
		 * Past ASCII, an upstream may read more than the bytes: overlong
		 * UTF-8 (%c0%ae) and NFKC (full-width %ef%bc%8e, one-dot leader
		 * %e2%80%a4) make '.' and '/'.  No API a kit routes to has such a
		 * path (model names are ASCII), so none is taken.
		 */
		if (v >= 0x80)
			return HB_PATH_NON_ASCII;
		if (v == '.' || v == '/' || v == '\\')
			return HB_PATH_ENCODED_SEP;
		if (v == '%')
			return HB_PATH_DOUBLE;
		if (v < 0x20 || v == 0x7f)
			return HB_PATH_BYTES;
		if (is_unreserved(v))
			return HB_PATH_ENCODED_PLAIN;
		i += 2;
	}
	/* segments: "." and ".." (also as "..;param", which some servers strip to ".."), and empty ones */
	for (size_t i = 1; i <= q; i++) {
		if (i < q && t[i] != '/')
			continue;
		size_t n = i - seg;
		const char *s = t + seg;
		const char *semi = memchr(s, ';', n);

		if (semi)
			n = semi - s;
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return HB_PATH_DOT;
		if (i - seg == 0 && i < q)
			return HB_PATH_EMPTY_SEGMENT; /* "//": merged by some servers, not by others */
		seg = i + 1;
	}
	for (size_t i = q + 1; i < len; i++) {
		unsigned char c = t[i];

		if (c == '/' || c == '?' || is_pchar(c))
			continue;
		if (c == '%' && i + 2 < len && hexval(t[i + 1]) >= 0 && hexval(t[i + 2]) >= 0) {
			i += 2;
			continue;
		}
		return c == '\\' ? HB_PATH_BACKSLASH : HB_PATH_BYTES;
	}
	return HB_OK;
}

const struct hb_header *hb_head_override(const struct hb_head *head)
{
	/*
	 * Google's APIs and many frameworks take the method from the first
	 * three; IIS, Symfony and Zend the path from X-Original-URL and
	 * X-Rewrite-URL; proxies and forward-auth from the rest.
	 */
	static const struct hb_name names[] = {
		HB_NAME("x-http-method-override"), HB_NAME("x-http-method"),	  HB_NAME("x-method-override"),
		HB_NAME("x-original-method"),	   HB_NAME("x-forwarded-method"), HB_NAME("x-original-url"),
		HB_NAME("x-original-uri"),	   HB_NAME("x-rewrite-url"),	  HB_NAME("x-forwarded-uri"),
		HB_NAME("x-forwarded-path"),	   HB_NAME("x-forwarded-prefix"), HB_NAME("x-envoy-original-path"),
	};

	for (int i = 0; i < head->n; i++)
		if (hb_name_in(head->h[i].name, head->h[i].name_len, names, sizeof(names) / sizeof(names[0])))
			return &head->h[i];
	return NULL;
}

bool hb_target_route(const char *t, size_t len, char name[33], const char **rest, size_t *rest_len)
{
	size_t i = 1;

	while (i < len && t[i] != '/' && t[i] != '?')
		i++;
	if (i - 1 < 1 || i - 1 > 32)
		return false;
	for (size_t k = 1; k < i; k++)
		if (!((t[k] >= 'a' && t[k] <= 'z') || (t[k] >= '0' && t[k] <= '9') || t[k] == '-'))
			return false;
	memcpy(name, t + 1, i - 1);
	name[i - 1] = 0;
	*rest = t + i;
	*rest_len = len - i;
	return true;
}

bool hb_list_has(const char *v, size_t len, const char *tok, size_t tok_len)
{
	const char *end = v + len;

	while (v < end) {
		const char *t;

		while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
			v++;
		t = v;
		while (v < end && *v != ',' && *v != ' ' && *v != '\t')
			v++;
		if (v > t && (size_t)(v - t) == tok_len && !strncasecmp(t, tok, tok_len))
			return true;
	}
	return false;
}

bool hb_target_own_origin(const char *t, size_t len, const struct sockaddr *own, size_t *skip)
{
	char addr[INET6_ADDRSTRLEN], auth[INET6_ADDRSTRLEN + 16];
	size_t n, bare, left;
	unsigned port;

	if (len < 8 || strncasecmp(t, "http://", 7))
		return false;
	if (own->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)own;

		inet_ntop(AF_INET, &a->sin_addr, addr, sizeof(addr));
		port = ntohs(a->sin_port);
		bare = strlen(addr);
		n = (size_t)snprintf(auth, sizeof(auth), "%s:%u", addr, port);
	} else if (own->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)own;

		inet_ntop(AF_INET6, &a->sin6_addr, addr, sizeof(addr));
		port = ntohs(a->sin6_port);
		bare = strlen(addr) + 2;
		n = (size_t)snprintf(auth, sizeof(auth), "[%s]:%u", addr, port);
	} else {
		return false;
	}
	t += 7;
	left = len - 7;
	/* auth is "ADDR:PORT"; its first `bare` bytes are the address alone */
	if (left > n && t[n] == '/' && !strncasecmp(t, auth, n))
		*skip = 7 + n;
	else if (port == 80 && left > bare && t[bare] == '/' && !strncasecmp(t, auth, bare))
		*skip = 7 + bare;
	else
		return false;
	return true;
}

bool hb_prefix_covers(const char *prefix, const char *path, size_t path_len)
{
	size_t n = strlen(prefix);

	if (n > path_len || memcmp(prefix, path, n))
		return false;
	return n == path_len || prefix[n - 1] == '/' || path[n] == '/';
}

/* Lowercased, percent-decoded copy of S into OUT (at most outlen - 1 bytes). */
static size_t fold_decode(const char *s, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < outlen; i++) {
		char c = s[i];

		if (c == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			c = (char)(hexval(s[i + 1]) << 4 | hexval(s[i + 2]));
			i += 2;
		}
		out[o++] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
	}
	out[o] = 0;
	return o;
}

static bool needle_prep(struct hb_ph_needle *nd, const char *needle)
{
	size_t n = strlen(needle);
	const char *dash;

	if (!n || n >= sizeof(nd->low))
		return false;
	for (size_t i = 0; i <= n; i++)
		nd->low[i] = (needle[i] >= 'A' && needle[i] <= 'Z') ? needle[i] + 32 : needle[i];
	dash = strrchr(nd->low, '-');
	nd->n = n;
	nd->rnd = dash && n - (size_t)(dash + 1 - nd->low) >= 16 ? (size_t)(dash + 1 - nd->low) : n;
	return true;
}

/* The fewest bytes a value needs to hold ND: its random part alone, or all of it. */
static size_t needle_shortest(const struct hb_ph_needle *nd)
{
	return nd->rnd < nd->n ? nd->n - nd->rnd : nd->n;
}

/*
 * Does S hold any of the COUNT needles, as sent or percent-decoded once or
 * twice, in any case, whole or its random part?  The value is decoded once
 * for all of them.  SHORTEST: the least of needle_shortest(); decoding only
 * shortens a value, so a shorter one cannot hold any (most headers).
 */
/* Does BUF (folded) hold any of the needles, whole or its random part alone? */
static bool any_needle(const char *buf, size_t m, const struct hb_ph_needle *nd, int count)
{
	for (int k = 0; k < count; k++)
		if (memmem(buf, m, nd[k].low, nd[k].n) ||
		    (nd[k].rnd < nd[k].n && memmem(buf, m, nd[k].low + nd[k].rnd, nd[k].n - nd[k].rnd)))
			return true;
	return false;
}

static bool holds_needle(const char *s, size_t len, const struct hb_ph_needle *nd, int count, size_t shortest)
{
	char buf[16384];
	size_t m;

	if (!count || len < shortest)
		return false;
	if (len >= sizeof(buf))
		len = sizeof(buf) - 1;
	/*
	 * Each form is searched: as sent (lowercased), decoded once, decoded
	 * twice (a placeholder percent-encoded twice).  A decoding can also
	 * break one up: "%" before a random part that starts with two hex
	 * digits decodes to one byte and the rest.  Without a '%' the forms
	 * are one (the usual header): searched once.
	 */
	if (memchr(s, '%', len)) {
		for (size_t i = 0; i < len; i++)
			buf[i] = (s[i] >= 'A' && s[i] <= 'Z') ? s[i] + 32 : s[i];
		if (any_needle(buf, len, nd, count))
			return true;
	}
	m = fold_decode(s, len, buf, sizeof(buf));
	if (any_needle(buf, m, nd, count))
		return true;
	if (!memchr(buf, '%', m))
		return false;
	m = fold_decode(buf, m, buf, sizeof(buf));
	return any_needle(buf, m, nd, count);
}

bool hb_contains_placeholder(const char *s, size_t len, const char *needle)
{
	struct hb_ph_needle nd;

	return needle_prep(&nd, needle) && holds_needle(s, len, &nd, 1, needle_shortest(&nd));
}

void hb_ph_set_prep(struct hb_ph_set *set, const char *const *placeholders, int n)
{
	int k;

	set->count = 0;
	set->shortest = SIZE_MAX;
	for (k = 0; k < n && set->count < (int)(sizeof(set->nd) / sizeof(set->nd[0])); k++) {
		struct hb_ph_needle *nd = &set->nd[set->count];

		if (!needle_prep(nd, placeholders[k]))
			continue; /* empty or too long: never found, as hb_contains_placeholder() says */
		if (needle_shortest(nd) < set->shortest)
			set->shortest = needle_shortest(nd);
		set->count++;
	}
	set->next = k;
}

static bool holds_placeholder(const char *s, size_t len, const struct hb_ph_rule *rule, const struct hb_ph_set *set)
{
	if (holds_needle(s, len, set->nd, set->count, set->shortest))
		return true;
	for (int k = set->next; k < rule->n_placeholders; k++)
		if (hb_contains_placeholder(s, len, rule->placeholders[k]))
			return true;
	return false;
}

/* "Basic base64(user:password)" -> the password, decoded into out. */
static bool basic_password(const char *v, size_t len, char *out, size_t outlen, size_t *pw_len)
{
	unsigned char dec[768];
	char enc[1024];
	int n, pad = 0;
	const unsigned char *colon;

	if (len < 6 || strncasecmp(v, "basic ", 6))
		return false;
	v += 6;
	len -= 6;
	while (len && *v == ' ')
		v++, len--;
	if (!len || len >= sizeof(enc) || len % 4)
		return false;
	memcpy(enc, v, len);
	enc[len] = 0;
	n = EVP_DecodeBlock(dec, (unsigned char *)enc, (int)len);
	if (n < 0)
		return false;
	while (len && enc[len - 1] == '=')
		len--, pad++;
	/* "====" decodes to 3 bytes with 4 pads: n went below 0, and memchr() read past dec (fuzz_broker) */
	if (pad > 2 || pad > n)
		return false;
	n -= pad;
	colon = memchr(dec, ':', (size_t)n);
	if (!colon || (size_t)(dec + n - colon - 1) >= outlen)
		return false;
	*pw_len = dec + n - colon - 1;
	memcpy(out, colon + 1, *pw_len);
	out[*pw_len] = 0;
	OPENSSL_cleanse(dec, sizeof(dec));
	return true;
}

static bool eq_ct(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);

	return alen == blen && !CRYPTO_memcmp(a, b, blen);
}

/* Which of RULE's forms header H is: 0 its header, i its also[i - 1], -1 none. */
static int form_of(const struct hb_header *h, const struct hb_ph_rule *rule)
{
	if (hb_token_eq(h->name, h->name_len, rule->header))
		return 0;
	for (int i = 0; i < rule->n_also; i++)
		if (hb_token_eq(h->name, h->name_len, rule->also[i].header))
			return i + 1;
	return -1;
}

/* Does V hold SCHEME then exactly PLACEHOLDER?  The scheme in any case, as HTTP reads it. */
static bool form_holds(const char *v, size_t len, const char *scheme, const char *placeholder)
{
	size_t n = strlen(scheme);

	return len >= n && !strncasecmp(v, scheme, n) && eq_ct(v + n, len - n, placeholder);
}

/* The placeholder came in form F (header H): two forms at once would leave two keys to choose from. */
static bool form_taken(struct hb_ph_seen *seen, const struct hb_header *h, int f)
{
	if (seen->form >= 0 && seen->form != f) {
		seen->where = h;
		return true;
	}
	if (seen->form < 0) {
		seen->form = f;
		seen->first = h;
	}
	return false;
}

enum hb_refusal hb_placeholder_check(const struct hb_head *head, const struct hb_ph_rule *rule, struct hb_ph_seen *seen)
{
	static __thread char pw[512];
	struct hb_ph_set own;
	const struct hb_ph_set *set = rule->prepared;
	size_t pw_len;
	bool offered = false;

	*seen = (struct hb_ph_seen){ .form = -1 };
	if (!set) {
		hb_ph_set_prep(&own, rule->placeholders, rule->n_placeholders);
		set = &own;
	}
	if (holds_placeholder(head->target, head->target_len, rule, set))
		return HB_PH_URL;
	for (int i = 0; i < head->n; i++) {
		const struct hb_header *h = &head->h[i];
		int f = form_of(h, rule);
		const char *scheme = f > 0 ? rule->also[f - 1].scheme : rule->scheme;
		bool authz = hb_token_eq(h->name, h->name_len, "authorization");

		if (f >= 0 && form_holds(h->value, h->value_len, scheme, rule->placeholder)) {
			offered = true;
			if (form_taken(seen, h, f))
				return HB_PH_OTHER_HEADER;
			continue;
		}
		if ((f >= 0 || authz) && basic_password(h->value, h->value_len, pw, sizeof(pw), &pw_len)) {
			offered = true;
			if (eq_ct(pw, pw_len, rule->placeholder)) {
				/* git's password: the key goes upstream in the kit's own form */
				if (form_taken(seen, h, 0))
					return HB_PH_OTHER_HEADER;
				continue;
			}
			seen->presented = pw;
			seen->presented_len = pw_len;
			continue;
		}
		if (f < 0) { /* (Authorization here is only stripped, unless it carries a placeholder) */
			if (holds_placeholder(h->value, h->value_len, rule, set)) {
				seen->where = h;
				seen->first = NULL; /* not a second form: a header of no form at all */
				return HB_PH_OTHER_HEADER;
			}
			continue;
		}
		/* another form's header is stripped too, unless it carries a placeholder: a wrong one, named */
		if (f > 0 && !holds_placeholder(h->value, h->value_len, rule, set) &&
		    !memmem(h->value, h->value_len, "latch-placeholder-", 18))
			continue;
		/* something else where the placeholder belongs: name what it was */
		size_t n = strlen(scheme), skip = h->value_len >= n && !strncasecmp(h->value, scheme, n) ? n : 0;

		offered = true;
		seen->presented = h->value + skip;
		seen->presented_len = h->value_len - skip;
	}
	if (seen->presented)
		return HB_PH_WRONG; /* a wrong one beside a right one is still wrong */
	if (seen->form >= 0)
		return HB_OK;
	return offered ? HB_PH_WRONG : HB_PH_MISSING;
}

enum hb_refusal hb_connect_target(const char *t, size_t len, char name[254])
{
	char host[300];
	const char *colon;
	struct in_addr a4;
	const char *last;

	if (len && t[0] == '[')
		return HB_CONNECT_LITERAL;
	colon = memrchr(t, ':', len);
	if (!colon)
		return HB_CONNECT_PORT;
	if (len - (colon - t) - 1 != 3 || memcmp(colon + 1, "443", 3))
		return HB_CONNECT_PORT;
	if ((size_t)(colon - t) >= sizeof(host) || colon == t)
		return HB_CONNECT_NAME;
	memcpy(host, t, colon - t);
	host[colon - t] = 0;
	if (strchr(host, ':') || inet_aton(host, &a4))
		return HB_CONNECT_LITERAL;
	if (latch_dns_name_normalize(host, name, 254))
		return HB_CONNECT_NAME;
	/* top-level labels start with a letter; anything else is an address in some spelling (0x7f.1, 2130706433) */
	last = strrchr(name, '.');
	last = last ? last + 1 : name;
	if (!(last[0] >= 'a' && last[0] <= 'z'))
		return HB_CONNECT_LITERAL;
	return HB_OK;
}

/*
 * encrypted_client_hello (draft-ietf-tls-esni, 0xfe0d) and its older
 * encrypted_server_name (0xffce): the name the broker checks would be the
 * outer, public one, and the server would answer for the inner.
 */
#define TLS_EXT_ECH 0xfe0d
#define TLS_EXT_ESNI 0xffce

static unsigned get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

int hb_client_hello_sni(const uint8_t *buf, size_t len, char name[254])
{
	size_t rec_len, end, i, n;
	bool sni = false, ech = false;

	if (len < 5)
		return len && buf[0] != 0x16 ? -EPROTO : -EAGAIN;
	if (buf[0] != 0x16 || buf[1] != 3)
		return -EPROTO;
	rec_len = get16(buf + 3);
	if (rec_len < 4 || rec_len > 16384)
		return -EPROTO;
	if (len < 5 + rec_len)
		return -EAGAIN;
	if (buf[5] != 1) /* ClientHello */
		return -EPROTO;
	/*
	 * The ClientHello must fit in its first record: what a next record
	 * held (an encrypted_client_hello) would not be read.
	 */
	if (4 + ((size_t)buf[6] << 16 | get16(buf + 7)) > rec_len)
		return -EPROTO;
	end = 5 + rec_len;
	i = 5 + 4 + 2 + 32; /* handshake header, client_version, random */
	if (i + 1 > end)
		return -EPROTO;
	i += 1 + buf[i]; /* session_id */
	if (i + 2 > end)
		return -EPROTO;
	i += 2 + get16(buf + i); /* cipher_suites */
	if (i + 1 > end)
		return -EPROTO;
	i += 1 + buf[i]; /* compression_methods */
	if (i + 2 > end)
		return -ENOENT;
	n = get16(buf + i);
	i += 2;
	if (i + n > end)
		return -EPROTO; /* extensions past the record: not all would be read */
	end = i + n;
	/* every extension is read: an encrypted_client_hello after the server name hides the real one */
	while (i + 4 <= end) {
		unsigned type = get16(buf + i), elen = get16(buf + i + 2);
		size_t e = i + 4;

		if (e + elen > end)
			return -EPROTO;
		if (type == TLS_EXT_ECH || type == TLS_EXT_ESNI)
			ech = true;
		if (type == 0) { /* server_name: list length, type 0 host_name, length, name */
			if (sni || elen < 5 || buf[e + 2] != 0)
				return -EPROTO;
			n = get16(buf + e + 3);
			if (n == 0 || n > 253 || e + 5 + n > e + elen)
				return -EPROTO;
			char raw[254];

			memcpy(raw, buf + e + 5, n);
			raw[n] = 0;
			if (memchr(raw, 0, n) || latch_dns_name_normalize(raw, name, 254))
				return -EPROTO;
			sni = true;
		}
		i = e + elen;
	}
	if (ech)
		return -EACCES;
	return sni ? 0 : -ENOENT;
}

/* Emit BUF with every occurrence of the secret as '*', holding back a tail that could be its start. */
static void scrub_run(struct hb_scrub *s, const char *buf, size_t len,
		      void (*emit)(void *arg, const char *data, size_t len), void *arg)
{
	static const char stars[64] = "****************************************************************";
	size_t L = s->secret_len, off = 0, keep = 0;

	for (const char *m = memmem(buf, len, s->secret, L); m; m = memmem(m + L, buf + len - m - L, s->secret, L)) {
		emit(arg, buf + off, m - buf - off);
		for (size_t left = L; left;) {
			size_t k = left < sizeof(stars) ? left : sizeof(stars);

			emit(arg, stars, k);
			left -= k;
		}
		off = m - buf + L;
	}
	/*
	 * The longest tail that is a proper prefix of the secret covers every
	 * match that straddles the end: the candidates are where the secret's
	 * first byte is, leftmost (longest) first, found with memchr() rather
	 * than a compare at each of the last L - 1 bytes.
	 */
	size_t from = len - (L - 1 < len - off ? L - 1 : len - off);

	for (const char *c = memchr(buf + from, s->secret[0], len - from); c;
	     c = memchr(c + 1, s->secret[0], buf + len - c - 1))
		if (!memcmp(c, s->secret, buf + len - c)) {
			keep = buf + len - c;
			break;
		}
	emit(arg, buf + off, len - off - keep);
	memcpy(s->held, buf + len - keep, keep);
	s->n_held = keep;
}

void hb_scrub_feed(struct hb_scrub *s, const char *data, size_t len,
		   void (*emit)(void *arg, const char *data, size_t len), void *arg)
{
	char *joined;
	size_t joined_len;

	if (s->secret_len < 2 || s->secret_len > sizeof(s->held)) {
		if (s->secret_len == 1) /* a one-byte secret would scrub every such byte: refused at route_add */
			return;
		emit(arg, data, len);
		return;
	}
	if (!s->n_held) {
		scrub_run(s, data, len, emit, arg);
		return;
	}
	/* rare: the last chunk ended like the secret begins; join the held tail and the new bytes */
	joined_len = s->n_held + len; /* scrub_run() sets n_held again: the length is taken before */
	joined = s->join_alloc ? s->join_alloc(joined_len) : malloc(joined_len);
	if (!joined) { /* fail closed: drop the held bytes rather than risk passing a secret's start */
		s->n_held = 0;
		scrub_run(s, data, len, emit, arg);
		return;
	}
	memcpy(joined, s->held, s->n_held);
	memcpy(joined + s->n_held, data, len);
	scrub_run(s, joined, joined_len, emit, arg);
	OPENSSL_cleanse(joined, joined_len); /* all of it: the response's bytes, and maybe the key's start */
	if (s->join_free)
		s->join_free(joined);
	else
		free(joined);
}

void hb_scrub_flush(struct hb_scrub *s, void (*emit)(void *arg, const char *data, size_t len), void *arg)
{
	if (s->n_held)
		emit(arg, s->held, s->n_held);
	s->n_held = 0;
}

void hb_scrub_inplace(char *buf, size_t len, const char *secret, size_t secret_len)
{
	char *end = buf + len;

	if (!secret || secret_len < 2 || len < secret_len)
		return;
	/* the secret's first byte, then the rest: memmem() cost twice the head's writing (callgrind) */
	for (char *c = memchr(buf, secret[0], len - secret_len + 1); c;
	     c = (size_t)(end - c) > secret_len ? memchr(c + 1, secret[0], (size_t)(end - c) - secret_len) : NULL) {
		if (memcmp(c + 1, secret + 1, secret_len - 1))
			continue;
		memset(c, '*', secret_len);
		c += secret_len - 1;
	}
}
