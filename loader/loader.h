/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * loader.h - the loader's public face: the only module that talks to libbpf.
 *
 * entry.h: egress entries (ADDR|CIDR[:PORTS][/proto]) and the rules they
 * become; sandbox.h: load, pin, attach, re-attach and observe a sandbox's
 * programs; policy.h: the policy maps and the policy lock; and below, the
 * few things other modules need of libbpf.  Other modules include this
 * header only.
 */
#ifndef LATCH_LOADER_H
#define LATCH_LOADER_H

#include "bpf/latch_abi.h"
#include "common/common.h"
#include "loader/cgroup.h"
#include "loader/entry.h"
#include "loader/policy.h"
#include "loader/sandbox.h"
#include "loader/verify.h"

/* Where libbpf's own messages go: nowhere, warnings (the default), or everything (-v). */
enum latch_log_level { LATCH_LOG_QUIET, LATCH_LOG_WARN, LATCH_LOG_DEBUG };
void latch_loader_set_log(enum latch_log_level level);

/*
 * A sandbox's deny events (the ring buffer "events").  fn sees each event;
 * poll latch_events_fd() and call latch_events_consume() when it is readable.
 */
typedef int (*latch_event_fn)(const struct latch_event *ev, void *arg);
struct latch_events;
struct latch_events *latch_events_open(const struct latch_sandbox *sb, latch_event_fn fn, void *arg);
int latch_events_fd(const struct latch_events *ev);
int latch_events_consume(struct latch_events *ev);
void latch_events_free(struct latch_events *ev);

#endif
