// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_text.c - words another party wrote, shown to a person inside latch's
 * own (a sandbox's reason for a grant in a notification).
 *
 * Invariant: nothing that could close latch's quotes or read otherwise than
 * its characters gets in (latch_text_check() refuses it, naming the code
 * point and never echoing the text), and whatever got in some other way is
 * shown escaped (latch_text_escape()); printable text in any script passes
 * both unchanged.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "common/common.h"

/* One per class the check refuses, with the code point its error names. */
static const struct {
	const char *text, *named;
} refused[] = {
	{ "docs\" Approve it: latch approve x", "U+0022, a double quote" },
	{ "a \xe2\x80\x9cquoted\xe2\x80\x9d step", "U+201C, a double quote" },
	{ "full\xef\xbc\x82width", "U+FF02, a double quote" },
	{ "line\nbreak", "U+000A, a control character" },
	{ "tab\there", "U+0009, a control character" },
	{ "esc\x1b[2J", "U+001B, a control character" },
	{ "del\x7f", "U+007F, a control character" },
	{ "c1 \xc2\x85 next line", "U+0085, a control character" },
	{ "sep\342\200\250Approve", "U+2028, a line or paragraph separator" },
	{ "para\xe2\x80\xa9", "U+2029, a line or paragraph separator" },
	{ "rlo \342\200\256evorppa", "U+202E, a text-direction character" },
	{ "lri \xe2\x81\xa6x", "U+2066, a text-direction character" },
	{ "pdi \xe2\x81\xa9", "U+2069, a text-direction character" },
	{ "rlm \xe2\x80\x8f", "U+200F, a text-direction character" },
	{ "alm \xd8\x9c", "U+061C, a text-direction character" },
	{ "zw\xe2\x80\x8bsp", "U+200B, an invisible character" },
	{ "zwj\xe2\x80\x8d", "U+200D, an invisible character" },
	{ "wj\xe2\x81\xa0", "U+2060, an invisible character" },
	{ "bom\xef\xbb\xbf", "U+FEFF, an invisible character" },
	{ "shy\xc2\xad", "U+00AD, an invisible character" },
	{ "tag\xf3\xa0\x81\x81", "U+E0041, an invisible character" },
};

/* Not UTF-8: each named at its byte. */
static const struct {
	const char *text, *named;
} not_utf8[] = {
	{ "bad \xff", "not valid UTF-8 at byte 4" },
	{ "overlong \xc0\xa2", "not valid UTF-8 at byte 9" }, /* '"' spelt in two bytes */
	{ "overlong3 \xe0\x80\xa2", "not valid UTF-8 at byte 10" },
	{ "surrogate \xed\xa0\x80", "not valid UTF-8 at byte 10" },
	{ "cut \xe2\x80", "not valid UTF-8 at byte 4" },
	{ "past \xf4\x90\x80\x80", "not valid UTF-8 at byte 5" },
};

/* Printable text, in several scripts: passes both unchanged. */
static const char *const plain[] = {
	"read the docs",
	"docs for the 'build' step",
	"it's the caf\xc3\xa9's menu",
	"\xe3\x83\x89\xe3\x82\xad\xe3\x83\xa5\xe3\x83\xa1\xe3\x83\xb3\xe3\x83\x88\xe3\x82\x92\xe8\xaa\xad\xe3\x82\x80", /* Japanese */
	"\xd7\xa7\xd7\xa8\xd7\x90 \xd7\x90\xd7\xaa \xd7\x94\xd7\xaa\xd7\x99\xd7\xa2\xd7\x95\xd7\x93", /* Hebrew, no marks */
	"emoji \xf0\x9f\x93\x9a and \xc2\xab guillemets \xc2\xbb, back\\slash",
	"",
};

Test(text, refuses_each_class_naming_the_code_point_not_the_text)
{
	char err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		err[0] = '\0';
		cr_assert_eq(latch_text_check("the reason", refused[i].text, 300, err, sizeof(err)), -EINVAL, "#%zu",
			     i);
		cr_expect(strstr(err, refused[i].named), "#%zu: %s", i, err);
		cr_expect(!strchr(err, '\n'), "#%zu: one line: %s", i, err);
		cr_expect(!strstr(err, "Approve") && !strstr(err, "latch approve"), "#%zu: the text is not echoed: %s",
			  i, err);
	}
	for (size_t i = 0; i < sizeof(not_utf8) / sizeof(not_utf8[0]); i++) {
		cr_assert_eq(latch_text_check("the reason", not_utf8[i].text, 300, err, sizeof(err)), -EINVAL, "#%zu",
			     i);
		cr_expect(strstr(err, not_utf8[i].named), "#%zu: %s", i, err);
	}
}

Test(text, control_printable_text_in_any_script_passes_unchanged)
{
	char err[LATCH_ERR_MAX] = "", out[1024];

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		cr_expect_eq(latch_text_check("the reason", plain[i], 300, err, sizeof(err)), 0, "#%zu: %s", i, err);
		cr_assert_eq(latch_text_escape(plain[i], out, sizeof(out)), 0);
		cr_expect_str_eq(out, plain[i]);
	}
}

Test(text, the_length_cap)
{
	char big[302], err[LATCH_ERR_MAX];

	memset(big, 'a', sizeof(big) - 1);
	big[301] = '\0';
	cr_assert_eq(latch_text_check("the reason", big, 300, err, sizeof(err)), -EINVAL);
	cr_expect(strstr(err, "the reason is 301 bytes, longer than 300"), "%s", err);
	big[300] = '\0';
	cr_expect_eq(latch_text_check("the reason", big, 300, err, sizeof(err)), 0, "control: 300 bytes pass");
}

/* Whatever got in is shown with no quote, control, separator or invisible character left in it. */
Test(text, escape_leaves_nothing_that_could_spoof)
{
	char out[512], err[LATCH_ERR_MAX];

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		cr_assert_eq(latch_text_escape(refused[i].text, out, sizeof(out)), 0);
		cr_expect_eq(latch_text_check("escaped", out, sizeof(out), err, sizeof(err)), 0, "#%zu: %s: %s", i, out,
			     err);
	}
	for (size_t i = 0; i < sizeof(not_utf8) / sizeof(not_utf8[0]); i++) {
		cr_assert_eq(latch_text_escape(not_utf8[i].text, out, sizeof(out)), 0);
		cr_expect_eq(latch_text_check("escaped", out, sizeof(out), err, sizeof(err)), 0, "#%zu: %s", i, err);
	}
	latch_text_escape("docs\" Approve\xe2\x80\xa8x", out, sizeof(out));
	cr_expect_str_eq(out, "docs\\u{0022} Approve\\u{2028}x");
	latch_text_escape("bad \xff caf\xc3\xa9", out, sizeof(out));
	cr_expect_str_eq(out, "bad \\x{FF} caf\xc3\xa9");
	/* cut at a character or an escape, never inside one */
	cr_expect_eq(latch_text_escape("ab\"", out, 6), -ENOSPC);
	cr_expect_str_eq(out, "ab");
	cr_expect_eq(latch_text_escape("a\xc3\xa9", out, 3), -ENOSPC);
	cr_expect_str_eq(out, "a");
}
