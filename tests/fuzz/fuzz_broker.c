// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_broker.c - libFuzzer over what the broker reads from a guest before
 * it decides: the strict head scan, the head read by http-parser, the
 * chunked body after it, the route checks in their order (spelling, route
 * name, prefix, placeholder: the same verdict with the placeholders prepared
 * beforehand as without), the CONNECT target and a ClientHello's
 * server name, and the secret scrubber (which must never let the secret
 * through, however the bytes are cut).
 *
 *   make fuzz          FUZZ_SECS (120) seconds over tests/fuzz/corpus
 *   make fuzz-short    20 s, part of `make check`
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/http/check.h"

static const char secret[] = "sk-fuzz-SECRET-0123456789";

struct sink {
	char buf[70000];
	size_t len;
};

static void emit(void *arg, const char *data, size_t len)
{
	struct sink *s = arg;

	if (s->len + len <= sizeof(s->buf)) {
		memcpy(s->buf + s->len, data, len);
		s->len += len;
	}
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	return 0;
}

static void route_checks(const struct hb_head *hd)
{
	static const char *const phs[] = { "latch-placeholder-00112233445566778899aabbccddeeff",
					   "latch-placeholder-ffeeddccbbaa99887766554433221100" };
	struct hb_ph_rule rule = { "Authorization", "Bearer ", phs[0], phs, 2 };
	const char *rest, *presented;
	size_t rest_len, presented_len;
	char name[33], host[254];

	if (hd->connect) {
		hb_connect_target(hd->target, hd->target_len, host);
		return;
	}
	if (hb_target_spelling(hd->target, hd->target_len) != HB_OK)
		return;
	if (!hb_target_route(hd->target, hd->target_len, name, &rest, &rest_len))
		return;
	hb_prefix_covers("/v1/messages", rest, rest_len);
	enum hb_refusal ref = hb_placeholder_check(hd, &rule, &presented, &presented_len);
	static struct hb_ph_set set;
	const char *presented2;
	size_t presented2_len;

	/* the set latchd prepares when its routes change gives the verdict the check makes without it */
	hb_ph_set_prep(&set, phs, 2);
	rule.prepared = &set;
	if (hb_placeholder_check(hd, &rule, &presented2, &presented2_len) != ref || presented2_len != presented_len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct hb_head head;
	static struct sink out;
	http_parser p;
	size_t head_len;
	char sni[254];

	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0: { /* a request: head, then what follows as its body */
		const char *buf = (const char *)data + 1;
		size_t len = size - 1;
		enum hb_refusal r = hb_head_scan(buf, len, 16384, &head_len);

		if (r != HB_OK || !head_len)
			return 0;
		if (hb_head_parse(buf, head_len, &p, &head) != HB_OK)
			return 0;
		route_checks(&head);
		if (head.chunked || head.content_length > 0) {
			static const http_parser_settings s = { .on_body = on_body };

			http_parser_execute(&p, &s, buf + head_len, len - head_len);
		}
		return 0;
	}
	case 1: /* what a CONNECT tunnel's first bytes may be */
		hb_client_hello_sni(data + 1, size - 1, sni);
		return 0;
	default: { /* the scrubber, fed in pieces cut where the input says */
		struct hb_scrub s = { .secret = secret, .secret_len = sizeof(secret) - 1 };
		size_t i = 1;

		out.len = 0;
		while (i < size) {
			size_t n = 1 + data[i] % 64;
			static char piece[256];

			i++;
			if (n > size - i)
				n = size - i;
			/* the secret is planted where the input has a '#', so it shows up cut every way */
			size_t k = 0;

			for (size_t j = 0; j < n && k + sizeof(secret) < sizeof(piece); j++)
				if (data[i + j] == '#') {
					memcpy(piece + k, secret, sizeof(secret) - 1);
					k += sizeof(secret) - 1;
				} else {
					piece[k++] = data[i + j];
				}
			/* cut the planted bytes again at an input-chosen point */
			size_t cut = k ? data[i - 1] % k : 0;

			hb_scrub_feed(&s, piece, cut, emit, &out);
			hb_scrub_feed(&s, piece + cut, k - cut, emit, &out);
			i += n;
		}
		hb_scrub_flush(&s, emit, &out);
		if (memmem(out.buf, out.len, secret, sizeof(secret) - 1))
			abort(); /* the invariant: the secret never passes the scrubber */
		return 0;
	}
	}
}
