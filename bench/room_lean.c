// SPDX-License-Identifier: GPL-2.0-only
/*
 * room_lean.c - latch_room_run() behind a main of its own, linked only
 * against what room/ and loader/ need: the room's cost without the start of
 * the `latch` binary, which links every module's libraries (the benchmark's
 * latch-start row).  `room_lean [--workspace DIR] -- CMD...`, sealed, with
 * the room's defaults; exits with the command's status.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "room/room.h"

int main(int argc, char **argv)
{
	struct latch_room_opts o = { .output_fd = STDOUT_FILENO };
	struct latch_room_result res;
	char err[LATCH_ERR_MAX];
	int i = 1, rc;

	if (i + 1 < argc && !strcmp(argv[i], "--workspace")) {
		o.workspace = argv[i + 1];
		i += 2;
	}
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	if (i >= argc) {
		fprintf(stderr, "usage: room_lean [--workspace DIR] -- CMD...\n");
		return 125;
	}
	o.argv = argv + i;
	if (latch_room_run(&o, &res, err, sizeof(err))) {
		fprintf(stderr, "room_lean: %s\n", err);
		return 125;
	}
	rc = res.exited ? res.exit_code : 128 + res.signal;
	latch_room_result_free(&res);
	return rc;
}
