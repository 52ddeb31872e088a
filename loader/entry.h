/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * entry.h - egress entries, parsed and formatted.
 *
 * Pure functions, no kernel access, so tests/ can exercise every corner.
 * Each parser returns 0 or -EINVAL and, on failure, writes one line into
 * err that names what was wrong and how to write it instead.
 */
#ifndef LATCH_LOADER_ENTRY_H
#define LATCH_LOADER_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "bpf/latch_abi.h"
#include "common/common.h"

/* room for the longest entry latch_entry_format() writes: 16 ranges and an IPv6 CIDR */
#define LATCH_ENTRY_TEXT_MAX 320

struct latch_port_range {
	uint16_t lo;
	uint16_t hi;
};

/* One egress entry: ADDR|CIDR[:PORTS][/tcp|udp|icmp]. */
struct latch_entry {
	struct latch_addr addr;
	int prefixlen; /* 32 or 128 for a single address */
	uint8_t proto; /* LATCH_PROTO_* */
	int n_ports; /* 0: any port */
	struct latch_port_range ports[LATCH_RULES_MAX];
};

int latch_parse_port(const char *s, uint16_t *port, char *err, size_t errlen);
int latch_parse_ports(const char *s, struct latch_port_range *out, int max, int *n, char *err, size_t errlen);
int latch_parse_entry(const char *s, struct latch_entry *e, char *err, size_t errlen);

/* "203.0.113.0/24:443,8000-8100/tcp", the canonical spelling of an entry. */
void latch_entry_format(const struct latch_entry *e, char *buf, size_t len);
/* The rule that a port range of an entry becomes in the kernel. */
void latch_entry_rule(const struct latch_entry *e, int i, uint64_t expires_ns, int origin, struct latch_rule *out);

#endif
