// SPDX-License-Identifier: GPL-2.0-only
/*
 * verify_op.c - `latch verify`'s name rows on latchd's root-only socket:
 * the sandbox's resolver test-runs its own decisions on names and on
 * made-up upstream answers, and does nothing with them.
 *
 *	{"op":"verify_names","sandbox":S,"names":[NAME...],"answers":[ADDR...]}
 *	-> {"ok":true,"profile":P|null,"open":B,"allowed_name":N|null,
 *	    "names":[{"name":N,"refused":WHY|null}],
 *	    "answers":[{"addr":A,"refused":WHY|null,"learn":B}]}
 *
 * Each answer address is judged alone, as an answer for allowed_name (a
 * name the policy allows, picked here: the policy is latchd's to know).
 * The judgement is the resolver's own code (latch_resolver_try_name,
 * latch_resolver_try_answer): what a real query gets, minus the reply, the
 * cache and the learned entry.  Operators' upstreams can't be made to
 * rebind on demand; this shows what the filter does when one does.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "latchd/latchd.h"

static void hex_label(char *buf, size_t len)
{
	unsigned char rnd[6] = { 0 };
	size_t n = 0;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		memset(rnd, 0x5a, sizeof(rnd)); /* a fixed label still makes a name the policy is asked about */
	for (size_t i = 0; i < sizeof(rnd) && n + 3 <= len; i++)
		n += snprintf(buf + n, len - n, "%02x", rnd[i]);
}

/* A name the policy allows: its first host name, else a label under its first wildcard; "" when none. */
static void pick_allowed(struct sandbox *s, char *out, size_t len)
{
	const struct latch_pentry *lists[2] = { s->prof.entries, s->extra };
	int counts[2] = { s->have_profile ? s->prof.n : 0, s->n_extra };
	char hex[16];

	out[0] = '\0';
	hex_label(hex, sizeof(hex));
	if (s->have_profile && s->prof.open) {
		snprintf(out, len, "latch-verify-%s.invalid", hex);
		return;
	}
	for (int k = 0; k < 2 && !out[0]; k++)
		for (int i = 0; i < counts[k] && !out[0]; i++)
			if (lists[k][i].kind == LATCH_PENTRY_HOST)
				snprintf(out, len, "%s", lists[k][i].name);
	for (int k = 0; k < 2 && !out[0]; k++)
		for (int i = 0; i < counts[k] && !out[0]; i++)
			if (lists[k][i].kind == LATCH_PENTRY_WILDCARD)
				snprintf(out, len, "latch-verify-%s.%s", hex, lists[k][i].name);
	/* the resolver's own check has the last word (a grant, or a name too long with the label) */
	if (out[0] && latch_resolver_try_name(s->res, out))
		out[0] = '\0';
}

void latchd_verify_op(struct client *c, json_t *req)
{
	struct latchd *ld = latchd_of_client(c);
	const char *name = json_string_value(json_object_get(req, "sandbox"));
	json_t *names = json_object_get(req, "names"), *answers = json_object_get(req, "answers");
	json_t *rn = json_array(), *ra = json_array(), *v;
	char allowed[LATCH_RESOLVER_NAME_MAX + 32];
	struct sandbox *s;
	size_t i;

	if (!name || (names && !json_is_array(names)) || (answers && !json_is_array(answers))) {
		json_decref(rn);
		json_decref(ra);
		return latchd_control_reply_error(
			c, "verify_names needs \"sandbox\", and \"names\"/\"answers\" as arrays");
	}
	latchd_sandboxes_scan(ld);
	s = latchd_sandbox_find(ld, name);
	if (!s || !s->res) {
		json_decref(rn);
		json_decref(ra);
		return latchd_control_reply_error(c,
						  s ? "%s: no resolver (the sandbox has no resolver address)" :
						      "no sandbox '%s' is served by latchd",
						  name);
	}
	pick_allowed(s, allowed, sizeof(allowed));
	json_array_foreach(names, i, v) {
		const char *n = json_string_value(v);

		if (n)
			json_array_append_new(rn, json_pack("{s:s, s:s?}", "name", n, "refused",
							    latch_resolver_try_name(s->res, n)));
	}
	json_array_foreach(answers, i, v) {
		const char *text = json_string_value(v);
		struct latch_addr a;
		const char *why;
		int learn = 0;

		if (!text || latch_parse_addr(text, &a, NULL, 0)) {
			json_decref(rn);
			json_decref(ra);
			return latchd_control_reply_error(c, "verify_names: not an address: %s",
							  text ? text : "(not a string)");
		}
		why = latch_resolver_try_answer(s->res, &a, 1, &learn);
		json_array_append_new(ra,
				      json_pack("{s:s, s:s?, s:b}", "addr", text, "refused", why, "learn", learn > 0));
	}
	latchd_control_reply(c,
			     json_pack("{s:b, s:s?, s:b, s:s?, s:o, s:o}", "ok", 1, "profile",
				       s->have_profile ? s->prof.name : NULL, "open", s->have_profile && s->prof.open,
				       "allowed_name", allowed[0] ? allowed : NULL, "names", rn, "answers", ra));
}
