/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * engine.h - the broker engine's insides, shared by its files (private).
 *
 *   engine.c    the engine, sandboxes, listeners, routes, resolution,
 *               refusals, audit
 *   guest.c     guest connections: request heads, the checks in their order
 *   upstream.c  upstream targets: TLS contexts, secrets, resolution, the
 *               connection pool, the end of an exchange
 *   exchange.c  a forwarded request: the upstream's request head, the
 *               guest's body through the meter to the upstream
 *   response.c  the upstream's response: its head read, scrubbed and
 *               re-framed, its body streamed back to the guest
 *   tunnel.c    CONNECT: policy, resolution, rebinding filter, ClientHello
 *               server name, then bytes both ways
 *
 * Ownership: a sandbox owns its routes and guest connections; a route owns
 * its targets (one per upstream); a target owns its pooled upstream
 * connections.  A guest connection owns at most one exchange (a forwarded
 * request) or one tunnel; an exchange borrows an upstream connection.
 */
#ifndef LATCH_BROKER_HTTP_ENGINE_H
#define LATCH_BROKER_HTTP_ENGINE_H

#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <http_parser.h>
#include <openssl/ssl.h>

#include "broker/check.h"
#include "broker/broker.h"

#define HB_SECRET_MAX 1024

struct hb_exchange;
struct hb_gconn;
struct hb_uconn;

struct hb_ctx { /* one SSL_CTX per CA bundle (NULL: the system store) */
	struct hb_ctx *next;
	char *ca_file;
	SSL_CTX *ctx;
};

struct hb_secret { /* a page of its own: locked, left out of core dumps, wiped on free */
	char *mem;
	size_t len, map_len;
};

#define HB_ADDRS_MAX 8 /* a name's addresses tried in turn when one can't be reached */

struct hb_target {
	struct hb_route *route;
	char *name; /* "" for the credential's own upstream */
	char host[254];
	uint16_t port;
	char authority[264]; /* the Host header: host or host:port */
	bool host_is_addr;
	struct hb_secret secret;
	char *secret_var, *header, *scheme;
	char *base_path; /* "" or "/openai": put before the request's path */
	size_t authority_len, header_len, scheme_len, base_path_len; /* their strlen(), for each request's head */
	struct hb_ph_form also[LATCH_HTTP_FORMS_MAX]; /* the other forms a client may send the placeholder in */
	int n_also;
	SSL_CTX *ctx;
	SSL_SESSION *session;
	/* the last resolution (a literal: its one address), until addr_until */
	struct latch_addr addrs[HB_ADDRS_MAX];
	int n_addrs, addr_i; /* addrs[addr_i]: where new connections go (the last that connected) */
	uint64_t addr_until;
	struct hb_uconn *conns; /* every connection of this target, idle or busy */
	int n_conns, n_idle;
};

struct hb_route {
	struct hb_route *next;
	struct latch_http_sandbox *sb;
	char name[LATCH_HTTP_ROUTE_NAME_MAX + 1];
	char *placeholder;
	char *methods[LATCH_HTTP_METHODS_MAX];
	int n_methods;
	char *paths[LATCH_HTTP_PATHS_MAX];
	int n_paths;
	struct hb_target targets[LATCH_HTTP_UPSTREAMS_MAX];
	int n_targets, active;
	const struct latch_http_meter *meter; /* NULL, or meter_copy */
	struct latch_http_meter meter_copy;
};

struct latch_http_sandbox {
	struct latch_http_sandbox *next;
	struct latch_http *h;
	struct latch_http_sandbox_opts o;
	char *name;
	struct evconnlistener *listeners[LATCH_HTTP_LISTEN_MAX];
	struct hb_route *routes;
	struct hb_gconn *gconns;
	int n_gconns;
	size_t metered_held; /* what its metered exchanges hold of bodies (exchange.c: hold_grow()) */
	const char *placeholders[64]; /* every route's, for the URL and other-header checks */
	int n_placeholders;
	struct hb_ph_set ph_set; /* the same, made ready for the search */
};

struct latch_http {
	struct event_base *base;
	struct latch_http_opts o;
	struct evdns_base *dns;
	struct hb_ctx *ctxs;
	struct latch_http_sandbox *sandboxes;
	struct latch_http_stats st;
};

enum hb_gstate { G_HEAD, G_BODY, G_WAIT, G_TUNNEL, G_CLOSING };

struct hb_gconn {
	struct hb_gconn *next, **pprev;
	struct latch_http_sandbox *sb;
	struct bufferevent *bev; /* its output, write event and callbacks; never its EV_READ */
	struct event *rev; /* the reads: one recv() each, not bufferevent's FIONREAD + readv (guest.c) */
	bool reading, idle; /* asked for: reads, the idle timeout */
	uint32_t timer_ms; /* the read event's timeout while armed (guest.c: guest_timeout_ms), 0: none */
	bool armed, read_later; /* rev is added; a run of guest_process() without a read is due */
	size_t read_max; /* 0, or: no more reads while this much waits unread (local.c) */
	struct latch_addr peer;
	enum hb_gstate state;
	bool close_after; /* the guest asked for it, or the request can't be followed */
	bool linger; /* closing with the request unread: its bytes are read and dropped first (guest.c) */
	uint64_t linger_until;
	http_parser parser;
	struct hb_head head;
	int ph_form; /* the form the head's placeholder came in: 0 the target's header, i its also[i - 1] */
	char *headbuf;
	struct hb_exchange *x;
	struct hb_exchange *spare; /* the last exchange, wiped, for the next request (hb_exchange_end) */
	struct hb_tunnel *t;
	struct latch_http_local *l; /* a local request (local.c), read or waiting for its answer */
};

struct hb_exchange {
	struct hb_gconn *g;
	struct hb_uconn *u;
	struct hb_route *r;
	struct hb_target *t;
	char method[24];
	const char *rest; /* the target after the route's name (in g's head buffer, which outlives the exchange) */
	size_t rest_len;
	char *path; /* without the query string, for the audit: path_short or allocated */
	char path_short[96];
	bool head_method, req_chunked, req_done, metered, retried;
	uint8_t addr_tries; /* addresses of its target it moved past, unreachable */
	uint64_t connect_until; /* when its connect_ms, for every address it tries, is spent (hb_connect_share) */
	void *lookup; /* a resolution in flight: told when the exchange goes */
	struct evbuffer *req; /* the request to send, until an upstream connection takes it */
	struct evbuffer *body; /* metered: the decoded body, shown to the meter before anything leaves */
	size_t held_bytes; /* metered: its share of the sandbox's metered_held, given back when it ends */
	uint64_t bytes_in, bytes_out;
	int status;
	bool resp_started, resp_chunked, resp_close;
	void *meter_token;
	bool meter_open;
	bool meter_head_later; /* the head's response() call waits for hb_meter_later() */
	bool held; /* the meter holds it (LATCH_HTTP_METER_HOLD) until latch_http_meter_resume() */
	/*
	 * The response's body bytes the meter has not seen yet (hb_meter_later):
	 * kept with a reused exchange, wiped once shown (they may echo the key).
	 */
	char *meter_later;
	size_t meter_later_len, meter_later_cap;
	struct hb_scrub scrub; /* a reused exchange is cleared up to meter_later (exchange_new) */
};

/* engine.c */
/* The first N bytes of IN wiped, then drained, chain by chain: what the upstream sent may echo the key. */
void hb_wipe_drain(struct evbuffer *in, size_t n);
struct hb_route *hb_route_find(struct latch_http_sandbox *sb, const char *name);
/* Answer with a refusal; false when the connection is closing or gone (don't touch g). */
bool hb_refuse(struct hb_gconn *g, enum hb_refusal r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void hb_audit(struct hb_gconn *g, const char *kind, const struct hb_route *r, const struct hb_target *t,
	      const char *host, uint16_t port, const char *method, const char *path, int status, const char *reason,
	      const char *end, uint64_t in, uint64_t out);
/* guest.c */
struct evconnlistener;
void hb_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg);
void hb_gconn_free(struct hb_gconn *g);
void hb_guest_flush(struct hb_gconn *g); /* write queued bytes now; the write event only for leftovers */
void hb_gconn_close_when_flushed(struct hb_gconn *g);
void hb_gconn_resume(struct hb_gconn *g); /* an exchange or tunnel is over: next request, or close */
/* Reading the guest: what bufferevent_enable/disable(EV_READ) and its read timeout and watermark did. */
void hb_guest_reading(struct hb_gconn *g, bool on);
bool hb_guest_is_reading(const struct hb_gconn *g);
void hb_guest_idle(struct hb_gconn *g, bool on); /* the guest_idle_ms timeout between requests */
void hb_guest_timer(struct hb_gconn *g); /* the phase changed: its timeout (guest_idle_ms, request_idle_ms, hello_ms) */
void hb_guest_read_max(struct hb_gconn *g, size_t max);
void hb_guest_read_later(struct hb_gconn *g); /* the bytes already buffered, from the loop */
int hb_resolve(struct latch_http_sandbox *sb, const char *name, latch_http_resolved_cb cb, void *arg);
/*
 * How long the next of a name's addresses may take to connect (ms), from
 * one connect_ms for them all: FIRST starts it (*until), and while MORE
 * remain this one gets half of what is left.  0: none is left.
 */
uint32_t hb_connect_share(uint64_t *until, bool first, bool more, uint32_t connect_ms);

struct hb_uconn { /* an upstream connection: idle in its pool, or busy with an exchange */
	struct hb_uconn *next, **pprev; /* target->conns */
	struct hb_target *t;
	struct latch_http *h;
	struct bufferevent *bev;
	struct hb_exchange *x; /* NULL while idle */
	bool idle, connected, reused, got_bytes, done, skip_message, tls_failed, paused;
	bool send_pending; /* the request waits for the body bytes the guest already sent (hb_u_send) */
	enum hb_refusal fail;
	http_parser parser;
	char *head; /* the response head, as the upstream sent it (head_max bytes) */
	uint32_t head_len;
	struct hb_hdr hdr[HB_HEADERS_MAX]; /* its lines, as offsets into head */
	int n_hdr;
	bool head_in; /* the head of the message under way is read */
	uint32_t reason, reason_len;
};

struct hb_lookup { /* a resolution in flight; x is NULL once the exchange is gone */
	struct hb_exchange *x;
};

/* upstream.c */
int hb_target_init(struct latch_http *h, struct hb_target *t, const struct latch_http_upstream *u, char *err,
		   size_t errlen);
void hb_target_fini(struct hb_target *t); /* closes its connections; exchanges on them end with ERROR */
void hb_ctx_free_all(struct latch_http *h);
void hb_conn_free(struct hb_uconn *u);
void hb_conn_connected(struct hb_uconn *u); /* TLS is up: keep the session, send the request */
void hb_u_send(struct hb_uconn *u); /* the request now, in one SSL_write when it fits a record */
void hb_set_timeout(struct bufferevent *bev, uint32_t ms);
/* An idle pooled connection (unless fresh), or a new one; false when g is closing or gone. */
bool hb_acquire(struct hb_exchange *x, bool fresh);
/* U could not reach its address: free it and connect X to its target's next one (upstream.c: 0, 1, -1) */
int hb_conn_next_addr(struct hb_exchange *x, struct hb_uconn *u);
/* The exchange could not be forwarded: end it and answer the guest.  False when g is gone or closing. */
bool hb_exchange_fail(struct hb_exchange *x, enum hb_refusal r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same from a callback: then go on with a pipelined request if the connection stays. */
void hb_exchange_fail_async(struct hb_exchange *x, enum hb_refusal r, const char *what);

/* exchange.c */
void hb_build_request(struct hb_exchange *x, int64_t body_len); /* body_len >= 0: metered, that Content-Length */
/* response.c: an upstream connection's callbacks */
void hb_u_read(struct bufferevent *bev, void *arg);
void hb_u_write(struct bufferevent *bev, void *arg);
void hb_u_event(struct bufferevent *bev, short what, void *arg);
void hb_exchange_guest_drained(struct hb_exchange *x); /* the guest took our output: read the upstream again */
/* Build the upstream request and start it (an idle connection, or a new one). */
bool hb_exchange_start(struct hb_gconn *g, struct hb_route *r); /* false: g is closing or gone */
/* Guest body bytes arrived (parser callback), or the body ended. */
void hb_exchange_body(struct hb_exchange *x, const char *data, size_t len);
bool hb_exchange_body_done(struct hb_exchange *x); /* false: g is closing or gone */
bool hb_exchange_over_limit(struct hb_exchange *x); /* a metered body past its meter's body_max */
/* The 413 of a metered body over its limit, which it names; hb_refuse()'s answer. */
bool hb_exchange_refuse_large(struct hb_gconn *g, const struct hb_route *r);
bool hb_exchange_over_hold(const struct hb_exchange *x); /* its sandbox's metered bodies past metered_hold_max */
/* The 503 of a sandbox whose metered bodies in flight are at metered_hold_max; hb_refuse()'s answer. */
bool hb_exchange_refuse_held(struct hb_gconn *g);
/* Show the meter the response it has not seen yet (after the guest's write: it need not delay the guest). */
void hb_meter_later(struct hb_exchange *x);
/* End the exchange: audit, meter, return or close its upstream connection.  Frees x. */
void hb_exchange_end(struct hb_exchange *x, enum latch_http_end how);

/* local.c: /latch/... requests, answered by the sandbox's local() */
bool hb_local_path(const char *target, size_t len);
bool hb_local_start(struct hb_gconn *g); /* false: g is closing or gone */
void hb_local_body(struct latch_http_local *l, const char *data, size_t len);
bool hb_local_body_done(struct hb_gconn *g); /* the body is in: hand it over; false: g is gone */
bool hb_local_over_limit(const struct latch_http_local *l);
void hb_local_free(struct latch_http_local *l); /* the guest went away: local_gone() if it was handed over */
const char *hb_status_text(int status);

/* tunnel.c */
struct hb_tunnel;
bool hb_tunnel_start(struct hb_gconn *g); /* false: g is closing or gone */
void hb_tunnel_guest_read(struct hb_gconn *g);
void hb_tunnel_guest_drained(struct hb_gconn *g);
void hb_tunnel_guest_eof(struct hb_gconn *g);
bool hb_tunnel_waits_hello(const struct hb_tunnel *t); /* the 200 sent, its ClientHello not yet whole */
void hb_tunnel_free(struct hb_tunnel *t, const char *reason); /* audit and close its upstream side */

/*
 * A head written into memory of a bound from its pieces (cap); past it (n >
 * cap) nothing more is, and it is written again into its length.  printf
 * and an evbuffer_add a piece were a fifth of a request (callgrind).  The
 * request's head (exchange.c) and the response's (response.c).
 */
struct hb_w {
	char *p;
	size_t n, cap;
};

static inline void hb_w_put(struct hb_w *w, const void *s, size_t len)
{
	if (w->n + len <= w->cap)
		memcpy(w->p + w->n, s, len);
	w->n += len;
}

static inline void hb_w_str(struct hb_w *w, const char *s)
{
	hb_w_put(w, s, strlen(s));
}

static inline void hb_w_num(struct hb_w *w, unsigned long long v, unsigned base)
{
	char buf[24];
	int i = sizeof(buf);

	do
		buf[--i] = "0123456789abcdef"[v % base];
	while ((v /= base));
	hb_w_put(w, buf + i, sizeof(buf) - i);
}

#endif
