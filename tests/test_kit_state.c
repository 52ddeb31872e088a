// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_kit_state.c - a sandbox's kit on disk (kit/state.c): what latchd
 * reads after a restart to serve the URLs and placeholders the guest holds.
 *
 * Each test runs under a fresh LATCH_ROOT (mkdtemp), so the state file is
 * $ROOT/var/lib/latch/policy/NAME.kit, owned by whoever runs the tests.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit/kit.h"

static char root[64];
static char *old_root;

static const char two_creds[] = "name: two\n"
				"credentials:\n"
				"  - name: openai\n"
				"    upstream: https://api.openai.com\n"
				"    secret: OPENAI_API_KEY\n"
				"    header: Authorization\n"
				"    scheme: \"Bearer \"\n"
				"    env:\n"
				"      OPENAI_BASE_URL: \"{{url}}/v1\"\n"
				"      OPENAI_API_KEY: \"{{placeholder}}\"\n"
				"    alternatives:\n"
				"      - name: groq\n"
				"        upstream: https://api.groq.com\n"
				"        base_path: /openai\n"
				"        secret: GROQ_API_KEY\n"
				"  - name: weather\n"
				"    upstream: https://api.example.com\n"
				"    secret: WEATHER_API_KEY\n"
				"    header: x-api-key\n"
				"    env:\n"
				"      WEATHER_KEY: \"{{placeholder}}\"\n";

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	const char *was = getenv("LATCH_ROOT");

	old_root = was ? strdup(was) : NULL;
	strcpy(root, "/tmp/latch-kitstate-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	setenv("LATCH_ROOT", root, 1);
}

static void teardown(void)
{
	if (old_root)
		setenv("LATCH_ROOT", old_root, 1);
	else
		unsetenv("LATCH_ROOT");
	free(old_root);
	nftw(root, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(kit_state, .init = setup, .fini = teardown);

static struct latch_kit *kit_of(const char *text, const char *name)
{
	char err[LATCH_ERR_MAX] = "";
	struct latch_kit *k = latch_kit_parse(text, strlen(text), "test.yaml", name, NULL, err, sizeof(err));

	cr_assert_not_null(k, "refused: %s", err);
	return k;
}

static const char *state_path(const char *sandbox)
{
	static char path[PATH_MAX];

	cr_assert_eq(latch_kit_state_path(sandbox, path, sizeof(path)), 0);
	return path;
}

/* The state file of SANDBOX replaced by TEXT, 0600. */
static void put_state(const char *sandbox, const char *text)
{
	char dir[PATH_MAX];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/var/lib/latch/policy", root);
	cr_assert_eq(latch_mkdirs(dir, 0700), 0);
	f = fopen(state_path(sandbox), "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	chmod(state_path(sandbox), 0600);
}

/* Invariant: what is written is read back whole, and the file is 0600 (it holds the guest's placeholders). */
Test(kit_state, written_state_reads_back)
{
	struct latch_kit *k = kit_of(two_creds, NULL);
	struct latch_kit_state st, back;
	char err[LATCH_ERR_MAX] = "";
	struct stat sb;

	cr_assert_eq(latch_kit_state_for(k, 8119, NULL, &st), 0);
	strcpy(st.creds[0].backend, "groq");
	st.stopped = true;
	cr_assert_eq(latch_kit_state_write("sb1", &st, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(stat(state_path("sb1"), &sb), 0);
	cr_expect_eq(sb.st_mode & 0777, 0600);
	cr_assert_eq(latch_kit_state_read("sb1", &back, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(back.kit, "two");
	cr_expect_eq(back.port, 8119);
	cr_expect(back.stopped);
	cr_assert_eq(back.n_creds, 2);
	cr_expect_str_eq(back.creds[0].placeholder, st.creds[0].placeholder);
	cr_expect_str_eq(back.creds[0].backend, "groq");
	cr_expect_str_eq(back.creds[1].name, "weather");
	cr_expect_str_eq(back.creds[1].backend, "");
	cr_expect_eq(latch_kit_state_remove("sb1", err, sizeof(err)), 0);
	cr_expect_eq(latch_kit_state_read("sb1", &back, err, sizeof(err)), -ENOENT);
	latch_kit_free(k);
}

/* Invariant: the same kit keeps the guest's placeholders and port; another kit gets new ones. */
Test(kit_state, same_kit_keeps_placeholders_other_kit_does_not)
{
	struct latch_kit *k = kit_of(two_creds, NULL), *other;
	struct latch_kit_state first, again, changed;
	char *text = strdup(two_creds);

	memcpy(text, "name: tw2", 9); /* the same credentials in a kit of another name */
	other = kit_of(text, NULL);
	free(text);
	cr_assert_eq(latch_kit_state_for(k, 8119, NULL, &first), 0);
	strcpy(first.creds[0].backend, "groq");
	cr_assert_eq(latch_kit_state_for(k, 9000, &first, &again), 0);
	cr_expect_eq(again.port, 8119, "the guest holds URLs with the old port");
	cr_expect_str_eq(again.creds[0].placeholder, first.creds[0].placeholder);
	cr_expect_str_eq(again.creds[1].placeholder, first.creds[1].placeholder);
	cr_expect_str_eq(again.creds[0].backend, "groq");
	cr_expect_not(again.stopped);
	cr_assert_eq(latch_kit_state_for(other, 9000, &first, &changed), 0);
	cr_expect_eq(changed.port, 9000);
	cr_expect_str_neq(changed.creds[0].placeholder, first.creds[0].placeholder);
	cr_expect_str_eq(changed.creds[0].backend, "");
	cr_expect_str_neq(first.creds[0].placeholder, first.creds[1].placeholder);
	latch_kit_free(k);
	latch_kit_free(other);
}

/* An alternative the kit no longer has sends the credential back to its own upstream. */
Test(kit_state, vanished_alternative_resets_backend)
{
	struct latch_kit *k = kit_of(two_creds, NULL);
	struct latch_kit_state first, again;

	cr_assert_eq(latch_kit_state_for(k, 8119, NULL, &first), 0);
	strcpy(first.creds[0].backend, "gone");
	cr_assert_eq(latch_kit_state_for(k, 8119, &first, &again), 0);
	cr_expect_str_eq(again.creds[0].backend, "");
	latch_kit_free(k);
}

/* The env the sandbox is given uses the state's port and placeholders; a credential without one is ESTALE. */
Test(kit_state, env_from_state)
{
	struct latch_kit *k = kit_of(two_creds, NULL);
	struct latch_kit_state st;
	struct latch_addr host;
	char err[LATCH_ERR_MAX], want[160], **env;
	bool url = false, ph = false;
	int n;

	cr_assert_eq(latch_parse_addr("10.213.0.1", &host, err, sizeof(err)), 0);
	cr_assert_eq(latch_kit_state_for(k, 8119, NULL, &st), 0);
	st.port = 8200;
	env = latch_kit_state_env(k, &st, &host, &n);
	cr_assert_not_null(env);
	snprintf(want, sizeof(want), "WEATHER_KEY=%s", st.creds[1].placeholder);
	for (int i = 0; i < n; i++) {
		url |= !strcmp(env[i], "OPENAI_BASE_URL=http://10.213.0.1:8200/openai/v1");
		ph |= !strcmp(env[i], want);
	}
	cr_expect(url, "the URL carries the stored port");
	cr_expect(ph, "each credential its own placeholder");
	latch_kit_env_free(env);
	st.n_creds = 1;
	errno = 0;
	cr_expect_null(latch_kit_state_env(k, &st, &host, &n));
	cr_expect_eq(errno, ESTALE);
	latch_kit_free(k);
}

/* Invariant: a state file anyone else could read or write is refused, and so is one not in latch's shape. */
Test(kit_state, unsafe_or_malformed_state_refused)
{
	static const char ph[] = "latch-placeholder-0123456789abcdef0123456789abcdef";
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "kit two\n", "no 'kit' or no 'port'" },
		{ "kit two\nport 0\n", ":2: port '0'" },
		{ "kit two\nport 8119\ncredential openai latch-placeholder-short\n", ":3: write 'credential" },
		{ "kit two\nport 8119\ncredential Openai %s\n", ":3: write 'credential" },
		{ "kit two\nport 8119\ncredential openai %s\ncredential openai %s\n", ":4: credential openai twice" },
		{ "kit ../etc\nport 8119\n", ":1: '../etc' is not a kit name" },
		{ "kit two\nport 8119\nsecret sk-live\n", ":3: 'secret' is not a line latch writes here" },
	};
	struct latch_kit_state st;
	char err[LATCH_ERR_MAX], text[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), bad[i].text, ph, ph);
		put_state("sb2", text);
		err[0] = '\0';
		cr_expect_eq(latch_kit_state_read("sb2", &st, err, sizeof(err)), -EINVAL, "row %zu: %s", i, err);
		cr_expect_not_null(strstr(err, bad[i].want), "row %zu: '%s' lacks '%s'", i, err, bad[i].want);
		cr_expect_str_eq(st.kit, "", "row %zu: nothing half-read", i);
	}
	snprintf(text, sizeof(text), "# ok\nkit two\nport 8119\n\ncredential openai %s\n", ph);
	put_state("sb2", text);
	cr_expect_eq(latch_kit_state_read("sb2", &st, err, sizeof(err)), 0, "control: %s", err);
	chmod(state_path("sb2"), 0640);
	cr_expect_eq(latch_kit_state_read("sb2", &st, err, sizeof(err)), -EPERM, "group-readable: %s", err);
	cr_expect_not_null(strstr(err, "chmod"), "%s", err);
}

/* The file is in the state API's one format; the shape checks hold in it as they did in the old one. */
Test(kit_state, current_format_written_and_checked)
{
	static const char ph[] = "latch-placeholder-0123456789abcdef0123456789abcdef";
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "kit = two\n", "no 'kit' or no 'port'" },
		{ "kit = two\nport = 0\n", ":2: port '0'" },
		{ "kit = two\nport = 8119\ncredential = openai latch-placeholder-short\n", ":3: write 'credential" },
		{ "kit = two\nport = 8119\ncredential = openai %s extra words\n", ":3: write 'credential" },
		{ "kit = two\nport = 8119\ncredential = openai %s\ncredential = openai %s\n",
		  ":4: credential openai twice" },
		{ "kit = ../etc\nport = 8119\n", ":1: '../etc' is not a kit name" },
		{ "kit = two\nport = 8119\nsecret = sk-live\n", ":3: unknown key 'secret'" },
		{ "kit = two\nkit = other\nport = 8119\n", ":2: 'kit' given twice" },
	};
	struct latch_kit *k = kit_of(two_creds, NULL);
	struct latch_kit_state st, back;
	char err[LATCH_ERR_MAX] = "", text[1024] = "", want[160];
	FILE *f;

	cr_assert_eq(latch_kit_state_for(k, 8119, NULL, &st), 0);
	strcpy(st.creds[0].backend, "groq");
	st.stopped = true;
	cr_assert_eq(latch_kit_state_write("sb3", &st, err, sizeof(err)), 0, "%s", err);
	f = fopen(state_path("sb3"), "r");
	cr_assert_not_null(f);
	cr_expect_gt(fread(text, 1, sizeof(text) - 1, f), 0);
	fclose(f);
	cr_expect_not_null(strstr(text, "\nkit = two\nport = 8119\nstopped = yes\n"), "%s", text);
	snprintf(want, sizeof(want), "\ncredential = openai %s groq\n", st.creds[0].placeholder);
	cr_expect_not_null(strstr(text, want), "%s", text);
	cr_assert_eq(latch_kit_state_read("sb3", &back, err, sizeof(err)), 0, "%s", err);
	cr_expect(back.stopped);
	cr_expect_str_eq(back.creds[0].backend, "groq");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), bad[i].text, ph, ph);
		put_state("sb4", text);
		err[0] = '\0';
		cr_expect_eq(latch_kit_state_read("sb4", &back, err, sizeof(err)), -EINVAL, "row %zu: %s", i, err);
		cr_expect_not_null(strstr(err, bad[i].want), "row %zu: '%s' lacks '%s'", i, err, bad[i].want);
		cr_expect_str_eq(back.kit, "", "row %zu: nothing half-read", i);
	}
	snprintf(text, sizeof(text), "# ok\nkit = two\nport = 8119\n\ncredential = openai %s\n", ph);
	put_state("sb4", text);
	cr_expect_eq(latch_kit_state_read("sb4", &back, err, sizeof(err)), 0, "control: %s", err);
	latch_kit_free(k);
}
