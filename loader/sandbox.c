// SPDX-License-Identifier: GPL-2.0-only
/*
 * sandbox.c - load, pin, attach, re-attach, detach and observe a sandbox.
 *
 * Order matters everywhere here, because a sandbox link must never pass
 * traffic unfiltered once latch has claimed it: maps are created and the
 * config written before the programs are attached; a re-attach swaps the
 * filter in place (BPF_TC_F_REPLACE) instead of removing it first.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "latch_tc.skel.h"
#include "loader/hook.h"

const char *const latch_map_names[LATCH_MAP_COUNT] = {
	[LATCH_MAP_SETTINGS] = "settings",
	[LATCH_MAP_EXACT4] = "exact4",
	[LATCH_MAP_EXACT6] = "exact6",
	[LATCH_MAP_PREFIX4] = "prefix4",
	[LATCH_MAP_PREFIX6] = "prefix6",
	[LATCH_MAP_TIMED4] = "timed4",
	[LATCH_MAP_TIMED6] = "timed6",
	[LATCH_MAP_FLOW4] = "flow4",
	[LATCH_MAP_FLOW6] = "flow6",
	[LATCH_MAP_FLOW_HOT] = "flow_hot",
	[LATCH_MAP_COUNTERS] = "counters",
	[LATCH_MAP_DNS_BUCKET] = "dns_bucket",
	[LATCH_MAP_EVENT_BUCKET] = "event_bucket",
	[LATCH_MAP_EVENTS] = "events",
	[LATCH_MAP_NAMES] = "names",
};

struct latch_sandbox {
	char name[LATCH_NAME_MAX + 1];
	int fd[LATCH_MAP_COUNT];
};

uint64_t latch_now_boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

const char *latch_bpffs_root(void)
{
	const char *r = getenv("LATCH_BPFFS");

	return r && *r ? r : LATCH_BPFFS_DEFAULT;
}

int latch_sandbox_dir(const char *name, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/latch%s%s", latch_bpffs_root(), name ? "/" : "", name ? name : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int latch_pin_path(const char *name, const char *file, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/latch/%s/%s", latch_bpffs_root(), name, file);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static bool is_bpffs(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

int latch_bpffs_ensure(char *err, size_t errlen)
{
	const char *root = latch_bpffs_root();
	char dir[PATH_MAX];

	if (!is_bpffs(root)) {
		if (mkdir(root, 0700) && errno != EEXIST)
			return latch_errf(err, errlen, -1, "cannot create %s: %s", root, strerror(errno));
		/* a directory just made inside a bpffs (LATCH_BPFFS=/sys/fs/bpf/x) is one: no second mount over it */
		if (!is_bpffs(root) && mount("bpf", root, "bpf", 0, "mode=0700"))
			return latch_errf(err, errlen, -1,
					  "bpffs is not mounted at %s and mounting it failed: %s (run as root)", root,
					  strerror(errno));
		if (!is_bpffs(root))
			return latch_errf(err, errlen, -1, "%s is not a bpffs even after mounting one", root);
	}
	latch_sandbox_dir(NULL, dir, sizeof(dir));
	if (mkdir(dir, 0700) && errno != EEXIST)
		return latch_errf(err, errlen, -1, "cannot create %s: %s", dir, strerror(errno));
	return 0;
}

bool latch_sandbox_exists(const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	return latch_pin_path(name, latch_map_names[LATCH_MAP_SETTINGS], path, sizeof(path)) == 0 &&
	       stat(path, &st) == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int latch_sandbox_list(int (*fn)(const char *name, void *arg), void *arg)
{
	char dir[PATH_MAX], *names[1024];
	struct dirent *de;
	int n = 0;
	DIR *d;

	latch_sandbox_dir(NULL, dir, sizeof(dir));
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) && n < 1024) {
		if (de->d_name[0] == '.' || latch_parse_name(de->d_name, NULL, 0))
			continue;
		if (latch_sandbox_exists(de->d_name))
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_str);
	for (int i = 0; i < n; i++) {
		if (fn)
			fn(names[i], arg);
		free(names[i]);
	}
	return n;
}

/* Remove every pin of a sandbox and its directory. */
static void unpin_all(const char *name)
{
	char path[PATH_MAX];

	for (int i = 0; i < LATCH_MAP_COUNT; i++)
		if (!latch_pin_path(name, latch_map_names[i], path, sizeof(path)))
			unlink(path);
	for (int i = 0; i < LATCH_DIR_COUNT; i++) {
		if (!latch_pin_path(name, latch_prog_pin_names[i], path, sizeof(path)))
			unlink(path);
		if (!latch_pin_path(name, latch_link_pin_names[i], path, sizeof(path)))
			unlink(path);
	}
	if (!latch_sandbox_dir(name, path, sizeof(path)))
		rmdir(path);
}

static struct bpf_map *skel_map(struct latch_tc *s, enum latch_map_id id)
{
	return bpf_object__find_map_by_name(s->obj, latch_map_names[id]);
}

bool latch_csum_check_supported(void)
{
	static int known = -1;

	if (known < 0) {
		struct btf *btf = btf__load_vmlinux_btf();

		known = btf && btf__find_by_name_kind(btf, "bpf_cast_to_kern_ctx", BTF_KIND_FUNC) > 0;
		btf__free(btf);
	}
	return known;
}

/*
 * latch_from_guest reads the skb's checksum-offload fields through
 * bpf_cast_to_kern_ctx (6.2+); latch_from_guest_nocsum is the same program
 * without that check, for older kernels, which would refuse the kfunc.
 * Exactly one of them is loaded; the choice follows the kernel, never a
 * failed load (a refused latch_from_guest is an error, not a fallback).
 */
static struct bpf_program *from_guest_prog(struct latch_tc *s)
{
	return bpf_program__autoload(s->progs.latch_from_guest) ? s->progs.latch_from_guest :
								  s->progs.latch_from_guest_nocsum;
}

static void prog_fds(struct latch_tc *s, int fd[LATCH_DIR_COUNT])
{
	fd[LATCH_DIR_FROM_GUEST] = bpf_program__fd(from_guest_prog(s));
	fd[LATCH_DIR_TO_GUEST] = bpf_program__fd(s->progs.latch_to_guest);
}

/* Open the skeleton with every map pointed at its pin path, and the from-guest variant chosen. */
static struct latch_tc *open_pinned(const char *name, char *err, size_t errlen)
{
	struct latch_tc *s = latch_tc__open();
	bool csum = latch_csum_check_supported();
	char path[PATH_MAX];

	if (!s) {
		latch_errf(err, errlen, -1, "cannot open the BPF object: %s", strerror(errno));
		return NULL;
	}
	bpf_program__set_autoload(s->progs.latch_from_guest, csum);
	bpf_program__set_autoload(s->progs.latch_from_guest_nocsum, !csum);
	for (int i = 0; i < LATCH_MAP_COUNT; i++) {
		struct bpf_map *m = skel_map(s, i);

		if (!m || latch_pin_path(name, latch_map_names[i], path, sizeof(path)) ||
		    bpf_map__set_pin_path(m, path)) {
			latch_errf(err, errlen, -1, "cannot set the pin path of map %s", latch_map_names[i]);
			latch_tc__destroy(s);
			return NULL;
		}
	}
	return s;
}

static int pin_programs(struct latch_tc *s, const char *name, char *err, size_t errlen)
{
	struct bpf_program *progs[LATCH_DIR_COUNT] = { from_guest_prog(s), s->progs.latch_to_guest };
	char path[PATH_MAX];

	for (int i = 0; i < LATCH_DIR_COUNT; i++) {
		if (latch_pin_path(name, latch_prog_pin_names[i], path, sizeof(path)))
			return latch_errf(err, errlen, -1, "pin path too long");
		/* Replacing our own program pin is the point of a re-attach. */
		unlink(path);
		if (bpf_program__pin(progs[i], path))
			return latch_errf(err, errlen, -1, "cannot pin %s: %s", path, strerror(errno));
	}
	return 0;
}

void latch_sandbox_config(const struct latch_sandbox_opts *o, int ifindex, struct latch_config *c)
{
	memset(c, 0, sizeof(*c));
	c->abi_version = LATCH_ABI_VERSION;
	c->ifindex = ifindex;
	snprintf(c->ifname, sizeof(c->ifname), "%s", o->ifname);
	memcpy(c->guest_mac, o->guest_mac, 6);
	/* a room has a host address (its services) and no guest address */
	if (o->guest_ip4.family || o->host_ip4.family) {
		c->flags |= LATCH_CFG_HAVE_IP4;
		c->guest_ip4 = o->guest_ip4.v4.s_addr;
		c->host_ip4 = o->host_ip4.v4.s_addr;
	}
	if (o->guest_ip6.family || o->host_ip6.family) {
		c->flags |= LATCH_CFG_HAVE_IP6;
		memcpy(c->guest_ip6, &o->guest_ip6.v6, 16);
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
	c->dns_rate = o->dns_rate;
	c->dns_burst = o->dns_burst;
	c->event_rate = o->event_rate;
	c->event_burst = o->event_burst;
	c->flags |= LATCH_CFG_READY;
}

int latch_sandbox_create(const struct latch_sandbox_opts *o, char *err, size_t errlen)
{
	char dir[PATH_MAX], why[LATCH_ERR_MAX];
	struct latch_config cfg;
	struct latch_tc *s = NULL;
	enum latch_tc_mode mode;
	int ifindex = if_nametoindex(o->ifname), fd[LATCH_DIR_COUNT];
	bool own_qdisc = false;
	__u32 zero = 0;

	if (!ifindex)
		return latch_errf(err, errlen, -1,
				  "device '%s' does not exist; give the host end of the sandbox's link", o->ifname);
	if (latch_tc_mode_choose(&mode, err, errlen))
		return -1;
	if (latch_bpffs_ensure(err, errlen))
		return -1;
	if (latch_sandbox_exists(o->name))
		return latch_errf(err, errlen, -1, "sandbox '%s' already exists; `latch detach %s` first", o->name,
				  o->name);
	latch_sandbox_dir(o->name, dir, sizeof(dir));
	if (mkdir(dir, 0700))
		return latch_errf(err, errlen, -1, "cannot create %s: %s", dir, strerror(errno));

	s = open_pinned(o->name, err, errlen);
	if (!s)
		goto fail;
	if (latch_tc__load(s)) {
		latch_errf(err, errlen, -1, "cannot load the BPF programs: %s", strerror(errno));
		goto fail;
	}
	if (pin_programs(s, o->name, err, errlen))
		goto fail;
	/* The config before the programs: they drop everything until it is ready. */
	latch_sandbox_config(o, ifindex, &cfg);
	if (mode == LATCH_TC_TCX)
		cfg.flags |= LATCH_CFG_TCX;
	if (!bpf_program__autoload(s->progs.latch_from_guest))
		cfg.flags |= LATCH_CFG_NO_CSUM;
	if (bpf_map_update_elem(bpf_map__fd(s->maps.settings), &zero, &cfg, BPF_ANY)) {
		latch_errf(err, errlen, -1, "cannot write the config map: %s", strerror(errno));
		goto fail;
	}
	prog_fds(s, fd);
	if (latch_hook_attach(o->name, mode, ifindex, fd, &own_qdisc, why, sizeof(why))) {
		latch_errf(err, errlen, -1, "%s (%s): %s", o->ifname, latch_tc_mode_name(mode), why);
		goto fail;
	}
	if (own_qdisc) {
		cfg.flags |= LATCH_CFG_OWN_QDISC;
		bpf_map_update_elem(bpf_map__fd(s->maps.settings), &zero, &cfg, BPF_ANY);
	}
	latch_tc__destroy(s);
	return 0;
fail:
	latch_tc__destroy(s);
	unpin_all(o->name);
	return -1;
}

int latch_sandbox_reattach(const char *name, char *err, size_t errlen)
{
	struct latch_sandbox *sb;
	struct latch_config cfg;
	struct latch_tc *s = NULL;
	enum latch_tc_mode mode;
	char why[LATCH_ERR_MAX];
	int ifindex, rc = -1, fd[LATCH_DIR_COUNT];
	bool created;

	if (latch_bpffs_ensure(err, errlen))
		return -1;
	sb = latch_sandbox_open(name, err, errlen);
	if (!sb)
		return -1;
	if (latch_sandbox_read_config(sb, &cfg)) {
		latch_errf(err, errlen, -1, "cannot read the config of '%s'", name);
		goto out;
	}
	/* the mode the sandbox was created in: its pins (links or none) follow it */
	mode = cfg.flags & LATCH_CFG_TCX ? LATCH_TC_TCX : LATCH_TC_CLSACT;
	if (mode == LATCH_TC_TCX && !latch_tcx_supported()) {
		latch_errf(
			err, errlen, -1,
			"'%s' was attached with TCX links, which this kernel lacks; `latch detach %s` and attach again",
			name, name);
		goto out;
	}
	ifindex = if_nametoindex(cfg.ifname);
	if (!ifindex) {
		latch_errf(err, errlen, -1, "device '%s' of sandbox '%s' does not exist; create it, then re-attach",
			   cfg.ifname, name);
		goto out;
	}
	s = open_pinned(name, err, errlen);
	if (!s)
		goto out;
	if (latch_tc__load(s)) {
		latch_errf(err, errlen, -1,
			   "cannot load the BPF programs on the pinned maps of '%s': %s (pins from another "
			   "latch version? `latch detach %s` and attach again)",
			   name, strerror(errno), name);
		goto out;
	}
	prog_fds(s, fd);
	if (latch_hook_replace(name, mode, ifindex, fd, &created, why, sizeof(why))) {
		latch_errf(err, errlen, -1, "%s (%s): %s", cfg.ifname, latch_tc_mode_name(mode), why);
		goto out;
	}
	if (pin_programs(s, name, err, errlen))
		goto out;
	if (cfg.ifindex != (__u32)ifindex || created) {
		cfg.ifindex = ifindex;
		if (created)
			cfg.flags |= LATCH_CFG_OWN_QDISC;
		latch_sandbox_write_config(sb, &cfg);
	}
	rc = 0;
out:
	latch_tc__destroy(s);
	latch_sandbox_free(sb);
	return rc;
}

int latch_sandbox_detach(const char *name, char *err, size_t errlen)
{
	struct latch_sandbox *sb = latch_sandbox_open(name, err, errlen);
	struct latch_config cfg;

	if (!sb)
		return -1;
	if (latch_sandbox_read_config(sb, &cfg) == 0)
		/* the device may be gone already: then so are its filters and links */
		latch_hook_remove(name, cfg.flags & LATCH_CFG_TCX ? LATCH_TC_TCX : LATCH_TC_CLSACT,
				  if_nametoindex(cfg.ifname), cfg.flags & LATCH_CFG_OWN_QDISC);
	latch_sandbox_free(sb);
	unpin_all(name);
	return 0;
}

struct latch_sandbox *latch_sandbox_open(const char *name, char *err, size_t errlen)
{
	struct latch_sandbox *sb;
	char path[PATH_MAX];

	if (!latch_sandbox_exists(name)) {
		latch_errf(err, errlen, -1, "no sandbox '%s' (see `latch status`)", name);
		errno = ENOENT;
		return NULL;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	for (int i = 0; i < LATCH_MAP_COUNT; i++) {
		latch_pin_path(name, latch_map_names[i], path, sizeof(path));
		sb->fd[i] = bpf_obj_get(path);
		/* pins of a latch before the names map: nothing there is name-checked until a re-attach */
		if (sb->fd[i] < 0 && i == LATCH_MAP_NAMES && errno == ENOENT)
			continue;
		if (sb->fd[i] < 0) {
			latch_errf(err, errlen, -1, "sandbox '%s' is missing its pinned map %s: %s", name, path,
				   strerror(errno));
			latch_sandbox_free(sb);
			errno = ENOENT;
			return NULL;
		}
	}
	return sb;
}

struct latch_sandbox *latch_sandbox_adopt(const char *name, const int fd[LATCH_MAP_COUNT])
{
	struct latch_sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	memcpy(sb->fd, fd, sizeof(sb->fd));
	return sb;
}

void latch_sandbox_free(struct latch_sandbox *sb)
{
	if (!sb)
		return;
	for (int i = 0; i < LATCH_MAP_COUNT; i++)
		if (sb->fd[i] > 0)
			close(sb->fd[i]);
	free(sb);
}

static uint32_t map_id_of(int fd)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);

	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}

bool latch_sandbox_still_pinned(const struct latch_sandbox *sb)
{
	char path[PATH_MAX];
	uint32_t held = map_id_of(sb->fd[LATCH_MAP_SETTINGS]), pinned;
	int fd;

	if (latch_pin_path(sb->name, latch_map_names[LATCH_MAP_SETTINGS], path, sizeof(path)))
		return false;
	fd = bpf_obj_get(path);
	pinned = map_id_of(fd);
	if (fd >= 0)
		close(fd);
	return held && held == pinned;
}

const char *latch_sandbox_name(const struct latch_sandbox *sb)
{
	return sb->name;
}

int latch_sandbox_map_fd(const struct latch_sandbox *sb, enum latch_map_id id)
{
	return sb->fd[id];
}

int latch_sandbox_read_config(const struct latch_sandbox *sb, struct latch_config *cfg)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(sb->fd[LATCH_MAP_SETTINGS], &zero, cfg) ? -errno : 0;
}

int latch_sandbox_write_config(const struct latch_sandbox *sb, const struct latch_config *cfg)
{
	__u32 zero = 0;

	return bpf_map_update_elem(sb->fd[LATCH_MAP_SETTINGS], &zero, cfg, BPF_ANY) ? -errno : 0;
}

/*
 * Every slot's per-CPU values in one BPF_MAP_LOOKUP_BATCH (latchd reads them
 * each second, where a lookup a slot was LATCH_COUNTER_SLOTS system calls).
 * False when the kernel can't batch this map: the caller reads slot by slot.
 */
static bool counters_batch(int fd, struct latch_counter *v)
{
	__u32 keys[LATCH_COUNTER_SLOTS], out_batch, count = LATCH_COUNTER_SLOTS;
	int r = bpf_map_lookup_batch(fd, NULL, &out_batch, keys, v, &count, NULL);

	/* -ENOENT: the map's end was reached, here with every slot read */
	if ((r < 0 && r != -ENOENT) || count != LATCH_COUNTER_SLOTS)
		return false;
	for (__u32 i = 0; i < LATCH_COUNTER_SLOTS; i++)
		if (keys[i] != i)
			return false;
	return true;
}

int latch_sandbox_counters(const struct latch_sandbox *sb, struct latch_counter out[LATCH_COUNTER_SLOTS])
{
	int ncpu = libbpf_num_possible_cpus(), fd = sb->fd[LATCH_MAP_COUNTERS];
	struct latch_counter *v;
	bool batched;

	if (ncpu <= 0)
		return -EINVAL;
	/* a per-CPU map's values: ncpu of them a slot (struct latch_counter is 8-byte aligned, as the kernel's are) */
	v = calloc((size_t)ncpu * LATCH_COUNTER_SLOTS, sizeof(*v));
	if (!v)
		return -ENOMEM;
	batched = counters_batch(fd, v);
	for (__u32 i = 0; i < LATCH_COUNTER_SLOTS; i++) {
		struct latch_counter *slot = batched ? v + (size_t)i * ncpu : v;

		out[i].packets = out[i].bytes = 0;
		if (!batched && bpf_map_lookup_elem(fd, &i, slot))
			continue;
		for (int c = 0; c < ncpu; c++) {
			out[i].packets += slot[c].packets;
			out[i].bytes += slot[c].bytes;
		}
	}
	free(v);
	return 0;
}

int latch_sandbox_map_count(const struct latch_sandbox *sb, enum latch_map_id id)
{
	unsigned char key[64], next[64];
	int n = 0;
	void *prev = NULL;

	while (bpf_map_get_next_key(sb->fd[id], prev, next) == 0) {
		memcpy(key, next, sizeof(key));
		prev = key;
		n++;
	}
	return n;
}

const char *latch_reason_name(int reason)
{
	switch (reason) {
#define LATCH_REASON_CASE(id, code, name, text) \
	case LATCH_##id:                        \
		return name;
		LATCH_REASONS(LATCH_REASON_CASE)
#undef LATCH_REASON_CASE
	default:
		return "unknown";
	}
}
