// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_image.c - `latch image build [--image default|debian] [--force]`:
 * build a guest image into the image cache (latch.conf `images`, by default
 * /var/lib/latch/images/NAME).
 *
 * The recipes are shell scripts: vm/image.sh (the default image: a Debian
 * kernel and a busybox initramfs) and vm/image_debian.sh (a debootstrap
 * Debian rootfs on a qcow2 disk).  They are found through
 * $LATCH_IMAGE_SH / $LATCH_IMAGE_DEBIAN_SH, beside the source tree of this
 * binary (build/latch -> vm/), or installed in /usr/lib/latch.  Their
 * progress goes to stderr, so stdout stays clean for --json.  A recipe that
 * finds its image current does nothing; --force rebuilds.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "config/config.h"

struct image_recipe {
	const char *name;
	const char *script;
	const char *env;
};

static const struct image_recipe recipes[] = {
	{ "default", "image.sh", "LATCH_IMAGE_SH" },
	{ "debian", "image_debian.sh", "LATCH_IMAGE_DEBIAN_SH" },
};

/* The recipe script for r; 0 or -ENOENT. */
static int find_script(const struct image_recipe *r, char *buf, size_t len)
{
	const char *e = getenv(r->env);
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (e && *e) {
		snprintf(buf, len, "%s", e);
		return access(buf, X_OK) ? -ENOENT : 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			if (snprintf(buf, len, "%s/../vm/images/%s", exe, r->script) < (int)len && !access(buf, X_OK))
				return 0;
		}
	}
	snprintf(buf, len, "/usr/lib/latch/%s", r->script);
	return access(buf, X_OK) ? -ENOENT : 0;
}

/* Run SCRIPT [--force] DIR with its stdout on our stderr; its exit status or -errno. */
static int run_recipe(const char *script, bool force, const char *dir)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(STDERR_FILENO, STDOUT_FILENO);
		if (force)
			execl(script, script, "--force", dir, (char *)NULL);
		else
			execl(script, script, dir, (char *)NULL);
		fprintf(stderr, "latch: cannot run %s: %s\n", script, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static int image_build(int argc, char **argv)
{
	const struct image_recipe *r = &recipes[0];
	char err[LATCH_ERR_MAX], script[PATH_MAX], dir[PATH_MAX];
	struct latch_conf conf;
	bool force = false;
	int i, rc;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--force")) {
			force = true;
		} else if (!strcmp(argv[i], "--image") && i + 1 < argc) {
			const char *want = argv[++i];

			r = NULL;
			for (size_t k = 0; k < sizeof(recipes) / sizeof(recipes[0]); k++)
				if (!strcmp(recipes[k].name, want))
					r = &recipes[k];
			if (!r)
				return latch_err(LATCH_EXIT_USAGE, "unknown image '%s'; latch builds 'default' and 'debian'",
						 want);
		} else {
			return latch_err(LATCH_EXIT_USAGE, "usage: latch image build [--image default|debian] [--force]");
		}
	}
	if (getuid() != 0)
		return latch_err(LATCH_EXIT_USAGE, "image build needs root; run it with sudo");
	rc = latch_conf_load(&conf, err, sizeof(err));
	if (rc)
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (snprintf(dir, sizeof(dir), "%s/%s", conf.images, r->name) >= (int)sizeof(dir))
		return latch_err(LATCH_EXIT_USAGE, "image path too long");
	if (find_script(r, script, sizeof(script)))
		return latch_err(LATCH_EXIT_FAILED, "%s not found; set %s or install latch's vm/ scripts in /usr/lib/latch",
				 r->script, r->env);
	rc = run_recipe(script, force, dir);
	if (rc < 0)
		return latch_err(LATCH_EXIT_FAILED, "cannot run %s: %s", script, strerror(-rc));
	if (rc)
		return latch_err(rc == 2 ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "building the '%s' image in %s failed (%s exit %d)",
				 r->name, dir, script, rc);
	latch_json_out(json_pack("{s:s, s:s, s:s}", "image", r->name, "dir", dir, "recipe", script));
	if (!latch_json)
		printf("image %s ready in %s\n", r->name, dir);
	return LATCH_EXIT_OK;
}

int cmd_image(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "build"))
		return image_build(argc - 1, argv + 1);
	return latch_err(LATCH_EXIT_USAGE, "usage: latch image build [--image default|debian] [--force]");
}
