// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_tls.c - the ClientHello reader the tc program runs (bpf/latch_tls.h),
 * over ClientHellos real clients sent.
 *
 * tests/fixtures/tls/ holds what openssl s_client and curl (OpenSSL 3.0.19)
 * sent to a local socket, TLS 1.2 and 1.3, naming api.example.com; one
 * without a server name (s_client -noservername); one with an 8192-bit
 * finite-field key share (1,215 bytes: this OpenSSL has no X25519MLKEM768,
 * the largest share it sends).  The ECH, duplicate-name and too-many-
 * extensions cases are those real ClientHellos with one extension added
 * and the lengths around it fixed up, each beside a control that adds an
 * extension the reader must pass over.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "bpf/latch_tls.h"

#define FIXTURES "tests/fixtures/tls/"
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct hello_buf {
	__u8 b[LATCH_TLS_READ];
	__u32 len;
};

static void load(const char *name, struct hello_buf *h)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), FIXTURES "%s", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "fixture %s", path);
	memset(h->b, 0, sizeof(h->b));
	h->len = fread(h->b, 1, sizeof(h->b), f);
	fclose(f);
	cr_assert_gt(h->len, 9, "fixture %s is empty", path);
}

static int parse(const struct hello_buf *h, struct latch_tls_hello *out)
{
	return latch_tls_parse(h->b, h->len, out);
}

static void put16(__u8 *p, __u32 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

/* Where the extensions block's length sits, read here apart from the reader under test. */
static __u32 ext_block(const struct hello_buf *h)
{
	__u32 off = 9 + 2 + 32;

	off += 1 + h->b[off];
	off += 2 + (h->b[off] << 8 | h->b[off + 1]);
	off += 1 + h->b[off];
	return off;
}

/* Append an extension (type, body) at the end of the ClientHello and fix the three lengths. */
static void add_ext(struct hello_buf *h, __u16 type, const void *body, __u16 n)
{
	__u32 eb = ext_block(h), rec = h->b[3] << 8 | h->b[4], exts = h->b[eb] << 8 | h->b[eb + 1];

	cr_assert_eq(h->len, 5 + rec, "one record, nothing after it");
	cr_assert_lt(h->len + 4 + n, sizeof(h->b));
	put16(h->b + h->len, type);
	put16(h->b + h->len + 2, n);
	memcpy(h->b + h->len + 4, body, n);
	h->len += 4 + n;
	rec += 4 + n;
	put16(h->b + 3, rec);
	h->b[6] = (rec - 4) >> 16;
	put16(h->b + 7, rec - 4);
	put16(h->b + eb, exts + 4 + n);
}

static const char *const named[] = {
	"openssl_tls12.bin", "openssl_tls13.bin", "curl_tls12.bin", "curl_tls13.bin", "openssl_ffdhe8192.bin",
};

Test(tls, real_client_hellos_name_their_server)
{
	const __u64 want = latch_tls_hash("api.example.com", 15);

	for (size_t i = 0; i < ARRAY_SIZE(named); i++) {
		struct hello_buf h;
		struct latch_tls_hello out;

		load(named[i], &h);
		cr_assert_eq(parse(&h, &out), LATCH_TLS_NAME, "%s", named[i]);
		cr_assert_eq(out.name_len, 15, "%s", named[i]);
		cr_assert(!memcmp(h.b + out.name_off, "api.example.com", 15), "%s", named[i]);
		cr_assert_eq(out.name_hash, want, "%s", named[i]);
		cr_assert_neq(out.name_hash, latch_tls_hash("other.example.com", 17), "%s", named[i]);
		cr_assert_eq(out.hello_end, h.len, "%s", named[i]);
	}
}

Test(tls, large_key_share_is_read_whole)
{
	struct hello_buf h;
	struct latch_tls_hello out;

	load("openssl_ffdhe8192.bin", &h);
	cr_assert_gt(h.len, 1200);
	cr_assert_eq(parse(&h, &out), LATCH_TLS_NAME);
}

Test(tls, no_server_name)
{
	struct hello_buf h;
	struct latch_tls_hello out;

	load("openssl_nosni.bin", &h);
	cr_assert_eq(parse(&h, &out), LATCH_TLS_NO_SNI);
	cr_assert_eq(out.name_len, 0);
}

/*
 * A prefix reads MORE or what the whole reads, and once settled stays so:
 * the verdict needs every extension header and the name, never the bodies
 * of the extensions after them (their lengths already fix where they end).
 */
Test(tls, a_prefix_reads_more_or_the_whole)
{
	for (size_t i = 0; i < ARRAY_SIZE(named); i++) {
		struct hello_buf h;
		struct latch_tls_hello out;
		int whole, settled = 0;
		__u32 name_end;

		load(named[i], &h);
		whole = parse(&h, &out);
		name_end = out.name_off + out.name_len;
		for (__u32 n = 0; n <= h.len; n++) {
			int r = latch_tls_parse(h.b, n, &out);

			if (n < name_end || !settled)
				cr_assert(r == LATCH_TLS_MORE || (n >= name_end && r == whole), "%s cut at %u: %d",
					  named[i], n, r);
			else
				cr_assert_eq(r, whole, "%s cut at %u: settled, then %d", named[i], n, r);
			settled |= r != LATCH_TLS_MORE;
		}
		cr_assert(settled, "%s", named[i]);
	}
}

/* ECH hides the real name: refused wherever it sits.  Control: an unknown extension in its place. */
Test(tls, ech_is_seen)
{
	static const __u8 body[8] = { 0 };
	struct hello_buf h;
	struct latch_tls_hello out;

	load("curl_tls13.bin", &h);
	add_ext(&h, 0xfe0c, body, sizeof(body));
	cr_assert_eq(parse(&h, &out), LATCH_TLS_NAME, "control: an unknown extension is passed over");
	load("curl_tls13.bin", &h);
	add_ext(&h, LATCH_TLS_EXT_ECH, body, sizeof(body));
	cr_assert_eq(parse(&h, &out), LATCH_TLS_ECH);
}

Test(tls, two_server_names_are_bad)
{
	static const __u8 sni[] = { 0,	 20,  0,   0,	17,  'o', 't', 'h', 'e', 'r', '.',
				    'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm' };
	struct hello_buf h;
	struct latch_tls_hello out;

	load("openssl_nosni.bin", &h);
	add_ext(&h, LATCH_TLS_EXT_SERVER_NAME, sni, sizeof(sni));
	cr_assert_eq(parse(&h, &out), LATCH_TLS_NAME, "control: one added name is read");
	cr_assert_eq(out.name_hash, latch_tls_hash("Other.Example.COM.", 18), "names fold to lowercase, one dot off");
	load("openssl_tls13.bin", &h);
	add_ext(&h, LATCH_TLS_EXT_SERVER_NAME, sni, sizeof(sni));
	cr_assert_eq(parse(&h, &out), LATCH_TLS_BAD);
}

Test(tls, too_many_extensions_are_bad)
{
	struct hello_buf h;
	struct latch_tls_hello out;
	int room;

	load("openssl_tls12.bin", &h);
	cr_assert_eq(parse(&h, &out), LATCH_TLS_NAME);
	room = LATCH_TLS_EXT_MAX - out.exts;
	for (int i = 0; i < room; i++)
		add_ext(&h, 0xff00 + i, NULL, 0);
	cr_assert_eq(parse(&h, &out), LATCH_TLS_NAME, "control: exactly LATCH_TLS_EXT_MAX extensions");
	add_ext(&h, 0xfff0, NULL, 0);
	cr_assert_eq(parse(&h, &out), LATCH_TLS_BAD);
}

Test(tls, not_a_client_hello)
{
	static const char get[] = "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n";
	struct hello_buf h;
	struct latch_tls_hello out;

	memset(&h, 0, sizeof(h));
	memcpy(h.b, get, sizeof(get) - 1);
	h.len = sizeof(get) - 1;
	cr_assert_eq(parse(&h, &out), LATCH_TLS_BAD);
	cr_assert_eq(latch_tls_parse(h.b, 1, &out), LATCH_TLS_BAD, "one byte that isn't a handshake record");
	load("openssl_tls13.bin", &h);
	h.b[5] = 2; /* ServerHello */
	cr_assert_eq(parse(&h, &out), LATCH_TLS_BAD);
	load("openssl_tls13.bin", &h);
	h.b[8]++; /* the handshake no longer fills the record */
	cr_assert_eq(parse(&h, &out), LATCH_TLS_BAD);
}
