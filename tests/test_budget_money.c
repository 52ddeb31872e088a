// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_money.c - money is integers: micro-dollars, rounded up once;
 * the price table is one line format with `file:line:` errors; latch.conf's
 * budget_* keys.
 *
 * Invariants: no amount is ever a float (prices and caps are parsed as
 * decimal text straight into integers, and a seventh decimal is refused
 * rather than rounded); a charge is exact in pico-dollars and rounded up to
 * the micro-dollar once, so it is never below the true price; a bad price
 * file changes nothing and names its file, line and field.
 */
#include <sys/stat.h>

#include "budget_test.h"
#include "budget/internal.h"
#include "config/config.h"

TestSuite(budget_money, .init = bt_setup, .fini = bt_teardown);

Test(budget_money, decimal_text_to_micros)
{
	static const struct {
		const char *s;
		int ret;
		int64_t v;
	} cases[] = {
		{ "5", 0, 5000000 },	 { "5.00", 0, 5000000 },
		{ "$5.25", 0, 5250000 }, { "0.075", 0, 75000 },
		{ "0.000001", 0, 1 },	 { "12.345678", 0, 12345678 },
		{ "0", 0, 0 },		 { "1.1234567", -EINVAL, 0 }, /* a 7th decimal is refused, never rounded */
		{ "-1", -EINVAL, 0 },	 { "1e3", -EINVAL, 0 },
		{ "", -EINVAL, 0 },	 { "5.", -EINVAL, 0 },
		{ ".5", -EINVAL, 0 },	 { "1.2.3", -EINVAL, 0 },
		{ " 5", -EINVAL, 0 },	 { "5 ", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 },	 { "99999999999999999999", -ERANGE, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v = -1;
		int ret = latch_parse_micros(cases[i].s, INT64_MAX, &v);

		cr_expect_eq(ret, cases[i].ret, "'%s': %d", cases[i].s, ret);
		if (!ret)
			cr_expect_eq(v, cases[i].v, "'%s': %lld", cases[i].s, (long long)v);
	}
	cr_expect_eq(latch_parse_micros("2", 1000000, &(int64_t){ 0 }), -ERANGE); /* past max */
}

Test(budget_money, a_charge_is_rounded_up_once)
{
	struct budget_price p = { .input = 1, .output = 3000000, .cached_input = 500000, .cache_write = 500000 };
	struct budget_tokens t;

	/* one token at $0.000001 per million: a millionth of a micro-dollar, charged as one */
	t = (struct budget_tokens){ .input = 1 };
	cr_expect_eq(budget_cost(&p, &t), 1);
	t = (struct budget_tokens){ 0 };
	cr_expect_eq(budget_cost(&p, &t), 0);
	/* a million tokens at $3: exactly $3 */
	t = (struct budget_tokens){ .output = 1000000 };
	cr_expect_eq(budget_cost(&p, &t), 3000000);
	/* two halves of a micro-dollar make one, not two: summed exactly, rounded once */
	t = (struct budget_tokens){ .cached = 1, .cache_write = 1 };
	cr_expect_eq(budget_cost(&p, &t), 1);
	/* 1-hour cache writes at twice the input price */
	p.input = 3000000;
	t = (struct budget_tokens){ .cache_write_1h = 1000000 };
	cr_expect_eq(budget_cost(&p, &t), 6000000);
	/* no wrap-around: at most BUDGET_COST_MAX (about $9.2 million), however many tokens */
	t = (struct budget_tokens){ .output = INT64_MAX / 2 };
	cr_expect_eq(budget_cost(&p, &t), BUDGET_COST_MAX);
	t = (struct budget_tokens){ .output = 400000000000LL }; /* 4e11 tokens at $3/M: $1.2M, exact */
	cr_expect_eq(budget_cost(&p, &t), 1200000LL * BUDGET_MICROS);
}

Test(budget_money, dollars_and_times_are_printed_without_rounding_down)
{
	static const struct {
		int64_t micros;
		const char *s;
	} cases[] = { { 5000000, "$5.00" }, { 4930000, "$4.93" },	{ 3100, "$0.0031" }, { 1, "$0.000001" },
		      { 0, "$0.00" },	    { 12345678, "$12.345678" }, { 1200, "$0.0012" } };
	char buf[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		budget_format_dollars(cases[i].micros, buf, sizeof(buf));
		cr_expect_str_eq(buf, cases[i].s);
	}
	budget_format_time(T0, buf, sizeof(buf));
	cr_expect_str_eq(buf, "2025-12-01T00:00:00Z");
	budget_format_time(T0 + 1, buf, sizeof(buf)); /* "frees at" is never early */
	cr_expect_str_eq(buf, "2025-12-01T00:00:01Z");
}

Test(budget_money, price_lines)
{
	static const struct {
		const char *line, *err; /* err: a piece of the message, NULL for a good line */
	} cases[] = {
		{ "anthropic claude-x 3.00 15.00 0.30 3.75 64000 200000", NULL },
		{ "gemini gemini-x>200000 2.50 15 0.625 - 65536 1048576  # long prompts", NULL },
		{ "openai gpt-x 1.25 10 - - 128000 400000", NULL },
		{ "openai gpt-x 1.25 10 - - 128000", "7 fields, want 8" },
		{ "openai gpt-x 1.25 10 - - 128000 400000 9", "9 fields, want 8" },
		{ "mistral m 1 1 - - 1 1", "PROVIDER 'mistral'" },
		{ "openai gpt x 1 1 - - 1 1", "9 fields" },
		{ "openai gpt$x 1 1 - - 1 1", "MODEL 'gpt$x'" },
		{ "openai gpt-x 1.1234567 1 - - 1 1", "INPUT '1.1234567'" },
		{ "openai gpt-x 1 -2 - - 1 1", "OUTPUT '-2'" },
		{ "openai gpt-x 1 2 x - 1 1", "CACHED_INPUT 'x'" },
		{ "openai gpt-x 1 2 - 1e3 1 1", "CACHE_WRITE '1e3'" },
		{ "openai gpt-x 1 2 - - lots 1", "MAX_OUTPUT 'lots'" },
		{ "openai gpt-x 1 2 - - 1 0", "CONTEXT '0'" },
		{ "openai gpt-x>0 1 2 - - 1 1", "long-context row" },
		{ "openai gpt-x 1\x01 2 - - 1 1", "control character" },
	};
	struct budget_price row;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;

		err[0] = '\0';
		rc = budget_price_parse_line(cases[i].line, &row, err, sizeof(err));
		if (!cases[i].err) {
			cr_expect_eq(rc, 0, "'%s': %s", cases[i].line, err);
		} else {
			cr_expect_eq(rc, -EINVAL, "'%s' was accepted", cases[i].line);
			cr_expect(strstr(err, cases[i].err), "'%s': '%s' lacks '%s'", cases[i].line, err, cases[i].err);
		}
	}
	cr_expect_eq(budget_price_parse_line("   # a comment", &row, err, sizeof(err)), 1);
	cr_expect_eq(budget_price_parse_line("", &row, err, sizeof(err)), 1);
	cr_assert_eq(budget_price_parse_line("gemini gemini-x>200000 2.50 15 0.625 - 65536 1048576", &row, err,
					     sizeof(err)),
		     0);
	cr_expect_str_eq(row.model, "gemini-x");
	cr_expect_eq(row.above, 200000);
	cr_expect_eq(row.input, 2500000);
	cr_expect_eq(row.cached_input, 625000);
	cr_expect_eq(row.cache_write, 2500000, "'-' is the input price");
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(path, mode), 0);
}

static int load(const char *text, mode_t mode, struct price_table *t, char *err, size_t len)
{
	write_file(bt_prices, text, mode);
	memset(t, 0, sizeof(*t));
	return budget_prices_load(t, bt_prices, err, len);
}

Test(budget_money, the_price_file)
{
	struct price_table t;
	const struct budget_price *r;
	char err[512], want[256];

	/* a file row replaces the built-in one and adds its own; the rest stay */
	cr_assert_eq(load("# mine\nanthropic claude-sonnet-4-5 1 2 - - 1000 1000\nother local-llama 0.01 0.02 - - 4096 "
			  "8192\n",
			  0644, &t, err, sizeof(err)),
		     0, "%s", err);
	r = budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 0);
	cr_assert_not_null(r);
	cr_expect_eq(r->input, 1000000);
	cr_expect(!r->builtin);
	cr_expect_not_null(budget_prices_find(&t, BUDGET_OTHER, "local-llama", 0));
	cr_expect_not_null(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5", 0));
	budget_prices_free(&t);

	/* file:line: field */
	cr_expect_neq(load("anthropic a 1 1 - - 1 1\n\nanthropic b 1 1.0000001 - - 1 1\n", 0644, &t, err, sizeof(err)),
		      0);
	snprintf(want, sizeof(want), "%s:3: OUTPUT '1.0000001'", bt_prices);
	cr_expect(!strncmp(err, want, strlen(want)), "%s", err);
	/* the same model twice in the file */
	cr_expect_neq(load("openai m 1 1 - - 1 1\nopenai m 2 2 - - 1 1\n", 0644, &t, err, sizeof(err)), 0);
	cr_expect(strstr(err, ":2: openai m is already priced on line 1"), "%s", err);
	/* a long-context row needs its model's own row */
	cr_expect_neq(load("openai m>1000 1 1 - - 1 1\n", 0644, &t, err, sizeof(err)), 0);
	cr_expect(strstr(err, "has no row for m itself"), "%s", err);
	/* a file others may write is refused */
	cr_expect_eq(load("openai m 1 1 - - 1 1\n", 0664, &t, err, sizeof(err)), -EPERM);
	cr_expect(strstr(err, "writable by group or others"), "%s", err);
	/* a failed load leaves the table in force as it was */
	cr_assert_eq(load("openai m 7 7 - - 1 1\n", 0644, &t, err, sizeof(err)), 0);
	write_file(bt_prices, "openai m 8 8 - - 1 1\nopenai broken\n", 0644);
	cr_expect_neq(budget_prices_load(&t, bt_prices, err, sizeof(err)), 0);
	cr_expect_eq(budget_prices_find(&t, BUDGET_OPENAI, "m", 0)->input, 7000000);
	budget_prices_free(&t);
}

/*
 * A `fee PROVIDER TOOL PRICE` line prices a per-use charge the meter counts,
 * in dollars per 1,000 uses: Anthropic's web search, built in at $10, and
 * OpenAI's, at $25, set by the file like a row.  Every row of the provider, and its highest-priced
 * row, carry the price of one search; other providers' rows carry none.
 * Lines latch can't count are refused with file:line and the field.
 */
Test(budget_money, fee_lines)
{
	struct price_table t;
	char err[512], want[256];

	cr_assert_eq(load("# none\n", 0644, &t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(t.fees[BUDGET_FEE_ANTHROPIC_WEB_SEARCH].micros_per_1000, 10000000);
	cr_expect(t.fees[BUDGET_FEE_ANTHROPIC_WEB_SEARCH].builtin);
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-haiku-4-5", 0)->per_search, 10000000000LL);
	cr_expect_eq(t.fees[BUDGET_FEE_OPENAI_WEB_SEARCH].micros_per_1000, 25000000);
	cr_expect_eq(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-nano", 0)->per_search, 25000000000LL);
	budget_prices_free(&t);

	cr_assert_eq(load("fee anthropic web_search 25.00  # dearer\n", 0644, &t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(t.fees[BUDGET_FEE_ANTHROPIC_WEB_SEARCH].micros_per_1000, 25000000);
	cr_expect(!t.fees[BUDGET_FEE_ANTHROPIC_WEB_SEARCH].builtin);
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 0)->per_search, 25000000000LL);
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 300000)->per_search, 25000000000LL,
		     "the long-context row too");
	cr_expect_eq(budget_prices_worst(&t, BUDGET_ANTHROPIC)->per_search, 25000000000LL);
	cr_expect_eq(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5", 0)->per_search, 25000000000LL,
		     "openai's own, built in");
	cr_expect_eq(budget_prices_worst(&t, BUDGET_OTHER)->per_search, 0);
	cr_expect_eq(budget_prices_worst(&t, BUDGET_OTHER)->per_grounded, 0);
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 0)->per_grounded, 0);
	/* 3 searches and no tokens at $25 per 1,000 */
	cr_expect_eq(budget_cost(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 0),
				 &(struct budget_tokens){ .web_searches = 3 }),
		     75000);
	budget_prices_free(&t);

	/*
	 * OpenAI's file search ($2.50 per 1,000 calls), image generation ($0.25
	 * an image) and code interpreter ($0.03 a 1 GB container, a GB more at
	 * that price each): built in,
	 * OpenAI's alone, and replaced by a file's line.
	 */
	cr_assert_eq(load("# none\n", 0644, &t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-nano", 0)->per_file_search, 2500000000LL);
	cr_expect_eq(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-nano", 0)->per_container_gb, 30000000000LL);
	cr_expect_eq(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-nano", 0)->per_image, 250000000000LL);
	cr_expect_eq(budget_prices_worst(&t, BUDGET_OPENAI)->per_container_gb, 30000000000LL);
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 0)->per_file_search, 0);
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 0)->per_container_gb, 0);
	cr_expect_eq(budget_prices_find(&t, BUDGET_GEMINI, "gemini-2.5-flash", 0)->per_image, 0);
	cr_expect_eq(budget_cost(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-nano", 0),
				 &(struct budget_tokens){ .images = 2 }),
		     500000);
	/* 3 file searches and a 4 GB container, no tokens: $0.0075 + $0.12 */
	cr_expect_eq(budget_cost(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-nano", 0),
				 &(struct budget_tokens){ .file_searches = 3, .container_gb = 4 }),
		     127500);
	budget_prices_free(&t);
	cr_assert_eq(load("fee openai code_interpreter 0.03\nfee openai file_search 3\n", 0644, &t, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(budget_cost(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-nano", 0),
				 &(struct budget_tokens){ .file_searches = 3, .container_gb = 4 }),
		     9000 + 120);
	budget_prices_free(&t);

	cr_assert_eq(load("fee anthropic web_search 0\n", 0644, &t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(budget_cost(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5", 0),
				 &(struct budget_tokens){ .web_searches = 3 }),
		     0, "a fee of 0 makes searches free");
	budget_prices_free(&t);

	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "fee gemini web_search 10\n", ":1: TOOL 'web_search' of gemini is not a fee latch counts" },
		{ "fee anthropic google_search 10\n",
		  ":1: TOOL 'google_search' of anthropic is not a fee latch counts" },
		{ "fee gemini grounded_prompt 35\nfee gemini grounded_prompt 30\n",
		  ":2: fee gemini grounded_prompt is already priced on line 1" },
		{ "fee openai computer_use_preview 40\n",
		  ":1: TOOL 'computer_use_preview' of openai is not a fee latch counts" },
		{ "fee anthropic file_search 2.50\n", ":1: TOOL 'file_search' of anthropic is not a fee latch counts" },
		{ "\nfee anthropic web_fetch 10\n", ":2: TOOL 'web_fetch' of anthropic is not a fee latch counts" },
		{ "fee anthropic web_search ten\n", ":1: PRICE 'ten' is not a price in dollars per 1,000 uses" },
		{ "fee anthropic web_search 0.0000001\n", ":1: PRICE '0.0000001'" },
		{ "fee anthropic web_search\n", ":1: 3 fields, want 4: fee PROVIDER TOOL PRICE" },
		{ "fee nobody web_search 10\n", ":1: PROVIDER 'nobody'" },
		{ "fee anthropic web_search 10\nfee anthropic web_search 12\n",
		  ":2: fee anthropic web_search is already priced on line 1" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(load(bad[i].text, 0644, &t, err, sizeof(err)), -EINVAL, "%s", bad[i].text);
		snprintf(want, sizeof(want), "%s%s", bt_prices, bad[i].want);
		cr_expect(!strncmp(err, want, strlen(want)), "got '%s', want '%s'", err, want);
	}
}

/*
 * Gemini bills grounding with Google Search per query from Gemini 3 on
 * ($14 per 1,000, `fee gemini google_search`) and per grounded prompt
 * before ($35 per 1,000, `fee gemini grounded_prompt`: once for a request
 * that ran any query, however many).  A model of neither family (an alias,
 * the worst row) is charged the dearer of the two for the queries it ran.
 * Control: no query, no fee.
 */
Test(budget_money, gemini_grounding_fees)
{
	struct price_table t;
	char err[512];
	const struct budget_price *g3, *g25, *g15, *alias, *worst;

	cr_assert_eq(load("# none\n", 0644, &t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(t.fees[BUDGET_FEE_GEMINI_GOOGLE_SEARCH].micros_per_1000, 14000000);
	cr_expect_eq(t.fees[BUDGET_FEE_GEMINI_GROUNDED_PROMPT].micros_per_1000, 35000000);
	g3 = budget_prices_find(&t, BUDGET_GEMINI, "gemini-3-pro-preview", 0);
	g25 = budget_prices_find(&t, BUDGET_GEMINI, "gemini-2.5-flash", 0);
	g15 = budget_prices_find(&t, BUDGET_GEMINI, "gemini-1.5-pro", 200000); /* its long-context row */
	alias = budget_prices_find(&t, BUDGET_GEMINI, "gemini-flash-latest", 0);
	worst = budget_prices_worst(&t, BUDGET_GEMINI);
	cr_assert(g3 && g25 && g15 && alias && worst);
	cr_expect_eq(g3->per_search, 14000000000LL);
	cr_expect_eq(g3->per_grounded, 0);
	cr_expect_eq(g25->per_search, 0);
	cr_expect_eq(g25->per_grounded, 35000000000LL);
	cr_expect_eq(g15->per_grounded, 35000000000LL);
	cr_expect_eq(alias->per_search, 14000000000LL);
	cr_expect_eq(alias->per_grounded, 35000000000LL);
	cr_expect_eq(worst->per_search, 14000000000LL);
	cr_expect_eq(worst->per_grounded, 35000000000LL);

	static const struct {
		int64_t queries, g3, g25, either; /* micro-dollars */
	} cases[] = {
		{ 0, 0, 0, 0 }, /* control: no query ran */
		{ 1, 14000, 35000, 35000 },
		{ 2, 28000, 35000, 35000 },
		{ 3, 42000, 35000, 42000 },
		{ 20, 280000, 35000, 280000 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct budget_tokens tok = { .web_searches = cases[i].queries };

		cr_expect_eq(budget_cost(g3, &tok), cases[i].g3, "%lld queries on gemini 3",
			     (long long)cases[i].queries);
		cr_expect_eq(budget_cost(g25, &tok), cases[i].g25, "%lld queries on gemini 2.5",
			     (long long)cases[i].queries);
		cr_expect_eq(budget_cost(alias, &tok), cases[i].either, "%lld queries on an alias",
			     (long long)cases[i].queries);
		cr_expect_eq(budget_cost(worst, &tok), cases[i].either, "%lld queries at the worst row",
			     (long long)cases[i].queries);
	}
	budget_prices_free(&t);

	/* the file's fees replace the built-in ones; 0 makes grounding free (a free allowance you track yourself) */
	cr_assert_eq(load("fee gemini grounded_prompt 0\nfee gemini google_search 20\n", 0644, &t, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(budget_cost(budget_prices_find(&t, BUDGET_GEMINI, "gemini-2.5-pro", 0),
				 &(struct budget_tokens){ .web_searches = 4 }),
		     0);
	cr_expect_eq(budget_cost(budget_prices_find(&t, BUDGET_GEMINI, "gemini-3-pro-preview", 0),
				 &(struct budget_tokens){ .web_searches = 4 }),
		     80000);
	budget_prices_free(&t);
}

Test(budget_money, model_lookup)
{
	struct price_table t = { 0 };
	char err[256];

	cr_assert_eq(budget_prices_load(&t, bt_prices, err, sizeof(err)), 0, "%s", err); /* built-ins only */
	/* a snapshot the table lists: a copy of its model's row (test_budget_prices.c has the rest) */
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5-20250929", 0)->input, 3000000);
	cr_expect_eq(budget_prices_find(&t, BUDGET_OPENAI, "gpt-4o-mini-2024-07-18", 0)->input, 150000);
	/* never a prefix: a longer name is another model */
	cr_expect_null(budget_prices_find(&t, BUDGET_OPENAI, "gpt-4o-mini-pro", 0));
	cr_expect_null(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-turbo-9000", 0));
	cr_expect_null(budget_prices_find(&t, BUDGET_OPENAI, "GPT-4O", 0));
	cr_expect_null(budget_prices_find(&t, BUDGET_ANTHROPIC, "gpt-4o", 0)); /* another provider's model */
	/* long-context tiers: strictly past the threshold */
	cr_expect_eq(budget_prices_find(&t, BUDGET_GEMINI, "gemini-2.5-pro", 200000)->input, 1250000);
	cr_expect_eq(budget_prices_find(&t, BUDGET_GEMINI, "gemini-2.5-pro", 200001)->input, 2500000);
	/* the worst row: the highest of each price among the provider's rows */
	cr_expect_eq(budget_prices_worst(&t, BUDGET_OPENAI)->output, 600000000);
	cr_expect_eq(budget_prices_worst(&t, BUDGET_ANTHROPIC)->cache_write, 18750000);
	cr_expect_eq(budget_prices_worst(&t, BUDGET_OTHER)->output, 0); /* no rows: only requests are counted */
	budget_prices_free(&t);
}

static int conf_of(const char *text, struct latch_conf *c, char *err, size_t len)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/latch.conf", bt_dir);
	write_file(path, text, 0644);
	return latch_conf_parse_file(path, c, err, len);
}

Test(budget_money, latch_conf_budget_keys)
{
	struct latch_conf c;
	char err[512];

	/* defaults: Kagebox's per sandbox, four sandboxes' worth host-wide, "other" uncapped */
	cr_assert_eq(conf_of("", &c, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.budget_sandbox[BUDGET_ANTHROPIC].requests_per_hour, 240);
	cr_expect_eq(c.budget_sandbox[BUDGET_GEMINI].requests_per_day, 2000);
	cr_expect_eq(c.budget_sandbox[BUDGET_OPENAI].micros_per_day, 5000000);
	cr_expect_eq(c.budget_host[BUDGET_OPENAI].micros_per_day, 20000000);
	cr_expect_eq(c.budget_sandbox[BUDGET_OTHER].micros_per_day, LATCH_CONF_NO_CAP);

	/* a bare value for the three, a provider's own wins wherever it stands; the order is budget/'s */
	cr_assert_eq(conf_of("budget_dollars_per_day = anthropic:10, 2.50\n"
			     "budget_requests_per_hour = openai:1, anthropic:2, gemini:3, other:4\n"
			     "budget_host_requests_per_day = none\n"
			     "budget_host_dollars_per_day = other:1  # a local server's bill\n",
			     &c, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(c.budget_sandbox[BUDGET_ANTHROPIC].micros_per_day, 10000000);
	cr_expect_eq(c.budget_sandbox[BUDGET_OPENAI].micros_per_day, 2500000);
	cr_expect_eq(c.budget_sandbox[BUDGET_OTHER].micros_per_day, LATCH_CONF_NO_CAP);
	for (int p = 0; p < BUDGET_PROVIDERS; p++)
		cr_expect_eq(c.budget_sandbox[p].requests_per_hour, p + 1, "%s", budget_provider_name(p));
	cr_expect_eq(c.budget_host[BUDGET_GEMINI].requests_per_day, LATCH_CONF_NO_CAP);
	cr_expect_eq(c.budget_host[BUDGET_OTHER].micros_per_day, 1000000);
	cr_expect_eq(c.budget_host[BUDGET_OPENAI].micros_per_day, 20000000);

	cr_expect_neq(conf_of("profile = research\nbudget_dollars_per_day = 1.1234567\n", &c, err, sizeof(err)), 0);
	cr_expect(strstr(err, "latch.conf:2: budget_dollars_per_day '1.1234567' must be dollars"), "%s", err);
	cr_expect_neq(conf_of("budget_requests_per_day = mistral:5\n", &c, err, sizeof(err)), 0);
	cr_expect(strstr(err, "unknown provider 'mistral'"), "%s", err);
	cr_expect_neq(conf_of("budget_requests_per_day = openai:5, openai:6\n", &c, err, sizeof(err)), 0);
	cr_expect(strstr(err, "gives openai twice"), "%s", err);
	cr_expect_neq(conf_of("budget_requests_per_day = 5, 6\n", &c, err, sizeof(err)), 0);
	cr_expect_neq(conf_of("budget_requests_per_day = 2.5\n", &c, err, sizeof(err)), 0);
	cr_expect_neq(conf_of("budget_requests_per_day =\n", &c, err, sizeof(err)), 0);
}
