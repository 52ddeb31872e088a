/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * agent_proto.h - the wire format between latch and its guest agent.
 *
 * The agent (vm/guest/agent.c) runs inside the guest on the virtio-serial port
 * named LAGENT_PORT_NAME; libvirt or qemu exposes the host end as a Unix
 * stream socket, which vm/agent_client.c speaks.  Both ends include this file
 * and nothing else is shared.
 *
 * The byte stream is a sequence of frames.  Every frame is a 16-byte
 * struct lagent_hdr followed by hdr.len bytes of payload.  All integers are
 * little-endian.  hdr.magic starts every frame, so a reader that finds
 * garbage (bytes left in the channel by an earlier, interrupted session)
 * slides forward one byte at a time until it finds a magic again.
 *
 *   host -> guest
 *     PING  id=N  no payload           agent answers PONG id=N
 *     EXEC  id=N  struct lagent_exec, then exec.argc NUL-terminated strings;
 *                 with LAGENT_EXEC_ENV in exec.flags, then "NAME=VALUE"
 *                 strings for the command's environment; with
 *                 LAGENT_EXEC_CWD, then its working directory; the strings
 *                 fill the rest of the payload exactly.  With
 *                 LAGENT_EXEC_PTY a struct lagent_winsz (the pty's first
 *                 size) sits between struct lagent_exec and the strings
 *   host -> guest while an EXEC with LAGENT_EXEC_STDIN or LAGENT_EXEC_PTY
 *   runs, carrying that EXEC's id
 *     STDIN       1..LAGENT_MAX_PAYLOAD bytes for the command's stdin
 *     STDIN_EOF   no payload: close the command's stdin (under a pty: type
 *                 the terminal's EOF character); later STDIN is dropped
 *     WINSZ       struct lagent_winsz: the pty's new size (no pty: ignored)
 *     SIGNAL      struct lagent_signal: to the command's process group;
 *                 only INT, TERM, HUP, QUIT and KILL, others are ignored
 *   guest -> host, all carrying the id of the request they answer
 *     PONG        struct lagent_pong
 *     STDOUT      1..LAGENT_CHUNK bytes of the command's stdout
 *     STDERR      1..LAGENT_CHUNK bytes of the command's stderr
 *     EXIT        struct lagent_exit; the last frame for an EXEC
 *     ERROR       struct lagent_error + a message; the last frame for a
 *                 request the agent could not run (malformed, too big)
 *
 * One request is served at a time.  The host sends nothing while a command
 * runs but the input frames above, to a command that takes them; closing the
 * connection, or sending any other frame, cancels the command:
 * the agent kills its process group and sends no EXIT for it (a frame that
 * cancelled is then served as usual).  Both rules are needed because a
 * client that disconnects and is replaced at once may never show the agent
 * a hang-up.  Output past the output limit is read and
 * dropped so the command never blocks on a full pipe; EXIT then says how
 * much was dropped.
 *
 * Input is flow-controlled by the one stream: the agent holds one STDIN
 * frame at a time and reads no further frame while the command's stdin (pipe
 * or pty) is full.  So a SIGNAL or WINSZ queued behind stdin the command
 * does not read waits for it; a hang-up is still seen at once and kills the
 * command, which is how the host gets out of that state.
 *
 * Capabilities ride in the PONG's header flags (LAGENT_CAP_*), which agents
 * and hosts that predate them leave 0 and ignore: the version stays 1 both
 * ways, and a host asks for a capability only of an agent that announced it.
 *
 * The guest is untrusted: the host side must check every length against
 * LAGENT_MAX_PAYLOAD and must not believe the agent's own output cap or
 * timeout.  vm/agent_client.c enforces both again.
 */
#ifndef LATCH_VM_AGENT_PROTO_H
#define LATCH_VM_AGENT_PROTO_H

#include <stdint.h>

#define LAGENT_PORT_NAME "org.latch.agent"
#define LAGENT_MAGIC 0x4b54414cu /* "LATK" on the wire */
#define LAGENT_VERSION 1

/* Largest payload of any frame, either direction. */
#define LAGENT_MAX_PAYLOAD (64u * 1024)
/* Largest STDOUT/STDERR payload the agent sends. */
#define LAGENT_CHUNK (16u * 1024)
/* Default and ceiling for a command's combined stdout+stderr. */
#define LAGENT_OUTPUT_CAP (16u << 20)
#define LAGENT_MAX_ARGC 1024

enum lagent_type {
	LAGENT_PING = 0x01,
	LAGENT_EXEC = 0x02,
	LAGENT_STDIN = 0x03,
	LAGENT_STDIN_EOF = 0x04,
	LAGENT_WINSZ = 0x05,
	LAGENT_SIGNAL = 0x06,

	LAGENT_PONG = 0x81,
	LAGENT_STDOUT = 0x82,
	LAGENT_STDERR = 0x83,
	LAGENT_EXIT = 0x84,
	LAGENT_ERROR = 0x85,
};

struct lagent_hdr {
	uint32_t magic;
	uint16_t type; /* enum lagent_type */
	uint16_t flags; /* 0; reserved */
	uint32_t id; /* chosen by the host, echoed by the agent */
	uint32_t len; /* payload bytes after this header */
};
_Static_assert(sizeof(struct lagent_hdr) == 16, "lagent_hdr is 16 bytes on the wire");

/* PONG header flags: what this agent takes beyond version 1's first form */
#define LAGENT_CAP_ENV (1u << 0) /* EXEC with LAGENT_EXEC_ENV */
#define LAGENT_CAP_STDIN (1u << 1) /* EXEC with LAGENT_EXEC_STDIN, and the input frames */
#define LAGENT_CAP_PTY (1u << 2) /* EXEC with LAGENT_EXEC_PTY */
#define LAGENT_CAP_CWD (1u << 3) /* EXEC with LAGENT_EXEC_CWD */

/* lagent_exec.flags */
#define LAGENT_EXEC_ENV (1u << 0) /* "NAME=VALUE" strings follow argv (LAGENT_CAP_ENV) */
#define LAGENT_EXEC_STDIN (1u << 1) /* stdin is a pipe fed by STDIN frames (LAGENT_CAP_STDIN) */
/* stdin, stdout and stderr are one new pty, output comes as STDOUT; a
 * struct lagent_winsz follows struct lagent_exec (LAGENT_CAP_PTY) */
#define LAGENT_EXEC_PTY (1u << 2)
#define LAGENT_EXEC_CWD (1u << 3) /* the payload's last string is the working directory (LAGENT_CAP_CWD) */
#define LAGENT_EXEC_FLAGS (LAGENT_EXEC_ENV | LAGENT_EXEC_STDIN | LAGENT_EXEC_PTY | LAGENT_EXEC_CWD)
#define LAGENT_MAX_ENVC 256

struct lagent_exec {
	uint32_t timeout_ms; /* 0: no timeout; else SIGKILL to the process group */
	/* 0 or > LAGENT_OUTPUT_CAP: LAGENT_OUTPUT_CAP; 0 with STDIN or PTY: no limit (streamed) */
	uint32_t output_limit;
	uint32_t argc; /* 1..LAGENT_MAX_ARGC */
	uint32_t flags; /* LAGENT_EXEC_*; other bits 0 */
	/* followed by argc NUL-terminated strings, then (LAGENT_EXEC_ENV) the environment's */
};
_Static_assert(sizeof(struct lagent_exec) == 16, "lagent_exec is 16 bytes on the wire");

struct lagent_winsz {
	uint16_t rows, cols; /* 0: leave as is */
	uint16_t xpixel, ypixel;
};
_Static_assert(sizeof(struct lagent_winsz) == 8, "lagent_winsz is 8 bytes on the wire");

struct lagent_signal {
	int32_t signo; /* Linux numbering */
	uint32_t flags; /* 0; reserved */
};
_Static_assert(sizeof(struct lagent_signal) == 8, "lagent_signal is 8 bytes on the wire");

struct lagent_pong {
	uint32_t version; /* LAGENT_VERSION */
	uint32_t max_payload; /* LAGENT_MAX_PAYLOAD of the agent */
	char release[64]; /* guest uname -r, NUL-terminated */
};
_Static_assert(sizeof(struct lagent_pong) == 72, "lagent_pong is 72 bytes on the wire");

enum lagent_how {
	LAGENT_EXITED = 1, /* code: exit status */
	LAGENT_SIGNALED = 2, /* code: signal number */
};

/* lagent_exit.flags */
#define LAGENT_EXIT_TRUNCATED (1u << 0) /* output past the limit was dropped */
#define LAGENT_EXIT_TIMED_OUT (1u << 1) /* killed at timeout_ms */

struct lagent_exit {
	uint32_t how; /* enum lagent_how */
	int32_t code;
	uint32_t flags; /* LAGENT_EXIT_* */
	uint32_t duration_ms; /* fork to reap, in the guest */
	uint64_t out_bytes; /* stdout+stderr produced, sent or not */
	uint64_t dropped; /* of those, not sent */
};
_Static_assert(sizeof(struct lagent_exit) == 32, "lagent_exit is 32 bytes on the wire");

struct lagent_error {
	int32_t err; /* positive errno value */
	uint32_t flags; /* 0; reserved */
	/* followed by a message, not NUL-terminated */
};
_Static_assert(sizeof(struct lagent_error) == 8, "lagent_error is 8 bytes on the wire");

#endif
