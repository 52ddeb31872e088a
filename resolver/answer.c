// SPDX-License-Identifier: GPL-2.0-only
/*
 * answer.c - the answer filter: what an upstream said, reduced to the chain
 * from the question and the addresses at its end; the policy's judgement of
 * it; and the reply the client gets, built from scratch.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <ldns/ldns.h>

#include "resolver/dns.h"
#include "common/common.h"

/* ------------------------------------------------------------ names */

/*
 * The decision on a client's question name: NULL when it may be asked
 * upstream, else the reason ("qname": not a host name, and name is then "";
 * "not-allowed": the policy's).  name gets the normalized text.
 */
const char *dns_name_judge(struct latch_resolver *r, const uint8_t *qname, size_t qlen, char *name, size_t len)
{
	if (dns_name_text_wire(qname, qlen, name, len)) {
		name[0] = '\0';
		return "qname";
	}
	return r->o.policy.name_allowed(r->o.policy.arg, name) ? NULL : "not-allowed";
}

const char *latch_resolver_try_name(struct latch_resolver *r, const char *name)
{
	char text[LATCH_RESOLVER_NAME_MAX];
	ldns_rdf *d = ldns_dname_new_frm_str(name);
	const char *why;

	if (!d)
		return "qname";
	why = dns_name_judge(r, ldns_rdf_data(d), ldns_rdf_size(d), text, sizeof(text));
	ldns_rdf_deep_free(d);
	return why;
}

/* ------------------------------------------------------------ answers */

void dns_answer_clear(struct answer *a)
{
	for (int i = 0; i < a->n_chain; i++)
		ldns_rdf_deep_free(a->chain[i]);
	a->n_chain = 0;
}

int dns_answer_copy(struct answer *dst, const struct answer *src)
{
	*dst = *src;
	for (int i = 0; i < src->n_chain; i++) {
		dst->chain[i] = ldns_rdf_clone(src->chain[i]);
		if (!dst->chain[i]) {
			dst->n_chain = i;
			dns_answer_clear(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

static const ldns_rr *find_rr(const ldns_rr_list *l, const ldns_rdf *owner, ldns_rr_type type, size_t *from)
{
	for (size_t i = from ? *from : 0; i < ldns_rr_list_rr_count(l); i++) {
		const ldns_rr *rr = ldns_rr_list_rr(l, i);

		if (ldns_rr_get_type(rr) != type || ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
		    ldns_dname_compare(ldns_rr_owner(rr), owner))
			continue;
		if (from)
			*from = i + 1;
		return rr;
	}
	return NULL;
}

/* The negative TTL of RFC 2308: the SOA's own TTL or its MINIMUM, whichever is smaller. */
static uint32_t negative_ttl(const struct latch_resolver *r, const ldns_pkt *p)
{
	const ldns_rr_list *au = ldns_pkt_authority(p);
	uint32_t ttl = NEG_TTL_DEFAULT;

	for (size_t i = 0; i < ldns_rr_list_rr_count(au); i++) {
		const ldns_rr *rr = ldns_rr_list_rr(au, i);
		const ldns_rdf *min = ldns_rr_rdf(rr, 6);

		if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_SOA || !min || ldns_rdf_size(min) != 4)
			continue;
		ttl = ldns_rdf2native_int32(min);
		if (ldns_rr_ttl(rr) < ttl)
			ttl = ldns_rr_ttl(rr);
		break;
	}
	return ttl > r->o.ttl_max ? r->o.ttl_max : ttl;
}

/* Is t the question or already a link of the chain?  Then the chain loops. */
static bool chain_has(const struct answer *a, const ldns_rdf *qname, const ldns_rdf *t)
{
	if (!ldns_dname_compare(t, qname))
		return true;
	for (int i = 0; i < a->n_chain; i++)
		if (!ldns_dname_compare(t, a->chain[i]))
			return true;
	return false;
}

/*
 * The next link of the chain from cur: its target, lowercase, in *out (NULL
 * at the end of the chain).  Returns NULL or the reason the chain is
 * refused: "cname-chain" for two different targets of one name (no answer
 * says which one counts), a target that is not a host name, or more than
 * LATCH_RESOLVER_CNAME_MAX links; "cname-loop" for a target already on it.
 */
static const char *chain_next(struct answer *a, const ldns_rr_list *an, const ldns_rdf *qname, const ldns_rdf *cur,
			      uint32_t *ttl, ldns_rdf **out)
{
	char text[LATCH_RESOLVER_NAME_MAX];
	const ldns_rr *rr, *other;
	ldns_rdf *t;
	size_t from = 0;

	*out = NULL;
	rr = find_rr(an, cur, LDNS_RR_TYPE_CNAME, &from);
	if (!rr)
		return NULL;
	if (!ldns_rr_rdf(rr, 0) || ldns_rdf_get_type(ldns_rr_rdf(rr, 0)) != LDNS_RDF_TYPE_DNAME)
		return "cname-chain";
	while ((other = find_rr(an, cur, LDNS_RR_TYPE_CNAME, &from)))
		if (!ldns_rr_rdf(other, 0) || ldns_dname_compare(ldns_rr_rdf(other, 0), ldns_rr_rdf(rr, 0)))
			return "cname-chain";
	if (a->n_chain == LATCH_RESOLVER_CNAME_MAX)
		return "cname-chain";
	t = ldns_rdf_clone(ldns_rr_rdf(rr, 0));
	if (!t)
		return "servfail";
	ldns_dname2canonical(t);
	if (dns_name_text(t, text, sizeof(text))) {
		ldns_rdf_deep_free(t);
		return "cname-chain";
	}
	if (chain_has(a, qname, t)) {
		ldns_rdf_deep_free(t);
		return "cname-loop";
	}
	if (ldns_rr_ttl(rr) < *ttl)
		*ttl = ldns_rr_ttl(rr);
	*out = t;
	return NULL;
}

/*
 * Follow the CNAME chain from qname through the answer section and collect
 * the records of qtype at its end.  Only the records on the chain from the
 * question count: records for any other owner (a name off the chain, or a
 * link before the end) are ignored, so an upstream can't plant addresses
 * for other names this way.  The chain's names may lie anywhere (that is
 * how CDNs answer): they are the upstream's business, and the guest can't
 * ask for them by themselves.
 */
int dns_answer_from_pkt(const struct latch_resolver *r, const ldns_pkt *p, const ldns_rdf *qname, uint16_t qtype,
			struct answer *a)
{
	const ldns_rr_list *an = ldns_pkt_answer(p);
	const ldns_rdf *cur = qname;
	uint32_t ttl = UINT32_MAX;
	const ldns_rr *rr;
	ldns_rdf *t;

	memset(a, 0, sizeof(*a));
	a->rcode = ldns_pkt_get_rcode(p);
	/* a CNAME query's answer is the first link; resolvers don't chase it */
	while (!(qtype == LDNS_RR_TYPE_CNAME && a->n_chain == 1)) {
		a->chain_bad = chain_next(a, an, qname, cur, &ttl, &t);
		if (a->chain_bad && !strcmp(a->chain_bad, "servfail")) {
			dns_answer_clear(a);
			return -ENOMEM;
		}
		if (a->chain_bad || !t)
			break;
		a->chain[a->n_chain] = t;
		cur = a->chain[a->n_chain++];
	}
	if (a->rcode == LDNS_RCODE_NOERROR && !a->chain_bad &&
	    (qtype == LDNS_RR_TYPE_A || qtype == LDNS_RR_TYPE_AAAA)) {
		size_t from = 0;
		int fam = qtype == LDNS_RR_TYPE_A ? AF_INET : AF_INET6;
		size_t sz = fam == AF_INET ? 4 : 16;

		while (a->n_addrs < LATCH_RESOLVER_ADDRS_MAX && (rr = find_rr(an, cur, qtype, &from))) {
			const ldns_rdf *d = ldns_rr_rdf(rr, 0);
			struct latch_addr *x = &a->addrs[a->n_addrs];

			if (!d || ldns_rdf_size(d) != sz)
				continue;
			memset(x, 0, sizeof(*x));
			x->family = fam;
			memcpy(x->bytes, ldns_rdf_data(d), sz);
			a->n_addrs++;
			if (ldns_rr_ttl(rr) < ttl)
				ttl = ldns_rr_ttl(rr);
		}
	}
	if (a->rcode == LDNS_RCODE_NOERROR && (a->n_addrs || (qtype == LDNS_RR_TYPE_CNAME && a->n_chain)))
		a->ttl = dns_clamp_ttl(r, ttl);
	else
		a->ttl = negative_ttl(r, p);
	return 0;
}

/*
 * The decision on one address of an answer: NULL when the guest may have
 * it, else the reason.  The host's own addresses are refused whatever the
 * profile says ("open" means the internet, not the host); the rest go to
 * the policy's rebinding filter.  *learn says whether the address becomes a
 * learned entry: a non-public address that the filter let through is
 * covered by a CIDR entry of the profile, which reaches it on that entry's
 * ports only, so learning it under the name's ports would open more.
 */
const char *dns_addr_judge(struct latch_resolver *r, const struct latch_addr *a, bool *learn)
{
	*learn = false;
	if (dns_hostaddr_is_local(r, a))
		return "host-address";
	if (r->o.policy.addr_refused(r->o.policy.arg, a))
		return "rebinding";
	*learn = !latch_addr_nonpublic(a);
	return NULL;
}

/*
 * NULL when the client may have this answer, else the reason it is
 * refused; the addresses to learn are copied to learn (n_learn of them).
 * One refused address refuses the whole answer: handing back the rest would
 * still tell the guest the name is being rebound, and a partial set is one
 * more case to get wrong.
 */
static const char *answer_judge(struct latch_resolver *r, const struct answer *a, struct latch_addr *learn,
				int *n_learn)
{
	*n_learn = 0;
	if (a->chain_bad)
		return a->chain_bad;
	for (int i = 0; i < a->n_addrs; i++) {
		bool l;
		const char *why = dns_addr_judge(r, &a->addrs[i], &l);

		if (why)
			return why;
		if (l)
			learn[(*n_learn)++] = a->addrs[i];
	}
	return NULL;
}

const char *latch_resolver_try_answer(struct latch_resolver *r, const struct latch_addr *addrs, int n, int *n_learn)
{
	struct latch_addr learn[LATCH_RESOLVER_ADDRS_MAX];
	struct answer a = { .rcode = LDNS_RCODE_NOERROR };

	*n_learn = 0;
	if (n < 1 || n > LATCH_RESOLVER_ADDRS_MAX)
		return "no-address";
	memcpy(a.addrs, addrs, n * sizeof(*addrs));
	a.n_addrs = n;
	return answer_judge(r, &a, learn, n_learn);
}

/* ------------------------------------------------------------ replies to clients */

void dns_client_reply(struct latch_resolver *r, const struct client *c, const struct question *cq, uint8_t rcode,
		      const struct answer *a, uint32_t ttl)
{
	uint8_t wire[65535];
	size_t len = dns_reply_build(cq, rcode, a, ttl, c->max, wire, sizeof(wire));

	if (len)
		dns_client_send(r, c, wire, len);
}

void dns_client_refuse(struct latch_resolver *r, const struct client *c, const struct question *cq, const char *name,
		       const char *reason)
{
	r->st.refused++;
	if (r->o.policy.refused)
		r->o.policy.refused(r->o.policy.arg, name, cq->qtype, reason);
	dns_client_reply(r, c, cq, LDNS_RCODE_REFUSED, NULL, 0);
}

/*
 * An answer (NULL: the upstreams failed) to a client, judged first.  e is
 * the cache entry a came from or went into (NULL: none): once answered()
 * has taken its addresses they are in the kernel until the entry expires,
 * so its later hits skip the callback (and its map lookups) altogether.
 */
void dns_client_answer(struct latch_resolver *r, const struct client *c, const struct question *cq, const char *name,
		       const struct answer *a, uint32_t ttl, struct centry *e)
{
	struct latch_addr learn[LATCH_RESOLVER_ADDRS_MAX];
	uint8_t wire[65535];
	const char *why;
	size_t len;
	int n_learn;

	if (!a) {
		r->st.failed++;
		dns_client_reply(r, c, cq, LDNS_RCODE_SERVFAIL, NULL, 0);
		return;
	}
	why = answer_judge(r, a, learn, &n_learn);
	if (why) {
		dns_client_refuse(r, c, cq, name, why);
		return;
	}
	/* built before the callback runs: the callback may flush the cache a points into */
	len = dns_reply_build(cq, a->rcode, a, ttl, c->max, wire, sizeof(wire));
	if (!len) {
		r->st.failed++;
		return;
	}
	r->st.answered++;
	/* the learned entry goes in before the guest can use the address */
	if (a->rcode == LDNS_RCODE_NOERROR && n_learn && r->o.policy.answered && !(e && e->reported)) {
		uint64_t epoch = r->cache_epoch;

		if (!r->o.policy.answered(r->o.policy.arg, name, learn, n_learn, ttl) && e && epoch == r->cache_epoch)
			e->reported = true;
	}
	dns_client_send(r, c, wire, len);
}
