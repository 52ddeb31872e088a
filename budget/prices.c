// SPDX-License-Identifier: GPL-2.0-only
/*
 * prices.c - the price table and the arithmetic of a charge.
 *
 * One line format, one reader: the built-in rows below are text in the same
 * format as /etc/latch/prices and go through the same parser, and the file's
 * rows replace built-in rows of the same provider and model.  Prices are
 * dollars per million tokens with at most 6 decimals, held as integer
 * micro-dollars per million tokens, which is exactly pico-dollars per token:
 * a charge is an integer sum in pico-dollars, rounded up to the micro-dollar
 * once.  No float ever holds money.
 *
 * The built-in rows (prices_builtin.c) are text in this format.  The columns:
 *   provider model[>TOKENS] input output cached_input cache_write max_output context
 * ('-' for cached_input or cache_write: the input price).  A `fee` line is
 * a per-use charge the meter counts, in dollars per 1,000 uses:
 *   fee provider tool price
 * An `image` line prices a model's image tokens (else they are text):
 *   image provider model input output
 * A `snapshot` line names the dated snapshots (and aliases) of a model that
 * are billed at its prices, each priced as a copy of its rows:
 *   snapshot provider model name...
 * A name is priced only by its own row or a snapshot line: never by
 * stripping a date, since a dated snapshot can cost more than its alias
 * (gpt-4o-2024-05-13 is twice gpt-4o), so a dated name the table does not
 * list is an unknown model, charged at its provider's highest prices.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "budget/internal.h"

/* The fees latch counts, by enum budget_fee_kind: a usage field reports each one's uses. */
static const struct {
	enum budget_provider provider;
	const char *tool;
} fee_kinds[BUDGET_FEES] = {
	[BUDGET_FEE_ANTHROPIC_WEB_SEARCH] = { BUDGET_ANTHROPIC, "web_search" },
	[BUDGET_FEE_OPENAI_WEB_SEARCH] = { BUDGET_OPENAI, "web_search" },
	[BUDGET_FEE_GEMINI_GOOGLE_SEARCH] = { BUDGET_GEMINI, "google_search" },
	[BUDGET_FEE_GEMINI_GROUNDED_PROMPT] = { BUDGET_GEMINI, "grounded_prompt" },
	[BUDGET_FEE_OPENAI_FILE_SEARCH] = { BUDGET_OPENAI, "file_search" },
	[BUDGET_FEE_OPENAI_IMAGE_GENERATION] = { BUDGET_OPENAI, "image_generation" },
	[BUDGET_FEE_OPENAI_CODE_INTERPRETER] = { BUDGET_OPENAI, "code_interpreter" },
};

#define FEE_MAX (100000LL * BUDGET_MICROS) /* $100,000 per 1,000 uses: a typo, not a price */

#define PRICE_MAX (100000LL * BUDGET_MICROS) /* $100,000 per million tokens: a typo, not a price */
#define TOKENS_LIMIT 1000000000u

static const char *const columns[] = { "PROVIDER",     "MODEL",	      "INPUT",	    "OUTPUT",
				       "CACHED_INPUT", "CACHE_WRITE", "MAX_OUTPUT", "CONTEXT" };

static int price_field(const char *v, int col, bool dash_ok, int64_t *out, char *err, size_t errlen)
{
	if (dash_ok && !strcmp(v, "-")) {
		*out = -1;
		return 0;
	}
	if (latch_parse_micros(v, PRICE_MAX, out))
		return latch_errf(err, errlen, -EINVAL,
				  "%s '%s' is not a price in dollars per million tokens (at most 6 decimals%s); "
				  "write e.g. 3.00",
				  columns[col], v, dash_ok ? ", or '-' for the input price" : "");
	return 0;
}

static int token_field(const char *v, int col, uint32_t min, int64_t *out, char *err, size_t errlen)
{
	uint32_t n;

	if (latch_parse_uint(v, min, TOKENS_LIMIT, &n))
		return latch_errf(err, errlen, -EINVAL, "%s '%s' must be a number of tokens, %u..%u", columns[col], v,
				  min, TOKENS_LIMIT);
	*out = n;
	return 0;
}

/* BUF's fields, blank-separated, up to a '#': at most max into f; their count. */
static int split_fields(char *buf, char **f, int max)
{
	char *save = NULL;
	int n = 0;

	buf[strcspn(buf, "#")] = '\0';
	for (char *t = strtok_r(buf, " \t\r\n", &save); t && n < max; t = strtok_r(NULL, " \t\r\n", &save))
		f[n++] = t;
	return n;
}

int budget_price_parse_line(const char *line, struct budget_price *row, char *err, size_t errlen)
{
	char buf[512], *f[9], *gt;
	int n;

	for (const char *c = line; *c && *c != '\n'; c++)
		if ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\r')
			return latch_errf(err, errlen, -EINVAL, "a control character (0x%02x); remove it",
					  (unsigned char)*c);
	if (strlen(line) >= sizeof(buf))
		return latch_errf(err, errlen, -EINVAL, "line longer than %zu characters", sizeof(buf) - 1);
	strcpy(buf, line);
	n = split_fields(buf, f, 9);
	if (!n)
		return 1;
	if (n != 8)
		return latch_errf(err, errlen, -EINVAL,
				  "%d fields, want 8: PROVIDER MODEL INPUT OUTPUT CACHED_INPUT CACHE_WRITE MAX_OUTPUT "
				  "CONTEXT",
				  n);
	memset(row, 0, sizeof(*row));
	if (budget_provider_parse(f[0], &row->provider))
		return latch_errf(err, errlen, -EINVAL, "PROVIDER '%s' must be openai, anthropic, gemini or other",
				  f[0]);
	gt = strchr(f[1], '>');
	if (gt) {
		*gt = '\0';
		if (token_field(gt + 1, 1, 1, &row->above, err, errlen))
			return latch_errf(err, errlen, -EINVAL,
					  "MODEL '%s>%s': a long-context row is MODEL>TOKENS, TOKENS 1..%u", f[1],
					  gt + 1, TOKENS_LIMIT);
	}
	if (!budget_request_model_ok(f[1], strlen(f[1])))
		return latch_errf(err, errlen, -EINVAL,
				  "MODEL '%s' must be 1-%d of A-Z a-z 0-9 . _ : / @ + -, as the provider spells it",
				  f[1], BUDGET_MODEL_MAX);
	strcpy(row->model, f[1]);
	if (price_field(f[2], 2, false, &row->input, err, errlen) ||
	    price_field(f[3], 3, false, &row->output, err, errlen) ||
	    price_field(f[4], 4, true, &row->cached_input, err, errlen) ||
	    price_field(f[5], 5, true, &row->cache_write, err, errlen) ||
	    token_field(f[6], 6, 0, &row->max_output, err, errlen) ||
	    token_field(f[7], 7, 1, &row->context, err, errlen))
		return -EINVAL;
	if (row->cached_input < 0)
		row->cached_input = row->input;
	if (row->cache_write < 0)
		row->cache_write = row->input;
	row->image_input = row->input; /* image tokens are text tokens unless an `image` line says otherwise */
	row->image_output = row->output;
	return 0;
}

/* An `image` or `snapshot` line, kept until every row is in. */
struct price_line {
	bool snapshot; /* else image */
	enum budget_provider provider;
	char model[BUDGET_MODEL_MAX + 1]; /* the model whose rows it prices or copies */
	char name[BUDGET_MODEL_MAX + 1]; /* snapshot: the name priced as model */
	int64_t image_input, image_output;
	bool builtin;
	const char *file;
	int lineno;
};

static int keep_line(struct price_table *t, const struct price_line *l)
{
	struct price_line *lines = realloc(t->lines, (size_t)(t->n_lines + 1) * sizeof(*lines));

	if (!lines)
		return -ENOMEM;
	t->lines = lines;
	t->lines[t->n_lines++] = *l;
	return 0;
}

static int model_field(const char *v, const char *what, char *out, char *err, size_t errlen)
{
	if (!budget_request_model_ok(v, strlen(v)))
		return latch_errf(err, errlen, -EINVAL,
				  "%s '%s' must be 1-%d of A-Z a-z 0-9 . _ : / @ + -, as the provider spells it", what,
				  v, BUDGET_MODEL_MAX);
	strcpy(out, v);
	return 0;
}

/*
 * LINE as an `image PROVIDER MODEL INPUT OUTPUT` or `snapshot PROVIDER MODEL
 * NAME...` line: 1 when it is neither, 0 when kept in t, or -errno with one
 * line in msg.  A name twice in one text (or a model's images twice) is
 * refused, as a row twice is; the file's line replaces the built-in one.
 */
static int extra_line(struct price_table *t, const char *line, const char *file, int lineno, bool builtin, char *msg,
		      size_t msglen)
{
	char buf[512], *f[40];
	struct price_line l = { .builtin = builtin, .file = file, .lineno = lineno };
	int n;

	if (strlen(line) >= sizeof(buf))
		return 1; /* budget_price_parse_line says why */
	strcpy(buf, line);
	n = split_fields(buf, f, 40);
	if (!n || (strcmp(f[0], "image") && strcmp(f[0], "snapshot")))
		return 1;
	l.snapshot = !strcmp(f[0], "snapshot");
	if (l.snapshot ? n < 4 || n > 39 : n != 5)
		return latch_errf(msg, msglen, -EINVAL, "%d fields, want %s", n,
				  l.snapshot ? "4 to 39: snapshot PROVIDER MODEL NAME..." :
					       "5: image PROVIDER MODEL INPUT OUTPUT");
	if (budget_provider_parse(f[1], &l.provider))
		return latch_errf(msg, msglen, -EINVAL, "PROVIDER '%s' must be openai, anthropic, gemini or other",
				  f[1]);
	if (model_field(f[2], "MODEL", l.model, msg, msglen))
		return -EINVAL;
	if (!l.snapshot) {
		if (price_field(f[3], 2, false, &l.image_input, msg, msglen) ||
		    price_field(f[4], 3, false, &l.image_output, msg, msglen))
			return -EINVAL;
		for (int k = 0; k < t->n_lines; k++)
			if (!t->lines[k].snapshot && t->lines[k].builtin == builtin &&
			    t->lines[k].provider == l.provider && !strcmp(t->lines[k].model, l.model))
				return latch_errf(msg, msglen, -EINVAL,
						  "image %s %s is already priced on line %d; keep one of them", f[1],
						  l.model, t->lines[k].lineno);
		return keep_line(t, &l);
	}
	for (int i = 3; i < n; i++) {
		if (model_field(f[i], "NAME", l.name, msg, msglen))
			return -EINVAL;
		if (!strcmp(l.name, l.model))
			return latch_errf(msg, msglen, -EINVAL, "snapshot %s of itself; remove the name", l.name);
		for (int k = 0; k < t->n_lines; k++)
			if (t->lines[k].snapshot && t->lines[k].builtin == builtin &&
			    t->lines[k].provider == l.provider && !strcmp(t->lines[k].name, l.name))
				return latch_errf(msg, msglen, -EINVAL,
						  "snapshot %s %s is already named on line %d; keep one of them", f[1],
						  l.name, t->lines[k].lineno);
		if (keep_line(t, &l))
			return -ENOMEM;
	}
	return 0;
}

/*
 * A `fee PROVIDER TOOL PRICE` line (its first field already read as "fee"):
 * the fee's kind, or -EINVAL with one line in err that names the field.
 */
static int fee_parse_line(char **f, int n, int64_t *micros_per_1000, char *err, size_t errlen)
{
	enum budget_provider p;

	if (n != 4)
		return latch_errf(err, errlen, -EINVAL, "%d fields, want 4: fee PROVIDER TOOL PRICE", n);
	if (budget_provider_parse(f[1], &p))
		return latch_errf(err, errlen, -EINVAL, "PROVIDER '%s' must be openai, anthropic, gemini or other",
				  f[1]);
	for (int k = 0; k < BUDGET_FEES; k++) {
		if (fee_kinds[k].provider != p || strcmp(fee_kinds[k].tool, f[2]))
			continue;
		if (latch_parse_micros(f[3], FEE_MAX, micros_per_1000))
			return latch_errf(err, errlen, -EINVAL,
					  "PRICE '%s' is not a price in dollars per 1,000 uses (at most 6 decimals); "
					  "write e.g. 10.00",
					  f[3]);
		return k;
	}
	return latch_errf(
		err, errlen, -EINVAL,
		"TOOL '%s' of %s is not a fee latch counts (it counts web_search of anthropic and openai, "
		"file_search, image_generation and code_interpreter of openai, google_search and grounded_prompt of gemini); "
		"remove the line",
		f[2], budget_provider_name(p));
}

/*
 * LINE as a fee line: 1 when it is not one ("fee" is no provider), 0 when
 * it was taken into t (a file's fee replaces the built-in one), or -EINVAL
 * with one line in msg.  seen: the line of each kind already in this text.
 */
static int fee_line(struct price_table *t, const char *line, int lineno, bool builtin, int seen[BUDGET_FEES], char *msg,
		    size_t msglen)
{
	char buf[512], *f[5];
	int64_t micros;
	int n, k;

	if (strlen(line) >= sizeof(buf))
		return 1; /* budget_price_parse_line says why */
	strcpy(buf, line);
	n = split_fields(buf, f, 5);
	if (!n || strcmp(f[0], "fee"))
		return 1;
	k = fee_parse_line(f, n, &micros, msg, msglen);
	if (k < 0)
		return k;
	if (seen[k])
		return latch_errf(msg, msglen, -EINVAL, "fee %s %s is already priced on line %d; keep one of them",
				  f[1], f[2], seen[k]);
	seen[k] = lineno;
	t->fees[k] = (struct budget_fee){ .provider = fee_kinds[k].provider,
					  .tool = fee_kinds[k].tool,
					  .micros_per_1000 = micros,
					  .builtin = builtin };
	return 0;
}

static bool same_row(const struct budget_price *a, const struct budget_price *b)
{
	return a->provider == b->provider && a->above == b->above && !strcmp(a->model, b->model);
}

static int add_row(struct price_table *t, const struct budget_price *r)
{
	struct budget_price *rows;

	for (int i = 0; i < t->n; i++)
		if (same_row(&t->rows[i], r)) { /* the file's row replaces the built-in one */
			t->rows[i] = *r;
			return 0;
		}
	rows = realloc(t->rows, (size_t)(t->n + 1) * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	t->rows = rows;
	t->rows[t->n++] = *r;
	return 0;
}

/* The text of a table: built-in (file NULL) or the file's; file:line errors. */
static int load_text(struct price_table *t, FILE *f, const char *text, const char *file, char *err, size_t errlen)
{
	struct budget_price *mine = NULL; /* this file's rows, for duplicates */
	int *mine_line = NULL, n_mine = 0, lineno = 0, ret = 0, fee_line_no[BUDGET_FEES] = { 0 };
	char line[600], msg[LATCH_ERR_MAX];
	const char *p = text;

	for (;;) {
		struct budget_price row;
		int rc;

		if (f) {
			if (!fgets(line, sizeof(line), f))
				break;
			if (!strchr(line, '\n') && !feof(f)) {
				ret = latch_errf_at(err, errlen, -EINVAL, file, lineno + 1,
						    "line longer than %zu characters", sizeof(line) - 2);
				break;
			}
		} else {
			size_t len = strcspn(p, "\n");

			if (!*p)
				break;
			snprintf(line, sizeof(line), "%.*s", (int)len, p);
			p += len + (p[len] == '\n');
		}
		lineno++;
		rc = fee_line(t, line, lineno, !f, fee_line_no, msg, sizeof(msg));
		if (rc == 1)
			rc = extra_line(t, line, file, lineno, !f, msg, sizeof(msg));
		if (rc == 0)
			continue;
		if (rc < 0) {
			ret = latch_errf_at(err, errlen, rc, file, lineno, "%s", msg);
			break;
		}
		rc = budget_price_parse_line(line, &row, msg, sizeof(msg));
		if (rc == 1)
			continue;
		if (rc) {
			ret = latch_errf_at(err, errlen, rc, file, lineno, "%s", msg);
			break;
		}
		row.builtin = !f;
		for (int i = 0; i < n_mine; i++)
			if (same_row(&mine[i], &row)) {
				ret = latch_errf_at(err, errlen, -EINVAL, file, lineno,
						    "%s %s%s is already priced on line %d; keep one of them",
						    budget_provider_name(row.provider), row.model,
						    row.above ? " (tier)" : "", mine_line[i]);
				goto out;
			}
		mine = realloc(mine, (size_t)(n_mine + 1) * sizeof(*mine));
		mine_line = realloc(mine_line, (size_t)(n_mine + 1) * sizeof(*mine_line));
		if (!mine || !mine_line || add_row(t, &row)) {
			ret = latch_errf_at(err, errlen, -ENOMEM, file, lineno, "out of memory");
			break;
		}
		mine[n_mine] = row;
		mine_line[n_mine++] = lineno;
	}
out:
	free(mine);
	free(mine_line);
	return ret;
}

static void find_worst(struct price_table *t)
{
	memset(t->worst, 0, sizeof(t->worst));
	memset(t->has_rows, 0, sizeof(t->has_rows));
	for (int p = 0; p < BUDGET_PROVIDERS; p++) {
		struct budget_price *w = &t->worst[p];

		w->provider = p;
		snprintf(w->model, sizeof(w->model), "(%s's highest prices)", budget_provider_name(p));
	}
	for (int i = 0; i < t->n; i++) {
		const struct budget_price *r = &t->rows[i];
		struct budget_price *w = &t->worst[r->provider];

		t->has_rows[r->provider] = true;
#define UP(field) w->field = r->field > w->field ? r->field : w->field
		UP(input);
		UP(output);
		UP(cached_input);
		UP(cache_write);
		UP(image_input);
		UP(image_output);
		UP(max_output);
		UP(context);
#undef UP
	}
}

/* A fee in force in pico-dollars a use (micros per 1,000 x 1,000; FEE_MAX x 1,000 fits an int64_t), or 0. */
static int64_t fee_pico(const struct price_table *t, enum budget_fee_kind k)
{
	return t->fees[k].tool ? t->fees[k].micros_per_1000 * 1000 : 0;
}

/*
 * How a Gemini model's grounding is billed, by its name: per search query
 * from Gemini 3 on, per grounded prompt for 1.x and 2.x.  Any other name (an
 * alias such as gemini-flash-latest, a later family, the provider's worst
 * row) may be either: it is charged the dearer (budget_cost()).
 */
static void gemini_grounding_fees(const struct price_table *t, struct budget_price *r)
{
	bool per_prompt = !strncmp(r->model, "gemini-1.", 9) || !strncmp(r->model, "gemini-2.", 9);
	bool per_query = !strncmp(r->model, "gemini-3.", 9) || !strncmp(r->model, "gemini-3-", 9);

	r->per_search = per_prompt ? 0 : fee_pico(t, BUDGET_FEE_GEMINI_GOOGLE_SEARCH);
	r->per_grounded = per_query ? 0 : fee_pico(t, BUDGET_FEE_GEMINI_GROUNDED_PROMPT);
}

/* A row's (or a provider's worst row's) search fees, from the fees in force. */
static void row_fees(const struct price_table *t, struct budget_price *r)
{
	r->per_search = 0;
	r->per_grounded = 0;
	r->per_file_search = 0;
	r->per_image = 0;
	r->per_container_gb = 0;
	switch (r->provider) {
	case BUDGET_ANTHROPIC:
		r->per_search = fee_pico(t, BUDGET_FEE_ANTHROPIC_WEB_SEARCH);
		break;
	case BUDGET_OPENAI:
		r->per_search = fee_pico(t, BUDGET_FEE_OPENAI_WEB_SEARCH);
		r->per_file_search = fee_pico(t, BUDGET_FEE_OPENAI_FILE_SEARCH);
		r->per_image = fee_pico(t, BUDGET_FEE_OPENAI_IMAGE_GENERATION);
		r->per_container_gb = fee_pico(t, BUDGET_FEE_OPENAI_CODE_INTERPRETER);
		break;
	case BUDGET_GEMINI:
		gemini_grounding_fees(t, r);
		break;
	default:
		break;
	}
}

static void apply_fees(struct price_table *t)
{
	for (int i = 0; i < t->n; i++)
		row_fees(t, &t->rows[i]);
	for (int p = 0; p < BUDGET_PROVIDERS; p++)
		row_fees(t, &t->worst[p]);
}

static uint32_t row_hash(enum budget_provider p, const char *model, size_t len)
{
	return latch_fnv1a(LATCH_FNV1A_INIT ^ (uint32_t)p, model, len);
}

/*
 * The lookup a request makes (three a request: reserve, its tier, settle):
 * a hash of the base rows, each with its long-context rows chained from it.
 * The rows are unique per (provider, model, tier), as load_text refuses a
 * second one, so the row found is the one a scan of the table would find.
 */
static int index_rows(struct price_table *t)
{
	uint32_t size = 16;

	while (size < 2 * (uint32_t)t->n)
		size *= 2;
	t->mask = size - 1;
	t->slot = calloc(size, sizeof(*t->slot));
	t->next_tier = malloc((size_t)(t->n ? t->n : 1) * sizeof(*t->next_tier));
	if (!t->slot || !t->next_tier)
		return -ENOMEM;
	for (int i = 0; i < t->n; i++) {
		const struct budget_price *r = &t->rows[i];
		uint32_t h = row_hash(r->provider, r->model, strlen(r->model)) & t->mask;

		t->next_tier[i] = -1;
		if (r->above)
			continue;
		while (t->slot[h])
			h = (h + 1) & t->mask;
		t->slot[h] = i + 1;
	}
	for (int i = 0; i < t->n; i++) { /* each tier after its base row (which budget_prices_load made sure of) */
		const struct budget_price *base;

		if (!t->rows[i].above)
			continue;
		base = budget_prices_find(t, t->rows[i].provider, t->rows[i].model, 0);
		if (base) {
			t->next_tier[i] = t->next_tier[base - t->rows];
			t->next_tier[base - t->rows] = i;
		}
	}
	return 0;
}

/*
 * The `image` lines in order (the file's after the built-in ones: the file's
 * wins), then each snapshot name gets copies of its model's rows, the
 * long-context ones too; the file's snapshot line of a name replaces the
 * built-in one.  A name with a row of its own in the file is priced by that
 * row; one with a built-in row can't be made a snapshot (write a row).
 */
static int resolve_lines(struct price_table *t, char *err, size_t errlen)
{
	int n_rows = t->n;

	for (int k = 0; k < t->n_lines; k++) {
		const struct price_line *l = &t->lines[k];
		bool found = false;

		if (l->snapshot)
			continue;
		for (int i = 0; i < n_rows; i++)
			if (t->rows[i].provider == l->provider && !strcmp(t->rows[i].model, l->model)) {
				t->rows[i].image_input = l->image_input;
				t->rows[i].image_output = l->image_output;
				found = true;
			}
		if (!found)
			return latch_errf_at(err, errlen, -EINVAL, l->file, l->lineno,
					     "image %s %s: the table has no row for %s; add one",
					     budget_provider_name(l->provider), l->model, l->model);
	}
	for (int k = 0; k < t->n_lines; k++) {
		const struct price_line *l = &t->lines[k];
		bool found = false, replaced = false;

		if (!l->snapshot)
			continue;
		for (int o = k + 1; o < t->n_lines; o++)
			replaced |= t->lines[o].snapshot && t->lines[o].provider == l->provider &&
				    !strcmp(t->lines[o].name, l->name);
		if (replaced)
			continue; /* the file's line for the name */
		for (int i = 0; i < n_rows; i++) {
			const struct budget_price *r = &t->rows[i];

			if (r->provider != l->provider || strcmp(r->model, l->name))
				continue;
			if (r->builtin && !l->builtin)
				return latch_errf_at(err, errlen, -EINVAL, l->file, l->lineno,
						     "%s %s has a built-in row of its own; write a row for it instead",
						     budget_provider_name(l->provider), l->name);
			found = true; /* its own row wins */
		}
		if (found)
			continue;
		for (int i = 0; i < n_rows; i++) {
			struct budget_price copy = t->rows[i];

			if (copy.provider != l->provider || strcmp(copy.model, l->model))
				continue;
			found = true;
			strcpy(copy.model, l->name);
			copy.builtin = l->builtin && copy.builtin; /* a copy of the file's row is the file's */
			if (add_row(t, &copy))
				return latch_errf_at(err, errlen, -ENOMEM, l->file, l->lineno, "out of memory");
		}
		if (!found)
			return latch_errf_at(err, errlen, -EINVAL, l->file, l->lineno,
					     "snapshot %s of %s: the table has no row for %s; add one", l->name,
					     l->model, l->model);
	}
	return 0;
}

int budget_prices_load(struct price_table *t, const char *path, char *err, size_t errlen)
{
	struct price_table nt = { 0 };
	int fd, ret;
	FILE *f;

	ret = load_text(&nt, NULL, budget_builtin_prices, "built-in prices", err, errlen);
	fd = ret ? -1 : latch_open_trusted(path, LATCH_FILE_CONFIG, NULL, NULL, err, errlen);
	if (!ret && fd < 0 && fd != -ENOENT)
		ret = fd;
	if (!ret && fd >= 0) {
		f = fdopen(fd, "r");
		if (f) {
			ret = load_text(&nt, f, NULL, path, err, errlen);
			fclose(f);
		} else {
			ret = latch_errf_at(err, errlen, -ENOMEM, path, 0, "out of memory");
			close(fd);
		}
	}
	/* a long-context row prices a model the table has */
	for (int i = 0; !ret && i < nt.n; i++) {
		struct budget_price base = nt.rows[i];

		base.above = 0;
		if (!nt.rows[i].above)
			continue;
		ret = -EINVAL;
		for (int k = 0; k < nt.n; k++)
			if (same_row(&nt.rows[k], &base))
				ret = 0;
		if (ret)
			latch_errf_at(err, errlen, -EINVAL, path, 0, "%s %s>%lld has no row for %s itself; add one",
				      budget_provider_name(base.provider), base.model, (long long)nt.rows[i].above,
				      base.model);
	}
	if (!ret)
		ret = resolve_lines(&nt, err, errlen);
	if (ret) {
		free(nt.rows);
		free(nt.lines);
		return ret;
	}
	find_worst(&nt);
	apply_fees(&nt);
	if (index_rows(&nt)) {
		latch_errf_at(err, errlen, -ENOMEM, path, 0, "out of memory");
		budget_prices_free(&nt);
		return -ENOMEM;
	}
	budget_prices_free(t);
	*t = nt;
	return 0;
}

void budget_prices_free(struct price_table *t)
{
	free(t->rows);
	free(t->slot);
	free(t->next_tier);
	free(t->lines);
	memset(t, 0, sizeof(*t));
}

static const struct budget_price *find_exact(const struct price_table *t, enum budget_provider p, const char *model,
					     size_t len)
{
	uint32_t h;

	if (len > BUDGET_MODEL_MAX || !t->slot) /* no row's name is as long */
		return NULL;
	for (h = row_hash(p, model, len) & t->mask; t->slot[h]; h = (h + 1) & t->mask) {
		const struct budget_price *r = &t->rows[t->slot[h] - 1];

		if (r->provider == p && !r->model[len] && !strncmp(r->model, model, len))
			return r;
	}
	return NULL;
}

bool budget_prices_search_model(enum budget_provider p, const char *model)
{
	return p == BUDGET_OPENAI && model && strstr(model, "-search") != NULL;
}

const struct budget_price *budget_prices_find(const struct price_table *t, enum budget_provider p, const char *model,
					      int64_t input_tokens)
{
	const struct budget_price *base;

	if (!model || !*model)
		return NULL;
	base = find_exact(t, p, model, strlen(model)); /* never a name less its date: see the top of this file */
	return base ? budget_prices_tier(t, base, input_tokens) : NULL;
}

const struct budget_price *budget_prices_tier(const struct price_table *t, const struct budget_price *base,
					      int64_t input_tokens)
{
	const struct budget_price *tier = NULL;

	for (int i = t->next_tier[base - t->rows]; i >= 0; i = t->next_tier[i]) {
		const struct budget_price *r = &t->rows[i];

		if (r->above < input_tokens && (!tier || r->above > tier->above))
			tier = r;
	}
	return tier ? tier : base;
}

const struct budget_price *budget_prices_worst(const struct price_table *t, enum budget_provider p)
{
	return &t->worst[p];
}

void budget_prices_priority(struct budget_price *row)
{
	int64_t *const price[] = { &row->input,	      &row->output,	 &row->cached_input,
				   &row->cache_write, &row->image_input, &row->image_output };

	for (size_t i = 0; i < sizeof(price) / sizeof(price[0]); i++)
		*price[i] = budget_mul_add(0, *price[i], PRICES_PRIORITY_TIMES);
}

int64_t budget_cost(const struct budget_price *row, const struct budget_tokens *t)
{
	int64_t pico = 0, fee; /* micro-dollars per million tokens = pico-dollars per token */

	pico = budget_mul_add(pico, t->input, row->input);
	pico = budget_mul_add(pico, t->cached, row->cached_input);
	pico = budget_mul_add(pico, t->cache_write, row->cache_write);
	pico = budget_mul_add(pico, t->cache_write_1h, budget_mul_add(0, 2, row->input));
	pico = budget_mul_add(pico, t->output, row->output);
	pico = budget_mul_add(pico, t->image_input, row->image_input);
	pico = budget_mul_add(pico, t->image_output, row->image_output);
	/* the searches at their fee, or (Gemini 2.x) the grounded prompt's once: the dearer */
	fee = budget_mul_add(0, t->web_searches, row->per_search);
	if (t->web_searches > 0 && fee < row->per_grounded)
		fee = row->per_grounded;
	pico = budget_mul_add(pico, 1, fee);
	pico = budget_mul_add(pico, t->file_searches, row->per_file_search);
	pico = budget_mul_add(pico, t->images, row->per_image);
	pico = budget_mul_add(pico, t->container_gb, row->per_container_gb);
	if (pico == INT64_MAX)
		return BUDGET_COST_MAX;
	return pico / BUDGET_MICROS + (pico % BUDGET_MICROS != 0); /* rounded up, once */
}

void budget_format_dollars(int64_t micros, char *buf, size_t len)
{
	int64_t whole = micros / BUDGET_MICROS, frac = micros % BUDGET_MICROS;
	int digits = 6;

	if (micros < 0) {
		snprintf(buf, len, "-");
		return;
	}
	if (frac % 10000 == 0) {
		snprintf(buf, len, "$%lld.%02lld", (long long)whole, (long long)(frac / 10000));
		return;
	}
	while (frac % 10 == 0) {
		frac /= 10;
		digits--;
	}
	snprintf(buf, len, "$%lld.%0*lld", (long long)whole, digits, (long long)frac);
}

void budget_format_time(uint64_t ns, char *buf, size_t len)
{
	time_t s = (time_t)(ns / 1000000000ULL + (ns % 1000000000ULL != 0));
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
