// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_profile.c - `latch egress NAME profile [P]`: list the profiles and
 * mark the active one, or switch to P.
 *
 * A switch goes through latchd, because latchd resolves a profile's host
 * names and owns what the resolver learned; it builds the whole new policy
 * and swaps it in with one map update.  latchd loads the profile; a bad line
 * comes back as `file:line: message` and nothing changes.  (`up` checks its
 * profile before it creates anything: sandbox/up.c.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "profile/profile.h"
#include "cli/cli.h"
#include "loader/loader.h"
#include "config/config.h"

static void profile_paths(char *dir, size_t dlen, char *overlay, size_t olen)
{
	latch_path(dir, dlen, LATCH_PROFILES_DIR);
	latch_path(overlay, olen, LATCH_ALLOWLIST_FILE);
}

int latch_profile_switch_cli(const char *name, const char *profile, bool quiet)
{
	json_t *rep = NULL, *hosts;
	char err[LATCH_ERR_MAX];
	int rc;

	if (latch_profile_name_check(profile, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	/* latchd loads the profile and says `file:line: message` if it is bad: no second parse here */
	rc = latchd_switch(name, profile, &rep, err, sizeof(err));
	if (rc)
		return latch_err(LATCH_EXIT_FAILED, "%s; a profile's names are resolved by latchd", err);
	if (!json_is_true(json_object_get(rep, "ok"))) {
		rc = latch_err(json_is_true(json_object_get(rep, "usage")) ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "%s",
			       json_string_value(json_object_get(rep, "error")));
		json_decref(rep);
		return rc;
	}
	if (!latch_json && !quiet) {
		size_t i;
		json_t *h;

		printf("%s: profile %s live (%lld entries, %lld learned answers kept)\n", name, profile,
		       (long long)json_integer_value(json_object_get(rep, "entries")),
		       (long long)json_integer_value(json_object_get(rep, "learned_kept")));
		hosts = json_object_get(rep, "hosts");
		json_array_foreach(hosts, i, h) {
			const char *why = json_string_value(json_object_get(h, "error"));
			json_t *a;
			size_t k;

			printf("  %-32s", json_string_value(json_object_get(h, "name")));
			json_array_foreach(json_object_get(h, "addresses"), k, a)
				printf(" %s", json_string_value(a));
			printf("%s%s\n", why ? " unresolved: " : "", why ? why : "");
		}
		if (json_is_true(json_object_get(rep, "uncontained")))
			printf("%s: UNCONTAINED: profile open removes the policy; every destination passes\n", name);
	}
	if (latch_json)
		latch_json_out(json_incref(rep));
	json_decref(rep);
	return LATCH_EXIT_OK;
}

int cmd_egress_profile(const char *name, int argc, char **argv)
{
	char dir[PATH_MAX], overlay[PATH_MAX], err[LATCH_ERR_MAX], active[LATCH_PROFILE_NAME_MAX + 2] = "";
	struct latch_profile_info *list = NULL;
	struct latch_config cfg = { 0 };
	struct latch_sandbox *sb;
	json_t *o, *arr;
	int n = 0;

	if (argc > 1)
		return latch_err(LATCH_EXIT_USAGE, "usage: latch egress NAME profile [PROFILE]");
	if (!latch_sandbox_exists(name))
		return latch_err_no_sandbox("sandbox", name);
	if (argc == 1)
		return latch_profile_switch_cli(name, argv[0], false);

	profile_paths(dir, sizeof(dir), overlay, sizeof(overlay));
	if (latch_profile_list(dir, &list, &n, err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	latch_profile_state_read(name, active, sizeof(active));
	sb = latch_sandbox_open(name, err, sizeof(err));
	if (sb) {
		latch_sandbox_read_config(sb, &cfg);
		latch_sandbox_free(sb);
	}
	o = json_pack("{s:s, s:s?, s:b}", "sandbox", name, "active", *active ? active : NULL, "uncontained",
		      (cfg.flags & LATCH_CFG_OPEN) != 0);
	arr = json_array();
	for (int i = 0; i < n; i++) {
		bool on = !strcmp(list[i].name, active);

		json_array_append_new(arr, json_pack("{s:s, s:b, s:b, s:b}", "name", list[i].name, "active", on,
						     "builtin", list[i].builtin, "file", list[i].file));
		if (!latch_json)
			printf("%s %-20s %s%s\n", on ? "*" : " ", list[i].name,
			       list[i].file ? (list[i].builtin ? "file (shadows the built-in)" : "file") : "built-in",
			       !strcmp(list[i].name, LATCH_PROFILE_OPEN) ? ", uncontained" : "");
	}
	json_object_set_new(o, "profiles", arr);
	if (!latch_json) {
		if (!*active)
			printf("(no active profile: %s has only the entries given with `latch egress allow`)\n", name);
		if (cfg.flags & LATCH_CFG_OPEN)
			printf("%s: UNCONTAINED: observed in the kernel, every destination passes\n", name);
	}
	latch_json_out(o);
	free(list);
	return LATCH_EXIT_OK;
}
