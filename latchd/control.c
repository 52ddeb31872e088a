// SPDX-License-Identifier: GPL-2.0-only
/*
 * control.c - latchd's control socket: $LATCH_ROOT/run/latch/latchd.sock,
 * in a 0700 directory, 0600, and a peer whose uid (SO_PEERCRED) is not 0 is
 * closed at once.  One JSON request per line, one JSON reply per line
 * (ctl/ctl.h is the client side, docs/latchd.md the table of ops).  A
 * switch answers later, when its host names are in: until then nothing more
 * is read from that client, so replies never cross.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "latchd/latchd.h"
#include "latchd/room.h"

#define REQUEST_MAX 65536

struct client {
	struct latchd *ld;
	struct bufferevent *bev;
	struct client *next;
	bool waiting; /* a reply is pending (a switch) */
};

static void client_free(struct client *c)
{
	for (struct client **pp = &c->ld->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	latchd_rooms_client_gone(c->ld, c);
	/* a switch still running for this client must not answer into freed memory */
	for (struct sandbox *s = c->ld->sandboxes; s; s = s->next)
		if (s->sw && s->sw->client == c)
			s->sw->client = NULL;
	latchd_grant_client_gone(c->ld, c); /* nor a grant being resolved */
	bufferevent_free(c->bev);
	free(c);
}

void latchd_control_reply(struct client *c, json_t *obj)
{
	char *text;

	if (!c) {
		json_decref(obj);
		return;
	}
	text = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (text) {
		evbuffer_add_printf(bufferevent_get_output(c->bev), "%s\n", text);
		free(text);
	}
	c->waiting = false;
}

void latchd_control_reply_error(struct client *c, const char *fmt, ...)
{
	char msg[LATCH_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	latchd_control_reply(c, json_pack("{s:b, s:s}", "ok", 0, "error", msg));
}

void latchd_control_wait(struct client *c)
{
	c->waiting = true;
}

struct latchd *latchd_of_client(const struct client *c)
{
	return c->ld;
}

/* A refusal the caller can fix ("usage": true) or not. */
static void reply_refused(struct client *c, const char *err, bool usage)
{
	latchd_control_reply(c, json_pack("{s:b, s:s, s:b}", "ok", 0, "error", err, "usage", usage));
}

/* ---- the ops ---- */

static json_t *sandbox_json(struct sandbox *s)
{
	struct latch_resolver_stats st = { 0 };

	if (s->res)
		latch_resolver_stats(s->res, &st);
	return json_pack("{s:s, s:s?, s:b, s:b, s:i, s:i, s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:i, s:o}", "name", s->name,
			 "profile", s->have_profile ? s->prof.name : NULL, "uncontained",
			 s->have_profile && s->prof.open, "switching", s->sw != NULL, "hosts", s->n_hosts, "learned",
			 s->n_learned, "resolver", "queries", (json_int_t)st.queries, "answered",
			 (json_int_t)st.answered, "refused", (json_int_t)st.refused, "upstream_sent",
			 (json_int_t)st.upstream_sent, "cache_hits", (json_int_t)st.cache_hits, "failed",
			 (json_int_t)st.failed, "kit_entries", s->n_extra, "broker", latchd_broker_json(s));
}

static void op_ping(struct client *c, json_t *req)
{
	json_t *list = json_array();

	for (struct sandbox *s = c->ld->sandboxes; s; s = s->next)
		json_array_append_new(list, sandbox_json(s));
	latchd_control_reply(c, json_pack("{s:b, s:i, s:o}", "ok", 1, "pid", (int)getpid(), "sandboxes", list));
}

/* Answered by switch.c when the switch is committed or fails. */
static void op_switch(struct client *c, json_t *req)
{
	const char *name = json_string_value(json_object_get(req, "sandbox"));
	const char *pname = json_string_value(json_object_get(req, "profile"));
	char err[LATCH_ERR_MAX];
	struct latch_profile p;
	struct sandbox *s;
	int rc;

	if (!name || !pname)
		return latchd_control_reply_error(c, "switch needs \"sandbox\" and \"profile\"");
	latchd_sandboxes_scan(c->ld); /* a sandbox attached a moment ago */
	s = latchd_sandbox_find(c->ld, name);
	if (!s)
		return latchd_control_reply_error(c, "no sandbox '%s'", name);
	if (!s->res)
		return latchd_control_reply_error(c,
						  "%s: no resolver (the sandbox has no resolver address); named policy "
						  "needs one",
						  name);
	if (s->sw)
		return latchd_control_reply_error(c, "%s: a switch is already running; try again", name);
	if (latch_profile_name_check(pname, err, sizeof(err)))
		return reply_refused(c, err, true);
	rc = latchd_switch_load_profile(c->ld, pname, &p, err, sizeof(err));
	if (rc) /* an unknown profile is the caller's mistake; a bad file is the host's */
		return reply_refused(c, err, rc == -ENOENT);
	c->waiting = true;
	latchd_switch_begin(s, &p, c, false);
}

static void op_rescan(struct client *c, json_t *req)
{
	latchd_sandboxes_scan(c->ld);
	latchd_control_reply(c, json_pack("{s:b}", "ok", 1));
}

static void op_reload(struct client *c, json_t *req)
{
	char err[LATCH_ERR_MAX];

	if (latchd_reload_all(c->ld, err, sizeof(err)))
		return latchd_control_reply(c, json_pack("{s:b, s:s}", "ok", 0, "error", err));
	latchd_control_reply(c, json_pack("{s:b}", "ok", 1));
}

/* Each op of ctl/ctl.h's list, and the function that answers it. */
static void (*const op_handlers[LATCHD_OP_COUNT])(struct client *c, json_t *req) = {
	[LATCHD_OP_PING] = op_ping,
	[LATCHD_OP_RESCAN] = op_rescan,
	[LATCHD_OP_RELOAD] = op_reload,
	[LATCHD_OP_SWITCH] = op_switch,
	[LATCHD_OP_KIT] = latchd_broker_op_kit,
	[LATCHD_OP_BACKEND] = latchd_broker_op_backend,
	[LATCHD_OP_ROOM_OPEN] = latchd_room_op_open,
	[LATCHD_OP_ROOM_READY] = latchd_room_op_ready,
	[LATCHD_OP_ROOM_DONE] = latchd_room_op_done,
	[LATCHD_OP_GRANT] = latchd_grant_op_grant,
	[LATCHD_OP_GRANTS] = latchd_grant_op_grants,
	[LATCHD_OP_APPROVE] = latchd_grant_op_approve,
	[LATCHD_OP_DENY] = latchd_grant_op_deny,
	[LATCHD_OP_VERIFY_NAMES] = latchd_verify_op,
};

static void handle(struct client *c, json_t *req)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	int i = latchd_op_lookup(op);
	char known[256];

	if (!op)
		return latchd_control_reply_error(c, "request without \"op\"");
	if (i >= 0)
		return op_handlers[i](c, req);
	latchd_op_list(known, sizeof(known));
	latchd_control_reply_error(c, "unknown op '%s'; known: %s", op, known);
}

/* ---- the socket ---- */

/*
 * evbuffer_readln(), wiping the line's bytes in the buffer before they are
 * drained: a kit request's keys leave no copy in memory freed later.
 */
static char *readln_wiped(struct evbuffer *in, size_t *len)
{
	struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, NULL, EVBUFFER_EOL_LF);
	struct evbuffer_iovec v[16];
	size_t n, left;
	char *line;
	int nv;

	if (eol.pos < 0)
		return NULL;
	n = eol.pos;
	line = malloc(n + 1);
	if (!line)
		return NULL;
	evbuffer_copyout(in, line, n);
	line[n] = '\0';
	left = n + 1; /* and its LF */
	nv = evbuffer_peek(in, left, NULL, v, 16);
	for (int i = 0; i < nv && i < 16 && left; i++) {
		size_t k = v[i].iov_len < left ? v[i].iov_len : left;

		explicit_bzero(v[i].iov_base, k);
		left -= k;
	}
	evbuffer_drain(in, n + 1);
	*len = n;
	return line;
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char *line;
	size_t len;

	while (!c->waiting && (line = readln_wiped(in, &len))) {
		json_error_t je;
		json_t *req = json_loadb(line, len, 0, &je);

		/* a kit request carries keys: no copy of the line outlives it (jansson wipes what it frees) */
		explicit_bzero(line, len);
		free(line);
		if (!req || !json_is_object(req)) {
			json_decref(req);
			latchd_control_reply_error(c, "not a JSON object: %s", je.text);
			continue;
		}
		handle(c, req);
		json_decref(req);
	}
	if (evbuffer_get_length(in) > REQUEST_MAX)
		client_free(c);
}

static void on_conn_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		client_free(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
	struct latchd *ld = arg;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct client *c;

	/* root only: the directory is 0700 already; the peer's uid is checked too */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) || cred.uid != 0) {
		evutil_closesocket(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		evutil_closesocket(fd);
		return;
	}
	c->ld = ld;
	c->bev = bufferevent_socket_new(ld->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		free(c);
		evutil_closesocket(fd);
		return;
	}
	bufferevent_setcb(c->bev, on_read, NULL, on_conn_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->next = ld->clients;
	ld->clients = c;
}

int latchd_control_listen(struct latchd *ld, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[PATH_MAX];
	mode_t old;
	int rc;

	/* an op ctl/ctl.h names and nothing here answers would crash the first client to send it */
	for (int i = 0; i < LATCHD_OP_COUNT; i++)
		if (!op_handlers[i])
			return latch_errf(err, errlen, -ENOSYS, "op '%s' has no handler in latchd/control.c",
					  latchd_op_name(i));
	if (latchd_socket_path(ld->sock_path, sizeof(ld->sock_path)) || strlen(ld->sock_path) >= sizeof(sa.sun_path) ||
	    latch_path(dir, sizeof(dir), LATCH_RUN_DIR))
		return latch_errf(err, errlen, -ENAMETOOLONG, "socket path is too long");
	rc = latch_mkdirs(dir, 0700);
	if (rc)
		return latch_errf(err, errlen, rc, "%s: %s", dir, strerror(-rc));
	chmod(dir, 0700); /* made 0755 by another part of latch first, perhaps */
	unlink(ld->sock_path); /* a latchd killed before it could remove it */
	strcpy(sa.sun_path, ld->sock_path);
	old = umask(0177);
	ld->listener = evconnlistener_new_bind(ld->base, on_accept, ld, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
					       16, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (!ld->listener)
		return latch_errf(err, errlen, -errno, "%s: %s", ld->sock_path, strerror(errno));
	return 0;
}

/* Stop taking requests: the listener and its socket go, and every client. */
void latchd_control_close(struct latchd *ld)
{
	evconnlistener_free(ld->listener);
	unlink(ld->sock_path);
	while (ld->clients)
		client_free(ld->clients);
}
