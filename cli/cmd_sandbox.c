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
#include "config/config.h"
#include "kit/kit.h"
#include "profile/profile.h"
#include "cli/cli.h"
#include "loader/loader.h"
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

/*
 * Read the posture back after attaching: the filters are in place only if
 * the kernel says so (someone else's filter may still run first).
 */
static int verify_attached(const char *name)
{
	char err[LATCH_ERR_MAX] = "";
	struct latch_posture p;
	int r = latch_sandbox_posture_of(name, &p, err, sizeof(err));

	if (r == -ENOENT)
		return latch_err(LATCH_EXIT_UNVERIFIED, "%s: cannot read the posture back: %s", name, err);
	if (r || !p.enforced)
		return latch_err(LATCH_EXIT_UNVERIFIED,
				 "%s is attached but NOT ENFORCED: %s (see `latch status %s`; remove it and re-attach)",
				 name, r ? strerror(-r) : p.why, name);
	return 0;
}

/* --kit K: the kit, checked as latchd will read it, and latch.conf's broker_port among the host services. */
static int attach_kit_prepare(const char *kit_name, struct latch_sandbox_opts *o, struct latch_kit **kit)
{
	char err[LATCH_ERR_MAX];
	struct latch_conf conf;
	bool have = false;

	*kit = latch_kit_open_checked(kit_name, err, sizeof(err));
	if (!*kit)
		return latch_err(errno == ENOMEM ? LATCH_EXIT_FAILED : LATCH_EXIT_USAGE, "attach --kit: %s", err);
	if (latch_conf_load(&conf, err, sizeof(err))) {
		latch_kit_free(*kit);
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	}
	for (int i = 0; i < o->n_host_ports; i++)
		have |= o->host_ports[i] == conf.broker_port;
	if (!have && o->n_host_ports >= LATCH_HOST_PORTS_MAX) {
		latch_kit_free(*kit);
		return latch_err(LATCH_EXIT_USAGE,
				 "--kit needs a host port for the broker (%u); give at most %d "
				 "--host-port options",
				 conf.broker_port, LATCH_HOST_PORTS_MAX - 1);
	}
	if (!have)
		o->host_ports[o->n_host_ports++] = conf.broker_port;
	return 0;
}

/*
 * After the attach: a kit stored with fresh placeholders (or any old kit
 * state of the name removed), the profile `sealed` when none is stored (the
 * kit's network joins it), and the kit handed to latchd, whose switch then
 * composes both.
 */
static int attach_kit_give(const char *name, const struct latch_kit *kit, json_t *out)
{
	char err[LATCH_ERR_MAX], prof[LATCH_PROFILE_NAME_MAX + 2];
	struct latch_kit_state st;
	json_t *rep = NULL;
	int rc;

	if (!kit) {
		/* nothing of an old sandbox's kit: no state, and latchd closes a broker it may still keep */
		latch_kit_state_remove(name, err, sizeof(err));
		return latch_sandbox_kit_give(name, NULL, false, NULL);
	}
	if (latch_sandbox_kit_store(name, kit, true, &st, err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "%s: kit %s: %s", name, kit->name, err);
	/*
	 * The kit before the profile: its request makes latchd find the new
	 * sandbox, which latchd would switch to a profile stored already; the
	 * switch below would then find that one running.
	 */
	rc = latch_sandbox_kit_give(name, kit, false, out);
	if (rc)
		return rc;
	if (latch_profile_state_read(name, prof, sizeof(prof))) {
		snprintf(prof, sizeof(prof), "sealed");
		if (latch_profile_state_write(name, prof, err, sizeof(err)))
			return latch_err(LATCH_EXIT_FAILED, "%s", err);
		if (!latch_json)
			fprintf(stderr,
				"latch: %s: profile sealed, with the kit's network on top "
				"(`latch egress %s profile P` picks another)\n",
				name, name);
	}
	/* the profile composed with the kit's egress_allow; without latchd it applies when latchd starts */
	if (!latchd_switch(name, prof, &rep, err, sizeof(err)) && !json_is_true(json_object_get(rep, "ok"))) {
		rc = latch_err(LATCH_EXIT_FAILED, "%s: profile %s: %s", name, prof,
			       json_string_value(json_object_get(rep, "error")));
	}
	json_decref(rep);
	return rc;
}

int cmd_attach(int argc, char **argv)
{
	const char *kit_name = NULL;
	struct latch_kit *kit = NULL;
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

	if (!any_opt) {
		if (latch_need_root("attach"))
			return LATCH_EXIT_USAGE;
		if (!latch_sandbox_exists(o.name))
			return latch_err(LATCH_EXIT_NO_SANDBOX,
					 "no sandbox '%s' to re-attach; give --dev and the addresses to "
					 "create it",
					 o.name);
		if (latch_sandbox_reattach(o.name, err, sizeof(err)))
			return latch_err(LATCH_EXIT_FAILED, "%s", err);
		if (verify_attached(o.name))
			return LATCH_EXIT_UNVERIFIED;
		latch_audit_note(o.name, "attach", "reattach", "cli.attach.reattach", NULL);
		if (!latch_json)
			printf("re-attached %s from its pins\n", o.name);
		latch_json_out(json_pack("{s:s, s:s}", "sandbox", o.name, "action", "reattached"));
		return 0;
	}
	if (!*o.ifname)
		return latch_err(LATCH_EXIT_USAGE, "attach needs --dev IFACE, the host end of the sandbox's link");
	if (!have_mac)
		return latch_err(LATCH_EXIT_USAGE, "attach needs --guest-mac MAC, the guest's assigned MAC");
	if (!o.guest_ip4.family && !o.guest_ip6.family)
		return latch_err(LATCH_EXIT_USAGE, "attach needs --guest-ip IP[,IP6], the guest's assigned addresses");
	if (!!o.guest_ip4.family != !!o.host_ip4.family || !!o.guest_ip6.family != !!o.host_ip6.family)
		return latch_err(LATCH_EXIT_USAGE, "--host-ip must give one address for each family in --guest-ip");
	if ((o.resolver_ip4.family && !o.guest_ip4.family) || (o.resolver_ip6.family && !o.guest_ip6.family))
		return latch_err(LATCH_EXIT_USAGE, "--resolver has a family the guest has no address in");
	/* The host address is the resolver unless told otherwise. */
	if (!o.resolver_ip4.family)
		o.resolver_ip4 = o.host_ip4;
	if (!o.resolver_ip6.family)
		o.resolver_ip6 = o.host_ip6;
	if (latch_need_root("attach"))
		return LATCH_EXIT_USAGE;
	if (!if_nametoindex(o.ifname))
		return latch_err(LATCH_EXIT_USAGE, "--dev: no device '%s' on this host (see `ip link`)", o.ifname);
	if (latch_sandbox_exists(o.name))
		return latch_err(LATCH_EXIT_USAGE,
				 "sandbox '%s' already exists; `latch detach %s` first, or "
				 "`latch attach %s` alone to re-attach it",
				 o.name, o.name, o.name);
	/* the kit is loaded and checked, and its port added to the host services, before anything exists */
	if (kit_name && (rc = attach_kit_prepare(kit_name, &o, &kit)))
		return rc;
	rc = latch_sandbox_create(&o, err, sizeof(err));
	if (rc) {
		latch_kit_free(kit);
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	}
	if (verify_attached(o.name)) {
		latch_kit_free(kit);
		return LATCH_EXIT_UNVERIFIED;
	}
	latch_audit_note(o.name, "attach", "attach", "cli.attach", json_pack("{s:s}", "device", o.ifname));
	json_t *out = json_pack("{s:s, s:s, s:s}", "sandbox", o.name, "device", o.ifname, "action", "attached");

	rc = attach_kit_give(o.name, kit, out);
	latch_kit_free(kit);
	if (rc) {
		json_decref(out);
		return rc;
	}
	if (!latch_json)
		printf("attached %s to %s: default deny%s%s\n", o.name, o.ifname, kit_name ? ", kit " : "",
		       kit_name ? kit_name : "");
	latch_json_out(out);
	return 0;
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
	/* its profile goes with it: a new sandbox of that name starts from nothing */
	if (latch_profile_state_write(argv[1], "", err, sizeof(err)))
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

/* One sandbox's observed state; returns true when enforcement is verified. */
static bool status_one(const char *name, json_t *arr)
{
	static const enum latch_map_id counted[] = { LATCH_MAP_EXACT4,	LATCH_MAP_EXACT6, LATCH_MAP_PREFIX4,
						     LATCH_MAP_PREFIX6, LATCH_MAP_TIMED4, LATCH_MAP_TIMED6,
						     LATCH_MAP_FLOW4,	LATCH_MAP_FLOW6 };
	static struct latch_counter ctr[LATCH_COUNTER_SLOTS];
	char err[LATCH_ERR_MAX], g4[64] = "-", h4[64] = "-", g6[64] = "-", h6[64] = "-";
	struct latch_sandbox *sb = latch_sandbox_open(name, err, sizeof(err));
	struct latch_posture p;
	struct latch_config cfg;
	json_t *o, *counts, *reasons, *hooks;
	bool ok;

	if (!sb) {
		latch_err(LATCH_EXIT_FAILED, "%s", err);
		return false;
	}
	latch_sandbox_read_config(sb, &cfg);
	latch_sandbox_posture(sb, &p);
	latch_sandbox_counters(sb, ctr);
	ok = p.enforced;
	if (cfg.flags & LATCH_CFG_HAVE_IP4) {
		addr_str(AF_INET, &cfg.guest_ip4, g4, sizeof(g4));
		addr_str(AF_INET, &cfg.host_ip4, h4, sizeof(h4));
	}
	if (cfg.flags & LATCH_CFG_HAVE_IP6) {
		addr_str(AF_INET6, cfg.guest_ip6, g6, sizeof(g6));
		addr_str(AF_INET6, cfg.host_ip6, h6, sizeof(h6));
	}

	o = json_object();
	json_object_set_new(o, "sandbox", json_string(name));
	json_object_set_new(o, "device", json_string(cfg.ifname));
	json_object_set_new(o, "enforced", json_boolean(ok));
	json_object_set_new(o, "why", ok ? json_null() : json_string(p.why));
	json_object_set_new(o, "guest_ip4", cfg.flags & LATCH_CFG_HAVE_IP4 ? json_string(g4) : json_null());
	json_object_set_new(o, "guest_ip6", cfg.flags & LATCH_CFG_HAVE_IP6 ? json_string(g6) : json_null());
	json_object_set_new(o, "host_ip4", cfg.flags & LATCH_CFG_HAVE_IP4 ? json_string(h4) : json_null());
	json_object_set_new(o, "host_ip6", cfg.flags & LATCH_CFG_HAVE_IP6 ? json_string(h6) : json_null());
	json_object_set_new(o, "tc_mode", json_string(latch_tc_mode_name(p.mode)));
	json_object_set_new(o, "xdp_prog_id", p.xdp_id ? json_integer(p.xdp_id) : json_null());
	json_object_set_new(o, "csum_check", json_boolean(p.csum_check));
	hooks = json_object();
	for (int d = 0; d < LATCH_DIR_COUNT; d++) {
		const struct latch_hook_state *h = &p.hook[d];

		json_object_set_new(hooks, dir_name(d),
				    json_pack("{s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "present", h->present,
					      "clsact_filters", h->n_filters, "tcx_programs", h->n_tcx, "link_id",
					      h->link_id, "attached_prog_id", h->attached_id, "pinned_prog_id",
					      p.pinned_id[d], "ahead_prog_id", h->ahead_id, "first", h->first));
	}
	json_object_set_new(o, "hooks", hooks);
	if (latch_json)
		latch_vm_status_lines(name, o);
	counts = json_object();
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
		json_object_set_new(counts, latch_map_names[counted[i]],
				    json_integer(latch_sandbox_map_count(sb, counted[i])));
	json_object_set_new(o, "entries", counts);
	{
		char prof[LATCH_PROFILE_NAME_MAX + 2];
		const char *applied = NULL;
		json_t *rep = latchd_view(), *broker = NULL;

		json_object_set_new(o, "profile",
				    latch_profile_state_read(name, prof, sizeof(prof)) ? json_null() :
											 json_string(prof));
		/* what latchd says it applied, when it answers: the stored name alone is only intent */
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
	/* observed in the kernel, not taken from the stored name */
	json_object_set_new(o, "uncontained", json_boolean(cfg.flags & LATCH_CFG_OPEN));
	json_object_set_new(o, "policy_generation", json_integer(cfg.policy_gen));
	json_object_set_new(o, "policy_version", json_integer(cfg.policy_version));
	reasons = json_array();
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
	json_object_set_new(o, "counters", reasons);
	json_object_set_new(o, "events",
			    json_pack("{s:I, s:I, s:I}", "sent",
				      (json_int_t)ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SENT)].packets, "suppressed",
				      (json_int_t)ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_SUPPRESSED)].packets, "lost",
				      (json_int_t)ctr[LATCH_STAT_SLOT(LATCH_STAT_EVENTS_LOST)].packets));

	if (!latch_json) {
		printf("%s: %s\n", name, ok ? "enforced (verified in the kernel)" : "NOT ENFORCED");
		if (!ok)
			printf("  why:      %s\n", p.why);
		printf("  device:   %s (ifindex %u%s)\n", cfg.ifname, p.ifindex,
		       p.device_present ? (p.device_matches ? "" : ", re-created since attach") : ", missing");
		printf("  hooks:    %s%s%s\n", p.mode == LATCH_TC_TCX ? "TCX links (pinned)" : "clsact filters",
		       p.xdp_id ? ", XDP program on the device: NOT ALLOWED" : ", no XDP program",
		       p.csum_check ? "" : ", no checksum-offload check (kernel < 6.2)");
		for (int d = 0; d < LATCH_DIR_COUNT; d++) {
			const struct latch_hook_state *h = &p.hook[d];

			printf("  %-10s latch prog %u (pinned %u)", dir_name(d), h->attached_id, p.pinned_id[d]);
			if (p.mode == LATCH_TC_TCX)
				printf(", link %u", h->link_id);
			printf(", %d TCX program(s), %d clsact filter(s)%s\n", h->n_tcx, h->n_filters,
			       h->attached_id && !h->first ? ", NOT FIRST" : "");
		}
		printf("  guest:    %s %s   host: %s %s\n", g4, g6, h4, h6);
		latch_vm_status_lines(name, o);
		printf("  entries:  ");
		for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++)
			printf("%s%s %d", i ? ", " : "", latch_map_names[counted[i]],
			       latch_sandbox_map_count(sb, counted[i]));
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
				snprintf(what, sizeof(what),
					 "profile %s stored; latchd is not running, so not verified", stored);
			printf("\n  policy:   generation %u, version %u, %s%s\n", cfg.policy_gen, cfg.policy_version,
			       what, cfg.flags & LATCH_CFG_OPEN ? ": UNCONTAINED (every destination passes)" : "");
		}
		latch_sandbox_kit_print(json_object_get(o, "kit"));
		printf("  counters:\n");
		size_t nr = json_array_size(reasons);

		for (size_t i = 0; i < nr; i++) {
			json_t *r = json_array_get(reasons, i);

			printf("    %-24s %-10s %10lld pkts %12lld bytes\n",
			       json_string_value(json_object_get(r, "reason")),
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
	json_array_append_new(arr, o);
	latch_sandbox_free(sb);
	return ok;
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
