// SPDX-License-Identifier: GPL-2.0-only
/*
 * agent_selftest.c - drive a booted guest's agent through vm/agent_client.c
 * and check the answers: the manual proof behind selftests/agent_proof.sh,
 * and the seed of the guest tests in selftests/.
 *
 *   agent_selftest SOCK [BOOT_TIMEOUT_MS]
 *   agent_selftest --local AGENT
 *
 * Waits for the agent to answer (printing how long that took from this
 * program's start, i.e. roughly from the guest's power-on when started right
 * after qemu), then runs a fixed list of commands and prints a transcript.
 * Exits 0 when every check held, 1 otherwise.
 *
 * --local runs the agent binary AGENT on this host instead, as root, its
 * port a pty in raw mode (a byte stream like virtio-serial) that a relay
 * here joins to a Unix socket in a temp dir: the protocol, stdin, the pty,
 * window sizes and signals are tested in seconds without a guest.  The
 * mock is the port only (a pty, where a guest has virtio-serial; the relay
 * never hangs the port up, so only the any-frame rule cancels there); the
 * agent, its commands and the client are the real ones.  Output is KTAP
 * for selftests/run.sh (selftests/live_agent.sh).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "vm/agent_client.h"

static int failures, checks;
static bool local_mode; /* KTAP: results as "ok N", the transcript as "# " lines */
static bool line_start = true;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The transcript; under --local every line of it a KTAP comment. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	for (char *p = buf; *p;) {
		char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);

		if (local_mode && line_start)
			fputs("# ", stdout);
		for (size_t i = 0; i < n; i++) /* guest bytes: nothing that moves a terminal */
			putchar(p[i] == '\n' || p[i] == '\t' || (unsigned char)p[i] >= 0x20 ? p[i] : '?');
		line_start = nl != NULL;
		p += n;
	}
	fflush(stdout);
}

/* Read back what a memfd collected, NUL-terminated, at most len - 1 bytes. */
static size_t slurp(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	n = n < 0 ? 0 : n;
	buf[n] = '\0';
	/* Rewind too: the next run writes from the file offset, not from 0. */
	if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		perror("memfd reset");
	return (size_t)n;
}

static void check(bool ok, const char *what)
{
	checks++;
	if (!ok)
		failures++;
	if (local_mode) {
		if (!line_start)
			say("\n");
		printf("%sok %d %s\n", ok ? "" : "not ", checks, what);
		fflush(stdout);
	} else {
		say("  %s %s\n", ok ? "ok  " : "FAIL", what);
	}
}

struct want {
	const char *name; /* under --local, the result's name */
	const char *const *argv;
	struct latch_agent_exec_opts opts;
	int ret; /* expected return of latch_agent_exec */
	int status; /* expected shell-style status */
	unsigned int flags; /* flags that must be set */
	const char *out; /* expected stdout, NULL: don't care */
	const char *out_has; /* a string stdout must contain, NULL: don't care */
	const char *err; /* expected stderr prefix, NULL: don't care */
};

static void run(struct latch_agent *a, int out_fd, int err_fd, const struct want *w)
{
	struct latch_agent_result res;
	char out[4096], err[4096], what[200];
	long long t0 = now_ms();
	int ret;

	say("$");
	for (int i = 0; w->argv[i]; i++)
		say(strchr(w->argv[i], ' ') ? " '%s'" : " %s", w->argv[i]);
	if (w->opts.timeout_ms || w->opts.output_limit || w->opts.io || w->opts.cwd)
		say("    [timeout %u ms, output limit %u, io 0x%x, cwd %s]", w->opts.timeout_ms, w->opts.output_limit,
		    w->opts.io, w->opts.cwd ? w->opts.cwd : "-");
	say("\n");
	ret = latch_agent_exec(a, w->argv, &w->opts, out_fd, err_fd, &res);
	slurp(out_fd, out, sizeof(out));
	slurp(err_fd, err, sizeof(err));
	if (out[0])
		say("  stdout: %s%s", out, out[strlen(out) - 1] == '\n' ? "" : "\n");
	if (err[0])
		say("  stderr: %s%s", err, err[strlen(err) - 1] == '\n' ? "" : "\n");
	if (ret) {
		say("  -> %s (%s)\n", strerror(-ret), res.message);
		snprintf(what, sizeof(what), "%s%sreturned the expected error", w->name ? w->name : "",
			 w->name ? ": " : "");
		check(ret == w->ret, what);
		return;
	}
	say("  -> %s %d, flags 0x%x, produced %llu relayed %llu bytes, %u ms in guest, %lld ms round trip\n",
	    res.how == LAGENT_SIGNALED ? "signal" : "exit", res.code, res.flags, (unsigned long long)res.out_bytes,
	    (unsigned long long)res.relayed, res.duration_ms, now_ms() - t0);
	snprintf(what, sizeof(what), "%s%s%s%s%s", w->name ? w->name : "", w->name ? ": " : "", "status ", "%d", "");
	snprintf(what, sizeof(what), "%s%sstatus %d", w->name ? w->name : "", w->name ? ": " : "", w->status);
	{
		bool ok = ret == w->ret && latch_agent_status(&res) == w->status;

		if (w->flags)
			ok = ok && (res.flags & w->flags) == w->flags;
		if (w->out)
			ok = ok && !strcmp(out, w->out);
		if (w->out_has)
			ok = ok && strstr(out, w->out_has);
		if (w->err)
			ok = ok && !strncmp(err, w->err, strlen(w->err));
		if (w->flags || w->out || w->out_has || w->err)
			snprintf(what + strlen(what), sizeof(what) - strlen(what), ", flags and output as expected");
		check(ok, what);
	}
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* Connect and ping, waiting up to boot_ms for the socket and the answer; 0 or -errno. */
static int open_agent(const char *sock, int boot_ms, struct latch_agent **a, char *release, size_t len)
{
	long long t0 = now_ms();
	int ret;

	/* qemu creates the socket a moment after it starts. */
	while ((ret = latch_agent_connect(sock, a)) == -ENOENT || ret == -ECONNREFUSED) {
		if (now_ms() - t0 > boot_ms)
			break;
		usleep(20000);
	}
	if (ret)
		return ret;
	ret = latch_agent_ping(*a, boot_ms, release, len);
	if (ret) {
		latch_agent_close(*a);
		*a = NULL;
	}
	return ret;
}

/* ---- --local: the agent on this host, its port a raw pty joined to a Unix socket ---- */

static char local_dir[] = "/tmp/latch-agent-local.XXXXXX";
static pid_t agent_pid = -1, relay_pid = -1;

/*
 * One direction of the relay: bytes read from one side wait in buf until
 * the other takes them, and the side is not read meanwhile, so each way
 * stalls on its own, as virtio-serial's two queues do.
 */
struct way {
	uint8_t buf[65536];
	size_t off, len;
};

static void way_pump(struct way *w, int from, int to, short rev_from, short rev_to, bool *closed)
{
	if (w->off == w->len && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t n = read(from, w->buf, sizeof(w->buf));

		if (n > 0) {
			w->off = 0;
			w->len = (size_t)n;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			*closed = true;
		}
	}
	if (w->off < w->len && (to < 0 || (rev_to & POLLOUT) || rev_to == 0)) {
		ssize_t n = to < 0 ? (ssize_t)(w->len - w->off) : write(to, w->buf + w->off, w->len - w->off);

		if (n > 0)
			w->off += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EINTR)
			w->off = w->len; /* the client left: its bytes go nowhere, as with a port nobody holds */
	}
}

/* The host end of the "port": one client at a time, what the agent says with none is dropped. */
static void __attribute__((noreturn)) relay_main(int lfd, int master)
{
	static struct way up, down; /* up: agent -> client; down: client -> agent */
	int conn = -1;

	for (;;) {
		struct pollfd p[3] = {
			{ .fd = conn < 0 ? lfd : -1, .events = POLLIN },
			{ .fd = master,
			  .events = (up.off == up.len ? POLLIN : 0) | (down.off < down.len ? POLLOUT : 0) },
			{ .fd = conn, .events = (down.off == down.len ? POLLIN : 0) | (up.off < up.len ? POLLOUT : 0) },
		};
		bool gone = false, dead = false;

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			_exit(1);
		if (p[0].revents & POLLIN) {
			conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			continue;
		}
		way_pump(&up, master, conn, p[1].revents, conn < 0 ? 0 : p[2].revents, &dead);
		if (conn >= 0)
			way_pump(&down, conn, master, p[2].revents, p[1].revents, &gone);
		if (dead)
			_exit(0);
		if (gone) {
			close(conn);
			conn = -1;
			down.off = down.len = 0;
		}
	}
}

static void local_stop(void)
{
	char cmd[128];

	if (agent_pid > 0) {
		kill(agent_pid, SIGKILL);
		waitpid(agent_pid, NULL, 0);
	}
	if (relay_pid > 0) {
		kill(relay_pid, SIGKILL);
		waitpid(relay_pid, NULL, 0);
	}
	if (failures) {
		snprintf(cmd, sizeof(cmd), "sed 's/^/# agent: /' %s/agent.log", local_dir);
		fflush(stdout);
		if (system(cmd) != 0)
			say("(no agent log)\n");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", local_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "# could not remove %s\n", local_dir);
}

/* Start AGENT on a raw pty and the relay; the socket's path in sock. */
static int local_start(const char *agent, char *sock, size_t len)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct termios t;
	char slave[64], log[96];
	int master, lfd, s;

	if (!mkdtemp(local_dir))
		return -errno;
	snprintf(sock, len, "%s/agent.sock", local_dir);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	snprintf(log, sizeof(log), "%s/agent.log", local_dir);
	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0 || grantpt(master) || unlockpt(master) || ptsname_r(master, slave, sizeof(slave)))
		return -errno;
	/* raw: the line discipline passes every byte both ways, like a serial port's */
	s = open(slave, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0 || tcgetattr(s, &t))
		return -errno;
	cfmakeraw(&t);
	if (tcsetattr(s, TCSANOW, &t))
		return -errno;
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) || listen(lfd, 4))
		return -errno;
	agent_pid = fork();
	if (agent_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0 || dup2(fd, 1) < 0)
			_exit(127);
		execl(agent, agent, slave, (char *)NULL);
		_exit(127);
	}
	relay_pid = fork();
	if (relay_pid == 0) {
		fcntl(master, F_SETFL, O_NONBLOCK);
		relay_main(lfd, master);
	}
	close(s); /* the agent opened its own; the raw settings stay with the pty */
	close(master);
	close(lfd);
	return agent_pid < 0 || relay_pid < 0 ? -EAGAIN : 0;
}

/* A pty of our own, standing in for the user's terminal: its size is what -t sends. */
static int user_tty(int *master, int *slave, unsigned short rows, unsigned short cols)
{
	struct winsize w = { .ws_row = rows, .ws_col = cols };
	char name[64];

	*master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0 || grantpt(*master) || unlockpt(*master) || ptsname_r(*master, name, sizeof(name)))
		return -errno;
	*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*slave < 0 || ioctl(*master, TIOCSWINSZ, &w))
		return -errno;
	return 0;
}

/* A memfd holding n bytes of a pattern (or str), rewound: a file as stdin. */
static int stdin_file(const char *str, size_t n)
{
	int fd = memfd_create("stdin", MFD_CLOEXEC);

	for (size_t i = 0; fd >= 0 && i < n; i += 4096) {
		char block[4096];
		size_t k = n - i < sizeof(block) ? n - i : sizeof(block);

		memset(block, 'a' + (int)(i / 4096 % 26), sizeof(block));
		if (write(fd, block, k) != (ssize_t)k)
			return -1;
	}
	if (fd >= 0 && str && write(fd, str, strlen(str)) != (ssize_t)strlen(str))
		return -1;
	if (fd >= 0)
		lseek(fd, 0, SEEK_SET);
	return fd;
}

/*
 * After delay_ms, in a child: resize the user's pty (and tell us with
 * SIGWINCH, as the kernel would were it our terminal), send us sig, or
 * write bytes to fd.  The child's pid, to reap.
 */
static pid_t later(int delay_ms, int tty_master, unsigned short rows, unsigned short cols, int sig, int fd,
		   const char *bytes)
{
	pid_t parent = getpid(), pid = fork();

	if (pid != 0)
		return pid;
	usleep((useconds_t)delay_ms * 1000);
	if (tty_master >= 0) {
		struct winsize w = { .ws_row = rows, .ws_col = cols };

		ioctl(tty_master, TIOCSWINSZ, &w);
		kill(parent, SIGWINCH);
	}
	if (sig)
		kill(parent, sig);
	if (fd >= 0 && bytes && write(fd, bytes, strlen(bytes)) < 0)
		_exit(1);
	_exit(0);
}

static void reap(pid_t pid)
{
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/* Append one frame to buf at *off. */
static void put_frame(uint8_t *buf, size_t *off, uint16_t type, uint32_t id, const void *payload, uint32_t len)
{
	struct lagent_hdr h = {
		.magic = htole32(LAGENT_MAGIC), .type = htole16(type), .id = htole32(id), .len = htole32(len)
	};

	memcpy(buf + *off, &h, sizeof(h));
	memcpy(buf + *off + sizeof(h), payload, len);
	*off += sizeof(h) + len;
}

/*
 * Invariant: the agent passes on only the signals a user's keys and latch's
 * forwarding make (INT, TERM, HUP, QUIT, KILL); any other number in a SIGNAL
 * frame is ignored.  Raw frames, since the client never sends another:
 * `sh -c 'sleep 1; echo SURVIVED'` with stdin, then SIGNAL signo.  The
 * shell's status, or -1.
 */
static int raw_signal_run(const char *sock, int32_t signo, char *out, size_t outlen)
{
	static const char cmd[] = "sh\0-c\0sleep 1; echo SURVIVED";
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct lagent_exec ex = { .timeout_ms = htole32(20000),
				  .argc = htole32(3),
				  .flags = htole32(LAGENT_EXEC_STDIN) };
	struct lagent_signal sg = { .signo = (int32_t)htole32((uint32_t)signo) };
	uint8_t buf[256], in[4096];
	size_t off = 0, have = 0, used = 0;
	uint32_t id = 0x5e5e0000u + (uint32_t)signo;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), status = -1;
	long long until = now_ms() + 20000;

	memcpy(buf + sizeof(struct lagent_hdr), &ex, sizeof(ex));
	memcpy(buf + sizeof(struct lagent_hdr) + sizeof(ex), cmd, sizeof(cmd));
	put_frame(buf, &off, LAGENT_EXEC, id, buf + sizeof(struct lagent_hdr), (uint32_t)(sizeof(ex) + sizeof(cmd)));
	put_frame(buf, &off, LAGENT_SIGNAL, id, &sg, sizeof(sg));
	out[0] = '\0';
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || write(fd, buf, off) != (ssize_t)off)
		goto out;
	while (status < 0 && now_ms() < until) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct lagent_hdr h;
		ssize_t n;

		if (poll(&p, 1, 1000) <= 0)
			continue;
		n = read(fd, in + have, sizeof(in) - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		while (have - used >= sizeof(h)) {
			memcpy(&h, in + used, sizeof(h));
			if (have - used < sizeof(h) + le32toh(h.len))
				break;
			if (le32toh(h.id) == id && le16toh(h.type) == LAGENT_STDOUT)
				snprintf(out + strlen(out), outlen - strlen(out), "%.*s", (int)le32toh(h.len),
					 (const char *)in + used + sizeof(h));
			if (le32toh(h.id) == id && le16toh(h.type) == LAGENT_EXIT) {
				struct lagent_exit ee;

				memcpy(&ee, in + used + sizeof(h), sizeof(ee));
				status = le32toh(ee.how) == LAGENT_SIGNALED ? 128 + (int)le32toh((uint32_t)ee.code) :
									      (int)le32toh((uint32_t)ee.code);
			}
			used += sizeof(h) + le32toh(h.len);
		}
		memmove(in, in + used, have - used);
		have -= used;
		used = 0;
	}
out:
	if (fd >= 0)
		close(fd);
	return status;
}

/* stdin, the pty, window sizes, signals and the working directory: what an agent with the new caps takes. */
static void local_cases(struct latch_agent **ap, const char *sock, int out_fd, int err_fd)
{
	struct latch_agent *a = *ap;
	static const char *const a_cat[] = { "cat", NULL };
	static const char *const a_wc[] = { "wc", "-c", NULL };
	static const char *const a_exit3[] = { "sh", "-c", "exit 3", NULL };
	static const char *const a_size[] = { "stty", "size", NULL };
	static const char *const a_ttys[] = { "sh", "-c", "test -t 0 && test -t 1 && test -t 2", NULL };
	static const char *const a_winch[] = { "sh", "-c",
					       "trap 'stty size; exit 5' WINCH; echo ready; i=0; "
					       "while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done",
					       NULL };
	static const char *const a_sleep31[] = { "sleep", "31", NULL };
	static const char *const a_sleep32[] = { "sleep", "32", NULL };
	static const char *const a_pwd[] = { "pwd", NULL };
	static const char *const a_gone32[] = { "pgrep", "-x", "-f", "sleep 32", NULL };
	int tm = -1, ts = -1, fd, pipefd[2];
	struct latch_agent *b = NULL;
	sigset_t mask;
	pid_t pid;
	int ret;

	if (user_tty(&tm, &ts, 30, 100)) {
		check(false, "a pty for the user's terminal");
		return;
	}
	fd = stdin_file("hello\nworld\n", 0);
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "stdin relayed to cat, its EOF ends it",
			    .argv = a_cat,
			    .opts = { .io = LATCH_AGENT_IO_STDIN, .stdin_fd = fd, .timeout_ms = 10000 },
			    .out = "hello\nworld\n" });
	close(fd);
	/* 1 MiB through a 64 KiB pipe: the agent's backpressure, and no byte lost */
	fd = stdin_file(NULL, 1 << 20);
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "1 MiB of stdin arrives whole",
			    .argv = a_wc,
			    .opts = { .io = LATCH_AGENT_IO_STDIN, .stdin_fd = fd, .timeout_ms = 20000 },
			    .out = "1048576\n" });
	lseek(fd, 0, SEEK_SET);
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "a command that never reads its stdin still ends",
			    .argv = a_exit3,
			    .opts = { .io = LATCH_AGENT_IO_STDIN, .stdin_fd = fd, .timeout_ms = 20000 },
			    .status = 3 });
	close(fd);
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "control: without io, stdin is not a terminal", .argv = a_ttys, .status = 1 });
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "under a pty, stdin, stdout and stderr are the terminal",
			    .argv = a_ttys,
			    .opts = { .io = LATCH_AGENT_IO_TTY, .stdin_fd = ts, .timeout_ms = 10000 } });
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "the pty starts at the user's terminal's size",
			    .argv = a_size,
			    .opts = { .io = LATCH_AGENT_IO_TTY, .stdin_fd = ts, .timeout_ms = 10000 },
			    .out = "30 100\r\n" });

	pid = later(1000, tm, 40, 120, 0, -1, NULL);
	run(a, out_fd, err_fd,
	    &(struct want){
		    .name = "a resize reaches the command as SIGWINCH and the new size",
		    .argv = a_winch,
		    .opts = { .io = LATCH_AGENT_IO_TTY | LATCH_AGENT_IO_STDIN, .stdin_fd = ts, .timeout_ms = 20000 },
		    .status = 5,
		    .out_has = "40 120" });
	reap(pid);

	/* ^C is a byte on a pty: the guest's line discipline makes it SIGINT for the foreground group */
	if (pipe2(pipefd, O_CLOEXEC) == 0) {
		pid = later(700, -1, 0, 0, 0, pipefd[1], "\003");
		close(pipefd[1]);
		run(a, out_fd, err_fd,
		    &(struct want){ .name = "^C typed into the pty interrupts the command",
				    .argv = a_sleep31,
				    .opts = { .io = LATCH_AGENT_IO_TTY | LATCH_AGENT_IO_STDIN,
					      .stdin_fd = pipefd[0],
					      .timeout_ms = 20000 },
				    .status = 128 + SIGINT });
		close(pipefd[0]);
		reap(pid);
	}

	/* without a pty, SIGINT at this process goes to the command's group (and not to us) */
	pid = later(700, -1, 0, 0, SIGINT, -1, NULL);
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "SIGINT here is forwarded to the command",
			    .argv = a_sleep31,
			    .opts = { .io = LATCH_AGENT_IO_STDIN | LATCH_AGENT_IO_SIGNALS,
				      .stdin_fd = ts,
				      .timeout_ms = 20000 },
			    .status = 128 + SIGINT });
	reap(pid);
	sigprocmask(SIG_BLOCK, NULL, &mask);
	check(!sigismember(&mask, SIGINT) && !sigismember(&mask, SIGWINCH), "the signal mask is given back");

	run(a, out_fd, err_fd,
	    &(struct want){ .name = "the working directory asked for",
			    .argv = a_pwd,
			    .opts = { .cwd = "/tmp", .timeout_ms = 10000 },
			    .out = "/tmp\n" });
	run(a, out_fd, err_fd,
	    &(struct want){ .name = "a missing working directory fails the command, not the agent",
			    .argv = a_pwd,
			    .opts = { .cwd = "/no/such/dir", .timeout_ms = 10000 },
			    .status = 126,
			    .err = "latch-agent: cd /no/such/dir:" });

	/* An interactive command is cancelled by a new client's frame too, which is then served. */
	{
		struct sigaction sa = { .sa_handler = on_alarm };
		struct latch_agent_result res;
		struct latch_agent_exec_opts o = { .io = LATCH_AGENT_IO_STDIN, .stdin_fd = ts };

		say("$ sleep 32    [stdin; interrupted by SIGALRM after 1 s, connection closed]\n");
		sigaction(SIGALRM, &sa, NULL);
		alarm(1);
		ret = latch_agent_exec(a, a_sleep32, &o, out_fd, err_fd, &res);
		alarm(0);
		check(ret == -EINTR, "interactive wait interrupted");
		latch_agent_close(a);
		a = *ap = NULL;
		ret = open_agent(sock, 10000, ap, NULL, 0);
		check(!ret, "the next client's ping, which cancels it, is answered");
		if (!ret)
			run(*ap, out_fd, err_fd,
			    &(struct want){ .name = "the cancelled interactive command is gone",
					    .argv = a_gone32,
					    .status = 1,
					    .out = "" });
	}
	/* A client that has not seen the caps (no PONG yet) may not ask for them: an old agent would refuse. */
	latch_agent_close(*ap);
	*ap = NULL;
	ret = latch_agent_connect(sock, &b);
	if (!ret) {
		struct latch_agent_result res;
		struct latch_agent_exec_opts o = { .io = LATCH_AGENT_IO_STDIN, .stdin_fd = ts };

		ret = latch_agent_exec(b, a_cat, &o, out_fd, err_fd, &res);
		check(ret == -EPROTONOSUPPORT, "stdin to an agent that did not announce it: EPROTONOSUPPORT");
	}
	{
		char out[256];
		int st;

		latch_agent_close(b);
		b = NULL;
		st = raw_signal_run(sock, SIGUSR1, out, sizeof(out));
		say("  raw SIGNAL %d: status %d, stdout %s", SIGUSR1, st, out[0] ? out : "(none)\n");
		check(st == 0 && !strcmp(out, "SURVIVED\n"), "a SIGNAL outside the allow-list is ignored");
		st = raw_signal_run(sock, SIGTERM, out, sizeof(out));
		say("  raw SIGNAL %d: status %d, stdout %s", SIGTERM, st, out[0] ? out : "(none)\n");
		check(st == 128 + SIGTERM && !out[0], "control: SIGTERM in the same frame is passed on");
	}
	/* Output for a terminal without a pty: no escape sequence of the guest's reaches it; a pipe gets the bytes. */
	for (int escape = 1; escape >= 0; escape--) {
		static const char *const a_esc[] = { "printf", "a\\033]0;title\\007b\\r\\tc\\n", NULL };
		struct latch_agent_exec_opts o = { .escape_out = escape };
		struct latch_agent_result res;
		char got[128] = "";
		int p[2] = { -1, -1 };
		ssize_t n = -1;

		if (!pipe2(p, O_CLOEXEC) && !latch_agent_connect(sock, &b) &&
		    !latch_agent_exec(b, a_esc, &o, p[1], -1, &res))
			n = read(p[0], got, sizeof(got) - 1);
		got[n > 0 ? n : 0] = '\0';
		latch_agent_close(b);
		b = NULL;
		close(p[0]);
		close(p[1]);
		if (escape)
			check(!strcmp(got, "a^[]0;title^Gb^M\tc\n"),
			      "escaped: ESC, BEL and CR in caret notation, tab and newline kept");
		else
			check(!strcmp(got, "a\033]0;title\007b\r\tc\n"),
			      "control: without escaping the bytes are exact");
	}
	close(tm);
	close(ts);
}

int main(int argc, char **argv)
{
	static const char *const a_uname[] = { "uname", "-r", NULL };
	static const char *const a_cmdline[] = { "cat", "/proc/cmdline", NULL };
	static const char *const a_exit7[] = { "sh", "-c", "exit 7", NULL };
	static const char *const a_both[] = { "sh", "-c", "echo out; echo err >&2; exit 3", NULL };
	static const char *const a_flood[] = { "head", "-c", "100000", "/dev/zero", NULL };
	static const char *const a_sleep[] = { "sleep", "30", NULL };
	static const char *const a_none[] = { "/no/such/cmd", NULL };
	static const char *const a_pidof[] = { "pidof", "sleep", NULL };
	static const char *const a_gone30[] = { "pgrep", "-x", "-f", "sleep 30", NULL };
	static const char *const a_mods[] = { "sh", "-c", "cut -d' ' -f1 /proc/modules | sort | tr '\\n' ' '", NULL };
	static const char *const a_mounts[] = { "sh", "-c", "grep -E ' /(tmp|workspace|dev/shm) ' /proc/mounts", NULL };
	static const char *const a_ws[] = { "cat", "/workspace/hello", NULL };
	const char *ws = getenv("LATCH_SELFTEST_WORKSPACE");
	int boot_ms = argc > 2 ? atoi(argv[2]) : 120000;
	struct latch_agent *a = NULL;
	struct sigaction sa = { .sa_handler = on_alarm };
	char release[80], sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	long long t0 = now_ms();
	int out_fd, err_fd, ret;

	if (argc < 2 || argc > 3 || (!strcmp(argv[1], "--local") && argc != 3)) {
		fprintf(stderr, "usage: agent_selftest SOCK [BOOT_TIMEOUT_MS]\n"
				"       agent_selftest --local AGENT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	out_fd = memfd_create("stdout", MFD_CLOEXEC);
	err_fd = memfd_create("stderr", MFD_CLOEXEC);
	if (out_fd < 0 || err_fd < 0) {
		perror("memfd_create");
		return 1;
	}
	snprintf(sock, sizeof(sock), "%s", argv[1]);
	if (!strcmp(argv[1], "--local")) {
		/* a SIGINT the client fails to take must fail a check, not end the test with its agent left running */
		sigaction(SIGINT, &sa, NULL);
		local_mode = true;
		boot_ms = 10000;
		printf("KTAP version 1\n");
		ret = local_start(argv[2], sock, sizeof(sock));
		if (ret) {
			say("local agent: %s\n", strerror(-ret));
			local_stop();
			return 1;
		}
	}
	ret = open_agent(sock, boot_ms, &a, release, sizeof(release));
	if (ret) {
		fprintf(stderr, "agent_selftest: connect and ping %s: %s\n", sock, strerror(-ret));
		check(false, "the agent answers");
		goto out;
	}
	say("agent answered after %lld ms, %s kernel %s\n\n", now_ms() - t0, local_mode ? "host" : "guest", release);

	{
		char want_release[96];

		snprintf(want_release, sizeof(want_release), "%s\n", release);
		const struct want cases[] = {
			{ .argv = a_uname, .status = 0, .out = want_release },
			{ .argv = a_cmdline, .status = 0 },
			{ .argv = a_exit7, .status = 7, .out = "" },
			{ .argv = a_both, .status = 3, .out = "out\n", .err = "err\n" },
			{ .argv = a_flood,
			  .opts = { .output_limit = 1000 },
			  .status = 0,
			  .flags = LAGENT_EXIT_TRUNCATED },
			{ .argv = a_sleep,
			  .opts = { .timeout_ms = 1000 },
			  .status = 128 + SIGKILL,
			  .flags = LAGENT_EXIT_TIMED_OUT },
			{ .argv = a_none, .status = 127, .err = "latch-agent: /no/such/cmd:" },
			/* the guest's modules and mounts: not this host's business */
			{ .argv = a_mods, .status = 0 },
			{ .argv = a_mounts, .status = 0 },
		};
		size_t n = sizeof(cases) / sizeof(cases[0]) - (local_mode ? 2 : 0);

		for (size_t i = 0; i < n; i++)
			run(a, out_fd, err_fd, &cases[i]);
		/* The proof shares a folder holding the line in $LATCH_SELFTEST_WORKSPACE. */
		if (ws && !local_mode) {
			char line[256];

			snprintf(line, sizeof(line), "%s\n", ws);
			run(a, out_fd, err_fd, &(struct want){ .argv = a_ws, .status = 0, .out = line });
		}
	}

	/* Cancel: interrupt a run, drop the connection, and the command must die. */
	{
		struct latch_agent_result res;
		struct latch_agent_exec_opts o = { 0 };

		t0 = now_ms();
		say("$ sleep 30    [interrupted by SIGALRM after 1 s, connection closed]\n");
		sigaction(SIGALRM, &sa, NULL);
		alarm(1);
		ret = latch_agent_exec(a, a_sleep, &o, out_fd, err_fd, &res);
		alarm(0);
		say("  -> %s\n", strerror(-ret));
		check(ret == -EINTR, "wait interrupted");
		latch_agent_close(a);
		a = NULL;
		ret = open_agent(sock, 40000, &a, NULL, 0);
		say("  reconnect+ping %lld ms\n", now_ms() - t0);
		if (ret)
			say("  -> reconnect: %s\n", strerror(-ret));
		check(!ret, "reconnected");
		if (ret)
			goto out;
		/* The guest notices the hang-up within its idle poll; give it a moment. */
		usleep(300000);
		run(a, out_fd, err_fd,
		    &(struct want){ .name = "the cancelled command is gone",
				    .argv = local_mode ? a_gone30 : a_pidof,
				    .status = 1,
				    .out = "" });
	}

	if (local_mode)
		local_cases(&a, sock, out_fd, err_fd);

	/* Junk and a torn frame from a client that left must not wedge the agent. */
	{
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		static const uint8_t junk[] = "not a frame\x4c\x41\x54\x4b\x01\x00\x00\x00\xff\xff\xff\xff\xff\xff";
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		long long t1;

		say("$ (raw client writes %zu junk bytes, a torn frame claiming 4 GiB, and leaves)\n", sizeof(junk));
		latch_agent_close(a);
		a = NULL;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
		ret = fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		      write(fd, junk, sizeof(junk)) != (ssize_t)sizeof(junk);
		check(!ret, "junk sent");
		if (fd >= 0)
			close(fd);
		t1 = now_ms();
		ret = open_agent(sock, 10000, &a, NULL, 0);
		say("  -> next client's ping: %s after %lld ms\n", ret ? strerror(-ret) : "answered", now_ms() - t1);
		check(!ret, "agent still answers");
		if (!ret)
			run(a, out_fd, err_fd,
			    &(struct want){ .name = "and runs commands", .argv = a_exit7, .status = 7 });
	}
out:
	latch_agent_close(a);
	if (local_mode) {
		local_stop();
		printf("1..%d\n# Totals: pass:%d fail:%d xfail:0 xpass:0 skip:0 error:0\n", checks, checks - failures,
		       failures);
	} else {
		say("\n%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	}
	return failures ? 1 : 0;
}
