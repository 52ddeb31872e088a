// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_vm.c - `latch up`, `down`, `destroy`, `ls`, `exec` and `task`: VM
 * sandboxes.  For `task` (a throwaway clone, vm/clone.c), SIGINT, SIGTERM
 * and SIGHUP only set the flag latch_vm_task watches; it removes the clone
 * before we exit 128 + signal.
 *
 * The work is in vm/ and sandbox/ (`up`'s profile, kit and latchd); this
 * file parses, prints what was observed (never what was asked for), and
 * maps failures to exit codes: 2 for bad input, 1 for a runtime failure, 3
 * when enforcement was not verified.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sandbox/sandbox.h"
#include "vm/vm.h"

static void addr_s(const struct latch_addr *a, char *buf, size_t len)
{
	if (!a->family || !inet_ntop(a->family, a->bytes, buf, len))
		snprintf(buf, len, "-");
}

/* What `up` and `status` say of a sandbox without an uplink. */
#define NO_ROUTE "no uplink in latch.conf: allowed traffic has no route (see `latch doctor`)"

static const char *posture_word(const struct latch_vm_observed *o)
{
	if (!o->pins)
		return "NOT ENFORCED";
	return o->posture.enforced ? "enforced" : "NOT ENFORCED";
}

/* An address as JSON: null when the sandbox has none of that family. */
static json_t *addr_j(const struct latch_addr *a)
{
	char buf[64];

	addr_s(a, buf, sizeof(buf));
	return a->family ? json_string(buf) : json_null();
}

static json_t *obs_json(const struct latch_vm_observed *o)
{
	char mac[18];
	const struct latch_vm_state *s = &o->st;

	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", s->mac[0], s->mac[1], s->mac[2], s->mac[3],
		 s->mac[4], s->mac[5]);
	json_t *j = json_pack("{s:s, s:s, s:b, s:o, s:o, s:o, s:o, s:s, s:s?, s:i, s:s, s:s?, s:i, s:i}", "sandbox",
			      s->name, "tap", s->tap, "enforced", o->pins && o->posture.enforced, "guest_ip4",
			      addr_j(&s->guest4), "host_ip4", addr_j(&s->host4), "guest_ip6", addr_j(&s->guest6),
			      "host_ip6", addr_j(&s->host6), "mac", mac, "uplink", *s->uplink ? s->uplink : NULL,
			      "table", s->table, "image", s->image, "workspace", *s->workspace ? s->workspace : NULL,
			      "memory_mib", s->memory_mib, "cpus", s->cpus);

	if (o->pins && !o->posture.enforced)
		json_object_set_new(j, "why", json_string(o->posture.why));
	else if (!o->pins)
		json_object_set_new(j, "why", json_string("no pinned enforcement"));
	else
		json_object_set_new(j, "why", json_null());
	json_object_set_new(j, "template", *s->template_id ? json_string(s->template_id) : json_null());
	json_object_set_new(j, "domain", o->libvirt_ok ? json_string(o->dom.state) : json_null());
	json_object_set_new(j, "accelerator", *o->dom.accel ? json_string(o->dom.accel) : json_null());
	json_object_set_new(j, "cpu_mode", *o->dom.cpu_mode ? json_string(o->dom.cpu_mode) : json_null());
	json_object_set_new(j, "routing",
			    json_pack("{s:b, s:b, s:b, s:b, s:b}", "tap_up", o->net.up, "rule", o->net.rule4,
				      "default_route", o->net.default4, "unreachable", o->net.unreachable4,
				      "masquerade", o->net.masq4));
	json_object_set_new(j, "allowed_traffic_routed", json_boolean(*s->uplink != '\0'));
	json_object_set_new(j, "routing_note", *s->uplink ? json_null() : json_string(NO_ROUTE));
	return j;
}

static void obs_print(const struct latch_vm_observed *o)
{
	char g4[64], h4[64], g6[64], h6[64];
	const struct latch_vm_state *s = &o->st;

	addr_s(&s->guest4, g4, sizeof(g4));
	addr_s(&s->host4, h4, sizeof(h4));
	addr_s(&s->guest6, g6, sizeof(g6));
	addr_s(&s->host6, h6, sizeof(h6));
	printf("%s: %s%s\n", s->name, posture_word(o),
	       o->pins && o->posture.enforced ? " (verified in the kernel)" : "");
	if (o->pins && !o->posture.enforced)
		printf("  why:         %s\n", o->posture.why);
	printf("  domain:      " LATCH_DOMAIN_PREFIX "%s %s, accelerator %s, cpu %s (observed)\n", s->name,
	       o->libvirt_ok ? o->dom.state : "unknown (libvirt unreachable)", *o->dom.accel ? o->dom.accel : "-",
	       *o->dom.cpu_mode ? o->dom.cpu_mode : "-");
	printf("  tap:         %s (%s), hooks: from-guest prog %u, to-guest prog %u\n", s->tap,
	       o->net.tap ? (o->net.up ? "up" : "down") : "MISSING", o->posture.hook[LATCH_DIR_FROM_GUEST].attached_id,
	       o->posture.hook[LATCH_DIR_TO_GUEST].attached_id);
	printf("  guest:       %s/30 %s  mac %02x:%02x:%02x:%02x:%02x:%02x\n", g4, g6, s->mac[0], s->mac[1], s->mac[2],
	       s->mac[3], s->mac[4], s->mac[5]);
	printf("  host:        %s %s (gateway, resolver)\n", h4, h6);
	printf("  routing:     table %u (%s), rule %s, default %s%s\n", s->table, *s->uplink ? s->uplink : "no uplink",
	       o->net.rule4 ? "present" : "MISSING",
	       o->net.default4 ? (o->net.unreachable4 ? "unreachable" : "via uplink") : "MISSING",
	       *s->uplink ? (o->net.masq4 ? ", masquerade" : ", masquerade MISSING") : "");
	if (!*s->uplink)
		printf("  note:        %s\n", NO_ROUTE);
	printf("  guest image: %s, %u MiB, %u cpu(s)%s%s\n", s->image, s->memory_mib, s->cpus,
	       *s->workspace ? ", workspace " : "", s->workspace);
	if (*s->template_id)
		printf("  started:     restored from the image's template %s (a warm start), not booted\n",
		       s->template_id);
}

static int fail_code(enum latch_vm_fail f)
{
	return (int)f;
}

static void up_step(const char *line, void *arg)
{
	fprintf(stderr, "latch: %s: %s\n", (const char *)arg, line);
}

/* A failed boot: the console's last lines, and what was kept. */
static void up_failed(const struct latch_vm_up_result *res, const char *name)
{
	if (*res->console_tail) {
		fprintf(stderr, "latch: up %s: the serial console's last lines (%s):\n", name, res->console_log);
		for (const char *l = res->console_tail; *l;) {
			size_t n = strcspn(l, "\n");

			fprintf(stderr, "  | %.*s\n", (int)n, l);
			l += n + (l[n] == '\n');
		}
	}
	if (res->kept)
		fprintf(stderr,
			"latch: up %s: the guest is kept for inspection, still filtered (`virsh console " LATCH_DOMAIN_PREFIX
			"%s`, `latch status %s`); `latch destroy %s` removes it\n",
			name, name, name, name);
}

/* What up observed and did, in text: the sandbox as read back, then the boot's own lines. */
static void up_print(const struct latch_sandbox_up_result *r)
{
	const struct latch_vm_up_result *res = &r->vm;
	char shown[sizeof(res->release) * 4], note[4 * sizeof(res->restore_note)];

	obs_print(&res->obs);
	printf("  guest:       agent answers, kernel %s\n",
	       latch_guest_text(res->release, shown, sizeof(shown), false));
	printf("  accelerator: %s (%s)\n", *res->obs.dom.accel ? res->obs.dom.accel : "-", res->accel_why);
	printf("  timing:      enforcement verified %lld ms, domain started %lld ms, agent answered %lld ms "
	       "after `up` began\n",
	       (long long)res->ms_enforced, (long long)res->ms_domain, (long long)res->ms_agent);
	printf("  profile:     %s (%s)%s\n", r->profile, r->profile_note,
	       !strcmp(r->profile, LATCH_PROFILE_OPEN) ? ": UNCONTAINED" : "");
	if (res->restored)
		printf("  state:       restored into the guest (%llu bytes of tar)\n",
		       (unsigned long long)res->restored_bytes);
	else if (*res->restore_note)
		printf("  state:       NOT restored: %s\n",
		       latch_guest_text(res->restore_note, note, sizeof(note), false));
}

/* up's JSON document: the sandbox as read back, its kit, and the boot. */
static json_t *up_json(struct latch_sandbox_up_result *r)
{
	const struct latch_vm_up_result *res = &r->vm;
	json_t *j = obs_json(&res->obs);

	if (r->kit_json)
		json_object_set_new(j, "kit", r->kit_json);
	r->kit_json = NULL;
	if (r->env_file)
		json_object_set_new(j, "env_file", json_string(LATCH_VM_ENV_FILE));
	json_object_set_new(j, "guest_release", json_string(res->release));
	json_object_set_new(j, "accelerator_probe", json_string(res->accel_why));
	json_object_set_new(j, "image_built", json_boolean(res->image_built));
	json_object_set_new(j, "ms_to_enforced", json_integer(res->ms_enforced));
	json_object_set_new(j, "ms_to_domain_started", json_integer(res->ms_domain));
	json_object_set_new(j, "ms_to_agent", json_integer(res->ms_agent));
	json_object_set_new(j, "boot_timeout_ms", json_integer(res->boot_timeout_ms));
	json_object_set_new(j, "console_log", json_string(res->console_log));
	json_object_set_new(j, "state_restored", json_boolean(res->restored));
	json_object_set_new(j, "profile", json_pack("{s:s, s:s}", "name", r->profile, "note", r->profile_note));
	json_object_set_new(j, "restore_note", *res->restore_note ? json_string(res->restore_note) : json_null());
	return j;
}

/* What up did, shown: a failure (with a failed boot's console), keys handed again, or the sandbox up. */
static int up_render(struct latch_sandbox_up_result *r, const char *name, int ret, const char *err)
{
	if (ret) {
		ret = latch_err(fail_code(r->fail), "%s", err);
		if (r->boot_failed)
			up_failed(&r->vm, name);
		return ret;
	}
	if (r->again) {
		latch_kit_again_print(name, r->kit, "already up; ", r->kit_json);
		return 0;
	}
	json_t *j = up_json(r);

	if (!latch_json)
		up_print(r);
	latch_json_out(j);
	/* the observation after boot is what counts */
	if (!r->vm.obs.pins || !r->vm.obs.posture.enforced)
		return LATCH_EXIT_UNVERIFIED;
	return 0;
}

/* up once its options are read: the work is sandbox/'s, the showing is ours. */
static int up_run(const struct latch_vm_up_opts *vm, const char *profile, const char *kit)
{
	static struct latch_sandbox_up_opts o;
	static struct latch_sandbox_up_result res;
	char err[LATCH_SANDBOX_ERR_MAX];
	int ret;

	o.vm = *vm;
	o.profile = profile;
	o.kit = kit;
	o.say = latch_say;
	ret = latch_sandbox_up(&o, &res, err, sizeof(err));
	return up_render(&res, o.vm.name, ret, err);
}

int cmd_up(int argc, char **argv)
{
	const char *profile = NULL, *kit_name = NULL;
	struct latch_vm_up_opts o = {
		.image = LATCH_VM_DEFAULT_IMAGE,
		.memory_mib = LATCH_VM_DEFAULT_MEMORY,
		.cpus = LATCH_VM_DEFAULT_CPUS,
		.step = up_step,
	};
	char err[LATCH_ERR_MAX], what[LATCH_NAME_MAX + 8];
	uint32_t u;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = latch_getopt(argc, argv, "up")) != -1) {
		switch (c) {
		case 'i':
			if (strlen(optarg) >= sizeof(o.image))
				return latch_err(LATCH_EXIT_USAGE, "unknown image '%s'", optarg);
			strcpy(o.image, optarg);
			break;
		case 'm': {
			uint64_t bytes;

			/* a bare number is MiB, as it always was here: --memory 512, --memory 2G */
			if (latch_parse_size("--memory", optarg, 1 << 20, 64ull << 20, 64ull << 30, &bytes, err,
					     sizeof(err)))
				return latch_err(LATCH_EXIT_USAGE, "%s", err);
			o.memory_mib = (uint32_t)(bytes >> 20);
			break;
		}
		case 'c':
			if (latch_parse_uint(optarg, 1, 64, &o.cpus))
				return latch_err(LATCH_EXIT_USAGE, "--cpus '%s': give 1..64", optarg);
			break;
		case 'w':
			/* a path that does not resolve is passed on as given: up checks and refuses it */
			if (!realpath(optarg, o.workspace))
				snprintf(o.workspace, sizeof(o.workspace), "%s", optarg);
			break;
		case 't':
			if (latch_parse_seconds("--timeout", optarg, 1, 3600, &u, err, sizeof(err)))
				return latch_err(LATCH_EXIT_USAGE, "%s", err);
			o.boot_timeout_ms = (int)(u * 1000);
			break;
		case 'p':
			profile = optarg;
			break;
		case 'k':
			o.keep_on_failure = true;
			break;
		case 'K':
			kit_name = optarg;
			break;
		default:
			return latch_err(LATCH_EXIT_USAGE, "up: unknown or incomplete option '%s'; see `latch help up`",
					 argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		return latch_err(LATCH_EXIT_USAGE, "up takes one NAME; see `latch help up`");
	if (latch_parse_name(argv[optind], err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	snprintf(o.name, sizeof(o.name), "%s", argv[optind]);
	snprintf(what, sizeof(what), "up %s", o.name);
	o.step_arg = what;
	if (latch_need_root("up"))
		return LATCH_EXIT_USAGE;
	return up_run(&o, profile, kit_name);
}

static int one_name(int argc, char **argv, int first_opt_ok, const char *what)
{
	char err[LATCH_ERR_MAX];

	if (argc != 2)
		return latch_err(LATCH_EXIT_USAGE, "%s takes one NAME; see `latch help %s`", what, what);
	if (latch_parse_name(argv[1], err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	return latch_need_root(what) ? LATCH_EXIT_USAGE : 0;
}

int cmd_down(int argc, char **argv)
{
	struct latch_vm_down_result dr;
	enum latch_vm_fail fail;
	char err[LATCH_SANDBOX_ERR_MAX], note[4 * sizeof(dr.backup_note)];
	int timeout_ms = LATCH_VM_DOWN_TIMEOUT_MS, rc;
	uint32_t u;

	if (argc == 4 && !strcmp(argv[2], "--timeout")) {
		if (latch_parse_seconds("--timeout", argv[3], 0, 3600, &u, err, sizeof(err)))
			return latch_err(LATCH_EXIT_USAGE, "%s", err);
		timeout_ms = (int)(u * 1000);
		argc = 2;
	}
	rc = one_name(argc, argv, 0, "down");
	if (rc)
		return rc;
	if (latch_sandbox_down(argv[1], timeout_ms, &latch_say, &dr, &fail, err, sizeof(err)))
		return latch_err(fail_code(fail), "%s", err);
	if (!latch_json) {
		if (dr.backed_up)
			printf("%s: guest state backed up (%u entries, %llu bytes)\n", argv[1], dr.backup_files,
			       (unsigned long long)dr.backup_bytes);
		else
			fprintf(stderr, "latch: down %s: guest state NOT backed up: %s\n", argv[1],
				latch_guest_text(dr.backup_note, note, sizeof(note), false));
		printf("%s: guest stopped%s; tap, enforcement and state kept (`latch destroy %s` removes them)\n",
		       argv[1], dr.forced ? " (forced after the shutdown timeout)" : "", argv[1]);
	}
	latch_json_out(json_pack("{s:s, s:s, s:b, s:b, s:s?}", "sandbox", argv[1], "action", "down", "forced",
				 dr.forced, "backed_up", dr.backed_up, "backup_note",
				 *dr.backup_note ? dr.backup_note : NULL));
	return 0;
}

int cmd_destroy(int argc, char **argv)
{
	struct latch_vm_destroy_result dr;
	enum latch_vm_fail fail;
	char err[LATCH_SANDBOX_ERR_MAX];
	bool purge = false;
	int rc;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--purge")) {
			purge = true;
			memmove(argv + i, argv + i + 1, (argc - i) * sizeof(*argv));
			argc--;
			break;
		}
	rc = one_name(argc, argv, 0, "destroy");
	if (rc)
		return rc;
	if (latch_sandbox_destroy(argv[1], purge, &latch_say, &dr, &fail, err, sizeof(err)))
		return latch_err(fail_code(fail), "%s", err);
	if (!latch_json) {
		printf("%s: destroyed (domain, tap, routing, masquerade, pins and state removed%s)\n", argv[1],
		       purge ? ", guest-state backup too" : "");
		if (dr.backup_kept)
			printf("%s: guest-state backup kept in %s: `latch up %s` puts it back into a new guest; "
			       "`latch destroy --purge %s` removes it\n",
			       argv[1], dr.backup_dir, argv[1], argv[1]);
	}
	latch_json_out(json_pack("{s:s, s:s, s:b, s:s?}", "sandbox", argv[1], "action", "destroyed", "backup_kept",
				 dr.backup_kept, "backup_dir", dr.backup_kept ? dr.backup_dir : NULL));
	return 0;
}

struct ls_ctx {
	json_t *arr;
	int unverified;
};

static int ls_cb(const char *name, void *arg)
{
	struct ls_ctx *c = arg;
	static struct latch_vm_observed o;

	if (latch_vm_observe(name, &o))
		return 0;
	if (!o.pins || !o.posture.enforced)
		c->unverified++;
	if (!latch_json) {
		char g4[64];

		addr_s(&o.st.guest4, g4, sizeof(g4));
		printf("%-14s %-13s %-14s %-5s %-16s %s\n", name, posture_word(&o),
		       o.libvirt_ok ? o.dom.state : "unknown", *o.dom.accel ? o.dom.accel : "-", g4, o.st.tap);
	}
	json_array_append_new(c->arr, obs_json(&o));
	return 0;
}

int cmd_ls(int argc, char **argv)
{
	struct ls_ctx c = { .arr = json_array() };
	int n;

	if (argc != 1) {
		json_decref(c.arr);
		return latch_err(LATCH_EXIT_USAGE, "ls takes no arguments");
	}
	if (latch_need_root("ls")) {
		json_decref(c.arr);
		return LATCH_EXIT_USAGE;
	}
	if (!latch_json)
		printf("%-14s %-13s %-14s %-5s %-16s %s\n", "NAME", "POSTURE", "DOMAIN", "ACCEL", "GUEST", "TAP");
	n = latch_vm_list(ls_cb, &c);
	if (n < 0) {
		json_decref(c.arr);
		return latch_err(LATCH_EXIT_FAILED, "cannot list sandboxes: %s", strerror(-n));
	}
	latch_json_out(json_pack("{s:o, s:b}", "sandboxes", c.arr, "verified", c.unverified == 0));
	return c.unverified ? LATCH_EXIT_UNVERIFIED : 0;
}

/* A memfd's content as a JSON string (bytes that are not UTF-8 become '?'). */
static json_t *slurp(int fd)
{
	off_t len = lseek(fd, 0, SEEK_END);
	char *buf;
	json_t *j;

	if (len <= 0 || !(buf = malloc(len + 1))) {
		close(fd);
		return json_string("");
	}
	if (pread(fd, buf, len, 0) != len)
		len = 0;
	close(fd);
	buf[len] = '\0';
	j = json_stringn(buf, len);
	if (!j) {
		for (off_t k = 0; k < len; k++)
			if ((unsigned char)buf[k] >= 0x80 || !buf[k])
				buf[k] = '?';
		j = json_stringn(buf, len);
	}
	free(buf);
	return j;
}

/* exec's and task's deadline when --timeout is not given: a guest that never answers can't hang latch */
#define EXEC_DEFAULT_TIMEOUT_MS (10 * 60 * 1000)

/*
 * `WHAT NAME [--timeout DUR] -- CMD...`: the timeout, and where CMD starts;
 * 0 or the exit code.  Every failure of latch's own is 125, so that it can't
 * be taken for CMD's status (docker exec's convention).
 */
static int command_args(int argc, char **argv, const char *what, uint32_t *timeout_ms, int *cmd)
{
	const int code = LATCH_EXIT_CMD_LATCH;
	char err[LATCH_ERR_MAX];
	int i = 2;

	*timeout_ms = EXEC_DEFAULT_TIMEOUT_MS;
	if (argc < 2)
		return latch_err(code, "usage: latch %s NAME [--timeout DUR] -- CMD...", what);
	if (latch_parse_name(argv[1], err, sizeof(err)))
		return latch_err(code, "%s", err);
	if (i + 1 < argc && !strcmp(argv[i], "--timeout")) {
		if (latch_parse_seconds("--timeout", argv[i + 1], 1, 86400, timeout_ms, err, sizeof(err)))
			return latch_err(code, "%s", err);
		*timeout_ms *= 1000;
		i += 2;
	}
	if (i >= argc || strcmp(argv[i], "--"))
		return latch_err(code, "%s needs -- and a command: latch %s NAME [--timeout DUR] -- CMD...", what,
				 what);
	if (++i >= argc)
		return latch_err(code, "%s needs a command after --: latch %s NAME -- CMD...", what, what);
	*cmd = i;
	return latch_need_root(what) ? code : 0;
}

/*
 * exec's -i, -t, -it (-ti), --interactive and --tty, before or after NAME
 * and before `--`: taken out of argv (into *io) so command_args sees what
 * it always did.  *timed: --timeout was given (an interactive command has
 * no deadline unless asked).
 */
static void exec_io_args(int *argc, char **argv, unsigned int *io, bool *timed)
{
	int w = 1, r = 1;

	*io = 0;
	*timed = false;
	for (; r < *argc && strcmp(argv[r], "--"); r++) {
		const char *a = argv[r];

		if (!strcmp(a, "-i") || !strcmp(a, "--interactive"))
			*io |= LATCH_AGENT_IO_STDIN;
		else if (!strcmp(a, "-t") || !strcmp(a, "--tty"))
			*io |= LATCH_AGENT_IO_TTY;
		else if (!strcmp(a, "-it") || !strcmp(a, "-ti"))
			*io |= LATCH_AGENT_IO_STDIN | LATCH_AGENT_IO_TTY;
		else {
			*timed |= !strcmp(a, "--timeout");
			argv[w++] = argv[r];
		}
	}
	while (r < *argc)
		argv[w++] = argv[r++];
	argv[w] = NULL;
	*argc = w;
}

/* The kit's environment, and TERM for a pty (the user's, so the guest draws for the terminal it is on). */
static int exec_env(char **env, int n_env, unsigned int io, char *term, size_t len, char ***out)
{
	const char *t = getenv("TERM");
	char **all;

	*out = env; /* NULL when the sandbox has no kit */
	if (!(io & LATCH_AGENT_IO_TTY))
		return 0;
	all = calloc((size_t)n_env + 2, sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (int k = 0; k < n_env; k++)
		all[k] = env[k];
	/* a TERM a shell would choke on is not passed on: the guest's default is fine */
	snprintf(term, len, "TERM=%s", t && *t && strlen(t) < 64 && !strpbrk(t, "=\n\t ") ? t : "xterm-256color");
	all[n_env] = term;
	*out = all;
	return 0;
}

/*
 * Run argv in NAME's guest as `latch exec` does: the kit's environment,
 * and with io (-i, -t) stdin and the user's terminal.  The terminal goes
 * raw only for the run and is restored before any message.
 */
static int exec_in_guest(const char *name, char **argv, struct latch_vm_exec_opts *eo, int out_fd, int err_fd,
			 struct latch_vm_exec_result *r, char *err, size_t errlen)
{
	struct latch_kit_state st;
	char **env = NULL, **all, term[80];
	int ret, n_env;

	/* the kit's environment (its URLs and placeholders), as `latch env` prints it */
	if (latch_sandbox_env(name, &env, &n_env, &st, err, errlen))
		return -EINVAL;
	if (exec_env(env, n_env, eo->io, term, sizeof(term), &all)) {
		latch_kit_env_free(env);
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	}
	eo->env = (const char *const *)all;
	eo->stdin_fd = STDIN_FILENO;
	/* without a pty, Ctrl-C (SIGINT) and SIGTERM/SIGHUP at latch go to the guest's command */
	if ((eo->io & LATCH_AGENT_IO_STDIN) && !(eo->io & LATCH_AGENT_IO_TTY))
		eo->io |= LATCH_AGENT_IO_SIGNALS;
	ret = (eo->io & LATCH_AGENT_IO_TTY) ? latch_tty_raw(STDIN_FILENO) : 0;
	if (ret)
		latch_errf(err, errlen, ret, "exec -t: the terminal on stdin: %s", strerror(-ret));
	else
		ret = latch_vm_exec(name, (const char *const *)argv, eo, out_fd, err_fd, r, err, errlen);
	latch_tty_restore();
	if (all != env)
		free(all);
	latch_kit_env_free(env);
	return ret;
}

int cmd_exec(int argc, char **argv)
{
	struct latch_vm_exec_opts eo = { 0 };
	struct latch_vm_exec_result r = { 0 };
	char err[LATCH_ERR_MAX];
	int i, ret, out_fd = STDOUT_FILENO, err_fd = STDERR_FILENO;
	bool timed;

	exec_io_args(&argc, argv, &eo.io, &timed);
	ret = command_args(argc, argv, "exec", &eo.timeout_ms, &i);
	if (ret)
		return ret;
	if (eo.io && !timed)
		eo.timeout_ms = 0; /* a shell or an agent at the terminal: as long as the user likes */
	if ((eo.io & LATCH_AGENT_IO_TTY) && !isatty(STDIN_FILENO))
		return latch_err(LATCH_EXIT_CMD_LATCH,
				 "exec -t: stdin is not a terminal, so there is none to give the guest; use -i for a "
				 "pipe");
	if ((eo.io & LATCH_AGENT_IO_TTY) && latch_json)
		return latch_err(LATCH_EXIT_CMD_LATCH, "exec -t: a terminal's bytes are no JSON; drop --json or -t");
	if (!latch_vm_exists(argv[1]))
		return latch_err(LATCH_EXIT_CMD_LATCH, "no VM sandbox '%s' (see `latch ls`)", argv[1]);
	signal(SIGPIPE, SIG_IGN);
	/* without a pty, the guest's bytes must not drive the user's terminal; a pipe or file gets them exact */
	if (!(eo.io & LATCH_AGENT_IO_TTY) && !latch_json) {
		eo.escape_out = isatty(STDOUT_FILENO);
		eo.escape_err = isatty(STDERR_FILENO);
	}
	/* under --json the output is collected and goes into the object */
	if (latch_json) {
		out_fd = memfd_create("latch-exec-out", MFD_CLOEXEC);
		err_fd = memfd_create("latch-exec-err", MFD_CLOEXEC);
		if (out_fd < 0 || err_fd < 0)
			return latch_err(LATCH_EXIT_CMD_LATCH, "memfd_create: %s", strerror(errno));
	}
	ret = exec_in_guest(argv[1], argv + i, &eo, out_fd, err_fd, &r, err, sizeof(err));
	if (ret) {
		if (latch_json) {
			close(out_fd);
			close(err_fd);
		}
		/* past the deadline once the agent had answered: the command's time ran out, not latch */
		return latch_err(ret == -ETIMEDOUT && r.answered ? LATCH_EXIT_CMD_TIMEOUT : LATCH_EXIT_CMD_LATCH, "%s",
				 err);
	}
	if (latch_json) {
		json_t *j = json_pack("{s:s, s:i, s:b, s:i, s:b, s:b}", "sandbox", argv[1], "status", r.status,
				      "signaled", r.signaled, "duration_ms", r.duration_ms, "truncated", r.truncated,
				      "timed_out", r.timed_out);

		json_object_set_new(j, "stdout", slurp(out_fd));
		json_object_set_new(j, "stderr", slurp(err_fd));
		latch_json_out(j);
	}
	return r.timed_out ? LATCH_EXIT_CMD_TIMEOUT : r.status;
}

/*
 * `latch shell NAME`: exec -it NAME -- a login shell, bash where the guest
 * has it (asked in the guest, in the same run), else sh; in the workspace
 * when there is one, with the kit's environment.
 */
int cmd_shell(int argc, char **argv)
{
	static char *login[] = { "/bin/sh", "-c",
				 "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec /bin/sh -l; fi",
				 NULL };
	struct latch_vm_exec_opts eo = { .io = LATCH_AGENT_IO_STDIN | LATCH_AGENT_IO_TTY };
	struct latch_vm_exec_result r = { 0 };
	char err[LATCH_ERR_MAX];
	int ret;

	if (argc != 2)
		return latch_err(LATCH_EXIT_CMD_LATCH, "usage: latch shell NAME");
	if (latch_parse_name(argv[1], err, sizeof(err)))
		return latch_err(LATCH_EXIT_CMD_LATCH, "%s", err);
	if (latch_need_root("shell"))
		return LATCH_EXIT_CMD_LATCH;
	if (!isatty(STDIN_FILENO))
		return latch_err(LATCH_EXIT_CMD_LATCH,
				 "shell: stdin is not a terminal; for a pipe, `latch exec -i %s -- sh`", argv[1]);
	if (latch_json)
		return latch_err(LATCH_EXIT_CMD_LATCH, "shell: a terminal's bytes are no JSON; drop --json");
	if (!latch_vm_exists(argv[1]))
		return latch_err(LATCH_EXIT_CMD_LATCH, "no VM sandbox '%s' (see `latch ls`)", argv[1]);
	signal(SIGPIPE, SIG_IGN);
	ret = exec_in_guest(argv[1], login, &eo, STDOUT_FILENO, STDERR_FILENO, &r, err, sizeof(err));
	if (ret)
		return latch_err(LATCH_EXIT_CMD_LATCH, "%s", err);
	return r.status;
}

static volatile sig_atomic_t task_stop;

static void on_task_signal(int sig)
{
	task_stop = sig;
}

static void task_step(const char *line, void *arg)
{
	if (!latch_json)
		fprintf(stderr, "latch: task: %s\n", line);
}

int cmd_task(int argc, char **argv)
{
	struct latch_vm_task_opts o = { .stop = &task_stop, .step = task_step };
	struct sigaction sa = { .sa_handler = on_task_signal };
	static struct latch_vm_task_result res;
	enum latch_vm_fail fail;
	char err[LATCH_ERR_MAX];
	int i, r;

	r = command_args(argc, argv, "task", &o.timeout_ms, &i);
	if (r)
		return r;
	o.source = argv[1];
	o.argv = (const char *const *)argv + i;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = latch_vm_task(&o, &res, &fail, err, sizeof(err));
	if (task_stop) {
		fprintf(stderr, "latch: task: signal %d, clone %s %s\n", (int)task_stop, *res.clone ? res.clone : "-",
			res.removed ? "removed" : "NOT removed");
		if (!res.removed)
			latch_err(LATCH_EXIT_CMD_LATCH, "task: %s", err);
		return 128 + task_stop;
	}
	if (r)
		return latch_err(LATCH_EXIT_CMD_LATCH, "task: %s", err);
	return res.run.timed_out ? LATCH_EXIT_CMD_TIMEOUT : res.run.status;
}

int latch_vm_status_lines(const char *name, json_t *o)
{
	static struct latch_vm_observed ob;

	if (latch_vm_observe(name, &ob))
		return -ENOENT;
	json_object_set_new(o, "domain", ob.libvirt_ok ? json_string(ob.dom.state) : json_null());
	json_object_set_new(o, "accelerator", *ob.dom.accel ? json_string(ob.dom.accel) : json_null());
	json_object_set_new(o, "cpu_mode", *ob.dom.cpu_mode ? json_string(ob.dom.cpu_mode) : json_null());
	json_object_set_new(o, "routing_table", json_integer(ob.st.table));
	json_object_set_new(o, "allowed_traffic_routed", json_boolean(*ob.st.uplink != '\0'));
	json_object_set_new(o, "routing_note", *ob.st.uplink ? json_null() : json_string(NO_ROUTE));
	json_object_set_new(o, "template", *ob.st.template_id ? json_string(ob.st.template_id) : json_null());
	if (!latch_json && *ob.st.template_id)
		printf("  started:  restored from the image's template %s (a warm start), not booted\n",
		       ob.st.template_id);
	if (!latch_json) {
		printf("  domain:   " LATCH_DOMAIN_PREFIX "%s %s, accelerator %s, cpu %s (observed)\n", name,
		       ob.libvirt_ok ? ob.dom.state : "unknown (libvirt unreachable)",
		       *ob.dom.accel ? ob.dom.accel : "-", *ob.dom.cpu_mode ? ob.dom.cpu_mode : "-");
		printf("  routing:  table %u, %s, rule %s\n", ob.st.table,
		       ob.net.default4 ? (ob.net.unreachable4 ? "unreachable default" : "default via uplink") :
					 "NO default route",
		       ob.net.rule4 ? "present" : "MISSING");
		if (!*ob.st.uplink)
			printf("  note:     %s\n", NO_ROUTE);
	}
	return 0;
}
