/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ctl.h - latchd's control protocol: the client side of its Unix socket.
 *
 * The socket is $LATCH_ROOT/run/latch/latchd.sock, root-only (the directory
 * is 0700, the socket 0600, and latchd checks the peer's uid).  The protocol
 * is one JSON object per line each way: a request {"op": ...} and its reply
 * {"ok": true, ...} or {"ok": false, "error": "one line"}.  A kit request
 * carries the keys of `secret: VAR` credentials: the buffers that held its
 * text are wiped on both ends.
 */
#ifndef LATCH_CTL_H
#define LATCH_CTL_H

#include <jansson.h>
#include <stddef.h>

int latchd_socket_path(char *buf, size_t len);

/*
 * The ops, named once (ctl/ops.c): latchd dispatches on this list and the
 * clients build their requests from it.  docs/latchd.md has each one's
 * fields and reply.
 */
enum latchd_op {
	LATCHD_OP_PING,
	LATCHD_OP_RESCAN,
	LATCHD_OP_RELOAD,
	LATCHD_OP_SWITCH,
	LATCHD_OP_KIT,
	LATCHD_OP_BACKEND,
	LATCHD_OP_ROOM_OPEN,
	LATCHD_OP_ROOM_READY,
	LATCHD_OP_ROOM_DONE,
	LATCHD_OP_GRANT,
	LATCHD_OP_GRANTS,
	LATCHD_OP_APPROVE,
	LATCHD_OP_DENY,
	LATCHD_OP_VERIFY_NAMES,
	LATCHD_OP_COUNT
};
/* OP's name on the wire, or NULL for no op */
const char *latchd_op_name(enum latchd_op op);
/* the op named NAME, or -1 */
int latchd_op_lookup(const char *name);
/* "ping, rescan, ...": every op, for an error line */
void latchd_op_list(char *buf, size_t len);
/* a new request {"op": OP's name} to add fields to (NULL for no op) */
json_t *latchd_request(enum latchd_op op);

/*
 * Send req, wait up to timeout_ms for the reply.  Returns 0 with *reply set
 * (the caller decrefs it; "ok" may still be false), -ENOENT or -ECONNREFUSED
 * when latchd is not running, other -errno with a line in err.
 */
int latchd_call(json_t *req, json_t **reply, int timeout_ms, char *err, size_t errlen);
/*
 * A connection kept for several requests, one at a time: what `latch run`
 * holds for the life of a room, so that latchd drops the room's services
 * when the connection goes (latch run killed).  latchd_connect() is NULL
 * with errno (ENOENT, ECONNREFUSED: latchd is not running) and a line in
 * err that names the fix; latchd_conn_call() is latchd_call() on it.
 */
struct latchd_conn;
struct latchd_conn *latchd_connect(char *err, size_t errlen);
int latchd_conn_call(struct latchd_conn *c, json_t *req, json_t **reply, int timeout_ms, char *err, size_t errlen);
void latchd_conn_close(struct latchd_conn *c);
/* Send REQ and wait for nothing (a request that asks for no reply). */
int latchd_conn_send(struct latchd_conn *c, json_t *req, char *err, size_t errlen);

/* {"op":"ping"}: latchd's reply (pid, sandboxes), or NULL when it does not answer. */
json_t *latchd_ping(int timeout_ms);
/*
 * {"op":"switch"}: have latchd switch sandbox NAME to PROFILE.  It looks the
 * profile's host names up first, so this waits up to a minute.  Returns as
 * latchd_call(); a refusal is a reply with "ok" false ("usage" true when the
 * profile is unknown or its name invalid).
 */
int latchd_switch(const char *name, const char *profile, json_t **reply, char *err, size_t errlen);
/*
 * {"op":"kit"}: have latchd serve sandbox NAME's kit as its kit state
 * (var/lib/latch/policy/NAME.kit) says now, with the keys in SECRETS (an
 * object {"CREDENTIAL" or "CREDENTIAL/ALTERNATIVE": "KEY"}, may be NULL)
 * beside those of its secret_files; no kit state, or a stopped one, closes
 * the sandbox's broker and wipes its keys.  The reply has "broker",
 * "missing" (the variables no key came for) and "egress_changed" (a switch
 * is needed to compose the kit's egress_allow).  Returns as latchd_call().
 */
int latchd_kit(const char *name, json_t *secrets, json_t **reply, char *err, size_t errlen);
/* {"op":"backend"}: switch credential CRED of NAME's kit to alternative ALT ("": its own upstream). */
int latchd_backend(const char *name, const char *cred, const char *alt, json_t **reply, char *err, size_t errlen);
/*
 * From now on, every block jansson frees in this process is wiped first: a
 * JSON value that held a key leaves no copy behind.  Both ends of a kit
 * request call it before they touch one.
 */
void latch_json_wipe_frees(void);
/* free() of a malloc'd block, wiped first (all of it: malloc_usable_size). */
void latch_wipe_free(void *p);

#endif
