/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * broker.h - the credential broker's HTTP engine, hosted by latchd.
 *
 * One engine per process, on latchd's libevent event_base; one listener per
 * sandbox (its host address and broker_port).  Each credential of the
 * sandbox's kit is a route: `http://HOST:PORT/NAME/rest` is checked (path
 * spelling, method, path prefix, placeholder - in that order, the first
 * failing check answers) and forwarded over verified TLS to the route's
 * upstream as `/rest`, with the guest's auth headers removed and the secret
 * put in the configured header.  `CONNECT name:443` opens a name-exact TLS
 * tunnel to a name the sandbox's policy allows.  docs/broker.md has the
 * behaviour, the refusal lines and the audit reasons.
 *
 * Nothing here is thread-safe; everything runs on the event_base's thread.
 * Callbacks must not free the engine, the sandbox or the route that called
 * them.  Secrets are copied into locked, undumpable memory owned by the
 * engine and wiped when their route (or sandbox) goes.
 */
#ifndef LATCH_BROKER_H
#define LATCH_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

struct event_base;
struct latch_http;
struct latch_http_sandbox;

#define LATCH_HTTP_GUESTS_MAX 4
#define LATCH_HTTP_LISTEN_MAX 2 /* a host address of each family */
#define LATCH_HTTP_METHODS_MAX 16
#define LATCH_HTTP_PATHS_MAX 32
#define LATCH_HTTP_UPSTREAMS_MAX 8 /* the credential's own upstream and its alternatives */
#define LATCH_HTTP_FORMS_MAX 2 /* other headers an upstream's clients send its key in */
#define LATCH_HTTP_ROUTE_NAME_MAX 32

/* How a forwarded exchange ended (audit and meter). */
enum latch_http_end {
	LATCH_HTTP_END_COMPLETE, /* the whole response reached the guest */
	LATCH_HTTP_END_GUEST_CUT, /* the guest went away before the end */
	LATCH_HTTP_END_UPSTREAM_CUT, /* the upstream closed or reset mid-response */
	LATCH_HTTP_END_ERROR, /* TLS, timeout or protocol error (the guest got 502/504 or a cut) */
};
const char *latch_http_end_name(enum latch_http_end e);

/*
 * One decision, for the audit log.  kind is "route" (forwarded on a
 * credential route), "other" (a CONNECT tunnel) or "refused"; reason is a
 * stable text (NULL when nothing was refused); path never carries the query
 * string.  Requests are reported when they end, refusals when they are sent.
 */
struct latch_http_event {
	const char *sandbox;
	const char *kind;
	const char *route; /* credential name, or NULL */
	const char *upstream; /* the upstream's name (alternatives have one), or NULL */
	const char *host; /* upstream host or CONNECT name, or NULL */
	uint16_t port;
	const char *method; /* or NULL when the request could not be read */
	const char *path; /* without the query string, or NULL */
	int status; /* sent to the guest; 0 for a tunnel cut before its 200 */
	const char *reason;
	const char *end; /* latch_http_end_name() for forwarded requests and tunnels, else NULL */
	uint64_t bytes_in; /* body bytes from the guest (tunnel: all bytes) */
	uint64_t bytes_out; /* body bytes to the guest (tunnel: all bytes) */
	const struct latch_addr *peer;
};

/*
 * EV as the fields of an audit entry (a new JSON object, jansson's): status,
 * bytes_in, bytes_out, peer, and those of route, upstream, host, port,
 * method, path, end and why (the reason's text) that are set.
 */
struct json_t;
struct json_t *latch_http_event_fields(const struct latch_http_event *ev);

/*
 * The spend-cap seam (issue 12).  A route with a meter holds the complete
 * request body (up to body_max bytes) before it forwards, and shows it to
 * request(); a return of 0 forwards, LATCH_HTTP_METER_HOLD holds the
 * request until the meter calls latch_http_meter_resume() with rq->hold,
 * LATCH_HTTP_METER_FORBID refuses it with 403 (what the route never allows:
 * waiting changes nothing), anything else is refused with 429; either way
 * with the one line request() wrote into refusal ("latch: ...").  *token is handed back to every later call of
 * the same exchange.  response() sees the status and every decoded body
 * chunk, in order, just after the guest's write of it (data NULL, len 0 for
 * the head), all of them before end(); end() is called exactly once for
 * every exchange that request() allowed or held, however it ended (a held
 * exchange whose guest went away ends with LATCH_HTTP_END_GUEST_CUT; its
 * hold is then gone).  The route keeps its own copy of the struct;
 * release(arg), when set, is called once the route and all its exchanges
 * are gone (or at once when latch_http_route_add() refuses the route).
 */
#define LATCH_HTTP_METER_HOLD 1
#define LATCH_HTTP_METER_FORBID 2
struct latch_http_hold; /* a held exchange */
struct latch_http_meter_request {
	const char *route, *upstream, *method, *path; /* path without the query string */
	const void *body;
	size_t body_len;
	struct latch_http_hold *hold; /* for latch_http_meter_resume() after LATCH_HTTP_METER_HOLD */
};
struct latch_http_meter {
	void *arg;
	int (*request)(void *arg, const struct latch_http_meter_request *rq, void **token, char *refusal,
		       size_t refusal_len);
	void (*response)(void *arg, void *token, int status, const void *data, size_t len);
	void (*end)(void *arg, void *token, enum latch_http_end how);
	void (*release)(void *arg);
	size_t body_max; /* 0: the engine's metered_body_max; a larger body is refused with 413 */
};

/*
 * A held exchange goes on: refusal NULL forwards it, else it is refused
 * with 429 and that `latch:` line (and end() is called for it with
 * LATCH_HTTP_END_ERROR).  Only between request()'s LATCH_HTTP_METER_HOLD
 * and the exchange's end(); it may call the meter's end() for this
 * exchange before it returns.
 */
void latch_http_meter_resume(struct latch_http_hold *hold, const char *refusal);

/*
 * An upstream of a credential: the credential's own, or an alternative
 * (another provider, a local model server).  url is https://host[:port]
 * with no path.  secret (secret_len bytes, no CR/LF/NUL) is copied; when
 * secret is NULL, secret_var names the host variable that was missing and
 * requests get a refusal naming it; both NULL means the upstream takes no
 * credential (a local server).  header and scheme: the secret is sent as
 * `header: scheme secret` (scheme "Bearer " or "" as the kit says).
 * also (n_also): other forms its clients send the key in, taken as the
 * placeholder too (Anthropic's SDK sends `Authorization: Bearer` where
 * Claude Code sends `x-api-key`); the secret then goes upstream in the form
 * the request used, never in two.
 * ca_file: a PEM bundle to verify with instead of the system store.
 * base_path ("" or NULL: none) goes before the request's path, as in
 * `https://api.groq.com` + `/openai` for `/v1/chat/completions`.
 */
struct latch_http_upstream {
	const char *name; /* "" or NULL for the credential's own upstream */
	const char *url;
	const char *secret;
	size_t secret_len;
	const char *secret_var;
	const char *header;
	const char *scheme;
	const char *ca_file;
	const char *base_path; /* "/openai": absolute, no trailing '/' */
	struct latch_http_form {
		const char *header, *scheme;
	} also[LATCH_HTTP_FORMS_MAX];
	int n_also;
};

/*
 * A credential route.  methods are compared exactly (the kit folded them to
 * upper-case; none: every method but TRACE, as a kit without `methods`); paths are absolute prefixes matched on segment boundaries
 * (none: nothing is allowed).  placeholder is this sandbox's
 * `latch-placeholder-<hex>` for this credential.  upstreams[0] is used
 * until latch_http_route_switch() picks another.
 */
struct latch_http_route {
	const char *name; /* 1-32 of a-z 0-9 - */
	const char *placeholder;
	const char *methods[LATCH_HTTP_METHODS_MAX];
	int n_methods;
	const char *paths[LATCH_HTTP_PATHS_MAX];
	int n_paths;
	struct latch_http_upstream upstreams[LATCH_HTTP_UPSTREAMS_MAX];
	int n_upstreams;
	const struct latch_http_meter *meter; /* NULL: not metered; copied (release() says when arg is done with) */
};

/*
 * The name that a CONNECT asks for has been resolved: addrs (n of them) or
 * n = -1 and a reason.  A resolver calls it exactly once, later from the
 * event loop.  (The same shape as latchd's resolver lookups.)
 */
typedef void (*latch_http_resolved_cb)(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
				       const char *why);

/*
 * A local endpoint (docs/grants.md's ask is one): a request for /latch or
 * /latch/... on a sandbox's listener is never a credential route and never
 * forwarded.  It passes the head checks and the path's spelling (check 1);
 * its body is read (at most local_body_max bytes, else 413), and local()
 * gets it.  The connection then reads nothing more until
 * latch_http_local_answer() - at once, or much later (a person deciding).
 * If the guest goes away first, local_gone() is called and the handle is
 * dead.  Without local(), such a path is answered 404.  The engine audits
 * none of it: local()'s owner records what it decides.
 */
struct latch_http_local;
struct latch_http_local_request {
	const char *method;
	const char *path; /* "/latch/...", without the query string */
	const char *query; /* what followed '?', or "" */
	const char *body; /* body_len bytes, NUL-terminated */
	size_t body_len;
	const char *content_type; /* "" when none */
	const struct latch_addr *peer;
};
/* Answer with STATUS and a one-line JSON body (the handle is gone after). */
void latch_http_local_answer(struct latch_http_local *req, int status, const char *json);

/*
 * The sandbox's side.  name_allowed is required for CONNECT (NULL refuses
 * every CONNECT).  resolve NULL: the engine's own evdns (resolv.conf); it
 * resolves CONNECT names and upstream hosts, an upstream given as an
 * address too (the caller may admit it somewhere first; it answers with it).  Every address a CONNECT name
 * resolves to passes latch_addr_nonpublic() (the rebinding filter) before
 * it is used.  audit may be NULL.
 */
struct latch_http_sandbox_opts {
	const char *name;
	struct latch_addr listen[LATCH_HTTP_LISTEN_MAX]; /* the sandbox's host v4 and/or v6 address */
	int n_listen;
	uint16_t port;
	struct latch_addr guests[LATCH_HTTP_GUESTS_MAX]; /* the only sources served */
	int n_guests;
	void *arg;
	bool (*name_allowed)(void *arg, const char *name, uint16_t port); /* CONNECT NAME:PORT, over TCP */
	int (*resolve)(void *arg, const char *name, latch_http_resolved_cb cb, void *cbarg);
	void (*audit)(void *arg, const struct latch_http_event *ev);
	/* the local endpoints (above); NULL: none */
	void (*local)(void *arg, struct latch_http_local *req, const struct latch_http_local_request *rq);
	void (*local_gone)(void *arg, struct latch_http_local *req);
	size_t local_body_max; /* 0 = 16384 */
};

/* Engine-wide limits; 0 = the default in brackets. */
struct latch_http_opts {
	uint32_t head_max; /* request or response head bytes (16384) */
	uint32_t buffer_max; /* bytes queued per direction before reading pauses (65536) */
	uint32_t guest_idle_ms; /* a keep-alive guest connection with nothing to do (60000) */
	uint32_t request_idle_ms; /* a head or body begun, and nothing more from the guest (30000) */
	uint32_t hello_ms; /* a CONNECT tunnel's ClientHello after the 200, nothing more from the guest (10000) */
	uint32_t connect_ms; /* TCP + TLS to an upstream (10000) */
	uint32_t upstream_idle_ms; /* silence from an upstream mid-response: 504 / cut (300000) */
	uint32_t pool_idle_ms; /* an idle pooled upstream connection is closed after (60000) */
	int pool_max; /* idle upstream connections kept per upstream (32) */
	int conns_max; /* guest connections per sandbox; more are closed on accept (256) */
	/* metered request bodies a sandbox's requests hold at once, read and not yet answered (64 MiB) */
	uint32_t metered_hold_max;
	/* the largest metered request body, unless its meter says (32 MiB: Anthropic's request limit) */
	uint32_t metered_body_max;
};

/* NULL with errno set and one line in err. */
struct latch_http *latch_http_new(struct event_base *base, const struct latch_http_opts *o, char *err, size_t errlen);
/* Closes every sandbox, route and connection (meters get their end()). Accepts NULL. */
void latch_http_free(struct latch_http *h);
/*
 * metered_body_max and metered_hold_max again (0: the default), for the
 * requests that start from now on (latchd's reload of latch.conf).
 */
void latch_http_set_metered_limits(struct latch_http *h, uint32_t body_max, uint32_t hold_max);
/* request_idle_ms and hello_ms again (0: the default), for the waits that start from now on. */
void latch_http_set_timeouts(struct latch_http *h, uint32_t request_idle_ms, uint32_t hello_ms);

/* Open the sandbox's listeners (IP_FREEBIND: the addresses may not exist yet). */
struct latch_http_sandbox *latch_http_sandbox_new(struct latch_http *h, const struct latch_http_sandbox_opts *o,
						  char *err, size_t errlen);
/* Close its listener and connections, wipe its routes' secrets. Accepts NULL. */
void latch_http_sandbox_free(struct latch_http_sandbox *sb);

/*
 * Add a route (or replace the one of the same name: its connections are
 * closed first).  Everything is checked before anything changes; returns
 * 0 or -EINVAL/-ENOMEM with one line in err naming the field and the fix.
 */
int latch_http_route_add(struct latch_http_sandbox *sb, const struct latch_http_route *r, char *err, size_t errlen);
/* Close the route's connections and wipe its secrets. 0 or -ENOENT. */
int latch_http_route_remove(struct latch_http_sandbox *sb, const char *name);
/*
 * Send the route's next requests to its upstream named upstream ("" for
 * its own).  The sandbox's URL and placeholder don't change; requests in
 * flight finish where they started.  0, -ENOENT (with a line in err).
 */
int latch_http_route_switch(struct latch_http_sandbox *sb, const char *route, const char *upstream, char *err,
			    size_t errlen);

struct latch_http_stats {
	uint64_t accepted, requests, refused, forwarded, tunnels;
	uint64_t timeouts; /* guest connections closed by a wait's timeout (idle, request, hello) */
	uint64_t upstream_connects, upstream_reused;
	int guest_conns, upstream_conns, idle_upstream_conns;
};
void latch_http_stats(const struct latch_http *h, struct latch_http_stats *s);

#endif
