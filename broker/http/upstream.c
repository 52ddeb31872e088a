// SPDX-License-Identifier: GPL-2.0-only
/*
 * upstream.c - a route's upstreams: verified TLS, the connection pool, the
 * forwarded request and the response streamed back as it arrives.
 *
 * OpenSSL through libevent's bufferevent_openssl (SNI set, the peer's
 * certificate checked against the upstream's name, the system store or the
 * route's ca_file); http-parser reads the response.  libcurl was not used:
 * it decodes chunked bodies and owns its connection cache, so the guest
 * side would re-frame anyway and the TLS connections could not be tied to
 * a route's secret and wiped with it.
 *
 * The request goes out re-framed by us (Content-Length or chunked as the
 * guest sent it, Content-Length for metered routes), with the guest's auth
 * headers and hop-by-hop headers gone and the secret added by reference to
 * its locked page (no heap copy).  The response body is passed on piece by
 * piece as TLS records arrive: each piece becomes one chunk towards the
 * guest (or goes out as-is under Content-Length), after the secret
 * scrubber, so an SSE event leaves as soon as it arrived.  Reading pauses
 * when buffer_max bytes wait for the slower side.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "broker/http/engine.h"
#include "broker/names.h"

struct hb_hdr {
	uint32_t name, name_len, value, value_len; /* offsets into the head arena */
};

struct hb_uconn {
	struct hb_uconn *next, **pprev; /* target->conns */
	struct hb_target *t;
	struct latch_http *h;
	struct bufferevent *bev;
	struct hb_exchange *x; /* NULL while idle */
	bool idle, connected, reused, got_bytes, done, skip_message, tls_failed, paused;
	enum hb_refusal fail;
	http_parser parser;
	char *head; /* the response head's status text, names and values */
	uint32_t head_len;
	struct hb_hdr hdr[HB_HEADERS_MAX];
	int n_hdr;
	bool in_value;
	uint32_t reason, reason_len;
};

struct hb_lookup {
	struct hb_exchange *x;
};

/* ------------------------------------------------------------ TLS contexts and secrets */

static SSL_CTX *ctx_get(struct latch_http *h, const char *ca_file, char *err, size_t errlen)
{
	struct hb_ctx *c;
	SSL_CTX *ctx;
	static const unsigned char alpn[] = "\x08http/1.1";

	for (c = h->ctxs; c; c = c->next)
		if ((!c->ca_file && !ca_file) || (c->ca_file && ca_file && !strcmp(c->ca_file, ca_file)))
			return c->ctx;
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		latch_errf(err, errlen, -ENOMEM, "broker: cannot make a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT);
	/*
	 * An upstream that closes without close_notify ends a body delimited by
	 * the connection (as every client takes it); OpenSSL 3 would call it an
	 * error, and libevent 2.1 then reports no EOF.  Framed bodies are still
	 * checked for truncation by the parser.
	 */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
	if (ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1 : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		latch_errf(err, errlen, -EINVAL, "ca_file %s: no PEM certificates could be read from it; fix: point it at "
			   "a CA bundle", ca_file ? ca_file : "(system store)");
		SSL_CTX_free(ctx);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c || (ca_file && !(c->ca_file = strdup(ca_file)))) {
		free(c);
		SSL_CTX_free(ctx);
		latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
		return NULL;
	}
	c->ctx = ctx;
	c->next = h->ctxs;
	h->ctxs = c;
	return ctx;
}

void hb_ctx_free_all(struct latch_http *h)
{
	while (h->ctxs) {
		struct hb_ctx *c = h->ctxs;

		h->ctxs = c->next;
		SSL_CTX_free(c->ctx);
		free(c->ca_file);
		free(c);
	}
}

/* The secret gets a page of its own: locked (never swapped), left out of core dumps. */
static int secret_set(struct hb_secret *s, const char *v, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);

	s->map_len = (len + page - 1) / page * page;
	s->mem = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->mem == MAP_FAILED) {
		s->mem = NULL;
		return -ENOMEM;
	}
	(void)mlock(s->mem, s->map_len); /* best effort: RLIMIT_MEMLOCK may say no */
	(void)madvise(s->mem, s->map_len, MADV_DONTDUMP);
	memcpy(s->mem, v, len);
	s->len = len;
	return 0;
}

static void secret_wipe(struct hb_secret *s)
{
	if (!s->mem)
		return;
	explicit_bzero(s->mem, s->map_len);
	munlock(s->mem, s->map_len);
	munmap(s->mem, s->map_len);
	s->mem = NULL;
	s->len = 0;
}

static bool is_token(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

/* https://host[:port] with no path: host a name, an IPv4 address or [IPv6]. */
static int parse_url(struct hb_target *t, const char *url, char *err, size_t errlen)
{
	const char *h, *end, *colon = NULL;
	uint32_t port = 443;
	size_t n;

	if (!url || strncmp(url, "https://", 8))
		goto bad;
	h = url + 8;
	if (*h == '[') {
		end = strchr(h, ']');
		if (!end)
			goto bad;
		n = end - h - 1;
		if (n >= sizeof(t->host))
			goto bad;
		memcpy(t->host, h + 1, n);
		t->host[n] = 0;
		if (end[1] == ':')
			colon = end + 1;
		else if (end[1])
			goto bad;
		t->host_is_addr = true;
	} else {
		end = h + strcspn(h, ":/?#");
		n = end - h;
		if (!n || n >= sizeof(t->host) || (*end && *end != ':'))
			goto bad;
		memcpy(t->host, h, n);
		t->host[n] = 0;
		colon = *end == ':' ? end : NULL;
		struct in_addr a4;

		if (inet_pton(AF_INET, t->host, &a4) == 1)
			t->host_is_addr = true;
		else if (latch_dns_name_normalize(t->host, t->host, sizeof(t->host)))
			goto bad;
	}
	if (colon && latch_parse_uint(colon + 1, 1, 65535, &port))
		goto bad;
	t->port = port;
	if (t->host_is_addr) {
		char tmp[80];

		if (latch_parse_addr(t->host, &t->addr, tmp, sizeof(tmp)))
			goto bad;
		t->addr_until = UINT64_MAX;
	}
	if (strchr(t->host, ':'))
		snprintf(t->authority, sizeof(t->authority), port == 443 ? "[%s]" : "[%s]:%u", t->host, port);
	else
		snprintf(t->authority, sizeof(t->authority), port == 443 ? "%s" : "%s:%u", t->host, port);
	return 0;
bad:
	return latch_errf(err, errlen, -EINVAL, "upstream \"%s\" must be https://host[:port] with no path",
			  url ? url : "");
}

int hb_target_init(struct latch_http *h, struct hb_target *t, const struct latch_http_upstream *u, char *err,
		   size_t errlen)
{
	const char *name = u->name ? u->name : "";
	int ret;

	if (!(t->name = strdup(name)))
		return latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
	ret = parse_url(t, u->url, err, errlen);
	if (ret)
		return ret;
	if (!is_token(u->header))
		return latch_errf(err, errlen, -EINVAL, "upstream %s: header \"%s\" must be a token (Authorization, "
				  "x-api-key)", u->url, u->header ? u->header : "");
	if (u->scheme && strcspn(u->scheme, "\r\n") != strlen(u->scheme))
		return latch_errf(err, errlen, -EINVAL, "upstream %s: scheme must be one line", u->url);
	if (u->secret && (u->secret_len < 4 || u->secret_len > HB_SECRET_MAX ||
			  memchr(u->secret, '\r', u->secret_len) || memchr(u->secret, '\n', u->secret_len) ||
			  memchr(u->secret, 0, u->secret_len)))
		return latch_errf(err, errlen, -EINVAL, "upstream %s: the secret must be 4-%d bytes with no CR, LF or NUL",
				  u->url, HB_SECRET_MAX);
	if (!(t->header = strdup(u->header)) || !(t->scheme = strdup(u->scheme ? u->scheme : "")) ||
	    (u->secret_var && !(t->secret_var = strdup(u->secret_var))))
		return latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
	if (u->secret && secret_set(&t->secret, u->secret, u->secret_len))
		return latch_errf(err, errlen, -ENOMEM, "broker: cannot map a page for the secret");
	t->ctx = ctx_get(h, u->ca_file, err, errlen);
	return t->ctx ? 0 : -EINVAL;
}

static void conn_free(struct hb_uconn *u);

void hb_target_fini(struct hb_target *t)
{
	/* the connections first: their output buffers hold references to the secret's page */
	while (t->conns) {
		struct hb_uconn *u = t->conns;

		if (u->x) {
			struct hb_gconn *g = u->x->g;

			hb_exchange_end(u->x, LATCH_HTTP_END_ERROR);
			if (g)
				hb_gconn_free(g);
		}
		conn_free(u);
	}
	secret_wipe(&t->secret);
	if (t->session)
		SSL_SESSION_free(t->session);
	free(t->name);
	free(t->header);
	free(t->scheme);
	free(t->secret_var);
	t->name = t->header = t->scheme = t->secret_var = NULL;
}

/* ------------------------------------------------------------ connections */

static void u_read(struct bufferevent *bev, void *arg);
static void u_write(struct bufferevent *bev, void *arg);
static void u_event(struct bufferevent *bev, short what, void *arg);

static void conn_free(struct hb_uconn *u)
{
	if (u->x)
		u->x->u = NULL;
	*u->pprev = u->next;
	if (u->next)
		u->next->pprev = u->pprev;
	u->t->n_conns--;
	if (u->idle)
		u->t->n_idle--;
	bufferevent_free(u->bev); /* BEV_OPT_CLOSE_ON_FREE: the SSL and the socket too */
	free(u->head);
	free(u);
}

static void set_timeout(struct bufferevent *bev, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	bufferevent_set_timeouts(bev, &tv, &tv);
}

static void nodelay(struct bufferevent *bev)
{
	int one = 1;
	evutil_socket_t fd = bufferevent_getfd(bev);

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void send_request(struct hb_uconn *u)
{
	struct hb_exchange *x = u->x;

	http_parser_init(&u->parser, HTTP_RESPONSE);
	u->parser.data = u;
	u->done = u->got_bytes = u->skip_message = false;
	u->fail = HB_OK;
	set_timeout(u->bev, u->h->o.upstream_idle_ms);
	evbuffer_add_buffer(bufferevent_get_output(u->bev), x->req);
	bufferevent_enable(u->bev, EV_READ | EV_WRITE);
}

/* The exchange could not be forwarded: end it and answer the guest.  False when g is gone or closing. */
static bool exchange_fail(struct hb_exchange *x, enum hb_refusal r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool exchange_fail(struct hb_exchange *x, enum hb_refusal r, const char *fmt, ...)
{
	struct hb_gconn *g = x->g;
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	hb_exchange_end(x, LATCH_HTTP_END_ERROR);
	return g ? hb_refuse(g, r, "%s", line) : false;
}

/* From a callback: answer, then go on with a pipelined request if the connection stays. */
static void exchange_fail_async(struct hb_exchange *x, enum hb_refusal r, const char *what)
{
	struct hb_gconn *g = x->g;

	if (exchange_fail(x, r, "%s", what) && g)
		hb_gconn_resume(g);
}

static bool conn_open(struct hb_exchange *x)
{
	struct hb_target *t = x->t;
	struct latch_http *h = t->route->sb->h;
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa = { 0 };
	int salen;
	struct hb_uconn *u = calloc(1, sizeof(*u));
	SSL *ssl = SSL_new(t->ctx);

	if (!u || !ssl || !(u->head = malloc(h->o.head_max)))
		goto fail;
	if (t->host_is_addr) {
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), t->host);
	} else {
		SSL_set_tlsext_host_name(ssl, t->host);
		SSL_set1_host(ssl, t->host);
	}
	if (t->session)
		SSL_set_session(ssl, t->session);
	u->bev = bufferevent_openssl_socket_new(h->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
	ssl = NULL; /* the bufferevent owns it now, even when it failed */
	if (!u->bev)
		goto fail;
	bufferevent_openssl_set_allow_dirty_shutdown(u->bev, 1);
	u->t = t;
	u->h = h;
	u->x = x;
	x->u = u;
	u->next = t->conns;
	if (t->conns)
		t->conns->pprev = &u->next;
	u->pprev = &t->conns;
	t->conns = u;
	t->n_conns++;
	h->st.upstream_connects++;
	bufferevent_setcb(u->bev, u_read, u_write, u_event, u);
	bufferevent_setwatermark(u->bev, EV_READ, 0, h->o.buffer_max);
	bufferevent_setwatermark(u->bev, EV_WRITE, h->o.buffer_max / 2, 0);
	set_timeout(u->bev, h->o.connect_ms);
	if (t->addr.family == AF_INET) {
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons(t->port);
		sa.v4.sin_addr = t->addr.v4;
		salen = sizeof(sa.v4);
	} else {
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons(t->port);
		sa.v6.sin6_addr = t->addr.v6;
		salen = sizeof(sa.v6);
	}
	if (bufferevent_socket_connect(u->bev, (struct sockaddr *)&sa, salen)) {
		char a[INET6_ADDRSTRLEN];

		latch_addr_format(&t->addr, a, sizeof(a));
		t->addr_until = 0; /* look the name up again next time */
		return exchange_fail(x, HB_UPSTREAM_CONNECT, "latch: cannot connect to upstream %s (%s port %u): %s",
				     t->host, a, t->port, strerror(errno));
	}
	return true;
fail:
	if (ssl)
		SSL_free(ssl);
	if (u)
		free(u->head);
	free(u);
	return exchange_fail(x, HB_UPSTREAM_CONNECT, "latch: out of memory opening the upstream connection; try again");
}

static void resolved(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
		     const char *why)
{
	struct hb_lookup *lk = arg;
	struct hb_exchange *x = lk->x;

	free(lk);
	if (!x)
		return; /* the exchange is gone */
	x->lookup = NULL;
	if (n < 1) {
		char line[400];

		snprintf(line, sizeof(line), "latch: upstream %s did not resolve (%s); check the kit's upstream and the "
			 "host's DNS", name, why ? why : "no address");
		exchange_fail_async(x, HB_UPSTREAM_CONNECT, line);
		return;
	}
	x->t->addr = addrs[0];
	x->t->addr_until = hb_now_ms() + (ttl < 60 ? ttl : 60) * 1000ull;
	if (!conn_open(x))
		return;
}

/* An idle pooled connection, or a new one (resolving the host when its address is stale). */
static bool acquire(struct hb_exchange *x, bool fresh)
{
	struct hb_target *t = x->t;
	struct latch_http *h = t->route->sb->h;
	struct hb_lookup *lk;

	for (struct hb_uconn *u = t->conns; u && !fresh; u = u->next)
		if (u->idle) {
			u->idle = false;
			t->n_idle--;
			u->x = x;
			u->reused = true;
			x->u = u;
			h->st.upstream_reused++;
			send_request(u);
			return true;
		}
	if (t->addr_until > hb_now_ms())
		return conn_open(x);
	lk = calloc(1, sizeof(*lk));
	if (lk)
		lk->x = x;
	x->lookup = lk;
	if (!lk || hb_resolve(t->route->sb, t->host, resolved, lk)) {
		free(lk);
		x->lookup = NULL;
		return exchange_fail(x, HB_UPSTREAM_CONNECT, "latch: upstream %s could not be looked up; try again",
				     t->host);
	}
	return true;
}

/* ------------------------------------------------------------ the request */

static bool hop_by_hop(const struct hb_header *hd, const struct hb_head *head)
{
	static const char *const names[] = { "connection", "keep-alive", "proxy-connection", "te", "trailer",
					      "transfer-encoding", "upgrade", "proxy-authenticate", "proxy-authorization",
					      "content-length", "host", "expect", "accept-encoding", "authorization" };
	const struct hb_header *conn = hb_head_get(head, "connection");

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (hb_token_eq(hd->name, hd->name_len, names[i]))
			return true;
	/* the headers that Connection names are hop-by-hop too */
	return conn && hb_list_has(conn->value, conn->value_len, hd->name, hd->name_len);
}

/* The head the upstream gets.  body_len >= 0: send that Content-Length (metered). */
static void wipe_free(const void *data, size_t len, void *arg)
{
	explicit_bzero((void *)data, len);
	free((void *)data);
}

static void build_request(struct hb_exchange *x, int64_t body_len)
{
	struct hb_gconn *g = x->g;
	const struct hb_head *hd = &g->head;
	struct hb_target *t = x->t;
	struct evbuffer *out = evbuffer_new();
	char *head;
	size_t n;
	char name[33];
	const char *rest;
	size_t rest_len;

	hb_target_route(hd->target, hd->target_len, name, &rest, &rest_len);
	evbuffer_add_printf(out, "%s %s%.*s HTTP/1.1\r\nHost: %s\r\n", hd->method,
			    !rest_len || rest[0] == '?' ? "/" : "", (int)rest_len, rest, t->authority);
	for (int i = 0; i < hd->n; i++) {
		const struct hb_header *h = &hd->h[i];

		if (hop_by_hop(h, hd) || hb_token_eq(h->name, h->name_len, t->header))
			continue;
		evbuffer_add(out, h->name, h->name_len);
		evbuffer_add(out, ": ", 2);
		evbuffer_add(out, h->value, h->value_len);
		evbuffer_add(out, "\r\n", 2);
	}
	if (t->secret.mem) {
		evbuffer_add_printf(out, "%s: %s", t->header, t->scheme);
		evbuffer_add_reference(out, t->secret.mem, t->secret.len, NULL, NULL);
		evbuffer_add(out, "\r\n", 2);
	}
	/* identity: the scrubber and the meter read the body as the guest will */
	evbuffer_add(out, "Accept-Encoding: identity\r\n", 27);
	if (body_len >= 0)
		evbuffer_add_printf(out, "Content-Length: %lld\r\n\r\n", (long long)body_len);
	else if (hd->chunked)
		evbuffer_add(out, "Transfer-Encoding: chunked\r\n\r\n", 30);
	else if (hd->content_length >= 0)
		evbuffer_add_printf(out, "Content-Length: %lld\r\n\r\n", (long long)hd->content_length);
	else
		evbuffer_add(out, "\r\n", 2);
	/*
	 * One contiguous head: one SSL_write, one TLS record, one syscall
	 * (an evbuffer of several chains costs one of each per chain).  It
	 * holds the secret, so it is wiped when the connection has sent it.
	 */
	n = evbuffer_get_length(out);
	head = malloc(n);
	if (head && evbuffer_remove(out, head, n) == (ev_ssize_t)n &&
	    !evbuffer_add_reference(x->req, head, n, wipe_free, NULL))
		head = NULL;
	if (head)
		wipe_free(head, n, NULL);
	evbuffer_free(out);
}

/* Where body bytes go now: the connection once it is up, the pending request before. */
static struct evbuffer *body_sink(struct hb_exchange *x)
{
	if (x->u && x->u->connected)
		return bufferevent_get_output(x->u->bev);
	return x->req;
}

bool hb_exchange_start(struct hb_gconn *g, struct hb_route *r)
{
	struct hb_exchange *x = calloc(1, sizeof(*x));
	const struct hb_head *hd = &g->head;
	bool body = hd->chunked || hd->content_length > 0;
	size_t plen = 0;

	if (!x || !(x->req = evbuffer_new()) || (r->meter && !(x->body = evbuffer_new()))) {
		if (x) {
			if (x->req)
				evbuffer_free(x->req);
			free(x);
		}
		return hb_refuse(g, HB_UPSTREAM_CONNECT, "latch: out of memory; try again");
	}
	char name[33];
	const char *rest;
	size_t rest_len;

	/* the audit names the upstream's path, without the query string */
	hb_target_route(hd->target, hd->target_len, name, &rest, &rest_len);
	while (plen < rest_len && rest[plen] != '?')
		plen++;
	x->path = plen ? strndup(rest, plen) : strdup("/");
	x->g = g;
	x->r = r;
	x->t = &r->targets[r->active];
	snprintf(x->method, sizeof(x->method), "%s", hd->method);
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
	build_request(x, -1);
	x->req_done = !body;
	return acquire(x, false);
}

void hb_exchange_body(struct hb_exchange *x, const char *data, size_t len)
{
	struct evbuffer *sink = x->metered ? x->body : body_sink(x);

	x->bytes_in += len;
	if (x->req_chunked && !x->metered)
		evbuffer_add_printf(sink, "%zx\r\n", len);
	evbuffer_add(sink, data, len);
	if (x->req_chunked && !x->metered)
		evbuffer_add(sink, "\r\n", 2);
	/* backpressure: stop reading the guest while the upstream is behind */
	if (!x->metered && evbuffer_get_length(sink) > x->t->route->sb->h->o.buffer_max)
		bufferevent_disable(x->g->bev, EV_READ);
}

bool hb_exchange_over_limit(struct hb_exchange *x)
{
	size_t max = x->r->meter && x->r->meter->body_max ? x->r->meter->body_max : 8u << 20;

	return x->metered && evbuffer_get_length(x->body) > max;
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
	};

	if (m->request && m->request(m->arg, &rq, &x->meter_token, line, sizeof(line))) {
		hb_exchange_end(x, LATCH_HTTP_END_ERROR);
		return hb_refuse(g, HB_METER, "%s", strncmp(line, "latch:", 6) ? "latch: refused by the spend cap" : line);
	}
	x->meter_open = true;
	build_request(x, (int64_t)n);
	evbuffer_add_buffer(x->req, x->body);
	x->req_done = true;
	return acquire(x, false);
}

/* ------------------------------------------------------------ the response */

static bool arena_add(struct hb_uconn *u, const char *at, size_t len)
{
	if (u->head_len + len > u->h->o.head_max)
		return false;
	memcpy(u->head + u->head_len, at, len);
	u->head_len += len;
	return true;
}

static int r_begin(http_parser *p)
{
	struct hb_uconn *u = p->data;

	u->head_len = 0;
	u->n_hdr = 0;
	u->in_value = false;
	u->reason = u->reason_len = 0;
	return 0;
}

static int r_status(http_parser *p, const char *at, size_t len)
{
	struct hb_uconn *u = p->data;

	if (!u->reason_len)
		u->reason = u->head_len;
	u->reason_len += len;
	return arena_add(u, at, len) ? 0 : -1;
}

static int r_field(http_parser *p, const char *at, size_t len)
{
	struct hb_uconn *u = p->data;

	if (u->in_value || !u->n_hdr) {
		if (u->n_hdr == HB_HEADERS_MAX)
			return -1;
		u->hdr[u->n_hdr++] = (struct hb_hdr){ .name = u->head_len };
		u->in_value = false;
	}
	u->hdr[u->n_hdr - 1].name_len += len;
	return arena_add(u, at, len) ? 0 : -1;
}

static int r_value(http_parser *p, const char *at, size_t len)
{
	struct hb_uconn *u = p->data;
	struct hb_hdr *h = &u->hdr[u->n_hdr - 1];

	if (!u->in_value) {
		h->value = u->head_len;
		u->in_value = true;
	}
	h->value_len += len;
	return arena_add(u, at, len) ? 0 : -1;
}

static bool resp_hop_by_hop(struct hb_uconn *u, const struct hb_hdr *h)
{
	static const char *const names[] = { "connection", "keep-alive", "proxy-connection", "te", "trailer",
					      "transfer-encoding", "upgrade", "proxy-authenticate", "content-length" };
	const char *name = u->head + h->name;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (hb_token_eq(name, h->name_len, names[i]))
			return true;
	for (int i = 0; i < u->n_hdr; i++) { /* named by the upstream's Connection header */
		const struct hb_hdr *c = &u->hdr[i];

		if (hb_token_eq(u->head + c->name, c->name_len, "connection") &&
		    hb_list_has(u->head + c->value, c->value_len, name, h->name_len))
			return true;
	}
	return false;
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
	if (e->x->resp_chunked)
		evbuffer_add_printf(e->out, "%zx\r\n", len);
	evbuffer_add(e->out, data, len);
	if (e->x->resp_chunked)
		evbuffer_add(e->out, "\r\n", 2);
}

static void emit_head(void *arg, const char *data, size_t len)
{
	evbuffer_add(arg, data, len);
}

static int r_headers_complete(http_parser *p)
{
	struct hb_uconn *u = p->data;
	struct hb_exchange *x = u->x;
	struct hb_gconn *g = x->g;
	struct evbuffer *out = bufferevent_get_output(g->bev);
	int status = p->status_code;
	bool no_body = x->head_method || status == 204 || status == 304;

	if (status >= 100 && status < 200) { /* we sent no Expect and no Upgrade: skip interim responses */
		u->skip_message = true;
		return 0;
	}
	for (int i = 0; i < u->n_hdr; i++) {
		const struct hb_hdr *h = &u->hdr[i];

		if (hb_token_eq(u->head + h->name, h->name_len, "content-encoding") &&
		    !hb_token_eq(u->head + h->value, h->value_len, "identity")) {
			u->fail = HB_UPSTREAM_ENCODED; /* the scrubber could not read it: fail closed */
			return -1;
		}
	}
	x->status = status;
	x->resp_started = true;
	evbuffer_add_printf(out, "HTTP/1.1 %d %.*s\r\n", status, (int)u->reason_len, u->head + u->reason);
	for (int i = 0; i < u->n_hdr; i++) {
		const struct hb_hdr *h = &u->hdr[i];
		struct hb_scrub s = { .secret = x->scrub.secret, .secret_len = x->scrub.secret_len };

		if (resp_hop_by_hop(u, h) && !(no_body && hb_token_eq(u->head + h->name, h->name_len, "content-length")))
			continue;
		evbuffer_add(out, u->head + h->name, h->name_len);
		evbuffer_add(out, ": ", 2);
		hb_scrub_feed(&s, u->head + h->value, h->value_len, emit_head, out);
		hb_scrub_flush(&s, emit_head, out);
		evbuffer_add(out, "\r\n", 2);
	}
	if (no_body) {
		/* the length header (if any) went through above */
	} else if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX) {
		evbuffer_add_printf(out, "Content-Length: %llu\r\n", (unsigned long long)p->content_length);
	} else if (g->head.http_minor >= 1) {
		x->resp_chunked = true;
		evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
	} else {
		x->resp_close = true; /* an HTTP/1.0 guest: the end of the body is the end of the connection */
		g->close_after = true;
	}
	if (g->close_after || !g->head.keep_alive)
		evbuffer_add(out, "Connection: close\r\n", 19);
	evbuffer_add(out, "\r\n", 2);
	if (x->meter_open && x->r->meter->response)
		x->r->meter->response(x->r->meter->arg, x->meter_token, status, NULL, 0);
	return no_body ? 1 : 0;
}

static int r_body(http_parser *p, const char *at, size_t len)
{
	struct hb_uconn *u = p->data;
	struct hb_exchange *x = u->x;
	struct emit_ctx e = { x, bufferevent_get_output(x->g->bev) };

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
	.on_message_begin = r_begin,
	.on_status = r_status,
	.on_header_field = r_field,
	.on_header_value = r_value,
	.on_headers_complete = r_headers_complete,
	.on_body = r_body,
	.on_message_complete = r_complete,
};

/* The response is over (done) or broken: finish the exchange and go on with the guest. */
static void response_over(struct hb_uconn *u, enum latch_http_end how)
{
	struct hb_exchange *x = u->x;
	struct hb_gconn *g = x->g;

	hb_exchange_end(x, how);
	hb_guest_flush(g);
	if (how == LATCH_HTTP_END_COMPLETE)
		hb_gconn_resume(g);
	else
		hb_gconn_close_when_flushed(g); /* the guest sees the body cut short */
}

static void u_read(struct bufferevent *bev, void *arg)
{
	struct hb_uconn *u = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (!u->x) { /* bytes on an idle connection: it is not ours to reuse any more */
		conn_free(u);
		return;
	}
	while (evbuffer_get_length(in) && !u->done) {
		struct hb_exchange *x = u->x;
		struct evbuffer_iovec v;
		size_t n;
		enum http_errno e;

		if (evbuffer_get_length(bufferevent_get_output(x->g->bev)) > u->h->o.buffer_max) {
			bufferevent_disable(bev, EV_READ); /* the guest is behind: hb_exchange_guest_drained() */
			u->paused = true;
			return;
		}
		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		u->got_bytes = true;
		n = http_parser_execute(&u->parser, &resp_settings, v.iov_base, v.iov_len);
		evbuffer_drain(in, n);
		e = HTTP_PARSER_ERRNO(&u->parser);
		if (e == HPE_PAUSED)
			break;
		if (e != HPE_OK) {
			if (!x->resp_started) {
				enum hb_refusal r = u->fail ? u->fail : HB_UPSTREAM_BAD;

				exchange_fail_async(x, r, r == HB_UPSTREAM_ENCODED
					? "latch: the upstream sent a content-encoded response although the broker asked "
					  "for identity; the broker does not pass bodies it cannot check for the key"
					: "latch: the upstream's response could not be read as HTTP/1.1");
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

static void u_write(struct bufferevent *bev, void *arg)
{
	struct hb_uconn *u = arg;
	struct hb_exchange *x = u->x;

	/* the upstream took the body we queued: read more of it from the guest */
	if (x && x->g && x->g->state == G_BODY && !(bufferevent_get_enabled(x->g->bev) & EV_READ)) {
		bufferevent_enable(x->g->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(x->g->bev)))
			bufferevent_trigger(x->g->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
	}
}

void hb_exchange_guest_drained(struct hb_exchange *x)
{
	struct hb_uconn *u = x->u;

	if (u && u->paused) {
		u->paused = false;
		bufferevent_enable(u->bev, EV_READ);
		u_read(u->bev, u);
	}
}

static void connected(struct hb_uconn *u)
{
	struct hb_target *t = u->t;
	SSL *ssl = bufferevent_openssl_get_ssl(u->bev);
	SSL_SESSION *s = ssl ? SSL_get1_session(ssl) : NULL;

	u->connected = true;
	nodelay(u->bev);
	if (s) { /* resumption for the next connection of this upstream */
		if (t->session)
			SSL_SESSION_free(t->session);
		t->session = s;
	}
	send_request(u);
}

static void u_event(struct bufferevent *bev, short what, void *arg)
{
	struct hb_uconn *u = arg;
	struct hb_exchange *x = u->x;
	char line[512];

	if (what & BEV_EVENT_CONNECTED) {
		if (x)
			connected(u);
		return;
	}
	if (!x) { /* an idle connection closed or timed out */
		conn_free(u);
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
	if (u->reused && !u->got_bytes && !x->retried && !(what & BEV_EVENT_TIMEOUT) && !x->metered &&
	    x->req_done && !x->bytes_in) {
		x->retried = true;
		conn_free(u);
		evbuffer_drain(x->req, evbuffer_get_length(x->req));
		build_request(x, -1);
		acquire(x, true);
		return;
	}
	unsigned long ssl_err = bufferevent_get_openssl_error(bev);
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long verify = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (what & BEV_EVENT_TIMEOUT)
		snprintf(line, sizeof(line), "latch: upstream %s did not answer in time", x->t->host);
	else if (!u->connected && verify != X509_V_OK)
		snprintf(line, sizeof(line), "latch: upstream %s's certificate did not verify (%s); the broker only talks "
			 "to the upstream's real name", x->t->host, X509_verify_cert_error_string(verify));
	else if (!u->connected)
		snprintf(line, sizeof(line), "latch: cannot reach upstream %s port %u (%s)", x->t->host, x->t->port,
			 ssl_err ? ERR_reason_error_string(ssl_err) : strerror(EVUTIL_SOCKET_ERROR()));
	else
		snprintf(line, sizeof(line), "latch: upstream %s closed the connection without a response",
			 x->t->host);
	exchange_fail_async(x, (what & BEV_EVENT_TIMEOUT)	 ? HB_UPSTREAM_TIMEOUT
			       : !u->connected && verify != X509_V_OK ? HB_UPSTREAM_TLS
			       : u->connected			 ? HB_UPSTREAM_BAD
								 : HB_UPSTREAM_CONNECT,
			    line);
}

/* ------------------------------------------------------------ the end of an exchange */

void hb_exchange_end(struct hb_exchange *x, enum latch_http_end how)
{
	struct hb_gconn *g = x->g;
	struct hb_uconn *u = x->u;
	struct latch_http *h = x->r->sb->h;

	if (g)
		g->x = NULL;
	if (x->lookup)
		((struct hb_lookup *)x->lookup)->x = NULL;
	if (x->meter_open && x->r->meter->end)
		x->r->meter->end(x->r->meter->arg, x->meter_token, how);
	if (g && (x->resp_started || how == LATCH_HTTP_END_GUEST_CUT))
		hb_audit(g, "route", x->r, x->t, NULL, 0, x->method, x->path, x->status, NULL, latch_http_end_name(how),
			 x->bytes_in, x->bytes_out);
	if (x->resp_started)
		h->st.forwarded++;
	if (u) {
		u->x = NULL;
		if (how == LATCH_HTTP_END_COMPLETE && u->done && x->req_done && http_should_keep_alive(&u->parser) &&
		    !evbuffer_get_length(bufferevent_get_output(u->bev)) && u->t->n_idle < h->o.pool_max) {
			u->idle = true;
			u->paused = false;
			u->t->n_idle++;
			set_timeout(u->bev, h->o.pool_idle_ms);
			bufferevent_enable(u->bev, EV_READ); /* to see the upstream close it */
		} else {
			conn_free(u);
		}
	}
	evbuffer_free(x->req);
	if (x->body)
		evbuffer_free(x->body);
	free(x->path);
	free(x);
}
