// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup.c - the room programs: loaded and pinned once, attached per room.
 *
 * Loading and verifying seven programs costs tens of milliseconds; a room
 * must start in a few.  So one set is loaded per build of latch (the
 * directory name is a hash of the BPF object, made at build time) and every
 * room after that only opens its pins and attaches them.  Rooms' state
 * (cgroup_room.c) lives in slots made with the set.  The posture of a room
 * is read back from the kernel: what runs on each hook of its cgroup, and
 * whether the shared maps point at its own state.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "latch_cg.skel.h"
#include "latch_cg_id.h" /* LATCH_CG_BUILD_ID: a hash of build/latch_cg.bpf.o (room/room.mk) */
#include "loader/cgroup_int.h"

const char *const latch_cg_hook_names[LATCH_CG_HOOK_COUNT] = {
	[LATCH_CG_EGRESS] = "egress",
	[LATCH_CG_CONNECT4] = "connect4",
	[LATCH_CG_CONNECT6] = "connect6",
	[LATCH_CG_SENDMSG4] = "sendmsg4",
	[LATCH_CG_SENDMSG6] = "sendmsg6",
	[LATCH_CG_CONNECT_UNIX] = "connect_unix",
	[LATCH_CG_SENDMSG_UNIX] = "sendmsg_unix",
};

static const enum bpf_attach_type hook_attach[LATCH_CG_HOOK_COUNT] = {
	[LATCH_CG_EGRESS] = BPF_CGROUP_INET_EGRESS,
	[LATCH_CG_CONNECT4] = BPF_CGROUP_INET4_CONNECT,
	[LATCH_CG_CONNECT6] = BPF_CGROUP_INET6_CONNECT,
	[LATCH_CG_SENDMSG4] = BPF_CGROUP_UDP4_SENDMSG,
	[LATCH_CG_SENDMSG6] = BPF_CGROUP_UDP6_SENDMSG,
	[LATCH_CG_CONNECT_UNIX] = (enum bpf_attach_type)LATCH_CG_ATTACH_UNIX_CONNECT,
	[LATCH_CG_SENDMSG_UNIX] = (enum bpf_attach_type)LATCH_CG_ATTACH_UNIX_SENDMSG,
};

static const char *const prog_pin_names[CG_N_PROGS] = {
	"prog_egress",	 "prog_connect4",     "prog_connect6",	   "prog_sendmsg4",
	"prog_sendmsg6", "prog_connect_unix", "prog_sendmsg_unix", "prog_gate",
};

/* clang-format off */
const char *const loader_cg_map_names[CG_MAP_COUNT] = {
	"room_settings", "room_exact4", "room_exact6", "room_prefix4", "room_prefix6", "room_timed4", "room_timed6",
	"room_counters", "room_slots", "room_owners", "room_state", "room_meta", "room_orphans", "sock_verdicts",
	"room_gate_counters", "room_types",
};
/* clang-format on */

int loader_cg_path(char *buf, size_t len, const char *dir, const char *file)
{
	int n = snprintf(buf, len, "%s/%s", dir, file);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int loader_cg_map(struct latch_cg_set *set, enum loader_cg_map m)
{
	char path[PATH_MAX];

	if (set->map_fd[m] < 0 && !loader_cg_path(path, sizeof(path), set->dir, loader_cg_map_names[m]))
		set->map_fd[m] = bpf_obj_get(path);
	return set->map_fd[m];
}

int loader_cg_prog(struct latch_cg_set *set, int i)
{
	char path[PATH_MAX];

	if (set->prog_fd[i] < 0 && !loader_cg_path(path, sizeof(path), set->dir, prog_pin_names[i]))
		set->prog_fd[i] = bpf_obj_get(path);
	return set->prog_fd[i];
}

void loader_cg_rm_pins(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && !loader_cg_path(path, sizeof(path), dir, de->d_name))
			unlink(path);
	closedir(d);
	rmdir(dir);
}

/* BTF type id of a struct or typedef in the object's BTF, 0 when absent. */
static __u32 type_id(const struct btf *btf, const char *name, int kind)
{
	int id = btf__find_by_name_kind(btf, name, kind);

	return id > 0 ? (__u32)id : 0;
}

static void meta_fill(struct latch_cg *s, struct latch_room_meta *m)
{
	const struct btf *btf = bpf_object__btf(s->obj);
	struct bpf_btf_info info = { 0 };
	__u32 len = sizeof(info);

	memset(m, 0, sizeof(*m));
	m->abi_version = LATCH_ABI_VERSION;
	if (!btf || bpf_obj_get_info_by_fd(btf__fd(btf), &info, &len))
		return; /* the maps are then made without types: bpftool prints bytes */
	m->btf_obj_id = info.id;
	m->type_config = type_id(btf, "latch_config", BTF_KIND_STRUCT);
	m->type_exact4_key = type_id(btf, "latch_exact4_key", BTF_KIND_STRUCT);
	m->type_exact6_key = type_id(btf, "latch_exact6_key", BTF_KIND_STRUCT);
	m->type_prefix4_key = type_id(btf, "latch_prefix4_key", BTF_KIND_STRUCT);
	m->type_prefix6_key = type_id(btf, "latch_prefix6_key", BTF_KIND_STRUCT);
	m->type_timed4_key = type_id(btf, "latch_timed4_key", BTF_KIND_STRUCT);
	m->type_timed6_key = type_id(btf, "latch_timed6_key", BTF_KIND_STRUCT);
	m->type_rules = type_id(btf, "latch_rules", BTF_KIND_STRUCT);
	m->type_counter = type_id(btf, "latch_counter", BTF_KIND_STRUCT);
	m->type_u32 = type_id(btf, "__u32", BTF_KIND_TYPEDEF);
}

static struct bpf_program *skel_prog(struct latch_cg *s, int i)
{
	struct bpf_program *p[CG_N_PROGS] = {
		s->progs.latch_room_egress,	  s->progs.latch_room_connect4, s->progs.latch_room_connect6,
		s->progs.latch_room_sendmsg4,	  s->progs.latch_room_sendmsg6, s->progs.latch_room_connect_unix,
		s->progs.latch_room_sendmsg_unix, s->progs.latch_room_gate,
	};

	return p[i];
}

/* Open and load the object; the unix hooks only where the kernel has them. */
static struct latch_cg *load_object(bool with_unix)
{
	struct latch_cg *s = latch_cg__open();

	if (!s)
		return NULL;
	for (int i = LATCH_CG_CONNECT_UNIX; i <= LATCH_CG_SENDMSG_UNIX; i++) {
		if (with_unix)
			bpf_program__set_expected_attach_type(skel_prog(s, i), hook_attach[i]);
		else
			bpf_program__set_autoload(skel_prog(s, i), false);
	}
	if (latch_cg__load(s)) {
		int e = errno;

		latch_cg__destroy(s);
		errno = e;
		return NULL;
	}
	return s;
}

/* Load the set, pin it under tmp and make the first slots; 0 or -1 with err. */
static int load_and_pin(const char *tmp, char *err, size_t errlen)
{
	struct latch_cg_set staged = { 0 };
	struct latch_cg *s = load_object(true);
	char path[PATH_MAX];
	__u32 zero = 0;
	int rc = -1, btf_fd;

	if (!s)
		s = load_object(false); /* a kernel before 6.7: no unix-socket hooks */
	if (!s)
		return latch_errf(err, errlen, -1, "cannot load the room programs: %s (see `latch run --check`)",
				  strerror(errno));
	meta_fill(s, &staged.meta);
	if (bpf_map_update_elem(bpf_map__fd(s->maps.room_meta), &zero, &staged.meta, BPF_ANY)) {
		latch_errf(err, errlen, -1, "cannot write room_meta: %s", strerror(errno));
		goto out;
	}
	if (mkdir(tmp, 0700)) {
		latch_errf(err, errlen, -1, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	for (int i = 0; i < CG_MAP_COUNT; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(s->obj, loader_cg_map_names[i]);

		if (!m || loader_cg_path(path, sizeof(path), tmp, loader_cg_map_names[i]) || bpf_map__pin(m, path)) {
			latch_errf(err, errlen, -1, "cannot pin map %s in %s: %s", loader_cg_map_names[i], tmp,
				   strerror(errno));
			goto out;
		}
	}
	for (int i = 0; i < CG_N_PROGS; i++) {
		struct bpf_program *p = skel_prog(s, i);

		if (bpf_program__fd(p) < 0)
			continue; /* not loaded: the kernel has no such hook */
		if (loader_cg_path(path, sizeof(path), tmp, prog_pin_names[i]) || bpf_program__pin(p, path)) {
			latch_errf(err, errlen, -1, "cannot pin %s in %s: %s", prog_pin_names[i], tmp, strerror(errno));
			goto out;
		}
	}
	/* the first slots now, while a load is slow anyway: a room then never waits for one */
	snprintf(staged.dir, sizeof(staged.dir), "%.*s", (int)sizeof(staged.dir) - 1, tmp);
	for (int i = 0; i < CG_MAP_COUNT; i++)
		staged.map_fd[i] = -1;
	btf_fd = staged.meta.btf_obj_id ? bpf_btf_get_fd_by_id(staged.meta.btf_obj_id) : -1;
	rc = 0;
	for (__u32 slot = 0; slot < LATCH_ROOM_SLOTS_PREMADE && !rc; slot++)
		rc = loader_cg_slot_make(&staged, slot, btf_fd, err, errlen);
	if (btf_fd >= 0)
		close(btf_fd);
	for (int i = 0; i < CG_MAP_COUNT; i++)
		if (staged.map_fd[i] >= 0)
			close(staged.map_fd[i]);
out:
	latch_cg__destroy(s);
	return rc;
}

/* rm -r of a set directory that never went live (its slots are directories too). */
static void rm_set(const char *dir)
{
	char slots[PATH_MAX], path[PATH_MAX + 16];

	if (!loader_cg_path(slots, sizeof(slots), dir, "slots"))
		for (int i = 0; i < LATCH_ROOM_MAX; i++) {
			snprintf(path, sizeof(path), "%s/%d", slots, i);
			if (access(path, F_OK))
				break;
			loader_cg_rm_pins(path);
		}
	rmdir(slots);
	loader_cg_rm_pins(dir);
}

/* Sets of older builds that no room holds a slot of any more: their pins go (attached programs stay alive). */
static void prune_old_sets(const char *parent, const char *keep)
{
	DIR *d = opendir(parent);
	struct dirent *de;
	char dir[PATH_MAX], path[PATH_MAX + 16];

	while (d && (de = readdir(d))) {
		__u32 key;
		int fd;

		if (de->d_name[0] == '.' || !strcmp(de->d_name, keep) || !strncmp(de->d_name, "tmp-", 4) ||
		    loader_cg_path(dir, sizeof(dir), parent, de->d_name) ||
		    loader_cg_path(path, sizeof(path), dir, "room_owners"))
			continue;
		fd = bpf_obj_get(path);
		if (fd >= 0 && bpf_map_get_next_key(fd, NULL, &key) && errno == ENOENT)
			rm_set(dir);
		if (fd >= 0)
			close(fd);
	}
	if (d)
		closedir(d);
}

struct latch_cg_set *latch_cg_open(char *err, size_t errlen)
{
	struct latch_cg_set *set = calloc(1, sizeof(*set));
	char parent[PATH_MAX], tmp[PATH_MAX], path[PATH_MAX];
	struct stat st;
	__u32 zero = 0;

	if (!set)
		return NULL;
	for (int i = 0; i < CG_N_PROGS; i++)
		set->prog_fd[i] = -1;
	for (int i = 0; i < CG_MAP_COUNT; i++)
		set->map_fd[i] = -1;
	if (latch_bpffs_ensure(err, errlen))
		goto fail;
	/* bpffs refuses names with a dot; an underscore keeps it apart from sandbox names */
	if (latch_sandbox_dir("_cgroup", parent, sizeof(parent)) ||
	    loader_cg_path(set->dir, sizeof(set->dir), parent, LATCH_CG_BUILD_ID)) {
		latch_errf(err, errlen, -1, "LATCH_BPFFS is too long");
		goto fail;
	}
	if (loader_cg_path(path, sizeof(path), set->dir, prog_pin_names[LATCH_CG_EGRESS]) || stat(path, &st)) {
		/* Not there: load it beside, then rename it in; whoever renames first wins. */
		if (mkdir(parent, 0700) && errno != EEXIST) {
			latch_errf(err, errlen, -1, "cannot create %s: %s", parent, strerror(errno));
			goto fail;
		}
		if (snprintf(tmp, sizeof(tmp), "%s/tmp-%d", parent, (int)getpid()) >= (int)sizeof(tmp)) {
			latch_errf(err, errlen, -1, "LATCH_BPFFS is too long");
			goto fail;
		}
		rm_set(tmp);
		if (load_and_pin(tmp, err, errlen)) {
			rm_set(tmp);
			goto fail;
		}
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, set->dir, RENAME_NOREPLACE))
			rm_set(tmp); /* another latch pinned the same build first: use its set */
		prune_old_sets(parent, LATCH_CG_BUILD_ID);
	}
	if (loader_cg_map(set, CG_META) < 0 || bpf_map_lookup_elem(set->map_fd[CG_META], &zero, &set->meta)) {
		latch_errf(err, errlen, -1,
			   "the pinned room programs in %s are incomplete (%s); remove the directory "
			   "when no room runs",
			   set->dir, strerror(errno));
		goto fail;
	}
	if (set->meta.abi_version != LATCH_ABI_VERSION) {
		latch_errf(err, errlen, -1, "the pinned room programs in %s are of ABI %u, this latch speaks %u",
			   set->dir, set->meta.abi_version, LATCH_ABI_VERSION);
		goto fail;
	}
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		if (loader_cg_prog(set, i) >= 0 || i >= LATCH_CG_CONNECT_UNIX)
			continue;
		latch_errf(err, errlen, -1, "the pinned room program %s/%s is missing: %s", set->dir, prog_pin_names[i],
			   strerror(errno));
		goto fail;
	}
	return set;
fail:
	latch_cg_close(set);
	errno = EINVAL;
	return NULL;
}

void latch_cg_close(struct latch_cg_set *set)
{
	if (!set)
		return;
	for (int i = 0; i < CG_N_PROGS; i++)
		if (set->prog_fd[i] >= 0)
			close(set->prog_fd[i]);
	for (int i = 0; i < CG_MAP_COUNT; i++)
		if (set->map_fd[i] >= 0)
			close(set->map_fd[i]);
	free(set);
}

bool latch_cg_have_unix(const struct latch_cg_set *set)
{
	return set->prog_fd[LATCH_CG_CONNECT_UNIX] >= 0 && set->prog_fd[LATCH_CG_SENDMSG_UNIX] >= 0;
}

const char *latch_cg_set_dir(const struct latch_cg_set *set)
{
	return set->dir;
}

int latch_cg_room_attach(struct latch_cg_room *room, char *err, size_t errlen)
{
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		int pfd = room->set->prog_fd[i];

		if (pfd < 0)
			continue; /* the unix hooks on a kernel without them */
		/* exclusive: nobody adds a program beside latch's on the room's own cgroup */
		if (bpf_prog_attach(pfd, room->cgroup_fd, hook_attach[i], 0))
			return latch_errf(
				err, errlen, -1, "cannot attach %s to the room's cgroup: %s%s", latch_cg_hook_names[i],
				strerror(errno),
				errno == EPERM ? " (a parent cgroup holds an exclusive program on that hook)" : "");
		room->attached[i] = true;
	}
	return 0;
}

int latch_cg_keep_warm(struct latch_cg_set *set, int cgroup_fd, char *err, size_t errlen)
{
	__u32 ids[1], cnt = 1;

	/* the last hook attached is there: so are the others (a room pays one query, not seven) */
	if (!bpf_prog_query(cgroup_fd, hook_attach[LATCH_CG_SENDMSG6], 0, NULL, ids, &cnt) && cnt)
		return 0;
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		cnt = 1;
		if (set->prog_fd[i] < 0 || (!bpf_prog_query(cgroup_fd, hook_attach[i], 0, NULL, ids, &cnt) && cnt))
			continue;
		if (bpf_prog_attach(set->prog_fd[i], cgroup_fd, hook_attach[i], BPF_F_ALLOW_MULTI) && errno != EEXIST)
			return latch_errf(err, errlen, -errno, "cannot attach %s to latch's warm cgroup: %s",
					  latch_cg_hook_names[i], strerror(errno));
	}
	return 0;
}

int latch_cg_room_detach(struct latch_cg_room *room)
{
	int rc = 0;

	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		if (!room->attached[i])
			continue;
		if (bpf_prog_detach2(room->set->prog_fd[i], room->cgroup_fd, hook_attach[i]) && errno != ENOENT)
			rc = -errno;
		room->attached[i] = false;
	}
	return rc;
}

uint32_t loader_cg_map_id(int fd)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);

	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}

uint32_t loader_cg_prog_id(int fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}

/* One hook: what is attached on the cgroup itself, and what runs for its sockets. */
static void hook_posture(const struct latch_cg_room *room, int i, struct latch_cg_hook_state *h)
{
	__u32 ids[64], cnt = 64, flags = 0;

	h->pinned_id = loader_cg_prog_id(room->set->prog_fd[i]);
	if (!bpf_prog_query(room->cgroup_fd, hook_attach[i], 0, &flags, ids, &cnt) && cnt > 0) {
		h->attached_id = ids[0];
		h->attach_flags = flags;
	}
	cnt = 64;
	if (bpf_prog_query(room->cgroup_fd, hook_attach[i], BPF_F_QUERY_EFFECTIVE, NULL, ids, &cnt))
		return;
	h->n_effective = cnt;
	for (__u32 k = 0; k < cnt && k < 64; k++) {
		if (ids[k] == h->pinned_id)
			h->in_effective = true;
		else if (h->n_others < 4)
			h->others[h->n_others++] = ids[k];
		else
			h->n_others++;
	}
}

/* Do the shared maps lead from the room's cgroup id to its own slot and maps? */
static bool state_ok(const struct latch_cg_room *room)
{
	struct latch_cg_set *set = room->set;
	__u32 slot, inner;

	if (loader_cg_map(set, CG_SLOTS) < 0 || bpf_map_lookup_elem(set->map_fd[CG_SLOTS], &room->id, &slot) ||
	    slot != room->slot)
		return false;
	for (size_t i = 0; i < loader_cg_n_room_maps; i++)
		if (loader_cg_map(set, loader_cg_room_maps[i].outer) < 0 ||
		    bpf_map_lookup_elem(set->map_fd[loader_cg_room_maps[i].outer], &slot, &inner) ||
		    inner != loader_cg_map_id(latch_sandbox_map_fd(room->sb, loader_cg_room_maps[i].id)))
			return false;
	return true;
}

int latch_cg_room_posture(const struct latch_cg_room *room, struct latch_cg_posture *p)
{
	struct latch_cg_set *set = room->set;
	struct latch_config cfg;
	size_t nl = 0;

	memset(p, 0, sizeof(*p));
	p->state_ok = state_ok(room);
	if (!latch_sandbox_read_config(room->sb, &cfg)) {
		p->config_ready = (cfg.flags & LATCH_CFG_READY) && cfg.abi_version == LATCH_ABI_VERSION;
		p->open = cfg.flags & LATCH_CFG_OPEN;
	}
	if (!p->state_ok)
		snprintf(p->why, sizeof(p->why), "the room's cgroup id %llu does not lead to its own maps (slot %u)",
			 (unsigned long long)room->id, room->slot);
	else if (!p->config_ready)
		snprintf(p->why, sizeof(p->why), "the room's config is not ready: it passes nothing");
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		struct latch_cg_hook_state *h = &p->hook[i];

		h->wanted = set->prog_fd[i] >= 0;
		if (!h->wanted)
			continue;
		hook_posture(room, i, h);
		if (!*p->why && !h->in_effective)
			snprintf(p->why, sizeof(p->why),
				 "latch's %s program (id %u) does not run for the room's sockets%s",
				 latch_cg_hook_names[i], h->pinned_id,
				 h->attached_id ? " (another program replaced it)" : "");
		if (h->n_others && nl < sizeof(p->note))
			nl += snprintf(p->note + nl, sizeof(p->note) - nl, "%s%d other program(s) on %s",
				       nl ? "; " : "", h->n_others, latch_cg_hook_names[i]);
	}
	p->enforced = !*p->why;
	return 0;
}

/* Is program ID a latch_room_gate other than ours?  Then it returns its fd (the caller closes it). */
static int gate_stale_fd(__u32 id, __u32 ours)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	int fd;

	if (id == ours)
		return -1;
	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return -1;
	if (!bpf_obj_get_info_by_fd(fd, &info, &len) && !strcmp(info.name, "latch_room_gate"))
		return fd;
	close(fd);
	return -1;
}

/*
 * Ours on, then every other gate off.  The gate is attached with
 * ALLOW_MULTI, and one left by an earlier latchd (programs pinned again: a
 * new bpffs, an upgrade) stays attached and runs for every packet latchd
 * receives: 56 of them were found on a test machine's latch/latchd, 4.7 us
 * of the resolver client's CPU per query.  The gate has no state of its own
 * (its verdict is the packet's address and mark), so ours alone decides the
 * same; it goes on first, so there is never a moment without one.
 */
int latch_cg_gate_attach(struct latch_cg_set *set, int cgroup_fd, char *err, size_t errlen)
{
	__u32 ids[64], cnt = 64, gate;
	bool there = false;

	if (loader_cg_prog(set, CG_GATE) < 0)
		return latch_errf(err, errlen, -1, "the room gate program is not pinned in %s", set->dir);
	gate = loader_cg_prog_id(set->prog_fd[CG_GATE]);
	if (!bpf_prog_query(cgroup_fd, BPF_CGROUP_INET_INGRESS, 0, NULL, ids, &cnt))
		for (__u32 i = 0; i < cnt && i < 64; i++)
			there = there || ids[i] == gate;
	if (!there && bpf_prog_attach(set->prog_fd[CG_GATE], cgroup_fd, BPF_CGROUP_INET_INGRESS, BPF_F_ALLOW_MULTI) &&
	    errno != EEXIST)
		return latch_errf(err, errlen, -1, "cannot attach the room gate: %s", strerror(errno));
	/* bounded: each round takes off up to 64 (ENOSPC: more than 64 there, the first 64 listed) */
	for (int round = 0; round < 64; round++) {
		int n_off = 0;

		cnt = 64;
		if (bpf_prog_query(cgroup_fd, BPF_CGROUP_INET_INGRESS, 0, NULL, ids, &cnt) && errno != ENOSPC)
			break;
		for (__u32 i = 0; i < cnt && i < 64; i++) {
			int fd = gate_stale_fd(ids[i], gate);

			if (fd < 0)
				continue;
			n_off += !bpf_prog_detach2(fd, cgroup_fd, BPF_CGROUP_INET_INGRESS);
			close(fd);
		}
		if (!n_off)
			break;
	}
	return 0;
}

int latch_cg_gate_detach(struct latch_cg_set *set, int cgroup_fd)
{
	if (loader_cg_prog(set, CG_GATE) < 0)
		return -ENOENT;
	return bpf_prog_detach2(set->prog_fd[CG_GATE], cgroup_fd, BPF_CGROUP_INET_INGRESS) ? -errno : 0;
}

/* Per-CPU values of KEY in map FD, each SIZE bytes, u64s at the start summed into OUT[0..n). */
static int percpu_sum(int fd, __u32 key, size_t size, uint64_t *out, int n)
{
	int ncpu = libbpf_num_possible_cpus();
	char *v;

	if (ncpu <= 0 || fd < 0)
		return -EINVAL;
	v = calloc(ncpu, size);
	if (!v)
		return -ENOMEM;
	memset(out, 0, n * sizeof(*out));
	if (!bpf_map_lookup_elem(fd, &key, v))
		for (int c = 0; c < ncpu; c++)
			for (int i = 0; i < n; i++)
				out[i] += ((const uint64_t *)(v + c * size))[i];
	free(v);
	return 0;
}

int latch_cg_gate_counters(struct latch_cg_set *set, uint64_t out[LATCH_ROOM_GATE_SLOTS])
{
	int fd = loader_cg_map(set, CG_GATE_COUNTERS), rc = 0;

	for (__u32 i = 0; i < LATCH_ROOM_GATE_SLOTS && !rc; i++)
		rc = percpu_sum(fd, i, sizeof(__u64), &out[i], 1);
	return rc;
}

int latch_cg_orphan_counters(struct latch_cg_set *set, uint64_t *packets)
{
	uint64_t c[2] = { 0, 0 };
	int rc = 0;

	*packets = 0;
	for (int kind = 0; kind < LATCH_DIR_COUNT && !rc; kind++) {
		rc = percpu_sum(loader_cg_map(set, CG_ORPHANS), latch_counter_slot(LATCH_DROP_NO_CONFIG, kind),
				sizeof(struct latch_counter), c, 2);
		*packets += c[0];
	}
	return rc;
}
