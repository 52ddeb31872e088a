// SPDX-License-Identifier: GPL-2.0-only
/*
 * say.c - what sandbox/ says while it works, shown as every command shows
 * its progress: on stderr after "latch: ", notes only in text mode (under
 * --json stdout carries one document and stderr stays quiet), warnings
 * always.
 */
#include <stdio.h>

#include "cli/cli.h"
#include "sandbox/sandbox.h"

static void say_line(void *arg, enum latch_sandbox_say_kind kind, const char *line)
{
	if (kind == LATCH_SANDBOX_WARN)
		fprintf(stderr, "latch: warning: %s\n", line);
	else if (!latch_json)
		fprintf(stderr, "latch: %s\n", line);
}

const struct latch_sandbox_say latch_say = { .fn = say_line };
