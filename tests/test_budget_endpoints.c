// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_endpoints.c - what a metered route forwards at all: only the
 * endpoints the spend meter can price (or the kit prices at a fixed amount),
 * and no request that has the provider fetch a URL the request chooses
 * unless the kit allows that tool.
 *
 * Before, an endpoint the meter had no usage for (Anthropic's message
 * batches, Gemini's batchGenerateContent and Veo's predictLongRunning,
 * OpenAI's batches, images, audio, files...) was forwarded and charged one
 * request's worst case, while the provider bills it dollars to hundreds of
 * dollars; and a body could send the guest's data out through the
 * provider (web_fetch, mcp_servers, an mcp tool, url_context), past the
 * sandbox's profile.  The request bodies below are in the providers' own
 * shapes, streamed and not.
 */
#include "budget_test.h"

TestSuite(budget_endpoints, .init = bt_setup, .fini = bt_teardown);

static struct budget *open_default(void)
{
	struct budget_opts o;

	bt_opts(&o);
	return bt_open(&o);
}

struct endpoint {
	enum budget_provider p;
	const char *method, *path;
};

/* Endpoints a built-in kit's path prefixes let through, and the meter has no usage for. */
static const struct endpoint unpriced[] = {
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages/batches" },
	{ BUDGET_ANTHROPIC, "GET", "/v1/messages/batches/msgbatch_01/results" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/messages/batches/msgbatch_01/cancel" },
	{ BUDGET_ANTHROPIC, "POST", "/v1/files" },
	{ BUDGET_OPENAI, "POST", "/v1/batches" },
	{ BUDGET_OPENAI, "POST", "/v1/images/generations" },
	{ BUDGET_OPENAI, "POST", "/v1/images/edits" },
	{ BUDGET_OPENAI, "POST", "/v1/audio/speech" },
	{ BUDGET_OPENAI, "POST", "/v1/audio/transcriptions" },
	{ BUDGET_OPENAI, "POST", "/v1/videos" },
	{ BUDGET_OPENAI, "POST", "/v1/fine_tuning/jobs" },
	{ BUDGET_OPENAI, "POST", "/v1/files" },
	{ BUDGET_OPENAI, "POST", "/v1/responses/resp_1/cancel" },
	{ BUDGET_OPENAI, "PUT", "/v1/chat/completions" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:batchGenerateContent" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/imagen-4.0-generate-001:predict" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/veo-3.0-generate-preview:predictLongRunning" },
	{ BUDGET_GEMINI, "POST", "/v1beta/models/text-embedding-004:embedContent" },
	{ BUDGET_GEMINI, "POST", "/v1beta/cachedContents" },
	{ BUDGET_OTHER, "POST", "/api/generate" },
};

static const char any_body[] = "{\"model\":\"m\",\"requests\":[{\"custom_id\":\"a\",\"params\":{\"max_tokens\":10}}]}";

/*
 * Invariant: a metered route forwards only endpoints the meter can price;
 * any other is refused (-EPERM: a 403) with one `latch:` line that names
 * the method and path and the kit field that allows it, audited as
 * budget.refused.endpoint, and nothing is reserved.  Controls: each
 * provider's priced endpoint, and the free ones, are reserved.
 */
Test(budget_endpoints, an_endpoint_the_meter_cannot_price_is_refused)
{
	static const struct endpoint priced[] = {
		{ BUDGET_ANTHROPIC, "POST", "/v1/messages" },
		{ BUDGET_ANTHROPIC, "POST", "/v1/messages/count_tokens" },
		{ BUDGET_ANTHROPIC, "GET", "/v1/models" },
		{ BUDGET_OPENAI, "POST", "/v1/chat/completions" },
		{ BUDGET_OPENAI, "POST", "/v1/responses" },
		{ BUDGET_OPENAI, "POST", "/v1/embeddings" },
		{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:generateContent" },
		{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" },
		{ BUDGET_GEMINI, "POST", "/v1beta/models/gemini-2.5-flash:countTokens" },
		{ BUDGET_GEMINI, "GET", "/v1beta/models" },
	};
	struct budget *b = open_default();
	struct bt_result r;
	int64_t rows;

	for (size_t i = 0; i < sizeof(priced) / sizeof(priced[0]); i++) {
		r = bt_exchange(b, "a1", priced[i].p, priced[i].method, priced[i].path, "{\"model\":\"gpt-4o\"}", 200,
				"", 0, 0, 0, BUDGET_END_GUEST_CUT);
		cr_expect_eq(r.rc, 0, "control %s %s: %s", priced[i].method, priced[i].path, r.line);
	}
	rows = bt_sql("SELECT count(*) FROM ledger");
	for (size_t i = 0; i < sizeof(unpriced) / sizeof(unpriced[0]); i++) {
		const struct endpoint *e = &unpriced[i];
		char want[256];

		r = bt_exchange(b, "a1", e->p, e->method, e->path, any_body, 200, "", 0, 0, 0, BUDGET_END_COMPLETE);
		cr_expect_eq(r.rc, -EPERM, "%s %s: rc %d", e->method, e->path, r.rc);
		snprintf(want, sizeof(want), "latch: %s %s is not an endpoint the spend meter can price for %s",
			 e->method, e->path, budget_provider_name(e->p));
		cr_expect(!strncmp(r.line, want, strlen(want)), "%s", r.line);
		cr_expect(strstr(r.line, "priced_endpoints"), "the line names the kit field: %s", r.line);
		cr_expect_null(strchr(r.line, '\n'));
		cr_expect_str_eq(r.reserve_note.decision, "refuse");
		cr_expect_str_eq(r.reserve_note.reason, "budget.refused.endpoint");
		cr_expect(strstr(r.reserve_note.fields, e->path), "%s", r.reserve_note.fields);
	}
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger"), rows, "nothing refused was reserved");
	budget_close(b);
}

/*
 * Invariant: a kit can allow an endpoint the meter can't price at a fixed
 * price a request: it is reserved that price against the dollar cap and
 * charged it, whatever the response says (a 4xx, which providers don't
 * bill, costs nothing); a '*' stands for bytes of one segment only; a
 * spelling trick of the priced path, another method, or another path is
 * still refused; a price past the cap is refused by the cap.
 */
Test(budget_endpoints, a_kit_priced_endpoint_is_charged_its_fixed_price)
{
	static const struct budget_fixed fixed[] = {
		{ "POST", "/v1/messages/batches", 5000000 },
		{ "GET", "/v1/messages/batches/*/results", 0 },
	};
	static const char resp[] = "{\"id\":\"msgbatch_01\",\"type\":\"message_batch\",\"processing_status\":"
				   "\"in_progress\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}";
	static const char *const still_refused[][2] = {
		{ "POST", "/v1/messages/batches/" },
		{ "POST", "/v1/messages//batches" },
		{ "POST", "/v1/messages/batches;x" },
		{ "POST", "/v1/messages/%62atches" },
		{ "PUT", "/v1/messages/batches" },
		{ "GET", "/v1/messages/batches/a/b/results" }, /* '*' never crosses a '/' */
		{ "GET", "/v1/messages/batches//results" },
		{ "GET", "/v1/messages/batches/msgbatch_01" },
	};
	struct budget_opts o;
	struct budget *b;
	struct budget_request rq;
	struct budget_ticket *t;
	struct budget_note note = { 0 };
	char line[512];

	bt_opts(&o);
	o.sandbox[BUDGET_ANTHROPIC].micros_per_day = 12000000; /* $12: two batches and change */
	b = bt_open(&o);
	for (int i = 0; i < 2; i++) {
		rq = bt_request("a1", BUDGET_ANTHROPIC, "/v1/messages/batches?beta=true", any_body);
		rq.fixed = fixed;
		rq.n_fixed = 2;
		cr_assert_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), 0, "%s", line);
		cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE kind = 'reserve' ORDER BY id DESC LIMIT 1"),
			     5000000);
		budget_response(t, 200, NULL, 0);
		budget_response(t, 200, resp, strlen(resp)); /* its usage is not the price */
		cr_assert_eq(budget_settle(b, t, BUDGET_END_COMPLETE, &note), 0);
		cr_assert_eq(budget_tick(b), 0);
		cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE kind = 'settle' ORDER BY id DESC LIMIT 1"),
			     5000000);
	}
	/* a third is past the $12 day: refused by the cap, with the kit's price named */
	cr_expect_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), -EDQUOT);
	cr_expect(strstr(line, "dollars_per_day cap for anthropic"), "%s", line);
	cr_expect(strstr(line, "this request needs up to $5.00"), "%s", line);
	/* a 4xx is not billed; the free one (0) and its '*' */
	rq = bt_request("a1", BUDGET_ANTHROPIC, "/v1/messages/batches/msgbatch_01/results", NULL);
	rq.method = "GET";
	rq.fixed = fixed;
	rq.n_fixed = 2;
	cr_assert_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), 0, "%s", line);
	budget_response(t, 200, NULL, 0);
	cr_assert_eq(budget_settle(b, t, BUDGET_END_COMPLETE, &note), 0);
	for (size_t i = 0; i < sizeof(still_refused) / sizeof(still_refused[0]); i++) {
		rq = bt_request("a1", BUDGET_ANTHROPIC, still_refused[i][1], any_body);
		rq.method = still_refused[i][0];
		rq.fixed = fixed;
		rq.n_fixed = 2;
		cr_expect_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), -EPERM, "%s %s", rq.method,
			     rq.path);
		cr_expect_str_eq(note.reason, "budget.refused.endpoint");
	}
	budget_close(b);

	/* settled: a 4xx costs nothing, a cut costs the price */
	bt_opts(&o);
	b = bt_open(&o);
	rq = bt_request("a2", BUDGET_ANTHROPIC, "/v1/messages/batches", any_body);
	rq.fixed = fixed;
	rq.n_fixed = 1;
	bt_allow_tools = 0;
	{
		struct bt_result r;

		/* bt_exchange() builds its own request: the fixed list goes through the one above */
		cr_assert_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), 0, "%s", line);
		budget_response(t, 400, NULL, 0);
		cr_assert_eq(budget_settle(b, t, BUDGET_END_COMPLETE, &note), 0);
		cr_assert_eq(budget_tick(b), 0);
		cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE kind = 'settle' ORDER BY id DESC LIMIT 1"), 0);
		cr_assert_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), 0, "%s", line);
		budget_response(t, 200, NULL, 0);
		cr_assert_eq(budget_settle(b, t, BUDGET_END_GUEST_CUT, &note), 0);
		cr_assert_eq(budget_tick(b), 0);
		cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE kind = 'settle' ORDER BY id DESC LIMIT 1"),
			     5000000);
		bt_how(r.how, sizeof(r.how));
		cr_expect_str_eq(r.how, "cut_guest");
	}
	/* a priced entry never replaces the meter's own pricing of an endpoint it knows */
	{
		static const struct budget_fixed cheap[] = { { "POST", "/v1/messages", 1 } };
		static const char msg[] = "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1024,\"messages\":[]}";

		rq = bt_request("a2", BUDGET_ANTHROPIC, "/v1/messages", msg);
		rq.fixed = cheap;
		rq.n_fixed = 1;
		cr_assert_eq(budget_reserve(b, &rq, &t, &note, line, sizeof(line)), 0, "%s", line);
		cr_expect_gt(bt_sql("SELECT micros FROM ledger WHERE kind = 'reserve' ORDER BY id DESC LIMIT 1"), 1000);
		budget_settle(b, t, BUDGET_END_GUEST_CUT, &note);
	}
	budget_close(b);
}

struct tool_case {
	enum budget_provider p;
	const char *path, *body;
	int tool; /* the enum budget_fetch_tool it asks for, or -1: none (a control) */
};

#define MSG_HEAD "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1024,"
#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"Read https://docs.example.org/a and summarise it\"}]"
#define RESP_HEAD "{\"model\":\"gpt-5\",\"input\":\"What is on the server?\","
#define GEM_HEAD "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"Summarise https://docs.example.org/a\"}]}],"
#define GEM_PATH "/v1beta/models/gemini-2.5-flash:generateContent"
#define GEM_SSE "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

static const struct tool_case tool_cases[] = {
	/* Anthropic: the web fetch tool, as the Messages API documents it, streamed and not */
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  MSG_HEAD MSGS ",\"tools\":[{\"type\":\"web_fetch_20250910\",\"name\":\"web_fetch\",\"max_uses\":5}]}",
	  BUDGET_TOOL_WEB_FETCH },
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  MSG_HEAD "\"stream\":true," MSGS ",\"tools\":[{\"name\":\"get_weather\",\"description\":\"d\","
		   "\"input_schema\":{\"type\":\"object\"}},{\"type\":\"web_fetch_20250910\",\"name\":\"web_fetch\","
		   "\"allowed_domains\":[\"docs.example.org\"],\"citations\":{\"enabled\":true}}]}",
	  BUDGET_TOOL_WEB_FETCH },
	{ BUDGET_ANTHROPIC, "/v1/messages", /* a later version, and the type spelt with an escape */
	  MSG_HEAD MSGS ",\"tools\":[{\"type\":\"web\\u005ffetch_20260101\",\"name\":\"web_fetch\"}]}",
	  BUDGET_TOOL_WEB_FETCH },
	/* Anthropic's MCP connector: mcp_servers at the top, and its toolset */
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  MSG_HEAD MSGS ",\"mcp_servers\":[{\"type\":\"url\",\"url\":\"https://mcp.example.com/sse\","
			"\"name\":\"example-mcp\",\"authorization_token\":\"t\"}]}",
	  BUDGET_TOOL_MCP },
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  MSG_HEAD "\"stream\":true," MSGS ",\"mcp_servers\":[{\"type\":\"url\",\"url\":\"https://mcp.example.com/\","
		   "\"name\":\"x\"}],\"tools\":[{\"type\":\"mcp_toolset\",\"mcp_server_name\":\"x\"}]}",
	  BUDGET_TOOL_MCP },
	{ BUDGET_ANTHROPIC, "/v1/messages", MSG_HEAD MSGS ",\"mcp_servers\":{\"url\":\"https://mcp.example.com/\"}}",
	  BUDGET_TOOL_MCP }, /* not a list: what would the upstream make of it? */
	{ BUDGET_ANTHROPIC, "/v1/messages", MSG_HEAD MSGS ",\"mcp\\u005fservers\":[{\"type\":\"url\",\"url\":\"u\"}]}",
	  BUDGET_TOOL_MCP },
	/* OpenAI Responses: a remote MCP server, streamed and not, and a connector */
	{ BUDGET_OPENAI, "/v1/responses",
	  RESP_HEAD "\"tools\":[{\"type\":\"mcp\",\"server_label\":\"dmcp\",\"server_url\":"
		    "\"https://mcp.example.com/sse\",\"require_approval\":\"never\"}]}",
	  BUDGET_TOOL_MCP },
	{ BUDGET_OPENAI, "/v1/responses",
	  RESP_HEAD "\"stream\":true,\"tools\":[{\"type\":\"web_search\"},{\"type\":\"mcp\",\"server_label\":\"g\","
		    "\"connector_id\":\"connector_googledrive\",\"authorization\":\"t\"}]}",
	  BUDGET_TOOL_MCP },
	{ BUDGET_OPENAI, "/v1/responses", RESP_HEAD "\"prompt\":{\"id\":\"pmpt_1\"}}",
	  BUDGET_TOOL_MCP }, /* a stored prompt may bring its own tools */
	/* Gemini: the URL context tool in both spellings, streamed and not */
	{ BUDGET_GEMINI, GEM_PATH, GEM_HEAD "\"tools\":[{\"url_context\":{}}]}", BUDGET_TOOL_URL_CONTEXT },
	{ BUDGET_GEMINI, GEM_SSE, GEM_HEAD "\"tools\":[{\"googleSearch\":{}},{\"urlContext\":{}}]}",
	  BUDGET_TOOL_URL_CONTEXT },
	{ BUDGET_GEMINI, GEM_PATH, GEM_HEAD "\"tools\":[{\"url\\u005fcontext\":{}}]}", BUDGET_TOOL_URL_CONTEXT },
	{ BUDGET_GEMINI, GEM_PATH, GEM_HEAD "\"cachedContent\":\"cachedContents/abc\"}",
	  BUDGET_TOOL_URL_CONTEXT }, /* cached content may hold the tools */
	/* controls: what only looks like them */
	{ BUDGET_ANTHROPIC, "/v1/messages", MSG_HEAD MSGS "}", -1 },
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  MSG_HEAD MSGS ",\"tools\":[{\"name\":\"web_fetch\",\"description\":\"the client's own fetch\","
			"\"input_schema\":{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"}}}}]}",
	  -1 },
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  MSG_HEAD "\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"web_fetch_tool_result\","
		   "\"tool_use_id\":\"srvtoolu_1\",\"content\":{\"type\":\"web_fetch_result\",\"url\":\"u\"}}]}],"
		   "\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\",\"max_uses\":2}]}",
	  -1 },
	{ BUDGET_ANTHROPIC, "/v1/messages", MSG_HEAD MSGS ",\"mcp_servers\":[]}", -1 },
	{ BUDGET_ANTHROPIC, "/v1/messages", MSG_HEAD MSGS ",\"mcp_servers\":null}", -1 },
	{ BUDGET_OPENAI, "/v1/responses",
	  RESP_HEAD "\"tools\":[{\"type\":\"function\",\"name\":\"mcp\",\"parameters\":{\"type\":\"object\"}}]}", -1 },
	{ BUDGET_OPENAI, "/v1/chat/completions",
	  "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":"
	  "\"function\",\"function\":{\"name\":\"url_context\",\"parameters\":{\"type\":\"object\"}}}]}",
	  -1 },
	{ BUDGET_GEMINI, GEM_PATH,
	  GEM_HEAD "\"tools\":[{\"functionDeclarations\":[{\"name\":\"url_context\",\"parameters\":{\"type\":"
		   "\"object\",\"properties\":{\"urlContext\":{\"type\":\"string\"}}}}]}]}",
	  -1 },
	{ BUDGET_GEMINI, GEM_PATH, GEM_HEAD "\"urlContext\":{}}", -1 }, /* outside the tools: no tool */
};

/*
 * Invariant: a request that has the provider itself fetch from a URL it
 * chooses (Anthropic's web_fetch tool and mcp_servers, OpenAI Responses'
 * mcp tool, Gemini's url_context) is refused on a metered route (-EPERM: a
 * 403) with one line naming the tool and allow_provider_tools, audited as
 * budget.refused.tool, nothing reserved; allowed, the same request is
 * reserved.  Controls: tools, blocks and members that only share a name.
 */
Test(budget_endpoints, a_tool_that_fetches_a_url_is_refused_unless_allowed)
{
	struct budget *b = open_default();

	for (size_t i = 0; i < sizeof(tool_cases) / sizeof(tool_cases[0]); i++) {
		const struct tool_case *c = &tool_cases[i];
		struct bt_result r;

		bt_allow_tools = 0;
		r = bt_exchange(b, "a1", c->p, "POST", c->path, c->body, 200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
		if (c->tool < 0) {
			cr_expect_eq(r.rc, 0, "control %zu: %s", i, r.line);
			continue;
		}
		cr_expect_eq(r.rc, -EPERM, "case %zu: rc %d (%s)", i, r.rc, c->body);
		cr_expect(strstr(r.line, budget_fetch_tool_name(c->tool)) && strstr(r.line, "allow_provider_tools"),
			  "case %zu: %s", i, r.line);
		cr_expect(!strncmp(r.line, "latch: ", 7) && !strchr(r.line, '\n'), "case %zu: %s", i, r.line);
		cr_expect_str_eq(r.reserve_note.reason, "budget.refused.tool", "case %zu", i);
		cr_expect(strstr(r.reserve_note.fields, budget_fetch_tool_name(c->tool)), "case %zu: %s", i,
			  r.reserve_note.fields);
		/* another tool allowed does not allow this one */
		bt_allow_tools = BT_ALL_TOOLS & ~BUDGET_TOOL_BIT(c->tool);
		r = bt_exchange(b, "a1", c->p, "POST", c->path, c->body, 200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
		cr_expect_eq(r.rc, -EPERM, "case %zu with the others allowed: rc %d", i, r.rc);
		bt_allow_tools = BUDGET_TOOL_BIT(c->tool);
		r = bt_exchange(b, "a1", c->p, "POST", c->path, c->body, 200, "", 0, 0, 0, BUDGET_END_GUEST_CUT);
		cr_expect_eq(r.rc, 0, "case %zu allowed: %s", i, r.line);
	}
	budget_close(b);
}
