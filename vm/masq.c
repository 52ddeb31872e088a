// SPDX-License-Identifier: GPL-2.0-only
/*
 * masq.c - the masquerade of a sandbox with an uplink, through libnftables:
 * latch's own inet table, the sandbox's subnet in its sets, and the guard
 * that keeps the uplink from forwarding anything else when the host had not
 * turned forwarding on itself.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vm/net.h"

static int net_nft_run(const char *cmd, char *msg, size_t msglen)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	int r;

	if (!nft)
		return -ENOMEM;
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	r = nft_run_cmd_from_buffer(nft, cmd);
	if (r && msg) {
		const char *e = nft_ctx_get_error_buffer(nft);

		snprintf(msg, msglen, "%s", e ? e : "nft failed");
		/* one line is enough for a `latch:` message */
		for (char *p = msg; *p; p++)
			if (*p == '\n') {
				*p = '\0';
				break;
			}
	}
	nft_ctx_free(nft);
	return r ? -EIO : 0;
}

bool vm_net_nft_table_exists(void)
{
	return net_nft_run("list table inet " LATCH_NFT_TABLE, NULL, 0) == 0;
}

static int nft_element(char *buf, size_t len, const char *verb, const struct latch_addr *subnet, int plen,
		       const char *uplink)
{
	char a[INET6_ADDRSTRLEN];

	inet_ntop(subnet->family, subnet->bytes, a, sizeof(a));
	return snprintf(buf, len, "%s element inet " LATCH_NFT_TABLE " masq%d { %s/%d . \"%s\" }\n", verb,
			subnet->family == AF_INET ? 4 : 6, a, plen, uplink);
}

int vm_net_masq_add(const struct latch_net_opts *o, bool guard_uplink, char *err, size_t errlen)
{
	static const char setup[] =
		"add table inet " LATCH_NFT_TABLE "\n"
		"add chain inet " LATCH_NFT_TABLE
		" postrouting { type nat hook postrouting priority srcnat; policy accept; }\n"
		"add set inet " LATCH_NFT_TABLE " masq4 { type ipv4_addr . ifname; flags interval; }\n"
		"add set inet " LATCH_NFT_TABLE " masq6 { type ipv6_addr . ifname; flags interval; }\n"
		"add rule inet " LATCH_NFT_TABLE " postrouting ip saddr . oifname @masq4 masquerade\n"
		"add rule inet " LATCH_NFT_TABLE " postrouting ip6 saddr . oifname @masq6 masquerade\n"
		/*
		 * An uplink on which latch had to turn forwarding on forwards
		 * only replies into latch's taps: never for the uplink's network
		 * to anywhere else (the host is no router for them).
		 */
		"add set inet " LATCH_NFT_TABLE " fwd_guard { type ifname; }\n"
		"add chain inet " LATCH_NFT_TABLE
		" forward { type filter hook forward priority filter; policy accept; }\n"
		"add rule inet " LATCH_NFT_TABLE " forward iifname @fwd_guard oifname != \"lt-*\" counter drop\n"
		"add rule inet " LATCH_NFT_TABLE
		" forward iifname @fwd_guard ct state != { established, related } counter drop\n";
	char cmd[512], msg[256];
	int n;

	/* the whole table in one transaction, so it is never there without its rules */
	if (!vm_net_nft_table_exists() && net_nft_run(setup, msg, sizeof(msg)))
		return latch_errf(err, errlen, -EIO, "nftables: cannot create table inet %s: %s", LATCH_NFT_TABLE, msg);
	n = nft_element(cmd, sizeof(cmd), "add", &o->subnet4, 30, o->uplink);
	if (o->subnet6.family)
		n += nft_element(cmd + n, sizeof(cmd) - n, "add", &o->subnet6, 64, o->uplink);
	if (guard_uplink)
		snprintf(cmd + n, sizeof(cmd) - n, "add element inet " LATCH_NFT_TABLE " fwd_guard { \"%s\" }\n",
			 o->uplink);
	if (net_nft_run(cmd, msg, sizeof(msg)))
		return latch_errf(err, errlen, -EIO, "nftables: cannot add masquerade for %s: %s", o->tap, msg);
	return 0;
}

/* Is IPv4 forwarding on for dev now? */
bool vm_net_forwarding_on(const char *dev)
{
	char path[160], v = '0';
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/conf/%s/forwarding", dev);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &v, 1) != 1)
			v = '0';
		close(fd);
	}
	return v == '1';
}

/*
 * Latch's table is going: turn forwarding off again on every uplink that
 * latch turned it on for (the fwd_guard set lists exactly those).
 */
static void unguard_uplinks(void)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	const char *out, *p;

	if (!nft)
		return;
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	if (nft_run_cmd_from_buffer(nft, "list set inet " LATCH_NFT_TABLE " fwd_guard") == 0) {
		out = nft_ctx_get_output_buffer(nft);
		p = out ? strstr(out, "elements") : NULL;
		/* elements = { "up0", "up1" }: each quoted name */
		while (p && (p = strchr(p, '"'))) {
			const char *end = strchr(p + 1, '"');
			char dev[IF_NAMESIZE];

			if (!end)
				break;
			if (end - p - 1 > 0 && end - p - 1 < IF_NAMESIZE) {
				memcpy(dev, p + 1, end - p - 1);
				dev[end - p - 1] = '\0';
				vm_net_sysctl_dev("ipv4", dev, "forwarding", "0");
			}
			p = end + 1;
		}
	}
	nft_ctx_free(nft);
}

static bool nft_set_empty(const char *set)
{
	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	char cmd[128];
	bool empty = false;

	if (!nft)
		return false;
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	snprintf(cmd, sizeof(cmd), "list set inet " LATCH_NFT_TABLE " %s", set);
	if (nft_run_cmd_from_buffer(nft, cmd) == 0) {
		const char *out = nft_ctx_get_output_buffer(nft);

		empty = out && !strstr(out, "elements");
	}
	nft_ctx_free(nft);
	return empty;
}

int vm_net_masq_del(const struct latch_net_opts *o, char *err, size_t errlen)
{
	char cmd[1024], msg[256];
	int n = 0;

	if (!vm_net_nft_table_exists())
		return 0;
	/* add-then-delete in one transaction: deleting what is absent is no error */
	n += nft_element(cmd + n, sizeof(cmd) - n, "add", &o->subnet4, 30, o->uplink);
	n += nft_element(cmd + n, sizeof(cmd) - n, "delete", &o->subnet4, 30, o->uplink);
	if (o->subnet6.family) {
		n += nft_element(cmd + n, sizeof(cmd) - n, "add", &o->subnet6, 64, o->uplink);
		nft_element(cmd + n, sizeof(cmd) - n, "delete", &o->subnet6, 64, o->uplink);
	}
	if (net_nft_run(cmd, msg, sizeof(msg)))
		return latch_errf(err, errlen, -EIO, "nftables: cannot remove masquerade for %s: %s", o->tap, msg);
	/* the last sandbox out removes latch's table, and the forwarding it turned on */
	if (nft_set_empty("masq4") && nft_set_empty("masq6")) {
		unguard_uplinks();
		net_nft_run("delete table inet " LATCH_NFT_TABLE, NULL, 0);
	}
	return 0;
}

/* --- up / down ----------------------------------------------------------- */
