// SPDX-License-Identifier: GPL-2.0-only
/*
 * cmd_usage.c - `latch usage [NAME] [--prices]`: where every spend cap
 * stands, read from the ledger (read-only; latchd keeps writing it).
 *
 * One row per cap: per sandbox and provider, then host-wide per provider.
 * USED is requests or dollars charged in the window, RESERVED what open
 * requests hold at their worst case, LEFT what the cap allows beyond both,
 * and NEXT FREE when the oldest request counted leaves the window (the
 * windows roll: the last 3600 s and the last 86400 s).  A sandbox's caps are
 * the ones its last request was held to (a kit credential may override
 * latch.conf's).  --prices lists the price table in force instead.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "budget/budget.h"
#include "cli/cli.h"
#include "config/config.h"
#include "loader/loader.h"

static void fmt_value(int64_t v, bool dollars, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "none");
	else if (dollars)
		budget_format_dollars(v, buf, len);
	else
		snprintf(buf, len, "%lld", (long long)v);
}

static json_t *cap_json(const struct budget_cap_state *s, bool dollars)
{
	char t[32];
	json_t *o = json_object();

	budget_format_time(s->frees_ns, t, sizeof(t));
	json_object_set_new(o, "limit", s->cap < 0 ? json_null() : json_integer(s->cap));
	json_object_set_new(o, "used", json_integer(s->used));
	if (dollars)
		json_object_set_new(o, "reserved", json_integer(s->reserved));
	json_object_set_new(o, "left", s->left < 0 ? json_null() : json_integer(s->left));
	json_object_set_new(o, "next_free", s->frees_ns ? json_string(t) : json_null());
	if (dollars)
		json_object_set_new(o, "unit", json_string("micro-dollars"));
	return o;
}

static void cap_line(const struct budget_usage *u, const char *cap, const struct budget_cap_state *s, bool dollars)
{
	char limit[32], used[32], reserved[32], left[32], t[32] = "-";

	fmt_value(s->cap, dollars, limit, sizeof(limit));
	fmt_value(s->used, dollars, used, sizeof(used));
	fmt_value(s->reserved, dollars, reserved, sizeof(reserved));
	fmt_value(s->left, dollars, left, sizeof(left));
	if (s->frees_ns)
		budget_format_time(s->frees_ns, t, sizeof(t));
	printf("%-16s %-10s %-18s %10s %10s %10s %10s  %s\n", *u->sandbox ? u->sandbox : "(host-wide)",
	       budget_provider_name(u->provider), cap, limit, used, dollars ? reserved : "-", s->cap < 0 ? "-" : left,
	       t);
}

static int usage_row(const struct budget_usage *u, void *arg)
{
	json_t *arr = arg;

	if (latch_json) {
		json_array_append_new(arr, json_pack("{s:s, s:o, s:s, s:o, s:o, s:o}", "scope",
						     *u->sandbox ? "sandbox" : "host", "sandbox",
						     *u->sandbox ? json_string(u->sandbox) : json_null(), "provider",
						     budget_provider_name(u->provider), "requests_per_hour",
						     cap_json(&u->requests_hour, false), "requests_per_day",
						     cap_json(&u->requests_day, false), "dollars_per_day",
						     cap_json(&u->dollars_day, true)));
		return 0;
	}
	cap_line(u, "requests_per_hour", &u->requests_hour, false);
	cap_line(u, "requests_per_day", &u->requests_day, false);
	cap_line(u, "dollars_per_day", &u->dollars_day, true);
	return 0;
}

static int price_row(const struct budget_price *p, void *arg)
{
	json_t *arr = arg;
	char model[BUDGET_MODEL_MAX + 16], in[32], out[32], cached[32], write[32];

	snprintf(model, sizeof(model), p->above ? "%s>%lld" : "%s", p->model, (long long)p->above);
	if (latch_json) {
		json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "provider",
						     budget_provider_name(p->provider), "model", p->model, "above",
						     (json_int_t)p->above, "input", (json_int_t)p->input, "output",
						     (json_int_t)p->output, "cached_input", (json_int_t)p->cached_input,
						     "cache_write", (json_int_t)p->cache_write, "max_output",
						     (json_int_t)p->max_output, "context", (json_int_t)p->context,
						     "source", p->builtin ? "built-in" : "file"));
		return 0;
	}
	budget_format_dollars(p->input, in, sizeof(in));
	budget_format_dollars(p->output, out, sizeof(out));
	budget_format_dollars(p->cached_input, cached, sizeof(cached));
	budget_format_dollars(p->cache_write, write, sizeof(write));
	printf("%-10s %-32s %9s %9s %9s %9s %10lld %10lld  %s\n", budget_provider_name(p->provider), model, in, out,
	       cached, write, (long long)p->max_output, (long long)p->context, p->builtin ? "built-in" : "file");
	return 0;
}

static int fee_row(const struct budget_fee *f, void *arg)
{
	json_t *arr = arg;
	char price[32];

	if (latch_json) {
		json_array_append_new(arr,
				      json_pack("{s:s, s:s, s:I, s:s}", "provider", budget_provider_name(f->provider),
						"tool", f->tool, "micros_per_1000", (json_int_t)f->micros_per_1000,
						"source", f->builtin ? "built-in" : "file"));
		return 0;
	}
	budget_format_dollars(f->micros_per_1000, price, sizeof(price));
	printf("fee %-10s %-28s %9s per 1,000 uses  %s\n", budget_provider_name(f->provider), f->tool, price,
	       f->builtin ? "built-in" : "file");
	return 0;
}

/* budget_report()'s callback for known_to_ledger(): stop at NAME's first row. */
static int is_named(const struct budget_usage *u, void *arg)
{
	return !strcmp(u->sandbox, arg);
}

/*
 * Does the ledger hold requests of NAME in the last day?  A sandbox that was
 * destroyed, or a room that has ended, still has usage there until its
 * rows leave the window; a name with neither is no sandbox at all.
 */
static bool known_to_ledger(struct budget *b, const char *name)
{
	return budget_report(b, NULL, is_named, (void *)name) == 1;
}

int cmd_usage(int argc, char **argv)
{
	struct budget_opts bo = { .readonly = true };
	struct latch_conf conf;
	struct budget *b;
	const char *name = NULL;
	char err[LATCH_ERR_MAX];
	bool prices = false;
	json_t *arr, *fees = NULL;
	int c, rc;

	optind = 1;
	while ((c = latch_getopt(argc, argv, "usage")) != -1) {
		if (c != 'p')
			return latch_err(LATCH_EXIT_USAGE, "usage: latch usage [NAME] [--prices]");
		prices = true;
	}
	if (optind < argc)
		name = argv[optind++];
	if (optind < argc || (name && prices))
		return latch_err(LATCH_EXIT_USAGE, "usage: latch usage [NAME] [--prices]");
	if (name && latch_parse_name(name, err, sizeof(err)))
		return latch_err(LATCH_EXIT_USAGE, "%s", err);
	if (latch_conf_load(&conf, err, sizeof(err)))
		return latch_err(LATCH_EXIT_FAILED, "%s", err);
	budget_caps_from_conf(&bo, &conf);
	b = budget_open(&bo, err, sizeof(err));
	if (!b)
		return latch_err(errno == EACCES || errno == EPERM ? LATCH_EXIT_USAGE : LATCH_EXIT_FAILED, "%s%s", err,
				 errno == EACCES ? " (the ledger is root's: run it with sudo)" : "");
	/* like every command: a name that is no sandbox is exit 4, not a table of defaults */
	if (name && !latch_sandbox_exists(name) && !known_to_ledger(b, name)) {
		budget_close(b);
		return latch_err_no_sandbox("sandbox", name);
	}
	arr = json_array();
	if (prices) {
		if (!latch_json)
			printf("%-10s %-32s %9s %9s %9s %9s %10s %10s  %s\n", "PROVIDER", "MODEL", "INPUT", "OUTPUT",
			       "CACHED", "CACHE_WR", "MAX_OUT", "CONTEXT", "SOURCE");
		rc = budget_prices_each(b, price_row, arr);
		if (!latch_json)
			printf("dollars per million tokens; a model missing here is charged at its provider's highest "
			       "prices\n");
		fees = json_array();
		if (!rc)
			rc = budget_fees_each(b, fee_row, fees);
	} else {
		if (!latch_json)
			printf("%-16s %-10s %-18s %10s %10s %10s %10s  %s\n", "SANDBOX", "PROVIDER", "CAP", "LIMIT",
			       "USED", "RESERVED", "LEFT", "NEXT FREE");
		rc = budget_report(b, name, usage_row, arr);
	}
	budget_close(b);
	if (rc) {
		json_decref(arr);
		json_decref(fees);
		return latch_err(LATCH_EXIT_FAILED, "the ledger could not be read: %s", strerror(-rc));
	}
	if (latch_json && prices)
		latch_json_out(json_pack("{s:s, s:o, s:o}", "unit", "micro-dollars per million tokens", "prices", arr,
					 "fees", fees)); /* a fee's unit is in its name: micros_per_1000 */
	else if (latch_json)
		latch_json_out(json_pack("{s:s, s:o}", "windows", "rolling: 3600 s and 86400 s", "caps", arr));
	else {
		json_decref(arr);
		json_decref(fees);
	}
	return LATCH_EXIT_OK;
}
