/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * room.h - one command in a bounded room (`latch run`).
 *
 * A room is made for one command and removed after it, pass or fail:
 *   - a cgroup v2 directory with latch's cgroup programs attached (no network
 *     unless the policy allows it; loader/cgroup.h), and memory, CPU and pids
 *     limits through cgroup v2 controllers, or the v1 hierarchies of a hybrid
 *     host, or rlimits as a last resort; each limit is read back;
 *   - new mount, PID, UTS, IPC and cgroup namespaces (and network, for a
 *     room that reaches nothing): a read-only root built from /usr, /etc
 *     and /opt, a private /tmp and /dev, no /run, /home,
 *     /root, /var or host sockets; the workspace at /workspace, read-only, or
 *     through an overlay whose upper layer is kept apart and reported as a
 *     list of changes (applied only when asked);
 *   - the command without the caller's environment, as a non-root uid unless
 *     asked, with every capability dropped, no_new_privs and a seccomp filter;
 *   - a wall-clock deadline that kills every process of the room, and a cap
 *     on combined stdout and stderr.
 * docs/rooms.md describes the whole, with what a room does not stop.
 */
#ifndef LATCH_ROOM_H
#define LATCH_ROOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loader/loader.h"

#define LATCH_ROOM_TIMEOUT_MS 5000
#define LATCH_ROOM_OUTPUT_LIMIT (16 * 1024)
#define LATCH_ROOM_MEMORY (512ull << 20)
#define LATCH_ROOM_CPU_MILLI 1000 /* one CPU */
#define LATCH_ROOM_PIDS 128
#define LATCH_ROOM_UID 65534 /* nobody, when the workspace's owner is root */
#define LATCH_ROOM_ENV_MAX 64
#define LATCH_ROOM_HIDE_MAX 64
#define LATCH_ROOM_WORKDIR "/workspace"

struct latch_room_opts {
	char *const *argv; /* the command; argv[0] is looked up in the room's PATH */
	const char *workspace; /* NULL: none (the command starts in /tmp) */
	bool workspace_rw; /* through an overlay, reported as changes */
	bool apply; /* write the changes back to the workspace */
	uint64_t timeout_ms; /* 0: LATCH_ROOM_TIMEOUT_MS */
	size_t output_limit; /* 0: LATCH_ROOM_OUTPUT_LIMIT */
	uint64_t memory; /* bytes; 0: LATCH_ROOM_MEMORY */
	uint32_t cpu_milli; /* thousandths of a CPU; 0: LATCH_ROOM_CPU_MILLI */
	uint32_t pids; /* 0: LATCH_ROOM_PIDS */
	bool uid_set; /* else the workspace's owner, or LATCH_ROOM_UID when that is root */
	uid_t uid;
	gid_t gid;
	/* NAME=VALUE given to the command beside PATH, HOME and LANG (a kit's env) */
	const char *env[LATCH_ROOM_ENV_MAX];
	int n_env;
	/*
	 * Host paths latch knows hold secrets (the kit's secret_files): hidden
	 * wherever the room would see them, beside the host's own (LATCH_ROOM_HIDDEN)
	 */
	const char *hide[LATCH_ROOM_HIDE_MAX];
	int n_hide;
	/* network: the policy (entries with deadlines and origins), or `open` */
	const struct latch_policy_spec *policy;
	int n_policy;
	bool open;
	const char *profile; /* its name, for the record */
	struct latch_sandbox_opts net; /* resolver, host address and ports, DNS rate; name and link fields unused */
	int output_fd; /* the output is copied here as it comes (up to the cap); -1 none */
	const char *name; /* the room's name (latch_room_name_make()), or NULL: one is made */
	/*
	 * Called once the room's programs are attached and verified, before the
	 * command starts (NULL: nothing to wait for): latchd writes the room's
	 * names into its maps then.  0, or -errno with a line in err, and the
	 * room is torn down without running the command.
	 */
	int (*ready)(void *arg, const char *name, char *err, size_t errlen);
	void *ready_arg;
};

/* A fresh room name, room-PID-XXXX, into buf (LATCH_NAME_MAX + 1 bytes). */
void latch_room_name_make(char *buf, size_t len);

/* How a limit was put in place, observed. */
enum latch_room_via {
	LATCH_ROOM_VIA_NONE = 0,
	LATCH_ROOM_VIA_CGROUP2,
	LATCH_ROOM_VIA_CGROUP1,
	LATCH_ROOM_VIA_RLIMIT,
};

const char *latch_room_via_name(enum latch_room_via v);

struct latch_room_limit {
	enum latch_room_via via;
	uint64_t asked;
	uint64_t observed; /* read back from the kernel's file (or getrlimit); memory: bytes */
	char file[96]; /* what was read back, e.g. memory/latch/rooms/NAME/memory.limit_in_bytes */
};

struct latch_room_limits {
	struct latch_room_limit memory; /* bytes */
	struct latch_room_limit cpu; /* thousandths of a CPU (quota / period) */
	struct latch_room_limit pids;
};

enum latch_room_change_kind { LATCH_CHANGE_ADDED, LATCH_CHANGE_MODIFIED, LATCH_CHANGE_DELETED };
enum latch_room_file_kind { LATCH_FILE_REGULAR, LATCH_FILE_DIR, LATCH_FILE_SYMLINK, LATCH_FILE_OTHER };

struct latch_room_change {
	char *path; /* relative to the workspace */
	enum latch_room_change_kind change;
	enum latch_room_file_kind kind; /* what it is now (deleted: what it was) */
	mode_t mode; /* permission bits now (0 when deleted), as the room left them */
	mode_t applied_mode; /* what --apply writes: never set-uid, set-gid or sticky */
	uint64_t size; /* bytes now */
	bool binary; /* not diffed: not text, or over the size a diff is made for */
	char *diff; /* unified diff for text, NULL otherwise */
	bool diff_truncated;
	char *target; /* a symlink's target */
};

struct latch_room_result {
	char name[LATCH_NAME_MAX + 1];
	bool exited; /* else killed by a signal */
	int exit_code; /* when exited */
	int signal; /* when killed */
	int exec_errno; /* the command could not be started: ENOENT, EACCES... (exit 127/126) */
	bool timed_out; /* the deadline passed and latch killed the room */
	bool oom_killed; /* the memory limit killed a process of the room */
	bool pids_max; /* a fork was refused at the pids limit */
	uint64_t duration_ns; /* from the room's first process to the command's end */
	uint64_t peak_memory; /* bytes, 0 when unknown */
	enum latch_room_via peak_memory_via;
	char *output; /* stdout and stderr as they came, up to the cap; NUL-terminated */
	size_t output_len;
	uint64_t output_total; /* bytes the command wrote */
	bool truncated;
	uid_t uid;
	gid_t gid;
	struct latch_room_limits limits;
	struct latch_cg_posture posture; /* read back before the command ran */
	struct latch_counter counters[LATCH_COUNTER_SLOTS]; /* the room's programs, after the run */
	char seccomp[32]; /* "filter (N rules)" as loaded, for the record */
	/* workspace */
	struct latch_room_change *changes;
	int n_changes;
	bool changes_truncated; /* more than LATCH_ROOM_CHANGES_MAX */
	bool applied;
	char apply_error[256];
};

#define LATCH_ROOM_CHANGES_MAX 4096

/*
 * Run one command in a room.  Returns 0 when the command ran (whatever its
 * status: see result), or -errno with one line in err when latch could not
 * make or verify the room; the room is gone either way.  The result is
 * freed with latch_room_result_free().
 */
int latch_room_run(const struct latch_room_opts *o, struct latch_room_result *res, char *err, size_t errlen);
void latch_room_result_free(struct latch_room_result *res);

/*
 * Remove what rooms whose `latch run` died left behind (cgroups, pins,
 * mounts).  Returns how many, or -errno.  latch_room_run() does it first.
 */
int latch_room_sweep(char *err, size_t errlen);

/* What a room on this host would get, observed by making one that runs nothing. */
struct latch_room_probe {
	char cgroup2[256]; /* the cgroup v2 mount */
	struct latch_room_limits limits;
	bool hooks_enforced; /* latch's programs attached and read back */
	bool unix_hooks; /* the abstract unix socket hooks too */
	bool kill_v2; /* cgroup.kill */
	char why[256];
};
int latch_room_probe(struct latch_room_probe *p, char *err, size_t errlen);

#endif
