// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_egress.c - `latch egress NAME allow|revoke|show` (and `profile`, in cmd_profile.c).
 *
 * Every ENTRY is parsed before the first map is touched, so one bad entry
 * means nothing was applied.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "cli/cli.h"
#include "loader/loader.h"
#include "profile/profile.h"

/* a timed entry lasts at most a year: past that, allow it for good */
#define EGRESS_FOR_MAX_S (365 * 86400)

/*
 * ENTRY did not parse as an address: when it is a host name (or *.domain),
 * say where names go instead of a bare refusal.  The kernel holds addresses
 * only; a name is resolved by the host, for a while (a grant) or for good
 * (the overlay, layered over every profile).  0 when it is no name.
 */
static int host_name_hint(const char *name, const char *entry)
{
	char host[LATCH_DNS_NAME_MAX + 1], overlay[PATH_MAX];
	size_t n = strcspn(entry, ":/");
	const char *h = entry;

	if (!strncmp(h, "*.", 2)) {
		h += 2;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(host) || !strpbrk(entry, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
		return 0;
	snprintf(host, sizeof(host), "%.*s", (int)n, h);
	if (latch_dns_name_problem(host) || !strchr(host, '.'))
		return 0;
	latch_path(overlay, sizeof(overlay), LATCH_ALLOWLIST_FILE);
	if (h != entry)
		return latch_err(LATCH_EXIT_USAGE,
				 "'%s' is a wildcard; the kernel holds addresses, not names. For good, add the line %s "
				 "to the overlay %s and switch the profile again (`latch egress %s profile P`)",
				 entry, entry, overlay, name);
	return latch_err(LATCH_EXIT_USAGE,
			 "'%s' is a host name; the kernel holds addresses, not names. For a while: `latch grant %s %s "
			 "--for DUR` (resolved by the host, closed by the kernel at the deadline). For good: add the "
			 "line %s to the overlay %s and switch the profile again (`latch egress %s profile P`)",
			 entry, name, entry, entry, overlay, name);
}

static const char *origin_name(int o)
{
	switch (o) {
	case LATCH_ORIGIN_GRANT:
		return "grant";
	case LATCH_ORIGIN_LEARNED:
		return "learned";
	case LATCH_ORIGIN_PROFILE:
		return "profile";
	case LATCH_ORIGIN_HOSTNAME:
		return "hostname";
	default:
		return "egress";
	}
}

static int show_one(const struct latch_policy_item *it, void *arg)
{
	json_t *arr = arg;
	char text[LATCH_ENTRY_TEXT_MAX];
	uint64_t now = latch_now_boot_ns();
	json_t *o;

	latch_entry_format(&it->entry, text, sizeof(text));
	o = json_pack("{s:s, s:s}", "entry", text, "origin", origin_name(it->rule.origin));
	json_object_set_new(o, "seconds_left",
			    it->rule.expires_ns ? json_real((double)(it->rule.expires_ns - now) / 1e9) : json_null());
	json_array_append_new(arr, o);
	if (!latch_json) {
		if (it->rule.expires_ns)
			printf("  %-44s %-8s %.1f s left\n", text, origin_name(it->rule.origin),
			       (double)(it->rule.expires_ns - now) / 1e9);
		else
			printf("  %-44s %-8s permanent\n", text, origin_name(it->rule.origin));
	}
	return 0;
}

/* ENTRY... and --for DUR after `egress NAME VERB`: every entry parsed before any map is touched. */
static int egress_args(int argc, char **argv, const char *name, const char *verb, struct latch_entry *entries, int *n,
		       uint32_t *for_s)
{
	char err[LATCH_ERR_MAX];
	int rc;

	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--for")) {
			if (strcmp(verb, "allow"))
				return latch_err(LATCH_EXIT_USAGE, "--for goes with allow");
			if (i + 1 >= argc)
				return latch_err(LATCH_EXIT_USAGE, "--for needs a duration (60, 90s, 5m, 1h, 7d)");
			if (latch_parse_seconds("--for", argv[i + 1], 1, EGRESS_FOR_MAX_S, for_s, err, sizeof(err)))
				return latch_err(LATCH_EXIT_USAGE, "%s", err);
			i++;
			continue;
		}
		if (!strcmp(verb, "show"))
			return latch_err(LATCH_EXIT_USAGE, "show takes no entries");
		if (latch_parse_entry(argv[i], &entries[*n], err, sizeof(err))) {
			rc = host_name_hint(name, argv[i]);
			return rc ? rc : latch_err(LATCH_EXIT_USAGE, "%s", err);
		}
		(*n)++;
	}
	if (strcmp(verb, "show") && !*n)
		return latch_err(LATCH_EXIT_USAGE, "%s needs at least one ENTRY (ADDR|CIDR[:PORTS][/tcp|udp|icmp])",
				 verb);
	return 0;
}

static void egress_show(struct latch_sandbox *sb, const char *name)
{
	json_t *arr = json_array();

	if (!latch_json)
		printf("%s egress:\n", name);
	int count = latch_policy_list(sb, show_one, arr);

	if (!latch_json && count == 0)
		printf("  (nothing: default deny)\n");
	latch_json_out(json_pack("{s:s, s:o}", "sandbox", name, "entries", arr));
}

/* allow or revoke each entry in turn, each recorded; the first refusal stops the rest. */
static int egress_change(struct latch_sandbox *sb, const char *name, const char *verb,
			 const struct latch_entry *entries, int n, uint32_t for_s)
{
	uint64_t expires = for_s ? latch_now_boot_ns() + (uint64_t)for_s * 1000000000ULL : 0;
	char err[LATCH_ERR_MAX];
	int rc = 0;
	/* not in the middle of a profile switch by latchd */
	int lock = latch_policy_lock(name, err, sizeof(err));

	if (lock < 0)
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	for (int i = 0; i < n && !rc; i++) {
		char text[LATCH_ENTRY_TEXT_MAX];
		int e = !strcmp(verb, "allow") ?
				latch_policy_allow(sb, &entries[i], expires, LATCH_ORIGIN_EGRESS, err, sizeof(err)) :
				latch_policy_revoke(sb, &entries[i], err, sizeof(err));

		if (e) {
			rc = latch_err(e == -ENOENT || e == -EINVAL ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "%s", err);
			break;
		}
		latch_entry_format(&entries[i], text, sizeof(text));
		latch_audit_note(name, "egress", verb,
				 !strcmp(verb, "allow") ? "cli.egress.allow" : "cli.egress.revoke",
				 for_s ? json_pack("{s:s, s:i}", "entry", text, "for_s", (int)for_s) :
					 json_pack("{s:s}", "entry", text));
		if (!latch_json) {
			if (for_s)
				printf("%s %s for %u s\n", !strcmp(verb, "allow") ? "allowed" : "revoked", text, for_s);
			else
				printf("%s %s\n", !strcmp(verb, "allow") ? "allowed" : "revoked", text);
		}
	}
	latch_policy_unlock(lock);
	if (!rc)
		latch_json_out(json_pack("{s:s, s:s, s:i}", "sandbox", name, "action", verb, "entries", n));
	return rc;
}

int cmd_egress(int argc, char **argv)
{
	char err[LATCH_ERR_MAX];
	const char *name, *verb;
	struct latch_entry *entries;
	struct latch_sandbox *sb;
	uint32_t for_s = 0;
	int n = 0, rc = 0;

	if (argc < 3)
		return latch_err(LATCH_EXIT_USAGE,
				 "usage: latch egress NAME allow|revoke ENTRY... | show | profile [P]");
	name = argv[1];
	verb = argv[2];
	if (latch_parse_name(name, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (!strcmp(verb, "profile"))
		return cmd_egress_profile(name, argc - 3, argv + 3);
	if (strcmp(verb, "allow") && strcmp(verb, "revoke") && strcmp(verb, "show"))
		return latch_err(LATCH_EXIT_USAGE, "egress: unknown action '%s'; use allow, revoke, show or profile",
				 verb);

	entries = calloc(argc, sizeof(*entries));
	if (!entries)
		return latch_err(LATCH_EXIT_FAILED, "out of memory");
	rc = egress_args(argc, argv, name, verb, entries, &n, &for_s);
	if (rc)
		goto out;
	if (latch_need_root("egress")) {
		rc = LATCH_EXIT_USAGE;
		goto out;
	}
	sb = latch_sandbox_open(name, err, sizeof(err));
	if (!sb) {
		rc = latch_sandbox_exists(name) ? latch_err(LATCH_EXIT_FAILED, "%s", err) :
						  latch_err_no_sandbox("sandbox", name);
		goto out;
	}
	if (!strcmp(verb, "show"))
		egress_show(sb, name);
	else
		rc = egress_change(sb, name, verb, entries, n, for_s);
	latch_sandbox_free(sb);
out:
	free(entries);
	return rc;
}
