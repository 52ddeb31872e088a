// SPDX-License-Identifier: GPL-2.0-only
/*
 * request.c - what a request's body says, before it is forwarded.
 *
 * budget_request_inspect() reads the body with the same streaming scanner as the
 * responses (a long context is skipped 16 bytes a step, never parsed whole;
 * the watch list is compiled once; a plain count or string is read in
 * place, anything else by jansson) and keeps the model, the largest of the
 * max-tokens fields the provider might honour, the number of outputs (n or
 * best_of times the prompts, candidateCount), the images, whether the
 * provider holds or fetches input the body doesn't show (or the bytes don't
 * bound: a PDF, audio, video), and the tools that have the provider fetch a
 * URL the body chooses (web_fetch, mcp_servers and mcp, url_context:
 * budget.c refuses those the kit does not allow).  A key with an escape,
 * which the scanner never matches, has the body read again decoded.  A body
 * that is not one JSON object, that names a watched member twice (two
 * readings: which would the upstream take?), or whose count of outputs is
 * not a number tells nothing the meter can bound: budget.c refuses it.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

enum {
	R_MODEL,
	R_MAX_TOKENS,
	R_MAX_COMPLETION,
	R_MAX_OUTPUT,
	R_N,
	R_BEST_OF,
	R_GEN_MAX, /* 4: proto3 JSON takes either spelling at each level */
	R_GEN_COUNT = R_GEN_MAX + 4,
	R_PREVIOUS = R_GEN_COUNT + 4,
	R_CONVERSATION,
	R_SERVICE_TIER, /* OpenAI: "priority" is billed at priority processing's prices */
	R_MAX_TOOL_CALLS, /* Responses: the most built-in tool calls, web searches among them */
	R_PROMPT, /* where it starts: its elements are watched too */
	R_CACHED, /* 2 */
	R_FILE = R_CACHED + 2, /* 5, at any depth: input the provider holds or fetches, or a document inline */
	R_PROMPT_ITEM = R_FILE + 5, /* each element of an array "prompt": one completion each (legacy completions) */
	R_IMAGE_URL, /* an OpenAI image part, by URL or inline */
	R_MEDIA, /* 3: an inline part's media type (Anthropic's source, Gemini's inline or file data) */
	R_SOURCE_TYPE = R_MEDIA + 3, /* 2: an Anthropic source's type ("url": the provider fetches it) */
	R_TTL = R_SOURCE_TYPE + 2, /* an Anthropic cache_control's ttl: a 1-hour write is billed at twice the input */
	R_TOOL, /* where each tool starts: its type and (Anthropic's) max_uses below are its own */
	R_TOOL_TYPE,
	R_TOOL_MAX_USES,
	R_TOOL_CONTAINER, /* OpenAI's code interpreter: the container, an id or how to start one */
	R_GROUNDING, /* 4: a Gemini tool that grounds with Google Search, in either spelling, or its 1.5 form */
	R_URL_CONTEXT = R_GROUNDING + 4, /* 2: Gemini's URL context tool, in either spelling: it fetches URLs */
	R_MCP_SERVERS = R_URL_CONTEXT + 2, /* where Anthropic's mcp_servers starts */
	R_MCP_SERVER, /* where each of its servers starts */
	R_WATCHES,
};

_Static_assert(R_WATCHES <= JSCAN_WATCH_MAX, "the request's watches fit one list");

static const char *const req_watch[R_WATCHES] = {
	"model",
	"max_tokens",
	"max_completion_tokens",
	"max_output_tokens",
	"n",
	"best_of",
	"generationConfig.maxOutputTokens",
	"generationConfig.max_output_tokens",
	"generation_config.maxOutputTokens",
	"generation_config.max_output_tokens",
	"generationConfig.candidateCount",
	"generationConfig.candidate_count",
	"generation_config.candidateCount",
	"generation_config.candidate_count",
	"previous_response_id",
	"conversation",
	"service_tier",
	"max_tool_calls",
	"?prompt",
	"cachedContent",
	"cached_content",
	"**.file_id",
	"**.fileUri",
	"**.file_uri",
	"**.file_url",
	"?**.file_data",
	"?prompt.*",
	"?**.image_url",
	"**.media_type",
	"**.mimeType",
	"**.mime_type",
	"messages.*.content.*.source.type",
	"messages.*.content.*.content.*.source.type", /* an image or document in a tool_result */
	"**.ttl",
	"?tools.*",
	"tools.*.type",
	"tools.*.max_uses",
	"tools.*.container",
	"?tools.*.googleSearch",
	"?tools.*.google_search",
	"?tools.*.googleSearchRetrieval",
	"?tools.*.google_search_retrieval",
	"?tools.*.url_context",
	"?tools.*.urlContext",
	"?mcp_servers",
	"?mcp_servers.*",
};

static struct jscan_paths req_paths; /* req_watch, compiled once */

static void compile_req_paths(void)
{
	budget_jscan_compile(&req_paths, req_watch, R_WATCHES);
}

/* The tools with a fee, and those that fetch a URL the request chooses, by their type (anything else is TOOL_OTHER). */
enum tool_kind {
	TOOL_OTHER,
	TOOL_WEB_SEARCH,
	TOOL_FILE_SEARCH,
	TOOL_IMAGE_GENERATION,
	TOOL_CODE_INTERPRETER,
	TOOL_WEB_FETCH,
	TOOL_MCP
};

struct inspect {
	int seen[R_WATCHES];
	bool non_null[R_WATCHES];
	int64_t number[R_WATCHES]; /* a positive integer value, else 0; a count of outputs: a number, rounded up */
	bool unbounded; /* a count of outputs that is not a number: what would the upstream make of it? */
	int64_t prompts; /* the elements of "prompt" that are prompts (strings, arrays), not token ids */
	int64_t images; /* content parts of an image type */
	bool document; /* a part whose tokens its bytes don't bound: a document, a URL fetched, audio, video */
	bool long_cache; /* a cache TTL other than "5m" */
	char model[BUDGET_MODEL_MAX + 1];
	/* the tool being read (values come in the body's order), and the web searches of those read */
	struct {
		bool open;
		enum tool_kind kind; /* from its type: which tool with a fee it is */
		int types, max_uses_seen, containers_seen;
		int64_t max_uses;
		int64_t container_gb; /* its container's memory, as its value says (1 when it says nothing) */
	} tool;
	int64_t web_searches; /* Anthropic's bound: each web_search tool's max_uses, or REQUEST_WEB_SEARCH_USES */
	int web_search_tools;
	int file_search_tools, image_tools; /* OpenAI Responses */
	int64_t container_gb; /* OpenAI Responses: each code_interpreter tool's container_gb (saturates) */
	bool tool_twice; /* a tool that names its type or max_uses twice */
	bool grounding; /* Gemini: a tool that searches Google */
	unsigned fetch; /* BUDGET_TOOL_BIT()s of the tools that have the provider fetch a URL */
	bool tier_dear; /* a service_tier that may cost more than the standard prices */
};

/*
 * OpenAI's service_tier: "auto", "default" and "flex" (half price) are
 * charged the standard prices, null is the default; anything else
 * ("priority", "scale", a value latch does not know) may cost priority's.
 */
static bool tier_dear(const char *text, size_t len)
{
	static const char *const standard[] = { "auto", "default", "flex" };
	json_t *v;
	bool dear = true;

	if (!text) /* longer than a capture */
		return true;
	if (len == 4 && !memcmp(text, "null", 4))
		return false;
	v = json_loadb(text, len, JSON_DECODE_ANY, NULL); /* escapes too: "fl\u0065x" is flex */
	for (size_t i = 0; json_is_string(v) && i < sizeof(standard) / sizeof(standard[0]); i++)
		if (!strcmp(json_string_value(v), standard[i]) && json_string_length(v) == strlen(standard[i]))
			dear = false;
	json_decref(v);
	return dear;
}

/* Watches that multiply the output: n, best_of, Gemini's candidateCount in its four spellings. */
static bool is_count(int w)
{
	return w == R_N || w == R_BEST_OF || (w >= R_GEN_COUNT && w < R_GEN_COUNT + 4);
}

/*
 * A count of outputs read through jansson: an integer is itself, any other
 * number is rounded up (a server that takes 2.0 or 1e3 for an integer makes
 * that many); a string, a boolean, an array, an object or a number past
 * int64 has no bound latch can vouch for (lax parsers coerce "128" or true).
 */
static void count_jansson(struct inspect *in, int w, json_t *v)
{
	if (json_is_null(v))
		return;
	if (json_is_integer(v)) {
		if (json_integer_value(v) > 0)
			in->number[w] = json_integer_value(v);
	} else if (json_is_real(v)) {
		double d = json_real_value(v);

		if (d >= 9.2e18)
			in->number[w] = INT64_MAX;
		else if (d > 0)
			in->number[w] = (int64_t)d + ((double)(int64_t)d < d);
	} else {
		in->unbounded = true;
	}
}

/* The watched value's reading through jansson: anything jscan_plain_* leave (escapes, floats, objects...). */
static void request_value_jansson(struct inspect *in, int w, const char *text, size_t len)
{
	json_t *v = json_loadb(text, len, JSON_DECODE_ANY, NULL);

	in->non_null[w] = v && !json_is_null(v);
	if (is_count(w)) {
		if (v)
			count_jansson(in, w, v);
		else
			in->unbounded = true; /* past what jansson reads (a huge integer): no bound */
	} else if (json_is_integer(v) && json_integer_value(v) > 0) {
		in->number[w] = json_integer_value(v);
	}
	if (w == R_MODEL && json_is_string(v) && budget_request_model_ok(json_string_value(v), json_string_length(v)))
		snprintf(in->model, sizeof(in->model), "%s", json_string_value(v));
	json_decref(v);
}

/*
 * A media type, or an Anthropic source's type.  An image costs the
 * provider's tokens for an image, whatever its bytes; a document (a PDF: a
 * page image and its text a page, the text compressed in the bytes), audio,
 * video and a URL the provider fetches (Anthropic's "url" source: an image
 * or a PDF) cost tokens their bytes don't bound.  s is the value's JSON
 * text, quotes included.
 */
static void part_type(struct inspect *in, int w, const char *s, size_t n)
{
	if (w >= R_SOURCE_TYPE) {
		if (n == 5 && !memcmp(s, "\"url\"", 5))
			in->document = true;
	} else if (n > 7 && !memcmp(s, "\"image/", 7)) {
		in->images++;
	} else if (!(n > 6 && !memcmp(s, "\"text/", 6))) {
		in->document = true; /* application/pdf, audio/..., video/..., anything else */
	}
}

/* A media type or a source's type: its text as it is, or, with an escape in it, as jansson decodes it. */
static void type_value(struct inspect *in, int w, const char *text, size_t len)
{
	json_t *v;
	char *q;

	if (!text || !memchr(text, '\\', len)) {
		if (text)
			part_type(in, w, text, len);
		else
			in->document = true; /* longer than a capture: what is it? */
		return;
	}
	v = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	if (json_is_string(v) && (q = json_dumps(v, JSON_ENCODE_ANY))) {
		part_type(in, w, q, strlen(q));
		free(q);
	}
	json_decref(v);
}

/* The tool read so far is complete: a web_search tool adds its max_uses, or REQUEST_WEB_SEARCH_USES. */
static void tool_end(struct inspect *in)
{
	int64_t uses = in->tool.max_uses > 0 ? in->tool.max_uses : REQUEST_WEB_SEARCH_USES;
	int64_t gb = in->tool.container_gb ? in->tool.container_gb : 1;

	switch (in->tool.open ? in->tool.kind : TOOL_OTHER) {
	case TOOL_WEB_SEARCH:
		in->web_search_tools++;
		in->web_searches = budget_mul_add(in->web_searches, uses, 1);
		break;
	case TOOL_FILE_SEARCH:
		in->file_search_tools++;
		break;
	case TOOL_IMAGE_GENERATION:
		in->image_tools++;
		break;
	case TOOL_CODE_INTERPRETER:
		in->container_gb = budget_mul_add(in->container_gb, gb, 1);
		break;
	case TOOL_WEB_FETCH:
		in->fetch |= BUDGET_TOOL_BIT(BUDGET_TOOL_WEB_FETCH);
		break;
	case TOOL_MCP:
		in->fetch |= BUDGET_TOOL_BIT(BUDGET_TOOL_MCP);
		break;
	default:
		break;
	}
	if (in->tool.types > 1 || in->tool.max_uses_seen > 1 || in->tool.containers_seen > 1)
		in->tool_twice = true;
	memset(&in->tool, 0, sizeof(in->tool));
}

/*
 * The GB of memory of the code interpreter container a tool's `container`
 * value (its JSON text, NULL when too long to capture) starts: an object
 * says it in memory_limit ("1g" when it does not); an existing container's
 * id, a limit latch does not know or anything else is reserved as the
 * largest, REQUEST_CONTAINER_GB_MAX.
 */
static int64_t container_gb_of(const char *text, size_t len)
{
	static const struct {
		const char *limit;
		int64_t gb;
	} tiers[] = { { "1g", 1 }, { "4g", 4 }, { "16g", 16 }, { "64g", 64 } };
	/* a limit given twice has two readings: no reading, so the largest */
	json_t *v = text && *text == '{' ? json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
	json_t *limit = json_object_get(v, "memory_limit");
	int64_t gb = REQUEST_CONTAINER_GB_MAX;

	if (v && (!limit || json_is_null(limit)))
		gb = 1;
	for (size_t i = 0; json_is_string(limit) && i < sizeof(tiers) / sizeof(tiers[0]); i++)
		if (!strcmp(json_string_value(limit), tiers[i].limit))
			gb = tiers[i].gb;
	json_decref(v);
	return gb;
}

/* A tool's type: which tool with a fee it is (the provider checks the rest). */
static enum tool_kind tool_kind(const char *s, size_t slen)
{
	if (slen >= 10 && !memcmp(s, "web_search", 10))
		return TOOL_WEB_SEARCH;
	if (slen == 11 && !memcmp(s, "file_search", 11))
		return TOOL_FILE_SEARCH;
	if (slen == 16 && !memcmp(s, "image_generation", 16))
		return TOOL_IMAGE_GENERATION;
	if (slen == 16 && !memcmp(s, "code_interpreter", 16))
		return TOOL_CODE_INTERPRETER;
	/* Anthropic's web_fetch_20250910 and the versions after it */
	if (slen >= 9 && !memcmp(s, "web_fetch", 9))
		return TOOL_WEB_FETCH;
	/* OpenAI Responses' remote MCP server (server_url, or a connector); Anthropic's toolset of mcp_servers */
	if ((slen == 3 && !memcmp(s, "mcp", 3)) || (slen >= 4 && !memcmp(s, "mcp_", 4)))
		return TOOL_MCP;
	return TOOL_OTHER;
}

/*
 * A value of one of the tools.  Its type is a web search when it starts
 * "web_search" (Anthropic's web_search_20250305, OpenAI's web_search and
 * web_search_preview); OpenAI's file_search, image_generation and
 * code_interpreter are priced too; the provider checks the rest.
 * A max_uses that is not a plain positive integer is taken as absent: the
 * provider refuses such a request (a 4xx costs nothing), and a lax reading
 * would still be held to REQUEST_WEB_SEARCH_USES.
 */
static void tool_value(struct inspect *in, int w, const char *text, size_t len)
{
	const char *s;
	size_t slen;
	int64_t n;
	json_t *v;

	if (w == R_TOOL) {
		tool_end(in);
		in->tool.open = true;
		return;
	}
	if (w == R_TOOL_MAX_USES) {
		in->tool.max_uses_seen++;
		if (text && jscan_plain_uint(text, len, &n))
			in->tool.max_uses = n;
		return;
	}
	if (w == R_TOOL_CONTAINER) {
		in->tool.containers_seen++;
		in->tool.container_gb = container_gb_of(text, len);
		return;
	}
	in->tool.types++;
	if (text && budget_jscan_plain_string(text, len, &s, &slen)) {
		in->tool.kind = tool_kind(s, slen);
		return;
	}
	v = text ? json_loadb(text, len, JSON_DECODE_ANY, NULL) : NULL; /* an escape in it */
	in->tool.kind = json_is_string(v) ? tool_kind(json_string_value(v), json_string_length(v)) : TOOL_OTHER;
	json_decref(v);
}

static void on_request_value(void *arg, int w, const char *text, size_t len)
{
	struct inspect *in = arg;
	const char *s;
	size_t slen;
	int64_t n;

	if (w == R_IMAGE_URL) {
		in->images++;
		return;
	}
	if (w == R_MCP_SERVER || (w == R_MCP_SERVERS && text[0] != '[' && text[0] != 'n')) {
		/* a server, or a value that is no list (what would the upstream make of it?) */
		in->fetch |= BUDGET_TOOL_BIT(BUDGET_TOOL_MCP);
		return;
	}
	if (w == R_MCP_SERVERS)
		return; /* a list: its servers are counted one by one; null or [] asks for none */
	if (w >= R_URL_CONTEXT) { /* whatever its value, as grounding below */
		in->fetch |= BUDGET_TOOL_BIT(BUDGET_TOOL_URL_CONTEXT);
		return;
	}
	if (w >= R_GROUNDING) { /* whatever its value: the upstream decides what it makes of it */
		in->grounding = true;
		return;
	}
	if (w >= R_TOOL) {
		tool_value(in, w, text, len);
		return;
	}
	if (w == R_TTL) { /* "5m" is the default's price; anything else may be the 1-hour one */
		if (!(text && len == 4 && !memcmp(text, "\"5m\"", 4)) &&
		    !(text && len == 4 && !memcmp(text, "null", 4)))
			in->long_cache = true;
		return;
	}
	if (w >= R_MEDIA) {
		type_value(in, w, text, len);
		return;
	}
	if (w == R_SERVICE_TIER) {
		in->seen[w]++; /* twice: ambiguous */
		in->tier_dear = tier_dear(text, len);
		return;
	}

	if (w == R_PROMPT_ITEM) { /* where an element starts: a number is a token id of one prompt */
		if (text[0] != '-' && (text[0] < '0' || text[0] > '9'))
			in->prompts++;
		return;
	}
	in->seen[w]++;
	if (w == R_PROMPT) { /* where it starts: 'n' is null */
		in->non_null[w] = text[0] != 'n';
		return;
	}
	if (!text) { /* longer than a capture: present, and not null */
		in->non_null[w] = true;
		if (is_count(w))
			in->unbounded = true;
		return;
	}
	/* the common values read here, exactly as jansson would: a count, a plain string, a literal */
	if (jscan_plain_uint(text, len, &n)) {
		in->non_null[w] = true;
		if (n > 0)
			in->number[w] = n;
	} else if (budget_jscan_plain_string(text, len, &s, &slen)) {
		in->non_null[w] = true;
		if (is_count(w))
			in->unbounded = true;
		if (w == R_MODEL && budget_request_model_ok(s, slen)) {
			memcpy(in->model, s, slen); /* budget_request_model_ok: at most BUDGET_MODEL_MAX */
			in->model[slen] = '\0';
		}
	} else if (len == 4 && !memcmp(text, "null", 4)) {
		in->non_null[w] = false;
	} else if ((len == 4 && !memcmp(text, "true", 4)) || (len == 5 && !memcmp(text, "false", 5))) {
		in->non_null[w] = true;
		if (is_count(w))
			in->unbounded = true;
	} else {
		request_value_jansson(in, w, text, len);
	}
}

static int64_t max_of(const struct inspect *in, int from, int n)
{
	int64_t m = 0;

	for (int w = from; w < from + n; w++)
		if (in->number[w] > m)
			m = in->number[w];
	return m;
}

/* a * b, at most INT64_MAX (both positive) */
static int64_t mul_sat(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/*
 * The body as the upstream decodes it (keys unescaped), or NULL when jansson
 * refuses it (*twice: because a key is given twice).
 */
static char *decoded(const char *p, size_t n, bool *twice)
{
	json_error_t err;
	json_t *root = json_loadb(p, n, JSON_REJECT_DUPLICATES, &err);
	char *text = json_is_object(root) ? json_dumps(root, JSON_COMPACT) : NULL;

	*twice = !root && json_error_code(&err) == json_error_duplicate_key;
	json_decref(root);
	return text;
}

/* Read a request body's watched members into IN (cleared first): true when it is one complete JSON value. */
static bool scan_request(struct jscan *js, struct inspect *in, const char *p, size_t len)
{
	memset(in, 0, sizeof(*in));
	budget_jscan_init(js, &req_paths, on_request_value, in);
	budget_jscan_feed(js, p, len);
	if (!budget_jscan_end(js))
		return false;
	tool_end(in);
	return true;
}

/* What a readable body's members (IN) say of its cost, by the endpoint's format F. */
static void facts_from(enum budget_format f, const struct inspect *in, struct request_facts *out)
{
	if (f != BUDGET_FORMAT_GEMINI) {
		const char *m = strncmp(in->model, "models/", 7) ? in->model : in->model + 7;

		memcpy(out->model, m, strlen(m) + 1); /* both BUDGET_MODEL_MAX + 1 */
	}
	/* n and best_of completions of each prompt (best_of are all billed); Gemini's candidates */
	int64_t per = in->number[R_N] > in->number[R_BEST_OF] ? in->number[R_N] : in->number[R_BEST_OF];
	int64_t prompts = in->non_null[R_PROMPT] && in->prompts > 1 ? in->prompts : 1;
	int64_t cands = max_of(in, R_GEN_COUNT, 4);

	switch (f) {
	case BUDGET_FORMAT_OPENAI_CHAT:
		out->max_output = max_of(in, R_MAX_TOKENS, 2);
		out->choices = mul_sat(per ? per : 1, prompts);
		break;
	case BUDGET_FORMAT_OPENAI_RESPONSES: { /* searches: at most max_tool_calls, whatever the tools */
		int64_t calls = in->number[R_MAX_TOOL_CALLS] > 0 ? in->number[R_MAX_TOOL_CALLS] :
								   REQUEST_WEB_SEARCH_USES;

		out->max_output = in->number[R_MAX_OUTPUT];
		out->server_state = in->non_null[R_PREVIOUS] || in->non_null[R_CONVERSATION] || in->non_null[R_PROMPT];
		/* a stored prompt may bring its own tools: any of them, for all the body says */
		if (in->web_search_tools || in->non_null[R_PROMPT])
			out->web_searches = calls;
		if (in->file_search_tools || in->non_null[R_PROMPT])
			out->file_searches = calls;
		if (in->image_tools || in->non_null[R_PROMPT])
			out->images_generated = calls;
		out->container_gb = in->container_gb;
		if (in->non_null[R_PROMPT])
			out->container_gb = budget_mul_add(out->container_gb, REQUEST_CONTAINER_GB_MAX, 1);
		break;
	}
	case BUDGET_FORMAT_ANTHROPIC:
		out->max_output = in->number[R_MAX_TOKENS];
		out->long_cache = in->long_cache;
		out->web_searches = in->web_searches;
		break;
	case BUDGET_FORMAT_GEMINI: /* grounding: nothing in the request bounds its queries */
		out->max_output = max_of(in, R_GEN_MAX, 4);
		out->choices = cands ? cands : 1;
		out->server_state = in->non_null[R_CACHED] || in->non_null[R_CACHED + 1];
		/* cached content may hold the tools (a request that names it can't give its own) */
		out->web_searches = in->grounding || out->server_state ? REQUEST_WEB_SEARCH_USES : 0;
		break;
	default: /* an endpoint latch doesn't know: any count of outputs it names */
		out->choices = mul_sat(per > cands ? per : (cands ? cands : 1), prompts);
		break;
	}
	out->unbounded = in->unbounded;
	out->grounding = in->grounding;
	out->fetch_tools = in->fetch;
	/*
	 * Input held by the provider may bring its tools: a stored prompt
	 * (Responses) a remote MCP server, cached content (Gemini) the URL
	 * context tool.  Nothing in the body says they don't.
	 */
	if (f == BUDGET_FORMAT_OPENAI_RESPONSES && in->non_null[R_PROMPT])
		out->fetch_tools |= BUDGET_TOOL_BIT(BUDGET_TOOL_MCP);
	if (f == BUDGET_FORMAT_GEMINI && (in->non_null[R_CACHED] || in->non_null[R_CACHED + 1]))
		out->fetch_tools |= BUDGET_TOOL_BIT(BUDGET_TOOL_URL_CONTEXT);
	out->priority = in->tier_dear;
	out->images = in->images;
	if (in->document)
		out->server_state = true;
	for (int w = R_FILE; w < R_FILE + 5; w++)
		if (in->seen[w])
			out->server_state = true;
}

void budget_request_inspect(enum budget_format f, const void *body, size_t len, struct request_facts *out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct inspect in;
	struct jscan js;
	const char *p = body;
	char *again = NULL;
	size_t skip = 0;
	bool ok;

	memset(out, 0, sizeof(*out));
	out->choices = 1;
	while (skip < len && isspace((unsigned char)p[skip]))
		skip++;
	if (skip == len || p[skip] != '{')
		return;
	out->object = true;
	p += skip;
	len -= skip;
	pthread_once(&once, compile_req_paths);
	ok = scan_request(&js, &in, p, len);
	/*
	 * A key with an escape: the scanner never matches one ("max_t\u006fkens"
	 * would have to be decoded), but the upstream decodes it.  Such a body
	 * (rare: SDKs write keys plain) is read again, decoded by jansson.
	 */
	if (js.key_escape) {
		again = decoded(p, len, &out->ambiguous);
		if (!again)
			return;
		ok = scan_request(&js, &in, again, strlen(again));
		free(again);
	}
	for (int w = 0; w < R_FILE; w++)
		if (in.seen[w] > 1)
			out->ambiguous = true;
	if ((f == BUDGET_FORMAT_ANTHROPIC || f == BUDGET_FORMAT_OPENAI_RESPONSES) && in.tool_twice)
		out->ambiguous = true;
	out->readable = ok && !out->ambiguous;
	if (!out->readable)
		return;
	facts_from(f, &in, out);
}

/*
 * The most input tokens one image costs: the providers' published formulas
 * give at most about 3,800 (OpenAI's patch models at 1536 patches, x2.46),
 * 1,600 (Anthropic, 1.15 megapixels) and 258 a 768-pixel tile (Gemini, whose
 * images are inline: their bytes count too).  An image by URL is a few
 * dozen bytes of the body.
 */
#define IMAGE_TOKENS 8192

/* The body's tokens at 2 bytes each, rounded up, and IMAGE_TOKENS an image part (saturating). */
int64_t budget_request_input(size_t body_len, const struct request_facts *facts)
{
	return budget_mul_add((int64_t)(body_len / 2 + body_len % 2), facts->images, IMAGE_TOKENS);
}
