// SPDX-License-Identifier: GPL-2.0-only
/*
 * image.c - guest images: which recipe builds an image, where the recipe
 * script is, and running it.
 *
 * The recipes are shell scripts in vm/images/ (sharing vm/images/lib.sh):
 * image.sh builds the default image (a Debian kernel and a busybox
 * initramfs), image_debian.sh a debootstrap Debian rootfs on a qcow2 disk.
 * A script is found through its environment variable, beside the source
 * tree of this binary (build/latch -> vm/images/), installed beside it
 * (PREFIX/sbin/latch -> PREFIX/lib/latch, `make install`), or in
 * /usr/lib/latch, in that order.  Its progress goes to stderr, so stdout
 * stays clean for --json.  A recipe that finds its image current does
 * nothing; --force rebuilds.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "vm/sandbox_vm.h"

struct image_recipe {
	const char *name;
	const char *script;
	const char *env;
};

static const struct image_recipe recipes[] = {
	{ LATCH_VM_DEFAULT_IMAGE, "image.sh", "LATCH_IMAGE_SH" },
	{ "debian", "image_debian.sh", "LATCH_IMAGE_DEBIAN_SH" },
};

static const struct image_recipe *recipe_of(const char *image)
{
	for (size_t k = 0; k < sizeof(recipes) / sizeof(recipes[0]); k++)
		if (!strcmp(recipes[k].name, image))
			return &recipes[k];
	return NULL;
}

bool latch_vm_image_present(const char *dir)
{
	char k[PATH_MAX + 16], i[PATH_MAX + 16];

	snprintf(k, sizeof(k), "%s/vmlinuz", dir);
	snprintf(i, sizeof(i), "%s/initrd.img", dir);
	return access(k, R_OK) == 0 && access(i, R_OK) == 0;
}

int latch_vm_image_script(const char *image, char *buf, size_t len, char *err, size_t errlen)
{
	const struct image_recipe *r = recipe_of(image);
	char exe[PATH_MAX], *slash;
	const char *env;
	ssize_t n;

	if (!r)
		return latch_errf(err, errlen, -EINVAL, "unknown image '%s'; latch builds '%s' and '%s'", image,
				  recipes[0].name, recipes[1].name);
	env = getenv(r->env);
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		if (access(buf, X_OK))
			return latch_errf(err, errlen, -ENOENT, "%s=%s is not an executable file", r->env, env);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			if (snprintf(buf, len, "%s/../vm/images/%s", exe, r->script) < (int)len && !access(buf, X_OK))
				return 0;
			/* installed: PREFIX/sbin/latch beside PREFIX/lib/latch, whatever PREFIX and DESTDIR were */
			if (snprintf(buf, len, "%s/../lib/latch/%s", exe, r->script) < (int)len && !access(buf, X_OK))
				return 0;
		}
	}
	snprintf(buf, len, "/usr/lib/latch/%s", r->script);
	if (access(buf, X_OK))
		return latch_errf(
			err, errlen, -ENOENT,
			"%s not found; set %s, run latch from its build tree, or install it in /usr/lib/latch",
			r->script, r->env);
	return 0;
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

int latch_vm_image_build_into(const char *image, const char *dir, bool force, int *recipe_exit, char *err,
			      size_t errlen)
{
	char script[PATH_MAX];
	int rc;

	*recipe_exit = -1;
	rc = latch_vm_image_script(image, script, sizeof(script), err, errlen);
	if (rc)
		return rc;
	rc = run_recipe(script, force, dir);
	if (rc < 0)
		return latch_errf(err, errlen, rc, "cannot run %s: %s", script, strerror(-rc));
	*recipe_exit = rc;
	if (rc)
		return latch_errf(err, errlen, -EIO, "building the '%s' image in %s failed (%s exit %d)", image, dir,
				  script, rc);
	if (!latch_vm_image_present(dir))
		return latch_errf(err, errlen, -EIO, "%s ran but %s has no vmlinuz and initrd.img", script, dir);
	return 0;
}

int latch_vm_image_build(const char *image, bool force, char *dir, size_t dirlen, int *recipe_exit, char *err,
			 size_t errlen)
{
	struct latch_conf conf;
	int rc;

	*recipe_exit = -1;
	if (!recipe_of(image))
		return latch_vm_image_script(image, dir, dirlen, err, errlen); /* says which images there are */
	rc = latch_conf_load(&conf, err, errlen);
	if (rc)
		return rc;
	if (snprintf(dir, dirlen, "%s/%s", conf.images, image) >= (int)dirlen)
		return latch_errf(err, errlen, -ENAMETOOLONG, "image path %s/%s is too long", conf.images, image);
	return latch_vm_image_build_into(image, dir, force, recipe_exit, err, errlen);
}
