// SPDX-License-Identifier: GPL-2.0-only
/*
 * room_cg.c - the room programs on a live cgroup, through loader/cgroup.h.
 *
 * Invariant: a process in a room's cgroup reaches only what the room's
 * policy allows, whatever the socket call, and the kernel says so.  Each
 * probe runs in a child that has joined the room's cgroup and beside it, as
 * the control, the same probe from this process outside the room.  Verdicts
 * are read back from the room's counters.
 *
 * Everything happens on the loopback of a network namespace this process
 * makes (unshare), in cgroup v2 directories named after its PID, under a
 * private LATCH_BPFFS; all of it is removed at the end.  Prints ok/FAIL lines
 * and `N passed, M failed`; exits 77 when not root or without cgroup v2.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loader/loader.h"

#define PORT 7000

static int passed, failed;
static char cg_top[PATH_MAX], cg_room[PATH_MAX], cg_gate[PATH_MAX], bpffs[PATH_MAX];
static struct latch_cg_set *set;
static struct latch_cg_room *room;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s ", ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (ok)
		passed++;
	else
		failed++;
}

static int cg2_mount(char *buf, size_t len)
{
	char dev[256], dir[PATH_MAX], type[64];
	FILE *f = fopen("/proc/mounts", "r");
	int rc = -ENOENT;

	while (f && fscanf(f, "%255s %4095s %63s %*[^\n]", dev, dir, type) == 3)
		if (!strcmp(type, "cgroup2")) {
			snprintf(buf, len, "%s", dir);
			rc = 0;
			break;
		}
	if (f)
		fclose(f);
	return rc;
}

static int join(const char *cg)
{
	char path[PATH_MAX + 16];
	int fd, n;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = write(fd, "0", 1);
	close(fd);
	return n == 1 ? 0 : -errno;
}

/* ------------------------------------------------------------ probes */

static int sa_of(const char *addr, int port, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		*len = sizeof(*s4);
		return AF_INET;
	}
	inet_pton(AF_INET6, addr, &s6->sin6_addr);
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	*len = sizeof(*s6);
	return AF_INET6;
}

/* TCP connect within 1 s, send a line and read it back: 0, or -errno. */
static int tcp_echo(const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = sa_of(addr, port, &ss, &len), s = socket(fam, SOCK_STREAM | SOCK_NONBLOCK, 0), rc = 0;
	struct pollfd p = { .fd = s, .events = POLLOUT };
	char buf[8];
	socklen_t el = sizeof(rc);

	if (connect(s, (struct sockaddr *)&ss, len) && errno != EINPROGRESS) {
		rc = -errno;
		goto out;
	}
	if (poll(&p, 1, 1000) != 1) {
		rc = -ETIMEDOUT;
		goto out;
	}
	getsockopt(s, SOL_SOCKET, SO_ERROR, &rc, &el);
	if (rc) {
		rc = -rc;
		goto out;
	}
	if (send(s, "ping\n", 5, 0) != 5) {
		rc = -errno;
		goto out;
	}
	p.events = POLLIN;
	rc = poll(&p, 1, 1000) == 1 && recv(s, buf, sizeof(buf), 0) == 5 ? 0 : -ETIMEDOUT;
out:
	close(s);
	return rc;
}

/* One UDP datagram to addr:port from an unconnected socket, and its echo: 0 or -errno. */
static int udp_echo(const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = sa_of(addr, port, &ss, &len), s = socket(fam, SOCK_DGRAM, 0), rc;
	struct pollfd p = { .fd = s, .events = POLLIN };
	char buf[8];

	if (sendto(s, "ping\n", 5, 0, (struct sockaddr *)&ss, len) != 5)
		rc = -errno;
	else
		rc = poll(&p, 1, 1000) == 1 && recv(s, buf, sizeof(buf), 0) == 5 ? 0 : -ETIMEDOUT;
	close(s);
	return rc;
}

static int unix_connect(const char *path, int abstract)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0), rc;
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + strlen(path) + (abstract ? 1 : 0);

	strcpy(un.sun_path + (abstract ? 1 : 0), path);
	rc = connect(s, (struct sockaddr *)&un, len) ? -errno : 0;
	close(s);
	return rc;
}

/* Run fn in a child that joined cgroup CG; its result (0 or -errno). */
static int in_cgroup(const char *cg, int (*fn)(const char *, int), const char *addr, int port)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		if (join(cg))
			_exit(250);
		_exit(-fn(addr, port) & 0xff);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -EIO;
	return -WEXITSTATUS(st);
}

static int in_room(int (*fn)(const char *, int), const char *addr, int port)
{
	return in_cgroup(cg_room, fn, addr, port);
}

/* ------------------------------------------------------------ servers */

static pid_t servers[32];
static int n_servers;

/* An echo server on addr:port, TCP and UDP, in cgroup CG (NULL: this one); lines to log_fd. */
static void serve(const char *addr, int port, const char *cg, int log_fd)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = sa_of(addr, port, &ss, &len), one = 1;
	pid_t pid = fork();

	if (pid) {
		if (n_servers < 32)
			servers[n_servers++] = pid;
		usleep(50000);
		return;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (cg && join(cg))
		_exit(1);
	int t = socket(fam, SOCK_STREAM, 0), u = socket(fam, SOCK_DGRAM, 0);

	setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(t, (struct sockaddr *)&ss, len) || listen(t, 16) || bind(u, (struct sockaddr *)&ss, len))
		_exit(1);
	for (;;) {
		struct pollfd p[2] = { { .fd = t, .events = POLLIN }, { .fd = u, .events = POLLIN } };
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		char buf[512];
		ssize_t n;

		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents) {
			n = recvfrom(u, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
			if (n > 0) {
				sendto(u, buf, n, 0, (struct sockaddr *)&from, fl);
				if (log_fd >= 0 && write(log_fd, "u", 1) < 0)
					_exit(1);
			}
		}
		if (p[0].revents) {
			int c = accept(t, NULL, NULL);

			if (c < 0)
				continue;
			if (log_fd >= 0 && write(log_fd, "t", 1) < 0)
				_exit(1);
			/* echo each read until the peer closes, with a bound */
			for (int i = 0; i < 100; i++) {
				struct pollfd cp = { .fd = c, .events = POLLIN };

				if (poll(&cp, 1, 2000) != 1 || (n = recv(c, buf, sizeof(buf), 0)) <= 0)
					break;
				if (log_fd >= 0 && write(log_fd, "l", 1) < 0)
					_exit(1);
				send(c, buf, n, 0);
			}
			close(c);
		}
	}
}

static void unix_serve(const char *path, bool abstract)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	socklen_t len = offsetof(struct sockaddr_un, sun_path) + strlen(path) + (abstract ? 1 : 0);
	pid_t pid = fork();

	if (pid) {
		if (n_servers < 32)
			servers[n_servers++] = pid;
		usleep(30000);
		return;
	}
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	strcpy(un.sun_path + (abstract ? 1 : 0), path);
	if (bind(s, (struct sockaddr *)&un, len) || listen(s, 16))
		_exit(1);
	for (;;)
		close(accept(s, NULL, NULL));
}

/* ------------------------------------------------------------ kernel read-back */

static uint64_t counter(int reason, int kind)
{
	static struct latch_counter c[LATCH_COUNTER_SLOTS];

	if (latch_sandbox_counters(latch_cg_room_sandbox(room), c))
		return 0;
	return c[latch_counter_slot(reason, kind)].packets;
}

/*
 * latch_sandbox_counters() reads every slot in one BPF_MAP_LOOKUP_BATCH:
 * each slot must be its own per-CPU values summed, as a lookup of that slot
 * alone gives them (the room is quiet while both are read).  And the batch
 * itself must work on this kernel's per-CPU array, or latchd falls back to
 * a system call a slot.
 */
static int counters_read_whole(void)
{
	int fd = latch_sandbox_map_fd(latch_cg_room_sandbox(room), LATCH_MAP_COUNTERS);
	int ncpu = libbpf_num_possible_cpus();
	struct latch_counter got[LATCH_COUNTER_SLOTS], *v = calloc((size_t)ncpu * LATCH_COUNTER_SLOTS, sizeof(*v));
	__u32 keys[LATCH_COUNTER_SLOTS], out_batch, count = LATCH_COUNTER_SLOTS;
	int r, same = 1, nonzero = 0;

	if (!v || latch_sandbox_counters(latch_cg_room_sandbox(room), got)) {
		free(v);
		return 0;
	}
	r = bpf_map_lookup_batch(fd, NULL, &out_batch, keys, v, &count, NULL);
	if ((r < 0 && r != -ENOENT) || count != LATCH_COUNTER_SLOTS) {
		printf("# BPF_MAP_LOOKUP_BATCH of the counters: %d, %u slots\n", r, count);
		same = 0;
	}
	for (__u32 i = 0; i < LATCH_COUNTER_SLOTS; i++) {
		uint64_t packets = 0, bytes = 0;

		if (bpf_map_lookup_elem(fd, &i, v)) {
			same = 0;
			continue;
		}
		for (int c = 0; c < ncpu; c++) {
			packets += v[c].packets;
			bytes += v[c].bytes;
		}
		nonzero += packets != 0;
		if (packets != got[i].packets || bytes != got[i].bytes) {
			printf("# slot %u: %llu packets, %llu bytes read alone, %llu and %llu in the batch\n", i,
			       (unsigned long long)packets, (unsigned long long)bytes,
			       (unsigned long long)got[i].packets, (unsigned long long)got[i].bytes);
			same = 0;
		}
	}
	free(v);
	return same && nonzero >= 3; /* control: the slots compared hold this test's counts */
}

#define SOCK LATCH_ROOM_SLOT_SOCKADDR
#define PKT LATCH_ROOM_SLOT_PACKET

static int allow(const char *text, uint64_t expires)
{
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	if (latch_parse_entry(text, &e, err, sizeof(err)) ||
	    latch_policy_allow(latch_cg_room_sandbox(room), &e, expires, LATCH_ORIGIN_EGRESS, err, sizeof(err))) {
		printf("# allow %s: %s\n", text, err);
		return -1;
	}
	return 0;
}

static int revoke_entry(const char *text)
{
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	return latch_parse_entry(text, &e, err, sizeof(err)) ||
	       latch_policy_revoke(latch_cg_room_sandbox(room), &e, err, sizeof(err));
}

static int log_count(int fd, char what)
{
	char buf[4096];
	int n = 0;
	ssize_t r;

	while ((r = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < r; i++)
			n += buf[i] == what;
	return n;
}

/* ------------------------------------------------------------ the tests */

static void test_sealed(void)
{
	uint64_t d0 = counter(LATCH_DROP_POLICY, SOCK);

	/* Invariant: a fresh room is sealed: nothing, not even loopback, over any socket call. */
	check(tcp_echo("127.0.0.2", PORT) == 0, "control: tcp 127.0.0.2:%d answers outside the room", PORT);
	check(in_room(tcp_echo, "127.0.0.2", PORT) == -EPERM, "sealed: tcp connect to 127.0.0.2 is refused (EPERM)");
	check(udp_echo("127.0.0.2", PORT) == 0, "control: udp 127.0.0.2:%d answers outside the room", PORT);
	check(in_room(udp_echo, "127.0.0.2", PORT) == -EPERM, "sealed: udp sendto 127.0.0.2 is refused (EPERM)");
	check(tcp_echo("2001:db8::2", PORT) == 0, "control: tcp [2001:db8::2] answers outside the room");
	check(in_room(tcp_echo, "2001:db8::2", PORT) == -EPERM, "sealed: tcp connect to [2001:db8::2] is refused");
	check(in_room(tcp_echo, "::1", PORT) == -EPERM, "sealed: tcp connect to [::1] is refused");
	check(counter(LATCH_DROP_POLICY, SOCK) >= d0 + 4, "sealed: refusals counted under drop_policy (sockaddr)");
}

static void test_allow(void)
{
	uint64_t p0 = counter(LATCH_PASS_POLICY, SOCK), f0 = counter(LATCH_PASS_FLOW, PKT);

	/* Invariant: an entry opens its address, protocol and port, and nothing beside it. */
	check(!allow("127.0.0.2:7000/tcp", 0) && !allow("[2001:db8::2]:7000", 0),
	      "allow 127.0.0.2:7000/tcp and [2001:db8::2]:7000");
	check(in_room(tcp_echo, "127.0.0.2", PORT) == 0, "allowed: tcp 127.0.0.2:7000 answers in the room");
	check(in_room(udp_echo, "127.0.0.2", PORT) == -EPERM, "entry is /tcp: udp 127.0.0.2:7000 is refused");
	check(in_room(tcp_echo, "127.0.0.3", PORT) == -EPERM, "unlisted: tcp 127.0.0.3:7000 is refused");
	check(in_room(tcp_echo, "2001:db8::2", PORT) == 0, "allowed v6: tcp [2001:db8::2]:7000 answers");
	check(in_room(udp_echo, "2001:db8::2", PORT) == 0, "allowed v6: udp [2001:db8::2]:7000 answers");
	check(in_room(tcp_echo, "2001:db8::3", PORT) == -EPERM, "unlisted v6: tcp [2001:db8::3] is refused");
	/* a dual-stack socket to ::ffff:a.b.c.d is IPv4 on the wire and judged by the v4 policy */
	check(in_room(tcp_echo, "::ffff:127.0.0.2", PORT) == 0, "v4-mapped ::ffff:127.0.0.2 follows the v4 entry");
	check(in_room(tcp_echo, "::ffff:127.0.0.3", PORT) == -EPERM, "v4-mapped ::ffff:127.0.0.3 is refused");
	check(counter(LATCH_PASS_POLICY, SOCK) >= p0 + 3, "passes counted under pass_policy (sockaddr)");
	check(counter(LATCH_PASS_FLOW, PKT) > f0, "the connection's packets pass on the socket's cached verdict");
	check(counters_read_whole(), "the counters read in one batch are each slot's per-CPU sum, slot by slot");
}

/* Connect, echo, tell the parent, wait for its word, echo again: 0 when both echoes came back. */
static int hold_fd[2];
static int echo_across(const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = sa_of(addr, port, &ss, &len), s = socket(fam, SOCK_STREAM, 0);
	struct pollfd p = { .fd = s, .events = POLLIN };
	char buf[8], c;

	if (connect(s, (struct sockaddr *)&ss, len) || send(s, "one\n", 4, 0) != 4 || poll(&p, 1, 1000) != 1 ||
	    recv(s, buf, sizeof(buf), 0) != 4)
		return EIO;
	if (write(hold_fd[1], "h", 1) != 1 || read(hold_fd[0], &c, 1) != 1)
		return EIO;
	send(s, "two\n", 4, MSG_DONTWAIT);
	return poll(&p, 1, 700) == 1 && recv(s, buf, sizeof(buf), 0) == 4 ? 0 : ETIMEDOUT;
}

/* echo_across(ADDR) in the room, with BETWEEN done here while its connection is open; its exit status. */
static int across(const char *addr, void (*between)(void))
{
	int up[2], down[2], st = -1;
	pid_t pid;
	char c;

	if (pipe(up) || pipe(down))
		return -1;
	pid = fork();
	if (pid == 0) {
		hold_fd[0] = down[0];
		hold_fd[1] = up[1];
		_exit(join(cg_room) ? 250 : echo_across(addr, PORT));
	}
	if (read(up[0], &c, 1) == 1) {
		between();
		if (write(down[1], "g", 1) != 1)
			kill(pid, SIGKILL);
	}
	waitpid(pid, &st, 0);
	close(up[0]), close(up[1]), close(down[0]), close(down[1]);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void revoke_now(void)
{
	check(!revoke_entry("127.0.0.2:7000/tcp"), "revoke 127.0.0.2:7000/tcp while a connection is open");
}

static void test_revoke(void)
{
	uint64_t d0 = counter(LATCH_DROP_POLICY, PKT);

	/* Invariant: a revoke cuts an established connection on its next packet. */
	check(across("127.0.0.2", revoke_now) == ETIMEDOUT,
	      "revoked: the next packet of the open connection is dropped");
	check(counter(LATCH_DROP_POLICY, PKT) > d0, "revoked: counted under drop_policy (packet)");
	check(in_room(tcp_echo, "2001:db8::2", PORT) == 0, "revoked: control [2001:db8::2] still answers");
}

static void test_timed(void)
{
	/* Invariant: a timed entry's deadline is the kernel's: nothing in user space ends it. */
	check(!allow("127.0.0.4:7000/tcp", latch_now_boot_ns() + 800000000ull), "timed entry 127.0.0.4:7000 for 0.8 s");
	check(in_room(tcp_echo, "127.0.0.4", PORT) == 0, "timed: answers before its deadline");
	usleep(1000000);
	check(in_room(tcp_echo, "127.0.0.4", PORT) == -EPERM, "timed: refused after its deadline");
}

static void past_ttl(void)
{
	usleep(1000000);
	check(in_room(tcp_echo, "127.0.0.6", PORT) == -EPERM, "learned: a new connection after the TTL is refused");
}

static void test_learned(void)
{
	struct latch_entry e;
	char err[LATCH_ERR_MAX];

	/*
	 * Invariant: a learned answer's TTL bounds new connections only, in the
	 * kernel: a connection opened in time keeps working after it.
	 */
	check(!latch_parse_entry("127.0.0.6:7000/tcp", &e, err, sizeof(err)) &&
		      !latch_policy_learn(latch_cg_room_sandbox(room), &e, latch_now_boot_ns() + 700000000ull,
					  LATCH_ORIGIN_LEARNED, err, sizeof(err)),
	      "a learned answer 127.0.0.6:7000/tcp with a TTL of 0.7 s");
	check(across("127.0.0.6", past_ttl) == 0, "learned: the connection opened in time still works after the TTL");
}

static void test_open_by_name(void)
{
	char err[LATCH_ERR_MAX];
	struct latch_sandbox *sb = latch_cg_room_open(latch_cg_room_name(room), err, sizeof(err));
	struct latch_entry e;

	/* Invariant: another process (latchd) reaches a running room's policy by its name, and only that room's. */
	check(sb != NULL, "the room's maps open by name through _rooms/NAME (%s)", sb ? "ok" : err);
	if (!sb)
		return;
	check(in_room(tcp_echo, "127.0.0.7", PORT) == -EPERM, "control: 127.0.0.7 is refused before");
	check(!latch_parse_entry("127.0.0.7:7000/tcp", &e, err, sizeof(err)) &&
		      !latch_policy_allow(sb, &e, 0, LATCH_ORIGIN_GRANT, err, sizeof(err)),
	      "an entry written by name");
	check(in_room(tcp_echo, "127.0.0.7", PORT) == 0, "the room's process reaches 127.0.0.7 after it");
	latch_sandbox_free(sb);
	check(latch_cg_room_open("no-such-room", err, sizeof(err)) == NULL && errno == ENOENT,
	      "no such room: ENOENT, with a line (%s)", err);
}

static int dns_burst(const char *addr, int n)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fam = sa_of(addr, 53, &ss, &len), s = socket(fam, SOCK_DGRAM, 0), sent = 0;

	for (int i = 0; i < n; i++)
		sent += sendto(s, "q", 1, 0, (struct sockaddr *)&ss, len) == 1;
	close(s);
	return sent == n ? 0 : EPERM;
}

static void test_dns(int log_fd)
{
	uint64_t nr0 = counter(LATCH_DROP_DNS_NOT_RESOLVER, SOCK), r0 = counter(LATCH_DROP_DNS_RATE, PKT);
	int got;

	/* Invariant: DNS goes to the room's resolver only, even to an address allowed outright. */
	allow("127.0.0.5", 0);
	check(in_room(udp_echo, "127.0.0.5", PORT) == 0, "control: 127.0.0.5 is allowed outright (udp 7000)");
	check(in_room(udp_echo, "127.0.0.5", 53) == -EPERM, "dns to 127.0.0.5:53 is refused: not the resolver");
	check(counter(LATCH_DROP_DNS_NOT_RESOLVER, SOCK) > nr0, "counted under drop_dns_not_resolver");
	log_count(log_fd, 'u');
	check(in_room(udp_echo, "127.0.0.53", 53) == 0, "dns to the resolver 127.0.0.53 is answered");
	/* Invariant: the bucket (burst 5, 5/s) bounds a flood */
	usleep(1100000);
	log_count(log_fd, 'u');
	in_cgroup(cg_room, dns_burst, "127.0.0.53", 100);
	usleep(100000);
	got = log_count(log_fd, 'u');
	check(got >= 4 && got <= 7, "a flood of 100 queries: %d reach the resolver (burst 5)", got);
	check(counter(LATCH_DROP_DNS_RATE, PKT) >= r0 + 90, "the rest counted under drop_dns_rate");
}

static void test_unix(void)
{
	char path[PATH_MAX];

	/* Invariant: abstract unix sockets (the network namespace's, the host's) are out of reach. */
	snprintf(path, sizeof(path), "latch-room-cg-%d", (int)getpid());
	unix_serve(path, true);
	check(unix_connect(path, true) == 0, "control: the abstract socket @%s answers outside the room", path);
	check(in_room(unix_connect, path, true) == -EPERM, "abstract unix connect from the room is refused");
	snprintf(path, sizeof(path), "/tmp/latch-room-cg-%d.sock", (int)getpid());
	unix_serve(path, false);
	check(in_room(unix_connect, path, false) == 0,
	      "a path socket the room can see is reachable (the mount namespace decides)");
	unlink(path);
}

/* A cgroup_skb program that passes everything, named NAME: a gate an earlier latchd left, or someone else's. */
static int pass_prog(const char *name)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	return bpf_prog_load(BPF_PROG_TYPE_CGROUP_SKB, name, "GPL", insns, 2, NULL);
}

/* How many programs named NAME are attached to FD's ingress. */
static int ingress_named(int fd, const char *name)
{
	__u32 ids[64], cnt = 64;
	int n = 0;

	if (bpf_prog_query(fd, BPF_CGROUP_INET_INGRESS, 0, NULL, ids, &cnt))
		return -1;
	for (__u32 i = 0; i < cnt; i++) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		int pfd = bpf_prog_get_fd_by_id(ids[i]);

		if (pfd >= 0 && !bpf_obj_get_info_by_fd(pfd, &info, &len) && !strcmp(info.name, name))
			n++;
		if (pfd >= 0)
			close(pfd);
	}
	return n;
}

static void test_gate(int log_fd)
{
	char err[LATCH_ERR_MAX];
	uint64_t g0[LATCH_ROOM_GATE_SLOTS], g1[LATCH_ROOM_GATE_SLOTS];
	int gfd = open(cg_gate, O_RDONLY | O_DIRECTORY), other = pass_prog("other");
	int stale[2] = { pass_prog("latch_room_gate"), pass_prog("latch_room_gate") };

	/*
	 * Invariant: one gate on the services' cgroup.  Gates attach with
	 * ALLOW_MULTI, and one an earlier latchd left (another pin of the
	 * programs) would run for every packet, for nothing.  Attaching ours
	 * takes two such off; a program by another name stays (the control).
	 */
	check(stale[0] >= 0 && stale[1] >= 0 && other >= 0 && gfd >= 0 &&
		      !bpf_prog_attach(stale[0], gfd, BPF_CGROUP_INET_INGRESS, BPF_F_ALLOW_MULTI) &&
		      !bpf_prog_attach(stale[1], gfd, BPF_CGROUP_INET_INGRESS, BPF_F_ALLOW_MULTI) &&
		      !bpf_prog_attach(other, gfd, BPF_CGROUP_INET_INGRESS, BPF_F_ALLOW_MULTI) &&
		      ingress_named(gfd, "latch_room_gate") == 2,
	      "two stale latch_room_gates and another program on the services' cgroup");
	/* Invariant: a room service answers its own room only (the mark of latch_room_gate). */
	check(gfd >= 0 && !latch_cg_gate_attach(set, gfd, err, sizeof(err)), "gate attached to the services' cgroup");
	check(ingress_named(gfd, "latch_room_gate") == 1, "one gate left on the services' cgroup (ours)");
	check(ingress_named(gfd, "other") == 1, "control: the program by another name is still there");
	bpf_prog_detach2(other, gfd, BPF_CGROUP_INET_INGRESS);
	close(stale[0]);
	close(stale[1]);
	close(other);
	latch_cg_gate_counters(set, g0);
	log_count(log_fd, 'u');
	check(in_room(udp_echo, "127.76.1.2", 53) == 0, "the room's resolver 127.76.1.2 answers the room");
	check(udp_echo("127.76.1.2", 53) != 0, "a process outside the room gets nothing from 127.76.1.2");
	check(log_count(log_fd, 'u') == 1, "the service received the room's datagram only");
	latch_cg_gate_counters(set, g1);
	check(g1[LATCH_ROOM_GATE_PASS] > g0[LATCH_ROOM_GATE_PASS] &&
		      g1[LATCH_ROOM_GATE_DROP] > g0[LATCH_ROOM_GATE_DROP],
	      "the gate counted one pass and one drop");
	latch_cg_gate_detach(set, gfd);
	close(gfd);
}

/* A connect4 program that rewrites every destination to 127.0.0.3 (someone else's socket LB). */
static int rewrite_prog(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU | BPF_MOV | BPF_K, .dst_reg = BPF_REG_2, .imm = (__s32)htonl(0x7f000003) },
		{ .code = BPF_STX | BPF_MEM | BPF_W,
		  .dst_reg = BPF_REG_1,
		  .src_reg = BPF_REG_2,
		  .off = offsetof(struct bpf_sock_addr, user_ip4) },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = BPF_CGROUP_INET4_CONNECT);

	return bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "rewrite", "GPL", insns, 4, &o);
}

static void test_posture(void)
{
	struct latch_cg_posture p;
	char err[LATCH_ERR_MAX];
	int top = open(cg_top, O_RDONLY | O_DIRECTORY), rfd = open(cg_room, O_RDONLY | O_DIRECTORY);
	int prog = rewrite_prog(), egress = 0;
	uint64_t d0;

	latch_cg_room_posture(room, &p);
	check(p.enforced && p.hook[LATCH_CG_EGRESS].in_effective && !p.hook[LATCH_CG_CONNECT4].n_others,
	      "posture: enforced, read back from the kernel");

	/*
	 * Invariant: another program cannot pass what latch refuses.  One on the
	 * parent that rewrites destinations runs after latch's connect4; the
	 * packet then goes where latch never looked, and egress refuses it.
	 */
	check(prog >= 0 && !bpf_prog_attach(prog, top, BPF_CGROUP_INET4_CONNECT, BPF_F_ALLOW_MULTI),
	      "a rewriting connect4 program attached on the parent cgroup");
	latch_cg_room_posture(room, &p);
	check(p.enforced && p.hook[LATCH_CG_CONNECT4].n_others == 1 && *p.note,
	      "posture: still enforced, and the other program is named (%s)", p.note);
	d0 = counter(LATCH_DROP_POLICY, PKT);
	check(tcp_echo("127.0.0.3", PORT) == 0, "control: 127.0.0.3 answers outside the room");
	allow("127.0.0.2:7000/tcp", 0);
	check(in_room(tcp_echo, "127.0.0.2", PORT) != 0,
	      "a connect to allowed 127.0.0.2, rewritten to 127.0.0.3, fails");
	check(counter(LATCH_DROP_POLICY, PKT) > d0, "egress refused the rewritten destination (drop_policy, packet)");
	bpf_prog_detach2(prog, top, BPF_CGROUP_INET4_CONNECT);
	check(in_room(tcp_echo, "127.0.0.2", PORT) == 0, "control: without the rewrite 127.0.0.2 answers");

	/* Invariant: a missing hook is reported, not assumed (control: the check above). */
	{
		__u32 ids[4], cnt = 4;
		int fd;

		if (!bpf_prog_query(rfd, BPF_CGROUP_INET_EGRESS, 0, NULL, ids, &cnt) && cnt == 1 &&
		    (fd = bpf_prog_get_fd_by_id(ids[0])) >= 0) {
			egress = !bpf_prog_detach2(fd, rfd, BPF_CGROUP_INET_EGRESS);
			close(fd);
		}
		latch_cg_room_posture(room, &p);
		check(egress && !p.enforced && strstr(p.why, "egress"),
		      "posture: egress detached by hand is reported (%s)", p.why);
		err[0] = 0;
		check(!latch_cg_room_attach(room, err, sizeof(err)), "re-attach the room's programs %s", err);
		latch_cg_room_posture(room, &p);
		check(p.enforced, "posture: enforced again after the re-attach");
	}
	close(prog);
	close(top);
	close(rfd);
}

static void test_no_config(void)
{
	char err[LATCH_ERR_MAX], bare[PATH_MAX + 8];
	struct latch_sandbox_opts o = { 0 };
	struct latch_cg_room *keep = room, *other;
	uint64_t n0, n1;
	int fd;

	/* Invariant: a cgroup with latch's programs but no room state behind them passes nothing. */
	snprintf(bare, sizeof(bare), "%s/bare", cg_top);
	mkdir(bare, 0755);
	fd = open(bare, O_RDONLY | O_DIRECTORY);
	snprintf(o.name, sizeof(o.name), "cgtest-b-%d", (int)getpid());
	other = latch_cg_room_new(set, &o, fd, err, sizeof(err));
	check(other && !latch_cg_room_attach(other, err, sizeof(err)), "a second room, on a cgroup of its own");
	if (!other)
		goto out;
	room = other;
	allow("127.0.0.2:7000/tcp", 0);
	check(in_cgroup(bare, tcp_echo, "127.0.0.2", PORT) == 0, "control: its entry lets 127.0.0.2 through");
	check(in_cgroup(bare, tcp_echo, "127.0.0.3", PORT) == -EPERM,
	      "and the rooms do not share a policy: 127.0.0.3 is refused");
	room = keep;
	check(in_room(tcp_echo, "127.0.0.3", PORT) == -EPERM, "the first room is unchanged by the second's entries");
	latch_cg_orphan_counters(set, &n0);
	latch_cg_room_remove(other);
	check(in_cgroup(bare, tcp_echo, "127.0.0.2", PORT) == -EPERM,
	      "state removed, programs still attached: refused");
	latch_cg_orphan_counters(set, &n1);
	check(n1 > n0, "counted under drop_no_config, in room_orphans");
out:
	close(fd);
	rmdir(bare);
}

int main(void)
{
	char err[LATCH_ERR_MAX], cg2[PATH_MAX];
	struct latch_sandbox_opts o = { 0 };
	int rfd, log_fd[2], gate_log[2];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid()) {
		printf("skip room_cg: needs root\n0 passed, 0 failed\n");
		return 77;
	}
	if (cg2_mount(cg2, sizeof(cg2))) {
		printf("skip room_cg: no cgroup2 mount\n0 passed, 0 failed\n");
		return 77;
	}
	if (unshare(CLONE_NEWNET) || system("ip link set lo up && ip addr add 2001:db8::2/128 dev lo nodad && "
					    "ip addr add 2001:db8::3/128 dev lo nodad")) {
		printf("FAIL setup: a private network namespace\n0 passed, 1 failed\n");
		return 1;
	}
	snprintf(bpffs, sizeof(bpffs), "/sys/fs/bpf/latch-selftest-%d", (int)getpid());
	mkdir(bpffs, 0700);
	setenv("LATCH_BPFFS", bpffs, 1);
	if (snprintf(cg_top, sizeof(cg_top), "%s/latch-selftest-%d", cg2, (int)getpid()) >= (int)sizeof(cg_top) ||
	    snprintf(cg_room, sizeof(cg_room), "%s/room", cg_top) >= (int)sizeof(cg_room) ||
	    snprintf(cg_gate, sizeof(cg_gate), "%s/gate", cg_top) >= (int)sizeof(cg_gate)) {
		printf("FAIL setup: the cgroup2 mount's path is too long\n0 passed, 1 failed\n");
		return 1;
	}
	mkdir(cg_top, 0755);
	mkdir(cg_room, 0755);
	mkdir(cg_gate, 0755);
	if (pipe2(log_fd, O_NONBLOCK) || pipe2(gate_log, O_NONBLOCK))
		return 1;

	set = latch_cg_open(err, sizeof(err));
	check(set != NULL, "the room programs load and pin (%s)", set ? latch_cg_set_dir(set) : err);
	if (!set)
		goto out;
	check(latch_cg_have_unix(set), "the kernel takes the unix-socket hooks");
	rfd = open(cg_room, O_RDONLY | O_DIRECTORY);
	snprintf(o.name, sizeof(o.name), "cgtest-%d", (int)getpid());
	inet_pton(AF_INET, "127.0.0.53", &o.resolver_ip4.v4);
	o.resolver_ip4.family = AF_INET;
	/* the room's services on 127.76.1.2 (behind the gate), DNS to 127.0.0.53 */
	inet_pton(AF_INET, "127.76.1.2", &o.host_ip4.v4);
	o.host_ip4.family = AF_INET;
	o.host_ports[0] = 53;
	o.n_host_ports = 1;
	o.dns_rate = 5;
	o.dns_burst = 5;
	room = latch_cg_room_new(set, &o, rfd, err, sizeof(err));
	check(room != NULL, "a room's state is created (%s)", room ? latch_cg_room_name(room) : err);
	if (!room || latch_cg_room_attach(room, err, sizeof(err))) {
		check(0, "attach: %s", err);
		goto out;
	}

	serve("127.0.0.2", PORT, NULL, -1);
	serve("127.0.0.3", PORT, NULL, -1);
	serve("127.0.0.4", PORT, NULL, -1);
	serve("127.0.0.5", PORT, NULL, -1);
	serve("127.0.0.6", PORT, NULL, -1);
	serve("127.0.0.7", PORT, NULL, -1);
	serve("127.0.0.5", 53, NULL, -1);
	serve("127.0.0.53", 53, NULL, log_fd[1]);
	serve("2001:db8::2", PORT, NULL, -1);
	serve("2001:db8::3", PORT, NULL, -1);
	serve("127.76.1.2", 53, cg_gate, gate_log[1]);

	test_sealed();
	test_allow();
	test_revoke();
	test_timed();
	test_learned();
	test_open_by_name();
	test_dns(log_fd[0]);
	test_unix();
	test_posture();
	test_no_config();
	test_gate(gate_log[0]);
out:
	for (int i = 0; i < n_servers; i++) {
		kill(servers[i], SIGKILL);
		waitpid(servers[i], NULL, 0);
	}
	latch_cg_room_remove(room);
	latch_cg_close(set);
	rmdir(cg_room);
	rmdir(cg_gate);
	rmdir(cg_top);
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", bpffs);
		if (system(cmd))
			printf("# could not remove %s\n", bpffs);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
