// SPDX-License-Identifier: GPL-2.0-only
/*
 * latch.c - the `latch` command: global options, the command table and the
 * dispatcher.
 *
 * The contract (docs/man/latch.8.md): global options (--json, -v, --version,
 * --help) are read only before the command name; everything after it is the
 * command's, and everything after `--` is the guest's or the room's, untouched.
 * Commands and their sub-verbs match on a unique prefix, bpftool style
 * (`latch eg NAME a 192.0.2.1` is `egress NAME allow`).  Under --json every
 * command prints exactly one JSON document, errors included, with "version"
 * and "exit"; every error goes through latch_err().  The help, the man page
 * check and the bash completion (cli/help.c) all read the table below.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <unistd.h>

#include "cli/cli.h"
#include "loader/loader.h"
#include "cli/version.h" /* generated: build/cli/version.h (scripts/install.mk) */

bool latch_json;
const char latch_version[] = LATCH_VERSION;

static const char *const egress_verbs[] = { "allow", "revoke", "show", "profile", NULL };
static const char *const boot_verbs[] = { "install", "uninstall", "apply", NULL };
static const char *const image_verbs[] = { "build", NULL };
static const char *const completion_verbs[] = { "bash", NULL };
static const char *const agent_verbs[] = { "run", NULL };

/* A row (of the options or the commands) may stop after any field: the ones left out are NULL or 0. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
/*
 * Each command's options: its help lines, its completion words and, for a
 * command that parses with latch_getopt(), its getopt table.  A row's key is
 * the case of the command's switch; 0 marks an option the command reads by
 * hand at its place in the words (`down NAME --timeout DUR`).
 */
static const struct latch_opt attach_opts[] = {
	{ "dev", 'd', "IFACE", "the host end of the sandbox's link (a container's veth, a VM's tap)" },
	{ "guest-mac", 'm', "MAC", "the MAC the guest was given; frames from any other are dropped" },
	{ "guest-ip", 'g', "IP[,IP6]", "the guest's addresses, one of each family at most" },
	{ "host-ip", 'H', "IP[,IP6]", "the host's addresses on the link (gateway, resolver, broker)" },
	{ "resolver", 'r', "IP[,IP6]", "the only DNS server the guest may ask (default: --host-ip)" },
	{ "host-port", 'p', "PORT", "a TCP port of the host the guest may reach (repeat; not 53)" },
	{ "dns-rate", 'R', "N", "DNS queries a second the kernel lets through (default 20)" },
	{ "dns-burst", 'B', "N", "DNS queries allowed in a burst (default 40)" },
	{ "kit", 'K', "K",
	  "a kit (docs/kits.md): its egress joins the policy, its keys from this environment go to "
	  "latchd" },
	{ NULL },
};

static const struct latch_opt egress_opts[] = {
	{ "for", 0, "DUR", "with allow: the entries expire after DUR (600, 10m, 1h, 7d), in the kernel" },
	{ NULL },
};

static const struct latch_opt grant_opts[] = {
	{ "for", 0, "DUR", "how long: 60, 90s, 5m (default grant_default in latch.conf, at most grant_max)" },
	{ "reason", 0, "TEXT", "why, recorded with the grant in the audit log" },
	{ NULL },
};

static const struct latch_opt approve_opts[] = {
	{ "for", 0, "DUR", "the window to give instead of the one asked for (at most grant_max)" },
	{ NULL },
};

static const struct latch_opt up_opts[] = {
	{ "kit", 'K', "K", "a kit (docs/kits.md); the guest gets its URLs and placeholders, latchd its keys" },
	{ "profile", 'p', "P", "the egress profile (default: the one stored for NAME, else latch.conf's `profile`)" },
	{ "image", 'i', "I", "the guest image: default or debian" },
	{ "memory", 'm', "SIZE", "guest memory, 64M..64G; a bare number is MiB (512, 2G; default 256)" },
	{ "cpus", 'c', "N", "guest CPUs, 1..64 (default 1)" },
	{ "workspace", 'w', "DIR", "a host directory shared with the guest at /workspace (9p)" },
	{ "timeout", 't', "DUR", "from the domain start to the agent's answer (60, 90s, 5m; at most 1h)" },
	{ "keep-on-failure", 'k', NULL, "a guest that did not boot stays, still filtered, for inspection" },
	{ NULL },
};

static const struct latch_opt down_opts[] = {
	{ "timeout", 0, "DUR", "how long the guest gets to shut down before it is stopped (default 30s)" },
	{ NULL },
};

static const struct latch_opt destroy_opts[] = {
	{ "purge", 0, NULL, "remove the guest-state backup too" },
	{ NULL },
};

static const struct latch_opt exec_opts[] = {
	{ "timeout", 0, "DUR",
	  "the guest kills CMD after DUR (1s..24h; default 10m, none with -i or -t); a guest that never answers "
	  "costs at most DUR and a few seconds" },
	{ "interactive", 'i', NULL, "relay stdin to CMD until its end; Ctrl-C, SIGTERM and SIGHUP at latch go to CMD",
	  true },
	{ "tty", 't', NULL,
	  "run CMD under a pty in the guest with this terminal raw: keys, its size and resizes go to CMD "
	  "(Ctrl-C is CMD's); -it for both; refused when stdin is not a terminal",
	  true },
	{ NULL },
};

static const struct latch_opt backup_opts[] = {
	{ "all", 0, NULL, "every running VM sandbox (what latchd runs every backup_interval)" },
	{ NULL },
};

static const struct latch_opt task_opts[] = {
	{ "timeout", 0, "DUR", "the guest kills CMD after DUR (1s..24h; default 10m)" },
	{ NULL },
};

static const struct latch_opt agent_opts[] = {
	{ "workspace", 'w', "DIR", "the host directory the agent works in, at /workspace (default: this one)", true },
	{ "keep", 'k', NULL, "keep the sandbox after the agent exits (`latch destroy --purge NAME` removes it)" },
	{ "dry-run", 'n', NULL, "say the kit, image, workspace, network and routes, and start nothing" },
	{ "name", 'N', "NAME", "the sandbox's name (default agent-KIT-N, the first free)" },
	{ "image", 'i', "I", "the guest image: default or debian" },
	{ "memory", 'm', "SIZE", "guest memory, 64M..64G; a bare number is MiB (default 1G, what Claude Code needs)" },
	{ "cold", 'c', NULL,
	  "boot the guest rather than restore the saved template of its image and size (made on first use)" },
	{ NULL },
};

static const struct latch_opt image_opts[] = {
	{ "image", 0, "I", "default (a Debian kernel and a busybox initramfs) or debian (debootstrap)" },
	{ "force", 0, NULL, "rebuild even when the cached image is current" },
	{ NULL },
};

static const struct latch_opt run_opts[] = {
	{ "profile", 'p', "P", "the room's network: a profile of address and CIDR entries (default sealed)" },
	{ "kit", 'k', "K", "a kit's network and keys for the room, served by latchd (which must run)" },
	{ "workspace", 'w', "DIR[:rw]", "DIR at /workspace, read-only unless :rw (changes are shown, not applied)" },
	{ "apply", 'a', NULL, "with DIR:rw, write the room's changes back into DIR" },
	{ "timeout", 't', "DUR", "the deadline, 1ms..7d (5s, 500ms, 2m, 1h; default 5s)" },
	{ "output-limit", 'o', "N", "bytes of output kept, up to 1G (16384, 64K; default 16K)" },
	{ "memory", 'm', "M", "memory limit, 8M..64T (256M, 1G)" },
	{ "cpus", 'c', "C", "CPU limit, 0.01..1024 (1, 0.5)" },
	{ "pids", 'n', "N", "process limit" },
	{ "user", 'u', "U", "root, a user name or UID[:GID] (default: nobody)" },
	{ "env", 'e', "NAME=VALUE", "an environment variable for CMD (repeat)" },
	{ "resolver", 'r', "ADDR", "the DNS server the room may ask" },
	{ "check", 'C', NULL, "say whether this host can make rooms" },
	{ "sweep", 'S', NULL, "remove rooms left behind by a latch that was killed" },
	{ NULL },
};

static const struct latch_opt verify_opts[] = {
	{ "offline", 0, NULL,
	  "send the frames through the pinned program with BPF_PROG_TEST_RUN, and have latchd "
	  "test-run the name decision (no guest needed; any sandbox)" },
	{ "rebind-name", 0, "HOST",
	  "a name you own that answers a private address: the guest asks it through the resolver, "
	  "which must refuse it" },
	{ NULL },
};

static const struct latch_opt audit_opts[] = {
	{ "since", 's', "T", "entries from T on: 15m, 2h, 7d, @EPOCH or 2026-11-30[T12:00] (UTC)" },
	{ "kind", 'k', "K", "entries of one kind (egress, attach, dns, kernel, audit...)" },
	{ "follow", 'f', NULL, "keep printing new entries until interrupted" },
	{ "before", 0, "T", "with prune: the cut; entries older than T go" },
	{ NULL },
};

static const struct latch_opt usage_opts[] = {
	{ "prices", 'p', NULL, "the price table in force (built-in rows and /etc/latch/prices), instead of the caps" },
	{ NULL },
};

const struct latch_cmd latch_cmds[] = {
	{ "attach", cmd_attach,
	  "attach NAME --dev IFACE --guest-mac MAC --guest-ip IP[,IP6] --host-ip IP[,IP6]\n"
	  "             [--resolver IP[,IP6]] [--host-port PORT]... [--dns-rate N] [--dns-burst N] [--kit K]\n"
	  "       attach NAME",
	  "put default-deny egress on a link; with NAME alone, re-attach from its pins; --kit K: the kit's network "
	  "joins the policy and its credentials get routes on the broker (host port broker_port)",
	  attach_opts,
	  "latch attach box1 --dev veth-box1 --guest-mac 02:00:00:00:00:01 --guest-ip 192.0.2.2 --host-ip 192.0.2.1\n"
	  "latch attach box1" },
	{ "detach", cmd_detach, "detach NAME", "take enforcement off a link and remove its pins", NULL,
	  "latch detach box1" },
	{ "egress", cmd_egress,
	  "egress NAME allow ENTRY... [--for DUR]\n"
	  "       egress NAME revoke ENTRY...\n"
	  "       egress NAME show\n"
	  "       egress NAME profile [PROFILE]",
	  "change or show what a sandbox may reach; ENTRY is ADDR|CIDR[:PORTS][/tcp|udp|icmp]; "
	  "profile lists the profiles (* active) or switches to one (through latchd)",
	  egress_opts,
	  "latch egress box1 allow 203.0.113.10:443 --for 600\n"
	  "latch eg box1 s\n"
	  "latch egress box1 profile research",
	  egress_verbs, 2 },
	{ "grant", cmd_grant, "grant NAME HOST[:PORTS]... [--for DUR] [--reason TEXT]",
	  "open host names for a while (DUR 60, 90s, 5m; default grant_default, at most grant_max): latchd resolves "
	  "them on the host, the kernel closes their addresses at the deadline; ports default to 443",
	  grant_opts,
	  "latch grant agent1 docs.example.com --for 5m --reason 'read the API docs'\n"
	  "latch grant agent1 files.example.com:443,8443" },
	{ "grants", cmd_grants, "grants NAME",
	  "active grants and the sandbox's pending asks with their deadlines, read back from the kernel and latchd",
	  NULL, "latch grants agent1\nlatch --json grants agent1" },
	{ "approve", cmd_approve, "approve ID [--for DUR]",
	  "grant a sandbox's pending ask: its names resolved by the host, open until the deadline", approve_opts,
	  "latch approve K3M2Q7ZX4P9A8B6C\nlatch approve K3M2Q7ZX4P9A8B6C --for 2m" },
	{ "deny", cmd_deny, "deny ID", "refuse a sandbox's pending ask, or close an active grant now", NULL,
	  "latch deny K3M2Q7ZX4P9A8B6C" },
	{ "status", cmd_status, "status [NAME]", "what the kernel enforces now, read back from it", NULL,
	  "latch status\nlatch --json status box1" },
	{ "up", cmd_up,
	  "up NAME [--kit K] [--profile P] [--image I] [--memory SIZE] [--cpus N] [--workspace DIR]\n"
	  "          [--timeout DUR] [--keep-on-failure]",
	  "start a VM sandbox: tap, enforcement verified, routing, then the guest; prints each step on stderr and "
	  "the observed posture; DUR (60, 90s, 5m) runs from the domain start to the agent's answer (default 60s "
	  "on KVM, 180s on TCG); --keep-on-failure leaves a guest that did not boot for inspection, still filtered; "
	  "--kit K (else the stored kit): its keys from this environment go to latchd, the guest gets placeholders; "
	  "`up` of a running sandbox hands its kit's keys again",
	  up_opts,
	  "latch up agent1 --memory 512 --workspace /srv/agent1\n"
	  "latch up agent1 --image debian --profile dev --timeout 5m\n"
	  "ANTHROPIC_API_KEY=... latch up agent1 --kit claude" },
	{ "down", cmd_down, "down NAME [--timeout DUR]",
	  "stop a VM sandbox's guest; its tap, enforcement and state stay", down_opts,
	  "latch down agent1\nlatch down agent1 --timeout 2m" },
	{ "destroy", cmd_destroy, "destroy NAME [--purge]",
	  "remove a VM sandbox: domain, tap, routing, masquerade, pins and state; its guest-state backup stays "
	  "(and goes back into the next guest of that name) unless --purge",
	  destroy_opts, "latch destroy agent1\nlatch destroy agent1 --purge" },
	{ "ls", cmd_ls, "ls", "VM sandboxes with their domain state and observed posture", NULL,
	  "latch ls\nlatch --json ls" },
	{ "exec", cmd_exec, "exec [-i] [-t] NAME [--timeout DUR] -- CMD...",
	  "run a command in a VM sandbox's guest, in its workspace with the kit's environment; relays its output "
	  "and exits with its status (128+N for signal N); 124 when the deadline passed, 125 when latch failed "
	  "(no sandbox, no answer, the guest went away), 126/127 when CMD could not run",
	  exec_opts,
	  "latch exec agent1 -- uname -a\nlatch exec agent1 --timeout 30s -- grep -v x /etc/hosts\n"
	  "echo hi | latch exec -i agent1 -- cat\nlatch exec -it agent1 -- top" },
	{ "shell", cmd_shell, "shell NAME",
	  "a login shell in a VM sandbox's guest at this terminal (`exec -it NAME --` bash -l, or sh -l where the "
	  "guest has no bash), in its workspace with the kit's environment; exits with the shell's status",
	  NULL, "latch shell agent1" },
	{ "backup", cmd_backup, "backup NAME | backup --all",
	  "copy the guest's state directory (/var/lib/agent-state) to the host; `down` does it first", backup_opts,
	  "latch backup agent1\nlatch --json backup --all" },
	{ "restore", cmd_restore, "restore NAME", "copy the host's backup of the guest state back into the guest", NULL,
	  "latch restore agent1" },
	{ "task", cmd_task, "task NAME [--timeout DUR] -- CMD...",
	  "run a command in a sealed throwaway clone of NAME (its state, nothing but host services); "
	  "the clone is destroyed at the end, also on Ctrl-C or SIGTERM",
	  task_opts, "latch task agent1 -- sh -c 'make test'" },
	{ "boot", cmd_boot, "boot install | boot uninstall | boot apply",
	  "install the boot units and the libvirt hook (/etc/libvirt/hooks/qemu.d/latch) for the installed "
	  "latch and latchd beside it; uninstall removes what install wrote; re-create every sandbox's tap and "
	  "enforcement (at boot)",
	  NULL, "sudo latch boot install\nsudo latch boot uninstall\nlatch boot apply", boot_verbs, 1 },
	{ "image", cmd_image, "image build [--image default|debian] [--force]",
	  "build a guest image into the image cache; a current image is kept unless --force", image_opts,
	  "latch image build\nlatch image build --image debian", image_verbs, 1 },
	{ "agent", cmd_agent,
	  "agent run [-w DIR] [--keep] [--dry-run] [--name NAME] [--image I] [--memory SIZE] [--cold] KIT "
	  "[-- ARGS...]",
	  "run a kit's agent in a new VM sandbox: the workspace at /workspace, the network closed but for the "
	  "kit's and its broker, the kit's command with ARGS; the sandbox is removed when the agent exits (also "
	  "on Ctrl-C, SIGTERM, SIGHUP) unless --keep; exits with the agent's status, 125 when latch failed",
	  agent_opts,
	  "latch agent run -w ~/code/api claude\n"
	  "latch agent run --dry-run claude\n"
	  "latch agent run shell -- -c 'make test'",
	  agent_verbs, 1, true },
	{ "kits", cmd_kits, "kits",
	  "the kits: built-ins and /etc/latch/kits, the network each adds and where its keys are", NULL, "latch kits" },
	/* no sub-verb prefixes: `check` stands first, `secrets` and `backend` after a NAME */
	{ "kit", cmd_kit,
	  "kit check FILE\n       kit fetch KIT\n       kit pin KIT NAME@VERSION\n       kit NAME setup\n"
	  "       kit NAME secrets\n"
	  "       kit NAME backend CREDENTIAL ALTERNATIVE|-",
	  "check a kit file as latch up would load it, starting nothing; fetch a kit's installers and verify them "
	  "against their sha512 pins into the cache; pin a setup package to a newer version (the registry's sha512, "
	  "written to /etc/latch/kits/KIT.yaml); install a sandbox's kit setup into its guest once every installer "
	  "verified; hand latchd a sandbox's keys from this environment again; send a "
	  "credential to an alternative upstream (- its own), URL and placeholder kept",
	  NULL,
	  "latch kit check /etc/latch/kits/claude.yaml\n"
	  "sudo latch kit fetch claude\n"
	  "sudo latch kit pin gemini @google/gemini-cli@0.62.0\n"
	  "latch kit agent1 setup\n"
	  "ANTHROPIC_API_KEY=... latch kit agent1 secrets\n"
	  "latch kit agent1 backend openai groq\nlatch kit agent1 backend openai -" },
	{ "env", cmd_env, "env NAME", "what a sandbox's kit gives it: NAME=VALUE lines (placeholders, never keys)",
	  NULL, "latch env agent1\nlatch --json env agent1" },
	{ "doctor", cmd_doctor, "doctor", "check this host, with a fix for each failure", NULL, "sudo latch doctor" },
	{ "run", cmd_run,
	  "run [--kit K] [--profile P] [--workspace DIR[:rw]] [--apply] [--timeout DUR] [--output-limit N]\n"
	  "           [--memory M] [--cpus C] [--pids N] [--user root|NAME|UID[:GID]] [--env NAME=VALUE]...\n"
	  "           [--resolver ADDR] -- CMD...\n"
	  "       run --check | --sweep",
	  "run one command in a room: no network but the profile's, read-only root and workspace, no environment, "
	  "no capabilities, a seccomp filter, limits, a deadline (5 s) and an output cap (16 KiB); exits with the "
	  "command's status, 124 at the deadline, 125 when latch failed, 126/127 when CMD could not run",
	  run_opts,
	  "latch run -- uname -a\n"
	  "latch run --workspace .:rw --timeout 30s -- make test\n"
	  "latch --json run --profile lan -- curl -s http://192.0.2.10/",
	  NULL, 0, true },
	{ "verify", cmd_verify, "verify NAME [--offline] [--rebind-name HOST]",
	  "attack the live boundary from inside the guest (--offline: through the pinned program), each attack "
	  "beside a control, and names through the sandbox's resolver (an unlisted name, rebinding answers "
	  "test-run in latchd); exit 0 only when every attack was stopped",
	  verify_opts,
	  "latch verify agent1\nlatch --json verify agent1 --offline\nlatch verify agent1 --rebind-name "
	  "rebind.example.org" },
	{ "audit", cmd_audit,
	  "audit [NAME] [--since T] [--kind K] [--follow]\n"
	  "       audit verify\n"
	  "       audit prune --before T",
	  "the audit log, oldest first; verify walks its hash chain and names the first broken entry; prune "
	  "removes the entries before T and records the cut, so verify still proves the rest; --follow prints "
	  "new entries as they are written (under --json one object per line)",
	  audit_opts,
	  "latch audit box1 --since 2h\n"
	  "latch audit --follow --kind kernel\n"
	  "latch audit verify\n"
	  "latch audit prune --before 30d" },
	{ "completion", cmd_completion, "completion bash",
	  "print the bash completion script (generated from this command table)", NULL,
	  "latch completion bash > /etc/bash_completion.d/latch", completion_verbs, 1 },
	{ "usage", cmd_usage, "usage [NAME] [--prices]",
	  "where each spend cap stands (per sandbox and provider, and host-wide): used, reserved, left, next "
	  "free; --prices lists the price table",
	  usage_opts, "latch usage\nlatch usage agent1\nlatch --json usage --prices" },
};
#pragma GCC diagnostic pop

const size_t latch_n_cmds = sizeof(latch_cmds) / sizeof(latch_cmds[0]);

/* ---- the one JSON document ---- */

static json_t *json_doc;

void latch_json_out(json_t *obj)
{
	if (!latch_json || !obj) {
		json_decref(obj);
		return;
	}
	if (!json_doc) {
		json_doc = obj;
		return;
	}
	json_object_update_missing(json_doc, obj);
	json_decref(obj);
}

int latch_err(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (latch_json) {
		if (!json_doc)
			json_doc = json_object();
		/* the first error is the one that stopped the command */
		if (!json_object_get(json_doc, "error"))
			json_object_set_new(json_doc, "error", json_string(msg));
	} else {
		/* one line, whatever a guest, a file or a name put into it */
		char shown[4 * sizeof(msg)];

		fprintf(stderr, "latch: %s\n", latch_guest_text(msg, shown, sizeof(shown), false));
	}
	return code;
}

int latch_err_no_sandbox(const char *what, const char *name)
{
	return latch_err(LATCH_EXIT_NO_SANDBOX, "no %s '%s' (see `latch %s`)", what, name,
			 strstr(what, "VM") ? "ls" : "status");
}

static bool json_streamed;

void latch_json_line(json_t *obj)
{
	json_t *out = json_pack("{s:s}", "version", latch_version);

	json_object_update(out, obj);
	json_decref(obj);
	json_dumpf(out, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	putchar('\n');
	fflush(stdout);
	json_decref(out);
	json_streamed = true;
}

/* The document, with "version" first and the exit status the command returned, on stdout. */
static int json_flush(int code)
{
	json_t *out;

	if (json_streamed) {
		/* a stream ends with one more line only when something went wrong */
		if (json_doc && json_object_get(json_doc, "error")) {
			json_object_set_new(json_doc, "exit", json_integer(code));
			latch_json_line(json_doc);
		} else {
			json_decref(json_doc);
		}
		json_doc = NULL;
		return code;
	}
	out = json_pack("{s:s}", "version", latch_version);

	if (json_doc)
		json_object_update(out, json_doc);
	json_object_set_new(out, "exit", json_integer(code));
	json_dumpf(out, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	putchar('\n');
	json_decref(out);
	json_decref(json_doc);
	json_doc = NULL;
	return code;
}

char *latch_guest_text(const char *in, char *out, size_t len, bool keep_nl)
{
	size_t o = 0;

	if (!len)
		return out;
	for (; in && *in && o + 5 < len; in++) {
		unsigned char c = (unsigned char)*in;

		if ((c >= 0x20 && c < 0x7f && c != '\\') || (keep_nl && c == '\n'))
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", c);
	}
	out[o] = '\0';
	return out;
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

/* ---- dispatch ---- */

/* The row whose name NAME is, or a unique prefix of; NULL with *n the number of candidates. */
static const struct latch_cmd *find_cmd(const char *name, int *n)
{
	const struct latch_cmd *match = NULL;

	*n = 0;
	for (size_t c = 0; c < latch_n_cmds; c++) {
		if (!strcmp(latch_cmds[c].name, name)) {
			*n = 1;
			return &latch_cmds[c];
		}
		if (!strncmp(latch_cmds[c].name, name, strlen(name))) {
			match = &latch_cmds[c];
			(*n)++;
		}
	}
	return *n == 1 ? match : NULL;
}

/* The most options a command's row lists, with room for getopt's end row. */
#define LATCH_CMD_OPTS_MAX 32

int latch_getopt(int argc, char **argv, const char *cmd)
{
	/* getopt_long() reads them on every call: built once, for the one command a latch runs */
	static struct option longopts[LATCH_CMD_OPTS_MAX];
	static char optstring[2 * LATCH_CMD_OPTS_MAX + 2];
	static const struct latch_cmd *built;
	const struct latch_cmd *c = NULL;

	for (size_t i = 0; i < latch_n_cmds && !c; i++)
		if (!strcmp(latch_cmds[i].name, cmd))
			c = &latch_cmds[i];
	/* a name missing from the table is a bug: refused, so its command's first test shows it */
	if (!c)
		return '?';
	if (c != built) {
		if (latch_opt_getopt(c->opts, c->opts_in_order, longopts, LATCH_CMD_OPTS_MAX, optstring,
				     sizeof(optstring)))
			return '?';
		built = c;
	}
	return getopt_long(argc, argv, optstring, longopts, NULL);
}

/* argv[verb_at] spelled out when it is a unique prefix of one of the command's verbs; 0 or the exit code. */
static int expand_verb(const struct latch_cmd *c, int argc, char **argv)
{
	const char *word, *match = NULL;
	int n = 0;

	if (!c->verbs || c->verb_at < 1 || c->verb_at >= argc)
		return 0;
	word = argv[c->verb_at];
	if (!*word || word[0] == '-')
		return 0;
	for (const char *const *v = c->verbs; *v; v++) {
		if (!strcmp(*v, word))
			return 0;
		if (!strncmp(*v, word, strlen(word))) {
			match = *v;
			n++;
		}
	}
	if (n > 1)
		return latch_err(LATCH_EXIT_USAGE, "%s: '%s' is ambiguous; see `latch %s --help`", c->name, word,
				 c->name);
	if (n == 1)
		argv[c->verb_at] = (char *)match;
	return 0;
}

static bool is_global_opt(const char *a)
{
	return !strcmp(a, "--json") || !strcmp(a, "-v") || !strcmp(a, "--verbose") || !strcmp(a, "--version");
}

/*
 * After the command name: --help/-h before `--` is help; a global option
 * there is refused, with where it belongs (it was silently moved once, and
 * `latch exec vm -- grep -v x f` lost its -v).
 */
static int scan_command_args(const struct latch_cmd *c, int argc, char **argv, bool *help)
{
	for (int a = 1; a < argc && strcmp(argv[a], "--"); a++) {
		if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h"))
			*help = true;
		else if (is_global_opt(argv[a]))
			return latch_err(LATCH_EXIT_USAGE,
					 "%s is a global option: put it before the command (`latch %s %s ...`)",
					 argv[a], argv[a], c->name);
	}
	return 0;
}

/* Commands that read no bpffs, links or sandboxes, and so run anywhere. */
static bool needs_host_view(const struct latch_cmd *c)
{
	static const char *const anywhere[] = { "kits", "kit", "completion", "doctor", "image", "usage" };

	for (size_t i = 0; i < sizeof(anywhere) / sizeof(anywhere[0]); i++)
		if (!strcmp(c->name, anywhere[i]))
			return false;
	return true;
}

static int finish(int code)
{
	return latch_json ? json_flush(code) : code;
}

int main(int argc, char **argv)
{
	const struct latch_cmd *cmd;
	bool verbose = false, help = false, version = false;
	char why[LATCH_ERR_MAX];
	int a = 1, n, rc;

	/* global options: only before the command name */
	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "--json"))
			latch_json = true;
		else if (!strcmp(argv[a], "-v") || !strcmp(argv[a], "--verbose"))
			verbose = true;
		else if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help"))
			help = true;
		else if (!strcmp(argv[a], "--version"))
			version = true;
		else if (!strcmp(argv[a], "--")) {
			a++;
			break;
		} else
			return finish(
				latch_err(LATCH_EXIT_USAGE, "unknown global option '%s'; see `latch --help`", argv[a]));
	}
	latch_loader_set_log(verbose ? LATCH_LOG_DEBUG : LATCH_LOG_WARN);
	if (version) {
		if (!latch_json)
			printf("latch %s\n", latch_version);
		return finish(0);
	}
	if (a < argc && !strcmp(argv[a], "help")) {
		help = true;
		a++;
	}
	if (a >= argc) {
		if (latch_json)
			return finish(help ? 0 : latch_err(LATCH_EXIT_USAGE, "no command; see `latch --help`"));
		latch_usage(help ? stdout : stderr);
		return help ? 0 : LATCH_EXIT_USAGE;
	}
	cmd = find_cmd(argv[a], &n);
	if (!cmd)
		return finish(latch_err(
			LATCH_EXIT_USAGE,
			n ? "'%s' is ambiguous; see `latch help`" : "unknown command '%s'; see `latch help`", argv[a]));
	argc -= a;
	argv += a;
	rc = scan_command_args(cmd, argc, argv, &help);
	if (rc)
		return finish(rc);
	if (help) {
		if (latch_json)
			latch_json_out(latch_cmd_help_json(cmd));
		else
			latch_cmd_help(stdout, cmd);
		return finish(0);
	}
	rc = expand_verb(cmd, argc, argv);
	if (rc)
		return finish(rc);
	if (needs_host_view(cmd) && latch_host_view_check(why, sizeof(why)))
		return finish(latch_err(cmd->fn == cmd_exec || cmd->fn == cmd_shell || cmd->fn == cmd_task ||
							cmd->fn == cmd_run ?
						LATCH_EXIT_CMD_LATCH :
						LATCH_EXIT_FAILED,
					"%s", why));
	return finish(cmd->fn(argc, argv));
}
