// SPDX-License-Identifier: GPL-2.0-only
/*
 * fuzz_resolver.c - libFuzzer over what the resolver reads from a guest
 * before it decides (resolver/wire.c): any bytes as a client's message,
 * read as client_query() reads them.  Beyond "no crash, no read past the
 * message": what the fast path reads, ldns reads the same (the fast path
 * must never accept what ldns would refuse, nor read it differently); a
 * question read is one well-formed uncompressed name of at most 255 bytes;
 * the name the policy judges is lowercase host-name text that spells the
 * same name as the wire; and the reply built for it stays inside the
 * client's size, parses, and echoes the question as sent.
 *
 *   make fuzz-resolver        FUZZ_SECS (120) seconds over tests/fuzz/corpus_resolver
 *   make fuzz-resolver-short  20 s, part of `make check`
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "resolver/dns.h"

/* Is NAME (N bytes) one uncompressed wire name: labels of 1..63 bytes, then the root, nothing after? */
static bool wire_name_ok(const uint8_t *name, size_t n)
{
	size_t i = 0;

	if (n < 1 || n > 255)
		return false;
	while (i < n && name[i]) {
		if (name[i] > 63)
			return false;
		i += 1 + name[i];
	}
	return i == n - 1;
}

/* The fast path and ldns read the same question, or the fast path declined. */
static void paths_agree(const uint8_t *data, size_t size)
{
	struct question f, l;
	uint16_t fu = 0, lu = 0;

	memset(&f, 0, sizeof(f));
	memset(&l, 0, sizeof(l));
	if (dns_question_fast(data, size, &f, &fu))
		return;
	if (dns_question_ldns(data, size, &l, &lu))
		abort(); /* the fast path took what ldns refuses */
	if (f.qlen != l.qlen || memcmp(f.qname, l.qname, f.qlen) || f.qtype != l.qtype || f.qclass != l.qclass ||
	    f.edns != l.edns || fu != lu)
		abort();
}

/* The policy's text of the question: host-name characters only, and the same name as the wire. */
static void text_spells_the_wire(const struct question *q)
{
	char text[LATCH_RESOLVER_NAME_MAX];
	ldns_rdf *wire, *back;

	if (dns_name_text_wire(q->qname, q->qlen, text, sizeof(text)))
		return;
	for (const char *c = text; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
			abort();
	wire = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, q->qlen, q->qname);
	back = ldns_dname_new_frm_str(text);
	if (!wire || !back || ldns_dname_compare(wire, back) != 0)
		abort();
	ldns_rdf_deep_free(wire);
	ldns_rdf_deep_free(back);
}

/* The reply to Q, with N addresses from the input, inside MAX bytes; parsed back, it echoes Q. */
static void reply_echoes(const struct question *q, size_t max, int n, uint8_t seed)
{
	static uint8_t out[65535];
	struct answer a = { .rcode = LDNS_RCODE_NOERROR, .n_addrs = n, .ttl = 60 };
	ldns_pkt *p = NULL;
	const ldns_rr *qrr;
	ldns_rdf *want;
	size_t len;

	for (int i = 0; i < n; i++) {
		a.addrs[i].family = (seed >> (i % 8)) & 1 ? AF_INET6 : AF_INET;
		memset(a.addrs[i].bytes, seed + i, sizeof(a.addrs[i].bytes));
	}
	len = dns_reply_build(q, LDNS_RCODE_NOERROR, &a, 60, max, out, sizeof(out));
	if (len > max)
		abort();
	if (!len) {
		/* no room for the question itself: only a question longer than max allows */
		if (DNS_HDR + q->qlen + 4 + (q->edns ? 11 : 0) <= max)
			abort();
		return;
	}
	if (ldns_wire2pkt(&p, out, len) != LDNS_STATUS_OK)
		abort();
	if (ldns_pkt_id(p) != q->id || !ldns_pkt_qr(p) || ldns_pkt_rd(p) != q->rd || ldns_pkt_qdcount(p) != 1)
		abort();
	if (!ldns_pkt_tc(p) && ldns_pkt_ancount(p) != (uint16_t)n)
		abort();
	qrr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	want = ldns_rdf_new_frm_data(LDNS_RDF_TYPE_DNAME, q->qlen, q->qname);
	if (!want || ldns_rdf_size(ldns_rr_owner(qrr)) != q->qlen ||
	    memcmp(ldns_rdf_data(ldns_rr_owner(qrr)), q->qname, q->qlen) || ldns_rr_get_type(qrr) != q->qtype ||
	    ldns_rr_get_class(qrr) != q->qclass)
		abort();
	ldns_rdf_deep_free(want);
	ldns_pkt_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct question q;
	uint16_t udp = 0;
	size_t max;
	int ret;

	if (size > 65535) /* a TCP message's length is 16 bits; UDP stops at 4096 */
		return 0;
	/* on its own, as on the way in: never a read past the message */
	memset(&q, 0, sizeof(q));
	(void)dns_question_parse(data, size, &q, &udp);
	paths_agree(data, size);

	memset(&q, 0, sizeof(q));
	ret = dns_query_read(data, size, &q, &udp);
	if (ret != 0) {
		if (ret != -EBADMSG && ret != -EOPNOTSUPP && ret != -EINVAL)
			abort();
		return 0;
	}
	if (!wire_name_ok(q.qname, q.qlen))
		abort();
	max = dns_udp_reply_max(&q, udp);
	if (max < UDP_PLAIN || max > EDNS_SIZE || (!q.edns && max != UDP_PLAIN))
		abort();
	text_spells_the_wire(&q);
	reply_echoes(&q, max, size % (LATCH_RESOLVER_ADDRS_MAX + 1), size ? data[size - 1] : 0);
	reply_echoes(&q, 65535, 3, 0x5a); /* TCP */
	return 0;
}
