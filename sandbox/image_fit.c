// SPDX-License-Identifier: GPL-2.0-only
/*
 * image_fit.c - does a guest image carry what a kit's agent needs to run?
 * Today that is node (an npm CLI's `engines` field names a minimum) and
 * glibc (a native build linked against it); the default (busybox) image has
 * neither.  An image says what it carries in its manifest.txt (the debian
 * recipe writes `suite ...` and `node VERSION ...`).  A kit that needs more than the image
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
 * What the installers latch knows need, by the npm package a kit's setup
 * installs: node's major from the package's engines field (npm view PKG
 * engines), or glibc for a native build linked against it.  A package not
 * here needs nothing latch can tell.
 */
static const struct {
	const char *package;
	const char *version_has; /* NULL: any version; else only versions containing this */
	int node_major;
	bool glibc;
} package_needs[] = {
	{ "@anthropic-ai/claude-code-linux-x64", NULL, 0, true }, /* the native build: glibc, no node */
	{ "@anthropic-ai/claude-code", NULL, 22, false },
	{ "@google/gemini-cli", NULL, 20, false },
	{ "@openai/codex", "-linux-", 0, false }, /* the native build is static (musl) */
	{ "@openai/codex", NULL, 16, false },
};

/* And by the command's program, for a kit that installs its agent some other way. */
static const struct {
	const char *program;
	int node_major;
} program_needs[] = {
	{ "claude", 22 },
	{ "gemini", 20 },
	{ "codex", 16 },
};

static void package_need(const struct latch_kit_npm *p, int *node, bool *glibc)
{
	for (size_t i = 0; i < sizeof(package_needs) / sizeof(package_needs[0]); i++) {
		if (strcmp(p->name, package_needs[i].package))
			continue;
		if (package_needs[i].version_has && !strstr(p->version, package_needs[i].version_has))
			continue;
		if (package_needs[i].node_major > *node)
			*node = package_needs[i].node_major;
		*glibc |= package_needs[i].glibc;
		return;
	}
}

int latch_sandbox_kit_needs(const struct latch_kit *kit, bool *glibc)
{
	const char *prog, *slash;
	int node = 0;

	*glibc = false;
	if (!kit)
		return 0;
	for (int i = 0; i < kit->n_setup; i++)
		package_need(&kit->setup[i], &node, glibc);
	if (kit->n_setup || kit->n_command < 1 || !kit->command[0])
		return node;
	prog = kit->command[0];
	slash = strrchr(prog, '/');
	if (slash)
		prog = slash + 1;
	for (size_t i = 0; i < sizeof(program_needs) / sizeof(program_needs[0]); i++)
		if (!strcmp(prog, program_needs[i].program))
			return program_needs[i].node_major;
	return 0;
}

int latch_sandbox_image_node_major(const char *image_dir, bool *glibc)
{
	char path[PATH_MAX], line[512];
	int major = 0;
	FILE *f;

	*glibc = false;
	if (snprintf(path, sizeof(path), "%s/manifest.txt", image_dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "node ", 5))
			major = atoi(line + 5);
		if (!strncmp(line, "suite ", 6)) /* a Debian root file system (debootstrap): glibc */
			*glibc = true;
	}
	fclose(f);
	return major;
}

int latch_sandbox_image_fits(const struct latch_kit *kit, const char *image, char *err, size_t errlen)
{
	char dir[PATH_MAX], e[LATCH_ERR_MAX], need_text[64];
	bool need_glibc, have_glibc;
	struct latch_conf conf;
	int need = latch_sandbox_kit_needs(kit, &need_glibc), have, ret;

	if (!need && !need_glibc)
		return 0;
	ret = latch_conf_load(&conf, e, sizeof(e));
	if (ret)
		return latch_errf(err, errlen, ret, "%s", e);
	if (snprintf(dir, sizeof(dir), "%s/%s", conf.images, image) >= (int)sizeof(dir))
		return latch_errf(err, errlen, -ENAMETOOLONG, "image path %s/%s is too long", conf.images, image);
	have = latch_sandbox_image_node_major(dir, &have_glibc);
	/* an image not built yet: the default recipe never brings node; vm/ says how to build any other */
	if (have == -ENOENT && strcmp(image, LATCH_VM_DEFAULT_IMAGE))
		return 0;
	if (have >= need && (!need_glibc || have_glibc))
		return 0;
	if (need_glibc && !have_glibc)
		snprintf(need_text, sizeof(need_text), "glibc (its agent is a native glibc build)");
	else
		snprintf(need_text, sizeof(need_text), "node >= %d", need);
	return latch_errf(err, errlen, -ENOEXEC,
			  "kit %s needs %s and image %s has %s: build the Debian image: latch image build "
			  "--image debian, then up with --image debian",
			  kit->name, need_text, image,
			  need_glibc && !have_glibc ? "none" :
			  have > 0		    ? "an older node" :
						      "no node");
}
