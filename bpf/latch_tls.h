/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * latch_tls.h - the TLS ClientHello reader, one copy for the tc program and
 * for user space (the resolver's name hash, tests/test_tls.c and
 * tests/fuzz/fuzz_tls.c).
 *
 * It reads the first bytes a TCP flow sends and says what the server will be
 * told: the server name (as a hash, folded to lowercase), no server name, an
 * encrypted_client_hello extension, a ClientHello it can't vouch for, or that
 * the ClientHello goes on past the bytes given (the verdict needs every
 * extension header and the name, not the bodies after the last header: their
 * lengths already say where they end).  Everything it reads comes
 * from one buffer of LATCH_TLS_READ bytes, each index masked, and every loop
 * has a constant bound, so the verifier accepts it as it is.
 *
 * Strict on purpose: one record holds the whole ClientHello (no handshake
 * split over records), one host_name in the server_name extension, at most
 * LATCH_TLS_EXT_MAX extensions, lengths that nest exactly.  Anything else is
 * LATCH_TLS_BAD, which the tc program refuses.
 */
#ifndef LATCH_TLS_H
#define LATCH_TLS_H

#ifndef __BPF__
#include <linux/types.h>
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#endif

#define LATCH_TLS_READ 2048 /* the buffer: a power of two, past one full-size segment */
#define LATCH_TLS_MASK (LATCH_TLS_READ - 1)
#define LATCH_TLS_EXT_MAX 40 /* extensions walked; browsers send about 20 */
#define LATCH_TLS_NAME_MAX 255
#define LATCH_TLS_RECORD_MAX 16384 /* TLSPlaintext.length, RFC 8446 5.1 */

#define LATCH_TLS_EXT_SERVER_NAME 0x0000
#define LATCH_TLS_EXT_ECH 0xfe0d /* encrypted_client_hello */

enum latch_tls_verdict {
	LATCH_TLS_NAME = 0, /* one server name, no ECH: hello->name_hash */
	LATCH_TLS_NO_SNI = 1, /* a whole ClientHello without a server name */
	LATCH_TLS_ECH = 2, /* the encrypted_client_hello extension */
	LATCH_TLS_BAD = 3, /* not a ClientHello, or one read no further */
	LATCH_TLS_MORE = 4, /* the ClientHello goes on past the bytes given */
};

struct latch_tls_hello {
	__u64 name_hash; /* LATCH_TLS_NAME: latch_tls_hash of the name */
	__u16 name_off; /* where the name starts in the buffer */
	__u16 name_len;
	__u16 hello_end; /* where the ClientHello ends (record header included) */
	__u16 exts; /* extensions read */
};

/* FNV-1a, 64 bits: the hash a name is recorded under; never 0 (the names map's "checked" key). */
#define LATCH_TLS_HASH_INIT 0xcbf29ce484222325ULL
#define LATCH_TLS_HASH_PRIME 0x100000001b3ULL

static __always_inline __u64 latch_tls_hash_byte(__u64 h, __u8 c)
{
	if (c >= 'A' && c <= 'Z')
		c += 'a' - 'A';
	return (h ^ c) * LATCH_TLS_HASH_PRIME;
}

/*
 * The hash of a name as the resolver sees it (user space): lowercase, one
 * trailing dot dropped, since a server name never carries it (RFC 6066 3).
 */
static __always_inline __u64 latch_tls_hash(const char *name, __u32 len)
{
	__u64 h = LATCH_TLS_HASH_INIT;

	if (len && name[len - 1] == '.')
		len--;
	for (__u32 i = 0; i < LATCH_TLS_NAME_MAX && i < len; i++)
		h = latch_tls_hash_byte(h, (__u8)name[i]);
	return h ? h : 1;
}

/* buf[off], big endian, 1..3 bytes; the caller checked off + n <= len. */
static __always_inline __u32 latch_tls_be(const __u8 *buf, __u32 off, int n)
{
	__u32 v = 0;

	for (int i = 0; i < 3; i++) {
		if (i >= n)
			break;
		v = v << 8 | buf[(off + i) & LATCH_TLS_MASK];
	}
	return v;
}

/*
 * Is the field at [off, off + n) inside the ClientHello (else BAD) and inside
 * the bytes given (else MORE)?  0 when it is.  BAD is asked first, so a
 * prefix of a ClientHello reads the same as the whole, up to where it stops.
 */
static __always_inline int latch_tls_need(__u32 off, __u32 n, __u32 end, __u32 len)
{
	if (off + n > end)
		return LATCH_TLS_BAD;
	if (off + n > len)
		return LATCH_TLS_MORE;
	return 0;
}

/* The server_name extension's body at off (elen bytes): one host_name, 1..255 bytes. */
static __always_inline int latch_tls_sni(const __u8 *buf, __u32 off, __u32 elen, __u32 len,
					 struct latch_tls_hello *hello)
{
	__u32 list, nlen;
	int r;

	if (hello->name_len || elen < 5)
		return LATCH_TLS_BAD; /* two server_name extensions, or too short for one name */
	r = latch_tls_need(off, 5, off + elen, len);
	if (r)
		return r;
	list = latch_tls_be(buf, off, 2);
	nlen = latch_tls_be(buf, off + 3, 2);
	if (list + 2 != elen || buf[(off + 2) & LATCH_TLS_MASK] != 0 || nlen + 3 != list || !nlen ||
	    nlen > LATCH_TLS_NAME_MAX)
		return LATCH_TLS_BAD;
	r = latch_tls_need(off + 5, nlen, off + elen, len);
	if (r)
		return r;
	hello->name_off = off + 5;
	hello->name_len = nlen;
	return 0;
}

/*
 * Read buf[0..len) (len <= LATCH_TLS_READ; the buffer itself is
 * LATCH_TLS_READ bytes) as the start of a TLS stream.  Returns an
 * enum latch_tls_verdict; *hello says where the name is and its hash.
 */
static __always_inline int latch_tls_parse(const __u8 *buf, __u32 len, struct latch_tls_hello *hello)
{
	__u32 off, end, rec, hs, n;
	int r;

	__builtin_memset(hello, 0, sizeof(*hello));
	if (len > LATCH_TLS_READ)
		len = LATCH_TLS_READ;
	if (len < 9)
		return len && buf[0] != 0x16 ? LATCH_TLS_BAD : LATCH_TLS_MORE;
	/* record: handshake, version 3.x, length; then handshake: ClientHello, length */
	rec = latch_tls_be(buf, 3, 2);
	hs = latch_tls_be(buf, 6, 3);
	if (buf[0] != 0x16 || buf[1] != 3 || rec > LATCH_TLS_RECORD_MAX || buf[5] != 1 || hs + 4 != rec)
		return LATCH_TLS_BAD;
	end = 9 + hs;
	hello->hello_end = end;
	/* legacy_version and random, then session id, cipher suites, compression methods */
	off = 9 + 2 + 32;
	r = latch_tls_need(off, 1, end, len);
	if (r)
		return r;
	n = buf[off & LATCH_TLS_MASK];
	if (n > 32)
		return LATCH_TLS_BAD;
	off += 1 + n;
	r = latch_tls_need(off, 2, end, len);
	if (r)
		return r;
	n = latch_tls_be(buf, off, 2);
	if (n < 2 || (n & 1))
		return LATCH_TLS_BAD;
	off += 2 + n;
	r = latch_tls_need(off, 1, end, len);
	if (r)
		return r;
	n = buf[off & LATCH_TLS_MASK];
	if (n < 1)
		return LATCH_TLS_BAD;
	off += 1 + n;
	if (off == end)
		return LATCH_TLS_NO_SNI; /* no extensions at all (TLS 1.2 allows it) */
	r = latch_tls_need(off, 2, end, len);
	if (r)
		return r;
	if (off + 2 + latch_tls_be(buf, off, 2) != end)
		return LATCH_TLS_BAD;
	off += 2;
	for (int i = 0; i < LATCH_TLS_EXT_MAX; i++) {
		__u32 type, elen;

		if (off == end)
			break;
		r = latch_tls_need(off, 4, end, len);
		if (r)
			return r;
		type = latch_tls_be(buf, off, 2);
		elen = latch_tls_be(buf, off + 2, 2);
		if (off + 4 + elen > end)
			return LATCH_TLS_BAD;
		hello->exts++;
		if (type == LATCH_TLS_EXT_ECH)
			return LATCH_TLS_ECH;
		if (type == LATCH_TLS_EXT_SERVER_NAME) {
			r = latch_tls_sni(buf, off + 4, elen, len, hello);
			if (r)
				return r;
		}
		off += 4 + elen;
	}
	if (off != end)
		return LATCH_TLS_BAD; /* more than LATCH_TLS_EXT_MAX extensions */
	if (!hello->name_len)
		return LATCH_TLS_NO_SNI;
	/* hashed after the walk, so the verifier sees this loop once, not once per extension */
	hello->name_hash = LATCH_TLS_HASH_INIT;
	for (__u32 i = 0; i < LATCH_TLS_NAME_MAX; i++) {
		if (i >= hello->name_len)
			break;
		hello->name_hash = latch_tls_hash_byte(hello->name_hash, buf[(hello->name_off + i) & LATCH_TLS_MASK]);
	}
	if (!hello->name_hash)
		hello->name_hash = 1;
	return LATCH_TLS_NAME;
}

#endif /* LATCH_TLS_H */
