// SPDX-License-Identifier: GPL-2.0-only
/*
 * main.c - latchd: named policy, the per-sandbox resolvers, and the kernel's
 * deny events into the audit log.
 *
 * latchd finds the sandboxes by their pins (/sys/fs/bpf/latch/NAME) and, for
 * each, runs a filtering resolver on the sandbox's resolver address and
 * reads its ring buffer.  A sandbox whose profile is stored under
 * var/lib/latch/policy/ gets that profile compiled into its maps: CIDR
 * entries as they are, host names resolved here (never by the guest) with
 * their TTL as the kernel deadline, refreshed before it runs out.  Answers
 * the resolver gives the guest become learned entries.
 *
 * Enforcement never depends on latchd: everything it writes is in pinned
 * maps, and every deadline is checked by the program.  Killing latchd leaves
 * the boundary as it was; starting it again picks up the stored profiles.
 *
 * One thread, one libevent loop.  SIGHUP re-reads latch.conf and every
 * active profile and swaps them in only when all of them are valid; SIGTERM
 * and SIGINT shut down cleanly.  The socket is $LATCH_ROOT/run/latch/
 * latchd.sock, root-only; see ctl/ctl.h for the protocol.  latchd.h
 * lists the parts; this file holds the arguments, the loop and the signals
 * (log.c the log lines, reload.c latch.conf and SIGHUP's reload).
 *
 * The spend caps (meter.c): the ledger is opened first, as its sole writer
 * (a second latchd stops there, before it touches anything), its tick and
 * SIGHUP come from here, and it is closed after the engine.
 *
 * The credential broker (broker/, wired in by broker.c): its engine is
 * made here after the event loop, on the same base (latchd_broker_init; before it,
 * latchd_broker_harden makes latchd undumpable: keys pass through it), and freed
 * after the sandboxes; each sandbox's listener is opened by sandbox_add() from its
 * stored kit and freed by latchd_sandbox_free().  Kits are not re-read on SIGHUP:
 * a reload would lose the keys `latch up` handed over.  It reaches the
 * policy only through the kernel and this process's sandboxes, never vm/.
 */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "latchd/latchd.h"
#include "latchd/room.h"
#include "latchd/version.h" /* generated: build/obj/latchd/version.h (scripts/install.mk) */

/* ---- the loop ---- */

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct latchd *ld = arg;
	char err[LATCH_ERR_MAX];

	if (sig == SIGHUP) {
		latchd_log("SIGHUP: reloading");
		sd_notify(0, "RELOADING=1");
		latchd_reload_all(ld, err, sizeof(err)); /* logged and audited there */
		sd_notify(0, "READY=1");
		return;
	}
	sd_notify(0, "STOPPING=1");
	latchd_log("%s: shutting down (enforcement stays in the kernel)", strsignal(sig));
	event_base_loopexit(ld->base, NULL);
}

/* systemd's watchdog (WatchdogSec= in latchd.service): the tick pets it, so a stuck loop gets restarted */
static bool watchdog;

/* Every second: new sandboxes every SCAN_INTERVAL_S, and the periodic jobs. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct latchd *ld = arg;
	uint64_t now = latch_now_boot_ns();

	if (watchdog)
		sd_notify(0, "WATCHDOG=1");

	if (++ld->ticks % SCAN_INTERVAL_S == 0)
		latchd_sandboxes_scan(ld);
	latchd_confine_tick(ld);
	latchd_periodic_run(ld, now);
	latchd_meter_tick(ld); /* settlements' rows and the ledger's checkpoint, off every request's path */
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: latchd [--dns-port PORT] [--unconfined] | latchd --check | latchd --reload | latchd --version\n"
		"  Serves every latch sandbox: named policy, a filtering resolver on each\n"
		"  sandbox's resolver address, kernel deny events into the audit log.\n"
		"  Runs in the foreground (systemd's Type=notify, with the watchdog); logs to stderr.\n"
		"  SIGHUP re-reads latch.conf and the profiles; SIGTERM stops it.\n"
		"  It runs in a cgroup of its own that reaches only its DNS upstreams and the\n"
		"  addresses it looks up for brokers (docs/rooms.md); --unconfined runs it without.\n"
		"  --check (-n) reads latch.conf as SIGHUP would, says what is wrong and exits 1,\n"
		"  else 0.  --reload asks the running latchd to reload (as SIGHUP) and exits 1\n"
		"  with its refusal when it kept the old configuration (the unit's ExecReload).\n"
		"  --version: latch's.\n");
}

/*
 * latchd's options, written once: getopt's tables are made from this one
 * (has_short: -KEY too), and usage() says what each does.
 */
static const struct latch_opt latchd_opts[] = {
	{ "dns-port", 'p', "PORT", "the resolvers' port", false },
	{ "unconfined", 'u', NULL, "run without latchd's own cgroup", false },
	{ "check", 'n', NULL, "read latch.conf as SIGHUP would, and exit", true },
	{ "version", 'V', NULL, "latch's version", false },
	{ "reload", 'r', NULL, "ask the running latchd to reload", false },
	{ "help", 'h', NULL, "this help", true },
	{ NULL, 0, NULL, NULL, false },
};

/* The options; 0 to go on, else the exit status (usage, help). */
static int parse_args(int argc, char **argv, uint32_t *port, bool *unconfined, bool *check, bool *reload)
{
	struct option opts[sizeof(latchd_opts) / sizeof(latchd_opts[0])];
	char optstring[2 * sizeof(latchd_opts) / sizeof(latchd_opts[0]) + 2];
	int c;

	if (latch_opt_getopt(latchd_opts, false, opts, sizeof(opts) / sizeof(opts[0]), optstring, sizeof(optstring)))
		return 2; /* the table above outgrew its arrays: a build mistake */
	while ((c = getopt_long(argc, argv, optstring, opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			*check = true;
			break;
		case 'r':
			*reload = true;
			break;
		case 'V':
			printf("latchd %s\n", LATCH_VERSION);
			return -1;
		case 'p':
			if (latch_parse_uint(optarg, 1, 65535, port)) {
				fprintf(stderr, "latchd: --dns-port '%s' must be 1..65535\n", optarg);
				return 2;
			}
			break;
		case 'u':
			*unconfined = true;
			break;
		case 'h':
			usage(stdout);
			return -1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	return 0;
}

/*
 * --check: latch.conf read as a SIGHUP reads it (one bad line refuses the
 * whole reload), nothing started.  A price table or a profile that a reload
 * can't take is refused on its own, logged as an error and audited.
 */
static int check_config(void)
{
	struct latch_conf c;
	struct latch_addr up[LATCH_RESOLVER_UPSTREAM_MAX];
	uint16_t up_port[LATCH_RESOLVER_UPSTREAM_MAX];
	char err[LATCH_ERR_MAX];
	int n_up = 0;

	if (latchd_read_conf(&c, up, up_port, &n_up, err, sizeof(err))) {
		latchd_log_err("%s", err);
		return 1;
	}
	printf("latchd: latch.conf is good (%d DNS upstream(s))\n", n_up);
	return 0;
}

/*
 * --reload: the running latchd reloads (as on SIGHUP) and answers whether it
 * took the new configuration, so `systemctl reload latchd` fails when latchd
 * kept the old one (a signal alone can't say).
 */
static int ask_reload(void)
{
	json_t *req = json_pack("{s:s}", "op", latchd_op_name(LATCHD_OP_RELOAD)), *rep = NULL;
	char err[LATCH_ERR_MAX];
	int rc = 1;

	if (latchd_call(req, &rep, 30000, err, sizeof(err)))
		fprintf(stderr, "latchd: %s\n", err);
	else if (!json_is_true(json_object_get(rep, "ok")))
		fprintf(stderr, "latchd: %s\n", json_string_value(json_object_get(rep, "error")) ?: "reload refused");
	else
		rc = 0;
	if (!rc)
		printf("latchd: reloaded\n");
	json_decref(req);
	json_decref(rep);
	return rc;
}

/* latch.conf, the profile paths and the audit log; 0 or the exit status. */
static int setup(struct latchd *ld, bool unconfined)
{
	/* what latchd's listeners answer from: the resolvers' ports and the brokers' */
	uint16_t ports[] = { 53, ROOM_BROKER_PORT, ld->dns_port, 0 };
	int n_ports = ld->dns_port == 53 ? 2 : 3;
	char err[LATCH_ERR_MAX], path[PATH_MAX];

	if (latchd_read_conf(&ld->conf, ld->upstream, ld->upstream_port, &ld->n_upstream, err, sizeof(err))) {
		latchd_log_err("%s", err);
		return 1;
	}
	/* the spend ledger, as its sole writer: a bad price table, an unsafe ledger or another latchd stop here */
	if (latchd_meter_open(ld, err, sizeof(err))) {
		latchd_log_err("%s", err);
		return 1;
	}
	/* before any socket: a socket's packets stay in the cgroup it was made in */
	/* a sandbox's broker listens on latch.conf's broker_port (kit states keep the port they were given) */
	if (ld->conf.broker_port != ROOM_BROKER_PORT)
		ports[n_ports++] = ld->conf.broker_port;
	if (!unconfined && latchd_confine_start(ld, ports, n_ports, err, sizeof(err))) {
		latchd_log_err("%s", err);
		return 1;
	}
	if (unconfined)
		latchd_log("warning: --unconfined: latchd's own connections are not limited by the kernel");
	if (!ld->n_upstream)
		latchd_log("warning: no upstream DNS server (dns_upstream in latch.conf, or /etc/resolv.conf)");
	latch_path(ld->profile_dir, sizeof(ld->profile_dir), LATCH_PROFILES_DIR);
	latch_path(ld->overlay, sizeof(ld->overlay), LATCH_ALLOWLIST_FILE);
	if (latch_path(path, sizeof(path), LATCH_AUDIT_DB) == 0) {
		ld->audit = audit_open(path, NULL, err, sizeof(err));
		if (!ld->audit)
			latchd_log("warning: %s; decisions are not recorded", err);
	}
	ld->base = event_base_new();
	if (!ld->base) {
		latchd_log_err("cannot make the event loop");
		return 1;
	}
	if (latchd_broker_init(ld, err, sizeof(err))) {
		latchd_log_err("%s", err);
		return 1;
	}
	if (latchd_control_listen(ld, err, sizeof(err)) || latchd_confine_resolver(ld, err, sizeof(err))) {
		latchd_log_err("%s", err);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct latchd ld = { 0 }; /* the one instance; every part is handed it */
	struct event *sig_hup, *sig_term, *sig_int, *tick;
	struct timeval one_s = { 1, 0 };
	uint32_t port = 53;
	bool unconfined = false, check = false, reload = false;
	int rc = parse_args(argc, argv, &port, &unconfined, &check, &reload);

	if (rc)
		return rc < 0 ? 0 : rc;
	if (check)
		return check_config();
	if (reload)
		return ask_reload();
	if (geteuid()) {
		latchd_log_err("must run as root (it writes BPF maps and binds port 53)");
		return 1;
	}
	latchd_broker_harden(); /* keys will pass through this process */
	setvbuf(stderr, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	{
		/* each resolver may hold hundreds of upstream sockets in flight */
		struct rlimit rl;

		if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	latch_loader_set_log(LATCH_LOG_QUIET);
	ld.dns_port = port;
	rc = setup(&ld, unconfined);
	if (rc)
		return rc;
	sig_hup = evsignal_new(ld.base, SIGHUP, on_signal, &ld);
	sig_term = evsignal_new(ld.base, SIGTERM, on_signal, &ld);
	sig_int = evsignal_new(ld.base, SIGINT, on_signal, &ld);
	tick = event_new(ld.base, -1, EV_PERSIST, on_tick, &ld);
	event_add(sig_hup, NULL);
	event_add(sig_term, NULL);
	event_add(sig_int, NULL);
	event_add(tick, &one_s);
	latchd_sandboxes_scan(&ld);
	latchd_audit(&ld, "latchd", "daemon", "start", "latchd.start", json_pack("{s:i}", "pid", (int)getpid()));
	latchd_log("listening on %s", ld.sock_path);
	/* Type=notify: ready once the socket listens and the first scan has served every sandbox */
	watchdog = sd_watchdog_enabled(0, NULL) > 0;
	sd_notify(0, "READY=1");
	event_base_dispatch(ld.base);

	/* clean shutdown: stop taking requests, then let go of everything; the kernel keeps enforcing */
	latchd_control_close(&ld);
	while (ld.sandboxes) {
		struct sandbox *s = ld.sandboxes;

		ld.sandboxes = s->next;
		latchd_sandbox_free(s);
	}
	latchd_rooms_stop(&ld);
	latchd_broker_fini(&ld); /* after the sandboxes' and the rooms' listeners */
	latchd_meter_close(&ld); /* after every exchange has been settled */
	latchd_periodic_stop(&ld);
	latchd_notifier_stop(&ld);
	latchd_audit(&ld, "latchd", "daemon", "stop", "latchd.stop", json_pack("{s:i}", "pid", (int)getpid()));
	latchd_confine_stop(&ld);
	latchd_audit_stop(&ld);
	audit_close(ld.audit);
	event_free(sig_hup);
	event_free(sig_term);
	event_free(sig_int);
	event_free(tick);
	event_base_free(ld.base);
	return 0;
}
