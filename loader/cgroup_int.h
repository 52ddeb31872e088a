/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * cgroup_int.h - private to loader/cgroup.c (the pinned set: load, attach,
 * posture, gate) and loader/cgroup_room.c (rooms' slots of state).
 */
#ifndef LATCH_LOADER_CGROUP_INT_H
#define LATCH_LOADER_CGROUP_INT_H

#include <limits.h>
#include <linux/bpf.h>
#include <stddef.h>

#include "loader/cgroup.h"

#define CG_GATE LATCH_CG_HOOK_COUNT /* the gate's index among the pinned programs */
#define CG_N_PROGS (LATCH_CG_HOOK_COUNT + 1)

/* The set's maps, pinned under the map's own name. */
enum loader_cg_map {
	CG_SETTINGS,
	CG_EXACT4,
	CG_EXACT6,
	CG_PREFIX4,
	CG_PREFIX6,
	CG_TIMED4,
	CG_TIMED6,
	CG_COUNTERS,
	CG_SLOTS,
	CG_OWNERS,
	CG_STATE,
	CG_META,
	CG_ORPHANS,
	CG_VERDICTS,
	CG_GATE_COUNTERS,
	CG_TYPES,
	CG_MAP_COUNT,
};

extern const char *const loader_cg_map_names[CG_MAP_COUNT];

/*
 * A slot's own maps: what each is in the adopted sandbox, the outer map that
 * holds it, and the inner template it must match.  Settings last.
 */
struct cg_room_map {
	enum latch_map_id id;
	enum loader_cg_map outer;
	enum bpf_map_type type;
	__u32 key_size, value_size, max_entries, flags;
	size_t key_type, value_type; /* offsets of the BTF type ids in struct latch_room_meta */
};

extern const struct cg_room_map loader_cg_room_maps[];
extern const size_t loader_cg_n_room_maps;

struct latch_cg_set {
	char dir[PATH_MAX];
	int prog_fd[CG_N_PROGS]; /* -1: not loaded (unix hooks on an older kernel), or not opened yet */
	int map_fd[CG_MAP_COUNT]; /* opened when first needed */
	struct latch_room_meta meta;
};

struct latch_cg_room {
	struct latch_cg_set *set;
	char name[LATCH_NAME_MAX + 1];
	uint64_t id; /* cgroup id */
	__u32 slot;
	int cgroup_fd;
	struct latch_sandbox *sb; /* owns the slot's map fds */
	bool attached[LATCH_CG_HOOK_COUNT];
};

int loader_cg_path(char *buf, size_t len, const char *dir, const char *file);
int loader_cg_map(struct latch_cg_set *set, enum loader_cg_map m);
uint32_t loader_cg_map_id(int fd);
void loader_cg_rm_pins(const char *dir);
/* The set's pinned program I (opened when first needed), or -1; a program's id, 0 when none. */
int loader_cg_prog(struct latch_cg_set *set, int i);
uint32_t loader_cg_prog_id(int fd);
/* The maps pinned in a slot's directory DIR; 0 or -errno (fds of what was opened stay in fd[]). */
int loader_cg_maps_open(const char *dir, int fd[LATCH_MAP_COUNT]);
/* Make slot S's maps and enter them in the outer maps (each entry waits for an RCU grace period). */
int loader_cg_slot_make(struct latch_cg_set *set, __u32 s, int btf_fd, char *err, size_t errlen);

#endif
