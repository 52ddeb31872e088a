// SPDX-License-Identifier: GPL-2.0-only
/*
 * usage.c - what a response says it cost, in each provider's words.
 *
 * The body is sniffed, not trusted to a header the meter never sees: '{' or
 * '[' is JSON (a Gemini stream without alt=sse is one JSON array, chunk
 * after chunk), a gzip or zlib header is inflated first (zlib, 16 KiB at a
 * time), anything else is an SSE stream.  Only the counts at the paths that
 * carry usage are kept, each number read by jansson; the scanner reports
 * where each usage object starts, so one that is not an object, or a count
 * given twice, is seen for what it is:
 *
 *   OpenAI chat      `usage` of the body, or of the stream's last chunk
 *                    (stream_options.include_usage); `[DONE]` ends it
 *   OpenAI responses `usage` of the body; in a stream, `response.usage` of
 *                    response.completed or response.incomplete; its web
 *                    searches, file searches, images and code runs are
 *                    the web_search_call, file_search_call,
 *                    image_generation_call and code_interpreter_call
 *                    items of `output`
 *   Anthropic        `usage` of the body; in a stream, message_start's
 *                    `message.usage` updated by each message_delta's `usage`,
 *                    final at message_stop; its web searches in
 *                    `server_tool_use.web_search_requests`
 *   Gemini           `usageMetadata` of the body, of each array element or
 *                    of each SSE event: the last one counts; its grounding
 *                    queries are `candidates.*.groundingMetadata.webSearchQueries`,
 *                    summed over a chunk's candidates, the most of any chunk
 *
 * A usage object is read strictly (integers, 0..TOKENS_MAX, each once, cached
 * no more than the input it is part of); anything else makes the response
 * unreadable, and an unreadable response is charged its full reservation.
 * (Handing jansson the whole usage object cost 3 us a response; its numbers
 * one by one cost a tenth of that; a plain count or type is now read here,
 * jscan_plain_*, and only the rest by jansson.)
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

#define TOKENS_MAX 10000000000LL /* no request is billed for more */
#define INFLATE_CHUNK 16384

enum { MODE_SNIFF, MODE_JSON, MODE_SSE, MODE_DEAD };

/*
 * What a watched value is to the usage reader (WK_CALL: an output item's
 * type, counted when a tool with a fee was called; WK_QUERY: a Gemini search query, counted;
 * WK_CHUNK: a top-level member or element, where a Gemini chunk's queries
 * are summed up).
 */
enum { WK_NUM, WK_USAGE, WK_ERROR, WK_TYPE, WK_CALL, WK_QUERY, WK_CHUNK, WK_TIER, WK_MODALITIES };

struct usage_watch {
	const char *path;
	uint8_t kind; /* WK_* */
	uint8_t group; /* which usage object: 0 the main one, 1 Anthropic's message_delta usage */
	uint8_t field; /* WK_NUM: enum usage_field */
};

/* clang-format off */
#define USAGE(p, g) { "?" p, WK_USAGE, g, 0 }
#define NUM(p, g, f) { p, WK_NUM, g, f }
#define ERR(p) { "?" p, WK_ERROR, 0, 0 }
#define TYPE { "type", WK_TYPE, 0, 0 }
#define CALL(p) { p, WK_CALL, 0, 0 }
#define TIER(p) { p, WK_TIER, 0, 0 }
#define END { NULL, 0, 0, 0 }

static const struct usage_watch w_openai[] = {
	USAGE("usage", 0),
	NUM("usage.prompt_tokens", 0, UF_IN),
	NUM("usage.completion_tokens", 0, UF_OUT),
	NUM("usage.prompt_tokens_details.cached_tokens", 0, UF_CACHED),
	TIER("service_tier"),
	ERR("error"),
	END,
};
static const struct usage_watch w_responses_json[] = {
	USAGE("usage", 0),
	NUM("usage.input_tokens", 0, UF_IN),
	NUM("usage.output_tokens", 0, UF_OUT),
	NUM("usage.input_tokens_details.cached_tokens", 0, UF_CACHED),
	CALL("output.*.type"),
	TIER("service_tier"),
	ERR("error"),
	END,
};
static const struct usage_watch w_responses_sse[] = {
	TYPE,
	USAGE("response.usage", 0),
	NUM("response.usage.input_tokens", 0, UF_IN),
	NUM("response.usage.output_tokens", 0, UF_OUT),
	NUM("response.usage.input_tokens_details.cached_tokens", 0, UF_CACHED),
	CALL("response.output.*.type"),
	TIER("response.service_tier"),
	ERR("error"),
	END,
};
#define ANTHROPIC_USAGE(pre, g)                                                                               \
	USAGE(pre "usage", g), NUM(pre "usage.input_tokens", g, UF_IN), NUM(pre "usage.output_tokens", g, UF_OUT), \
		NUM(pre "usage.cache_read_input_tokens", g, UF_CACHED),                                        \
		NUM(pre "usage.cache_creation_input_tokens", g, UF_CW),                                        \
		NUM(pre "usage.cache_creation.ephemeral_5m_input_tokens", g, UF_CW5M),                         \
		NUM(pre "usage.cache_creation.ephemeral_1h_input_tokens", g, UF_CW1H),                         \
		NUM(pre "usage.server_tool_use.web_search_requests", g, UF_SEARCH)
static const struct usage_watch w_anthropic_json[] = { TYPE, ANTHROPIC_USAGE("", 0), ERR("error"), END };
static const struct usage_watch w_anthropic_sse[] = {
	TYPE, ANTHROPIC_USAGE("message.", 0), ANTHROPIC_USAGE("", 1), ERR("error"), END,
};
/* Gemini: the body, each element of the array stream, each SSE event */
#define GEMINI_USAGE(pre)                                                                                      \
	USAGE(pre "usageMetadata", 0), NUM(pre "usageMetadata.promptTokenCount", 0, UF_IN),                   \
		NUM(pre "usageMetadata.candidatesTokenCount", 0, UF_OUT),                                      \
		NUM(pre "usageMetadata.thoughtsTokenCount", 0, UF_THOUGHTS),                                   \
		NUM(pre "usageMetadata.cachedContentTokenCount", 0, UF_CACHED),                                \
		NUM(pre "usageMetadata.toolUsePromptTokenCount", 0, UF_TOOL),                                  \
		{ pre "usageMetadata.promptTokensDetails", WK_MODALITIES, 0, UF_IMG_IN },                      \
		{ pre "usageMetadata.candidatesTokensDetails", WK_MODALITIES, 0, UF_IMG_OUT }, ERR(pre "error")
#define GEMINI_QUERIES(pre) { "?" pre "candidates.*.groundingMetadata.webSearchQueries.*", WK_QUERY, 0, 0 }
/* "?*" last: a value is reported to the first watch it matches, and usageMetadata's comes first */
static const struct usage_watch w_gemini[] = {
	GEMINI_USAGE(""), GEMINI_USAGE("*."), GEMINI_QUERIES(""), GEMINI_QUERIES("*."), { "?*", WK_CHUNK, 0, 0 }, END,
};
/* clang-format on */

const char *budget_usage_result_name(enum usage_result r)
{
	switch (r) {
	case USAGE_OK:
		return "usage";
	case USAGE_NONE:
		return "no_usage";
	case USAGE_BAD:
		return "unreadable";
	case USAGE_ERROR:
		return "stream_error";
	}
	return "?";
}

#define BIT(f) (1u << (f))

static bool has(const struct usage_acc *a, unsigned mask)
{
	return (a->present & mask) == mask;
}

static bool openai_tokens(const struct usage_acc *a, bool embeddings, struct budget_tokens *t)
{
	if (!a->object || !has(a, BIT(UF_IN) | (embeddings ? 0 : BIT(UF_OUT))) || a->v[UF_CACHED] > a->v[UF_IN])
		return false;
	*t = (struct budget_tokens){ .input = a->v[UF_IN] - a->v[UF_CACHED],
				     .cached = a->v[UF_CACHED],
				     .output = a->v[UF_OUT] };
	return true;
}

/* Anthropic counts cache reads and writes beside input_tokens, not inside it. */
static bool anthropic_tokens(const struct usage_acc *a, struct budget_tokens *t)
{
	int64_t write = has(a, BIT(UF_CW)) ? a->v[UF_CW] : a->v[UF_CW5M] + a->v[UF_CW1H];

	if (!a->object || !has(a, BIT(UF_IN) | BIT(UF_OUT)) || a->v[UF_CW1H] > write)
		return false;
	*t = (struct budget_tokens){ .input = a->v[UF_IN],
				     .cached = a->v[UF_CACHED],
				     .cache_write = write - a->v[UF_CW1H],
				     .cache_write_1h = a->v[UF_CW1H],
				     .output = a->v[UF_OUT],
				     /* no server_tool_use: the searches are not said, and are charged as reserved */
				     .web_searches = has(a, BIT(UF_SEARCH)) ? a->v[UF_SEARCH] : -1 };
	return true;
}

/*
 * Gemini: promptTokenCount includes the cached part; thinking is billed as
 * output; the IMAGE tokens of the token details are part of the prompt's or
 * the candidates' count, billed at the image prices (an image model's output
 * image costs 12 times its text).  The image input is the uncached part's.
 */
static bool gemini_tokens(const struct usage_acc *a, struct budget_tokens *t)
{
	int64_t uncached, img_in;

	if (!a->object || !has(a, BIT(UF_IN)) || a->v[UF_CACHED] > a->v[UF_IN] || a->v[UF_IMG_IN] > a->v[UF_IN] ||
	    a->v[UF_IMG_OUT] > a->v[UF_OUT])
		return false;
	uncached = a->v[UF_IN] - a->v[UF_CACHED];
	img_in = a->v[UF_IMG_IN] < uncached ? a->v[UF_IMG_IN] : uncached;
	*t = (struct budget_tokens){ .input = uncached - img_in + a->v[UF_TOOL],
				     .cached = a->v[UF_CACHED],
				     .output = a->v[UF_OUT] - a->v[UF_IMG_OUT] + a->v[UF_THOUGHTS],
				     .image_input = img_in,
				     .image_output = a->v[UF_IMG_OUT] };
	return true;
}

/* Each format's watch list and its paths, compiled once (the first response that needs one). */
enum { T_OPENAI, T_RESPONSES_JSON, T_RESPONSES_SSE, T_ANTHROPIC_JSON, T_ANTHROPIC_SSE, T_GEMINI, T_N };
static const struct usage_watch *const tables[T_N] = { w_openai,	 w_responses_json, w_responses_sse,
						       w_anthropic_json, w_anthropic_sse,  w_gemini };
static struct jscan_paths table_paths[T_N];

static void compile_tables(void)
{
	for (int t = 0; t < T_N; t++) {
		const char *paths[JSCAN_WATCH_MAX];
		int n = 0;

		while (tables[t][n].path && n < JSCAN_WATCH_MAX) {
			paths[n] = tables[t][n].path;
			n++;
		}
		budget_jscan_compile(&table_paths[t], paths, n);
	}
}

static int watch_table(enum budget_format f, bool sse)
{
	switch (f) {
	case BUDGET_FORMAT_OPENAI_RESPONSES:
		return sse ? T_RESPONSES_SSE : T_RESPONSES_JSON;
	case BUDGET_FORMAT_ANTHROPIC:
		return sse ? T_ANTHROPIC_SSE : T_ANTHROPIC_JSON;
	case BUDGET_FORMAT_GEMINI:
		return T_GEMINI;
	default:
		return T_OPENAI;
	}
}

/* Gemini's usage runs across chunks (the last one counts); the others' belong to one event. */
static struct usage_acc *acc_of(struct usage_parser *u, int group)
{
	return u->format == BUDGET_FORMAT_GEMINI ? &u->run : &u->ev[group];
}

/* A count read: 0..TOKENS_MAX, once per usage object. */
static void count(struct usage_parser *u, struct usage_acc *a, int field, int64_t v)
{
	if (v < 0 || v > TOKENS_MAX || (a->present & BIT(field))) {
		u->bad = true; /* not a count, or the same count twice */
		return;
	}
	a->v[field] = v;
	a->present |= BIT(field);
}

/* Gemini: a chunk's queries are read (or a member of its top level that holds none begins). */
static void chunk_end(struct usage_parser *u)
{
	if (u->queries > u->queries_most)
		u->queries_most = u->queries;
	u->queries = 0;
}

/* A value at a watched path, in the event or body being read. */
/* An output item's type (OpenAI Responses): the calls of tools with a fee are counted. */
static void count_call(struct usage_parser *u, const char *s, size_t len)
{
	if (len == 15 && !memcmp(s, "web_search_call", 15))
		u->ev_calls++;
	else if (len == 16 && !memcmp(s, "file_search_call", 16))
		u->ev_file_calls++;
	else if (len == 21 && !memcmp(s, "image_generation_call", 21))
		u->ev_image_calls++;
	else if (len == 21 && !memcmp(s, "code_interpreter_call", 21))
		u->ev_code_calls++;
}

/*
 * Gemini's promptTokensDetails or candidatesTokensDetails: an array of
 * {"modality": M, "tokenCount": N}; the IMAGE tokens are counted.  Anything
 * else (not an array of such objects, a count that is not one) is
 * unreadable.  Read by jansson: a few short objects.
 */
static void count_modalities(struct usage_parser *u, struct usage_acc *a, int field, const char *text, size_t len)
{
	json_t *v = text ? json_loadb(text, len, JSON_DECODE_ANY, NULL) : NULL, *e, *m, *n;
	int64_t image = 0;
	size_t i;

	if (!json_is_array(v)) {
		u->bad = true;
		json_decref(v);
		return;
	}
	json_array_foreach(v, i, e) {
		m = json_object_get(e, "modality");
		n = json_object_get(e, "tokenCount");
		if (!json_is_object(e) || !json_is_string(m) || (n && !json_is_integer(n)) ||
		    (n && (json_integer_value(n) < 0 || json_integer_value(n) > TOKENS_MAX))) {
			u->bad = true;
			break;
		}
		if (n && !strcmp(json_string_value(m), "IMAGE"))
			image = budget_mul_add(image, json_integer_value(n), 1);
	}
	json_decref(v);
	count(u, a, field, image);
}

/* OpenAI's service_tier of a response: default and flex are charged the standard prices, null says nothing. */
static void service_tier(struct usage_parser *u, const char *text, size_t len)
{
	const char *s;
	size_t slen;

	if (text && len == 4 && !memcmp(text, "null", 4))
		return;
	if (text && budget_jscan_plain_string(text, len, &s, &slen) &&
	    ((slen == 7 && !memcmp(s, "default", 7)) || (slen == 4 && !memcmp(s, "flex", 4)) ||
	     (slen == 4 && !memcmp(s, "auto", 4))))
		return;
	u->tier_dear = true; /* "priority", or a tier (or spelling) latch does not know: the dearer */
}

static void on_value(void *arg, int w, const char *text, size_t len)
{
	struct usage_parser *u = arg;
	const struct usage_watch *def = &u->watch[w];
	struct usage_acc *a = acc_of(u, def->group);
	const char *s;
	size_t slen;
	int64_t n;
	json_t *v;

	switch (def->kind) {
	case WK_USAGE:
		if (*text == 'n') /* "usage": null, as in OpenAI's chunks before the last */
			return;
		if (*text != '{' || (a->object && u->format != BUDGET_FORMAT_GEMINI))
			u->bad = true; /* not an object, or a second one in the same event */
		memset(a, 0, sizeof(*a));
		a->object = true;
		return;
	case WK_ERROR:
		if (*text != 'n') /* "error": null is no error */
			u->ev_error = true;
		return;
	case WK_QUERY:
		u->queries++;
		return;
	case WK_CHUNK:
		chunk_end(u);
		return;
	case WK_TIER:
		service_tier(u, text, len);
		return;
	case WK_MODALITIES:
		count_modalities(u, a, def->field, text, len);
		return;
	case WK_CALL:
		if (!text)
			return; /* longer than a capture: no call latch counts */
		if (budget_jscan_plain_string(text, len, &s, &slen)) {
			count_call(u, s, slen);
			return;
		}
		v = json_loadb(text, len, JSON_DECODE_ANY, NULL); /* an escape in it */
		if (json_is_string(v))
			count_call(u, json_string_value(v), json_string_length(v));
		json_decref(v);
		return;
	default:
		break;
	}
	if (text && def->kind == WK_TYPE && budget_jscan_plain_string(text, len, &s, &slen)) {
		if (*u->type) {
			u->bad = true;
		} else { /* as snprintf into u->type would: cut to SSE_EVENT_MAX */
			slen = slen < SSE_EVENT_MAX ? slen : SSE_EVENT_MAX;
			memcpy(u->type, s, slen);
			u->type[slen] = '\0';
		}
		return;
	}
	if (text && def->kind == WK_NUM && jscan_plain_uint(text, len, &n)) {
		count(u, a, def->field, n);
		return;
	}
	/* anything else is jansson's to read (escapes, signs, floats, ...) */
	v = text ? json_loadb(text, len, JSON_DECODE_ANY, NULL) : NULL;
	if (def->kind == WK_TYPE) {
		if (!json_is_string(v) || *u->type)
			u->bad = true;
		else
			snprintf(u->type, sizeof(u->type), "%s", json_string_value(v));
	} else if (!json_is_integer(v)) {
		u->bad = true; /* not a count */
	} else {
		count(u, a, def->field, json_integer_value(v));
	}
	json_decref(v);
}

static void take_usage(struct usage_parser *u, bool ok)
{
	if (ok)
		u->have_usage = u->final = true;
	else
		u->bad = true;
}

static void clear_event(struct usage_parser *u)
{
	memset(u->ev, 0, sizeof(u->ev));
	u->type[0] = '\0';
	u->ev_error = false;
	u->ev_calls = 0;
	u->ev_file_calls = 0;
	u->ev_image_calls = 0;
	u->ev_code_calls = 0;
	chunk_end(u);
}

/* A Responses output's tool calls, with its usage: what each tool with a fee did. */
static void responses_calls(struct usage_parser *u)
{
	u->tokens.web_searches = u->ev_calls;
	u->tokens.file_searches = u->ev_file_calls;
	u->tokens.images = u->ev_image_calls;
	u->tokens.container_gb = u->ev_code_calls ? -1 : 0; /* the output does not say which containers are new */
}

/* One SSE event (or the whole JSON body, as an event without a name) is complete. */
static void on_event(void *arg, const char *event, bool done_marker, bool json_ok)
{
	struct usage_parser *u = arg;
	const char *type = *u->type ? u->type : event;
	bool sse = u->sse != NULL;

	if (!json_ok) {
		if (done_marker) {
			u->done_marker = true;
			u->ended = u->format == BUDGET_FORMAT_OPENAI_CHAT &&
				   u->have_usage; /* usage comes before [DONE] */
		} else
			u->bad = true; /* an event that is neither JSON nor [DONE] */
		clear_event(u);
		return;
	}
	if (u->ev_error)
		u->error = true;
	switch (u->format) {
	case BUDGET_FORMAT_OPENAI_CHAT:
	case BUDGET_FORMAT_OPENAI_EMBEDDINGS:
		if (u->ev[0].object)
			take_usage(u,
				   openai_tokens(&u->ev[0], u->format == BUDGET_FORMAT_OPENAI_EMBEDDINGS, &u->tokens));
		break;
	case BUDGET_FORMAT_OPENAI_RESPONSES: /* the response object's output: its web searches */
		if (!sse) { /* the response object; usage is null until it completed */
			if (u->ev[0].object) {
				take_usage(u, openai_tokens(&u->ev[0], false, &u->tokens));
				responses_calls(u);
			}
		} else if (!strcmp(type, "response.completed") || !strcmp(type, "response.incomplete")) {
			take_usage(u, openai_tokens(&u->ev[0], false, &u->tokens));
			responses_calls(u);
			u->ended = true;
		} else if (!strcmp(type, "response.failed") || !strcmp(type, "error")) {
			u->error = true;
		}
		break;
	case BUDGET_FORMAT_ANTHROPIC:
		if (!strcmp(type, "error")) {
			u->error = true;
		} else if (!sse) {
			if (u->ev[0].object)
				take_usage(u, anthropic_tokens(&u->ev[0], &u->tokens));
		} else if (!strcmp(type, "message_start")) {
			u->run = u->ev[0];
			u->bad |= !u->run.object;
		} else if (!strcmp(type, "message_delta")) { /* cumulative counts: each one present replaces */
			if (!u->run.object || !u->ev[1].object)
				u->bad = true;
			for (int f = 0; f < UF_N; f++)
				if (u->ev[1].present & BIT(f)) {
					u->run.v[f] = u->ev[1].v[f];
					u->run.present |= BIT(f);
				}
		} else if (!strcmp(type, "message_stop")) {
			take_usage(u, anthropic_tokens(&u->run, &u->tokens));
			u->ended = true;
		}
		break;
	default: /* Gemini: counted as the chunks pass, read at the end */
		break;
	}
	clear_event(u);
}

void budget_usage_init(struct usage_parser *u, enum budget_format f)
{
	memset(u, 0, sizeof(*u));
	u->format = f;
	u->mode = MODE_SNIFF;
}

void budget_usage_reuse(struct usage_parser *u, enum budget_format f)
{
	struct jscan *js = u->js_buf;
	struct sse *sse = u->sse_buf;

	if (u->z) {
		inflateEnd(u->z);
		free(u->z);
	}
	budget_usage_init(u, f);
	u->js_buf = js;
	u->sse_buf = sse;
}

/* The first byte that is not a blank decides what the body is. */
static void start_mode(struct usage_parser *u, char c)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	bool sse = c != '{' && c != '[';
	int t = watch_table(u->format, sse);

	pthread_once(&once, compile_tables);
	u->watch = tables[t];
	if (!sse) {
		u->js = u->js_buf ? u->js_buf : (u->js_buf = malloc(sizeof(*u->js)));
		if (u->js)
			budget_jscan_init(u->js, &table_paths[t], on_value, u);
		u->mode = MODE_JSON;
	} else {
		u->sse = u->sse_buf ? u->sse_buf : (u->sse_buf = malloc(sizeof(*u->sse)));
		if (u->sse)
			budget_sse_init(u->sse, &table_paths[t], on_value, on_event, u);
		u->mode = MODE_SSE;
	}
	if (!u->js && !u->sse) {
		u->bad = true;
		u->mode = MODE_DEAD;
	}
}

static void feed_plain(struct usage_parser *u, const char *p, size_t len)
{
	if (u->mode == MODE_SNIFF) {
		while (len && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) {
			p++;
			len--;
		}
		if (!len)
			return;
		start_mode(u, *p);
	}
	if (u->mode == MODE_JSON)
		budget_jscan_feed(u->js, p, len);
	else if (u->mode == MODE_SSE)
		budget_sse_feed(u->sse, p, len);
}

/* A compressed body (the guest asked for gzip and the upstream obliged): inflate as it passes. */
static void feed_inflate(struct usage_parser *u, const unsigned char *p, size_t len)
{
	unsigned char out[INFLATE_CHUNK];
	int rc = Z_OK;

	u->z->next_in = (unsigned char *)p;
	u->z->avail_in = (uInt)len;
	while (u->z->avail_in && rc == Z_OK) {
		u->z->next_out = out;
		u->z->avail_out = sizeof(out);
		rc = inflate(u->z, Z_NO_FLUSH);
		if (rc != Z_OK && rc != Z_STREAM_END) {
			u->bad = true;
			return;
		}
		feed_plain(u, (const char *)out, sizeof(out) - u->z->avail_out);
	}
	if (rc == Z_STREAM_END && u->z->avail_in)
		u->bad = true; /* bytes after the compressed stream */
}

void budget_usage_feed(struct usage_parser *u, const void *data, size_t len)
{
	const unsigned char *p = data;

	if (!len || u->bad || u->mode == MODE_DEAD)
		return;
	/* a compressed body says so in its first byte, wherever the chunks end (not after a blank) */
	if (!u->fed && (p[0] == 0x1f || p[0] == 0x78)) {
		u->z = calloc(1, sizeof(*u->z));
		if (!u->z || inflateInit2(u->z, 15 + 32) != Z_OK) { /* 15+32: gzip or zlib, from the header */
			free(u->z);
			u->z = NULL;
			u->bad = true;
			return;
		}
	}
	u->fed = true;
	if (u->z)
		feed_inflate(u, p, len);
	else
		feed_plain(u, data, len);
}

enum usage_result budget_usage_finish(struct usage_parser *u, struct budget_tokens *out)
{
	memset(out, 0, sizeof(*out));
	if (u->z && !u->bad) {
		u->z->next_in = NULL;
		u->z->avail_in = 0;
		if (inflate(u->z, Z_FINISH) != Z_STREAM_END)
			u->bad = true; /* the compressed stream was cut */
	}
	if (u->mode == MODE_JSON && !u->bad) {
		if (budget_jscan_end(u->js))
			on_event(u, "", false, true);
		else
			u->bad = true;
	}
	if (u->format == BUDGET_FORMAT_GEMINI && u->run.object && !u->error) {
		take_usage(u, gemini_tokens(&u->run, &u->tokens));
		chunk_end(u);
		u->tokens.web_searches = u->queries_most;
	}
	/* SSE: an event without its blank line was never dispatched, as the spec says */
	if (u->bad)
		return USAGE_BAD;
	if (u->error)
		return USAGE_ERROR;
	if (!u->have_usage || !u->final)
		return USAGE_NONE;
	*out = u->tokens;
	return USAGE_OK;
}

bool budget_usage_ended(const struct usage_parser *u)
{
	return u->sse && u->ended && u->have_usage && u->final && !u->bad && !u->error;
}

void budget_usage_free(struct usage_parser *u)
{
	if (u->z) {
		inflateEnd(u->z);
		free(u->z);
	}
	free(u->js_buf);
	free(u->sse_buf);
	memset(u, 0, sizeof(*u));
}
