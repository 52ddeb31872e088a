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
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
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

/* Read what the channel has now.  1: got bytes, 0: none yet, -ECONNRESET when it closed. */
static int fill(struct latch_agent *a)
{
	ssize_t r;

	if (a->start) {
		memmove(a->rbuf, a->rbuf + a->start, a->end - a->start);
		a->end -= a->start;
		a->start = 0;
	}
	r = recv(a->fd, a->rbuf + a->end, RBUF_LEN - a->end, MSG_DONTWAIT);
	if (r > 0) {
		a->end += (size_t)r;
		a->received += (uint64_t)r;
		return 1;
	}
	if (r == 0)
		return -ECONNRESET;
	return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

/*
 * The next whole frame if one is buffered: 1 with the header in *h and the
 * payload left at *payload until the buffer is next filled; 0 when more
 * bytes are needed.  Bytes before a magic are skipped one at a time, which
 * is how a stream left mid-frame by an earlier client gets back in step.
 */
static int take_frame(struct latch_agent *a, struct lagent_hdr *h, const uint8_t **payload)
{
	uint32_t len;

	for (;;) {
		if (a->end - a->start < HDR_LEN)
			return 0;
		memcpy(h, a->rbuf + a->start, HDR_LEN);
		if (le32toh(h->magic) == LAGENT_MAGIC)
			break;
		a->start++;
	}
	len = le32toh(h->len);
	if (len > LAGENT_MAX_PAYLOAD)
		return -EPROTO;
	if (a->end - a->start < HDR_LEN + len)
		return 0;
	h->type = le16toh(h->type);
	h->flags = le16toh(h->flags);
	h->id = le32toh(h->id);
	h->len = len;
	*payload = a->rbuf + a->start + HDR_LEN;
	a->start += HDR_LEN + len;
	return 1;
}

/* The next whole frame, waiting for it until deadline. */
static int next_frame(struct latch_agent *a, struct lagent_hdr *h, const uint8_t **payload, int64_t deadline)
{
	for (;;) {
		int ret = take_frame(a, h, payload);

		if (ret)
			return ret < 0 ? ret : 0;
		ret = fill(a);
		if (ret < 0)
			return ret;
		if (!ret) {
			ret = wait_fd(a->fd, POLLIN, deadline);
			if (ret)
				return ret;
		}
	}
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

/* The terminal size of fd, for a pty in the guest; zeros (the guest leaves its own) when fd is none. */
static void tty_size(int fd, struct lagent_winsz *ws)
{
	struct winsize w;

	memset(ws, 0, sizeof(*ws));
	if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &w) == 0) {
		ws->rows = htole16(w.ws_row);
		ws->cols = htole16(w.ws_col);
		ws->xpixel = htole16(w.ws_xpixel);
		ws->ypixel = htole16(w.ws_ypixel);
	}
}

/* Copy one NUL-terminated string into the request at *off. */
static int put_string(struct latch_agent *a, size_t *off, const char *str)
{
	size_t n = strlen(str) + 1;

	if (*off + n > LAGENT_MAX_PAYLOAD)
		return -E2BIG;
	memcpy(a->wbuf + HDR_LEN + *off, str, n);
	*off += n;
	return 0;
}

/* What of opts the agent must have announced; -EPROTONOSUPPORT when it did not, -EINVAL for nonsense. */
static int exec_flags(const struct latch_agent *a, const struct latch_agent_exec_opts *opts, uint32_t *flags)
{
	unsigned int io = opts ? opts->io : 0;

	*flags = 0;
	if (io & ~(LATCH_AGENT_IO_STDIN | LATCH_AGENT_IO_TTY | LATCH_AGENT_IO_SIGNALS))
		return -EINVAL;
	/* SIGNAL frames are input: a command that takes none would be cancelled by them */
	if ((io & LATCH_AGENT_IO_SIGNALS) && !(io & (LATCH_AGENT_IO_STDIN | LATCH_AGENT_IO_TTY)))
		return -EINVAL;
	if (opts && opts->cwd && opts->cwd[0] != '/')
		return -EINVAL;
	if (opts && opts->env && opts->env[0] && !(a->caps & LAGENT_CAP_ENV))
		return -EPROTONOSUPPORT;
	if ((io & LATCH_AGENT_IO_STDIN) && !(a->caps & LAGENT_CAP_STDIN))
		return -EPROTONOSUPPORT;
	if ((io & LATCH_AGENT_IO_TTY) && !(a->caps & LAGENT_CAP_PTY))
		return -EPROTONOSUPPORT;
	if (opts && opts->cwd && !(a->caps & LAGENT_CAP_CWD))
		return -EPROTONOSUPPORT;
	*flags = (io & LATCH_AGENT_IO_STDIN ? LAGENT_EXEC_STDIN : 0) | (io & LATCH_AGENT_IO_TTY ? LAGENT_EXEC_PTY : 0) |
		 (opts && opts->env && opts->env[0] ? LAGENT_EXEC_ENV : 0) | (opts && opts->cwd ? LAGENT_EXEC_CWD : 0);
	return 0;
}

static int build_exec(struct latch_agent *a, const char *const argv[], const struct latch_agent_exec_opts *opts,
		      uint32_t *len)
{
	struct lagent_exec ex = { 0 };
	size_t off = sizeof(ex);
	uint32_t argc = 0, flags;
	int ret = exec_flags(a, opts, &flags);

	if (ret)
		return ret;
	if (flags & LAGENT_EXEC_PTY) {
		struct lagent_winsz ws;

		tty_size(opts->stdin_fd, &ws);
		memcpy(a->wbuf + HDR_LEN + off, &ws, sizeof(ws));
		off += sizeof(ws);
	}
	for (; argv[argc]; argc++)
		if (argc == LAGENT_MAX_ARGC || put_string(a, &off, argv[argc]))
			return -E2BIG;
	if (!argc)
		return -EINVAL;
	for (uint32_t e = 0; opts && opts->env && opts->env[e]; e++)
		if (e == LAGENT_MAX_ENVC || put_string(a, &off, opts->env[e]))
			return -E2BIG;
	if ((flags & LAGENT_EXEC_CWD) && put_string(a, &off, opts->cwd))
		return -E2BIG;
	ex.timeout_ms = htole32(opts ? opts->timeout_ms : 0);
	ex.output_limit = htole32(opts ? opts->output_limit : 0);
	ex.argc = htole32(argc);
	ex.flags = htole32(flags);
	memcpy(a->wbuf + HDR_LEN, &ex, sizeof(ex));
	*len = (uint32_t)off;
	return 0;
}

/* Where one run's frames go, and how much of its output may. */
struct exec_sink {
	uint32_t id;
	uint64_t limit;
	int out_fd, err_fd;
	bool escape_out, escape_err;
	struct latch_agent_result *res;
};

/*
 * The guest's bytes for a terminal it must not drive: every control
 * character but newline and tab in caret notation, as `cat -v` writes it
 * (ESC is ^[, so no escape sequence reaches the terminal: no title, no
 * clipboard, no cursor moved over latch's own lines).  UTF-8 passes.
 */
static int write_escaped(int fd, const uint8_t *p, size_t n)
{
	uint8_t out[2 * LAGENT_CHUNK];
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (o + 2 > sizeof(out)) {
			int ret = write_all(fd, out, o);

			if (ret)
				return ret;
			o = 0;
		}
		if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7f) {
			out[o++] = '^';
			out[o++] = p[i] ^ 0x40;
		} else {
			out[o++] = p[i];
		}
	}
	return write_all(fd, out, o);
}

/* One frame from the agent: 1 to go on, 0 when the command ended (EXIT), or -errno. */
static int on_frame(const struct exec_sink *k, const struct lagent_hdr *h, const uint8_t *p)
{
	struct latch_agent_result *res = k->res;
	struct lagent_exit ee;
	struct lagent_error er;

	if (h->id != k->id)
		return 1; /* a PONG to a repeated ping, the tail of a cancelled run */
	switch (h->type) {
	case LAGENT_STDOUT:
	case LAGENT_STDERR: {
		int fd = h->type == LAGENT_STDOUT ? k->out_fd : k->err_fd;
		bool escape = h->type == LAGENT_STDOUT ? k->escape_out : k->escape_err;
		uint64_t n = h->len;

		if (res->relayed + n > k->limit) {
			n = k->limit - res->relayed;
			res->flags |= LATCH_AGENT_HOST_TRUNCATED;
		}
		if (fd >= 0 && n) {
			int ret = escape ? write_escaped(fd, p, (size_t)n) : write_all(fd, p, (size_t)n);

			if (ret)
				return ret;
		}
		res->relayed += n;
		return 1;
	}
	case LAGENT_EXIT:
		if (h->len != sizeof(ee))
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

		if (h->len < sizeof(er))
			return -EPROTO;
		memcpy(&er, p, sizeof(er));
		mlen = h->len - sizeof(er);
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

/* A run that takes no input: the agent's frames until its EXIT. */
static int exec_plain(struct latch_agent *a, const struct exec_sink *k, int64_t deadline)
{
	for (;;) {
		struct lagent_hdr h;
		const uint8_t *p;
		int ret = next_frame(a, &h, &p, deadline);

		if (!ret)
			ret = on_frame(k, &h, p);
		if (ret <= 0)
			return ret;
	}
}

/*
 * An interactive run's outgoing side: frames queued in wbuf (the request is
 * sent by then), stdin read only while nothing is queued, so a guest that
 * does not take its input holds up our stdin, never our reading of its
 * output.
 */
struct exec_in {
	const struct latch_agent_exec_opts *opts;
	int in_fd; /* -1 once its EOF is queued */
	size_t off, len; /* queued bytes are wbuf[off..len) */
	int sig_fd;
	sigset_t old_mask;
	struct lagent_winsz ws; /* the size last sent */
};

/* Queue a frame; the caller put its payload at wbuf + len + HDR_LEN already when payload is NULL. */
static void queue_frame(struct latch_agent *a, struct exec_in *x, uint16_t type, uint32_t id, const void *payload,
			uint32_t plen)
{
	struct lagent_hdr h = {
		.magic = htole32(LAGENT_MAGIC),
		.type = htole16(type),
		.id = htole32(id),
		.len = htole32(plen),
	};

	if (x->off == x->len)
		x->off = x->len = 0;
	/* stdin is read only into an empty queue and control frames are small: this always fits */
	if (x->len + HDR_LEN + plen > sizeof(a->wbuf))
		return;
	if (payload)
		memcpy(a->wbuf + x->len + HDR_LEN, payload, plen);
	memcpy(a->wbuf + x->len, &h, HDR_LEN);
	x->len += HDR_LEN + plen;
}

static int flush_queue(struct latch_agent *a, struct exec_in *x)
{
	while (x->off < x->len) {
		ssize_t w = send(a->fd, a->wbuf + x->off, x->len - x->off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		x->off += (size_t)w;
	}
	return 0;
}

/* One read of stdin into a STDIN frame, or its end into STDIN_EOF. */
static int read_stdin(struct latch_agent *a, struct exec_in *x, uint32_t id)
{
	ssize_t n = read(x->in_fd, a->wbuf + HDR_LEN, LAGENT_CHUNK);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0 && errno != EIO) /* EIO: the terminal went away, an end like any other */
		return -errno;
	if (n > 0) {
		queue_frame(a, x, LAGENT_STDIN, id, NULL, (uint32_t)n);
		return 0;
	}
	queue_frame(a, x, LAGENT_STDIN_EOF, id, NULL, 0);
	x->in_fd = -1;
	return 0;
}

/* Signals that came: a new window size, or one to pass on to the command. */
static void read_signals(struct latch_agent *a, struct exec_in *x, uint32_t id)
{
	struct signalfd_siginfo si;

	while (read(x->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGWINCH) {
			struct lagent_winsz ws;

			tty_size(x->opts->stdin_fd, &ws);
			if (memcmp(&ws, &x->ws, sizeof(ws))) {
				x->ws = ws;
				queue_frame(a, x, LAGENT_WINSZ, id, &ws, sizeof(ws));
			}
		} else {
			struct lagent_signal sg = { .signo = (int32_t)htole32(si.ssi_signo) };

			queue_frame(a, x, LAGENT_SIGNAL, id, &sg, sizeof(sg));
		}
	}
}

/* Take the signals this run reads (SIGWINCH, and those it passes on) through a signalfd. */
static int signals_take(struct exec_in *x)
{
	sigset_t set;

	sigemptyset(&set);
	if (x->opts->io & LATCH_AGENT_IO_TTY)
		sigaddset(&set, SIGWINCH);
	if (x->opts->io & LATCH_AGENT_IO_SIGNALS) {
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		sigaddset(&set, SIGHUP);
		sigaddset(&set, SIGQUIT);
	}
	if (sigprocmask(SIG_BLOCK, &set, &x->old_mask) < 0)
		return -errno;
	x->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (x->sig_fd < 0) {
		int ret = -errno;

		sigprocmask(SIG_SETMASK, &x->old_mask, NULL);
		return ret;
	}
	return 0;
}

/* Give the signals back; one that came after the command ended is consumed, not delivered late. */
static void signals_give_back(struct exec_in *x)
{
	struct signalfd_siginfo si;

	while (read(x->sig_fd, &si, sizeof(si)) > 0)
		;
	close(x->sig_fd);
	sigprocmask(SIG_SETMASK, &x->old_mask, NULL);
}

/* A run that takes input: stdin, window sizes and signals go out while its output comes in. */
static int exec_interactive(struct latch_agent *a, const struct exec_sink *k, const struct latch_agent_exec_opts *opts,
			    int64_t deadline)
{
	struct exec_in x = { .opts = opts, .in_fd = opts->io & LATCH_AGENT_IO_STDIN ? opts->stdin_fd : -1 };
	int ret = signals_take(&x);

	if (ret)
		return ret;
	tty_size(opts->io & LATCH_AGENT_IO_TTY ? opts->stdin_fd : -1, &x.ws);
	if (x.in_fd < 0) /* a pty whose input we do not relay: end it at once */
		queue_frame(a, &x, LAGENT_STDIN_EOF, k->id, NULL, 0);
	for (;;) {
		struct lagent_hdr h;
		const uint8_t *p;
		struct pollfd fds[3] = {
			{ .fd = a->fd, .events = POLLIN | (x.off < x.len ? POLLOUT : 0) },
			{ .fd = x.in_fd >= 0 && x.off == x.len ? x.in_fd : -1, .events = POLLIN },
			{ .fd = x.sig_fd, .events = POLLIN },
		};
		bool ended = false;
		int n;

		while (!ended && (ret = take_frame(a, &h, &p)) == 1) {
			ret = on_frame(k, &h, p);
			ended = ret <= 0;
		}
		if (ret < 0 || ended)
			break;
		n = poll(fds, 3, poll_timeout(deadline));
		if (n < 0) {
			ret = -errno; /* EINTR: a signal the caller handles; it closes the connection */
			break;
		}
		if (n == 0 && deadline >= 0 && latch_now_ms() >= deadline) {
			ret = -ETIMEDOUT;
			break;
		}
		ret = 0;
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
			ret = fill(a);
		if (ret >= 0 && (fds[0].revents & POLLOUT))
			ret = flush_queue(a, &x);
		if (ret >= 0 && fds[1].revents)
			ret = read_stdin(a, &x, k->id);
		if (ret < 0)
			break;
		if (fds[2].revents & POLLIN)
			read_signals(a, &x, k->id);
	}
	signals_give_back(&x);
	return ret;
}

int latch_agent_exec(struct latch_agent *a, const char *const argv[], const struct latch_agent_exec_opts *opts,
		     int out_fd, int err_fd, struct latch_agent_result *res)
{
	uint32_t timeout = opts ? opts->timeout_ms : 0, len;
	bool interactive = opts && opts->io;
	uint64_t limit = opts && opts->output_limit ? opts->output_limit : LAGENT_OUTPUT_CAP;
	int64_t deadline = timeout ? latch_now_ms() + timeout + LATCH_AGENT_GRACE_MS : -1;
	struct exec_sink k = { .id = a->next_id++, .out_fd = out_fd, .err_fd = err_fd, .res = res };
	int ret;

	if (opts) {
		k.escape_out = opts->escape_out;
		k.escape_err = opts->escape_err;
	}
	memset(res, 0, sizeof(*res));
	if (limit > LAGENT_OUTPUT_CAP)
		limit = LAGENT_OUTPUT_CAP;
	/* an interactive command's output is streamed as it comes, never held: no cap unless asked */
	k.limit = interactive && !(opts && opts->output_limit) ? UINT64_MAX : limit;
	ret = build_exec(a, argv, opts, &len);
	if (ret)
		return ret;
	ret = send_request(a, LAGENT_EXEC, k.id, len, deadline);
	if (ret)
		return ret;
	return interactive ? exec_interactive(a, &k, opts, deadline) : exec_plain(a, &k, deadline);
}

int latch_agent_status(const struct latch_agent_result *res)
{
	return res->how == LAGENT_SIGNALED ? 128 + res->code : res->code;
}
