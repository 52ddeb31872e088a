// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup_room.c - a room's state: a slot of maps, claimed for its cgroup id.
 *
 * An update of a map-in-map waits for an RCU grace period (the kernel makes
 * sure no program still uses the old inner map): eight of them for a room's
 * eight maps cost a hundred milliseconds or more.  So a slot's maps are made
 * and entered in the outer maps once, and rooms reuse slots: a room claims a
 * free slot (an insert into room_owners with BPF_NOEXIST), empties its
 * policy maps and counters, writes its config, and becomes live with one
 * update of room_slots (its cgroup id -> the slot), an ordinary hash map.
 * Removal takes that entry out first, so the room's sockets find no state
 * and pass nothing, then frees the slot.  _rooms/NAME in bpffs is a link to
 * the room's slot, for bpftool and for latchd.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/cgroup_int.h"

#define META(f) offsetof(struct latch_room_meta, f)

const struct cg_room_map loader_cg_room_maps[] = {
	{ LATCH_MAP_EXACT4, CG_EXACT4, BPF_MAP_TYPE_HASH, sizeof(struct latch_exact4_key), sizeof(struct latch_rules),
	  LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_exact4_key), META(type_rules) },
	{ LATCH_MAP_EXACT6, CG_EXACT6, BPF_MAP_TYPE_HASH, sizeof(struct latch_exact6_key), sizeof(struct latch_rules),
	  LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_exact6_key), META(type_rules) },
	{ LATCH_MAP_PREFIX4, CG_PREFIX4, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_prefix4_key),
	  sizeof(struct latch_rules), LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_prefix4_key),
	  META(type_rules) },
	{ LATCH_MAP_PREFIX6, CG_PREFIX6, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_prefix6_key),
	  sizeof(struct latch_rules), LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_prefix6_key),
	  META(type_rules) },
	{ LATCH_MAP_TIMED4, CG_TIMED4, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_timed4_key),
	  sizeof(struct latch_rules), LATCH_ROOM_TIMED_MAX, BPF_F_NO_PREALLOC, META(type_timed4_key),
	  META(type_rules) },
	{ LATCH_MAP_TIMED6, CG_TIMED6, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_timed6_key),
	  sizeof(struct latch_rules), LATCH_ROOM_TIMED_MAX, BPF_F_NO_PREALLOC, META(type_timed6_key),
	  META(type_rules) },
	{ LATCH_MAP_COUNTERS, CG_COUNTERS, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct latch_counter),
	  LATCH_COUNTER_SLOTS, 0, META(type_u32), META(type_counter) },
	{ LATCH_MAP_SETTINGS, CG_SETTINGS, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct latch_config), 1, 0, META(type_u32),
	  META(type_config) },
};

const size_t loader_cg_n_room_maps = sizeof(loader_cg_room_maps) / sizeof(loader_cg_room_maps[0]);

static int slot_dir(const struct latch_cg_set *set, __u32 s, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/slots/%u", set->dir, s);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int rooms_dir(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "%s/latch/_rooms%s%s", latch_bpffs_root(), name ? "/" : "", name ? name : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int make_map(const struct latch_cg_set *set, int btf_fd, const struct cg_room_map *rm)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = rm->flags);
	__u32 kt, vt;

	memcpy(&kt, (const char *)&set->meta + rm->key_type, sizeof(kt));
	memcpy(&vt, (const char *)&set->meta + rm->value_type, sizeof(vt));
	if (btf_fd >= 0 && kt && vt) {
		mo.btf_fd = btf_fd;
		mo.btf_key_type_id = kt;
		mo.btf_value_type_id = vt;
	}
	return bpf_map_create(rm->type, latch_map_names[rm->id], rm->key_size, rm->value_size, rm->max_entries, &mo);
}

int loader_cg_slot_make(struct latch_cg_set *set, __u32 s, int btf_fd, char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	int rc = 0;

	if (slot_dir(set, s, dir, sizeof(dir)) || loader_cg_path(path, sizeof(path), set->dir, "slots"))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_BPFFS is too long");
	if ((mkdir(path, 0700) && errno != EEXIST) || (mkdir(dir, 0700) && errno != EEXIST))
		return latch_errf(err, errlen, -errno, "cannot create %s: %s", dir, strerror(errno));
	for (size_t i = 0; i < loader_cg_n_room_maps && !rc; i++) {
		const struct cg_room_map *rm = &loader_cg_room_maps[i];
		int fd = make_map(set, btf_fd, rm);

		if (fd < 0)
			rc = latch_errf(err, errlen, -errno, "cannot create a room's %s map: %s",
					latch_map_names[rm->id], strerror(errno));
		else if (loader_cg_path(path, sizeof(path), dir, latch_map_names[rm->id]) || bpf_obj_pin(fd, path))
			rc = latch_errf(err, errlen, -errno, "cannot pin %s: %s", path, strerror(errno));
		else if (loader_cg_map(set, rm->outer) < 0 ||
			 bpf_map_update_elem(set->map_fd[rm->outer], &s, &fd, BPF_ANY))
			rc = latch_errf(err, errlen, -errno, "cannot enter slot %u in %s: %s", s,
					loader_cg_map_names[rm->outer], strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	return rc;
}

/* Every key out of a map (a slot's policy maps: a room's policy is small). */
static void empty_map(int fd)
{
	unsigned char key[64];

	while (!bpf_map_get_next_key(fd, NULL, key))
		if (bpf_map_delete_elem(fd, key))
			break;
}

/* A slot as a fresh room finds it: no policy, zero counters, CFG ready (sealed). */
static int slot_reset(const int fd[LATCH_MAP_COUNT], const struct latch_config *cfg)
{
	static const enum latch_map_id policy[] = { LATCH_MAP_EXACT4,  LATCH_MAP_EXACT6, LATCH_MAP_PREFIX4,
						    LATCH_MAP_PREFIX6, LATCH_MAP_TIMED4, LATCH_MAP_TIMED6 };
	int ncpu = libbpf_num_possible_cpus();
	__u32 keys[LATCH_COUNTER_SLOTS], n = LATCH_COUNTER_SLOTS, zero = 0;
	struct latch_counter *zeros;
	int rc = 0;

	for (size_t i = 0; i < sizeof(policy) / sizeof(policy[0]); i++)
		empty_map(fd[policy[i]]);
	zeros = ncpu > 0 ? calloc((size_t)ncpu * LATCH_COUNTER_SLOTS, sizeof(*zeros)) : NULL;
	if (!zeros)
		return -ENOMEM;
	for (__u32 i = 0; i < LATCH_COUNTER_SLOTS; i++)
		keys[i] = i;
	if (bpf_map_update_batch(fd[LATCH_MAP_COUNTERS], keys, zeros, &n, NULL))
		rc = -errno;
	free(zeros);
	if (!rc && bpf_map_update_elem(fd[LATCH_MAP_SETTINGS], &zero, cfg, BPF_ANY))
		rc = -errno;
	return rc;
}

static void config_of(const struct latch_sandbox_opts *o, struct latch_config *c)
{
	struct latch_sandbox_opts room = *o;

	snprintf(room.ifname, sizeof(room.ifname), "%.*s", (int)sizeof(room.ifname) - 1, o->name); /* for bpftool */
	room.dns_rate = o->dns_rate ? o->dns_rate : LATCH_DEFAULT_DNS_RATE;
	room.dns_burst = o->dns_burst ? o->dns_burst : LATCH_DEFAULT_DNS_BURST;
	latch_sandbox_config(&room, 0, c);
}

/* Claim the lowest free slot for the room; making its maps when it never had any. */
static int slot_claim(struct latch_cg_set *set, const struct latch_room_owner *owner, __u32 *slot, char *err,
		      size_t errlen)
{
	__u32 inner;

	if (loader_cg_map(set, CG_OWNERS) < 0 || loader_cg_map(set, CG_SETTINGS) < 0)
		return latch_errf(err, errlen, -ENOENT, "the room maps of %s are missing", set->dir);
	for (__u32 s = 0; s < LATCH_ROOM_MAX; s++) {
		if (bpf_map_update_elem(set->map_fd[CG_OWNERS], &s, owner, BPF_NOEXIST))
			continue; /* held by another room */
		*slot = s;
		if (!bpf_map_lookup_elem(set->map_fd[CG_SETTINGS], &s, &inner))
			return 0;
		/* a slot never used: its maps now, once (a grace period per outer map) */
		int btf_fd = set->meta.btf_obj_id ? bpf_btf_get_fd_by_id(set->meta.btf_obj_id) : -1;
		int rc = loader_cg_slot_make(set, s, btf_fd, err, errlen);

		if (btf_fd >= 0)
			close(btf_fd);
		if (rc)
			bpf_map_delete_elem(set->map_fd[CG_OWNERS], &s);
		return rc;
	}
	return latch_errf(err, errlen, -EBUSY, "%d rooms run already: no slot is free", LATCH_ROOM_MAX);
}

/* Forget every cgroup id that still leads to SLOT (a room whose latch died), and its bucket. */
static void slot_unmap(struct latch_cg_set *set, __u32 slot)
{
	__u64 key, next, *prev = NULL, stale[LATCH_ROOM_MAX];
	int n = 0;
	__u32 v;

	if (loader_cg_map(set, CG_SLOTS) < 0)
		return;
	while (n < LATCH_ROOM_MAX && !bpf_map_get_next_key(set->map_fd[CG_SLOTS], prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(set->map_fd[CG_SLOTS], &key, &v) && v == slot)
			stale[n++] = key;
	}
	for (int i = 0; i < n; i++) {
		bpf_map_delete_elem(set->map_fd[CG_SLOTS], &stale[i]);
		if (loader_cg_map(set, CG_STATE) >= 0)
			bpf_map_delete_elem(set->map_fd[CG_STATE], &stale[i]);
	}
}

/* The maps pinned in a slot's directory DIR; 0 or -errno (fds of what was opened stay in fd[]). */
int loader_cg_maps_open(const char *dir, int fd[LATCH_MAP_COUNT])
{
	char path[PATH_MAX + 16];

	for (int i = 0; i < LATCH_MAP_COUNT; i++)
		fd[i] = -1;
	for (size_t i = 0; i < loader_cg_n_room_maps; i++) {
		enum latch_map_id id = loader_cg_room_maps[i].id;

		if (loader_cg_path(path, sizeof(path), dir, latch_map_names[id]) || (fd[id] = bpf_obj_get(path)) < 0)
			return -errno;
	}
	return 0;
}

static int slot_open(const struct latch_cg_set *set, __u32 s, int fd[LATCH_MAP_COUNT])
{
	char dir[PATH_MAX];

	if (slot_dir(set, s, dir, sizeof(dir))) {
		for (int i = 0; i < LATCH_MAP_COUNT; i++)
			fd[i] = -1;
		return -ENAMETOOLONG;
	}
	return loader_cg_maps_open(dir, fd);
}

struct latch_sandbox *latch_cg_room_open(const char *name, char *err, size_t errlen)
{
	struct latch_sandbox *sb;
	char link[PATH_MAX];
	int fd[LATCH_MAP_COUNT], e;

	if (latch_parse_name(name, err, errlen)) {
		errno = EINVAL;
		return NULL;
	}
	if (rooms_dir(link, sizeof(link), name)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	e = loader_cg_maps_open(link, fd);
	sb = e ? NULL : latch_sandbox_adopt(name, fd);
	if (!sb) {
		for (int i = 0; i < LATCH_MAP_COUNT; i++)
			if (fd[i] >= 0)
				close(fd[i]);
		latch_errf(err, errlen, -1, "no room '%s' (%s)", name, strerror(e ? -e : ENOMEM));
		errno = e ? -e : ENOMEM;
	}
	return sb;
}

struct latch_cg_room *latch_cg_room_new(struct latch_cg_set *set, const struct latch_sandbox_opts *o, int cgroup_fd,
					char *err, size_t errlen)
{
	struct latch_room_owner owner = { 0 };
	struct latch_room_state state = { 0 };
	struct latch_cg_room *room;
	struct latch_config cfg;
	char link[PATH_MAX], target[PATH_MAX];
	int fd[LATCH_MAP_COUNT], e;
	struct stat st;

	for (int i = 0; i < LATCH_MAP_COUNT; i++)
		fd[i] = -1;
	if (latch_parse_name(o->name, err, errlen) || fstat(cgroup_fd, &st)) {
		errno = EINVAL;
		return NULL;
	}
	room = calloc(1, sizeof(*room));
	if (!room)
		return NULL;
	room->set = set;
	room->id = st.st_ino; /* on cgroup2 the directory's inode number is the cgroup id */
	room->cgroup_fd = cgroup_fd;
	snprintf(room->name, sizeof(room->name), "%s", o->name);
	owner.cgroup_id = room->id;
	snprintf(owner.name, sizeof(owner.name), "%.*s", (int)sizeof(owner.name) - 1, o->name);
	if (slot_claim(set, &owner, &room->slot, err, errlen)) {
		free(room);
		errno = EBUSY;
		return NULL;
	}
	slot_unmap(set, room->slot);
	config_of(o, &cfg);
	e = slot_open(set, room->slot, fd);
	if (!e)
		e = slot_reset(fd, &cfg);
	if (e) {
		latch_errf(err, errlen, e, "cannot reset slot %u for the room: %s", room->slot, strerror(-e));
		goto fail;
	}
	if (loader_cg_map(set, CG_STATE) < 0 ||
	    bpf_map_update_elem(set->map_fd[CG_STATE], &room->id, &state, BPF_ANY) ||
	    loader_cg_map(set, CG_SLOTS) < 0 ||
	    bpf_map_update_elem(set->map_fd[CG_SLOTS], &room->id, &room->slot, BPF_NOEXIST)) {
		latch_errf(err, errlen, -errno, "cannot enter the room's cgroup id: %s", strerror(errno));
		goto fail;
	}
	/* _rooms/NAME -> its slot: where bpftool and latchd find the room's maps */
	if (!rooms_dir(link, sizeof(link), NULL) && (!mkdir(link, 0700) || errno == EEXIST) &&
	    !rooms_dir(link, sizeof(link), o->name) && !slot_dir(set, room->slot, target, sizeof(target))) {
		unlink(link);
		if (symlink(target, link))
			latch_errf(err, errlen, 0, "cannot link %s: %s", link, strerror(errno)); /* not fatal */
	}
	room->sb = latch_sandbox_adopt(o->name, fd);
	if (!room->sb)
		goto fail;
	return room;
fail:
	e = errno;
	slot_unmap(set, room->slot);
	bpf_map_delete_elem(set->map_fd[CG_OWNERS], &room->slot);
	for (int i = 0; i < LATCH_MAP_COUNT; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	free(room);
	errno = e ? e : ENOMEM;
	return NULL;
}

void latch_cg_room_remove(struct latch_cg_room *room)
{
	struct latch_cg_set *set;
	char link[PATH_MAX];

	if (!room)
		return;
	set = room->set;
	/* first out of room_slots: from here its sockets pass nothing */
	if (loader_cg_map(set, CG_SLOTS) >= 0)
		bpf_map_delete_elem(set->map_fd[CG_SLOTS], &room->id);
	if (loader_cg_map(set, CG_STATE) >= 0)
		bpf_map_delete_elem(set->map_fd[CG_STATE], &room->id);
	for (int i = LATCH_MAP_EXACT4; i <= LATCH_MAP_TIMED6; i++)
		empty_map(latch_sandbox_map_fd(room->sb, i));
	if (!rooms_dir(link, sizeof(link), room->name))
		unlink(link);
	if (loader_cg_map(set, CG_OWNERS) >= 0)
		bpf_map_delete_elem(set->map_fd[CG_OWNERS], &room->slot);
	latch_sandbox_free(room->sb);
	free(room);
}

void latch_cg_room_close(struct latch_cg_room *room)
{
	if (!room)
		return;
	latch_sandbox_free(room->sb);
	free(room);
}

uint64_t latch_cg_room_id(const struct latch_cg_room *room)
{
	return room->id;
}

const char *latch_cg_room_name(const struct latch_cg_room *room)
{
	return room->name;
}

struct latch_sandbox *latch_cg_room_sandbox(struct latch_cg_room *room)
{
	return room->sb;
}

int latch_cg_room_sweep(struct latch_cg_set *set, const char *name)
{
	struct latch_room_owner owner;
	char link[PATH_MAX];
	int found = 0;

	if (!rooms_dir(link, sizeof(link), name) && !unlink(link))
		found = 1;
	if (loader_cg_map(set, CG_OWNERS) < 0)
		return found ? 0 : -ENOENT;
	for (__u32 s = 0; s < LATCH_ROOM_MAX; s++) {
		if (bpf_map_lookup_elem(set->map_fd[CG_OWNERS], &s, &owner) ||
		    strncmp(owner.name, name, sizeof(owner.name)))
			continue;
		slot_unmap(set, s);
		bpf_map_delete_elem(set->map_fd[CG_OWNERS], &s);
		found = 1;
	}
	return found ? 0 : -ENOENT;
}
