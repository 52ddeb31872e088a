// SPDX-License-Identifier: GPL-2.0-only
/*
 * ops.c - the ops of latchd's control socket, named once: latchd dispatches
 * on this table (latchd/control.c) and every client builds its requests
 * from it, so an op can't be spelled one way on one end and another on the
 * other.  docs/latchd.md's table of ops is checked against it
 * (tests/test_ctl.c).
 */
#include <stdio.h>
#include <string.h>

#include "ctl/ctl.h"

static const char *const op_names[LATCHD_OP_COUNT] = {
	[LATCHD_OP_PING] = "ping",
	[LATCHD_OP_RESCAN] = "rescan",
	[LATCHD_OP_RELOAD] = "reload",
	[LATCHD_OP_SWITCH] = "switch",
	[LATCHD_OP_KIT] = "kit",
	[LATCHD_OP_BACKEND] = "backend",
	[LATCHD_OP_ROOM_OPEN] = "room_open",
	[LATCHD_OP_ROOM_READY] = "room_ready",
	[LATCHD_OP_ROOM_DONE] = "room_done",
	[LATCHD_OP_GRANT] = "grant",
	[LATCHD_OP_GRANTS] = "grants",
	[LATCHD_OP_APPROVE] = "approve",
	[LATCHD_OP_DENY] = "deny",
	[LATCHD_OP_VERIFY_NAMES] = "verify_names",
};

const char *latchd_op_name(enum latchd_op op)
{
	return op >= 0 && op < LATCHD_OP_COUNT ? op_names[op] : NULL;
}

int latchd_op_lookup(const char *name)
{
	for (int i = 0; name && i < LATCHD_OP_COUNT; i++)
		if (op_names[i] && !strcmp(op_names[i], name))
			return i;
	return -1;
}

void latchd_op_list(char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = 0;
	for (int i = 0; i < LATCHD_OP_COUNT && at < len; i++) {
		int n = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", op_names[i]);

		if (n < 0)
			break;
		at += (size_t)n;
	}
}

json_t *latchd_request(enum latchd_op op)
{
	const char *name = latchd_op_name(op);

	return name ? json_pack("{s:s}", "op", name) : NULL;
}
