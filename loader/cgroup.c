// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroup.c - the room programs: loaded and pinned once, attached per room.
 *
 * Loading and verifying seven programs costs tens of milliseconds; a room
 * must start in a few.  So one set is loaded per build of latch (the
 * directory name is a hash of the BPF object, made at build time) and every
 * room after that only opens its pins.  A room's own state is eight maps
 * made here with the sizes of the inner map templates and the BTF types of
 * the object, entered in the set's outer maps under the room's cgroup id:
 * the settings map last, so that a room is either whole or absent, and out
 * of them first on removal, so that a room being taken down passes nothing.
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
#include "loader/cgroup.h"

const char *const latch_cg_hook_names[LATCH_CG_HOOK_COUNT] = {
	[LATCH_CG_EGRESS] = "egress",		  [LATCH_CG_CONNECT4] = "connect4",
	[LATCH_CG_CONNECT6] = "connect6",	  [LATCH_CG_SENDMSG4] = "sendmsg4",
	[LATCH_CG_SENDMSG6] = "sendmsg6",	  [LATCH_CG_CONNECT_UNIX] = "connect_unix",
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

#define GATE LATCH_CG_HOOK_COUNT /* the gate's slot in the program arrays */
#define N_PROGS (LATCH_CG_HOOK_COUNT + 1)

static const char *const prog_pin_names[N_PROGS] = {
	"prog_egress",	     "prog_connect4",	  "prog_connect6", "prog_sendmsg4",
	"prog_sendmsg6",     "prog_connect_unix", "prog_sendmsg_unix", "prog_gate",
};

/* The set's maps, by pin name (= map name in the object). */
enum set_map {
	SM_SETTINGS,
	SM_EXACT4,
	SM_EXACT6,
	SM_PREFIX4,
	SM_PREFIX6,
	SM_TIMED4,
	SM_TIMED6,
	SM_COUNTERS,
	SM_STATE,
	SM_META,
	SM_ORPHANS,
	SM_VERDICTS,
	SM_GATE_COUNTERS,
	SM_TYPES,
	SM_COUNT,
};

static const char *const set_map_names[SM_COUNT] = {
	"room_settings", "room_exact4", "room_exact6",	 "room_prefix4", "room_prefix6",
	"room_timed4",	 "room_timed6", "room_counters", "room_state",	 "room_meta",
	"room_orphans",	 "sock_verdicts", "room_gate_counters", "room_types",
};

/*
 * A room's own maps: what they are in the adopted sandbox, which outer map
 * holds them, and the inner template they must match.  Settings last.
 */
struct room_map {
	enum latch_map_id id;
	enum set_map outer;
	enum bpf_map_type type;
	__u32 key_size, value_size, max_entries, flags;
	size_t key_type, value_type; /* offsets of the BTF type ids in struct latch_room_meta */
};

#define META(f) offsetof(struct latch_room_meta, f)

static const struct room_map room_maps[] = {
	{ LATCH_MAP_EXACT4, SM_EXACT4, BPF_MAP_TYPE_HASH, sizeof(struct latch_exact4_key), sizeof(struct latch_rules),
	  LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_exact4_key), META(type_rules) },
	{ LATCH_MAP_EXACT6, SM_EXACT6, BPF_MAP_TYPE_HASH, sizeof(struct latch_exact6_key), sizeof(struct latch_rules),
	  LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_exact6_key), META(type_rules) },
	{ LATCH_MAP_PREFIX4, SM_PREFIX4, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_prefix4_key),
	  sizeof(struct latch_rules), LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_prefix4_key), META(type_rules) },
	{ LATCH_MAP_PREFIX6, SM_PREFIX6, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_prefix6_key),
	  sizeof(struct latch_rules), LATCH_ROOM_POLICY_MAX, BPF_F_NO_PREALLOC, META(type_prefix6_key), META(type_rules) },
	{ LATCH_MAP_TIMED4, SM_TIMED4, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_timed4_key), sizeof(struct latch_rules),
	  LATCH_ROOM_TIMED_MAX, BPF_F_NO_PREALLOC, META(type_timed4_key), META(type_rules) },
	{ LATCH_MAP_TIMED6, SM_TIMED6, BPF_MAP_TYPE_LPM_TRIE, sizeof(struct latch_timed6_key), sizeof(struct latch_rules),
	  LATCH_ROOM_TIMED_MAX, BPF_F_NO_PREALLOC, META(type_timed6_key), META(type_rules) },
	{ LATCH_MAP_COUNTERS, SM_COUNTERS, BPF_MAP_TYPE_PERCPU_ARRAY, 4, sizeof(struct latch_counter),
	  LATCH_COUNTER_SLOTS, 0, META(type_u32), META(type_counter) },
	{ LATCH_MAP_SETTINGS, SM_SETTINGS, BPF_MAP_TYPE_ARRAY, 4, sizeof(struct latch_config), 1, 0, META(type_u32),
	  META(type_config) },
};

#define N_ROOM_MAPS (sizeof(room_maps) / sizeof(room_maps[0]))

struct latch_cg_set {
	char dir[PATH_MAX];
	int prog_fd[N_PROGS]; /* -1: not loaded (unix hooks on an older kernel), or not opened yet */
	int map_fd[SM_COUNT]; /* opened when first needed */
	struct latch_room_meta meta;
};

struct latch_cg_room {
	struct latch_cg_set *set;
	char name[LATCH_NAME_MAX + 1];
	uint64_t id;
	int cgroup_fd;
	struct latch_sandbox *sb; /* owns the room's map fds */
	bool attached[LATCH_CG_HOOK_COUNT];
};

static int path_in(char *buf, size_t len, const char *dir, const char *file)
{
	int n = snprintf(buf, len, "%s/%s", dir, file);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int rooms_dir(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "%s/latch/_rooms%s%s", latch_bpffs_root(), name ? "/" : "", name ? name : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int set_map(struct latch_cg_set *set, enum set_map m)
{
	char path[PATH_MAX];

	if (set->map_fd[m] < 0 && !path_in(path, sizeof(path), set->dir, set_map_names[m]))
		set->map_fd[m] = bpf_obj_get(path);
	return set->map_fd[m];
}

static int set_prog(struct latch_cg_set *set, int i)
{
	char path[PATH_MAX];

	if (set->prog_fd[i] < 0 && !path_in(path, sizeof(path), set->dir, prog_pin_names[i]))
		set->prog_fd[i] = bpf_obj_get(path);
	return set->prog_fd[i];
}

static void rm_pins(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && !path_in(path, sizeof(path), dir, de->d_name))
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
	struct bpf_program *p[N_PROGS] = {
		s->progs.latch_room_egress,	  s->progs.latch_room_connect4,	     s->progs.latch_room_connect6,
		s->progs.latch_room_sendmsg4,	  s->progs.latch_room_sendmsg6,	     s->progs.latch_room_connect_unix,
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

/* Load the set and pin it under tmp; 0 or -1 with err. */
static int load_and_pin(const char *tmp, char *err, size_t errlen)
{
	struct latch_room_meta meta;
	struct latch_cg *s = load_object(true);
	char path[PATH_MAX];
	__u32 zero = 0;
	int rc = -1;

	if (!s)
		s = load_object(false); /* a kernel before 6.7: no unix-socket hooks */
	if (!s)
		return latch_errf(err, errlen, -1, "cannot load the room programs: %s (see `latch doctor`)",
				  strerror(errno));
	meta_fill(s, &meta);
	if (bpf_map_update_elem(bpf_map__fd(s->maps.room_meta), &zero, &meta, BPF_ANY)) {
		latch_errf(err, errlen, -1, "cannot write room_meta: %s", strerror(errno));
		goto out;
	}
	if (mkdir(tmp, 0700)) {
		latch_errf(err, errlen, -1, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	for (int i = 0; i < SM_COUNT; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(s->obj, set_map_names[i]);

		if (!m || path_in(path, sizeof(path), tmp, set_map_names[i]) || bpf_map__pin(m, path)) {
			latch_errf(err, errlen, -1, "cannot pin map %s in %s: %s", set_map_names[i], tmp, strerror(errno));
			goto out;
		}
	}
	for (int i = 0; i < N_PROGS; i++) {
		struct bpf_program *p = skel_prog(s, i);

		if (bpf_program__fd(p) < 0)
			continue; /* not loaded: the kernel has no such hook */
		if (path_in(path, sizeof(path), tmp, prog_pin_names[i]) || bpf_program__pin(p, path)) {
			latch_errf(err, errlen, -1, "cannot pin %s in %s: %s", prog_pin_names[i], tmp, strerror(errno));
			goto out;
		}
	}
	rc = 0;
out:
	latch_cg__destroy(s);
	return rc;
}

struct latch_cg_set *latch_cg_open(char *err, size_t errlen)
{
	struct latch_cg_set *set = calloc(1, sizeof(*set));
	char parent[PATH_MAX], tmp[PATH_MAX + 32], path[PATH_MAX];
	struct stat st;
	__u32 zero = 0;

	if (!set)
		return NULL;
	for (int i = 0; i < N_PROGS; i++)
		set->prog_fd[i] = -1;
	for (int i = 0; i < SM_COUNT; i++)
		set->map_fd[i] = -1;
	if (latch_bpffs_ensure(err, errlen))
		goto fail;
	if (latch_sandbox_dir("_cgroup", parent, sizeof(parent)) ||
	    path_in(set->dir, sizeof(set->dir), parent, LATCH_CG_BUILD_ID)) {
		latch_errf(err, errlen, -1, "LATCH_BPFFS is too long");
		goto fail;
	}
	if (path_in(path, sizeof(path), set->dir, prog_pin_names[LATCH_CG_EGRESS]) || stat(path, &st)) {
		/* Not there: load it beside, then rename it in; whoever renames first wins. */
		if (mkdir(parent, 0700) && errno != EEXIST) {
			latch_errf(err, errlen, -1, "cannot create %s: %s", parent, strerror(errno));
			goto fail;
		}
		snprintf(tmp, sizeof(tmp), "%s/tmp-%d", parent, (int)getpid());
		rm_pins(tmp);
		if (load_and_pin(tmp, err, errlen)) {
			rm_pins(tmp);
			goto fail;
		}
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, set->dir, RENAME_NOREPLACE))
			rm_pins(tmp); /* another latch pinned the same build first: use its set */
	}
	if (set_map(set, SM_META) < 0 || bpf_map_lookup_elem(set->map_fd[SM_META], &zero, &set->meta)) {
		latch_errf(err, errlen, -1, "the pinned room programs in %s are incomplete (%s); remove the directory "
					    "when no room runs",
			   set->dir, strerror(errno));
		goto fail;
	}
	if (set->meta.abi_version != LATCH_ABI_VERSION) {
		latch_errf(err, errlen, -1, "the pinned room programs in %s are of ABI %u, this latch speaks %u", set->dir,
			   set->meta.abi_version, LATCH_ABI_VERSION);
		goto fail;
	}
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		if (set_prog(set, i) >= 0 || i >= LATCH_CG_CONNECT_UNIX)
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
	for (int i = 0; i < N_PROGS; i++)
		if (set->prog_fd[i] >= 0)
			close(set->prog_fd[i]);
	for (int i = 0; i < SM_COUNT; i++)
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

static void config_of(const struct latch_cg_room_opts *o, struct latch_config *c)
{
	memset(c, 0, sizeof(*c));
	c->abi_version = LATCH_ABI_VERSION;
	c->flags = LATCH_CFG_READY;
	snprintf(c->ifname, sizeof(c->ifname), "%.*s", (int)sizeof(c->ifname) - 1, o->name); /* for bpftool */
	if (o->host_ip4.family) {
		c->flags |= LATCH_CFG_HAVE_IP4;
		c->host_ip4 = o->host_ip4.v4.s_addr;
	}
	if (o->host_ip6.family) {
		c->flags |= LATCH_CFG_HAVE_IP6;
		memcpy(c->host_ip6, &o->host_ip6.v6, 16);
	}
	if (o->resolver_ip4.family) {
		c->flags |= LATCH_CFG_HAVE_RESOLVER4;
		c->resolver_ip4 = o->resolver_ip4.v4.s_addr;
	}
	if (o->resolver_ip6.family) {
		c->flags |= LATCH_CFG_HAVE_RESOLVER6;
		memcpy(c->resolver_ip6, &o->resolver_ip6.v6, 16);
	}
	for (int i = 0; i < o->n_host_ports && i < LATCH_HOST_PORTS_MAX; i++)
		c->host_ports[i] = htons(o->host_ports[i]);
	c->n_host_ports = o->n_host_ports;
	c->dns_rate = o->dns_rate ? o->dns_rate : LATCH_DEFAULT_DNS_RATE;
	c->dns_burst = o->dns_burst ? o->dns_burst : LATCH_DEFAULT_DNS_BURST;
}

static int make_room_map(const struct latch_cg_set *set, int btf_fd, const struct room_map *rm, int *fd)
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
	*fd = bpf_map_create(rm->type, latch_map_names[rm->id], rm->key_size, rm->value_size, rm->max_entries, &mo);
	return *fd < 0 ? -errno : 0;
}

/* Take a room's entries out of the shared maps: settings first. */
static void unregister(struct latch_cg_set *set, uint64_t id)
{
	for (int i = (int)N_ROOM_MAPS - 1; i >= 0; i--)
		if (set_map(set, room_maps[i].outer) >= 0)
			bpf_map_delete_elem(set->map_fd[room_maps[i].outer], &id);
	if (set_map(set, SM_STATE) >= 0)
		bpf_map_delete_elem(set->map_fd[SM_STATE], &id);
}

struct latch_cg_room *latch_cg_room_new(struct latch_cg_set *set, const struct latch_cg_room_opts *o, int cgroup_fd,
					char *err, size_t errlen)
{
	int fd[LATCH_MAP_COUNT], btf_fd = -1, e;
	struct latch_room_state state = { 0 };
	struct latch_cg_room *room = NULL;
	struct latch_config cfg;
	char dir[PATH_MAX], path[PATH_MAX];
	bool registered = false;
	struct stat st;
	__u32 zero = 0;

	for (int i = 0; i < LATCH_MAP_COUNT; i++)
		fd[i] = -1;
	if (latch_parse_name(o->name, err, errlen) || fstat(cgroup_fd, &st)) {
		errno = EINVAL;
		return NULL;
	}
	if (rooms_dir(dir, sizeof(dir), NULL) || (mkdir(dir, 0700) && errno != EEXIST) ||
	    rooms_dir(dir, sizeof(dir), o->name) || mkdir(dir, 0700)) {
		latch_errf(err, errlen, -1, "cannot create %s: %s%s", dir, strerror(errno),
			   errno == EEXIST ? " (a room of that name runs, or died: see `latch run --sweep`)" : "");
		return NULL;
	}
	room = calloc(1, sizeof(*room));
	if (!room)
		goto fail;
	room->set = set;
	room->id = st.st_ino; /* on cgroup2 the directory's inode number is the cgroup id */
	room->cgroup_fd = cgroup_fd;
	snprintf(room->name, sizeof(room->name), "%s", o->name);
	if (set->meta.btf_obj_id)
		btf_fd = bpf_btf_get_fd_by_id(set->meta.btf_obj_id);
	for (size_t i = 0; i < N_ROOM_MAPS; i++) {
		const struct room_map *rm = &room_maps[i];

		e = make_room_map(set, btf_fd, rm, &fd[rm->id]);
		if (e) {
			latch_errf(err, errlen, -1, "cannot create the room's %s map: %s", latch_map_names[rm->id],
				   strerror(-e));
			goto fail;
		}
		if (path_in(path, sizeof(path), dir, latch_map_names[rm->id]) || bpf_obj_pin(fd[rm->id], path)) {
			latch_errf(err, errlen, -1, "cannot pin %s: %s", path, strerror(errno));
			goto fail;
		}
	}
	config_of(o, &cfg);
	if (bpf_map_update_elem(fd[LATCH_MAP_SETTINGS], &zero, &cfg, BPF_ANY)) {
		latch_errf(err, errlen, -1, "cannot write the room's config: %s", strerror(errno));
		goto fail;
	}
	registered = true;
	if (set_map(set, SM_STATE) < 0 || bpf_map_update_elem(set->map_fd[SM_STATE], &room->id, &state, BPF_NOEXIST)) {
		latch_errf(err, errlen, -1, "cannot enter the room in room_state: %s%s", strerror(errno),
			   errno == E2BIG ? " (too many rooms at once)" : "");
		goto fail;
	}
	for (size_t i = 0; i < N_ROOM_MAPS; i++) {
		const struct room_map *rm = &room_maps[i];

		if (set_map(set, rm->outer) < 0 ||
		    bpf_map_update_elem(set->map_fd[rm->outer], &room->id, &fd[rm->id], BPF_NOEXIST)) {
			latch_errf(err, errlen, -1, "cannot enter the room in %s: %s", set_map_names[rm->outer],
				   strerror(errno));
			goto fail;
		}
	}
	room->sb = latch_sandbox_adopt(o->name, fd);
	if (!room->sb)
		goto fail;
	if (btf_fd >= 0)
		close(btf_fd);
	return room;
fail:
	e = errno;
	if (registered)
		unregister(set, st.st_ino);
	for (int i = 0; i < LATCH_MAP_COUNT; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	if (btf_fd >= 0)
		close(btf_fd);
	rm_pins(dir);
	free(room);
	errno = e ? e : ENOMEM;
	return NULL;
}

int latch_cg_room_attach(struct latch_cg_room *room, char *err, size_t errlen)
{
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		int pfd = room->set->prog_fd[i];

		if (pfd < 0)
			continue; /* the unix hooks on a kernel without them */
		if (bpf_prog_attach(pfd, room->cgroup_fd, hook_attach[i], 0))
			return latch_errf(err, errlen, -1, "cannot attach %s to the room's cgroup: %s%s",
					  latch_cg_hook_names[i], strerror(errno),
					  errno == EPERM ? " (a parent cgroup holds an exclusive program on that hook)" : "");
		room->attached[i] = true;
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

void latch_cg_room_remove(struct latch_cg_room *room)
{
	char dir[PATH_MAX];

	if (!room)
		return;
	unregister(room->set, room->id);
	if (!rooms_dir(dir, sizeof(dir), room->name))
		rm_pins(dir);
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

static uint32_t map_id_of(int fd)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);

	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}

static uint32_t prog_id_of(int fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}

/* One hook: what is attached on the cgroup itself, and what runs for its sockets. */
static void hook_posture(const struct latch_cg_room *room, int i, struct latch_cg_hook_state *h)
{
	__u32 ids[64], cnt = 64, flags = 0;

	h->pinned_id = prog_id_of(room->set->prog_fd[i]);
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

int latch_cg_room_posture(const struct latch_cg_room *room, struct latch_cg_posture *p)
{
	struct latch_cg_set *set = room->set;
	struct latch_config cfg;
	size_t nl = 0;

	memset(p, 0, sizeof(*p));
	/* the shared maps must hold this room's own maps under its id */
	p->state_ok = true;
	for (size_t i = 0; i < N_ROOM_MAPS; i++) {
		__u32 inner = 0;

		if (set_map(set, room_maps[i].outer) < 0 ||
		    bpf_map_lookup_elem(set->map_fd[room_maps[i].outer], &room->id, &inner) ||
		    inner != map_id_of(latch_sandbox_map_fd(room->sb, room_maps[i].id)))
			p->state_ok = false;
	}
	if (!latch_sandbox_read_config(room->sb, &cfg)) {
		p->config_ready = (cfg.flags & LATCH_CFG_READY) && cfg.abi_version == LATCH_ABI_VERSION;
		p->open = cfg.flags & LATCH_CFG_OPEN;
	}
	if (!p->state_ok)
		snprintf(p->why, sizeof(p->why), "the room's maps are not entered under its cgroup id %llu",
			 (unsigned long long)room->id);
	else if (!p->config_ready)
		snprintf(p->why, sizeof(p->why), "the room's config is not ready: it passes nothing");
	for (int i = 0; i < LATCH_CG_HOOK_COUNT; i++) {
		struct latch_cg_hook_state *h = &p->hook[i];

		h->wanted = set->prog_fd[i] >= 0;
		if (!h->wanted)
			continue;
		hook_posture(room, i, h);
		if (!*p->why && !h->in_effective)
			snprintf(p->why, sizeof(p->why), "latch's %s program (id %u) does not run for the room's sockets%s",
				 latch_cg_hook_names[i], h->pinned_id, h->attached_id ? " (another program replaced it)" : "");
		if (h->n_others && nl < sizeof(p->note))
			nl += snprintf(p->note + nl, sizeof(p->note) - nl, "%s%d other program(s) on %s", nl ? "; " : "",
				       h->n_others, latch_cg_hook_names[i]);
	}
	p->enforced = !*p->why;
	return 0;
}

int latch_cg_room_list(int (*fn)(const char *name, void *arg), void *arg)
{
	char dir[PATH_MAX];
	struct dirent *de;
	int n = 0;
	DIR *d;

	if (rooms_dir(dir, sizeof(dir), NULL))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || latch_parse_name(de->d_name, NULL, 0))
			continue;
		n++;
		if (fn)
			fn(de->d_name, arg);
	}
	closedir(d);
	return n;
}

int latch_cg_room_sweep(struct latch_cg_set *set, const char *name, uint64_t cgroup_id)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct stat st;

	if (rooms_dir(dir, sizeof(dir), name))
		return -ENAMETOOLONG;
	if (stat(dir, &st)) {
		if (!cgroup_id)
			return -ENOENT;
		unregister(set, cgroup_id);
		return 0;
	}
	if (!cgroup_id && !path_in(path, sizeof(path), dir, latch_map_names[LATCH_MAP_SETTINGS])) {
		/* find the id whose settings are the pinned ones */
		int fd = bpf_obj_get(path), outer = set_map(set, SM_SETTINGS);
		uint32_t want = map_id_of(fd), inner;
		__u64 key, next, *prev = NULL;

		while (fd >= 0 && outer >= 0 && !bpf_map_get_next_key(outer, prev, &next)) {
			key = next;
			prev = &key;
			if (!bpf_map_lookup_elem(outer, &key, &inner) && inner == want) {
				cgroup_id = key;
				break;
			}
		}
		if (fd >= 0)
			close(fd);
	}
	if (cgroup_id)
		unregister(set, cgroup_id);
	rm_pins(dir);
	return 0;
}

int latch_cg_gate_attach(struct latch_cg_set *set, int cgroup_fd, char *err, size_t errlen)
{
	if (set_prog(set, GATE) < 0)
		return latch_errf(err, errlen, -1, "the room gate program is not pinned in %s", set->dir);
	if (bpf_prog_attach(set->prog_fd[GATE], cgroup_fd, BPF_CGROUP_INET_INGRESS, BPF_F_ALLOW_MULTI))
		return latch_errf(err, errlen, -1, "cannot attach the room gate: %s", strerror(errno));
	return 0;
}

int latch_cg_gate_detach(struct latch_cg_set *set, int cgroup_fd)
{
	if (set_prog(set, GATE) < 0)
		return -ENOENT;
	return bpf_prog_detach2(set->prog_fd[GATE], cgroup_fd, BPF_CGROUP_INET_INGRESS) ? -errno : 0;
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
	int fd = set_map(set, SM_GATE_COUNTERS), rc = 0;

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
		rc = percpu_sum(set_map(set, SM_ORPHANS), latch_counter_slot(LATCH_DROP_NO_CONFIG, kind),
				sizeof(struct latch_counter), c, 2);
		*packets += c[0];
	}
	return rc;
}
