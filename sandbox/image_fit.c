// SPDX-License-Identifier: GPL-2.0-only
/*
 * image_fit.c - does a guest image carry what a kit's agent needs to run?
 * Today that is node: the built-in agents' CLIs are npm packages whose
 * `engines` field names a minimum node, and the default (busybox) image has
 * none.  An image says what it carries in its manifest.txt (the debian
 * recipe writes `node VERSION ...`).  A kit that needs more than the image
 * has is refused before anything is created, in one line that names the
 * image to build, instead of an agent that fails later inside the guest.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "config/config.h"
#include "sandbox/sandbox.h"

/*
 * The agent programs latch knows, by the kit command's program name, and
 * the node major their npm package's engines field asks for (npm view PKG
 * engines): @anthropic-ai/claude-code >=22, @google/gemini-cli >=20,
 * @openai/codex >=16.
 */
static const struct {
	const char *program;
	int node_major;
} agent_needs[] = {
	{ "claude", 22 },
	{ "gemini", 20 },
	{ "codex", 16 },
};

int latch_sandbox_kit_node_major(const struct latch_kit *kit)
{
	const char *prog, *slash;

	if (!kit || kit->n_command < 1 || !kit->command[0])
		return 0;
	prog = kit->command[0];
	slash = strrchr(prog, '/');
	if (slash)
		prog = slash + 1;
	for (size_t i = 0; i < sizeof(agent_needs) / sizeof(agent_needs[0]); i++)
		if (!strcmp(prog, agent_needs[i].program))
			return agent_needs[i].node_major;
	return 0;
}

int latch_sandbox_image_node_major(const char *image_dir)
{
	char path[PATH_MAX], line[512];
	int major = 0;
	FILE *f;

	if (snprintf(path, sizeof(path), "%s/manifest.txt", image_dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "node ", 5)) {
			major = atoi(line + 5);
			break;
		}
	fclose(f);
	return major;
}

int latch_sandbox_image_fits(const struct latch_kit *kit, const char *image, char *err, size_t errlen)
{
	char dir[PATH_MAX], e[LATCH_ERR_MAX];
	struct latch_conf conf;
	int need = latch_sandbox_kit_node_major(kit), have, ret;

	if (!need)
		return 0;
	ret = latch_conf_load(&conf, e, sizeof(e));
	if (ret)
		return latch_errf(err, errlen, ret, "%s", e);
	if (snprintf(dir, sizeof(dir), "%s/%s", conf.images, image) >= (int)sizeof(dir))
		return latch_errf(err, errlen, -ENAMETOOLONG, "image path %s/%s is too long", conf.images, image);
	have = latch_sandbox_image_node_major(dir);
	/* an image not built yet: the default recipe never brings node; vm/ says how to build any other */
	if (have == -ENOENT && strcmp(image, LATCH_VM_DEFAULT_IMAGE))
		return 0;
	if (have >= need)
		return 0;
	return latch_errf(err, errlen, -ENOEXEC,
			  "kit %s needs node >= %d and image %s has %s: build the Debian image: latch image build "
			  "--image debian, then up with --image debian",
			  kit->name, need, image, have > 0 ? "an older one" : "none");
}
