// SPDX-License-Identifier: GPL-2.0-only
/*
 * runtime.c - what other modules need of libbpf, asked of the loader: where
 * libbpf's own messages go, whether this kernel loads and attaches latch's
 * programs (doctor), and a sandbox's deny events (latchd).
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "latch_tc.skel.h"
#include "loader/loader.h"
#include "loader/tc.h"

static enum latch_log_level log_level = LATCH_LOG_WARN;

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (log_level == LATCH_LOG_QUIET || (level == LIBBPF_DEBUG && log_level < LATCH_LOG_DEBUG) ||
	    (level == LIBBPF_INFO && log_level < LATCH_LOG_DEBUG))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void latch_loader_set_log(enum latch_log_level level)
{
	log_level = level;
	libbpf_set_print(libbpf_log);
}

int latch_probe_tc(struct latch_tc_probe *out)
{
	int pipefd[2], status;
	char buf[2] = { 'x', 'x' };
	pid_t pid;

	out->loaded = out->attached = false;
	if (pipe(pipefd))
		return -errno;
	/* a child, in a network namespace of its own: its loopback is the test device */
	pid = fork();
	if (pid == 0) {
		struct latch_tc *s;
		char r[2] = { 'n', 'n' };
		bool created;

		close(pipefd[0]);
		s = latch_tc__open_and_load();
		r[0] = s ? 'y' : 'n';
		if (s && unshare(CLONE_NEWNET) == 0 && latch_tc_hook_create(1, &created) == 0)
			r[1] = latch_tc_attach(1, false, bpf_program__fd(s->progs.latch_from_guest), false) == 0 &&
					       latch_tc_attach(1, true, bpf_program__fd(s->progs.latch_to_guest), false) == 0
				       ? 'y'
				       : 'n';
		if (write(pipefd[1], r, 2) != 2)
			_exit(1);
		latch_tc__destroy(s);
		_exit(0);
	}
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		return -errno;
	}
	if (read(pipefd[0], buf, 2) != 2)
		buf[0] = buf[1] = 'x';
	waitpid(pid, &status, 0);
	close(pipefd[0]);
	out->loaded = buf[0] == 'y';
	out->attached = buf[1] == 'y';
	return buf[0] == 'x' ? -EIO : 0;
}

struct latch_events {
	struct ring_buffer *rb;
	latch_event_fn fn;
	void *arg;
};

static int on_sample(void *ctx, void *data, size_t size)
{
	struct latch_events *ev = ctx;

	/* the kernel wrote it, but a short record must still never be read past its end */
	if (size < sizeof(struct latch_event))
		return 0;
	return ev->fn(data, ev->arg);
}

struct latch_events *latch_events_open(const struct latch_sandbox *sb, latch_event_fn fn, void *arg)
{
	struct latch_events *ev = calloc(1, sizeof(*ev));
	int fd = latch_sandbox_map_fd(sb, LATCH_MAP_EVENTS);

	if (!ev)
		return NULL;
	ev->fn = fn;
	ev->arg = arg;
	if (fd < 0 || !(ev->rb = ring_buffer__new(fd, on_sample, ev, NULL))) {
		free(ev);
		errno = fd < 0 ? EBADF : errno;
		return NULL;
	}
	return ev;
}

int latch_events_fd(const struct latch_events *ev)
{
	return ring_buffer__epoll_fd(ev->rb);
}

int latch_events_consume(struct latch_events *ev)
{
	return ring_buffer__consume(ev->rb);
}

void latch_events_free(struct latch_events *ev)
{
	if (!ev)
		return;
	ring_buffer__free(ev->rb);
	free(ev);
}
