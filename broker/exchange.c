// SPDX-License-Identifier: GPL-2.0-only
/*
 * exchange.c - one forwarded request: the request the upstream gets
 * (response.c streams its answer back; engine.h has the map).
 *
 * The request goes out re-framed by us (Content-Length or chunked as the
 * guest sent it, Content-Length for metered routes), with the guest's auth
 * headers and the hop-by-hop headers gone, in one contiguous head with the
 * secret that is wiped once sent.  The body follows as the guest sends it,
 * through the meter when the route has one; reading the guest pauses when
 * buffer_max bytes wait for the upstream.
 */
#include <stdlib.h>
#include <string.h>

#include "broker/engine.h"

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

/* Is H one of the headers the target's key goes in (the kit's, or another form's)?  The guest's is replaced. */
static bool credential_header(const struct hb_header *h, const struct hb_target *t)
{
	if (h->name_len == t->header_len && !strncasecmp(h->name, t->header, t->header_len))
		return true;
	for (int i = 0; i < t->n_also; i++)
		if (hb_token_eq(h->name, h->name_len, t->also[i].header))
			return true;
	return false;
}

static void wipe_free(const void *data, size_t len, void *arg)
{
	explicit_bzero((void *)data, len);
	free((void *)data);
}

/* The head the upstream gets, into w.  body_len >= 0: send that Content-Length (metered). */
static void request_head(struct hb_w *w, const struct hb_exchange *x, const bool *keep, int64_t body_len)
{
	const struct hb_head *hd = &x->g->head;
	const struct hb_target *t = x->t;
	const char *rest = x->rest;
	size_t rest_len = x->rest_len;

	hb_w_str(w, hd->method);
	hb_w_put(w, " ", 1);
	hb_w_put(w, t->base_path,
		 t->base_path_len); /* an alternative's base path goes first: /openai + /v1/chat/completions */
	if (!rest_len || rest[0] == '?')
		hb_w_put(w, "/", 1);
	hb_w_put(w, rest, rest_len);
	hb_w_put(w, " HTTP/1.1\r\nHost: ", 17);
	hb_w_put(w, t->authority, t->authority_len);
	hb_w_put(w, "\r\n", 2);
	for (int i = 0; i < hd->n; i++) {
		if (!keep[i])
			continue;
		hb_w_put(w, hd->h[i].name, hd->h[i].name_len);
		hb_w_put(w, ": ", 2);
		hb_w_put(w, hd->h[i].value, hd->h[i].value_len);
		hb_w_put(w, "\r\n", 2);
	}
	if (t->secret.mem) { /* in the form the guest sent the placeholder in: the upstream takes them all */
		const struct hb_ph_form *f =
			x->g->ph_form > 0 && x->g->ph_form <= t->n_also ? &t->also[x->g->ph_form - 1] : NULL;

		if (f) {
			hb_w_str(w, f->header);
			hb_w_put(w, ": ", 2);
			hb_w_str(w, f->scheme);
		} else {
			hb_w_put(w, t->header, t->header_len);
			hb_w_put(w, ": ", 2);
			hb_w_put(w, t->scheme, t->scheme_len);
		}
		hb_w_put(w, t->secret.mem, t->secret.len);
		hb_w_put(w, "\r\n", 2);
	}
	/* identity: the scrubber and the meter read the body as the guest will */
	hb_w_put(w, "Accept-Encoding: identity\r\n", 27);
	if (body_len < 0 && !hd->chunked) /* the guest's own length, or none (-1) */
		body_len = hd->content_length;
	if (body_len >= 0) {
		hb_w_put(w, "Content-Length: ", 16);
		hb_w_num(w, (unsigned long long)body_len, 10);
		hb_w_put(w, "\r\n\r\n", 4);
	} else if (hd->chunked) {
		hb_w_put(w, "Transfer-Encoding: chunked\r\n\r\n", 30);
	} else {
		hb_w_put(w, "\r\n", 2);
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
		keep[i] = !hop_by_hop(&hd->h[i], conn) && !credential_header(&hd->h[i], t);
		w.cap += hd->h[i].name_len + hd->h[i].value_len + 4;
	}
	for (int i = 0; i < t->n_also; i++) /* the secret may go in another form than the kit's */
		w.cap += strlen(t->also[i].header) + strlen(t->also[i].scheme);
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
	memset(x, 0, offsetof(struct hb_exchange, meter_later));
	x->req = req;
	x->meter_later_len = 0; /* hb_meter_later() emptied it */
	x->scrub.n_held = 0;
	return x;
}

static size_t metered_body_max(const struct hb_route *r)
{
	return r->meter && r->meter->body_max ? r->meter->body_max : r->sb->h->o.metered_body_max;
}

bool hb_exchange_refuse_large(struct hb_gconn *g, const struct hb_route *r)
{
	size_t max = metered_body_max(r);

	if (max % (1u << 20))
		return hb_refuse(g, HB_BODY_TOO_LARGE,
				 "latch: this metered request's body is over the %zu bytes the spend meter reads; "
				 "send a smaller one",
				 max);
	return hb_refuse(g, HB_BODY_TOO_LARGE,
			 "latch: this metered request's body is over the %zu MiB the spend meter reads; send a "
			 "smaller one, or raise broker_body_max in latch.conf",
			 max >> 20);
}

/*
 * A metered body is held whole until the meter has seen it, so what a
 * sandbox's metered requests hold at once is bounded (metered_hold_max):
 * else 256 connections of 32 MiB bodies that never end would hold 8 GiB of
 * latchd's memory.  A body under a Content-Length is counted at its start,
 * a chunked one as it grows; each exchange gives its share back when it ends.
 */
static void hold_grow(struct hb_exchange *x, size_t n)
{
	if (n <= x->held_bytes)
		return;
	x->r->sb->metered_held += n - x->held_bytes;
	x->held_bytes = n;
}

bool hb_exchange_over_hold(const struct hb_exchange *x)
{
	return x->metered && x->r->sb->metered_held > x->r->sb->h->o.metered_hold_max;
}

bool hb_exchange_refuse_held(struct hb_gconn *g)
{
	const struct latch_http_sandbox *sb = g->sb;

	return hb_refuse(g, HB_METERED_HELD,
			 "latch: this sandbox's metered requests in flight hold %zu MiB of request bodies, "
			 "the most latch keeps at once is %u MiB; retry when one has been answered, or raise "
			 "broker_metered_hold_max in latch.conf",
			 (sb->metered_held + (1u << 20) - 1) >> 20, sb->h->o.metered_hold_max >> 20);
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
	/* a body under a Content-Length is refused before a byte of it is read: too large, or no room to hold */
	if (r->meter && !hd->chunked && hd->content_length > 0) {
		if (x)
			g->spare = x;
		if ((uint64_t)hd->content_length > metered_body_max(r))
			return hb_exchange_refuse_large(g, r);
		if (r->sb->metered_held + (uint64_t)hd->content_length > r->sb->h->o.metered_hold_max)
			return hb_exchange_refuse_held(g);
		g->spare = NULL;
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
	if (x->metered && !hd->chunked && hd->content_length > 0)
		hold_grow(x, (size_t)hd->content_length);
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

		hb_w_num(&w, len, 16);
		hb_w_put(&w, "\r\n", 2);
		evbuffer_add(sink, size, w.n);
	}
	evbuffer_add(sink, data, len);
	if (x->req_chunked && !x->metered)
		evbuffer_add(sink, "\r\n", 2);
	if (x->metered)
		hold_grow(x, evbuffer_get_length(sink));
	/* backpressure: stop reading the guest while the upstream is behind */
	if (!x->metered && evbuffer_get_length(sink) > x->t->route->sb->h->o.buffer_max)
		hb_guest_reading(x->g, false);
}

bool hb_exchange_over_limit(struct hb_exchange *x)
{
	return x->metered && evbuffer_get_length(x->body) > metered_body_max(x->r);
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
		bool forbid = rc == LATCH_HTTP_METER_FORBID;
		const char *dflt = forbid ? "latch: not allowed on a metered route" : "latch: refused by the spend cap";

		hb_exchange_end(x, LATCH_HTTP_END_ERROR);
		return hb_refuse(g, forbid ? HB_METER_FORBID : HB_METER, "%s",
				 strncmp(line, "latch:", 6) ? dflt : line);
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
