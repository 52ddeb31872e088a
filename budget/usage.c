// SPDX-License-Identifier: GPL-2.0-only
/*
 * usage.c - what a response says it cost, in each provider's words.
 *
 * The body is sniffed, not trusted to a header the meter never sees: '{' or
 * '[' is JSON (a Gemini stream without alt=sse is one JSON array, chunk
 * after chunk), a gzip or zlib header is inflated first (zlib, 16 KiB at a
 * time), anything else is an SSE stream.  Only the values at the paths that
 * carry usage are kept, and jansson reads them (duplicate keys refused):
 *
 *   OpenAI chat      `usage` of the body, or of the stream's last chunk
 *                    (stream_options.include_usage); `[DONE]` ends it
 *   OpenAI responses `usage` of the body; in a stream, `response.usage` of
 *                    response.completed or response.incomplete
 *   Anthropic        `usage` of the body; in a stream, message_start's
 *                    `message.usage` updated by each message_delta's `usage`,
 *                    final at message_stop
 *   Gemini           `usageMetadata` of the body, of each array element or
 *                    of each SSE event: the last one counts
 *
 * A usage object is read strictly (integers, 0..TOKENS_MAX, cached no more
 * than the input it is part of); anything else makes the response unreadable,
 * and an unreadable response is charged its full reservation.
 */
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

#define TOKENS_MAX 10000000000LL /* no request is billed for more */
#define INFLATE_CHUNK 16384

enum { MODE_SNIFF, MODE_JSON, MODE_SSE, MODE_DEAD };

/* The watch lists: each is indexed by these (Gemini's by even/odd, below). */
enum { W_USAGE, W_ERROR, W_TYPE, W_USAGE2 };

static const char *const w_openai[] = { "usage", "error" };
static const char *const w_responses_json[] = { "usage", "error" };
static const char *const w_responses_sse[] = { "response.usage", "error", "type" };
static const char *const w_anthropic_json[] = { "usage", "error", "type" };
static const char *const w_anthropic_sse[] = { "message.usage", "error", "type", "usage" };
/* Gemini: even indices are usage, odd ones errors (a body, an array element or an SSE event). */
static const char *const w_gemini[] = { "usageMetadata", "error", "*.usageMetadata", "*.error" };

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *usage_result_name(enum usage_result r)
{
	switch (r) {
	case USAGE_OK: return "usage";
	case USAGE_NONE: return "no_usage";
	case USAGE_BAD: return "unreadable";
	case USAGE_ERROR: return "stream_error";
	}
	return "?";
}

/* An optional count: absent or null is 0 (false when required), anything but an integer in range is bad. */
static bool count_of(json_t *o, const char *key, bool required, int64_t *v)
{
	json_t *x = json_is_object(o) ? json_object_get(o, key) : NULL;

	*v = 0;
	if (!x || json_is_null(x))
		return !required;
	if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > TOKENS_MAX)
		return false;
	*v = json_integer_value(x);
	return true;
}

static bool openai_tokens(json_t *u, bool embeddings, struct budget_tokens *t)
{
	int64_t prompt, completion, cached;

	if (!json_is_object(u) || !count_of(u, "prompt_tokens", true, &prompt) ||
	    !count_of(u, "completion_tokens", !embeddings, &completion) ||
	    !count_of(json_object_get(u, "prompt_tokens_details"), "cached_tokens", false, &cached) || cached > prompt)
		return false;
	*t = (struct budget_tokens){ .input = prompt - cached, .cached = cached, .output = completion };
	return true;
}

static bool responses_tokens(json_t *u, struct budget_tokens *t)
{
	int64_t in, out, cached;

	if (!json_is_object(u) || !count_of(u, "input_tokens", true, &in) || !count_of(u, "output_tokens", true, &out) ||
	    !count_of(json_object_get(u, "input_tokens_details"), "cached_tokens", false, &cached) || cached > in)
		return false;
	*t = (struct budget_tokens){ .input = in - cached, .cached = cached, .output = out };
	return true;
}

/* Anthropic counts cache reads and writes beside input_tokens, not inside it. */
static bool anthropic_tokens(json_t *u, struct budget_tokens *t)
{
	int64_t in, out, read, write, w5m, w1h;
	json_t *cc = json_is_object(u) ? json_object_get(u, "cache_creation") : NULL;

	if (!json_is_object(u) || !count_of(u, "input_tokens", true, &in) || !count_of(u, "output_tokens", true, &out) ||
	    !count_of(u, "cache_read_input_tokens", false, &read) ||
	    !count_of(u, "cache_creation_input_tokens", false, &write) ||
	    !count_of(cc, "ephemeral_5m_input_tokens", false, &w5m) ||
	    !count_of(cc, "ephemeral_1h_input_tokens", false, &w1h))
		return false;
	if (!json_object_get(u, "cache_creation_input_tokens") || json_is_null(json_object_get(u, "cache_creation_input_tokens")))
		write = w5m + w1h;
	if (w1h > write)
		return false;
	*t = (struct budget_tokens){
		.input = in, .cached = read, .cache_write = write - w1h, .cache_write_1h = w1h, .output = out,
	};
	return true;
}

/* Gemini: promptTokenCount includes the cached part; thinking is billed as output. */
static bool gemini_tokens(json_t *u, struct budget_tokens *t)
{
	int64_t prompt, cand, thoughts, cached, tool;

	if (!json_is_object(u) || !count_of(u, "promptTokenCount", true, &prompt) ||
	    !count_of(u, "candidatesTokenCount", false, &cand) || !count_of(u, "thoughtsTokenCount", false, &thoughts) ||
	    !count_of(u, "cachedContentTokenCount", false, &cached) ||
	    !count_of(u, "toolUsePromptTokenCount", false, &tool) || cached > prompt)
		return false;
	*t = (struct budget_tokens){ .input = prompt - cached + tool, .cached = cached, .output = cand + thoughts };
	return true;
}

static const char *const *watch_list(enum budget_format f, bool sse, int *n)
{
	switch (f) {
	case BUDGET_FORMAT_OPENAI_RESPONSES:
		*n = sse ? N(w_responses_sse) : N(w_responses_json);
		return sse ? w_responses_sse : w_responses_json;
	case BUDGET_FORMAT_ANTHROPIC:
		*n = sse ? N(w_anthropic_sse) : N(w_anthropic_json);
		return sse ? w_anthropic_sse : w_anthropic_json;
	case BUDGET_FORMAT_GEMINI:
		*n = N(w_gemini);
		return w_gemini;
	default:
		*n = N(w_openai);
		return w_openai;
	}
}

static void clear_cur(struct usage_parser *u)
{
	for (int i = 0; i < JSCAN_WATCH_MAX; i++) {
		json_decref(u->cur[i]);
		u->cur[i] = NULL;
	}
	u->cur_over = false;
}

/* A value at a watched path, in the event or body being read. */
static void on_value(void *arg, int watch, const char *text, size_t len)
{
	struct usage_parser *u = arg;
	json_t *v;

	if (!text) { /* longer than any usage object: not one we can read */
		u->cur_over = true;
		return;
	}
	v = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
	if (!v) {
		u->bad = true;
		return;
	}
	if (u->format == BUDGET_FORMAT_GEMINI) { /* every chunk carries the usage so far: the last one counts */
		if (watch % 2 == 0) {
			if (gemini_tokens(v, &u->tokens))
				u->have_usage = u->final = true;
			else
				u->bad = true;
		} else if (!json_is_null(v)) {
			u->error = true;
		}
		json_decref(v);
		return;
	}
	if (u->cur[watch]) /* the same member twice: two readings, so none */
		u->bad = true;
	json_decref(u->cur[watch]);
	u->cur[watch] = v;
}

static const char *cur_string(struct usage_parser *u, int w, const char *fallback)
{
	return json_is_string(u->cur[w]) ? json_string_value(u->cur[w]) : fallback;
}

static void take_usage(struct usage_parser *u, bool ok)
{
	if (ok)
		u->have_usage = u->final = true;
	else
		u->bad = true;
}

/* One SSE event (or the whole JSON body, as an event without a name) is complete. */
static void on_event(void *arg, const char *event, bool done_marker, bool json_ok)
{
	struct usage_parser *u = arg;
	const char *type;

	if (!json_ok) {
		if (done_marker)
			u->done_marker = true;
		else
			u->bad = true; /* an event that is neither JSON nor [DONE] */
		clear_cur(u);
		return;
	}
	if (u->cur_over && u->format != BUDGET_FORMAT_GEMINI)
		u->bad = true;
	if (u->cur[W_ERROR] && !json_is_null(u->cur[W_ERROR]))
		u->error = true;
	switch (u->format) {
	case BUDGET_FORMAT_OPENAI_CHAT:
	case BUDGET_FORMAT_OPENAI_EMBEDDINGS:
		if (u->cur[W_USAGE] && !json_is_null(u->cur[W_USAGE]))
			take_usage(u, openai_tokens(u->cur[W_USAGE], u->format == BUDGET_FORMAT_OPENAI_EMBEDDINGS,
						    &u->tokens));
		break;
	case BUDGET_FORMAT_OPENAI_RESPONSES:
		if (!u->sse) { /* the response object; usage is null until it completed */
			if (u->cur[W_USAGE] && !json_is_null(u->cur[W_USAGE]))
				take_usage(u, responses_tokens(u->cur[W_USAGE], &u->tokens));
			break;
		}
		type = cur_string(u, W_TYPE, event);
		if (!strcmp(type, "response.completed") || !strcmp(type, "response.incomplete"))
			take_usage(u, responses_tokens(u->cur[W_USAGE], &u->tokens));
		else if (!strcmp(type, "response.failed") || !strcmp(type, "error"))
			u->error = true;
		break;
	case BUDGET_FORMAT_ANTHROPIC:
		type = cur_string(u, W_TYPE, event);
		if (!u->sse) {
			if (!strcmp(type, "error"))
				u->error = true;
			else if (u->cur[W_USAGE])
				take_usage(u, anthropic_tokens(u->cur[W_USAGE], &u->tokens));
			break;
		}
		if (!strcmp(type, "message_start")) {
			json_decref(u->usage);
			u->usage = json_is_object(u->cur[W_USAGE]) ? json_deep_copy(u->cur[W_USAGE]) : NULL;
			if (!u->usage)
				u->bad = true;
		} else if (!strcmp(type, "message_delta")) { /* cumulative counts: each one present replaces */
			if (!u->usage || !json_is_object(u->cur[W_USAGE2]) ||
			    json_object_update(u->usage, u->cur[W_USAGE2]))
				u->bad = true;
		} else if (!strcmp(type, "message_stop")) {
			take_usage(u, u->usage && anthropic_tokens(u->usage, &u->tokens));
		} else if (!strcmp(type, "error")) {
			u->error = true;
		}
		break;
	default:
		break;
	}
	clear_cur(u);
}

void usage_init(struct usage_parser *u, enum budget_format f)
{
	memset(u, 0, sizeof(*u));
	u->format = f;
	u->mode = MODE_SNIFF;
}

/* The first byte that is not a blank decides what the body is. */
static void start_mode(struct usage_parser *u, char c)
{
	const char *const *w;
	int n;

	if (c == '{' || c == '[') {
		w = watch_list(u->format, false, &n);
		u->js = malloc(sizeof(*u->js));
		if (u->js)
			jscan_init(u->js, w, n, on_value, u);
		u->mode = MODE_JSON;
	} else {
		w = watch_list(u->format, true, &n);
		u->sse = malloc(sizeof(*u->sse));
		if (u->sse)
			sse_init(u->sse, w, n, on_value, on_event, u);
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
		jscan_feed(u->js, p, len);
	else if (u->mode == MODE_SSE)
		sse_feed(u->sse, p, len);
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

void usage_feed(struct usage_parser *u, const void *data, size_t len)
{
	const unsigned char *p = data;

	if (!len || u->bad || u->mode == MODE_DEAD)
		return;
	if (!u->z && u->mode == MODE_SNIFF && !u->js && (p[0] == 0x1f || p[0] == 0x78)) {
		u->z = calloc(1, sizeof(*u->z));
		if (!u->z || inflateInit2(u->z, 15 + 32) != Z_OK) { /* 15+32: gzip or zlib, from the header */
			free(u->z);
			u->z = NULL;
			u->bad = true;
			return;
		}
	}
	if (u->z)
		feed_inflate(u, p, len);
	else
		feed_plain(u, data, len);
}

enum usage_result usage_finish(struct usage_parser *u, struct budget_tokens *out)
{
	memset(out, 0, sizeof(*out));
	if (u->z && !u->bad) {
		u->z->next_in = NULL;
		u->z->avail_in = 0;
		if (inflate(u->z, Z_FINISH) != Z_STREAM_END)
			u->bad = true; /* the compressed stream was cut */
	}
	if (u->mode == MODE_JSON && !u->bad) {
		if (jscan_end(u->js))
			on_event(u, "", false, true);
		else
			u->bad = true;
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

void usage_free(struct usage_parser *u)
{
	clear_cur(u);
	json_decref(u->usage);
	if (u->z) {
		inflateEnd(u->z);
		free(u->z);
	}
	free(u->js);
	free(u->sse);
	memset(u, 0, sizeof(*u));
}
