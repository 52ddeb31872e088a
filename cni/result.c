// SPDX-License-Identifier: GPL-2.0-only
/*
 * result.c - what prevResult says of the container's interface, and the
 * sandbox name a container's interface gets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "cni/cni.h"

/* The index in prevResult's interfaces of ENV's interface in ENV's netns, or -1. */
static int prev_iface(const struct latch_cni_env *env, const json_t *prev, const char **mac)
{
	json_t *ifs = json_object_get(prev, "interfaces"), *i;
	size_t k;

	json_array_foreach(ifs, k, i) {
		const char *name = json_string_value(json_object_get(i, "name"));
		const char *sb = json_string_value(json_object_get(i, "sandbox"));

		if (name && sb && *sb && !strcmp(name, env->ifname) && (!env->netns || !strcmp(sb, env->netns))) {
			*mac = json_string_value(json_object_get(i, "mac"));
			return (int)k;
		}
	}
	return -1;
}

/* One ips[] entry into L: "ADDR/LEN" and its gateway, one address of each family at most. */
static int prev_ip(const json_t *ip, struct latch_cni_link *l, struct latch_cni_error *e)
{
	const char *cidr = json_string_value(json_object_get(ip, "address"));
	const char *gw = json_string_value(json_object_get(ip, "gateway"));
	char buf[INET6_ADDRSTRLEN + 8], err[LATCH_ERR_MAX];
	struct latch_addr a, g = { 0 };
	struct latch_addr *slot, *gslot;

	if (!cidr || strlen(cidr) >= sizeof(buf))
		return latch_cni_fail(e, LATCH_CNI_E_DECODE, -EINVAL,
				      "latch: prevResult: an ips[] entry has no address");
	snprintf(buf, sizeof(buf), "%s", cidr);
	buf[strcspn(buf, "/")] = '\0';
	if (latch_parse_addr(buf, &a, err, sizeof(err)))
		return latch_cni_fail(e, LATCH_CNI_E_DECODE, -EINVAL, "latch: prevResult: address \"%s\": %s", cidr,
				      err);
	if (gw && latch_parse_addr(gw, &g, err, sizeof(err)))
		return latch_cni_fail(e, LATCH_CNI_E_DECODE, -EINVAL, "latch: prevResult: gateway \"%s\": %s", gw, err);
	if (!gw || g.family != a.family)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
				      "latch: prevResult gives %s no gateway of its family; set \"isGateway\": true in "
				      "the main plugin (latch's resolver and host services answer on the gateway)",
				      cidr);
	slot = a.family == AF_INET ? &l->ip4 : &l->ip6;
	gslot = a.family == AF_INET ? &l->gw4 : &l->gw6;
	if (slot->family)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
				      "latch: prevResult gives the interface two %s addresses; latch enforces one of "
				      "each family (one IPAM range per family)",
				      a.family == AF_INET ? "IPv4" : "IPv6");
	*slot = a;
	*gslot = g;
	return 0;
}

int latch_cni_prev_addrs(const struct latch_cni_env *env, const json_t *prev, struct latch_cni_link *l,
			 struct latch_cni_error *e)
{
	const char *mac = NULL;
	char err[LATCH_ERR_MAX];
	json_t *ip;
	size_t k;
	int idx, ret;

	if (!prev)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
				      "latch: no prevResult; latch-cni is a chained plugin: list it after the main "
				      "plugin (bridge, ptp) in a conflist");
	idx = prev_iface(env, prev, &mac);
	if (idx < 0)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -ENOENT,
				      "latch: prevResult lists no interface %s in %s; the main plugin must make it",
				      env->ifname, env->netns ? env->netns : "(no CNI_NETNS)");
	if (mac && latch_parse_mac(mac, l->mac, err, sizeof(err)))
		return latch_cni_fail(e, LATCH_CNI_E_DECODE, -EINVAL, "latch: prevResult: mac \"%s\": %s", mac, err);
	json_array_foreach(json_object_get(prev, "ips"), k, ip) {
		json_t *i = json_object_get(ip, "interface");

		if (i && (!json_is_integer(i) || json_integer_value(i) != idx))
			continue;
		if ((ret = prev_ip(ip, l, e)))
			return ret;
	}
	if (!l->ip4.family && !l->ip6.family)
		return latch_cni_fail(e, LATCH_CNI_E_CONFIG, -EINVAL,
				      "latch: prevResult gives %s no address; give the main plugin an IPAM",
				      env->ifname);
	return 0;
}

int latch_cni_sandbox_name(const char *container_id, const char *ifname, char name[LATCH_NAME_MAX + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok;

	/* the NUL between them: ("ab", "c") and ("a", "bc") are two names */
	ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) &&
	     EVP_DigestUpdate(ctx, container_id, strlen(container_id) + 1) &&
	     EVP_DigestUpdate(ctx, ifname, strlen(ifname)) && EVP_DigestFinal_ex(ctx, md, &n);
	EVP_MD_CTX_free(ctx);
	if (!ok || n < 8)
		return -EIO;
	snprintf(name, LATCH_NAME_MAX + 1, "cni-%02x%02x%02x%02x%02x%02x%02x%02x", md[0], md[1], md[2], md[3], md[4],
		 md[5], md[6], md[7]);
	return 0;
}
