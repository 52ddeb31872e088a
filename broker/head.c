// SPDX-License-Identifier: GPL-2.0-only
/*
 * head.c - reading a request head the guest sent, strictly.
 *
 * http-parser 2.9 (nodejs') does the reading: request line, header fields,
 * Content-Length arithmetic, both framings at once, duplicate
 * Content-Length.  Measured on Debian's build (strict mode) it still lets
 * through a bare LF as a line end, obs-fold continuation lines and a space
 * inside or after a header name ("Ho st:", "Host :"), each a known
 * smuggling lever between two parsers that disagree.  hb_head_scan() is the
 * grammar check in front of it that refuses those; it does not interpret
 * anything, it only says where the head ends and whether its bytes are
 * clean.  tests/fuzz/fuzz_broker.c runs both.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "broker/check.h"

static const struct {
	const char *id;
	int status;
	const char *reason;
} refusals[HB_REFUSAL_COUNT] = { [HB_OK] = { "OK", 200, NULL },
#define HB_ROW(id, status, reason) [HB_##id] = { #id, status, reason },
				 HB_REFUSALS(HB_ROW)
#undef HB_ROW
};

int hb_refusal_status(enum hb_refusal r)
{
	return r < HB_REFUSAL_COUNT ? refusals[r].status : 500;
}

const char *hb_refusal_reason(enum hb_refusal r)
{
	return r < HB_REFUSAL_COUNT ? refusals[r].reason : "internal";
}

const char *hb_refusal_id(enum hb_refusal r)
{
	return r < HB_REFUSAL_COUNT ? refusals[r].id : "?";
}

/*
 * The head's bytes by class, one load a byte (strchr() per byte was a third
 * of the scan): HC_VALUE field-value bytes VCHAR, obs-text and SP (HTAB is
 * HC_TAB: not in the request line), HC_TCHAR the RFC 9110 tchar.  CR, LF
 * and the other controls are in none.
 */
enum { HC_VALUE = 1, HC_TAB = 2, HC_TCHAR = 4 };
#define HC_VT (HC_VALUE | HC_TCHAR)
static const unsigned char head_class[256] = {
	['\t'] = HC_TAB,	[' '] = HC_VALUE,	  ['!'] = HC_VT,	 ['"'] = HC_VALUE,
	['#' ... '\''] = HC_VT, ['(' ... ')'] = HC_VALUE, ['*' ... '+'] = HC_VT, [','] = HC_VALUE,
	['-' ... '.'] = HC_VT,	['/'] = HC_VALUE,	  ['0' ... '9'] = HC_VT, [':' ... '@'] = HC_VALUE,
	['A' ... 'Z'] = HC_VT,	['[' ... ']'] = HC_VALUE, ['^' ... 'z'] = HC_VT, ['{'] = HC_VALUE,
	['|'] = HC_VT,		['}'] = HC_VALUE,	  ['~'] = HC_VT,	 [0x80 ... 0xff] = HC_VALUE,
};

/*
 * The end of a run of value bytes from I: the first byte before LEN that is
 * a control (HTAB too unless TAB) or DEL, else LEN.  Sixteen bytes a step:
 * a byte a step through head_class was most of what a head's scan cost.
 */
static size_t value_run(const char *buf, size_t i, size_t len, bool tab)
{
#ifdef __SSE2__
	const __m128i c1f = _mm_set1_epi8(0x1f), del = _mm_set1_epi8(0x7f), ht = _mm_set1_epi8('\t');

	for (; i + 16 <= len; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(buf + i));
		__m128i bad = _mm_cmpeq_epi8(_mm_max_epu8(v, c1f), c1f); /* unsigned v <= 0x1f */

		if (tab)
			bad = _mm_andnot_si128(_mm_cmpeq_epi8(v, ht), bad);
		bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, del));
		unsigned mask = (unsigned)_mm_movemask_epi8(bad);

		if (mask)
			return i + (size_t)__builtin_ctz(mask);
	}
#endif
	unsigned char allowed = tab ? HC_VALUE | HC_TAB : HC_VALUE;

	while (i < len && (head_class[(unsigned char)buf[i]] & allowed))
		i++;
	return i;
}

/* FIRST_TAB: HTAB may be in the first line (a status line's reason may hold one; a request line may not). */
static enum hb_refusal scan_head(const char *buf, size_t len, size_t head_max, size_t *head_len, struct hb_lines *lines,
				 bool first_tab)
{
	size_t i = 0, line = 0, colon = 0;

	*head_len = 0;
	if (lines)
		lines->n = 0;
	if (len > head_max)
		len = head_max + 1; /* look no further than the limit */
	while (i < len) {
		size_t start = i;
		bool request_line = line == 0;

		/* a line: CR LF ends it, a CR or LF alone refuses it */
		if (!request_line && buf[i] == '\r') {
			if (i + 1 >= len)
				break;
			if (buf[i + 1] != '\n')
				return HB_BARE_CR;
			*head_len = i + 2;
			return *head_len > head_max ? HB_HEAD_TOO_LARGE : HB_OK;
		}
		if (!request_line && (buf[i] == ' ' || buf[i] == '\t'))
			return HB_OBS_FOLD;
		if (!request_line) {
			while (i < len && (head_class[(unsigned char)buf[i]] & HC_TCHAR))
				i++;
			if (i == len)
				break;
			if (i == start || buf[i] != ':') {
				if (buf[i] == '\n')
					return HB_BARE_LF;
				if (buf[i] == '\r')
					return i + 1 < len && buf[i + 1] != '\n' ? HB_BARE_CR : HB_HEADER_NAME;
				return HB_HEADER_NAME;
			}
			colon = i++;
		}
		/* the request line's bytes are checked again by http-parser and the path check */
		i = value_run(buf, i, len, !request_line || first_tab);
		if (i == len)
			break;
		if (buf[i] != '\r' && buf[i] != '\n')
			return HB_HEADER_BYTES;
		if (buf[i] == '\n')
			return HB_BARE_LF;
		if (i + 1 >= len)
			break;
		if (buf[i + 1] != '\n')
			return HB_BARE_CR;
		if (request_line && i == start)
			return HB_BAD_REQUEST; /* an empty line before the request line */
		if (lines && request_line) {
			lines->first_cr = (uint32_t)i;
		} else if (lines && lines->n <= HB_HEADERS_MAX) {
			lines->colon[lines->n] = (uint32_t)colon;
			lines->cr[lines->n++] = (uint32_t)i;
		}
		i += 2;
		line++;
	}
	return len > head_max ? HB_HEAD_TOO_LARGE : HB_OK;
}

enum hb_refusal hb_head_scan(const char *buf, size_t len, size_t head_max, size_t *head_len, struct hb_lines *lines)
{
	return scan_head(buf, len, head_max, head_len, lines, false);
}

/* The target, where http-parser found it (its only callback here). */
static int on_url(http_parser *p, const char *at, size_t len)
{
	struct hb_head *head = p->data;

	if (!head->target)
		head->target = at;
	head->target_len = at + len - head->target;
	return 0;
}

static void trim(const char **v, size_t *len)
{
	while (*len && ((*v)[0] == ' ' || (*v)[0] == '\t')) {
		(*v)++;
		(*len)--;
	}
	while (*len && ((*v)[*len - 1] == ' ' || (*v)[*len - 1] == '\t'))
		(*len)--;
}

void hb_head_clear(struct hb_head *head)
{
	memset(head, 0, offsetof(struct hb_head, h));
	memset(&head->n, 0, sizeof(*head) - offsetof(struct hb_head, n));
	head->content_length = -1;
}

const struct hb_header *hb_head_get(const struct hb_head *head, const char *name)
{
	for (int i = 0; i < head->n; i++)
		if (hb_token_eq(head->h[i].name, head->h[i].name_len, name))
			return &head->h[i];
	return NULL;
}

bool hb_head_encoded(const struct hb_head *head)
{
	for (int i = 0; i < head->n; i++)
		if (hb_token_eq(head->h[i].name, head->h[i].name_len, "content-encoding") &&
		    !hb_token_eq(head->h[i].value, head->h[i].value_len, "identity"))
			return true;
	return false;
}

static const http_parser_settings url_settings = {
	.on_url = on_url,
};

/*
 * Our framing rules over the fields, then http-parser's verdict (the
 * framing rules first: they name the problem better).  It read N of the
 * LEN bytes it was given.
 */
static enum hb_refusal head_verdict(struct hb_head *head, http_parser *p, size_t n, size_t len)
{
	enum http_errno e = HTTP_PARSER_ERRNO(p);
	int n_cl = 0, n_te = 0;
	bool te_bad = false;

	for (int i = 0; i < head->n; i++) {
		struct hb_header *h = &head->h[i];

		if (hb_token_eq(h->name, h->name_len, "content-length"))
			n_cl++;
		if (hb_token_eq(h->name, h->name_len, "transfer-encoding")) {
			n_te++;
			if (!hb_token_eq(h->value, h->value_len, "chunked"))
				te_bad = true;
		}
	}
	if (n_cl && n_te)
		return HB_CL_AND_TE;
	if (n_cl > 1)
		return HB_CL_DUP;
	if (n_te > 1 || te_bad)
		return HB_TE_INVALID;
	/*
	 * A CONNECT has no content (RFC 9110 9.3.6): what follows its head is
	 * the tunnel's.  http-parser skips a CONNECT's framing checks, so a
	 * "chunked<HTAB>" it reads as no chunking would be read two ways.
	 */
	if (p->method == HTTP_CONNECT && (n_te || (n_cl && p->content_length)))
		return HB_CONNECT_CONTENT;
	/* past INT64_MAX our signed length would read as "none": the upstream would frame another body */
	if (e == HPE_INVALID_CONTENT_LENGTH || (n_cl && p->content_length > (uint64_t)INT64_MAX))
		return HB_CL_INVALID;
	if (e == HPE_UNEXPECTED_CONTENT_LENGTH)
		return HB_CL_DUP;
	if (e == HPE_INVALID_TRANSFER_ENCODING)
		return HB_TE_INVALID;
	if (e != HPE_OK || n != len || !head->target || p->http_major != 1)
		return HB_BAD_REQUEST;
	/* a copy, not snprintf: a tenth of the head's parse went into formatting this name */
	const char *m = http_method_str(p->method);
	size_t mlen = strnlen(m, sizeof(head->method) - 1);

	memcpy(head->method, m, mlen);
	head->method[mlen] = 0;
	head->http_minor = p->http_minor;
	head->keep_alive = http_should_keep_alive(p);
	head->chunked = n_te == 1;
	head->connect = p->method == HTTP_CONNECT;
	if (n_cl == 1)
		head->content_length = (int64_t)p->content_length;
	/* an HTTP/1.0 client reads a 1xx as the final response: its expectation is ignored (RFC 9110 10.1.1) */
	for (int i = 0; i < head->n && p->http_minor >= 1; i++)
		if (hb_token_eq(head->h[i].name, head->h[i].name_len, "expect"))
			head->expect_continue = hb_token_eq(head->h[i].value, head->h[i].value_len, "100-continue");
	return HB_OK;
}

/*
 * The header lines http-parser 2.9 interprets; it hands every other one to
 * the callbacks unread.  By prefix: it marks a Transfer-Encoding as soon as
 * a name's first 17 bytes spell it ("Transfer-Encodingx" too), so a name
 * that only starts with one of these goes to it as well.
 */
static bool parser_reads(const char *name, size_t len)
{
	static const struct hb_name names[] = {
		HB_NAME("content-length"),   HB_NAME("transfer-encoding"), HB_NAME("connection"),
		HB_NAME("proxy-connection"), HB_NAME("upgrade"),
	};

	/* most names start with none of their letters: one compare, not five */
	switch (name[0] | 0x20) {
	case 'c':
	case 'p':
	case 't':
	case 'u':
		break;
	default:
		return false;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (len >= names[i].n && !strncasecmp(name, names[i].s, names[i].n))
			return true;
	return false;
}

/*
 * The request line is METHOD SP TARGET SP HTTP/1.d and nothing else.
 * Debian's http-parser is built lenient: it takes any byte for the letters
 * of "HTTP/", CR and LF included, so "GET /a H" CR LF "o:1.1" was to it a
 * GET of HTTP/1.1 with no header, where the index reads a header "o".
 */
static bool request_line_ok(const char *line, size_t len)
{
	const char *sp = memchr(line, ' ', len);

	if (len < 10 || memcmp(line + len - 9, " HTTP/1.", 8) || line[len - 1] < '0' || line[len - 1] > '9')
		return false;
	return sp && sp != line && (sp = memchr(sp + 1, ' ', (size_t)(line + len - sp - 1))) == line + len - 9;
}

/*
 * The short head: the first line of BUF (its CR at LINES->first_cr) and
 * the lines http-parser reads, in their order, then an empty line, into
 * SHRT (CAP bytes); its length, or 0 when they do not fit.  The broker
 * indexes the other lines (header_at()).
 */
/* Where header line K of LINES starts: after the CR LF of the line before it. */
static size_t line_start(const struct hb_lines *lines, int k)
{
	return (k ? lines->cr[k - 1] : lines->first_cr) + 2;
}

static size_t short_head(const char *buf, const struct hb_lines *lines, char *shrt, size_t cap)
{
	size_t len = lines->first_cr + 2;

	if (len + 2 > cap)
		return 0;
	memcpy(shrt, buf, len);
	for (int k = 0; k < lines->n; k++) {
		size_t start = line_start(lines, k), line = lines->cr[k] + 2 - start;

		if (!parser_reads(buf + start, lines->colon[k] - start))
			continue;
		if (len + line + 2 > cap)
			return 0;
		memcpy(shrt + len, buf + start, line);
		len += line;
	}
	memcpy(shrt + len, "\r\n", 2);
	return len + 2;
}

/* Header line K of LINES: its name, and its value with OWS off both ends. */
static void header_at(const char *buf, const struct hb_lines *lines, int k, const char **name, size_t *name_len,
		      const char **value, size_t *value_len)
{
	size_t start = line_start(lines, k);

	*name = buf + start;
	*name_len = lines->colon[k] - start;
	*value = buf + lines->colon[k] + 1;
	*value_len = lines->cr[k] - lines->colon[k] - 1;
	trim(value, value_len);
}

/*
 * Index the header lines of a request head hb_head_scan() accepted, from
 * where it found them (LINES), and copy its request line and the lines
 * http-parser reads into SHORT (CAP bytes): *short_len, or 0 when they do
 * not fit.
 */
static enum hb_refusal index_head(const char *buf, const struct hb_lines *lines, struct hb_head *head, char *shrt,
				  size_t cap, size_t *short_len)
{
	*short_len = 0;
	if (!request_line_ok(buf, lines->first_cr))
		return HB_BAD_REQUEST;
	if (lines->n > HB_HEADERS_MAX)
		return HB_HEAD_TOO_LARGE;
	for (int k = 0; k < lines->n; k++) {
		struct hb_header *h = &head->h[k];

		header_at(buf, lines, k, &h->name, &h->name_len, &h->value, &h->value_len);
	}
	head->n = lines->n;
	*short_len = short_head(buf, lines, shrt, cap);
	return HB_OK;
}

/*
 * The status line is HTTP/1.d SP 3DIGIT, then SP and a reason or nothing;
 * what http-parser takes from it (the version and the code) it reads from
 * the same bytes.
 */
static bool status_line_ok(const char *line, size_t len)
{
	if (len < 12 || memcmp(line, "HTTP/1.", 7) || line[8] != ' ')
		return false;
	for (int i = 7; i < 12; i++)
		if (i != 8 && (line[i] < '0' || line[i] > '9'))
			return false;
	return len == 12 || line[12] == ' ';
}

/* A Content-Length value's digits (anything else is http-parser's to refuse) fit in an int64_t. */
static bool cl_fits_int64(const char *v, size_t len)
{
	uint64_t n = 0;

	for (size_t i = 0; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
		if (n > ((uint64_t)INT64_MAX - (uint64_t)(v[i] - '0')) / 10)
			return false;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	return true;
}

enum hb_refusal hb_resp_head_read(const char *buf, size_t len, size_t head_max, size_t *head_len,
				  struct hb_resp_index *ix, char *shrt, size_t cap, size_t *short_len)
{
	struct hb_lines lines;
	enum hb_refusal ref = scan_head(buf, len, head_max, head_len, &lines, true);
	const char *name, *value;
	size_t name_len, value_len;

	*short_len = 0;
	ix->n = 0;
	if (ref || !*head_len)
		return ref;
	if (!status_line_ok(buf, lines.first_cr))
		return HB_BAD_REQUEST;
	if (lines.n > HB_HEADERS_MAX)
		return HB_HEAD_TOO_LARGE;
	ix->reason = lines.first_cr > 12 ? 13 : 12;
	ix->reason_len = lines.first_cr - ix->reason;
	for (int k = 0; k < lines.n; k++) {
		header_at(buf, &lines, k, &name, &name_len, &value, &value_len);
		ix->hdr[k] = (struct hb_hdr){ (uint32_t)(name - buf), (uint32_t)name_len, (uint32_t)(value - buf),
					      (uint32_t)value_len };
	}
	ix->n = lines.n;
	/*
	 * Transfer-Encoding is one "chunked" or absent, as in a request: we
	 * sent no TE, and http-parser decodes "gzip, chunked" as chunked (the
	 * guest would get gzip the scrubber could not read, with no
	 * Content-Encoding to say so) and reads "chunked, gzip" or a second
	 * line to the connection's end, chunk framing and all.  A name that
	 * only starts with it counts: http-parser takes it for one by its
	 * first 17 bytes, and a "Transfer-Encodingx" after the real line undid
	 * its chunked (fuzz_broker).  So does an HTAB after "chunked", which
	 * the index trims as OWS: it is not chunked to http-parser.
	 */
	int n_te = 0;

	for (int k = 0; k < ix->n; k++) {
		const struct hb_hdr *h = &ix->hdr[k];

		/* past INT64_MAX, as in a request: no upstream sends that, and a signed reading of it would be "none" */
		if (h->name_len == 14 && !strncasecmp(buf + h->name, "content-length", 14) &&
		    !cl_fits_int64(buf + h->value, h->value_len))
			return HB_CL_INVALID;
		if (h->name_len >= 17 && !strncasecmp(buf + h->name, "transfer-encoding", 17) &&
		    (h->name_len != 17 || n_te++ || !hb_token_eq(buf + h->value, h->value_len, "chunked") ||
		     memchr(buf + h->value + h->value_len, '\t', lines.cr[k] - h->value - h->value_len)))
			return HB_TE_INVALID;
	}
	*short_len = short_head(buf, &lines, shrt, cap);
	return HB_OK;
}

/*
 * WHOLE: http-parser reads every byte of the head.  Otherwise it reads only
 * what decides the message: the request line and the header lines it
 * interprets, copied in their order into a short head.  Fed every line, it
 * walked the others a byte at a time only to hand them on (about 30
 * instructions a byte: 5,300 for the bench's 180-byte head, 15,000 and
 * more for an SDK's).  hb_head_scan() has held every line to a grammar
 * stricter than the parser's own, so a line left out can't change its
 * verdict; the lines are indexed here instead.  A head whose request line
 * or framing lines do not fit in the short one is read whole.
 */
static enum hb_refusal head_parse(const char *buf, size_t head_len, const struct hb_lines *lines, http_parser *p,
				  struct hb_head *head, bool whole)
{
	char shrt[1024];
	size_t short_len, n;
	const char *in;
	enum hb_refusal ref;

	hb_head_clear(head);
	ref = index_head(buf, lines, head, shrt, whole ? 0 : sizeof(shrt), &short_len);
	if (ref)
		return ref;
	in = short_len ? shrt : buf;
	if (!short_len)
		short_len = head_len;
	http_parser_init(p, HTTP_REQUEST);
	p->data = head;
	/* the parser ends in the body's state (or the message's end); the same parser reads the body later */
	n = http_parser_execute(p, &url_settings, in, short_len);
	if (head->target) /* the short head's request line is the head's own, byte for byte */
		head->target = buf + (head->target - in);
	return head_verdict(head, p, n, short_len);
}

enum hb_refusal hb_head_parse(const char *buf, size_t head_len, const struct hb_lines *lines, http_parser *p,
			      struct hb_head *head)
{
	return head_parse(buf, head_len, lines, p, head, false);
}

enum hb_refusal hb_head_parse_whole(const char *buf, size_t head_len, const struct hb_lines *lines, http_parser *p,
				    struct hb_head *head)
{
	return head_parse(buf, head_len, lines, p, head, true);
}
