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
 * sandbox); the answer is STDOUT/STDERR chunks then one EXIT.
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
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h" /* latch_now_ms: common/clock.c is linked in alone */
#include "vm/guest/agent_proto.h"

#define HDR_LEN sizeof(struct lagent_hdr)
#define IDLE_SLEEP_MS 50 /* poll period while the host end is closed */
#define DRAIN_GRACE_MS 250 /* after the command exits, for its pipes to close */

extern char **environ;

static int port_fd = -1;
static int sig_fd = -1;
static uint8_t req[HDR_LEN + LAGENT_MAX_PAYLOAD + 1]; /* +1: a NUL after argv */
static uint8_t frame[HDR_LEN + LAGENT_MAX_PAYLOAD];
static char *cmd_argv[LAGENT_MAX_ARGC + 1];

/* Every command's environment; the host's "NAME=VALUE"s (a kit's, LAGENT_EXEC_ENV) are added after them. */
static char *const base_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root",
	"LANG=C",
};
#define N_BASE_ENV (sizeof(base_env) / sizeof(base_env[0]))
static char *cmd_env[N_BASE_ENV + LAGENT_MAX_ENVC + 1];

static void logx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logx(const char *fmt, ...)
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
	return send_frame_flags(LAGENT_PONG, LAGENT_CAP_ENV, id, sizeof(p));
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
 * env, "NAME=VALUE" strings after them) and point cmd_argv and cmd_env at
 * them.  Returns argc, or -EINVAL.
 */
static int parse_argv(uint8_t *p, uint32_t len, uint32_t argc, bool env)
{
	uint32_t i = 0, off = 0, e = N_BASE_ENV;

	if (argc == 0 || argc > LAGENT_MAX_ARGC || len == 0 || p[len - 1] != '\0')
		return -EINVAL;
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

static void __attribute__((noreturn)) child(int out_w, int err_w)
{
	sigset_t none;
	int null_fd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	setsid();
	/* CLOEXEC: dup2 makes the copy on 0 inheritable; the original must not leak. */
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
		_exit(126);
	/* The workspace is where the agent's work belongs, when it exists. */
	if (chdir("/workspace") < 0 && chdir("/") < 0)
		_exit(126);
	environ = (char **)cmd_env;
	execvp(cmd_argv[0], cmd_argv);
	dprintf(2, "latch-agent: %s: %s\n", cmd_argv[0], strerror(errno));
	_exit(errno == ENOENT ? 127 : 126);
}

/* One command's run: its limits, its pipes and what became of it. */
struct run {
	uint32_t id;
	uint64_t limit, out_bytes, sent, dropped;
	bool truncated;
	pid_t pid;
	int out, err; /* the read ends of its stdout and stderr */
	bool out_open, err_open, reaped, timed_out;
	int status;
	uint64_t start, deadline, reaped_at;
};

/* Forward one read's worth of a pipe, or drop it past the limit. */
static int relay(struct run *r, int fd, uint16_t type, bool *open)
{
	ssize_t n = read(fd, frame + HDR_LEN, LAGENT_CHUNK);
	uint64_t room;

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

	if (len < sizeof(ex)) {
		*why = "exec: short request";
		return -EINVAL;
	}
	memcpy(&ex, p, sizeof(ex));
	if (le32toh(ex.flags) & ~LAGENT_EXEC_ENV) {
		*why = "exec: unknown flags";
		return -EINVAL;
	}
	if (parse_argv(p + sizeof(ex), len - (uint32_t)sizeof(ex), le32toh(ex.argc),
		       le32toh(ex.flags) & LAGENT_EXEC_ENV) < 0) {
		*why = "exec: malformed argv or environment";
		return -EINVAL;
	}
	r->limit = le32toh(ex.output_limit);
	if (r->limit == 0 || r->limit > LAGENT_OUTPUT_CAP)
		r->limit = LAGENT_OUTPUT_CAP;
	r->deadline = le32toh(ex.timeout_ms); /* relative until the command starts */
	return 0;
}

/*
 * Relay the command's output until it is reaped and its pipes are closed
 * (or a grace after it is reaped), killing it at its deadline or when the
 * requester leaves.  Returns 0 or -errno; the command is reaped either way.
 */
static int exec_wait(struct run *r)
{
	int ret = 0;

	while (!r->reaped || r->out_open || r->err_open) {
		struct pollfd fds[4] = {
			{ .fd = port_fd, .events = POLLIN },
			{ .fd = sig_fd, .events = POLLIN },
			{ .fd = r->out_open ? r->out : -1, .events = POLLIN },
			{ .fd = r->err_open ? r->err : -1, .events = POLLIN },
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
		if (poll(fds, 4, timeout) < 0) {
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
		 * clients send nothing while a command runs, so any input also
		 * means the requester of this command is gone.
		 */
		if (fds[0].revents & (POLLHUP | POLLERR | POLLIN)) {
			logx("%s; killing %s", fds[0].revents & POLLIN ? "new request" : "host hung up", cmd_argv[0]);
			ret = -EPIPE;
			kill_group(r->pid);
			break;
		}
		if (fds[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			while (read(sig_fd, &si, sizeof(si)) > 0)
				;
			if (!r->reaped && waitpid(r->pid, &r->status, WNOHANG) == r->pid) {
				r->reaped = true;
				r->reaped_at = latch_now_ms();
			}
		}
		if (fds[2].revents & (POLLIN | POLLHUP))
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

static int do_exec(uint32_t id, uint8_t *p, uint32_t len)
{
	struct run r = { .id = id, .out_open = true, .err_open = true };
	int out[2] = { -1, -1 }, err[2] = { -1, -1 };
	const char *why;
	int ret;

	if (exec_parse(&r, p, len, &why))
		return send_error(id, EINVAL, why);
	/* A request left in the channel by a requester that already left. */
	if (host_gone())
		return -EPIPE;

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		ret = send_error(id, errno, "exec: pipe");
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
		child(out[1], err[1]);
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	r.out = out[0];
	r.err = err[0];
	ret = exec_wait(&r);
	if (!ret)
		ret = send_exit(&r);
out:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	return ret;
}

/*
 * Read one frame into req.  A header without the magic means we are out of
 * step with the host (an earlier session died mid-frame): slide one byte
 * and look again.  Returns 0 or -EPIPE.
 */
static int read_frame(struct lagent_hdr *h)
{
	int ret = port_read(req, HDR_LEN);

	while (!ret) {
		memcpy(h, req, HDR_LEN);
		h->magic = le32toh(h->magic);
		h->type = le16toh(h->type);
		h->id = le32toh(h->id);
		h->len = le32toh(h->len);
		if (h->magic == LAGENT_MAGIC)
			break;
		memmove(req, req + 1, HDR_LEN - 1);
		ret = port_read(req + HDR_LEN - 1, 1);
	}
	if (ret)
		return ret;
	if (h->len > LAGENT_MAX_PAYLOAD) {
		/* Can't hold it; answer, then resync on the next magic. */
		return send_error(h->id, EMSGSIZE, "request too large");
	}
	ret = port_read(req + HDR_LEN, h->len);
	req[HDR_LEN + h->len] = '\0';
	return ret;
}

static void serve(void)
{
	for (;;) {
		struct lagent_hdr h;
		int ret = read_frame(&h);

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
