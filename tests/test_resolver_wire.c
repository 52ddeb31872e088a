// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_resolver_wire.c - the resolver's reading of what a guest sends
 * (resolver/wire.c, resolver/answer.c): a client's message is read into one
 * question or refused, by the fast path and by ldns alike; a question name
 * becomes the text the policy judges only when it is a host name; and the
 * reply echoes the question and truncates rather than overflow.  Every
 * refusal sits beside a control that passes.  No sockets: these are the
 * pure functions the resolver's client_query() calls.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "resolver/dns.h"

struct msg {
	uint8_t b[1024];
	size_t n;
};

static void put(struct msg *m, const void *p, size_t n)
{
	cr_assert_leq(m->n + n, sizeof(m->b));
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void put8(struct msg *m, uint8_t v)
{
	put(m, &v, 1);
}

static void put16(struct msg *m, uint16_t v)
{
	put8(m, v >> 8);
	put8(m, v & 0xff);
}

/* A header: id 0x1234, FLAGS (RD is 0x0100), and the four section counts. */
static void header(struct msg *m, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns, uint16_t ar)
{
	m->n = 0;
	put16(m, 0x1234);
	put16(m, flags);
	put16(m, qd);
	put16(m, an);
	put16(m, ns);
	put16(m, ar);
}

/* "www.example.com" on the wire, uncompressed, as a stub resolver sends it */
static const uint8_t www[] = "\3www\7example\3com";

/* A query for www.example.com (type QTYPE, class IN), with an OPT of UDP size EDNS when EDNS is non-zero. */
static void query(struct msg *m, uint16_t qtype, uint16_t edns)
{
	header(m, 0x0100, 1, 0, 0, edns ? 1 : 0);
	put(m, www, sizeof(www));
	put16(m, qtype);
	put16(m, LDNS_RR_CLASS_IN);
	if (edns) {
		put8(m, 0); /* root owner */
		put16(m, 41);
		put16(m, edns);
		put16(m, 0); /* extended rcode, version */
		put16(m, 0); /* flags */
		put16(m, 0); /* rdlength */
	}
}

/* The fast path and ldns, where both read M, read the same question. */
static void both_agree(const struct msg *m)
{
	struct question f = { 0 }, l = { 0 };
	uint16_t fu = 0, lu = 0;

	if (dns_question_fast(m->b, m->n, &f, &fu))
		return;
	cr_assert_eq(dns_question_ldns(m->b, m->n, &l, &lu), 0, "the fast path read what ldns refuses");
	cr_expect_eq(f.qlen, l.qlen);
	cr_expect_eq(memcmp(f.qname, l.qname, f.qlen), 0);
	cr_expect_eq(f.qtype, l.qtype);
	cr_expect_eq(f.qclass, l.qclass);
	cr_expect_eq(f.edns, l.edns);
	cr_expect_eq(fu, lu);
}

/* dns_query_read's verdict on M, with the question it read */
static int read_msg(const struct msg *m, struct question *q, uint16_t *udp_size)
{
	memset(q, 0xa5, sizeof(*q));
	return dns_query_read(m->b, m->n, q, udp_size);
}

/* ------------------------------------------------------------ questions */

/* Control: a plain query reads as the client spelled it, on both paths. */
Test(resolver_wire, plain_query_reads_as_sent)
{
	struct msg m;
	struct question q;
	uint16_t udp = 7;

	query(&m, LDNS_RR_TYPE_AAAA, 0);
	cr_assert_eq(read_msg(&m, &q, &udp), 0);
	cr_expect_eq(q.id, 0x1234);
	cr_expect(q.rd);
	cr_expect_eq(q.qlen, sizeof(www));
	cr_expect_eq(memcmp(q.qname, www, sizeof(www)), 0);
	cr_expect_eq(q.qtype, LDNS_RR_TYPE_AAAA);
	cr_expect_eq(q.qclass, LDNS_RR_CLASS_IN);
	cr_expect_not(q.edns);
	cr_expect_eq(udp, 0);
	cr_expect_eq(dns_udp_reply_max(&q, udp), UDP_PLAIN);
	both_agree(&m);
	/* the same message read by ldns alone */
	cr_assert_eq(dns_question_ldns(m.b, m.n, &q, &udp), 0);
	cr_expect_eq(q.qlen, sizeof(www));
}

/* A reply is never bigger than the client said it takes, nor than our own 1232 bytes. */
Test(resolver_wire, edns_size_bounds_the_reply)
{
	static const struct {
		uint16_t asked;
		size_t max;
	} cases[] = { { 4096, EDNS_SIZE }, { 1232, EDNS_SIZE }, { 1000, 1000 },	 { 513, 513 },
		      { 512, UDP_PLAIN },  { 100, UDP_PLAIN },	{ 1, UDP_PLAIN } };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct msg m;
		struct question q;
		uint16_t udp;

		query(&m, LDNS_RR_TYPE_A, cases[i].asked);
		cr_assert_eq(read_msg(&m, &q, &udp), 0, "EDNS %u", cases[i].asked);
		cr_expect(q.edns);
		cr_expect_eq(udp, cases[i].asked);
		cr_expect_eq(dns_udp_reply_max(&q, udp), cases[i].max, "EDNS %u", cases[i].asked);
		both_agree(&m);
	}
}

/* An OPT whose rdata runs past the end of the message is refused (FORMERR); control: the exact length. */
Test(resolver_wire, opt_past_the_end_refused)
{
	struct msg m;
	struct question q;
	uint16_t udp;

	query(&m, LDNS_RR_TYPE_A, 1232);
	m.b[m.n - 1] = 4; /* rdlength 4, and no rdata */
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL);
	put(&m, "\0\0\0\0", 4); /* the control: an empty option, exactly 4 bytes */
	cr_expect_eq(read_msg(&m, &q, &udp), 0);
	cr_expect(q.edns);
	both_agree(&m);
}

/* A message shorter than its header is never answered: there is no id to answer with. */
Test(resolver_wire, short_header_never_answered)
{
	struct msg m;
	struct question q;
	uint16_t udp;

	query(&m, LDNS_RR_TYPE_A, 0);
	for (size_t n = 0; n < DNS_HDR; n++) {
		uint8_t *exact = malloc(n ? n : 1); /* exactly n bytes, so a read past them is one */

		cr_assert(exact);
		memcpy(exact, m.b, n);
		cr_expect_eq(dns_query_read(exact, n, &q, &udp), -EBADMSG, "%zu bytes", n);
		cr_expect_eq(dns_question_parse(exact, n, &q, &udp), -EINVAL, "%zu bytes", n);
		free(exact);
	}
	cr_expect_eq(read_msg(&m, &q, &udp), 0);
}

/* A question cut anywhere is refused (FORMERR) by both paths; control: the whole message. */
Test(resolver_wire, truncated_question_refused)
{
	struct msg m;
	struct question q;
	uint16_t udp;

	query(&m, LDNS_RR_TYPE_A, 1232);
	for (size_t n = DNS_HDR; n < m.n; n++) {
		struct msg cut = m;

		cut.n = n;
		cr_expect_eq(read_msg(&cut, &q, &udp), -EINVAL, "cut at %zu of %zu", n, m.n);
	}
	cr_expect_eq(read_msg(&m, &q, &udp), 0);
}

/* One question exactly: none, or two, is FORMERR (the reply echoes one question). */
Test(resolver_wire, question_count_other_than_one_refused)
{
	struct msg m;
	struct question q;
	uint16_t udp;

	query(&m, LDNS_RR_TYPE_A, 0);
	m.b[5] = 0;
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "zero questions");
	m.b[5] = 2;
	put(&m, www, sizeof(www));
	put16(&m, LDNS_RR_TYPE_A);
	put16(&m, LDNS_RR_CLASS_IN);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "two questions");
	header(&m, 0x0100, 0, 0, 0, 0);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "a bare header");
	query(&m, LDNS_RR_TYPE_A, 0);
	cr_expect_eq(read_msg(&m, &q, &udp), 0);
}

/* A response is never answered (no loops, no reflection); another opcode gets NOTIMPL. */
Test(resolver_wire, response_and_opcode_refused)
{
	struct msg m;
	struct question q;
	uint16_t udp;

	query(&m, LDNS_RR_TYPE_A, 0);
	m.b[2] |= 0x80;
	cr_expect_eq(read_msg(&m, &q, &udp), -EBADMSG, "QR set");
	m.b[2] = 0x01 | (2 << 3); /* STATUS */
	cr_expect_eq(read_msg(&m, &q, &udp), -EOPNOTSUPP, "opcode STATUS");
	m.b[2] = 0x01 | (5 << 3); /* UPDATE */
	cr_expect_eq(read_msg(&m, &q, &udp), -EOPNOTSUPP, "opcode UPDATE");
	m.b[2] = 0x01;
	cr_expect_eq(read_msg(&m, &q, &udp), 0);
}

/* A compressed question name is read whole by ldns, and the reply echoes it uncompressed. */
Test(resolver_wire, compressed_name_read_whole)
{
	static const uint8_t rest[] = "\7example\3com";
	struct msg m;
	struct question q;
	uint16_t udp;
	size_t tail;

	header(&m, 0x0100, 1, 0, 0, 0);
	put(&m, "\3www", 4);
	tail = DNS_HDR + 4 + 2 + 4; /* after the pointer and the type and class */
	put16(&m, 0xc000 | tail);
	put16(&m, LDNS_RR_TYPE_A);
	put16(&m, LDNS_RR_CLASS_IN);
	put(&m, rest, sizeof(rest));
	cr_expect_neq(dns_question_fast(m.b, m.n, &q, &udp), 0, "the fast path takes no pointer");
	cr_assert_eq(read_msg(&m, &q, &udp), 0);
	cr_expect_eq(q.qlen, sizeof(www));
	cr_expect_eq(memcmp(q.qname, www, sizeof(www)), 0);
}

/* A compression pointer loop is refused, not followed forever; control: compressed_name_read_whole. */
Test(resolver_wire, pointer_loop_refused)
{
	struct msg m;
	struct question q;
	uint16_t udp;

	/* the name points at itself */
	header(&m, 0x0100, 1, 0, 0, 0);
	put16(&m, 0xc000 | DNS_HDR);
	put16(&m, LDNS_RR_TYPE_A);
	put16(&m, LDNS_RR_CLASS_IN);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "a pointer to itself");

	/* two labels' worth of names that point at each other */
	header(&m, 0x0100, 1, 0, 0, 0);
	put(&m, "\1a", 2);
	put16(&m, 0xc000 | (DNS_HDR + 2 + 2 + 4));
	put16(&m, LDNS_RR_TYPE_A);
	put16(&m, LDNS_RR_CLASS_IN);
	put(&m, "\1b", 2);
	put16(&m, 0xc000 | DNS_HDR);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "two pointers in a ring");

	/* a pointer past the end */
	header(&m, 0x0100, 1, 0, 0, 0);
	put16(&m, 0xc000 | 0x3fff);
	put16(&m, LDNS_RR_TYPE_A);
	put16(&m, LDNS_RR_CLASS_IN);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "a pointer past the end");
}

/* A question name of labels LENS (each of 'x'), then the root. */
static void query_labels(struct msg *m, const uint8_t *lens, int n)
{
	header(m, 0x0100, 1, 0, 0, 0);
	for (int i = 0; i < n; i++) {
		put8(m, lens[i]);
		for (int k = 0; k < lens[i]; k++)
			put8(m, 'x');
	}
	put8(m, 0);
	put16(m, LDNS_RR_TYPE_A);
	put16(m, LDNS_RR_CLASS_IN);
}

/* A name over 255 bytes on the wire is refused, plain or made long by a pointer; control: 255 exactly. */
Test(resolver_wire, name_over_255_refused)
{
	static const uint8_t fits[] = { 63, 63, 63, 61 }, over[] = { 63, 63, 63, 62 };
	struct msg m;
	struct question q;
	uint16_t udp;

	query_labels(&m, fits, 4);
	cr_assert_eq(read_msg(&m, &q, &udp), 0, "255 bytes");
	cr_expect_eq(q.qlen, 255);
	both_agree(&m);
	query_labels(&m, over, 4);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "256 bytes");

	/* 3 x 64 bytes of labels in the question, then a pointer to 64 more after it: 257 */
	header(&m, 0x0100, 1, 0, 0, 0);
	for (int i = 0; i < 3; i++) {
		put8(&m, 63);
		for (int k = 0; k < 63; k++)
			put8(&m, 'x');
	}
	put16(&m, 0xc000 | (DNS_HDR + 3 * 64 + 2 + 4));
	put16(&m, LDNS_RR_TYPE_A);
	put16(&m, LDNS_RR_CLASS_IN);
	put8(&m, 63);
	for (int k = 0; k < 63; k++)
		put8(&m, 'y');
	put8(&m, 0);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "257 bytes through a pointer");
}

/* A label length of 64..191 is no label (0x40 and 0x80 are reserved types); control: 63. */
Test(resolver_wire, label_over_63_refused)
{
	static const uint8_t ok[] = { 63 }, bad64[] = { 64 }, bad100[] = { 100 };
	struct msg m;
	struct question q;
	uint16_t udp;

	query_labels(&m, bad64, 1);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "a label of 64");
	query_labels(&m, bad100, 1);
	cr_expect_eq(read_msg(&m, &q, &udp), -EINVAL, "a label of 100");
	query_labels(&m, ok, 1);
	cr_expect_eq(read_msg(&m, &q, &udp), 0, "a label of 63");
}

/* ------------------------------------------------------------ names as the policy reads them */

static int name_text(const char *wire, size_t n, char *out, size_t len)
{
	return dns_name_text_wire((const uint8_t *)wire, n, out, len);
}

/* Control: a name in any case reads as lowercase labels joined by dots. */
Test(resolver_wire, name_text_lowercase)
{
	char out[LATCH_RESOLVER_NAME_MAX];

	cr_assert_eq(name_text("\3WWW\7ExAmple\3com", 17, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "www.example.com");
	cr_assert_eq(name_text("\4_dns\3a-b\0019", 12, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "_dns.a-b.9");
}

/* A label whose bytes would spell another name in text ('.', '\\', NUL, space...) is refused. */
Test(resolver_wire, name_text_refuses_what_text_would_change)
{
	static const char *const bad[] = { "\3a.b\3com", "\3a\\b\3com", "\3a\0b\3com",	   "\3a b\3com",
					   "\3-ab\3com", "\3ab-\3com",	"\3a\xc3\xa9\3com" };
	char out[LATCH_RESOLVER_NAME_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(name_text(bad[i], 9, out, sizeof(out)), -EINVAL, "case %zu", i);
	cr_expect_eq(name_text("\3a-b\3com", 9, out, sizeof(out)), 0);
}

/* A name must end with exactly one root label, inside its length, and fit the buffer; the root is no host. */
Test(resolver_wire, name_text_bounds)
{
	char out[16];

	cr_expect_eq(name_text("", 1, out, sizeof(out)), -EINVAL, "the root");
	cr_expect_eq(name_text("", 0, out, sizeof(out)), -EINVAL, "nothing");
	cr_expect_eq(name_text("\3com", 4, out, sizeof(out)), -EINVAL, "no root label");
	cr_expect_eq(name_text("\3com\0\0", 6, out, sizeof(out)), -EINVAL, "bytes after the root");
	cr_expect_eq(name_text("\5com", 5, out, sizeof(out)), -EINVAL, "a label past the end");
	/* 15 characters and the NUL fit 16 bytes; 16 do not */
	cr_expect_eq(name_text("\7abcdefg\7hijklmn", 17, out, sizeof(out)), 0);
	cr_expect_str_eq(out, "abcdefg.hijklmn");
	cr_expect_eq(name_text("\7abcdefg\10hijklmno", 18, out, sizeof(out)), -EINVAL, "16 characters");
	cr_expect_eq(name_text("\3com", 5, out, sizeof(out)), 0);
}

/* ------------------------------------------------------------ replies */

/* The reply to Q with ADDRS IPv4 addresses, in at most MAX bytes, read back by ldns. */
static ldns_pkt *reply(const struct question *q, int addrs, size_t max, size_t *len)
{
	static uint8_t out[65535];
	struct answer a = { .rcode = LDNS_RCODE_NOERROR, .n_addrs = addrs, .ttl = 60 };
	ldns_pkt *p = NULL;

	for (int i = 0; i < addrs; i++) {
		a.addrs[i].family = AF_INET;
		a.addrs[i].v4.s_addr = htonl(0xc0000200 | (i + 1)); /* 192.0.2.x */
	}
	*len = dns_reply_build(q, LDNS_RCODE_NOERROR, &a, 60, max, out, sizeof(out));
	cr_assert_gt(*len, 0);
	cr_assert_leq(*len, max);
	cr_assert_eq(ldns_wire2pkt(&p, out, *len), LDNS_STATUS_OK);
	return p;
}

/* A reply echoes the question as sent; one too big for the client is the question alone with TC. */
Test(resolver_wire, reply_echoes_and_truncates)
{
	struct msg m;
	struct question q;
	uint16_t udp;
	size_t len;
	ldns_pkt *p;
	ldns_rdf *want = ldns_dname_new_frm_str("www.example.com.");

	query(&m, LDNS_RR_TYPE_A, 0);
	cr_assert_eq(read_msg(&m, &q, &udp), 0);
	/* control: four addresses fit 512 bytes */
	p = reply(&q, 4, dns_udp_reply_max(&q, udp), &len);
	cr_expect_eq(ldns_pkt_id(p), 0x1234);
	cr_expect(ldns_pkt_qr(p));
	cr_expect(ldns_pkt_rd(p));
	cr_expect_not(ldns_pkt_tc(p));
	cr_expect_eq(ldns_pkt_ancount(p), 4);
	cr_expect_eq(ldns_dname_compare(ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_question(p), 0)), want), 0);
	cr_expect_eq(ldns_dname_compare(ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_answer(p), 3)), want), 0);
	ldns_pkt_free(p);
	/* 32 addresses of 16 bytes each do not fit 512 bytes: TC, the question alone */
	p = reply(&q, LATCH_RESOLVER_ADDRS_MAX, dns_udp_reply_max(&q, udp), &len);
	cr_expect(ldns_pkt_tc(p));
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	cr_expect_eq(ldns_pkt_qdcount(p), 1);
	ldns_pkt_free(p);
	ldns_rdf_deep_free(want);
}

/* No room even for the question: no reply at all, never a write past MAX. */
Test(resolver_wire, reply_without_room_is_nothing)
{
	uint8_t out[64];
	struct msg m;
	struct question q;
	uint16_t udp;

	query(&m, LDNS_RR_TYPE_A, 1232);
	cr_assert_eq(read_msg(&m, &q, &udp), 0);
	memset(out, 0xee, sizeof(out));
	/* header + question (12 + 17 + 4) + OPT (11) = 44 */
	cr_expect_eq(dns_reply_build(&q, LDNS_RCODE_NOERROR, NULL, 0, 43, out, sizeof(out)), 0);
	for (size_t i = 0; i < sizeof(out); i++)
		cr_expect_eq(out[i], 0xee, "byte %zu written", i);
	cr_expect_eq(dns_reply_build(&q, LDNS_RCODE_NOERROR, NULL, 0, 44, out, sizeof(out)), 44);
}
