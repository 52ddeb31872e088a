// SPDX-License-Identifier: GPL-2.0-only
/*
 * guest.c - the guest connections and the checks a request goes through, in
 * their order (engine.h has the map).
 *
 * A guest connection reads one request head at a time (keep-alive; a
 * pipelined request waits in the input buffer until the previous response
 * is done), refuses it with an ordinary HTTP response whose body is one
 * `latch:` line, or hands it to exchange.c (a route) or tunnel.c (CONNECT).
 * A refusal keeps the connection when nothing of the request is left
 * unread, and closes it otherwise (a body we did not read, a head we could
 * not read).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/listener.h>
#include <openssl/crypto.h>

#include "broker/engine.h"

/* ------------------------------------------------------------ guest connections */

static void guest_on_read(evutil_socket_t fd, short what, void *arg);
static void guest_write(struct bufferevent *bev, void *arg);
static void guest_event(struct bufferevent *bev, short what, void *arg);

static void nodelay_fd(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static bool is_guest(const struct latch_http_sandbox *sb, const struct latch_addr *a)
{
	for (int i = 0; i < sb->o.n_guests; i++)
		if (sb->o.guests[i].family == a->family &&
		    !memcmp(sb->o.guests[i].bytes, a->bytes, a->family == AF_INET ? 4 : 16))
			return true;
	return false;
}

void hb_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct latch_http_sandbox *sb = arg;
	struct latch_http *h = sb->h;
	struct hb_gconn *g;

	h->st.accepted++;
	if (sb->n_gconns >= h->o.conns_max || !(g = calloc(1, sizeof(*g)))) {
		close(fd);
		return;
	}
	g->headbuf = malloc(h->o.head_max);
	g->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
	g->rev = event_new(h->base, fd, EV_READ | EV_PERSIST, guest_on_read, g);
	if (!g->headbuf || !g->bev || !g->rev) {
		if (g->rev)
			event_free(g->rev);
		if (g->bev)
			bufferevent_free(g->bev);
		else
			close(fd);
		free(g->headbuf);
		free(g);
		return;
	}
	g->sb = sb;
	if (sa->sa_family == AF_INET) {
		g->peer.family = AF_INET;
		g->peer.v4 = ((struct sockaddr_in *)sa)->sin_addr;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((struct sockaddr_in6 *)sa)->sin6_addr;

		g->peer.family = AF_INET6;
		g->peer.v6 = *a6;
		if (IN6_IS_ADDR_V4MAPPED(a6)) { /* a dual-stack listener reports v4 guests this way */
			g->peer.family = AF_INET;
			memcpy(&g->peer.v4, &a6->s6_addr[12], 4);
		}
	}
	g->next = sb->gconns;
	if (sb->gconns)
		sb->gconns->pprev = &g->next;
	g->pprev = &sb->gconns;
	sb->gconns = g;
	sb->n_gconns++;
	bufferevent_setcb(g->bev, NULL, guest_write, guest_event, g);
	g->idle = true;
	if (!is_guest(sb, &g->peer)) {
		char a[INET6_ADDRSTRLEN];

		latch_addr_format(&g->peer, a, sizeof(a));
		hb_refuse(g, HB_NOT_GUEST, "latch: this broker serves only sandbox %s's guest, not %s", sb->name, a);
		return;
	}
	bufferevent_disable(g->bev, EV_WRITE); /* enabled only while hb_guest_flush() left bytes */
	hb_guest_reading(g, true);
	nodelay_fd(fd);
}

void hb_gconn_free(struct hb_gconn *g)
{
	struct latch_http_sandbox *sb = g->sb;

	if (g->x)
		hb_exchange_end(g->x, LATCH_HTTP_END_GUEST_CUT);
	if (g->t)
		hb_tunnel_free(g->t, NULL);
	if (g->l)
		hb_local_free(g->l);
	if (g->spare) {
		evbuffer_free(g->spare->req);
		free(g->spare->meter_later);
		free(g->spare);
	}
	*g->pprev = g->next;
	if (g->next)
		g->next->pprev = g->pprev;
	sb->n_gconns--;
	event_free(g->rev); /* before the bufferevent closes the socket */
	bufferevent_free(g->bev);
	free(g->headbuf);
	free(g);
}

/*
 * A connection closed after an answer to a request whose body was not read
 * (a refusal from the head: 413, 503, 403...) lingers, as nginx's
 * lingering_close: the guest may still be sending the body, and a close with
 * bytes unread resets the connection, which can throw away the answer
 * before the guest has read it (RFC 9112, 9.6).  So the write side is shut
 * once the answer is out, and what comes is read and dropped until the guest
 * closes, LINGER_IDLE_MS passes without a byte, or LINGER_MAX_MS in all.
 */
#define LINGER_IDLE_MS 5000
#define LINGER_MAX_MS 30000

static void linger_read(evutil_socket_t fd, short what, void *arg)
{
	struct hb_gconn *g = arg;
	char buf[16384];
	ssize_t n = 0;

	if (!(what & EV_TIMEOUT) && (uint64_t)latch_now_ms() < g->linger_until) {
		for (int i = 0; i < 16; i++) { /* a turn of the loop drops at most this much, then others go */
			n = recv(fd, buf, sizeof(buf), 0);
			if (n <= 0)
				break;
		}
		if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
			return;
	}
	hb_gconn_free(g); /* the guest closed, went quiet, or had its time */
}

static void linger_or_free(struct hb_gconn *g)
{
	struct timeval tv = { LINGER_IDLE_MS / 1000, (LINGER_IDLE_MS % 1000) * 1000 };
	evutil_socket_t fd = bufferevent_getfd(g->bev);

	if (!g->linger || fd < 0) {
		hb_gconn_free(g);
		return;
	}
	event_del(g->rev);
	g->armed = g->reading = false;
	bufferevent_disable(g->bev, EV_READ | EV_WRITE);
	shutdown(fd, SHUT_WR); /* the guest sees the answer end */
	g->linger_until = latch_now_ms() + LINGER_MAX_MS;
	/* EV_PERSIST with a timeout: the timeout starts again at each read, an idle timeout */
	if (event_assign(g->rev, g->sb->h->base, fd, EV_READ | EV_PERSIST, linger_read, g) || event_add(g->rev, &tv))
		hb_gconn_free(g);
}

static void close_flushed(struct bufferevent *bev, void *arg)
{
	struct hb_gconn *g = arg;

	if (!evbuffer_get_length(bufferevent_get_output(bev)))
		linger_or_free(g);
}

void hb_gconn_close_when_flushed(struct hb_gconn *g)
{
	g->state = G_CLOSING;
	if (!evbuffer_get_length(bufferevent_get_output(g->bev))) {
		linger_or_free(g);
		return;
	}
	hb_guest_reading(g, false);
	bufferevent_setwatermark(g->bev, EV_WRITE, 0, 0);
	bufferevent_setcb(g->bev, NULL, close_flushed, guest_event, g);
	bufferevent_enable(g->bev, EV_WRITE);
}

/* The body of the current request, as http-parser decodes it, goes to the exchange. */
static int body_data(http_parser *p, const char *at, size_t len)
{
	struct hb_gconn *g = p->data;

	if (g->x)
		hb_exchange_body(g->x, at, len);
	else if (g->l)
		hb_local_body(g->l, at, len);
	return 0;
}

static int body_done(http_parser *p)
{
	struct hb_gconn *g = p->data;

	http_parser_pause(p, 1); /* a pipelined request waits in the input buffer */
	g->state = G_WAIT;
	return 0;
}

static const http_parser_settings body_settings = {
	.on_body = body_data,
	.on_message_complete = body_done,
};

/* Feed what the guest sent of the body to the parser; false when the connection is gone. */
static bool guest_body(struct hb_gconn *g)
{
	struct evbuffer *in = bufferevent_get_input(g->bev);

	while (g->state == G_BODY && evbuffer_get_length(in)) {
		struct evbuffer_iovec v;
		size_t n;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		g->parser.data = g;
		n = http_parser_execute(&g->parser, &body_settings, v.iov_base, v.iov_len);
		evbuffer_drain(in, n);
		if (g->x && hb_exchange_over_limit(g->x)) {
			struct hb_route *r = g->x->r;

			hb_exchange_end(g->x, LATCH_HTTP_END_ERROR);
			return hb_exchange_refuse_large(g, r);
		}
		if (g->x && hb_exchange_over_hold(g->x)) {
			hb_exchange_end(g->x, LATCH_HTTP_END_ERROR);
			return hb_exchange_refuse_held(g);
		}
		if (g->l && hb_local_over_limit(g->l))
			return hb_refuse(g, HB_LOCAL_BODY,
					 "latch: the request body is larger than this endpoint takes; "
					 "send a smaller one");
		if (HTTP_PARSER_ERRNO(&g->parser) == HPE_PAUSED) {
			http_parser_pause(&g->parser, 0);
			return g->x ? hb_exchange_body_done(g->x) : g->l ? hb_local_body_done(g) : true;
		}
		if (HTTP_PARSER_ERRNO(&g->parser) != HPE_OK) {
			/* a broken chunked body: the request can't be followed, and neither can the connection */
			if (g->x && !g->x->resp_started && g->x->req) {
				hb_exchange_end(g->x, LATCH_HTTP_END_ERROR);
				hb_refuse(g, HB_BAD_REQUEST, "latch: the request body's chunked framing is broken (%s)",
					  http_errno_name(HTTP_PARSER_ERRNO(&g->parser)));
			} else {
				hb_gconn_free(g);
			}
			return false;
		}
		/* backpressure: the exchange paused reading from the guest */
		if (!g->reading)
			break;
	}
	return true;
}

/*
 * A target in absolute form that names this listener, as a client sends it
 * when it takes HTTP_PROXY (the broker) for every URL, {{url}} included, and
 * ignores NO_PROXY: read as the path it carries (hb_target_own_origin; the
 * Host header is then not consulted, and the broker never reads it).  True:
 * hd's target is now that path, in origin form, and every check reads it so.
 */
static bool own_absolute_form(struct hb_gconn *g)
{
	struct hb_head *hd = &g->head;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	size_t skip;

	if (getsockname(bufferevent_getfd(g->bev), (struct sockaddr *)&ss, &sl) ||
	    !hb_target_own_origin(hd->target, hd->target_len, (const struct sockaddr *)&ss, &skip))
		return false;
	hd->target += skip;
	hd->target_len -= skip;
	return true;
}

/* Check 1's answer: the spelling REF names, and how to send the path instead. */
static bool refuse_spelling(struct hb_gconn *g, enum hb_refusal ref)
{
	return hb_refuse(g, ref, "latch: %s; send the path as the upstream should read it, without %s",
			 hb_refusal_reason(ref),
			 ref == HB_PATH_DOT	      ? "'.' or '..' segments" :
			 ref == HB_PATH_ENCODED_SEP   ? "%2e, %2f or %5c" :
			 ref == HB_PATH_BACKSLASH     ? "backslashes" :
			 ref == HB_PATH_DOUBLE	      ? "%25" :
			 ref == HB_PATH_EMPTY_SEGMENT ? "'//'" :
			 ref == HB_PATH_ENCODED_PLAIN ? "percent-encoded letters, digits or -._~" :
			 ref == HB_PATH_NON_ASCII     ? "percent-encoded bytes past ASCII (%80-%ff)" :
							"spaces, controls or other bytes outside RFC 3986");
}

/* Check 2, the method.  True when it refused, with hb_refuse()'s answer in *answer. */
static bool method_refused(struct hb_gconn *g, const struct hb_route *r, bool *answer)
{
	const struct hb_head *hd = &g->head;
	const struct hb_header *over;
	bool ok;

	if (!strcmp(hd->method, "TRACE")) {
		*answer = hb_refuse(g, HB_TRACE, "latch: TRACE is never forwarded (it would echo the key back)");
		return true;
	}
	/* the method and the path checked are the request line's: no header may have the upstream read others */
	over = hb_head_override(hd);
	if (over) {
		*answer = hb_refuse(
			g, HB_OVERRIDE,
			"latch: header %.*s would have the upstream read another method or URL than the "
			"broker checked; it is never forwarded: send the request with its own method and path",
			(int)over->name_len, over->name);
		return true;
	}
	/* no list: every method (TRACE is refused above; CONNECT never reaches a route) */
	ok = !r->n_methods;
	for (int i = 0; i < r->n_methods && !ok; i++)
		ok = !strcmp(r->methods[i], hd->method);
	if (ok)
		return false;

	char list[256] = "";

	for (int i = 0; i < r->n_methods; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", r->methods[i]);
	*answer = hb_refuse(g, HB_METHOD,
			    "latch: method %s is not allowed on credential %s (allowed: %s); add it to the "
			    "credential's methods in the kit",
			    hd->method, r->name, list[0] ? list : "none");
	return true;
}

/* Check 3, the path prefix on segment boundaries, of REST (the target past the route's name). */
static bool path_refused(struct hb_gconn *g, const struct hb_route *r, const char *rest, size_t rest_len, bool *answer)
{
	char path[2048];
	size_t plen = 0;
	bool ok = false;

	while (plen < rest_len && rest[plen] != '?')
		plen++;
	if (!plen) { /* "/echo" or "/echo?q": the upstream's root */
		rest = "/";
		plen = 1;
	}
	for (int i = 0; i < r->n_paths && !ok; i++)
		ok = hb_prefix_covers(r->paths[i], rest, plen);
	if (ok)
		return false;
	snprintf(path, sizeof(path), "%.*s", (int)(plen < 200 ? plen : 200), rest);
	*answer = hb_refuse(g, HB_PATH,
			    "latch: path %s is not under the paths of credential %s; add its prefix to the "
			    "credential's paths in the kit",
			    path, r->name);
	return true;
}

/* "x-api-key or Authorization (Bearer)": where target T takes the placeholder, for a refusal. */
static void forms_named(const struct hb_target *t, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s", t->header);

	for (int i = 0; i < t->n_also && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s%s%.*s%s", i + 1 == t->n_also ? " or " : ", ",
				      t->also[i].header, *t->also[i].scheme ? " (" : "",
				      (int)strcspn(t->also[i].scheme, " "), t->also[i].scheme,
				      *t->also[i].scheme ? ")" : "");
}

/* Check 4, the placeholder (and the secret it stands for). */
static bool placeholder_refused(struct hb_gconn *g, const struct hb_route *r, bool *answer)
{
	struct latch_http_sandbox *sb = g->sb;
	const struct hb_target *t = &r->targets[r->active];
	struct hb_ph_rule rule = { .header = t->header,
				   .scheme = t->scheme,
				   .placeholder = r->placeholder,
				   .placeholders = sb->placeholders,
				   .n_placeholders = sb->n_placeholders,
				   .prepared = &sb->ph_set,
				   .also = t->also,
				   .n_also = t->n_also };
	struct hb_ph_seen seen;
	enum hb_refusal ref;
	char forms[160];

	ref = hb_placeholder_check(&g->head, &rule, &seen);
	if (ref == HB_PH_WRONG && seen.presented) {
		for (struct latch_http_sandbox *o = sb->h->sandboxes; o; o = o->next)
			for (struct hb_route *orr = o->routes; o != sb && orr; orr = orr->next)
				if (strlen(orr->placeholder) == seen.presented_len &&
				    !CRYPTO_memcmp(orr->placeholder, seen.presented, seen.presented_len))
					ref = HB_PH_OTHER_SANDBOX;
	}
	forms_named(t, forms, sizeof(forms));
	switch (ref) {
	case HB_OK:
		g->ph_form = seen.form;
		break;
	case HB_PH_URL:
		*answer = hb_refuse(g, ref,
				    "latch: the placeholder was also sent in the URL; send it only in the %s header",
				    forms);
		return true;
	case HB_PH_OTHER_HEADER:
		if (seen.first)
			*answer =
				hb_refuse(g, ref,
					  "latch: the placeholder was sent in both %.*s and %.*s; credential %s takes "
					  "it in one of them",
					  (int)seen.first->name_len, seen.first->name, (int)seen.where->name_len,
					  seen.where->name, r->name);
		else
			*answer = hb_refuse(
				g, ref,
				"latch: the placeholder was sent in the %.*s header, not in %s; credential %s "
				"takes it only there (or as the Basic auth password)",
				(int)seen.where->name_len, seen.where->name, forms, r->name);
		return true;
	case HB_PH_OTHER_SANDBOX:
		*answer = hb_refuse(
			g, ref,
			"latch: that placeholder belongs to another sandbox; use this sandbox's own (latch env)");
		return true;
	default:
		*answer = hb_refuse(
			g, ref,
			"latch: credential %s needs this sandbox's placeholder in the %s header (%s<placeholder>) "
			"or as the Basic auth password",
			r->name, forms, t->scheme);
		return true;
	}
	if (!t->secret.mem && t->secret_var) {
		*answer = hb_refuse(g, HB_SECRET_MISSING,
				    "latch: %s was not set on the host when the sandbox started; set it and run "
				    "`latch up` again to hand it over",
				    t->secret_var);
		return true;
	}
	return false;
}

/* Checks 1-4 in their order; the first failing one answers. */
static bool dispatch(struct hb_gconn *g)
{
	struct latch_http_sandbox *sb = g->sb;
	const struct hb_head *hd = &g->head;
	enum hb_refusal ref;
	struct hb_route *r;
	char name[33];
	const char *rest;
	size_t rest_len;
	bool answer;

	sb->h->st.requests++;
	if (hd->connect) {
		return hb_tunnel_start(g);
	}
	if (hd->target_len && hd->target[0] != '/' && !own_absolute_form(g)) {
		return hb_refuse(g, HB_PROXY_PLAIN,
				 "latch: the broker does not proxy plain http; use https:// (CONNECT) for a host the "
				 "sandbox may reach, or a credential's {{url}}");
	}
	/* 1. the path's spelling (local endpoints too) */
	ref = hb_target_spelling(hd->target, hd->target_len);
	if (ref)
		return refuse_spelling(g, ref);
	/* /latch/...: latchd's own endpoints, never a credential route */
	if (hb_local_path(hd->target, hd->target_len))
		return hb_local_start(g);
	if (!hb_target_route(hd->target, hd->target_len, name, &rest, &rest_len) || !(r = hb_route_find(sb, name))) {
		return hb_refuse(
			g, HB_NO_ROUTE,
			"latch: no credential route here; use a credential's {{url}} (http://HOST:PORT/CREDENTIAL/...) "
			"as the kit's env gives it");
	}
	if (method_refused(g, r, &answer) || path_refused(g, r, rest, rest_len, &answer) ||
	    placeholder_refused(g, r, &answer))
		return answer;
	return hb_exchange_start(g, r);
}

/* Read and answer requests while there are complete heads; stop at an exchange in flight. */
static void guest_process(struct hb_gconn *g)
{
	struct latch_http *h = g->sb->h;
	struct evbuffer *in = bufferevent_get_input(g->bev);

	for (;;) {
		size_t len, head_len;
		struct hb_lines lines; /* where the scan found the head's lines, for the parse */
		enum hb_refusal ref;
		const char *buf;

		if (g->state == G_BODY) {
			if (!guest_body(g))
				return;
			/* the head waited for these body bytes: both leave in one record */
			if (g->x && g->x->u && g->x->u->send_pending)
				hb_u_send(g->x->u);
			if (g->state == G_BODY) {
				hb_guest_timer(g); /* the rest of the body: request_idle_ms */
				return;
			}
			continue;
		}
		if (g->state == G_TUNNEL) {
			hb_tunnel_guest_read(g);
			return;
		}
		if (g->state != G_HEAD)
			return;
		len = evbuffer_get_length(in);
		if (!len)
			return;
		if (len > h->o.head_max + 1)
			len = h->o.head_max + 1;
		buf = (const char *)evbuffer_pullup(in, len);
		hb_head_clear(&g->head);
		ref = hb_head_scan(buf, len, h->o.head_max, &head_len, &lines);
		if (!ref && !head_len) {
			hb_guest_timer(g); /* the rest of the head: request_idle_ms */
			return;
		}
		if (ref) {
			hb_refuse(g, ref,
				  "latch: %s; send an HTTP/1.1 request head with CRLF line ends, no folded lines "
				  "and token header names, under %u bytes",
				  hb_refusal_reason(ref), h->o.head_max);
			return;
		}
		memcpy(g->headbuf, buf, head_len);
		evbuffer_drain(in, head_len);
		ref = hb_head_parse(g->headbuf, head_len, &lines, &g->parser, &g->head);
		if (ref) {
			hb_refuse(g, ref,
				  "latch: %s; send one Content-Length or Transfer-Encoding: chunked, not both, "
				  "not twice",
				  hb_refusal_reason(ref));
			return;
		}
		hb_guest_idle(g, false);
		if (!dispatch(g))
			return; /* closed, or closing */
	}
}

void hb_gconn_resume(struct hb_gconn *g)
{
	if (g->close_after || !g->head.keep_alive) {
		hb_gconn_close_when_flushed(g);
		return;
	}
	g->state = G_HEAD;
	hb_head_clear(&g->head);
	hb_guest_idle(g, true);
	hb_guest_reading(g, true);
	if (evbuffer_get_length(bufferevent_get_input(g->bev)))
		guest_process(g);
}

/* The guest took what we queued: let the side that fills its output read again. */
static void guest_write(struct bufferevent *bev, void *arg)
{
	struct hb_gconn *g = arg;

	if (!evbuffer_get_length(bufferevent_get_output(bev)))
		bufferevent_disable(bev, EV_WRITE);

	if (g->x)
		hb_exchange_guest_drained(g->x);
	else if (g->t)
		hb_tunnel_guest_drained(g);
}

static void guest_event(struct bufferevent *bev, short what, void *arg)
{
	struct hb_gconn *g = arg;

	if (g->t && (what & BEV_EVENT_EOF)) {
		hb_tunnel_guest_eof(g); /* the tunnel half-closes towards the upstream */
		return;
	}
	hb_gconn_free(g);
}

/*
 * Reading the guest.  A bufferevent reads with two syscalls an event: it
 * asks FIONREAD for the size, then readv()s.  Here one recv() of at most
 * 16 KB (what a bufferevent read at most; level-triggered: what is left
 * fires again) goes to the stack, then into the input buffer in a chain of
 * its size: reserving 16 KB in the buffer cost a 16 KB chain each read,
 * past malloc's fast paths (callgrind: ~200 instructions a request more
 * than the copy).  The event is armed while the connection reads and is
 * not over its limit (read_limit()); its timeout is the idle timeout.
 */
#define GUEST_READ_MAX 16384

/*
 * How long the guest may leave the broker waiting, silent, now (0: no
 * bound): guest_idle_ms between requests; request_idle_ms once a head or a
 * body has begun (a guest that sends half of one and stalls held its
 * connection, and a metered body's bytes, for good); hello_ms for a
 * tunnel's ClientHello after the 200 (it held an upstream connection).
 * Each read starts it again (EV_PERSIST), so a slow guest that goes on
 * sending is served.
 */
static uint32_t guest_timeout_ms(const struct hb_gconn *g)
{
	const struct latch_http_opts *o = &g->sb->h->o;

	switch (g->state) {
	case G_HEAD:
		return evbuffer_get_length(bufferevent_get_input(g->bev)) ? o->request_idle_ms :
		       g->idle						  ? o->guest_idle_ms :
									    0;
	case G_BODY:
		return o->request_idle_ms;
	case G_TUNNEL:
		return g->t && hb_tunnel_waits_hello(g->t) ? o->hello_ms : 0;
	default:
		return 0;
	}
}

/* The read event's timeout as guest_timeout_ms() says, from now (a change of phase, or restart: an answer). */
static void guest_timer_set(struct hb_gconn *g, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	g->timer_ms = ms;
	if (ms)
		event_add(g->rev, &tv);
	else
		event_remove_timer(g->rev);
}

void hb_guest_timer(struct hb_gconn *g)
{
	uint32_t ms = guest_timeout_ms(g);

	if (g->armed && ms != g->timer_ms)
		guest_timer_set(g, ms);
}

/*
 * How much may wait unread in the input: read_max when set, buffer_max while a
 * request is in flight (G_WAIT: what the guest pipelines behind it is not
 * parsed until the answer is whole, so reading it all would let the guest
 * fill latchd's memory), else no bound (a head is bounded by head_max, a
 * body by the exchange's own backpressure).
 */
static size_t read_limit(const struct hb_gconn *g)
{
	if (g->read_max)
		return g->read_max;
	return g->state == G_WAIT ? g->sb->h->o.buffer_max : 0;
}

static void guest_arm(struct hb_gconn *g)
{
	size_t limit = read_limit(g);
	bool want = g->reading && !(limit && evbuffer_get_length(bufferevent_get_input(g->bev)) >= limit);

	if (want == g->armed)
		return;
	g->armed = want;
	if (want) {
		uint32_t ms = guest_timeout_ms(g);
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

		g->timer_ms = ms;
		event_add(g->rev, ms ? &tv : NULL);
	} else {
		event_remove_timer(g->rev); /* event_del() alone keeps it, for the next event_add(NULL) */
		event_del(g->rev);
		g->read_later = false;
	}
}

void hb_guest_reading(struct hb_gconn *g, bool on)
{
	g->reading = on;
	guest_arm(g);
}

bool hb_guest_is_reading(const struct hb_gconn *g)
{
	return g->reading;
}

void hb_guest_idle(struct hb_gconn *g, bool on)
{
	g->idle = on;
	if (g->armed) /* from now, as a bufferevent's read timeout */
		guest_timer_set(g, guest_timeout_ms(g));
}

void hb_guest_read_max(struct hb_gconn *g, size_t max)
{
	g->read_max = max;
	guest_arm(g);
}

void hb_guest_read_later(struct hb_gconn *g)
{
	g->read_later = true;
	event_active(g->rev, EV_READ, 0);
}

static void guest_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct hb_gconn *g = arg;
	struct evbuffer *in = bufferevent_get_input(g->bev);
	size_t want = GUEST_READ_MAX, len = evbuffer_get_length(in), limit = read_limit(g);
	char buf[GUEST_READ_MAX];
	ssize_t n;

	if (g->read_later) {
		g->read_later = false;
		guest_process(g);
		return;
	}
	if (what & EV_TIMEOUT) {
		g->sb->h->st.timeouts++;
		hb_guest_reading(g, false);
		guest_event(g->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, g);
		return;
	}
	if (limit && len >= limit) { /* the limit came down while it was armed (a request went in flight) */
		guest_arm(g);
		return;
	}
	if (limit && want > limit - len)
		want = limit - len;
	n = recv(fd, buf, want, 0);
	if (n > 0) {
		/* a bufferevent keeps its input's add end frozen outside its own read callback */
		evbuffer_unfreeze(in, 0);
		if (evbuffer_add(in, buf, n)) {
			n = -1;
			errno = ENOMEM;
		}
		evbuffer_freeze(in, 0);
	}
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) { /* what guest_event() hears from a bufferevent: the end, or an error */
		hb_guest_reading(g, false);
		guest_event(g->bev, BEV_EVENT_READING | (n ? BEV_EVENT_ERROR : BEV_EVENT_EOF), g);
		return;
	}
	guest_arm(g); /* over its limit: suspended until hb_guest_read_max() lifts it or the exchange ends */
	guest_process(g);
}
