// SPDX-License-Identifier: GPL-2.0-only
/*
 * resolver.c - the per-sandbox filtering DNS resolver (see resolver.h).
 *
 * A query goes through, in order: header sanity, one question of class IN,
 * a host-name spelling, the policy's name_allowed, the qtype, the cache, and
 * only then an upstream.  The reply is never the upstream's bytes: it is
 * rebuilt from the question, the CNAME chain and the A/AAAA records, each
 * checked, with one clamped TTL, so nothing the upstream adds (authority,
 * additional, EDNS options, stray records) reaches the guest.
 *
 * Upstream queries go out from a fresh connected UDP socket each (a random
 * source port, and the kernel drops datagrams from anyone but the upstream)
 * with a fresh random ID, and a reply must match ID, source and question.
 * TC falls back to TCP to the same upstream; a timeout moves to the next.
 *
 * Packets are parsed and written with ldns; all I/O is non-blocking libevent.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <ldns/ldns.h>

#include "broker/dns/resolver.h"

#define DNS_HDR 12
#define EDNS_SIZE 1232		/* the flag-day size: no fragments, on both sides */
#define UDP_PLAIN 512		/* the reply limit for a client without EDNS */
#define UDP_BUF 4096		/* bigger datagrams are dropped, not truncated */
#define UDP_BURST 64		/* datagrams read per wakeup, so one sandbox can't starve the others */
#define PENDING_MAX 512		/* upstream queries in flight per resolver; beyond, SERVFAIL */
#define TCP_CONN_QUERIES 16	/* in flight per TCP client; beyond, stop reading it */
#define TCP_OUT_MAX (128 * 1024) /* replies a TCP client has not read; beyond, close it */
#define NEG_TTL_DEFAULT 30	/* negative answers without an SOA */
#define TIMEOUT_MS_DEFAULT 1500
#define TCP_IDLE_MS_DEFAULT 10000
#define TCP_CLIENTS_DEFAULT 64
#define CACHE_DEFAULT 1024
#define LABEL_MAX 63
#define ACCEPT_PAUSE_MS 1000	/* out of fds: stop accepting for a while instead of spinning */

/* What an upstream said about (qname, qtype), before any policy decision. */
struct answer {
	uint8_t rcode;	     /* LDNS_RCODE_NOERROR or LDNS_RCODE_NXDOMAIN */
	bool chain_too_long;
	int n_chain;
	ldns_rdf *chain[LATCH_RESOLVER_CNAME_MAX]; /* the CNAME targets, in order, lowercase */
	int n_addrs;
	struct latch_addr addrs[LATCH_RESOLVER_ADDRS_MAX];
	uint32_t ttl; /* clamped (an answer with addresses or a CNAME answer) or negative */
};

enum { CL_UDP, CL_TCP };

struct tcp_conn;

/* Where a reply goes. */
struct client {
	int kind;
	int fd; /* CL_UDP: the listening socket, so the reply leaves from the host address */
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct tcp_conn *tc; /* CL_TCP: NULL once the client has gone */
	size_t max;	     /* the largest reply it takes */
};

struct lookup;

/* One question in flight to the upstreams, for a client or a lookup. */
struct query {
	TAILQ_ENTRY(query) link;
	struct latch_resolver *r;
	char name[LATCH_RESOLVER_NAME_MAX];
	ldns_rdf *qname; /* lowercase, as sent upstream */
	uint16_t qtype;
	struct client c;
	ldns_pkt *cq;	   /* the client's query (the reply echoes its question), or NULL */
	struct lookup *lk; /* or the lookup it is half of */
	int tries, max_tries;
	const char *why; /* the last failure, reported when tries run out */
	/* the current try */
	uint16_t id;
	struct sockaddr_storage up;
	socklen_t uplen;
	int fd;
	struct event *ev_read;
	struct bufferevent *bev; /* TCP after TC */
	struct event *ev_timer;
};

struct lookup {
	TAILQ_ENTRY(lookup) link;
	struct latch_resolver *r;
	latch_lookup_cb cb;
	void *arg;
	struct event *ev_done;
	int waiting;
	int n;
	struct latch_addr addrs[LATCH_RESOLVER_ADDRS_MAX];
	uint32_t ttl;
	int n_refused;
	const char *why;
	char name[LATCH_RESOLVER_NAME_MAX];
};

struct tcp_conn {
	TAILQ_ENTRY(tcp_conn) link;
	struct latch_resolver *r;
	struct bufferevent *bev;
	int outstanding;
	bool paused;
};

struct listener {
	struct latch_resolver *r;
	int udp_fd;
	struct event *udp_ev;
	struct evconnlistener *tcp;
	struct event *tcp_pause;
};

struct centry {
	TAILQ_ENTRY(centry) lru;
	struct centry *next; /* hash chain */
	uint32_t hash;
	uint16_t qtype;
	uint64_t expires_ms;
	struct answer a;
	char name[LATCH_RESOLVER_NAME_MAX];
};

struct latch_resolver {
	struct event_base *base;
	struct latch_resolver_opts o;
	struct listener l[LATCH_RESOLVER_LISTEN_MAX];
	int n_l;
	TAILQ_HEAD(, query) queries;
	int n_queries;
	TAILQ_HEAD(, lookup) lookups;
	TAILQ_HEAD(, tcp_conn) conns;
	int n_conns;
	/* the cache: a hash of chains, and an LRU list (most recent first) */
	struct centry **buckets;
	uint32_t n_buckets; /* a power of two */
	int n_cache;
	TAILQ_HEAD(centry_list, centry) lru;
	uint8_t rnd[64]; /* getrandom() in batches; IDs only */
	size_t rnd_left;
	struct latch_resolver_stats st;
};

/* ------------------------------------------------------------ small helpers */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timeval ms_tv(uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	return tv;
}

static uint32_t clamp_ttl(const struct latch_resolver *r, uint32_t ttl)
{
	if (ttl < r->o.ttl_min)
		return r->o.ttl_min;
	return ttl > r->o.ttl_max ? r->o.ttl_max : ttl;
}

static int random_id(struct latch_resolver *r, uint16_t *id)
{
	if (r->rnd_left < 2) {
		/* GRND_NONBLOCK: before the pool is seeded, fail the query rather than stall every sandbox */
		if (getrandom(r->rnd, sizeof(r->rnd), GRND_NONBLOCK) != (ssize_t)sizeof(r->rnd))
			return -EAGAIN;
		r->rnd_left = sizeof(r->rnd);
	}
	r->rnd_left -= 2;
	memcpy(id, r->rnd + r->rnd_left, 2);
	return 0;
}

static socklen_t addr_sockaddr(const struct latch_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;

		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		s->sin_addr = a->v4;
		return sizeof(*s);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	s6->sin6_addr = a->v6;
	return sizeof(*s6);
}

static bool sockaddr_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x6 = (const void *)a, *y6 = (const void *)b;

	return x6->sin6_port == y6->sin6_port && !memcmp(&x6->sin6_addr, &y6->sin6_addr, 16);
}

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
static int name_text(const ldns_rdf *dname, char *out, size_t len)
{
	const uint8_t *p = ldns_rdf_data(dname);
	size_t n = ldns_rdf_size(dname), i = 0, o = 0;

	if (ldns_rdf_get_type(dname) != LDNS_RDF_TYPE_DNAME || n < 1)
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

/* ------------------------------------------------------------ answers */

static void answer_clear(struct answer *a)
{
	for (int i = 0; i < a->n_chain; i++)
		ldns_rdf_deep_free(a->chain[i]);
	a->n_chain = 0;
}

static int answer_copy(struct answer *dst, const struct answer *src)
{
	*dst = *src;
	for (int i = 0; i < src->n_chain; i++) {
		dst->chain[i] = ldns_rdf_clone(src->chain[i]);
		if (!dst->chain[i]) {
			dst->n_chain = i;
			answer_clear(dst);
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

/*
 * Follow the CNAME chain from qname through the answer section and collect
 * the records of qtype at its end.  Records that are not on the chain are
 * ignored: an upstream can't plant addresses for other names this way.
 */
static int answer_from_pkt(const struct latch_resolver *r, const ldns_pkt *p, const ldns_rdf *qname,
			   uint16_t qtype, struct answer *a)
{
	const ldns_rr_list *an = ldns_pkt_answer(p);
	const ldns_rdf *cur = qname;
	uint32_t ttl = UINT32_MAX;
	const ldns_rr *rr;

	memset(a, 0, sizeof(*a));
	a->rcode = ldns_pkt_get_rcode(p);
	/* a CNAME query's answer is the first link; resolvers don't chase it */
	while (!(qtype == LDNS_RR_TYPE_CNAME && a->n_chain == 1) && (rr = find_rr(an, cur, LDNS_RR_TYPE_CNAME, NULL))) {
		const ldns_rdf *t = ldns_rr_rdf(rr, 0);

		if (!t || ldns_rdf_get_type(t) != LDNS_RDF_TYPE_DNAME)
			break;
		if (a->n_chain == LATCH_RESOLVER_CNAME_MAX) {
			a->chain_too_long = true; /* loops end here too */
			break;
		}
		a->chain[a->n_chain] = ldns_rdf_clone(t);
		if (!a->chain[a->n_chain]) {
			answer_clear(a);
			return -ENOMEM;
		}
		ldns_dname2canonical(a->chain[a->n_chain]);
		cur = a->chain[a->n_chain++];
		if (ldns_rr_ttl(rr) < ttl)
			ttl = ldns_rr_ttl(rr);
	}
	if (a->rcode == LDNS_RCODE_NOERROR && !a->chain_too_long &&
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
		a->ttl = clamp_ttl(r, ttl);
	else
		a->ttl = negative_ttl(r, p);
	return 0;
}

/* NULL when the client may have this answer, else the reason it is refused. */
static const char *answer_judge(const struct latch_resolver *r, const struct answer *a)
{
	char name[LATCH_RESOLVER_NAME_MAX];

	if (a->chain_too_long)
		return "cname-chain";
	for (int i = 0; i < a->n_chain; i++)
		if (name_text(a->chain[i], name, sizeof(name)) || !r->o.policy.name_allowed(r->o.policy.arg, name))
			return "cname-not-allowed";
	/*
	 * One refused address refuses the whole answer: handing back the rest
	 * would still tell the guest the name is being rebound, and a partial
	 * set is one more case to get wrong.
	 */
	for (int i = 0; i < a->n_addrs; i++)
		if (r->o.policy.addr_refused(r->o.policy.arg, &a->addrs[i]))
			return "rebinding";
	return NULL;
}

/* ------------------------------------------------------------ the cache */

static uint32_t cache_hash(const char *name, uint16_t qtype)
{
	return latch_fnv1a(LATCH_FNV1A_INIT ^ qtype, name, strlen(name));
}

static void cache_unlink(struct latch_resolver *r, struct centry *e)
{
	struct centry **pp = &r->buckets[e->hash & (r->n_buckets - 1)];

	while (*pp != e)
		pp = &(*pp)->next;
	*pp = e->next;
	TAILQ_REMOVE(&r->lru, e, lru);
	r->n_cache--;
	answer_clear(&e->a);
	free(e);
}

/* A live entry and its remaining TTL (at least 1), or NULL; expired entries go. */
static struct centry *cache_get(struct latch_resolver *r, const char *name, uint16_t qtype, uint32_t *left)
{
	uint32_t h = cache_hash(name, qtype);
	struct centry *e = r->buckets[h & (r->n_buckets - 1)];
	uint64_t now = now_ms();

	for (; e; e = e->next)
		if (e->hash == h && e->qtype == qtype && !strcmp(e->name, name))
			break;
	if (!e)
		return NULL;
	if (e->expires_ms <= now) {
		cache_unlink(r, e);
		return NULL;
	}
	*left = (e->expires_ms - now + 999) / 1000;
	TAILQ_REMOVE(&r->lru, e, lru);
	TAILQ_INSERT_HEAD(&r->lru, e, lru);
	return e;
}

static void cache_put(struct latch_resolver *r, const char *name, uint16_t qtype, const struct answer *a)
{
	struct centry *e, *old;
	uint32_t left;

	if (!a->ttl || r->o.cache_max <= 0)
		return;
	old = cache_get(r, name, qtype, &left);
	if (old)
		cache_unlink(r, old);
	while (r->n_cache >= r->o.cache_max && !TAILQ_EMPTY(&r->lru))
		cache_unlink(r, TAILQ_LAST(&r->lru, centry_list));
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	if (answer_copy(&e->a, a)) {
		free(e);
		return;
	}
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->qtype = qtype;
	e->hash = cache_hash(name, qtype);
	e->expires_ms = now_ms() + (uint64_t)a->ttl * 1000;
	e->next = r->buckets[e->hash & (r->n_buckets - 1)];
	r->buckets[e->hash & (r->n_buckets - 1)] = e;
	TAILQ_INSERT_HEAD(&r->lru, e, lru);
	r->n_cache++;
}

void latch_resolver_flush(struct latch_resolver *r)
{
	while (r && !TAILQ_EMPTY(&r->lru))
		cache_unlink(r, TAILQ_FIRST(&r->lru));
}

/* ------------------------------------------------------------ replies to clients */

static void client_send(struct latch_resolver *r, const struct client *c, const uint8_t *wire, size_t len)
{
	if (c->kind == CL_UDP) {
		/* a full socket buffer loses the reply, as UDP may; never wait for it */
		sendto(c->fd, wire, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&c->peer, c->peerlen);
		return;
	}
	if (c->tc) {
		uint8_t hdr[2] = { len >> 8, len & 0xff };
		struct evbuffer *out = bufferevent_get_output(c->tc->bev);

		evbuffer_add(out, hdr, 2);
		evbuffer_add(out, wire, len);
	}
}

/* A header-only reply, for queries ldns can't (or shouldn't) parse. */
static void client_raw(struct latch_resolver *r, const struct client *c, const uint8_t *q, uint8_t rcode)
{
	uint8_t h[DNS_HDR] = { q[0], q[1], 0x80 | (q[2] & 0x79), 0x80 | rcode };

	client_send(r, c, h, sizeof(h));
	r->st.failed++;
}

static ldns_rr *rr_new(const ldns_rdf *owner, ldns_rr_type type, uint32_t ttl, ldns_rdf *rd)
{
	ldns_rr *rr = ldns_rr_new();

	if (!rr || !rd) {
		ldns_rr_free(rr);
		ldns_rdf_deep_free(rd);
		return NULL;
	}
	ldns_rr_set_owner(rr, ldns_rdf_clone(owner));
	ldns_rr_set_type(rr, type);
	ldns_rr_set_class(rr, LDNS_RR_CLASS_IN);
	ldns_rr_set_ttl(rr, ttl);
	ldns_rr_push_rdf(rr, rd);
	if (!ldns_rr_owner(rr)) {
		ldns_rr_free(rr);
		return NULL;
	}
	return rr;
}

/*
 * The reply, built from scratch: the client's question, then (when a is
 * given) the chain and the addresses, all with one TTL.  Too big for the
 * client: the question alone with TC, so it asks again over TCP.
 */
static int reply_wire(const ldns_pkt *cq, uint8_t rcode, const struct answer *a, uint32_t ttl, size_t max,
		      bool tc, uint8_t **wire, size_t *len)
{
	const ldns_rr *qrr = ldns_rr_list_rr(ldns_pkt_question(cq), 0);
	ldns_pkt *p = ldns_pkt_new();
	int ret = -ENOMEM;

	if (!p)
		return -ENOMEM;
	ldns_pkt_set_id(p, ldns_pkt_id(cq));
	ldns_pkt_set_qr(p, true);
	ldns_pkt_set_opcode(p, LDNS_PACKET_QUERY);
	ldns_pkt_set_rd(p, ldns_pkt_rd(cq));
	ldns_pkt_set_ra(p, true);
	ldns_pkt_set_tc(p, tc);
	ldns_pkt_set_rcode(p, rcode);
	if (ldns_pkt_edns(cq)) /* our OPT, none of theirs: no options, DO clear */
		ldns_pkt_set_edns_udp_size(p, EDNS_SIZE);
	if (!ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, ldns_rr_clone(qrr)))
		goto out;
	if (a && !tc) {
		const ldns_rdf *owner = ldns_rr_owner(qrr); /* the client's own spelling */
		uint16_t qtype = ldns_rr_get_type(qrr);

		for (int i = 0; i < a->n_chain; i++) {
			ldns_rr *rr = rr_new(owner, LDNS_RR_TYPE_CNAME, ttl, ldns_rdf_clone(a->chain[i]));

			if (!rr || !ldns_pkt_push_rr(p, LDNS_SECTION_ANSWER, rr))
				goto out;
			owner = a->chain[i];
		}
		for (int i = 0; i < a->n_addrs; i++) {
			bool v4 = a->addrs[i].family == AF_INET;
			ldns_rdf *d = ldns_rdf_new_frm_data(v4 ? LDNS_RDF_TYPE_A : LDNS_RDF_TYPE_AAAA, v4 ? 4 : 16,
							    a->addrs[i].bytes);
			ldns_rr *rr = rr_new(owner, qtype, ttl, d);

			if (!rr || !ldns_pkt_push_rr(p, LDNS_SECTION_ANSWER, rr))
				goto out;
		}
	}
	if (ldns_pkt2wire(wire, p, len) != LDNS_STATUS_OK)
		goto out;
	ret = 0;
	if (*len > max) {
		free(*wire);
		*wire = NULL;
		ret = tc ? -EMSGSIZE : reply_wire(cq, rcode, a, ttl, max, true, wire, len);
	}
out:
	ldns_pkt_free(p);
	return ret;
}

static void client_reply(struct latch_resolver *r, const struct client *c, const ldns_pkt *cq, uint8_t rcode,
			 const struct answer *a, uint32_t ttl)
{
	uint8_t *wire = NULL;
	size_t len;

	if (reply_wire(cq, rcode, a, ttl, c->max, false, &wire, &len) == 0)
		client_send(r, c, wire, len);
	free(wire);
}

static void client_refuse(struct latch_resolver *r, const struct client *c, const ldns_pkt *cq, const char *name,
			  uint16_t qtype, const char *reason)
{
	r->st.refused++;
	if (r->o.policy.refused)
		r->o.policy.refused(r->o.policy.arg, name, qtype, reason);
	client_reply(r, c, cq, LDNS_RCODE_REFUSED, NULL, 0);
}

/* An answer (NULL: the upstreams failed) to a client, judged first. */
static void client_answer(struct latch_resolver *r, const struct client *c, const ldns_pkt *cq, const char *name,
			  uint16_t qtype, const struct answer *a, uint32_t ttl)
{
	const char *why;
	uint8_t *wire = NULL;
	size_t len;

	if (!a) {
		r->st.failed++;
		client_reply(r, c, cq, LDNS_RCODE_SERVFAIL, NULL, 0);
		return;
	}
	why = answer_judge(r, a);
	if (why) {
		client_refuse(r, c, cq, name, qtype, why);
		return;
	}
	/* built before the callback runs: the callback may flush the cache a points into */
	if (reply_wire(cq, a->rcode, a, ttl, c->max, false, &wire, &len)) {
		r->st.failed++;
		return;
	}
	r->st.answered++;
	/* the learned entry goes in before the guest can use the address */
	if (a->rcode == LDNS_RCODE_NOERROR && a->n_addrs && r->o.policy.answered)
		r->o.policy.answered(r->o.policy.arg, name, a->addrs, a->n_addrs, ttl);
	client_send(r, c, wire, len);
	free(wire);
}

/* ------------------------------------------------------------ lookups */

static int why_rank(const char *why)
{
	static const char *const order[] = { "no-address", "nxdomain", "unreachable", "servfail", "timeout",
					     "cname-chain", "rebinding" };

	for (int i = 0; why && i < (int)(sizeof(order) / sizeof(order[0])); i++)
		if (!strcmp(why, order[i]))
			return i + 1;
	return why ? 1 : 0;
}

static void lookup_why(struct lookup *lk, const char *why)
{
	if (why_rank(why) > why_rank(lk->why))
		lk->why = why;
}

/* Half of a lookup is in: keep what passes the rebinding filter. */
static void lookup_part(struct lookup *lk, const struct answer *a, uint32_t ttl, const char *why)
{
	struct latch_resolver *r = lk->r;

	if (!a)
		lookup_why(lk, why ? why : "servfail");
	else if (a->chain_too_long)
		lookup_why(lk, "cname-chain");
	else if (a->rcode == LDNS_RCODE_NXDOMAIN)
		lookup_why(lk, "nxdomain");
	else if (!a->n_addrs)
		lookup_why(lk, "no-address");
	for (int i = 0; a && !a->chain_too_long && i < a->n_addrs; i++) {
		if (r->o.policy.addr_refused(r->o.policy.arg, &a->addrs[i])) {
			lk->n_refused++;
			continue;
		}
		if (lk->n == LATCH_RESOLVER_ADDRS_MAX)
			break;
		lk->addrs[lk->n++] = a->addrs[i];
		if (ttl < lk->ttl)
			lk->ttl = ttl;
	}
	/* the callback always runs from the loop, even when both halves were cached */
	if (--lk->waiting == 0)
		event_active(lk->ev_done, EV_TIMEOUT, 0);
}

static void lookup_free(struct lookup *lk)
{
	TAILQ_REMOVE(&lk->r->lookups, lk, link);
	event_free(lk->ev_done);
	free(lk);
}

static void lookup_done(evutil_socket_t fd, short what, void *arg)
{
	struct lookup *lk = arg;
	latch_lookup_cb cb = lk->cb;
	void *cb_arg = lk->arg;
	char name[LATCH_RESOLVER_NAME_MAX];
	struct latch_addr addrs[LATCH_RESOLVER_ADDRS_MAX];
	int n = lk->n;
	uint32_t ttl = lk->ttl;
	const char *why = lk->n_refused ? "rebinding" : lk->why ? lk->why : "no-address";

	/* freed first: the callback may start another lookup or flush */
	memcpy(name, lk->name, sizeof(name));
	memcpy(addrs, lk->addrs, sizeof(addrs[0]) * n);
	lookup_free(lk);
	if (n > 0)
		cb(cb_arg, name, addrs, n, ttl, NULL);
	else
		cb(cb_arg, name, NULL, -1, 0, why);
}

/* ------------------------------------------------------------ upstream queries */

static void query_try(struct query *q);

static void query_stop_try(struct query *q)
{
	if (q->ev_read) {
		event_free(q->ev_read);
		q->ev_read = NULL;
	}
	if (q->fd >= 0) {
		close(q->fd);
		q->fd = -1;
	}
	if (q->bev) {
		bufferevent_free(q->bev);
		q->bev = NULL;
	}
	if (q->ev_timer)
		event_del(q->ev_timer);
}

static void tcp_conn_resume(struct tcp_conn *tc);

static void query_free(struct query *q)
{
	struct latch_resolver *r = q->r;

	query_stop_try(q);
	if (q->ev_timer)
		event_free(q->ev_timer);
	TAILQ_REMOVE(&r->queries, q, link);
	r->n_queries--;
	if (q->c.kind == CL_TCP && q->c.tc) {
		q->c.tc->outstanding--;
		tcp_conn_resume(q->c.tc);
	}
	ldns_rdf_deep_free(q->qname);
	ldns_pkt_free(q->cq);
	free(q);
}

/* The end of a query: cache what the upstream said, then hand it on. */
static void query_done(struct query *q, const struct answer *a)
{
	struct latch_resolver *r = q->r;

	query_stop_try(q);
	if (a)
		cache_put(r, q->name, q->qtype, a);
	if (q->lk)
		lookup_part(q->lk, a, a ? a->ttl : 0, q->why ? q->why : "timeout");
	else if (q->c.kind == CL_UDP || q->c.tc)
		client_answer(r, &q->c, q->cq, q->name, q->qtype, a, a ? a->ttl : 0);
	query_free(q);
}

static void query_next(struct query *q, const char *why)
{
	query_stop_try(q);
	q->why = why;
	query_try(q);
}

static int query_wire(struct query *q, uint8_t **wire, size_t *len)
{
	ldns_pkt *p;
	int ret = 0;

	if (random_id(q->r, &q->id))
		return -EAGAIN;
	/* a fresh packet: RD set, our OPT with DO clear, none of the client's options */
	p = ldns_pkt_query_new(ldns_rdf_clone(q->qname), q->qtype, LDNS_RR_CLASS_IN, LDNS_RD);
	if (!p)
		return -ENOMEM;
	ldns_pkt_set_id(p, q->id);
	ldns_pkt_set_edns_udp_size(p, EDNS_SIZE);
	ldns_pkt_set_edns_do(p, false);
	if (ldns_pkt2wire(wire, p, len) != LDNS_STATUS_OK)
		ret = -ENOMEM;
	ldns_pkt_free(p);
	return ret;
}

enum { REPLY_IGNORED, REPLY_TAKEN };

static void query_tcp_start(struct query *q);

/*
 * A message from the upstream of the current try.  Anything that does not
 * answer our question under our ID is ignored (the real reply may still
 * come).  Returns REPLY_TAKEN when q moved on (it may be freed by then).
 */
static int query_reply(struct query *q, const uint8_t *buf, size_t len, bool over_tcp)
{
	ldns_pkt *p = NULL;
	const ldns_rr *qrr;
	struct answer a;
	uint8_t rcode;

	if (len < DNS_HDR || ((buf[0] << 8) | buf[1]) != q->id || !(buf[2] & 0x80))
		return REPLY_IGNORED;
	if (ldns_wire2pkt(&p, buf, len) != LDNS_STATUS_OK)
		return REPLY_IGNORED;
	if (ldns_pkt_get_opcode(p) != LDNS_PACKET_QUERY || ldns_pkt_qdcount(p) != 1 ||
	    ldns_rr_list_rr_count(ldns_pkt_question(p)) != 1)
		goto ignored;
	qrr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	if (ldns_rr_get_type(qrr) != q->qtype || ldns_rr_get_class(qrr) != LDNS_RR_CLASS_IN ||
	    ldns_dname_compare(ldns_rr_owner(qrr), q->qname))
		goto ignored;
	if (ldns_pkt_tc(p)) {
		ldns_pkt_free(p);
		if (over_tcp)
			query_next(q, "servfail");
		else
			query_tcp_start(q);
		return REPLY_TAKEN;
	}
	rcode = ldns_pkt_get_rcode(p);
	if (rcode != LDNS_RCODE_NOERROR && rcode != LDNS_RCODE_NXDOMAIN) {
		ldns_pkt_free(p);
		query_next(q, "servfail");
		return REPLY_TAKEN;
	}
	if (answer_from_pkt(q->r, p, q->qname, q->qtype, &a)) {
		ldns_pkt_free(p);
		query_next(q, "servfail");
		return REPLY_TAKEN;
	}
	ldns_pkt_free(p);
	query_done(q, &a);
	answer_clear(&a);
	return REPLY_TAKEN;
ignored:
	ldns_pkt_free(p);
	return REPLY_IGNORED;
}

static void query_udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct query *q = arg;
	uint8_t buf[UDP_BUF];

	for (int i = 0; i < 16; i++) {
		struct sockaddr_storage from;
		socklen_t fromlen = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_TRUNC, (struct sockaddr *)&from, &fromlen);

		if (n < 0) {
			/* an ICMP unreachable on the connected socket: no server there */
			if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH)
				query_next(q, "unreachable");
			return;
		}
		if ((size_t)n > sizeof(buf) || !sockaddr_same(&from, &q->up))
			continue;
		if (query_reply(q, buf, n, false) == REPLY_TAKEN)
			return;
	}
}

static void query_timeout(evutil_socket_t fd, short what, void *arg)
{
	query_next(arg, "timeout");
}

static void query_tcp_read(struct bufferevent *bev, void *arg)
{
	struct query *q = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[2];
	size_t len;

	if (evbuffer_copyout(in, hdr, 2) < 2)
		return;
	len = (hdr[0] << 8) | hdr[1];
	if (evbuffer_get_length(in) < 2 + len)
		return;
	/* one exchange per connection: anything but the answer ends the try */
	if (query_reply(q, evbuffer_pullup(in, 2 + len) + 2, len, true) == REPLY_IGNORED)
		query_next(q, "servfail");
}

static void query_tcp_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		query_next(arg, "unreachable");
}

/* The answer did not fit in UDP: ask the same upstream again over TCP. */
static void query_tcp_start(struct query *q)
{
	struct latch_resolver *r = q->r;
	struct timeval tv = ms_tv(r->o.timeout_ms);
	uint8_t *wire = NULL, hdr[2];
	size_t len;
	int fd;

	query_stop_try(q);
	fd = socket(q->up.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	q->bev = bufferevent_socket_new(r->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!q->bev) {
		close(fd);
		goto fail;
	}
	if (query_wire(q, &wire, &len))
		goto fail;
	hdr[0] = len >> 8;
	hdr[1] = len & 0xff;
	bufferevent_setcb(q->bev, query_tcp_read, NULL, query_tcp_event, q);
	if (bufferevent_write(q->bev, hdr, 2) || bufferevent_write(q->bev, wire, len) ||
	    bufferevent_socket_connect(q->bev, (struct sockaddr *)&q->up, q->uplen) ||
	    bufferevent_enable(q->bev, EV_READ))
		goto fail;
	free(wire);
	r->st.upstream_sent++;
	evtimer_add(q->ev_timer, &tv);
	return;
fail:
	free(wire);
	query_next(q, "unreachable");
}

static int query_udp_send(struct query *q, int up)
{
	struct latch_resolver *r = q->r;
	struct timeval tv = ms_tv(r->o.timeout_ms);
	uint8_t *wire = NULL;
	size_t len;
	int ret;

	q->uplen = addr_sockaddr(&r->o.upstream[up], r->o.upstream_port[up], &q->up);
	/* connected: a random source port, and the kernel filters other sources */
	q->fd = socket(q->up.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (q->fd < 0 || connect(q->fd, (struct sockaddr *)&q->up, q->uplen))
		return -errno;
	ret = query_wire(q, &wire, &len);
	if (ret)
		return ret;
	if (send(q->fd, wire, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len) {
		ret = -errno;
		free(wire);
		return ret ? ret : -EIO;
	}
	free(wire);
	r->st.upstream_sent++;
	q->ev_read = event_new(r->base, q->fd, EV_READ | EV_PERSIST, query_udp_read, q);
	if (!q->ev_read || event_add(q->ev_read, NULL) || evtimer_add(q->ev_timer, &tv))
		return -ENOMEM;
	return 0;
}

/* The next upstream in turn, until the tries run out; q may be freed on return. */
static void query_try(struct query *q)
{
	struct latch_resolver *r = q->r;

	while (q->tries < q->max_tries) {
		int up = q->tries++ % r->o.n_upstream;

		if (query_udp_send(q, up) == 0)
			return;
		query_stop_try(q);
		q->why = "unreachable";
	}
	query_done(q, NULL);
}

/* Start asking the upstreams; for a client (c, cq: taken over) or a lookup. */
static int query_start(struct latch_resolver *r, const char *name, uint16_t qtype, const struct client *c,
		       ldns_pkt *cq, struct lookup *lk)
{
	struct query *q;

	if (r->n_queries >= PENDING_MAX)
		return -EBUSY;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->r = r;
	q->fd = -1;
	snprintf(q->name, sizeof(q->name), "%s", name);
	q->qname = ldns_dname_new_frm_str(name);
	q->ev_timer = evtimer_new(r->base, query_timeout, q);
	if (!q->qname || !q->ev_timer) {
		if (q->ev_timer)
			event_free(q->ev_timer);
		ldns_rdf_deep_free(q->qname);
		free(q);
		return -ENOMEM;
	}
	q->qtype = qtype;
	q->lk = lk;
	if (c)
		q->c = *c;
	q->cq = cq;
	/* at least two tries, so one lost datagram with one upstream is not a failure */
	q->max_tries = r->o.n_upstream < 2 ? 2 : r->o.n_upstream;
	TAILQ_INSERT_TAIL(&r->queries, q, link);
	r->n_queries++;
	if (c && c->kind == CL_TCP)
		c->tc->outstanding++;
	query_try(q);
	return 0;
}

/* ------------------------------------------------------------ client queries */

/*
 * One message from a client.  Only A, AAAA and CNAME are answered: ANY
 * would return whatever the upstream has, TXT/NULL/MX... are the usual
 * tunnels, and HTTPS/SVCB carry ipv4hint/ipv6hint addresses that would
 * reach the guest without passing the rebinding filter or being learned.
 */
static void client_query(struct latch_resolver *r, const struct client *c, const uint8_t *buf, size_t len)
{
	char name[LATCH_RESOLVER_NAME_MAX] = "";
	ldns_pkt *cq = NULL;
	const ldns_rr *qrr;
	struct centry *e;
	uint16_t qtype;
	uint32_t left;
	int ret;

	r->st.queries++;
	/* too short to answer, or a response (never answer those: no loops, no reflection) */
	if (len < DNS_HDR || (buf[2] & 0x80)) {
		r->st.failed++;
		return;
	}
	if (((buf[2] >> 3) & 0xf) != LDNS_PACKET_QUERY) {
		client_raw(r, c, buf, LDNS_RCODE_NOTIMPL);
		return;
	}
	if (ldns_wire2pkt(&cq, buf, len) != LDNS_STATUS_OK || ldns_pkt_qdcount(cq) != 1 ||
	    ldns_rr_list_rr_count(ldns_pkt_question(cq)) != 1) {
		ldns_pkt_free(cq);
		client_raw(r, c, buf, LDNS_RCODE_FORMERR);
		return;
	}
	struct client cc = *c;

	if (cc.kind == CL_UDP)
		cc.max = ldns_pkt_edns(cq) && ldns_pkt_edns_udp_size(cq) > UDP_PLAIN ?
				 (ldns_pkt_edns_udp_size(cq) < EDNS_SIZE ? ldns_pkt_edns_udp_size(cq) : EDNS_SIZE) :
				 UDP_PLAIN;
	qrr = ldns_rr_list_rr(ldns_pkt_question(cq), 0);
	qtype = ldns_rr_get_type(qrr);
	if (ldns_rr_get_class(qrr) != LDNS_RR_CLASS_IN) {
		client_refuse(r, &cc, cq, "", qtype, "qclass");
		goto out;
	}
	if (name_text(ldns_rr_owner(qrr), name, sizeof(name))) {
		client_refuse(r, &cc, cq, "", qtype, "qname");
		goto out;
	}
	/* the name first: for a tunnel query the audit log should say whose name it was */
	if (!r->o.policy.name_allowed(r->o.policy.arg, name)) {
		client_refuse(r, &cc, cq, name, qtype, "not-allowed");
		goto out;
	}
	if (qtype != LDNS_RR_TYPE_A && qtype != LDNS_RR_TYPE_AAAA && qtype != LDNS_RR_TYPE_CNAME) {
		client_refuse(r, &cc, cq, name, qtype, "qtype");
		goto out;
	}
	e = cache_get(r, name, qtype, &left);
	if (e) {
		r->st.cache_hits++;
		client_answer(r, &cc, cq, name, qtype, &e->a, left);
		goto out;
	}
	ret = query_start(r, name, qtype, &cc, cq, NULL);
	if (ret == 0)
		return; /* cq is the query's now */
	r->st.failed++;
	client_reply(r, &cc, cq, LDNS_RCODE_SERVFAIL, NULL, 0);
out:
	ldns_pkt_free(cq);
}

static void udp_read(evutil_socket_t fd, short what, void *arg)
{
	struct listener *l = arg;
	uint8_t buf[UDP_BUF];

	for (int i = 0; i < UDP_BURST; i++) {
		struct client c = { .kind = CL_UDP, .fd = fd, .peerlen = sizeof(c.peer), .max = UDP_PLAIN };
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_TRUNC, (struct sockaddr *)&c.peer, &c.peerlen);

		if (n < 0)
			return;
		if ((size_t)n > sizeof(buf)) {
			l->r->st.queries++;
			l->r->st.failed++;
			continue;
		}
		client_query(l->r, &c, buf, n);
	}
}

/* ------------------------------------------------------------ TCP clients */

static void tcp_conn_close(struct tcp_conn *tc)
{
	struct latch_resolver *r = tc->r;
	struct query *q;

	/* its queries still finish (and fill the cache); their replies go nowhere */
	TAILQ_FOREACH(q, &r->queries, link)
		if (q->c.kind == CL_TCP && q->c.tc == tc)
			q->c.tc = NULL;
	bufferevent_free(tc->bev);
	TAILQ_REMOVE(&r->conns, tc, link);
	r->n_conns--;
	free(tc);
}

static void tcp_conn_resume(struct tcp_conn *tc)
{
	if (!tc->paused || tc->outstanding >= TCP_CONN_QUERIES)
		return;
	tc->paused = false;
	bufferevent_enable(tc->bev, EV_READ);
	/* queries may be waiting in the input already; no new bytes would wake us for them */
	bufferevent_trigger(tc->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

static void tcp_conn_read(struct bufferevent *bev, void *arg)
{
	struct tcp_conn *tc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct client c = { .kind = CL_TCP, .fd = -1, .tc = tc, .max = 65535 };

	while (!tc->paused) {
		uint8_t hdr[2];
		size_t len;

		if (evbuffer_copyout(in, hdr, 2) < 2)
			return;
		len = (hdr[0] << 8) | hdr[1];
		if (len < DNS_HDR) {
			tc->r->st.queries++;
			tc->r->st.failed++;
			tcp_conn_close(tc);
			return;
		}
		if (evbuffer_get_length(in) < 2 + len)
			return;
		client_query(tc->r, &c, evbuffer_pullup(in, 2 + len) + 2, len);
		evbuffer_drain(in, 2 + len);
		if (evbuffer_get_length(bufferevent_get_output(bev)) > TCP_OUT_MAX) {
			tcp_conn_close(tc); /* it asks and never reads */
			return;
		}
		if (tc->outstanding >= TCP_CONN_QUERIES) {
			tc->paused = true;
			bufferevent_disable(bev, EV_READ);
		}
	}
}

static void tcp_conn_event(struct bufferevent *bev, short what, void *arg)
{
	struct tcp_conn *tc = arg;

	/* idle only counts when nothing is in flight for it */
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && tc->outstanding) {
		bufferevent_enable(bev, EV_READ);
		return;
	}
	tcp_conn_close(tc);
}

static void tcp_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct listener *l = arg;
	struct latch_resolver *r = l->r;
	struct timeval idle = ms_tv(r->o.tcp_idle_ms);
	struct tcp_conn *tc;

	if (r->n_conns >= r->o.tcp_clients_max) {
		close(fd);
		return;
	}
	tc = calloc(1, sizeof(*tc));
	if (!tc) {
		close(fd);
		return;
	}
	tc->r = r;
	tc->bev = bufferevent_socket_new(r->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!tc->bev) {
		close(fd);
		free(tc);
		return;
	}
	TAILQ_INSERT_TAIL(&r->conns, tc, link);
	r->n_conns++;
	bufferevent_setcb(tc->bev, tcp_conn_read, NULL, tcp_conn_event, tc);
	bufferevent_set_timeouts(tc->bev, &idle, &idle);
	bufferevent_setwatermark(tc->bev, EV_READ, 0, 2 + 65535);
	if (bufferevent_enable(tc->bev, EV_READ))
		tcp_conn_close(tc);
}

static void tcp_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	evconnlistener_enable(((struct listener *)arg)->tcp);
}

static void tcp_accept_error(struct evconnlistener *lev, void *arg)
{
	struct listener *l = arg;
	struct timeval tv = ms_tv(ACCEPT_PAUSE_MS);

	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
		evconnlistener_disable(lev);
		evtimer_add(l->tcp_pause, &tv);
	}
}

/* ------------------------------------------------------------ setup */

static int listen_socket(const struct latch_addr *a, uint16_t port, int type, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = addr_sockaddr(a, port, &ss);
	char text[INET6_ADDRSTRLEN];
	int one = 1, fd, ret;

	latch_addr_format(a, text, sizeof(text));
	fd = socket(a->family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return latch_errf(err, errlen, -errno, "resolver: socket for %s: %s", text, strerror(errno));
	/*
	 * FREEBIND: latchd may start the resolver before the sandbox's address
	 * is up.  SO_REUSEADDR on TCP only: it lets a restarted latchd listen
	 * despite TIME_WAIT, but on UDP it would let a second socket bind the
	 * same address and port and take a share of the queries.
	 */
	if ((type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one))) ||
	    (a->family == AF_INET && setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &one, sizeof(one))) ||
	    (a->family == AF_INET6 && (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) ||
				       setsockopt(fd, IPPROTO_IPV6, IPV6_FREEBIND, &one, sizeof(one)))))
		goto fail;
	if (bind(fd, (struct sockaddr *)&ss, sl))
		goto fail;
	if (type == SOCK_STREAM && listen(fd, 64))
		goto fail;
	return fd;
fail:
	ret = -errno;
	latch_errf(err, errlen, ret, "resolver: %s %s port %u: %s", type == SOCK_STREAM ? "tcp" : "udp", text, port,
		   strerror(errno));
	close(fd);
	return ret;
}

static int opts_check(const struct latch_resolver_opts *o, char *err, size_t errlen)
{
	if (o->n_listen < 1 || o->n_listen > LATCH_RESOLVER_LISTEN_MAX)
		return latch_errf(err, errlen, -EINVAL, "resolver: give 1 or 2 listen addresses (got %d)", o->n_listen);
	if (o->n_upstream < 1 || o->n_upstream > LATCH_RESOLVER_UPSTREAM_MAX)
		return latch_errf(err, errlen, -EINVAL, "resolver: give 1 to %d upstreams (got %d)",
				  LATCH_RESOLVER_UPSTREAM_MAX, o->n_upstream);
	for (int i = 0; i < o->n_listen; i++)
		if (o->listen[i].family != AF_INET && o->listen[i].family != AF_INET6)
			return latch_errf(err, errlen, -EINVAL, "resolver: listen address %d has no family", i);
	for (int i = 0; i < o->n_upstream; i++)
		if (o->upstream[i].family != AF_INET && o->upstream[i].family != AF_INET6)
			return latch_errf(err, errlen, -EINVAL, "resolver: upstream %d has no family", i);
	if (!o->ttl_max || o->ttl_min > o->ttl_max)
		return latch_errf(err, errlen, -EINVAL, "resolver: the TTL clamp [%u, %u] needs 0 < max and min <= max",
				  o->ttl_min, o->ttl_max);
	if (!o->policy.name_allowed || !o->policy.addr_refused)
		return latch_errf(err, errlen, -EINVAL, "resolver: the policy needs name_allowed and addr_refused");
	return 0;
}

/* Copy opts, with the defaults filled in. */
static void opts_set(struct latch_resolver *r, const struct latch_resolver_opts *o)
{
	r->o = *o;
	for (int i = 0; i < r->o.n_upstream; i++)
		if (!r->o.upstream_port[i])
			r->o.upstream_port[i] = 53;
	if (!r->o.timeout_ms)
		r->o.timeout_ms = TIMEOUT_MS_DEFAULT;
	if (!r->o.tcp_idle_ms)
		r->o.tcp_idle_ms = TCP_IDLE_MS_DEFAULT;
	if (r->o.tcp_clients_max <= 0)
		r->o.tcp_clients_max = TCP_CLIENTS_DEFAULT;
	if (r->o.cache_max <= 0)
		r->o.cache_max = CACHE_DEFAULT;
}

struct latch_resolver *latch_resolver_new(struct event_base *base, const struct latch_resolver_opts *o, char *err,
					  size_t errlen)
{
	struct latch_resolver *r;
	int ret;

	ret = opts_check(o, err, errlen);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	r->base = base;
	TAILQ_INIT(&r->queries);
	TAILQ_INIT(&r->lookups);
	TAILQ_INIT(&r->conns);
	TAILQ_INIT(&r->lru);
	opts_set(r, o);
	for (r->n_buckets = 64; (int)r->n_buckets < r->o.cache_max; r->n_buckets *= 2)
		;
	r->buckets = calloc(r->n_buckets, sizeof(*r->buckets));
	if (!r->buckets) {
		ret = latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
		goto fail;
	}
	for (int i = 0; i < o->n_listen; i++) {
		struct listener *l = &r->l[i];
		int fd;

		l->r = r;
		l->udp_fd = -1;
		r->n_l++;
		ret = listen_socket(&o->listen[i], o->port, SOCK_DGRAM, err, errlen);
		if (ret < 0)
			goto fail;
		l->udp_fd = ret;
		l->udp_ev = event_new(base, l->udp_fd, EV_READ | EV_PERSIST, udp_read, l);
		l->tcp_pause = evtimer_new(base, tcp_accept_resume, l);
		if (!l->udp_ev || !l->tcp_pause || event_add(l->udp_ev, NULL)) {
			ret = latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
			goto fail;
		}
		fd = listen_socket(&o->listen[i], o->port, SOCK_STREAM, err, errlen);
		if (fd < 0) {
			ret = fd;
			goto fail;
		}
		/* backlog 0: listen() was called already */
		l->tcp = evconnlistener_new(base, tcp_accept, l, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
		if (!l->tcp) {
			close(fd);
			ret = latch_errf(err, errlen, -ENOMEM, "resolver: out of memory");
			goto fail;
		}
		evconnlistener_set_error_cb(l->tcp, tcp_accept_error);
	}
	return r;
fail:
	latch_resolver_free(r);
	errno = -ret;
	return NULL;
}

int latch_resolver_reconfigure(struct latch_resolver *r, const struct latch_resolver_opts *o, char *err,
			       size_t errlen)
{
	int ret = opts_check(o, err, errlen);
	uint64_t cap;
	struct centry *e;

	if (ret)
		return ret;
	if (o->n_listen != r->o.n_listen || o->port != r->o.port ||
	    memcmp(o->listen, r->o.listen, sizeof(o->listen[0]) * o->n_listen))
		return latch_errf(err, errlen, -EINVAL,
				  "resolver: the listen addresses and port can't change; make a new resolver");
	opts_set(r, o);
	/* the guest must never hold an answer longer than the new clamp allows */
	cap = now_ms() + (uint64_t)r->o.ttl_max * 1000;
	TAILQ_FOREACH(e, &r->lru, lru)
		if (e->expires_ms > cap)
			e->expires_ms = cap;
	return 0;
}

void latch_resolver_free(struct latch_resolver *r)
{
	if (!r)
		return;
	/* connections first: their queries then have no client to wake */
	while (!TAILQ_EMPTY(&r->conns))
		tcp_conn_close(TAILQ_FIRST(&r->conns));
	while (!TAILQ_EMPTY(&r->queries))
		query_free(TAILQ_FIRST(&r->queries));
	while (!TAILQ_EMPTY(&r->lookups))
		lookup_free(TAILQ_FIRST(&r->lookups));
	for (int i = 0; i < r->n_l; i++) {
		struct listener *l = &r->l[i];

		if (l->udp_ev)
			event_free(l->udp_ev);
		if (l->udp_fd >= 0)
			close(l->udp_fd);
		if (l->tcp)
			evconnlistener_free(l->tcp);
		if (l->tcp_pause)
			event_free(l->tcp_pause);
	}
	if (r->buckets)
		latch_resolver_flush(r);
	free(r->buckets);
	explicit_bzero(r->rnd, sizeof(r->rnd));
	free(r);
}

void latch_resolver_stats(const struct latch_resolver *r, struct latch_resolver_stats *s)
{
	*s = r->st;
}

int latch_resolver_lookup(struct latch_resolver *r, const char *name, latch_lookup_cb cb, void *arg)
{
	static const uint16_t types[2] = { LDNS_RR_TYPE_A, LDNS_RR_TYPE_AAAA };
	char norm[LATCH_RESOLVER_NAME_MAX];
	struct lookup *lk;
	ldns_rdf *d;
	int ret;

	if (!cb)
		return -EINVAL;
	/* the same spelling rules as a client's question, via the wire form */
	d = ldns_dname_new_frm_str(name);
	ret = d ? name_text(d, norm, sizeof(norm)) : -EINVAL;
	ldns_rdf_deep_free(d);
	if (ret)
		return ret;
	if (r->n_queries + 2 > PENDING_MAX)
		return -EBUSY;
	lk = calloc(1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	lk->ev_done = event_new(r->base, -1, 0, lookup_done, lk);
	if (!lk->ev_done) {
		free(lk);
		return -ENOMEM;
	}
	lk->r = r;
	lk->cb = cb;
	lk->arg = arg;
	lk->ttl = UINT32_MAX;
	lk->waiting = 2;
	memcpy(lk->name, norm, sizeof(norm));
	TAILQ_INSERT_TAIL(&r->lookups, lk, link);
	for (int i = 0; i < 2; i++) {
		struct centry *e;
		uint32_t left;

		e = cache_get(r, norm, types[i], &left);
		if (e) {
			r->st.cache_hits++;
			lookup_part(lk, &e->a, left, NULL);
		} else if (query_start(r, norm, types[i], NULL, NULL, lk)) {
			lookup_part(lk, NULL, 0, "servfail");
		}
	}
	return 0;
}
