// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_grant.c - `latch grant`, `latch grants`, `latch approve`, `latch deny`
 * (docs/grants.md).
 *
 * Grants live in latchd, because latchd resolves the names (on the host,
 * never in the guest), answers them from the sandbox's resolver for the
 * window, and holds the sandbox's asks; the kernel holds the addresses with
 * their deadline.  These commands speak to latchd over its root-only socket,
 * which is the only way to make a grant or decide an ask.  `grants` reads
 * the kernel's entries of origin GRANT back beside what latchd says, so what
 * it prints was observed, not intended.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl/ctl.h"
#include "cli/cli.h"
#include "loader/loader.h"

#define GRANT_CALL_MS 60000 /* the names are looked up before latchd answers */

/* A reply that is no success: its exit code (2 when the caller can fix it), after the latch: line. */
static int reply_error(json_t *rep)
{
	int code = json_is_true(json_object_get(rep, "usage")) ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED;

	latch_err(code, "%s", json_string_value(json_object_get(rep, "error")) ?: "latchd refused");
	json_decref(rep);
	return code;
}

/* Ask latchd; 0 with *rep (ok true), else the exit code after one latch: line. */
static int call(json_t *req, json_t **rep)
{
	char err[LATCH_ERR_MAX];
	int rc = latchd_call(req, rep, GRANT_CALL_MS, err, sizeof(err));

	json_decref(req);
	if (rc)
		return latch_err(LATCH_EXIT_FAILED, "%s; grants are made and decided through latchd", err);
	if (!json_is_true(json_object_get(*rep, "ok")))
		return reply_error(*rep);
	return 0;
}

/* --for DUR into seconds (the cap is latchd's: grant_max in latch.conf). */
static int for_seconds(const char *v, uint32_t *out)
{
	char err[LATCH_ERR_MAX];

	if (!v)
		return latch_err(LATCH_EXIT_USAGE, "--for needs a duration (60, 90s, 5m, 1h)");
	if (latch_parse_seconds("--for", v, 1, 86400, out, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	return 0;
}

static void clock_text(json_int_t epoch, char *buf, size_t len)
{
	time_t t = (time_t)epoch;
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

/* "docs.example:443 (203.0.113.10), files.example:443,8443 (...)" */
static void hosts_line(json_t *hosts, bool addresses)
{
	json_t *h, *a;
	size_t i, k;

	json_array_foreach(hosts, i, h) {
		printf("%s%s:%s", i ? ", " : "", json_string_value(json_object_get(h, "name")),
		       json_string_value(json_object_get(h, "ports")));
		if (!addresses)
			continue;
		printf(" (");
		json_array_foreach(json_object_get(h, "addresses"), k, a)
			printf("%s%s", k ? " " : "", json_string_value(a));
		printf(")");
	}
}

/* The outcome of grant or approve: what is open, until when. */
static void print_open(const char *verb, json_t *g)
{
	char until[16];

	clock_text(json_integer_value(json_object_get(g, "expires_at")), until, sizeof(until));
	printf("%s %s: ", verb, json_string_value(json_object_get(g, "id")));
	hosts_line(json_object_get(g, "hosts"), true);
	printf(" open for %lld s, until %s; the kernel closes it then\n",
	       (long long)json_integer_value(json_object_get(g, "seconds")), until);
}

int cmd_grant(int argc, char **argv)
{
	const char *name, *reason = NULL;
	char err[LATCH_ERR_MAX];
	json_t *hosts, *rep, *req;
	uint32_t seconds = 0;
	int rc;

	if (argc < 3)
		return latch_err(LATCH_EXIT_USAGE,
				 "usage: latch grant NAME HOST[:PORTS]... [--for DUR] [--reason TEXT]");
	name = argv[1];
	if (latch_parse_name(name, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	hosts = json_array();
	for (int i = 2; i < argc; i++) {
		struct latch_entry e;

		if (!strcmp(argv[i], "--for") || !strcmp(argv[i], "--reason")) {
			if (i + 1 >= argc) {
				json_decref(hosts);
				return latch_err(LATCH_EXIT_USAGE, "%s needs a value", argv[i]);
			}
			if (!strcmp(argv[i], "--reason"))
				reason = argv[i + 1];
			else if ((rc = for_seconds(argv[i + 1], &seconds))) {
				json_decref(hosts);
				return rc;
			}
			i++;
			continue;
		}
		/* no host name starts with '-': it is an option grant does not have (it went to latchd as a host) */
		if (argv[i][0] == '-') {
			json_decref(hosts);
			return latch_err(LATCH_EXIT_USAGE, "grant: unknown option '%s'; see `latch help grant`",
					 argv[i]);
		}
		if (!latch_parse_entry(argv[i], &e, err, sizeof(err))) {
			json_decref(hosts);
			return latch_err(LATCH_EXIT_USAGE,
					 "'%s' is an address; a grant names hosts, which the host resolves (an address "
					 "is opened with `latch egress %s allow %s --for DUR`)",
					 argv[i], name, argv[i]);
		}
		json_array_append_new(hosts, json_string(argv[i]));
	}
	if (!json_array_size(hosts)) {
		json_decref(hosts);
		return latch_err(LATCH_EXIT_USAGE, "grant needs at least one HOST[:PORTS]");
	}
	if (latch_need_root("grant")) {
		json_decref(hosts);
		return LATCH_EXIT_USAGE;
	}
	if (!latch_sandbox_exists(name)) {
		json_decref(hosts);
		return latch_err_no_sandbox("sandbox", name);
	}
	req = json_pack("{s:s, s:s, s:o, s:i}", "op", latchd_op_name(LATCHD_OP_GRANT), "sandbox", name, "hosts", hosts,
			"seconds", (int)seconds);
	if (!req)
		return latch_err(LATCH_EXIT_USAGE, "a host or the reason is not valid UTF-8");
	if (reason && json_object_set_new(req, "reason", json_string(reason))) {
		json_decref(req);
		return latch_err(LATCH_EXIT_USAGE, "--reason is not valid UTF-8");
	}
	rc = call(req, &rep);
	if (rc)
		return rc;
	if (!latch_json)
		print_open("granted", json_object_get(rep, "grant"));
	latch_json_out(json_incref(json_object_get(rep, "grant")));
	json_decref(rep);
	return 0;
}

int cmd_approve(int argc, char **argv)
{
	uint32_t seconds = 0;
	json_t *req, *rep;
	int rc;

	if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--for")))
		return latch_err(LATCH_EXIT_USAGE, "usage: latch approve ID [--for DUR]");
	if (argc == 4 && (rc = for_seconds(argv[3], &seconds)))
		return rc;
	if (latch_need_root("approve"))
		return LATCH_EXIT_USAGE;
	req = json_pack("{s:s, s:s, s:i}", "op", latchd_op_name(LATCHD_OP_APPROVE), "id", argv[1], "seconds",
			(int)seconds);
	if (!req || (rc = call(req, &rep)))
		return req ? rc : latch_err(LATCH_EXIT_USAGE, "the id is not valid text");
	if (!latch_json)
		print_open("approved", json_object_get(rep, "grant"));
	latch_json_out(json_incref(json_object_get(rep, "grant")));
	json_decref(rep);
	return 0;
}

int cmd_deny(int argc, char **argv)
{
	json_t *req, *rep;
	int rc;

	if (argc != 2)
		return latch_err(LATCH_EXIT_USAGE, "usage: latch deny ID");
	if (latch_need_root("deny"))
		return LATCH_EXIT_USAGE;
	req = json_pack("{s:s, s:s}", "op", latchd_op_name(LATCHD_OP_DENY), "id", argv[1]);
	if (!req || (rc = call(req, &rep)))
		return req ? rc : latch_err(LATCH_EXIT_USAGE, "the id is not valid text");
	if (!latch_json)
		printf("%s %s (sandbox %s)\n",
		       !strcmp(json_string_value(json_object_get(rep, "decision")) ?: "", "closed") ? "closed" :
												      "denied",
		       argv[1], json_string_value(json_object_get(rep, "sandbox")));
	json_object_del(rep, "ok");
	latch_json_out(rep);
	return 0;
}

/* ---- latch grants NAME ---- */

static int kernel_item(const struct latch_policy_item *it, void *arg)
{
	char text[LATCH_ENTRY_TEXT_MAX];
	uint64_t now = latch_now_boot_ns();

	if (it->rule.origin != LATCH_ORIGIN_GRANT || !it->rule.expires_ns)
		return 0;
	latch_entry_format(&it->entry, text, sizeof(text));
	json_array_append_new(arg,
			      json_pack("{s:s, s:f}", "entry", text, "seconds_left",
					it->rule.expires_ns > now ? (double)(it->rule.expires_ns - now) / 1e9 : 0.0));
	return 0;
}

/* Does the kernel entry ENTRY ("203.0.113.10:443") hold ADDR? */
static bool entry_of(const char *entry, const char *addr)
{
	size_t n = strlen(addr);

	if (entry[0] == '[')
		return !strncmp(entry + 1, addr, n) && entry[n + 1] == ']';
	return !strncmp(entry, addr, n) && (entry[n] == ':' || entry[n] == '\0' || entry[n] == '/');
}

/* Each address of an active grant with what the kernel holds for it; kernel items used are marked. */
static void join_kernel(json_t *grant, json_t *kernel, bool *used)
{
	json_t *h, *a, *k;
	size_t i, j, m;

	json_array_foreach(json_object_get(grant, "hosts"), i, h) {
		json_t *seen = json_array();

		json_array_foreach(json_object_get(h, "addresses"), j, a) {
			json_array_foreach(kernel, m, k) {
				if (!entry_of(json_string_value(json_object_get(k, "entry")), json_string_value(a)))
					continue;
				used[m] = true;
				json_array_append(seen, k);
			}
		}
		json_object_set_new(h, "kernel", seen);
	}
}

static void print_grant(json_t *g)
{
	const char *state = json_string_value(json_object_get(g, "state"));
	const char *says = json_string_value(json_object_get(g, "sandbox_says"));
	const char *note = json_string_value(json_object_get(g, "note"));
	const char *id = json_string_value(json_object_get(g, "id"));
	bool active = !strcmp(state, "active");
	char shown[8 * 300 + 1]; /* a reason of GRANT_REASON_MAX bytes, every byte escaped */
	json_t *h, *k;
	size_t i, m;

	printf("  %-17s %-9s %7.1f s  %-8s ", id, state,
	       json_number_value(json_object_get(g, active ? "seconds_left" : "decide_within_s")),
	       json_string_value(json_object_get(g, "by")));
	hosts_line(json_object_get(g, "hosts"), false);
	printf(" for %lld s\n", (long long)json_integer_value(json_object_get(g, "seconds")));
	/* whatever latchd let in, nothing in it can close the quotes or pass for latch's words here */
	if (says) {
		latch_text_escape(says, shown, sizeof(shown));
		printf("  %-17s the sandbox says: \"%s\" (its own words, unchecked)\n", "", shown);
	}
	if (note) {
		latch_text_escape(note, shown, sizeof(shown));
		printf("  %-17s note: %s\n", "", shown);
	}
	if (!active) {
		printf("  %-17s decide: latch approve %s [--for DUR] | latch deny %s\n", "", id, id);
		return;
	}
	json_array_foreach(json_object_get(g, "hosts"), i, h) {
		if (!json_array_size(json_object_get(h, "kernel")))
			printf("  %-17s %s: NOT in the kernel\n", "", json_string_value(json_object_get(h, "name")));
		json_array_foreach(json_object_get(h, "kernel"), m, k)
			printf("  %-17s kernel: %-40s %.1f s left\n", "",
			       json_string_value(json_object_get(k, "entry")),
			       json_number_value(json_object_get(k, "seconds_left")));
	}
}

int cmd_grants(int argc, char **argv)
{
	char err[LATCH_ERR_MAX];
	struct latch_sandbox *sb;
	json_t *kernel, *rep = NULL, *req, *grants, *orphans, *g, *caps, *out;
	bool *used;
	size_t i;
	int rc;

	if (argc != 2)
		return latch_err(LATCH_EXIT_USAGE, "usage: latch grants NAME");
	if (latch_parse_name(argv[1], err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (latch_need_root("grants"))
		return LATCH_EXIT_USAGE;
	if (!latch_sandbox_exists(argv[1]))
		return latch_err_no_sandbox("sandbox", argv[1]);
	sb = latch_sandbox_open(argv[1], err, sizeof(err));
	if (!sb)
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	kernel = json_array();
	rc = latch_policy_list(sb, kernel_item, kernel);
	latch_sandbox_free(sb);
	if (rc < 0) {
		json_decref(kernel);
		return latch_err(LATCH_EXIT_FAILED, "cannot read the maps of %s", argv[1]);
	}
	req = json_pack("{s:s, s:s}", "op", latchd_op_name(LATCHD_OP_GRANTS), "sandbox", argv[1]);
	if (latchd_call(req, &rep, 5000, err, sizeof(err)))
		rep = NULL;
	else if (!json_is_true(json_object_get(rep, "ok")))
		snprintf(err, sizeof(err), "latchd: %s", json_string_value(json_object_get(rep, "error")) ?: "refused");
	json_decref(req);
	grants = rep && json_is_true(json_object_get(rep, "ok")) ? json_object_get(rep, "grants") : NULL;
	used = calloc(json_array_size(kernel) + 1, sizeof(*used));
	json_array_foreach(grants, i, g)
		if (!strcmp(json_string_value(json_object_get(g, "state")) ?: "", "active"))
			join_kernel(g, kernel, used);
	orphans = json_array();
	for (i = 0; i < json_array_size(kernel); i++)
		if (!used || !used[i])
			json_array_append(orphans, json_array_get(kernel, i));
	free(used);
	caps = grants ? json_object_get(rep, "caps") : NULL;
	if (!latch_json) {
		if (caps)
			printf("%s: %lld of %lld grants in the last hour, %lld of %lld asks; asks wait %lld s for a "
			       "decision\n",
			       argv[1], json_integer_value(json_object_get(caps, "granted_last_hour")),
			       json_integer_value(json_object_get(caps, "grants_per_hour")),
			       json_integer_value(json_object_get(caps, "asked_last_hour")),
			       json_integer_value(json_object_get(caps, "grant_asks_per_hour")),
			       json_integer_value(json_object_get(caps, "grant_ask_wait")));
		else
			printf("%s: no grants from latchd (%s): pending asks and the names are unknown; the kernel's "
			       "entries follow\n",
			       argv[1], err);
		json_array_foreach(grants, i, g)
			print_grant(g);
		if (grants && !json_array_size(grants))
			printf("  no grants and no asks\n");
		if (json_array_size(orphans))
			printf("  kernel entries of origin grant that latchd names no grant for:\n");
		json_array_foreach(orphans, i, g)
			printf("    %-40s %.1f s left\n", json_string_value(json_object_get(g, "entry")),
			       json_number_value(json_object_get(g, "seconds_left")));
	}
	out = json_pack("{s:s, s:b, s:O?, s:O?, s:o}", "sandbox", argv[1], "latchd", grants != NULL, "grants", grants,
			"caps", caps, "kernel_unnamed", orphans);
	latch_json_out(out);
	json_decref(rep);
	json_decref(kernel);
	return 0;
}
