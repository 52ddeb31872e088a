// SPDX-License-Identifier: GPL-2.0-only
/*
 * state.c - the per-sandbox state file, the lifecycle lock, and allocation
 * of a slot in the pool.
 *
 * The file is `key = value` lines that latch alone writes; reading it back
 * still checks every value, since a half-written or hand-edited file must
 * not turn into a wrong address in the kernel.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/state.h"

int latch_state_lock(char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int fd, ret;

	if (latch_path(dir, sizeof(dir), LATCH_RUN_DIR) || latch_path(path, sizeof(path), LATCH_LIFECYCLE_LOCK))
		return latch_errf(err, errlen, -EINVAL, "LATCH_ROOT is too long");
	/* root-only, like every path that makes run/latch: libvirt opens the agent's socket for QEMU */
	ret = latch_mkdirs(dir, 0700);
	if (ret)
		return latch_errf(err, errlen, ret, "cannot create %s: %s", dir, strerror(-ret));
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		latch_errf(err, errlen, -EINVAL, "cannot open %s: %s", path, strerror(errno));
		return ret;
	}
	if (flock(fd, LOCK_EX)) {
		ret = -errno;
		close(fd);
		latch_errf(err, errlen, -EINVAL, "cannot lock %s: %s", path, strerror(-ret));
		return ret;
	}
	return fd;
}

int latch_state_dir(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_SANDBOX_DIR_FMT, name);
}

bool latch_vm_exists(const char *name)
{
	char path[PATH_MAX];

	return !latch_state_file_path(name, LATCH_STATE_VM, path, sizeof(path)) && access(path, F_OK) == 0;
}

#define ST(key, field, help) LATCH_KV_STR(key, struct latch_vm_state, field, help)
#define U32(key, field, lo, hi, help) LATCH_KV_U32(key, struct latch_vm_state, field, lo, hi, help)

/* The state file's keys: what latch_state_save() writes and latch_state_load() checks. */
static const struct latch_kv_key state_keys[] = {
	ST("name", name, NULL),
	U32("index", index, 0, 65535, "0..65535"),
	ST("tap", tap, NULL),
	LATCH_KV_MACADDR("mac", struct latch_vm_state, mac),
	LATCH_KV_A4("subnet4", struct latch_vm_state, subnet4),
	LATCH_KV_A4("host4", struct latch_vm_state, host4),
	LATCH_KV_A4("guest4", struct latch_vm_state, guest4),
	LATCH_KV_A6("subnet6", struct latch_vm_state, subnet6),
	LATCH_KV_A6("host6", struct latch_vm_state, host6),
	LATCH_KV_A6("guest6", struct latch_vm_state, guest6),
	U32("table", table, 1, UINT32_MAX, "a routing table number"),
	U32("rule_priority", rule_priority, 1, 32765, "1..32765"),
	ST("uplink", uplink, NULL),
	LATCH_KV_A4("gateway4", struct latch_vm_state, gateway4),
	LATCH_KV_A6("gateway6", struct latch_vm_state, gateway6),
	ST("image", image, NULL),
	ST("image_dir", image_dir, NULL),
	U32("memory_mib", memory_mib, 16, 1 << 20, "MiB, 16..1048576"),
	U32("cpus", cpus, 1, 256, "1..256"),
	ST("workspace", workspace, NULL),
	ST("template", template_id, NULL),
};
#define N_STATE_KEYS ((int)(sizeof(state_keys) / sizeof(state_keys[0])))
/* unknown keys are from a newer latch: keep going */
static const struct latch_state_format state_format = { state_keys, N_STATE_KEYS, LATCH_KV_UNKNOWN_OK, NULL };

/* The first string of st with a control character in it, or NULL. */
static const char *control_char_key(const struct latch_vm_state *st)
{
	for (int i = 0; i < N_STATE_KEYS; i++) {
		const char *v = (const char *)st + state_keys[i].offset;

		if (state_keys[i].type != LATCH_KV_STRING)
			continue;
		for (size_t k = 0; k < state_keys[i].size && v[k]; k++)
			if ((unsigned char)v[k] < 0x20 || v[k] == 0x7f)
				return state_keys[i].name;
	}
	return NULL;
}

int latch_state_save(const struct latch_vm_state *st, char *err, size_t errlen)
{
	const char *bad = control_char_key(st);

	if (bad)
		return latch_errf(err, errlen, -EINVAL, "sandbox '%s': its %s has a control character; refused",
				  st->name, bad);
	return latch_state_file_write(st->name, LATCH_STATE_VM, &state_format,
				      "latch sandbox state; written by latch, do not edit", st, err, errlen);
}

int latch_state_load(const char *name, struct latch_vm_state *st, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret;

	memset(st, 0, sizeof(*st));
	ret = latch_state_file_read(name, LATCH_STATE_VM, &state_format, st, err, errlen);
	if (ret == -ENOENT)
		return latch_errf(err, errlen, ret, "no VM sandbox '%s' (see `latch ls`)", name);
	if (!ret && (strcmp(st->name, name) || !*st->tap || !st->guest4.family || !st->host4.family ||
		     !st->subnet4.family || !st->table)) {
		latch_state_file_path(name, LATCH_STATE_VM, path, sizeof(path)); /* it was made to read it */
		ret = latch_errf(err, errlen, -EINVAL, "%s: incomplete state (name, tap, addresses or table missing)",
				 path);
	}
	return ret;
}

static int remove_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path) && errno != ENOENT ? -1 : 0;
}

int latch_rm_tree(const char *path)
{
	struct stat sb;

	if (lstat(path, &sb))
		return errno == ENOENT ? 0 : -errno;
	if (nftw(path, remove_cb, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
		return -errno;
	return 0;
}

int latch_state_purge(const char *name)
{
	char dir[PATH_MAX];

	if (latch_state_dir(name, dir, sizeof(dir)))
		return -ENAMETOOLONG;
	return latch_rm_tree(dir);
}

int latch_state_remove(const char *name)
{
	char dir[PATH_MAX], path[PATH_MAX + NAME_MAX + 2];
	struct dirent *de;
	int ret = 0, r;
	DIR *d;

	if (latch_state_dir(name, dir, sizeof(dir)))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	/* the guest-state backup ("state", guest_state.c) outlives the sandbox: `up` puts it back */
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, "state"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		r = latch_rm_tree(path);
		ret = ret ?: r;
	}
	closedir(d);
	if (!ret && rmdir(dir) && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT)
		ret = -errno;
	return ret;
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int latch_vm_list(int (*fn)(const char *name, void *arg), void *arg)
{
	char dir[PATH_MAX], e[LATCH_ERR_MAX];
	char **names = NULL;
	struct dirent *de;
	int n = 0, cap = 0, ret = 0;
	DIR *d;

	if (latch_path(dir, sizeof(dir), LATCH_SANDBOXES_DIR))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (latch_parse_name(de->d_name, e, sizeof(e)) || !latch_vm_exists(de->d_name))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof(*names));

			if (!nn) {
				ret = -ENOMEM;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(de->d_name))) {
			ret = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	if (!ret) {
		qsort(names, n, sizeof(*names), cmpstr);
		for (int i = 0; i < n && !ret; i++)
			ret = fn(names[i], arg);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return ret ? ret : n;
}

struct used_ctx {
	uint8_t *used;
	uint32_t size;
};

static int mark_used(const char *name, void *arg)
{
	struct used_ctx *u = arg;
	struct latch_vm_state st;
	char e[LATCH_ERR_MAX];

	/* an unreadable state still holds its slot: never hand out what may be in use */
	if (latch_state_load(name, &st, e, sizeof(e)) == 0 && st.index < u->size)
		u->used[st.index] = 1;
	return 0;
}

int latch_state_allocate(const struct latch_conf *c, struct latch_vm_state *st, char *err, size_t errlen)
{
	uint32_t size = latch_conf_pool_size(c), i;
	struct used_ctx u = { .used = calloc(size, 1), .size = size };
	uint8_t r;
	int ret;

	if (!u.used)
		return -ENOMEM;
	ret = latch_vm_list(mark_used, &u);
	if (ret < 0) {
		free(u.used);
		return latch_errf(err, errlen, ret, "cannot list sandboxes: %s", strerror(-ret));
	}
	for (i = 0; i < size && u.used[i]; i++)
		;
	free(u.used);
	if (i == size) {
		char p[INET6_ADDRSTRLEN];

		inet_ntop(AF_INET, &c->pool4.v4, p, sizeof(p));
		snprintf(err, errlen, "the pool %s/%d is exhausted (%u sandboxes); destroy one or widen 'pool' in %s",
			 p, c->pool4_len, size, *c->path ? c->path : "latch.conf");
		return -ENOSPC;
	}
	st->index = i;
	if (snprintf(st->tap, sizeof(st->tap), "lt-%s", st->name) >= (int)sizeof(st->tap))
		return snprintf(err, errlen, "name '%s' is too long for a tap name", st->name), -ENAMETOOLONG;

	st->subnet4 = c->pool4;
	st->subnet4.v4.s_addr = htonl(ntohl(c->pool4.v4.s_addr) + 4 * i);
	st->host4 = st->guest4 = st->subnet4;
	st->host4.v4.s_addr = htonl(ntohl(st->subnet4.v4.s_addr) + 1);
	st->guest4.v4.s_addr = htonl(ntohl(st->subnet4.v4.s_addr) + 2);

	memset(&st->subnet6, 0, sizeof(st->subnet6));
	memset(&st->host6, 0, sizeof(st->host6));
	memset(&st->guest6, 0, sizeof(st->guest6));
	if (c->pool6.family) {
		/* slot i is the i-th /64 of the pool: bits pool6_len..63 */
		uint64_t hi = 0;

		for (int b = 0; b < 8; b++)
			hi = hi << 8 | c->pool6.bytes[b];
		hi += (uint64_t)i;
		st->subnet6.family = AF_INET6;
		for (int b = 7; b >= 0; b--, hi >>= 8)
			st->subnet6.bytes[b] = hi & 0xff;
		st->host6 = st->guest6 = st->subnet6;
		st->host6.bytes[15] = 1;
		st->guest6.bytes[15] = 2;
	}
	/* locally administered range libvirt uses; the slot keeps it unique on this host */
	if (getrandom(&r, 1, 0) != 1)
		r = 0x1a;
	st->mac[0] = 0x52;
	st->mac[1] = 0x54;
	st->mac[2] = 0x00;
	st->mac[3] = r;
	st->mac[4] = i >> 8;
	st->mac[5] = i & 0xff;
	st->table = c->table_base + i;
	st->rule_priority = c->rule_priority;
	snprintf(st->uplink, sizeof(st->uplink), "%s", c->uplink);
	st->gateway4 = c->gateway4;
	st->gateway6 = c->gateway6;
	return 0;
}
