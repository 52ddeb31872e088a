/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sandbox.h - one sandbox's kernel enforcement: load, pin, attach, observe.
 *
 * A sandbox is one loaded copy of bpf/latch_tc.bpf.c whose maps and programs
 * are pinned under $LATCH_BPFFS/latch/NAME/ (default /sys/fs/bpf).  The pins
 * are the source of truth: everything here that reports state reads it back
 * from the kernel, never from what was asked for.
 */
#ifndef LATCH_LOADER_SANDBOX_H
#define LATCH_LOADER_SANDBOX_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include "bpf/latch_abi.h"
#include "common/common.h"
#include "loader/tc.h"

#define LATCH_TC_HANDLE 0x1a7c
#define LATCH_TC_PRIORITY 1

enum latch_map_id {
	LATCH_MAP_SETTINGS,
	LATCH_MAP_EXACT4,
	LATCH_MAP_EXACT6,
	LATCH_MAP_PREFIX4,
	LATCH_MAP_PREFIX6,
	LATCH_MAP_TIMED4,
	LATCH_MAP_TIMED6,
	LATCH_MAP_FLOW4,
	LATCH_MAP_FLOW6,
	LATCH_MAP_FLOW_HOT,
	LATCH_MAP_COUNTERS,
	LATCH_MAP_DNS_BUCKET,
	LATCH_MAP_EVENT_BUCKET,
	LATCH_MAP_EVENTS,
	LATCH_MAP_NAMES,
	LATCH_MAP_COUNT,
};

extern const char *const latch_map_names[LATCH_MAP_COUNT];

struct latch_sandbox_opts {
	char name[LATCH_NAME_MAX + 1];
	char ifname[IF_NAMESIZE];
	uint8_t guest_mac[6];
	struct latch_addr guest_ip4, host_ip4, resolver_ip4; /* family 0 when unset */
	struct latch_addr guest_ip6, host_ip6, resolver_ip6;
	uint16_t host_ports[LATCH_HOST_PORTS_MAX];
	int n_host_ports;
	uint32_t dns_rate, dns_burst;
	uint32_t event_rate, event_burst;
};

/* Defaults for the rates when the operator gives none. */
#define LATCH_DEFAULT_DNS_RATE 20
#define LATCH_DEFAULT_DNS_BURST 40
#define LATCH_DEFAULT_EVENT_RATE 50
#define LATCH_DEFAULT_EVENT_BURST 100

struct latch_sandbox; /* opened pins: map fds and the config */

/* The bpffs root in use ($LATCH_BPFFS or /sys/fs/bpf), and latch's dir in it. */
const char *latch_bpffs_root(void);
int latch_sandbox_dir(const char *name, char *buf, size_t len);
/* Check that the root is bpffs, mounting it when it is missing. */
int latch_bpffs_ensure(char *err, size_t errlen);

bool latch_sandbox_exists(const char *name);
/* Calls fn for each pinned sandbox name, sorted; returns the count or -errno. */
int latch_sandbox_list(int (*fn)(const char *name, void *arg), void *arg);

/* The config map's value for O (ready); a room's too (loader/cgroup.c), with ifindex 0. */
void latch_sandbox_config(const struct latch_sandbox_opts *o, int ifindex, struct latch_config *c);

/*
 * Load a fresh copy, pin maps and programs, write the config, then attach
 * both directions.  On failure nothing is left behind.
 */
int latch_sandbox_create(const struct latch_sandbox_opts *o, char *err, size_t errlen);
/*
 * Load fresh programs on the pinned maps (state and counters kept) and
 * attach them to the device named in the config, replacing whatever latch
 * filter is there.  What `latch attach NAME` and `latch boot apply` use.
 */
int latch_sandbox_reattach(const char *name, char *err, size_t errlen);
/* Take the filters off the device (and the clsact qdisc if latch made it), remove the pins. */
int latch_sandbox_detach(const char *name, char *err, size_t errlen);

struct latch_sandbox *latch_sandbox_open(const char *name, char *err, size_t errlen);
/*
 * A sandbox over maps that are not pinned under a sandbox's name (a room's,
 * loader/cgroup.c): fd[] has a descriptor per map id, -1 where there is none,
 * and the sandbox owns them from here.  The config, policy and counter
 * functions work on it.  NULL with errno.
 */
struct latch_sandbox *latch_sandbox_adopt(const char *name, const int fd[LATCH_MAP_COUNT]);
void latch_sandbox_free(struct latch_sandbox *sb);
/*
 * Are SB's maps still the ones pinned under its name?  False once the
 * sandbox was removed, and also when it was removed and made again under
 * the same name (a detach and attach, a CNI DEL and ADD): its holder then
 * has maps nothing enforces with any more.
 */
bool latch_sandbox_still_pinned(const struct latch_sandbox *sb);
const char *latch_sandbox_name(const struct latch_sandbox *sb);
int latch_sandbox_map_fd(const struct latch_sandbox *sb, enum latch_map_id id);
int latch_sandbox_read_config(const struct latch_sandbox *sb, struct latch_config *cfg);
int latch_sandbox_write_config(const struct latch_sandbox *sb, const struct latch_config *cfg);

/*
 * Names all the way down (loader/names.c): NAME answered at address A until
 * EXPIRES_NS, recorded in the names map for its TLS port, with A marked
 * name-checked.  A deadline only grows.  0, -EOPNOTSUPP for a sandbox
 * without the map (a room, or pins of an older latch), or -errno.
 */
int latch_names_record(struct latch_sandbox *sb, const struct latch_addr *a, const char *name, uint64_t expires_ns);
/* Remove the records whose deadline is before BEFORE_NS; the count, or -errno. */
int latch_names_prune(struct latch_sandbox *sb, uint64_t before_ns);
/* Does the names map mark A name-checked?  1, 0, or -errno. */
int latch_names_checked(const struct latch_sandbox *sb, const struct latch_addr *a);

/* Observed posture of one direction's hook. */
struct latch_hook_state {
	bool present; /* clsact: the qdisc exists; TCX: latch's link is attached to the device */
	int n_filters; /* clsact filters on the hook */
	int n_tcx; /* TCX programs on the hook (0 where the kernel has no TCX) */
	uint32_t attached_id; /* prog id latch's filter or link runs, 0 if none */
	uint32_t link_id; /* TCX: latch's link, 0 if none */
	uint32_t ahead_id; /* the first foreign program that runs before latch's, 0 if none */
	bool first; /* nothing runs before latch's program on this hook */
	bool direct_action; /* clsact: latch's filter is direct-action (a TCX program always is) */
};

/*
 * What runs on a sandbox's device, read from the kernel, and whether that
 * enforces.  The rules (docs/maps.md, "Posture"): the device exists; no XDP
 * program on it (XDP runs before tc and can redirect frames past it); on
 * each direction latch's pinned program runs first -- with TCX, latch's
 * pinned link heads the TCX chain; with clsact, latch's filter is the first
 * direct-action filter and no TCX program is on the hook (TCX runs before
 * every clsact filter).  Whatever runs after latch's program never sees a
 * packet: latch's verdict ends both chains.
 */
struct latch_posture {
	bool device_present;
	bool device_matches; /* ifindex still the one attached to */
	uint32_t ifindex;
	enum latch_tc_mode mode;
	bool csum_check; /* the from-guest program checks checksum-offload requests */
	uint32_t xdp_id; /* XDP program on the device, 0 if none */
	char xdp_mode[12];
	uint32_t pinned_id[LATCH_DIR_COUNT]; /* ids of the pinned programs */
	struct latch_hook_state hook[LATCH_DIR_COUNT];
	bool enforced; /* every rule above holds */
	char why[200]; /* when not enforced: the first thing found wrong */
};

int latch_sandbox_posture(const struct latch_sandbox *sb, struct latch_posture *p);
/* The same for a sandbox by name: -ENOENT (with a line in err) when it has no pins. */
int latch_sandbox_posture_of(const char *name, struct latch_posture *p, char *err, size_t errlen);

/* Counters summed over CPUs, indexed by latch_counter_slot() / LATCH_STAT_SLOT(). */
int latch_sandbox_counters(const struct latch_sandbox *sb, struct latch_counter out[LATCH_COUNTER_SLOTS]);
/* Entries in a map (walks the keys). */
int latch_sandbox_map_count(const struct latch_sandbox *sb, enum latch_map_id id);

/*
 * Move the calling process into a network namespace of its own for
 * BPF_PROG_TEST_RUN: forwarding on, a default route (v4 and v6) out of a
 * veth, and local_addrs[] (like "198.51.100.77/32") on that veth, so that the
 * programs' question "would the host forward this?" has known answers.
 */
int latch_testnet_enter(const char *const *local_addrs, int n, char *err, size_t errlen);

/* Can this kernel's programs read checksum-offload fields (bpf_cast_to_kern_ctx, 6.2+)? */
bool latch_csum_check_supported(void);

/* Name of a reason code ("drop_policy"), or "unknown". */
const char *latch_reason_name(int reason);

/* CLOCK_BOOTTIME in ns: the clock the programs check deadlines against. */
uint64_t latch_now_boot_ns(void);

#endif
