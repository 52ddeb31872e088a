// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_profile_state.c - which profile a sandbox runs, on disk
 * (profile/state.c over the state API), under a fresh LATCH_ROOT.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile/profile.h"

static char root[64];
static char *old_root;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	const char *was = getenv("LATCH_ROOT");

	old_root = was ? strdup(was) : NULL;
	strcpy(root, "/tmp/latch-profstate-XXXXXX");
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

TestSuite(profile_state, .init = setup, .fini = teardown);

static const char *path_of(const char *name, enum latch_state_kind kind)
{
	static char path[PATH_MAX];

	cr_assert_eq(latch_state_file_path(name, kind, path, sizeof(path)), 0);
	return path;
}

static void put(const char *name, enum latch_state_kind kind, const char *text)
{
	char dir[PATH_MAX];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/var/lib/latch/policy", root);
	cr_assert_eq(latch_mkdirs(dir, 0700), 0);
	f = fopen(path_of(name, kind), "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(path_of(name, kind), 0600), 0);
}

/* Stored, read back, in the state API's format; "" removes it. */
Test(profile_state, round_trip_in_the_one_format)
{
	char prof[64] = "", err[LATCH_ERR_MAX] = "", text[256] = "";
	FILE *f;

	cr_expect_eq(latch_profile_state_read("sb1", prof, sizeof(prof)), -ENOENT);
	cr_assert_eq(latch_profile_state_write("sb1", "research", err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(latch_profile_state_read("sb1", prof, sizeof(prof)), 0);
	cr_expect_str_eq(prof, "research");
	f = fopen(path_of("sb1", LATCH_STATE_PROFILE), "r");
	cr_assert_not_null(f);
	cr_expect_gt(fread(text, 1, sizeof(text) - 1, f), 0);
	fclose(f);
	cr_expect_not_null(strstr(text, "\nprofile = research\n"), "%s", text);
	cr_assert_eq(latch_profile_state_write("sb1", "", err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(latch_profile_state_read("sb1", prof, sizeof(prof)), -ENOENT);
}

/* A host upgraded in place: the file an older latch wrote (the name alone) still names the profile. */
Test(profile_state, file_of_an_older_latch_read)
{
	char prof[64] = "", err[LATCH_ERR_MAX] = "";

	put("sb1", LATCH_STATE_PROFILE, "research\n");
	cr_assert_eq(latch_profile_state_read("sb1", prof, sizeof(prof)), 0);
	cr_expect_str_eq(prof, "research");
	/* the next write is in the current format, and reads the same */
	cr_assert_eq(latch_profile_state_write("sb1", "dev", err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(latch_profile_state_read("sb1", prof, sizeof(prof)), 0);
	cr_expect_str_eq(prof, "dev");
}

/*
 * Invariant: the profile module removes its own file only; NAME.learned is
 * latchd's, and the profile going does not reach into it (the sandbox going
 * does, by latch_state_forget()).
 */
Test(profile_state, clearing_the_profile_leaves_latchds_file)
{
	char err[LATCH_ERR_MAX] = "";

	put("sb1", LATCH_STATE_PROFILE, "profile = research\n");
	put("sb1", LATCH_STATE_LEARNED, "boot = x\n");
	cr_assert_eq(latch_profile_state_write("sb1", "", err, sizeof(err)), 0, "%s", err);
	cr_expect_neq(access(path_of("sb1", LATCH_STATE_PROFILE), F_OK), 0, "control: the profile's own file goes");
	cr_expect_eq(access(path_of("sb1", LATCH_STATE_LEARNED), F_OK), 0, "latchd's file is not the profile's");
	cr_assert_eq(latch_state_forget("sb1", err, sizeof(err)), 0, "%s", err);
	cr_expect_neq(access(path_of("sb1", LATCH_STATE_LEARNED), F_OK), 0, "the sandbox going takes it");
}
