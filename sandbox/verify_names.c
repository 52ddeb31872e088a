// SPDX-License-Identifier: GPL-2.0-only
/*
 * verify_names.c - `latch verify`'s name rows: what the sandbox's resolver
 * does with a name the policy does not list, and with a name that rebinds.
 *
 * The unlisted name is made up here at random (latch-verify-HEX.invalid)
 * and asked from inside the guest, through the resolver, beside a name the
 * policy allows: the attack is stopped when the answer is REFUSED, the
 * control passes with any other answer (the control is about the name
 * check: an unreachable upstream's SERVFAIL passes it).  Offline, latchd's
 * resolver test-runs the same name decision.  Rebinding can't be asked of
 * an operator's real upstream on demand, so latchd's resolver test-runs its
 * answer filter on made-up answers for the allowed name, one address each
 * (private, loopback, metadata, benchmark, 6to4 and ULA, the host's own),
 * beside a public documentation address: the real code on a synthetic
 * input, as --offline is for frames, and nothing learned.  --rebind-name
 * HOST asks the operator's own rebinding name for real, from the guest.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "ctl/ctl.h"
#include "sandbox/sandbox.h"

/* What a public name may not answer with, beside the host's own addresses (latch_addr_nonpublic's ranges). */
static const char *const rebinding4[] = { "10.0.0.5", "127.0.0.1", "169.254.169.254", "198.18.0.1" };
static const char *const rebinding6[] = { "2002:a00:5::1", "fd00::5" };
/* A public answer: verify's documentation addresses (loader/verify.c's denied destinations) */
#define PUBLIC4 "203.0.113.251"
#define PUBLIC6 "2001:db8:ffff::251"

struct rows {
	struct latch_verify_name_row *out;
	int max, n;
};

__attribute__((format(printf, 6, 7))) static void row(struct rows *r, const char *name, bool attack, const char *want,
						      enum latch_verify_result res, const char *fmt, ...)
{
	struct latch_verify_name_row *w;
	va_list ap;

	if (r->n >= r->max)
		return;
	w = &r->out[r->n++];
	snprintf(w->name, sizeof(w->name), "%s", name);
	w->attack = attack;
	snprintf(w->want, sizeof(w->want), "%s", want);
	w->res = res;
	va_start(ap, fmt);
	vsnprintf(w->saw, sizeof(w->saw), fmt, ap);
	va_end(ap);
}

static void all_not_tried(struct rows *r, bool rebind_name, const char *why)
{
	row(r, "allowed name via the resolver", false, "answered", LATCH_VERIFY_NOT_TRIED, "%s", why);
	row(r, "unlisted name via the resolver", true, "REFUSED", LATCH_VERIFY_NOT_TRIED, "%s", why);
	row(r, "rebinding answers", true, "refused", LATCH_VERIFY_NOT_TRIED, "%s", why);
	if (rebind_name)
		row(r, "rebinding name via the resolver", true, "REFUSED", LATCH_VERIFY_NOT_TRIED, "%s", why);
}

static json_t *answers_list(const struct latch_config *cfg)
{
	char buf[INET6_ADDRSTRLEN];
	json_t *a = json_array();

	json_array_append_new(a, json_string(PUBLIC4));
	json_array_append_new(a, json_string(PUBLIC6));
	for (size_t i = 0; i < sizeof(rebinding4) / sizeof(rebinding4[0]); i++)
		json_array_append_new(a, json_string(rebinding4[i]));
	for (size_t i = 0; i < sizeof(rebinding6) / sizeof(rebinding6[0]); i++)
		json_array_append_new(a, json_string(rebinding6[i]));
	if (cfg->flags & LATCH_CFG_HAVE_IP4)
		json_array_append_new(a, json_string(inet_ntop(AF_INET, &cfg->host_ip4, buf, sizeof(buf))));
	if (cfg->flags & LATCH_CFG_HAVE_IP6)
		json_array_append_new(a, json_string(inet_ntop(AF_INET6, cfg->host_ip6, buf, sizeof(buf))));
	return a;
}

/* The test-run of the answer filter: the public answers as controls, each rebinding one as an attack. */
static void answer_rows(struct rows *r, json_t *answers, const char *allowed)
{
	size_t i;
	json_t *v;

	json_array_foreach(answers, i, v) {
		const char *addr = json_string_value(json_object_get(v, "addr"));
		const char *why = json_string_value(json_object_get(v, "refused"));
		bool control = !strcmp(addr, PUBLIC4) || !strcmp(addr, PUBLIC6);
		char name[96];

		snprintf(name, sizeof(name), "%s answer %s", control ? "public" : "rebinding", addr);
		if (control)
			row(r, name, false, "answered", why ? LATCH_VERIFY_CONTROL_FAIL : LATCH_VERIFY_OK,
			    "%s for %s (test-run in latchd)", why ? why : "answered", allowed);
		else
			row(r, name, true, "refused", why ? LATCH_VERIFY_OK : LATCH_VERIFY_LEAK,
			    "%s for %s (test-run in latchd)", why ? why : "answered", allowed);
	}
}

/* Did the guest's answer for an allowed name pass the name check?  Anything but REFUSED did. */
static enum latch_verify_result control_result(const char *rc)
{
	if (!strcmp(rc, "REFUSED"))
		return LATCH_VERIFY_CONTROL_FAIL;
	return strcmp(rc, "no answer") && strcmp(rc, "unreadable") ? LATCH_VERIFY_OK : LATCH_VERIFY_UNSEEN;
}

/* The guest's answer for a name the policy refuses (open: allowed, and uncontained when answered). */
static enum latch_verify_result attack_result(const char *rc, bool open)
{
	if (!strcmp(rc, "REFUSED"))
		return LATCH_VERIFY_OK;
	if (!strcmp(rc, "no answer") || !strcmp(rc, "unreadable"))
		return LATCH_VERIFY_UNSEEN;
	return open ? LATCH_VERIFY_UNCONTAINED : LATCH_VERIFY_LEAK; /* asked upstream: the name check let it through */
}

static void names_rows(struct rows *r, json_t *rep, const char *unlisted, const char *rebind_name,
		       latch_verify_ask_fn ask, void *arg)
{
	const char *allowed = json_string_value(json_object_get(rep, "allowed_name"));
	json_t *names = json_object_get(rep, "names");
	const char *why_unlisted = json_string_value(json_object_get(json_array_get(names, 0), "refused"));
	bool open = json_is_true(json_object_get(rep, "open"));
	char rc[64], what[160];

	/* the control: an allowed name gets past the name check (a policy of no names has none to try) */
	if (!allowed)
		row(r, "allowed name via the resolver", false, "answered", LATCH_VERIFY_NOT_TRIED,
		    "the policy allows no name (profile %s): every query is REFUSED",
		    json_string_value(json_object_get(rep, "profile")) ?: "none");
	else if (!ask)
		row(r, "allowed name via the resolver", false, "answered", LATCH_VERIFY_OK,
		    "%s allowed (test-run in latchd)", allowed);
	else if (ask(arg, allowed, rc, sizeof(rc)))
		row(r, "allowed name via the resolver", false, "answered", LATCH_VERIFY_UNSEEN,
		    "the guest could not ask");
	else
		row(r, "allowed name via the resolver", false, "answered", control_result(rc), "%s for %s%s", rc,
		    allowed, strcmp(rc, "SERVFAIL") ? "" : " (upstream unreachable; the name check passed)");

	/* the attack: the unlisted name is REFUSED, unless `open` lets every name through */
	if (why_unlisted == NULL && !open)
		row(r, "unlisted name via the resolver", true, "REFUSED", LATCH_VERIFY_NOT_TRIED,
		    "the policy allows %s itself", unlisted);
	else if (!ask)
		row(r, "unlisted name via the resolver", true, "REFUSED",
		    why_unlisted ? LATCH_VERIFY_OK : LATCH_VERIFY_UNCONTAINED, "%s for %s (test-run in latchd)",
		    why_unlisted ? why_unlisted : "allowed", unlisted);
	else if (ask(arg, unlisted, rc, sizeof(rc)))
		row(r, "unlisted name via the resolver", true, "REFUSED", LATCH_VERIFY_UNSEEN,
		    "the guest could not ask");
	else
		row(r, "unlisted name via the resolver", true, "REFUSED", attack_result(rc, open), "%s for %s", rc,
		    unlisted);

	if (allowed)
		answer_rows(r, json_object_get(rep, "answers"), allowed);
	else
		row(r, "rebinding answers", true, "refused", LATCH_VERIFY_NOT_TRIED,
		    "no name allowed: every answer is REFUSED before any address");
	if (!rebind_name)
		return;

	/* the operator's own rebinding name, for real: the name check must pass, the answer not */
	const char *why = json_string_value(json_object_get(json_array_get(names, 1), "refused"));

	snprintf(what, sizeof(what), "%s passes the name check", rebind_name);
	row(r, "rebinding name allowed", false, "allowed", why ? LATCH_VERIFY_CONTROL_FAIL : LATCH_VERIFY_OK, "%s",
	    why ? why : "allowed");
	if (!ask)
		row(r, "rebinding name via the resolver", true, "REFUSED", LATCH_VERIFY_NOT_TRIED,
		    "asked from the guest only (not --offline)");
	else if (ask(arg, rebind_name, rc, sizeof(rc)))
		row(r, "rebinding name via the resolver", true, "REFUSED", LATCH_VERIFY_UNSEEN,
		    "the guest could not ask");
	else
		row(r, "rebinding name via the resolver", true, "REFUSED or no address",
		    !strcmp(rc, "REFUSED") || !strcmp(rc, "NOERROR no-address") || !strcmp(rc, "NXDOMAIN") ?
			    LATCH_VERIFY_OK :
		    !strncmp(rc, "NOERROR", 7) ? LATCH_VERIFY_LEAK : /* the guest got an address for it */
						 LATCH_VERIFY_UNSEEN,
		    "%s for %s", rc, rebind_name);
}

int latch_sandbox_verify_names(const char *name, const struct latch_config *cfg, latch_verify_ask_fn ask, void *arg,
			       const char *rebind_name, struct latch_verify_name_row *out, int max)
{
	struct rows r = { .out = out, .max = max };
	char unlisted[64], err[LATCH_ERR_MAX];
	unsigned char rnd[6];
	json_t *req, *rep = NULL;
	int rc;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	snprintf(unlisted, sizeof(unlisted), "latch-verify-%02x%02x%02x%02x%02x%02x.invalid", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5]);
	req = json_pack("{s:s, s:s, s:[s, s?], s:o}", "op", latchd_op_name(LATCHD_OP_VERIFY_NAMES), "sandbox", name,
			"names", unlisted, rebind_name, "answers", answers_list(cfg));
	rc = req ? latchd_call(req, &rep, 10000, err, sizeof(err)) : -ENOMEM;
	json_decref(req);
	if (rc == -ENOENT || rc == -ECONNREFUSED)
		all_not_tried(&r, rebind_name, "latchd is not running");
	else if (rc)
		all_not_tried(&r, rebind_name, err);
	else if (!json_is_true(json_object_get(rep, "ok")))
		all_not_tried(&r, rebind_name, json_string_value(json_object_get(rep, "error")) ?: "latchd refused");
	else
		names_rows(&r, rep, unlisted, rebind_name, ask, arg);
	json_decref(rep);
	return r.n;
}
