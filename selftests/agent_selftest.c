// SPDX-License-Identifier: GPL-2.0-only
/*
 * agent_selftest.c - drive a booted guest's agent through vm/agent_client.c
 * and check the answers: the manual proof behind selftests/agent_proof.sh,
 * and the seed of the guest tests in selftests/.
 *
 *   agent_selftest SOCK [BOOT_TIMEOUT_MS]
 *
 * Waits for the agent to answer (printing how long that took from this
 * program's start, i.e. roughly from the guest's power-on when started right
 * after qemu), then runs a fixed list of commands and prints a transcript.
 * Exits 0 when every check held, 1 otherwise.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "vm/agent_client.h"

static int failures;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
	printf("  %s %s\n", ok ? "ok  " : "FAIL", what);
	if (!ok)
		failures++;
}

struct want {
	const char *const *argv;
	struct latch_agent_exec_opts opts;
	int ret; /* expected return of latch_agent_exec */
	int status; /* expected shell-style status */
	unsigned int flags; /* flags that must be set */
	const char *out; /* expected stdout, NULL: don't care */
	const char *err; /* expected stderr prefix, NULL: don't care */
};

static void run(struct latch_agent *a, int out_fd, int err_fd, const struct want *w)
{
	struct latch_agent_result res;
	char out[4096], err[4096], what[160];
	long long t0 = now_ms();
	int ret;

	printf("$");
	for (int i = 0; w->argv[i]; i++)
		printf(strchr(w->argv[i], ' ') ? " '%s'" : " %s", w->argv[i]);
	if (w->opts.timeout_ms || w->opts.output_limit)
		printf("    [timeout %u ms, output limit %u]", w->opts.timeout_ms, w->opts.output_limit);
	printf("\n");
	ret = latch_agent_exec(a, w->argv, &w->opts, out_fd, err_fd, &res);
	slurp(out_fd, out, sizeof(out));
	slurp(err_fd, err, sizeof(err));
	if (out[0])
		printf("  stdout: %s%s", out, out[strlen(out) - 1] == '\n' ? "" : "\n");
	if (err[0])
		printf("  stderr: %s%s", err, err[strlen(err) - 1] == '\n' ? "" : "\n");
	if (ret) {
		printf("  -> %s (%s)\n", strerror(-ret), res.message);
		check(ret == w->ret, "returned the expected error");
		return;
	}
	printf("  -> %s %d, flags 0x%x, produced %llu relayed %llu bytes, %u ms in guest, %lld ms round trip\n",
	       res.how == LAGENT_SIGNALED ? "signal" : "exit", res.code, res.flags, (unsigned long long)res.out_bytes,
	       (unsigned long long)res.relayed, res.duration_ms, now_ms() - t0);
	snprintf(what, sizeof(what), "status %d", w->status);
	check(ret == w->ret && latch_agent_status(&res) == w->status, what);
	if (w->flags)
		check((res.flags & w->flags) == w->flags, "expected flags set");
	if (w->out)
		check(!strcmp(out, w->out), "stdout as expected");
	if (w->err)
		check(!strncmp(err, w->err, strlen(w->err)), "stderr as expected");
}

static void on_alarm(int sig)
{
	(void)sig;
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
	static const char *const a_mods[] = { "sh", "-c", "cut -d' ' -f1 /proc/modules | sort | tr '\\n' ' '", NULL };
	static const char *const a_mounts[] = { "sh", "-c", "grep -E ' /(tmp|workspace|dev/shm) ' /proc/mounts", NULL };
	static const char *const a_ws[] = { "cat", "/workspace/hello", NULL };
	const char *ws = getenv("LATCH_SELFTEST_WORKSPACE");
	int boot_ms = argc > 2 ? atoi(argv[2]) : 120000;
	struct latch_agent *a = NULL;
	struct sigaction sa = { .sa_handler = on_alarm };
	char release[80];
	long long t0 = now_ms();
	int out_fd, err_fd, ret;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: agent_selftest SOCK [BOOT_TIMEOUT_MS]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	out_fd = memfd_create("stdout", MFD_CLOEXEC);
	err_fd = memfd_create("stderr", MFD_CLOEXEC);
	if (out_fd < 0 || err_fd < 0) {
		perror("memfd_create");
		return 1;
	}

	/* qemu creates the socket a moment after it starts. */
	while ((ret = latch_agent_connect(argv[1], &a)) == -ENOENT || ret == -ECONNREFUSED) {
		if (now_ms() - t0 > boot_ms)
			break;
		usleep(20000);
	}
	if (ret) {
		fprintf(stderr, "agent_selftest: connect %s: %s\n", argv[1], strerror(-ret));
		return 1;
	}
	ret = latch_agent_ping(a, boot_ms, release, sizeof(release));
	if (ret) {
		fprintf(stderr, "agent_selftest: ping: %s\n", strerror(-ret));
		latch_agent_close(a);
		return 1;
	}
	printf("agent answered after %lld ms, guest kernel %s\n\n", now_ms() - t0, release);

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
			{ .argv = a_mods, .status = 0 },
			{ .argv = a_mounts, .status = 0 },
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			run(a, out_fd, err_fd, &cases[i]);
		/* The proof shares a folder holding the line in $LATCH_SELFTEST_WORKSPACE. */
		if (ws) {
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
		printf("$ sleep 30    [interrupted by SIGALRM after 1 s, connection closed]\n");
		sigaction(SIGALRM, &sa, NULL);
		alarm(1);
		ret = latch_agent_exec(a, a_sleep, &o, out_fd, err_fd, &res);
		alarm(0);
		printf("  -> %s\n", strerror(-ret));
		check(ret == -EINTR, "wait interrupted");
		latch_agent_close(a);
		a = NULL;
		ret = latch_agent_connect(argv[1], &a);
		if (!ret)
			ret = latch_agent_ping(a, 40000, NULL, 0);
		printf("  reconnect+ping %lld ms\n", now_ms() - t0);
		if (ret)
			printf("  -> reconnect: %s\n", strerror(-ret));
		check(!ret, "reconnected");
		if (ret)
			goto out;
		/* The guest notices the hang-up within its idle poll; give it a moment. */
		usleep(300000);
		run(a, out_fd, err_fd, &(struct want){ .argv = a_pidof, .status = 1, .out = "" });
	}

	/* Junk and a torn frame from a client that left must not wedge the agent. */
	{
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		static const uint8_t junk[] = "not a frame\x4c\x41\x54\x4b\x01\x00\x00\x00\xff\xff\xff\xff\xff\xff";
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		long long t1;

		printf("$ (raw client writes %zu junk bytes, a torn frame claiming 4 GiB, and leaves)\n", sizeof(junk));
		latch_agent_close(a);
		a = NULL;
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", argv[1]);
		ret = fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
		      write(fd, junk, sizeof(junk)) != (ssize_t)sizeof(junk);
		check(!ret, "junk sent");
		if (fd >= 0)
			close(fd);
		t1 = now_ms();
		ret = latch_agent_connect(argv[1], &a);
		if (!ret)
			ret = latch_agent_ping(a, 10000, NULL, 0);
		printf("  -> next client's ping: %s after %lld ms\n", ret ? strerror(-ret) : "answered", now_ms() - t1);
		check(!ret, "agent still answers");
		if (!ret)
			run(a, out_fd, err_fd, &(struct want){ .argv = a_exit7, .status = 7 });
	}
out:
	latch_agent_close(a);
	printf("\n%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
