/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * parse.h - turning the words an operator types into checked values.
 *
 * Pure functions, no kernel access, so tests/ can exercise every corner.
 * Each parser returns 0 or -EINVAL and, on failure, writes one line into
 * err that names what was wrong and how to write it instead.
 */
#ifndef LATCH_LOADER_PARSE_H
#define LATCH_LOADER_PARSE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/latch_abi.h"

#define LATCH_NAME_MAX 32
#define LATCH_ERR_MAX 512
/* room for the longest entry latch_entry_format() writes: 16 ranges and an IPv6 CIDR */
#define LATCH_ENTRY_TEXT_MAX 320

struct latch_addr {
	int family; /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
		uint8_t bytes[16];
	};
};

struct latch_port_range {
	uint16_t lo;
	uint16_t hi;
};

/* One egress entry: ADDR|CIDR[:PORTS][/tcp|udp|icmp]. */
struct latch_entry {
	struct latch_addr addr;
	int prefixlen;	/* 32 or 128 for a single address */
	uint8_t proto;	/* LATCH_PROTO_* */
	int n_ports;	/* 0: any port */
	struct latch_port_range ports[LATCH_RULES_MAX];
};

/*
 * Write one line into err (when there is room for it) and return ret: the
 * way every function that takes (err, errlen) reports a failure.
 */
__attribute__((format(printf, 4, 5))) int latch_errf(char *err, size_t errlen, int ret, const char *fmt, ...);
/* The same for a file: `FILE:LINE: message`, or `FILE: message` when line is 0. */
__attribute__((format(printf, 6, 7))) int latch_errf_at(char *err, size_t errlen, int ret, const char *file, int line,
							const char *fmt, ...);

/*
 * FNV-1a over LEN bytes, going on from H: start from LATCH_FNV1A_INIT, and
 * feed several fields by passing each result on.  The one hash of latch's
 * user-space tables (audit rate limits, the resolver cache, learned names,
 * profile names, policy writes).
 */
#define LATCH_FNV1A_INIT 2166136261u
uint32_t latch_fnv1a(uint32_t h, const void *data, size_t len);

int latch_parse_name(const char *s, char *err, size_t errlen);
int latch_parse_mac(const char *s, uint8_t mac[6], char *err, size_t errlen);
int latch_parse_addr(const char *s, struct latch_addr *a, char *err, size_t errlen);
int latch_parse_port(const char *s, uint16_t *port, char *err, size_t errlen);
int latch_parse_ports(const char *s, struct latch_port_range *out, int max, int *n, char *err,
		      size_t errlen);
int latch_parse_entry(const char *s, struct latch_entry *e, char *err, size_t errlen);
int latch_parse_uint(const char *s, uint32_t min, uint32_t max, uint32_t *out);

/* "203.0.113.0/24:443,8000-8100/tcp", the canonical spelling of an entry. */
void latch_entry_format(const struct latch_entry *e, char *buf, size_t len);
void latch_addr_format(const struct latch_addr *a, char *buf, size_t len);
/* The rule that a port range of an entry becomes in the kernel. */
void latch_entry_rule(const struct latch_entry *e, int i, uint64_t expires_ns, int origin,
		      struct latch_rule *out);

#endif
