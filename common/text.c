// SPDX-License-Identifier: GPL-2.0-only
/*
 * text.c - words another party wrote, made fit to show a person inside
 * latch's own.
 *
 * A sandbox's reason for a grant is quoted in a notification that also says
 * what to type to approve it.  Were a double quote let in, the reason could
 * close latch's quotes and go on in latch's voice; a line separator, a
 * direction override or an invisible character can make it read as other
 * words than its characters.  So such text is checked where it comes in
 * (refused with the code point, never echoed), and escaped wherever it is
 * shown, for anything that got in some other way (a state file).  One
 * definition of "refused" serves both, so the check and the escape can't
 * drift apart.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

/* One UTF-8 character at p (n bytes left): its length, with *cp; 0 when it is not UTF-8 (overlong, surrogate, cut). */
static size_t utf8_next(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t c, min;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		c = p[0] & 0x1f;
		min = 0x80;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		c = p[0] & 0x0f;
		min = 0x800;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		c = p[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Why cp may not be shown inside latch's words, or NULL when it may. */
static const char *refused_why(uint32_t cp)
{
	if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f))
		return "a control character";
	if (cp == '"' || (cp >= 0x201c && cp <= 0x201f) || cp == 0x2033 || cp == 0xff02)
		return "a double quote, which could close latch's quotes (write ' instead)";
	if (cp == 0x2028 || cp == 0x2029)
		return "a line or paragraph separator";
	if (cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	    (cp >= 0x2066 && cp <= 0x2069))
		return "a text-direction character";
	if (cp == 0x00ad || cp == 0x180e || (cp >= 0x200b && cp <= 0x200d) || (cp >= 0x2060 && cp <= 0x2064) ||
	    cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0xe0000 && cp <= 0xe007f))
		return "an invisible character";
	return NULL;
}

int latch_text_check(const char *what, const char *s, size_t max, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), off = 0;

	if (n > max)
		return latch_errf(err, errlen, -EINVAL, "%s is %zu bytes, longer than %zu", what, n, max);
	while (off < n) {
		const char *why;
		uint32_t cp;
		size_t len = utf8_next(p + off, n - off, &cp);

		if (!len)
			return latch_errf(err, errlen, -EINVAL, "%s is not valid UTF-8 at byte %zu; send UTF-8 text",
					  what, off);
		why = refused_why(cp);
		if (why)
			return latch_errf(err, errlen, -EINVAL,
					  "%s holds U+%04X, %s, at byte %zu; send one line of plain text", what,
					  (unsigned)cp, why, off);
		off += len;
	}
	return 0;
}

int latch_text_escape(const char *s, char *out, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), off = 0, o = 0;

	if (!len)
		return -ENOSPC;
	while (off < n) {
		char esc[16];
		const char *piece;
		uint32_t cp;
		size_t step = utf8_next(p + off, n - off, &cp), plen;

		if (!step) {
			snprintf(esc, sizeof(esc), "\\x{%02X}", p[off]);
			piece = esc;
			step = 1;
			plen = strlen(esc);
		} else if (refused_why(cp)) {
			snprintf(esc, sizeof(esc), "\\u{%04X}", (unsigned)cp);
			piece = esc;
			plen = strlen(esc);
		} else {
			piece = s + off;
			plen = step;
		}
		if (o + plen >= len) {
			out[o] = '\0';
			return -ENOSPC;
		}
		memcpy(out + o, piece, plen);
		o += plen;
		off += step;
	}
	out[o] = '\0';
	return 0;
}
