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
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "sandbox/sandbox.h"

static void note(const struct latch_sandbox_say *say, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const struct latch_sandbox_say *say, const char *fmt, ...)
{
	char line[LATCH_ERR_MAX];
	va_list ap;

	if (!say || !say->fn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	say->fn(say->arg, LATCH_SANDBOX_NOTE, line);
}

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
	ret = npm_source(&conf, &src, err, errlen);
	for (int i = 0; !ret && i < kit->n_setup; i++) {
		const struct latch_kit_npm *p = &kit->setup[i];

		ret = latch_npm_fetch(p, &src, &out[i], err, errlen);
		if (!ret)
			note(say, "setup %s@%s verified: sha512 matches the kit's pin (%s, %llu KiB)", p->name,
			     p->version, out[i].cached ? "cached" : "fetched", (unsigned long long)(out[i].size >> 10));
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
	note(say, "kit %s: %s pinned to %s (%s), written to %s", kit->name, name, version, integrity, path);
out:
	latch_kit_free(check);
	latch_kit_free(kit);
	free(pinned);
	free(text);
	return ret;
}
