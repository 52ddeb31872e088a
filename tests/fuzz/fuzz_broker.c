// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_broker.c - libFuzzer over what the broker reads from a guest before
 * it decides: the strict head scan, the head read by http-parser (the
 * short head against the whole: the same readings, and the same body after
 * it; the framing forwarded as the one the body is read with; a
 * response's framing as RFC 9112 6.3 reads its lines), the route checks in their order (an absolute target
 * naming the listener read as its path, spelling, route
 * name, prefix, placeholder: the same verdict with the placeholders prepared
 * beforehand as without; a path taken has one reading, none of its bytes past
 * ASCII once decoded), the CONNECT target and a ClientHello's
 * server name, and the secret scrubber (which must never let the secret
 * through, however the bytes are cut).
 *
 *   make fuzz          FUZZ_SECS (120) seconds over tests/fuzz/corpus
 *   make fuzz-short    20 s, part of `make check`
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/check.h"

static const char secret[] = "sk-fuzz-SECRET-0123456789";

struct sink {
	char buf[70000];
	size_t len;
};

static void emit(void *arg, const char *data, size_t len)
{
	struct sink *s = arg;

	if (s->len + len <= sizeof(s->buf)) {
		memcpy(s->buf + s->len, data, len);
		s->len += len;
	}
}

/* what a body reading delivered: its length and a running sum of its bytes and where they fell */
struct body_seen {
	size_t len;
	uint64_t sum;
};

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct body_seen *b = p->data;

	for (size_t i = 0; i < len; i++)
		b->sum = b->sum * 131 + (unsigned char)at[i] + b->len + i;
	b->len += len;
	return 0;
}

static void same_header(const struct hb_header *a, const struct hb_header *b)
{
	if (a->name != b->name || a->name_len != b->name_len || a->value_len != b->value_len ||
	    (a->value_len && a->value != b->value))
		abort();
}

/* http-parser's own reading of the header lines, through its callbacks: the reference for the index */
struct ref_reader {
	struct hb_header h[HB_HEADERS_MAX + 1];
	int n;
	bool in_value;
	const char *status;
	size_t status_len;
};

/* OWS off both ends of a value, as the broker's index has it */
static void trim_ref(struct hb_header *h)
{
	while (h->value_len && (h->value[0] == ' ' || h->value[0] == '\t')) {
		h->value++;
		h->value_len--;
	}
	while (h->value_len && (h->value[h->value_len - 1] == ' ' || h->value[h->value_len - 1] == '\t'))
		h->value_len--;
}

static int ref_field(http_parser *p, const char *at, size_t len)
{
	struct ref_reader *r = p->data;

	if (r->in_value || !r->n) {
		if (r->n == HB_HEADERS_MAX + 1)
			return 1;
		r->h[r->n++] = (struct hb_header){ .name = at };
		r->in_value = false;
	}
	r->h[r->n - 1].name_len = at + len - r->h[r->n - 1].name;
	return 0;
}

static int ref_value(http_parser *p, const char *at, size_t len)
{
	struct hb_header *h = &((struct ref_reader *)p->data)->h[((struct ref_reader *)p->data)->n - 1];

	if (!((struct ref_reader *)p->data)->in_value) {
		h->value = at;
		((struct ref_reader *)p->data)->in_value = true;
	}
	h->value_len = at + len - h->value;
	return 0;
}

/* A head both readings accepted: http-parser, fed every line, delivers the fields the index holds. */
static void same_fields(const char *buf, size_t head_len, const struct hb_head *a)
{
	static const http_parser_settings s = { .on_header_field = ref_field, .on_header_value = ref_value };
	static struct ref_reader r;
	http_parser p;

	memset(&r, 0, sizeof(r));
	http_parser_init(&p, HTTP_REQUEST);
	p.data = &r;
	if (http_parser_execute(&p, &s, buf, head_len) != head_len || HTTP_PARSER_ERRNO(&p) != HPE_OK || r.n != a->n)
		abort();
	for (int i = 0; i < r.n; i++) {
		trim_ref(&r.h[i]);
		same_header(&a->h[i], &r.h[i]);
	}
}

static bool same_reading(const char *buf, size_t head_len, const struct hb_lines *lines, size_t len, struct hb_head *a,
			 http_parser *pa)
{
	static struct hb_head b;
	static const http_parser_settings s = { .on_body = on_body };
	struct body_seen ba = { 0 }, bb = { 0 };
	http_parser pb;
	enum hb_refusal ra = hb_head_parse(buf, head_len, lines, pa, a),
			rb = hb_head_parse_whole(buf, head_len, lines, &pb, &b);
	size_t na, nb;

	if (ra != rb)
		abort();
	if (ra != HB_OK)
		return false;
	if (strcmp(a->method, b.method) || a->target != b.target || a->target_len != b.target_len ||
	    a->http_minor != b.http_minor || a->keep_alive != b.keep_alive || a->chunked != b.chunked ||
	    a->connect != b.connect || a->expect_continue != b.expect_continue ||
	    a->content_length != b.content_length || a->n != b.n)
		abort();
	for (int i = 0; i < a->n; i++)
		same_header(&a->h[i], &b.h[i]);
	same_fields(buf, head_len, a);
	/*
	 * The framing the broker forwards (its own reading of the lines) is the
	 * one http-parser reads the body with: else the upstream gets one body
	 * and the next request is read from another.
	 */
	if (a->chunked != !!(pa->flags & F_CHUNKED) ||
	    (!a->chunked && a->content_length >= 0 && pa->content_length != (uint64_t)a->content_length) ||
	    (!a->chunked && a->content_length < 0 && pa->content_length != ULLONG_MAX && pa->content_length != 0))
		abort();
	/* the body, read by each parser from where its head left it (on copies: the caller reads on with PA) */
	http_parser ca = *pa;

	ca.data = &ba;
	pb.data = &bb;
	na = http_parser_execute(&ca, &s, buf + head_len, len - head_len);
	nb = http_parser_execute(&pb, &s, buf + head_len, len - head_len);
	if (na != nb || HTTP_PARSER_ERRNO(&ca) != HTTP_PARSER_ERRNO(&pb) || ba.len != bb.len || ba.sum != bb.sum)
		abort();
	return true;
}

/*
 * An absolute target that names the listener (192.0.2.1:8119, or
 * [2001:db8::1]:80 with the port left out) goes on as its path: a path it
 * must be, inside the target.  Returns the head the checks read.
 */
static const struct hb_head *own_origin(const struct hb_head *hd)
{
	static struct hb_head stripped;
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(8119) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(80) };
	size_t skip;

	inet_pton(AF_INET, "192.0.2.1", &a4.sin_addr);
	inet_pton(AF_INET6, "2001:db8::1", &a6.sin6_addr);
	if (!hd->target_len || hd->target[0] == '/' ||
	    (!hb_target_own_origin(hd->target, hd->target_len, (const struct sockaddr *)&a4, &skip) &&
	     !hb_target_own_origin(hd->target, hd->target_len, (const struct sockaddr *)&a6, &skip)))
		return hd;
	if (skip >= hd->target_len || hd->target[skip] != '/')
		abort();
	stripped = *hd;
	stripped.target += skip;
	stripped.target_len -= skip;
	return &stripped;
}

/*
 * A path the spelling check took has one reading: decoded once, its bytes
 * are ASCII (overlong UTF-8 and NFKC make '.' and '/' past it), no decoded
 * byte is '/', '\\' or '%' (an encoded separator, a second decoding), and no
 * segment, up to a ';', is "." or "..".
 */
static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
}

static void one_reading(const char *t, size_t len)
{
	size_t q = 0, seg = 0;

	while (q < len && t[q] != '?')
		q++;
	for (size_t i = 1; i <= q; i++) {
		if (i < q && t[i] != '/') {
			unsigned char v = (unsigned char)t[i];

			if (v == '%') {
				if (i + 2 >= q || hex_digit(t[i + 1]) < 0 || hex_digit(t[i + 2]) < 0)
					abort();
				v = (unsigned char)(hex_digit(t[i + 1]) << 4 | hex_digit(t[i + 2]));
				if (v >= 0x80 || v == '/' || v == '\\' || v == '%' || v == '.')
					abort();
				i += 2;
			} else if (v >= 0x80 || v == '\\') {
				abort();
			}
			continue;
		}
		const char *s = t + seg + 1, *semi = memchr(s, ';', i - seg - 1);
		size_t n = semi ? (size_t)(semi - s) : i - seg - 1;

		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			abort();
		seg = i;
	}
}

static void route_checks(const struct hb_head *hd)
{
	static const char *const phs[] = { "latch-placeholder-00112233445566778899aabbccddeeff",
					   "latch-placeholder-ffeeddccbbaa99887766554433221100" };
	static const struct hb_ph_form also[] = { { "x-api-key", "" } }; /* Anthropic's two forms */
	struct hb_ph_rule rule = { "Authorization", "Bearer ", phs[0], phs, 2, NULL, also, 1 };
	struct hb_ph_seen seen, seen2;
	const char *rest;
	size_t rest_len;
	char name[33], host[254];

	if (hd->connect) {
		hb_connect_target(hd->target, hd->target_len, host);
		return;
	}
	hd = own_origin(hd);
	if (hb_target_spelling(hd->target, hd->target_len) != HB_OK)
		return;
	one_reading(hd->target, hd->target_len);
	if (!hb_target_route(hd->target, hd->target_len, name, &rest, &rest_len))
		return;
	hb_prefix_covers("/v1/messages", rest, rest_len);
	enum hb_refusal ref = hb_placeholder_check(hd, &rule, &seen);
	static struct hb_ph_set set;

	/* a verdict of OK names the one form the key goes out in; a refusal of another header names it */
	if ((ref == HB_OK && (seen.form < 0 || seen.form > 1)) || (ref == HB_PH_OTHER_HEADER && !seen.where))
		abort();

	/* the set latchd prepares when its routes change gives the verdict the check makes without it */
	hb_ph_set_prep(&set, phs, 2);
	rule.prepared = &set;
	if (hb_placeholder_check(hd, &rule, &seen2) != ref || seen2.presented_len != seen.presented_len ||
	    seen2.form != seen.form)
		abort();
}

/* http-parser's own reading of a whole response head: its status text and lines, through its callbacks */
static int ref_status(http_parser *p, const char *at, size_t len)
{
	struct ref_reader *r = p->data;

	if (!r->status)
		r->status = at;
	r->status_len = at + len - r->status;
	return 0;
}

/*
 * A response head: hb_resp_head_read() indexes what http-parser's callbacks
 * deliver, and the short head leaves the parser where the whole one does
 * (the same verdict, status, framing and keep-alive, and the same body after).
 */
static void same_response(const char *buf, size_t len)
{
	static struct hb_hdr hdr[HB_HEADERS_MAX];
	static struct ref_reader r;
	static const http_parser_settings ref = { .on_status = ref_status,
						  .on_header_field = ref_field,
						  .on_header_value = ref_value };
	static const http_parser_settings body = { .on_body = on_body };
	struct hb_resp_index ix = { .hdr = hdr };
	struct body_seen ba = { 0 }, bb = { 0 };
	size_t head_len, short_len, na, nb;
	char shrt[1024];
	http_parser pa, pb;

	if (hb_resp_head_read(buf, len, 16384, &head_len, &ix, shrt, sizeof(shrt), &short_len) || !head_len)
		return;
	memset(&r, 0, sizeof(r));
	http_parser_init(&pa, HTTP_RESPONSE);
	http_parser_init(&pb, HTTP_RESPONSE);
	pa.data = &ba;
	pb.data = &r;
	na = http_parser_execute(&pa, &body, short_len ? shrt : buf, short_len ? short_len : head_len);
	nb = http_parser_execute(&pb, &ref, buf, head_len);
	if (HTTP_PARSER_ERRNO(&pa) != HTTP_PARSER_ERRNO(&pb))
		abort();
	if (HTTP_PARSER_ERRNO(&pa) != HPE_OK)
		return;
	if (na != (short_len ? short_len : head_len) || nb != head_len || pa.status_code != pb.status_code ||
	    pa.content_length != pb.content_length || (pa.flags & F_CHUNKED) != (pb.flags & F_CHUNKED) ||
	    http_should_keep_alive(&pa) != http_should_keep_alive(&pb))
		abort();
	if (r.n != ix.n || r.status_len != ix.reason_len || (r.status_len && r.status != buf + ix.reason))
		abort();
	/*
	 * http-parser frames the body as RFC 9112 6.3 reads the lines (the
	 * status aside: the broker skips a 1xx's, 204's and 304's body itself):
	 * chunked only under one line "Transfer-Encoding: chunked" (a "gzip,
	 * chunked" it decoded as chunked handed the guest gzip the scrubber
	 * could not read), never with another Transfer-Encoding line left
	 * unread ("chunked, gzip" went through raw, chunk framing and all),
	 * else the one Content-Length, else to the connection's end.
	 */
	int64_t cl = -1;
	int n_te = 0;
	bool te = false;

	for (int i = 0; i < ix.n; i++) {
		const char *name = buf + hdr[i].name, *value = buf + hdr[i].value;

		if (hb_token_eq(name, hdr[i].name_len, "transfer-encoding")) {
			te = true;
			n_te += hb_token_eq(value, hdr[i].value_len, "chunked") ? 1 : 2;
		}
		if (hb_token_eq(name, hdr[i].name_len, "content-length")) {
			cl = 0;
			for (uint32_t k = 0; k < hdr[i].value_len && cl < (INT64_MAX - 9) / 10; k++)
				cl = cl * 10 + (value[k] - '0');
		}
	}
	if (((pa.flags & F_CHUNKED) ? n_te != 1 : te) ||
	    (!te && cl >= 0 && pa.content_length != (uint64_t)cl && pa.status_code / 100 != 1 &&
	     pa.status_code != 204 && pa.status_code != 304))
		abort();
	for (int i = 0; i < r.n; i++) {
		struct hb_header mine = { .name = buf + hdr[i].name,
					  .value = buf + hdr[i].value,
					  .name_len = hdr[i].name_len,
					  .value_len = hdr[i].value_len };

		trim_ref(&r.h[i]);
		same_header(&mine, &r.h[i]);
	}
	pb.data = &bb;
	na = http_parser_execute(&pa, &body, buf + head_len, len - head_len);
	nb = http_parser_execute(&pb, &body, buf + head_len, len - head_len);
	if (na != nb || HTTP_PARSER_ERRNO(&pa) != HTTP_PARSER_ERRNO(&pb) || ba.len != bb.len || ba.sum != bb.sum)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hb_head head;
	static struct sink out;
	http_parser p;
	size_t head_len;
	char sni[254];

	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0: { /* a request: head, then what follows as its body */
		const char *buf = (const char *)data + 1;
		size_t len = size - 1;
		static struct hb_lines lines;
		enum hb_refusal r = hb_head_scan(buf, len, 16384, &head_len, &lines);

		if (r != HB_OK || !head_len)
			return 0;
		if (same_reading(buf, head_len, &lines, len, &head, &p))
			route_checks(&head);
		return 0;
	}
	case 3: /* a response head from the upstream, then its body */
		same_response((const char *)data + 1, size - 1);
		return 0;
	case 1: /* what a CONNECT tunnel's first bytes may be */
		hb_client_hello_sni(data + 1, size - 1, sni);
		return 0;
	default: { /* the scrubber, fed in pieces cut where the input says */
		struct hb_scrub s = { .secret = secret, .secret_len = sizeof(secret) - 1 };
		static struct sink whole;
		size_t i = 1;

		out.len = 0;
		whole.len = 0;
		while (i < size) {
			size_t n = 1 + data[i] % 64;
			static char piece[256];

			i++;
			if (n > size - i)
				n = size - i;
			/* the secret is planted where the input has a '#', so it shows up cut every way */
			size_t k = 0;

			for (size_t j = 0; j < n && k + sizeof(secret) < sizeof(piece); j++)
				if (data[i + j] == '#') {
					memcpy(piece + k, secret, sizeof(secret) - 1);
					k += sizeof(secret) - 1;
				} else {
					piece[k++] = data[i + j];
				}
			/* cut the planted bytes again at an input-chosen point */
			size_t cut = k ? data[i - 1] % k : 0;

			hb_scrub_feed(&s, piece, cut, emit, &out);
			hb_scrub_feed(&s, piece + cut, k - cut, emit, &out);
			if (whole.len + k <= sizeof(whole.buf)) {
				memcpy(whole.buf + whole.len, piece, k);
				whole.len += k;
			}
			i += n;
		}
		hb_scrub_flush(&s, emit, &out);
		if (memmem(out.buf, out.len, secret, sizeof(secret) - 1))
			abort(); /* the invariant: the secret never passes the scrubber */
		/* the same bytes whole (a response head), scrubbed in place: none left, and only the secret's bytes changed */
		memcpy(out.buf, whole.buf, whole.len);
		hb_scrub_inplace(whole.buf, whole.len, secret, sizeof(secret) - 1);
		if (memmem(whole.buf, whole.len, secret, sizeof(secret) - 1))
			abort();
		for (size_t j = 0; j < whole.len; j++)
			if (whole.buf[j] != out.buf[j] && whole.buf[j] != '*')
				abort();
		return 0;
	}
	}
}
