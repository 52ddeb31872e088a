// SPDX-License-Identifier: GPL-2.0-only
/*
 * latch.c - the `latch` command: global options and the noun table.
 *
 * Nouns match on a unique prefix (`latch st` is status), bpftool style.
 * Every command takes --json; every error goes through latch_err().
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <unistd.h>

#include "cli/cli.h"
#include "loader/loader.h"

bool latch_json;
static bool verbose;

static const struct latch_cmd cmds[] = {
	{ "attach", cmd_attach,
	  "attach NAME --dev IFACE --guest-mac MAC --guest-ip IP[,IP6] --host-ip IP[,IP6]\n"
	  "             [--resolver IP[,IP6]] [--host-port PORT]... [--dns-rate N] [--dns-burst N] [--kit K]\n"
	  "       attach NAME",
	  "put default-deny egress on a link; with NAME alone, re-attach from its pins; --kit K: the kit's network "
	  "joins the policy and its credentials get routes on the broker (host port broker_port)" },
	{ "detach", cmd_detach, "detach NAME", "take enforcement off a link and remove its pins" },
	{ "egress", cmd_egress,
	  "egress NAME allow ENTRY... [--for SECONDS]\n"
	  "       egress NAME revoke ENTRY...\n"
	  "       egress NAME show\n"
	  "       egress NAME profile [PROFILE]",
	  "change or show what a sandbox may reach; ENTRY is ADDR|CIDR[:PORTS][/tcp|udp|icmp]; "
	  "profile lists the profiles (* active) or switches to one (through latchd)" },
	{ "grant", cmd_grant, "grant NAME HOST[:PORTS]... [--for DUR] [--reason TEXT]",
	  "open host names for a while (DUR 60, 90s, 5m; default grant_default, at most grant_max): latchd resolves "
	  "them on the host, the kernel closes their addresses at the deadline; ports default to 443" },
	{ "grants", cmd_grants, "grants NAME",
	  "active grants and the sandbox's pending asks with their deadlines, read back from the kernel and latchd" },
	{ "approve", cmd_approve, "approve ID [--for DUR]",
	  "grant a sandbox's pending ask: its names resolved by the host, open until the deadline" },
	{ "deny", cmd_deny, "deny ID", "refuse a sandbox's pending ask, or close an active grant now" },
	{ "status", cmd_status, "status [NAME]", "what the kernel enforces now, read back from it" },
	{ "up", cmd_up,
	  "up NAME [--kit K] [--profile P] [--image I] [--memory MiB] [--cpus N] [--workspace DIR]\n"
	  "          [--timeout DUR] [--keep-on-failure]",
	  "start a VM sandbox: tap, enforcement verified, routing, then the guest; prints each step on stderr and "
	  "the observed posture; DUR (60, 90s, 5m) runs from the domain start to the agent's answer (default 60s "
	  "on KVM, 180s on TCG); --keep-on-failure leaves a guest that did not boot for inspection, still filtered; "
	  "--kit K (else the stored kit): its keys from this environment go to latchd, the guest gets placeholders; "
	  "`up` of a running sandbox hands its kit's keys again" },
	{ "down", cmd_down, "down NAME [--timeout DUR]", "stop a VM sandbox's guest; its tap, enforcement and state stay" },
	{ "destroy", cmd_destroy, "destroy NAME [--purge]",
	  "remove a VM sandbox: domain, tap, routing, masquerade, pins and state; its guest-state backup stays "
	  "(and goes back into the next guest of that name) unless --purge" },
	{ "ls", cmd_ls, "ls", "VM sandboxes with their domain state and observed posture" },
	{ "exec", cmd_exec, "exec NAME [--timeout DUR] -- CMD...",
	  "run a command in a VM sandbox's guest; relays its output and exits with its status" },
	{ "backup", cmd_backup, "backup NAME",
	  "copy the guest's state directory (/var/lib/agent-state) to the host; `down` does it first" },
	{ "restore", cmd_restore, "restore NAME", "copy the host's backup of the guest state back into the guest" },
	{ "task", cmd_task, "task NAME [--timeout DUR] -- CMD...",
	  "run a command in a sealed throwaway clone of NAME (its state, nothing but host services); "
	  "the clone is destroyed at the end, also on Ctrl-C or SIGTERM" },
	{ "boot", cmd_boot, "boot install | boot apply",
	  "install the boot unit and libvirt hook; re-create every sandbox's tap and enforcement (at boot)" },
	{ "image", cmd_image, "image build [--image default|debian] [--force]",
	  "build a guest image into the image cache; a current image is kept unless --force" },
	{ "kits", cmd_kits, "kits",
	  "the kits: built-ins and /etc/latch/kits, the network each adds and where its keys are" },
	{ "kit", cmd_kit, "kit check FILE\n       kit NAME secrets\n       kit NAME backend CREDENTIAL ALTERNATIVE|-",
	  "check a kit file as latch up would load it, starting nothing; hand latchd a sandbox's keys from this "
	  "environment again; send a credential to an alternative upstream (- its own), URL and placeholder kept" },
	{ "env", cmd_env, "env NAME", "what a sandbox's kit gives it: NAME=VALUE lines (placeholders, never keys)" },
	{ "doctor", cmd_doctor, "doctor", "check this host, with a fix for each failure" },
	{ "run", cmd_run,
	  "run [--kit K] [--profile P] [--workspace DIR[:rw]] [--apply] [--timeout DUR] [--output-limit N]\n"
	  "           [--memory M] [--cpus C] [--pids N] [--user root|NAME|UID[:GID]] [--env NAME=VALUE]...\n"
	  "           [--resolver ADDR] -- CMD...\n"
	  "       run --check | --sweep",
	  "run one command in a room: no network but the profile's, read-only root and workspace, no environment, "
	  "no capabilities, a seccomp filter, limits, a deadline (5 s) and an output cap (16 KiB); exits with the "
	  "command's status, 124 at the deadline, 125 when latch failed, 126/127 when CMD could not run" },
	{ "verify", cmd_verify, "verify NAME [--offline]",
	  "attack the live boundary from inside the guest (--offline: through the pinned program), each attack "
	  "beside a control; exit 0 only when every attack was stopped" },
	{ "audit", cmd_audit, "audit [NAME] [--since 15m|2h|@EPOCH|2026-11-30[T12:00]] [--kind K]\n"
			      "       audit verify",
	  "the audit log, oldest first; verify walks its hash chain and names the first broken entry" },
	{ "usage", cmd_usage, "usage [NAME] [--prices]",
	  "where each spend cap stands (per sandbox and provider, and host-wide): used, reserved, left, next "
	  "free; --prices lists the price table" },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

int latch_err(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (latch_json) {
		json_t *o = json_pack("{s:s, s:i}", "error", msg, "exit", code);

		json_dumpf(o, stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(o);
	} else {
		fprintf(stderr, "latch: %s\n", msg);
	}
	return code;
}

void latch_json_out(json_t *obj)
{
	if (latch_json && obj) {
		json_dumpf(obj, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		putchar('\n');
	}
	json_decref(obj);
}

int latch_need_root(const char *what)
{
	cap_t caps = cap_get_proc();
	cap_flag_value_t bpf = CAP_CLEAR, net = CAP_CLEAR, admin = CAP_CLEAR;

	if (caps) {
		cap_get_flag(caps, CAP_BPF, CAP_EFFECTIVE, &bpf);
		cap_get_flag(caps, CAP_NET_ADMIN, CAP_EFFECTIVE, &net);
		cap_get_flag(caps, CAP_SYS_ADMIN, CAP_EFFECTIVE, &admin);
		cap_free(caps);
	}
	if ((bpf == CAP_SET || admin == CAP_SET) && net == CAP_SET)
		return 0;
	return latch_err(LATCH_EXIT_USAGE, "%s needs root (CAP_BPF and CAP_NET_ADMIN); run it with sudo", what);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: latch [--json] [-v] COMMAND ...\n\n");
	for (size_t i = 0; i < NCMDS; i++)
		fprintf(f, "  latch %s\n      %s\n", cmds[i].usage, cmds[i].help);
	fprintf(f, "\nexit codes: 0 ok, 1 failed, 2 usage, 3 posture not verified\n"
		   "LATCH_BPFFS moves the bpffs root (default /sys/fs/bpf); LATCH_ROOT moves /etc/latch,\n"
		   "/var/lib/latch and /run/latch.\n");
}

int main(int argc, char **argv)
{
	const struct latch_cmd *match = NULL;
	int i = 1, nmatch = 0, sub_argc;
	char *sub_argv[256];

	/* --json and -v may stand anywhere; strip them before dispatch */
	sub_argc = 0;
	for (int a = 0, rest = 0; a < argc && sub_argc < 255; a++) {
		rest = rest || !strcmp(argv[a], "--"); /* what follows "--" is a command's own (latch run) */
		if (rest)
			sub_argv[sub_argc++] = argv[a];
		else if (a > 0 && !strcmp(argv[a], "--json"))
			latch_json = true;
		else if (a > 0 && (!strcmp(argv[a], "-v") || !strcmp(argv[a], "--verbose")))
			verbose = true;
		else
			sub_argv[sub_argc++] = argv[a];
	}
	sub_argv[sub_argc] = NULL;
	argc = sub_argc;
	argv = sub_argv;
	latch_loader_set_log(verbose ? LATCH_LOG_DEBUG : LATCH_LOG_WARN);

	if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		if (argc >= 3) {
			for (size_t c = 0; c < NCMDS; c++)
				if (!strcmp(cmds[c].name, argv[2])) {
					printf("usage: latch %s\n%s\n", cmds[c].usage, cmds[c].help);
					return 0;
				}
		}
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? LATCH_EXIT_USAGE : 0;
	}
	for (size_t c = 0; c < NCMDS; c++) {
		if (!strcmp(cmds[c].name, argv[i])) {
			match = &cmds[c];
			nmatch = 1;
			break;
		}
		if (!strncmp(cmds[c].name, argv[i], strlen(argv[i]))) {
			match = &cmds[c];
			nmatch++;
		}
	}
	if (nmatch == 0)
		return latch_err(LATCH_EXIT_USAGE, "unknown command '%s'; see `latch help`", argv[i]);
	if (nmatch > 1)
		return latch_err(LATCH_EXIT_USAGE, "'%s' is ambiguous; see `latch help`", argv[i]);
	for (int a = 2; a < argc && strcmp(argv[a], "--"); a++)
		if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
			printf("usage: latch %s\n%s\n", match->usage, match->help);
			return 0;
		}
	return match->fn(argc - 1, argv + 1);
}
