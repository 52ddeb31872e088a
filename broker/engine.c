// SPDX-License-Identifier: GPL-2.0-only
/*
 * engine.c - the broker engine: sandboxes, their listeners and routes,
 * resolution, the audit and the refusals (guest.c reads the requests).

 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/listener.h>
#include <jansson.h>
#include <openssl/crypto.h>

#include "broker/engine.h"

const char *latch_http_end_name(enum latch_http_end e)
{
	static const char *names[] = { "complete", "guest-cut", "upstream-cut", "error" };

	return (unsigned)e < 4 ? names[e] : "error";
}

/*
 * connect_ms bounds the whole of a connect, however many addresses a name
 * has: an address that drops packets would otherwise cost all of it, and
 * eight such addresses eight times as much.  While other addresses remain,
 * one gets half of what is left (curl's rule), so that the last still has
 * time to answer.
 */
uint32_t hb_connect_share(uint64_t *until, bool first, bool more, uint32_t connect_ms)
{
	uint64_t now = latch_now_ms(), left;

	if (first)
		*until = now + connect_ms;
	left = *until > now ? *until - now : 0;
	return (uint32_t)(more ? left / 2 : left);
}

/* ------------------------------------------------------------ the engine */

void latch_http_set_metered_limits(struct latch_http *h, uint32_t body_max, uint32_t hold_max)
{
	h->o.metered_body_max = body_max ? body_max : 32u << 20;
	h->o.metered_hold_max = hold_max ? hold_max : 64u << 20;
}

/* nginx waits 60 s (client_header_timeout, client_body_timeout); a guest on a host's link needs less */
void latch_http_set_timeouts(struct latch_http *h, uint32_t request_idle_ms, uint32_t hello_ms)
{
	h->o.request_idle_ms = request_idle_ms ? request_idle_ms : 30000;
	h->o.hello_ms = hello_ms ? hello_ms : 10000;
}

struct latch_http *latch_http_new(struct event_base *base, const struct latch_http_opts *o, char *err, size_t errlen)
{
	struct latch_http *h = calloc(1, sizeof(*h));

	if (!h) {
		latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	h->base = base;
	if (o)
		h->o = *o;
	if (!h->o.head_max)
		h->o.head_max = 16384;
	if (!h->o.buffer_max)
		h->o.buffer_max = 65536;
	if (!h->o.guest_idle_ms)
		h->o.guest_idle_ms = 60000;
	if (!h->o.connect_ms)
		h->o.connect_ms = 10000;
	if (!h->o.upstream_idle_ms)
		h->o.upstream_idle_ms = 300000;
	if (!h->o.pool_idle_ms)
		h->o.pool_idle_ms = 60000;
	if (!h->o.pool_max)
		h->o.pool_max = 32;
	if (!h->o.conns_max)
		h->o.conns_max = 256;
	latch_http_set_metered_limits(h, h->o.metered_body_max, h->o.metered_hold_max);
	latch_http_set_timeouts(h, h->o.request_idle_ms, h->o.hello_ms);
	return h;
}

void latch_http_free(struct latch_http *h)
{
	if (!h)
		return;
	while (h->sandboxes)
		latch_http_sandbox_free(h->sandboxes);
	hb_ctx_free_all(h);
	if (h->dns)
		evdns_base_free(h->dns, 1);
	free(h);
}

void latch_http_stats(const struct latch_http *h, struct latch_http_stats *s)
{
	*s = h->st;
	s->guest_conns = s->upstream_conns = s->idle_upstream_conns = 0;
	for (struct latch_http_sandbox *sb = h->sandboxes; sb; sb = sb->next) {
		s->guest_conns += sb->n_gconns;
		for (struct hb_route *r = sb->routes; r; r = r->next)
			for (int i = 0; i < r->n_targets; i++) {
				s->idle_upstream_conns += r->targets[i].n_idle;
				s->upstream_conns += r->targets[i].n_conns;
			}
	}
}

/* ------------------------------------------------------------ resolution */

struct hb_dns_req {
	struct event_base *base;
	latch_http_resolved_cb cb;
	void *arg;
	char name[254];
	struct latch_addr addrs[8];
	int n;
	const char *why;
};

static void dns_deliver(evutil_socket_t fd, short what, void *arg)
{
	struct hb_dns_req *q = arg;

	q->cb(q->arg, q->name, q->addrs, q->n, 60, q->why);
	free(q);
}

static void dns_answer(int result, struct evutil_addrinfo *res, void *arg)
{
	struct hb_dns_req *q = arg;

	q->n = 0;
	for (struct evutil_addrinfo *ai = res; ai && q->n < 8; ai = ai->ai_next) {
		struct latch_addr *a = &q->addrs[q->n];

		if (ai->ai_family == AF_INET) {
			a->family = AF_INET;
			a->v4 = ((struct sockaddr_in *)ai->ai_addr)->sin_addr;
		} else if (ai->ai_family == AF_INET6) {
			a->family = AF_INET6;
			a->v6 = ((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		} else {
			continue;
		}
		q->n++;
	}
	if (res)
		evutil_freeaddrinfo(res);
	if (!q->n) {
		q->n = -1;
		q->why = result == EVUTIL_EAI_NONAME ? "nxdomain" : "no-address";
	}
	/* evdns may answer inside evdns_getaddrinfo(); the contract is "later, from the loop" */
	if (event_base_once(q->base, -1, EV_TIMEOUT, dns_deliver, q, NULL)) {
		q->n = -1;
		q->why = "unreachable";
		dns_deliver(-1, 0, q);
	}
}

int hb_resolve(struct latch_http_sandbox *sb, const char *name, latch_http_resolved_cb cb, void *arg)
{
	struct latch_http *h = sb->h;
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct hb_dns_req *q;

	if (sb->o.resolve)
		return sb->o.resolve(sb->o.arg, name, cb, arg);
	if (!h->dns) {
		h->dns = evdns_base_new(h->base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
		if (!h->dns)
			return -ENOMEM;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->cb = cb;
	q->arg = arg;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->base = h->base;
	evdns_getaddrinfo(h->dns, name, NULL, &hints, dns_answer, q);
	return 0;
}

/* ------------------------------------------------------------ sandboxes */

/* One listening socket on A, port PORT; its fd or -errno with a line in err. */
static int listen_on(const struct latch_http_sandbox_opts *o, const struct latch_addr *a, char *err, size_t errlen)
{
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa = { 0 };
	socklen_t salen;
	int fd, one = 1, e;
	char text[INET6_ADDRSTRLEN];

	if (a->family == AF_INET) {
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons(o->port);
		sa.v4.sin_addr = a->v4;
		salen = sizeof(sa.v4);
	} else {
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons(o->port);
		sa.v6.sin6_addr = a->v6;
		salen = sizeof(sa.v6);
	}
	fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && !setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) &&
	    !setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof(one)) &&
	    (a->family != AF_INET6 || !setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) &&
	    !bind(fd, (struct sockaddr *)&sa, salen) && !listen(fd, 128))
		return fd;
	e = errno;
	if (fd >= 0)
		close(fd);
	latch_addr_format(a, text, sizeof(text));
	return latch_errf(err, errlen, -e, "broker: sandbox %s: cannot listen on %s port %u: %s", o->name, text,
			  o->port, strerror(e));
}

struct latch_http_sandbox *latch_http_sandbox_new(struct latch_http *h, const struct latch_http_sandbox_opts *o,
						  char *err, size_t errlen)
{
	struct latch_http_sandbox *sb;
	int ret = 0;

	if (!o->name || !o->port || o->n_guests < 1 || o->n_guests > LATCH_HTTP_GUESTS_MAX || o->n_listen < 1 ||
	    o->n_listen > LATCH_HTTP_LISTEN_MAX) {
		latch_errf(err, errlen, -EINVAL,
			   "broker: a sandbox needs a name, a port, 1-%d listen and 1-%d guest "
			   "addresses",
			   LATCH_HTTP_LISTEN_MAX, LATCH_HTTP_GUESTS_MAX);
		errno = EINVAL;
		return NULL;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb || !(sb->name = strdup(o->name))) {
		free(sb);
		latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	sb->h = h;
	sb->o = *o;
	sb->o.name = sb->name;
	for (int i = 0; i < o->n_listen && !ret; i++) {
		int fd = listen_on(o, &o->listen[i], err, errlen);

		if (fd < 0) {
			ret = fd;
			break;
		}
		sb->listeners[i] = evconnlistener_new(h->base, hb_on_accept, sb, LEV_OPT_CLOSE_ON_FREE, -1, fd);
		if (!sb->listeners[i]) {
			close(fd);
			ret = latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
		}
	}
	if (ret) {
		for (int i = 0; i < LATCH_HTTP_LISTEN_MAX; i++)
			if (sb->listeners[i])
				evconnlistener_free(sb->listeners[i]);
		free(sb->name);
		free(sb);
		errno = -ret;
		return NULL;
	}
	sb->next = h->sandboxes;
	h->sandboxes = sb;
	return sb;
}

static void route_free(struct hb_route *r);

void latch_http_sandbox_free(struct latch_http_sandbox *sb)
{
	struct latch_http_sandbox **pp;

	if (!sb)
		return;
	for (int i = 0; i < LATCH_HTTP_LISTEN_MAX; i++)
		if (sb->listeners[i])
			evconnlistener_free(sb->listeners[i]);
	while (sb->gconns)
		hb_gconn_free(sb->gconns);
	while (sb->routes) {
		struct hb_route *r = sb->routes;

		sb->routes = r->next;
		route_free(r);
	}
	for (pp = &sb->h->sandboxes; *pp; pp = &(*pp)->next)
		if (*pp == sb) {
			*pp = sb->next;
			break;
		}
	free(sb->name);
	free(sb);
}

/* ------------------------------------------------------------ routes */

static void placeholders_rebuild(struct latch_http_sandbox *sb)
{
	sb->n_placeholders = 0;
	for (struct hb_route *r = sb->routes; r && sb->n_placeholders < 64; r = r->next)
		sb->placeholders[sb->n_placeholders++] = r->placeholder;
	hb_ph_set_prep(&sb->ph_set, sb->placeholders, sb->n_placeholders);
}

static void route_free(struct hb_route *r)
{
	if (!r)
		return;
	/* exchanges still resolving or waiting on this route lose their guest connection with it */
	for (struct hb_gconn *g = r->sb->gconns, *next; g; g = next) {
		next = g->next;
		if (g->x && g->x->r == r) {
			hb_exchange_end(g->x, LATCH_HTTP_END_ERROR);
			hb_gconn_free(g);
		}
	}
	for (int i = 0; i < r->n_targets; i++)
		hb_target_fini(&r->targets[i]);
	for (int i = 0; i < r->n_methods; i++)
		free(r->methods[i]);
	for (int i = 0; i < r->n_paths; i++)
		free(r->paths[i]);
	free(r->placeholder);
	if (r->meter && r->meter->release) /* every exchange of the route has had its end() */
		r->meter->release(r->meter->arg);
	free(r);
}

static bool route_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 1 || n > LATCH_HTTP_ROUTE_NAME_MAX || !strcmp(s, "latch")) /* /latch/ is the local endpoints' */
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

static int route_add(struct latch_http_sandbox *sb, const struct latch_http_route *in, bool *meter_taken, char *err,
		     size_t errlen);

int latch_http_route_add(struct latch_http_sandbox *sb, const struct latch_http_route *in, char *err, size_t errlen)
{
	bool taken = false;
	int ret = route_add(sb, in, &taken, err, errlen);

	/* refused before a route took the meter: its arg is done with now (a route releases it when it goes) */
	if (ret && !taken && in->meter && in->meter->release)
		in->meter->release(in->meter->arg);
	return ret;
}

static int route_add(struct latch_http_sandbox *sb, const struct latch_http_route *in, bool *meter_taken, char *err,
		     size_t errlen)
{
	struct hb_route *r, **pp;
	int ret;

	if (!route_name_ok(in->name))
		return latch_errf(err, errlen, -EINVAL,
				  "route \"%s\": a name is 1-%d characters of a-z, 0-9 and '-', and not \"latch\"",
				  in->name ? in->name : "", LATCH_HTTP_ROUTE_NAME_MAX);
	if (!in->placeholder || strlen(in->placeholder) < 16 || strlen(in->placeholder) > 100 ||
	    strspn(in->placeholder, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(in->placeholder))
		return latch_errf(err, errlen, -EINVAL,
				  "route %s: placeholder must be 16-100 characters of a-z, 0-9 and '-' "
				  "(latch-placeholder-<hex>)",
				  in->name);
	if (in->n_upstreams < 1 || in->n_upstreams > LATCH_HTTP_UPSTREAMS_MAX || in->n_methods < 0 ||
	    in->n_methods > LATCH_HTTP_METHODS_MAX || in->n_paths < 0 || in->n_paths > LATCH_HTTP_PATHS_MAX)
		return latch_errf(err, errlen, -EINVAL, "route %s: 1-%d upstreams, at most %d methods and %d paths",
				  in->name, LATCH_HTTP_UPSTREAMS_MAX, LATCH_HTTP_METHODS_MAX, LATCH_HTTP_PATHS_MAX);
	for (int i = 0; i < in->n_methods; i++) {
		const char *m = in->methods[i];

		if (!m || !*m || strspn(m, "ABCDEFGHIJKLMNOPQRSTUVWXYZ-") != strlen(m) || !strcmp(m, "TRACE") ||
		    !strcmp(m, "CONNECT"))
			return latch_errf(err, errlen, -EINVAL,
					  "route %s: method \"%s\" must be an upper-case token other than TRACE and "
					  "CONNECT",
					  in->name, m ? m : "");
	}
	for (int i = 0; i < in->n_paths; i++) {
		const char *p = in->paths[i];

		if (!p || p[0] != '/' || hb_target_spelling(p, strlen(p)) != HB_OK || strchr(p, '?') || strchr(p, '%'))
			return latch_errf(err, errlen, -EINVAL,
					  "route %s: path prefix \"%s\" must be absolute, without '.', '..', '//', "
					  "'%%' or '?'",
					  in->name, p ? p : "");
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
	r->sb = sb;
	snprintf(r->name, sizeof(r->name), "%s", in->name);
	if (in->meter) {
		r->meter_copy = *in->meter;
		r->meter = &r->meter_copy;
		*meter_taken = true;
	}
	r->placeholder = strdup(in->placeholder);
	ret = r->placeholder ? 0 : -ENOMEM;
	for (int i = 0; !ret && i < in->n_methods; i++, r->n_methods++)
		if (!(r->methods[i] = strdup(in->methods[i])))
			ret = -ENOMEM;
	for (int i = 0; !ret && i < in->n_paths; i++, r->n_paths++)
		if (!(r->paths[i] = strdup(in->paths[i])))
			ret = -ENOMEM;
	if (ret)
		latch_errf(err, errlen, ret, "broker: out of memory");
	for (int i = 0; !ret && i < in->n_upstreams; i++) {
		r->targets[i].route = r;
		ret = hb_target_init(sb->h, &r->targets[i], &in->upstreams[i], err, errlen);
		r->n_targets = i + 1;
		for (int k = 0; !ret && k < i; k++)
			if (!strcmp(r->targets[k].name, r->targets[i].name))
				ret = latch_errf(err, errlen, -EINVAL, "route %s: two upstreams named \"%s\"", in->name,
						 r->targets[i].name);
	}
	if (ret) {
		route_free(r);
		return ret;
	}
	for (pp = &sb->routes; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, r->name)) {
			struct hb_route *old = *pp;

			r->next = old->next;
			*pp = r;
			route_free(old);
			placeholders_rebuild(sb);
			return 0;
		}
	r->next = sb->routes;
	sb->routes = r;
	placeholders_rebuild(sb);
	return 0;
}

int latch_http_route_remove(struct latch_http_sandbox *sb, const char *name)
{
	for (struct hb_route **pp = &sb->routes; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->name, name)) {
			struct hb_route *r = *pp;

			*pp = r->next;
			/* guest connections mid-exchange on this route lose it with their upstream (route_free) */
			route_free(r);
			placeholders_rebuild(sb);
			return 0;
		}
	return -ENOENT;
}

struct hb_route *hb_route_find(struct latch_http_sandbox *sb, const char *name)
{
	for (struct hb_route *r = sb->routes; r; r = r->next)
		if (!strcmp(r->name, name))
			return r;
	return NULL;
}

int latch_http_route_switch(struct latch_http_sandbox *sb, const char *route, const char *upstream, char *err,
			    size_t errlen)
{
	struct hb_route *r = hb_route_find(sb, route);

	if (!r)
		return latch_errf(err, errlen, -ENOENT, "sandbox %s has no credential %s", sb->name, route);
	for (int i = 0; i < r->n_targets; i++)
		if (!strcmp(r->targets[i].name, upstream ? upstream : "")) {
			r->active = i;
			return 0;
		}
	return latch_errf(err, errlen, -ENOENT, "credential %s has no upstream named \"%s\"", route,
			  upstream ? upstream : "");
}

/* ------------------------------------------------------------ audit and refusals */

void hb_audit(struct hb_gconn *g, const char *kind, const struct hb_route *r, const struct hb_target *t,
	      const char *host, uint16_t port, const char *method, const char *path, int status, const char *reason,
	      const char *end, uint64_t in, uint64_t out)
{
	struct latch_http_sandbox *sb = g->sb;
	struct latch_http_event ev = {
		.sandbox = sb->name,
		.kind = kind,
		.route = r ? r->name : NULL,
		.upstream = t && t->name[0] ? t->name : NULL,
		.host = t ? t->host : host,
		.port = t ? t->port : port,
		.method = method,
		.path = path,
		.status = status,
		.reason = reason,
		.end = end,
		.bytes_in = in,
		.bytes_out = out,
		.peer = &g->peer,
	};

	if (sb->o.audit)
		sb->o.audit(sb->o.arg, &ev);
}

json_t *latch_http_event_fields(const struct latch_http_event *ev)
{
	const char *const opt[][2] = { { "route", ev->route },	 { "upstream", ev->upstream }, { "host", ev->host },
				       { "method", ev->method }, { "path", ev->path },	       { "end", ev->end },
				       { "why", ev->reason } };
	char peer[INET6_ADDRSTRLEN] = "";
	json_t *f;

	if (ev->peer)
		latch_addr_format(ev->peer, peer, sizeof(peer));
	f = json_pack("{s:i, s:I, s:I, s:s}", "status", ev->status, "bytes_in", (json_int_t)ev->bytes_in, "bytes_out",
		      (json_int_t)ev->bytes_out, "peer", peer);
	for (size_t i = 0; f && i < sizeof(opt) / sizeof(opt[0]); i++)
		if (opt[i][1])
			json_object_set_new(f, opt[i][0], json_string(opt[i][1]));
	if (f && ev->port)
		json_object_set_new(f, "port", json_integer(ev->port));
	return f;
}

/* The path of the current request (the upstream's, when it names a route) without its query string. */
static const char *head_path(struct hb_gconn *g, const char *rest, char *buf, size_t len)
{
	const struct hb_head *hd = &g->head;
	const char *p = rest ? rest : hd->target;
	size_t n = 0, max;

	if (!hd->target)
		return NULL;
	max = hd->target_len - (p - hd->target);
	while (n < max && p[n] != '?')
		n++;
	if (rest && !n) {
		p = "/";
		n = 1;
	}
	if (n >= len)
		n = len - 1;
	memcpy(buf, p, n);
	buf[n] = 0;
	/* the audit log is text: bytes a refused path may carry are shown as '?' */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] >= 0x7f)
			buf[i] = '?';
	return buf;
}

const char *hb_status_text(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Content Too Large";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	}
	return "Refused";
}

/*
 * Answer the current request with REFUSAL: an ordinary response whose body
 * is one `latch:` line.  The connection stays when the request was read to
 * its end; it is closed when bytes of it are still unread, or when the
 * head could not be read at all.
 */
bool hb_refuse(struct hb_gconn *g, enum hb_refusal refusal, const char *fmt, ...)
{
	struct latch_http_sandbox *sb = g->sb;
	int status = hb_refusal_status(refusal);
	char line[768], path[512];
	struct evbuffer *out = bufferevent_get_output(g->bev);
	struct hb_route *r = NULL;
	char name[33];
	const char *rest;
	size_t rest_len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	line[n] = 0;
	sb->h->st.refused++;
	if (g->head.target && g->head.target[0] == '/' &&
	    hb_target_route(g->head.target, g->head.target_len, name, &rest, &rest_len))
		r = hb_route_find(sb, name);
	hb_audit(g, "refused", r, r ? &r->targets[r->active] : NULL, NULL, 0, g->head.method[0] ? g->head.method : NULL,
		 head_path(g, r ? rest : NULL, path, sizeof(path)), status, hb_refusal_reason(refusal), NULL, 0, 0);
	if (status == 0) { /* a tunnel past its 200: nothing to answer with but the cut */
		hb_gconn_free(g);
		return false;
	}
	/* anything of the request still unread, or a head we could not read, ends the connection, lingering */
	g->linger = status == 400 || status == 431 || g->state == G_BODY ||
		    (g->state == G_HEAD && (!g->head.target || g->head.chunked || g->head.content_length > 0));
	if (g->linger || g->head.connect || !g->head.keep_alive)
		g->close_after = true;
	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
			    "Cache-Control: no-store\r\n%s%s%s\r\n",
			    status, hb_status_text(status), n,
			    refusal == HB_PH_MISSING ? "WWW-Authenticate: Basic realm=\"latch broker\"\r\n" : "",
			    refusal == HB_METERED_HELD ? "Retry-After: 1\r\n" : "",
			    g->close_after ? "Connection: close\r\n" : "");
	evbuffer_add(out, line, n);
	if (g->close_after) {
		hb_gconn_close_when_flushed(g);
		return false;
	}
	hb_guest_flush(g);
	g->state = G_HEAD;
	return true;
}

/*
 * Write what is queued for the guest now, from the callback that queued it.
 * The guest's write event is enabled only while bytes are left over: a
 * bufferevent writes from its event, which costs two epoll_ctl calls and a
 * loop turn for every response.
 */
void hb_guest_flush(struct hb_gconn *g)
{
	struct evbuffer *out = bufferevent_get_output(g->bev);

	if (!evbuffer_get_length(out) || (bufferevent_get_enabled(g->bev) & EV_WRITE))
		return;
	/* a bufferevent keeps its output's drain end frozen outside its own write callback */
	evbuffer_unfreeze(out, 1);
	evbuffer_write(out, bufferevent_getfd(g->bev));
	evbuffer_freeze(out, 1);
	if (evbuffer_get_length(out))
		bufferevent_enable(g->bev, EV_WRITE);
}

void hb_wipe_drain(struct evbuffer *in, size_t n)
{
	struct evbuffer_iovec v;

	while (n && evbuffer_peek(in, -1, NULL, &v, 1) == 1) {
		size_t m = v.iov_len < n ? v.iov_len : n;

		explicit_bzero(v.iov_base, m);
		evbuffer_drain(in, m);
		n -= m;
	}
}
