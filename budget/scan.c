// SPDX-License-Identifier: GPL-2.0-only
/*
 * scan.c - read usage out of a stream without keeping the stream.
 *
 * A response can be megabytes of JSON or an SSE stream that lasts minutes,
 * and the meter sees it chunk by chunk as it goes to the guest.  jscan walks
 * JSON one byte state at a time (strings are skipped 16 bytes a step to the
 * next quote or backslash) and keeps only the nesting, which watched paths
 * are still live at each of the first JSCAN_KEYS levels (a bit mask,
 * narrowed as each key ends: the watch list is compiled once, not per scan)
 * and the text of a value at a watched path ("usage", "message.usage",
 * "*.usageMetadata"), at most JSCAN_CAPTURE bytes, handed over in place when
 * it lies in one chunk.  The callers read plain integers and strings
 * themselves (jscan_plain_*) and give anything else to jansson, so a value
 * is read as jansson reads it.  It follows strings exactly, so text the
 * model wrote (a fake `"usage": {...}` or a fake SSE event inside a string)
 * is never mistaken for structure.  sse splits lines and fields and feeds each event's data to a
 * fresh jscan; it keeps a field name and an event name, never a line.
 */
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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

_Static_assert(JSCAN_WATCH_MAX <= 64, "a watch list is a bit mask in a jscan_mask");

static bool is_arr(const struct jscan *j, int level)
{
	return j->is_array[level];
}

static void jscan_reset(struct jscan *j)
{
	j->state = ST_VALUE;
	j->depth = 0;
	j->live[0] = j->paths->top;
	j->klen = 0;
	j->key_long = false;
	j->esc = false;
	j->key_escape = false;
	j->cap_watch = -1;
	j->cap_len = 0;
	j->cap_over = false;
	j->bad = false;
	j->done = false;
}

void budget_jscan_compile(struct jscan_paths *paths, const char *const *watch, int n_watch)
{
	memset(paths, 0, sizeof(*paths));
	paths->n_watch = n_watch < JSCAN_WATCH_MAX ? n_watch : JSCAN_WATCH_MAX;
	for (int w = 0; w < paths->n_watch; w++) {
		struct jscan_watch *jw = &paths->w[w];
		const char *s = watch[w];
		jscan_mask bit = (jscan_mask)1 << w;

		if (*s == '?') {
			paths->presence |= bit;
			s++;
		}
		if (!strncmp(s, "**.", 3)) {
			jw->nseg = -1;
			jw->seg[0] = s + 3;
			jw->len[0] = (uint8_t)strlen(s + 3);
			paths->any |= bit;
			if (jw->len[0] && jw->len[0] <= JSCAN_KEY_MAX)
				paths->any_len[jw->len[0]] |= bit;
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
		if (!jw->nseg)
			continue;
		for (int d = 0; d < jw->nseg; d++)
			for (int o = 0; o <= w; o++) {
				struct jscan_watch *ow = &paths->w[o];

				if (ow->nseg > d && ow->len[d] == jw->len[d] &&
				    !memcmp(ow->seg[d], jw->seg[d], jw->len[d])) {
					paths->same[d][w] |= (jscan_mask)1 << o;
					paths->same[d][o] |= bit;
				}
			}
		paths->top |= bit;
		paths->ends_at[jw->nseg] |= bit;
		for (int d = 0; d < jw->nseg; d++) {
			paths->seg_len[d][jw->len[d]] |= bit;
			if (jw->len[d] == 1 && jw->seg[d][0] == '*')
				paths->star[d] |= bit;
		}
	}
}

void budget_jscan_init(struct jscan *j, const struct jscan_paths *paths, jscan_value_cb cb, void *arg)
{
	j->paths = paths;
	j->cb = cb;
	j->arg = arg;
	jscan_reset(j);
}

/*
 * Does the value about to start (at the current depth) sit on a watched
 * path?  A "**.KEY" watch first, then the one of the path's length whose
 * segments all matched (the lowest index: the list's order).
 */
static int watch_match(const struct jscan *j)
{
	int d = j->depth;
	jscan_mask m;

	if (d > JSCAN_KEYS)
		return -1;
	if (d > 0 && !is_arr(j, d - 1) && j->any_hit[d - 1] >= 0)
		return j->any_hit[d - 1];
	m = j->live[d] & j->paths->ends_at[d];
	return m ? __builtin_ctzll(m) : -1;
}

/* A value ended just before end: deliver the capture it closes, and move on. */
/* The capture a value closes: handed over in place when it lies in this chunk, else from cap. */
static void deliver(struct jscan *j, const char *end, const char *cap_from)
{
	int w = j->cap_watch;
	size_t n = (size_t)(end - cap_from);

	j->cap_watch = -1;
	if (!j->cap_len && !j->cap_over) { /* all of it in this chunk: no copy */
		j->cb(j->arg, w, n > JSCAN_CAPTURE ? NULL : cap_from, n);
		return;
	}
	if (!j->cap_over && j->cap_len + n > JSCAN_CAPTURE)
		j->cap_over = true;
	if (!j->cap_over) {
		memcpy(j->cap + j->cap_len, cap_from, n);
		j->cap_len += n;
	}
	j->cb(j->arg, w, j->cap_over ? NULL : j->cap, j->cap_len);
}

/* A value ended just before end: deliver the capture it closes; the state that follows. */
static inline int value_done(struct jscan *j, const char *end, const char *cap_from)
{
	if (j->cap_watch >= 0 && j->depth == j->cap_depth)
		deliver(j, end, cap_from);
	if (j->depth)
		return ST_AFTER;
	j->done = true;
	return ST_END;
}

static void value_start(struct jscan *j, const char *at, const char **cap_from)
{
	int w;

	if (j->cap_watch >= 0 || (w = watch_match(j)) < 0)
		return;
	if (j->paths->presence & ((jscan_mask)1 << w)) {
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
	int d = j->depth;

	if (d == JSCAN_DEPTH_MAX) {
		j->bad = true;
		return false;
	}
	j->is_array[d] = array;
	if (d < JSCAN_KEYS) {
		j->any_hit[d] = -1;
		/* an element is any "*"; an object's members are narrowed by their keys */
		j->live[d + 1] = array ? j->live[d] & j->paths->star[d] : 0;
	}
	j->depth++;
	return true;
}

/*
 * The first '"' or '\\' from i, or n: the bytes a string is skipped to.  16
 * bytes a step where SSE2 is there (every x86-64), else 8 in a word.
 */
static inline size_t string_stop(const char *p, size_t i, size_t n)
{
#ifdef __SSE2__
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');

	for (; i + 16 <= n; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(p + i));
		unsigned m =
			(unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));

		if (m)
			return i + (size_t)__builtin_ctz(m);
	}
#else
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;

	for (; i + 8 <= n; i += 8) {
		uint64_t v, q, b;

		memcpy(&v, p + i, 8);
		q = v ^ (ones * '"');
		b = v ^ (ones * '\\');
		if (((q - ones) & ~q & highs) | ((b - ones) & ~b & highs))
			break; /* one of these 8: found below */
	}
#endif
	while (i < n && p[i] != '"' && p[i] != '\\')
		i++;
	return i;
}

/*
 * Skip through a string from i: returns the index after its closing quote,
 * or n when it goes on past this chunk (esc then says whether the chunk
 * ended inside an escape).  A backslash takes the byte after it, so a quote
 * ends the string only where no escape holds it.  *escaped: a backslash was
 * seen.
 */
static inline size_t skip_string(struct jscan *j, const char *p, size_t n, size_t i, bool *ended, bool *escaped)
{
	*ended = false;
	if (j->esc && i < n) {
		j->esc = false;
		i++;
	}
	while ((i = string_stop(p, i, n)) < n) {
		if (p[i] == '"') {
			*ended = true;
			return i + 1;
		}
		*escaped = true;
		if (i + 1 == n) {
			j->esc = true;
			return n;
		}
		i += 2;
	}
	return n;
}

/* Part of a key (a key may span chunks): remembered up to JSCAN_KEY_MAX, and never one with an escape. */
static void key_piece(struct jscan *j, const char *p, size_t n, bool escaped)
{
	if (j->key_long)
		return;
	if ((size_t)j->klen + n > JSCAN_KEY_MAX || escaped) {
		j->key_long = true;
		return;
	}
	memcpy(j->key + j->klen, p, n);
	j->klen += (int)n;
}

/* A key against a watch's segment of the same length: the first byte before a call to memcmp. */
static inline bool same_key(const char *key, const char *seg, size_t n)
{
	return key[0] == seg[0] && !memcmp(key, seg, n);
}

/*
 * The key of level depth-1 is complete (key, klen; NULL when it was too long
 * or escaped): which watches go on below it.  Only a watch whose segment has
 * the key's length is compared, each distinct segment once.
 */
static inline void key_end(struct jscan *j, const char *key, size_t klen)
{
	int level = j->depth - 1;
	const struct jscan_paths *ps = j->paths;
	jscan_mask m, next = 0;

	if (level >= JSCAN_KEYS || j->cap_watch >= 0)
		return; /* nothing below is matched (inside a capture, push and key_end set it afresh) */
	j->any_hit[level] = -1;
	j->live[level + 1] = 0;
	if (!key || !klen || klen > JSCAN_KEY_MAX) /* matches no watch */
		return;
	for (m = ps->any_len[klen]; m; m &= m - 1)
		if (same_key(key, ps->w[__builtin_ctzll(m)].seg[0], klen)) {
			j->any_hit[level] = (int8_t)__builtin_ctzll(m);
			break;
		}
	for (m = j->live[level] & ps->seg_len[level][klen] & ~ps->ends_at[level]; m;) {
		int w = __builtin_ctzll(m);

		if (same_key(key, ps->w[w].seg[level], klen))
			next |= ps->same[level][w] & m;
		m &= ~ps->same[level][w]; /* those read the same: compared once */
	}
	j->live[level + 1] = next;
}

/* The bytes between tokens, and those a number or true/false/null runs on through. */
enum { C_BLANK = 1, C_SCALAR = 2 };
static const uint8_t byte_class[256] = {
	[' '] = C_BLANK,	  ['\t'] = C_BLANK,	    ['\n'] = C_BLANK,	      ['\r'] = C_BLANK,
	['0' ... '9'] = C_SCALAR, ['a' ... 'z'] = C_SCALAR, ['A' ... 'Z'] = C_SCALAR, ['.'] = C_SCALAR,
	['-'] = C_SCALAR,	  ['+'] = C_SCALAR,
};

/*
 * The states as labels, each going straight to the next (a member's key,
 * colon, value and comma are one pass with no dispatch between them); a
 * chunk that ends mid-way leaves its state in j->state for the next one.
 * A state machine, so one function past 100 lines on purpose: the labels
 * jump into each other, and split into functions each step would return
 * to a dispatch loop, the cost this layout exists to avoid.
 */
void budget_jscan_feed(struct jscan *j, const char *p, size_t n)
{
	const char *cap_from = p; /* where the capture's bytes in this chunk begin */
	size_t i = 0, start, klen;
	const char *key;
	int st = j->state;
	bool ended, escaped;
	unsigned char c;

	if (j->bad)
		return;
	switch (st) {
	case ST_VALUE:
		goto value;
	case ST_ARRAY_FIRST:
		goto array_first;
	case ST_OBJECT_FIRST:
		goto object_first;
	case ST_KEY:
		goto key;
	case ST_KEYSTR:
		goto keystr;
	case ST_COLON:
		goto colon;
	case ST_AFTER:
		goto after;
	case ST_STRING:
		goto string;
	case ST_SCALAR:
		goto scalar;
	default:
		goto end;
	}

/* Skip blanks; at the chunk's end, stay in state s. */
#define BLANKS(s)                                                              \
	do {                                                                   \
		if (i < n && !(byte_class[c = (unsigned char)p[i]] & C_BLANK)) \
			break; /* the usual: a token right away */             \
		while (i < n && byte_class[(unsigned char)p[i]] & C_BLANK)     \
			i++;                                                   \
		if (i == n) {                                                  \
			st = (s);                                              \
			goto out;                                              \
		}                                                              \
		c = (unsigned char)p[i];                                       \
	} while (0)

array_first:
	BLANKS(ST_ARRAY_FIRST);
	if (c == ']') {
		j->depth--;
		i++;
		goto ended_value;
	}
value:
	BLANKS(ST_VALUE);
	value_start(j, p + i, &cap_from);
	i++;
	if (c == '"') {
		j->esc = false;
		goto string;
	}
	if (c == '{') {
		if (!push(j, false))
			goto out;
		goto object_first;
	}
	if (c == '[') {
		if (!push(j, true))
			goto out;
		goto array_first;
	}
	if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n')
		goto scalar;
	goto bad;
string:
	escaped = false;
	i = skip_string(j, p, n, i, &ended, &escaped);
	if (!ended) {
		st = ST_STRING;
		goto out;
	}
	goto ended_value;
scalar:
	while (i < n && byte_class[(unsigned char)p[i]] & C_SCALAR)
		i++;
	if (i == n) {
		st = ST_SCALAR;
		goto out;
	}
ended_value:
	if (value_done(j, p + i, cap_from) == ST_END)
		goto end;
after:
	BLANKS(ST_AFTER);
	i++;
	if (c == ',') {
		if (is_arr(j, j->depth - 1))
			goto value;
		goto key;
	}
	if (c == (is_arr(j, j->depth - 1) ? ']' : '}')) {
		j->depth--;
		goto ended_value;
	}
	goto bad;
object_first:
	BLANKS(ST_OBJECT_FIRST);
	if (c == '}') {
		j->depth--;
		i++;
		goto ended_value;
	}
	goto key_quote;
key:
	BLANKS(ST_KEY);
key_quote:
	i++;
	if (c != '"')
		goto bad;
	j->klen = 0;
	j->key_long = false;
	j->esc = false;
keystr:
	start = i;
	escaped = j->esc; /* the chunk ended inside an escape: an escaped key is never one we watch */
	i = skip_string(j, p, n, i, &ended, &escaped);
	j->key_escape |= escaped; /* the caller may read such a body again, decoded */
	if (!ended) {
		key_piece(j, p + start, i - start, escaped);
		st = ST_KEYSTR;
		goto out;
	}
	if (!j->klen && !j->key_long) { /* all of it in this chunk: no copy */
		key = escaped ? NULL : p + start;
		klen = i - 1 - start;
	} else {
		key_piece(j, p + start, i - 1 - start, escaped);
		key = j->key_long ? NULL : j->key;
		klen = (size_t)j->klen;
	}
	key_end(j, key, klen);
	if (i < n && p[i] == ':') { /* the usual: no blank before the colon */
		i++;
		goto value;
	}
colon:
	BLANKS(ST_COLON);
	i++;
	if (c != ':')
		goto bad;
	goto value;
end: /* ST_END: only blanks may follow */
	BLANKS(ST_END);
	goto bad;
#undef BLANKS

out:
	j->state = st;
	if (j->cap_watch >= 0 && !j->bad && !j->cap_over) { /* the capture goes on in the next chunk */
		size_t k = (size_t)(p + n - cap_from);

		if (j->cap_len + k > JSCAN_CAPTURE) {
			j->cap_over = true;
		} else {
			memcpy(j->cap + j->cap_len, cap_from, k);
			j->cap_len += k;
		}
	}
	return;
bad:
	j->bad = true;
	j->state = st;
}

bool budget_jscan_end(struct jscan *j)
{
	if (!j->bad && j->state == ST_SCALAR && j->depth == 0)
		j->state = value_done(j, NULL, NULL); /* a bare top-level number: nothing was captured */
	return !j->bad && j->done;
}

/* The bytes jansson takes as themselves in a string: printable ASCII but the quote and the backslash. */
static const bool plain_byte[256] = {
	[0x20 ... 0x21] = true, /* '"' is 0x22 */
	[0x23 ... 0x5b] = true, /* '\\' is 0x5c */
	[0x5d ... 0x7e] = true,
};

bool budget_jscan_plain_string(const char *text, size_t len, const char **s, size_t *slen)
{
	if (len < 2 || text[0] != '"' || text[len - 1] != '"')
		return false;
	for (size_t i = 1; i < len - 1; i++)
		if (!plain_byte[(unsigned char)text[i]])
			return false;
	*s = text + 1;
	*slen = len - 2;
	return true;
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

void budget_sse_init(struct sse *s, const struct jscan_paths *paths, jscan_value_cb cb, sse_event_cb on_event,
		     void *arg)
{
	memset(s, 0, offsetof(struct sse, js));
	s->on_event = on_event;
	s->arg = arg;
	s->state = SS_LINE;
	budget_jscan_init(&s->js, paths, cb, arg);
}

/* A blank line: the event is complete (one without data is no event, as the spec says). */
static void sse_dispatch(struct sse *s)
{
	if (s->has_data && s->data_len) {
		bool done = s->data_len == 6 && !memcmp(s->data_head, "[DONE]", 6);
		bool ok = budget_jscan_end(&s->js);

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
	budget_jscan_feed(&s->js, p, n);
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

static void sse_lines(struct sse *s, const char *p, size_t n);

/*
 * A stream's leading BOM is dropped (the SSE spec), however the bytes were
 * cut: matched byte by byte across feeds, and a partial match that turns
 * out not to be one is read as the stream's first bytes.  Read only when
 * the BOM was whole in the first feed, a cut stream and the whole one were
 * two readings (fuzz_scan).
 */
void budget_sse_feed(struct sse *s, const char *p, size_t n)
{
	static const char bom[3] = { '\xef', '\xbb', '\xbf' };
	size_t i = 0;

	while (!s->bom_checked && i < n) {
		if (p[i] != bom[s->bom_len]) {
			s->bom_checked = true;
			sse_lines(s, bom, s->bom_len);
			break;
		}
		i++;
		if (++s->bom_len == 3)
			s->bom_checked = true;
	}
	sse_lines(s, p + i, n - i);
}

static void sse_lines(struct sse *s, const char *p, size_t n)
{
	size_t i = 0, e;

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
		case SS_FIELD: /* to the colon or the line's end, in one go */
			for (; i < n && (c = p[i]) != ':' && c != '\r' && c != '\n'; i++)
				if (s->flen == SSE_FIELD_MAX)
					s->field_long = true;
				else
					s->field[s->flen++] = c;
			if (i < n && c == ':') {
				s->state = SS_SPACE;
				i++;
			}
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
		case SS_EVENT: { /* the rest of the line, kept up to SSE_EVENT_MAX */
			size_t k;

			e = line_end(p, n, i);
			k = e - i < (size_t)(SSE_EVENT_MAX - s->elen) ? e - i : (size_t)(SSE_EVENT_MAX - s->elen);
			memcpy(s->event + s->elen, p + i, k);
			s->elen += (int)k;
			i = e;
			break;
		}
		default: /* SS_IGNORE */
			i = line_end(p, n, i);
			break;
		}
	}
}
