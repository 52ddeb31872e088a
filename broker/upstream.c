// SPDX-License-Identifier: GPL-2.0-only
/*
 * upstream.c - a route's upstreams: verified TLS, secrets, resolution and
 * the connection pool (exchange.c forwards a request over a connection).
 *
 * OpenSSL through libevent's bufferevent_openssl (SNI set, the peer's
 * certificate checked against the upstream's name, the system store or the
 * route's ca_file); http-parser reads the response.  libcurl was not used:
 * it decodes chunked bodies and owns its connection cache, so the guest
 * side would re-frame anyway and the TLS connections could not be tied to
 * a route's secret and wiped with it.

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

#include "broker/engine.h"
#include "common/common.h"

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
	/* plaintext the upstream sent (an echo of the key, say) is wiped from OpenSSL's buffers once read */
	SSL_CTX_set_options(ctx, SSL_OP_CLEANSE_PLAINTEXT);
	SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
	/* a record in one read(), not its 5-byte header first (hb_u_read takes what was read ahead) */
	SSL_CTX_set_read_ahead(ctx, 1);
	if (ca_file ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1 :
		      SSL_CTX_set_default_verify_paths(ctx) != 1) {
		latch_errf(err, errlen, -EINVAL,
			   "ca_file %s: no PEM certificates could be read from it; fix: point it at "
			   "a CA bundle",
			   ca_file ? ca_file : "(system store)");
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

		if (latch_parse_addr(t->host, &t->addrs[0], tmp, sizeof(tmp)))
			goto bad;
		t->n_addrs = 1;
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
	/* the sandbox's resolver sees literals too: latchd's confinement admits an address when it is looked up */
	if (t->host_is_addr && t->route && t->route->sb->o.resolve)
		t->addr_until = 0;
	if (!is_token(u->header))
		return latch_errf(err, errlen, -EINVAL,
				  "upstream %s: header \"%s\" must be a token (Authorization, "
				  "x-api-key)",
				  u->url, u->header ? u->header : "");
	if (u->scheme && strcspn(u->scheme, "\r\n") != strlen(u->scheme))
		return latch_errf(err, errlen, -EINVAL, "upstream %s: scheme must be one line", u->url);
	if (u->n_also < 0 || u->n_also > LATCH_HTTP_FORMS_MAX)
		return latch_errf(err, errlen, -EINVAL, "upstream %s: at most %d other key forms", u->url,
				  LATCH_HTTP_FORMS_MAX);
	for (int i = 0; i < u->n_also; i++) {
		const struct latch_http_form *f = &u->also[i];

		if (!is_token(f->header) || !strcasecmp(f->header, u->header) ||
		    (f->scheme && strcspn(f->scheme, "\r\n") != strlen(f->scheme)))
			return latch_errf(err, errlen, -EINVAL,
					  "upstream %s: another key form's header \"%s\" must be a token other than "
					  "%s, its scheme one line",
					  u->url, f->header ? f->header : "", u->header);
		if (!(t->also[i].header = strdup(f->header)) ||
		    !(t->also[i].scheme = strdup(f->scheme ? f->scheme : "")))
			return latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
		t->n_also = i + 1;
	}
	if (u->secret &&
	    (u->secret_len < 4 || u->secret_len > HB_SECRET_MAX || memchr(u->secret, '\r', u->secret_len) ||
	     memchr(u->secret, '\n', u->secret_len) || memchr(u->secret, 0, u->secret_len)))
		return latch_errf(err, errlen, -EINVAL,
				  "upstream %s: the secret must be 4-%d bytes with no CR, LF or NUL", u->url,
				  HB_SECRET_MAX);
	if (u->base_path && *u->base_path &&
	    (u->base_path[0] != '/' || u->base_path[strlen(u->base_path) - 1] == '/' ||
	     hb_target_spelling(u->base_path, strlen(u->base_path)) != HB_OK || strpbrk(u->base_path, "?%")))
		return latch_errf(err, errlen, -EINVAL,
				  "upstream %s: base path \"%s\" must be absolute, without a trailing '/', '.', '..', "
				  "'%%' or '?'",
				  u->url, u->base_path);
	if (!(t->header = strdup(u->header)) || !(t->scheme = strdup(u->scheme ? u->scheme : "")) ||
	    !(t->base_path = strdup(u->base_path ? u->base_path : "")) ||
	    (u->secret_var && !(t->secret_var = strdup(u->secret_var))))
		return latch_errf(err, errlen, -ENOMEM, "broker: out of memory");
	t->authority_len = strlen(t->authority);
	t->header_len = strlen(t->header);
	t->scheme_len = strlen(t->scheme);
	t->base_path_len = strlen(t->base_path);
	if (u->secret && secret_set(&t->secret, u->secret, u->secret_len))
		return latch_errf(err, errlen, -ENOMEM, "broker: cannot map a page for the secret");
	t->ctx = ctx_get(h, u->ca_file, err, errlen);
	return t->ctx ? 0 : -EINVAL;
}

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
		hb_conn_free(u);
	}
	secret_wipe(&t->secret);
	if (t->session)
		SSL_SESSION_free(t->session);
	free(t->name);
	free(t->header);
	free(t->scheme);
	for (int i = 0; i < t->n_also; i++) {
		free((char *)t->also[i].header);
		free((char *)t->also[i].scheme);
	}
	t->n_also = 0;
	free(t->secret_var);
	free(t->base_path);
	t->name = t->header = t->scheme = t->secret_var = t->base_path = NULL;
}

/* ------------------------------------------------------------ connections */

void hb_conn_free(struct hb_uconn *u)
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
	if (u->head)
		explicit_bzero(u->head, u->head_len);
	free(u->head);
	free(u);
}

void hb_set_timeout(struct bufferevent *bev, uint32_t ms)
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

static void wipe_free_ref(const void *data, size_t len, void *arg)
{
	explicit_bzero((void *)data, len);
	free((void *)data);
}

/*
 * The pending request (head and what came of the body) in one SSL_write:
 * one TLS record and one syscall, written now.  Through the bufferevent it
 * took a record and a write per evbuffer chain, from the write event (two
 * epoll_ctl calls and a loop turn a request).  What SSL_write did not take
 * goes the bufferevent's way, as one chain of exactly the bytes it must be
 * called with again; the copy holds the secret, so it is wiped when freed.
 */
void hb_u_send(struct hb_uconn *u)
{
	struct evbuffer *out = bufferevent_get_output(u->bev);
	struct hb_exchange *x = u->x;
	size_t n = evbuffer_get_length(x->req), off = 0;
	SSL *ssl = bufferevent_openssl_get_ssl(u->bev);
	char buf[16384]; /* one record's plaintext at most */
	char *rest;
	int r;

	u->send_pending = false;
	if (!n)
		return;
	if (n > sizeof(buf) || evbuffer_get_length(out) || !ssl) {
		evbuffer_add_buffer(out, x->req);
		return;
	}
	evbuffer_copyout(x->req, buf, n);
	evbuffer_drain(x->req, n); /* the head's chain is wiped as it is freed */
	/* a queue left empty need not be cleared: ERR_clear_error() walks all its slots (~800 instructions) */
	if (ERR_peek_error())
		ERR_clear_error();
	r = SSL_write(ssl, buf, n);
	if (r > 0)
		off = r;
	if (off < n) {
		rest = malloc(n - off);
		if (rest)
			memcpy(rest, buf + off, n - off);
		if (!rest || evbuffer_add_reference(out, rest, n - off, wipe_free_ref, NULL)) {
			/* out of memory: the rest of the request is lost, so is the connection (the event ends it) */
			if (rest)
				wipe_free_ref(rest, n - off, NULL);
			bufferevent_disable(u->bev, EV_READ);
			bufferevent_trigger_event(u->bev, BEV_EVENT_ERROR, BEV_TRIG_DEFER_CALLBACKS);
		}
	}
	explicit_bzero(buf, n);
	if (off == n)
		hb_u_write(u->bev, u); /* what the write event would have said: the upstream took it */
}

/*
 * The request goes out now, or (WAIT: called from the guest's own reading,
 * which feeds the body next) when the guest's body has bytes waiting in its
 * input, once guest.c has fed them (hb_u_send), so that head and body leave
 * in one record.  From an event, bytes left in the input mean the guest's
 * reading is paused: nothing would feed them, so the request goes now.
 */
static void send_request(struct hb_uconn *u, bool wait)
{
	struct hb_exchange *x = u->x;

	http_parser_init(&u->parser, HTTP_RESPONSE);
	u->parser.data = u;
	u->done = u->got_bytes = u->skip_message = u->head_in = false;
	u->fail = HB_OK;
	hb_set_timeout(u->bev, u->h->o.upstream_idle_ms);
	/* EV_WRITE stays enabled from the connect on: enabling it again would add the write event each time */
	if ((bufferevent_get_enabled(u->bev) & (EV_READ | EV_WRITE)) != (EV_READ | EV_WRITE))
		bufferevent_enable(u->bev, EV_READ | EV_WRITE);
	if (wait && !x->req_done && x->g && x->g->state == G_BODY &&
	    evbuffer_get_length(bufferevent_get_input(x->g->bev))) {
		u->send_pending = true;
		return;
	}
	hb_u_send(u);
}

/* The exchange could not be forwarded: end it and answer the guest.  False when g is gone or closing. */
bool hb_exchange_fail(struct hb_exchange *x, enum hb_refusal r, const char *fmt, ...)
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
void hb_exchange_fail_async(struct hb_exchange *x, enum hb_refusal r, const char *what)
{
	struct hb_gconn *g = x->g;

	if (hb_exchange_fail(x, r, "%s", what) && g)
		hb_gconn_resume(g);
}

/*
 * A name's addresses are tried in turn: a connection that fails before TLS
 * starts (refused, unreachable, no route, latchd's confinement refusing that
 * address, or no answer by connect_ms) moves the exchange to the next one,
 * until each was tried once or connect_ms is spent (hb_connect_share); new
 * connections then start at the address that answered.  A TLS failure is
 * the name's, not the address's: never retried.
 * 0 when each was tried or no time is left (U stays, for the caller's
 * refusal); else U is freed
 * and 1 while the next connects, -1 when that failed too and the guest's
 * connection is closing or gone.
 */
static bool conn_open(struct hb_exchange *x);

int hb_conn_next_addr(struct hb_exchange *x, struct hb_uconn *u)
{
	struct hb_target *t = x->t;

	if (x->addr_tries + 1 >= t->n_addrs || (uint64_t)latch_now_ms() >= x->connect_until)
		return 0;
	x->addr_tries++;
	t->addr_i = (t->addr_i + 1) % t->n_addrs;
	hb_conn_free(u);
	return conn_open(x) ? 1 : -1;
}

static bool conn_open(struct hb_exchange *x)
{
	struct hb_target *t = x->t;
	const struct latch_addr *a = &t->addrs[t->addr_i];
	struct latch_http *h = t->route->sb->h;
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa = { 0 };
	int salen;
	uint32_t ms =
		hb_connect_share(&x->connect_until, !x->addr_tries, x->addr_tries + 1 < t->n_addrs, h->o.connect_ms);
	struct hb_uconn *u;
	SSL *ssl;

	if (!ms)
		return hb_exchange_fail(x, HB_UPSTREAM_TIMEOUT, "latch: upstream %s did not answer in time", t->host);
	u = calloc(1, sizeof(*u));
	ssl = SSL_new(t->ctx);

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
	bufferevent_setcb(u->bev, hb_u_read, hb_u_write, hb_u_event, u);
	bufferevent_setwatermark(u->bev, EV_READ, 0, h->o.buffer_max);
	bufferevent_setwatermark(u->bev, EV_WRITE, h->o.buffer_max / 2, 0);
	hb_set_timeout(u->bev, ms);
	if (a->family == AF_INET) {
		sa.v4.sin_family = AF_INET;
		sa.v4.sin_port = htons(t->port);
		sa.v4.sin_addr = a->v4;
		salen = sizeof(sa.v4);
	} else {
		sa.v6.sin6_family = AF_INET6;
		sa.v6.sin6_port = htons(t->port);
		sa.v6.sin6_addr = a->v6;
		salen = sizeof(sa.v6);
	}
	if (bufferevent_socket_connect(u->bev, (struct sockaddr *)&sa, salen)) {
		int e = errno, next;
		char s[INET6_ADDRSTRLEN];

		next = hb_conn_next_addr(x, u); /* no route to this one (IPv6 on a host without it): the next */
		if (next)
			return next > 0;
		latch_addr_format(a, s, sizeof(s));
		t->addr_until = 0; /* look the name up again next time */
		return hb_exchange_fail(x, HB_UPSTREAM_CONNECT, "latch: cannot connect to upstream %s (%s port %u): %s",
					t->host, s, t->port, strerror(e));
	}
	return true;
fail:
	if (ssl)
		SSL_free(ssl);
	if (u)
		free(u->head);
	free(u);
	return hb_exchange_fail(x, HB_UPSTREAM_CONNECT,
				"latch: out of memory opening the upstream connection; try again");
}

static void resolved(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl, const char *why)
{
	struct hb_lookup *lk = arg;
	struct hb_exchange *x = lk->x;

	free(lk);
	if (!x)
		return; /* the exchange is gone */
	x->lookup = NULL;
	if (n < 1) {
		char line[400];

		snprintf(line, sizeof(line),
			 "latch: upstream %s did not resolve (%s); check the kit's upstream and the "
			 "host's DNS",
			 name, why ? why : "no address");
		hb_exchange_fail_async(x, HB_UPSTREAM_CONNECT, line);
		return;
	}
	/* the same answer again keeps the address that answered last; a new one starts at its first */
	if (n > HB_ADDRS_MAX)
		n = HB_ADDRS_MAX;
	if (n != x->t->n_addrs || memcmp(x->t->addrs, addrs, (size_t)n * sizeof(*addrs))) {
		memcpy(x->t->addrs, addrs, (size_t)n * sizeof(*addrs));
		x->t->n_addrs = n;
		x->t->addr_i = 0;
	}
	x->t->addr_until = latch_now_ms() + (ttl < 60 ? ttl : 60) * 1000ull;
	if (!conn_open(x))
		return;
}

/* An idle pooled connection, or a new one (resolving the host when its address is stale). */
bool hb_acquire(struct hb_exchange *x, bool fresh)
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
			send_request(u, true); /* from hb_exchange_start or the meter, never from an event */
			return true;
		}
	if (t->addr_until > (uint64_t)latch_now_ms())
		return conn_open(x);
	lk = calloc(1, sizeof(*lk));
	if (lk)
		lk->x = x;
	x->lookup = lk;
	if (!lk || hb_resolve(t->route->sb, t->host, resolved, lk)) {
		free(lk);
		x->lookup = NULL;
		return hb_exchange_fail(x, HB_UPSTREAM_CONNECT, "latch: upstream %s could not be looked up; try again",
					t->host);
	}
	return true;
}

void hb_conn_connected(struct hb_uconn *u)
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
	send_request(u, false);
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
	hb_meter_later(x); /* all it has not seen, before its end */
	if (x->meter_open && x->r->meter->end)
		x->r->meter->end(x->r->meter->arg, x->meter_token, how);
	if (g && (x->resp_started || how == LATCH_HTTP_END_GUEST_CUT))
		hb_audit(g, "route", x->r, x->t, NULL, 0, x->method, x->path, x->status, NULL, latch_http_end_name(how),
			 x->bytes_in, x->bytes_out);
	if (x->resp_started)
		h->st.forwarded++;
	if (u) {
		u->x = NULL;
		SSL *ssl = bufferevent_openssl_get_ssl(u->bev);

		/* bytes after the response (in the input or read ahead into OpenSSL) are no one's: not pooled */
		if (how == LATCH_HTTP_END_COMPLETE && u->done && x->req_done && http_should_keep_alive(&u->parser) &&
		    !evbuffer_get_length(bufferevent_get_output(u->bev)) &&
		    !evbuffer_get_length(bufferevent_get_input(u->bev)) && !u->send_pending && ssl &&
		    !SSL_has_pending(ssl) && u->t->n_idle < h->o.pool_max) {
			u->idle = true;
			u->paused = false;
			u->t->n_idle++;
			hb_set_timeout(u->bev, h->o.pool_idle_ms);
			if (!(bufferevent_get_enabled(u->bev) & EV_READ))
				bufferevent_enable(u->bev, EV_READ); /* to see the upstream close it */
		} else {
			hb_conn_free(u);
		}
	}
	if (x->body)
		evbuffer_free(x->body);
	x->body = NULL;
	x->r->sb->metered_held -= x->held_bytes;
	x->held_bytes = 0;
	if (x->path != x->path_short)
		free(x->path);
	explicit_bzero(&x->scrub, sizeof(x->scrub)); /* it may hold the start of an echoed key */
	/* the guest's next request takes it (exchange_new); a request left unsent is wiped as it is drained */
	if (g && !g->spare) {
		evbuffer_drain(x->req, evbuffer_get_length(x->req));
		g->spare = x;
		return;
	}
	evbuffer_free(x->req);
	free(x->meter_later);
	free(x);
}
