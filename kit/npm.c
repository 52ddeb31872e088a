// SPDX-License-Identifier: GPL-2.0-only
/*
 * npm.c - a kit's `setup`: npm packages pinned by exact version and sha512.
 *
 * A kit installs the agent's tool before the agent gets a key, so an
 * installer latch cannot verify is refused at load, with the fix: a range
 * or a tag (`^1.2`, `latest`) would let the registry choose what runs, and
 * a sha1 integrity (or none) can't be held against a tarball an attacker
 * chose.  kosa8: "will not ship a kit whose installer it cannot verify".
 */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit/raw.h"

#define SHA512_PREFIX "sha512-"
#define SHA512_B64_LEN 88 /* 64 bytes in base64, with its "==" */

/* One part of a name: npm's URL-safe characters, not starting with '.' or '_' (validate-npm-package-name). */
static bool npm_part_ok(const char *s, size_t n)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz0123456789-._~";

	if (!n || s[0] == '.' || s[0] == '_')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr(ok, s[i]) || !s[i])
			return false;
	return true;
}

bool latch_npm_bin_path_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || s[0] == '/' || s[n - 1] == '/' || strstr(s, "//") ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/") != n)
		return false;
	/* no component of dots only: "." and ".." would leave the package, "..." is no name */
	for (const char *c = s; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL) {
		size_t len = strcspn(c, "/");

		if (strspn(c, ".") >= len)
			return false;
	}
	return true;
}

bool latch_npm_name_ok(const char *s)
{
	size_t n = strlen(s);
	const char *slash;

	if (!n || n > LATCH_NPM_NAME_MAX)
		return false;
	if (s[0] != '@')
		return npm_part_ok(s, n);
	slash = strchr(s, '/');
	return slash && npm_part_ok(s + 1, slash - s - 1) && npm_part_ok(slash + 1, strlen(slash + 1));
}

/* Dot-separated identifiers of [0-9A-Za-z-]; NUMERIC ones without a leading zero (semver 2.0.0). */
static bool semver_ids_ok(const char *s, size_t n, bool numeric)
{
	size_t start = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		size_t len = i - start;
		const char *id = s + start;
		bool digits = len && strspn(id, "0123456789") >= len;

		if (!len || strspn(id, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-") < len)
			return false;
		if ((numeric && !digits) || (digits && len > 1 && id[0] == '0'))
			return false;
		start = i + 1;
	}
	return true;
}

bool latch_npm_version_ok(const char *s)
{
	size_t n = strlen(s), core = strcspn(s, "-+"), dots = 0;

	if (!n || n > LATCH_NPM_VERSION_MAX)
		return false;
	for (size_t i = 0; i < core; i++)
		dots += s[i] == '.';
	if (dots != 2 || !semver_ids_ok(s, core, true))
		return false;
	if (s[core] == '-') {
		size_t pre = strcspn(s + core + 1, "+");

		if (!semver_ids_ok(s + core + 1, pre, false))
			return false;
		core += 1 + pre;
	}
	return s[core] != '+' || semver_ids_ok(s + core + 1, strlen(s + core + 1), false);
}

int latch_npm_integrity_parse(const char *s, unsigned char sha512[LATCH_SHA512_LEN])
{
	unsigned char out[SHA512_B64_LEN]; /* EVP_DecodeBlock writes 3 bytes a 4 characters, padding included */

	if (strncmp(s, SHA512_PREFIX, strlen(SHA512_PREFIX)))
		return -EINVAL;
	s += strlen(SHA512_PREFIX);
	if (strlen(s) != SHA512_B64_LEN || strcmp(s + SHA512_B64_LEN - 2, "==") ||
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") != SHA512_B64_LEN - 2)
		return -EINVAL;
	if (EVP_DecodeBlock(out, (const unsigned char *)s, SHA512_B64_LEN) != 66)
		return -EINVAL;
	memcpy(sha512, out, LATCH_SHA512_LEN);
	return 0;
}

/* Why INTEGRITY can't be held against a tarball, in one phrase, or NULL when it can. */
static const char *integrity_problem(const char *integrity)
{
	unsigned char sha[LATCH_SHA512_LEN];

	if (!integrity || !*integrity)
		return "integrity is missing";
	if (strchr(integrity, ' '))
		return "integrity holds more than one hash; give the sha512 one alone";
	if (!strncmp(integrity, "sha1-", 5))
		return "integrity is sha1, which an attacker can match";
	if (strncmp(integrity, SHA512_PREFIX, strlen(SHA512_PREFIX)))
		return "integrity is not sha512";
	if (latch_npm_integrity_parse(integrity, sha))
		return "integrity is not sha512- and 88 base64 characters";
	return NULL;
}

static int check_one(struct kit_ctx *c, const struct raw_setup *r, struct latch_kit_npm *p)
{
	const char *why;

	if (!r->npm)
		return kit_fail(c, "npm is missing; latch installs npm packages: {npm: NAME, version: EXACT, "
				   "integrity: sha512-...}");
	if (!latch_npm_name_ok(r->npm))
		return kit_fail(c,
				"npm \"%.*s\" is not an npm package name (lower-case a-z, 0-9, - . _ ~, "
				"optionally @scope/, at most %d characters)",
				LATCH_NPM_NAME_MAX, r->npm, LATCH_NPM_NAME_MAX);
	snprintf(c->where, sizeof(c->where), "setup \"%.60s\": ", r->npm);
	if (!r->version)
		return kit_fail(c, "version is missing; pin an exact version, e.g. version: 1.2.3");
	if (!latch_npm_version_ok(r->version))
		return kit_fail(c,
				"version \"%.64s\" is not an exact version; pin one, e.g. 1.2.3 (no ranges, tags or "
				"latest: the registry would choose what runs)",
				r->version);
	why = integrity_problem(r->integrity);
	if (why)
		return kit_fail(c, "unverifiable: %s; give the registry's sha512 (npm view %s@%s dist.integrity)", why,
				r->npm, r->version);
	strcpy(p->name, r->npm);
	strcpy(p->version, r->version);
	strcpy(p->integrity, r->integrity);
	if (r->bin_count > LATCH_NPM_BINS_MAX)
		return kit_fail(c, "bin has more than %d entries", LATCH_NPM_BINS_MAX);
	for (unsigned i = 0; i < r->bin_count; i++) {
		/* a path inside the package: it becomes a link in the guest's /usr/local/bin */
		if (!latch_npm_bin_path_ok(r->bin[i]) || strlen(r->bin[i]) > LATCH_KIT_PATH_MAX)
			return kit_fail(c,
					"bin \"%.80s\" must be a relative path inside the package (a-z, A-Z, 0-9, "
					"- . _ /, no '..'), e.g. bin/tool",
					r->bin[i]);
		strcpy(p->bins[p->n_bins++], r->bin[i]);
	}
	return latch_npm_integrity_parse(p->integrity, p->sha512);
}

int kit_check_setup(struct kit_ctx *c, const struct raw_kit *raw, struct latch_kit *kit)
{
	if (raw->setup_count > LATCH_KIT_SETUP_MAX)
		return kit_fail(c, "setup has more than %d packages", LATCH_KIT_SETUP_MAX);
	kit->setup = calloc(raw->setup_count + 1, sizeof(*kit->setup));
	if (!kit->setup)
		return latch_errf(c->err, c->errlen, -ENOMEM, "%s: out of memory", c->source);
	for (unsigned i = 0; i < raw->setup_count; i++) {
		snprintf(c->where, sizeof(c->where), "setup %u: ", i + 1);
		if (check_one(c, &raw->setup[i], &kit->setup[i]))
			return -EINVAL;
		for (int j = 0; j < kit->n_setup; j++)
			if (!strcmp(kit->setup[j].name, kit->setup[i].name))
				return kit_fail(c, "is given twice; keep one version");
		kit->n_setup++;
	}
	c->where[0] = '\0';
	return 0;
}

int latch_npm_tarball_url(const char *registry, const struct latch_kit_npm *p, char *buf, size_t len)
{
	const char *base = strrchr(p->name, '/');
	int n;

	/* npm's layout: REGISTRY/@scope/name/-/name-VERSION.tgz (the scope's '/' stays as it is) */
	base = base ? base + 1 : p->name;
	n = snprintf(buf, len, "%s/%s/-/%s-%s.tgz", registry, p->name, base, p->version);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
