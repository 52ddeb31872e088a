// SPDX-License-Identifier: GPL-2.0-only
/*
 * cgroups.c - a room's cgroups: the v2 directory its programs attach to, its
 * limits, the kill at its deadline, what it used.
 *
 * The v2 directory always exists: latch's cgroup programs attach there and
 * cgroup.kill reaches every process of the room through it.  Memory, CPU and
 * pids limits go to v2 controllers where the cgroup2 root offers them; on a
 * hybrid host (controllers on v1 hierarchies) to a latch-owned directory in
 * each v1 hierarchy, which the room's first process joins before anything
 * else runs; with neither, to rlimits of the command.  Every limit is read
 * back from the kernel's file, never reported as asked.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "room/room_int.h"

static const char *const v1_names[V1_COUNT] = { "memory", "cpu", "pids" };

int room_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;
	size_t n = strlen(text);

	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n)
		rc = -errno;
	close(fd);
	return rc;
}

static int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

int room_read_u64(const char *path, uint64_t *v)
{
	char buf[64];
	int rc = read_text(path, buf, sizeof(buf));

	if (rc)
		return rc;
	if (!strncmp(buf, "max", 3)) {
		*v = UINT64_MAX;
		return 0;
	}
	return sscanf(buf, "%" SCNu64, v) == 1 ? 0 : -EINVAL;
}

/* The value of KEY in a flat keyed file ("oom_kill 3"), 0 when absent. */
static uint64_t keyed(const char *path, const char *key)
{
	char buf[2048], *p;
	uint64_t v = 0;
	size_t kl = strlen(key);

	if (read_text(path, buf, sizeof(buf)))
		return 0;
	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return sscanf(p + kl + 1, "%" SCNu64, &v) == 1 ? v : 0;
	return 0;
}

static int path_of(char *buf, size_t len, const char *dir, const char *file)
{
	int n = snprintf(buf, len, "%s/%s", dir, file);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The cgroup mounts of /proc/mounts, read once per process (the kernel prints every mount to make it). */
struct cg_mount {
	char dir[PATH_MAX];
	char type[8];
	char opts[256];
};

static struct cg_mount cg_mounts[24];
static int n_cg_mounts = -1;

static void mounts_load(void)
{
	char dev[256], dir[PATH_MAX], t[64], opts[512];
	FILE *f = fopen("/proc/mounts", "re");

	n_cg_mounts = 0;
	while (f && n_cg_mounts < 24 && fscanf(f, "%255s %4095s %63s %511s %*[^\n]", dev, dir, t, opts) == 4) {
		if (strcmp(t, "cgroup") && strcmp(t, "cgroup2"))
			continue;
		snprintf(cg_mounts[n_cg_mounts].dir, sizeof(cg_mounts[0].dir), "%s", dir);
		snprintf(cg_mounts[n_cg_mounts].type, sizeof(cg_mounts[0].type), "%.7s", t); /* checked above */
		snprintf(cg_mounts[n_cg_mounts].opts, sizeof(cg_mounts[0].opts), "%.*s",
			 (int)sizeof(cg_mounts[0].opts) - 1, opts);
		n_cg_mounts++;
	}
	if (f)
		fclose(f);
}

/* The first mount of TYPE whose options name OPT (NULL: any). */
static int find_mount(const char *type, const char *opt, char *buf, size_t len)
{
	if (n_cg_mounts < 0)
		mounts_load();
	for (int i = 0; i < n_cg_mounts; i++) {
		char opts[256];
		bool has = !opt;

		if (strcmp(cg_mounts[i].type, type) || strlen(cg_mounts[i].dir) >= len)
			continue;
		snprintf(opts, sizeof(opts), "%s", cg_mounts[i].opts);
		for (char *tok = strtok(opts, ","); tok && !has; tok = strtok(NULL, ","))
			has = !strcmp(tok, opt);
		if (has) {
			snprintf(buf, len, "%s", cg_mounts[i].dir);
			return 0;
		}
	}
	return -ENOENT;
}

int room_cg2_mount(char *buf, size_t len)
{
	return find_mount("cgroup2", NULL, buf, len);
}

const char *room_cg_name(void)
{
	const char *n = getenv("LATCH_CGROUP");

	/* one directory name under each hierarchy's root, as LATCH_BPFFS moves the pins */
	if (!n || !*n || latch_parse_name(n, NULL, 0))
		return "latch";
	return n;
}

static bool word_in(const char *path, const char *word)
{
	char buf[512];
	size_t wl = strlen(word);

	if (read_text(path, buf, sizeof(buf)))
		return false;
	for (char *p = buf; (p = strstr(p, word)); p += wl)
		if ((p == buf || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\n' || !p[wl]))
			return true;
	return false;
}

/* A v2 controller the room can use: offered at the root, enabled down to latch/rooms. */
static bool v2_enable(const struct room *r, const char *ctrl)
{
	char path[PATH_MAX + 96], plus[32], top[LATCH_NAME_MAX + 2], rooms[LATCH_NAME_MAX + 8];
	const char *levels[] = { "", top, rooms };

	snprintf(top, sizeof(top), "/%s", room_cg_name());
	snprintf(rooms, sizeof(rooms), "/%s/rooms", room_cg_name());

	snprintf(path, sizeof(path), "%s/cgroup.controllers", r->cg2_root);
	if (!word_in(path, ctrl))
		return false;
	snprintf(plus, sizeof(plus), "+%s", ctrl);
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		snprintf(path, sizeof(path), "%s%s/cgroup.subtree_control", r->cg2_root, levels[i]);
		if (!word_in(path, ctrl) && room_write_file(path, plus))
			return false;
	}
	return true;
}

static int mkdirs(const char *dir)
{
	char tmp[PATH_MAX];

	snprintf(tmp, sizeof(tmp), "%s", dir);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(tmp, 0755) && errno != EEXIST ? -errno : 0;
}

static struct latch_room_limit *limit_of(struct room *r, int i)
{
	return i == V1_MEMORY ? &r->res->limits.memory : i == V1_CPU ? &r->res->limits.cpu : &r->res->limits.pids;
}

/*
 * The v1 directories, made before the clone, each with its `tasks` file
 * open for the room's first process: it moves itself in, writing "0"
 * (room_v1_join_self), before it builds anything, so nothing of the command
 * runs outside them.  Not the parent writing the pid to cgroup.procs: that
 * takes the kernel's threadgroup lock for writing, which waits for an RCU
 * grace period (5-20 ms, the whole start of a room on a hybrid host), while
 * a single thread moving itself skips that lock (the kernel's "cgroup:
 * Optimize single thread migration"; a kernel without it costs as before).
 * A hierarchy that can't be used is skipped: its limit falls back to an
 * rlimit.
 */
static void v1_make(struct room *r)
{
	char parent[PATH_MAX], path[PATH_MAX + 32];

	for (int i = 0; i < V1_COUNT; i++) {
		char mnt[PATH_MAX];

		if (!r->v1[i].wanted || find_mount("cgroup", v1_names[i], mnt, sizeof(mnt)))
			continue;
		if (snprintf(parent, sizeof(parent), "%s/%s/rooms", mnt, room_cg_name()) >= (int)sizeof(parent) ||
		    mkdirs(parent) || path_of(r->v1[i].dir, sizeof(r->v1[i].dir), parent, r->name) ||
		    mkdir(r->v1[i].dir, 0755))
			continue;
		r->v1[i].made = true;
		snprintf(path, sizeof(path), "%s/tasks", r->v1[i].dir);
		r->v1[i].tasks_fd = open(path, O_WRONLY | O_CLOEXEC);
		if (r->v1[i].tasks_fd >= 0)
			limit_of(r, i)->via = LATCH_ROOM_VIA_CGROUP1;
	}
}

int room_cgroups_make(struct room *r, char *err, size_t errlen)
{
	char parent[PATH_MAX];
	bool v2[3];
	int e;

	if (room_cg2_mount(r->cg2_root, sizeof(r->cg2_root)))
		return latch_errf(err, errlen, -ENOENT,
				  "no cgroup2 mount in /proc/mounts: a room needs one for its programs "
				  "(mount -t cgroup2 none /sys/fs/cgroup/unified)");
	if (snprintf(parent, sizeof(parent), "%s/%s/rooms", r->cg2_root, room_cg_name()) >= (int)sizeof(parent))
		return latch_errf(err, errlen, -ENAMETOOLONG, "the cgroup2 mount's path is too long");
	e = mkdirs(parent);
	if (e || path_of(r->cg2, sizeof(r->cg2), parent, r->name))
		return latch_errf(err, errlen, e ? e : -ENAMETOOLONG, "cannot create %s: %s", parent, strerror(-e));
	/* controllers first: a directory made before they are enabled would lack their files */
	v2[V1_MEMORY] = v2_enable(r, "memory");
	v2[V1_CPU] = v2_enable(r, "cpu");
	v2[V1_PIDS] = v2_enable(r, "pids");
	if (mkdir(r->cg2, 0755))
		return latch_errf(err, errlen, -errno, "cannot create the room's cgroup %s: %s", r->cg2,
				  strerror(errno));
	r->cg2_made = true;
	r->cg2_fd = open(r->cg2, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->cg2_fd < 0)
		return latch_errf(err, errlen, -errno, "cannot open %s: %s", r->cg2, strerror(errno));
	r->res->limits.memory.via = v2[V1_MEMORY] ? LATCH_ROOM_VIA_CGROUP2 : LATCH_ROOM_VIA_NONE;
	r->res->limits.cpu.via = v2[V1_CPU] ? LATCH_ROOM_VIA_CGROUP2 : LATCH_ROOM_VIA_NONE;
	r->res->limits.pids.via = v2[V1_PIDS] ? LATCH_ROOM_VIA_CGROUP2 : LATCH_ROOM_VIA_NONE;
	for (int i = 0; i < V1_COUNT; i++)
		r->v1[i].wanted = !v2[i];
	v1_make(r);
	return 0;
}

int room_v1_join_self(const struct room *r)
{
	for (int i = 0; i < V1_COUNT; i++)
		if (r->v1[i].tasks_fd >= 0 && write(r->v1[i].tasks_fd, "0", 1) != 1)
			return -errno;
	return 0;
}

void room_v1_close(struct room *r)
{
	for (int i = 0; i < V1_COUNT; i++) {
		if (r->v1[i].tasks_fd >= 0)
			close(r->v1[i].tasks_fd);
		r->v1[i].tasks_fd = -1;
	}
}

/* Write a limit and read it back into l; the file's name relative to the cgroup mount for the record. */
static int limit_set(struct room *r, struct latch_room_limit *l, const char *dir, const char *file, const char *text,
		     char *err, size_t errlen)
{
	char path[PATH_MAX + 64];
	int e;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	e = room_write_file(path, text);
	if (e)
		return latch_errf(err, errlen, e, "cannot set %s to %s: %s", path, text, strerror(-e));
	snprintf(l->file, sizeof(l->file), "%.*s", (int)sizeof(l->file) - 1,
		 path + (strncmp(path, "/sys/fs/cgroup/", 15) ? 0 : 15));
	return room_read_u64(path, &l->observed) ? latch_errf(err, errlen, -EIO, "cannot read %s back", path) : 0;
}

int room_limits_apply(struct room *r, char *err, size_t errlen)
{
	struct latch_room_limits *L = &r->res->limits;
	char text[64], path[PATH_MAX + 64];
	uint64_t period = 100000, quota = (uint64_t)r->cpu_milli * period / 1000;
	int e = 0;

	L->memory.asked = r->memory;
	L->cpu.asked = r->cpu_milli;
	L->pids.asked = r->pids;
	snprintf(text, sizeof(text), "%" PRIu64, r->memory);
	if (L->memory.via == LATCH_ROOM_VIA_CGROUP2) {
		e = limit_set(r, &L->memory, r->cg2, "memory.max", text, err, errlen);
		snprintf(path, sizeof(path), "%s/memory.swap.max", r->cg2);
		if (!e && access(path, F_OK) == 0 && room_write_file(path, "0"))
			e = latch_errf(err, errlen, -EIO, "cannot set %s to 0", path);
	} else if (L->memory.via == LATCH_ROOM_VIA_CGROUP1) {
		e = limit_set(r, &L->memory, r->v1[V1_MEMORY].dir, "memory.limit_in_bytes", text, err, errlen);
		/* with swap accounting, swap counts too: the limit is memory and swap together */
		snprintf(path, sizeof(path), "%s/memory.memsw.limit_in_bytes", r->v1[V1_MEMORY].dir);
		if (!e && access(path, F_OK) == 0 && room_write_file(path, text))
			e = latch_errf(err, errlen, -EIO, "cannot set %s", path);
	}
	if (e)
		return e;
	if (L->cpu.via == LATCH_ROOM_VIA_CGROUP2) {
		snprintf(text, sizeof(text), "%" PRIu64 " %" PRIu64, quota, period);
		e = limit_set(r, &L->cpu, r->cg2, "cpu.max", text, err, errlen);
		L->cpu.observed = L->cpu.observed == UINT64_MAX ? 0 : L->cpu.observed * 1000 / period;
	} else if (L->cpu.via == LATCH_ROOM_VIA_CGROUP1) {
		uint64_t p = 0;

		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", r->v1[V1_CPU].dir);
		snprintf(text, sizeof(text), "%" PRIu64, quota);
		if (room_write_file(path, "100000") || room_read_u64(path, &p) || !p)
			return latch_errf(err, errlen, -EIO, "cannot set %s", path);
		e = limit_set(r, &L->cpu, r->v1[V1_CPU].dir, "cpu.cfs_quota_us", text, err, errlen);
		L->cpu.observed = L->cpu.observed * 1000 / p;
	}
	if (e)
		return e;
	snprintf(text, sizeof(text), "%u", r->pids);
	if (L->pids.via == LATCH_ROOM_VIA_CGROUP2)
		e = limit_set(r, &L->pids, r->cg2, "pids.max", text, err, errlen);
	else if (L->pids.via == LATCH_ROOM_VIA_CGROUP1)
		e = limit_set(r, &L->pids, r->v1[V1_PIDS].dir, "pids.max", text, err, errlen);
	if (e)
		return e;
	/* what no controller took, the command's own rlimits take (per process, or per uid for pids) */
	r->rlimit_memory = L->memory.via == LATCH_ROOM_VIA_NONE;
	r->rlimit_cpu = L->cpu.via == LATCH_ROOM_VIA_NONE;
	r->rlimit_pids = L->pids.via == LATCH_ROOM_VIA_NONE;
	if (r->rlimit_memory)
		L->memory = (struct latch_room_limit){
			.via = LATCH_ROOM_VIA_RLIMIT, .asked = r->memory, .observed = r->memory, .file = "RLIMIT_AS"
		};
	if (r->rlimit_cpu) /* a rate cannot be an rlimit: CPU seconds up to the deadline at that rate */
		L->cpu = (struct latch_room_limit){ .via = LATCH_ROOM_VIA_RLIMIT,
						    .asked = r->cpu_milli,
						    .observed = r->cpu_milli,
						    .file = "RLIMIT_CPU" };
	if (r->rlimit_pids)
		L->pids = (struct latch_room_limit){
			.via = LATCH_ROOM_VIA_RLIMIT, .asked = r->pids, .observed = r->pids, .file = "RLIMIT_NPROC"
		};
	return 0;
}

int room_rlimits_apply(const struct room *r)
{
	struct rlimit l;

	if (r->rlimit_memory) {
		l.rlim_cur = l.rlim_max = r->memory;
		if (setrlimit(RLIMIT_AS, &l))
			return -errno;
	}
	if (r->rlimit_cpu) {
		l.rlim_cur = l.rlim_max = (r->timeout_ms * r->cpu_milli / 1000 + 999) / 1000 + 1;
		if (setrlimit(RLIMIT_CPU, &l))
			return -errno;
	}
	if (r->rlimit_pids) {
		l.rlim_cur = l.rlim_max = r->pids;
		if (setrlimit(RLIMIT_NPROC, &l))
			return -errno;
	}
	return 0;
}

/* SIGKILL to every process in a cgroup v2 directory: cgroup.kill, or freeze, kill each, thaw. */
static void kill_dir(const char *dir)
{
	char path[PATH_MAX + 32], buf[4096];
	bool frozen;

	snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
	if (!room_write_file(path, "1"))
		return;
	/* before Linux 5.14: frozen, nothing can fork while the list is read and killed */
	snprintf(path, sizeof(path), "%s/cgroup.freeze", dir);
	frozen = !room_write_file(path, "1");
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	if (!read_text(path, buf, sizeof(buf)))
		for (char *p = buf; *p;) {
			pid_t pid = strtol(p, &p, 10);

			if (pid > 0)
				kill(pid, SIGKILL);
			while (*p == '\n')
				p++;
		}
	if (frozen) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", dir);
		room_write_file(path, "0");
	}
}

void room_kill(struct room *r)
{
	if (r->cg2_made)
		kill_dir(r->cg2);
}

/* Wait until the room's cgroup has no process (cgroup.events: populated 0). */
int room_wait_empty(struct room *r, int timeout_ms)
{
	char path[PATH_MAX + 16];
	uint64_t end = latch_now_ns() + (uint64_t)timeout_ms * 1000000;

	path_of(path, sizeof(path), r->cg2, "cgroup.events");
	for (;;) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		char buf[256] = "";
		struct pollfd p = { .fd = fd, .events = POLLPRI };
		ssize_t n;

		if (fd < 0)
			return -errno;
		n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = 0;
		if (strstr(buf, "populated 0")) {
			close(fd);
			return 0;
		}
		if (latch_now_ns() >= end) {
			close(fd);
			return -ETIMEDOUT;
		}
		/* the file is modified (POLLPRI) when populated changes */
		poll(&p, 1, 20);
		close(fd);
	}
}

void room_account(struct room *r)
{
	struct latch_room_result *res = r->res;
	char path[PATH_MAX + 32];
	uint64_t v;

	if (res->limits.memory.via == LATCH_ROOM_VIA_CGROUP2) {
		snprintf(path, sizeof(path), "%s/memory.peak", r->cg2);
		if (!room_read_u64(path, &v)) {
			res->peak_memory = v;
			res->peak_memory_via = LATCH_ROOM_VIA_CGROUP2;
		}
		snprintf(path, sizeof(path), "%s/memory.events", r->cg2);
		res->oom_killed = keyed(path, "oom_kill") > 0;
	} else if (res->limits.memory.via == LATCH_ROOM_VIA_CGROUP1) {
		snprintf(path, sizeof(path), "%s/memory.max_usage_in_bytes", r->v1[V1_MEMORY].dir);
		if (!room_read_u64(path, &v)) {
			res->peak_memory = v;
			res->peak_memory_via = LATCH_ROOM_VIA_CGROUP1;
		}
		snprintf(path, sizeof(path), "%s/memory.oom_control", r->v1[V1_MEMORY].dir);
		res->oom_killed = keyed(path, "oom_kill") > 0;
	}
	if (res->limits.pids.via == LATCH_ROOM_VIA_CGROUP2)
		snprintf(path, sizeof(path), "%s/pids.events", r->cg2);
	else if (res->limits.pids.via == LATCH_ROOM_VIA_CGROUP1)
		snprintf(path, sizeof(path), "%s/pids.events", r->v1[V1_PIDS].dir);
	else
		return;
	res->pids_max = keyed(path, "max") > 0;
}

/* rmdir a cgroup directory, killing what is left in it first. */
static void remove_dir(const char *dir, bool v2)
{
	for (int i = 0; i < 50; i++) {
		if (!rmdir(dir) || errno == ENOENT)
			return;
		if (errno != EBUSY)
			return;
		if (v2 && i == 0)
			kill_dir(dir);
		usleep(2000);
	}
}

void room_cgroups_remove(struct room *r)
{
	room_v1_close(r);
	for (int i = 0; i < V1_COUNT; i++) {
		if (r->v1[i].made)
			remove_dir(r->v1[i].dir, false);
		r->v1[i].made = false;
	}
	if (r->cg2_fd >= 0)
		close(r->cg2_fd);
	r->cg2_fd = -1;
	if (r->cg2_made)
		remove_dir(r->cg2, true); /* the programs attached to it go with it */
	r->cg2_made = false;
}

/* A room's cgroups by name, after its `latch run` died: processes killed, directories removed. */
int room_cgroups_sweep(const char *name)
{
	char root[PATH_MAX], dir[PATH_MAX * 2];
	int found = 0;

	if (!room_cg2_mount(root, sizeof(root))) {
		snprintf(dir, sizeof(dir), "%s/%s/rooms/%s", root, room_cg_name(), name);
		if (access(dir, F_OK) == 0) {
			found = 1;
			kill_dir(dir);
			remove_dir(dir, true);
		}
	}
	for (int i = 0; i < V1_COUNT; i++) {
		if (find_mount("cgroup", v1_names[i], root, sizeof(root)))
			continue;
		snprintf(dir, sizeof(dir), "%s/%s/rooms/%s", root, room_cg_name(), name);
		if (access(dir, F_OK) == 0) {
			found = 1;
			remove_dir(dir, false);
		}
	}
	return found;
}
