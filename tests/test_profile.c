// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_profile.c - egress profiles (profile/): the Kagebox format and
 * latch's additions, extends chains, overlays, file safety and name matching.
 *
 * A profile decides where a sandbox may go, so these tests hold it to: every
 * line form means exactly one thing, and a bad line anywhere refuses the whole
 * load with `FILE:LINE:` pointing at it; a chain is laid out base first with
 * the overlay last; cycles, unknown names and runaway depth are refused by
 * name; a file that someone else could rewrite, or a link, is never read; and
 * a wildcard never covers its apex or a look-alike suffix.  Files live in a
 * fresh mkdtemp directory owned by the test's own uid, so no root is needed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/profile.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/latch-profile-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		cr_log_warn("could not remove %s", dir);
}

/* DIR/NAME with TEXT and exactly MODE (no umask); the path is returned in a static buffer. */
static const char *put(const char *name, const char *text, mode_t mode)
{
	static char path[4][256];
	static int slot;
	char *p = path[slot++ % 4];
	int fd;

	snprintf(p, sizeof(path[0]), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "create %s", p);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
	return p;
}

static void load_ok(const char *name, const char *overlay, struct latch_profile *p)
{
	char err[LATCH_ERR_MAX] = "";
	int rc = latch_profile_load(dir, name, overlay, p, err, sizeof(err));

	cr_assert_eq(rc, 0, "load %s: %d %s", name, rc, err);
}

/* Loading NAME fails with RC and a message that starts with PREFIX and contains WANT. */
static void load_refused(const char *name, const char *overlay, int rc, const char *prefix, const char *want)
{
	char err[LATCH_ERR_MAX] = "";
	struct latch_profile p;
	int got = latch_profile_load(dir, name, overlay, &p, err, sizeof(err));

	cr_expect_eq(got, rc, "load %s: want %d, got %d (%s)", name, rc, got, err);
	cr_expect_null(p.entries, "a refused load left entries");
	cr_expect_eq(p.n, 0);
	if (prefix)
		cr_expect_eq(strncmp(err, prefix, strlen(prefix)), 0, "message should start '%s': %s", prefix, err);
	if (want)
		cr_expect_not_null(strstr(err, want), "message should say '%s': %s", want, err);
	latch_profile_free(&p);
}

static void fmt(const struct latch_pentry *pe, char *buf, size_t len)
{
	latch_pentry_format(pe, buf, len);
}

/* ---- one line each: the forms, their canonical spelling and kind */

Test(profile_parse, every_line_form_means_one_thing)
{
	static const struct {
		const char *line;
		enum latch_pentry_kind kind;
		const char *canonical;
	} cases[] = {
		{ "pypi.org", LATCH_PENTRY_HOST, "pypi.org:443,80" },
		{ "pypi.org:443", LATCH_PENTRY_HOST, "pypi.org:443" },
		{ "api.example.com:443,8443", LATCH_PENTRY_HOST, "api.example.com:443,8443" },
		{ "api.example.com:8000-8100", LATCH_PENTRY_HOST, "api.example.com:8000-8100" },
		{ "PyPI.Org.", LATCH_PENTRY_HOST, "pypi.org:443,80" },
		{ "pypi.org:443/tcp", LATCH_PENTRY_HOST, "pypi.org:443/tcp" },
		{ "example.com/udp", LATCH_PENTRY_HOST, "example.com:443,80/udp" },
		{ "example.com/icmp", LATCH_PENTRY_HOST, "example.com/icmp" },
		{ "*.example.com", LATCH_PENTRY_WILDCARD, "*.example.com:443,80" },
		{ "*.Example.COM:443", LATCH_PENTRY_WILDCARD, "*.example.com:443" },
		{ "*.example.com:443/TCP", LATCH_PENTRY_WILDCARD, "*.example.com:443/tcp" },
		{ "203.0.113.0/24:443", LATCH_PENTRY_CIDR, "203.0.113.0/24:443" },
		{ "198.51.100.7", LATCH_PENTRY_CIDR, "198.51.100.7:443,80" },
		{ "198.51.100.7:22", LATCH_PENTRY_CIDR, "198.51.100.7:22" },
		{ "203.0.113.0/24:53/udp", LATCH_PENTRY_CIDR, "203.0.113.0/24:53/udp" },
		{ "198.51.100.7/icmp", LATCH_PENTRY_CIDR, "198.51.100.7/icmp" },
		{ "[2001:db8::/32]:443", LATCH_PENTRY_CIDR, "[2001:db8::/32]:443" },
		{ "2001:db8::/32", LATCH_PENTRY_CIDR, "[2001:db8::/32]:443,80" },
		{ "2001:db8::1", LATCH_PENTRY_CIDR, "[2001:db8::1]:443,80" },
		{ "[2001:db8::1]:8000-8100/tcp", LATCH_PENTRY_CIDR, "[2001:db8::1]:8000-8100/tcp" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[LATCH_ERR_MAX] = "", ext[LATCH_PROFILE_NAME_MAX + 1], got[LATCH_ENTRY_TEXT_MAX + 8];
		struct latch_pentry *v;
		int n, rc;

		rc = latch_profile_parse(cases[i].line, "t.txt", &v, &n, ext, sizeof(ext), err, sizeof(err));
		cr_expect_eq(rc, 0, "'%s' refused: %s", cases[i].line, err);
		if (rc)
			continue;
		cr_expect_eq(n, 1, "'%s' gave %d entries", cases[i].line, n);
		cr_expect_eq(v[0].kind, cases[i].kind, "'%s': kind %d", cases[i].line, v[0].kind);
		fmt(&v[0], got, sizeof(got));
		cr_expect_str_eq(got, cases[i].canonical, "'%s' read as '%s'", cases[i].line, got);
		cr_expect_str_eq(v[0].source, "t.txt");
		cr_expect_eq(v[0].line, 1);
		cr_expect_str_eq(ext, "");
		free(v);
	}
}

Test(profile_parse, default_ports_are_443_then_80_and_proto_any)
{
	const char *text = "pypi.org\n*.example.com\n203.0.113.0/24\n2001:db8::/32\n";
	char err[LATCH_ERR_MAX] = "";
	struct latch_pentry *v;
	int n;

	cr_assert_eq(latch_profile_parse(text, "t.txt", &v, &n, NULL, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(n, 4);
	for (int i = 0; i < n; i++) {
		cr_expect_eq(v[i].entry.proto, LATCH_PROTO_ANY, "entry %d", i);
		cr_expect_eq(v[i].entry.n_ports, 2, "entry %d", i);
		cr_expect_eq(v[i].entry.ports[0].lo, 443);
		cr_expect_eq(v[i].entry.ports[0].hi, 443);
		cr_expect_eq(v[i].entry.ports[1].lo, 80);
		cr_expect_eq(v[i].entry.ports[1].hi, 80);
	}
	cr_expect_str_eq(v[0].name, "pypi.org");
	cr_expect_str_eq(v[1].name, "example.com");
	cr_expect_eq(v[2].entry.prefixlen, 24);
	cr_expect_eq(v[3].entry.prefixlen, 32);
	cr_expect_eq(v[3].entry.addr.family, AF_INET6);
	free(v);
}

Test(profile_parse, comments_blanks_and_whitespace_are_skipped)
{
	const char *text = "# a comment\n"
			   "\n"
			   "   \t\n"
			   "  pypi.org  \n"
			   "\tcrates.io:443   # trailing comment\n"
			   "x.example.org#no blank before the hash\n"
			   "windows.example.org\r\n"
			   "    # an indented comment\n"
			   "last.example.org"; /* no final newline */
	char err[LATCH_ERR_MAX] = "";
	struct latch_pentry *v;
	int n;

	cr_assert_eq(latch_profile_parse(text, "t.txt", &v, &n, NULL, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(n, 5);
	cr_expect_str_eq(v[0].name, "pypi.org");
	cr_expect_eq(v[0].line, 4);
	cr_expect_str_eq(v[1].name, "crates.io");
	cr_expect_eq(v[1].line, 5);
	cr_expect_str_eq(v[2].name, "x.example.org");
	cr_expect_str_eq(v[3].name, "windows.example.org");
	cr_expect_str_eq(v[4].name, "last.example.org");
	cr_expect_eq(v[4].line, 9);
	free(v);
}

Test(profile_parse, an_empty_text_is_an_empty_profile)
{
	char err[LATCH_ERR_MAX] = "", ext[LATCH_PROFILE_NAME_MAX + 1] = "x";
	struct latch_pentry *v = (void *)1;
	int n = -1;

	cr_assert_eq(latch_profile_parse("# nothing\n\n", "t.txt", &v, &n, ext, sizeof(ext), err, sizeof(err)), 0);
	cr_expect_eq(n, 0);
	cr_expect_str_eq(ext, "");
	free(v);
}

Test(profile_parse, extends_directive_forms)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "# extends: research\n", "research" },
		{ "#extends:research\n", "research" },
		{ "  # Extends :  dev   # the base\n", "dev" },
		{ "pypi.org\n\n# extends: my-base_1.0\n", "my-base_1.0" },
		{ "# extends the research list by hand\n", "" }, /* prose, not a directive */
		{ "# extended: research\n", "" },
		{ "pypi.org # extends: research\n", "" }, /* a trailing comment is only a comment */
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char err[LATCH_ERR_MAX] = "", ext[LATCH_PROFILE_NAME_MAX + 1];
		struct latch_pentry *v;
		int n;

		cr_expect_eq(latch_profile_parse(cases[i].text, "t.txt", &v, &n, ext, sizeof(ext), err, sizeof(err)), 0,
			     "'%s': %s", cases[i].text, err);
		cr_expect_str_eq(ext, cases[i].want, "'%s' extends '%s'", cases[i].text, ext);
		free(v);
	}
}

/*
 * Each bad line comes third, after a good line and a comment, so the message
 * must start "t.txt:3: " and say what to do.  Nothing comes back.
 */
Test(profile_parse, bad_lines_are_refused_with_file_and_line)
{
	static const struct {
		const char *line, *want;
	} cases[] = {
		{ "exa mple.com", "one entry a line" },
		{ "pypi.org files.pythonhosted.org", "one entry a line" },
		{ "http://pypi.org", "is a URL" },
		{ "https://pypi.org/simple", "is a URL" },
		{ "pypi.org/simple", "has a path" },
		{ "pypi.org:", "empty port list" },
		{ "pypi.org:0", "port '0'" },
		{ "pypi.org:70000", "port '70000'" },
		{ "pypi.org:https", "port 'https'" },
		{ "pypi.org:443,,80", "empty part" },
		{ "pypi.org:90-80", "runs backwards" },
		{ "pypi.org:1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "more than 16" },
		{ "pypi.org:443/icmp", "ICMP has no ports" },
		{ "*", "'open'" },
		{ "*example.com", "'*.' and then a domain" },
		{ "**.example.com", "'*.' and then a domain" },
		{ "*.*.example.com", "'*' may only be the whole first label" },
		{ "a.*.example.com", "'*' may only be the whole first label" },
		{ "*.com", "whole top-level domain" },
		{ "*.", "is empty" },
		{ "-bad.example.com", "starting with '-'" },
		{ "bad-.example.com", "ending in '-'" },
		{ "a..example.com", "empty label" },
		{ "ex@mple.com", "a character other than" },
		{ "example.123", "all-digit label" },
		{ "10.0.0.300", "not an IPv4 or IPv6 address" },
		{ "1.2.3.4.5", "not an IPv4 or IPv6 address" },
		{ "203.0.113.1/24", "host bits" },
		{ "203.0.113.0/33", "prefix length" },
		{ "[203.0.113.1]:443", "brackets are for IPv6" },
		{ "[2001:db8::1", "without ']'" },
		{ "2001:db8::zz", "not an IPv4 or IPv6 address" },
		{ "# extends:", "needs a profile name" },
		{ "# extends: a b", "takes one profile name" },
		{ "# extends: ../x", "has '/'" },
		{ "# extends: ..", "must not start with '.'" },
		{ "# extends: open", "cannot extend 'open'" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char text[256], err[LATCH_ERR_MAX] = "", ext[LATCH_PROFILE_NAME_MAX + 1];
		struct latch_pentry *v = (void *)1;
		int n = -1, rc;

		snprintf(text, sizeof(text), "pypi.org\n# fine so far\n%s\ncrates.io\n", cases[i].line);
		rc = latch_profile_parse(text, "t.txt", &v, &n, ext, sizeof(ext), err, sizeof(err));
		cr_expect_eq(rc, -EINVAL, "'%s' accepted (rc %d)", cases[i].line, rc);
		cr_expect_null(v, "'%s': entries came back", cases[i].line);
		cr_expect_eq(n, 0);
		cr_expect_eq(strncmp(err, "t.txt:3: ", 9), 0, "'%s': message lacks 't.txt:3: ': %s", cases[i].line,
			     err);
		cr_expect_not_null(strstr(err, cases[i].want), "'%s': message lacks '%s': %s", cases[i].line,
				   cases[i].want, err);
	}
}

Test(profile_parse, a_second_extends_is_refused_naming_the_first)
{
	char err[LATCH_ERR_MAX] = "", ext[LATCH_PROFILE_NAME_MAX + 1];
	struct latch_pentry *v;
	int n;

	cr_expect_eq(latch_profile_parse("# extends: research\npypi.org\n# extends: dev\n", "t.txt", &v, &n, ext,
					 sizeof(ext), err, sizeof(err)),
		     -EINVAL);
	cr_expect_str_eq(err, "t.txt:3: a second '# extends:' (the first is on line 1); a profile extends at most "
			      "one other");
}

Test(profile_parse, a_line_too_long_is_refused)
{
	char *text = malloc(LATCH_PROFILE_LINE_MAX + 16), err[LATCH_ERR_MAX] = "";
	struct latch_pentry *v;
	int n;

	strcpy(text, "ok.example\n#");
	memset(text + strlen(text), 'x', LATCH_PROFILE_LINE_MAX);
	text[11 + LATCH_PROFILE_LINE_MAX] = '\0';
	cr_expect_eq(latch_profile_parse(text, "t.txt", &v, &n, NULL, 0, err, sizeof(err)), -EINVAL);
	cr_expect_eq(strncmp(err, "t.txt:2: line is longer than", 28), 0, "%s", err);
	free(text);
}

Test(profile_parse, a_long_source_keeps_its_tail)
{
	char source[300], err[LATCH_ERR_MAX] = "";
	struct latch_pentry *v;
	size_t len;
	int n;

	memset(source, 'd', 250);
	strcpy(source + 250, "/my-profile.txt");
	cr_assert_eq(latch_profile_parse("pypi.org\n", source, &v, &n, NULL, 0, err, sizeof(err)), 0, "%s", err);
	len = strlen(v[0].source);
	cr_expect_eq(len, 127); /* the header promises: a path over 127 bytes keeps its tail */
	cr_expect_eq(strncmp(v[0].source, "...", 3), 0, "%s", v[0].source);
	cr_expect_str_eq(v[0].source + len - 15, "/my-profile.txt");
	free(v);
}

/* ---- names */

Test(profile_name, accepts_names_that_stay_in_their_directory)
{
	static const char *const ok[] = { "my-profile_1.0", "dev", "a", "A.b-c_D",
					  "0123456789012345678901234567890123456789012345678901234567890123" };
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
		cr_expect_eq(latch_profile_name_check(ok[i], err, sizeof(err)), 0, "'%s': %s", ok[i], err);
}

Test(profile_name, refuses_paths_dots_and_lengths)
{
	static const char *const bad[] = {
		"../x",
		"a/b",
		"..",
		".",
		"",
		".hidden",
		"-x",
		"a..b",
		"a b",
		"a:b",
		"a*",
		"dev.txt/",
		"01234567890123456789012345678901234567890123456789012345678901234", /* 65 */
	};
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		cr_expect_eq(latch_profile_name_check(bad[i], err, sizeof(err)), -EINVAL, "'%s' accepted", bad[i]);
		cr_expect_neq(err[0], '\0', "'%s' refused without a message", bad[i]);
	}
}

Test(profile_name, load_checks_the_name_before_any_path)
{
	char err[LATCH_ERR_MAX] = "";
	struct latch_profile p;

	cr_expect_eq(latch_profile_load("/etc", "../etc/passwd", NULL, &p, err, sizeof(err)), -EINVAL);
	cr_expect_not_null(strstr(err, "profile name"), "%s", err);
}

/* ---- loading: files, built-ins, extends and overlays */

TestSuite(profile_load, .init = setup, .fini = teardown);

Test(profile_load, builtins_load_without_a_directory)
{
	static const char *const names[] = { "sealed", "research", "dev" };
	char err[LATCH_ERR_MAX] = "";
	struct latch_profile p;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		cr_assert_eq(latch_profile_load(NULL, names[i], NULL, &p, err, sizeof(err)), 0, "%s: %s", names[i],
			     err);
		cr_expect_str_eq(p.name, names[i]);
		cr_expect_not(p.open);
		if (!strcmp(names[i], "sealed"))
			cr_expect_eq(p.n, 0, "sealed has %d entries", p.n);
		else
			cr_expect_gt(p.n, 5, "%s has only %d entries", names[i], p.n);
		latch_profile_free(&p);
	}
}

Test(profile_load, dev_is_research_first_then_its_own)
{
	static const char *const allowed[] = {
		"pypi.org",
		"files.pythonhosted.org",
		"registry.npmjs.org",
		"crates.io",
		"static.crates.io",
		"index.crates.io",
		"proxy.golang.org",
		"sum.golang.org",
		"deb.debian.org",
		"security.debian.org",
		"github.com",
		"codeload.github.com",
		"en.wikipedia.org",
		"objects.githubusercontent.com",
		"duckduckgo.com",
		"html.duckduckgo.com",
		"arxiv.org",
		"raw.githubusercontent.com",
		"export.arxiv.org",
		"docs.python.org",
		"developer.mozilla.org",
		"requests.readthedocs.io",
	};
	struct latch_entry ports;
	struct latch_profile p;

	load_ok("dev", NULL, &p);
	cr_assert_gt(p.n, 2);
	cr_expect_str_eq(p.entries[0].source, "builtin:research");
	cr_expect_str_eq(p.entries[p.n - 1].source, "builtin:dev");
	for (int i = 1; i < p.n; i++)
		cr_expect(!(strcmp(p.entries[i - 1].source, "builtin:dev") == 0 &&
			    strcmp(p.entries[i].source, "builtin:research") == 0),
			  "a research entry after a dev entry at %d", i);
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		cr_expect(latch_profile_match(&p, allowed[i], &ports), "dev does not allow %s", allowed[i]);
	cr_expect_not(latch_profile_match(&p, "evil.example", &ports));
	cr_expect_not(latch_profile_match(&p, "githubusercontent.com", &ports), "a wildcard covered its apex");
	latch_profile_free(&p);
}

Test(profile_load, a_file_shadows_the_builtin_of_its_name)
{
	struct latch_profile p;

	put("research.txt", "only.example.org\n", 0644);
	load_ok("research", NULL, &p);
	cr_assert_eq(p.n, 1);
	cr_expect_str_eq(p.entries[0].name, "only.example.org");
	cr_expect_not_null(strstr(p.entries[0].source, "/research.txt"), "%s", p.entries[0].source);
	latch_profile_free(&p);

	/* and the built-in dev now builds on the file */
	load_ok("dev", NULL, &p);
	cr_expect_str_eq(p.entries[0].name, "only.example.org");
	latch_profile_free(&p);
}

Test(profile_load, extends_chain_is_laid_out_base_first)
{
	struct latch_profile p;
	char path[256];

	put("c.txt", "c.example\n", 0644);
	put("b.txt", "# extends: c\nb1.example\nb2.example\n", 0644);
	put("a.txt", "a.example\n# extends: b\n", 0644);
	load_ok("a", NULL, &p);
	cr_assert_eq(p.n, 4);
	cr_expect_str_eq(p.entries[0].name, "c.example");
	cr_expect_str_eq(p.entries[1].name, "b1.example");
	cr_expect_str_eq(p.entries[2].name, "b2.example");
	cr_expect_str_eq(p.entries[3].name, "a.example");
	snprintf(path, sizeof(path), "%s/b.txt", dir);
	cr_expect_str_eq(p.entries[1].source, path);
	cr_expect_eq(p.entries[1].line, 2);
	cr_expect_eq(p.entries[3].line, 1);
	cr_expect_str_eq(p.name, "a");
	latch_profile_free(&p);
}

Test(profile_load, a_file_may_extend_a_builtin)
{
	struct latch_profile p;

	put("mine.txt", "# extends: research\nmine.example\n", 0644);
	load_ok("mine", NULL, &p);
	cr_assert_gt(p.n, 1);
	cr_expect_str_eq(p.entries[0].source, "builtin:research");
	cr_expect_str_eq(p.entries[p.n - 1].name, "mine.example");
	latch_profile_free(&p);
}

Test(profile_load, an_extends_cycle_is_refused_naming_it)
{
	char prefix[128];

	put("a.txt", "# extends: b\na.example\n", 0644);
	put("b.txt", "b.example\n# extends: a\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/b.txt:2: ", dir);
	load_refused("a", NULL, -ELOOP, prefix, "profile cycle a -> b -> a");

	put("self.txt", "# extends: self\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/self.txt:1: ", dir);
	load_refused("self", NULL, -ELOOP, prefix, "self -> self");
}

Test(profile_load, unknown_profile_and_unknown_extends_are_refused)
{
	char prefix[128];

	load_refused("nope", NULL, -ENOENT, "profile 'nope' not found", "built-in: dev, open, research, sealed");
	put("a.txt", "a.example\n# extends: nope\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/a.txt:2: ", dir);
	load_refused("a", NULL, -ENOENT, prefix, "extends 'nope', which is neither");
}

/* p0 extends p1 ... extends pLAST: 16 profiles are fine, 17 are refused. */
static void chain(int last)
{
	for (int i = 0; i <= last; i++) {
		char name[32], text[64];

		snprintf(name, sizeof(name), "p%d.txt", i);
		if (i < last)
			snprintf(text, sizeof(text), "# extends: p%d\nh%d.example\n", i + 1, i);
		else
			snprintf(text, sizeof(text), "h%d.example\n", i);
		put(name, text, 0644);
	}
}

Test(profile_load, an_extends_chain_is_at_most_16_deep)
{
	struct latch_profile p;

	chain(LATCH_PROFILE_DEPTH_MAX - 1);
	load_ok("p0", NULL, &p);
	cr_expect_eq(p.n, LATCH_PROFILE_DEPTH_MAX);
	cr_expect_str_eq(p.entries[0].name, "h15.example");
	latch_profile_free(&p);

	chain(LATCH_PROFILE_DEPTH_MAX);
	load_refused("p0", NULL, -ELOOP, NULL, "more than 16 profiles in one extends chain");
}

Test(profile_load, a_bad_line_deep_in_the_chain_fails_the_whole_load)
{
	char prefix[128];

	put("base.txt", "ok.example\nnot a host\n", 0644);
	put("top.txt", "# extends: base\ntop.example\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/base.txt:2: ", dir);
	load_refused("top", NULL, -EINVAL, prefix, "one entry a line");
}

Test(profile_load, the_overlay_is_layered_on_top)
{
	struct latch_entry ports;
	struct latch_profile p;
	const char *ov = put("overlay.txt", "# mine\nmy.example.net:8443\n", 0644);

	load_ok("dev", ov, &p);
	cr_assert_gt(p.n, 1);
	cr_expect_str_eq(p.entries[p.n - 1].name, "my.example.net");
	cr_expect_str_eq(p.entries[p.n - 1].source, ov);
	cr_expect_eq(p.entries[p.n - 1].line, 2);
	cr_expect_str_eq(p.entries[0].source, "builtin:research");
	cr_expect(latch_profile_match(&p, "my.example.net", &ports));
	cr_expect_eq(ports.n_ports, 1);
	cr_expect_eq(ports.ports[0].lo, 8443);
	latch_profile_free(&p);

	load_ok("sealed", ov, &p);
	cr_expect_eq(p.n, 1);
	latch_profile_free(&p);
}

Test(profile_load, a_missing_overlay_is_no_overlay)
{
	struct latch_profile p;
	char missing[128];

	snprintf(missing, sizeof(missing), "%s/no-such-overlay.txt", dir);
	load_ok("sealed", missing, &p);
	cr_expect_eq(p.n, 0);
	latch_profile_free(&p);
	load_ok("sealed", NULL, &p);
	latch_profile_free(&p);
	load_ok("sealed", "", &p);
	latch_profile_free(&p);
}

Test(profile_load, an_overlay_cannot_extend_and_its_errors_name_it)
{
	char prefix[160];
	const char *ov = put("ov.txt", "ok.example\n# extends: dev\n", 0644);

	snprintf(prefix, sizeof(prefix), "%s:2: ", ov);
	load_refused("sealed", ov, -EINVAL, prefix, "an overlay cannot '# extends:'");
	ov = put("ov2.txt", "ok.example\n\n*.com\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s:3: ", ov);
	load_refused("dev", ov, -EINVAL, prefix, "top-level domain");
}

/* ---- file safety */

Test(profile_load, a_file_others_may_write_is_refused)
{
	static const mode_t unsafe[] = { 0666, 0664, 0646, 0620, 0602 };
	char want[LATCH_ERR_MAX], err[LATCH_ERR_MAX] = "";
	struct latch_profile p;

	for (size_t i = 0; i < ARRAY_SIZE(unsafe); i++) {
		const char *path = put("loose.txt", "pypi.org\n", unsafe[i]);

		snprintf(want, sizeof(want), "%s: writable by group or others (mode %04o); run chmod go-w %s", path,
			 (unsigned)unsafe[i], path);
		cr_expect_eq(latch_profile_load(dir, "loose", NULL, &p, err, sizeof(err)), -EPERM, "mode %04o",
			     (unsigned)unsafe[i]);
		cr_expect_str_eq(err, want);
	}
	/* the control: the same file, writable by its owner only */
	put("loose.txt", "pypi.org\n", 0644);
	load_ok("loose", NULL, &p);
	cr_expect_eq(p.n, 1);
	latch_profile_free(&p);
	put("loose.txt", "pypi.org\n", 0600);
	load_ok("loose", NULL, &p);
	latch_profile_free(&p);
}

Test(profile_load, an_overlay_others_may_write_is_refused)
{
	const char *ov = put("ov.txt", "pypi.org\n", 0666);
	char prefix[160];

	snprintf(prefix, sizeof(prefix), "%s: writable by group or others", ov);
	load_refused("sealed", ov, -EPERM, prefix, "chmod go-w");
	load_refused("open", ov, -EPERM, prefix, NULL);
}

Test(profile_load, an_extended_file_others_may_write_is_refused)
{
	char prefix[160];

	put("base.txt", "ok.example\n", 0666);
	put("top.txt", "# extends: base\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/base.txt: writable by group or others", dir);
	load_refused("top", NULL, -EPERM, prefix, NULL);
}

Test(profile_load, a_symlink_is_refused)
{
	char target[128], link[128], prefix[160];

	put("real.txt", "pypi.org\n", 0644);
	snprintf(target, sizeof(target), "%s/real.txt", dir);
	snprintf(link, sizeof(link), "%s/link.txt", dir);
	cr_assert_eq(symlink(target, link), 0);
	snprintf(prefix, sizeof(prefix), "%s: is a symbolic link", link);
	load_refused("link", NULL, -ELOOP, prefix, NULL);
	load_refused("sealed", link, -ELOOP, prefix, NULL); /* as an overlay too */
}

Test(profile_load, a_file_owned_by_someone_else_is_refused)
{
	char prefix[160];
	const char *path;

	if (geteuid() != 0) {
		teardown(); /* a skipped test does not reach .fini */
		cr_skip_test("needs root to give a file away");
	}
	path = put("theirs.txt", "pypi.org\n", 0644);
	cr_assert_eq(chown(path, 4242, 4242), 0);
	snprintf(prefix, sizeof(prefix), "%s: owned by uid 4242, not root; run chown root", path);
	load_refused("theirs", NULL, -EPERM, prefix, NULL);
}

Test(profile_load, only_regular_text_files_are_read)
{
	char path[128], prefix[160];

	snprintf(path, sizeof(path), "%s/d.txt", dir);
	cr_assert_eq(mkdir(path, 0755), 0);
	snprintf(prefix, sizeof(prefix), "%s: not a regular file", path);
	load_refused("d", NULL, -EINVAL, prefix, NULL);

	snprintf(path, sizeof(path), "%s/f.txt", dir); /* a FIFO must not hang the load */
	cr_assert_eq(mkfifo(path, 0644), 0);
	snprintf(prefix, sizeof(prefix), "%s: not a regular file", path);
	load_refused("f", NULL, -EINVAL, prefix, NULL);

	snprintf(path, sizeof(path), "%s/nul.txt", dir);
	{
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		cr_assert_eq(write(fd, "pypi.org\n\0x\n", 12), 12);
		close(fd);
	}
	snprintf(prefix, sizeof(prefix), "%s: has a NUL byte", path);
	load_refused("nul", NULL, -EINVAL, prefix, NULL);
}

Test(profile_load, a_file_over_1_mib_is_refused)
{
	size_t size = LATCH_PROFILE_FILE_MAX + 1;
	char *text = malloc(size + 1), prefix[160];

	memset(text, '\n', size);
	text[size] = '\0';
	put("big.txt", text, 0644);
	free(text);
	snprintf(prefix, sizeof(prefix), "%s/big.txt: larger than", dir);
	load_refused("big", NULL, -EFBIG, prefix, NULL);
}

/* ---- open: no policy at all */

Test(profile_load, open_is_built_in_with_no_entries)
{
	struct latch_entry ports;
	struct latch_profile p;

	load_ok("open", NULL, &p);
	cr_expect(p.open);
	cr_expect_eq(p.n, 0);
	cr_expect_null(p.entries);
	cr_expect_str_eq(p.name, "open");
	cr_expect_not(latch_profile_match(&p, "pypi.org", &ports), "open matches nothing: the caller checks open");
	latch_profile_free(&p);
}

Test(profile_load, a_file_named_open_is_refused)
{
	char prefix[160];

	put("open.txt", "pypi.org\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/open.txt: 'open' is built in", dir);
	load_refused("open", NULL, -EINVAL, prefix, NULL);
}

Test(profile_load, nothing_may_extend_open)
{
	char prefix[160];

	put("x.txt", "# extends: open\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/x.txt:1: ", dir);
	load_refused("x", NULL, -EINVAL, prefix, "cannot extend 'open'");
}

/* ---- listing */

Test(profile_load, list_is_builtins_plus_files_sorted_each_once)
{
	static const struct {
		const char *name;
		bool builtin, file;
	} want[] = {
		{ "alpha", false, true }, { "dev", true, true },       { "my-profile_1.0", false, true },
		{ "open", true, false },  { "research", true, false }, { "sealed", true, false },
		{ "zeta", false, true },
	};
	struct latch_profile_info *v;
	char err[LATCH_ERR_MAX] = "";
	int n;

	put("zeta.txt", "", 0644);
	put("alpha.txt", "", 0644);
	put("dev.txt", "", 0644);
	put("my-profile_1.0.txt", "", 0644);
	put("bad name.txt", "", 0644);
	put(".hidden.txt", "", 0644);
	put("notes.md", "", 0644);
	put(".txt", "", 0644);
	cr_assert_eq(latch_profile_list(dir, &v, &n, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(n, (int)ARRAY_SIZE(want));
	for (int i = 0; i < n; i++) {
		cr_expect_str_eq(v[i].name, want[i].name);
		cr_expect_eq(v[i].builtin, want[i].builtin, "%s builtin", v[i].name);
		cr_expect_eq(v[i].file, want[i].file, "%s file", v[i].name);
	}
	free(v);
}

Test(profile_load, list_without_a_directory_is_the_builtins)
{
	static const char *const want[] = { "dev", "open", "research", "sealed" };
	struct latch_profile_info *v;
	char err[LATCH_ERR_MAX] = "", missing[128];
	int n;

	cr_assert_eq(latch_profile_list(NULL, &v, &n, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(n, 4);
	for (int i = 0; i < n; i++) {
		cr_expect_str_eq(v[i].name, want[i]);
		cr_expect(v[i].builtin);
		cr_expect_not(v[i].file);
	}
	free(v);
	snprintf(missing, sizeof(missing), "%s/none", dir);
	cr_assert_eq(latch_profile_list(missing, &v, &n, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(n, 4);
	free(v);
}

/* ---- matching names against a profile */

/* Through latch_profile_load, so that matching goes through the profile's name index. */
static struct latch_profile profile_of(const char *text)
{
	char err[LATCH_ERR_MAX] = "";
	struct latch_profile p;
	int rc;

	setup();
	put("t.txt", text, 0644);
	rc = latch_profile_load(dir, "t", NULL, &p, err, sizeof(err));
	teardown(); /* before any assertion, which would end the test here */
	cr_assert_eq(rc, 0, "load: %d %s", rc, err);
	cr_assert(!p.n || p.index, "a loaded profile has its name index");
	return p;
}

static void expect_ports(const struct latch_entry *e, const char *name, const char *want)
{
	struct latch_pentry pe = { .kind = LATCH_PENTRY_HOST, .name = name, .entry = *e };
	char got[LATCH_ENTRY_TEXT_MAX + 8];

	latch_pentry_format(&pe, got, sizeof(got));
	cr_expect_str_eq(got, want);
}

Test(profile_match, hosts_exact_and_wildcards_below_never_the_apex)
{
	static const struct {
		const char *name, *ports; /* ports NULL: no match */
	} cases[] = {
		{ "example.com", "example.com:443" },
		{ "EXAMPLE.com.", "example.com:443" },
		{ "www.example.com", "www.example.com:8443" },
		{ "API.Example.COM.", "api.example.com:80,443,8443" },
		{ "x.b.example.com", "x.b.example.com:8443,9000-9001" },
		{ "b.example.com", "b.example.com:8443" },
		{ "badexample.com", NULL },
		{ "example.com.evil.net", NULL },
		{ "com", NULL },
		{ "198.51.100.7", NULL }, /* CIDR entries are not names */
		{ "exa mple.com", NULL },
		{ "", NULL },
		{ "pypi.org", "pypi.org:443-444" },
		{ "adjacent.example.org", "adjacent.example.org:80-81" },
	};
	struct latch_profile p = profile_of("example.com:443\n"
					    "*.example.com:8443\n"
					    "api.example.com:80,443\n"
					    "*.b.example.com:9000-9001\n"
					    "198.51.100.7\n"
					    "pypi.org:443\n"
					    "pypi.org:443-444\n"
					    "adjacent.example.org:81\n"
					    "adjacent.example.org:80\n");

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct latch_entry ports;
		bool m = latch_profile_match(&p, cases[i].name, &ports);

		cr_expect_eq(m, cases[i].ports != NULL, "'%s': match %d", cases[i].name, m);
		if (m && cases[i].ports) {
			char norm[LATCH_DNS_NAME_MAX + 1];

			cr_assert_eq(latch_dns_name_normalize(cases[i].name, norm, sizeof(norm)), 0);
			expect_ports(&ports, norm, cases[i].ports);
		}
	}
	latch_profile_free(&p);
}

Test(profile_match, proto_is_the_first_matchs_and_others_are_walked_apart)
{
	struct latch_entry ports;
	const struct latch_pentry *pe = NULL;
	struct latch_profile p;
	int n = 0;

	p = profile_of("other.org:53/udp\nother.org:443/tcp\n*.other.org:853/udp\nx.other.org:8443/udp\n");
	cr_assert(latch_profile_match(&p, "other.org", &ports));
	cr_expect_eq(ports.proto, LATCH_PROTO_UDP);
	expect_ports(&ports, "other.org", "other.org:53/udp");
	cr_assert(latch_profile_match(&p, "x.other.org", &ports));
	expect_ports(&ports, "x.other.org", "x.other.org:853,8443/udp");
	while ((pe = latch_profile_next_match(&p, "other.org", pe)))
		n++;
	cr_expect_eq(n, 2, "other.org should match 2 entries, walked %d", n);
	latch_profile_free(&p);
}

Test(profile_match, the_union_keeps_at_most_16_ranges_dropping_the_highest)
{
	char text[1024] = "";
	struct latch_entry ports;
	struct latch_profile p;

	for (int i = 0; i < LATCH_RULES_MAX + 2; i++) {
		char line[64];

		snprintf(line, sizeof(line), "many.example:%d\n", 1000 + 10 * i);
		strcat(text, line);
	}
	p = profile_of(text);
	cr_assert(latch_profile_match(&p, "many.example", &ports));
	cr_expect_eq(ports.n_ports, LATCH_RULES_MAX);
	cr_expect_eq(ports.ports[0].lo, 1000);
	cr_expect_eq(ports.ports[LATCH_RULES_MAX - 1].lo, 1000 + 10 * (LATCH_RULES_MAX - 1));
	latch_profile_free(&p);
}

/*
 * The name index must walk exactly what a scan of every entry walks: the
 * same entries, in profile order, for hosts, wildcards at several depths,
 * repeated names with other ports and protos, and names that match nothing.
 * The same profile without its index is the scan.
 */
Test(profile_match, the_name_index_walks_what_a_scan_of_every_entry_walks)
{
	static const char *const queries[] = {
		"h7.a.example.org", "H7.A.Example.ORG.", "x.h7.a.example.org",	"z.x.h7.a.example.org",
		"b.a.example.org",  "x.b.a.example.org", "y.x.b.a.example.org", "a.example.org",
		"example.org",	    "q.example.org",	 "h199.a.example.org",	"h200.a.example.org",
		"nothing.net",	    "198.51.100.7",	 "a..example.org",	"",
	};
	char *text = malloc(64 * 1024), line[128];
	struct latch_profile p, scan;
	size_t off = 0;

	cr_assert_not_null(text);
	text[0] = '\0';
	for (int i = 0; i < 200; i++) {
		snprintf(line, sizeof(line), "h%d.a.example.org:%d\n", i, 1000 + i);
		off += snprintf(text + off, 64 * 1024 - off, "%s", line);
		if (i % 7 == 0) /* the same name again, another proto */
			off += snprintf(text + off, 64 * 1024 - off, "h%d.a.example.org:%d/udp\n", i, 2000 + i);
	}
	off += snprintf(
		text + off, 64 * 1024 - off,
		"*.a.example.org:443\n*.b.a.example.org:8443\n*.example.org:80\n198.51.100.0/24:443\n*.a.example.org:853/udp\n"
		"h7.a.example.org:9000\n*.x.h7.a.example.org:22\n");
	p = profile_of(text);
	scan = p;
	scan.index = NULL;
	for (size_t q = 0; q < ARRAY_SIZE(queries); q++) {
		const struct latch_pentry *a = NULL, *b = NULL;
		int walked = 0;

		do {
			a = latch_profile_next_match(&p, queries[q], a);
			b = latch_profile_next_match(&scan, queries[q], b);
			cr_expect_eq(a, b, "%s: match %d: index gave entry %ld, a scan %ld", queries[q], walked,
				     a ? (long)(a - p.entries) : -1L, b ? (long)(b - p.entries) : -1L);
			walked++;
		} while (a && b && walked < 1000);
	}
	cr_expect_eq(latch_profile_next_match(&p, "h7.a.example.org", NULL), &p.entries[8],
		     "control: the first match of h7.a.example.org is its own line, the 9th");
	latch_profile_free(&p);
	free(text);
}
