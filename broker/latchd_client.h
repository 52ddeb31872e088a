/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * latchd_client.h - the CLI's side of latchd's Unix socket.
 *
 * The socket is $LATCH_ROOT/run/latch/latchd.sock, root-only (the directory
 * is 0700, the socket 0600, and latchd checks the peer's uid).  The protocol
 * is one JSON object per line each way: a request {"op": ...} and its reply
 * {"ok": true, ...} or {"ok": false, "error": "one line"}.
 */
#ifndef LATCH_BROKER_LATCHD_CLIENT_H
#define LATCH_BROKER_LATCHD_CLIENT_H

#include <jansson.h>
#include <stddef.h>

int latchd_socket_path(char *buf, size_t len);

/*
 * Send req, wait up to timeout_ms for the reply.  Returns 0 with *reply set
 * (the caller decrefs it; "ok" may still be false), -ENOENT or -ECONNREFUSED
 * when latchd is not running, other -errno with a line in err.
 */
int latchd_call(json_t *req, json_t **reply, int timeout_ms, char *err, size_t errlen);
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
 * Where the active profile of sandbox NAME is kept:
 * $LATCH_ROOT/var/lib/latch/policy/NAME.profile, one line.
 */
int latch_profile_state_path(const char *name, char *buf, size_t len);
/* The stored profile name, or -ENOENT when the sandbox has none (no named policy). */
int latch_profile_state_read(const char *name, char *profile, size_t len);
/* Store it atomically (temp file, fsync, rename); "" removes it, and latchd's NAME.learned with it. */
int latch_profile_state_write(const char *name, const char *profile, char *err, size_t errlen);

/*
 * The policy lock of sandbox NAME ($LATCH_ROOT/run/latch/NAME.policy.lock):
 * taken by `latch egress allow|revoke` around its map writes and by latchd
 * around a switch (from reading the live generation for entries to carry to
 * the flip) and around each learned write, so that neither an allow is left
 * behind in the old generation nor a revoke undone by the carry or by a
 * learned answer's read-modify-write of the same address.  Waits up to 10 s.  Returns an fd to
 * pass to latch_policy_unlock(), or -errno with a line in err.
 */
int latch_policy_lock(const char *name, char *err, size_t errlen);
/* latch_policy_lock(), waiting up to wait_ms instead of 10 s. */
int latch_policy_lock_wait(const char *name, int wait_ms, char *err, size_t errlen);
void latch_policy_unlock(int fd);

#endif
