// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_image_fit.c - what a kit's agent needs of a guest image
 * (sandbox/image_fit.c), read from the npm packages its setup installs.
 *
 * Invariant: a kit is refused before anything exists on an image that
 * can't run its agent: Claude Code's native build needs glibc (a Debian
 * root file system), Gemini CLI node >= 20; Codex's native build is static
 * and needs neither.  A kit whose command is only a wrapper (sh -c) is
 * judged by its packages, not by the wrapper's name.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

static struct latch_kit kit_of(const char *name, const char *package, const char *version, char *cmd0)
{
	static struct latch_kit_npm npm;
	static char *command[2];
	struct latch_kit k;

	memset(&k, 0, sizeof(k));
	memset(&npm, 0, sizeof(npm));
	snprintf(k.name, sizeof(k.name), "%s", name);
	command[0] = cmd0;
	k.command = command;
	k.n_command = 1;
	if (package) {
		snprintf(npm.name, sizeof(npm.name), "%s", package);
		snprintf(npm.version, sizeof(npm.version), "%s", version);
		k.setup = &npm;
		k.n_setup = 1;
	}
	return k;
}

Test(image_fit, an_agent_needs_what_its_packages_need)
{
	struct latch_kit k;
	bool glibc;

	k = kit_of("claude", "@anthropic-ai/claude-code-linux-x64", "2.1.337", "sh");
	cr_expect_eq(latch_sandbox_kit_needs(&k, &glibc), 0);
	cr_expect(glibc, "Claude Code's native build needs glibc");
	k = kit_of("gemini", "@google/gemini-cli", "0.61.0", "sh");
	cr_expect_eq(latch_sandbox_kit_needs(&k, &glibc), 20, "judged by its package, not its sh wrapper");
	cr_expect_not(glibc);
	k = kit_of("codex", "@openai/codex", "0.171.0-linux-x64", "sh");
	cr_expect_eq(latch_sandbox_kit_needs(&k, &glibc), 0, "the static native build needs no node");
	cr_expect_not(glibc);
	/* controls: the npm wrappers need node; a kit without setup is judged by its program; a shell needs nothing */
	k = kit_of("codex", "@openai/codex", "0.171.0", "codex");
	cr_expect_eq(latch_sandbox_kit_needs(&k, &glibc), 16);
	k = kit_of("claude", NULL, NULL, "/usr/local/bin/claude");
	cr_expect_eq(latch_sandbox_kit_needs(&k, &glibc), 22);
	k = kit_of("shell", NULL, NULL, "sh");
	cr_expect_eq(latch_sandbox_kit_needs(&k, &glibc), 0);
	cr_expect_not(glibc);
}

Test(image_fit, an_image_says_what_it_carries)
{
	char dir[] = "/tmp/latch-imgfit-XXXXXX", path[64];
	bool glibc;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/manifest.txt", dir);
	f = fopen(path, "w");
	fputs("# latch default guest image\nformat 1\nbusybox abc\n", f);
	fclose(f);
	cr_expect_eq(latch_sandbox_image_node_major(dir, &glibc), 0);
	cr_expect_not(glibc, "the busybox image has no glibc");
	f = fopen(path, "w");
	fputs("format 1\nsuite bookworm http://deb.debian.org/debian\nnode 22.23.5 sha512-x npm 10.9.9 sha512-y\n", f);
	fclose(f);
	cr_expect_eq(latch_sandbox_image_node_major(dir, &glibc), 22);
	cr_expect(glibc, "a debootstrap root file system has glibc");
	unlink(path);
	rmdir(dir);
}
