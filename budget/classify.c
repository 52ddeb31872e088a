// SPDX-License-Identifier: GPL-2.0-only
/*
 * classify.c - what a request is, by its provider, method and path alone.
 *
 * budget_classify() decides the usage format from the credential's provider
 * and the exact method and path; it never tidies a spelling, so anything
 * that is not exactly a known endpoint is BUDGET_FORMAT_UNKNOWN and costs the
 * provider's worst case.  budget_fixed_match() matches a kit's priced
 * endpoint.  The names of providers, formats and fetching tools, and what a
 * model name may be, are here too: the words a request is classified in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget/internal.h"

static const char *const provider_names[BUDGET_PROVIDERS] = { "openai", "anthropic", "gemini", "other" };

const char *budget_provider_name(enum budget_provider p)
{
	return (unsigned)p < BUDGET_PROVIDERS ? provider_names[p] : "?";
}

int budget_provider_parse(const char *s, enum budget_provider *p)
{
	for (int i = 0; i < BUDGET_PROVIDERS; i++)
		if (!strcmp(s, provider_names[i])) {
			*p = i;
			return 0;
		}
	return -EINVAL;
}

const char *budget_format_name(enum budget_format f)
{
	static const char *const names[] = { "unknown",		 "free",      "openai_chat", "openai_embeddings",
					     "openai_responses", "anthropic", "gemini",	     "fixed" };

	return (unsigned)f < sizeof(names) / sizeof(names[0]) ? names[f] : "?";
}

/* The bytes of a model name: ASCII letters and digits and "._:/@+-". */
static const bool model_byte[256] = {
	['0' ... '9'] = true, ['a' ... 'z'] = true, ['A' ... 'Z'] = true, ['.'] = true, ['_'] = true,
	[':'] = true,	      ['/'] = true,	    ['@'] = true,	  ['+'] = true, ['-'] = true,
};

bool budget_request_model_ok(const char *s, size_t len)
{
	if (!len || len > BUDGET_MODEL_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!model_byte[(unsigned char)s[i]])
			return false;
	return true;
}

/*
 * The path without its query, or false when it has a spelling with two
 * readings (the broker refuses those; here they simply match nothing).
 */
/* The bytes of a clean path: ASCII letters and digits and "-._~/:@!$&'()*+,=". */
static const bool path_byte[256] = {
	['0' ... '9'] = true, ['a' ... 'z'] = true, ['A' ... 'Z'] = true, ['-'] = true,	 ['.'] = true,
	['_'] = true,	      ['~'] = true,	    ['/'] = true,	  [':'] = true,	 ['@'] = true,
	['!'] = true,	      ['$'] = true,	    ['&'] = true,	  ['\''] = true, ['('] = true,
	[')'] = true,	      ['*'] = true,	    ['+'] = true,	  [','] = true,	 ['='] = true,
};

static bool clean_path(const char *path, char *out, size_t outlen)
{
	size_t n = strcspn(path, "?#");

	if (!n || n >= outlen || path[0] != '/')
		return false;
	memcpy(out, path, n);
	out[n] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (!path_byte[(unsigned char)out[i]])
			return false; /* '%', ';', '\\', blanks, controls, non-ASCII */
		/* "//", "/./", "/../", or a path that ends "/." or "/.." */
		if (out[i] == '/' &&
		    (out[i + 1] == '/' ||
		     (out[i + 1] == '.' &&
		      (out[i + 2] == '/' || !out[i + 2] || (out[i + 2] == '.' && (out[i + 3] == '/' || !out[i + 3]))))))
			return false;
	}
	return true;
}

/* path is base, or base/ID with ID one non-empty segment without ':' */
static bool base_or_id(const char *path, const char *base)
{
	size_t n = strlen(base);

	if (strncmp(path, base, n))
		return false;
	if (!path[n])
		return true;
	return path[n] == '/' && path[n + 1] && !strpbrk(path + n + 1, "/:");
}

static enum budget_format openai_route(const char *m, const char *path)
{
	bool post = !strcmp(m, "POST");

	if (post && (!strcmp(path, "/v1/chat/completions") || !strcmp(path, "/v1/completions")))
		return BUDGET_FORMAT_OPENAI_CHAT;
	if (post && !strcmp(path, "/v1/embeddings"))
		return BUDGET_FORMAT_OPENAI_EMBEDDINGS;
	if (post && !strcmp(path, "/v1/responses"))
		return BUDGET_FORMAT_OPENAI_RESPONSES;
	if (!strcmp(m, "GET") && base_or_id(path, "/v1/models"))
		return BUDGET_FORMAT_FREE;
	return BUDGET_FORMAT_UNKNOWN;
}

static enum budget_format anthropic_route(const char *m, const char *path)
{
	bool post = !strcmp(m, "POST");

	if (post && !strcmp(path, "/v1/messages"))
		return BUDGET_FORMAT_ANTHROPIC;
	if (post && !strcmp(path, "/v1/messages/count_tokens"))
		return BUDGET_FORMAT_FREE;
	if (!strcmp(m, "GET") && base_or_id(path, "/v1/models"))
		return BUDGET_FORMAT_FREE;
	return BUDGET_FORMAT_UNKNOWN;
}

/* Gemini's native API puts the model in the path: /v1beta/models/MODEL:ACTION. */
static enum budget_format gemini_route(const char *m, const char *path, char *model, size_t mlen)
{
	static const char *const bases[] = { "/v1beta/models", "/v1/models", "/v1alpha/models" };
	bool post = !strcmp(m, "POST");
	const char *rest, *colon;

	if (!strncmp(path, "/v1beta/openai/", 15)) { /* the OpenAI-compatible endpoint */
		char sub[1024];

		snprintf(sub, sizeof(sub), "/v1/%s", path + 15);
		return openai_route(m, sub);
	}
	for (size_t b = 0; b < sizeof(bases) / sizeof(bases[0]); b++) {
		size_t n = strlen(bases[b]);

		if (!strcmp(m, "GET") && base_or_id(path, bases[b]))
			return BUDGET_FORMAT_FREE;
		if (!post || strncmp(path, bases[b], n) || path[n] != '/')
			continue;
		rest = path + n + 1;
		colon = strchr(rest, ':');
		if (!colon || strchr(rest, '/') || !budget_request_model_ok(rest, (size_t)(colon - rest)) ||
		    memchr(rest, ':', (size_t)(colon - rest)))
			return BUDGET_FORMAT_UNKNOWN;
		if (!strcmp(colon + 1, "countTokens"))
			return BUDGET_FORMAT_FREE;
		if (strcmp(colon + 1, "generateContent") && strcmp(colon + 1, "streamGenerateContent"))
			return BUDGET_FORMAT_UNKNOWN;
		snprintf(model, mlen, "%.*s", (int)(colon - rest), rest);
		return BUDGET_FORMAT_GEMINI;
	}
	return BUDGET_FORMAT_UNKNOWN;
}

int budget_classify(enum budget_provider p, const char *method, const char *path, struct budget_class *out)
{
	char clean[1024];

	memset(out, 0, sizeof(*out));
	out->format = BUDGET_FORMAT_UNKNOWN;
	if (!method || !path || !clean_path(path, clean, sizeof(clean)))
		return 0;
	switch (p) {
	case BUDGET_ANTHROPIC:
		out->format = anthropic_route(method, clean);
		break;
	case BUDGET_GEMINI:
		out->format = gemini_route(method, clean, out->model, sizeof(out->model));
		break;
	case BUDGET_OPENAI:
	case BUDGET_OTHER: /* an OpenAI-compatible server */
		out->format = openai_route(method, clean);
		break;
	default:
		break;
	}
	return 0;
}

/* PATH matches PAT: '*' stands for one or more bytes other than '/' (a segment, or part of one). */
static bool glob_match(const char *pat, const char *path)
{
	for (; *pat != '*'; pat++, path++) {
		if (*pat != *path)
			return false;
		if (!*pat)
			return true;
	}
	pat++;
	for (size_t i = 0; path[i] && path[i] != '/'; i++)
		if (glob_match(pat, path + i + 1))
			return true;
	return false;
}

bool budget_fixed_match(const struct budget_fixed *f, const char *method, const char *path)
{
	char clean[1024];

	return f->method && f->path && method && path && !strcmp(f->method, method) &&
	       clean_path(path, clean, sizeof(clean)) && glob_match(f->path, clean);
}

static const char *const fetch_tool_names[BUDGET_FETCH_TOOLS] = { "web_fetch", "mcp", "url_context" };

const char *budget_fetch_tool_name(enum budget_fetch_tool t)
{
	return (unsigned)t < BUDGET_FETCH_TOOLS ? fetch_tool_names[t] : "?";
}

int budget_fetch_tool_parse(const char *s, enum budget_fetch_tool *t)
{
	for (int i = 0; i < BUDGET_FETCH_TOOLS; i++)
		if (!strcmp(s, fetch_tool_names[i])) {
			*t = i;
			return 0;
		}
	return -EINVAL;
}
