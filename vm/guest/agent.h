/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * agent.h - what the guest agent's two files share: agent.c serves
 * requests and runs commands, agent_input.c feeds an interactive command
 * (stdin, its pty, window sizes, signals).  Not part of the wire format
 * (agent_proto.h) and not seen by the host.
 */
#ifndef LATCH_VM_GUEST_AGENT_H
#define LATCH_VM_GUEST_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vm/guest/agent_proto.h"

#define HDR_LEN sizeof(struct lagent_hdr)

/* One command's run: its limits, its pipes and what became of it. */
struct run {
	uint32_t id;
	uint64_t limit, out_bytes, sent, dropped;
	bool truncated;
	pid_t pid;
	int out, err; /* the read ends of its stdout and stderr; under a pty, out is the master */
	bool out_open, err_open, reaped, timed_out;
	int status;
	uint64_t start, deadline, reaped_at;
	/* LAGENT_EXEC_STDIN or _PTY: input frames with its id feed it instead of cancelling it */
	bool interactive, pty;
	int in; /* its stdin pipe's write end, or the pty master; -1: no (more) input */
	uint32_t in_off, in_len; /* the bytes of the STDIN payload in in_frame still to write */
	bool in_eof; /* STDIN_EOF came: end its input once the pending bytes are written */
	struct lagent_winsz ws;
};

/* An interactive command's input frames; a STDIN payload waits here until its stdin takes it. */
extern uint8_t in_frame[HDR_LEN + LAGENT_MAX_PAYLOAD + 1];
/* in_frame holds a request that cancelled a command: serve it next. */
extern bool in_frame_held;

void logx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One frame from the port into buf; 0 or -EPIPE (agent.c). */
int read_frame(uint8_t *buf, struct lagent_hdr *h);

/* Write what the command's stdin takes of the pending input, never blocking; then its EOF if asked. */
void input_flush(struct run *r);
/* Serve one frame from the host while an interactive command runs: 0, or -EPIPE to cancel it. */
int input_frame(struct run *r);
/* A new pty of the size asked for: *master for us, *slave for the command; both CLOEXEC. */
int open_pty(const struct lagent_winsz *ws, int *master, int *slave);

#endif
