/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * agent_client.h - the host side of the guest agent: run a command in a
 * guest and relay its stdout, stderr and exit status.
 *
 * The guest end is vm/guest/agent.c; the channel is the Unix socket that libvirt
 * binds for
 *   <channel type='unix'>
 *     <source mode='bind' path='SOCK'/>
 *     <target type='virtio' name='org.latch.agent'/>
 *   </channel>
 * The wire format is in vm/guest/agent_proto.h.  Everything the guest sends is
 * treated as hostile: lengths are checked, output is capped here as well as
 * in the guest, and a deadline bounds every wait that was given one.
 *
 * All functions return 0 or -errno.
 */
#ifndef LATCH_VM_AGENT_CLIENT_H
#define LATCH_VM_AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/guest/agent_proto.h"
#include "vm/vm.h"

struct latch_agent; /* one connection to one guest's agent */

/* Extra time the host waits past a command's own timeout before giving up. */
#define LATCH_AGENT_GRACE_MS 5000

/* latch_agent_result.flags, beside LAGENT_EXIT_*: the host dropped output. */
#define LATCH_AGENT_HOST_TRUNCATED (1u << 16)

/* LATCH_AGENT_IO_* (vm/vm.h, for the modules that see only it) */
struct latch_agent_exec_opts {
	uint32_t timeout_ms; /* 0: none; the guest kills the command at this */
	/* stdout+stderr bytes relayed; 0: LAGENT_OUTPUT_CAP, or no cap when io != 0 (streamed, not held) */
	uint32_t output_limit;
	const char *const *env; /* "NAME=VALUE"s, NULL-terminated, beside the agent's own; NULL: none */
	unsigned int io; /* LATCH_AGENT_IO_* ; 0: stdin is /dev/null as today */
	int stdin_fd; /* read with LATCH_AGENT_IO_STDIN; its terminal's size with LATCH_AGENT_IO_TTY */
	const char *cwd; /* NULL: the agent's default; else the command's working directory in the guest */
	/* stdout's / stderr's control characters written visibly (^[ for ESC): they go to a terminal without a pty */
	bool escape_out, escape_err;
};

struct latch_agent_result {
	int how; /* LAGENT_EXITED or LAGENT_SIGNALED */
	int code; /* exit status or signal number */
	unsigned int flags; /* LAGENT_EXIT_* | LATCH_AGENT_HOST_TRUNCATED */
	uint32_t duration_ms; /* as the guest measured it */
	uint64_t out_bytes; /* produced in the guest, per the guest */
	uint64_t relayed; /* written to out_fd/err_fd by us */
	char message[128]; /* why the agent refused; guest text, sanitise before printing */
};

/* How long a client waits for another one to finish with the channel. */
#define LATCH_AGENT_LOCK_WAIT_MS 120000

/*
 * Connect to the channel socket, after taking the channel's lock (SOCK.lock:
 * one client at a time; -EBUSY after LATCH_AGENT_LOCK_WAIT_MS).  *out is
 * freed with latch_agent_close(), which releases the lock.
 */
int latch_agent_connect(const char *sock_path, struct latch_agent **out);
/* Closing while a command runs cancels it: the guest kills its process group. */
void latch_agent_close(struct latch_agent *a);

/* How long latch_agent_wait() pings on one connection before it makes a new one. */
#define LATCH_AGENT_SESSION_MS 5000

/* What latch_agent_wait() saw, for the message when the guest never answered. */
struct latch_agent_wait_stats {
	int connects; /* connections made to the channel socket */
	int64_t first_connect_ms; /* after the wait began; -1: none was made */
	uint64_t bytes_in; /* bytes the channel sent back over all of them */
	int last_error; /* the last connect's or ping's -errno */
	bool lock_busy; /* another latch client held the channel's lock */
};

/*
 * Wait up to timeout_ms for a booting guest's agent to answer a ping.  A
 * connection that stays silent for LATCH_AGENT_SESSION_MS is closed and
 * made again: the guest's agent sees the host end close and open, and a
 * connection that the channel never serves is not waited on to the end.
 * alive(arg) (may be NULL) is asked between attempts; a non-zero return
 * (the domain stopped) ends the wait with it.  release as in
 * latch_agent_ping().  0, -ETIMEDOUT, or alive()'s return.
 */
int latch_agent_wait(const char *sock_path, int timeout_ms, int (*alive)(void *arg), void *arg, char *release,
		     size_t len, struct latch_agent_wait_stats *st);

/*
 * Wait up to timeout_ms (-1: forever) for the agent to answer, e.g. while the
 * guest boots.  release (may be NULL) gets the guest's `uname -r`.
 */
int latch_agent_ping(struct latch_agent *a, int timeout_ms, char *release, size_t len);

/*
 * Run argv (NULL-terminated) in the guest, with stdin from /dev/null, or
 * as opts->io says.  stdout and stderr chunks are written to out_fd and
 * err_fd as they arrive (-1 discards).  Returns 0 when the command ran (its
 * status is in *res), -ETIMEDOUT when the guest did not finish within
 * timeout_ms plus LATCH_AGENT_GRACE_MS, -EINTR when a signal interrupted
 * the wait (close the connection to cancel the command), -EPROTO on a
 * malformed answer, -E2BIG when argv and env do not fit in one frame,
 * -EPROTONOSUPPORT for an env, io or cwd to an agent that did not announce
 * the capability (LAGENT_CAP_*: ping first, they come with the PONG), or
 * the agent's errno when it refused.
 * A write error on out_fd/err_fd is returned as is; the caller ignores
 * SIGPIPE if those may be pipes.  With LATCH_AGENT_IO_TTY or _SIGNALS the
 * signals read here are blocked during the call and restored after it.
 */
int latch_agent_exec(struct latch_agent *a, const char *const argv[], const struct latch_agent_exec_opts *opts,
		     int out_fd, int err_fd, struct latch_agent_result *res);

/* The status a shell would report: the exit code, or 128 + signal. */
int latch_agent_status(const struct latch_agent_result *res);

/* The agent's channel socket of sandbox NAME. */
int latch_vm_agent_path(const char *name, char *buf, size_t len);
/*
 * Connect to NAME's agent and wait up to ping_ms for its answer; *out is
 * for latch_agent_close().  -errno with "the agent of NAME does not answer"
 * in err.
 */
int latch_agent_open_sandbox(const char *name, int ping_ms, struct latch_agent **out, char *err, size_t errlen);

#endif
