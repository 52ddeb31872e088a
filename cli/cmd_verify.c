// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_verify.c - `latch verify NAME [--offline]`: attack the live boundary,
 * fail closed.
 *
 * The battery (loader/verify.c) is frames the sandbox's guest could send,
 * each attack beside a control.  Online, the frames leave from inside the
 * VM guest, as root there would send them: the guest agent runs
 * latch-rawsend with each frame, and the kernel's counters say what the
 * program did.  --offline sends the same frames through the pinned program
 * with BPF_PROG_TEST_RUN, no guest needed.  Then the names, through the
 * sandbox's resolver (sandbox/verify_names.c): the guest asks them with busybox's
 * nslookup, and latchd test-runs what no upstream does on demand.  Exit 0
 * only when every attack was stopped and every control passed; the posture
 * is read first, and a sandbox whose enforcement is not verified exits 3
 * before any attack.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "loader/loader.h"
#include "profile/profile.h"
#include "sandbox/sandbox.h"
#include "vm/vm.h"

/* The guest's side: the agent, the NIC, and latch-rawsend in the image. */
struct guest {
	const char *name;
	char dev[32];
};

/* Run argv in the guest; its stdout into out (NUL-terminated).  0, or -errno / the status. */
static int guest_run(struct guest *g, const char *const argv[], char *out, size_t len)
{
	struct latch_vm_exec_opts eo = { .timeout_ms = 10000, .output_limit = 4096 };
	struct latch_vm_exec_result r;
	char err[LATCH_ERR_MAX];
	FILE *f = tmpfile();
	int ret;
	size_t n = 0;

	if (!f)
		return -errno;
	ret = latch_vm_exec(g->name, argv, &eo, fileno(f), -1, &r, err, sizeof(err));
	if (out && len) {
		rewind(f);
		n = fread(out, 1, len - 1, f);
		out[n] = '\0';
	}
	fclose(f);
	return ret ? ret : r.status;
}

static int guest_open(const char *name, struct guest *g, char *err, size_t errlen)
{
	static const char *const list[] = { "sh", "-c", "ls /sys/class/net | grep -v '^lo$' | head -n1", NULL };
	static const char *const which[] = { "sh", "-c", "command -v latch-rawsend", NULL };
	memset(g, 0, sizeof(*g));
	g->name = name;
	if (!latch_vm_running(name))
		return snprintf(err, errlen, "the guest of %s is not running; `latch up %s` first (or use --offline)",
				name, name),
		       -1;
	if (guest_run(g, list, g->dev, sizeof(g->dev)) || !*g->dev)
		return snprintf(err, errlen, "cannot find the guest's network device"), -1;
	g->dev[strcspn(g->dev, "\n")] = '\0';
	if (guest_run(g, which, NULL, 0))
		return snprintf(err, errlen,
				"latch-rawsend is not in %s's image (the default image has it; "
				"or use --offline)",
				name),
		       -1;
	return 0;
}

/*
 * Send one frame from inside the guest and read what the kernel counted.
 * The guest's own traffic (ARP, ND) may share the window: reasons the frame
 * can't be counted under are not looked at (latch_verify_diff), and when
 * something else still moved, the frame is sent again, up to four times,
 * until it is the only packet counted.
 */
static int guest_send_once(const struct latch_sandbox *sb, struct guest *g, const struct latch_verify_case *c,
			   struct latch_verify_seen *seen)
{
	static struct latch_counter before[LATCH_COUNTER_SLOTS], after[LATCH_COUNTER_SLOTS];
	static struct latch_verify_case t;
	char hex[2 * LATCH_VERIFY_FRAME_MAX + 1];
	const char *argv[] = { "latch-rawsend", g->dev, "hex", hex, NULL };
	struct timespec settle = { 0, 200 * 1000 * 1000 };
	uint16_t port;
	int r;

	/* a port of its own for each try: no flow of an earlier try passes it */
	if (getrandom(&port, sizeof(port), 0) != sizeof(port))
		port = (uint16_t)getpid();
	t = *c;
	latch_verify_sport(&t, 32768 + port % 28000);
	c = &t;
	for (size_t i = 0; i < c->len; i++)
		snprintf(hex + 2 * i, 3, "%02x", c->frame[i]);
	memset(seen, 0, sizeof(*seen));
	seen->verdict = -1;
	r = latch_sandbox_counters(sb, before);
	if (r)
		return r;
	r = guest_run(g, argv, NULL, 0);
	if (r)
		return r < 0 ? r : -EIO;
	nanosleep(&settle, NULL); /* the frame crosses QEMU and the tap after send() returns */
	r = latch_sandbox_counters(sb, after);
	if (!r)
		latch_verify_diff(before, after, c, seen);
	return r;
}

static int guest_send(const struct latch_sandbox *sb, struct guest *g, const struct latch_verify_case *c,
		      struct latch_verify_seen *seen)
{
	int r = 0;

	for (int i = 0; i < 4 && !r; i++) {
		r = guest_send_once(sb, g, c, seen);
		if (!r && !seen->noisy)
			break;
	}
	return r;
}

/* The resolver's address as the guest asks it. */
static void resolver_text(const struct latch_config *cfg, char *buf, size_t len)
{
	if (cfg->flags & LATCH_CFG_HAVE_RESOLVER4)
		inet_ntop(AF_INET, &cfg->resolver_ip4, buf, len);
	else
		inet_ntop(AF_INET6, cfg->resolver_ip6, buf, len);
}

struct asker {
	struct guest *g;
	char server[INET6_ADDRSTRLEN];
};

/* latch_verify_ask_fn: busybox nslookup in the guest, its answer read back as a word. */
static int guest_ask(void *arg, const char *name, char *rc, size_t len)
{
	struct asker *a = arg;
	const char *argv[] = { "nslookup", "-type=a", "-timeout=3", name, a->server, NULL };
	char out[2048];
	const char *p;
	int r = guest_run(a->g, argv, out, sizeof(out));

	if (r < 0)
		return r;
	/* "** server can't find NAME: REFUSED", "*** Can't find NAME: No answer", "Name: NAME" then "Address: A" */
	if ((p = strstr(out, "server can't find ")) && (p = strstr(p, ": ")))
		snprintf(rc, len, "%.*s", (int)strcspn(p + 2, " \n"), p + 2);
	else if (strstr(out, "No answer"))
		snprintf(rc, len, "NOERROR no-address");
	else if ((p = strstr(out, "\nName:")) && (p = strstr(p, "\nAddress:")))
		snprintf(rc, len, "NOERROR %.*s", (int)strcspn(p + 9 + strspn(p + 9, " \t"), " \n"),
			 p + 9 + strspn(p + 9, " \t"));
	else if (strstr(out, "\nName:"))
		snprintf(rc, len, "NOERROR");
	else if (strstr(out, "timed out"))
		snprintf(rc, len, "no answer");
	else
		snprintf(rc, len, "unreadable");
	return 0;
}

static void seen_text(const struct latch_verify_seen *s, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < s->n; i++)
		n += snprintf(buf + n, len - n, "%s%s", i ? "," : "", latch_reason_name(s->reason[i]));
	if (!s->n)
		snprintf(buf, len, "%s", s->verdict < 0 ? "nothing" : s->verdict ? "dropped" : "passed");
	else if (s->noisy && s->verdict < 0)
		snprintf(buf + n, len - n, " (other traffic too)");
}

/* The verdicts so far: not as they must be, uncontained under open, name cases not tried. */
struct tally {
	int bad, uncontained, not_tried;
};

/* Each frame of the battery, from the guest or test-run on the pinned program, judged into arr. */
static int verify_frames(struct latch_sandbox *sb, struct guest *g, bool offline, bool open,
			 const struct latch_verify_case *cases, int n, json_t *arr, struct tally *t)
{
	for (int i = 0; i < n; i++) {
		struct latch_verify_seen seen;
		enum latch_verify_result res;
		char what[128];
		int r = offline ? latch_verify_testrun(sb, &cases[i], &seen) : guest_send(sb, g, &cases[i], &seen);

		if (r)
			return latch_err(LATCH_EXIT_FAILED, "%s: %s", cases[i].name, strerror(-r));
		res = latch_verify_judge(&cases[i], &seen, open);
		t->bad += res != LATCH_VERIFY_OK && res != LATCH_VERIFY_UNCONTAINED;
		t->uncontained += res == LATCH_VERIFY_UNCONTAINED;
		seen_text(&seen, what, sizeof(what));
		if (!latch_json)
			printf("  %-7s %-36s want %-22s saw %-28s %s\n", cases[i].attack ? "attack" : "control",
			       cases[i].name, latch_reason_name(cases[i].want), what, latch_verify_result_name(res));
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "case", cases[i].name, "kind",
						     cases[i].attack ? "attack" : "control", "via", "frame", "want",
						     latch_reason_name(cases[i].want), "saw", what, "result",
						     latch_verify_result_name(res)));
	}
	return 0;
}

/* The name rows, into arr. */
static void verify_name_rows(const struct latch_verify_name_row *rows, int nr, json_t *arr, struct tally *t)
{
	for (int i = 0; i < nr; i++) {
		enum latch_verify_result res = rows[i].res;

		t->bad += res != LATCH_VERIFY_OK && res != LATCH_VERIFY_UNCONTAINED && res != LATCH_VERIFY_NOT_TRIED;
		t->uncontained += res == LATCH_VERIFY_UNCONTAINED;
		t->not_tried += res == LATCH_VERIFY_NOT_TRIED;
		if (!latch_json)
			printf("  %-7s %-36s want %-22s saw %-28s %s\n", rows[i].attack ? "attack" : "control",
			       rows[i].name, rows[i].want, rows[i].saw, latch_verify_result_name(res));
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "case", rows[i].name, "kind",
						     rows[i].attack ? "attack" : "control", "via", "resolver", "want",
						     rows[i].want, "saw", rows[i].saw, "result",
						     latch_verify_result_name(res)));
	}
}

static void verify_summary(const char *name, const struct tally *t)
{
	if (!t->bad && !t->uncontained)
		printf("%s: every attack %s, every control passed\n", name,
		       t->not_tried ? "tried was stopped" : "stopped");
	if (t->not_tried)
		printf("%s: %d name case(s) not tried (no verdict either way; see the rows)\n", name, t->not_tried);
	if (t->uncontained)
		printf("%s: UNCONTAINED: %d attack(s) only a policy stops passed under the open profile\n", name,
		       t->uncontained);
	if (t->bad)
		printf("%s: %d case(s) not as they must be "
		       "(FAIL: a leak; control-failed/unseen: not verified)\n",
		       name, t->bad);
}

/* The sandbox's arguments checked, in the order their errors are told. */
static int verify_args(int argc, char **argv, const char **name, bool *offline, const char **rebind_name,
		       char *rebind_norm, size_t normlen)
{
	char err[LATCH_ERR_MAX];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--offline"))
			*offline = true;
		else if (!strcmp(argv[i], "--rebind-name") && i + 1 < argc)
			*rebind_name = argv[++i];
		else if (!*name && argv[i][0] != '-')
			*name = argv[i];
		else
			return latch_err(LATCH_EXIT_USAGE, "usage: latch verify NAME [--offline] [--rebind-name HOST]");
	}
	if (!*name)
		return latch_err(LATCH_EXIT_USAGE, "usage: latch verify NAME [--offline] [--rebind-name HOST]");
	if (latch_parse_name(*name, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (*rebind_name && latch_dns_name_normalize(*rebind_name, rebind_norm, normlen))
		return latch_err(LATCH_EXIT_USAGE, "--rebind-name: '%s' is not a host name", *rebind_name);
	if (*rebind_name)
		*rebind_name = rebind_norm;
	if (latch_need_root("verify"))
		return LATCH_EXIT_USAGE;
	if (!latch_sandbox_exists(*name))
		return latch_err_no_sandbox("sandbox", *name);
	if (!*offline && !latch_vm_exists(*name))
		return latch_err(LATCH_EXIT_USAGE,
				 "'%s' has no guest to attack from (not made by `latch up`); "
				 "`latch verify %s --offline` runs the battery without one",
				 *name, *name);
	return 0;
}

int cmd_verify(int argc, char **argv)
{
	static struct latch_verify_case cases[LATCH_VERIFY_MAX];
	static struct latch_verify_name_row rows[LATCH_VERIFY_MAX];
	const char *name = NULL, *rebind_name = NULL;
	char rebind_norm[LATCH_DNS_NAME_MAX + 1];
	char err[LATCH_ERR_MAX];
	struct latch_sandbox *sb;
	struct latch_posture p;
	struct latch_config cfg;
	struct guest g = { 0 };
	bool offline = false, open;
	struct tally t = { 0 };
	int n, nr;
	struct asker ask = { .g = &g };
	json_t *arr;

	n = verify_args(argc, argv, &name, &offline, &rebind_name, rebind_norm, sizeof(rebind_norm));
	if (n)
		return n;
	sb = latch_sandbox_open(name, err, sizeof(err));
	if (!sb)
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (latch_sandbox_posture(sb, &p) || !p.enforced || latch_sandbox_read_config(sb, &cfg)) {
		latch_sandbox_free(sb);
		return latch_err(LATCH_EXIT_UNVERIFIED, "%s is NOT ENFORCED: %s; nothing to attack (`latch status %s`)",
				 name, p.why, name);
	}
	open = cfg.flags & LATCH_CFG_OPEN;
	n = latch_verify_battery(sb, cases, LATCH_VERIFY_MAX, err, sizeof(err));
	if (n < 0 || (!offline && guest_open(name, &g, err, sizeof(err)))) {
		latch_sandbox_free(sb);
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	}
	signal(SIGPIPE, SIG_IGN);
	if (!latch_json)
		printf("%s: %s, %d frames%s\n", name,
		       offline ? "offline: BPF_PROG_TEST_RUN on the pinned program" : "from inside the guest", n,
		       open ? "; profile open: UNCONTAINED" : "");
	arr = json_array();
	nr = verify_frames(sb, &g, offline, open, cases, n, arr, &t);
	latch_sandbox_free(sb);
	if (nr) {
		json_decref(arr);
		return nr;
	}
	/* the names: through the resolver, from the guest or as latchd's test-run */
	resolver_text(&cfg, ask.server, sizeof(ask.server));
	nr = latch_sandbox_verify_names(name, &cfg, offline ? NULL : guest_ask, &ask, rebind_name, rows,
					LATCH_VERIFY_MAX);
	verify_name_rows(rows, nr, arr, &t);
	if (!latch_json)
		verify_summary(name, &t);
	latch_json_out(json_pack("{s:s, s:s, s:b, s:o, s:b, s:i}", "sandbox", name, "mode",
				 offline ? "offline" : "guest", "uncontained", open, "cases", arr, "verified",
				 !t.bad && !t.uncontained, "not_tried", t.not_tried));
	return t.bad || t.uncontained ? LATCH_EXIT_FAILED : LATCH_EXIT_OK;
}
