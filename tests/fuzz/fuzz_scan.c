// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_scan.c - libFuzzer over what the meter reads from an upstream: the
 * streaming JSON scanner and the SSE scanner (budget/scan.c) under the usage
 * reader of each format (budget/usage.c).  Every chunk is fed from a copy of
 * its own exact size, so ASan sees any read past a chunk's end.
 *
 * The input's first byte chooses what is checked:
 *   even  raw: the rest, in any format, read whole and then cut at points
 *         the input chooses (1..64 cuts, chunks of 1 byte included) must
 *         give the same verdict and the same tokens: where a chunk ends
 *         never changes what the meter charges;
 *   odd   embedded: a real-shaped response of one format (JSON or SSE, each
 *         provider's) carries the rest of the input as the model's text (a
 *         JSON string, escaped) and, when jansson reads the rest as JSON,
 *         as an extra member too; its usage object holds counts the input
 *         chooses.  Cut anywhere, the reader must find exactly that usage.
 * Then bytes 1-4 seed the cuts and the counts.
 *
 *   make fuzz-scan          FUZZ_SECS (120) seconds over tests/fuzz/corpus_scan
 *   make fuzz-scan-short    20 s, part of `make check`
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

static const enum budget_format formats[] = {
	BUDGET_FORMAT_OPENAI_CHAT,	BUDGET_FORMAT_OPENAI_EMBEDDINGS,
	BUDGET_FORMAT_OPENAI_RESPONSES, BUDGET_FORMAT_ANTHROPIC,
	BUDGET_FORMAT_GEMINI,
};
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

static uint32_t next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Feed p in chunks whose ends the seed chooses (cuts 0: whole), each from a buffer of its exact size. */
static enum usage_result read_usage(enum budget_format f, const uint8_t *p, size_t n, uint32_t seed, int cuts,
				    struct budget_tokens *out)
{
	struct usage_parser u;
	enum usage_result r;
	size_t off = 0;

	budget_usage_init(&u, f);
	for (int c = 0; off < n; c++) {
		size_t len = n - off;
		char *chunk;

		if (c < cuts) {
			len = seed & 1 ? 1 : 1 + next_rand(&seed) % len; /* often byte by byte */
			next_rand(&seed);
		}
		chunk = malloc(len);
		if (!chunk)
			abort();
		memcpy(chunk, p + off, len);
		budget_usage_feed(&u, chunk, len);
		free(chunk);
		off += len;
	}
	r = budget_usage_finish(&u, out);
	budget_usage_free(&u);
	return r;
}

static void same_tokens(const struct budget_tokens *a, const struct budget_tokens *b)
{
	if (memcmp(a, b, sizeof(*a))) {
		fprintf(stderr,
			"tokens differ: in %lld/%lld cached %lld/%lld cw %lld/%lld cw1h %lld/%lld out %lld/%lld "
			"searches %lld/%lld\n",
			(long long)a->input, (long long)b->input, (long long)a->cached, (long long)b->cached,
			(long long)a->cache_write, (long long)b->cache_write, (long long)a->cache_write_1h,
			(long long)b->cache_write_1h, (long long)a->output, (long long)b->output,
			(long long)a->web_searches, (long long)b->web_searches);
		abort();
	}
}

/* ---- embedded: a known usage in a real-shaped response ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void putf(struct buf *b, const char *fmt, long long x)
{
	char tmp[256];
	int n = snprintf(tmp, sizeof(tmp), fmt, x);

	if (n < 0 || (size_t)n >= sizeof(tmp))
		abort();
	put(b, tmp, (size_t)n);
}

/* The input as a JSON string: every byte that is not plain ASCII as \u00XX (a Latin-1 reading), so any bytes are valid. */
static void put_string(struct buf *b, const uint8_t *p, size_t n)
{
	puts_(b, "\"");
	for (size_t i = 0; i < n; i++) {
		char tmp[8];

		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
			put(b, (const char *)p + i, 1);
		else
			put(b, tmp, (size_t)snprintf(tmp, sizeof(tmp), "\\u%04x", p[i]));
	}
	puts_(b, "\"");
}

struct want {
	int64_t a, b, c, d; /* the counts in the usage object (c <= a) */
};

/*
 * A response of format f whose text is the input and whose usage is w; extra
 * is a JSON value that goes in as one more member (raw in a JSON body, compact
 * on an SSE data line, which can't hold a line end).  *expect: what the reader
 * must find.
 */
static void build(int shape, const struct want *w, const uint8_t *text, size_t tlen, const char *extra, struct buf *b,
		  enum budget_format *f, struct budget_tokens *expect)
{
	memset(expect, 0, sizeof(*expect));
	switch (shape) {
	case 0: /* OpenAI chat, JSON */
		*f = BUDGET_FORMAT_OPENAI_CHAT;
		puts_(b, "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"extra\":");
		puts_(b, extra);
		puts_(b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
		put_string(b, text, tlen);
		putf(b, "}}],\"usage\":{\"prompt_tokens\":%lld", w->a);
		putf(b, ",\"completion_tokens\":%lld", w->b);
		putf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%lld}}}\n", w->c);
		*expect = (struct budget_tokens){ .input = w->a - w->c, .cached = w->c, .output = w->b };
		break;
	case 1: /* OpenAI chat, streamed with include_usage */
		*f = BUDGET_FORMAT_OPENAI_CHAT;
		puts_(b, "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":");
		put_string(b, text, tlen);
		puts_(b, "}}],\"usage\":null}\n\ndata: {\"id\":\"chatcmpl-1\",\"choices\":[],\"extra\":");
		puts_(b, extra);
		putf(b, ",\"usage\":{\"prompt_tokens\":%lld", w->a);
		putf(b, ",\"completion_tokens\":%lld", w->b);
		putf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%lld}}}\n\ndata: [DONE]\n\n", w->c);
		*expect = (struct budget_tokens){ .input = w->a - w->c, .cached = w->c, .output = w->b };
		break;
	case 2: /* OpenAI Responses, streamed */
		*f = BUDGET_FORMAT_OPENAI_RESPONSES;
		puts_(b, "event: response.output_text.delta\r\ndata: {\"type\":\"response.output_text.delta\","
			 "\"delta\":");
		put_string(b, text, tlen);
		puts_(b, "}\r\n\r\nevent: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":"
			 "{\"id\":\"resp_1\",\"extra\":");
		puts_(b, extra);
		puts_(b, ",\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":");
		put_string(b, text, tlen);
		putf(b, "}]}],\"usage\":{\"input_tokens\":%lld", w->a);
		putf(b, ",\"input_tokens_details\":{\"cached_tokens\":%lld}", w->c);
		putf(b, ",\"output_tokens\":%lld}}}\r\n\r\n", w->b);
		*expect = (struct budget_tokens){ .input = w->a - w->c, .cached = w->c, .output = w->b };
		break;
	case 3: /* Anthropic, JSON */
		*f = BUDGET_FORMAT_ANTHROPIC;
		puts_(b, "{\"id\":\"msg_1\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":");
		put_string(b, text, tlen);
		puts_(b, "}],\"extra\":");
		puts_(b, extra);
		putf(b, ",\"usage\":{\"input_tokens\":%lld", w->a);
		putf(b, ",\"cache_read_input_tokens\":%lld", w->c);
		putf(b, ",\"cache_creation_input_tokens\":%lld", w->d);
		putf(b, ",\"output_tokens\":%lld}}", w->b);
		*expect = (struct budget_tokens){
			.input = w->a, .cached = w->c, .cache_write = w->d, .output = w->b, .web_searches = -1
		};
		break;
	case 4: /* Anthropic, streamed: message_start's usage, then message_delta's output */
		*f = BUDGET_FORMAT_ANTHROPIC;
		putf(b,
		     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\","
		     "\"usage\":{\"input_tokens\":%lld",
		     w->a);
		putf(b, ",\"cache_read_input_tokens\":%lld", w->c);
		putf(b, ",\"cache_creation_input_tokens\":%lld,\"output_tokens\":1}}}\n\n", w->d);
		puts_(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
			 "\"delta\":{\"type\":\"text_delta\",\"text\":");
		put_string(b, text, tlen);
		puts_(b, "}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"extra\":");
		puts_(b, extra);
		putf(b,
		     ",\"usage\":{\"output_tokens\":%lld}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		     w->b);
		*expect = (struct budget_tokens){
			.input = w->a, .cached = w->c, .cache_write = w->d, .output = w->b, .web_searches = -1
		};
		break;
	case 5: /* Gemini, alt=sse with CRLF: the last usageMetadata counts */
	case 6: /* Gemini, the JSON array stream */
		*f = BUDGET_FORMAT_GEMINI;
		puts_(b, shape == 5 ? "data: " : "[");
		puts_(b, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":");
		put_string(b, text, tlen);
		puts_(b, "}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":1,"
			 "\"candidatesTokenCount\":1}}");
		puts_(b, shape == 5 ? "\r\n\r\ndata: " : ",\r\n");
		puts_(b, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}]},\"finishReason\":\"STOP\"}],"
			 "\"extra\":");
		puts_(b, extra);
		putf(b, ",\"usageMetadata\":{\"promptTokenCount\":%lld", w->a);
		putf(b, ",\"candidatesTokenCount\":%lld", w->b);
		putf(b, ",\"cachedContentTokenCount\":%lld", w->c);
		/* an image model's answer: its IMAGE tokens are part of the candidates' count */
		putf(b, ",\"candidatesTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":%lld},",
		     w->b - (w->d < w->b ? w->d : w->b));
		putf(b, "{\"modality\":\"IMAGE\",\"tokenCount\":%lld}]}}", w->d < w->b ? w->d : w->b);
		puts_(b, shape == 5 ? "\r\n\r\n" : "]");
		*expect = (struct budget_tokens){ .input = w->a - w->c,
						  .cached = w->c,
						  .output = w->b - (w->d < w->b ? w->d : w->b),
						  .image_output = w->d < w->b ? w->d : w->b };
		break;
	}
}
#define N_SHAPES 7

/* How deep a JSON value nests (the scanner reads JSCAN_DEPTH_MAX levels, jansson 2048). */
static int depth_of(json_t *v)
{
	int most = 0, d;
	const char *k;
	json_t *e;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach(v, k, e)
			if ((d = depth_of(e)) > most)
				most = d;
		return most + 1;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if ((d = depth_of(e)) > most)
				most = d;
		return most + 1;
	}
	return 0;
}

static void embedded(const uint8_t *p, size_t n, uint32_t seed, int shape)
{
	struct want w;
	struct buf b = { 0 };
	struct budget_tokens expect, got;
	enum budget_format f = BUDGET_FORMAT_UNKNOWN;
	enum usage_result r;
	char *extra = NULL;
	json_t *v;

	w.a = next_rand(&seed) % 2000000;
	w.b = next_rand(&seed) % 2000000;
	w.c = w.a ? next_rand(&seed) % (w.a + 1) : 0;
	w.d = next_rand(&seed) % 100000;
	v = json_loadb((const char *)p, n, JSON_DECODE_ANY, NULL);
	if (v && depth_of(v) > JSCAN_DEPTH_MAX - 8)
		goto out; /* deeper than the meter reads: unreadable, charged its reservation (test_budget_scan.c) */
	/*
	 * The input is JSON: it goes in as a member too, as written (a JSON body) or compact (an SSE line, or
	 * an input with a NUL byte, which jansson skips between tokens and the meter reads as no JSON: unreadable,
	 * charged its reservation).
	 */
	if (v)
		extra = (shape == 0 || shape == 3 || shape == 6) && !memchr(p, 0, n) ?
				strndup((const char *)p, n) :
				json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	build(shape, &w, p, n, extra ? extra : "null", &b, &f, &expect);
	free(extra);
	for (int cuts = 0; cuts <= 64; cuts = cuts ? cuts * 4 : 1) {
		r = read_usage(f, (const uint8_t *)b.p, b.len, seed + (uint32_t)cuts, cuts, &got);
		if (r != USAGE_OK) {
			fprintf(stderr, "shape %d, %d cuts: %s, not the usage embedded in:\n%s\n", shape, cuts,
				budget_usage_result_name(r), b.p);
			abort();
		}
		same_tokens(&got, &expect);
	}
	free(b.p);
out:
	json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct budget_tokens whole, cut;
	enum usage_result rw, rc;
	uint32_t seed;

	if (size < 5)
		return 0;
	seed = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 | (uint32_t)data[4] << 24;
	seed |= 1; /* xorshift never leaves 0 */
	if (data[0] & 1) {
		embedded(data + 5, size - 5, seed, (data[0] >> 1) % N_SHAPES);
		return 0;
	}
	{
		enum budget_format f = formats[(data[0] >> 1) % N_FORMATS];
		int cuts = 1 + (int)((data[0] >> 4) * 4);

		rw = read_usage(f, data + 5, size - 5, seed, 0, &whole);
		rc = read_usage(f, data + 5, size - 5, seed, cuts, &cut);
		if (rw != rc) {
			fprintf(stderr, "format %d: %s whole, %s when cut\n", (int)f, budget_usage_result_name(rw),
				budget_usage_result_name(rc));
			abort();
		}
		same_tokens(&whole, &cut);
	}
	return 0;
}
