// SPDX-License-Identifier: GPL-2.0-only
/*
 * setup.c - a kit's setup: its installers fetched and verified on the host,
 * all of them, before any is installed into a guest; and `kit pin`.
 *
 * kosa8: "a kit installs the agent's tool before it hands over a key, so
 * kosa8 will not ship a kit whose installer it cannot verify."  Here that is
 * an order: every package of the kit is fetched (or taken from the cache)
 * and held to its sha512 first; one that fails stops the setup with its
 * line, and nothing has run in the guest.  Only then is each tarball streamed
 * into the guest from the descriptor that was hashed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "sandbox/sandbox.h"
#include "vm/vm.h"

#define INSTALL_ROOT "/opt/latch/npm" /* in the guest: NAME@VERSION under it */
#define INSTALL_TIMEOUT_MS (15 * 60 * 1000) /* a 200 MB tarball into a TCG guest */

/* latch.conf's registry and CA into SRC (pointing into CONF). */
static int npm_source(struct latch_conf *conf, struct latch_npm_source *src, char *err, size_t errlen)
{
	int ret = latch_conf_load(conf, err, errlen);

	if (ret)
		return ret;
	*src = (struct latch_npm_source){ .registry = conf->npm_registry, .ca_file = conf->npm_ca_file };
	return 0;
}

int latch_sandbox_setup_fetch(const struct latch_kit *kit, struct latch_npm_tarball *out,
			      const struct latch_sandbox_say *say, char *err, size_t errlen)
{
	struct latch_conf conf;
	struct latch_npm_source src;
	int ret;

	for (int i = 0; i < kit->n_setup; i++)
		out[i].fd = -1;
	if (!kit->n_setup)
		return 0; /* nothing to fetch: latch.conf is not even read */
	ret = npm_source(&conf, &src, err, errlen);
	for (int i = 0; !ret && i < kit->n_setup; i++) {
		const struct latch_kit_npm *p = &kit->setup[i];

		ret = latch_npm_fetch(p, &src, &out[i], err, errlen);
		if (!ret)
			latch_sandbox_sayf(say, LATCH_SANDBOX_NOTE,
					   "setup %s@%s verified: sha512 matches the kit's pin (%s, %llu KiB)", p->name,
					   p->version, out[i].cached ? "cached" : "fetched",
					   (unsigned long long)(out[i].size >> 10));
	}
	if (ret)
		latch_sandbox_setup_close(kit, out);
	return ret;
}

void latch_sandbox_setup_close(const struct latch_kit *kit, struct latch_npm_tarball *t)
{
	for (int i = 0; i < kit->n_setup; i++)
		latch_npm_tarball_close(&t[i]);
}

/* ---- into the guest */

/*
 * Run in the guest as `sh -c SCRIPT sh DIR [BIN PATH]...`, the tarball on
 * stdin: unpacked beside DIR, its one top directory (npm's "package/")
 * moved into DIR's place, each bin linked into /usr/local/bin.  A bin that
 * is a link, or resolves outside the package, is refused: chmod would
 * follow it anywhere in the guest.  Every word comes in as an argument,
 * never into the script's text.
 */
static const char install_script[] =
	"set -eu\n"
	"d=$1; shift\n"
	"fail() { echo \"latch: $*\" >&2; exit 1; }\n"
	"rm -rf \"$d.x\"; mkdir -p \"$d.x\" /usr/local/bin\n"
	"tar -xzf - -C \"$d.x\" || fail 'the tarball did not unpack'\n"
	"[ \"$(ls -A \"$d.x\" | wc -l)\" -eq 1 ] || fail 'the tarball is not one package directory'\n"
	"top=\"$d.x/$(ls -A \"$d.x\")\"\n"
	"[ -d \"$top\" ] && [ ! -L \"$top\" ] || fail 'the tarball is not one package directory'\n"
	"rm -rf \"$d\"; mv \"$top\" \"$d\"; rmdir \"$d.x\"\n"
	"while [ $# -ge 2 ]; do\n"
	"\tcase $(readlink -f \"$d/$2\") in \"$d\"/*) ;; *) fail \"bin $2 leaves the package\" ;; esac\n"
	"\t[ -f \"$d/$2\" ] && [ ! -L \"$d/$2\" ] || fail \"bin $2 is not a file of the package\"\n"
	"\tchmod a+rx \"$d/$2\"; ln -sfn \"$d/$2\" \"/usr/local/bin/$1\"; shift 2\n"
	"done\n";

/* The last line the install wrote on stderr (held in FD), for the one-line error. */
static void last_line(int fd, char *buf, size_t len)
{
	off_t end = lseek(fd, 0, SEEK_END), start = end > (off_t)len - 1 ? end - (off_t)len + 1 : 0;
	ssize_t n = end > 0 ? pread(fd, buf, len - 1, start) : 0;
	char *nl;

	buf[n > 0 ? n : 0] = '\0';
	while ((nl = strrchr(buf, '\n')) && !nl[1])
		*nl = '\0';
	if ((nl = strrchr(buf, '\n')))
		memmove(buf, nl + 1, strlen(nl + 1) + 1);
	for (char *c = buf; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?'; /* guest text */
}

static int install_one(const char *name, const struct latch_kit_npm *p, const struct latch_npm_tarball *t, char *err,
		       size_t errlen)
{
	char dir[sizeof(INSTALL_ROOT) + LATCH_NPM_NAME_MAX + LATCH_NPM_VERSION_MAX + 4], e[LATCH_ERR_MAX], why[200];
	const char *argv[6 + 2 * LATCH_NPM_BINS_MAX] = { "/bin/sh", "-c", install_script, "sh", dir };
	struct latch_vm_exec_opts o = {
		.timeout_ms = INSTALL_TIMEOUT_MS,
		.io = LATCH_AGENT_IO_STDIN,
		.stdin_fd = t->fd,
		.cwd = "/",
	};
	struct latch_vm_exec_result r;
	int n = 5, errfd = memfd_create("latch-setup-stderr", MFD_CLOEXEC), ret;

	if (errfd < 0)
		return latch_errf(err, errlen, -errno, "setup %s@%s: %s", p->name, p->version, strerror(errno));
	snprintf(dir, sizeof(dir), INSTALL_ROOT "/%s@%s", p->name, p->version);
	for (int b = 0; b < t->n_bins; b++) {
		argv[n++] = t->bins[b].name;
		argv[n++] = t->bins[b].path;
	}
	lseek(t->fd, 0, SEEK_SET); /* the descriptor that was hashed, from its first byte */
	ret = latch_vm_exec(name, argv, &o, -1, errfd, &r, e, sizeof(e));
	if (ret == -EPROTONOSUPPORT)
		ret = latch_errf(err, errlen, ret,
				 "setup %s@%s: the guest's agent cannot take a tarball on stdin; rebuild the image "
				 "(latch image build --force) and start the sandbox again",
				 p->name, p->version);
	else if (ret)
		ret = latch_errf(err, errlen, ret, "setup %s@%s: %s", p->name, p->version, e);
	else if (r.status) {
		last_line(errfd, why, sizeof(why));
		ret = latch_errf(err, errlen, -EIO, "setup %s@%s: installing into %s's guest failed (exit %d)%s%s",
				 p->name, p->version, name, r.status, why[0] ? ": " : "", why);
	}
	close(errfd);
	return ret;
}

int latch_sandbox_kit_setup(const char *name, const struct latch_kit *kit, const struct latch_sandbox_say *say,
			    char *err, size_t errlen)
{
	struct latch_npm_tarball t[LATCH_KIT_SETUP_MAX];
	int ret;

	if (!kit->n_setup)
		return 0;
	if (!latch_vm_running(name))
		return latch_errf(err, errlen, -ESRCH, "%s: its guest is not running; `latch up %s` first", name, name);
	/* every installer verified before the first byte of any goes into the guest */
	ret = latch_sandbox_setup_fetch(kit, t, say, err, errlen);
	if (ret)
		return ret;
	latch_sandbox_sayf(say, LATCH_SANDBOX_NOTE, "setup: all %d installer%s verified; installing into %s's guest",
			   kit->n_setup, kit->n_setup == 1 ? "" : "s", name);
	for (int i = 0; !ret && i < kit->n_setup; i++) {
		ret = install_one(name, &kit->setup[i], &t[i], err, errlen);
		for (int b = 0; !ret && b < t[i].n_bins; b++)
			latch_sandbox_sayf(say, LATCH_SANDBOX_NOTE, "setup %s@%s installed: /usr/local/bin/%s",
					   kit->setup[i].name, kit->setup[i].version, t[i].bins[b].name);
	}
	latch_sandbox_setup_close(kit, t);
	return ret;
}

/* What a template holding the kit's setup is made of: one line per package, its pin and its bins. */
static int setup_inputs(const struct latch_kit *kit, char *buf, size_t len, char *tag, size_t taglen)
{
	size_t off = 0;
	int n;

	for (int i = 0; i < kit->n_setup; i++) {
		const struct latch_kit_npm *p = &kit->setup[i];

		n = snprintf(buf + off, len - off, "setup %s@%s %s", p->name, p->version, p->integrity);
		for (int b = 0; n > 0 && (size_t)n < len - off && b < p->n_bins; b++)
			n += snprintf(buf + off + n, len - off - n, " %s", p->bins[b]);
		if (n < 0 || (size_t)n + 1 >= len - off)
			return -ENAMETOOLONG;
		off += (size_t)n;
		buf[off++] = '\n';
		buf[off] = '\0';
	}
	snprintf(tag, taglen, "s%08x", latch_fnv1a(2166136261u, buf, off));
	return 0;
}

/* The kit's setup installed into a template's guest before it is saved: verified as for a sandbox. */
static int setup_into_template(const char *guest, void *arg, char *err, size_t errlen)
{
	static const struct latch_sandbox_say quiet;

	return latch_sandbox_kit_setup(guest, arg, &quiet, err, errlen);
}

void latch_sandbox_setup_template(const struct latch_kit *kit, struct latch_vm_up_opts *vm, char *buf, size_t len)
{
	if (!kit->n_setup || setup_inputs(kit, buf, len, vm->template_tag, sizeof(vm->template_tag)))
		return; /* a template of the image alone; the setup is installed after the restore */
	vm->template_inputs = buf;
	vm->template_prepare = setup_into_template;
	vm->template_arg = (void *)kit;
}

/* ---- latch kit pin KIT NAME@VERSION */

/* "NAME@VERSION" (NAME may be "@scope/name") into its two halves, checked. */
static int split_spec(const char *spec, char *name, char *version, char *err, size_t errlen)
{
	const char *at = strrchr(spec, '@');
	size_t n = at ? (size_t)(at - spec) : 0;

	if (!at || at == spec || n > LATCH_NPM_NAME_MAX || strlen(at + 1) > LATCH_NPM_VERSION_MAX)
		return latch_errf(err, errlen, -EINVAL, "'%s' is not NAME@VERSION, e.g. @google/gemini-cli@0.61.0",
				  spec);
	memcpy(name, spec, n);
	name[n] = '\0';
	strcpy(version, at + 1);
	if (!latch_npm_name_ok(name))
		return latch_errf(err, errlen, -EINVAL, "'%s' is not an npm package name", name);
	if (!latch_npm_version_ok(version))
		return latch_errf(err, errlen, -EINVAL,
				  "'%s' is not an exact version; pin one, e.g. 1.2.3 (no ranges, tags or latest)",
				  version);
	return 0;
}

int latch_sandbox_kit_pin(const char *kit_name, const char *spec, char *path, size_t pathlen, char *integrity,
			  const struct latch_sandbox_say *say, char *err, size_t errlen)
{
	char name[LATCH_NPM_NAME_MAX + 1], version[LATCH_NPM_VERSION_MAX + 1], dir[PATH_MAX];
	char *text = NULL, *pinned = NULL;
	struct latch_kit_opts o = latch_sandbox_kit_opts(dir, sizeof(dir));
	struct latch_kit *kit = NULL, *check = NULL;
	struct latch_conf conf;
	struct latch_npm_source src;
	size_t len;
	int ret = split_spec(spec, name, version, err, errlen);

	if (ret)
		return ret;
	kit = latch_sandbox_kit_open_checked(kit_name, err, errlen);
	if (!kit)
		return -errno;
	ret = latch_kit_text(kit, &text, &len, err, errlen);
	if (!ret)
		ret = latch_kit_pin_text(text, len, kit->source, name, "0.0.0", "", &pinned, err, errlen);
	free(pinned);
	pinned = NULL;
	if (ret)
		goto out;
	/* the registry is asked only for a kit that has the entry: its answer is the pin */
	ret = npm_source(&conf, &src, err, errlen);
	if (!ret)
		ret = latch_npm_registry_integrity(&src, name, version, integrity, err, errlen);
	if (!ret)
		ret = latch_kit_pin_text(text, len, kit->source, name, version, integrity, &pinned, err, errlen);
	if (ret)
		goto out;
	ret = snprintf(path, pathlen, "%s/%s.yaml", dir, kit->name) >= (int)pathlen ? -ENAMETOOLONG : 0;
	if (!ret)
		check = latch_kit_parse(pinned, strlen(pinned), path, kit->name, &o, err, errlen);
	if (ret || !check) {
		ret = ret ? ret : -EINVAL;
		goto out;
	}
	ret = latch_mkdirs(dir, 0755);
	if (!ret)
		ret = latch_write_atomic(path, 0644, pinned, strlen(pinned));
	if (ret) {
		latch_errf(err, errlen, ret, "%s: %s", path, strerror(-ret));
		goto out;
	}
	latch_sandbox_sayf(say, LATCH_SANDBOX_NOTE, "kit %s: %s pinned to %s (%s), written to %s", kit->name, name,
			   version, integrity, path);
out:
	latch_kit_free(check);
	latch_kit_free(kit);
	free(pinned);
	free(text);
	return ret;
}
