// SPDX-License-Identifier: GPL-2.0-only
/*
 * client.c - one request to latchd over its root-only socket, and the
 * jansson allocator that wipes what it frees (for the requests that carry
 * keys).
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "common/common.h"

int latchd_socket_path(char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_SOCKET_FILE);
}

struct latchd_conn {
	int fd;
};

struct latchd_conn *latchd_connect(char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[sizeof(sa.sun_path)];
	struct latchd_conn *c;
	int fd, rc;

	if (latchd_socket_path(path, sizeof(path))) {
		latch_errf(err, errlen, -ENAMETOOLONG, "latchd socket path is too long");
		errno = ENAMETOOLONG;
		return NULL;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		latch_errf(err, errlen, -errno, "socket: %s", strerror(errno));
		return NULL;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = errno;
		close(fd);
		latch_errf(err, errlen, -rc, "latchd is not running (%s: %s); start it with `systemctl start latchd`",
			   path, strerror(rc));
		errno = rc;
		return NULL;
	}
	c = malloc(sizeof(*c));
	if (!c) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	c->fd = fd;
	return c;
}

void latchd_conn_close(struct latchd_conn *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c);
}

int latchd_conn_call(struct latchd_conn *c, json_t *req, json_t **reply, int timeout_ms, char *err, size_t errlen)
{
	long long deadline = latch_now_ms() + timeout_ms;
	char buf[65536], *text, *line;
	size_t have = 0;
	int rc = 0;

	*reply = NULL;
	/* one line: the compact dump has no newline of its own */
	text = json_dumps(req, JSON_COMPACT);
	if (!text || !(line = malloc(strlen(text) + 2))) {
		free(text);
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	}
	sprintf(line, "%s\n", text);
	explicit_bzero(text, strlen(text)); /* a kit request's keys */
	free(text);
	for (size_t off = 0, n = strlen(line); off < n;) {
		ssize_t w = send(c->fd, line + off, n - off, MSG_NOSIGNAL);

		if (w < 0) {
			rc = latch_errf(err, errlen, -errno, "latchd: send: %s", strerror(errno));
			break;
		}
		off += w;
	}
	explicit_bzero(line, strlen(line)); /* a room's or a sandbox's kit secrets ride on requests */
	free(line);
	/* one reply line; the connection may carry the next request afterwards, so read no further */
	while (!rc) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		long long left = deadline - latch_now_ms();
		ssize_t r;

		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			rc = latch_errf(err, errlen, -ETIMEDOUT, "latchd did not answer within %d s",
					timeout_ms / 1000);
			break;
		}
		char *nl;

		/* look first, then take up to the line's end only */
		r = recv(c->fd, buf + have, sizeof(buf) - have, MSG_PEEK);
		if (r <= 0) {
			rc = latch_errf(err, errlen, -EPROTO, "latchd closed the connection without an answer");
			break;
		}
		nl = memchr(buf + have, '\n', r);
		r = recv(c->fd, buf + have, nl ? (size_t)(nl - (buf + have)) + 1 : (size_t)r, 0);
		if (r <= 0) {
			rc = latch_errf(err, errlen, -EPROTO, "latchd closed the connection without an answer");
			break;
		}
		have += r;
		if (nl) {
			json_error_t je;

			*reply = json_loadb(buf, have - 1, 0, &je);
			if (!*reply || !json_is_object(*reply))
				rc = latch_errf(err, errlen, -EPROTO,
						"latchd sent something that is not a JSON object");
			break;
		}
		if (have == sizeof(buf))
			rc = latch_errf(err, errlen, -EPROTO, "latchd's answer is too long");
	}
	if (rc && *reply) {
		json_decref(*reply);
		*reply = NULL;
	}
	return rc;
}

int latchd_conn_send(struct latchd_conn *c, json_t *req, char *err, size_t errlen)
{
	char *text = json_dumps(req, JSON_COMPACT);
	size_t n = text ? strlen(text) : 0;
	int rc = 0;

	if (!text)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	text[n] = 0;
	for (size_t off = 0; off <= n;) { /* the text, then its newline */
		ssize_t w = off < n ? send(c->fd, text + off, n - off, MSG_NOSIGNAL) :
				      send(c->fd, "\n", 1, MSG_NOSIGNAL);

		if (w < 0) {
			rc = latch_errf(err, errlen, -errno, "latchd: send: %s", strerror(errno));
			break;
		}
		off += w;
	}
	free(text);
	return rc;
}

int latchd_call(json_t *req, json_t **reply, int timeout_ms, char *err, size_t errlen)
{
	struct latchd_conn *c = latchd_connect(err, errlen);
	int rc;

	*reply = NULL;
	if (!c)
		return -errno;
	rc = latchd_conn_call(c, req, reply, timeout_ms, err, errlen);
	latchd_conn_close(c);
	return rc;
}

json_t *latchd_ping(int timeout_ms)
{
	json_t *req = json_pack("{s:s}", "op", latchd_op_name(LATCHD_OP_PING)), *rep = NULL;
	char err[LATCH_ERR_MAX];

	if (latchd_call(req, &rep, timeout_ms, err, sizeof(err)) || !json_is_true(json_object_get(rep, "ok"))) {
		json_decref(rep);
		rep = NULL;
	}
	json_decref(req);
	return rep;
}

int latchd_switch(const char *name, const char *profile, json_t **reply, char *err, size_t errlen)
{
	json_t *req = json_pack("{s:s, s:s, s:s}", "op", latchd_op_name(LATCHD_OP_SWITCH), "sandbox", name, "profile",
				profile);
	int rc = latchd_call(req, reply, 60000, err, errlen);

	json_decref(req);
	return rc;
}

int latchd_kit(const char *name, json_t *secrets, json_t **reply, char *err, size_t errlen)
{
	json_t *req = json_pack("{s:s, s:s}", "op", latchd_op_name(LATCHD_OP_KIT), "sandbox", name);
	int rc;

	if (secrets)
		json_object_set(req, "secrets", secrets);
	rc = latchd_call(req, reply, 10000, err, errlen);
	json_decref(req);
	return rc;
}

int latchd_backend(const char *name, const char *cred, const char *alt, json_t **reply, char *err, size_t errlen)
{
	json_t *req = json_pack("{s:s, s:s, s:s, s:s}", "op", latchd_op_name(LATCHD_OP_BACKEND), "sandbox", name,
				"credential", cred, "alternative", alt);
	int rc = latchd_call(req, reply, 10000, err, errlen);

	json_decref(req);
	return rc;
}

static void *wipe_malloc(size_t n)
{
	return malloc(n);
}

void latch_wipe_free(void *p)
{
	if (p)
		explicit_bzero(p, malloc_usable_size(p));
	free(p);
}

void latch_json_wipe_frees(void)
{
	json_set_alloc_funcs(wipe_malloc, latch_wipe_free);
}
