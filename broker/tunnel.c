// SPDX-License-Identifier: GPL-2.0-only
/*
 * tunnel.c - HTTPS_PROXY: `CONNECT name:443`, name-exact.
 *
 * The guest names a host, never an address: address literals in any
 * spelling are refused, the name must be one the sandbox's policy allows,
 * the broker resolves it itself and drops every answer the rebinding filter
 * refuses (latch_addr_nonpublic: loopback, private, link-local, metadata,
 * ...).  After the 200, the first bytes from the guest must be a TLS
 * ClientHello whose server name is the CONNECT name, so a tunnel opened to
 * one allowed name can't be used to reach another site on the same
 * (CDN) address.  Only then does a byte go upstream; from there on bytes
 * flow both ways, reading paused while buffer_max bytes wait.  The policy
 * is asked again before each read is passed on: a name a grant allowed is
 * cut at its next byte after the deadline, as the kernel cuts a
 * connection through a grant at its next packet.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/engine.h"
#include "common/common.h"

enum tstate { T_RESOLVING, T_CONNECTING, T_HELLO, T_OPEN };

struct hb_tunnel {
	struct hb_gconn *g;
	struct bufferevent *up;
	enum tstate state;
	char name[254];
	struct latch_addr addrs[8];
	int n, next;
	uint64_t connect_until; /* connect_ms, for every address tried (hb_connect_share) */
	uint64_t in, out;
	bool guest_eof, up_eof;
	struct hb_tlookup *lookup;
};

struct hb_tlookup {
	struct hb_tunnel *t;
};

static void t_audit(struct hb_tunnel *t, const char *reason, int status, const char *end)
{
	struct hb_gconn *g = t->g;

	hb_audit(g, reason ? "refused" : "other", NULL, NULL, t->name, 443, "CONNECT", NULL, status, reason, end, t->in,
		 t->out);
}

bool hb_tunnel_waits_hello(const struct hb_tunnel *t)
{
	return t->state == T_HELLO;
}

void hb_tunnel_free(struct hb_tunnel *t, const char *reason)
{
	if (t->lookup)
		t->lookup->t = NULL;
	if (t->state >= T_HELLO && !reason)
		t_audit(t, NULL, 200, t->up_eof || t->guest_eof ? "complete" : "guest-cut");
	if (t->up)
		bufferevent_free(t->up);
	t->g->t = NULL;
	free(t);
}

/* Refuse a tunnel before its 200 (an HTTP answer) or after it (a cut). */
static bool t_refuse(struct hb_tunnel *t, enum hb_refusal r, const char *fmt, const char *arg)
{
	struct hb_gconn *g = t->g;

	if (t->up) {
		bufferevent_free(t->up);
		t->up = NULL;
	}
	hb_tunnel_free(t, hb_refusal_reason(r)); /* hb_refuse() below writes the audit entry */
	return hb_refuse(g, r, fmt, arg);
}

/* Does the sandbox's policy still allow the name?  Else the tunnel is cut (g and t are gone). */
static bool still_allowed(struct hb_tunnel *t)
{
	struct latch_http_sandbox *sb = t->g->sb;

	if (sb->o.name_allowed && sb->o.name_allowed(sb->o.arg, t->name, 443))
		return true;
	t_refuse(t, HB_CONNECT_REVOKED, "%s", "");
	return false;
}

static void up_read(struct bufferevent *bev, void *arg);
static void up_write(struct bufferevent *bev, void *arg);
static void up_event(struct bufferevent *bev, short what, void *arg);

static void try_connect(struct hb_tunnel *t)
{
	struct latch_http *h = t->g->sb->h;
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} sa = { 0 };
	int salen;

	while (t->next < t->n) {
		uint32_t ms = hb_connect_share(&t->connect_until, !t->next, t->next + 1 < t->n, h->o.connect_ms);
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
		const struct latch_addr *a = &t->addrs[t->next++];

		if (!ms)
			break;
		if (t->up)
			bufferevent_free(t->up);
		t->up = bufferevent_socket_new(h->base, -1, BEV_OPT_CLOSE_ON_FREE);
		if (!t->up)
			break;
		if (a->family == AF_INET) {
			sa.v4 = (struct sockaddr_in){ .sin_family = AF_INET,
						      .sin_port = htons(443),
						      .sin_addr = a->v4 };
			salen = sizeof(sa.v4);
		} else {
			sa.v6 = (struct sockaddr_in6){ .sin6_family = AF_INET6,
						       .sin6_port = htons(443),
						       .sin6_addr = a->v6 };
			salen = sizeof(sa.v6);
		}
		bufferevent_setcb(t->up, up_read, up_write, up_event, t);
		bufferevent_set_timeouts(t->up, &tv, &tv);
		bufferevent_setwatermark(t->up, EV_READ, 0, h->o.buffer_max);
		bufferevent_setwatermark(t->up, EV_WRITE, h->o.buffer_max / 2, 0);
		t->state = T_CONNECTING;
		if (!bufferevent_socket_connect(t->up, (struct sockaddr *)&sa, salen))
			return;
	}
	t_refuse(t, HB_CONNECT_RESOLVE, "latch: cannot connect to %s port 443; it may be down", t->name);
}

static void t_resolved(void *arg, const char *name, const struct latch_addr *addrs, int n, uint32_t ttl,
		       const char *why)
{
	struct hb_tlookup *lk = arg;
	struct hb_tunnel *t = lk->t;
	int refused = 0;

	free(lk);
	if (!t)
		return;
	t->lookup = NULL;
	for (int i = 0; i < n; i++) {
		if (latch_addr_nonpublic(&addrs[i])) { /* the rebinding filter */
			refused++;
			continue;
		}
		if (t->n < 8)
			t->addrs[t->n++] = addrs[i];
	}
	if (!t->n) {
		/* a resolver with the same filter (latchd's) drops the addresses itself and says why */
		if (refused || (n < 0 && why && !strcmp(why, "rebinding")))
			t_refuse(t, HB_CONNECT_REBINDING,
				 "latch: %s resolves only to non-public addresses; the broker "
				 "does not connect there",
				 t->name);
		else
			t_refuse(t, HB_CONNECT_RESOLVE, "latch: %s did not resolve; check the name", t->name);
		return;
	}
	try_connect(t);
}

bool hb_tunnel_start(struct hb_gconn *g)
{
	struct latch_http_sandbox *sb = g->sb;
	struct hb_tunnel *t;
	struct hb_tlookup *lk;
	char name[254];
	enum hb_refusal r = hb_connect_target(g->head.target, g->head.target_len, name);

	switch (r) {
	case HB_OK:
		break;
	case HB_CONNECT_PORT:
		return hb_refuse(g, r, "latch: CONNECT goes only to port 443 of a name the sandbox may reach%s", "");
	case HB_CONNECT_LITERAL:
		return hb_refuse(g, r, "latch: CONNECT takes a host name, not an address; the broker resolves it%s",
				 "");
	default:
		return hb_refuse(g, r, "latch: CONNECT's target is not a host name%s", "");
	}
	/* the port is part of the match: a profile's x:8443 or git:22 does not open x:443 */
	if (!sb->o.name_allowed || !sb->o.name_allowed(sb->o.arg, name, 443))
		return hb_refuse(g, HB_CONNECT_DENIED,
				 "latch: %s port 443 is not in the sandbox's policy; add %s:443 to the "
				 "sandbox's profile or the kit's egress_allow (on the host)",
				 name, name);
	t = calloc(1, sizeof(*t));
	lk = calloc(1, sizeof(*lk));
	if (!t || !lk) {
		free(t);
		free(lk);
		return hb_refuse(g, HB_CONNECT_RESOLVE, "latch: out of memory; try again%s", "");
	}
	t->g = g;
	snprintf(t->name, sizeof(t->name), "%s", name);
	g->t = t;
	g->state = G_TUNNEL;
	sb->h->st.tunnels++;
	hb_guest_reading(g, false); /* nothing of the guest's is read before the 200 */
	lk->t = t;
	t->lookup = lk;
	if (hb_resolve(sb, name, t_resolved, lk)) {
		free(lk);
		t->lookup = NULL;
		return t_refuse(t, HB_CONNECT_RESOLVE, "latch: %s could not be looked up; try again", name);
	}
	return false; /* the tunnel owns the connection now */
}

/* Move what one side read to the other's output; true when the reader should pause. */
static bool pump(struct evbuffer *in, struct evbuffer *out, uint64_t *count, uint32_t max)
{
	*count += evbuffer_get_length(in);
	evbuffer_add_buffer(out, in);
	return evbuffer_get_length(out) > max; /* resumed by the other side's write callback */
}

/* Both sides are done when each has seen the other's end and flushed it. */
static void maybe_done(struct hb_tunnel *t)
{
	struct hb_gconn *g = t->g;

	if (t->up_eof && !evbuffer_get_length(bufferevent_get_output(g->bev))) {
		hb_gconn_free(g);
		return;
	}
	if (t->guest_eof && t->up && !evbuffer_get_length(bufferevent_get_output(t->up)))
		shutdown(bufferevent_getfd(t->up), SHUT_WR);
}

void hb_tunnel_guest_read(struct hb_gconn *g)
{
	struct hb_tunnel *t = g->t;
	struct evbuffer *in = bufferevent_get_input(g->bev);
	char sni[254];
	int ret;

	if ((t->state == T_HELLO || t->state == T_OPEN) && evbuffer_get_length(in) && !still_allowed(t))
		return;
	if (t->state == T_HELLO) {
		size_t len = evbuffer_get_length(in);

		ret = hb_client_hello_sni(evbuffer_pullup(in, len), len, sni);
		if (ret == -EAGAIN && len < 16384 + 5 && !t->guest_eof)
			return;
		if (ret == -EACCES) { /* the name checked would not be the name served */
			t_refuse(t, HB_CONNECT_ECH, "%s", "");
			return;
		}
		if (ret) {
			t_refuse(t, HB_CONNECT_NOT_TLS, "%s", "");
			return;
		}
		if (strcmp(sni, t->name)) {
			t_refuse(t, HB_CONNECT_SNI, "%s", "");
			return;
		}
		t->state = T_OPEN;
		hb_guest_timer(g); /* no hello_ms from here: a tunnel's silence is its own */
		bufferevent_enable(t->up, EV_READ);
	}
	if (t->state != T_OPEN)
		return;
	if (pump(in, bufferevent_get_output(t->up), &t->in, g->sb->h->o.buffer_max))
		hb_guest_reading(g, false);
	maybe_done(t);
}

void hb_tunnel_guest_eof(struct hb_gconn *g)
{
	struct hb_tunnel *t = g->t;

	t->guest_eof = true;
	if (t->state == T_HELLO || t->state == T_OPEN) {
		hb_tunnel_guest_read(g); /* what is left, then a half-close towards the upstream */
		return;
	}
	hb_gconn_free(g);
}

void hb_tunnel_guest_drained(struct hb_gconn *g)
{
	struct hb_tunnel *t = g->t;

	if (t->up && !t->up_eof && t->state == T_OPEN)
		bufferevent_enable(t->up, EV_READ);
	maybe_done(t);
}

/* The upstream's bytes to the guest; false when the tunnel was cut (t and g are gone). */
static bool up_pump(struct hb_tunnel *t)
{
	struct evbuffer *in = bufferevent_get_input(t->up);

	if (t->state != T_OPEN || !evbuffer_get_length(in))
		return true;
	if (!still_allowed(t))
		return false;
	if (pump(in, bufferevent_get_output(t->g->bev), &t->out, t->g->sb->h->o.buffer_max))
		bufferevent_disable(t->up, EV_READ);
	hb_guest_flush(t->g);
	return true;
}

static void up_read(struct bufferevent *bev, void *arg)
{
	up_pump(arg);
}

static void up_write(struct bufferevent *bev, void *arg)
{
	struct hb_tunnel *t = arg;
	struct hb_gconn *g = t->g;

	if (t->state == T_OPEN && !t->guest_eof)
		hb_guest_reading(g, true);
	maybe_done(t);
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct hb_tunnel *t = arg;
	struct hb_gconn *g = t->g;
	int one = 1;

	if (what & BEV_EVENT_CONNECTED) {
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		bufferevent_set_timeouts(bev, NULL, NULL);
		t->state = T_HELLO;
		evbuffer_add(bufferevent_get_output(g->bev), "HTTP/1.1 200 Connection established\r\n\r\n", 39);
		hb_guest_flush(g);
		hb_guest_reading(g, true);
		if (evbuffer_get_length(bufferevent_get_input(g->bev)))
			hb_tunnel_guest_read(g);
		return;
	}
	if (t->state == T_CONNECTING) { /* the next address, or the refusal */
		try_connect(t);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		t->up_eof = true;
		if (!up_pump(t))
			return;
		bufferevent_disable(bev, EV_READ);
		maybe_done(t);
		return;
	}
	hb_gconn_free(g); /* a reset or an error: nothing to finish */
}
