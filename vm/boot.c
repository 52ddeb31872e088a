// SPDX-License-Identifier: GPL-2.0-only
/*
 * boot.c - `latch boot apply`, `latch boot install` and the qemu hook check.
 *
 * apply re-creates a sandbox's tap from its recorded state and puts the
 * enforcement back before anything can flow: the tap is made down and bare,
 * the programs are attached (from the pins, or fresh with an empty policy
 * when the pins are gone), the posture is read back, and only then is the
 * tap brought up and routed.  A sandbox whose posture can't be verified is
 * left with its tap down; the hook then refuses its domain.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vm/libvirt.h"
#include "vm/sandbox_vm.h"
#include "vm/state.h"
#include "vm/units.h" /* generated from the templates in vm/units/ (embed.sh) */

/* The hook's first comment line: `boot uninstall` removes only a hook that has it. */
#define HOOK_MARKER "# Written by `latch boot install`"

static int apply_one(const char *name, struct latch_boot_result *r)
{
	struct latch_vm_state st;
	struct latch_net_opts n;
	struct latch_posture p;
	char e[LATCH_ERR_MAX - 128];
	int ret;

	memset(r, 0, sizeof(*r));
	ret = latch_state_load(name, &st, r->note, sizeof(r->note));
	if (ret)
		return ret;
	if (latch_bpffs_ensure(e, sizeof(e)))
		return snprintf(r->note, sizeof(r->note), "bpffs: %s", e), -ENODEV;
	ret = latch_net_tap_create(st.tap, &r->tap_created, r->note, sizeof(r->note));
	if (ret)
		return ret;
	if (latch_sandbox_exists(name)) {
		r->from_pins = true;
		if (latch_sandbox_reattach(name, e, sizeof(e)))
			return snprintf(r->note, sizeof(r->note), "re-attach from the pins: %s", e), -EIO;
	} else if (latch_vm_enforce_fresh(&st, e, sizeof(e))) {
		return snprintf(r->note, sizeof(r->note), "no pins, and fresh enforcement failed: %s", e), -EIO;
	}
	if (latch_sandbox_posture_of(name, &p, e, sizeof(e)) || !p.enforced)
		return snprintf(r->note, sizeof(r->note), "not verified: %s", p.enforced ? e : p.why), -EPERM;
	r->enforced = true;
	latch_vm_net_opts(&st, &n);
	r->routed = latch_net_up(&n, r->note, sizeof(r->note)) == 0;
	return 0;
}

struct apply_ctx {
	void (*fn)(const char *name, int ret, const struct latch_boot_result *r, void *arg);
	void *arg;
	int failed;
};

static int apply_cb(const char *name, void *arg)
{
	struct apply_ctx *c = arg;
	struct latch_boot_result r;
	int ret = apply_one(name, &r);

	c->failed += ret != 0;
	c->fn(name, ret, &r, c->arg);
	return 0;
}

int latch_vm_boot_apply(void (*fn)(const char *name, int ret, const struct latch_boot_result *r, void *arg), void *arg)
{
	struct apply_ctx c = { fn, arg, 0 };
	int n = latch_vm_list(apply_cb, &c);

	return n < 0 ? n : c.failed;
}

static int write_file(const char *path, const char *text, mode_t mode, char *err, size_t errlen)
{
	char dir[PATH_MAX], *slash;
	int r;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		r = latch_mkdirs(dir, 0755);
		if (r)
			return latch_errf(err, errlen, r, "mkdir %s: %s", dir, strerror(-r));
	}
	r = latch_write_atomic(path, mode, text, strlen(text));
	if (r)
		return latch_errf(err, errlen, r, "%s: %s", path, strerror(-r));
	return 0;
}

/* Environment lines that carry LATCH_ROOT/LATCH_BPFFS into what runs without ours. */
static void env_of(char *unit_env, size_t ulen, char *sh_env, size_t slen)
{
	const char *root = getenv("LATCH_ROOT"), *bpffs = getenv("LATCH_BPFFS");

	*unit_env = *sh_env = '\0';
	if (root && *root) {
		snprintf(unit_env + strlen(unit_env), ulen - strlen(unit_env), "Environment=LATCH_ROOT=%s\n", root);
		snprintf(sh_env + strlen(sh_env), slen - strlen(sh_env), "export LATCH_ROOT='%s'\n", root);
	}
	if (bpffs && *bpffs) {
		snprintf(unit_env + strlen(unit_env), ulen - strlen(unit_env), "Environment=LATCH_BPFFS=%s\n", bpffs);
		snprintf(sh_env + strlen(sh_env), slen - strlen(sh_env), "export LATCH_BPFFS='%s'\n", bpffs);
	}
}

/* tmpl with @SBINDIR@ and @ENV@ put in, into out; -ENAMETOOLONG when it does not fit. */
static int render(const char *tmpl, const char *sbindir, const char *env, char *out, size_t len)
{
	size_t o = 0;

	for (const char *p = tmpl; *p;) {
		const char *put = NULL;
		size_t skip = 1;

		if (!strncmp(p, "@SBINDIR@", 9))
			put = sbindir, skip = 9;
		else if (!strncmp(p, "@ENV@", 5))
			put = env, skip = 5;
		if (put) {
			if (o + strlen(put) >= len)
				return -ENAMETOOLONG;
			memcpy(out + o, put, strlen(put));
			o += strlen(put);
		} else {
			if (o + 1 >= len)
				return -ENAMETOOLONG;
			out[o++] = *p;
		}
		p += skip;
	}
	out[o] = '\0';
	return 0;
}

/*
 * Enable NAME: a link in NAME's place in each of the wants directories
 * (`systemctl enable` without systemd, so that it works under LATCH_ROOT
 * too), to unit, the file that defines it.
 */
static int enable_unit(const char *name, const char *unit, const char *const *wanted_by, size_t n_wanted,
		       void (*wrote)(const char *path, void *arg), void *arg, char *err, size_t errlen)
{
	char dir[PATH_MAX], link[PATH_MAX];

	for (size_t i = 0; i < n_wanted; i++) {
		if (latch_path(dir, sizeof(dir), "etc/systemd/system/%s.wants", wanted_by[i]) ||
		    snprintf(link, sizeof(link), "%s/%s", dir, name) >= (int)sizeof(link))
			return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
		latch_mkdirs(dir, 0755);
		unlink(link);
		if (symlink(unit, link))
			return snprintf(err, errlen, "symlink %s: %s", link, strerror(errno)), -errno;
		wrote(link, arg);
	}
	return 0;
}

/*
 * The unit NAME: the one `make install` put beside latch (PREFIX/lib/systemd/
 * system, as a package installs it) is enabled as it is; without one (latch
 * copied by hand) or with LATCH_ROOT/LATCH_BPFFS to carry, the same template
 * is written to etc/systemd/system/NAME and enabled.
 */
static int install_unit(const char *name, const char *tmpl, const char *sbindir, const char *env,
			const char *const *wanted_by, size_t n_wanted, void (*wrote)(const char *path, void *arg),
			void *arg, char *err, size_t errlen)
{
	char unit[PATH_MAX], text[8192];
	struct stat st;
	int r;

	if (!*env && snprintf(unit, sizeof(unit), "%s/../lib/systemd/system/%s", sbindir, name) < (int)sizeof(unit) &&
	    !stat(unit, &st) && S_ISREG(st.st_mode))
		return enable_unit(name, unit, wanted_by, n_wanted, wrote, arg, err, errlen);
	if (latch_path(unit, sizeof(unit), "etc/systemd/system/%s", name))
		return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
	if (render(tmpl, sbindir, env, text, sizeof(text)))
		return snprintf(err, errlen, "unit %s: path too long", name), -ENAMETOOLONG;
	r = write_file(unit, text, 0644, err, errlen);
	if (r)
		return r;
	wrote(unit, arg);
	return enable_unit(name, unit, wanted_by, n_wanted, wrote, arg, err, errlen);
}

/*
 * The hook runs as root for every domain libvirt starts, so the binary it
 * calls must be latch as installed, never a build tree's: a `make clean`
 * would then stop every domain on the host, and whoever can write the tree
 * would be root.  Refused: a binary beside the build's marker (arrows.ok,
 * which every `make` writes into build/), or one level under a source tree
 * (../cli/latch.c); a binary or a directory above it that is not root's or
 * is writable by others (a root-owned sticky directory such as /tmp is
 * accepted: nobody else can replace what is in it).
 */
int latch_vm_boot_bin_check(const char *bin, char *err, size_t errlen)
{
	char real[PATH_MAX], probe[PATH_MAX + 32], *slash;
	struct stat st;

	if (!realpath(bin, real))
		return latch_errf(err, errlen, -errno, "%s: %s", bin, strerror(errno));
	slash = strrchr(real, '/');
	snprintf(probe, sizeof(probe), "%.*s/arrows.ok", (int)(slash - real), real);
	if (!access(probe, F_OK))
		return latch_errf(err, errlen, -EPERM,
				  "%s is a build tree's binary (%s is there): install latch first (`make install`) "
				  "and run the installed latch",
				  real, probe);
	snprintf(probe, sizeof(probe), "%.*s/../cli/latch.c", (int)(slash - real), real);
	if (!access(probe, F_OK))
		return latch_errf(err, errlen, -EPERM,
				  "%s sits in a source tree (%s): install latch first (`make install`) and run the "
				  "installed latch",
				  real, probe);
	for (;;) {
		const char *p = *real ? real : "/";

		if (stat(p, &st))
			return latch_errf(err, errlen, -errno, "%s: %s", p, strerror(errno));
		if (st.st_uid != 0 ||
		    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))))
			return latch_errf(
				err, errlen, -EPERM,
				"%s is not root's or is writable by others (mode %04o, uid %u): the hook runs "
				"latch as root; fix: chown root %s && chmod go-w %s",
				p, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, p, p);
		if (!*real)
			break;
		*strrchr(real, '/') = '\0';
	}
	return 0;
}
/*
 * The hook: one script in qemu.d/ (libvirt 9 runs every executable there,
 * so others' hooks stay as they are).  It decides in sh, before latch is
 * involved, that a domain is not latch's (not named latch-*, no latch
 * metadata) and lets it go at once: a host where latch was removed or
 * broken still starts every other domain.  For latch's domains it runs the
 * installed latch, and a latch that can't run refuses (exec fails, non-zero).
 */
static int write_hook(const char *bin, const char *senv, void (*wrote)(const char *path, void *arg), void *arg,
		      char *err, size_t errlen)
{
	char hook[PATH_MAX], legacy[PATH_MAX], text[8192], old[256] = "";
	int fd, r;

	if (latch_path(hook, sizeof(hook), "etc/libvirt/hooks/qemu.d/latch") ||
	    latch_path(legacy, sizeof(legacy), "etc/libvirt/hooks/qemu"))
		return snprintf(err, errlen, "path too long"), -ENAMETOOLONG;
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n" HOOK_MARKER ".  libvirt runs every executable in hooks/qemu.d/ as\n"
		 "# SCRIPT DOMAIN OP SUBOP EXTRA, the domain XML on stdin; a non-zero exit on prepare, start\n"
		 "# or restore stops that domain from starting.  latch refuses its own domains whose\n"
		 "# enforcement it can't verify; every other domain goes through here at once.\n"
		 "case \"$2\" in prepare|start|restore) ;; *) exit 0 ;; esac\n"
		 "case \"$1\" in\n"
		 "" LATCH_DOMAIN_PREFIX "*) ;;\n"
		 "*)\n"
		 "\tcase \"$(cat)\" in\n"
		 "\t*'" LATCH_XMLNS "'*)\n"
		 "\t\techo \"latch: refusing to start $1: it carries latch's metadata but not its name\" >&2\n"
		 "\t\texit 1 ;;\n"
		 "\tesac\n"
		 "\texit 0 ;;\n"
		 "esac\n"
		 "%s"
		 "exec '%s' boot hook \"$@\"\n",
		 senv, bin);
	r = write_file(hook, text, 0755, err, errlen);
	if (r)
		return r;
	wrote(hook, arg);
	/* the single-file hook an older latch wrote: it ran latch for every domain */
	fd = open(legacy, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		ssize_t n = read(fd, old, sizeof(old) - 1);

		close(fd);
		old[n > 0 ? n : 0] = '\0';
		if (strstr(old, HOOK_MARKER) && !unlink(legacy)) {
			char what[PATH_MAX + 16];

			snprintf(what, sizeof(what), "removed %s", legacy);
			wrote(what, arg);
		}
	}
	return 0;
}

static int latchd_present(const char *sbindir, char *err, size_t errlen)
{
	char latchd[PATH_MAX];
	struct stat st;

	if (snprintf(latchd, sizeof(latchd), "%s/latchd", sbindir) >= (int)sizeof(latchd))
		return latch_errf(err, errlen, -ENAMETOOLONG, "%s/latchd: path too long", sbindir);
	if (stat(latchd, &st) || !S_ISREG(st.st_mode) || access(latchd, X_OK))
		return latch_errf(err, errlen, -ENOENT,
				  "%s is not there (or not executable), and latchd.service runs it: install latch and "
				  "latchd together (`make install`) and run the installed latch",
				  latchd);
	return 0;
}

int latch_vm_boot_install(const char *latch_bin, void (*wrote)(const char *path, void *arg), void *arg, char *err,
			  size_t errlen)
{
	static const char *const boot_wanted_by[] = { "sysinit.target", "libvirtd.service", "virtqemud.service" };
	static const char *const latchd_wanted_by[] = { "multi-user.target" };
	char sbindir[PATH_MAX], uenv[2 * PATH_MAX + 64], senv[2 * PATH_MAX + 64];
	const char *slash = strrchr(latch_bin, '/');
	int r;

	if (strpbrk(latch_bin, "'\n\\\"$`") || latch_bin[0] != '/' || !slash)
		return latch_errf(err, errlen, -EINVAL, "latch's path '%s' can't go into a unit or a hook", latch_bin);
	r = latch_vm_boot_bin_check(latch_bin, err, errlen);
	if (r)
		return r;
	snprintf(sbindir, sizeof(sbindir), "%.*s", (int)(slash - latch_bin), latch_bin);
	/* latchd.service's ExecStart is SBINDIR/latchd: enabling it without the binary fails at every boot */
	r = latchd_present(sbindir, err, errlen);
	if (r)
		return r;
	env_of(uenv, sizeof(uenv), senv, sizeof(senv));
	r = install_unit("latch-boot.service", unit_latch_boot_service, sbindir, uenv, boot_wanted_by, 3, wrote, arg,
			 err, errlen);
	if (!r)
		r = install_unit("latchd.service", unit_latchd_service, sbindir, uenv, latchd_wanted_by, 1, wrote, arg,
				 err, errlen);
	if (!r)
		r = write_hook(latch_bin, senv, wrote, arg, err, errlen);
	return r;
}

/*
 * A file `boot install` wrote: a unit from vm/units/ (its head names it) or
 * the hook (its marker line).  Anything else at those paths is someone
 * else's and stays.
 */
static bool written_by_latch(const char *path, const char *marker)
{
	char head[1024];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return false;
	n = read(fd, head, sizeof(head) - 1);
	close(fd);
	head[n > 0 ? n : 0] = '\0';
	return strstr(head, marker) != NULL;
}

static int remove_path(const char *path, void (*done)(const char *path, bool removed, void *arg), void *arg, char *err,
		       size_t errlen)
{
	if (unlink(path) && errno != ENOENT)
		return latch_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	done(path, true, arg);
	return 0;
}

/* Remove NAME's link from each wants directory, then the directory when that left it empty. */
static int disable_unit(const char *name, const char *const *wanted_by, size_t n_wanted,
			void (*done)(const char *path, bool removed, void *arg), void *arg, char *err, size_t errlen)
{
	char dir[PATH_MAX], link[PATH_MAX];
	struct stat st;
	int r;

	for (size_t i = 0; i < n_wanted; i++) {
		if (latch_path(dir, sizeof(dir), "etc/systemd/system/%s.wants", wanted_by[i]) ||
		    snprintf(link, sizeof(link), "%s/%s", dir, name) >= (int)sizeof(link))
			return latch_errf(err, errlen, -ENAMETOOLONG, "path too long");
		if (lstat(link, &st))
			continue;
		if (!S_ISLNK(st.st_mode)) {
			done(link, false, arg);
			continue;
		}
		r = remove_path(link, done, arg, err, errlen);
		if (r)
			return r;
		rmdir(dir); /* only when empty: others' links stay */
	}
	return 0;
}

int latch_vm_boot_uninstall(void (*done)(const char *path, bool removed, void *arg), void *arg, char *err,
			    size_t errlen)
{
	static const char *const boot_wanted_by[] = { "sysinit.target", "libvirtd.service", "virtqemud.service" };
	static const char *const latchd_wanted_by[] = { "multi-user.target" };
	static const char *const units[] = { "latch-boot.service", "latchd.service" };
	char path[PATH_MAX], dir[PATH_MAX], marker[64];
	struct stat st;
	int r;

	r = disable_unit("latch-boot.service", boot_wanted_by, 3, done, arg, err, errlen);
	if (!r)
		r = disable_unit("latchd.service", latchd_wanted_by, 1, done, arg, err, errlen);
	for (size_t i = 0; !r && i < 2; i++) {
		if (latch_path(path, sizeof(path), "etc/systemd/system/%s", units[i]))
			return latch_errf(err, errlen, -ENAMETOOLONG, "path too long");
		if (lstat(path, &st))
			continue;
		/* the templates' second line: "# NAME: what it does" */
		snprintf(marker, sizeof(marker), "\n# %s: ", units[i]);
		if (written_by_latch(path, marker))
			r = remove_path(path, done, arg, err, errlen);
		else
			done(path, false, arg);
	}
	if (r)
		return r;
	if (latch_path(path, sizeof(path), "etc/libvirt/hooks/qemu.d/latch") ||
	    latch_path(dir, sizeof(dir), "etc/libvirt/hooks/qemu.d"))
		return latch_errf(err, errlen, -ENAMETOOLONG, "path too long");
	if (!lstat(path, &st)) {
		if (!written_by_latch(path, HOOK_MARKER))
			return done(path, false, arg), 0;
		r = remove_path(path, done, arg, err, errlen);
		rmdir(dir); /* only when empty */
	}
	return r;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static int hook_check(const char *dom, const char *op, const char *xml, char *err, size_t errlen)
{
	const size_t plen = strlen(LATCH_DOMAIN_PREFIX);
	bool prefixed = !strncmp(dom, LATCH_DOMAIN_PREFIX, plen);
	struct latch_vm_state st;
	struct latch_posture p;
	char e[LATCH_ERR_MAX], want[64];
	const char *name = dom + plen;

	if (strcmp(op, "prepare") && strcmp(op, "start") && strcmp(op, "restore"))
		return 0;
	if (!prefixed && !strstr(xml, LATCH_XMLNS))
		return 0;
	if (!prefixed)
		return snprintf(err, errlen, "domain %s carries latch's metadata but not its name", dom), -EPERM;
	if (latch_state_load(name, &st, e, sizeof(e)))
		return snprintf(err, errlen, "no latch state for sandbox '%s': %s", name, e), -EPERM;
	if (!latch_net_tap_exists(st.tap))
		return snprintf(err, errlen, "tap %s is missing (`latch boot apply`)", st.tap), -EPERM;
	if (latch_sandbox_posture_of(name, &p, e, sizeof(e)))
		return snprintf(err, errlen, "no pinned enforcement for '%s': %s", name, e), -EPERM;
	if (!p.enforced)
		return snprintf(err, errlen, "enforcement on %s not verified: %s", st.tap, p.why), -EPERM;
	/* the domain's only NIC must be that tap */
	snprintf(want, sizeof(want), "<target dev='%s'", st.tap);
	if (count(xml, "<interface ") != 1 || count(xml, "<interface type='ethernet'") != 1 || !strstr(xml, want))
		return snprintf(err, errlen, "domain %s has a NIC other than its filtered tap %s", dom, st.tap), -EPERM;
	return 0;
}

int latch_vm_boot_hook(const char *dom, const char *op, int xml_fd, char *err, size_t errlen)
{
	static char xml[1 << 20];
	size_t n = 0;
	ssize_t k;

	while (n < sizeof(xml) - 1 &&
	       ((k = read(xml_fd, xml + n, sizeof(xml) - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
		n += k > 0 ? (size_t)k : 0;
	xml[n] = '\0';
	return hook_check(dom, op, xml, err, errlen);
}
