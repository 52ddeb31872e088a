// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_prices.c - the prices a request is charged at: dated model
 * names, image tokens and OpenAI's priority processing.
 *
 * Invariants: a model name is priced by its own row or a snapshot line of
 * the table, never by the name less its date (a dated snapshot may cost more
 * than its alias), so a dated name the table does not list is charged its
 * provider's highest prices; image tokens are charged at the image prices
 * (Gemini's image output at $30 or $120 per million, not its text price);
 * a request or response at OpenAI's priority tier is charged priority's
 * prices (PRICES_PRIORITY_TIMES the standard ones), flex the standard ones.
 * Each exchange below is reserved, answered in a provider's own shape and
 * settled as the broker's meter does it.
 */
#include <sys/stat.h>

#include "budget_test.h"
#include "budget/internal.h"

TestSuite(budget_prices, .init = bt_setup, .fini = bt_teardown);

static int load_text(const char *text, struct price_table *t, char *err, size_t len)
{
	FILE *f = fopen(bt_prices, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(chmod(bt_prices, 0644), 0);
	memset(t, 0, sizeof(*t));
	return budget_prices_load(t, bt_prices, err, len);
}

static void expect_prices(const struct price_table *t, enum budget_provider p, const char *model, int64_t in,
			  int64_t out, int64_t cached)
{
	const struct budget_price *r = budget_prices_find(t, p, model, 0);

	cr_assert_not_null(r, "%s has no row", model);
	cr_expect_str_eq(r->model, model);
	cr_expect_eq(r->input, in, "%s input %lld", model, (long long)r->input);
	cr_expect_eq(r->output, out, "%s output %lld", model, (long long)r->output);
	cr_expect_eq(r->cached_input, cached, "%s cached %lld", model, (long long)r->cached_input);
}

/*
 * A dated name is priced by its own row (gpt-4o-2024-05-13 at $5/$15, not
 * gpt-4o's $2.50/$10) or as a snapshot the table lists; a dated name it
 * does not list is unknown (NULL: the provider's highest prices).
 * Control: the undated alias keeps its row.
 */
Test(budget_prices, a_dated_name_is_priced_by_its_own_row_or_none)
{
	struct price_table t;
	char err[512];

	cr_assert_eq(load_text("# none\n", &t, err, sizeof(err)), 0, "%s", err);
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o", 2500000, 10000000, 1250000); /* control */
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o-2024-05-13", 5000000, 15000000, 5000000);
	expect_prices(&t, BUDGET_OPENAI, "chatgpt-4o-latest", 5000000, 15000000, 5000000);
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o-2024-08-06", 2500000, 10000000, 1250000);
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o-2024-11-20", 2500000, 10000000, 1250000);
	expect_prices(&t, BUDGET_OPENAI, "gpt-4-turbo-2024-04-09", 10000000, 30000000, 10000000);
	expect_prices(&t, BUDGET_OPENAI, "o1-preview-2024-09-12", 15000000, 60000000, 7500000);
	expect_prices(&t, BUDGET_ANTHROPIC, "claude-3-5-sonnet-20240620", 3000000, 15000000, 300000);
	expect_prices(&t, BUDGET_ANTHROPIC, "claude-3-5-sonnet-20241022", 3000000, 15000000, 300000);
	expect_prices(&t, BUDGET_ANTHROPIC, "claude-3-7-sonnet-latest", 3000000, 15000000, 300000);
	expect_prices(&t, BUDGET_GEMINI, "gemini-2.0-flash-001", 100000, 400000, 25000);
	/* a snapshot has its alias's long-context rows too */
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5-20250929", 200000)->input, 3000000);
	cr_expect_eq(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5-20250929", 200001)->input, 6000000);
	/* dated names the table does not list: unknown, whatever they start with */
	cr_expect_null(budget_prices_find(&t, BUDGET_OPENAI, "gpt-4o-2099-01-01", 0));
	cr_expect_null(budget_prices_find(&t, BUDGET_OPENAI, "gpt-4o-mini-2099-01-01", 0));
	cr_expect_null(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-sonnet-4-5-20990101", 0));
	cr_expect_null(budget_prices_find(&t, BUDGET_ANTHROPIC, "claude-opus-4-5-latest", 0));
	cr_expect_null(budget_prices_find(&t, BUDGET_OPENAI, "gpt-5-latest", 0));
	budget_prices_free(&t);
}

/*
 * The file's row for an alias prices its snapshots too; the file's own
 * snapshot line or row for a dated name prices it; a snapshot of a model
 * without a row, a name twice, or a name with a built-in row of its own is
 * refused with the file and line.
 */
Test(budget_prices, snapshot_lines_in_the_price_file)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{ "snapshot openai no-such-model no-such-model-2025-01-01\n",
		  ":1: snapshot no-such-model-2025-01-01 of no-such-model: the table has no row for no-such-model" },
		{ "snapshot openai gpt-4o gpt-4o-2030-01-01\nsnapshot openai gpt-4.1 gpt-4o-2030-01-01\n",
		  ":2: snapshot openai gpt-4o-2030-01-01 is already named on line 1" },
		{ "snapshot openai gpt-4o gpt-4o-2024-05-13\n",
		  ":1: openai gpt-4o-2024-05-13 has a built-in row of its own; write a row for it instead" },
		{ "snapshot openai gpt-4o\n", ":1: 3 fields, want 4 to 39: snapshot PROVIDER MODEL NAME..." },
		{ "snapshot openai gpt-4o gpt-4o\n", ":1: snapshot gpt-4o of itself" },
		{ "snapshot openai gpt-4o bad name!\n", ":1: NAME 'name!' must be" },
		{ "image openai gpt-4o 1\n", ":1: 4 fields, want 5: image PROVIDER MODEL INPUT OUTPUT" },
		{ "image openai nothing-here 1 2\n",
		  ":1: image openai nothing-here: the table has no row for nothing-here" },
		{ "image gemini gemini-2.5-flash 1 2\nimage gemini gemini-2.5-flash 1 3\n",
		  ":2: image gemini gemini-2.5-flash is already priced on line 1" },
	};
	struct price_table t;
	char err[512], want[512];

	cr_assert_eq(load_text("openai gpt-4o 3 12 1.5 - 16384 128000\n"
			       "snapshot openai gpt-4o gpt-4o-2030-01-01\n"
			       "openai gpt-4o-2024-11-20 4 16 - - 16384 128000\n",
			       &t, err, sizeof(err)),
		     0, "%s", err);
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o-2024-08-06", 3000000, 12000000, 1500000); /* follows gpt-4o's row */
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o-2030-01-01", 3000000, 12000000, 1500000); /* the file's snapshot */
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o-2024-11-20", 4000000, 16000000, 4000000); /* the file's own row */
	expect_prices(&t, BUDGET_OPENAI, "gpt-4o-2024-05-13", 5000000, 15000000, 5000000); /* built-in, untouched */
	budget_prices_free(&t);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(load_text(bad[i].text, &t, err, sizeof(err)), -EINVAL, "%s", bad[i].text);
		snprintf(want, sizeof(want), "%s%s", bt_prices, bad[i].want);
		cr_expect(!strncmp(err, want, strlen(want)), "got '%s', want '%s'", err, want);
	}
}

/*
 * One chat completion of model through the meter, answered with usage
 * (prompt, completion); its charge.  tier_asked: the body's service_tier as
 * JSON text (NULL: none), tier_said the response's.
 */
static struct bt_result chat(struct budget *b, const char *model, const char *tier_asked, const char *tier_said,
			     int64_t prompt, int64_t completion)
{
	char body[512], resp[1024];

	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",%s%s%s\"max_completion_tokens\":1000,\"messages\":[{\"role\":\"user\","
		 "\"content\":\"Say hello.\"}]}",
		 model, tier_asked ? "\"service_tier\":" : "", tier_asked ? tier_asked : "", tier_asked ? "," : "");
	snprintf(
		resp, sizeof(resp),
		"{\"id\":\"chatcmpl-C1\",\"object\":\"chat.completion\",\"created\":1764547200,\"model\":\"%s\","
		"\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello!\",\"refusal\":null,"
		"\"annotations\":[]},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":%lld,"
		"\"completion_tokens\":%lld,\"total_tokens\":%lld,\"prompt_tokens_details\":{\"cached_tokens\":0,"
		"\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,"
		"\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}},\"service_tier\":\"%s\","
		"\"system_fingerprint\":\"fp_1\"}",
		model, (long long)prompt, (long long)completion, (long long)(prompt + completion),
		tier_said ? tier_said : "default");
	return bt_exchange(b, "s1", BUDGET_OPENAI, "POST", "/v1/chat/completions", body, 200, resp, strlen(resp), 7, 0,
			   BUDGET_END_COMPLETE);
}

/*
 * Charged end to end: gpt-4o-2024-05-13 at its own $5/$15, an unknown dated
 * name at OpenAI's highest ($150/$600, o1-pro's) with a warning that names
 * it.  Control: gpt-4o at $2.50/$10, and its listed snapshot the same.
 */
Test(budget_prices, a_dated_name_is_charged_its_own_price)
{
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;

	bt_opts(&o);
	b = bt_open(&o);
	r = chat(b, "gpt-4o", NULL, NULL, 1000, 500); /* 1000 x 2.50 + 500 x 10 */
	cr_expect_eq(r.charged, 7500, "gpt-4o: %lld", (long long)r.charged);
	r = chat(b, "gpt-4o-2024-08-06", NULL, NULL, 1000, 500);
	cr_expect_eq(r.charged, 7500, "gpt-4o-2024-08-06: %lld", (long long)r.charged);
	r = chat(b, "gpt-4o-2024-05-13", NULL, NULL, 1000, 500); /* 1000 x 5 + 500 x 15 */
	cr_expect_eq(r.charged, 12500, "gpt-4o-2024-05-13: %lld", (long long)r.charged);
	r = chat(b, "gpt-4o-2099-01-01", NULL, NULL, 1000, 500); /* 1000 x 150 + 500 x 600 */
	cr_expect_eq(r.charged, 450000, "gpt-4o-2099-01-01: %lld", (long long)r.charged);
	cr_expect(strstr(r.reserve_note.warning, "model 'gpt-4o-2099-01-01' of openai is not in the price table"), "%s",
		  r.reserve_note.warning);
	budget_close(b);
}

/*
 * OpenAI's priority processing: asked by the request or said by the
 * response (a project's default tier may be priority), charged and
 * reserved at PRICES_PRIORITY_TIMES the standard prices; flex at the
 * standard ones (it costs half: latch errs high).  Control: the default
 * tier at the row's prices.
 */
Test(budget_prices, priority_processing_costs_more)
{
	struct budget_opts o;
	struct budget *b;
	struct bt_result std, r;

	bt_opts(&o);
	b = bt_open(&o);
	/* the values padded to one length: the same body size, the same reservation but for the tier's prices */
	r = chat(b, "gpt-5", NULL, NULL, 1000, 500); /* 1000 x 1.25 + 500 x 10 */
	cr_expect_eq(r.charged, 6250, "no tier: %lld", (long long)r.charged);
	std = chat(b, "gpt-5", "\"default\" ", "default", 1000, 500);
	cr_expect_eq(std.charged, 6250, "default asked: %lld", (long long)std.charged);
	r = chat(b, "gpt-5", "\"priority\"", "priority", 1000, 500);
	cr_expect_eq(r.charged, 12500, "priority: %lld", (long long)r.charged);
	/* twice the exact sum, rounded up once: twice the standard's rounded sum, or one micro-dollar less */
	cr_expect(r.reserved == 2 * std.reserved || r.reserved == 2 * std.reserved - 1, "reserved %lld, standard %lld",
		  (long long)r.reserved, (long long)std.reserved);
	r = chat(b, "gpt-5", "\"priority\"", "default", 1000, 500); /* asked: charged so, whatever the answer says */
	cr_expect_eq(r.charged, 12500, "priority asked: %lld", (long long)r.charged);
	r = chat(b, "gpt-5", NULL, "priority", 1000, 500); /* the project's default tier */
	cr_expect_eq(r.charged, 12500, "priority said: %lld", (long long)r.charged);
	r = chat(b, "gpt-5", "\"auto\"", "priority", 1000, 500);
	cr_expect_eq(r.charged, 12500, "auto, priority said: %lld", (long long)r.charged);
	r = chat(b, "gpt-5", "\"flex\"    ", "flex", 1000, 500);
	cr_expect_eq(r.charged, 6250, "flex: %lld", (long long)r.charged);
	cr_expect_eq(r.reserved, std.reserved);
	r = chat(b, "gpt-5", "\"pr\\u0069ority\"", "default", 1000, 500); /* an escape reads the same */
	cr_expect_eq(r.charged, 12500, "priority escaped: %lld", (long long)r.charged);
	r = chat(b, "gpt-5", "\"scale\"", "scale", 1000, 500); /* a tier latch does not price: the dearer */
	cr_expect_eq(r.charged, 12500, "scale: %lld", (long long)r.charged);
	/* a Responses stream says its tier in each response object: response.completed's is priority */
	for (int dear = 0; dear < 2; dear++) {
		char resp[1024];

		snprintf(
			resp, sizeof(resp),
			"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":"
			"{\"id\":\"resp_1\",\"status\":\"in_progress\",\"service_tier\":\"auto\",\"usage\":null}}\n\n"
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,"
			"\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"service_tier\":\"%s\",\"output\":[],"
			"\"usage\":{\"input_tokens\":1000,\"input_tokens_details\":{\"cached_tokens\":0},"
			"\"output_tokens\":500,\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":1500}}}\n\n",
			dear ? "priority" : "default");
		r = bt_exchange(b, "s1", BUDGET_OPENAI, "POST", "/v1/responses",
				"{\"model\":\"gpt-5\",\"stream\":true,\"input\":\"hi\",\"max_output_tokens\":1000}",
				200, resp, strlen(resp), 5, 0, BUDGET_END_COMPLETE);
		cr_expect_eq(r.charged, dear ? 12500 : 6250, "responses stream, %s: %lld (%s)",
			     dear ? "priority" : "default (control)", (long long)r.charged, r.how);
	}
	budget_close(b);
}

/* A Gemini answer with an image part, in generateContent's shape: usage with its modalities. */
static struct bt_result gemini_image(struct budget *b, const char *model, int64_t prompt, int64_t text_out,
				     int64_t image_out)
{
	char path[256], resp[2048];

	snprintf(path, sizeof(path), "/v1beta/models/%s:generateContent", model);
	snprintf(
		resp, sizeof(resp),
		"{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Here is your cat.\"},{\"inlineData\":"
		"{\"mimeType\":\"image/png\",\"data\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk\"}}],"
		"\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":%lld,"
		"\"candidatesTokenCount\":%lld,\"totalTokenCount\":%lld,\"promptTokensDetails\":[{\"modality\":\"TEXT\","
		"\"tokenCount\":%lld}],\"candidatesTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":%lld},"
		"{\"modality\":\"IMAGE\",\"tokenCount\":%lld}]},\"modelVersion\":\"%s\",\"responseId\":\"r1\"}",
		(long long)prompt, (long long)(text_out + image_out), (long long)(prompt + text_out + image_out),
		(long long)prompt, (long long)text_out, (long long)image_out, model);
	return bt_exchange(b, "s1", BUDGET_GEMINI, "POST", path,
			   "{\"contents\":[{\"parts\":[{\"text\":\"Draw a cat.\"}]}],\"generationConfig\":"
			   "{\"responseModalities\":[\"TEXT\",\"IMAGE\"]}}",
			   200, resp, strlen(resp), 11, 0, BUDGET_END_COMPLETE);
}

/*
 * Image output at the image price: gemini-2.5-flash-image's 1,290-token
 * image at $30 per million ($0.0387), Gemini 3 Pro Image's at $120, gpt-image-1's
 * rows ($5 text in, $10 image in, $40 out).  Control: the same model's text
 * tokens at its text prices, and a text model's answer as before.
 */
Test(budget_prices, image_tokens_at_the_image_price)
{
	struct price_table t;
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;
	const struct budget_price *row;
	char err[512];

	cr_assert_eq(load_text("# none\n", &t, err, sizeof(err)), 0, "%s", err);
	row = budget_prices_find(&t, BUDGET_OPENAI, "gpt-image-1", 0);
	cr_assert_not_null(row);
	cr_expect_eq(row->input, 5000000);
	cr_expect_eq(row->image_input, 10000000);
	cr_expect_eq(row->image_output, 40000000);
	cr_expect_eq(budget_cost(row,
				 &(struct budget_tokens){ .input = 100, .image_input = 1000, .image_output = 4160 }),
		     100 * 5 + 1000 * 10 + 4160 * 40);
	row = budget_prices_find(&t, BUDGET_GEMINI, "gemini-2.5-flash",
				 0); /* control: a text model's images are text */
	cr_expect_eq(row->image_output, row->output);
	cr_expect_eq(budget_prices_worst(&t, BUDGET_GEMINI)->image_output,
		     120000000); /* an unknown model may draw too */
	budget_prices_free(&t);

	bt_opts(&o);
	b = bt_open(&o);
	r = gemini_image(b, "gemini-2.5-flash-image", 10, 0, 1290); /* 10 x 0.30 + 1290 x 30 = 3 + 38700 */
	cr_expect_eq(r.charged, 38703, "one image: %lld (%s)", (long long)r.charged, r.how);
	r = gemini_image(b, "gemini-2.5-flash-image", 10, 20, 1290); /* and 20 x 2.50 of text */
	cr_expect_eq(r.charged, 38753, "text and image: %lld", (long long)r.charged);
	r = gemini_image(b, "gemini-2.5-flash-image-preview", 10, 0, 1290);
	cr_expect_eq(r.charged, 38703, "the preview's name: %lld", (long long)r.charged);
	r = gemini_image(b, "gemini-3-pro-image-preview", 10, 100, 1120); /* 10 x 2 + 100 x 12 + 1120 x 120 */
	cr_expect_eq(r.charged, 20 + 1200 + 134400, "gemini 3 pro image: %lld", (long long)r.charged);
	r = gemini_image(b, "gemini-2.5-flash", 10, 20, 0); /* control: 10 x 0.30 + 20 x 2.50 */
	cr_expect_eq(r.charged, 53, "text only: %lld", (long long)r.charged);
	budget_close(b);
}
