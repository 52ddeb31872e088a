// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_kit_setup.c - a kit's `setup` (kit/npm.c, kit/pin.c): what a kit
 * installs in the guest is pinned so that latch can verify it.
 *
 * kosa8 will not ship a kit whose installer it cannot verify, and neither
 * may latch load one: each refusal here (a range, a tag, a sha1 or missing
 * integrity, a name npm would not publish, a command instead of a package,
 * a bin that leaves the package) stands beside a control that differs only
 * in the field under test and loads.  Parsing only: no network, no root.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit/kit.h"

#define SRC "./agent.yaml"
#define GOOD_INT "sha512-dbQ9A0qBtFJNi6XBkHvfZ6Azpn6PNgH/P8h2MZ67RLlX8hSAVjup39CRWqdRxZv7YXIuhrFaytr8y0jKnkoxnQ=="
#define SHA1_INT "sha1-1IgKK0KqZ4bPYmGEMDvfDxO76I8="

/* A kit installing one package; each of NPM, VERSION, INTEGRITY is left out when NULL. */
static char *kit_text(const char *npm, const char *version, const char *integrity, const char *extra)
{
	char *t = NULL;

	cr_assert_geq(asprintf(&t,
			       "name: agent\n"
			       "command: [agent]\n"
			       "setup:\n"
			       "  - %s%s%s\n"
			       "%s%s%s"
			       "%s%s%s"
			       "%s",
			       npm ? "npm: \"" : "bin: [x]", npm ? npm : "", npm ? "\"" : "",
			       version ? "    version: \"" : "", version ? version : "", version ? "\"\n" : "",
			       integrity ? "    integrity: \"" : "", integrity ? integrity : "",
			       integrity ? "\"\n" : "", extra ? extra : ""),
		      0);
	return t;
}

static struct latch_kit *parse(const char *text, char *err, size_t errlen)
{
	err[0] = '\0';
	return latch_kit_parse(text, strlen(text), SRC, NULL, NULL, err, errlen);
}

/* TEXT must be refused with one line holding WANT; its control CONTROL must load. */
static void refused_beside(const char *text, const char *want, const char *control)
{
	char err[LATCH_ERR_MAX];
	struct latch_kit *k = parse(control, err, sizeof(err));

	cr_assert_not_null(k, "control refused: %s", err);
	cr_expect_eq(k->n_setup, 1);
	latch_kit_free(k);
	k = parse(text, err, sizeof(err));
	cr_expect_null(k, "loaded: %s", text);
	latch_kit_free(k);
	cr_expect(strstr(err, want) != NULL, "'%s' is not in: %s", want, err);
	cr_expect(!strncmp(err, SRC ": ", strlen(SRC) + 2), "names the file: %s", err);
	cr_expect_null(strchr(err, '\n'), "one line: %s", err);
}

Test(kit_setup, a_pinned_package_loads)
{
	char err[LATCH_ERR_MAX];
	char *t = kit_text("@google/gemini-cli", "0.61.0", GOOD_INT, "    bin: [bundle/gemini.js]\n");
	struct latch_kit *k = parse(t, err, sizeof(err));
	static const unsigned char first[] = { 0x75, 0xb4, 0x3d, 0x03 }; /* the hash's first bytes, decoded */

	cr_assert_not_null(k, "%s", err);
	cr_assert_eq(k->n_setup, 1);
	cr_expect_str_eq(k->setup[0].name, "@google/gemini-cli");
	cr_expect_str_eq(k->setup[0].version, "0.61.0");
	cr_expect_str_eq(k->setup[0].integrity, GOOD_INT);
	cr_expect_eq(memcmp(k->setup[0].sha512, first, sizeof(first)), 0);
	cr_assert_eq(k->setup[0].n_bins, 1);
	cr_expect_str_eq(k->setup[0].bins[0], "bundle/gemini.js");
	cr_expect_str_eq(k->warning, "");
	latch_kit_free(k);
	free(t);
}

/* Invariant: a version is exact; a range, a tag or `latest` would let the registry choose what runs. */
Test(kit_setup, a_version_that_is_not_exact_is_refused)
{
	static const char *const bad[] = { "^0.61.0", "~0.61.0",	 "latest", "0.61",   "0.61.x", ">=0.61.0",
					   "v0.61.0", "0.61.0 || 1.0.0", "01.2.3", "1.2.3-", "*" };
	char *control = kit_text("@google/gemini-cli", "0.61.0", GOOD_INT, NULL);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = kit_text("@google/gemini-cli", bad[i], GOOD_INT, NULL);

		refused_beside(t, "is not an exact version", control);
		free(t);
	}
	free(control);
	cr_expect(latch_npm_version_ok("0.171.0-linux-x64"), "a prerelease is exact");
	cr_expect(latch_npm_version_ok("1.2.3+build.5"));
}

/* Invariant: sha1 is refused as unverifiable: it can be matched by a tarball an attacker chose. */
Test(kit_setup, a_sha1_integrity_is_unverifiable)
{
	char *t = kit_text("@google/gemini-cli", "0.61.0", SHA1_INT, NULL);
	char *control = kit_text("@google/gemini-cli", "0.61.0", GOOD_INT, NULL);

	refused_beside(t, "setup \"@google/gemini-cli\": unverifiable: integrity is sha1", control);
	free(t);
	free(control);
}

/* Invariant: a package without its integrity is unverifiable, and so refused. */
Test(kit_setup, a_missing_integrity_is_unverifiable)
{
	char *t = kit_text("@google/gemini-cli", "0.61.0", NULL, NULL);
	char *control = kit_text("@google/gemini-cli", "0.61.0", GOOD_INT, NULL);
	char err[LATCH_ERR_MAX];

	refused_beside(t,
		       "unverifiable: integrity is missing; give the registry's sha512 (npm view "
		       "@google/gemini-cli@0.61.0 dist.integrity)",
		       control);
	free(t);
	/* nor is half a hash, or two of them (npm's "sha512-... sha1-...") */
	t = kit_text("@google/gemini-cli", "0.61.0", "sha512-dbQ9A0qBtFJNi6XBkHvfZ6Azpn6PNgH", NULL);
	cr_expect_null(parse(t, err, sizeof(err)));
	cr_expect(strstr(err, "unverifiable") != NULL, "%s", err);
	free(t);
	t = kit_text("@google/gemini-cli", "0.61.0", GOOD_INT " " SHA1_INT, NULL);
	cr_expect_null(parse(t, err, sizeof(err)));
	cr_expect(strstr(err, "more than one hash") != NULL, "%s", err);
	free(t);
	free(control);
}

/* Invariant: only a name npm would publish: it goes into a URL and a directory in the guest. */
Test(kit_setup, a_bad_package_name_is_refused)
{
	static const char *const bad[] = { "Gemini", "../etc", "@google/../x", "a b",	 ".hidden", "_under",
					   "@scope", "@/x",    "a/b",	       "@s/x/y", "x?y=1",   "a%b" };
	char *control = kit_text("gemini-cli", "0.61.0", GOOD_INT, NULL);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = kit_text(bad[i], "0.61.0", GOOD_INT, NULL);

		refused_beside(t, "is not an npm package name", control);
		free(t);
	}
	free(control);
}

/* Invariant: an entry must name its npm package (a bare `bin` installs nothing latch can check). */
Test(kit_setup, an_entry_without_npm_is_refused)
{
	char *t = kit_text(NULL, "0.61.0", GOOD_INT, NULL);
	char *control = kit_text("gemini-cli", "0.61.0", GOOD_INT, NULL);

	refused_beside(t, "setup 1: npm is missing", control);
	free(t);
	free(control);
}

/* Invariant: a kosa8-style setup command is refused, never run: latch can't verify what it fetches. */
Test(kit_setup, a_setup_command_is_refused)
{
	char err[LATCH_ERR_MAX];
	const char *t = "name: agent\nsetup:\n  - npm i -g @google/gemini-cli\n";
	struct latch_kit *k = parse(t, err, sizeof(err));

	cr_expect_null(k);
	latch_kit_free(k);
	cr_expect(strstr(err, "is a command, and latch will not run an installer it cannot verify") != NULL, "%s", err);
	cr_expect(strstr(err, SRC ":3:") != NULL, "names the line: %s", err);
}

/* Invariant: a bin stays inside its package: it becomes a link in the guest's /usr/local/bin. */
Test(kit_setup, a_bin_outside_the_package_is_refused)
{
	static const char *const bad[] = { "../../bin/sh", "/usr/bin/sh", "a/../../b", "./", "a//b", "a b", "." };
	char *control = kit_text("gemini-cli", "0.61.0", GOOD_INT, "    bin: [vendor/bin/codex]\n");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char extra[128], *t;

		snprintf(extra, sizeof(extra), "    bin: [\"%s\"]\n", bad[i]);
		t = kit_text("gemini-cli", "0.61.0", GOOD_INT, extra);
		refused_beside(t, "must be a relative path inside the package", control);
		free(t);
	}
	free(control);
}

Test(kit_setup, a_package_given_twice_is_refused)
{
	char *control = kit_text("gemini-cli", "0.61.0", GOOD_INT, NULL);
	char *t = kit_text("gemini-cli", "0.61.0", GOOD_INT,
			   "  - npm: gemini-cli\n    version: 0.62.0\n    integrity: \"" GOOD_INT "\"\n");

	refused_beside(t, "is given twice", control);
	free(t);
	free(control);
}

/* Invariant: `kit pin` changes the entry's version and integrity and not one other byte. */
Test(kit_setup, pin_rewrites_only_the_two_values)
{
	const char *text = "# mine\nname: agent\nsetup:\n  - {npm: other, version: 1.0.0, integrity: \"" GOOD_INT
			   "\"}\n  - npm: \"@google/gemini-cli\"   # the CLI\n    integrity: '" SHA1_INT
			   "'\n    version: 0.60.0\n";
	const char *want = "# mine\nname: agent\nsetup:\n  - {npm: other, version: 1.0.0, integrity: \"" GOOD_INT
			   "\"}\n  - npm: \"@google/gemini-cli\"   # the CLI\n    integrity: \"" GOOD_INT
			   "\"\n    version: \"0.61.0\"\n";
	char err[LATCH_ERR_MAX] = "", *out = NULL;
	struct latch_kit *k;

	cr_assert_eq(latch_kit_pin_text(text, strlen(text), SRC, "@google/gemini-cli", "0.61.0", GOOD_INT, &out, err,
					sizeof(err)),
		     0, "%s", err);
	cr_expect_str_eq(out, want);
	k = parse(out, err, sizeof(err));
	cr_expect_not_null(k, "the pinned text loads: %s", err);
	latch_kit_free(k);
	free(out);
	/* a package the kit doesn't install is not added behind the user's back */
	cr_expect_eq(latch_kit_pin_text(text, strlen(text), SRC, "absent", "1.0.0", GOOD_INT, &out, err, sizeof(err)),
		     -ENOENT);
	cr_expect(strstr(err, "no setup entry for npm package absent") != NULL, "%s", err);
}

Test(kit_setup, tarball_url_is_npms_layout)
{
	struct latch_kit_npm p = { .name = "@google/gemini-cli", .version = "0.61.0" };
	char url[512];

	cr_assert_eq(latch_npm_tarball_url("https://registry.npmjs.org", &p, url, sizeof(url)), 0);
	cr_expect_str_eq(url, "https://registry.npmjs.org/@google/gemini-cli/-/gemini-cli-0.61.0.tgz");
	strcpy(p.name, "left-pad");
	cr_assert_eq(latch_npm_tarball_url("https://192.0.2.1:8443/npm", &p, url, sizeof(url)), 0);
	cr_expect_str_eq(url, "https://192.0.2.1:8443/npm/left-pad/-/left-pad-0.61.0.tgz");
}
