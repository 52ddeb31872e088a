// SPDX-License-Identifier: GPL-2.0-only
/*
 * scan.c - read usage out of a stream without keeping the stream.
 *
 * A response can be megabytes of JSON or an SSE stream that lasts minutes,
 * and the meter sees it chunk by chunk as it goes to the guest.  jscan walks
 * JSON one byte state at a time (strings are skipped with memchr) and keeps
 * only the nesting, the member keys of the first JSCAN_KEYS levels and the
 * text of a value at a watched path ("usage", "message.usage",
 * "*.usageMetadata"), at most JSCAN_CAPTURE bytes, which jansson then
 * parses.  It follows strings exactly, so text the model wrote (a fake
 * `"usage": {...}` or a fake SSE event inside a string) is never mistaken for
 * structure.  sse splits lines and fields and feeds each event's data to a
 * fresh jscan; it keeps a field name and an event name, never a line.
 */
#include <string.h>

#include "budget/internal.h"

enum {
	ST_VALUE, /* a value is due (top level, after ':' or after ',' in an array) */
	ST_ARRAY_FIRST, /* after '[': a value or ']' */
	ST_OBJECT_FIRST, /* after '{': a key or '}' */
	ST_KEY, /* after ',' in an object: a key */
	ST_KEYSTR, /* inside a key */
	ST_COLON,
	ST_AFTER, /* after a value inside a container: ',' or the closing bracket */
	ST_STRING, /* inside a string value */
	ST_SCALAR, /* inside a number, true, false or null */
	ST_END, /* the top-level value is complete: only blanks may follow */
};

static bool is_arr(const struct jscan *j, int level)
{
	return j->is_array[level >> 3] & (1u << (level & 7));
}

static void jscan_reset(struct jscan *j)
{
	j->state = ST_VALUE;
	j->depth = 0;
	j->klen = 0;
	j->key_long = false;
	j->esc = false;
	j->cap_watch = -1;
	j->cap_len = 0;
	j->cap_over = false;
	j->bad = false;
	j->done = false;
}

void jscan_init(struct jscan *j, const char *const *watch, int n_watch, jscan_value_cb cb, void *arg)
{
	j->n_watch = n_watch < JSCAN_WATCH_MAX ? n_watch : JSCAN_WATCH_MAX;
	j->n_any = 0;
	memset(j->n_by_depth, 0, sizeof(j->n_by_depth));
	for (int w = 0; w < j->n_watch; w++) {
		struct jscan_watch *jw = &j->w[w];
		const char *s = watch[w];

		jw->nseg = 0;
		jw->presence = *s == '?';
		s += jw->presence;
		if (!strncmp(s, "**.", 3)) {
			jw->nseg = -1;
			jw->seg[0] = s + 3;
			jw->len[0] = (uint8_t)strlen(s + 3);
			j->any[j->n_any++] = (uint8_t)w;
			continue;
		}
		for (;;) {
			const char *dot = strchr(s, '.');
			size_t len = dot ? (size_t)(dot - s) : strlen(s);

			if (jw->nseg == JSCAN_KEYS || !len || len > JSCAN_KEY_MAX) {
				jw->nseg = 0; /* deeper or longer than anything remembered: never matches */
				break;
			}
			jw->seg[jw->nseg] = s;
			jw->len[jw->nseg++] = (uint8_t)len;
			if (!dot)
				break;
			s = dot + 1;
		}
		if (jw->nseg)
			j->by_depth[jw->nseg][j->n_by_depth[jw->nseg]++] = (uint8_t)w;
	}
	j->cb = cb;
	j->arg = arg;
	jscan_reset(j);
}

/* Does the value about to start (at the current depth) sit on a watched path? */
static int watch_match(const struct jscan *j)
{
	int d = j->depth;

	if (d > JSCAN_KEYS)
		return -1;
	if (d > 0 && !is_arr(j, d - 1) && j->keylen[d - 1]) {
		for (int a = 0; a < j->n_any; a++) {
			const struct jscan_watch *jw = &j->w[j->any[a]];

			if (jw->len[0] == j->keylen[d - 1] && !memcmp(j->key[d - 1], jw->seg[0], jw->len[0]))
				return j->any[a];
		}
	}
	for (int k = 0; k < j->n_by_depth[d]; k++) {
		const struct jscan_watch *jw = &j->w[j->by_depth[d][k]];
		int level;

		for (level = 0; level < d; level++) {
			if (is_arr(j, level) ? !(jw->len[level] == 1 && jw->seg[level][0] == '*') :
					       jw->len[level] != j->keylen[level] ||
						       memcmp(j->key[level], jw->seg[level], jw->len[level]))
				break;
		}
		if (level == d)
			return j->by_depth[d][k];
	}
	return -1;
}

static void cap_append(struct jscan *j, const char *from, const char *to)
{
	size_t n = (size_t)(to - from);

	if (j->cap_over)
		return;
	if (j->cap_len + n > JSCAN_CAPTURE) {
		j->cap_over = true;
		return;
	}
	memcpy(j->cap + j->cap_len, from, n);
	j->cap_len += n;
}

/* A value ended just before end: deliver the capture it closes, and move on. */
static void value_done(struct jscan *j, const char *end, const char *cap_from)
{
	if (j->cap_watch >= 0 && j->depth == j->cap_depth) {
		int w = j->cap_watch;

		cap_append(j, cap_from, end);
		j->cap_watch = -1;
		j->cb(j->arg, w, j->cap_over ? NULL : j->cap, j->cap_len);
	}
	if (j->depth) {
		j->state = ST_AFTER;
	} else {
		j->state = ST_END;
		j->done = true;
	}
}

static void value_start(struct jscan *j, const char *at, const char **cap_from)
{
	int w;

	if (j->cap_watch >= 0 || (w = watch_match(j)) < 0)
		return;
	if (j->w[w].presence) {
		j->cb(j->arg, w, at, 1);
		return;
	}
	j->cap_watch = w;
	j->cap_depth = j->depth;
	j->cap_len = 0;
	j->cap_over = false;
	*cap_from = at;
}

static bool push(struct jscan *j, bool array)
{
	if (j->depth == JSCAN_DEPTH_MAX) {
		j->bad = true;
		return false;
	}
	if (array)
		j->is_array[j->depth >> 3] |= 1u << (j->depth & 7);
	else
		j->is_array[j->depth >> 3] &= ~(1u << (j->depth & 7));
	if (j->depth < JSCAN_KEYS)
		j->keylen[j->depth] = 0;
	j->depth++;
	return true;
}

/*
 * Skip through a string from i: returns the index after its closing quote,
 * or n when it goes on past this chunk (esc then says whether the chunk
 * ended inside an escape).  A quote is the end unless an odd run of
 * backslashes stands before it.
 */
static size_t skip_string(struct jscan *j, const char *p, size_t n, size_t i, bool *ended)
{
	*ended = false;
	if (j->esc && i < n) {
		j->esc = false;
		i++;
	}
	while (i < n) {
		const char *q = memchr(p + i, '"', n - i);
		size_t k, run = 0;

		if (!q) {
			for (k = n; k > i && p[k - 1] == '\\'; k--)
				run++;
			j->esc = run & 1;
			return n;
		}
		for (k = (size_t)(q - p); k > i && p[k - 1] == '\\'; k--)
			run++;
		i = (size_t)(q - p) + 1;
		if (!(run & 1)) {
			*ended = true;
			return i;
		}
	}
	return i;
}

/* Part of a key (a key may span chunks): remembered up to JSCAN_KEY_MAX, and never one with an escape. */
static void key_piece(struct jscan *j, const char *p, size_t n)
{
	int level = j->depth - 1;

	if (level >= JSCAN_KEYS || j->key_long)
		return;
	if ((size_t)j->klen + n > JSCAN_KEY_MAX || memchr(p, '\\', n)) {
		j->key_long = true;
		return;
	}
	memcpy(j->key[level] + j->klen, p, n);
	j->klen += (int)n;
}

static void key_end(struct jscan *j)
{
	int level = j->depth - 1;

	if (level < JSCAN_KEYS)
		j->keylen[level] = j->key_long ? 0 : (uint8_t)j->klen; /* 0: matches no watch */
	j->state = ST_COLON;
}

static bool scalar_byte(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' ||
	       c == '+';
}

void jscan_feed(struct jscan *j, const char *p, size_t n)
{
	const char *cap_from = p; /* where the capture's bytes in this chunk begin */
	size_t i = 0;
	bool ended;

	while (i < n && !j->bad) {
		char c = p[i];

		switch (j->state) {
		case ST_STRING:
			i = skip_string(j, p, n, i, &ended);
			if (ended)
				value_done(j, p + i, cap_from);
			continue;
		case ST_KEYSTR: {
			size_t start = i;

			if (j->esc) /* the chunk ended inside an escape: an escaped key is never one we watch */
				j->key_long = true;
			i = skip_string(j, p, n, i, &ended);
			key_piece(j, p + start, (ended ? i - 1 : i) - start);
			if (ended)
				key_end(j);
			continue;
		}
		case ST_SCALAR:
			if (scalar_byte(c)) {
				i++;
				continue;
			}
			value_done(j, p + i, cap_from); /* c is looked at again below */
			continue;
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			i++;
			continue;
		}
		switch (j->state) {
		case ST_ARRAY_FIRST:
			if (c == ']') {
				j->depth--;
				i++;
				value_done(j, p + i, cap_from);
				break;
			}
			/* fallthrough */
		case ST_VALUE:
			value_start(j, p + i, &cap_from);
			i++;
			if (c == '{') {
				if (push(j, false))
					j->state = ST_OBJECT_FIRST;
			} else if (c == '[') {
				if (push(j, true))
					j->state = ST_ARRAY_FIRST;
			} else if (c == '"') {
				j->state = ST_STRING;
				j->esc = false;
			} else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
				j->state = ST_SCALAR;
			} else {
				j->bad = true;
			}
			break;
		case ST_OBJECT_FIRST:
			if (c == '}') {
				j->depth--;
				i++;
				value_done(j, p + i, cap_from);
				break;
			}
			/* fallthrough */
		case ST_KEY:
			i++;
			if (c != '"') {
				j->bad = true;
				break;
			}
			j->state = ST_KEYSTR;
			j->klen = 0;
			j->key_long = false;
			j->esc = false;
			break;
		case ST_COLON:
			i++;
			if (c == ':')
				j->state = ST_VALUE;
			else
				j->bad = true;
			break;
		case ST_AFTER:
			i++;
			if (c == ',') {
				j->state = is_arr(j, j->depth - 1) ? ST_VALUE : ST_KEY;
			} else if ((c == '}' && !is_arr(j, j->depth - 1)) || (c == ']' && is_arr(j, j->depth - 1))) {
				j->depth--;
				value_done(j, p + i, cap_from);
			} else {
				j->bad = true;
			}
			break;
		default: /* ST_END: something after the value */
			j->bad = true;
			break;
		}
	}
	if (j->cap_watch >= 0 && !j->bad)
		cap_append(j, cap_from, p + n);
}

bool jscan_end(struct jscan *j)
{
	if (!j->bad && j->state == ST_SCALAR && j->depth == 0)
		value_done(j, NULL, NULL); /* a bare top-level number: nothing was captured */
	return !j->bad && j->done;
}

/* ---- SSE (the WHATWG event-stream format) ---- */

enum {
	SS_LINE, /* at the start of a line */
	SS_FIELD, /* in a field name */
	SS_SPACE, /* after the colon: one blank is skipped */
	SS_DATA, /* in a data value: to the jscan */
	SS_EVENT, /* in an event value */
	SS_IGNORE, /* a comment or a field we don't use: to the end of the line */
};

void sse_init(struct sse *s, const char *const *watch, int n_watch, jscan_value_cb cb, sse_event_cb on_event, void *arg)
{
	memset(s, 0, offsetof(struct sse, js));
	s->on_event = on_event;
	s->arg = arg;
	s->state = SS_LINE;
	jscan_init(&s->js, watch, n_watch, cb, arg);
}

/* A blank line: the event is complete (one without data is no event, as the spec says). */
static void sse_dispatch(struct sse *s)
{
	if (s->has_data && s->data_len) {
		bool done = s->data_len == 6 && !memcmp(s->data_head, "[DONE]", 6);
		bool ok = jscan_end(&s->js);

		s->events++;
		s->on_event(s->arg, s->event, done, ok);
	}
	s->has_data = false;
	s->data_len = 0;
	s->elen = 0;
	s->event[0] = '\0';
}

static void data_bytes(struct sse *s, const char *p, size_t n)
{
	if (s->data_len < sizeof(s->data_head))
		memcpy(s->data_head + s->data_len, p,
		       n < sizeof(s->data_head) - s->data_len ? n : sizeof(s->data_head) - s->data_len);
	s->data_len += n;
	jscan_feed(&s->js, p, n);
}

/* The field name is complete: choose where its value goes. */
static void field_start(struct sse *s)
{
	s->field[s->flen] = '\0';
	if (!s->field_long && !strcmp(s->field, "data")) {
		if (s->has_data)
			data_bytes(s, "\n", 1); /* the spec joins data lines with LF */
		else
			jscan_reset(&s->js);
		s->has_data = true;
		s->state = SS_DATA;
	} else if (!s->field_long && !strcmp(s->field, "event")) {
		s->elen = 0;
		s->state = SS_EVENT;
	} else {
		s->state = SS_IGNORE;
	}
}

/* The end of the line from i (LF, CR or CRLF), or n; memchr, since data lines are most of a stream. */
static size_t line_end(const char *p, size_t n, size_t i)
{
	const char *lf = memchr(p + i, '\n', n - i);
	size_t e = lf ? (size_t)(lf - p) : n;
	const char *cr = memchr(p + i, '\r', e - i);

	return cr ? (size_t)(cr - p) : e;
}

void sse_feed(struct sse *s, const char *p, size_t n)
{
	size_t i = 0, e;

	if (!s->bom_checked && n) {
		s->bom_checked = true;
		if (n >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
			i = 3;
	}
	while (i < n) {
		char c = p[i];

		if (s->cr) {
			s->cr = false;
			if (c == '\n') { /* CRLF is one line end */
				i++;
				continue;
			}
		}
		if (c == '\r' || c == '\n') {
			if (s->state == SS_LINE)
				sse_dispatch(s);
			else if (s->state == SS_FIELD || s->state == SS_SPACE)
				field_start(s); /* "data" alone: an empty value */
			if (s->state == SS_EVENT)
				s->event[s->elen] = '\0';
			s->state = SS_LINE;
			s->cr = c == '\r';
			i++;
			continue;
		}
		switch (s->state) {
		case SS_LINE:
			if (c == ':') {
				s->state = SS_IGNORE;
				i++;
				break;
			}
			s->flen = 0;
			s->field_long = false;
			s->state = SS_FIELD;
			/* fallthrough */
		case SS_FIELD:
			i++;
			if (c == ':') {
				s->state = SS_SPACE;
				break;
			}
			if (s->flen == SSE_FIELD_MAX)
				s->field_long = true;
			else
				s->field[s->flen++] = c;
			break;
		case SS_SPACE:
			field_start(s);
			if (c == ' ')
				i++;
			break;
		case SS_DATA:
			e = line_end(p, n, i);
			data_bytes(s, p + i, e - i);
			i = e;
			break;
		case SS_EVENT:
			if (s->elen < SSE_EVENT_MAX)
				s->event[s->elen++] = c;
			i++;
			break;
		default: /* SS_IGNORE */
			i = line_end(p, n, i);
			break;
		}
	}
}
