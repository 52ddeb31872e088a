// SPDX-License-Identifier: GPL-2.0-only
/*
 * wire.c - the client's side of the wire: a query's question in, a reply
 * out.
 *
 * Every cached answer goes through here, so this is the resolver's hot
 * path, and ldns was most of its cost: a parse into an ldns_pkt and a reply
 * built as an ldns_pkt and written out took four fifths of the user time of
 * a cache hit (bench/latchd.sh with BENCH_DNS_PERF=1).  A query has a simple
 * shape, and so do our replies, which are built from scratch anyway:
 *
 *   query  header, one question (an uncompressed name), and at most an OPT
 *          record.  That shape is read here; any other (a compressed
 *          question, records in the answer or authority sections, TSIG...)
 *          goes to ldns_wire2pkt() as before, so nothing that parsed
 *          before is refused now.
 *   reply  header, the client's question as it sent it, the CNAME chain and
 *          the addresses (each owner a compression pointer back to the name
 *          before it), and our OPT (1232 bytes, DO clear, no options) when
 *          the query had one.  Too big for the client: the question alone
 *          with TC, so it asks again over TCP.
 *
 * Upstream replies, which are anything but simple, are still ldns's.
 *
 * Nothing here touches a socket or the resolver's state, so that the unit
 * tests (tests/test_resolver_wire.c) and the fuzzer (tests/fuzz/
 * fuzz_resolver.c) run exactly the code a guest's query meets.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include <ldns/ldns.h>

#include "resolver/dns.h"

#define T_OPT 41
#define PTR(off) (0xc000 | (off))

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint8_t *put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v & 0xff;
	return p + 2;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	p = put16(p, v >> 16);
	return put16(p, v & 0xffff);
}

/* The simple shape, or -EAGAIN: let ldns read it. */
int dns_question_fast(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size)
{
	size_t i = DNS_HDR, start;

	if (len < DNS_HDR)
		return -EAGAIN;
	/* one question; no answer or authority records; at most one additional (the OPT) */
	if (get16(buf + 4) != 1 || get16(buf + 6) || get16(buf + 8) || get16(buf + 10) > 1)
		return -EAGAIN;
	start = i;
	while (i < len && buf[i]) {
		if (buf[i] > LABEL_MAX) /* a compression pointer, or a label type nobody uses */
			return -EAGAIN;
		i += 1 + buf[i];
	}
	if (i >= len || i + 1 - start > sizeof(q->qname) || i + 5 > len)
		return -EAGAIN;
	q->qlen = i + 1 - start;
	memcpy(q->qname, buf + start, q->qlen);
	q->qtype = get16(buf + i + 1);
	q->qclass = get16(buf + i + 3);
	i += 5;
	q->edns = false;
	if (get16(buf + 10)) {
		/* the OPT: the root name, type 41, class = its UDP size, TTL, rdata reaching the end exactly */
		if (i + 11 > len || buf[i] || get16(buf + i + 1) != T_OPT || i + 11 + get16(buf + i + 9) != len)
			return -EAGAIN;
		q->edns = true;
		*udp_size = get16(buf + i + 3);
		i = len;
	}
	return i == len ? 0 : -EAGAIN;
}

/* Anything else: ldns reads it whole; one question or FORMERR, as always. */
int dns_question_ldns(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size)
{
	ldns_pkt *p = NULL;
	const ldns_rr *qrr;
	const ldns_rdf *owner;
	int ret = -EINVAL;

	if (ldns_wire2pkt(&p, buf, len) != LDNS_STATUS_OK || ldns_pkt_qdcount(p) != 1 ||
	    ldns_rr_list_rr_count(ldns_pkt_question(p)) != 1)
		goto out;
	qrr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	owner = ldns_rr_owner(qrr);
	if (!owner || ldns_rdf_size(owner) > sizeof(q->qname))
		goto out;
	q->qlen = ldns_rdf_size(owner);
	memcpy(q->qname, ldns_rdf_data(owner), q->qlen);
	q->qtype = ldns_rr_get_type(qrr);
	q->qclass = ldns_rr_get_class(qrr);
	q->edns = ldns_pkt_edns(p);
	*udp_size = ldns_pkt_edns_udp_size(p);
	ret = 0;
out:
	ldns_pkt_free(p);
	return ret;
}

int dns_question_parse(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size)
{
	*udp_size = 0;
	if (len < DNS_HDR)
		return -EINVAL;
	q->id = get16(buf);
	q->rd = buf[2] & 0x01;
	if (dns_question_fast(buf, len, q, udp_size) == 0)
		return 0;
	return dns_question_ldns(buf, len, q, udp_size);
}

int dns_query_read(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size)
{
	if (len < DNS_HDR || (buf[2] & 0x80))
		return -EBADMSG;
	if (((buf[2] >> 3) & 0xf) != LDNS_PACKET_QUERY)
		return -EOPNOTSUPP;
	return dns_question_parse(buf, len, q, udp_size) ? -EINVAL : 0;
}

size_t dns_udp_reply_max(const struct question *q, uint16_t udp_size)
{
	if (!q->edns || udp_size <= UDP_PLAIN)
		return UDP_PLAIN;
	return udp_size < EDNS_SIZE ? udp_size : EDNS_SIZE;
}

/* ------------------------------------------------------------ names */

static bool host_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/*
 * A wire name as the policy sees it: lowercase labels joined by dots, no
 * trailing dot.  Only a-z 0-9 - _ are accepted (the rules of
 * latch_dns_name_normalize), so a label holding a '.' or a '\' can never
 * spell a different name in text than on the wire.  Returns 0 or -EINVAL.
 */
int dns_name_text_wire(const uint8_t *p, size_t n, char *out, size_t len)
{
	size_t i = 0, o = 0;

	if (n < 1)
		return -EINVAL;
	while (i < n && p[i]) {
		size_t l = p[i++];

		if (l > LABEL_MAX || i + l > n || o + l + 2 > len)
			return -EINVAL;
		if (o)
			out[o++] = '.';
		for (size_t k = 0; k < l; k++) {
			unsigned char c = p[i + k];

			if (c >= 'A' && c <= 'Z')
				c += 'a' - 'A';
			if (!host_char(c) || (c == '-' && (k == 0 || k == l - 1)))
				return -EINVAL;
			out[o++] = c;
		}
		i += l;
	}
	if (i != n - 1 || o == 0) /* exactly one root label at the end; the root itself is no host */
		return -EINVAL;
	out[o] = 0;
	return 0;
}

int dns_name_text(const ldns_rdf *dname, char *out, size_t len)
{
	if (ldns_rdf_get_type(dname) != LDNS_RDF_TYPE_DNAME)
		return -EINVAL;
	return dns_name_text_wire(ldns_rdf_data(dname), ldns_rdf_size(dname), out, len);
}

/*
 * The answer section of a: the chain from the question, then the addresses
 * at its end, each record with ttl.  Owners are pointers: the first to the
 * question's name at offset 12, each next one to the name the record before
 * it pointed to.  Returns the bytes written, or 0 when cap is too small.
 */
static size_t answer_section(const struct question *q, const struct answer *a, uint32_t ttl, uint8_t *out, size_t cap,
			     uint16_t *count)
{
	size_t base = DNS_HDR + q->qlen + 4, o = 0;
	uint16_t owner = DNS_HDR;

	*count = 0;
	for (int i = 0; i < a->n_chain; i++) {
		size_t n = ldns_rdf_size(a->chain[i]);

		if (o + 12 + n > cap)
			goto full;
		put32(put16(put16(put16(out + o, PTR(owner)), LDNS_RR_TYPE_CNAME), LDNS_RR_CLASS_IN), ttl);
		put16(out + o + 10, n);
		memcpy(out + o + 12, ldns_rdf_data(a->chain[i]), n);
		owner = base + o + 12;
		o += 12 + n;
		(*count)++;
	}
	for (int i = 0; i < a->n_addrs; i++) {
		bool v4 = a->addrs[i].family == AF_INET;
		size_t n = v4 ? 4 : 16;

		if (o + 12 + n > cap)
			goto full;
		put32(put16(put16(put16(out + o, PTR(owner)), v4 ? LDNS_RR_TYPE_A : LDNS_RR_TYPE_AAAA),
			    LDNS_RR_CLASS_IN),
		      ttl);
		put16(out + o + 10, n);
		memcpy(out + o + 12, a->addrs[i].bytes, n);
		o += 12 + n;
		(*count)++;
	}
	return o;
full:
	*count = 0;
	return 0;
}

size_t dns_reply_build(const struct question *q, uint8_t rcode, const struct answer *a, uint32_t ttl, size_t max,
		       uint8_t *out, size_t cap)
{
	static const uint8_t opt[11] = { 0, 0, T_OPT, EDNS_SIZE >> 8, EDNS_SIZE & 0xff };
	size_t qend = DNS_HDR + q->qlen + 4, optlen = q->edns ? sizeof(opt) : 0, anlen = 0;
	uint16_t ancount = 0;
	bool tc = false;

	if (max > cap)
		max = cap;
	if (qend + optlen > max)
		return 0;
	if (a) {
		anlen = answer_section(q, a, ttl, out + qend, max - qend - optlen, &ancount);
		/* it does not fit: the question alone, truncated */
		tc = !anlen && (a->n_chain || a->n_addrs);
	}
	put16(out, q->id);
	out[2] = 0x80 | (tc ? 0x02 : 0) | (q->rd ? 0x01 : 0); /* QR, opcode QUERY, TC, RD */
	out[3] = 0x80 | (rcode & 0x0f); /* RA */
	put16(put16(put16(put16(out + 4, 1), ancount), 0), optlen ? 1 : 0);
	memcpy(out + DNS_HDR, q->qname, q->qlen);
	put16(put16(out + DNS_HDR + q->qlen, q->qtype), q->qclass);
	memcpy(out + qend + anlen, opt, optlen);
	return qend + anlen + optlen;
}
