// SPDX-License-Identifier: GPL-2.0-only
/*
 * agent.c - latch's guest agent: runs commands for `latch exec` inside the
 * default guest and streams their output back over virtio-serial.
 *
 * It is built static (gcc -static -Os) and runs as /sbin/latch-agent from
 * the initramfs, respawned by busybox init.  It finds the virtio-serial port
 * named org.latch.agent in /sys/class/virtio-ports (or takes a device path
 * as its only argument) and serves one request at a time.  The framing is
 * documented in vm/guest/agent_proto.h: 16-byte header {magic, type, flags, id,
 * len} then len bytes; EXEC carries {timeout_ms, output_limit, argc, flags}
 * and argv (and, with LAGENT_EXEC_ENV, the environment a kit gives the
 * sandbox); the answer is STDOUT/STDERR chunks then one EXIT.  A command
 * started with LAGENT_EXEC_STDIN or LAGENT_EXEC_PTY (`latch exec -i/-t`,
 * `latch shell`) also takes STDIN, STDIN_EOF, WINSZ and SIGNAL frames while
 * it runs; under a pty (posix_openpt: no libutil in a static build) it is a
 * session leader with the pty as its controlling terminal.
 *
 * Nothing here allocates: requests and frames live in static buffers sized
 * by LAGENT_MAX_PAYLOAD, and output past the limit is read and dropped, so
 * a command that prints forever costs a bounded amount of guest memory.
 *
 * The host end of a virtio-serial port comes and goes: while nobody is
 * connected, read() returns 0 and poll() says POLLHUP, so the agent sleeps
 * briefly and retries instead of spinning, and a hang-up during a command
 * kills that command (the requester is gone; nobody would see the result).
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h" /* latch_now_ms: common/clock.c is linked in alone */
#include "vm/guest/agent.h"

#define IDLE_SLEEP_MS 50 /* poll period while the host end is closed */
#define DRAIN_GRACE_MS 250 /* after the command exits, for its pipes to close */

extern char **environ;

static int port_fd = -1;
static int sig_fd = -1;
static uint8_t req[HDR_LEN + LAGENT_MAX_PAYLOAD + 1]; /* +1: a NUL after argv */
static uint8_t frame[HDR_LEN + LAGENT_MAX_PAYLOAD];
static char *cmd_argv[LAGENT_MAX_ARGC + 1];
static const char *cmd_cwd; /* NULL: /workspace, else / */

/* Every command's environment; the host's "NAME=VALUE"s (a kit's, LAGENT_EXEC_ENV) are added after them. */
static char *const base_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C",
};
#define N_BASE_ENV (sizeof(base_env) / sizeof(base_env[0]))
static char *cmd_env[N_BASE_ENV + LAGENT_MAX_ENVC + 1];

void logx(const char *fmt, ...)
{
	va_list ap;

	fputs("latch-agent: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static bool host_gone(void)
{
	struct pollfd p = { .fd = port_fd, .events = 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

/*
 * Read exactly n bytes.  Returns 0, or -EPIPE when the host end closed: the
 * session is over and whatever was half-read belongs to nobody.
 */
static int port_read(uint8_t *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(port_fd, buf + got, n - got);

		if (r > 0) {
			got += (size_t)r;
		} else if (r == 0) {
			return -EPIPE;
		} else if (errno == EAGAIN) {
			struct pollfd p = { .fd = port_fd, .events = POLLIN };

			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -errno;
		} else if (errno != EINTR) {
			return -errno;
		}
	}
	return 0;
}

/* Write all of buf, waiting for room; -EPIPE once the host end is gone. */
static int port_write(const uint8_t *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(port_fd, buf + done, n - done);

		if (w > 0) {
			done += (size_t)w;
		} else if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = port_fd, .events = POLLOUT };

			if (poll(&p, 1, -1) < 0 && errno != EINTR)
				return -errno;
			if ((p.revents & (POLLHUP | POLLERR)) && !(p.revents & POLLOUT))
				return -EPIPE;
		} else if (w < 0 && errno != EINTR) {
			return -EPIPE;
		}
	}
	return 0;
}

/* Send a frame whose payload the caller already put at frame + HDR_LEN. */
static int send_frame_flags(uint16_t type, uint16_t flags, uint32_t id, uint32_t len)
{
	struct lagent_hdr h = {
		.magic = htole32(LAGENT_MAGIC),
		.type = htole16(type),
		.flags = htole16(flags),
		.id = htole32(id),
		.len = htole32(len),
	};

	memcpy(frame, &h, HDR_LEN);
	return port_write(frame, HDR_LEN + len);
}

static int send_frame(uint16_t type, uint32_t id, uint32_t len)
{
	return send_frame_flags(type, 0, id, len);
}

static int send_error(uint32_t id, int err, const char *msg)
{
	struct lagent_error e = { .err = (int32_t)htole32((uint32_t)err) };
	size_t mlen = strlen(msg);

	memcpy(frame + HDR_LEN, &e, sizeof(e));
	memcpy(frame + HDR_LEN + sizeof(e), msg, mlen);
	return send_frame(LAGENT_ERROR, id, (uint32_t)(sizeof(e) + mlen));
}

static int send_pong(uint32_t id)
{
	struct lagent_pong p = {
		.version = htole32(LAGENT_VERSION),
		.max_payload = htole32(LAGENT_MAX_PAYLOAD),
	};
	struct utsname u;

	/* p is zeroed: a copy one short of the field stays NUL-terminated. */
	if (uname(&u) == 0)
		memcpy(p.release, u.release, strnlen(u.release, sizeof(p.release) - 1));
	memcpy(frame + HDR_LEN, &p, sizeof(p));
	return send_frame_flags(LAGENT_PONG, LAGENT_CAP_ENV | LAGENT_CAP_STDIN | LAGENT_CAP_PTY | LAGENT_CAP_CWD, id,
				sizeof(p));
}

/* Is S "NAME=VALUE" with a name of its own (not one of base_env's)? */
static bool env_entry_ok(const char *s)
{
	const char *eq = strchr(s, '=');

	if (!eq || eq == s)
		return false;
	for (size_t b = 0; b < N_BASE_ENV; b++)
		if (!strncmp(base_env[b], s, (size_t)(eq - s) + 1))
			return false;
	return true;
}

/*
 * Check that the payload is exactly argc NUL-terminated strings (and, with
 * env, "NAME=VALUE" strings after them; with cwd, an absolute directory
 * last) and point cmd_argv, cmd_env and cmd_cwd at them.  Returns argc, or
 * -EINVAL.
 */
static int parse_argv(uint8_t *p, uint32_t len, uint32_t argc, bool env, bool cwd)
{
	uint32_t i = 0, off = 0, e = N_BASE_ENV;

	if (argc == 0 || argc > LAGENT_MAX_ARGC || len == 0 || p[len - 1] != '\0')
		return -EINVAL;
	cmd_cwd = NULL;
	if (cwd) {
		uint32_t last = len - 1;

		while (last > 0 && p[last - 1] != '\0')
			last--;
		if (last == 0 || p[last] != '/')
			return -EINVAL;
		cmd_cwd = (const char *)p + last;
		len = last;
	}
	memcpy(cmd_env, base_env, sizeof(base_env));
	while (off < len) {
		char *str = (char *)p + off;

		off += (uint32_t)strnlen(str, len - off) + 1;
		if (i < argc) {
			cmd_argv[i++] = str;
			continue;
		}
		if (!env || e == N_BASE_ENV + LAGENT_MAX_ENVC || !env_entry_ok(str))
			return -EINVAL;
		cmd_env[e++] = str;
	}
	if (i != argc)
		return -EINVAL;
	cmd_argv[i] = NULL;
	cmd_env[e] = NULL;
	return (int)argc;
}

static void kill_group(pid_t pid)
{
	/* The child may not have reached setsid() yet: hit it directly too. */
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
}

/*
 * The command's side of the fork.  in_r: its stdin (-1: /dev/null); pty:
 * the pty's slave, which becomes stdin, stdout, stderr and the controlling
 * terminal (out_w and err_w are then unused).  All fds given are CLOEXEC:
 * dup2 makes the copies on 0..2 inheritable, the originals must not leak.
 */
static void __attribute__((noreturn)) child(int in_r, int out_w, int err_w, int pty)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	if (pty >= 0) {
		if (ioctl(pty, TIOCSCTTY, 0) < 0 || dup2(pty, 0) < 0 || dup2(pty, 1) < 0 || dup2(pty, 2) < 0)
			_exit(126);
	} else {
		if (in_r < 0)
			in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (in_r < 0 || dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
			_exit(126);
	}
	if (cmd_cwd && chdir(cmd_cwd) < 0) {
		dprintf(2, "latch-agent: cd %s: %s\n", cmd_cwd, strerror(errno));
		_exit(126);
	}
	/* The workspace is where the agent's work belongs, when it exists. */
	if (!cmd_cwd && chdir("/workspace") < 0 && chdir("/") < 0)
		_exit(126);
	environ = (char **)cmd_env;
	execvp(cmd_argv[0], cmd_argv);
	dprintf(2, "latch-agent: %s: %s\n", cmd_argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* Forward one read's worth of a pipe, or drop it past the limit. */
static int relay(struct run *r, int fd, uint16_t type, bool *open)
{
	ssize_t n = read(fd, frame + HDR_LEN, LAGENT_CHUNK);
	uint64_t room;

	if (n < 0 && errno == EIO) /* a pty master whose slave every process closed */
		n = 0;
	if (n < 0)
		return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
	if (n == 0) {
		*open = false;
		return 0;
	}
	r->out_bytes += (uint64_t)n;
	room = r->limit - r->sent;
	if ((uint64_t)n > room) {
		r->dropped += (uint64_t)n - room;
		r->truncated = true;
		n = (ssize_t)room;
	}
	if (n == 0)
		return 0;
	r->sent += (uint64_t)n;
	return send_frame(type, r->id, (uint32_t)n);
}

/* Read an exec request into R and the command's globals; -EINVAL with *why set. */
static int exec_parse(struct run *r, uint8_t *p, uint32_t len, const char **why)
{
	struct lagent_exec ex;
	uint32_t flags, off = sizeof(ex);

	if (len < sizeof(ex)) {
		*why = "exec: short request";
		return -EINVAL;
	}
	memcpy(&ex, p, sizeof(ex));
	flags = le32toh(ex.flags);
	if (flags & ~LAGENT_EXEC_FLAGS) {
		*why = "exec: unknown flags";
		return -EINVAL;
	}
	if (flags & LAGENT_EXEC_PTY) {
		if (len < off + sizeof(r->ws)) {
			*why = "exec: short request";
			return -EINVAL;
		}
		memcpy(&r->ws, p + off, sizeof(r->ws));
		off += sizeof(r->ws);
	}
	if (parse_argv(p + off, len - off, le32toh(ex.argc), flags & LAGENT_EXEC_ENV, flags & LAGENT_EXEC_CWD) < 0) {
		*why = "exec: malformed argv, environment or directory";
		return -EINVAL;
	}
	r->pty = flags & LAGENT_EXEC_PTY;
	r->interactive = flags & (LAGENT_EXEC_STDIN | LAGENT_EXEC_PTY);
	r->limit = le32toh(ex.output_limit);
	if (r->limit == 0 && r->interactive)
		r->limit = UINT64_MAX; /* streamed as it comes, never held */
	else if (r->limit == 0 || r->limit > LAGENT_OUTPUT_CAP)
		r->limit = LAGENT_OUTPUT_CAP;
	r->deadline = le32toh(ex.timeout_ms); /* relative until the command starts */
	return 0;
}

/*
 * Relay the command's output until it is reaped and its pipes are closed
 * (or a grace after it is reaped), killing it at its deadline or when the
 * requester leaves; feed an interactive command its input.  Returns 0 or
 * -errno; the command is reaped either way.
 */
static int exec_wait(struct run *r)
{
	int ret = 0;

	while (!r->reaped || r->out_open || r->err_open) {
		/* Backpressure: while its stdin is full, no frame is read from the port. */
		bool held = r->interactive && r->in_len;
		struct pollfd fds[5] = {
			{ .fd = port_fd, .events = held ? 0 : POLLIN },
			{ .fd = sig_fd, .events = POLLIN },
			{ .fd = r->out_open ? r->out : -1, .events = POLLIN },
			{ .fd = r->err_open ? r->err : -1, .events = POLLIN },
			{ .fd = held && r->in >= 0 ? r->in : -1, .events = POLLOUT },
		};
		int timeout = -1;
		uint64_t now = latch_now_ms();

		if (r->reaped) {
			/* Something the command left behind still holds its pipes. */
			if (now >= r->reaped_at + DRAIN_GRACE_MS)
				break;
			timeout = (int)(r->reaped_at + DRAIN_GRACE_MS - now);
		} else if (r->deadline && !r->timed_out) {
			if (now >= r->deadline) {
				kill_group(r->pid);
				r->timed_out = true;
				continue;
			}
			timeout = (int)(r->deadline - now);
		}
		if (poll(fds, 5, timeout) < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			kill_group(r->pid);
			break;
		}
		/*
		 * A requester that leaves makes the port hang up.  One that
		 * leaves and is replaced at once may flip host_connected back
		 * before we look, but the newcomer's first frame shows up here:
		 * clients send nothing while a command runs but its input, so any
		 * other frame also means the requester of this command is gone.
		 */
		if ((fds[0].revents & (POLLHUP | POLLERR)) || ((fds[0].revents & POLLIN) && !r->interactive)) {
			logx("%s; killing %s", fds[0].revents & POLLIN ? "new request" : "host hung up", cmd_argv[0]);
			ret = -EPIPE;
			kill_group(r->pid);
			break;
		}
		if ((fds[0].revents & POLLIN) && (ret = input_frame(r))) {
			logx("%s; killing %s", in_frame_held ? "new request" : "host hung up", cmd_argv[0]);
			kill_group(r->pid);
			break;
		}
		if (fds[4].revents)
			input_flush(r);
		if (fds[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sig_fd, &si, sizeof(si)) > 0)
				;
			if (!r->reaped && waitpid(r->pid, &r->status, WNOHANG) == r->pid) {
				r->reaped = true;
				r->reaped_at = latch_now_ms();
			}
		}
		if (fds[2].revents & (POLLIN | POLLHUP | POLLERR))
			ret = relay(r, r->out, LAGENT_STDOUT, &r->out_open);
		if (!ret && (fds[3].revents & (POLLIN | POLLHUP)))
			ret = relay(r, r->err, LAGENT_STDERR, &r->err_open);
		if (ret) {
			kill_group(r->pid);
			break;
		}
	}
	if (!r->reaped) {
		while (waitpid(r->pid, &r->status, 0) < 0 && errno == EINTR)
			;
	}
	return ret;
}

/* The exit frame: how the command ended, and what of its output was sent. */
static int send_exit(const struct run *r)
{
	struct lagent_exit ee = { 0 };

	if (WIFSIGNALED(r->status)) {
		ee.how = htole32(LAGENT_SIGNALED);
		ee.code = (int32_t)htole32((uint32_t)WTERMSIG(r->status));
	} else {
		ee.how = htole32(LAGENT_EXITED);
		ee.code = (int32_t)htole32((uint32_t)WEXITSTATUS(r->status));
	}
	ee.flags = htole32((r->truncated ? LAGENT_EXIT_TRUNCATED : 0) | (r->timed_out ? LAGENT_EXIT_TIMED_OUT : 0));
	ee.duration_ms = htole32((uint32_t)(latch_now_ms() - r->start));
	ee.out_bytes = htole64(r->out_bytes);
	ee.dropped = htole64(r->dropped);
	memcpy(frame + HDR_LEN, &ee, sizeof(ee));
	return send_frame(LAGENT_EXIT, r->id, sizeof(ee));
}

/* The pipes, or the pty, for R; fds[] are for do_exec() to close. */
static int exec_fds(struct run *r, int out[2], int err[2], int in[2], int *slave)
{
	int ret;

	if (r->pty) {
		ret = open_pty(&r->ws, &r->out, slave);
		if (ret)
			return ret;
		r->in = r->out;
		r->err_open = false;
		return 0;
	}
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return -errno;
	if (r->interactive && pipe2(in, O_CLOEXEC) < 0)
		return -errno;
	r->out = out[0];
	r->err = err[0];
	r->in = in[1]; /* r owns it from here: input_close() may close it early */
	in[1] = -1;
	return 0;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
}

static int do_exec(uint32_t id, uint8_t *p, uint32_t len)
{
	struct run r = { .id = id, .out_open = true, .err_open = true, .out = -1, .err = -1, .in = -1 };
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, in[2] = { -1, -1 }, slave = -1;
	const char *why;
	int ret;

	if (exec_parse(&r, p, len, &why))
		return send_error(id, EINVAL, why);
	/* A request left in the channel by a requester that already left. */
	if (host_gone())
		return -EPIPE;

	ret = exec_fds(&r, out, err, in, &slave);
	if (ret) {
		ret = send_error(id, -ret, r.pty ? "exec: pty" : "exec: pipe");
		goto out;
	}
	r.start = latch_now_ms();
	if (r.deadline)
		r.deadline += r.start;
	r.pid = fork();
	if (r.pid < 0) {
		ret = send_error(id, errno, "exec: fork");
		goto out;
	}
	if (r.pid == 0)
		child(in[0], out[1], err[1], slave);
	/* Only the command holds its ends: its exit is what closes them. */
	if (slave >= 0)
		close(slave);
	slave = -1;
	close(out[1]);
	close(err[1]);
	close(in[0]);
	out[1] = err[1] = in[0] = -1;
	fcntl(r.out, F_SETFL, O_NONBLOCK);
	if (!r.pty)
		fcntl(r.err, F_SETFL, O_NONBLOCK);
	if (r.in >= 0 && !r.pty)
		fcntl(r.in, F_SETFL, O_NONBLOCK);
	ret = exec_wait(&r);
	if (!ret)
		ret = send_exit(&r);
out:
	if (r.pty && r.out >= 0)
		close(r.out);
	if (!r.pty && r.in >= 0)
		close(r.in);
	if (slave >= 0)
		close(slave);
	close_pair(out);
	close_pair(err);
	close_pair(in);
	return ret;
}

/*
 * Read one frame into buf (req or in_frame).  A header without the magic
 * means we are out of step with the host (an earlier session died
 * mid-frame): slide one byte and look again.  Returns 0 or -EPIPE.
 */
int read_frame(uint8_t *buf, struct lagent_hdr *h)
{
	int ret = port_read(buf, HDR_LEN);

	while (!ret) {
		memcpy(h, buf, HDR_LEN);
		h->magic = le32toh(h->magic);
		h->type = le16toh(h->type);
		h->id = le32toh(h->id);
		h->len = le32toh(h->len);
		if (h->magic == LAGENT_MAGIC)
			break;
		memmove(buf, buf + 1, HDR_LEN - 1);
		ret = port_read(buf + HDR_LEN - 1, 1);
	}
	if (ret)
		return ret;
	if (h->len > LAGENT_MAX_PAYLOAD) {
		/* Can't hold it; answer, then resync on the next magic. */
		return send_error(h->id, EMSGSIZE, "bufuest too large");
	}
	ret = port_read(buf + HDR_LEN, h->len);
	buf[HDR_LEN + h->len] = '\0';
	return ret;
}

static void serve(void)
{
	for (;;) {
		struct lagent_hdr h;
		int ret = 0;

		if (in_frame_held) {
			/* The request that cancelled an interactive command; the NUL after it too. */
			memcpy(&h, in_frame, HDR_LEN);
			h.type = le16toh(h.type);
			h.id = le32toh(h.id);
			h.len = le32toh(h.len);
			memcpy(req, in_frame, HDR_LEN + h.len + 1);
			in_frame_held = false;
		} else {
			ret = read_frame(req, &h);
		}

		if (ret == -EPIPE) {
			/* Nobody on the host end: wait for the next connection. */
			sleep_ms(IDLE_SLEEP_MS);
			continue;
		}
		if (ret < 0) {
			logx("port: %s", strerror(-ret));
			sleep_ms(IDLE_SLEEP_MS);
			continue;
		}
		if (h.len > LAGENT_MAX_PAYLOAD)
			continue;
		switch (h.type) {
		case LAGENT_PING:
			send_pong(h.id);
			break;
		case LAGENT_EXEC:
			do_exec(h.id, req + HDR_LEN, h.len);
			break;
		case LAGENT_STDIN:
		case LAGENT_STDIN_EOF:
		case LAGENT_WINSZ:
		case LAGENT_SIGNAL:
			break; /* input sent before the host saw its command's EXIT */
		default:
			send_error(h.id, EOPNOTSUPP, "unknown request type");
			break;
		}
	}
}

/*
 * Find /dev/NAME for the port whose sysfs name is org.latch.agent.  Without
 * udev there is no /dev/virtio-ports/ symlink; devtmpfs has the vportNpM
 * node, and if even that is missing we make it from the sysfs dev numbers.
 */
static int find_port(char *path, size_t len)
{
	const char *base = "/sys/class/virtio-ports";
	DIR *d = opendir(base);
	struct dirent *de;
	int found = -ENOENT;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char buf[512], name[64];
		unsigned int maj, min;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		if ((size_t)snprintf(buf, sizeof(buf), "%s/%s/name", base, de->d_name) >= sizeof(buf))
			continue;
		f = fopen(buf, "re");
		if (!f)
			continue;
		if (!fgets(name, sizeof(name), f))
			name[0] = '\0';
		fclose(f);
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, LAGENT_PORT_NAME))
			continue;
		if ((size_t)snprintf(path, len, "/dev/%s", de->d_name) >= len)
			continue;
		found = 0;
		if (access(path, F_OK) == 0)
			break;
		f = NULL;
		if ((size_t)snprintf(buf, sizeof(buf), "%s/%s/dev", base, de->d_name) < sizeof(buf))
			f = fopen(buf, "re");
		if (f && fscanf(f, "%u:%u", &maj, &min) == 2 && mknod(path, S_IFCHR | 0600, makedev(maj, min)) < 0)
			found = -errno;
		if (f)
			fclose(f);
		break;
	}
	closedir(d);
	return found;
}

int main(int argc, char **argv)
{
	char path[128];
	sigset_t chld;
	bool told = false;

	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: latch-agent [DEVICE]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* SIGCHLD arrives through a signalfd, so poll() sees it without races. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sig_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sig_fd < 0) {
		logx("signalfd: %s", strerror(errno));
		return 1;
	}

	if (argc == 2 && strlen(argv[1]) >= sizeof(path)) {
		logx("%s: path too long", argv[1]);
		return 2;
	}
	for (;;) {
		int ret = 0;

		if (argc == 2)
			snprintf(path, sizeof(path), "%s", argv[1]);
		else
			ret = find_port(path, sizeof(path));
		if (!ret) {
			port_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
			if (port_fd >= 0)
				break;
			ret = -errno;
		}
		if (!told) {
			logx("waiting for port %s: %s", argc == 2 ? path : LAGENT_PORT_NAME, strerror(-ret));
			told = true;
		}
		/* The port's name arrives from the host a little after probe. */
		sleep_ms(200);
	}
	logx("serving on %s", path);
	serve();
}
