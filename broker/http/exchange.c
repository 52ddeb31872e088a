// SPDX-License-Identifier: GPL-2.0-only
/*
 * exchange.c - one forwarded request: the request the upstream gets, and the
 * response streamed back to the guest as it arrives (engine.h has the map).
 *
 * The request goes out re-framed by us (Content-Length or chunked as the
 * guest sent it, Content-Length for metered routes), with the guest's auth
 * headers and the hop-by-hop headers gone, in one contiguous head with the
 * secret that is wiped once sent.  The response body is passed on piece by
 * piece as TLS records arrive: each piece becomes one chunk towards the
 * guest (or goes out as-is under Content-Length), after the secret
 * scrubber, so an SSE event leaves as soon as it arrived.  Reading pauses
 * when buffer_max bytes wait for the slower side.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "broker/http/engine.h"

/* ------------------------------------------------------------ the request */

/* CONN: the request's Connection header, or NULL */
static bool hop_by_hop(const struct hb_header *hd, const struct hb_header *conn)
{
	static const struct hb_name names[] = {
		HB_NAME("connection"),
		HB_NAME("keep-alive"),
		HB_NAME("proxy-connection"),
		HB_NAME("te"),
		HB_NAME("trailer"),
		HB_NAME("transfer-encoding"),
		HB_NAME("upgrade"),
		HB_NAME("proxy-authenticate"),
		HB_NAME("proxy-authorization"),
		HB_NAME("content-length"),
		HB_NAME("host"),
		HB_NAME("expect"),
		HB_NAME("accept-encoding"),
		HB_NAME("authorization"),
	};

	if (hb_name_in(hd->name, hd->name_len, names, sizeof(names) / sizeof(names[0])))
		return true;
	/* the headers that Connection names are hop-by-hop too */
	return conn && hb_list_has(conn->value, conn->value_len, hd->name, hd->name_len);
}

static void wipe_free(const void *data, size_t len, void *arg)
{
	explicit_bzero((void *)data, len);
	free((void *)data);
}

/*
 * A head written into memory of a bound from its pieces (cap); past it (n > cap) nothing more is, and it is
 * written again into its length.  printf and an evbuffer_add a piece were a fifth of a request (callgrind).
 */
struct hb_w {
	char *p;
	size_t n, cap;
};

static void w_put(struct hb_w *w, const void *s, size_t len)
{
	if (w->n + len <= w->cap)
		memcpy(w->p + w->n, s, len);
	w->n += len;
}

static void w_str(struct hb_w *w, const char *s)
{
	w_put(w, s, strlen(s));
}

static void w_num(struct hb_w *w, unsigned long long v, unsigned base)
{
	char buf[24];
	int i = sizeof(buf);

	do
		buf[--i] = "0123456789abcdef"[v % base];
	while ((v /= base));
	w_put(w, buf + i, sizeof(buf) - i);
}

/* The head the upstream gets, into w.  body_len >= 0: send that Content-Length (metered). */
static void request_head(struct hb_w *w, const struct hb_exchange *x, const bool *keep, int64_t body_len)
{
	const struct hb_head *hd = &x->g->head;
	const struct hb_target *t = x->t;
	const char *rest = x->rest;
	size_t rest_len = x->rest_len;

	w_str(w, hd->method);
	w_put(w, " ", 1);
	w_put(w, t->base_path,
	      t->base_path_len); /* an alternative's base path goes first: /openai + /v1/chat/completions */
	if (!rest_len || rest[0] == '?')
		w_put(w, "/", 1);
	w_put(w, rest, rest_len);
	w_put(w, " HTTP/1.1\r\nHost: ", 17);
	w_put(w, t->authority, t->authority_len);
	w_put(w, "\r\n", 2);
	for (int i = 0; i < hd->n; i++) {
		if (!keep[i])
			continue;
		w_put(w, hd->h[i].name, hd->h[i].name_len);
		w_put(w, ": ", 2);
		w_put(w, hd->h[i].value, hd->h[i].value_len);
		w_put(w, "\r\n", 2);
	}
	if (t->secret.mem) {
		w_put(w, t->header, t->header_len);
		w_put(w, ": ", 2);
		w_put(w, t->scheme, t->scheme_len);
		w_put(w, t->secret.mem, t->secret.len);
		w_put(w, "\r\n", 2);
	}
	/* identity: the scrubber and the meter read the body as the guest will */
	w_put(w, "Accept-Encoding: identity\r\n", 27);
	if (body_len < 0 && !hd->chunked) /* the guest's own length, or none (-1) */
		body_len = hd->content_length;
	if (body_len >= 0) {
		w_put(w, "Content-Length: ", 16);
		w_num(w, (unsigned long long)body_len, 10);
		w_put(w, "\r\n\r\n", 4);
	} else if (hd->chunked) {
		w_put(w, "Transfer-Encoding: chunked\r\n\r\n", 30);
	} else {
		w_put(w, "\r\n", 2);
	}
}

void hb_build_request(struct hb_exchange *x, int64_t body_len)
{
	const struct hb_head *hd = &x->g->head;
	const struct hb_header *conn = hb_head_get(hd, "connection");
	const struct hb_target *t = x->t;
	bool keep[HB_HEADERS_MAX];
	struct hb_w w = { .cap = 160 + t->base_path_len + x->rest_len + t->authority_len + t->header_len +
				 t->scheme_len + t->secret.len };

	for (int i = 0; i < hd->n; i++) {
		keep[i] = !hop_by_hop(&hd->h[i], conn) && !(hd->h[i].name_len == t->header_len &&
							    !strncasecmp(hd->h[i].name, t->header, t->header_len));
		w.cap += hd->h[i].name_len + hd->h[i].value_len + 4;
	}
	/*
	 * One contiguous head: one SSL_write, one TLS record, one syscall (an evbuffer of several chains costs
	 * one of each per chain).  It holds the secret: wiped when sent.  Its bound: the fixed lines (method,
	 * Host, Accept-Encoding, framing) are under 160 bytes; past it, written again into its length.
	 */
	for (;; w.cap = w.n) {
		if (!(w.p = malloc(w.cap)))
			return;
		w.n = 0;
		request_head(&w, x, keep, body_len);
		if (w.n <= w.cap)
			break;
		wipe_free(w.p, w.cap, NULL);
	}
	if (evbuffer_add_reference(x->req, w.p, w.n, wipe_free, NULL))
		wipe_free(w.p, w.n, NULL);
}

/* Where body bytes go now: the connection once it is up, the pending request before. */
static struct evbuffer *body_sink(struct hb_exchange *x)
{
	if (x->u && x->u->connected && !x->u->send_pending)
		return bufferevent_get_output(x->u->bev);
	return x->req;
}

/*
 * A cleared exchange with an empty request buffer: the connection's last
 * one if it left one (its scrubber was wiped and its buffer emptied at its
 * end), else a new one.  A calloc, an evbuffer_new() and their frees a
 * request were ~1,100 instructions (callgrind).
 */
static struct hb_exchange *exchange_new(struct hb_gconn *g)
{
	struct hb_exchange *x = g->spare;
	struct evbuffer *req;

	if (!x) {
		x = calloc(1, sizeof(*x));
		if (x && !(x->req = evbuffer_new())) {
			free(x);
			return NULL;
		}
		return x;
	}
	g->spare = NULL;
	req = x->req;
	memset(x, 0, offsetof(struct hb_exchange, scrub));
	x->req = req;
	x->scrub.n_held = 0;
	return x;
}

bool hb_exchange_start(struct hb_gconn *g, struct hb_route *r)
{
	struct hb_exchange *x = exchange_new(g);
	const struct hb_head *hd = &g->head;
	bool body = hd->chunked || hd->content_length > 0;
	size_t plen = 0;

	/* the upstream would inflate a body the meter read compressed (its size; no max_tokens or n in it) */
	if (r->meter && hb_head_encoded(hd)) {
		if (x)
			g->spare = x; /* where exchange_new() took it from, or made it: cleared, its buffer empty */
		return hb_refuse(g, HB_BODY_ENCODED,
				 "latch: a metered request's body can't be content-encoded (the spend meter reads "
				 "it as sent); send it without Content-Encoding");
	}
	if (x && r->meter && !(x->body = evbuffer_new())) {
		g->spare = x; /* where exchange_new() took it from, or made it: cleared, its buffer empty */
		x = NULL;
	}
	if (!x)
		return hb_refuse(g, HB_UPSTREAM_CONNECT, "latch: out of memory; try again");
	char name[33];
	const char *rest;
	size_t rest_len;

	/* the audit names the upstream's path, without the query string */
	hb_target_route(hd->target, hd->target_len, name, &rest, &rest_len);
	x->rest = rest;
	x->rest_len = rest_len;
	while (plen < rest_len && rest[plen] != '?')
		plen++;
	if (!plen) {
		rest = "/";
		plen = 1;
	}
	if (plen < sizeof(x->path_short)) {
		memcpy(x->path_short, rest, plen);
		x->path_short[plen] = 0;
		x->path = x->path_short;
	} else {
		x->path = strndup(rest, plen);
	}
	x->g = g;
	x->r = r;
	x->t = &r->targets[r->active];
	_Static_assert(sizeof(x->method) == sizeof(hd->method), "the exchange keeps the head's method as it is");
	memcpy(x->method, hd->method, sizeof(x->method));
	x->head_method = !strcmp(hd->method, "HEAD");
	x->req_chunked = hd->chunked;
	x->metered = r->meter != NULL;
	x->scrub.secret = x->t->secret.mem;
	x->scrub.secret_len = x->t->secret.len;
	g->x = x;
	g->state = body ? G_BODY : G_WAIT;
	if (body && hd->expect_continue) { /* we answer it: the upstream gets no Expect */
		evbuffer_add(bufferevent_get_output(g->bev), "HTTP/1.1 100 Continue\r\n\r\n", 25);
		hb_guest_flush(g);
	}
	if (x->metered)
		return body ? true : hb_exchange_body_done(x);
	hb_build_request(x, -1);
	x->req_done = !body;
	return hb_acquire(x, false);
}

void hb_exchange_body(struct hb_exchange *x, const char *data, size_t len)
{
	struct evbuffer *sink = x->metered ? x->body : body_sink(x);

	x->bytes_in += len;
	if (x->req_chunked && !x->metered) {
		char size[24];
		struct hb_w w = { size, 0, sizeof(size) };

		w_num(&w, len, 16);
		w_put(&w, "\r\n", 2);
		evbuffer_add(sink, size, w.n);
	}
	evbuffer_add(sink, data, len);
	if (x->req_chunked && !x->metered)
		evbuffer_add(sink, "\r\n", 2);
	/* backpressure: stop reading the guest while the upstream is behind */
	if (!x->metered && evbuffer_get_length(sink) > x->t->route->sb->h->o.buffer_max)
		hb_guest_reading(x->g, false);
}

bool hb_exchange_over_limit(struct hb_exchange *x)
{
	size_t max = x->r->meter && x->r->meter->body_max ? x->r->meter->body_max : 8u << 20;

	return x->metered && evbuffer_get_length(x->body) > max;
}

/* The request as the meter saw it goes out: its whole body under a Content-Length. */
static bool metered_forward(struct hb_exchange *x)
{
	hb_build_request(x, (int64_t)evbuffer_get_length(x->body));
	evbuffer_add_buffer(x->req, x->body);
	x->req_done = true;
	return hb_acquire(x, false);
}

bool hb_exchange_body_done(struct hb_exchange *x)
{
	struct hb_gconn *g = x->g;
	char line[512] = "";

	if (!x->metered) {
		if (x->req_chunked)
			evbuffer_add(body_sink(x), "0\r\n\r\n", 5);
		x->req_done = true;
		return true;
	}
	/* metered: the meter sees the whole body before a byte of it leaves */
	const struct latch_http_meter *m = x->r->meter;
	size_t n = evbuffer_get_length(x->body);
	struct latch_http_meter_request rq = {
		.route = x->r->name,
		.upstream = x->t->name,
		.method = x->method,
		.path = x->path,
		.body = n ? (const void *)evbuffer_pullup(x->body, n) : (const void *)"",
		.body_len = n,
		.hold = (struct latch_http_hold *)x,
	};
	int rc = m->request ? m->request(m->arg, &rq, &x->meter_token, line, sizeof(line)) : 0;

	if (rc && rc != LATCH_HTTP_METER_HOLD) {
		hb_exchange_end(x, LATCH_HTTP_END_ERROR);
		return hb_refuse(g, HB_METER, "%s",
				 strncmp(line, "latch:", 6) ? "latch: refused by the spend cap" : line);
	}
	x->meter_open = true;
	if (rc == LATCH_HTTP_METER_HOLD) { /* until latch_http_meter_resume() */
		x->held = true;
		return true;
	}
	return metered_forward(x);
}

void latch_http_meter_resume(struct latch_http_hold *hold, const char *refusal)
{
	struct hb_exchange *x = (struct hb_exchange *)hold;
	struct hb_gconn *g = x->g;

	if (!x->held)
		return;
	x->held = false;
	if (!refusal) {
		metered_forward(x);
		return;
	}
	hb_exchange_end(x, LATCH_HTTP_END_ERROR);
	hb_refuse(g, HB_METER, "%s", strncmp(refusal, "latch:", 6) ? "latch: refused by the spend cap" : refusal);
}

/* ------------------------------------------------------------ the response */

/* CONN: the upstream's Connection header, or NULL */
static bool resp_hop_by_hop(struct hb_uconn *u, const struct hb_hdr *h, const struct hb_hdr *conn)
{
	static const struct hb_name names[] = {
		HB_NAME("connection"),	     HB_NAME("keep-alive"),
		HB_NAME("proxy-connection"), HB_NAME("te"),
		HB_NAME("trailer"),	     HB_NAME("transfer-encoding"),
		HB_NAME("upgrade"),	     HB_NAME("proxy-authenticate"),
		HB_NAME("content-length"),
	};
	const char *name = u->head + h->name;

	if (hb_name_in(name, h->name_len, names, sizeof(names) / sizeof(names[0])))
		return true;
	/* named by the upstream's Connection header */
	return conn && hb_list_has(u->head + conn->value, conn->value_len, name, h->name_len);
}

struct emit_ctx {
	struct hb_exchange *x;
	struct evbuffer *out;
};

/* One piece of the body towards the guest: a chunk of its own, or as it is under Content-Length. */
static void emit_body(void *arg, const char *data, size_t len)
{
	struct emit_ctx *e = arg;

	if (!len) /* a zero-size chunk would end the stream */
		return;
	if (e->x->resp_chunked) {
		char size[24];
		struct hb_w w = { size, 0, sizeof(size) };

		w_num(&w, len, 16);
		w_put(&w, "\r\n", 2);
		evbuffer_add(e->out, size, w.n);
	}
	evbuffer_add(e->out, data, len);
	if (e->x->resp_chunked)
		evbuffer_add(e->out, "\r\n", 2);
}

/* How the response body is framed towards the guest. */
enum framing { FRAME_NONE, FRAME_LENGTH, FRAME_CHUNKED, FRAME_CLOSE };

/*
 * The response head the guest gets, into w: the upstream's status and
 * headers less the hop-by-hop ones, then the framing.  Everything of the
 * upstream's in it (the reason phrase, names and values) is scrubbed in
 * place: same length, the key becomes stars.  Values alone were: an
 * upstream that put the key in its reason phrase ("401 bad key sk-...")
 * handed it to the guest.
 */
static void response_head(struct hb_w *w, http_parser *p, const bool *keep, enum framing f, bool close)
{
	struct hb_uconn *u = p->data;
	struct hb_exchange *x = u->x;
	size_t from;

	w_put(w, "HTTP/1.1 ", 9);
	w_num(w, x->status, 10);
	w_put(w, " ", 1);
	from = w->n;
	w_put(w, u->head + u->reason, u->reason_len);
	w_put(w, "\r\n", 2);
	for (int i = 0; i < u->n_hdr; i++) {
		const struct hb_hdr *h = &u->hdr[i];

		if (!keep[i])
			continue;
		w_put(w, u->head + h->name, h->name_len);
		w_put(w, ": ", 2);
		w_put(w, u->head + h->value, h->value_len);
		w_put(w, "\r\n", 2);
	}
	if (w->n <= w->cap) /* else it is written again */
		hb_scrub_inplace(w->p + from, w->n - from, x->scrub.secret, x->scrub.secret_len);
	if (f == FRAME_LENGTH) {
		w_put(w, "Content-Length: ", 16);
		w_num(w, p->content_length, 10);
		w_put(w, "\r\n", 2);
	} else if (f == FRAME_CHUNKED) {
		w_put(w, "Transfer-Encoding: chunked\r\n", 28);
	}
	if (close)
		w_put(w, "Connection: close\r\n", 19);
	w_put(w, "\r\n", 2);
}

static int r_headers_complete(http_parser *p)
{
	struct hb_uconn *u = p->data;
	struct hb_exchange *x = u->x;
	struct hb_gconn *g = x->g;
	struct evbuffer *out = bufferevent_get_output(g->bev);
	int status = p->status_code;
	bool no_body = x->head_method || status == 204 || status == 304;
	struct evbuffer_iovec vec;
	struct hb_w w = { 0 };
	const struct hb_hdr *conn = NULL;
	bool keep[HB_HEADERS_MAX];
	enum framing f;
	bool conn_close;

	if (status == 101) { /* we sent no Upgrade: what follows would be another protocol */
		u->fail = HB_UPSTREAM_BAD;
		return -1;
	}
	if (status >= 100 && status < 200) {
		/* we sent no Expect: skip 100 and 103, which have no body whatever they say (RFC 9112 6.3) */
		u->skip_message = true;
		return 1;
	}
	bool te = false;

	for (int i = 0; i < u->n_hdr; i++) {
		const struct hb_hdr *h = &u->hdr[i];

		te |= hb_token_eq(u->head + h->name, h->name_len, "transfer-encoding");
		if (hb_token_eq(u->head + h->name, h->name_len, "content-encoding") &&
		    !hb_token_eq(u->head + h->value, h->value_len, "identity")) {
			u->fail = HB_UPSTREAM_ENCODED; /* the scrubber could not read it: fail closed */
			return -1;
		}
		if (hb_token_eq(u->head + h->name, h->name_len, "connection"))
			conn = h;
	}
	/* the head's one "Transfer-Encoding: chunked" (hb_resp_head_read) is what the parser reads the body by */
	if (te != !!(p->flags & F_CHUNKED)) {
		u->fail = HB_UPSTREAM_BAD;
		return -1;
	}
	for (int i = 0; i < u->n_hdr; i++) {
		const struct hb_hdr *h = &u->hdr[i];

		/* HEAD's and 304's length header says what a GET would get; a 204 has none (RFC 9110 8.6) */
		keep[i] = !resp_hop_by_hop(u, h, conn) ||
			  (no_body && status != 204 && hb_token_eq(u->head + h->name, h->name_len, "content-length"));
	}
	/* an answer before the body is all read (an early 401, 413): the rest was read as a next request */
	if (g->state == G_BODY)
		g->close_after = true;
	x->status = status;
	x->resp_started = true;
	if (no_body) {
		f = FRAME_NONE; /* the length header (if any) goes through with the others */
	} else if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX) {
		f = FRAME_LENGTH;
	} else if (g->head.http_minor >= 1) {
		f = FRAME_CHUNKED;
		x->resp_chunked = true;
	} else {
		f = FRAME_CLOSE; /* an HTTP/1.0 guest: the end of the body is the end of the connection */
		x->resp_close = true;
		g->close_after = true;
	}
	conn_close = g->close_after || !g->head.keep_alive;
	/* in place into the guest's output, no copy; the bound: reason, names and values are in u->head */
	for (w.cap = u->head_len + 4 * (size_t)u->n_hdr + 128;; w.cap = w.n) {
		if (evbuffer_reserve_space(out, w.cap, &vec, 1) != 1 || vec.iov_len < w.cap) {
			u->fail = HB_UPSTREAM_BAD;
			return -1;
		}
		w.p = vec.iov_base;
		w.n = 0;
		response_head(&w, p, keep, f, conn_close);
		if (w.n <= w.cap)
			break;
	}
	vec.iov_len = w.n;
	evbuffer_commit_space(out, &vec, 1);
	if (x->meter_open && x->r->meter->response)
		x->r->meter->response(x->r->meter->arg, x->meter_token, status, NULL, 0);
	return no_body ? 1 : 0;
}

static int r_body(http_parser *p, const char *at, size_t len)
{
	struct hb_uconn *u = p->data;
	struct hb_exchange *x = u->x;
	struct emit_ctx e = { x, bufferevent_get_output(x->g->bev) };

	if (u->skip_message) /* an interim response has no body (r_headers_complete): never the guest's */
		return 0;
	if (x->meter_open && x->r->meter->response)
		x->r->meter->response(x->r->meter->arg, x->meter_token, x->status, at, len);
	x->bytes_out += len;
	hb_scrub_feed(&x->scrub, at, len, emit_body, &e);
	return 0;
}

static int r_complete(http_parser *p)
{
	struct hb_uconn *u = p->data;
	struct hb_exchange *x = u->x;
	struct emit_ctx e = { x, bufferevent_get_output(x->g->bev) };

	if (u->skip_message) {
		u->skip_message = false;
		u->head_in = false; /* the response's own head comes next */
		return 0;
	}
	hb_scrub_flush(&x->scrub, emit_body, &e);
	if (x->resp_chunked)
		evbuffer_add(e.out, "0\r\n\r\n", 5);
	u->done = true;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings resp_settings = {
	.on_headers_complete = r_headers_complete,
	.on_body = r_body,
	.on_message_complete = r_complete,
};

/*
 * The response head: copied into u->head, where it stays (the guest's head
 * is written from it), read there by hb_resp_head_read(), and given to
 * http-parser as a short head of the lines it interprets (fed every line,
 * it walked them a byte at a time).  1: more bytes needed; 0: the parser is
 * past it; -1: the head is bad.
 */
static int response_head_in(struct hb_uconn *u, struct evbuffer *in)
{
	size_t avail = evbuffer_get_length(in), max = u->h->o.head_max, head_len, short_len;
	struct hb_resp_index ix = { .hdr = u->hdr };
	char shrt[1024];

	ev_ssize_t got;

	explicit_bzero(u->head, u->head_len); /* the last head, or what came of this one */
	got = evbuffer_copyout(in, u->head, avail < max ? avail : max);
	u->head_len = got > 0 ? (uint32_t)got : 0;
	if (got <= 0 || hb_resp_head_read(u->head, u->head_len, max, &head_len, &ix, shrt, sizeof(shrt), &short_len))
		return -1;
	if (!head_len)
		return avail >= max ? -1 : 1;
	explicit_bzero(u->head + head_len, u->head_len - head_len); /* body bytes copied with it */
	u->head_len = head_len;
	u->n_hdr = ix.n;
	u->reason = ix.reason;
	u->reason_len = ix.reason_len;
	u->head_in = true;
	hb_wipe_drain(in, head_len);
	http_parser_execute(&u->parser, &resp_settings, short_len ? shrt : u->head, short_len ? short_len : head_len);
	explicit_bzero(shrt, short_len);
	return 0;
}

/* The response is over (done) or broken: finish the exchange and go on with the guest. */
static void response_over(struct hb_uconn *u, enum latch_http_end how)
{
	struct hb_exchange *x = u->x;
	struct hb_gconn *g = x->g;

	/* the guest's last bytes first: the meter's settlement and the audit entry need not delay them */
	hb_guest_flush(g);
	hb_exchange_end(x, how);
	if (how == LATCH_HTTP_END_COMPLETE)
		hb_gconn_resume(g);
	else
		hb_gconn_close_when_flushed(g); /* the guest sees the body cut short */
}

/*
 * Records OpenSSL read ahead beyond the one libevent asked for: no event
 * will say they are there, so they are taken now.  False when none came.
 */
static bool read_ahead_taken(struct hb_uconn *u, struct evbuffer *in)
{
	SSL *ssl = bufferevent_openssl_get_ssl(u->bev);
	struct evbuffer_iovec v;
	int r;

	if (!ssl || !SSL_has_pending(ssl) || evbuffer_reserve_space(in, 4096, &v, 1) < 1)
		return false;
	ERR_clear_error();
	r = SSL_read(ssl, v.iov_base, v.iov_len > INT_MAX ? INT_MAX : (int)v.iov_len);
	if (r <= 0)
		return false; /* a partial record (its end comes with an event) or an error the next read reports */
	v.iov_len = r;
	evbuffer_commit_space(in, &v, 1);
	return true;
}

void hb_u_read(struct bufferevent *bev, void *arg)
{
	struct hb_uconn *u = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (!u->x) { /* bytes on an idle connection: it is not ours to reuse any more */
		hb_conn_free(u);
		return;
	}
	while (!u->done && (evbuffer_get_length(in) || read_ahead_taken(u, in))) {
		struct hb_exchange *x = u->x;
		struct evbuffer_iovec v;
		size_t n;
		enum http_errno e;

		if (evbuffer_get_length(bufferevent_get_output(x->g->bev)) > u->h->o.buffer_max) {
			bufferevent_disable(bev, EV_READ); /* the guest is behind: hb_exchange_guest_drained() */
			u->paused = true;
			return;
		}
		u->got_bytes = true;
		if (!u->head_in) {
			int r = response_head_in(u, in);

			/* the rest may wait in records OpenSSL read ahead, with no event to say so */
			if (r > 0 && read_ahead_taken(u, in))
				continue;
			if (r > 0)
				break;
			e = r < 0 ? HPE_UNKNOWN : HTTP_PARSER_ERRNO(&u->parser);
		} else {
			if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
				break;
			n = http_parser_execute(&u->parser, &resp_settings, v.iov_base, v.iov_len);
			hb_wipe_drain(in, n);
			e = HTTP_PARSER_ERRNO(&u->parser);
		}
		if (e == HPE_PAUSED)
			break;
		if (e != HPE_OK) {
			if (!x->resp_started) {
				enum hb_refusal r = u->fail ? u->fail : HB_UPSTREAM_BAD;

				hb_exchange_fail_async(
					x, r,
					r == HB_UPSTREAM_ENCODED ?
						"latch: the upstream sent a content-encoded response although the broker asked "
						"for identity; the broker does not pass bodies it cannot check for the key" :
						"latch: the upstream's response could not be read as HTTP/1.1");
			} else {
				response_over(u, LATCH_HTTP_END_ERROR);
			}
			return;
		}
	}
	if (u->done) {
		response_over(u, LATCH_HTTP_END_COMPLETE);
		return;
	}
	if (u->x)
		hb_guest_flush(u->x->g);
}

void hb_u_write(struct bufferevent *bev, void *arg)
{
	struct hb_uconn *u = arg;
	struct hb_exchange *x = u->x;

	/* the upstream took the body we queued: read more of it from the guest */
	if (x && x->g && x->g->state == G_BODY && !hb_guest_is_reading(x->g)) {
		hb_guest_reading(x->g, true);
		if (evbuffer_get_length(bufferevent_get_input(x->g->bev)))
			hb_guest_read_later(x->g);
	}
}

void hb_exchange_guest_drained(struct hb_exchange *x)
{
	struct hb_uconn *u = x->u;

	if (u && u->paused) {
		u->paused = false;
		bufferevent_enable(u->bev, EV_READ);
		hb_u_read(u->bev, u);
	}
}

void hb_u_event(struct bufferevent *bev, short what, void *arg)
{
	struct hb_uconn *u = arg;
	struct hb_exchange *x = u->x;
	char line[512];

	if (what & BEV_EVENT_CONNECTED) {
		if (x)
			hb_conn_connected(u);
		return;
	}
	if (!x) { /* an idle connection closed or timed out */
		hb_conn_free(u);
		return;
	}
	if ((what & BEV_EVENT_EOF) && x->resp_started && !u->done) {
		/* a body that ends with the connection ends here */
		http_parser_execute(&u->parser, &resp_settings, NULL, 0);
		if (u->done) {
			u->parser.http_major = 1;
			u->parser.http_minor = 0; /* not reusable: http_should_keep_alive() says no */
			response_over(u, LATCH_HTTP_END_COMPLETE);
			return;
		}
	}
	if (x->resp_started) {
		response_over(u, (what & BEV_EVENT_TIMEOUT) ? LATCH_HTTP_END_ERROR : LATCH_HTTP_END_UPSTREAM_CUT);
		return;
	}
	/* nothing came back yet: a pooled connection the upstream had closed gets one retry */
	if (u->reused && !u->got_bytes && !x->retried && !(what & BEV_EVENT_TIMEOUT) && !x->metered && x->req_done &&
	    !x->bytes_in) {
		x->retried = true;
		hb_conn_free(u);
		evbuffer_drain(x->req, evbuffer_get_length(x->req));
		hb_build_request(x, -1);
		hb_acquire(x, true);
		return;
	}
	unsigned long ssl_err = bufferevent_get_openssl_error(bev);
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long verify = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (what & BEV_EVENT_TIMEOUT)
		snprintf(line, sizeof(line), "latch: upstream %s did not answer in time", x->t->host);
	else if (!u->connected && verify != X509_V_OK)
		snprintf(line, sizeof(line),
			 "latch: upstream %s's certificate did not verify (%s); the broker only talks "
			 "to the upstream's real name",
			 x->t->host, X509_verify_cert_error_string(verify));
	else if (!u->connected)
		snprintf(line, sizeof(line), "latch: cannot reach upstream %s port %u (%s)", x->t->host, x->t->port,
			 ssl_err ? ERR_reason_error_string(ssl_err) : strerror(EVUTIL_SOCKET_ERROR()));
	else
		snprintf(line, sizeof(line), "latch: upstream %s closed the connection without a response", x->t->host);
	hb_exchange_fail_async(x,
			       (what & BEV_EVENT_TIMEOUT)	    ? HB_UPSTREAM_TIMEOUT :
			       !u->connected && verify != X509_V_OK ? HB_UPSTREAM_TLS :
			       u->connected			    ? HB_UPSTREAM_BAD :
								      HB_UPSTREAM_CONNECT,
			       line);
}
