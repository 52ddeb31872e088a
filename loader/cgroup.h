/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cgroup.h - rooms' kernel enforcement: bpf/latch_cg.bpf.c on cgroups.
 *
 * The programs are loaded and pinned once per build of latch, under
 * $LATCH_BPFFS/latch/_cgroup/BUILD/, and then only attached: a room costs a
 * few map updates, never a load.  A room's own state (its config, policy
 * maps and counters) is a slot of maps pinned under BUILD/slots/N/, linked
 * from $LATCH_BPFFS/latch/_rooms/NAME, and found by the programs through the
 * room's cgroup id.  The policy is written with
 * loader/policy.h on the sandbox that latch_cg_room_sandbox() returns, in the
 * entry language of the tc side.  Everything that reports state reads it back
 * from the kernel.
 */
#ifndef LATCH_LOADER_CGROUP_H
#define LATCH_LOADER_CGROUP_H

#include <stdbool.h>
#include <limits.h>
#include <stdint.h>

#include "bpf/latch_abi.h"
#include "loader/entry.h"
#include "loader/sandbox.h"

/* Attach types missing from older UAPI headers (Linux 6.7). */
#define LATCH_CG_ATTACH_UNIX_CONNECT 49
#define LATCH_CG_ATTACH_UNIX_SENDMSG 50

enum latch_cg_hook {
	LATCH_CG_EGRESS, /* cgroup_skb/egress: every packet; the one no rewrite gets past */
	LATCH_CG_CONNECT4, /* cgroup/connect4 */
	LATCH_CG_CONNECT6,
	LATCH_CG_SENDMSG4, /* cgroup/sendmsg4: unconnected UDP */
	LATCH_CG_SENDMSG6,
	LATCH_CG_CONNECT_UNIX, /* abstract unix sockets; Linux 6.7+ */
	LATCH_CG_SENDMSG_UNIX,
	LATCH_CG_HOOK_COUNT,
};

extern const char *const latch_cg_hook_names[LATCH_CG_HOOK_COUNT];

struct latch_cg_set; /* the pinned programs and shared maps */

/*
 * Open the pinned set of this build, loading and pinning it first when it is
 * missing (two callers racing both load, one set wins, the other is thrown
 * away).  NULL with errno and a line in err.
 */
struct latch_cg_set *latch_cg_open(char *err, size_t errlen);
void latch_cg_close(struct latch_cg_set *set);
/* Whether the kernel took the unix-socket hooks (Linux 6.7+). */
bool latch_cg_have_unix(const struct latch_cg_set *set);
/* The pin directory of the set in use. */
const char *latch_cg_set_dir(const struct latch_cg_set *set);

struct latch_cg_room;

/*
 * Create a room's state for the cgroup v2 directory open at cgroup_fd, from
 * the sandbox options a room has (name, host and resolver addresses, host
 * ports, DNS rate and burst, default when 0; the link fields are unused):
 * a free slot's config (ready, empty policy: sealed), policy maps and
 * counters, entered under the cgroup's id.  Nothing is attached yet.  NULL
 * with errno and a line in err; on failure nothing is left.
 */
struct latch_cg_room *latch_cg_room_new(struct latch_cg_set *set, const struct latch_sandbox_opts *o, int cgroup_fd,
					char *err, size_t errlen);
/*
 * Attach every program to the room's cgroup (exclusively: no other program
 * can be added to that cgroup's hooks beside latch's).  Egress first.
 */
int latch_cg_room_attach(struct latch_cg_room *room, char *err, size_t errlen);
/*
 * Attach every program to an empty cgroup kept for this (latch/warm), unless
 * they are already.  The kernel switches its cgroup BPF hooks on and off with
 * static branches, patching its own text when the first program of a kind
 * comes or the last one goes (~50 us a hook): a room that comes and goes
 * alone would pay that on every attach and every removal.  No process ever
 * runs in that cgroup, so the programs there never run.
 */
int latch_cg_keep_warm(struct latch_cg_set *set, int cgroup_fd, char *err, size_t errlen);
/* Take the programs off the room's cgroup (rmdir of the cgroup does it too). */
int latch_cg_room_detach(struct latch_cg_room *room);
/*
 * Remove the room's state: its cgroup id out of room_slots (first, so that
 * its sockets find no room and pass nothing), its policy, its link; the slot
 * is free again.  Accepts NULL.
 */
void latch_cg_room_remove(struct latch_cg_room *room);

/* Let go of the handle only: the room's state, slot and programs stay (latchd stopping). Accepts NULL. */
void latch_cg_room_close(struct latch_cg_room *room);

uint64_t latch_cg_room_id(const struct latch_cg_room *room); /* the cgroup id */
const char *latch_cg_room_name(const struct latch_cg_room *room);
/*
 * The room's config, policy and counter maps as a sandbox, for the
 * latch_policy_*() functions of loader/policy.h and latch_sandbox_counters().
 * Owned by the room.
 */
struct latch_sandbox *latch_cg_room_sandbox(struct latch_cg_room *room);

/*
 * Another process's handle on a running room's maps, by name (through
 * _rooms/NAME): what latchd writes a room's learned answers and grants with,
 * through loader/policy.h.  NULL with errno (ENOENT: no such room) and a line
 * in err; free with latch_sandbox_free().
 */
struct latch_sandbox *latch_cg_room_open(const char *name, char *err, size_t errlen);

/* Observed posture of one hook of a room's cgroup. */
struct latch_cg_hook_state {
	bool wanted; /* latch attaches this hook here (unix: when the kernel has it) */
	uint32_t pinned_id; /* latch's pinned program for the hook */
	uint32_t attached_id; /* the program attached on the room's own cgroup, 0 none */
	uint32_t attach_flags; /* its flags, as the kernel reports them */
	int n_effective; /* programs that run for the room's sockets on this hook */
	bool in_effective; /* latch's program is one of them */
	uint32_t others[4]; /* ids of the others (they can refuse more, never pass more) */
	int n_others;
};

struct latch_cg_posture {
	bool state_ok; /* the shared maps hold this room's own maps under its cgroup id */
	bool config_ready; /* its config is ready, of this ABI */
	bool open; /* the `open` profile: uncontained */
	struct latch_cg_hook_state hook[LATCH_CG_HOOK_COUNT];
	bool enforced; /* all of the above */
	char why[200]; /* when not: the first thing found wrong */
	char note[200]; /* other programs that run beside latch's, when any */
};

int latch_cg_room_posture(const struct latch_cg_room *room, struct latch_cg_posture *p);

/*
 * Remove what a room whose `latch run` died left in the set: its link and,
 * when it still holds one, its slot.  0, or -ENOENT when there is nothing.
 */
int latch_cg_room_sweep(struct latch_cg_set *set, const char *name);

/* Verdicts of sockets in a cgroup with latch's programs but no room state (drop_no_config), summed. */
int latch_cg_orphan_counters(struct latch_cg_set *set, uint64_t *packets);

/* The gate of the room services (latch_room_gate) on a cgroup, and its counters. */
int latch_cg_gate_attach(struct latch_cg_set *set, int cgroup_fd, char *err, size_t errlen);
int latch_cg_gate_detach(struct latch_cg_set *set, int cgroup_fd);
int latch_cg_gate_counters(struct latch_cg_set *set, uint64_t out[LATCH_ROOM_GATE_SLOTS]);

/*
 * ---- latchd confined (cgroup_latchd.c) ----
 *
 * latchd runs in <cgroup2>/$LATCH_CGROUP/latchd (latch_cg_dir(.., "latchd"))
 * as a room of its own named LATCH_CG_LATCHD: the same programs, a slot
 * whose config has LATCH_CFG_LATCHD (what its listeners send from one of
 * PORTS is an answer and passes; everything it opens, DNS included, goes by
 * the policy latchd writes), and the gate of the room services on its
 * ingress.
 */
#define LATCH_CG_LATCHD "latchd"

/* <cgroup2 mount>/$LATCH_CGROUP[/SUB] ("latch" when LATCH_CGROUP is unset); -ENOENT without cgroup2. */
int latch_cg_dir(char *buf, size_t len, const char *sub);
/* latchd's slot for its cgroup (a previous latchd's slot is swept first); as latch_cg_room_new(). */
struct latch_cg_room *latch_cg_latchd_new(struct latch_cg_set *set, int cgroup_fd, const uint16_t *ports, int n_ports,
					  char *err, size_t errlen);

/* latchd's confinement as the kernel shows it (latch status, latch doctor). */
struct latch_cg_latchd {
	char dir[PATH_MAX]; /* its cgroup */
	bool exists;
	int pids[8]; /* what cgroup.procs lists (latchd's pid), the first 8 */
	int n_pids;
	struct latch_cg_posture posture; /* the programs on that cgroup, and the slot they lead to */
	bool latchd_flag; /* the slot's config says latchd */
	bool gate; /* the gate is on its ingress */
	int entries; /* in its policy maps */
	uint64_t gate_dropped; /* packets to a room service without its mark, all time */
	struct latch_counter counters[LATCH_COUNTER_SLOTS];
	bool confined; /* all of the above, and a process in it */
	char why[200]; /* when not */
};
int latch_cg_latchd_observe(struct latch_cg_latchd *out, char *err, size_t errlen);

/* What ADDR is to this host, by the kernel's own route lookup (RTM_GETROUTE); or -errno. */
enum latch_route_kind {
	LATCH_ROUTE_NONE, /* unreachable, blackhole, or no route */
	LATCH_ROUTE_LOCAL, /* one of the host's own addresses */
	LATCH_ROUTE_ONLINK, /* on a link of the host, no gateway: its LAN */
	LATCH_ROUTE_GATEWAY, /* behind a gateway */
};
int latch_route_kind(const struct latch_addr *addr);

#endif
