/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * room.h - latchd's rooms (room.c) and its own confinement (confine.c),
 * private to latchd/.  docs/rooms.md has the design.
 */
#ifndef LATCH_LATCHD_ROOM_H
#define LATCH_LATCHD_ROOM_H

#include <jansson.h>
#include <stdint.h>

#include "broker/broker.h"
#include "loader/loader.h"

struct latchd;
struct client;

/* A room's broker listens here on its service address (the VM brokers' port too). */
#define ROOM_BROKER_PORT 8119

/* room.c: the control ops room_open, room_ready, room_done */
void latchd_room_op_open(struct client *c, json_t *req);
void latchd_room_op_ready(struct client *c, json_t *req);
void latchd_room_op_done(struct client *c, json_t *req);
/* The connection of a latch run closed: the rooms it opened go. */
void latchd_rooms_client_gone(struct latchd *ld, struct client *c);
void latchd_rooms_stop(struct latchd *ld);

/*
 * confine.c.  latchd_confine_start() moves latchd into its cgroup under the room
 * programs: PORTS are its listeners' ports (what is sent from them is an
 * answer).  Before any socket is made; 0 or -errno with a line in err.
 * latchd_confine_resolver() starts latchd's own resolver (after the event loop).
 */
int latchd_confine_start(struct latchd *ld, const uint16_t *ports, int n_ports, char *err, size_t errlen);
int latchd_confine_resolver(struct latchd *ld, char *err, size_t errlen);
/* latch.conf's DNS upstreams as latchd's permanent policy (start, SIGHUP). */
int latchd_confine_upstreams(struct latchd *ld, char *err, size_t errlen);
/*
 * Look NAME up for latchd to connect to on PORTS (a kit upstream, a CONNECT
 * name), for WHO (the sandbox or room, in the audit log): the addresses
 * latchd may reach are installed in its policy before cb gets them all.
 * The shape of latch_http_sandbox_opts.resolve; 0 or -errno.
 */
int latchd_confine_lookup(struct latchd *ld, const char *who, const char *name, const struct latch_entry *ports,
			  latch_http_resolved_cb cb, void *cbarg);
void latchd_confine_tick(struct latchd *ld);
/* Drop latchd's own learned answers whose deadline passed before BEFORE_NS (periodic.c, as a sandbox's). */
void latchd_confine_prune(struct latchd *ld, uint64_t before_ns);
void latchd_confine_stop(struct latchd *ld);

#endif
