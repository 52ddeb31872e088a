// SPDX-License-Identifier: GPL-2.0-only
/*
 * agent_client.c - talk to a guest's latch agent over its virtio-serial
 * channel socket: ping it, run a command, relay the output.
 *
 * The guest is the untrusted side here.  Frames go through a fixed buffer
 * one maximum frame long, a length past LAGENT_MAX_PAYLOAD is a protocol
 * error, output beyond the limit is dropped on this side too, and waits
 * carry a deadline derived from the command's timeout.  Frames answering an
 * earlier request (a PONG to a repeated ping, the tail of a cancelled run)
 * are recognised by their id and skipped.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vm/agent_client.h"

#define HDR_LEN sizeof(struct lagent_hdr)
#define RBUF_LEN (HDR_LEN + LAGENT_MAX_PAYLOAD)
/* While waiting for a booting guest, ask again this often. */
#define PING_RESEND_MS 250

struct latch_agent {
	int fd;
	int lock_fd; /* flock on SOCK.lock: one client on the channel at a time */
	uint32_t next_id;
	uint16_t caps; /* LAGENT_CAP_*, from the agent's PONG (0: not pinged yet, or an older agent) */
	size_t start, end; /* unread bytes are rbuf[start..end) */
	uint64_t received; /* bytes read from the channel, for latch_agent_wait()'s report */
	uint8_t rbuf[RBUF_LEN];
	uint8_t wbuf[HDR_LEN + LAGENT_MAX_PAYLOAD];
};

/* Milliseconds left before deadline for poll(); deadline < 0 means none. */
static int poll_timeout(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - latch_now_ms();
	if (left <= 0)
		return 0;
	return left > 60000 ? 60000 : (int)left;
}

static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n = poll(&p, 1, poll_timeout(deadline));

	if (n < 0)
		return -errno;
	if (n == 0)
		return deadline >= 0 && latch_now_ms() >= deadline ? -ETIMEDOUT : 0;
	return 0;
}

static int connect_within(const char *sock_path, int64_t lock_wait_ms, struct latch_agent **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char lock[sizeof(sa.sun_path) + 8];
	struct latch_agent *a;
	int ret;

	*out = NULL;
	if (strlen(sock_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = -1;
	/*
	 * virtio-serial is one byte stream: a second client (latchd's periodic
	 * backup while someone runs `latch exec`) would interleave with the
	 * first.  Clients take turns on a lock beside the socket, waiting a
	 * bounded time for the one before them.
	 */
	snprintf(lock, sizeof(lock), "%s.lock", sock_path);
	a->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (a->lock_fd < 0) {
		ret = -errno;
		goto err;
	}
	for (int64_t until = latch_now_ms() + lock_wait_ms; flock(a->lock_fd, LOCK_EX | LOCK_NB);) {
		if (errno != EWOULDBLOCK || latch_now_ms() >= until) {
			ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
			goto err;
		}
		usleep(20 * 1000);
	}
	a->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (a->fd < 0) {
		ret = -errno;
		goto err;
	}
	if (connect(a->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto err;
	}
	/* Ids only need to differ from a previous client's on the same channel. */
	if (getrandom(&a->next_id, sizeof(a->next_id), GRND_NONBLOCK) != sizeof(a->next_id))
		a->next_id = (uint32_t)latch_now_ms() ^ (uint32_t)getpid();
	*out = a;
	return 0;
err:
	if (a->fd >= 0)
		close(a->fd);
	if (a->lock_fd >= 0)
		close(a->lock_fd);
	free(a);
	return ret;
}

int latch_agent_connect(const char *sock_path, struct latch_agent **out)
{
	return connect_within(sock_path, LATCH_AGENT_LOCK_WAIT_MS, out);
}

void latch_agent_close(struct latch_agent *a)
{
	if (!a)
		return;
	close(a->fd);
	close(a->lock_fd); /* releases the turn */
	free(a);
}

static int send_all(struct latch_agent *a, const uint8_t *buf, size_t n, int64_t deadline)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = send(a->fd, buf + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
		int ret;

		if (w > 0) {
			done += (size_t)w;
			continue;
		}
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		ret = wait_fd(a->fd, POLLOUT, deadline);
		if (ret)
			return ret;
	}
	return 0;
}

static int send_request(struct latch_agent *a, uint16_t type, uint32_t id, uint32_t len, int64_t deadline)
{
	struct lagent_hdr h = {
		.magic = htole32(LAGENT_MAGIC),
		.type = htole16(type),
		.id = htole32(id),
		.len = htole32(len),
	};

	memcpy(a->wbuf, &h, HDR_LEN);
	return send_all(a, a->wbuf, HDR_LEN + len, deadline);
}

/* Make n bytes available at rbuf + start.  -ECONNRESET when the channel closes. */
static int need(struct latch_agent *a, size_t n, int64_t deadline)
{
	while (a->end - a->start < n) {
		ssize_t r;
		int ret;

		if (a->start && RBUF_LEN - a->start < n) {
			memmove(a->rbuf, a->rbuf + a->start, a->end - a->start);
			a->end -= a->start;
			a->start = 0;
		}
		r = recv(a->fd, a->rbuf + a->end, RBUF_LEN - a->end, MSG_DONTWAIT);
		if (r > 0) {
			a->end += (size_t)r;
			a->received += (uint64_t)r;
			continue;
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		ret = wait_fd(a->fd, POLLIN, deadline);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Next whole frame: header into *h, payload left at rbuf + start + HDR_LEN
 * until the following call.  Bytes before a magic are skipped one at a time,
 * which is how a stream left mid-frame by an earlier client gets back in step.
 */
static int next_frame(struct latch_agent *a, struct lagent_hdr *h, const uint8_t **payload, int64_t deadline)
{
	int ret;

	for (;;) {
		ret = need(a, HDR_LEN, deadline);
		if (ret)
			return ret;
		memcpy(h, a->rbuf + a->start, HDR_LEN);
		if (le32toh(h->magic) == LAGENT_MAGIC)
			break;
		a->start++;
	}
	h->type = le16toh(h->type);
	h->flags = le16toh(h->flags);
	h->id = le32toh(h->id);
	h->len = le32toh(h->len);
	if (h->len > LAGENT_MAX_PAYLOAD)
		return -EPROTO;
	ret = need(a, HDR_LEN + h->len, deadline);
	if (ret)
		return ret;
	*payload = a->rbuf + a->start + HDR_LEN;
	a->start += HDR_LEN + h->len;
	return 0;
}

int latch_agent_ping(struct latch_agent *a, int timeout_ms, char *release, size_t len)
{
	int64_t deadline = timeout_ms < 0 ? -1 : latch_now_ms() + timeout_ms;
	uint32_t first = a->next_id;
	int ret;

	for (;;) {
		int64_t resend = latch_now_ms() + PING_RESEND_MS;
		int64_t until = deadline >= 0 && deadline < resend ? deadline : resend;
		uint32_t id = a->next_id++;

		ret = send_request(a, LAGENT_PING, id, 0, deadline);
		if (ret)
			return ret;
		for (;;) {
			struct lagent_pong pong;
			struct lagent_hdr h;
			const uint8_t *p;

			ret = next_frame(a, &h, &p, until);
			if (ret == -ETIMEDOUT && until != deadline)
				break; /* the guest may have missed it while booting */
			if (ret)
				return ret;
			/* Any of this call's pings will do; ids wrap, so compare by distance. */
			if (h.type != LAGENT_PONG || h.id - first > id - first)
				continue;
			if (h.len != sizeof(pong))
				return -EPROTO;
			memcpy(&pong, p, sizeof(pong));
			if (le32toh(pong.version) != LAGENT_VERSION)
				return -EPROTONOSUPPORT;
			a->caps = h.flags;
			if (release && len) {
				size_t n = strnlen(pong.release, sizeof(pong.release));

				n = n < len - 1 ? n : len - 1;
				memcpy(release, pong.release, n);
				release[n] = '\0';
			}
			return 0;
		}
	}
}

int latch_agent_wait(const char *sock_path, int timeout_ms, int (*alive)(void *arg), void *arg, char *release,
		     size_t len, struct latch_agent_wait_stats *st)
{
	int64_t t0 = latch_now_ms(), deadline = t0 + timeout_ms;
	int ret = -ETIMEDOUT;

	memset(st, 0, sizeof(*st));
	st->first_connect_ms = -1;
	while (latch_now_ms() < deadline) {
		int64_t left = deadline - latch_now_ms();
		struct latch_agent *a = NULL;

		ret = connect_within(sock_path, left, &a);
		if (ret == -EBUSY)
			st->lock_busy = true;
		if (!ret) {
			if (st->first_connect_ms < 0)
				st->first_connect_ms = latch_now_ms() - t0;
			st->connects++;
			left = deadline - latch_now_ms();
			if (left > LATCH_AGENT_SESSION_MS)
				left = LATCH_AGENT_SESSION_MS;
			ret = latch_agent_ping(a, left > 0 ? (int)left : 1, release, len);
			st->bytes_in += a->received;
			latch_agent_close(a);
			if (!ret)
				return 0;
		}
		st->last_error = ret;
		if (alive && (ret = alive(arg)))
			return ret;
		if (st->last_error != -ETIMEDOUT) /* a silent connection already waited; a refused one waits here */
			usleep(100 * 1000);
	}
	return -ETIMEDOUT;
}

static int write_all(int fd, const uint8_t *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };

				poll(&p, 1, -1);
				continue;
			}
			return -errno;
		}
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

static int build_exec(struct latch_agent *a, const char *const argv[], const struct latch_agent_exec_opts *opts,
		      uint32_t *len)
{
	struct lagent_exec ex = { 0 };
	size_t off = sizeof(ex);
	uint32_t argc = 0;

	for (; argv[argc]; argc++) {
		size_t n = strlen(argv[argc]) + 1;

		if (argc == LAGENT_MAX_ARGC || off + n > LAGENT_MAX_PAYLOAD)
			return -E2BIG;
		memcpy(a->wbuf + HDR_LEN + off, argv[argc], n);
		off += n;
	}
	if (!argc)
		return -EINVAL;
	for (uint32_t e = 0; opts && opts->env && opts->env[e]; e++) {
		size_t n = strlen(opts->env[e]) + 1;

		/* an agent that did not announce it would refuse the whole command */
		if (!(a->caps & LAGENT_CAP_ENV))
			return -EPROTONOSUPPORT;
		if (e == LAGENT_MAX_ENVC || off + n > LAGENT_MAX_PAYLOAD)
			return -E2BIG;
		memcpy(a->wbuf + HDR_LEN + off, opts->env[e], n);
		off += n;
		ex.flags = htole32(LAGENT_EXEC_ENV);
	}
	ex.timeout_ms = htole32(opts ? opts->timeout_ms : 0);
	ex.output_limit = htole32(opts ? opts->output_limit : 0);
	ex.argc = htole32(argc);
	memcpy(a->wbuf + HDR_LEN, &ex, sizeof(ex));
	*len = (uint32_t)off;
	return 0;
}

int latch_agent_exec(struct latch_agent *a, const char *const argv[], const struct latch_agent_exec_opts *opts,
		     int out_fd, int err_fd, struct latch_agent_result *res)
{
	uint32_t timeout = opts ? opts->timeout_ms : 0;
	uint64_t limit = opts && opts->output_limit ? opts->output_limit : LAGENT_OUTPUT_CAP;
	int64_t deadline = timeout ? latch_now_ms() + timeout + LATCH_AGENT_GRACE_MS : -1;
	uint32_t id = a->next_id++, len;
	int ret;

	memset(res, 0, sizeof(*res));
	if (limit > LAGENT_OUTPUT_CAP)
		limit = LAGENT_OUTPUT_CAP;
	ret = build_exec(a, argv, opts, &len);
	if (ret)
		return ret;
	ret = send_request(a, LAGENT_EXEC, id, len, deadline);
	if (ret)
		return ret;

	for (;;) {
		struct lagent_hdr h;
		const uint8_t *p;
		struct lagent_exit ee;
		struct lagent_error er;

		ret = next_frame(a, &h, &p, deadline);
		if (ret)
			return ret;
		if (h.id != id)
			continue;
		switch (h.type) {
		case LAGENT_STDOUT:
		case LAGENT_STDERR: {
			int fd = h.type == LAGENT_STDOUT ? out_fd : err_fd;
			uint64_t n = h.len;

			if (res->relayed + n > limit) {
				n = limit - res->relayed;
				res->flags |= LATCH_AGENT_HOST_TRUNCATED;
			}
			if (fd >= 0 && n) {
				ret = write_all(fd, p, (size_t)n);
				if (ret)
					return ret;
			}
			res->relayed += n;
			break;
		}
		case LAGENT_EXIT:
			if (h.len != sizeof(ee))
				return -EPROTO;
			memcpy(&ee, p, sizeof(ee));
			res->how = (int)le32toh(ee.how);
			res->code = (int32_t)le32toh((uint32_t)ee.code);
			res->flags |= le32toh(ee.flags) & (LAGENT_EXIT_TRUNCATED | LAGENT_EXIT_TIMED_OUT);
			res->duration_ms = le32toh(ee.duration_ms);
			res->out_bytes = le64toh(ee.out_bytes);
			if (res->how != LAGENT_EXITED && res->how != LAGENT_SIGNALED)
				return -EPROTO;
			return 0;
		case LAGENT_ERROR: {
			size_t mlen;
			int err;

			if (h.len < sizeof(er))
				return -EPROTO;
			memcpy(&er, p, sizeof(er));
			mlen = h.len - sizeof(er);
			mlen = mlen < sizeof(res->message) - 1 ? mlen : sizeof(res->message) - 1;
			memcpy(res->message, p + sizeof(er), mlen);
			res->message[mlen] = '\0';
			err = (int32_t)le32toh((uint32_t)er.err);
			return err > 0 && err < 4096 ? -err : -EPROTO;
		}
		default:
			return -EPROTO;
		}
	}
}

int latch_agent_status(const struct latch_agent_result *res)
{
	return res->how == LAGENT_SIGNALED ? 128 + res->code : res->code;
}

/* ---- by sandbox name ---- */

int latch_vm_agent_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_AGENT_SOCKET_FMT, name);
}

bool latch_vm_running(const char *name)
{
	char sock[PATH_MAX];

	return !latch_vm_agent_path(name, sock, sizeof(sock)) && access(sock, F_OK) == 0;
}

int latch_agent_open_sandbox(const char *name, int ping_ms, struct latch_agent **out, char *err, size_t errlen)
{
	char sock[PATH_MAX];
	int r;

	*out = NULL;
	if (latch_vm_agent_path(name, sock, sizeof(sock)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	r = latch_agent_connect(sock, out);
	if (!r)
		r = latch_agent_ping(*out, ping_ms, NULL, 0);
	if (r) {
		latch_agent_close(*out);
		*out = NULL;
		latch_errf(err, errlen, r, "the agent of %s does not answer (%s); is it up? see `latch ls`", name,
			   strerror(-r));
	}
	return r;
}

int latch_vm_exec(const char *name, const char *const argv[], const struct latch_vm_exec_opts *opts, int out_fd,
		  int err_fd, struct latch_vm_exec_result *res, char *err, size_t errlen)
{
	struct latch_agent_exec_opts eo = { 0 };
	struct latch_agent_result r;
	struct latch_agent *a;
	int ret;

	memset(res, 0, sizeof(*res));
	if (opts) {
		eo.timeout_ms = opts->timeout_ms;
		eo.output_limit = opts->output_limit;
		eo.env = opts->env;
	}
	ret = latch_agent_open_sandbox(name, 5000, &a, err, errlen);
	if (ret)
		return ret;
	res->answered = true;
	ret = latch_agent_exec(a, argv, &eo, out_fd, err_fd, &r);
	latch_agent_close(a); /* cancels a command still running */
	if (ret == -EINTR || ret == -ETIMEDOUT)
		return latch_errf(err, errlen, ret, "exec in %s: %s", name, strerror(-ret));
	if (ret == -EPROTONOSUPPORT)
		return latch_errf(err, errlen, ret,
				  "exec in %s: the guest's agent is too old to take the kit's environment; rebuild the "
				  "image (`latch image build --force`) and `latch down` and `latch up` the sandbox",
				  name);
	if (ret)
		return latch_errf(err, errlen, ret, "exec in %s: %s%s", name, strerror(-ret),
				  *r.message ? " (the agent refused the command)" : "");
	res->status = latch_agent_status(&r);
	res->signaled = r.how == LAGENT_SIGNALED;
	res->truncated = r.flags & (LAGENT_EXIT_TRUNCATED | LATCH_AGENT_HOST_TRUNCATED);
	res->timed_out = r.flags & LAGENT_EXIT_TIMED_OUT;
	res->duration_ms = r.duration_ms;
	return 0;
}
