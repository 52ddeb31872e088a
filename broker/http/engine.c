// SPDX-License-Identifier: GPL-2.0-only
/*
 * engine.c - the broker engine: sandboxes, their listeners and routes, the
 * guest connections, and the checks a request goes through in their order.
 *
 * A guest connection reads one request head at a time (keep-alive; a
 * pipelined request waits in the input buffer until the previous response
 * is done), refuses it with an ordinary HTTP response whose body is one
 * `latch:` line, or hands it to upstream.c (a route) or tunnel.c (CONNECT).
 * A refusal keeps the connection when nothing of the request is left
 * unread, and closes it otherwise (a body we did not read, a head we could
 * not read).
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
#include <openssl/crypto.h>

#include "broker/http/engine.h"

const char *latch_http_end_name(enum latch_http_end e)
{
	static const char *names[] = { "complete", "guest-cut", "upstream-cut", "error" };

	return (unsigned)e < 4 ? names[e] : "error";
}

uint64_t hb_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ the engine */

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

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg);

struct latch_http_sandbox *latch_http_sandbox_new(struct latch_http *h, const struct latch_http_sandbox_opts *o,
						  char *err, size_t errlen)
{
	struct latch_http_sandbox *sb;
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa = { 0 };
	socklen_t salen;
	int fd, one = 1;

	if (!o->name || !o->port || o->n_guests < 1 || o->n_guests > LATCH_HTTP_GUESTS_MAX) {
		latch_errf(err, errlen, -EINVAL, "broker: a sandbox needs a name, a port and 1-%d guest addresses",
			   LATCH_HTTP_GUESTS_MAX);
		errno = EINVAL;
		return NULL;
	}
	if (o->listen.family == AF_INET) {
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons(o->port);
		sa.v4.sin_addr = o->listen.v4;
		salen = sizeof(sa.v4);
	} else {
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons(o->port);
		sa.v6.sin6_addr = o->listen.v6;
		salen = sizeof(sa.v6);
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
	fd = socket(o->listen.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof(one)) || bind(fd, (struct sockaddr *)&sa, salen) ||
	    listen(fd, 128)) {
		char a[INET6_ADDRSTRLEN];
		int e = errno;

		latch_addr_format(&o->listen, a, sizeof(a));
		latch_errf(err, errlen, -e, "broker: sandbox %s: cannot listen on %s port %u: %s", o->name, a, o->port,
			   strerror(e));
		if (fd >= 0)
			close(fd);
		free(sb->name);
		free(sb);
		errno = e;
		return NULL;
	}
	sb->listener = evconnlistener_new(h->base, on_accept, sb, LEV_OPT_CLOSE_ON_FREE, -1, fd);
	if (!sb->listener) {
		close(fd);
		free(sb->name);
		free(sb);
		latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
		errno = ENOMEM;
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
	evconnlistener_free(sb->listener);
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
	free(r);
}

static bool route_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 1 || n > LATCH_HTTP_ROUTE_NAME_MAX)
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

int latch_http_route_add(struct latch_http_sandbox *sb, const struct latch_http_route *in, char *err, size_t errlen)
{
	struct hb_route *r, **pp;
	int ret;

	if (!route_name_ok(in->name))
		return latch_errf(err, errlen, -EINVAL, "route \"%s\": a name is 1-%d characters of a-z, 0-9 and '-'",
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

		if (!p || p[0] != '/' || hb_target_spelling(p, strlen(p)) != HB_OK || strchr(p, '?') ||
		    strchr(p, '%'))
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
	r->meter = in->meter;
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

static struct hb_route *route_find(struct latch_http_sandbox *sb, const char *name)
{
	for (struct hb_route *r = sb->routes; r; r = r->next)
		if (!strcmp(r->name, name))
			return r;
	return NULL;
}

int latch_http_route_switch(struct latch_http_sandbox *sb, const char *route, const char *upstream, char *err,
			    size_t errlen)
{
	struct hb_route *r = route_find(sb, route);

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

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 413: return "Content Too Large";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 504: return "Gateway Timeout";
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
		r = route_find(sb, name);
	hb_audit(g, "refused", r, r ? &r->targets[r->active] : NULL, NULL, 0, g->head.method[0] ? g->head.method : NULL,
		 head_path(g, r ? rest : NULL, path, sizeof(path)), status, hb_refusal_reason(refusal), NULL, 0, 0);
	if (status == 0) { /* a tunnel past its 200: nothing to answer with but the cut */
		hb_gconn_free(g);
		return false;
	}
	/* anything of the request still unread, or a head we could not read, ends the connection */
	bool unread = g->state == G_BODY ||
		      (g->state == G_HEAD && (!g->head.target || g->head.chunked || g->head.content_length > 0));

	if (status == 400 || status == 431 || unread || g->head.connect || !g->head.keep_alive)
		g->close_after = true;
	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
			    "Cache-Control: no-store\r\n%s%s\r\n",
			    status, status_text(status), n,
			    refusal == HB_PH_MISSING ? "WWW-Authenticate: Basic realm=\"latch broker\"\r\n" : "",
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

/* ------------------------------------------------------------ guest connections */

static void guest_read(struct bufferevent *bev, void *arg);
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

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct latch_http_sandbox *sb = arg;
	struct latch_http *h = sb->h;
	struct hb_gconn *g;
	struct timeval idle = { h->o.guest_idle_ms / 1000, (h->o.guest_idle_ms % 1000) * 1000 };

	h->st.accepted++;
	if (sb->n_gconns >= h->o.conns_max || !(g = calloc(1, sizeof(*g)))) {
		close(fd);
		return;
	}
	g->headbuf = malloc(h->o.head_max);
	g->bev = bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!g->headbuf || !g->bev) {
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
	bufferevent_setcb(g->bev, guest_read, guest_write, guest_event, g);
	bufferevent_set_timeouts(g->bev, &idle, NULL);
	if (!is_guest(sb, &g->peer)) {
		char a[INET6_ADDRSTRLEN];

		latch_addr_format(&g->peer, a, sizeof(a));
		hb_refuse(g, HB_NOT_GUEST, "latch: this broker serves only sandbox %s's guest, not %s", sb->name, a);
		return;
	}
	bufferevent_disable(g->bev, EV_WRITE); /* enabled only while hb_guest_flush() left bytes */
	bufferevent_enable(g->bev, EV_READ);
	nodelay_fd(fd);
}

void hb_gconn_free(struct hb_gconn *g)
{
	struct latch_http_sandbox *sb = g->sb;

	if (g->x)
		hb_exchange_end(g->x, LATCH_HTTP_END_GUEST_CUT);
	if (g->t)
		hb_tunnel_free(g->t, NULL);
	*g->pprev = g->next;
	if (g->next)
		g->next->pprev = g->pprev;
	sb->n_gconns--;
	bufferevent_free(g->bev);
	free(g->headbuf);
	free(g);
}

static void close_flushed(struct bufferevent *bev, void *arg)
{
	struct hb_gconn *g = arg;

	if (!evbuffer_get_length(bufferevent_get_output(bev)))
		hb_gconn_free(g);
}

void hb_gconn_close_when_flushed(struct hb_gconn *g)
{
	g->state = G_CLOSING;
	if (!evbuffer_get_length(bufferevent_get_output(g->bev))) {
		hb_gconn_free(g);
		return;
	}
	bufferevent_disable(g->bev, EV_READ);
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
			hb_exchange_end(g->x, LATCH_HTTP_END_ERROR);
			return hb_refuse(g, HB_BODY_TOO_LARGE, "latch: this metered request's body is larger than the "
					 "meter's body_max; send a smaller request");
		}
		if (HTTP_PARSER_ERRNO(&g->parser) == HPE_PAUSED) {
			http_parser_pause(&g->parser, 0);
			return g->x ? hb_exchange_body_done(g->x) : true;
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
		if (!(bufferevent_get_enabled(g->bev) & EV_READ))
			break;
	}
	return true;
}

/* Checks 1-4 in their order; the first failing one answers. */
static bool dispatch(struct hb_gconn *g)
{
	struct latch_http_sandbox *sb = g->sb;
	const struct hb_head *hd = &g->head;
	enum hb_refusal ref;
	struct hb_route *r;
	char name[33], path[2048];
	const char *rest, *presented;
	size_t rest_len, presented_len, plen = 0;
	bool ok = false;

	sb->h->st.requests++;
	if (hd->connect) {
		return hb_tunnel_start(g);
	}
	if (hd->target_len && hd->target[0] != '/') {
		return hb_refuse(g, HB_PROXY_PLAIN,
			  "latch: the broker does not proxy plain http; use https:// (CONNECT) for a host the "
			  "sandbox may reach, or a credential's {{url}}");
	}
	/* 1. the path's spelling */
	ref = hb_target_spelling(hd->target, hd->target_len);
	if (ref) {
		return hb_refuse(g, ref, "latch: %s; send the path as the upstream should read it, without %s", hb_refusal_reason(ref),
			  ref == HB_PATH_DOT			? "'.' or '..' segments"
			  : ref == HB_PATH_ENCODED_SEP	? "%2e, %2f or %5c"
			  : ref == HB_PATH_BACKSLASH	? "backslashes"
			  : ref == HB_PATH_DOUBLE		? "%25"
			  : ref == HB_PATH_EMPTY_SEGMENT	? "'//'"
			  : ref == HB_PATH_ENCODED_PLAIN ? "percent-encoded letters, digits or -._~"
							 : "spaces, controls or other bytes outside RFC 3986");
	}
	if (!hb_target_route(hd->target, hd->target_len, name, &rest, &rest_len) || !(r = route_find(sb, name))) {
		return hb_refuse(g, HB_NO_ROUTE,
			  "latch: no credential route here; use a credential's {{url}} (http://HOST:PORT/CREDENTIAL/...) "
			  "as the kit's env gives it");
	}
	/* 2. the method */
	if (!strcmp(hd->method, "TRACE")) {
		return hb_refuse(g, HB_TRACE, "latch: TRACE is never forwarded (it would echo the key back)");
	}
	for (int i = 0; i < r->n_methods && !ok; i++)
		ok = !strcmp(r->methods[i], hd->method);
	if (!ok) {
		char list[256] = "";

		for (int i = 0; i < r->n_methods; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", r->methods[i]);
		return hb_refuse(g, HB_METHOD, "latch: method %s is not allowed on credential %s (allowed: %s); add it to the "
			  "credential's methods in the kit", hd->method, r->name, list[0] ? list : "none");
	}
	/* 3. the path prefix, on segment boundaries */
	while (plen < rest_len && rest[plen] != '?')
		plen++;
	if (!plen) { /* "/echo" or "/echo?q": the upstream's root */
		rest = "/";
		plen = 1;
	}
	ok = false;
	for (int i = 0; i < r->n_paths && !ok; i++)
		ok = hb_prefix_covers(r->paths[i], rest, plen);
	if (!ok) {
		snprintf(path, sizeof(path), "%.*s", (int)(plen < 200 ? plen : 200), rest);
		return hb_refuse(g, HB_PATH, "latch: path %s is not under the paths of credential %s; add its prefix to the "
			  "credential's paths in the kit", path, r->name);
	}
	/* 4. the placeholder */
	struct hb_target *t = &r->targets[r->active];
	struct hb_ph_rule rule = { .header = t->header, .scheme = t->scheme, .placeholder = r->placeholder,
				   .placeholders = sb->placeholders, .n_placeholders = sb->n_placeholders };

	ref = hb_placeholder_check(hd, &rule, &presented, &presented_len);
	if (ref == HB_PH_WRONG && presented) {
		for (struct latch_http_sandbox *o = sb->h->sandboxes; o; o = o->next)
			for (struct hb_route *orr = o->routes; o != sb && orr; orr = orr->next)
				if (strlen(orr->placeholder) == presented_len &&
				    !CRYPTO_memcmp(orr->placeholder, presented, presented_len))
					ref = HB_PH_OTHER_SANDBOX;
	}
	switch (ref) {
	case HB_OK:
		break;
	case HB_PH_URL:
		return hb_refuse(g, ref, "latch: the placeholder was also sent in the URL; send it only in the %s header",
			  t->header);
	case HB_PH_OTHER_HEADER:
		return hb_refuse(g, ref, "latch: the placeholder was sent in a header other than %s; credential %s takes it "
			  "only there (or as the Basic auth password)", t->header, r->name);
	case HB_PH_OTHER_SANDBOX:
		return hb_refuse(g, ref, "latch: that placeholder belongs to another sandbox; use this sandbox's own (latch env)");
	default:
		return hb_refuse(g, ref, "latch: credential %s needs this sandbox's placeholder in the %s header (%s<placeholder>) "
			  "or as the Basic auth password", r->name, t->header, t->scheme);
	}
	if (!t->secret.mem && t->secret_var) {
		return hb_refuse(g, HB_SECRET_MISSING, "latch: %s was not set on the host when the sandbox started; set it and run "
			  "`latch up` again to hand it over", t->secret_var);
	}
	return hb_exchange_start(g, r);
}

/* Read and answer requests while there are complete heads; stop at an exchange in flight. */
static void guest_process(struct hb_gconn *g)
{
	struct latch_http *h = g->sb->h;
	struct evbuffer *in = bufferevent_get_input(g->bev);

	for (;;) {
		size_t len, head_len;
		enum hb_refusal ref;
		const char *buf;

		if (g->state == G_BODY) {
			if (!guest_body(g) || g->state == G_BODY)
				return;
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
		memset(&g->head, 0, sizeof(g->head));
		ref = hb_head_scan(buf, len, h->o.head_max, &head_len);
		if (!ref && !head_len)
			return; /* more to come */
		if (ref) {
			hb_refuse(g, ref, "latch: %s; send an HTTP/1.1 request head with CRLF line ends, no folded lines "
				  "and token header names, under %u bytes", hb_refusal_reason(ref), h->o.head_max);
			return;
		}
		memcpy(g->headbuf, buf, head_len);
		evbuffer_drain(in, head_len);
		ref = hb_head_parse(g->headbuf, head_len, &g->parser, &g->head);
		if (ref) {
			hb_refuse(g, ref, "latch: %s; send one Content-Length or Transfer-Encoding: chunked, not both, "
				  "not twice", hb_refusal_reason(ref));
			return;
		}
		bufferevent_set_timeouts(g->bev, NULL, NULL);
		if (!dispatch(g))
			return; /* closed, or closing */
	}
}

static void guest_read(struct bufferevent *bev, void *arg)
{
	guest_process(arg);
}

void hb_gconn_resume(struct hb_gconn *g)
{
	struct latch_http *h = g->sb->h;
	struct timeval idle = { h->o.guest_idle_ms / 1000, (h->o.guest_idle_ms % 1000) * 1000 };

	if (g->close_after || !g->head.keep_alive) {
		hb_gconn_close_when_flushed(g);
		return;
	}
	g->state = G_HEAD;
	memset(&g->head, 0, sizeof(g->head));
	bufferevent_set_timeouts(g->bev, &idle, NULL);
	bufferevent_enable(g->bev, EV_READ);
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
