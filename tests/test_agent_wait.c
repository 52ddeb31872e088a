// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_agent_wait.c - latch_agent_wait(), the host's wait for a booting
 * guest's agent (vm/agent_client.c), against a channel played by a child
 * process on a Unix socket.
 *
 * QEMU serves a channel socket one client at a time: a second connect()
 * succeeds (the kernel queues it) but nothing reads it until the first
 * client goes.  The child here does the same, so a connection it never
 * serves is what `latch up` met when its guest said "serving" on the
 * console and never answered.  It is a stand-in for QEMU and the guest
 * agent, which the guest tests (selftests/vm_*.sh) run for real.
 */
#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vm/agent_client.h"

static char dir[64], sock_path[100];
static pid_t channel = -1;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/latch-agentwait-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/t.agent", dir);
}

static void teardown(void)
{
	char cmd[128];

	if (channel > 0) {
		kill(channel, SIGKILL);
		waitpid(channel, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		cr_log_warn("could not remove %s", dir);
}

/* Answer every PING on fd with a PONG until the client goes. */
static void answer_pings(int fd)
{
	struct lagent_hdr h;

	while (recv(fd, &h, sizeof(h), MSG_WAITALL) == sizeof(h)) {
		struct {
			struct lagent_hdr h;
			struct lagent_pong p;
		} out = { 0 };

		if (le16toh(h.type) != LAGENT_PING)
			continue;
		out.h.magic = htole32(LAGENT_MAGIC);
		out.h.type = htole16(LAGENT_PONG);
		out.h.id = h.id;
		out.h.len = htole32(sizeof(out.p));
		out.p.version = htole32(LAGENT_VERSION);
		snprintf(out.p.release, sizeof(out.p.release), "6.1.0-test");
		if (send(fd, &out, sizeof(out), MSG_NOSIGNAL) != sizeof(out))
			return;
	}
}

/*
 * The channel: listen on sock_path; the first `silent` clients are accepted
 * and never answered (what they send is dropped; each is held until it
 * goes, as QEMU holds its one client), the ones after are answered.
 * Returns once listening.
 */
static void start_channel(int silent)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);

	cr_assert_geq(lfd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(lfd, 8), 0);
	channel = fork();
	cr_assert_geq(channel, 0);
	if (channel == 0) {
		for (int n = 0;; n++) {
			int fd = accept(lfd, NULL, NULL);
			char buf[256];

			if (fd < 0)
				_exit(1);
			if (n < silent) /* hold it, answering nothing, until the client closes it */
				while (recv(fd, buf, sizeof(buf), 0) > 0)
					;
			else
				answer_pings(fd);
			close(fd);
		}
	}
	close(lfd);
}

/*
 * Invariant: a channel connection that is never served does not hold up the
 * wait to its end: after LATCH_AGENT_SESSION_MS of silence the client makes
 * a new connection, which is answered.
 */
Test(agent_wait, a_silent_connection_is_dropped_and_made_again, .init = setup, .fini = teardown, .timeout = 30)
{
	struct latch_agent_wait_stats st;
	char release[64] = "";

	start_channel(1);
	cr_assert_eq(latch_agent_wait(sock_path, 3 * LATCH_AGENT_SESSION_MS, NULL, NULL, release, sizeof(release), &st),
		     0, "connects %d, last error %d", st.connects, st.last_error);
	cr_expect_eq(st.connects, 2, "the silent one, then the one that answered");
	cr_expect_str_eq(release, "6.1.0-test");
}

/* Control: a channel that answers at once is answered on the first connection. */
Test(agent_wait, an_answering_channel_takes_one_connection, .init = setup, .fini = teardown, .timeout = 30)
{
	struct latch_agent_wait_stats st;
	char release[64] = "";

	start_channel(0);
	cr_assert_eq(latch_agent_wait(sock_path, 3 * LATCH_AGENT_SESSION_MS, NULL, NULL, release, sizeof(release), &st),
		     0);
	cr_expect_eq(st.connects, 1);
	cr_expect_str_eq(release, "6.1.0-test");
}

/* A channel that never answers: the wait ends at its timeout and says what it saw. */
Test(agent_wait, a_channel_that_never_answers_times_out_with_what_was_seen, .init = setup, .fini = teardown,
     .timeout = 30)
{
	struct latch_agent_wait_stats st;

	start_channel(1000);
	cr_assert_eq(latch_agent_wait(sock_path, LATCH_AGENT_SESSION_MS + 1000, NULL, NULL, NULL, 0, &st), -ETIMEDOUT);
	cr_expect_eq(st.connects, 2);
	cr_expect_eq(st.bytes_in, 0);
	cr_expect_geq(st.first_connect_ms, 0);
}

/* No socket at all (the domain never made one): no connection, and the error says why. */
Test(agent_wait, no_socket_is_no_connection, .init = setup, .fini = teardown, .timeout = 30)
{
	struct latch_agent_wait_stats st;

	cr_assert_eq(latch_agent_wait(sock_path, 700, NULL, NULL, NULL, 0, &st), -ETIMEDOUT);
	cr_expect_eq(st.connects, 0);
	cr_expect_eq(st.first_connect_ms, -1);
	cr_expect_eq(st.last_error, -ENOENT);
}

static int stopped(void *arg)
{
	return -EIO;
}

/* The domain stopped: the wait ends at once with alive()'s answer. */
Test(agent_wait, a_stopped_domain_ends_the_wait, .init = setup, .fini = teardown, .timeout = 30)
{
	struct latch_agent_wait_stats st;

	cr_assert_eq(latch_agent_wait(sock_path, 10000, stopped, NULL, NULL, 0, &st), -EIO);
}
