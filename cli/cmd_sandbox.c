// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_sandbox.c - `latch attach`, `latch detach` and `latch status`.
 *
 * attach validates every option (and a --kit's kit) before it touches the
 * kernel, so bad input changes nothing.  status reports only what it read
 * back from the kernel.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/ctl.h"
#include "cli/cli.h"
#include "loader/loader.h"
#include "profile/profile.h"
#include "sandbox/sandbox.h"
#include "vm/vm.h"

/* "IP[,IP6]": at most one address of each family. */
static int parse_addr_pair(const char *opt, const char *s, struct latch_addr *v4, struct latch_addr *v6)
{
	char buf[128], *comma, *parts[2];
	int n = 1;

	if (strlen(s) >= sizeof(buf))
		return latch_err(LATCH_EXIT_USAGE, "%s '%s' is too long", opt, s);
	strcpy(buf, s);
	parts[0] = buf;
	comma = strchr(buf, ',');
	if (comma) {
		*comma = '\0';
		parts[1] = comma + 1;
		n = 2;
	}
	for (int i = 0; i < n; i++) {
		struct latch_addr a;
		char err[LATCH_ERR_MAX];

		if (latch_parse_addr(parts[i], &a, err, sizeof(err)))
			return latch_err(LATCH_EXIT_USAGE, "%s: %s; write IPv4[,IPv6]", opt, err);
		struct latch_addr *slot = a.family == AF_INET ? v4 : v6;

		if (slot->family)
			return latch_err(LATCH_EXIT_USAGE, "%s '%s' gives two %s addresses; give one of each family",
					 opt, s, a.family == AF_INET ? "IPv4" : "IPv6");
		*slot = a;
	}
	return 0;
}

static int parse_rate(const char *opt, const char *s, uint32_t *out)
{
	if (latch_parse_uint(s, 0, 1000000, out))
		return latch_err(LATCH_EXIT_USAGE, "%s '%s' must be a whole number from 0 to 1000000", opt, s);
	return 0;
}

/* `attach NAME` alone: re-attach from the pins. */
static int attach_again(const char *name)
{
	char err[LATCH_ERR_MAX];
	enum latch_vm_fail fail;

	if (latch_need_root("attach"))
		return LATCH_EXIT_USAGE;
	if (latch_sandbox_attach_again(name, &fail, err, sizeof(err)))
		return latch_err((int)fail, "%s", err);
	latch_audit_note(name, "attach", "reattach", "cli.attach.reattach", NULL);
	if (!latch_json)
		printf("re-attached %s from its pins\n", name);
	latch_json_out(json_pack("{s:s, s:s}", "sandbox", name, "action", "reattached"));
	return 0;
}

/* The options that only make sense together; the host address is the resolver unless told otherwise. */
static int attach_check(struct latch_sandbox_opts *o, bool have_mac)
{
	if (!*o->ifname)
		return latch_err(LATCH_EXIT_USAGE, "attach needs --dev IFACE, the host end of the sandbox's link");
	if (!have_mac)
		return latch_err(LATCH_EXIT_USAGE, "attach needs --guest-mac MAC, the guest's assigned MAC");
	if (!o->guest_ip4.family && !o->guest_ip6.family)
		return latch_err(LATCH_EXIT_USAGE, "attach needs --guest-ip IP[,IP6], the guest's assigned addresses");
	if (!!o->guest_ip4.family != !!o->host_ip4.family || !!o->guest_ip6.family != !!o->host_ip6.family)
		return latch_err(LATCH_EXIT_USAGE, "--host-ip must give one address for each family in --guest-ip");
	if ((o->resolver_ip4.family && !o->guest_ip4.family) || (o->resolver_ip6.family && !o->guest_ip6.family))
		return latch_err(LATCH_EXIT_USAGE, "--resolver has a family the guest has no address in");
	if (!o->resolver_ip4.family)
		o->resolver_ip4 = o->host_ip4;
	if (!o->resolver_ip6.family)
		o->resolver_ip6 = o->host_ip6;
	return 0;
}

/* The attach itself (sandbox/attach.c), recorded, then the kit and profile handed to latchd. */
static int attach_run(struct latch_sandbox_opts *o, const char *kit_name)
{
	char err[LATCH_SANDBOX_ERR_MAX];
	struct latch_kit *kit;
	enum latch_vm_fail fail;
	json_t *out;
	int rc;

	if (latch_sandbox_attach(o, kit_name, &kit, &fail, err, sizeof(err)))
		return latch_err((int)fail, "%s", err);
	latch_audit_note(o->name, "attach", "attach", "cli.attach", json_pack("{s:s}", "device", o->ifname));
	out = json_pack("{s:s, s:s, s:s}", "sandbox", o->name, "device", o->ifname, "action", "attached");
	rc = latch_sandbox_attach_kit(o->name, kit, out, &latch_say, err, sizeof(err));
	latch_kit_free(kit);
	if (rc) {
		json_decref(out);
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	}
	if (!latch_json)
		printf("attached %s to %s: default deny%s%s\n", o->name, o->ifname, kit_name ? ", kit " : "",
		       kit_name ? kit_name : "");
	latch_json_out(out);
	return 0;
}

int cmd_attach(int argc, char **argv)
{
	const char *kit_name = NULL;
	struct latch_sandbox_opts o = {
		.dns_rate = LATCH_DEFAULT_DNS_RATE,
		.dns_burst = LATCH_DEFAULT_DNS_BURST,
		.event_rate = LATCH_DEFAULT_EVENT_RATE,
		.event_burst = LATCH_DEFAULT_EVENT_BURST,
	};
	char err[LATCH_ERR_MAX];
	bool have_mac = false, any_opt = false;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = latch_getopt(argc, argv, "attach")) != -1) {
		any_opt = true;
		switch (c) {
		case 'd':
			if (strlen(optarg) >= IF_NAMESIZE)
				return latch_err(LATCH_EXIT_USAGE, "--dev '%s' is longer than %d characters", optarg,
						 IF_NAMESIZE - 1);
			strcpy(o.ifname, optarg);
			break;
		case 'm':
			if (latch_parse_mac(optarg, o.guest_mac, err, sizeof(err)))
				return latch_err(LATCH_EXIT_USAGE, "--guest-mac: %s", err);
			have_mac = true;
			break;
		case 'g':
			if (parse_addr_pair("--guest-ip", optarg, &o.guest_ip4, &o.guest_ip6))
				return LATCH_EXIT_USAGE;
			break;
		case 'H':
			if (parse_addr_pair("--host-ip", optarg, &o.host_ip4, &o.host_ip6))
				return LATCH_EXIT_USAGE;
			break;
		case 'r':
			if (parse_addr_pair("--resolver", optarg, &o.resolver_ip4, &o.resolver_ip6))
				return LATCH_EXIT_USAGE;
			break;
		case 'p': {
			uint16_t port;

			if (latch_parse_port(optarg, &port, err, sizeof(err)))
				return latch_err(LATCH_EXIT_USAGE, "--host-port: %s", err);
			if (port == 53)
				return latch_err(LATCH_EXIT_USAGE, "--host-port 53: DNS to the host goes through "
								   "--resolver and its rate limit; drop this option");
			if (o.n_host_ports >= LATCH_HOST_PORTS_MAX)
				return latch_err(LATCH_EXIT_USAGE, "more than %d --host-port options",
						 LATCH_HOST_PORTS_MAX);
			o.host_ports[o.n_host_ports++] = port;
			break;
		}
		case 'R':
			if (parse_rate("--dns-rate", optarg, &o.dns_rate))
				return LATCH_EXIT_USAGE;
			break;
		case 'B':
			if (parse_rate("--dns-burst", optarg, &o.dns_burst))
				return LATCH_EXIT_USAGE;
			break;
		case 'K':
			kit_name = optarg;
			break;
		default:
			return latch_err(LATCH_EXIT_USAGE,
					 "attach: unknown or incomplete option '%s'; see `latch help attach`",
					 argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return latch_err(LATCH_EXIT_USAGE, "attach takes one NAME; see `latch help attach`");
	if (latch_parse_name(argv[optind], err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	snprintf(o.name, sizeof(o.name), "%s", argv[optind]);

	if (!any_opt)
		return attach_again(o.name);
	rc = attach_check(&o, have_mac);
	if (rc)
		return rc;
	if (latch_need_root("attach"))
		return LATCH_EXIT_USAGE;
	return attach_run(&o, kit_name);
}

int cmd_detach(int argc, char **argv)
{
	char err[LATCH_ERR_MAX];

	if (argc != 2)
		return latch_err(LATCH_EXIT_USAGE, "detach takes one NAME");
	if (latch_parse_name(argv[1], err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (latch_need_root("detach"))
		return LATCH_EXIT_USAGE;
	if (!latch_sandbox_exists(argv[1]))
		return latch_err_no_sandbox("sandbox", argv[1]);
	/* a guest `latch up` made stays routed and masqueraded: without its filters it would be unfiltered */
	if (latch_vm_exists(argv[1]))
		return latch_err(LATCH_EXIT_USAGE,
				 "'%s' is a VM sandbox: detach would leave its guest routed and unfiltered; "
				 "`latch destroy %s` removes it whole",
				 argv[1], argv[1]);
	if (latch_sandbox_detach(argv[1], err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	/* its profile and what latchd kept of it go with it: a new sandbox of that name starts from nothing */
	if (latch_state_forget(argv[1], err, sizeof(err)))
		fprintf(stderr, "latch: warning: %s\n", err);
	latch_audit_note(argv[1], "attach", "detach", "cli.detach", NULL);
	if (!latch_json)
		printf("detached %s\n", argv[1]);
	latch_json_out(json_pack("{s:s, s:s}", "sandbox", argv[1], "action", "detached"));
	return 0;
}

static const char *dir_name(int d)
{
	return d == LATCH_DIR_FROM_GUEST ? "from-guest" : "to-guest";
}

static void addr_str(int family, const void *a, char *buf, size_t len)
{
	if (!inet_ntop(family, a, buf, len))
		snprintf(buf, len, "?");
}

/* latchd's view of the sandboxes, asked once per command; NULL when it is not running. */
static json_t *latchd_view(void)
{
	static json_t *cached;
	static bool asked;

	if (!asked) {
		asked = true;
		cached = latchd_ping(2000);
	}
	return cached ? json_incref(cached) : NULL;
}

static void kit_print(const json_t *k)
{
	const json_t *served = json_object_get(k, "served"), *r;
	size_t i, missing = 0;

	if (!json_is_object(k))
		return;
	printf("  kit:      %s, port %lld: ", json_string_value(json_object_get(k, "name")),
	       (long long)json_integer_value(json_object_get(k, "port")));
	if (json_is_true(json_object_get(k, "stopped")))
		printf("stopped (latchd holds no key for it)\n");
	else if (!json_is_true(json_object_get(k, "latchd")))
		printf("stored; latchd is not running, so no broker serves it\n");
	else if (!json_is_true(json_object_get(served, "listening")))
		printf("NOT SERVED: %s\n",
		       json_string_value(json_object_get(served, "why")) ?: "latchd has no broker for it");
	else {
		printf("broker listening, %zu route(s)", json_array_size(json_object_get(served, "routes")));
		json_array_foreach(json_object_get(served, "routes"), i, r)
			if (!strcmp(json_string_value(json_object_get(r, "secret")) ?: "", "missing"))
				printf("%s %s", missing++ ? "," : "; keys missing:",
				       json_string_value(json_object_get(r, "secret_var")) ?:
					       json_string_value(json_object_get(r, "name")));
		printf("\n");
	}
}

/* What status read of one sandbox, from its pins and the kernel. */
struct status_view {
	const char *name;
	struct latch_sandbox *sb;
	struct latch_config cfg;
	struct latch_posture p;
	struct latch_counter *ctr; /* LATCH_COUNTER_SLOTS */
	char g4[64], h4[64], g6[64], h6[64];
};

/* the maps whose entries status counts */
static const enum latch_map_id counted[] = { LATCH_MAP_EXACT4, LATCH_MAP_EXACT6, LATCH_MAP_PREFIX4, LATCH_MAP_PREFIX6,
					     LATCH_MAP_TIMED4, LATCH_MAP_TIMED6, LATCH_MAP_FLOW4,   LATCH_MAP_FLOW6 };

static json_t *status_hooks_json(const struct latch_posture *p)
{
	json_t *hooks = json_object();

	for (int d = 0; d < LATCH_DIR_COUNT; d++) {
		const struct latch_hook_state *h = &p->hook[d];

		json_object_set_new(hooks, dir_name(d),
				    json_pack("{s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "present", h->present,
					      "clsact_filters", h->n_filters, "tcx_programs", h->n_tcx, "link_id",
					      h->link_id, "attached_prog_id", h->attached_id, "pinned_prog_id",
					      p->pinned_id[d], "ahead_prog_id", h->ahead_id, "first", h->first));
	}
	return hooks;
}

/* The stored profile and kit, and what latchd says it applied and serves (the stored names alone are only intent). */
static void status_latchd_json(const char *name, json_t *o)
{
	char prof[LATCH_PROFILE_NAME_MAX + 2];
	const char *applied = NULL;
	json_t *rep = latchd_view(), *broker = NULL;

	json_object_set_new(o, "profile",
			    latch_profile_state_read(name, prof, sizeof(prof)) ? json_null() : json_string(prof));
	if (rep) {
		size_t i;
		json_t *sbx;

		json_array_foreach(json_object_get(rep, "sandboxes"), i, sbx)
			if (!strcmp(json_string_value(json_object_get(sbx, "name")) ?: "", name)) {
				broker = json_object_get(sbx, "broker");
				if (!json_is_true(json_object_get(sbx, "switching")))
					applied = json_string_value(json_object_get(sbx, "profile"));
			}
	}
	latch_sandbox_kit_status(name, broker, rep != NULL, o);
	json_object_set_new(o, "latchd", json_boolean(rep != NULL));
	json_object_set_new(o, "profile_applied", applied ? json_string(applied) : json_null());
	json_decref(rep);
}

static json_t *status_reasons_json(const struct latch_counter *ctr)
{
	json_t *reasons = json_array();

	for (int r = LATCH_DROP_LAST; r <= LATCH_PASS_LAST; r++) {
		for (int d = 0; d < LATCH_DIR_COUNT; d++) {
			const struct latch_counter *c = &ctr[latch_counter_slot(r, d)];

			if (!c->packets || !strcmp(latch_reason_name(r), "unknown"))
				continue;
			json_array_append_new(reasons,
					      json_pack("{s:s, s:s, s:I, s:I}", "reason", latch_reason_name(r),
							"direction", dir_name(d), "packets", (json_int_t)c->packets,
							"bytes", (json_int_t)c->bytes));
		}
	}
	return reasons;
}

/* One sandbox as its JSON object (status's text is printed from it). */
static json_t *status_json(const struct status_view *v)
{
	const struct latch_config *cfg = &v->cfg;
	bool ok = v->p.enforced;
	json_t *o = json_object(), *counts;

	json_object_set_new(o, "sandbox", json_string(v->name));
	json_object_set_new(o, "device", json_string(cfg->ifname));
	json_object_set_new(o, "enforced", json_boolean(ok));
	json_object_set_new(o, "why", ok ? json_null() : json_string(v->p.why));
	json_object_set_new(o, "guest_ip4", cfg->flags & LATCH_CFG_HAVE_IP4 ? json_string(v->g4) : json_null());
	json_object_set_new(o, "guest_ip6", cfg->flags & LATCH_CFG_HAVE_IP6 ? json_string(v->g6) : json_null());
	json_object_set_new(o, "host_ip4", cfg->flags & LATCH_CFG_HAVE_IP4 ? json_string(v->h4) : json_null());
	json_object_set_new(o, "host_ip6", cfg->flags & LATCH_CFG_HAVE_IP6 ? json_string(v->h6) : json_null());
	json_object_set_new(o, "tc_mode", json_string(latch_tc_mode_name(v->p.mode)));
	json_object_set_new(o, "xdp_prog_id", v->p.xdp_id ? json_integer(v->p.xdp_id) : json_null());
	json_object_set_new(o, "csum_check", json_boolean(v->p.csum_check));
	json_object_set_new(o, "hooks", status_hooks_json(&v->p));
	if (latch_json)
		latch_vm_status_lines(v->name, o);
	counts = json_object();
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		json_object_set_new(counts, latch_map_names[counted[i]],
				    json_integer(latch_sandbox_map_count(v->sb, counted[i])));
	json_object_set_new(o, "entries", counts);
	status_latchd_json(v->name, o);
	/* observed in the kernel, not taken from the stored name */
	json_object_set_new(o, "uncontained", json_boolean(cfg->flags & LATCH_CFG_OPEN));
	json_object_set_new(o, "policy_generation", json_integer(cfg->policy_gen));
	json_object_set_new(o, "policy_version", json_integer(cfg->policy_version));
	json_object_set_new(o, "counters", status_reasons_json(v->ctr));
	json_object_set_new(o, "events",
			    json_pack("{s:I, s:I, s:I}", "sent",
				      (json_int_t)v->ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SENT)].packets, "suppressed",
				      (json_int_t)v->ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SUPPRESSED)].packets, "lost",
				      (json_int_t)v->ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_LOST)].packets));
	return o;
}

static void status_print_hooks(const struct latch_posture *p)
{
	printf("  hooks:    %s%s%s\n", p->mode == LATCH_TC_TCX ? "TCX links (pinned)" : "clsact filters",
	       p->xdp_id ? ", XDP program on the device: NOT ALLOWED" : ", no XDP program",
	       p->csum_check ? "" : ", no checksum-offload check (kernel < 6.2)");
	for (int d = 0; d < LATCH_DIR_COUNT; d++) {
		const struct latch_hook_state *h = &p->hook[d];

		printf("  %-10s latch prog %u (pinned %u)", dir_name(d), h->attached_id, p->pinned_id[d]);
		if (p->mode == LATCH_TC_TCX)
			printf(", link %u", h->link_id);
		printf(", %d TCX program(s), %d clsact filter(s)%s\n", h->n_tcx, h->n_filters,
		       h->attached_id && !h->first ? ", NOT FIRST" : "");
	}
}

/* The policy line: the stored profile against what latchd applied. */
static void status_print_policy(const struct latch_config *cfg, const json_t *o)
{
	const char *stored = json_string_value(json_object_get(o, "profile"));
	const char *applied = json_string_value(json_object_get(o, "profile_applied"));
	bool up = json_is_true(json_object_get(o, "latchd"));
	char what[160];

	if (!stored)
		snprintf(what, sizeof(what), "no profile (only the entries below)");
	else if (applied && !strcmp(applied, stored))
		snprintf(what, sizeof(what), "profile %s (applied by latchd)", stored);
	else if (up)
		snprintf(what, sizeof(what), "profile %s stored, latchd has %s applied", stored,
			 applied ? applied : "nothing");
	else
		snprintf(what, sizeof(what), "profile %s stored; latchd is not running, so not verified", stored);
	printf("\n  policy:   generation %u, version %u, %s%s\n", cfg->policy_gen, cfg->policy_version, what,
	       cfg->flags & LATCH_CFG_OPEN ? ": UNCONTAINED (every destination passes)" : "");
}

static void status_print_counters(const json_t *reasons, const struct latch_counter *ctr)
{
	size_t nr = json_array_size(reasons);

	printf("  counters:\n");
	for (size_t i = 0; i < nr; i++) {
		json_t *r = json_array_get(reasons, i);

		printf("    %-24s %-10s %10lld pkts %12lld bytes\n", json_string_value(json_object_get(r, "reason")),
		       json_string_value(json_object_get(r, "direction")),
		       (long long)json_integer_value(json_object_get(r, "packets")),
		       (long long)json_integer_value(json_object_get(r, "bytes")));
	}
	if (!nr)
		printf("    (no packets yet)\n");
	printf("  events:   %llu sent, %llu suppressed by the rate limit, %llu lost\n",
	       (unsigned long long)ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SENT)].packets,
	       (unsigned long long)ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SUPPRESSED)].packets,
	       (unsigned long long)ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_LOST)].packets);
}

static void status_print(const struct status_view *v, json_t *o)
{
	const struct latch_posture *p = &v->p;

	printf("%s: %s\n", v->name, p->enforced ? "enforced (verified in the kernel)" : "NOT ENFORCED");
	if (!p->enforced)
		printf("  why:      %s\n", p->why);
	printf("  device:   %s (ifindex %u%s)\n", v->cfg.ifname, p->ifindex,
	       p->device_present ? (p->device_matches ? "" : ", re-created since attach") : ", missing");
	status_print_hooks(p);
	printf("  guest:    %s %s   host: %s %s\n", v->g4, v->g6, v->h4, v->h6);
	latch_vm_status_lines(v->name, o);
	printf("  entries:  ");
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		printf("%s%s %d", i ? ", " : "", latch_map_names[counted[i]],
		       latch_sandbox_map_count(v->sb, counted[i]));
	status_print_policy(&v->cfg, o);
	kit_print(json_object_get(o, "kit"));
	status_print_counters(json_object_get(o, "counters"), v->ctr);
}

/* One sandbox's observed state; returns true when enforcement is verified. */
static bool status_one(const char *name, json_t *arr)
{
	static struct latch_counter ctr[LATCH_COUNTER_SLOTS];
	struct status_view v = { .name = name, .ctr = ctr, .g4 = "-", .h4 = "-", .g6 = "-", .h6 = "-" };
	char err[LATCH_ERR_MAX];
	json_t *o;

	v.sb = latch_sandbox_open(name, err, sizeof(err));
	if (!v.sb) {
		latch_err(LATCH_EXIT_FAILED, "%s", err);
		return false;
	}
	latch_sandbox_read_config(v.sb, &v.cfg);
	latch_sandbox_posture(v.sb, &v.p);
	latch_sandbox_counters(v.sb, ctr);
	if (v.cfg.flags & LATCH_CFG_HAVE_IP4) {
		addr_str(AF_INET, &v.cfg.guest_ip4, v.g4, sizeof(v.g4));
		addr_str(AF_INET, &v.cfg.host_ip4, v.h4, sizeof(v.h4));
	}
	if (v.cfg.flags & LATCH_CFG_HAVE_IP6) {
		addr_str(AF_INET6, v.cfg.guest_ip6, v.g6, sizeof(v.g6));
		addr_str(AF_INET6, v.cfg.host_ip6, v.h6, sizeof(v.h6));
	}
	o = status_json(&v);
	if (!latch_json)
		status_print(&v, o);
	json_array_append_new(arr, o);
	latch_sandbox_free(v.sb);
	return v.p.enforced;
}

struct status_ctx {
	json_t *arr;
	int unverified;
};

static int status_cb(const char *name, void *arg)
{
	struct status_ctx *s = arg;

	if (!status_one(name, s->arr))
		s->unverified++;
	return 0;
}

int cmd_status(int argc, char **argv)
{
	struct status_ctx s = { .arr = json_array() };
	char err[LATCH_ERR_MAX];
	int n;

	if (argc > 2)
		return latch_err(LATCH_EXIT_USAGE, "status takes at most one NAME");
	if (latch_need_root("status"))
		return LATCH_EXIT_USAGE;
	if (argc == 2) {
		if (latch_parse_name(argv[1], err, sizeof(err)))
			return latch_err(LATCH_EXIT_USAGE, "%s", err);
		if (!latch_sandbox_exists(argv[1])) {
			json_decref(s.arr);
			return latch_err_no_sandbox("sandbox", argv[1]);
		}
		status_cb(argv[1], &s);
		n = 1;
	} else {
		n = latch_sandbox_list(status_cb, &s);
		if (n < 0) {
			json_decref(s.arr);
			return latch_err(LATCH_EXIT_FAILED, "cannot list sandboxes: %s", strerror(-n));
		}
		if (n == 0 && !latch_json)
			printf("no sandboxes under %s/latch\n", latch_bpffs_root());
	}
	{
		char line[512];
		int level;
		json_t *confined = latch_confinement_report(line, sizeof(line), &level);

		if (!latch_json)
			printf("%s\n", line);
		if (level == 2)
			s.unverified++; /* latchd runs, and nothing keeps it from the LAN */
		latch_json_out(json_pack("{s:o, s:o, s:b}", "sandboxes", s.arr, "latchd", confined, "verified",
					 s.unverified == 0));
	}
	return s.unverified ? LATCH_EXIT_UNVERIFIED : 0;
}
