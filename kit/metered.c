// SPDX-License-Identifier: GPL-2.0-only
/*
 * metered.c - a credential's fields for the spend meter: its caps, its
 * priced_endpoints and the provider tools it allows beyond what the meter
 * prices.  The checks are validate.c's, in its order and manner (one line
 * naming the credential, the field and the fix); they are apart because
 * they are the meter's words, not the route's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kit/raw.h"

/* "12", "12.5", "0.000001": dollars to micro-dollars, exactly. */
static int parse_dollars(const char *s, uint64_t *out)
{
	uint64_t whole = 0, frac = 0;
	int digits = 0, fd = 0;

	for (; *s >= '0' && *s <= '9'; s++, digits++) {
		whole = whole * 10 + (*s - '0');
		if (whole > 1000000000ull)
			return -ERANGE;
	}
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++, fd++) {
			if (fd == 6)
				return -EINVAL; /* past a micro-dollar */
			frac = frac * 10 + (*s - '0');
		}
	if (*s || (!digits && !fd))
		return -EINVAL;
	while (fd++ < 6)
		frac *= 10;
	*out = whole * 1000000 + frac;
	return 0;
}

int kit_check_caps(struct kit_ctx *c, const struct raw_caps *r, struct latch_kit_caps *caps)
{
	if (!r)
		return 0;
	if (r->requests_per_hour && !*r->requests_per_hour)
		return kit_fail(c, "caps: requests_per_hour must be 1 or more; leave it out for latch.conf's default");
	if (r->requests_per_day && !*r->requests_per_day)
		return kit_fail(c, "caps: requests_per_day must be 1 or more; leave it out for latch.conf's default");
	caps->requests_per_hour = r->requests_per_hour ? *r->requests_per_hour : 0;
	caps->requests_per_day = r->requests_per_day ? *r->requests_per_day : 0;
	if (r->dollars_per_day) {
		int ret = parse_dollars(r->dollars_per_day, &caps->microdollars_per_day);

		if (ret || !caps->microdollars_per_day)
			return kit_fail(
				c,
				"caps: dollars_per_day \"%s\" must be an amount above 0 such as 12.50 (at most 6 "
				"decimals, at most 1000000000)",
				r->dollars_per_day);
	}
	return 0;
}

/* ---- what a metered route allows beyond what the meter prices */

static const char *const tool_names[LATCH_KIT_TOOLS] = {
	[LATCH_KIT_TOOL_WEB_FETCH] = "web_fetch",
	[LATCH_KIT_TOOL_MCP] = "mcp",
	[LATCH_KIT_TOOL_URL_CONTEXT] = "url_context",
};

const char *latch_kit_tool_name(enum latch_kit_tool t)
{
	return (unsigned)t < LATCH_KIT_TOOLS ? tool_names[t] : "?";
}

int kit_check_tools(struct kit_ctx *c, const struct raw_cred *r, struct latch_kit_cred *cr)
{
	for (unsigned i = 0; i < r->allow_provider_tools_count; i++) {
		int t = 0;

		while (t < LATCH_KIT_TOOLS && strcmp(r->allow_provider_tools[i], tool_names[t]))
			t++;
		if (t == LATCH_KIT_TOOLS)
			return kit_fail(
				c,
				"allow_provider_tools: \"%s\" is not a tool latch refuses; name web_fetch, mcp or "
				"url_context",
				r->allow_provider_tools[i]);
		cr->provider_tools |= 1u << t;
	}
	return 0;
}

/* Is PATH under the credential's path prefix P, on a segment boundary (as the broker matches)? */
static bool under_prefix(const char *path, const char *p)
{
	size_t n = strlen(p);

	return !strcmp(p, "/") || (!strncmp(path, p, n) && (path[n] == '/' || !path[n]));
}

/*
 * Each priced endpoint: a method of the route's, a path under its paths
 * (checked as a path prefix is: one reading only), and a price; an entry
 * the route's own checks would refuse could never be used, so it is
 * refused here, naming what to change.
 */
int kit_check_priced(struct kit_ctx *c, const struct raw_cred *r, struct latch_kit_cred *cr)
{
	if (r->priced_endpoints_count > LATCH_KIT_PRICED_MAX)
		return kit_fail(c, "more than %d priced_endpoints", LATCH_KIT_PRICED_MAX);
	for (unsigned i = 0; i < r->priced_endpoints_count; i++) {
		const struct raw_priced *e = &r->priced_endpoints[i];
		struct latch_kit_priced *p = &cr->priced[cr->n_priced];
		char field[48];
		bool allowed = !cr->n_methods, under = false;
		int stars = 0;

		snprintf(field, sizeof(field), "priced_endpoints %u: path", i + 1);
		if (!e->method || !*e->method || strlen(e->method) > LATCH_KIT_METHOD_MAX || !kit_token_ok(e->method))
			return kit_fail(
				c, "priced_endpoints %u: method \"%s\" is not an HTTP method; write e.g. method: POST",
				i + 1, e->method ? e->method : "");
		for (size_t k = 0; k <= strlen(e->method); k++)
			p->method[k] = e->method[k] >= 'a' && e->method[k] <= 'z' ? e->method[k] - 32 : e->method[k];
		for (int k = 0; k < cr->n_methods; k++)
			allowed |= !strcmp(cr->methods[k], p->method);
		if (!allowed || !strcmp(p->method, "TRACE") || !strcmp(p->method, "CONNECT"))
			return kit_fail(
				c,
				"priced_endpoints %u: method %s is not one of the credential's methods; add it there",
				i + 1, p->method);
		if (!e->path || !*e->path)
			return kit_fail(c,
					"priced_endpoints %u: path is missing; write e.g. path: /v1/messages/batches",
					i + 1);
		if (kit_check_path(c, field, e->path, false, p->path, sizeof(p->path)))
			return -EINVAL;
		for (const char *q = p->path; (q = strchr(q, '*')); q++, stars++)
			if (q[1] == '*')
				return kit_fail(c,
						"%s \"%s\" has '**'; a '*' already stands for any bytes of a segment",
						field, e->path);
		if (stars > LATCH_KIT_PRICED_STARS)
			return kit_fail(c, "%s \"%s\" has more than %d '*'", field, e->path, LATCH_KIT_PRICED_STARS);
		for (int k = 0; k < cr->n_paths; k++)
			under |= under_prefix(p->path, cr->paths[k]);
		if (!under)
			return kit_fail(c, "%s \"%s\" is not under the credential's paths; add its prefix to paths",
					field, e->path);
		for (int k = 0; k < cr->n_priced; k++)
			if (!strcmp(cr->priced[k].method, p->method) && !strcmp(cr->priced[k].path, p->path))
				return kit_fail(c, "priced_endpoints %u: %s %s is given twice; keep one", i + 1,
						p->method, p->path);
		if (!e->dollars_per_request || parse_dollars(e->dollars_per_request, &p->microdollars))
			return kit_fail(
				c,
				"priced_endpoints %u: dollars_per_request \"%s\" must be an amount such as 5.00 (0 "
				"for free; at most 6 decimals, at most 1000000000)",
				i + 1, e->dollars_per_request ? e->dollars_per_request : "");
		cr->n_priced++;
	}
	return 0;
}
