// SPDX-License-Identifier: GPL-2.0-only
/*
 * runtime.c - what other modules need of libbpf, asked of the loader: where
 * libbpf's own messages go, and a sandbox's deny events (latchd).  The
 * doctor's probe of the programs is probe.c.
 */
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "loader/loader.h"

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
