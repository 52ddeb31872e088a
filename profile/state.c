// SPDX-License-Identifier: GPL-2.0-only
/*
 * state.c - which profile a sandbox runs, kept on disk so that latchd and
 * the CLI agree on it across restarts.  The file is the state API's
 * (common.h, LATCH_STATE_PROFILE): `profile = NAME`.
 */
#include <errno.h>
#include <string.h>

#include "profile/profile.h"

#define LATCH_PROFILE_STATE_MAX 128

struct profile_state {
	char profile[LATCH_PROFILE_STATE_MAX + 1];
};

/* An older latch wrote the name alone on one line: read once, rewritten by the next write. */
static int legacy_read(const char *path, char *text, void *obj, char *err, size_t errlen)
{
	struct profile_state *ps = obj;
	size_t n = strcspn(text, "\n");

	if (n >= sizeof(ps->profile))
		return latch_errf_at(err, errlen, -EINVAL, path, 1, "profile name longer than %d characters",
				     LATCH_PROFILE_STATE_MAX);
	memcpy(ps->profile, text, n);
	ps->profile[n] = '\0';
	return 0;
}

static const struct latch_kv_key profile_state_keys[] = {
	LATCH_KV_STR("profile", struct profile_state, profile, NULL),
};
static const struct latch_state_format profile_state_format = { profile_state_keys, 1, 0, legacy_read };

int latch_profile_state_read(const char *name, char *profile, size_t len)
{
	struct profile_state ps = { "" };
	char err[LATCH_ERR_MAX];
	int ret = latch_state_file_read(name, LATCH_STATE_PROFILE, &profile_state_format, &ps, err, sizeof(err));

	if (ret)
		return ret;
	if (!*ps.profile)
		return -ENOENT;
	if (strlen(ps.profile) >= len)
		return -ENAMETOOLONG;
	strcpy(profile, ps.profile);
	return 0;
}

int latch_profile_state_write(const char *name, const char *profile, char *err, size_t errlen)
{
	struct profile_state ps;

	if (!*profile)
		return latch_state_file_remove(name, LATCH_STATE_PROFILE, err, errlen);
	if (strlen(profile) >= sizeof(ps.profile))
		return latch_errf(err, errlen, -ENAMETOOLONG, "profile name '%s' is too long", profile);
	strcpy(ps.profile, profile);
	return latch_state_file_write(name, LATCH_STATE_PROFILE, &profile_state_format,
				      "latch: the profile this sandbox runs; written by latch, do not edit", &ps, err,
				      errlen);
}
