// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_tls.c - libFuzzer over the ClientHello reader of the tc program
 * (bpf/latch_tls.h, the same code, compiled for user space).  Beyond "no
 * crash": the verdict never depends on the buffer's bytes past the ones
 * given (the tc program's scratch buffer holds an earlier packet's bytes
 * there); a prefix reads MORE or what the whole reads, and once settled
 * stays settled; a name read lies inside the bytes given and hashes as
 * latch_tls_hash() hashes its text.
 *
 *   make fuzz-tls        FUZZ_SECS (120) seconds over tests/fuzz/corpus_tls
 *   make fuzz-tls-short  20 s, part of `make check`
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/latch_tls.h"

static __u8 buf_zero[LATCH_TLS_READ], buf_ones[LATCH_TLS_READ];

static int parse_both(const uint8_t *data, __u32 n, struct latch_tls_hello *out)
{
	struct latch_tls_hello other;
	int r;

	memset(buf_zero, 0, sizeof(buf_zero));
	memset(buf_ones, 0xff, sizeof(buf_ones));
	memcpy(buf_zero, data, n);
	memcpy(buf_ones, data, n);
	r = latch_tls_parse(buf_zero, n, out);
	if (latch_tls_parse(buf_ones, n, &other) != r || memcmp(out, &other, sizeof(other)))
		abort(); /* read a byte past the ones given */
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct latch_tls_hello whole, out;
	__u32 n = size > LATCH_TLS_READ ? LATCH_TLS_READ : size;
	int r, settled = 0;

	r = parse_both(data, n, &whole);
	if (r < LATCH_TLS_NAME || r > LATCH_TLS_MORE)
		abort();
	if (r == LATCH_TLS_NAME) {
		if (!whole.name_len || whole.name_len > LATCH_TLS_NAME_MAX || whole.name_off + whole.name_len > n)
			abort();
		if (whole.name_hash != latch_tls_hash((const char *)data + whole.name_off, whole.name_len) &&
		    data[whole.name_off + whole.name_len - 1] != '.')
			abort(); /* latch_tls_hash drops a trailing dot; the wire's name keeps it */
	}
	for (__u32 cut = 0; cut <= n; cut++) {
		int p = parse_both(data, cut, &out);

		if (p != LATCH_TLS_MORE && p != r)
			abort();
		if (settled && p != r)
			abort();
		settled |= p != LATCH_TLS_MORE;
	}
	return 0;
}
