// SPDX-License-Identifier: GPL-2.0-only
/*
 * names.c - the names map: which names the resolver answered at each
 * address, so that the tc program can hold a TLS flow's server name to them
 * (bpf/latch_tc.bpf.c, "Names all the way down" in docs/maps.md).
 *
 * Each answer writes two keys for its address at LATCH_SNI_PORT: the name's
 * own (latch_tls_hash of it) and the "checked" key (name_hash 0) that makes
 * the address name-checked at all.  Both carry the answer's deadline, which
 * only ever grows, as a learned rule's does.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <string.h>

#include "bpf/latch_tls.h"
#include "loader/sandbox.h"

static void name_key(const struct latch_addr *a, __u64 name_hash, struct latch_name_key *k)
{
	memset(k, 0, sizeof(*k));
	k->family = a->family == AF_INET6 ? 6 : 4;
	memcpy(k->addr, a->bytes, k->family == 6 ? 16 : 4);
	k->port = LATCH_SNI_PORT;
	k->name_hash = name_hash;
}

/* KEY's deadline becomes EXPIRES_NS unless it is later already. */
static int extend(int fd, const struct latch_name_key *key, uint64_t expires_ns)
{
	struct latch_name v;

	if (!bpf_map_lookup_elem(fd, key, &v) && v.expires_ns >= expires_ns)
		return 0;
	v.expires_ns = expires_ns;
	return bpf_map_update_elem(fd, key, &v, BPF_ANY) ? -errno : 0;
}

int latch_names_record(struct latch_sandbox *sb, const struct latch_addr *a, const char *name, uint64_t expires_ns)
{
	int fd = latch_sandbox_map_fd(sb, LATCH_MAP_NAMES);
	struct latch_name_key k;
	int rc;

	if (fd < 0)
		return -EOPNOTSUPP;
	if (a->family != AF_INET && a->family != AF_INET6)
		return -EAFNOSUPPORT;
	/* the name first: an address marked checked before its name is in would refuse the name */
	name_key(a, latch_tls_hash(name, strlen(name)), &k);
	rc = extend(fd, &k, expires_ns);
	if (rc)
		return rc;
	name_key(a, 0, &k);
	return extend(fd, &k, expires_ns);
}

int latch_names_checked(const struct latch_sandbox *sb, const struct latch_addr *a)
{
	int fd = latch_sandbox_map_fd(sb, LATCH_MAP_NAMES);
	struct latch_name_key k;
	struct latch_name v;

	if (fd < 0)
		return 0;
	name_key(a, 0, &k);
	if (!bpf_map_lookup_elem(fd, &k, &v))
		return 1;
	return errno == ENOENT ? 0 : -errno;
}

int latch_names_prune(struct latch_sandbox *sb, uint64_t before_ns)
{
	int fd = latch_sandbox_map_fd(sb, LATCH_MAP_NAMES), pruned = 0;
	struct latch_name_key key, next;
	void *prev = NULL;

	if (fd < 0)
		return 0;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct latch_name v;

		key = next;
		prev = &key;
		/*
		 * The checked key goes only with the last name: its deadline is
		 * the latest of them, so it is never before any name's.
		 */
		if (!bpf_map_lookup_elem(fd, &key, &v) && v.expires_ns < before_ns && !bpf_map_delete_elem(fd, &key))
			pruned++;
	}
	return pruned;
}
