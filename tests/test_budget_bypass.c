// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_bypass.c - no way around the meter.
 *
 * Invariant: whatever the guest (or the model it steers) does, a request is
 * charged no less than its usage, and the full reservation whenever the
 * usage can't be known: a stream cut by either side, an upstream error after
 * bytes were sent, a response without usage, a usage budget/ can't read, an
 * endpoint it doesn't know, a spelling of the path or method it doesn't
 * recognise.  A model missing from the table is priced at its provider's
 * highest prices and named in a warning once.  Each attack has its control
 * beside it: the same exchange done honestly settles from its usage.
 */
#include "budget_test.h"
#include "budget/internal.h"

TestSuite(budget_bypass, .init = bt_setup, .fini = bt_teardown);

static const char anthropic_body[] =
	"{\"model\":\"claude-opus-4-1-20250805\",\"max_tokens\":32000,\"stream\":true,\"messages\":[{\"role\":\"user\","
	"\"content\":\"Hello\"}]}";

static struct budget *open_default(void)
{
	struct budget_opts o;

	bt_opts(&o);
	return bt_open(&o);
}

/* Cut mid-stream by the guest, by the upstream, or by an error after bytes: the full reservation. */
Test(budget_bypass, a_cut_stream_is_charged_the_reservation)
{
	static const struct {
		enum budget_end end;
		const char *how;
	} cuts[] = {
		{ BUDGET_END_GUEST_CUT, "cut_guest" },
		{ BUDGET_END_UPSTREAM_CUT, "cut_upstream" },
		{ BUDGET_END_ERROR, "error" },
	};
	struct budget *b = open_default();
	size_t len;
	char *sse = bt_fixture("anthropic.sse", &len);
	struct bt_result r;

	/* control: the whole stream settles from its usage (132357 micro-dollars, below the reservation) */
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, sse, len, 64, 0,
			BUDGET_END_COMPLETE);
	cr_assert_str_eq(r.how, "usage");
	cr_assert_eq(r.charged, 132357);
	cr_assert_gt(r.reserved, r.charged);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		/* the cut comes after message_start and some deltas: usage was on the wire, but not the final one */
		r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, sse, len, 64,
				len / 2, cuts[i].end);
		cr_expect_str_eq(r.how, cuts[i].how);
		cr_expect_eq(r.charged, r.reserved, "%s: charged %lld of %lld", cuts[i].how, (long long)r.charged,
			     (long long)r.reserved);
		cr_expect_str_eq(r.settle_note.decision, "", "charged as reserved: nothing differs, nothing to log");
		/*
		 * the whole stream, but the upstream's ending other than complete: still the reservation
		 * (the guest's cut after the last event is charged its usage: the test below)
		 */
		if (cuts[i].end == BUDGET_END_GUEST_CUT)
			continue;
		r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, sse, len, 64, 0,
				cuts[i].end);
		cr_expect_eq(r.charged, r.reserved, "%s after the last byte", cuts[i].how);
	}
	free(sse);
	budget_close(b);
}

/* A stream without its usage chunk (no stream_options.include_usage), or whose only "usage" is model text. */
Test(budget_bypass, a_response_without_usage_is_charged_the_reservation)
{
	static const char body[] = "{\"model\":\"gpt-4o-mini\",\"stream\":true,\"messages\":[{\"role\":\"user\","
				   "\"content\":\"Hello\"}],\"max_tokens\":2048}";
	static const char no_usage[] =
		"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\""
		":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
		"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\""
		":0,\"delta\":{\"content\":\"{\\\"usage\\\":{\\\"prompt_tokens\\\":1,\\\"completion_tokens\\\":1}}\\n\\n"
		"data: {\\\"choices\\\":[],\\\"usage\\\":{\\\"prompt_tokens\\\":1,\\\"completion_tokens\\\":1}}\"},"
		"\"finish_reason\":null}]}\n\n"
		"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\""
		":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
		"data: [DONE]\n\n";
	struct budget *b = open_default();
	size_t len;
	char *ctl = bt_fixture("openai_chat.sse", &len);
	struct bt_result r;

	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions", body, 200, no_usage, strlen(no_usage),
			7, 0, BUDGET_END_COMPLETE);
	cr_expect_str_eq(r.how, "no_usage");
	cr_expect_eq(r.charged, r.reserved);
	/* control: the same request with the usage chunk settles from it */
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions", body, 200, ctl, len, 7, 0,
			BUDGET_END_COMPLETE);
	cr_expect_str_eq(r.how, "usage");
	cr_expect_eq(r.charged, 4679);
	/* an empty 200 and an HTML page are no usage either */
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions", body, 200, "", 0, 0, 0,
			BUDGET_END_COMPLETE);
	cr_expect_eq(r.charged, r.reserved);
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions", body, 200, "<html>ok</html>", 15, 0, 0,
			BUDGET_END_COMPLETE);
	cr_expect_eq(r.charged, r.reserved);
	free(ctl);
	budget_close(b);
}

/* Usage that is there but can't be read as usage: the reservation, never a guess. */
Test(budget_bypass, malformed_usage_is_charged_the_reservation)
{
	static const char *const bad[] = {
		"\"usage\":{\"input_tokens\":\"2095\",\"output_tokens\":503}", /* a string */
		"\"usage\":{\"input_tokens\":-5,\"output_tokens\":503}", /* negative */
		"\"usage\":{\"input_tokens\":2095.0,\"output_tokens\":503}", /* a float */
		"\"usage\":{\"output_tokens\":503}", /* input missing */
		"\"usage\":{\"input_tokens\":2095,\"input_tokens\":1,\"output_tokens\":503}", /* a key twice */
		"\"usage\":{\"input_tokens\":2095,\"output_tokens\":503},\"usage\":{\"input_tokens\":1,"
		"\"output_tokens\":1}", /* usage twice */
		"\"usage\":{\"input_tokens\":99999999999,\"output_tokens\":503}", /* beyond any request */
		"\"usage\":{\"input_tokens\":2095,\"output_tokens\":503,\"cache_creation_input_tokens\":1,"
		"\"cache_creation\":{\"ephemeral_1h_input_tokens\":5}}", /* more 1h writes than writes */
		"\"usage\":[2095,503]",
		"\"usage\":{\"input_tokens\":2095,\"output_tokens\":503", /* the body is cut */
	};
	struct budget *b = open_default();
	char resp[512];
	struct bt_result r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(resp, sizeof(resp),
			 "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":"
			 "[{\"type\":\"text\",\"text\":\"hi\"}],%s}",
			 bad[i]);
		r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, resp,
				strlen(resp), 5, 0, BUDGET_END_COMPLETE);
		cr_expect_str_eq(r.how, "unreadable", "%s: %s", bad[i], r.how);
		cr_expect_eq(r.charged, r.reserved, "%s", bad[i]);
	}
	/* control: the same body with its usage well formed */
	snprintf(resp, sizeof(resp),
		 "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\""
		 ":\"text\",\"text\":\"hi\"}],\"usage\":{\"input_tokens\":2095,\"output_tokens\":503}}");
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, resp, strlen(resp), 5,
			0, BUDGET_END_COMPLETE);
	cr_expect_str_eq(r.how, "usage");
	cr_expect_eq(r.charged, 2095 * 15 + 503 * 75); /* claude-opus-4-1, whole dollars per M: exact */
	budget_close(b);
}

/* The provider says "error" in a 200 stream, or answers 5xx: the reservation; a 4xx is billed nothing. */
Test(budget_bypass, upstream_errors)
{
	static const char err_stream[] =
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\","
		"\"role\":\"assistant\",\"content\":[],\"model\":\"claude-opus-4-1\",\"usage\":{\"input_tokens\":10,"
		"\"output_tokens\":1}}}\n\n"
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
		"\"Overloaded\"}}\n\n";
	static const char err_json[] =
		"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}";
	struct budget *b = open_default();
	struct bt_result r;

	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, err_stream,
			strlen(err_stream), 0, 0, BUDGET_END_COMPLETE);
	cr_expect_str_eq(r.how, "stream_error");
	cr_expect_eq(r.charged, r.reserved);
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 529, err_json,
			strlen(err_json), 0, 0, BUDGET_END_COMPLETE);
	cr_expect_str_eq(r.how, "upstream_status");
	cr_expect_eq(r.charged, r.reserved);
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 500, "", 0, 0, 0,
			BUDGET_END_COMPLETE);
	cr_expect_eq(r.charged, r.reserved);
	/* a 4xx: the provider refused it and bills nothing (and a 4xx body can't claim otherwise) */
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 429, err_json,
			strlen(err_json), 0, 0, BUDGET_END_COMPLETE);
	cr_expect_str_eq(r.how, "upstream_refused");
	cr_expect_eq(r.charged, 0);
	/* but a 4xx cut short is still a cut */
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 400, err_json, 10, 0, 0,
			BUDGET_END_UPSTREAM_CUT);
	cr_expect_eq(r.charged, r.reserved);
	budget_close(b);
}

/* A model the table lacks: the provider's highest prices, and one warning naming it, once. */
Test(budget_bypass, a_model_missing_from_the_table_is_charged_the_top_row)
{
	static const char body[] =
		"{\"model\":\"claude-mystery-9\",\"max_tokens\":8192,\"messages\":[{\"role\":\"user\","
		"\"content\":\"Hi\"}]}";
	struct budget *b = open_default();
	size_t len;
	char *resp = bt_fixture("anthropic.json", &len);
	struct bt_result r;

	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", body, 200, resp, len, 0, 0,
			BUDGET_END_COMPLETE);
	cr_assert_eq(r.rc, 0, "%s", r.line);
	cr_expect(strstr(r.reserve_note.warning, "'claude-mystery-9' of anthropic is not in the price table"), "%s",
		  r.reserve_note.warning);
	/* at the highest of each price: 2095 x 15 + 14336 x 1.50 + 2051 x 18.75 + 503 x 75 = 129110.25 -> 129111 */
	cr_expect_eq(r.charged, 129111, "charged %lld", (long long)r.charged);
	/* control: the same usage on a model the table has (claude-sonnet-4-5) costs 25823 */
	cr_expect_gt(r.charged, 25823);
	/* named once */
	r = bt_exchange(b, "a2", BUDGET_ANTHROPIC, "POST", "/v1/messages", body, 200, resp, len, 0, 0,
			BUDGET_END_COMPLETE);
	cr_expect_str_empty(r.reserve_note.warning);
	cr_expect_eq(r.charged, 129111);
	/* a dated snapshot of a known model is that model, not a stranger */
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages",
			"{\"model\":\"claude-sonnet-4-5-20250929\",\"max_tokens\":8192,\"messages\":[]}", 200, resp,
			len, 0, 0, BUDGET_END_COMPLETE);
	cr_expect_str_empty(r.reserve_note.warning);
	cr_expect_eq(r.charged, 25823);
	free(resp);
	budget_close(b);
}

struct trick {
	enum budget_provider p;
	const char *method, *path;
	enum budget_format want;
	const char *model; /* Gemini: from the path */
};

/* The query and spelling of a path never move the attribution; anything not exact is UNKNOWN. */
static const struct trick tricks[] = {
	{ BUDGET_OPENAI, "POST", "/v1/chat/completions", BUDGET_FORMAT_OPENAI_CHAT, "" },
	{ BUDGET_OPENAI, "POST", "/v1/chat/completions?model=gpt-4o-mini", BUDGET_FORMAT_OPENAI_CHAT, "" },
	{ BUDGET_OPENAI, "POST", "/v1/chat/completions#x", BUDGET_FORMAT_OPENAI_CHAT, "" },
	{ BUDGET_OPENAI, "post", "/v1/chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/V1/chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/Chat/Completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "//v1/chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/chat/completions/", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/chat/completions;v=1", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/chat/%63ompletions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/./chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/x/../chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1\\chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "v1/chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/responses", BUDGET_FORMAT_OPENAI_RESPONSES, "" },
	{ BUDGET_OPENAI, "POST", "/v1/embeddings", BUDGET_FORMAT_OPENAI_EMBEDDINGS, "" },
	{ BUDGET_OPENAI, "GET", "/v1/models", BUDGET_FORMAT_FREE, "" },
	{ BUDGET_OPENAI, "GET", "/v1/models/gpt-5?x=1", BUDGET_FORMAT_FREE, "" },
	{ BUDGET_OPENAI, "get", "/v1/models", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/models", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "GET", "/v1/models/a/b", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "GET", "/v1/modelsx", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OPENAI, "POST", "/v1/messages", BUDGET_FORMAT_UNKNOWN, "" }, /* another provider's path */
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages", BUDGET_FORMAT_ANTHROPIC, "" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages?beta=true", BUDGET_FORMAT_ANTHROPIC, "" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages?x=/count_tokens", BUDGET_FORMAT_ANTHROPIC, "" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages/count_tokens", BUDGET_FORMAT_FREE, "" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages/count_tokens/", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages/Count_Tokens", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages/batches", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", BUDGET_FORMAT_GEMINI,
	  "gemini-2.5-flash" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&model=gemini-2.0-flash",
	  BUDGET_FORMAT_GEMINI, "gemini-2.5-flash" },
	{ BUDGET_GEMINI, "POST", "/v1/models/gemini-2.5-pro:generateContent", BUDGET_FORMAT_GEMINI, "gemini-2.5-pro" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/GEMINI-2.5-FLASH-LITE:generateContent", BUDGET_FORMAT_GEMINI,
	  "GEMINI-2.5-FLASH-LITE" }, /* a spelling the table lacks: priced as the worst */
	{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:countTokens", BUDGET_FORMAT_FREE, "" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:generatecontent", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash%3AgenerateContent", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/a/../gemini-2.5-flash:generateContent", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:generateContent:x", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_GEMINI, "GET", "/v1beta/models/gemini-2.5-flash:generateContent", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_GEMINI, "GET", "/v1beta/models", BUDGET_FORMAT_FREE, "" },
	{ BUDGET_GEMINI, "POST", "/v1beta/openai/chat/completions", BUDGET_FORMAT_OPENAI_CHAT, "" },
	{ BUDGET_GEMINI, "POST", "/v1beta/openai//chat/completions", BUDGET_FORMAT_UNKNOWN, "" },
	{ BUDGET_OTHER, "POST", "/v1/chat/completions", BUDGET_FORMAT_OPENAI_CHAT, "" },
};

Test(budget_bypass, classify_refuses_every_spelling_trick)
{
	for (size_t i = 0; i < sizeof(tricks) / sizeof(tricks[0]); i++) {
		struct budget_class c;

		budget_classify(tricks[i].p, tricks[i].method, tricks[i].path, &c);
		cr_expect_eq(c.format, tricks[i].want, "%s %s %s: %s, want %s", budget_provider_name(tricks[i].p),
			     tricks[i].method, tricks[i].path, budget_format_name(c.format),
			     budget_format_name(tricks[i].want));
		cr_expect_str_eq(c.model, tricks[i].model, "%s: model %s", tricks[i].path, c.model);
	}
}

/*
 * End to end: a trick spelling is an endpoint the meter can't price, and a
 * metered route does not forward it (it was charged the worst case before,
 * and a batch behind such a path billed far more).  Control: the honest
 * path, a query after it, is settled from its usage.
 */
Test(budget_bypass, a_trick_path_is_refused_never_forwarded)
{
	static const char body[] = "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1024,\"messages\":[]}";
	static const char resp[] = "{\"type\":\"message\",\"usage\":{\"input_tokens\":100,\"output_tokens\":100}}";
	static const char *const paths[] = { "/V1/messages", "/v1//messages", "/v1/messages/", "/v1/messages;x" };
	struct budget *b = open_default();
	struct bt_result ctl, r;
	int64_t rows;

	ctl = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages?x=1", body, 200, resp, strlen(resp), 0, 0,
			  BUDGET_END_COMPLETE);
	cr_assert_str_eq(ctl.how, "usage");
	cr_assert_eq(ctl.charged, 100 * 1 + 100 * 5); /* claude-haiku-4-5: $1 / $5 per M */
	rows = bt_sql("SELECT count(*) FROM ledger");
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", paths[i], body, 200, resp, strlen(resp), 0, 0,
				BUDGET_END_COMPLETE);
		cr_expect_eq(r.rc, -EPERM, "%s: rc %d", paths[i], r.rc);
		cr_expect_str_eq(r.reserve_note.reason, "budget.refused.endpoint", "%s", paths[i]);
	}
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "post", "/v1/messages", body, 200, resp, strlen(resp), 0, 0,
			BUDGET_END_COMPLETE);
	cr_expect_eq(r.rc, -EPERM);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), rows, "a refused request wrote no row");
	budget_close(b);
}

static int64_t reserve_of(struct budget *b, enum budget_provider p, const char *path, const char *body)
{
	struct bt_result r = bt_exchange(b, "a1", p, "POST", path, body, 200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);

	cr_assert_eq(r.rc, 0, "%s", r.line);
	return r.reserved;
}

/* Two readings of a body are priced as the dearest; the largest max-tokens field is the one reserved. */
Test(budget_bypass, request_body_tricks_reserve_the_worst)
{
	struct budget *b = open_default();
	int64_t honest, worst;

	honest = reserve_of(b, BUDGET_OPENAI, "/v1/chat/completions",
			    "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"messages\":[]}");
	worst = reserve_of(b, BUDGET_OPENAI, "/v1/chat/completions",
			   "{\"model\":\"no-such-model\",\"max_tokens\":100,\"messages\":[]}");
	cr_assert_gt(worst, honest);
	/* max_tokens small, max_completion_tokens large: the large one is reserved */
	cr_expect_gt(reserve_of(b, BUDGET_OPENAI, "/v1/chat/completions",
				"{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"max_completion_tokens\":16000,"
				"\"messages\":[]}"),
		     honest);
	/* n choices are n outputs */
	cr_expect_gt(reserve_of(b, BUDGET_OPENAI, "/v1/chat/completions",
				"{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":8,\"messages\":[]}"),
		     honest);
	/* a max_tokens that is not a positive integer is no limit: the model's maximum */
	cr_expect_gt(reserve_of(b, BUDGET_OPENAI, "/v1/chat/completions",
				"{\"model\":\"gpt-4o-mini\",\"max_tokens\":\"100\",\"messages\":[]}"),
		     honest);
	/* Gemini: both spellings of maxOutputTokens, the larger counts */
	cr_expect_gt(reserve_of(b, BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
				"{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":10,"
				"\"max_output_tokens\":60000}}"),
		     reserve_of(b, BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
				"{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":10}}"));
	budget_close(b);
}

/*
 * The upstream spends all a request allows: n (or best_of) completions of
 * each prompt, candidateCount candidates, each up to its max tokens.  The
 * invariant: whatever spelling the guest gives those counts, either the
 * reservation covers that charge or the request is refused before it
 * leaves (-EPROTO, one `latch:` line, an audit note), never reserved as one
 * output.  Control: the plain spelling is reserved and settled in full.
 */
struct spend_case {
	enum budget_provider p;
	const char *path, *body;
	int outputs; /* what the upstream would make, each of max_tokens 100 */
	bool refused;
};

static const struct spend_case spend_cases[] = {
	/* control: plain integers */
	{ BUDGET_OPENAI, "/v1/chat/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":8}", 8, false },
	{ BUDGET_OPENAI, "/v1/chat/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":500}", 500,
	  false }, /* past 128, where the count was cut before: an OpenAI-compatible server takes it */
	/* a key with an escape, read decoded */
	{ BUDGET_OPENAI, "/v1/chat/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"\\u006e\":8}", 8,
	  false },
	{ BUDGET_OPENAI, "/v1/chat/completions",
	  "{\"model\":\"gpt-4o-mini\",\"max_tokens\":1,\"max_t\\u006fkens\":100,\"n\":8}", 8, true },
	{ BUDGET_OPENAI, "/v1/chat/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":1,\"\\u006e\":8}",
	  8, true },
	/* a number that is not an integer, a string, a count twice, a body that isn't JSON */
	{ BUDGET_OPENAI, "/v1/chat/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":8.0}", 8, false },
	{ BUDGET_OPENAI, "/v1/chat/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":\"8\"}", 8,
	  true },
	{ BUDGET_OPENAI, "/v1/chat/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":1,\"n\":8}", 8,
	  true },
	{ BUDGET_OPENAI, "/v1/chat/completions", "\x1f\x8b\x08\x00gzip", 8, true },
	{ BUDGET_OPENAI, "/v1/chat/completions", "\xef\xbb\xbf{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":8}",
	  8, true },
	/* legacy completions: best_of are all billed; a list of prompts is one completion each */
	{ BUDGET_OPENAI, "/v1/completions", "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"best_of\":8}", 8, false },
	{ BUDGET_OPENAI, "/v1/completions",
	  "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":2,\"prompt\":[[1],[2],[3],[4]]}", 8, false },
	/* Gemini's candidates, in every spelling */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"generationConfig\":{\"maxOutputTokens\":100,\"candidateCount\":8}}", 8, false },
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"generationConfig\":{\"maxOutputTokens\":100,\"candidate\\u0043ount\":8}}", 8, false },
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"generationConfig\":{\"maxOutputTokens\":100,\"candidate_count\":\"8\"}}", 8, true },
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"generationConfig\":{\"maxOutputTokens\":100,\"candidateCount\":1,\"candidateCount\":8}}", 8, true },
};

Test(budget_bypass, every_output_a_request_asks_for_is_reserved_or_refused)
{
	struct budget *b = open_default();
	char resp[256];

	for (size_t i = 0; i < sizeof(spend_cases) / sizeof(spend_cases[0]); i++) {
		const struct spend_case *c = &spend_cases[i];
		struct bt_result r;

		if (c->p == BUDGET_GEMINI)
			snprintf(resp, sizeof(resp),
				 "{\"usageMetadata\":{\"promptTokenCount\":20,\"candidatesTokenCount\":%d}}",
				 c->outputs * 100);
		else
			snprintf(resp, sizeof(resp), "{\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":%d}}",
				 c->outputs * 100);
		r = bt_exchange(b, "a1", c->p, "POST", c->path, c->body, 200, resp, strlen(resp), 0, 0,
				BUDGET_END_COMPLETE);
		if (c->refused) {
			cr_expect_eq(r.rc, -EPROTO, "case %zu %s: rc %d, reserved %lld", i, c->body, r.rc,
				     (long long)r.reserved);
			cr_expect(!strncmp(r.line, "latch: the spend meter can't bound this ", 40), "%s", r.line);
			cr_expect_str_eq(r.reserve_note.reason, "budget.refused.body");
			continue;
		}
		cr_assert_eq(r.rc, 0, "case %zu %s: %s", i, c->body, r.line);
		cr_expect_str_eq(r.how, "usage", "case %zu", i);
		cr_expect_leq(r.charged, r.reserved, "case %zu %s: charged %lld, reserved %lld", i, c->body,
			      (long long)r.charged, (long long)r.reserved);
		/* and the reservation is that charge's size, not the model's maximum: an honest n is still usable */
		cr_expect_lt(r.reserved, 2 * r.charged + 1000, "case %zu %s: reserved %lld for %lld", i, c->body,
			     (long long)r.reserved, (long long)r.charged);
	}
	/* nested past the scanner's 256 levels (Python's json reads 1,000): refused; control: 200 levels */
	static const char eight[] = "{\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":800}}";

	for (int depth = 200; depth <= 300; depth += 100) {
		char *deep = malloc(2 * (size_t)depth + 100);
		struct bt_result r;
		int n;

		cr_assert_not_null(deep);
		n = sprintf(deep, "{\"model\":\"gpt-4o-mini\",\"max_tokens\":100,\"n\":8,\"x\":");
		memset(deep + n, '[', (size_t)depth - 1);
		memset(deep + n + depth - 1, ']', (size_t)depth - 1);
		strcpy(deep + n + 2 * (depth - 1), "}");
		r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions", deep, 200, eight, strlen(eight),
				0, 0, BUDGET_END_COMPLETE);
		cr_expect_eq(r.rc, depth > 256 ? -EPROTO : 0, "depth %d: rc %d %s", depth, r.rc, r.line);
		if (!r.rc)
			cr_expect_leq(r.charged, r.reserved);
		free(deep);
	}
	budget_close(b);
}

/* Input the provider holds (previous_response_id, a cached context, file ids) reserves the whole context. */
Test(budget_bypass, server_side_input_reserves_the_context)
{
	struct budget *b = open_default();
	static const char plain_body[] = "{\"model\":\"gpt-5\",\"input\":\"go on\",\"max_output_tokens\":100}";
	int64_t plain = reserve_of(b, BUDGET_OPENAI, "/v1/responses", plain_body);
	int64_t in = (int64_t)(sizeof(plain_body) - 1 + 1) / 2; /* a token per 2 bytes, rounded up */
	int64_t chained = reserve_of(b, BUDGET_OPENAI, "/v1/responses",
				     "{\"model\":\"gpt-5\",\"input\":\"go on\",\"max_output_tokens\":100,"
				     "\"previous_response_id\":\"resp_123\"}");
	int64_t file =
		reserve_of(b, BUDGET_OPENAI, "/v1/responses",
			   "{\"model\":\"gpt-5\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\","
			   "\"file_id\":\"file-1\"}]}],\"max_output_tokens\":100}");

	/* gpt-5: 400000 tokens of context at $1.25 per M (500000), plus 100 of output at $10 (1000) */
	cr_expect_eq(chained, 501000, "%lld", (long long)chained);
	cr_expect_eq(file, chained);
	/* control: the body's own size, in x 1.25 + 1000, rounded up once */
	cr_expect_eq(plain, (in * 1250000 + 1000000000LL + 999999) / 1000000, "%lld", (long long)plain);
	budget_close(b);
}

/*
 * A client that stops reading at a stream's last event (Codex closes at
 * response.completed, before the upstream's closing chunk) is charged the
 * usage it was sent: the provider finished.  Invariant: only a guest cut
 * after the last event, of a 2xx stream, is; a cut before it, a cut by the
 * upstream, and a Gemini stream (no last event says it ended) are charged
 * the reservation.
 */
Test(budget_bypass, a_guest_cut_after_the_last_event_is_charged_its_usage)
{
	static const char responses_sse[] =
		"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"output\":[]}}\n\n"
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[],"
		"\"usage\":{\"input_tokens\":20,\"output_tokens\":10}}}\n\n";
	static const char responses_body[] =
		"{\"model\":\"gpt-5-nano\",\"max_output_tokens\":1000,\"input\":\"hi\",\"stream\":true}";
	static const char gemini_sse[] = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]}}],"
					 "\"usageMetadata\":{\"promptTokenCount\":20,\"candidatesTokenCount\":10}}\n\n";
	static const char gemini_body[] = "{\"contents\":[{\"parts\":[{\"text\":\"hi\"}]}]}";
	struct budget *b = open_default();
	size_t alen, clen;
	char *asse = bt_fixture("anthropic.sse", &alen), *csse = bt_fixture("openai_chat.sse", &clen);
	struct bt_result r, whole;

	/* Anthropic: cut after message_stop is the whole stream's charge */
	whole = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, asse, alen, 64, 0,
			    BUDGET_END_COMPLETE);
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, asse, alen, 64, 0,
			BUDGET_END_GUEST_CUT);
	cr_expect_str_eq(r.how, "usage");
	cr_expect_eq(r.charged, whole.charged);
	cr_expect_lt(r.charged, r.reserved);
	/* control: the upstream cutting at the same place is still charged the reservation */
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, asse, alen, 64, 0,
			BUDGET_END_UPSTREAM_CUT);
	cr_expect_eq(r.charged, r.reserved, "%s", r.how);
	/* control: the guest cutting just before message_stop is too */
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", anthropic_body, 200, asse, alen, 64,
			strstr(asse, "event: message_stop") - asse, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.charged, r.reserved, "%s", r.how);

	/* OpenAI Responses: cut after response.completed */
	whole = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses", responses_body, 200, responses_sse,
			    strlen(responses_sse), 7, 0, BUDGET_END_COMPLETE);
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses", responses_body, 200, responses_sse,
			strlen(responses_sse), 7, 0, BUDGET_END_GUEST_CUT);
	cr_expect_str_eq(r.how, "usage");
	cr_expect_eq(r.charged, whole.charged, "%lld against %lld", (long long)r.charged, (long long)whole.charged);
	cr_expect_lt(r.charged, r.reserved);

	/* OpenAI chat: cut after [DONE] (the usage chunk comes before it); control: cut between the two */
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions",
			"{\"model\":\"gpt-4o-mini\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
			"\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
			200, csse, clen, 64, 0, BUDGET_END_GUEST_CUT);
	cr_expect_str_eq(r.how, "usage");
	cr_expect_lt(r.charged, r.reserved);
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions",
			"{\"model\":\"gpt-4o-mini\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
			"\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
			200, csse, clen, 64, strstr(csse, "data: [DONE]") - csse, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.charged, r.reserved, "%s", r.how);

	/* control: a Gemini stream has no last event: a guest cut after all of it is the reservation */
	r = bt_exchange(b, "a1", BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
			gemini_body, 200, gemini_sse, strlen(gemini_sse), 0, 0, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.charged, r.reserved, "%s", r.how);
	free(asse);
	free(csse);
	budget_close(b);
}

/* Free endpoints are counted as requests and cost nothing, whatever they answer. */
Test(budget_bypass, free_endpoints_count_but_cost_nothing)
{
	struct budget *b = open_default();
	struct bt_result r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "GET", "/v1/models", NULL, 200, "{}", 2, 0, 0,
					 BUDGET_END_GUEST_CUT);

	cr_expect_eq(r.reserved, 0);
	cr_expect_eq(r.charged, 0);
	cr_expect_str_eq(r.how, "free");
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'reserve'"), 1);
	budget_close(b);
}

/*
 * Input the body's size doesn't bound: an image is the provider's tokens for
 * an image whatever its bytes (a URL's are a few dozen), a document (a PDF,
 * inline or by URL), audio and video cost tokens their bytes don't bound.
 * The invariant: the upstream charging what such a body can cost stays
 * within the reservation (at most IMAGE_TOKENS an image; the model's context
 * for the rest).  Control: text alone, and a small inline image on Gemini,
 * are reserved by their size.
 */
struct input_case {
	enum budget_provider p;
	const char *path, *body, *usage; /* usage: the input the upstream would bill, its JSON */
	bool context; /* the reservation is the model's whole context */
	int images; /* else: the body's size and IMAGE_TOKENS (8192) an image, at these prices per M tokens */
	int64_t in_price, out_price;
};

#define IMG_URL "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://img.example/a.png\"}}"
static const struct input_case input_cases[] = {
	/* control: text, reserved by its size */
	{ BUDGET_OPENAI, "/v1/chat/completions",
	  "{\"model\":\"gpt-4o\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":\"hello there\"}]}",
	  "{\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":10}}", false, 0, 2500000, 10000000 },
	/* ten images by URL: 1,105 tokens each at gpt-4o's high detail, on a body of 900 bytes */
	{ BUDGET_OPENAI, "/v1/chat/completions",
	  "{\"model\":\"gpt-4o\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":[" IMG_URL "," IMG_URL
	  "," IMG_URL "," IMG_URL "," IMG_URL "," IMG_URL "," IMG_URL "," IMG_URL "," IMG_URL "," IMG_URL "]}]}",
	  "{\"usage\":{\"prompt_tokens\":11070,\"completion_tokens\":10}}", false, 10, 2500000, 10000000 },
	/* Responses: an image by URL on a patch model (1536 patches x 2.46) */
	{ BUDGET_OPENAI, "/v1/responses",
	  "{\"model\":\"gpt-4.1-nano\",\"max_output_tokens\":10,\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
	  "\"input_image\",\"image_url\":\"https://img.example/a.png\"}]}]}",
	  "{\"usage\":{\"input_tokens\":3800,\"output_tokens\":10}}", false, 1, 100000, 400000 },
	/* a PDF the provider fetches, or one inline (its text compressed, a page image a page) */
	{ BUDGET_OPENAI, "/v1/responses",
	  "{\"model\":\"gpt-5\",\"max_output_tokens\":10,\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
	  "\"input_file\",\"file_url\":\"https://doc.example/a.pdf\"}]}]}",
	  "{\"usage\":{\"input_tokens\":300000,\"output_tokens\":10}}", true, 0, 0, 0 },
	{ BUDGET_OPENAI, "/v1/chat/completions",
	  "{\"model\":\"gpt-4o\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\","
	  "\"file\":{\"filename\":\"a.pdf\",\"file_data\":\"data:application/pdf;base64,JVBERi0xLjQK\"}}]}]}",
	  "{\"usage\":{\"prompt_tokens\":100000,\"completion_tokens\":10}}", true, 0, 0, 0 },
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
	  "\"document\",\"source\":{\"type\":\"url\",\"url\":\"https://doc.example/a.pdf\"}}]}]}",
	  "{\"usage\":{\"input_tokens\":150000,\"output_tokens\":10}}", true, 0, 0, 0 },
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":[{\"t\\u0079pe\":"
	  "\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://img.example/a.png\"}}]}]}",
	  "{\"usage\":{\"input_tokens\":150000,\"output_tokens\":10}}", true, 0, 0, 0 },
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
	  "\"\\u0064ocument\",\"source\":{\"type\":\"base64\",\"media_type\":\"application/pdf\",\"data\":"
	  "\"JVBERi0xLjQK\"}}]}]}",
	  "{\"usage\":{\"input_tokens\":150000,\"output_tokens\":10}}", true, 0, 0, 0 },
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"inline_data\":{\"mime_type\":\"application/pdf\",\"data\":"
	  "\"JVBERi0xLjQK\"}}]}],\"generationConfig\":{\"maxOutputTokens\":10}}",
	  "{\"usageMetadata\":{\"promptTokenCount\":500000,\"candidatesTokenCount\":10}}", true, 0, 0, 0 },
	/* a small inline image on Gemini: 258 tokens, on 120 bytes */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"inlineData\":{\"mimeType\":\"image/png\",\"data\":"
	  "\"iVBORw0KGgo=\"}}]}],\"generationConfig\":{\"maxOutputTokens\":10}}",
	  "{\"usageMetadata\":{\"promptTokenCount\":258,\"candidatesTokenCount\":10}}", false, 1, 300000, 2500000 },
};

Test(budget_bypass, input_the_body_does_not_show_is_reserved)
{
	struct budget *b = open_default();

	for (size_t i = 0; i < sizeof(input_cases) / sizeof(input_cases[0]); i++) {
		const struct input_case *c = &input_cases[i];
		struct bt_result r = bt_exchange(b, "a1", c->p, "POST", c->path, c->body, 200, c->usage,
						 strlen(c->usage), 0, 0, BUDGET_END_COMPLETE);

		cr_assert_eq(r.rc, 0, "case %zu: %s", i, r.line);
		cr_expect_str_eq(r.how, "usage", "case %zu", i);
		cr_expect_leq(r.charged, r.reserved, "case %zu %s: charged %lld, reserved %lld", i, c->body,
			      (long long)r.charged, (long long)r.reserved);
		if (c->context) /* the whole context at the dearest input price: far above this charge */
			cr_expect_gt(r.reserved, r.charged + r.charged / 4, "case %zu: reserved %lld", i,
				     (long long)r.reserved);
		else /* the body's size and IMAGE_TOKENS an image, and 10 of output: not the context */
			cr_expect_eq(r.reserved,
				     ((((int64_t)strlen(c->body) + 1) / 2 + c->images * 8192LL) * c->in_price +
				      10 * c->out_price + 999999) /
					     1000000,
				     "case %zu: reserved %lld", i, (long long)r.reserved);
	}
	budget_close(b);
}

/*
 * Anthropic bills a 1-hour cache write at twice the input price, above the
 * 5-minute write's 1.25x that prices every input token otherwise.  A body
 * whose every token is written for an hour (text at 2 bytes a token) is
 * charged within its reservation; control: the same body with a 5-minute
 * TTL is reserved at 1.25x, and its write fits that.
 */
Test(budget_bypass, a_one_hour_cache_write_is_reserved_at_its_price)
{
	static const char *const ttls[] = { "5m", "1h", "24h" };
	struct budget *b = open_default();
	char body[2600], usage[512], text[2001];

	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	for (size_t i = 0; i < sizeof(ttls) / sizeof(ttls[0]); i++) {
		bool hour = i > 0;
		int n = snprintf(
			body, sizeof(body),
			"{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"system\":[{\"type\":\"text\",\"text\":"
			"\"%s\",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"%s\"}}],\"messages\":[]}",
			text, ttls[i]);
		int64_t tokens = (n + 1) / 2; /* every token a byte pair: the densest the estimate allows */
		struct bt_result r;

		snprintf(
			usage, sizeof(usage),
			"{\"usage\":{\"input_tokens\":0,\"cache_creation_input_tokens\":%lld,\"cache_creation\":"
			"{\"ephemeral_5m_input_tokens\":%lld,\"ephemeral_1h_input_tokens\":%lld},\"output_tokens\":10}}",
			(long long)tokens, (long long)(hour ? 0 : tokens), (long long)(hour ? tokens : 0));
		r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", body, 200, usage, strlen(usage), 0,
				0, BUDGET_END_COMPLETE);
		cr_assert_eq(r.rc, 0, "%s", r.line);
		cr_expect_str_eq(r.how, "usage");
		cr_expect_leq(r.charged, r.reserved, "ttl %s: charged %lld, reserved %lld", ttls[i],
			      (long long)r.charged, (long long)r.reserved);
		/* claude-haiku-4-5: $1 input, $1.25 5-minute writes, $5 output, per M tokens */
		cr_expect_eq(r.reserved, (tokens * (hour ? 2000000 : 1250000) + 10 * 5000000 + 999999) / 1000000,
			     "ttl %s: reserved %lld", ttls[i], (long long)r.reserved);
	}
	budget_close(b);
}

/*
 * Anthropic bills each server-side web search ($10 per 1,000: the price
 * table's `fee anthropic web_search`) beside the tokens its results add.
 * The invariant: a request is reserved every search its web_search tools
 * allow (each one's max_uses, or REQUEST_WEB_SEARCH_USES when it gives
 * none) and charged every search its usage reports.  Attacks: tool lists a
 * reader could misread (a web_fetch tool's max_uses before a web_search
 * tool without one, an escape in the type or in max_uses' key, two
 * web_search tools, keys of the same names inside a custom tool's schema),
 * a type given twice, a usage reporting more searches than reserved, a
 * stream cut after the searches ran.  Controls: no tools, and the same
 * tools on OpenAI's chat format (no fee there), reserve no search.
 */
struct search_case {
	const char *tools; /* the body's "tools" */
	int64_t searches; /* reserved; -1: the body is refused */
};

#define WS "{\"type\":\"web_search_20250305\",\"name\":\"web_search\""
static const struct search_case search_cases[] = {
	{ "[]", 0 },
	{ "[" WS ",\"max_uses\":5}]", 5 },
	{ "[" WS "}]", REQUEST_WEB_SEARCH_USES },
	{ "[{\"type\":\"web_fetch_20250910\",\"name\":\"web_fetch\",\"max_uses\":3}," WS ",\"max_uses\":2}]", 2 },
	{ "[{\"type\":\"web_fetch_20250910\",\"name\":\"web_fetch\",\"max_uses\":1}," WS "}]",
	  REQUEST_WEB_SEARCH_USES },
	{ "[{\"name\":\"web_search\",\"type\":\"web\\u005fsearch_20250305\",\"max_uses\":4}]", 4 },
	{ "[" WS ",\"max_\\u0075ses\":3}]", 3 },
	{ "[" WS ",\"max_uses\":2}," WS ",\"max_uses\":3}]", 5 },
	{ "[{\"name\":\"read\",\"input_schema\":{\"type\":\"web_search\",\"properties\":{\"max_uses\":1}}}," WS
	  ",\"max_uses\":1}]",
	  1 },
	{ "[{\"name\":\"read\",\"type\":\"custom\",\"input_schema\":{\"type\":\"object\"}}]", 0 },
	{ "[{\"type\":\"custom\",\"name\":\"s\",\"type\":\"web_search_20250305\",\"max_uses\":1}]", -1 },
	{ "[" WS ",\"max_uses\":1,\"max_uses\":50}]", -1 },
};

/* claude-haiku-4-5, max_tokens 10: every input token at its $1.25 cache write, output $5, a search $0.01 */
static int64_t haiku_reserve(size_t body_len, int64_t searches)
{
	int64_t pico = (int64_t)((body_len + 1) / 2) * 1250000 + 10 * 5000000 + searches * 10000000000LL;

	return (pico + 999999) / 1000000;
}

Test(budget_bypass, web_searches_are_reserved_by_max_uses_and_charged_as_reported)
{
	struct budget *b = open_default();
	char body[1024], resp[2048];

	bt_allow_tools = BT_ALL_TOOLS; /* web_fetch beside web_search: allowed here, refused by default below */

	for (size_t i = 0; i < sizeof(search_cases) / sizeof(search_cases[0]); i++) {
		const struct search_case *c = &search_cases[i];
		int n = snprintf(body, sizeof(body),
				 "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[],"
				 "\"tools\":%s}",
				 c->tools);
		int64_t ran = c->searches > 0 ? c->searches : 0;
		struct bt_result r;

		/* the upstream runs every search allowed: 20 input and 10 output tokens besides */
		snprintf(resp, sizeof(resp),
			 "{\"usage\":{\"input_tokens\":20,\"output_tokens\":10,\"server_tool_use\":"
			 "{\"web_search_requests\":%lld}}}",
			 (long long)ran);
		r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", body, 200, resp, strlen(resp), 0, 0,
				BUDGET_END_COMPLETE);
		if (c->searches < 0) {
			cr_expect_eq(r.rc, -EPROTO, "case %zu %s: rc %d", i, c->tools, r.rc);
			cr_expect_str_eq(r.reserve_note.reason, "budget.refused.body");
			continue;
		}
		cr_assert_eq(r.rc, 0, "case %zu: %s", i, r.line);
		cr_expect_eq(r.reserved, haiku_reserve((size_t)n, c->searches), "case %zu %s: reserved %lld, want %lld",
			     i, c->tools, (long long)r.reserved, (long long)haiku_reserve((size_t)n, c->searches));
		cr_expect_str_eq(r.how, "usage");
		cr_expect_eq(r.charged, 20 + 50 + ran * 10000, "case %zu: charged %lld", i, (long long)r.charged);
		cr_expect_leq(r.charged, r.reserved);
	}

	/* more searches reported than reserved (a provider that ignored max_uses): all of them are charged */
	const char *more = "{\"usage\":{\"input_tokens\":20,\"output_tokens\":10,\"server_tool_use\":"
			   "{\"web_search_requests\":9}}}";
	struct bt_result r = bt_exchange(
		b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages",
		"{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[],\"tools\":[" WS ",\"max_uses\":2}]}",
		200, more, strlen(more), 0, 0, BUDGET_END_COMPLETE);
	cr_assert_eq(r.rc, 0, "%s", r.line);
	cr_expect_eq(r.charged, 20 + 50 + 9 * 10000, "charged %lld", (long long)r.charged);
	cr_expect(strstr(r.settle_note.fields, "\"web_searches\":9"), "%s", r.settle_note.fields);

	/*
	 * A usage that does not say how many searches ran (a stream whose
	 * message_delta leaves server_tool_use out): every search allowed is
	 * charged.  Control: one that says 0 is charged none.
	 */
	const char *unsaid = "{\"usage\":{\"input_tokens\":20,\"output_tokens\":10}}";
	const char *none = "{\"usage\":{\"input_tokens\":20,\"output_tokens\":10,\"server_tool_use\":"
			   "{\"web_search_requests\":0}}}";
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages",
			"{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[],\"tools\":[" WS
			",\"max_uses\":5}]}",
			200, unsaid, strlen(unsaid), 0, 0, BUDGET_END_COMPLETE);
	cr_assert_eq(r.rc, 0, "%s", r.line);
	cr_expect_eq(r.charged, 20 + 50 + 5 * 10000, "unsaid: charged %lld", (long long)r.charged);
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages",
			"{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[],\"tools\":[" WS
			",\"max_uses\":5}]}",
			200, none, strlen(none), 0, 0, BUDGET_END_COMPLETE);
	cr_assert_eq(r.rc, 0, "%s", r.line);
	cr_expect_eq(r.charged, 20 + 50, "said 0: charged %lld", (long long)r.charged);

	/* a stream cut after the searches ran: the reservation, its searches included */
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages",
			"{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[],\"tools\":[" WS
			",\"max_uses\":7}]}",
			200, more, 20, 0, 0, BUDGET_END_UPSTREAM_CUT);
	cr_assert_eq(r.rc, 0, "%s", r.line);
	cr_expect_gt(r.reserved, 7 * 10000);
	cr_expect_eq(r.charged, r.reserved);

	/*
	 * OpenAI's Responses: a web_search tool allows max_tool_calls searches
	 * (20 without; a count that is not a positive integer is none), at $25
	 * per 1,000, whatever the number of such tools; each web_search_call
	 * item of the output is charged.  gpt-5-nano: $0.05 input, $0.40 output.
	 */
	static const struct search_case openai_cases[] = {
		{ "\"tools\":[]", 0 },
		{ "\"tools\":[{\"type\":\"web_search\"}]", REQUEST_WEB_SEARCH_USES },
		{ "\"tools\":[{\"type\":\"web_search_preview\"}],\"max_tool_calls\":3", 3 },
		{ "\"max_tool_calls\":4,\"tools\":[{\"type\":\"web_search\"},{\"type\":\"web_search_preview\"}]", 4 },
		{ "\"tools\":[{\"type\":\"web_search\"}],\"max_tool_calls\":\"5\"", REQUEST_WEB_SEARCH_USES },
		{ "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"web_search\"}}]", 0 },
		{ "\"tools\":[{\"type\":\"web_search\"}],\"max_tool_calls\":2,\"max_tool_calls\":9", -1 },
	};
	for (size_t i = 0; i < sizeof(openai_cases) / sizeof(openai_cases[0]); i++) {
		const struct search_case *c = &openai_cases[i];
		int n = snprintf(body, sizeof(body),
				 "{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"input\":\"hi\",%s}", c->tools);
		int64_t ran = c->searches > 0 ? c->searches : 0, pico;

		/* the upstream runs every search allowed: a web_search_call item each */
		int at = snprintf(resp, sizeof(resp), "{\"output\":[");
		for (int64_t k = 0; k < ran && at < (int)sizeof(resp) - 64; k++)
			at += snprintf(resp + at, sizeof(resp) - (size_t)at, "%s{\"type\":\"web_search_call\"}",
				       k ? "," : "");
		snprintf(resp + at, sizeof(resp) - (size_t)at,
			 "],\"usage\":{\"input_tokens\":20,\"output_tokens\":10}}");
		r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses", body, 200, resp, strlen(resp), 0, 0,
				BUDGET_END_COMPLETE);
		if (c->searches < 0) {
			cr_expect_eq(r.rc, -EPROTO, "openai case %zu %s: rc %d", i, c->tools, r.rc);
			continue;
		}
		cr_assert_eq(r.rc, 0, "openai case %zu: %s", i, r.line);
		pico = (int64_t)((n + 1) / 2) * 50000 + 10 * 400000 + c->searches * 25000000000LL;
		cr_expect_eq(r.reserved, (pico + 999999) / 1000000, "openai case %zu %s: reserved %lld", i, c->tools,
			     (long long)r.reserved);
		cr_expect_eq(r.charged, (20 * 50000 + 10 * 400000 + ran * 25000000000LL + 999999) / 1000000,
			     "openai case %zu: charged %lld (%s)", i, (long long)r.charged, r.how);
	}

	/*
	 * A stored prompt (`prompt`) may bring its own tools: reserved as if a
	 * web_search, a file_search and an image_generation tool were given
	 * (max_tool_calls, or 20) and a code interpreter of the largest
	 * container.  Both bodies'
	 * input is the model's context (state the provider holds); control:
	 * previous_response_id, whose tools are the request's own.
	 */
	int64_t stateful = reserve_of(b, BUDGET_OPENAI, "/v1/responses",
				      "{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"previous_response_id\":"
				      "\"resp_1\",\"input\":\"hi\"}");
	cr_expect_eq(reserve_of(b, BUDGET_OPENAI, "/v1/responses",
				"{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"prompt\":{\"id\":\"pmpt_1\"},"
				"\"input\":\"hi\"}") -
			     stateful,
		     REQUEST_WEB_SEARCH_USES * (25000 + 2500 + 250000) + REQUEST_CONTAINER_GB_MAX * 30000);
	cr_expect_eq(reserve_of(b, BUDGET_OPENAI, "/v1/responses",
				"{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"prompt\":{\"id\":\"pmpt_1\"},"
				"\"max_tool_calls\":2,\"input\":\"hi\"}") -
			     stateful,
		     2 * (25000 + 2500 + 250000) + REQUEST_CONTAINER_GB_MAX * 30000,
		     "a stored prompt's searches are bounded by max_tool_calls (its containers by the largest)");

	/* control: OpenAI's chat format has no such fee, whatever the tools say */
	cr_expect_eq(reserve_of(b, BUDGET_OPENAI, "/v1/chat/completions",
				"{\"model\":\"gpt-4o-mini\",\"max_tokens\":10,\"messages\":[],\"tools\":[" WS "}]}"),
		     reserve_of(b, BUDGET_OPENAI, "/v1/chat/completions",
				"{\"model\":\"gpt-4o-mini\",\"max_tokens\":10,\"messages\":[],\"tools\":[{\"type\":"
				"\"web_zearch_20250305\",\"name\":\"web_search\"}]}"));
	budget_close(b);
}

/*
 * OpenAI's Chat Completions search models (gpt-4o-search-preview,
 * gpt-4o-mini-search-preview, gpt-5-search-api) search the web before every
 * answer, billed per search ($25 per 1,000: the table's `fee openai
 * web_search`) beside the tokens, and their usage says nothing of it.  The
 * invariant: each answer such a request asks for is reserved a search and
 * charged it.  Attack: tiny requests, whose tokens cost a tenth of the
 * search each one makes (without the fee, a $0.10 cap would let about 40
 * of them through: $1 of searches), through a dated name and a search model
 * missing from the table; n = 3.  Controls: gpt-4o-mini with the same body
 * pays no search, nor does the same model name on an OpenAI-compatible
 * server (provider other: its fees are not OpenAI's).
 */
Test(budget_bypass, openai_chat_search_models_pay_a_search_an_answer)
{
	struct budget *b = open_default();
	static const char usage[] = "{\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":5}}";
	static const struct {
		const char *model;
		int64_t in_price, out_price; /* micro-dollars per million tokens: pico-dollars a token */
		int64_t n, searches;
	} cases[] = {
		{ "gpt-4o-mini-search-preview", 150000, 600000, 1, 1 },
		{ "gpt-4o-mini-search-preview-2025-03-11", 150000, 600000, 1, 1 },
		{ "gpt-4o-search-preview", 2500000, 10000000, 3, 3 },
		{ "gpt-5-search-api", 1250000, 10000000, 1, 1 },
		{ "gpt-9-search-api", 150000000, 600000000, 1, 1 }, /* missing: o1-pro's prices */
		{ "gpt-4o-mini", 150000, 600000, 1, 0 },
	};
	char body[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int n = snprintf(body, sizeof(body), "{\"model\":\"%s\",\"max_tokens\":5,\"n\":%lld,\"messages\":[]}",
				 cases[i].model, (long long)cases[i].n);
		int64_t fee = cases[i].searches * 25000000000LL, in = (n + 1) / 2;
		struct bt_result r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/chat/completions", body, 200,
						 usage, strlen(usage), 0, 0, BUDGET_END_COMPLETE);

		cr_assert_eq(r.rc, 0, "%s: %s", cases[i].model, r.line);
		cr_expect_eq(r.reserved,
			     (in * cases[i].in_price + 5 * cases[i].n * cases[i].out_price + fee + 999999) / 1000000,
			     "%s: reserved %lld", cases[i].model, (long long)r.reserved);
		cr_expect_eq(r.charged, (20 * cases[i].in_price + 5 * cases[i].out_price + fee + 999999) / 1000000,
			     "%s: charged %lld (%s)", cases[i].model, (long long)r.charged, r.how);
	}
	/* control: an OpenAI-compatible server's model of that name is no search of OpenAI's */
	cr_expect_eq(reserve_of(b, BUDGET_OTHER, "/v1/chat/completions",
				"{\"model\":\"gpt-4o-search-preview\",\"max_tokens\":5,\"messages\":[]}"),
		     reserve_of(b, BUDGET_OTHER, "/v1/chat/completions",
				"{\"model\":\"gpt-4o-zearch-preview\",\"max_tokens\":5,\"messages\":[]}"));
	budget_close(b);

	/* the cap holds: $0.10 a day is four tiny search requests (each $0.025 and a few tokens), not forty */
	struct budget_opts o;
	static const char tiny[] = "{\"model\":\"gpt-4o-mini-search-preview\",\"max_tokens\":5,\"messages\":[]}";
	int admitted = 0;
	struct bt_result r;

	bt_opts(&o);
	o.sandbox[BUDGET_OPENAI].micros_per_day = 100000;
	b = bt_open(&o);
	for (int i = 0; i < 40; i++) {
		r = bt_exchange(b, "a2", BUDGET_OPENAI, "POST", "/v1/chat/completions", tiny, 200, usage, strlen(usage),
				0, 0, BUDGET_END_COMPLETE);
		if (r.rc)
			break;
		admitted++;
	}
	cr_expect_eq(admitted, 3, "admitted %d tiny search requests under $0.10", admitted);
	cr_expect_eq(r.rc, -EDQUOT);
	cr_expect(strstr(r.line, "this request needs up to $0.025009 (its web searches' fees included)"), "%s", r.line);
	budget_close(b);

	/* under a cap smaller than one search, the refusal says what would fit */
	o.sandbox[BUDGET_OPENAI].micros_per_day = 20000;
	b = bt_open(&o);
	r = bt_exchange(b, "a3", BUDGET_OPENAI, "POST", "/v1/chat/completions", tiny, 200, usage, strlen(usage), 0, 0,
			BUDGET_END_COMPLETE);
	cr_expect_eq(r.rc, -EDQUOT);
	cr_expect(strstr(r.line, "this request alone is more than the cap; lower its max tokens or ask a model that "
				 "does not search or raise budget_dollars_per_day"),
		  "%s", r.line);
	budget_close(b);
}

/*
 * OpenAI's Responses bill two more tools per use, beside the tokens: a file
 * search ($2.50 per 1,000 calls, `fee openai file_search`) and a code
 * interpreter container ($0.03 a GB of its memory, `fee openai
 * code_interpreter`: 1 GB unless memory_limit says 4g, 16g or 64g).  The
 * invariant: a request is reserved every file search max_tool_calls allows
 * (20 without) when it gives a file_search tool, and the GB of every
 * container its code_interpreter tools may start (an existing container's
 * id or a memory_limit latch does not know: the largest, 64 GB); it is
 * charged each file_search_call item of the output, and its containers
 * once the output has a code_interpreter_call item (the output does not
 * say which containers were new), the largest when it reserved none.
 * Attacks: an escape in a type, the container before the type, two
 * interpreters, a container given twice, an unknown memory_limit, code run
 * by a request that declared no interpreter, a stream cut after the calls.
 * Controls: a function tool whose schema says "file_search" and a request
 * without tools reserve no fee; the output's other items charge nothing.
 */
struct tool_fee_case {
	const char *tools; /* the body's members after "input" */
	int64_t file_searches, container_gb; /* reserved; file_searches -1: the body is refused */
	const char *items; /* the output's items */
	int64_t file_calls, charged_gb; /* charged */
};

static const struct tool_fee_case tool_fee_cases[] = {
	{ "\"tools\":[]", 0, 0, "{\"type\":\"message\"}", 0, 0 },
	{ "\"tools\":[{\"type\":\"file_search\",\"vector_store_ids\":[\"vs_1\"]}]", REQUEST_WEB_SEARCH_USES, 0,
	  "{\"type\":\"file_search_call\"},{\"type\":\"file_search_call\"},{\"type\":\"file_search_call\"},"
	  "{\"type\":\"message\"}",
	  3, 0 },
	{ "\"max_tool_calls\":2,\"tools\":[{\"type\":\"file_search\"}]", 2, 0,
	  "{\"type\":\"file_search_call\"},{\"type\":\"file_search_call\"}", 2, 0 },
	{ "\"tools\":[{\"type\":\"file\\u005fsearch\"}]", REQUEST_WEB_SEARCH_USES, 0,
	  "{\"type\":\"file\\u005fsearch_call\"}", 1, 0 },
	{ "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"file_search\"}}]", 0, 0,
	  "{\"type\":\"function_call\"}", 0, 0 },
	{ "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}}]", 0, 1,
	  "{\"type\":\"code_interpreter_call\",\"container_id\":\"cntr_1\"}", 0, 1 },
	{ "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\",\"memory_limit\":\"16g\"}}]", 0,
	  16, "{\"type\":\"code_interpreter_call\"},{\"type\":\"code_interpreter_call\"}", 0, 16 },
	{ "\"tools\":[{\"container\":{\"memory_limit\":\"4g\",\"type\":\"auto\"},\"type\":\"code_interpreter\"}]", 0, 4,
	  "{\"type\":\"code\\u005finterpreter_call\"}", 0, 4 },
	{ "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\",\"memory_limit\":\"64g\","
	  "\"memory_limit\":\"1g\"}}]",
	  0, REQUEST_CONTAINER_GB_MAX, "{\"type\":\"code_interpreter_call\"}", 0, REQUEST_CONTAINER_GB_MAX },
	{ "\"tools\":[{\"type\":\"code_interpreter\",\"container\":\"cntr_abc\"}]", 0, REQUEST_CONTAINER_GB_MAX,
	  "{\"type\":\"message\"}", 0, 0 },
	{ "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\",\"memory_limit\":\"128g\"}}]", 0,
	  REQUEST_CONTAINER_GB_MAX, "{\"type\":\"code_interpreter_call\"}", 0, REQUEST_CONTAINER_GB_MAX },
	{ "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\",\"memory_limit\":\"4g\"}},"
	  "{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"}},{\"type\":\"file_search\"}]",
	  REQUEST_WEB_SEARCH_USES, 5, "{\"type\":\"code_interpreter_call\"},{\"type\":\"file_search_call\"}", 1, 5 },
	{ "\"tools\":[]", 0, 0, "{\"type\":\"code_interpreter_call\"}", 0, REQUEST_CONTAINER_GB_MAX },
	{ "\"tools\":[{\"type\":\"code_interpreter\",\"container\":{\"type\":\"auto\"},\"container\":\"cntr_abc\"}]",
	  -1, 0, "", 0, 0 },
};

/* gpt-5-nano, max_output_tokens 10: input $0.05, output $0.40, a file search $0.0025, a container GB $0.03 */
static int64_t nano_micros(int64_t input, int64_t file_searches, int64_t container_gb)
{
	int64_t pico = input * 50000 + 10 * 400000 + file_searches * 2500000000LL + container_gb * 30000000000LL;

	return (pico + 999999) / 1000000;
}

Test(budget_bypass, openai_file_searches_images_and_containers_are_reserved_and_charged)
{
	struct budget *b = open_default();
	char body[1024], resp[2048];

	for (size_t i = 0; i < sizeof(tool_fee_cases) / sizeof(tool_fee_cases[0]); i++) {
		const struct tool_fee_case *c = &tool_fee_cases[i];
		int n = snprintf(body, sizeof(body),
				 "{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"input\":\"hi\",%s}", c->tools);
		struct bt_result r;

		snprintf(resp, sizeof(resp), "{\"output\":[%s],\"usage\":{\"input_tokens\":20,\"output_tokens\":10}}",
			 c->items);
		r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses", body, 200, resp, strlen(resp), 0, 0,
				BUDGET_END_COMPLETE);
		if (c->file_searches < 0) {
			cr_expect_eq(r.rc, -EPROTO, "case %zu %s: rc %d", i, c->tools, r.rc);
			continue;
		}
		cr_assert_eq(r.rc, 0, "case %zu: %s", i, r.line);
		cr_expect_eq(r.reserved, nano_micros((n + 1) / 2, c->file_searches, c->container_gb),
			     "case %zu %s: reserved %lld", i, c->tools, (long long)r.reserved);
		cr_expect_eq(r.charged, nano_micros(20, c->file_calls, c->charged_gb), "case %zu %s: charged %lld (%s)",
			     i, c->tools, (long long)r.charged, r.how);
		cr_expect_str_eq(r.how, "usage", "case %zu", i);
		if (c->file_calls)
			cr_expect(strstr(r.settle_note.fields, "\"file_searches\":"), "%s", r.settle_note.fields);
		if (c->charged_gb)
			cr_expect(strstr(r.settle_note.fields, "\"container_gb\":"), "%s", r.settle_note.fields);
	}

	/*
	 * Images ($0.25 each, `fee openai image_generation`): an image_generation
	 * tool allows max_tool_calls images (20 without), each
	 * image_generation_call item is charged.  Control: a function tool
	 * whose schema says image_generation reserves none.
	 */
	static const struct {
		const char *tools;
		int64_t reserved, made;
	} image_cases[] = {
		{ "\"tools\":[{\"type\":\"image_generation\",\"quality\":\"low\"}]", REQUEST_WEB_SEARCH_USES, 2 },
		{ "\"max_tool_calls\":1,\"tools\":[{\"type\":\"image_generation\"}]", 1, 1 },
		{ "\"max_tool_calls\":3,\"tools\":[{\"type\":\"image\\u005fgeneration\"}]", 3, 0 },
		{ "\"tools\":[{\"type\":\"function\",\"name\":\"i\",\"parameters\":{\"type\":\"image_generation\"}}]",
		  0, 0 },
	};
	for (size_t i = 0; i < sizeof(image_cases) / sizeof(image_cases[0]); i++) {
		int n = snprintf(body, sizeof(body),
				 "{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"input\":\"hi\",%s}",
				 image_cases[i].tools);
		int at = snprintf(resp, sizeof(resp), "{\"output\":[");
		struct bt_result r;

		for (int64_t k = 0; k < image_cases[i].made; k++)
			at += snprintf(resp + at, sizeof(resp) - (size_t)at,
				       "{\"type\":\"image_generation_call\",\"result\":\"aGk=\"},");
		snprintf(resp + at, sizeof(resp) - (size_t)at,
			 "{\"type\":\"message\"}],\"usage\":{\"input_tokens\":20,\"output_tokens\":10}}");
		r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses", body, 200, resp, strlen(resp), 0, 0,
				BUDGET_END_COMPLETE);
		cr_assert_eq(r.rc, 0, "image case %zu: %s", i, r.line);
		cr_expect_eq(r.reserved, nano_micros((n + 1) / 2, 0, 0) + image_cases[i].reserved * 250000,
			     "image case %zu: reserved %lld", i, (long long)r.reserved);
		cr_expect_eq(r.charged, nano_micros(20, 0, 0) + image_cases[i].made * 250000,
			     "image case %zu: charged %lld", i, (long long)r.charged);
		if (image_cases[i].made)
			cr_expect(strstr(r.settle_note.fields, "\"images\":"), "%s", r.settle_note.fields);
	}

	/* a stream: the calls are the items of response.completed's output, as in a body */
	static const char sse[] =
		"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"output\":[]}}\n\n"
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\","
		"\"item\":{\"type\":\"code_interpreter_call\"}}\n\n"
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":["
		"{\"type\":\"file_search_call\"},{\"type\":\"code_interpreter_call\"},{\"type\":\"message\"}],"
		"\"usage\":{\"input_tokens\":20,\"output_tokens\":10}}}\n\n";
	int n = snprintf(body, sizeof(body),
			 "{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"input\":\"hi\",\"stream\":true,"
			 "\"tools\":[{\"type\":\"file_search\"},{\"type\":\"code_interpreter\",\"container\":{\"type\":"
			 "\"auto\",\"memory_limit\":\"4g\"}}]}");
	struct bt_result r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses", body, 200, sse, strlen(sse),
					 7, 0, BUDGET_END_COMPLETE);

	cr_assert_eq(r.rc, 0, "%s", r.line);
	cr_expect_eq(r.reserved, nano_micros((n + 1) / 2, REQUEST_WEB_SEARCH_USES, 4));
	cr_expect_eq(r.charged, nano_micros(20, 1, 4), "charged %lld (%s)", (long long)r.charged, r.how);
	/* the same stream cut before response.completed, after the calls ran: the whole reservation */
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses", body, 200, sse, strlen(sse), 7,
			strstr(sse, "event: response.completed") - sse, BUDGET_END_UPSTREAM_CUT);
	cr_assert_eq(r.rc, 0, "%s", r.line);
	cr_expect_eq(r.charged, r.reserved, "cut: charged %lld of %lld (%s)", (long long)r.charged,
		     (long long)r.reserved, r.how);
	budget_close(b);
}

/*
 * Gemini's grounding with Google Search is billed per query from Gemini 3
 * on ($14 per 1,000) and per grounded prompt before ($35 per 1,000, once
 * for a request that ran any query), and nothing in a request bounds its
 * queries.  Invariant: a request that declares the tool, in any spelling
 * the API takes (the proto's two spellings, 1.5's retrieval form, a key
 * with an escape), is reserved REQUEST_WEB_SEARCH_USES queries (one
 * grounded prompt on 2.x) and charged the queries its answer lists.
 * Controls: no tool, other tools, a function whose name and schema say
 * googleSearch, a googleSearch member outside the tools.
 */
struct gemini_model {
	const char *model;
	int64_t input, output; /* pico-dollars a token */
	int64_t reserved_fee, fee_per_query, fee_per_prompt; /* pico-dollars */
};

static int64_t gemini_micros(const struct gemini_model *m, int64_t in, int64_t out, int64_t fee)
{
	int64_t pico = in * m->input + out * m->output + fee;

	return pico / 1000000 + (pico % 1000000 != 0);
}

/* Gemini 3 grounds per query, 2.x per grounded prompt (20 queries reserved on 3, one prompt on 2.5) */
static const struct gemini_model gemini_models[] = {
	{ "gemini-3-pro-preview", 2000000, 12000000, REQUEST_WEB_SEARCH_USES * 14000000000LL, 14000000000LL, 0 },
	{ "gemini-2.5-flash", 300000, 2500000, 35000000000LL, 0, 35000000000LL },
};

/* A body's tools, and whether they ground with Google Search. */
struct grounding_case {
	const char *tools; /* the body's members after its own */
	bool grounded;
};

Test(budget_bypass, gemini_grounding_is_reserved_and_charged_by_its_queries)
{
	static const struct grounding_case cases[] = {
		{ "", false },
		{ ",\"tools\":[{\"google_search\":{}}]", true },
		{ ",\"tools\":[{\"googleSearch\":{}}]", true },
		{ ",\"tools\":[{\"googleSearchRetrieval\":{\"dynamicRetrievalConfig\":{\"mode\":\"MODE_DYNAMIC\"}}}]",
		  true },
		{ ",\"tools\":[{\"google_search_retrieval\":{}}]", true },
		{ ",\"tools\":[{\"google\\u005fsearch\":{}}]", true },
		{ ",\"tools\":[{\"codeExecution\":{}},{\"urlContext\":{}},{\"googleSearch\":{}}]", true },
		{ ",\"tools\":[{\"codeExecution\":{}}]", false },
		{ ",\"tools\":[{\"functionDeclarations\":[{\"name\":\"googleSearch\",\"parameters\":{\"type\":\"object\","
		  "\"properties\":{\"googleSearch\":{\"type\":\"string\"}}}}]}]",
		  false },
		{ ",\"googleSearch\":{}", false },
	};
	struct budget *b = open_default();
	char body[1024], resp[1024];

	bt_allow_tools = BT_ALL_TOOLS; /* a urlContext beside googleSearch: allowed here, refused by default below */
	for (size_t m = 0; m < sizeof(gemini_models) / sizeof(gemini_models[0]); m++) {
		const struct gemini_model *g = &gemini_models[m];
		char path[128];

		snprintf(path, sizeof(path), "/v1beta/models/%s:generateContent", g->model);

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int n = snprintf(body, sizeof(body),
					 "{\"contents\":[{\"parts\":[{\"text\":\"hi\"}]}],\"generationConfig\":"
					 "{\"maxOutputTokens\":10}%s}",
					 cases[i].tools);
			int64_t want = gemini_micros(g, (n + 1) / 2, 10, cases[i].grounded ? g->reserved_fee : 0);

			cr_expect_eq(reserve_of(b, BUDGET_GEMINI, path, body), want, "%s %s: reserved, want %lld", path,
				     cases[i].tools, (long long)want);
		}

		/* settled: 20 tokens in, 10 out, and the queries listed (more than reserved: all of them) */
		static const int queries[] = { 0, 1, 3, 25 };
		for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
			int at = snprintf(resp, sizeof(resp),
					  "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":"
					  "\"x\"}]},\"groundingMetadata\":{\"webSearchQueries\":[");
			for (int k = 0; k < queries[q]; k++)
				at += snprintf(resp + at, sizeof(resp) - (size_t)at, "%s\"q%d\"", k ? "," : "", k);
			snprintf(resp + at, sizeof(resp) - (size_t)at,
				 "]}}],\"usageMetadata\":{\"promptTokenCount\":20,\"candidatesTokenCount\":10}}");
			struct bt_result r = bt_exchange(
				b, "a1", BUDGET_GEMINI, "POST", path,
				"{\"contents\":[{\"parts\":[{\"text\":\"hi\"}]}],\"tools\":[{\"google_search\":{}}]}",
				200, resp, strlen(resp), 7, 0, BUDGET_END_COMPLETE);
			int64_t fee = queries[q] * g->fee_per_query;

			if (queries[q] && fee < g->fee_per_prompt)
				fee = g->fee_per_prompt;
			cr_assert_eq(r.rc, 0, "%s", r.line);
			cr_expect_str_eq(r.how, "usage");
			cr_expect_eq(r.charged, gemini_micros(g, 20, 10, fee), "%s, %d queries: charged %lld", path,
				     queries[q], (long long)r.charged);
			if (queries[q])
				cr_expect(strstr(r.settle_note.fields, "\"web_searches\":"), "%s",
					  r.settle_note.fields);
		}

		/* a stream cut after the grounding: the reservation, its queries included */
		struct bt_result r = bt_exchange(
			b, "a1", BUDGET_GEMINI, "POST", path,
			"{\"contents\":[{\"parts\":[{\"text\":\"hi\"}]}],\"tools\":[{\"googleSearch\":{}}]}", 200,
			"{\"candidates\":[{\"groundingMetadata\":{\"webSearchQueries\":[\"a\"]}}],", 64, 0, 0,
			BUDGET_END_UPSTREAM_CUT);
		cr_assert_eq(r.rc, 0, "%s", r.line);
		cr_expect_geq(r.reserved, gemini_micros(g, 0, 0, g->reserved_fee));
		cr_expect_eq(r.charged, r.reserved);

		/*
		 * Cached content may hold the tools (a request that names it can't
		 * give its own): such a request is reserved the queries too.  Its
		 * input is the model's context either way; control: an inline PDF,
		 * input the body doesn't bound either, but no tools of the provider's.
		 */
		cr_expect_eq(
			reserve_of(b, BUDGET_GEMINI, path,
				   "{\"cachedContent\":\"cachedContents/grounded1\",\"contents\":[{\"parts\":[{\"text\":"
				   "\"hi\"}]}],\"generationConfig\":{\"maxOutputTokens\":10}}") -
				reserve_of(
					b, BUDGET_GEMINI, path,
					"{\"contents\":[{\"parts\":[{\"inlineData\":{\"mimeType\":\"application/pdf\","
					"\"data\":\"JVBERi0=\"}}]}],\"generationConfig\":{\"maxOutputTokens\":10}}"),
			g->reserved_fee / 1000000, "%s: cached content reserves the grounding", path);
	}
	budget_close(b);
}

/*
 * Gemini's OpenAI-compatible endpoint (/v1beta/openai/chat/completions)
 * answers in Chat Completions' format, whose usage says nothing of
 * grounding.  Invariant: a request there whose tools ask Google Search
 * (the native spellings) is reserved what the native API would reserve
 * for it, 20 queries on Gemini 3 and one grounded prompt on 2.x, and
 * charged all of it (its answer can't say fewer).  Controls: no tools, and
 * an OpenAI-style function named google_search, reserve no fee.
 */
Test(budget_bypass, gemini_grounding_through_its_openai_endpoint_is_charged_as_reserved)
{
	static const struct grounding_case cases[] = {
		{ "", false },
		{ ",\"tools\":[{\"google_search\":{}}]", true },
		{ ",\"tools\":[{\"googleSearch\":{}}]", true },
		{ ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"google_search\",\"parameters\":{}}}]",
		  false },
	};
	static const char usage[] = "{\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":10}}";
	struct budget *b = open_default();
	char body[512];

	for (size_t m = 0; m < sizeof(gemini_models) / sizeof(gemini_models[0]); m++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			const struct gemini_model *g = &gemini_models[m];
			int n = snprintf(body, sizeof(body), "{\"model\":\"%s\",\"max_tokens\":10,\"messages\":[]%s}",
					 g->model, cases[i].tools);
			int64_t fee = cases[i].grounded ? g->reserved_fee : 0;
			struct bt_result r = bt_exchange(b, "a1", BUDGET_GEMINI, "POST",
							 "/v1beta/openai/chat/completions", body, 200, usage,
							 strlen(usage), 0, 0, BUDGET_END_COMPLETE);

			cr_assert_eq(r.rc, 0, "%s", r.line);
			cr_expect_eq(r.reserved, gemini_micros(g, (n + 1) / 2, 10, fee), "%s %s: reserved %lld",
				     g->model, cases[i].tools, (long long)r.reserved);
			cr_expect_eq(r.charged, gemini_micros(g, 20, 10, fee), "%s %s: charged %lld (%s)", g->model,
				     cases[i].tools, (long long)r.charged, r.how);
		}
	}
	budget_close(b);
}

/*
 * The fee is the cap's business too: a dollar cap that a request's
 * searches alone pass refuses it, and the line says which knob lowers it
 * (Anthropic's max_uses, OpenAI's max_tool_calls).  Control: the same
 * request allowed one search fits.
 */
Test(budget_bypass, a_dollar_cap_counts_the_searches_a_request_allows)
{
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;

	bt_opts(&o);
	o.sandbox[BUDGET_ANTHROPIC].micros_per_day = 50000; /* $0.05 */
	o.sandbox[BUDGET_OPENAI].micros_per_day = 50000;
	o.sandbox[BUDGET_GEMINI].micros_per_day = 50000;
	b = bt_open(&o);
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages",
			"{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[],\"tools\":[" WS
			",\"max_uses\":10}]}",
			200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.rc, -EDQUOT, "rc %d: %s", r.rc, r.line);
	cr_expect(strstr(r.line, "(its web searches' fees included)"), "%s", r.line);
	cr_expect(strstr(r.line, "lower its max tokens or its web_search max_uses"), "%s", r.line);
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages",
			"{\"model\":\"claude-haiku-4-5\",\"max_tokens\":10,\"messages\":[],\"tools\":[" WS
			",\"max_uses\":1}]}",
			200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.rc, 0, "%s", r.line);
	/* OpenAI's Responses: 20 searches at $0.025 without max_tool_calls; one fits */
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses",
			"{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"input\":\"hi\",\"tools\":[{\"type\":"
			"\"web_search\"}]}",
			200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.rc, -EDQUOT, "rc %d: %s", r.rc, r.line);
	cr_expect(strstr(r.line, "lower its max tokens or its max_tool_calls"), "%s", r.line);
	r = bt_exchange(b, "a1", BUDGET_OPENAI, "POST", "/v1/responses",
			"{\"model\":\"gpt-5-nano\",\"max_output_tokens\":10,\"input\":\"hi\",\"tools\":[{\"type\":"
			"\"web_search\"}],\"max_tool_calls\":1}",
			200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.rc, 0, "%s", r.line);
	/* Gemini 3: 20 queries at $0.014 reserved for a grounded request; nothing bounds them but the tool */
	r = bt_exchange(b, "a1", BUDGET_GEMINI, "POST", "/v1beta/models/gemini-3-pro-preview:generateContent",
			"{\"contents\":[{\"parts\":[{\"text\":\"hi\"}]}],\"generationConfig\":{\"maxOutputTokens\":10},"
			"\"tools\":[{\"googleSearch\":{}}]}",
			200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.rc, -EDQUOT, "rc %d: %s", r.rc, r.line);
	cr_expect(strstr(r.line, "(its web searches' fees included)"), "%s", r.line);
	cr_expect(strstr(r.line, "lower its max tokens or leave out its google_search tool"), "%s", r.line);
	r = bt_exchange(
		b, "a1", BUDGET_GEMINI, "POST", "/v1beta/models/gemini-3-pro-preview:generateContent",
		"{\"contents\":[{\"parts\":[{\"text\":\"hi\"}]}],\"generationConfig\":{\"maxOutputTokens\":10}}", 200,
		"", 0, 0, 0, BUDGET_END_GUEST_CUT);
	cr_expect_eq(r.rc, 0, "without the tool: %s", r.line);
	budget_close(b);
}
