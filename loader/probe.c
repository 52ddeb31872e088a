// SPDX-License-Identifier: GPL-2.0-only
/*
 * probe.c - can this host load and attach latch's programs?  Tried for
 * real, for `latch doctor`: the programs are loaded and attached to lo of a
 * throwaway network namespace, in a child process so that the caller's
 * namespace is untouched and everything vanishes with the child.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "latch_tc.skel.h"
#include "loader/hook.h"

/* In the child: 'y'/'n' for the load and the attach, then the attach error. */
static void probe_child(int fd, enum latch_tc_mode mode)
{
	char r[2 + LATCH_ERR_MAX] = { 'n', 'n' };
	struct latch_tc *s = latch_tc__open();
	bool csum = latch_csum_check_supported(), own;
	int progs[LATCH_DIR_COUNT];

	if (s) {
		bpf_program__set_autoload(s->progs.latch_from_guest, csum);
		bpf_program__set_autoload(s->progs.latch_from_guest_nocsum, !csum);
	}
	if (s && latch_tc__load(s) == 0) {
		r[0] = 'y';
		progs[LATCH_DIR_FROM_GUEST] =
			bpf_program__fd(csum ? s->progs.latch_from_guest : s->progs.latch_from_guest_nocsum);
		progs[LATCH_DIR_TO_GUEST] = bpf_program__fd(s->progs.latch_to_guest);
		if (unshare(CLONE_NEWNET))
			snprintf(r + 2, LATCH_ERR_MAX, "unshare: %s", strerror(errno));
		else if (mode == LATCH_TC_TCX) {
			int ok = 1;

			/* unpinned links: they go with the child */
			for (int d = 0; d < LATCH_DIR_COUNT && ok; d++) {
				int l = latch_tcx_link_create(1, d == LATCH_DIR_TO_GUEST, progs[d]);

				if (l < 0) {
					snprintf(r + 2, LATCH_ERR_MAX, "TCX link: %s", strerror(-l));
					ok = 0;
				}
			}
			r[1] = ok ? 'y' : 'n';
		} else if (latch_hook_attach(NULL, mode, 1, progs, &own, r + 2, LATCH_ERR_MAX) == 0) {
			r[1] = 'y';
		}
	}
	if (write(fd, r, sizeof(r)) != sizeof(r))
		_exit(1);
	latch_tc__destroy(s);
	_exit(0);
}

int latch_tc_probe(enum latch_tc_mode mode, bool *loaded, char *detail, size_t len)
{
	char r[2 + LATCH_ERR_MAX] = { 'x', 'x' };
	int pipefd[2], status;
	pid_t pid;

	*loaded = false;
	if (pipe(pipefd))
		return snprintf(detail, len, "pipe: %s", strerror(errno)), -1;
	pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		probe_child(pipefd[1], mode);
	}
	close(pipefd[1]);
	if (pid > 0) {
		if (read(pipefd[0], r, sizeof(r)) != sizeof(r))
			r[0] = r[1] = 'x';
		waitpid(pid, &status, 0);
	}
	close(pipefd[0]);
	r[sizeof(r) - 1] = '\0';
	*loaded = r[0] == 'y';
	if (r[0] != 'y')
		return snprintf(detail, len, "the kernel refused latch's programs"), -1;
	if (r[1] != 'y')
		return snprintf(detail, len, "%s", r[2] ? r + 2 : "attach failed"), -1;
	snprintf(detail, len, "both programs attached as %s in a scratch netns",
		 mode == LATCH_TC_TCX ? "TCX links" : "clsact filters");
	return 0;
}
