/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * room_int.h - private to room/: one room while it is being made, run and
 * taken down, shared by room.c (the steps and the wait), cgroups.c (limits,
 * kill, accounting), inside.c (the room's first process), seccomp.c and
 * changes.c (the workspace overlay).
 */
#ifndef LATCH_ROOM_INT_H
#define LATCH_ROOM_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "room/room.h"

/* The v1 hierarchies a hybrid host has the controllers in. */
enum room_v1 { V1_MEMORY, V1_CPU, V1_PIDS, V1_COUNT };

struct room_v1_dir {
	char dir[PATH_MAX];
	bool wanted; /* no v2 controller for it: the v1 hierarchy's, when there is one */
	bool made;
	int tasks_fd; /* its `tasks`, open for the room's first process to write "0" to; -1 when none */
};

/* Messages from the room's processes on the status pipe. */
enum room_msg_kind {
	ROOM_MSG_READY = 1, /* init: namespaces and mounts done, waiting for go */
	ROOM_MSG_SETUP, /* init or the command's process: setup failed at `text`, errno `value` */
	ROOM_MSG_EXEC, /* the command's process: execve failed with errno `value` */
	ROOM_MSG_STATUS, /* init: the command ended with wait status `value` */
};

struct room_msg {
	int kind;
	int value;
	char text[120];
};

/* What the parent sends init once the room is enforced: go, and the seccomp filter. */
struct room_go {
	uint32_t magic;
	uint32_t filter_len; /* sock_filter instructions that follow */
};
#define ROOM_GO_MAGIC 0x1a7c0001u

/*
 * The host uid and gid a room's root (uid or gid 0) runs as, through a user
 * namespace: 2^31 - 2, below the ids that signed code misreads, outside the
 * 16-bit ids of users and nobody (65534, the default room user), and outside
 * systemd's dynamic and container ranges, so that it owns no file of the host.
 */
#define ROOM_ROOT_HOST_ID 2147483646u

/* Does this room run in a user namespace (its uid or gid is 0)? */
static inline bool room_needs_userns(uid_t uid, gid_t gid)
{
	return uid == 0 || gid == 0;
}

/* The host id a room's id is: 0 is ROOM_ROOT_HOST_ID, any other itself. */
static inline unsigned room_host_id(unsigned id)
{
	return id == 0 ? ROOM_ROOT_HOST_ID : id;
}

struct room {
	const struct latch_room_opts *o;
	struct latch_room_result *res;
	char name[LATCH_NAME_MAX + 1];
	uint64_t timeout_ms, memory;
	uint32_t cpu_milli, pids;
	size_t output_limit;
	uid_t uid;
	gid_t gid;
	/* cgroups */
	char cg2_root[PATH_MAX]; /* the cgroup2 mount */
	char cg2[PATH_MAX]; /* the room's own directory */
	int cg2_fd;
	bool cg2_made;
	struct room_v1_dir v1[V1_COUNT];
	bool rlimit_memory, rlimit_cpu, rlimit_pids; /* the last resort, set by the command's process */
	/* enforcement */
	struct latch_cg_set *set;
	struct latch_cg_room *cg;
	/* files: $LATCH_ROOT/run/latch/rooms/NAME */
	char run_dir[PATH_MAX];
	char root_dir[PATH_MAX]; /* mount point of the room's root (inside its namespace only) */
	char upper_mnt[PATH_MAX]; /* tmpfs with upper/ and work/ of the workspace overlay */
	bool upper_mounted;
	char resolv[PATH_MAX]; /* the room's resolv.conf, when it has a resolver */
	int workspace_fd; /* the workspace directory, opened before the room exists */
	/* the room's first process (its init, PID 1 inside) */
	pid_t init_pid;
	int pidfd;
	int out_pipe[2]; /* the command's stdout and stderr, both */
	int status_pipe[2]; /* struct room_msg from inside */
	int go_pipe[2]; /* struct room_go (+ filter) to inside */
	/* a room with network: its IP sockets are made in the host's namespace (sockets.c) */
	bool host_sockets;
	int sup_sock[2]; /* [0] the command's end (the listener goes over it), [1] the supervisor's */
	pid_t sup_pid;
	uint64_t start_ns;
	char setup_error[160]; /* the command's process failed before exec: latch's failure */
	/* LATCH_ROOM_TIMING=1: when each step ended, printed to stderr at the end */
	uint64_t mark_ns[16];
	const char *mark_name[16];
	int n_marks;
};

/* cgroups.c */
int room_cg2_mount(char *buf, size_t len);
/* latch's directory in each hierarchy: $LATCH_CGROUP (a name, for tests) or "latch" */
const char *room_cg_name(void);
/* the v2 directory and the v1 ones, each v1 one with its `tasks` open (before the clone) */
int room_cgroups_make(struct room *r, char *err, size_t errlen);
/* the room's first process moves itself into the v1 directories: 0 or -errno */
int room_v1_join_self(const struct room *r);
/* the parent's copies of the `tasks` files, closed once the room's first process has its own */
void room_v1_close(struct room *r);
int room_limits_apply(struct room *r, char *err, size_t errlen);
void room_kill(struct room *r);
int room_wait_empty(struct room *r, int timeout_ms);
void room_account(struct room *r);
void room_cgroups_remove(struct room *r);
int room_cgroups_sweep(const char *name);
/* the command's process: rlimits where no cgroup controller took a limit */
int room_rlimits_apply(const struct room *r);

/* inside.c: the room's first process; never returns */
__attribute__((noreturn)) void room_inside(struct room *r);
void room_send(int fd, int kind, int value, const char *text);

/* seccomp.c: the filter as BPF instructions (8 bytes each); 0 or -errno.  NOTIFY: IP sockets to the supervisor */
int room_seccomp_build(bool notify, void **prog, uint32_t *n_insns, int *n_rules, char *err, size_t errlen);

/* sockets.c: the supervisor that makes a room's IP sockets in the host's namespace */
int room_sockets_start(struct room *r, char *err, size_t errlen);
void room_sockets_stop(struct room *r);
/* the command's process: the filter's listener to the supervisor over SOCK; 0 or -errno */
int room_sockets_hand_over(int sock, int listener);

/* changes.c */
int room_changes_collect(struct room *r, char *err, size_t errlen);
int room_changes_apply(struct room *r, char *err, size_t errlen);
void room_changes_free(struct latch_room_result *res);

/* small file helpers (cgroups.c) */
int room_write_file(const char *path, const char *text);
int room_read_u64(const char *path, uint64_t *v);

#endif
