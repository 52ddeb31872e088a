// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_image.c - `latch image build [--image default|debian] [--force]`:
 * build a guest image into the image cache (latch.conf `images`, by default
 * /var/lib/latch/images/NAME).  The recipes and where their scripts are
 * found are vm/'s (vm/image.c); their progress goes to stderr, so stdout
 * stays clean for --json.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "vm/vm.h"

static int image_build(int argc, char **argv)
{
	const char *image = LATCH_VM_DEFAULT_IMAGE;
	char err[LATCH_ERR_MAX], dir[PATH_MAX], script[PATH_MAX];
	bool force = false;
	int recipe_exit, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force = true;
		else if (!strcmp(argv[i], "--image") && i + 1 < argc)
			image = argv[++i];
		else
			return latch_err(LATCH_EXIT_USAGE,
					 "usage: latch image build [--image default|debian] [--force]");
	}
	if (latch_vm_image_script(image, script, sizeof(script), err, sizeof(err)) == -EINVAL)
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (getuid() != 0)
		return latch_err(LATCH_EXIT_USAGE, "image build needs root; run it with sudo");
	rc = latch_vm_image_build(image, force, dir, sizeof(dir), &recipe_exit, err, sizeof(err));
	if (rc)
		return latch_err(recipe_exit == 2 || rc == -EINVAL ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "%s", err);
	latch_json_out(json_pack("{s:s, s:s, s:s}", "image", image, "dir", dir, "recipe", script));
	if (!latch_json)
		printf("image %s ready in %s\n", image, dir);
	return LATCH_EXIT_OK;
}

int cmd_image(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "build"))
		return image_build(argc - 1, argv + 1);
	return latch_err(LATCH_EXIT_USAGE, "usage: latch image build [--image default|debian] [--force]");
}
