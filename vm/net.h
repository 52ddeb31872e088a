/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * net.h - the host side of a VM sandbox's link: its tap, its addresses, its
 * routing table and rule, and masquerade for its subnet alone.
 *
 * The tap is created down and bare, so the kernel enforcement can be
 * attached and verified before anything can flow; latch_net_up() then brings
 * it up and routes it.  Links, addresses, rules and routes go through
 * libnl-route; masquerade goes through libnftables into latch's own table
 * `inet latch` (one rule per family matching `saddr . oifname` against a set,
 * one set element per sandbox), so no rule handle has to be remembered.
 *
 * Every function is idempotent and returns 0 or -errno with a line in err.
 */
#ifndef LATCH_VM_NET_H
#define LATCH_VM_NET_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/vm.h"

#define LATCH_NFT_TABLE "latch" /* family inet */

struct latch_net_opts {
	char tap[IF_NAMESIZE];
	struct latch_addr subnet4, host4; /* a /30 */
	struct latch_addr subnet6, host6; /* a /64; family 0: no IPv6 */
	uint32_t table;
	uint32_t rule_priority;
	char uplink[IF_NAMESIZE]; /* "": `unreachable default` */
	struct latch_addr gateway4, gateway6;
};

/*
 * Create a persistent tap, left down.  *created says whether this call made
 * it (an existing tap of that name is reused only if it is a tap).
 */
int latch_net_tap_create(const char *tap, bool *created, char *err, size_t errlen);
/* Delete the tap; 0 when it is already gone. */
int latch_net_tap_delete(const char *tap, char *err, size_t errlen);
bool latch_net_tap_exists(const char *tap);

/*
 * Bring the tap up with the host addresses, then the sandbox's table
 * (its subnet on the tap; default via the uplink, or unreachable), the
 * `from SUBNET lookup TABLE` rule, and masquerade out of the uplink.  On
 * failure whatever this call added is removed again.
 */
int latch_net_up(const struct latch_net_opts *o, char *err, size_t errlen);
/* Remove the rule, the table's routes and the masquerade element. */
int latch_net_down(const struct latch_net_opts *o, char *err, size_t errlen);

/*
 * Refuse a subnet that overlaps an address on any host interface or a route
 * in the main table: a sandbox must never shadow the host's own network
 * (its gateway, its LAN).  -EADDRINUSE with a line naming the culprit.
 */
int latch_net_check_free(const struct latch_addr *subnet, int len, char *err, size_t errlen);

/* What is there now, read back: for `ls`, `status` and the selftest. */
int latch_net_observe(const struct latch_net_opts *o, struct latch_net_observed *obs);

/* net.c: write /proc/sys/net/FAMILY/conf/DEV/KEY, best effort */
void vm_net_sysctl_dev(const char *family, const char *dev, const char *key, const char *val);

/* masq.c: the masquerade and the uplink's guard (net.c's up, down and observe use them) */
bool vm_net_nft_table_exists(void);
bool vm_net_forwarding_on(const char *dev);
int vm_net_masq_add(const struct latch_net_opts *o, bool guard_uplink, char *err, size_t errlen);
int vm_net_masq_del(const struct latch_net_opts *o, char *err, size_t errlen);

#endif
