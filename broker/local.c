// SPDX-License-Identifier: GPL-2.0-only
/*
 * local.c - the local endpoints: /latch/... on a sandbox's listener.
 *
 * These requests are latchd's own business (a grant ask), not a credential
 * route: no placeholder, no upstream, nothing forwarded.  The engine reads
 * the body into memory (bounded), hands the whole request to the sandbox's
 * local() callback, and then holds the connection - reading nothing more,
 * with no idle timeout - until the owner answers through
 * latch_http_local_answer().  That may be minutes later: a person decides.
 * If the guest leaves first, local_gone() tells the owner its handle died.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/engine.h"

#define LOCAL_BODY_MAX_DEFAULT 16384

struct latch_http_local {
	struct hb_gconn *g;
	struct evbuffer *body;
	size_t max;
	bool over; /* more body than max arrived */
	bool delivered; /* local() has it: the owner holds this handle */
	bool in_call; /* inside local(): an answer now is sent, and resumed by hb_local_body_done() */
	bool answered;
};

/* "/latch" or "/latch/..." (with or without a query string): the local endpoints' prefix, on a segment boundary. */
bool hb_local_path(const char *target, size_t len)
{
	return len >= 6 && !memcmp(target, "/latch", 6) && (len == 6 || target[6] == '/' || target[6] == '?');
}

bool hb_local_start(struct hb_gconn *g)
{
	struct latch_http_sandbox *sb = g->sb;
	const struct hb_head *hd = &g->head;
	bool body = hd->chunked || hd->content_length > 0;
	size_t max = sb->o.local_body_max ? sb->o.local_body_max : LOCAL_BODY_MAX_DEFAULT;
	struct latch_http_local *l;

	if (!sb->o.local)
		return hb_refuse(g, HB_LOCAL_NONE, "latch: this listener has no local endpoints");
	if (hd->content_length > (int64_t)max)
		return hb_refuse(g, HB_LOCAL_BODY,
				 "latch: the request body is larger than this endpoint takes (%zu "
				 "bytes); send a smaller one",
				 max);
	l = calloc(1, sizeof(*l));
	if (!l || !(l->body = evbuffer_new())) {
		free(l);
		return hb_refuse(g, HB_LOCAL_NONE, "latch: out of memory; try again");
	}
	l->g = g;
	l->max = max;
	g->l = l;
	g->state = body ? G_BODY : G_WAIT;
	if (body && hd->expect_continue) {
		evbuffer_add(bufferevent_get_output(g->bev), "HTTP/1.1 100 Continue\r\n\r\n", 25);
		hb_guest_flush(g);
	}
	return body ? true : hb_local_body_done(g);
}

void hb_local_body(struct latch_http_local *l, const char *data, size_t len)
{
	if (l->over || evbuffer_get_length(l->body) + len > l->max) {
		l->over = true;
		return;
	}
	evbuffer_add(l->body, data, len);
}

bool hb_local_over_limit(const struct latch_http_local *l)
{
	return l->over;
}

/* The target's path and query, split and NUL-terminated, with the content type. */
static void request_parts(const struct hb_head *hd, char *path, size_t plen, char *query, size_t qlen, char *ctype,
			  size_t clen)
{
	const char *q = memchr(hd->target, '?', hd->target_len);
	size_t n = q ? (size_t)(q - hd->target) : hd->target_len;
	const struct hb_header *ct = hb_head_get(hd, "content-type");

	snprintf(path, plen, "%.*s", (int)n, hd->target);
	snprintf(query, qlen, "%.*s", q ? (int)(hd->target_len - n - 1) : 0, q ? q + 1 : "");
	snprintf(ctype, clen, "%.*s", ct ? (int)ct->value_len : 0, ct ? ct->value : "");
}

bool hb_local_body_done(struct hb_gconn *g)
{
	struct latch_http_local *l = g->l;
	struct latch_http_sandbox *sb = g->sb;
	char path[512], query[512], ctype[128];
	struct latch_http_local_request rq;
	size_t n;

	/* the answer may take minutes: no idle timeout while the owner holds the request */
	hb_guest_idle(g, false);
	request_parts(&g->head, path, sizeof(path), query, sizeof(query), ctype, sizeof(ctype));
	evbuffer_add(l->body, "", 1); /* NUL-terminated for the owner's parser */
	n = evbuffer_get_length(l->body);
	rq = (struct latch_http_local_request){ .method = g->head.method,
						.path = path,
						.query = query,
						.body = (const char *)evbuffer_pullup(l->body, -1),
						.body_len = n - 1,
						.content_type = ctype,
						.peer = &g->peer };
	l->delivered = l->in_call = true;
	/* a guest pipelining while it waits gets a head's worth buffered, no more */
	hb_guest_read_max(g, sb->h->o.head_max);
	sb->o.local(sb->o.arg, l, &rq);
	l->in_call = false;
	if (!l->answered)
		return true; /* answered later: latch_http_local_answer() resumes the connection */
	/* answered at once: go on as a refusal does, in the caller's loop */
	g->l = NULL;
	evbuffer_free(l->body);
	free(l);
	if (g->close_after) {
		hb_gconn_close_when_flushed(g);
		return false;
	}
	g->state = G_HEAD;
	return true;
}

static void answer_write(struct hb_gconn *g, int status, const char *json)
{
	struct evbuffer *out = bufferevent_get_output(g->bev);
	size_t n = strlen(json);

	hb_guest_read_max(g, 0);
	if (!g->head.keep_alive)
		g->close_after = true;
	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			    "Cache-Control: no-store\r\n%s\r\n",
			    status, hb_status_text(status), n + 1, g->close_after ? "Connection: close\r\n" : "");
	evbuffer_add(out, json, n);
	evbuffer_add(out, "\n", 1);
	hb_guest_flush(g);
}

void latch_http_local_answer(struct latch_http_local *l, int status, const char *json)
{
	struct hb_gconn *g = l->g;

	answer_write(g, status, json);
	if (l->in_call) {
		l->answered = true;
		return;
	}
	g->l = NULL;
	evbuffer_free(l->body);
	free(l);
	hb_gconn_resume(g);
}

void hb_local_free(struct latch_http_local *l)
{
	struct hb_gconn *g = l->g;

	g->l = NULL;
	if (l->delivered && g->sb->o.local_gone)
		g->sb->o.local_gone(g->sb->o.arg, l);
	evbuffer_free(l->body);
	free(l);
}
