// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_head.c - the broker's reading of heads (broker/head.c): every
 * byte value in every kind of position gets the grammar's verdict, whether
 * the sixteen-byte steps or the byte loop meet it; a response head is
 * indexed as it lies and its framing lines reach the short head; a request
 * read through the short head reads as through the whole one; an absolute
 * target is read as a path only when it names the listener exactly.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "broker/check.h"

/* What RFC 9110 allows in a field value: HTAB, SP, VCHAR, obs-text; the request line: the same but HTAB. */
static bool value_byte(unsigned b, bool tab)
{
	return (tab && b == '\t') || (b >= 0x20 && b != 0x7f);
}

static enum hb_refusal want_for(unsigned b, bool tab)
{
	if (value_byte(b, tab))
		return HB_OK;
	return b == '\r' ? HB_BARE_CR : b == '\n' ? HB_BARE_LF : HB_HEADER_BYTES;
}

/* A byte at each offset of a 40-byte value: the first offsets in the 16-byte steps, the last in the tail. */
static const size_t offsets[] = { 0, 1, 15, 16, 17, 31, 32, 33, 39 };

/* PREFIX, 40 bytes of 'a' with byte B at AT, SUFFIX into HEAD; its length */
static size_t with_byte(char *head, const char *prefix, unsigned b, size_t at, const char *suffix)
{
	size_t n = strlen(prefix), m = strlen(suffix);

	memcpy(head, prefix, n);
	memset(head + n, 'a', 40);
	head[n + at] = (char)b;
	memcpy(head + n + 40, suffix, m);
	return n + 40 + m;
}

/* Every byte value at every offset of the 40 bytes between PREFIX and SUFFIX gets the grammar's verdict. */
static void each_byte(const char *prefix, const char *suffix, bool tab, const char *where)
{
	char head[128];
	size_t head_len;

	for (unsigned b = 0; b < 256; b++)
		for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]); k++) {
			size_t n = with_byte(head, prefix, b, offsets[k], suffix);
			enum hb_refusal r = hb_head_scan(head, n, 16384, &head_len, NULL);

			cr_expect_eq(r, want_for(b, tab), "byte 0x%02x at %zu of %s: %d", b, offsets[k], where, r);
			if (r == HB_OK)
				cr_expect_eq(head_len, n);
		}
}

Test(head, each_byte_in_a_header_value_gets_the_grammars_verdict)
{
	each_byte("GET / HTTP/1.1\r\nX-A: ", "\r\n\r\n", true, "a value");
}

Test(head, each_byte_in_the_request_line_gets_the_grammars_verdict)
{
	each_byte("GET /", " HTTP/1.1\r\nHost: x\r\n\r\n", false, "the target");
}

Test(head, a_response_head_is_indexed_where_it_lies)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\n"
				   "Server: nginx\r\n"
				   "Content-Type:  application/json \r\n"
				   "Content-Length: 5\r\n"
				   "X-Connection-Id: 7\r\n"
				   "Connection: keep-alive\r\n"
				   "\r\n"
				   "hello";
	struct hb_hdr hdr[HB_HEADERS_MAX];
	struct hb_resp_index ix = { .hdr = hdr };
	char shrt[1024];
	size_t head_len, short_len;

	cr_assert_eq(hb_resp_head_read(resp, sizeof(resp) - 1, 16384, &head_len, &ix, shrt, sizeof(shrt), &short_len),
		     HB_OK);
	cr_assert_eq(head_len, sizeof(resp) - 1 - 5);
	cr_expect_eq(ix.reason_len, 2);
	cr_expect(!memcmp(resp + ix.reason, "OK", 2));
	cr_assert_eq(ix.n, 5);
	cr_expect(!memcmp(resp + hdr[1].name, "Content-Type", hdr[1].name_len));
	cr_expect_eq(hdr[1].value_len, strlen("application/json"), "OWS trimmed both ends");
	cr_expect(!memcmp(resp + hdr[1].value, "application/json", hdr[1].value_len));
	/* the short head: the status line and the two lines http-parser reads, in their order */
	static const char want[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n";

	cr_expect_eq(short_len, sizeof(want) - 1);
	cr_expect(!memcmp(shrt, want, sizeof(want) - 1), "%.*s", (int)short_len, shrt);
	/* cut anywhere before its end, the head waits for more */
	for (size_t cut = 1, whole = head_len; cut < whole; cut++) {
		cr_expect_eq(hb_resp_head_read(resp, cut, 16384, &head_len, &ix, shrt, sizeof(shrt), &short_len),
			     HB_OK);
		cr_expect_eq(head_len, 0, "cut at %zu", cut);
	}
}

Test(head, a_status_line_is_http_1_a_code_and_a_reason_or_nothing)
{
	static const struct {
		const char *line;
		bool ok;
		unsigned reason_len;
	} rows[] = {
		{ "HTTP/1.1 200 OK", true, 2 },
		{ "HTTP/1.0 204 No Content", true, 10 },
		{ "HTTP/1.1 200", true, 0 },
		{ "HTTP/1.1 200 ", true, 0 },
		{ "HTTP/1.1 20 OK", false, 0 },
		{ "HTTP/1.1 2000 OK", false, 0 },
		{ "HTTP/1.1 200OK", false, 0 },
		{ "HTTP/2.0 200 OK", false, 0 },
		{ "HTTP/1.x 200 OK", false, 0 },
		{ "HTTP/1.1  200 OK", false, 0 },
		{ "http/1.1 200 OK", false, 0 },
		{ "HTTP/1.1 2x0 OK", false, 0 },
		/* RFC 9112: a reason may hold HTAB; the version and the code are parted by SP alone */
		{ "HTTP/1.1 200 O\tK", true, 3 },
		{ "HTTP/1.1\t200 OK", false, 0 },
		{ "HTTP/1.1 200\tOK", false, 0 },
	};
	struct hb_hdr hdr[HB_HEADERS_MAX];
	struct hb_resp_index ix = { .hdr = hdr };
	char head[128], shrt[1024];
	size_t head_len, short_len;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int n = snprintf(head, sizeof(head), "%s\r\nContent-Length: 0\r\n\r\n", rows[i].line);
		enum hb_refusal r =
			hb_resp_head_read(head, (size_t)n, 16384, &head_len, &ix, shrt, sizeof(shrt), &short_len);

		cr_expect_eq(r == HB_OK, rows[i].ok, "'%s': %d", rows[i].line, r);
		if (r == HB_OK)
			cr_expect_eq(ix.reason_len, rows[i].reason_len, "'%s'", rows[i].line);
	}
}

Test(head, a_response_head_with_a_fold_or_a_bare_lf_is_refused)
{
	static const char *const heads[] = {
		"HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n",
		"HTTP/1.1 200 OK\nX-A: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX A: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-A: b\x01\r\n\r\n",
	};
	struct hb_hdr hdr[HB_HEADERS_MAX];
	struct hb_resp_index ix = { .hdr = hdr };
	char shrt[1024];
	size_t head_len, short_len;

	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
		cr_expect_neq(hb_resp_head_read(heads[i], strlen(heads[i]), 16384, &head_len, &ix, shrt, sizeof(shrt),
						&short_len),
			      HB_OK, "head %zu", i);
	/* control: the same head without the fault */
	cr_expect_eq(hb_resp_head_read("HTTP/1.1 200 OK\r\nX-A: b c\r\n\r\n", 29, 16384, &head_len, &ix, shrt,
				       sizeof(shrt), &short_len),
		     HB_OK);
	cr_expect_eq(head_len, 29);
}

Test(head, a_request_reads_the_same_through_the_short_head_and_the_whole)
{
	/* an SDK's head: many lines http-parser need not walk, two it must */
	static const char req[] = "POST /api/v1/messages HTTP/1.1\r\n"
				  "Host: 10.0.0.1:8119\r\n"
				  "Accept: application/json\r\n"
				  "User-Agent: Anthropic/Python 0.40.0\r\n"
				  "X-Stainless-Lang: python\r\n"
				  "Anthropic-Version: 2023-06-01\r\n"
				  "Authorization: Bearer latch-placeholder-00112233445566778899aabbccddeeff\r\n"
				  "Content-Type: application/json\r\n"
				  "Content-Length: 2\r\n"
				  "Connection: close\r\n"
				  "\r\n";
	static struct hb_head a, b;
	static struct hb_lines lines;
	http_parser pa, pb;
	size_t head_len;

	cr_assert_eq(hb_head_scan(req, sizeof(req) - 1, 16384, &head_len, &lines), HB_OK);
	cr_assert_eq(head_len, sizeof(req) - 1);
	cr_assert_eq(hb_head_parse(req, head_len, &lines, &pa, &a), HB_OK);
	cr_assert_eq(hb_head_parse_whole(req, head_len, &lines, &pb, &b), HB_OK);
	cr_expect_str_eq(a.method, "POST");
	cr_expect_eq(a.target, req + 5);
	cr_expect_eq(a.target_len, strlen("/api/v1/messages"));
	cr_expect_eq(a.content_length, 2);
	cr_expect(!a.keep_alive, "Connection: close reached the parser");
	cr_expect_eq(a.n, 9);
	cr_expect_eq(a.keep_alive, b.keep_alive);
	cr_expect_eq(a.content_length, b.content_length);
	cr_expect_eq(a.n, b.n);
	/* the parser is left in the body's state either way */
	cr_expect_eq(http_parser_execute(&pa, &(http_parser_settings){ 0 }, "{}", 2), 2);
	cr_expect_eq(HTTP_PARSER_ERRNO(&pa), HPE_OK);
}

Test(head, a_version_spread_over_two_lines_is_refused)
{
	/* Debian's http-parser takes CR LF "o:" for letters of HTTP/: this was a GET of HTTP/1.1 to it */
	static const char req[] = "GET /v1/x H\r\no:1.1\r\nHost: x\r\n\r\n";
	static const char control[] = "GET /v1/x HTTP/1.1\r\no:1.1\r\nHost: x\r\n\r\n";
	static struct hb_head h;
	static struct hb_lines lines;
	http_parser p;
	size_t head_len;

	cr_assert_eq(hb_head_scan(req, sizeof(req) - 1, 16384, &head_len, &lines), HB_OK);
	cr_expect_eq(hb_head_parse(req, head_len, &lines, &p, &h), HB_BAD_REQUEST);
	cr_expect_eq(hb_head_parse_whole(req, head_len, &lines, &p, &h), HB_BAD_REQUEST);
	cr_assert_eq(hb_head_scan(control, sizeof(control) - 1, 16384, &head_len, &lines), HB_OK);
	cr_assert_eq(hb_head_parse(control, head_len, &lines, &p, &h), HB_OK);
	cr_expect_eq(h.n, 2);
}

/*
 * A CONNECT has no content: a Transfer-Encoding ("chunked<HTAB>", which the
 * broker reads as chunked and http-parser, skipping a CONNECT's framing, as
 * none: the fuzzer found it) or a Content-Length is refused; controls: a
 * CONNECT without, and with Content-Length: 0.
 */
Test(head, a_connect_with_content_is_refused)
{
	static const char *const refused[] = {
		"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\nTransfer-Encoding: chunked\t\r\n\r\n",
		"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\nTransfer-Encoding: chunked\r\n\r\n",
		"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\nContent-Length: 5\r\n\r\n",
	};
	static const char *const passed[] = {
		"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n",
		"CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\nContent-Length: 0\r\n\r\n",
	};
	static struct hb_head h;
	static struct hb_lines lines;
	http_parser p;
	size_t head_len;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		cr_assert_eq(hb_head_scan(refused[i], strlen(refused[i]), 16384, &head_len, &lines), HB_OK);
		cr_expect_eq(hb_head_parse(refused[i], head_len, &lines, &p, &h), HB_CONNECT_CONTENT, "%s", refused[i]);
		cr_expect_eq(hb_head_parse_whole(refused[i], head_len, &lines, &p, &h), HB_CONNECT_CONTENT, "%s",
			     refused[i]);
	}
	for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
		cr_assert_eq(hb_head_scan(passed[i], strlen(passed[i]), 16384, &head_len, &lines), HB_OK);
		cr_expect_eq(hb_head_parse(passed[i], head_len, &lines, &p, &h), HB_OK, "%s", passed[i]);
		cr_expect(h.connect);
	}
}

/*
 * A Content-Length past INT64_MAX is refused: the broker's signed length
 * read it as "none" while http-parser read a body (the fuzzer found it).
 * Control: INT64_MAX itself passes, with that length.
 */
Test(head, a_content_length_past_int64_is_refused)
{
	static const char refused[] = "POST /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n";
	static const char passed[] = "POST /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n";
	static struct hb_head h;
	static struct hb_lines lines;
	http_parser p;
	size_t head_len;

	cr_assert_eq(hb_head_scan(refused, sizeof(refused) - 1, 16384, &head_len, &lines), HB_OK);
	cr_expect_eq(hb_head_parse(refused, head_len, &lines, &p, &h), HB_CL_INVALID);
	cr_expect_eq(hb_head_parse_whole(refused, head_len, &lines, &p, &h), HB_CL_INVALID);
	cr_assert_eq(hb_head_scan(passed, sizeof(passed) - 1, 16384, &head_len, &lines), HB_OK);
	cr_expect_eq(hb_head_parse(passed, head_len, &lines, &p, &h), HB_OK);
	cr_expect_eq(h.content_length, INT64_MAX);
}

/* The same of a response head (the fuzzer found it there too); control: INT64_MAX itself is read. */
Test(head, a_response_content_length_past_int64_is_refused)
{
	static const char refused[] = "HTTP/1.1 200 OK\r\nContent-Length: 11111111111111111142\r\n\r\n";
	static const char edge[] = "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n";
	static const char passed[] = "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n";
	static struct hb_hdr hdr[HB_HEADERS_MAX];
	struct hb_resp_index ix = { .hdr = hdr };
	size_t head_len, short_len;
	char shrt[1024];

	cr_expect_eq(hb_resp_head_read(refused, sizeof(refused) - 1, 16384, &head_len, &ix, shrt, sizeof(shrt),
				       &short_len),
		     HB_CL_INVALID);
	cr_expect_eq(hb_resp_head_read(edge, sizeof(edge) - 1, 16384, &head_len, &ix, shrt, sizeof(shrt), &short_len),
		     HB_CL_INVALID);
	cr_expect_eq(hb_resp_head_read(passed, sizeof(passed) - 1, 16384, &head_len, &ix, shrt, sizeof(shrt),
				       &short_len),
		     HB_OK);
}

Test(head, a_response_transfer_encoding_is_one_chunked_or_none)
{
	/* http-parser decodes the first as chunked (gzip to the guest) and reads the rest to the connection's end */
	static const char *const refused[] = {
		"Transfer-Encoding: gzip, chunked\r\n",
		"Transfer-Encoding: chunked, gzip\r\n",
		"Transfer-Encoding: chunked, chunked\r\n",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
		"Transfer-Encoding: identity\r\n",
		"transfer-encoding: \r\n",
		/* http-parser takes a name for Transfer-Encoding by its first 17 bytes: this one undid the chunked */
		"Transfer-Encoding: chunked\r\nTransfer-Encodingx: y\r\n",
		"Transfer-Encodingx: gzip\r\n",
		"Transfer-Encoding: chunked\t\r\n", /* not chunked to http-parser */
		"Transfer-Encoding: chunked \t\r\n",
	};
	static const char *const accepted[] = {
		"Transfer-Encoding: chunked\r\n",
		"TRANSFER-ENCODING:  Chunked \r\n",
		"Transfer-Encoding:\tchunked  \r\n",
		"X-Transfer-Encoding: gzip\r\n",
		"Content-Length: 5\r\n",
	};
	struct hb_hdr hdr[HB_HEADERS_MAX];
	struct hb_resp_index ix = { .hdr = hdr };
	char head[256], shrt[1024];
	size_t head_len, short_len;

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		int n = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nX-A: 1\r\n%s\r\n", refused[i]);

		cr_expect_eq(hb_resp_head_read(head, (size_t)n, 16384, &head_len, &ix, shrt, sizeof(shrt), &short_len),
			     HB_TE_INVALID, "%s", refused[i]);
	}
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		int n = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nX-A: 1\r\n%s\r\n", accepted[i]);

		cr_expect_eq(hb_resp_head_read(head, (size_t)n, 16384, &head_len, &ix, shrt, sizeof(shrt), &short_len),
			     HB_OK, "%s", accepted[i]);
		cr_expect_eq(head_len, (size_t)n);
	}
}

Test(head, the_key_is_scrubbed_wherever_it_lies_in_a_head)
{
	static const char key[] = "sk-live-0123456789abcdef";
	char head[] = "401 sk-live-0123456789abcdef\r\nsk-live-0123456789abcdef: 1\r\nX: a sk-live-0123456789abcdef"
		      "sk-live-0123456789abcdef b\r\nY: sk-live-0123456789abcde\r\n";
	static const char want[] =
		"401 ************************\r\n************************: 1\r\nX: a "
		"************************************************ b\r\nY: sk-live-0123456789abcde\r\n";

	hb_scrub_inplace(head, sizeof(head) - 1, key, sizeof(key) - 1);
	cr_expect_str_eq(head, want, "the key in the reason, a name and twice in a value; the control (Y) one short");
}

/* The scrubber's join buffer, watched: its size at malloc(), and whether every byte was zero at free(). */
static struct {
	void *p;
	size_t n;
	int allocs, frees, dirty;
} join_seen;

static void *join_alloc(size_t n)
{
	join_seen.allocs++;
	join_seen.p = malloc(n);
	join_seen.n = n;
	return join_seen.p;
}

static void join_free(void *p)
{
	const unsigned char *b = p;

	join_seen.frees++;
	for (size_t i = 0; p == join_seen.p && i < join_seen.n; i++)
		join_seen.dirty += b[i] != 0;
	free(p);
}

static char scrub_out[4096];
static size_t scrub_out_len;

static void scrub_emit(void *arg, const char *data, size_t len)
{
	(void)arg;
	if (scrub_out_len + len <= sizeof(scrub_out)) {
		memcpy(scrub_out + scrub_out_len, data, len);
		scrub_out_len += len;
	}
}

/*
 * invariant: the scrubber's join buffer (a held tail that could start the
 * key, and the next bytes of the response) is wiped whole before it is
 * freed: it wiped as many bytes as the new piece had, from the start,
 * leaving the last n_held bytes of the response (up to 1,023) in freed heap.
 */
Test(head, the_scrubbers_join_buffer_is_wiped_whole_before_it_is_freed)
{
	static const char key[] = "sk-live-0123456789abcdef";
	struct hb_scrub s = {
		.secret = key, .secret_len = sizeof(key) - 1, .join_alloc = join_alloc, .join_free = join_free
	};
	char rest[1000];

	memset(rest, 'r', sizeof(rest));
	memset(&join_seen, 0, sizeof(join_seen));
	scrub_out_len = 0;
	hb_scrub_feed(&s, "data: sk-live-0123", 18, scrub_emit, NULL); /* the key's first 12 bytes are held */
	cr_assert_eq(s.n_held, 12);
	hb_scrub_feed(&s, "456789abcdef and sk-live-01", 27, scrub_emit, NULL); /* ends like the key begins */
	cr_assert_eq(s.n_held, 10);
	hb_scrub_feed(&s, rest, sizeof(rest), scrub_emit, NULL); /* joined: 10 + 1,000 bytes */
	hb_scrub_flush(&s, scrub_emit, NULL);
	cr_expect_eq(join_seen.allocs, 2, "control: both pieces after a held tail went through a join");
	cr_expect_eq(join_seen.frees, 2);
	cr_expect_eq(join_seen.dirty, 0, "%d bytes of the last join (%zu bytes) were left in it", join_seen.dirty,
		     join_seen.n);
	cr_expect_eq(join_seen.n, 1010, "control: the last join held the tail and the piece");
	cr_expect_eq(scrub_out_len, 18 + 27 + sizeof(rest), "control: every byte came out");
	cr_expect(!memcmp(scrub_out, "data: ************************ and sk-live-01rrr", 48),
		  "control: the key came out as stars, the tail that was not the key as it was");
}

/*
 * invariant: a path with a percent-encoded byte past ASCII is refused: an
 * upstream that decodes overlong UTF-8 or normalises (NFKC) reads these as
 * '.', '/' or '..' where the broker's checks read something else.  Controls:
 * the same in the query, and the ASCII spellings beside them.
 */
Test(head, a_path_with_percent_encoded_non_ascii_is_refused)
{
	static const char *const refused[] = {
		"/v1/forecast/%c0%ae%c0%ae/admin", /* overlong '.' */
		"/v1/forecast/%C0%AE%C0%AE/admin",
		"/v1/forecast/%e0%80%ae/x", /* three-byte overlong '.' */
		"/v1/forecast%c0%afadmin", /* overlong '/' */
		"/v1/forecast/%ef%bc%8e%ef%bc%8e/admin", /* full-width full stop U+FF0E */
		"/v1/forecast%ef%bc%8fadmin", /* full-width solidus U+FF0F */
		"/v1/forecast%ef%bc%bcadmin", /* full-width reverse solidus U+FF3C */
		"/v1/forecast/%e2%80%a4%e2%80%a4/x", /* one-dot leader U+2024 */
		"/v1/forecast/%e2%80%a5/x", /* two-dot leader U+2025 */
		"/v1/forecast/%ef%b9%92/x", /* small full stop U+FE52 */
		"/v1/forecast/%c3%a9", /* valid UTF-8 too: the rule is every byte past ASCII */
		"/v1/forecast/%80",
		"/v1/forecast/%ff?q=1",
	};
	static const char *const accepted[] = {
		"/v1/forecast/admin?q=%c0%ae%c0%ae", /* the query is no part of the route's prefix */
		"/v1/forecast?q=%ef%bc%8e%ef%bc%8e/admin",
		"/v1/forecast/a%20b",
		"/v1/forecast/a%2cb",
	};

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		cr_expect_eq(hb_target_spelling(refused[i], strlen(refused[i])), HB_PATH_NON_ASCII, "%s", refused[i]);
	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		enum hb_refusal r = hb_target_spelling(accepted[i], strlen(accepted[i]));

		cr_expect_eq(r, HB_OK, "control: %s: %s", accepted[i], hb_refusal_id(r));
	}
}

/* A TLS 1.3-shaped ClientHello record naming NAME, with the extension EXT (0: none) before or after its server_name. */
static size_t client_hello(uint8_t *b, const char *name, unsigned ext, bool ext_first, bool two_names)
{
	size_t n = strlen(name), i = 0, hs, exts;

	b[i++] = 0x16, b[i++] = 3, b[i++] = 1, i += 2; /* record: handshake, its length below */
	hs = i;
	b[i++] = 1, i += 3; /* ClientHello, its length below */
	b[i++] = 3, b[i++] = 3;
	memset(b + i, 0x5a, 32), i += 32; /* random */
	b[i++] = 0; /* session_id */
	b[i++] = 0, b[i++] = 2, b[i++] = 0x13, b[i++] = 0x01; /* one cipher suite */
	b[i++] = 1, b[i++] = 0; /* compression: null */
	exts = i, i += 2;
	for (int k = 0; k < 3; k++) {
		bool sni_here = k == 1 || (k == 2 && two_names);

		if (ext && ((k == 0 && ext_first) || (k == 2 && !ext_first))) {
			b[i++] = ext >> 8, b[i++] = ext & 0xff, b[i++] = 0, b[i++] = 8;
			memset(b + i, 0xec, 8), i += 8; /* an ECH payload's bytes: the parser reads none of them */
		}
		if (!sni_here)
			continue;
		b[i++] = 0, b[i++] = 0, b[i++] = 0, b[i++] = (uint8_t)(n + 5);
		b[i++] = 0, b[i++] = (uint8_t)(n + 3), b[i++] = 0, b[i++] = 0, b[i++] = (uint8_t)n;
		memcpy(b + i, name, n), i += n;
	}
	b[exts] = (uint8_t)((i - exts - 2) >> 8), b[exts + 1] = (uint8_t)(i - exts - 2);
	b[hs + 1] = 0, b[hs + 2] = (uint8_t)((i - hs - 4) >> 8), b[hs + 3] = (uint8_t)(i - hs - 4);
	b[3] = (uint8_t)((i - hs) >> 8), b[4] = (uint8_t)(i - hs);
	return i;
}

/*
 * invariant: a CONNECT tunnel's ClientHello that offers encrypted_client_hello
 * (0xfe0d, or the older encrypted_server_name 0xffce) is refused wherever the
 * extension lies: the server answers for the inner name, which the broker
 * cannot read, while the outer one is what it checked.  Controls: the same
 * hello without it, and with another extension in its place.
 */
Test(head, a_client_hello_offering_ech_is_refused)
{
	uint8_t b[512];
	char name[254];
	size_t n;

	n = client_hello(b, "allowed.test.example", 0, false, false);
	cr_expect_eq(hb_client_hello_sni(b, n, name), 0, "control: the hello without ECH");
	cr_expect_str_eq(name, "allowed.test.example");
	n = client_hello(b, "allowed.test.example", 0x0a0a, false, false);
	cr_expect_eq(hb_client_hello_sni(b, n, name), 0, "control: a GREASE extension where ECH would be");
	for (int first = 0; first < 2; first++) {
		n = client_hello(b, "allowed.test.example", 0xfe0d, first, false);
		cr_expect_eq(hb_client_hello_sni(b, n, name), -EACCES, "ECH %s the server name",
			     first ? "before" : "after");
		n = client_hello(b, "allowed.test.example", 0xffce, first, false);
		cr_expect_eq(hb_client_hello_sni(b, n, name), -EACCES, "ESNI %s the server name",
			     first ? "before" : "after");
	}
	/* what could hide an extension from the parser is not read as a hello */
	n = client_hello(b, "allowed.test.example", 0, false, true);
	cr_expect_eq(hb_client_hello_sni(b, n, name), -EPROTO, "two server_name extensions");
	n = client_hello(b, "allowed.test.example", 0xfe0d, false, false);
	b[3] = 0,
	b[4] = (uint8_t)(n - 5 - 12); /* the record ends before the ECH extension: the hello goes on past it */
	cr_expect_eq(hb_client_hello_sni(b, n - 12, name), -EPROTO, "a hello longer than its first record");
}

/*
 * invariant: a header that has a server or framework read another method or
 * URL than the request line's is found (and refused before the method check),
 * in any case, wherever it lies.  Controls: names that only start or end
 * like one, and ordinary X- headers.
 */
Test(head, a_method_or_url_override_header_is_found)
{
	static const char *const found[] = {
		"X-HTTP-Method-Override: DELETE", "x-http-method: DELETE",     "X-Method-Override: PUT",
		"X-Original-Method: DELETE",	  "X-Original-URL: /v1/admin", "x-rewrite-url: /v1/admin",
		"X-Original-URI: /admin",	  "X-Forwarded-Uri: /admin",   "X-Forwarded-Prefix: /admin",
		"X-Envoy-Original-Path: /admin",
	};
	static const char *const passed[] = { "X-HTTP-Method-Overrides: x", "X-HTTP: x", "X-Keep: DELETE",
					      "X-Original: /admin" };
	static struct hb_head h;
	static struct hb_lines lines;
	char head[256];
	http_parser p;
	size_t head_len;

	for (size_t k = 0; k < 2; k++)
		for (size_t i = 0; i < (k ? sizeof(passed) / sizeof(passed[0]) : sizeof(found) / sizeof(found[0]));
		     i++) {
			const char *line = k ? passed[i] : found[i];
			int n = snprintf(head, sizeof(head),
					 "POST /echo/v1/echo HTTP/1.1\r\nHost: x\r\n%s\r\nX-A: 1\r\n\r\n", line);
			const struct hb_header *o;

			cr_assert_eq(hb_head_scan(head, (size_t)n, 16384, &head_len, &lines), HB_OK);
			cr_assert_eq(hb_head_parse(head, head_len, &lines, &p, &h), HB_OK);
			o = hb_head_override(&h);
			if (k)
				cr_expect_null(o, "control: %s", line);
			else
				cr_expect(o && o->name_len == (size_t)(strchr(line, ':') - line) &&
						  !memcmp(o->name, line, o->name_len),
					  "%s", line);
		}
}

Test(head, an_http_1_0_expectation_is_ignored)
{
	/* a 100 Continue to an HTTP/1.0 client is its final response to it, and the real one follows */
	static const char *const heads[] = {
		"POST /a HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
		"POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
	};
	static struct hb_head h;
	static struct hb_lines lines;
	http_parser p;
	size_t head_len;

	for (int i = 0; i < 2; i++) {
		cr_assert_eq(hb_head_scan(heads[i], strlen(heads[i]), 16384, &head_len, &lines), HB_OK);
		cr_assert_eq(hb_head_parse(heads[i], head_len, &lines, &p, &h), HB_OK);
		cr_expect_eq(h.expect_continue, i == 1, "%s", heads[i]);
	}
}

/* The listener's own address, for hb_target_own_origin(). */
static struct sockaddr_storage own_addr(const char *addr, unsigned port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;

	if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
	} else {
		cr_assert_eq(inet_pton(AF_INET6, addr, &a6->sin6_addr), 1, "%s", addr);
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
	}
	return ss;
}

Test(head, an_absolute_target_is_a_path_only_when_it_names_the_listener_exactly)
{
	/* invariant: only the broker's own address and port, as the connection reached it, make a path of it */
	static const struct {
		const char *own, *target, *path; /* path NULL: a proxy request (refused) */
		unsigned port;
	} cases[] = {
		{ "192.0.2.1", "http://192.0.2.1:8119/echo/v1/x?q=1", "/echo/v1/x?q=1", 8119 },
		{ "192.0.2.1", "HTTP://192.0.2.1:8119/echo", "/echo", 8119 }, /* the scheme in any case */
		{ "192.0.2.1", "http://192.0.2.1:8119/", "/", 8119 },
		{ "2001:db8::1", "http://[2001:db8::1]:8119/echo", "/echo", 8119 },
		{ "2001:db8::1", "http://[2001:DB8::1]:8119/echo", "/echo", 8119 }, /* hex digits in any case */
		{ "192.0.2.1", "http://192.0.2.1/echo", "/echo", 80 }, /* port 80 may be left out */
		{ "192.0.2.1", "http://192.0.2.1:80/echo", "/echo", 80 },
		{ "192.0.2.1", "http://192.0.2.1/echo", NULL, 8119 }, /* ... no other */
		{ "192.0.2.1", "http://192.0.2.1:8118/echo", NULL, 8119 }, /* another port */
		{ "192.0.2.1", "http://192.0.2.1:81190/echo", NULL, 8119 }, /* a longer one */
		{ "192.0.2.1", "http://192.0.2.1:8119", NULL, 8119 }, /* no path */
		{ "192.0.2.1", "http://192.0.2.1:8119?q=1", NULL, 8119 },
		{ "192.0.2.1", "http://u@192.0.2.1:8119/echo", NULL, 8119 }, /* userinfo */
		{ "192.0.2.1", "http://192.0.2.1:8119@example.test/echo", NULL, 8119 }, /* ours as userinfo */
		{ "192.0.2.1", "http://192.0.2.10:8119/echo", NULL, 8119 }, /* another address */
		{ "192.0.2.1", "http://192.0.2.1.:8119/echo", NULL, 8119 },
		{ "192.0.2.1", "http://192.000.2.1:8119/echo", NULL, 8119 }, /* another spelling */
		{ "192.0.2.1", "https://192.0.2.1:8119/echo", NULL, 8119 },
		{ "192.0.2.1", "http:/192.0.2.1:8119/echo", NULL, 8119 },
		{ "192.0.2.1", "/echo", NULL, 8119 }, /* origin form is not this function's */
		{ "2001:db8::1", "http://2001:db8::1:8119/echo", NULL, 8119 }, /* IPv6 without brackets */
		{ "2001:db8::1", "http://[2001:db8::1]/echo", NULL, 8119 },
		{ "2001:db8::1", "http://[2001:db8:0::1]:8119/echo", NULL, 8119 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sockaddr_storage ss = own_addr(cases[i].own, cases[i].port);
		size_t skip = 0, len = strlen(cases[i].target);
		bool own = hb_target_own_origin(cases[i].target, len, (const struct sockaddr *)&ss, &skip);

		cr_expect_eq(own, cases[i].path != NULL, "%s on %s:%u", cases[i].target, cases[i].own, cases[i].port);
		if (own && cases[i].path)
			cr_expect_str_eq(cases[i].target + skip, cases[i].path, "%s", cases[i].target);
	}
}
