// SPDX-License-Identifier: GPL-2.0-only
/*
 * state.c - which profile a sandbox runs, kept on disk so that latchd and
 * the CLI agree on it across restarts.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "profile/profile.h"

#define LATCH_PROFILE_STATE_MAX 128

int latch_profile_state_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_POLICY_DIR "/%s.profile", name);
}

int latch_profile_state_read(const char *name, char *profile, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	if (latch_profile_state_path(name, path, sizeof(path)))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(profile, len, f)) {
		fclose(f);
		return -ENOENT;
	}
	fclose(f);
	profile[strcspn(profile, "\n")] = '\0';
	return *profile ? 0 : -ENOENT;
}

int latch_profile_state_write(const char *name, const char *profile, char *err, size_t errlen)
{
	char path[PATH_MAX], dir[PATH_MAX];
	int rc = 0;

	if (latch_profile_state_path(name, path, sizeof(path)) || latch_path(dir, sizeof(dir), LATCH_POLICY_DIR))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	if (!*profile) {
		char learned[PATH_MAX];

		/* and what latchd learned under it (latchd keeps NAME.learned beside it: latchd/learned.c) */
		if (!latch_path(learned, sizeof(learned), LATCH_POLICY_DIR "/%s.learned", name))
			unlink(learned);
		if (unlink(path) && errno != ENOENT)
			return latch_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
		return 0;
	}
	rc = latch_mkdirs(dir, 0700); /* root-only */
	if (rc)
		return latch_errf(err, errlen, rc, "%s: %s", dir, strerror(-rc));
	{
		char line[LATCH_PROFILE_STATE_MAX + 2];
		int n = snprintf(line, sizeof(line), "%s\n", profile);

		if (n >= (int)sizeof(line))
			return latch_errf(err, errlen, -ENAMETOOLONG, "profile name '%s' is too long", profile);
		rc = latch_write_atomic(path, 0600, line, n);
	}
	if (rc)
		return latch_errf(err, errlen, rc, "%s: %s", path, strerror(-rc));
	return 0;
}
