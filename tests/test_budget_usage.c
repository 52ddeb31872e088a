// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_usage.c - usage is read from every format the providers
 * speak, streamed or not, and settled to the micro-dollar.
 *
 * One fixture per format (tests/fixtures/budget/), in the providers' shapes:
 * real field orders and extra fields, OpenAI's `usage: null` chunks and
 * `[DONE]`, the Responses API's event sequence, Anthropic's message_start /
 * ping / content_block_* / message_delta / message_stop, Gemini's JSON array
 * stream and its CRLF alt=sse stream.  Several fixtures carry text in which
 * the model "wrote" a usage object or an SSE event: a scanner that lost
 * track of strings would read those.  Each fixture is fed whole and in
 * chunks of 1, 3, 7 and 64 bytes (the meter sees whatever TCP delivers) and
 * must give the same tokens every time; the settlements are the fixtures'
 * tokens at the built-in prices, computed by hand in the comments.
 */
#include "budget_test.h"
#include "budget/internal.h"

TestSuite(budget_usage, .init = bt_setup, .fini = bt_teardown);

struct parse_case {
	const char *fixture;
	enum budget_format format;
	struct budget_tokens want;
};

static const struct parse_case cases[] = {
	{ "openai_chat.json", BUDGET_FORMAT_OPENAI_CHAT, { .input = 93, .cached = 1024, .output = 46 } },
	{ "openai_chat.sse", BUDGET_FORMAT_OPENAI_CHAT, { .input = 3157, .cached = 45056, .output = 1377 } },
	{ "openai_responses.json", BUDGET_FORMAT_OPENAI_RESPONSES, { .input = 36, .output = 1287 } },
	{ "openai_responses.sse", BUDGET_FORMAT_OPENAI_RESPONSES, { .input = 3882, .cached = 11520, .output = 2351 } },
	/* -1: no server_tool_use, so the searches are not said (settled as reserved: none here) */
	{ "anthropic.json",
	  BUDGET_FORMAT_ANTHROPIC,
	  { .input = 2095, .cached = 14336, .cache_write = 2051, .output = 503, .web_searches = -1 } },
	{ "anthropic.sse",
	  BUDGET_FORMAT_ANTHROPIC,
	  { .input = 472, .cached = 12288, .cache_write_1h = 1024, .output = 1015, .web_searches = -1 } },
	{ "anthropic_web_search.json", BUDGET_FORMAT_ANTHROPIC, { .input = 6039, .output = 931, .web_searches = 2 } },
	{ "anthropic_web_search.sse", BUDGET_FORMAT_ANTHROPIC, { .input = 10682, .output = 510, .web_searches = 2 } },
	{ "openai_responses_web_search.json",
	  BUDGET_FORMAT_OPENAI_RESPONSES,
	  { .input = 8120, .output = 742, .web_searches = 3 } },
	{ "openai_responses_web_search.sse",
	  BUDGET_FORMAT_OPENAI_RESPONSES,
	  { .input = 8314, .cached = 4096, .output = 903, .web_searches = 3 } },
	{ "gemini.json", BUDGET_FORMAT_GEMINI, { .input = 2048, .output = 1339 } },
	{ "gemini_array.json", BUDGET_FORMAT_GEMINI, { .input = 50000, .cached = 200000, .output = 1190 } },
	{ "gemini.sse", BUDGET_FORMAT_GEMINI, { .input = 31000, .output = 4100 } },
	/* grounded: the queries of the chunk that lists the most, each chunk's candidates summed */
	{ "gemini_grounding.json", BUDGET_FORMAT_GEMINI, { .input = 3600, .output = 800, .web_searches = 2 } },
	{ "gemini_grounding.sse", BUDGET_FORMAT_GEMINI, { .input = 10000, .output = 2000, .web_searches = 3 } },
	{ "gemini_grounding_array.json", BUDGET_FORMAT_GEMINI, { .input = 1000, .output = 600, .web_searches = 3 } },
};

static enum usage_result parse(const char *text, size_t len, enum budget_format f, size_t chunk,
			       struct budget_tokens *out)
{
	struct usage_parser u;
	enum usage_result r;

	budget_usage_init(&u, f);
	for (size_t off = 0; off < len;) {
		size_t n = chunk && chunk < len - off ? chunk : len - off;

		budget_usage_feed(&u, text + off, n);
		off += n;
	}
	r = budget_usage_finish(&u, out);
	budget_usage_free(&u);
	return r;
}

/* Every format, every chunking: the same tokens, and never a fake usage out of the model's text. */
Test(budget_usage, every_fixture_every_chunking)
{
	static const size_t chunks[] = { 0, 1, 3, 7, 64 };

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t len;
		char *text = bt_fixture(cases[c].fixture, &len);

		for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
			struct budget_tokens t;
			enum usage_result r = parse(text, len, cases[c].format, chunks[k], &t);

			cr_assert_eq(r, USAGE_OK, "%s in chunks of %zu: %s", cases[c].fixture, chunks[k],
				     budget_usage_result_name(r));
			cr_expect_eq(t.input, cases[c].want.input, "%s/%zu input %lld", cases[c].fixture, chunks[k],
				     (long long)t.input);
			cr_expect_eq(t.cached, cases[c].want.cached, "%s/%zu cached %lld", cases[c].fixture, chunks[k],
				     (long long)t.cached);
			cr_expect_eq(t.cache_write, cases[c].want.cache_write, "%s/%zu cache_write", cases[c].fixture,
				     chunks[k]);
			cr_expect_eq(t.cache_write_1h, cases[c].want.cache_write_1h, "%s/%zu cache_write_1h",
				     cases[c].fixture, chunks[k]);
			cr_expect_eq(t.output, cases[c].want.output, "%s/%zu output %lld", cases[c].fixture, chunks[k],
				     (long long)t.output);
			cr_expect_eq(t.web_searches, cases[c].want.web_searches, "%s/%zu web searches %lld",
				     cases[c].fixture, chunks[k], (long long)t.web_searches);
		}
		free(text);
	}
}

/* A fixture gzip'd (as Content-Encoding: gzip) into z; its length. */
static size_t gzip_fixture(const char *name, unsigned char *z, size_t cap)
{
	size_t len;
	char *text = bt_fixture(name, &len);
	z_stream zs = { 0 };

	cr_assert_eq(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK); /* 15+16: gzip */
	zs.next_in = (unsigned char *)text;
	zs.avail_in = (uInt)len;
	zs.next_out = z;
	zs.avail_out = (uInt)cap;
	cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
	deflateEnd(&zs);
	free(text);
	return cap - zs.avail_out;
}

/* A gzip'd body (the guest asked for it) is read through zlib, chunk by chunk. */
/*
 * A stream's leading BOM is dropped however the bytes are cut: byte by byte
 * the BOM was read as part of the first field's name (fuzz_scan: "unreadable
 * whole, no_usage when cut").  Control: a BOM-less stream, and the same
 * bytes whole.
 */
Test(budget_usage, a_bom_cut_anywhere_is_one_reading)
{
	static const char sse[] =
		"\xef\xbb\xbf" /* before a data line: glued to its name, the line would be lost */
		"data: {\"type\":\"message_start\",\"message\":{\"usage\":"
		"{\"input_tokens\":12,\"output_tokens\":1}}}\n\n"
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n"
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
	struct budget_tokens whole, cut;

	cr_assert_eq(parse(sse, sizeof(sse) - 1, BUDGET_FORMAT_ANTHROPIC, 0, &whole), USAGE_OK);
	cr_expect_eq(whole.input, 12);
	cr_expect_eq(whole.output, 7);
	for (size_t chunk = 1; chunk <= 4; chunk++) {
		cr_assert_eq(parse(sse, sizeof(sse) - 1, BUDGET_FORMAT_ANTHROPIC, chunk, &cut), USAGE_OK, "chunk %zu",
			     chunk);
		cr_expect_eq(cut.input, 12, "chunk %zu", chunk);
		cr_expect_eq(cut.output, 7, "chunk %zu", chunk);
	}
	cr_assert_eq(parse(sse + 3, sizeof(sse) - 4, BUDGET_FORMAT_ANTHROPIC, 1, &cut), USAGE_OK);
	cr_expect_eq(cut.output, 7);
}

Test(budget_usage, gzip_body_is_inflated_as_it_passes)
{
	unsigned char z[8192];
	size_t zlen = gzip_fixture("anthropic.sse", z, sizeof(z));
	struct budget_tokens t;

	cr_assert_eq(z[0], 0x1f);
	cr_assert_eq(parse((char *)z, zlen, BUDGET_FORMAT_ANTHROPIC, 5, &t), USAGE_OK);
	cr_expect_eq(t.output, 1015);
	/* control: the same bytes cut short are a compressed stream without its end */
	cr_expect_eq(parse((char *)z, zlen - 8, BUDGET_FORMAT_ANTHROPIC, 5, &t), USAGE_BAD);
}

struct flow_case {
	enum budget_provider provider;
	const char *path, *body, *fixture;
	int64_t want_micros; /* the fixture's tokens at the built-in prices, rounded up once */
	size_t context; /* bytes of conversation the body carries ("%s"), as big as the fixture's prompt */
};

static const struct flow_case flows[] = {
	/* gpt-4o: 93 x $2.50 + 1024 x $1.25 + 46 x $10.00 per M = 1972.5 -> 1973 */
	{ BUDGET_OPENAI, "/v1/chat/completions",
	  "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"system\",\"content\":\"You are a helpful assistant.\"},"
	  "{\"role\":\"user\",\"content\":\"Describe the image.\"}],\"max_tokens\":1024}",
	  "openai_chat.json", 1973, 0 },
	/* gpt-4o-mini: 3157 x 0.15 + 45056 x 0.075 + 1377 x 0.60 = 4678.95 -> 4679 */
	{ BUDGET_OPENAI, "/v1/chat/completions?api-version=1",
	  "{\"model\":\"gpt-4o-mini\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
	  "\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_completion_tokens\":4096}",
	  "openai_chat.sse", 4679, 4 * 48213 },
	/* gpt-5: 36 x 1.25 + 1287 x 10.00 = 12915 */
	{ BUDGET_OPENAI, "/v1/responses",
	  "{\"model\":\"gpt-5\",\"input\":\"Tell me a three sentence bedtime story about a unicorn.\","
	  "\"max_output_tokens\":4000}",
	  "openai_responses.json", 12915, 0 },
	/* gpt-5-codex: 3882 x 1.25 + 11520 x 0.125 + 2351 x 10.00 = 29802.5 -> 29803 */
	{ BUDGET_OPENAI, "/v1/responses",
	  "{\"model\":\"gpt-5-codex\",\"instructions\":\"You are Codex.\",\"input\":[{\"type\":\"message\",\"role\":"
	  "\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"fix the build\"}]}],\"tools\":[],"
	  "\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,\"reasoning\":{\"effort\":\"medium\",\"summary\":"
	  "\"auto\"},\"store\":false,\"stream\":true,\"include\":[\"reasoning.encrypted_content\"]}",
	  "openai_responses.sse", 29803, 0 },
	/* claude-sonnet-4-5: 2095 x 3 + 14336 x 0.30 + 2051 x 3.75 + 503 x 15 = 25822.05 -> 25823 */
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  "{\"max_tokens\":8192,\"messages\":[{\"role\":\"user\",\"content\":\"Read src/main.c\"}],"
	  "\"model\":\"claude-sonnet-4-5\",\"system\":[{\"type\":\"text\",\"text\":\"You are Claude Code.\","
	  "\"cache_control\":{\"type\":\"ephemeral\"}}],\"tools\":[{\"name\":\"read_file\",\"input_schema\":"
	  "{\"type\":\"object\",\"properties\":{\"max_tokens\":{\"type\":\"integer\"}}}}]}",
	  "anthropic.json", 25823, 0 },
	/* claude-opus-4-1: 472 x 15 + 12288 x 1.50 + 1024 x 2 x 15 (1h write) + 1015 x 75 = 132357 */
	{ BUDGET_ANTHROPIC, "/v1/messages?beta=true",
	  "{\"model\":\"claude-opus-4-1-20250805\",\"max_tokens\":32000,\"stream\":true,\"messages\":[{\"role\":"
	  "\"user\",\"content\":\"Hello\"}]}",
	  "anthropic.sse", 132357, 0 },
	/* gemini-2.5-flash: 2048 x 0.30 + (221 + 1118 thinking) x 2.50 = 3961.9 -> 3962 */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"contents\":[{\"parts\":[{\"text\":\"Explain how AI works in a few words\"}]}],\"generationConfig\":"
	  "{\"thinkingConfig\":{\"thinkingBudget\":1024},\"maxOutputTokens\":8192}}",
	  "gemini.json", 3962, 0 },
	/* gemini-2.5-pro past 200k input: 50000 x 2.50 + 200000 x 0.625 + 1190 x 15 = 267850 */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
	  "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"Summarise the repository.\"}]}],"
	  "\"cachedContent\":\"cachedContents/abc123\"}",
	  "gemini_array.json", 267850, 0 },
	/* gemini-2.0-flash: 31000 x 0.10 + 4100 x 0.40 = 4740 */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
	  "{\"contents\":[{\"parts\":[{\"text\":\"Write a story about %s\"}]}]}", "gemini.sse", 4740, 4 * 31000 },
	/* claude-sonnet-4-5: 6039 x 3 + 931 x 15 = 32082, and 2 web searches at $10 per 1,000: 52082 */
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\",\"content\":"
	  "\"When was libbpf last released? %s\"}],\"tools\":[{\"type\":\"web_search_20250305\",\"name\":"
	  "\"web_search\"}]}",
	  "anthropic_web_search.json", 52082, 4 * 6039 },
	/* claude-haiku-4-5: 10682 x 1 + 510 x 5 = 13232, and 2 web searches: 33232 */
	{ BUDGET_ANTHROPIC, "/v1/messages",
	  "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1024,\"stream\":true,\"messages\":[{\"role\":"
	  "\"user\",\"content\":\"Will it rain tomorrow? %s\"}],\"tools\":[{\"type\":\"web_search_20250305\","
	  "\"name\":\"web_search\",\"max_uses\":5,\"user_location\":{\"type\":\"approximate\",\"city\":"
	  "\"Oslo\"}}]}",
	  "anthropic_web_search.sse", 33232, 4 * 10682 },
	/* gpt-5: 8120 x 1.25 + 742 x 10 = 17570, and 3 web_search_call items at $25 per 1,000: 92570 */
	{ BUDGET_OPENAI, "/v1/responses",
	  "{\"model\":\"gpt-5\",\"input\":\"What changed in the latest release? %s\",\"tools\":"
	  "[{\"type\":\"web_search\"}],\"max_output_tokens\":4000}",
	  "openai_responses_web_search.json", 92570, 4 * 8120 },
	/* gpt-5: 8314 x 1.25 + 4096 x 0.125 + 903 x 10 = 19934.5, and 3 calls: 94934.5 -> 94935 */
	{ BUDGET_OPENAI, "/v1/responses",
	  "{\"model\":\"gpt-5\",\"stream\":true,\"input\":\"What changed? %s\",\"tools\":[{\"type\":"
	  "\"web_search\"}],\"max_tool_calls\":6,\"max_output_tokens\":4000}",
	  "openai_responses_web_search.sse", 94935, 4 * 12410 },
	/* gemini-2.5-flash: (1200 + 2400 tool use) x 0.30 + (300 + 500) x 2.50 = 3080, and one grounded prompt
	 * at $35 per 1,000 for its 2 queries: 38080 */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent",
	  "{\"contents\":[{\"parts\":[{\"text\":\"Who won euro 2024? %s\"}]}],\"tools\":[{\"google_search\":{}}]}",
	  "gemini_grounding.json", 38080, 4 * 1200 },
	/* gemini-3-pro-preview: (4000 + 6000) x 2 + (700 + 1300) x 12 = 44000, and 3 queries at $14 per 1,000
	 * (listed twice in the stream, counted once): 86000 */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse",
	  "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"What is new in Rust 1.91? %s\"}]}],"
	  "\"tools\":[{\"googleSearch\":{}}],\"generationConfig\":{\"thinkingConfig\":{\"thinkingLevel\":\"low\"}}}",
	  "gemini_grounding.sse", 86000, 4 * 4000 },
	/* gemini-flash-latest (an alias: either way of billing, the dearer): 1000 x 0.30 + 600 x 2.50 = 1800,
	 * and 3 queries of two candidates: $0.042 by query against $0.035 a prompt: 43800 */
	{ BUDGET_GEMINI, "/v1beta/models/gemini-flash-latest:streamGenerateContent",
	  "{\"contents\":[{\"parts\":[{\"text\":\"Latest Python? %s\"}]}],\"tools\":[{\"google_search\":{}}],"
	  "\"generationConfig\":{\"candidateCount\":2}}",
	  "gemini_grounding_array.json", 43800, 4 * 1000 },
};

/* Settled from the real usage at the table's prices, to the micro-dollar, under the reservation. */
Test(budget_usage, settlements_match_the_price_table)
{
	struct budget_opts o;
	struct budget *b;

	bt_allow_tools = BT_ALL_TOOLS; /* cached content may hold a url_context tool: allowed here */

	bt_opts(&o);
	b = bt_open(&o);
	for (size_t i = 0; i < sizeof(flows) / sizeof(flows[0]); i++) {
		size_t len, n = strlen(flows[i].body) + flows[i].context + 1;
		char *resp = bt_fixture(flows[i].fixture, &len), *ctx = malloc(flows[i].context + 1), *body = malloc(n);
		struct bt_result r;

		/* ordinary prose: about 4 bytes a token, as a real conversation */
		for (size_t k = 0; k < flows[i].context; k++)
			ctx[k] = "the quick brown fox "[k % 20];
		ctx[flows[i].context] = '\0';
		if (flows[i].context)
			snprintf(body, n, flows[i].body, ctx);
		else
			snprintf(body, n, "%s", flows[i].body);
		r = bt_exchange(b, "agent1", flows[i].provider, "POST", flows[i].path, body, 200, resp, len, 13, 0,
				BUDGET_END_COMPLETE);

		cr_assert_eq(r.rc, 0, "%s: %s", flows[i].fixture, r.line);
		cr_expect_str_eq(r.how, "usage", "%s", flows[i].fixture);
		cr_expect_eq(r.charged, flows[i].want_micros, "%s: charged %lld, want %lld", flows[i].fixture,
			     (long long)r.charged, (long long)flows[i].want_micros);
		cr_expect_geq(r.reserved, r.charged, "%s: reserved %lld below the charge %lld", flows[i].fixture,
			      (long long)r.reserved, (long long)r.charged);
		cr_expect_str_empty(r.reserve_note.warning, "%s: %s", flows[i].fixture, r.reserve_note.warning);
		/* a settlement below its reservation is reported for the audit log */
		cr_expect_str_eq(r.settle_note.decision, "settle");
		cr_expect_str_eq(r.settle_note.reason, "budget.settled.usage");
		cr_expect(strstr(r.settle_note.fields, "\"tokens\""), "%s", r.settle_note.fields);
		free(resp);
		free(ctx);
		free(body);
	}
	budget_close(b);
}

/*
 * A settled ticket is kept with its scanners' memory for the next
 * reservation (budget.c's spares).  Invariant: a kept ticket reads its
 * exchange as a fresh one does.  Attack: each exchange follows one cut in
 * the middle of a body (a scanner left inside a string, an SSE event, a
 * gzip stream), in the other mode (JSON after SSE, SSE after JSON), and
 * must still be charged its fixture's tokens to the micro-dollar; the cut
 * ones are charged their reservation (Gemini's SSE stream, the usage of its last
 * whole event: each carries one).  Control: the spares were used.
 */
Test(budget_usage, a_kept_ticket_reads_its_exchange_as_a_fresh_one)
{
	static const size_t order[] = { 1, 0, 3, 2, 5, 4, 8, 6, 7 }; /* SSE, JSON, SSE, JSON... */
	struct budget_opts o;
	struct budget *b;
	size_t len;

	bt_allow_tools = BT_ALL_TOOLS; /* the flows above, cached content among them */
	unsigned char z[8192];
	/* a gzip'd body cut short: its ticket's inflate state is not what the next one reads with */
	size_t zlen = gzip_fixture("anthropic.sse", z, sizeof(z));

	bt_opts(&o);
	b = bt_open(&o);
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		const struct flow_case *cut = &flows[order[k]], *f = &flows[order[(k + 1) % 9]];
		char *resp = bt_fixture(cut->fixture, &len), *body = malloc(strlen(cut->body) + 1);
		struct bt_result r;

		snprintf(body, strlen(cut->body) + 1, "%s", cut->body); /* its "%s" as context: 2 bytes */
		if (k == 4)
			r = bt_exchange(b, "agent1", BUDGET_ANTHROPIC, "POST", flows[5].path, flows[5].body, 200,
					(char *)z, zlen, 7, zlen / 2, BUDGET_END_COMPLETE);
		else
			r = bt_exchange(b, "agent1", cut->provider, "POST", cut->path, body, 200, resp, len, 5,
					len / 2 + 1, BUDGET_END_COMPLETE);
		cr_assert_eq(r.rc, 0, "%s: %s", cut->fixture, r.line);
		if (!strcmp(cut->fixture, "gemini.sse") && k != 4)
			cr_expect_str_eq(r.how, "usage", "%s cut at half: its last whole event's usage", cut->fixture);
		else
			cr_expect_eq(r.charged, r.reserved, "%s cut at half: charged %lld of %lld", cut->fixture,
				     (long long)r.charged, (long long)r.reserved);
		free(resp);
		free(body);
		if (f->context) /* the flows with context: settlements_match_the_price_table's */
			continue;
		resp = bt_fixture(f->fixture, &len);
		cr_assert_geq(b->n_spare, 1, "the cut exchange's ticket is kept");
		r = bt_exchange(b, "agent1", f->provider, "POST", f->path, f->body, 200, resp, len, 11, 0,
				BUDGET_END_COMPLETE);
		cr_assert_eq(r.rc, 0, "%s: %s", f->fixture, r.line);
		cr_expect_str_eq(r.how, "usage", "%s after a cut %s: %s", f->fixture, cut->fixture, r.how);
		cr_expect_eq(r.charged, f->want_micros, "%s after a cut %s: charged %lld, want %lld", f->fixture,
			     cut->fixture, (long long)r.charged, (long long)f->want_micros);
		free(resp);
	}
	budget_close(b);
}

/* The ledger holds integers only: no REAL ever lands in it. */
Test(budget_usage, ledger_has_no_floats)
{
	struct budget_opts o;
	struct budget *b;
	size_t len;
	char *resp = bt_fixture("anthropic.json", &len);

	bt_opts(&o);
	b = bt_open(&o);
	bt_exchange(b, "agent1", BUDGET_ANTHROPIC, "POST", "/v1/messages", flows[4].body, 200, resp, len, 0, 0,
		    BUDGET_END_COMPLETE);
	budget_close(b);
	cr_assert_eq(bt_sql("SELECT count(*) FROM ledger"), 2);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE typeof(micros) != 'integer' OR typeof(time_ns) != "
			    "'integer'"),
		     0);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE typeof(input_tokens) = 'real' OR "
			    "typeof(cap_micros_day) = 'real'"),
		     0);
	free(resp);
}
