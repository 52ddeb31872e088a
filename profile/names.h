/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * names.h - DNS names as the policy sees them, and the rebinding filter.
 *
 * The latch resolver and the profiles must agree on what a name is, or a
 * name could be allowed in one spelling and asked for in another.  Both go
 * through latch_dns_name_normalize().  latch_addr_nonpublic() is the DNS
 * rebinding filter: an allowed public name must not be able to point the
 * sandbox at the host's LAN, loopback or a cloud metadata service.
 *
 * Pure functions, no I/O, so tests/ can hold every corner.
 */
#ifndef LATCH_PROFILE_NAMES_H
#define LATCH_PROFILE_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"

#define LATCH_DNS_NAME_MAX 253
#define LATCH_DNS_LABEL_MAX 63

/*
 * Lowercase IN, drop one trailing dot and check it is a host name: labels of
 * 1-63 characters of a-z, 0-9, '-' and '_', none starting or ending with '-',
 * 253 characters at most.  Returns 0 or -EINVAL (also when OUT is too small).
 */
int latch_dns_name_normalize(const char *in, char *out, size_t len);

/* Why IN is not a host name ("has an empty label", ...), or NULL when it is. */
const char *latch_dns_name_problem(const char *in);

/*
 * Does NAME fall under the wildcard "*.DOMAIN"?  Both normalized (compared
 * without regard to case all the same).  A wildcard covers every name below
 * DOMAIN, at any depth, but never DOMAIN itself.
 */
bool latch_wildcard_match(const char *domain, const char *name);

/*
 * NULL when A may be the answer to a public name; otherwise one stable word
 * saying why not: "unspecified", "loopback", "private", "cgnat", "link-local",
 * "metadata", "multicast", "reserved" (192.0.0.0/24, 240/4, ::/8...),
 * "benchmarking" (198.18.0.0/15), "ipv4-mapped", or "nat64", "6to4" and
 * "teredo" when the IPv4 address they embed is not public.  The
 * documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
 * 2001:db8::/32) count as public: the tests use them as the internet.
 * The host's own addresses change at run time and are not judged here: the
 * resolver refuses them itself (resolver).
 */
const char *latch_addr_nonpublic(const struct latch_addr *a);

#endif
