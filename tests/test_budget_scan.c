// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_scan.c - the odd corners of what the meter reads, pinned.
 *
 * Each request body below is read by budget_request_inspect() and each response
 * by the usage reader; the expected results are what the meter gave when
 * every captured value went through jansson (they were recorded from that
 * code before the scanner learned to read plain integers and strings
 * itself), so a faster reader must decide exactly the same: floats such as
 * 1.0 and 1e3, negatives and -0, leading zeros, integers past int64, strings
 * with escapes, bad UTF-8 or control bytes, keys with escapes, duplicates,
 * nulls, values too deep or too long to be watched.  Every response is also
 * fed in chunks of 1, 2, 3, 5, 7 and 13 bytes and cut in two at every byte:
 * a value, a key or an SSE line split anywhere reads the same.
 */
#include "budget_test.h"
#include "budget/internal.h"

#define AN BUDGET_FORMAT_ANTHROPIC
#define OC BUDGET_FORMAT_OPENAI_CHAT
#define OR BUDGET_FORMAT_OPENAI_RESPONSES
#define GE BUDGET_FORMAT_GEMINI

struct req_case {
	enum budget_format f;
	const char *body;
	bool readable, ambiguous;
	const char *model;
	int64_t max_output, choices;
	bool server_state;
	bool unbounded; /* a count of outputs that is not a number */
};

struct usage_case {
	enum budget_format f;
	const char *body;
	enum usage_result result;
	struct budget_tokens want;
};

/* clang-format off */
static const struct req_case req_cases[] = {
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1024}",
	  true, false, "claude-haiku-4-5", 1024LL, 1, false, false },
	{ AN, " \n{ \"model\" : \"claude-haiku-4-5\" , \"max_tokens\" : 1024 } \n",
	  true, false, "claude-haiku-4-5", 1024LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1.0}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1e3}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1E3}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":-5}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":-0}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":0}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":01}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":12abc}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1-2}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":9223372036854775807}",
	  true, false, "claude-haiku-4-5", 9223372036854775807LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":9223372036854775808}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":99999999999999999999999}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1000000000000000000}",
	  true, false, "claude-haiku-4-5", 1000000000000000000LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":\"1024\"}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":null}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":true}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":nul}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":[1]}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":{\"a\":1}}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":5,\"max_tokens\":7}",
	  false, true, "", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",\"model\":\"claude-haiku-4-5\"}",
	  false, true, "", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude\\u002dhaiku-4-5\",\"max_tokens\":10}",
	  true, false, "claude-haiku-4-5", 10LL, 1, false, false },
	{ AN, "{\"model\":\"claude\\/haiku\",\"max_tokens\":10}",
	  true, false, "claude/haiku", 10LL, 1, false, false },
	{ AN, "{\"model\":\"claude\\\"haiku\",\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":\"claude haiku\",\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":\"claude\thaiku\",\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":\"caf\xc3\xa9\",\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":\"caf\xff\",\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":\"\",\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":null,\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":42,\"max_tokens\":10}",
	  true, false, "", 10LL, 1, false, false },
	{ AN, "{\"model\":\"a123456789b123456789c123456789d123456789e123456789f123456789abcd\"}",
	  true, false, "a123456789b123456789c123456789d123456789e123456789f123456789abcd", 0LL, 1, false, false },
	{ AN, "{\"model\":\"a123456789b123456789c123456789d123456789e123456789f123456789abcde\"}",
	  true, false, "", 0LL, 1, false, false },
	{ AN, "{\"model\":\"models/claude-haiku-4-5\"}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "{\"model\":\"m@x:1+y.z_w/v\"}",
	  true, false, "m@x:1+y.z_w/v", 0LL, 1, false, false },
	{ AN, "{\"max\\u005ftokens\":5,\"model\":\"claude-haiku-4-5\"}",
	  true, false, "claude-haiku-4-5", 5LL, 1, false, false },
	{ AN, "{\"max_tokens\":5,\"model\":\"claude-haiku-4-5\",\"max_tokens2\":9,\"max_token\":8}",
	  true, false, "claude-haiku-4-5", 5LL, 1, false, false },
	{ AN, "{\"x\":{\"max_tokens\":5},\"model\":\"claude-haiku-4-5\"}",
	  true, false, "claude-haiku-4-5", 0LL, 1, false, false },
	{ AN, "[{\"model\":\"claude-haiku-4-5\"}]",
	  false, false, "", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\"} x",
	  false, false, "", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\"}{}",
	  false, false, "", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\",}",
	  false, false, "", 0LL, 1, false, false },
	{ AN, "{\"model\":\"claude-haiku-4-5\"",
	  false, false, "", 0LL, 1, false, false },
	{ AN, "",
	  false, false, "", 0LL, 1, false, false },
	{ AN, "   ",
	  false, false, "", 0LL, 1, false, false },
	{ AN, "{\"a\":[[[[[[[[[[[[[[{\"file_id\":\"f\"}]]]]]]]]]]]]]]}",
	  true, false, "", 0LL, 1, false, false },
	{ AN, "{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{\"h\":{\"i\":{\"j\":{\"k\":{\"file_id\":\"f\"}}}}}}}}}}}}",
	  true, false, "", 0LL, 1, true, false },
	{ AN, "{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{\"h\":{\"i\":{\"j\":{\"k\":{\"l\":{\"file_id\":\"f\"}}}}}}}}}}}}}",
	  true, false, "", 0LL, 1, false, false },
	{ AN, "{\"messages\":[{\"content\":[{\"fileUri\":null}]}]}",
	  true, false, "", 0LL, 1, true, false },
	{ AN, "{\"file_uri\":1,\"file_uri\":2}",
	  true, false, "", 0LL, 1, true, false },
	{ AN, "{\"x\":\"\\\"file_id\\\":1\"}",
	  true, false, "", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"max_tokens\":100,\"max_completion_tokens\":16000,\"n\":3}",
	  true, false, "gpt-4o", 16000LL, 3, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":0}",
	  true, false, "gpt-4o", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":500}",
	  true, false, "gpt-4o", 0LL, 500, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":2.0}",
	  true, false, "gpt-4o", 0LL, 2, false, false },
	{ OC, "{\"model\":\"models/gpt-4o\"}",
	  true, false, "gpt-4o", 0LL, 1, false, false },
	{ OR, "{\"model\":\"gpt-5\",\"previous_response_id\":null,\"conversation\":null,\"prompt\":null}",
	  true, false, "gpt-5", 0LL, 1, false, false },
	{ OR, "{\"model\":\"gpt-5\",\"previous_response_id\":\"\"}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"conversation\":{\"id\":\"c\"}}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"prompt\":{\"x\":1.5e}}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"prompt\":{\"x\":01}}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"prompt\":false}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"prompt\":\"\\ud800\"}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"prompt\":\"\\u0000\"}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"max_output_tokens\":64}",
	  true, false, "gpt-5", 64LL, 1, false, false },
	{ GE, "{\"generationConfig\":{\"maxOutputTokens\":10,\"max_output_tokens\":60000,\"candidateCount\":2}}",
	  true, false, "", 60000LL, 2, false, false },
	{ GE, "{\"generation_config\":{\"candidate_count\":200},\"model\":\"gemini-2.5-pro\"}",
	  true, false, "", 0LL, 200, false, false },
	/* keys with escapes are read decoded, as the upstream reads them; a key twice once decoded is ambiguous */
	{ OC, "{\"model\":\"gpt-4o\",\"\\u006e\":64}",
	  true, false, "gpt-4o", 0LL, 64, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"max_tokens\":16,\"max_t\\u006fkens\":4000}",
	  false, true, "", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":1,\"\\u006e\":64}",
	  false, true, "", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"x\":\"a\\\"\\\\\",\"y\":\"\\\\\"}",
	  true, false, "gpt-4o", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"x\":\"\\\\\\\":1\"}",
	  true, false, "gpt-4o", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"\\\\u006e\":8,\"x\":\"\\\\\\u006e\",\"\\u006e\":2}",
	  true, false, "gpt-4o", 0LL, 2, false, false },
	{ OR, "{\"model\":\"gpt-5\",\"previous_\\u0072esponse_id\":\"resp_1\"}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"input\":[{\"content\":[{\"t\\u0079pe\":\"input_file\",\"file_\\u0069d\":\"f\"}]}]}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ OR, "{\"model\":\"gpt-5\",\"input\":[{\"content\":[{\"type\":\"input_file\",\"file_url\":\"https://x/y.pdf\"}]}]}",
	  true, false, "gpt-5", 0LL, 1, true, false },
	{ GE, "{\"generationConfig\":{\"candidate\\u0043ount\":8}}",
	  true, false, "", 0LL, 8, false, false },
	/* counts of outputs: a number is rounded up; anything else can't be bounded */
	{ OC, "{\"model\":\"gpt-4o\",\"n\":1e3}",
	  true, false, "gpt-4o", 0LL, 1000, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":2.5}",
	  true, false, "gpt-4o", 0LL, 3, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":null}",
	  true, false, "gpt-4o", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":-3}",
	  true, false, "gpt-4o", 0LL, 1, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"best_of\":20,\"n\":2}",
	  true, false, "gpt-4o", 0LL, 20, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":3,\"prompt\":[\"a\",\"b\",[1,2]]}",
	  true, false, "gpt-4o", 0LL, 9, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":3,\"prompt\":[1,2,3]}",
	  true, false, "gpt-4o", 0LL, 3, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"prompt\":[[1],[2],[3],[4]]}",
	  true, false, "gpt-4o", 0LL, 4, false, false },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":99999999999999999999}",
	  true, false, "gpt-4o", 0LL, 1, false, true },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":\"128\"}",
	  true, false, "gpt-4o", 0LL, 1, false, true },
	{ OC, "{\"model\":\"gpt-4o\",\"best_of\":true}",
	  true, false, "gpt-4o", 0LL, 1, false, true },
	{ GE, "{\"generationConfig\":{\"candidateCount\":[8]}}",
	  true, false, "", 0LL, 1, false, true },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":1e300}",
	  true, false, "gpt-4o", 0LL, 9223372036854775807LL, false, false },
	{ GE, "{\"cachedContent\":null}",
	  true, false, "", 0LL, 1, false, false },
	{ GE, "{\"cached_content\":\"c/1\"}",
	  true, false, "", 0LL, 1, true, false },
	{ GE, "{\"generationConfig\":{\"maxOutputTokens\":10},\"generationConfig\":{}}",
	  true, false, "", 10LL, 1, false, false },
};

static const struct usage_case usage_cases[] = {
	{ OC, "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 5 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":4}}}",
	  USAGE_OK, { .input = 6, .cached = 4, .cache_write = 0, .cache_write_1h = 0, .output = 5 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":10.0,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":1e1,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":-1,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":-0,\"completion_tokens\":5}}",
	  USAGE_OK, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 5 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0}}",
	  USAGE_OK, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":00,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":10000000000,\"completion_tokens\":5}}",
	  USAGE_OK, { .input = 10000000000, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 5 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":10000000001,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":9223372036854775808,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":\"10\",\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":null,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":true,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":10x,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,\"prompt_tokens\":10}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt\\u005ftokens\":10,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":null}",
	  USAGE_NONE, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":[]}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5},\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":4}}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"error\":null,\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 5 } },
	{ OC, "{\"error\":{\"message\":\"x\"},\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}",
	  USAGE_ERROR, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "{\"choices\":[{\"text\":\"\\\"usage\\\":{\\\"prompt_tokens\\\":1}\"}],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 5 } },
	{ OC, "data: {\"usage\":null}\n\ndata: {\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
	  USAGE_OK, { .input = 7, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 2 } },
	{ OC, "data: {\"usage\":null}\r\n\r\ndata: {\"usage\":{\"prompt_tokens\":7,\r\ndata: \"completion_tokens\":2}}\r\n\r\n",
	  USAGE_OK, { .input = 7, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 2 } },
	{ OC, "data: {\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2.5}}\n\n",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OC, "data: {\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\ndata: nope\n\n",
	  USAGE_OK, { .input = 7, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 2 } },
	{ AN, "{\"type\":\"message\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3,\"cache_creation\":{\"ephemeral_5m_input_tokens\":4,\"ephemeral_1h_input_tokens\":6}}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 4, .cache_write_1h = 6, .output = 3, .web_searches = -1 } },
	{ AN, "{\"type\":\"mess\\u0061ge\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 3, .web_searches = -1 } },
	{ AN, "{\"type\":\"error\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_ERROR, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ AN, "{\"type\":\"err\\u006fr\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_ERROR, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ AN, "{\"type\":7,\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ AN, "{\"type\":\"a\",\"type\":\"b\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ AN, "{\"type\":\"caf\xc3\xa9\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 3, .web_searches = -1 } },
	{ AN, "{\"type\":\"caf\xff\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ AN, "{\"type\":\"a\tb\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ AN, "{\"type\":\"\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 3, .web_searches = -1 } },
	{ AN, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	      "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20}}\n\n"
	      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	  USAGE_OK, { .input = 9, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 20, .web_searches = -1 } },
	{ AN, "data: {\"type\":\"message\\u005fstart\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	      "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20}}\n\n"
	      "data: {\"type\":\"message_stop\"}\n\n",
	  USAGE_OK, { .input = 9, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 20, .web_searches = -1 } },
	{ AN, "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	      "data: {\"type\":\"message_delta_but_longer_than_forty_eight_characters_in_all\",\"usage\":{\"output_tokens\":20}}\n\n"
	      "data: {\"type\":\"message_stop\"}\n\n",
	  USAGE_OK, { .input = 9, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 1, .web_searches = -1 } },
	{ AN, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	      "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20,\"output_tokens\":21}}\n\n"
	      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ AN, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	  USAGE_OK, { .input = 9, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 1, .web_searches = -1 } },
	{ OR, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":6,\"input_tokens_details\":{\"cached_tokens\":2}}}}\n\n",
	  USAGE_OK, { .input = 3, .cached = 2, .cache_write = 0, .cache_write_1h = 0, .output = 6 } },
	{ OR, "data: {\"type\":\"response.incomplete\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}}\n\n",
	  USAGE_OK, { .input = 5, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 6 } },
	{ OR, "data: {\"type\":\"response.failed\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}}\n\n",
	  USAGE_ERROR, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ OR, "{\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}",
	  USAGE_OK, { .input = 5, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 6 } },
	{ GE, "[{\"usageMetadata\":{\"promptTokenCount\":5}},{\"usageMetadata\":{\"promptTokenCount\":8,\"candidatesTokenCount\":3,\"thoughtsTokenCount\":2,\"toolUsePromptTokenCount\":1,\"cachedContentTokenCount\":4}}]",
	  USAGE_OK, { .input = 5, .cached = 4, .cache_write = 0, .cache_write_1h = 0, .output = 5 } },
	{ GE, "[{\"usageMetadata\":{\"promptTokenCount\":5}},{\"usageMetadata\":{\"promptTokenCount\":8.0}}]",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	{ GE, "{\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":3}}",
	  USAGE_OK, { .input = 5, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 3 } },
	{ GE, "data: {\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":3}}\r\n\r\n",
	  USAGE_OK, { .input = 5, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 3 } },
	{ GE, "{\"usageMetadata\":{\"promptTokenCount\":5,\"promptTokenCount\":5}}",
	  USAGE_BAD, { .input = 0, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 0 } },
	/* web searches: said (JSON, or a message_delta's cumulative usage), unsaid (-1: charged as reserved), or unreadable */
	{ AN, "{\"type\":\"message\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3,\"server_tool_use\":{\"web_search_requests\":2,\"web_fetch_requests\":1}}}",
	  USAGE_OK, { .input = 10, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 3, .web_searches = 2 } },
	{ AN, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n"
	      "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20,\"server_tool_use\":{\"web_search_requests\":3}}}\n\n"
	      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	  USAGE_OK, { .input = 9, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 20, .web_searches = 3 } },
	{ AN, "{\"type\":\"message\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3,\"server_tool_use\":{\"web_search_requests\":\"2\"}}}",
	  USAGE_BAD, { 0 } },
	{ AN, "{\"type\":\"message\",\"usage\":{\"input_tokens\":10,\"output_tokens\":3,\"server_tool_use\":{\"web_search_requests\":2,\"web_search_requests\":0}}}",
	  USAGE_BAD, { 0 } },
	/* Gemini's image tokens: the IMAGE modality of the details, at the image prices; more than the count, or
	 * details that are not a list of modalities, are unreadable */
	{ GE, "{\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":1300,\"promptTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":5},{\"modality\":\"IMAGE\",\"tokenCount\":4}],\"candidatesTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":10},{\"modality\":\"IMAGE\",\"tokenCount\":1290}]}}",
	  USAGE_OK, { .input = 5, .output = 10, .image_input = 4, .image_output = 1290 } },
	{ GE, "data: {\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":1290,\"candidatesTokensDetails\":[{\"modality\":\"IMAGE\",\"tokenCount\":1290}]}}\r\n\r\n",
	  USAGE_OK, { .input = 9, .output = 0, .image_output = 1290 } },
	{ GE, "{\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":10,\"candidatesTokensDetails\":[{\"modality\":\"IMAGE\",\"tokenCount\":1290}]}}",
	  USAGE_BAD, { 0 } },
	{ GE, "{\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":1290,\"candidatesTokensDetails\":{\"modality\":\"IMAGE\",\"tokenCount\":1290}}}",
	  USAGE_BAD, { 0 } },
	{ GE, "{\"usageMetadata\":{\"promptTokenCount\":9,\"candidatesTokenCount\":1290,\"candidatesTokensDetails\":[{\"modality\":\"IMAGE\",\"tokenCount\":\"1290\"}]}}",
	  USAGE_BAD, { 0 } },
	/* a blank, then 'x' (a zlib header's first byte): a plain SSE stream however it is cut (fuzz_scan found it
	 * read as zlib, so unreadable, when a chunk ended after the blank) */
	{ OC, " x\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n",
	  USAGE_OK, { .input = 5, .cached = 0, .cache_write = 0, .cache_write_1h = 0, .output = 3 } },
};
/* clang-format on */

Test(budget_scan, request_bodies_read_as_pinned)
{
	for (size_t i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
		const struct req_case *c = &req_cases[i];
		struct request_facts f;

		budget_request_inspect(c->f, c->body, strlen(c->body), &f);
		cr_expect_eq(f.readable, c->readable, "case %zu %s: readable %d", i, c->body, f.readable);
		cr_expect_eq(f.ambiguous, c->ambiguous, "case %zu %s: ambiguous %d", i, c->body, f.ambiguous);
		cr_expect_str_eq(f.model, c->model, "case %zu %s: model '%s'", i, c->body, f.model);
		cr_expect_eq(f.max_output, c->max_output, "case %zu %s: max_output %lld", i, c->body,
			     (long long)f.max_output);
		cr_expect_eq(f.choices, c->choices, "case %zu %s: choices %lld", i, c->body, (long long)f.choices);
		cr_expect_eq(f.server_state, c->server_state, "case %zu %s: server_state %d", i, c->body,
			     f.server_state);
		cr_expect_eq(f.unbounded, c->unbounded, "case %zu %s: unbounded %d", i, c->body, f.unbounded);
	}
}

/* A body that is longer than a capture: the value is present, not read. */
Test(budget_scan, request_values_longer_than_a_capture)
{
	size_t n = JSCAN_CAPTURE + 100;
	char *body = malloc(n + 200);
	struct request_facts f;

	cr_assert_not_null(body);
	for (int k = 0; k < 2; k++) {
		int len = snprintf(body, 200, "{\"model\":\"gpt-5\",\"%s\":\"", k ? "model" : "conversation");

		memset(body + len, 'a', n);
		strcpy(body + len + n, "\"}");
		budget_request_inspect(BUDGET_FORMAT_OPENAI_RESPONSES, body, strlen(body), &f);
		/* "conversation": present and not null; a second "model": ambiguous */
		cr_expect_eq(f.readable, !k);
		cr_expect_eq(f.server_state, !k);
		cr_expect_eq(f.ambiguous, k);
	}
	/* control: the long model alone is no model, and the body is still read */
	snprintf(body, 200, "{\"model\":\"");
	memset(body + 10, 'a', n);
	strcpy(body + 10 + n, "\",\"max_output_tokens\":64}");
	budget_request_inspect(BUDGET_FORMAT_OPENAI_RESPONSES, body, strlen(body), &f);
	cr_expect(f.readable);
	cr_expect_str_eq(f.model, "");
	cr_expect_eq(f.max_output, 64);
	free(body);
}

static enum usage_result read_usage(const struct usage_case *c, size_t chunk, size_t cut, struct budget_tokens *t)
{
	size_t len = strlen(c->body);
	struct usage_parser u;
	enum usage_result r;

	budget_usage_init(&u, c->f);
	for (size_t off = 0; off < len;) {
		size_t n = len - off;

		if (chunk && chunk < n)
			n = chunk;
		if (cut > off && cut - off < n)
			n = cut - off;
		budget_usage_feed(&u, c->body + off, n);
		off += n;
	}
	r = budget_usage_finish(&u, t);
	budget_usage_free(&u);
	return r;
}

static void expect_case(size_t i, size_t chunk, size_t cut)
{
	const struct usage_case *c = &usage_cases[i];
	struct budget_tokens t;
	enum usage_result r = read_usage(c, chunk, cut, &t);

	cr_expect_eq(r, c->result, "case %zu (chunks %zu, cut at %zu) %s: %s", i, chunk, cut, c->body,
		     budget_usage_result_name(r));
	cr_expect(!memcmp(&t, &c->want, sizeof(t)),
		  "case %zu (chunks %zu, cut at %zu) %s: in %lld cached %lld write %lld/%lld out %lld", i, chunk, cut,
		  c->body, (long long)t.input, (long long)t.cached, (long long)t.cache_write,
		  (long long)t.cache_write_1h, (long long)t.output);
}

Test(budget_scan, responses_read_as_pinned_in_any_chunks)
{
	static const size_t chunks[] = { 0, 1, 2, 3, 5, 7, 13 };

	for (size_t i = 0; i < sizeof(usage_cases) / sizeof(usage_cases[0]); i++) {
		for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++)
			expect_case(i, chunks[k], 0);
		for (size_t cut = 1; cut < strlen(usage_cases[i].body); cut++)
			expect_case(i, 0, cut);
	}
}

/*
 * A key spelt with \u is found at any offset (the scanner skips strings 16
 * bytes a step): "\u006e" as a key is n, read decoded; control: the same
 * escape in a value beside a plain n.
 */
Test(budget_scan, an_escaped_key_is_found_at_every_offset)
{
	for (int pad = 0; pad < 200; pad++)
		for (int key = 0; key < 2; key++) {
			char body[400];
			int n = snprintf(body, sizeof(body), "{\"x\":\"%*s\",%s", pad, "",
					 key ? "\"\\u006e\":8}" : "\"y\":\"\\u006e\",\"n\":8}");
			char *exact = malloc((size_t)n); /* no byte past the body to read */
			struct request_facts f;

			cr_assert_not_null(exact);
			memcpy(exact, body, (size_t)n);
			budget_request_inspect(BUDGET_FORMAT_OPENAI_CHAT, exact, (size_t)n, &f);
			cr_expect(f.readable && f.choices == 8, "pad %d, %s: readable %d, choices %lld", pad,
				  key ? "key" : "value", f.readable, (long long)f.choices);
			free(exact);
		}
}
