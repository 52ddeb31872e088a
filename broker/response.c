// SPDX-License-Identifier: GPL-2.0-only
/*
 * response.c - the upstream's answer to a forwarded request, streamed back
 * to the guest as it arrives (exchange.c sends the request; engine.h has
 * the map).
 *
 * The head is read whole, scrubbed of the key and re-framed; the body is
 * passed on piece by piece as TLS records arrive: each piece becomes one
 * chunk towards the guest (or goes out as-is under Content-Length), after
 * the secret scrubber, so an SSE event leaves as soon as it arrived.
 * Reading the upstream pauses when buffer_max bytes wait for the guest.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "broker/engine.h"

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

		hb_w_num(&w, len, 16);
		hb_w_put(&w, "\r\n", 2);
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

	hb_w_put(w, "HTTP/1.1 ", 9);
	hb_w_num(w, x->status, 10);
	hb_w_put(w, " ", 1);
	from = w->n;
	hb_w_put(w, u->head + u->reason, u->reason_len);
	hb_w_put(w, "\r\n", 2);
	for (int i = 0; i < u->n_hdr; i++) {
		const struct hb_hdr *h = &u->hdr[i];

		if (!keep[i])
			continue;
		hb_w_put(w, u->head + h->name, h->name_len);
		hb_w_put(w, ": ", 2);
		hb_w_put(w, u->head + h->value, h->value_len);
		hb_w_put(w, "\r\n", 2);
	}
	if (w->n <= w->cap) /* else it is written again */
		hb_scrub_inplace(w->p + from, w->n - from, x->scrub.secret, x->scrub.secret_len);
	if (f == FRAME_LENGTH) {
		hb_w_put(w, "Content-Length: ", 16);
		hb_w_num(w, p->content_length, 10);
		hb_w_put(w, "\r\n", 2);
	} else if (f == FRAME_CHUNKED) {
		hb_w_put(w, "Transfer-Encoding: chunked\r\n", 28);
	}
	if (close)
		hb_w_put(w, "Connection: close\r\n", 19);
	hb_w_put(w, "\r\n", 2);
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
	/*
	 * An answer before the body is all read (an early 401, 413): the rest
	 * would be read as a next request, so the connection ends, lingering
	 * while the guest still sends it (guest.c).
	 */
	if (g->state == G_BODY)
		g->close_after = g->linger = true;
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
	x->meter_head_later = x->meter_open && x->r->meter->response;
	return no_body ? 1 : 0;
}

/*
 * The meter reads the response after the guest's write of it, not before
 * (hb_meter_later): the same bytes in the same order, whole, but its scan
 * no longer sits between the upstream's bytes and the guest's.  Kept here
 * until then; false when there is no memory for them.
 */
static bool meter_keep(struct hb_exchange *x, const char *at, size_t len)
{
	if (len > x->meter_later_cap - x->meter_later_len) {
		size_t cap = x->meter_later_cap ? x->meter_later_cap : 4096;
		char *p;

		while (cap - x->meter_later_len < len)
			cap *= 2;
		if (!(p = malloc(cap)))
			return false;
		if (x->meter_later_len) {
			memcpy(p, x->meter_later, x->meter_later_len);
			explicit_bzero(x->meter_later, x->meter_later_len);
		}
		free(x->meter_later);
		x->meter_later = p;
		x->meter_later_cap = cap;
	}
	memcpy(x->meter_later + x->meter_later_len, at, len);
	x->meter_later_len += len;
	return true;
}

void hb_meter_later(struct hb_exchange *x)
{
	const struct latch_http_meter *m = x->r->meter;

	if (x->meter_head_later) {
		x->meter_head_later = false;
		m->response(m->arg, x->meter_token, x->status, NULL, 0);
	}
	if (x->meter_later_len) {
		m->response(m->arg, x->meter_token, x->status, x->meter_later, x->meter_later_len);
		explicit_bzero(x->meter_later, x->meter_later_len); /* it may echo the key */
		x->meter_later_len = 0;
	}
}

static int r_body(http_parser *p, const char *at, size_t len)
{
	struct hb_uconn *u = p->data;
	struct hb_exchange *x = u->x;
	struct emit_ctx e = { x, bufferevent_get_output(x->g->bev) };

	if (u->skip_message) /* an interim response has no body (r_headers_complete): never the guest's */
		return 0;
	if (x->meter_open && x->r->meter->response && !meter_keep(x, at, len)) {
		u->fail = HB_UPSTREAM_BAD; /* out of memory: the meter must see every byte the guest gets */
		return -1;
	}
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
			hb_meter_later(x);
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
	if (u->x) {
		hb_guest_flush(u->x->g);
		hb_meter_later(u->x);
	}
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
	int sock_err = EVUTIL_SOCKET_ERROR();
	/* the socket failed, not TLS: bufferevent_openssl reports SSL_ERROR_SYSCALL itself, not an ERR_ code */
	bool socket_failed = !ssl_err || ssl_err == SSL_ERROR_SYSCALL;

	/* not connected, and not for TLS's reasons: this address could not be reached, the next may be */
	if (!u->connected && socket_failed && verify == X509_V_OK && hb_conn_next_addr(x, u))
		return;

	if (what & BEV_EVENT_TIMEOUT)
		snprintf(line, sizeof(line), "latch: upstream %s did not answer in time", x->t->host);
	else if (!u->connected && verify != X509_V_OK)
		snprintf(line, sizeof(line),
			 "latch: upstream %s's certificate did not verify (%s); the broker only talks "
			 "to the upstream's real name",
			 x->t->host, X509_verify_cert_error_string(verify));
	else if (!u->connected)
		snprintf(line, sizeof(line), "latch: cannot reach upstream %s port %u (%s)", x->t->host, x->t->port,
			 socket_failed ? strerror(sock_err) : ERR_reason_error_string(ssl_err));
	else
		snprintf(line, sizeof(line), "latch: upstream %s closed the connection without a response", x->t->host);
	hb_exchange_fail_async(x,
			       (what & BEV_EVENT_TIMEOUT)	    ? HB_UPSTREAM_TIMEOUT :
			       !u->connected && verify != X509_V_OK ? HB_UPSTREAM_TLS :
			       u->connected			    ? HB_UPSTREAM_BAD :
								      HB_UPSTREAM_CONNECT,
			       line);
}
