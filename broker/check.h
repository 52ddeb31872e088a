/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * check.h - the broker's pure decisions (private to broker).
 *
 * Everything a request is judged by that needs no socket: the strict scan
 * of a request head (what nodejs' http-parser 2.9 lets through: bare LF,
 * obs-fold, a space in a header name), the head itself read with
 * http-parser, the path's spelling, the path prefix, the placeholder, the
 * CONNECT target and the TLS ClientHello's server name.  No I/O and no
 * global state, so the libFuzzer target (tests/fuzz/) and the unit-size
 * checks drive exactly the code the engine runs.
 *
 * The refusal table is the one list of what the broker refuses: its id,
 * the HTTP status and the stable audit reason.  docs/broker.md lists it.
 */
#ifndef LATCH_BROKER_HTTP_CHECK_H
#define LATCH_BROKER_HTTP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

/* X(ID, status, reason): status 0 means the connection is cut (a tunnel past its 200) */
#define HB_REFUSALS(X)                                                                \
	X(HEAD_TOO_LARGE, 431, "request head too large")                              \
	X(BARE_LF, 400, "bare LF in the request head")                                \
	X(BARE_CR, 400, "bare CR in the request head")                                \
	X(OBS_FOLD, 400, "folded header line")                                        \
	X(HEADER_NAME, 400, "header name is not a token")                             \
	X(HEADER_BYTES, 400, "invalid bytes in the request head")                     \
	X(CL_AND_TE, 400, "both Content-Length and Transfer-Encoding")                \
	X(CL_DUP, 400, "duplicate Content-Length")                                    \
	X(CL_INVALID, 400, "invalid Content-Length")                                  \
	X(TE_INVALID, 400, "Transfer-Encoding other than one chunked")                \
	X(CONNECT_CONTENT, 400, "CONNECT with a body")                                \
	X(BAD_REQUEST, 400, "request is not HTTP/1.x")                                \
	X(NOT_GUEST, 403, "source is not the sandbox's guest")                        \
	X(PATH_DOT, 403, "path has a . or .. segment")                                \
	X(PATH_ENCODED_SEP, 403, "path has an encoded dot, slash or backslash")       \
	X(PATH_BACKSLASH, 403, "path has a backslash")                                \
	X(PATH_DOUBLE, 403, "path is double-encoded")                                 \
	X(PATH_EMPTY_SEGMENT, 403, "path has an empty segment")                       \
	X(PATH_ENCODED_PLAIN, 403, "path encodes a character that needs no encoding") \
	X(PATH_BYTES, 403, "path has bytes outside the URL grammar")                  \
	X(PATH_NON_ASCII, 403, "path has percent-encoded non-ASCII")                  \
	X(PROXY_PLAIN, 403, "plain http proxying is not offered")                     \
	X(NO_ROUTE, 403, "no credential route of that name")                          \
	X(TRACE, 403, "TRACE is never forwarded")                                     \
	X(METHOD, 403, "method not allowed on route")                                 \
	X(OVERRIDE, 403, "header overrides the method or the URL")                    \
	X(PATH, 403, "path not allowed on route")                                     \
	X(PH_URL, 403, "placeholder also sent in the URL")                            \
	X(PH_OTHER_HEADER, 403, "placeholder sent in another header")                 \
	X(PH_MISSING, 401, "placeholder credential missing or wrong")                 \
	X(PH_WRONG, 403, "placeholder credential missing or wrong")                   \
	X(PH_OTHER_SANDBOX, 403, "placeholder of another sandbox")                    \
	X(SECRET_MISSING, 403, "secret not set on the host")                          \
	X(BODY_TOO_LARGE, 413, "metered request body too large")                      \
	X(BODY_ENCODED, 415, "metered request body is content-encoded")               \
	X(METERED_HELD, 503, "metered bodies in flight over the sandbox's limit")     \
	X(METER, 429, "refused by the spend cap")                                     \
	X(METER_FORBID, 403, "not allowed on a metered route")                        \
	X(LOCAL_NONE, 404, "no local endpoint on this listener")                      \
	X(LOCAL_BODY, 413, "local request body too large")                            \
	X(CONNECT_PORT, 403, "CONNECT only to port 443")                              \
	X(CONNECT_LITERAL, 403, "CONNECT to an address literal")                      \
	X(CONNECT_NAME, 403, "CONNECT target is not a host name")                     \
	X(CONNECT_DENIED, 403, "name not allowed by the sandbox's policy")            \
	X(CONNECT_REBINDING, 403, "name resolves only to non-public addresses")       \
	X(CONNECT_RESOLVE, 502, "name did not resolve")                               \
	X(CONNECT_SNI, 0, "TLS server name differs from the CONNECT name")            \
	X(CONNECT_NOT_TLS, 0, "tunnel did not start with a TLS ClientHello")          \
	X(CONNECT_ECH, 0, "TLS ClientHello offers encrypted_client_hello")            \
	X(CONNECT_REVOKED, 0, "name no longer allowed by the sandbox's policy")       \
	X(UPSTREAM_CONNECT, 502, "upstream unreachable")                              \
	X(UPSTREAM_TLS, 502, "upstream TLS verification failed")                      \
	X(UPSTREAM_TIMEOUT, 504, "upstream timed out")                                \
	X(UPSTREAM_BAD, 502, "upstream response unreadable")                          \
	X(UPSTREAM_ENCODED, 502, "upstream response is content-encoded")

enum hb_refusal {
	HB_OK = 0,
#define HB_ENUM(id, status, reason) HB_##id,
	HB_REFUSALS(HB_ENUM)
#undef HB_ENUM
		HB_REFUSAL_COUNT
};

int hb_refusal_status(enum hb_refusal r);
const char *hb_refusal_reason(enum hb_refusal r);
const char *hb_refusal_id(enum hb_refusal r); /* "PATH_DOT": tests and docs */

/* ------------------------------------------------------------ the request head */

#define HB_HEADERS_MAX 100

struct hb_header {
	const char *name, *value; /* into the head buffer, not NUL-terminated */
	size_t name_len, value_len;
};

struct hb_head {
	char method[24];
	const char *target;
	size_t target_len;
	struct hb_header h[HB_HEADERS_MAX];
	int n;
	int http_minor;
	bool keep_alive, chunked, connect, expect_continue;
	int64_t content_length; /* -1: none */
};

/*
 * Where hb_head_scan() found a head's lines, as offsets: the first line's
 * CR, and each header line's ':' and CR (a line starts after the CR LF
 * before it).  n = HB_HEADERS_MAX + 1: more lines than a head may have.
 */
struct hb_lines {
	uint32_t first_cr;
	uint32_t colon[HB_HEADERS_MAX + 1], cr[HB_HEADERS_MAX + 1];
	int n;
};

/*
 * Find the end of the head in BUF (LEN bytes so far): 0 with *head_len set
 * when it is complete, 0 with *head_len = 0 when more is needed, or the
 * refusal that the bytes already seen deserve (no line ends in a bare CR or
 * LF, no obs-fold, header names are tokens followed by ':', values are
 * VCHAR/obs-text/SP/HTAB, at most head_max bytes).  LINES, when not
 * NULL, gets where the lines are, for hb_head_parse().
 */
enum hb_refusal hb_head_scan(const char *buf, size_t len, size_t head_max, size_t *head_len, struct hb_lines *lines);

/*
 * Read a head that hb_head_scan() accepted, with the LINES it found: the
 * broker indexes the header lines, http-parser reads the request line and
 * the lines it interprets (P is initialized here and keeps going with the
 * body).  Fills HEAD with pointers into BUF.  Refuses a request line other
 * than METHOD SP TARGET SP HTTP/1.d, two framings, a duplicate or invalid
 * Content-Length and any Transfer-Encoding but one `chunked`.
 */
enum hb_refusal hb_head_parse(const char *buf, size_t head_len, const struct hb_lines *lines, http_parser *p,
			      struct hb_head *head);
/*
 * The same reading with every line through http-parser: what
 * hb_head_parse() does when the request line or the framing lines are too
 * long for its short head, and the reference fuzz_broker holds it to.
 */
enum hb_refusal hb_head_parse_whole(const char *buf, size_t head_len, const struct hb_lines *lines, http_parser *p,
				    struct hb_head *head);

struct hb_hdr { /* a response header */
	uint32_t name, name_len, value, value_len; /* offsets into the response head */
};

struct hb_resp_index { /* a response head's reason and header lines, as offsets into it */
	uint32_t reason, reason_len;
	struct hb_hdr *hdr; /* HB_HEADERS_MAX of them */
	int n;
};

/*
 * A response head from the upstream, BUF (LEN bytes so far): 0 with
 * *head_len = 0 while its end has not come; 0 with *head_len set, the
 * reason and header lines indexed in IX and the status line with the
 * lines http-parser interprets copied into SHORT (CAP bytes; *short_len,
 * or 0 when they do not fit) once it has; or the refusal its bytes deserve
 * (the request head's grammar, a status line other than HTTP/1.d SP 3DIGIT
 * [SP reason], more than HB_HEADERS_MAX lines, a Transfer-Encoding other
 * than one "chunked").
 */
enum hb_refusal hb_resp_head_read(const char *buf, size_t len, size_t head_max, size_t *head_len,
				  struct hb_resp_index *ix, char *shrt, size_t cap, size_t *short_len);

/*
 * An empty head (no method, no target, n = 0, no Content-Length).  The
 * header entries are left as they are: only the first n are ever read, and
 * zeroing all HB_HEADERS_MAX of them (3 KB) three times was ~1,250
 * instructions a request.
 */
void hb_head_clear(struct hb_head *head);
/* The first header named NAME (case-insensitive), or NULL. */
const struct hb_header *hb_head_get(const struct hb_head *head, const char *name);
/* Does a Content-Encoding line other than identity say the body is encoded?  Every such line counts. */
bool hb_head_encoded(const struct hb_head *head);
/*
 * ASCII case-insensitive, B NUL-terminated.  Inline: B is a literal at
 * nearly every call, so its length is a constant and most names are told
 * apart by their length alone (it was a tenth of a request's instructions).
 */
static inline bool hb_token_eq(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);

	return alen == blen && !strncasecmp(a, b, alen);
}
/* A name with its length, for the tables of names a header is held against (no strlen() per compare). */
struct hb_name {
	const char *s;
	size_t n;
};
#define HB_NAME(lit)                 \
	{                            \
		lit, sizeof(lit) - 1 \
	}
/* Is A (ALEN bytes) one of the N names?  ASCII case-insensitive. */
static inline bool hb_name_in(const char *a, size_t alen, const struct hb_name *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (alen == names[i].n && !strncasecmp(a, names[i].s, alen))
			return true;
	return false;
}
/* Does the comma-separated list V (Connection's value) name TOK? */
bool hb_list_has(const char *v, size_t len, const char *tok, size_t tok_len);

/* ------------------------------------------------------------ route checks, in their order */

/*
 * 0. A target in absolute form that names the listener at OWN (the
 * connection's own address, getsockname): "http://" in any case, then OWN's
 * address and port exactly as inet_ntop() writes them ("ADDR:PORT",
 * "[ADDR6]:PORT"; the port may be left out only when it is 80), then the
 * path, which must follow.  True: the path starts *skip bytes in, and is the
 * target in origin form (RFC 9112 3.2.2).  Anything else -- userinfo,
 * another port, no path -- is false: a proxy request.
 */
struct sockaddr;
bool hb_target_own_origin(const char *t, size_t len, const struct sockaddr *own, size_t *skip);
/* 1. The spelling of an origin-form target (path and query). */
enum hb_refusal hb_target_spelling(const char *t, size_t len);
/*
 * 2. The first header that asks a server or a framework to read another
 * method or URL than the request line's (X-HTTP-Method-Override,
 * X-Original-URL and their kin), or NULL: the method and path checks read
 * the request line.
 */
const struct hb_header *hb_head_override(const struct hb_head *head);
/* Split "/NAME/rest?q" into NAME and "/rest?q" (rest is "/" when empty). False when NAME is not a route name. */
bool hb_target_route(const char *t, size_t len, char name[33], const char **rest, size_t *rest_len);
/* 2 is an exact compare. 3. PREFIX covers PATH (no query) on segment boundaries. */
bool hb_prefix_covers(const char *prefix, const char *path, size_t path_len);

/*
 * 4. The placeholder.  header/scheme: where the route wants it; also (n_also):
 * the other forms its provider's clients send it in (Anthropic's SDK:
 * Authorization "Bearer " beside x-api-key), each as good as the first, but
 * never two at once; placeholders (n): every placeholder of the sandbox (any
 * of them in the URL or in another header is refused).  What *seen says:
 * HB_OK: form, the form it came in (0: header/scheme, i: also[i - 1]);
 * HB_PH_WRONG: presented (presented_len), what was sent instead (to name
 * another sandbox's); HB_PH_OTHER_HEADER: where, the header that held it,
 * and first, the form it also came in (NULL when none).
 */
struct hb_ph_set;
struct hb_ph_form {
	const char *header, *scheme;
};
struct hb_ph_rule {
	const char *header, *scheme, *placeholder;
	const char *const *placeholders;
	int n_placeholders;
	const struct hb_ph_set *prepared; /* hb_ph_set_prep() of placeholders, or NULL: made at each check */
	const struct hb_ph_form *also;
	int n_also;
};
struct hb_ph_seen {
	const char *presented;
	size_t presented_len;
	int form;
	const struct hb_header *where, *first;
};
enum hb_refusal hb_placeholder_check(const struct hb_head *head, const struct hb_ph_rule *rule,
				     struct hb_ph_seen *seen);
/* Is NEEDLE (a placeholder) in S, as sent or percent-decoded, in any case? */
bool hb_contains_placeholder(const char *s, size_t len, const char *needle);
/*
 * The placeholders made ready for the search (lowercased, the random part
 * found), once when they change rather than at every request; at most 64
 * (a sandbox's routes'), the rest are searched one by one.
 */
struct hb_ph_needle {
	char low[128];
	size_t n, rnd; /* rnd: where the random part starts; n when it has none */
};
struct hb_ph_set {
	struct hb_ph_needle nd[64];
	int count, next; /* next: the first placeholder not prepared */
	size_t shortest; /* the fewest bytes a value needs to hold any */
};
void hb_ph_set_prep(struct hb_ph_set *set, const char *const *placeholders, int n);

/* CONNECT's authority-form target: HOST:443 with HOST a host name, normalized into name. */
enum hb_refusal hb_connect_target(const char *t, size_t len, char name[254]);

/*
 * The server name of the TLS ClientHello at the start of BUF: 0 (name
 * set, lowercase), -EAGAIN (need more bytes), -EPROTO (not a ClientHello),
 * -ENOENT (no server name) or -EACCES (it offers encrypted_client_hello,
 * which hides the name the server will answer for behind the one it shows).
 */
int hb_client_hello_sni(const uint8_t *buf, size_t len, char name[254]);

/*
 * The response's secret scrubber: every occurrence of the secret in the
 * bytes fed through it is replaced by '*' (same length, so framing holds),
 * across chunk boundaries.  Holds back at most secret_len - 1 bytes only
 * while they could be the start of the secret.
 */
struct hb_scrub {
	const char *secret;
	size_t secret_len;
	char held[1024]; /* LATCH_HTTP secrets are at most 1024 bytes */
	size_t n_held;
	/*
	 * Where the join of the held tail and the next bytes lives: NULL is
	 * malloc()/free().  The join is wiped whole before it is freed (it is
	 * the upstream's response, and may echo the key); a test gives its own
	 * to see that.
	 */
	void *(*join_alloc)(size_t n);
	void (*join_free)(void *p);
};
/* Feed LEN bytes; emit() gets the bytes that are safe to pass on. */
void hb_scrub_feed(struct hb_scrub *s, const char *data, size_t len,
		   void (*emit)(void *arg, const char *data, size_t len), void *arg);
void hb_scrub_flush(struct hb_scrub *s, void (*emit)(void *arg, const char *data, size_t len), void *arg);
/* Every occurrence of the secret in BUF, which is whole (a response head), made '*' where it lies. */
void hb_scrub_inplace(char *buf, size_t len, const char *secret, size_t secret_len);

#endif
