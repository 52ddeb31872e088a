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

#include "broker/broker.h"
#include "common/common.h"

int latchd_socket_path(char *buf, size_t len)
{
	return latch_path(buf, len, "run/latch/latchd.sock");
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int latchd_call(json_t *req, json_t **reply, int timeout_ms, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[sizeof(sa.sun_path)], buf[65536];
	long long deadline = now_ms() + timeout_ms;
	size_t have = 0;
	char *text, *line;
	int fd, rc;

	*reply = NULL;
	if (latchd_socket_path(path, sizeof(path)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "latchd socket path is too long");
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return latch_errf(err, errlen, -errno, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = -errno;
		close(fd);
		return latch_errf(err, errlen, rc, "latchd is not running (%s: %s); start it with `systemctl start latchd`",
				  path, strerror(-rc));
	}
	/* one line: the compact dump has no newline of its own */
	text = json_dumps(req, JSON_COMPACT);
	if (!text || !(line = malloc(strlen(text) + 2))) {
		free(text);
		close(fd);
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	}
	sprintf(line, "%s\n", text);
	explicit_bzero(text, strlen(text)); /* a kit request's keys */
	free(text);
	rc = 0;
	for (size_t off = 0, n = strlen(line); off < n;) {
		ssize_t w = send(fd, line + off, n - off, MSG_NOSIGNAL);

		if (w < 0) {
			rc = latch_errf(err, errlen, -errno, "latchd: send: %s", strerror(errno));
			break;
		}
		off += w;
	}
	explicit_bzero(line, strlen(line));
	free(line);
	while (!rc) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long long left = deadline - now_ms();
		ssize_t r;

		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			rc = latch_errf(err, errlen, -ETIMEDOUT, "latchd did not answer within %d s", timeout_ms / 1000);
			break;
		}
		r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		if (r <= 0) {
			rc = latch_errf(err, errlen, -EPROTO, "latchd closed the connection without an answer");
			break;
		}
		have += r;
		buf[have] = '\0';
		if (strchr(buf, '\n')) {
			json_error_t je;

			*reply = json_loads(buf, JSON_DISABLE_EOF_CHECK, &je);
			if (!*reply || !json_is_object(*reply))
				rc = latch_errf(err, errlen, -EPROTO, "latchd sent something that is not a JSON object");
			break;
		}
		if (have == sizeof(buf) - 1)
			rc = latch_errf(err, errlen, -EPROTO, "latchd's answer is too long");
	}
	close(fd);
	if (rc && *reply) {
		json_decref(*reply);
		*reply = NULL;
	}
	return rc;
}

json_t *latchd_ping(int timeout_ms)
{
	json_t *req = json_pack("{s:s}", "op", "ping"), *rep = NULL;
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
	json_t *req = json_pack("{s:s, s:s, s:s}", "op", "switch", "sandbox", name, "profile", profile);
	int rc = latchd_call(req, reply, 60000, err, errlen);

	json_decref(req);
	return rc;
}

int latchd_kit(const char *name, json_t *secrets, json_t **reply, char *err, size_t errlen)
{
	json_t *req = json_pack("{s:s, s:s}", "op", "kit", "sandbox", name);
	int rc;

	if (secrets)
		json_object_set(req, "secrets", secrets);
	rc = latchd_call(req, reply, 10000, err, errlen);
	json_decref(req);
	return rc;
}

int latchd_backend(const char *name, const char *cred, const char *alt, json_t **reply, char *err, size_t errlen)
{
	json_t *req = json_pack("{s:s, s:s, s:s, s:s}", "op", "backend", "sandbox", name, "credential", cred,
				"alternative", alt);
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
