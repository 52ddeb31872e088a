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
 * clean.  tests/fuzz/fuzz_head.c runs both.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "broker/http/check.h"

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

enum hb_refusal hb_head_scan(const char *buf, size_t len, size_t head_max, size_t *head_len)
{
	size_t i = 0, line = 0;

	*head_len = 0;
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
			i++;
		}
		/* the request line's bytes are checked again by http-parser and the path check */
		unsigned char allowed = request_line ? HC_VALUE : HC_VALUE | HC_TAB;

		while (i < len && (head_class[(unsigned char)buf[i]] & allowed))
			i++;
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
		i += 2;
		line++;
	}
	return len > head_max ? HB_HEAD_TOO_LARGE : HB_OK;
}

struct head_reader {
	struct hb_head *head;
	const char *base;
	bool in_value;
	int n_cl, n_te;
	bool te_bad, overflow;
};

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct head_reader *r = p->data;

	if (!r->head->target)
		r->head->target = at;
	r->head->target_len = at + len - r->head->target;
	return 0;
}

/* The whole head is in one buffer, so a field or value split over calls is still contiguous. */
static int on_field(http_parser *p, const char *at, size_t len)
{
	struct head_reader *r = p->data;
	struct hb_header *h;

	if (r->in_value || !r->head->n) {
		if (r->head->n == HB_HEADERS_MAX) {
			r->overflow = true;
			return 1;
		}
		r->head->n++;
		h = &r->head->h[r->head->n - 1];
		h->name = at;
		h->name_len = 0;
		h->value = NULL;
		h->value_len = 0;
		r->in_value = false;
	}
	h = &r->head->h[r->head->n - 1];
	h->name_len = at + len - h->name;
	return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
	struct head_reader *r = p->data;
	struct hb_header *h = &r->head->h[r->head->n - 1];

	if (!r->in_value) {
		h->value = at;
		r->in_value = true;
	}
	h->value_len = at + len - h->value;
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

static const http_parser_settings head_settings = {
	.on_url = on_url,
	.on_header_field = on_field,
	.on_header_value = on_value,
};

enum hb_refusal hb_head_parse(const char *buf, size_t head_len, http_parser *p, struct hb_head *head)
{
	struct head_reader r = { .head = head, .base = buf };
	enum http_errno e;
	size_t n;

	hb_head_clear(head);
	http_parser_init(p, HTTP_REQUEST);
	p->data = &r;
	/* the parser ends in the body's state (or the message's end); the same parser reads the body later */
	n = http_parser_execute(p, &head_settings, buf, head_len);
	e = HTTP_PARSER_ERRNO(p);
	/* our own framing rules over the fields, before the parser's verdict: they name the problem better */
	for (int i = 0; i < head->n; i++) {
		struct hb_header *h = &head->h[i];

		trim(&h->value, &h->value_len);
		if (!h->value)
			h->value = h->name + h->name_len; /* an empty value */
		if (hb_token_eq(h->name, h->name_len, "content-length"))
			r.n_cl++;
		if (hb_token_eq(h->name, h->name_len, "transfer-encoding")) {
			r.n_te++;
			if (!hb_token_eq(h->value, h->value_len, "chunked"))
				r.te_bad = true;
		}
	}
	if (r.overflow)
		return HB_HEAD_TOO_LARGE;
	if (r.n_cl && r.n_te)
		return HB_CL_AND_TE;
	if (r.n_cl > 1)
		return HB_CL_DUP;
	if (r.n_te > 1 || r.te_bad)
		return HB_TE_INVALID;
	if (e == HPE_INVALID_CONTENT_LENGTH)
		return HB_CL_INVALID;
	if (e == HPE_UNEXPECTED_CONTENT_LENGTH)
		return HB_CL_DUP;
	if (e == HPE_INVALID_TRANSFER_ENCODING)
		return HB_TE_INVALID;
	if (e != HPE_OK || n != head_len || !head->target || p->http_major != 1)
		return HB_BAD_REQUEST;
	/* a copy, not snprintf: a tenth of the head's parse went into formatting this name */
	const char *m = http_method_str(p->method);
	size_t mlen = strnlen(m, sizeof(head->method) - 1);

	memcpy(head->method, m, mlen);
	head->method[mlen] = 0;
	head->http_minor = p->http_minor;
	head->keep_alive = http_should_keep_alive(p);
	head->chunked = r.n_te == 1;
	head->connect = p->method == HTTP_CONNECT;
	if (r.n_cl == 1)
		head->content_length = (int64_t)p->content_length;
	for (int i = 0; i < head->n; i++)
		if (hb_token_eq(head->h[i].name, head->h[i].name_len, "expect"))
			head->expect_continue = hb_token_eq(head->h[i].value, head->h[i].value_len, "100-continue");
	return HB_OK;
}
