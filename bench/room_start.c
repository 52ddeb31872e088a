// SPDX-License-Identifier: GPL-2.0-only
/*
 * room_start.c - how long a room takes: to the command's first instruction,
 * and the whole run, for `latch run` beside bubblewrap and a plain fork and
 * exec, in one run.
 *
 *   room_start ROUNDS DIR LATCH [BWRAP [LEAN]]
 *
 * Each round runs every variant once, in an order rotated per round, for
 * two commands: DIR/room_stamp alone (a static program that prints its clock
 * as its first act: the `true` of this benchmark) and a small shell script
 * that starts by running it and then does a little work.  A room sees DIR as
 * its workspace (/workspace), read-only: one bind more than the others.  t0 is read right
 * before fork(); "first" is the stamp's clock minus t0, "total" is the
 * child reaped minus t0, "cpu" the user and system time of the child and
 * everything it waited for (what the machine's load does not change).  A
 * fourth variant, latch-start, is `latch help run`: the latch binary's own
 * start and exit, with no room; a fifth, room-lean, is bench/room_lean: the
 * same room behind a binary that links only room/ and loader/.  Prints CSV:
 * variant,command,round,first_ns,total_ns,cpu_ns.  The bubblewrap line is the
 * issue's reference configuration.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Run argv with stdout into a pipe; the first number it printed, the time the child was reaped, its CPU time. */
static int run(char *const *argv, unsigned long long *first, unsigned long long *total, unsigned long long *cpu)
{
	struct rusage ru;
	int p[2], st;
	char buf[256] = "";
	ssize_t n, len = 0;
	unsigned long long t0;
	pid_t pid;

	if (pipe(p))
		return -1;
	t0 = now_ns();
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(p[1], 1);
		dup2(null, 2);
		dup2(null, 0);
		close(p[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	while ((n = read(p[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	close(p[0]);
	wait4(pid, &st, 0, &ru);
	*total = now_ns() - t0;
	*cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
	buf[len] = 0;
	*first = strtoull(buf, NULL, 10);
	*first = *first > t0 ? *first - t0 : 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* the small script: the stamp first, then a loop and a pipeline, as a tool call's wrapper would */
static void script_of(char *buf, size_t len, const char *stamp)
{
	snprintf(buf, len,
		 "%s; for f in /usr/bin/*; do :; done; echo hello | tr a-z A-Z > /dev/null; ls /tmp > /dev/null",
		 stamp);
}

int main(int argc, char **argv)
{
	char stamp[4096], script[8192], room_script[512];
	int rounds = argc > 1 ? atoi(argv[1]) : 30;
	const char *dir = argc > 2 ? argv[2] : NULL, *latch = argc > 3 ? argv[3] : NULL;
	const char *bwrap = argc > 4 && *argv[4] ? argv[4] : NULL, *lean = argc > 5 ? argv[5] : NULL;

	if (!dir || !latch || rounds <= 0) {
		fprintf(stderr, "usage: room_start ROUNDS DIR LATCH [BWRAP [LEAN]]\n");
		return 2;
	}
	snprintf(stamp, sizeof(stamp), "%s/room_stamp", dir);
	script_of(script, sizeof(script), stamp);
	script_of(room_script, sizeof(room_script), "/workspace/room_stamp");
	char *cmds[2][4] = { { stamp, NULL }, { "/bin/sh", "-c", script, NULL } };
	char *room_cmds[2][4] = { { "/workspace/room_stamp", NULL }, { "/bin/sh", "-c", room_script, NULL } };
	const char *cmd_names[2] = { "true", "script" };
	const char *variants[5] = { "exec", "bwrap", "latch", "latch-start", "room-lean" };

	printf("variant,command,round,first_ns,total_ns,cpu_ns\n");
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < 5; k++) {
			int v = (k + r) % 5;

			for (int c = 0; c < 2; c++) {
				char *av[32];
				int n = 0;
				unsigned long long first, total, cpu;

				if (v == 3) {
					if (c)
						continue;
					av[n++] = (char *)latch;
					av[n++] = "help";
					av[n++] = "run";
					av[n] = NULL;
					if (run(av, &first, &total, &cpu)) {
						fprintf(stderr, "room_start: latch help run failed in round %d\n", r);
						return 1;
					}
					printf("latch-start,-,%d,0,%llu,%llu\n", r, total, cpu);
					continue;
				}
				if (v == 1) {
					if (!bwrap)
						continue;
					/* DIR bound as latch run binds its --workspace: it may be under /tmp */
					const char *b[] = { bwrap,
							    "--ro-bind",
							    "/",
							    "/",
							    "--dev",
							    "/dev",
							    "--proc",
							    "/proc",
							    "--tmpfs",
							    "/tmp",
							    "--ro-bind",
							    dir,
							    dir,
							    "--unshare-all",
							    "--die-with-parent",
							    "--new-session",
							    "--cap-drop",
							    "ALL",
							    "--clearenv",
							    NULL };

					for (int i = 0; b[i]; i++)
						av[n++] = (char *)b[i];
				} else if (v == 2 || v == 4) {
					if (v == 4 && !lean)
						continue;
					av[n++] = (char *)(v == 2 ? latch : lean);
					if (v == 2)
						av[n++] = "run";
					av[n++] = "--workspace";
					av[n++] = (char *)dir;
					av[n++] = "--";
				}
				for (int i = 0; (v >= 2 ? room_cmds : cmds)[c][i]; i++)
					av[n++] = (v >= 2 ? room_cmds : cmds)[c][i];
				av[n] = NULL;
				if (run(av, &first, &total, &cpu) || !first) {
					fprintf(stderr, "room_start: %s %s failed in round %d\n", variants[v],
						cmd_names[c], r);
					return 1;
				}
				printf("%s,%s,%d,%llu,%llu,%llu\n", variants[v], cmd_names[c], r, first, total, cpu);
			}
		}
	}
	return 0;
}
