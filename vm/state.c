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

__attribute__((format(printf, 3, 4))) static int sfail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int latch_state_lock(char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX];
	int fd, ret;

	if (latch_path(dir, sizeof(dir), "run/latch") ||
	    latch_path(path, sizeof(path), "run/latch/lifecycle.lock"))
		return sfail(err, errlen, "LATCH_ROOT is too long");
	ret = latch_mkdirs(dir, 0755); /* 0755: libvirt's qemu user walks some of them */
	if (ret)
		return sfail(err, errlen, "cannot create %s: %s", dir, strerror(-ret)), ret;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		sfail(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return ret;
	}
	if (flock(fd, LOCK_EX)) {
		ret = -errno;
		close(fd);
		sfail(err, errlen, "cannot lock %s: %s", path, strerror(-ret));
		return ret;
	}
	return fd;
}

int latch_state_dir(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, "var/lib/latch/sandboxes/%s", name);
}

static int state_file(const char *name, char *buf, size_t len)
{
	/* NAME/state/ is the guest's state backup (guest_state.h): this record is NAME/sandbox */
	return latch_path(buf, len, "var/lib/latch/sandboxes/%s/sandbox", name);
}

bool latch_state_exists(const char *name)
{
	char path[PATH_MAX];

	return !state_file(name, path, sizeof(path)) && access(path, F_OK) == 0;
}

static void put_addr(FILE *f, const char *key, const struct latch_addr *a)
{
	char buf[INET6_ADDRSTRLEN];

	if (a->family)
		fprintf(f, "%s = %s\n", key, inet_ntop(a->family, a->bytes, buf, sizeof(buf)));
}

int latch_state_save(const struct latch_vm_state *st, char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 8];
	FILE *f;
	int fd, ret;

	if (latch_state_dir(st->name, dir, sizeof(dir)) || state_file(st->name, path, sizeof(path)))
		return sfail(err, errlen, "LATCH_ROOT is too long");
	ret = latch_mkdirs(dir, 0700);
	if (ret)
		return sfail(err, errlen, "cannot create %s: %s", dir, strerror(-ret)), ret;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		ret = -errno;
		if (fd >= 0)
			close(fd);
		return sfail(err, errlen, "cannot write %s: %s", tmp, strerror(-ret)), ret;
	}
	fprintf(f, "# latch sandbox state; written by latch, do not edit\n");
	fprintf(f, "name = %s\nindex = %u\ntap = %s\n", st->name, st->index, st->tap);
	fprintf(f, "mac = %02x:%02x:%02x:%02x:%02x:%02x\n", st->mac[0], st->mac[1], st->mac[2], st->mac[3],
		st->mac[4], st->mac[5]);
	put_addr(f, "subnet4", &st->subnet4);
	put_addr(f, "host4", &st->host4);
	put_addr(f, "guest4", &st->guest4);
	put_addr(f, "subnet6", &st->subnet6);
	put_addr(f, "host6", &st->host6);
	put_addr(f, "guest6", &st->guest6);
	fprintf(f, "table = %u\nrule_priority = %u\n", st->table, st->rule_priority);
	if (*st->uplink)
		fprintf(f, "uplink = %s\n", st->uplink);
	put_addr(f, "gateway4", &st->gateway4);
	put_addr(f, "gateway6", &st->gateway6);
	fprintf(f, "image = %s\nimage_dir = %s\nmemory_mib = %u\ncpus = %u\n", st->image, st->image_dir,
		st->memory_mib, st->cpus);
	if (*st->workspace)
		fprintf(f, "workspace = %s\n", st->workspace);
	if (fflush(f) || fsync(fileno(f))) {
		ret = -errno;
		fclose(f);
		unlink(tmp);
		return sfail(err, errlen, "cannot write %s: %s", tmp, strerror(-ret)), ret;
	}
	fclose(f);
	if (rename(tmp, path)) {
		ret = -errno;
		unlink(tmp);
		return sfail(err, errlen, "cannot rename %s: %s", tmp, strerror(-ret)), ret;
	}
	return 0;
}

static int get_addr(const char *v, int family, struct latch_addr *a)
{
	char e[LATCH_ERR_MAX];

	return latch_parse_addr(v, a, e, sizeof(e)) || a->family != family ? -EINVAL : 0;
}

static int copy_str(char *dst, size_t len, const char *v)
{
	if (strlen(v) >= len)
		return -EINVAL;
	strcpy(dst, v);
	return 0;
}

int latch_state_load(const char *name, struct latch_vm_state *st, char *err, size_t errlen)
{
	char path[PATH_MAX], line[PATH_MAX + 64], e[LATCH_ERR_MAX];
	int lineno = 0, ret = 0;
	FILE *f;

	memset(st, 0, sizeof(*st));
	if (state_file(name, path, sizeof(path)))
		return sfail(err, errlen, "LATCH_ROOT is too long");
	f = fopen(path, "re");
	if (!f) {
		ret = -errno;
		if (ret != -ENOENT)
			sfail(err, errlen, "%s: %s", path, strerror(errno));
		else
			sfail(err, errlen, "no VM sandbox '%s' (see `latch ls`)", name);
		return ret;
	}
	while (fgets(line, sizeof(line), f)) {
		char *eq, *k, *v, *nl;
		uint32_t u;
		int r = 0;

		lineno++;
		if ((nl = strchr(line, '\n')))
			*nl = '\0';
		if (!*line || *line == '#')
			continue;
		eq = strstr(line, " = ");
		if (!eq) {
			ret = sfail(err, errlen, "%s:%d: not 'key = value'", path, lineno);
			break;
		}
		*eq = '\0';
		k = line;
		v = eq + 3;
		if (!strcmp(k, "name"))
			r = copy_str(st->name, sizeof(st->name), v);
		else if (!strcmp(k, "index"))
			r = latch_parse_uint(v, 0, 65535, &st->index);
		else if (!strcmp(k, "tap"))
			r = copy_str(st->tap, sizeof(st->tap), v);
		else if (!strcmp(k, "mac"))
			r = latch_parse_mac(v, st->mac, e, sizeof(e));
		else if (!strcmp(k, "subnet4"))
			r = get_addr(v, AF_INET, &st->subnet4);
		else if (!strcmp(k, "host4"))
			r = get_addr(v, AF_INET, &st->host4);
		else if (!strcmp(k, "guest4"))
			r = get_addr(v, AF_INET, &st->guest4);
		else if (!strcmp(k, "subnet6"))
			r = get_addr(v, AF_INET6, &st->subnet6);
		else if (!strcmp(k, "host6"))
			r = get_addr(v, AF_INET6, &st->host6);
		else if (!strcmp(k, "guest6"))
			r = get_addr(v, AF_INET6, &st->guest6);
		else if (!strcmp(k, "table"))
			r = latch_parse_uint(v, 1, UINT32_MAX, &st->table);
		else if (!strcmp(k, "rule_priority"))
			r = latch_parse_uint(v, 1, 32765, &st->rule_priority);
		else if (!strcmp(k, "uplink"))
			r = copy_str(st->uplink, sizeof(st->uplink), v);
		else if (!strcmp(k, "gateway4"))
			r = get_addr(v, AF_INET, &st->gateway4);
		else if (!strcmp(k, "gateway6"))
			r = get_addr(v, AF_INET6, &st->gateway6);
		else if (!strcmp(k, "image"))
			r = copy_str(st->image, sizeof(st->image), v);
		else if (!strcmp(k, "image_dir"))
			r = copy_str(st->image_dir, sizeof(st->image_dir), v);
		else if (!strcmp(k, "memory_mib"))
			r = latch_parse_uint(v, 16, 1 << 20, &st->memory_mib);
		else if (!strcmp(k, "cpus"))
			r = latch_parse_uint(v, 1, 256, &u) ? -EINVAL : (st->cpus = u, 0);
		else if (!strcmp(k, "workspace"))
			r = copy_str(st->workspace, sizeof(st->workspace), v);
		/* unknown keys are from a newer latch: keep going */
		if (r) {
			ret = sfail(err, errlen, "%s:%d: bad value for %s", path, lineno, k);
			break;
		}
	}
	fclose(f);
	if (!ret && (strcmp(st->name, name) || !*st->tap || !st->guest4.family || !st->host4.family ||
		     !st->subnet4.family || !st->table))
		ret = sfail(err, errlen, "%s: incomplete state (name, tap, addresses or table missing)", path);
	return ret;
}

static int remove_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path) && errno != ENOENT ? -1 : 0;
}

int latch_state_remove(const char *name)
{
	char dir[PATH_MAX];
	struct stat sb;

	if (latch_state_dir(name, dir, sizeof(dir)))
		return -ENAMETOOLONG;
	if (lstat(dir, &sb))
		return errno == ENOENT ? 0 : -errno;
	/* the sandbox record, and the guest's state backup beside it; symlinks are not followed */
	if (nftw(dir, remove_cb, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
		return -errno;
	return 0;
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int latch_state_list(int (*fn)(const char *name, void *arg), void *arg)
{
	char dir[PATH_MAX], e[LATCH_ERR_MAX];
	char **names = NULL;
	struct dirent *de;
	int n = 0, cap = 0, ret = 0;
	DIR *d;

	if (latch_path(dir, sizeof(dir), "var/lib/latch/sandboxes"))
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (latch_parse_name(de->d_name, e, sizeof(e)) || !latch_state_exists(de->d_name))
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
	ret = latch_state_list(mark_used, &u);
	if (ret < 0) {
		free(u.used);
		return sfail(err, errlen, "cannot list sandboxes: %s", strerror(-ret)), ret;
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
