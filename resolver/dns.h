/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dns.h - the resolver's insides, shared by the files of resolver/ and by
 * nothing else (latchd includes resolver.h only).
 *
 *   resolver.c  lifecycle: options, new, reconfigure, free, stats
 *   listen.c    the listening sockets, who may ask (the guest on its link),
 *               UDP clients in batches, TCP clients and their limits
 *   wire.c      a client's question in, a reply out (the hot path), and
 *               a wire name as the policy reads it: pure, no sockets
 *   answer.c    the answer filter: an upstream reply to an answer (the CNAME
 *               chain from the question and what is at its end), the policy's
 *               judgement of it, and the reply the client gets
 *   hostaddr.c  the host's own addresses and link events, from netlink
 *   cache.c     the answer cache (hash + LRU)
 *   upstream.c  the upstream client (UDP, TCP after TC, failover) and the
 *               host-side lookups latchd asks for
 */
#ifndef LATCH_RESOLVER_DNS_H
#define LATCH_RESOLVER_DNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <event2/event.h>
#include <ldns/ldns.h>

#include "resolver/resolver.h"

#define DNS_HDR 12
#define EDNS_SIZE 1232 /* the flag-day size: no fragments, on both sides */
#define UDP_PLAIN 512 /* the reply limit for a client without EDNS */
#define UDP_BUF 4096 /* bigger datagrams are dropped, not truncated */
#define UDP_BURST 64 /* datagrams read per wakeup, so one sandbox can't starve the others */
#define UDP_BATCH 32 /* datagrams per recvmmsg()/sendmmsg() */
#define PENDING_MAX 512 /* upstream queries in flight per resolver; beyond, SERVFAIL */
#define TCP_CONN_QUERIES 16 /* in flight per TCP client; beyond, stop reading it */
#define TCP_CONN_TOTAL_DEFAULT 64 /* queries one TCP connection may ask in its life; the next one cuts it */
#define RATE_DEFAULT 20 /* queries/s per sandbox when the options give none (the kernel's default) */
#define BURST_DEFAULT 40
#define GUEST_RELOOK_MS 1000 /* a query from an unknown link index looks the link up again, this often */
#define TCP_OUT_MAX (128 * 1024) /* replies a TCP client has not read; beyond, close it */
#define NEG_TTL_DEFAULT 30 /* negative answers without an SOA */
#define TIMEOUT_MS_DEFAULT 1500
#define TCP_IDLE_MS_DEFAULT 10000
#define TCP_CLIENTS_DEFAULT 64
#define CACHE_DEFAULT 1024
#define LABEL_MAX 63
#define ACCEPT_PAUSE_MS 1000 /* out of fds: stop accepting for a while instead of spinning */

/* What an upstream said about (qname, qtype), before any policy decision. */
struct answer {
	uint8_t rcode; /* LDNS_RCODE_NOERROR or LDNS_RCODE_NXDOMAIN */
	const char *chain_bad; /* "cname-chain" or "cname-loop": the chain is refused, and so is the answer */
	int n_chain;
	ldns_rdf *chain[LATCH_RESOLVER_CNAME_MAX]; /* the CNAME targets, in order, lowercase */
	int n_addrs;
	struct latch_addr addrs[LATCH_RESOLVER_ADDRS_MAX];
	uint32_t ttl; /* clamped (an answer with addresses or a CNAME answer) or negative */
};

enum { CL_UDP, CL_TCP };

/* A client's question, as the reply must echo it (wire.c). */
struct question {
	uint16_t id;
	bool rd;
	bool edns; /* it had an OPT record: the reply carries ours */
	uint16_t qtype, qclass;
	uint16_t qlen; /* bytes of qname, the root label included */
	uint8_t qname[255]; /* the client's own spelling, on the wire */
};

struct tcp_conn;

/* Where a reply goes. */
struct client {
	int kind;
	int fd; /* CL_UDP: the listening socket, so the reply leaves from the host address */
	struct sockaddr_storage peer;
	socklen_t peerlen;
	struct tcp_conn *tc; /* CL_TCP: NULL once the client has gone */
	size_t max; /* the largest reply it takes */
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
	struct question cq; /* the client's question, when it is for a client */
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
	int n_refused, n_exempt;
	const char *why;
	char name[LATCH_RESOLVER_NAME_MAX];
};

struct tcp_conn {
	TAILQ_ENTRY(tcp_conn) link;
	struct latch_resolver *r;
	struct bufferevent *bev;
	int outstanding;
	int asked; /* queries read over its life, against tcp_conn_queries */
	bool paused;
	bool cut; /* over a limit: nothing more is read, it closes once its answers are out */
};

struct listener {
	struct latch_resolver *r;
	int udp_fd;
	struct event *udp_ev;
	struct evconnlistener *tcp;
	int tcp_bound; /* the link index tcp is bound to (SO_BINDTOIFINDEX), 0 for none */
	struct event *tcp_pause;
};

struct centry {
	TAILQ_ENTRY(centry) lru;
	struct centry *next; /* hash chain */
	uint32_t hash;
	uint16_t qtype;
	uint64_t expires_ms;
	bool reported; /* answered() took its addresses until expires_ms: hits need not report them again */
	struct answer a;
	char name[LATCH_RESOLVER_NAME_MAX];
};

struct nl_sock;
struct udp_batch;

/* The host's own addresses, kept current from netlink (hostaddr.c). */
struct hostaddrs {
	struct nl_sock *events; /* member of the IPv4 and IPv6 address groups */
	struct event *ev;
	bool dirty; /* an address changed (or events were lost): read them all again */
	bool unknown; /* the last read failed: every address counts as the host's */
	struct latch_addr *addr; /* sorted by (family, bytes) */
	int n;
};

struct latch_resolver {
	struct event_base *base;
	struct latch_resolver_opts o;
	struct listener l[LATCH_RESOLVER_LISTEN_MAX];
	int n_l;
	/* the guest's link: its index as last looked up by name (0: not found), and when */
	int guest_ifindex;
	uint64_t guest_looked_ms;
	/* the sandbox's query rate (GCRA): the time the bucket is full again, and one query's cost */
	uint64_t rate_tat_ns, rate_cost_ns;
	struct hostaddrs host;
	struct udp_batch *udp_batch; /* while udp_read() runs: UDP replies wait in it for one sendmmsg() */
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
	uint64_t cache_epoch; /* moves whenever an entry goes: a pointer held across a callback is checked by it */
	uint8_t rnd[64]; /* getrandom() in batches; IDs only */
	size_t rnd_left;
	struct latch_resolver_stats st;
};

/* resolver.c */
struct timeval dns_ms_tv(uint32_t ms);
uint32_t dns_clamp_ttl(const struct latch_resolver *r, uint32_t ttl);
socklen_t dns_addr_sockaddr(const struct latch_addr *a, uint16_t port, struct sockaddr_storage *ss);

/* listen.c */
int dns_listeners_open(struct latch_resolver *r, char *err, size_t errlen);
void dns_listeners_close(struct latch_resolver *r);
void dns_client_send(struct latch_resolver *r, const struct client *c, const uint8_t *wire, size_t len);
void dns_tcp_conn_close(struct tcp_conn *tc);
void dns_tcp_conn_resume(struct tcp_conn *tc);
int dns_guest_link(struct latch_resolver *r, bool force);

/* hostaddr.c */
int dns_hostaddrs_open(struct latch_resolver *r, char *err, size_t errlen);
void dns_hostaddrs_close(struct latch_resolver *r);
bool dns_hostaddr_is_local(struct latch_resolver *r, const struct latch_addr *a);

/* wire.c: the parsing is pure (no sockets, no resolver), for tests/test_resolver_wire.c and the fuzzer */
int dns_question_fast(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size);
int dns_question_ldns(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size);
int dns_question_parse(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size);
/*
 * A client's message read as it is answered: 0 and its question; -EBADMSG:
 * never answered (shorter than a header, or a response: no loops, no
 * reflection); -EOPNOTSUPP: not a QUERY (NOTIMPL); -EINVAL: no question to
 * read (FORMERR).
 */
int dns_query_read(const uint8_t *buf, size_t len, struct question *q, uint16_t *udp_size);
/* The largest UDP reply the client takes: 512 without EDNS, its size up to ours with it. */
size_t dns_udp_reply_max(const struct question *q, uint16_t udp_size);
size_t dns_reply_build(const struct question *q, uint8_t rcode, const struct answer *a, uint32_t ttl, size_t max,
		       uint8_t *out, size_t cap);
int dns_name_text_wire(const uint8_t *p, size_t n, char *out, size_t len);
int dns_name_text(const ldns_rdf *dname, char *out, size_t len);

/* answer.c */
void dns_answer_clear(struct answer *a);
int dns_answer_copy(struct answer *dst, const struct answer *src);
int dns_answer_from_pkt(const struct latch_resolver *r, const ldns_pkt *p, const ldns_rdf *qname, uint16_t qtype,
			struct answer *a);
const char *dns_name_judge(struct latch_resolver *r, const uint8_t *qname, size_t qlen, char *name, size_t len);
const char *dns_addr_judge(struct latch_resolver *r, const struct latch_addr *a, bool *learn);
void dns_client_reply(struct latch_resolver *r, const struct client *c, const struct question *cq, uint8_t rcode,
		      const struct answer *a, uint32_t ttl);
void dns_client_refuse(struct latch_resolver *r, const struct client *c, const struct question *cq, const char *name,
		       const char *reason);
void dns_client_answer(struct latch_resolver *r, const struct client *c, const struct question *cq, const char *name,
		       const struct answer *a, uint32_t ttl, struct centry *e);

/* cache.c */
int dns_cache_init(struct latch_resolver *r);
struct centry *dns_cache_get(struct latch_resolver *r, const char *name, uint16_t qtype, uint32_t *left);
struct centry *dns_cache_put(struct latch_resolver *r, const char *name, uint16_t qtype, const struct answer *a);
void dns_cache_clamp(struct latch_resolver *r, uint64_t expires_ms);

/* upstream.c */
int dns_query_start(struct latch_resolver *r, const char *name, uint16_t qtype, const struct client *c,
		    const struct question *cq, struct lookup *lk);
void dns_query_free(struct query *q);
void dns_lookup_free(struct lookup *lk);

#endif
