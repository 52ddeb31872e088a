// SPDX-License-Identifier: GPL-2.0-only
/*
 * room_hook.c - what latch's cgroup programs add to a socket call.
 *
 *   room_hook ROUNDS N
 *
 * Two cgroups side by side: one plain, one a room (latch's programs
 * attached through loader/cgroup.h, an entry allowing the listener).  Each
 * round, a process in each (in an order that alternates) times N
 * iterations of socket + connect + close to a TCP listener on loopback (the
 * connect4 hook, then the egress program on the SYN and the ACK), and N
 * sendto() of a UDP datagram (sendmsg4, then egress on the datagram).  The
 * close resets (SO_LINGER 0) so that no TIME_WAIT piles up.  All of it in a
 * network namespace of its own.  Prints CSV: what,round,plain_ns,room_ns;
 * then, from the kernel's own BPF run-time statistics (BPF_ENABLE_STATS,
 * on while this runs), each program's ns per run: prog,HOOK,runs,ns_per_run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "loader/loader.h"

#define PORT 7111

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int join(const char *cg)
{
	char path[4200];
	int fd, ok;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	fd = open(path, O_WRONLY);
	ok = fd >= 0 && write(fd, "0", 1) == 1;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* ns per iteration of WHAT (0 connect, 1 sendto), N times, in cgroup CG; -1 on failure */
static long long measure(const char *cg, int what, int n)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct linger lg = { 1, 0 };
	int p[2];
	long long r = -1;
	pid_t pid;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		unsigned long long t0;
		int u = -1;

		if (join(cg))
			_exit(1);
		if (what == 1)
			u = socket(AF_INET, SOCK_DGRAM, 0);
		t0 = now_ns();
		for (int i = 0; i < n; i++) {
			if (what == 0) {
				int s = socket(AF_INET, SOCK_STREAM, 0);

				if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
					_exit(2);
				setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				close(s);
			} else if (sendto(u, "x", 1, 0, (struct sockaddr *)&sa, sizeof(sa)) != 1) {
				_exit(3);
			}
		}
		r = (long long)((now_ns() - t0) / n);
		_exit(write(p[1], &r, sizeof(r)) == sizeof(r) ? 0 : 4);
	}
	close(p[1]);
	if (read(p[0], &r, sizeof(r)) != sizeof(r))
		r = -1;
	close(p[0]);
	waitpid(pid, NULL, 0);
	return r;
}

/* A TCP listener that accepts and closes, and a UDP socket that drops, on 127.0.0.1:PORT. */
static pid_t sink(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	pid_t pid = fork();
	int one = 1;

	if (pid)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	int t = socket(AF_INET, SOCK_STREAM, 0), u = socket(AF_INET, SOCK_DGRAM, 0), rcv = 1 << 20;

	setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(u, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (bind(t, (struct sockaddr *)&sa, sizeof(sa)) || listen(t, 4096) ||
	    bind(u, (struct sockaddr *)&sa, sizeof(sa)))
		_exit(1);
	for (;;) {
		int c = accept(t, NULL, NULL);

		if (c >= 0)
			close(c);
	}
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 10, n = argc > 2 ? atoi(argv[2]) : 5000, rfd;
	char cg2[4096] = "", top[4200], plain[4300], roomdir[4300], err[LATCH_ERR_MAX], bpffs[64], dev[256], type[64];
	struct latch_sandbox_opts o = { 0 };
	struct latch_cg_room *room = NULL;
	struct latch_cg_set *set = NULL;
	struct latch_entry e;
	FILE *f = fopen("/proc/mounts", "r");
	struct latch_cg_posture post;
	pid_t sink_pid;
	int rc = 1, stats_fd = -1;

	while (f && fscanf(f, "%255s %4095s %63s %*[^\n]", dev, cg2, type) == 3 && strcmp(type, "cgroup2"))
		;
	if (f)
		fclose(f);
	if (strcmp(type, "cgroup2") || unshare(CLONE_NEWNET) || system("ip link set lo up")) {
		fprintf(stderr, "room_hook: needs root, a cgroup2 mount and a network namespace\n");
		return 1;
	}
	snprintf(bpffs, sizeof(bpffs), "/sys/fs/bpf/latch-bench-hook-%d", (int)getpid());
	mkdir(bpffs, 0700);
	setenv("LATCH_BPFFS", bpffs, 1);
	snprintf(top, sizeof(top), "%s/latch-bench-hook-%d", cg2, (int)getpid());
	snprintf(plain, sizeof(plain), "%s/plain", top);
	snprintf(roomdir, sizeof(roomdir), "%s/room", top);
	mkdir(top, 0755);
	mkdir(plain, 0755);
	mkdir(roomdir, 0755);
	sink_pid = sink();
	usleep(100000);
	set = latch_cg_open(err, sizeof(err));
	rfd = open(roomdir, O_RDONLY | O_DIRECTORY);
	snprintf(o.name, sizeof(o.name), "bench-hook-%d", (int)getpid());
	room = set ? latch_cg_room_new(set, &o, rfd, err, sizeof(err)) : NULL;
	if (!room || latch_cg_room_attach(room, err, sizeof(err)) ||
	    latch_parse_entry("127.0.0.1:7111", &e, err, sizeof(err)) ||
	    latch_policy_allow(latch_cg_room_sandbox(room), &e, 0, LATCH_ORIGIN_EGRESS, err, sizeof(err))) {
		fprintf(stderr, "room_hook: %s\n", err);
		goto out;
	}
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	printf("what,round,plain_ns,room_ns\n");
	for (int r = 0; r < rounds; r++)
		for (int what = 0; what < 2; what++) {
			long long a, b;

			if (r % 2) {
				b = measure(roomdir, what, n);
				a = measure(plain, what, n);
			} else {
				a = measure(plain, what, n);
				b = measure(roomdir, what, n);
			}
			if (a < 0 || b < 0) {
				fprintf(stderr, "room_hook: a probe failed in round %d\n", r);
				goto out;
			}
			printf("%s,%d,%lld,%lld\n", what ? "sendto" : "connect", r, a, b);
		}
	latch_cg_room_posture(room, &post);
	for (int h = 0; h < LATCH_CG_HOOK_COUNT; h++) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		int fd = post.hook[h].pinned_id ? bpf_prog_get_fd_by_id(post.hook[h].pinned_id) : -1;

		if (fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) && info.run_cnt)
			printf("prog,%s,%llu,%.1f\n", latch_cg_hook_names[h], (unsigned long long)info.run_cnt,
			       (double)info.run_time_ns / info.run_cnt);
		if (fd >= 0)
			close(fd);
	}
	rc = 0;
out:
	if (stats_fd >= 0)
		close(stats_fd);
	kill(sink_pid, SIGKILL);
	waitpid(sink_pid, NULL, 0);
	latch_cg_room_remove(room);
	latch_cg_close(set);
	rmdir(plain);
	rmdir(roomdir);
	rmdir(top);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", bpffs);
		if (system(cmd))
			fprintf(stderr, "room_hook: could not remove %s\n", bpffs);
	}
	return rc;
}
