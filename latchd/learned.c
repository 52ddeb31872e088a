// SPDX-License-Identifier: GPL-2.0-only
/*
 * learned.c - the answers a sandbox's resolver gave its guest.
 *
 * Each answer for an allowed name becomes a learned entry in the kernel
 * before the reply leaves, and is remembered here by (name, address) so that
 * a later switch keeps the answers the new profile still allows (the kernel
 * keeps no names).  The names outlive latchd in
 * var/lib/latch/policy/NAME.learned, so that a restarted latchd knows which
 * name each learned entry in the maps answered.  Deadlines are on the boot
 * clock: the file names the boot it belongs to, and a file of another boot
 * is ignored.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "latchd/latchd.h"

#define LEARNED_BUCKETS 4096

static unsigned learned_hash(const char *name, const struct latch_addr *a)
{
	return latch_fnv1a(latch_fnv1a(LATCH_FNV1A_INIT, name, strlen(name)), a->bytes, 16) % LEARNED_BUCKETS;
}

/* Rebuild the index after entries were removed (swapped out of the array). */
static void learned_reindex(struct sandbox *s)
{
	if (!s->learned_index)
		return;
	for (int b = 0; b < LEARNED_BUCKETS; b++)
		s->learned_index[b] = -1;
	for (int i = 0; i < s->n_learned; i++) {
		unsigned h = learned_hash(s->learned[i].name, &s->learned[i].addr);

		s->learned[i].next = s->learned_index[h];
		s->learned_index[h] = i;
	}
}

/* Remember (name, address) until expires; every answer comes here, so it is a hash lookup. */
static void learned_remember(struct sandbox *s, const char *name, const struct latch_addr *a, uint64_t expires)
{
	unsigned h;

	if (!s->learned_index) {
		s->learned_index = malloc(LEARNED_BUCKETS * sizeof(*s->learned_index));
		if (!s->learned_index)
			return;
		learned_reindex(s);
	}
	h = learned_hash(name, a);
	for (int i = s->learned_index[h]; i >= 0; i = s->learned[i].next) {
		struct learned *l = &s->learned[i];

		if (l->addr.family == a->family && !memcmp(l->addr.bytes, a->bytes, 16) && !strcmp(l->name, name)) {
			if (expires > l->expires_ns) {
				l->expires_ns = expires;
				s->learned_dirty = true;
			}
			return;
		}
	}
	if (s->n_learned == s->cap_learned) {
		int cap = s->cap_learned ? s->cap_learned * 2 : 64;
		struct learned *n = realloc(s->learned, cap * sizeof(*n));

		if (!n)
			return;
		s->learned = n;
		s->cap_learned = cap;
	}
	snprintf(s->learned[s->n_learned].name, sizeof(s->learned[0].name), "%s", name);
	s->learned[s->n_learned].addr = *a;
	s->learned[s->n_learned].expires_ns = expires;
	s->learned[s->n_learned].next = s->learned_index[h];
	s->learned_index[h] = s->n_learned++;
	s->learned_dirty = true;
}

/* Forget the answers KEEP says no to (array order is not kept), and rebuild the index. */
static void learned_filter(struct sandbox *s,
			   bool (*keep)(const struct sandbox *s, const struct learned *l, uint64_t now), uint64_t now)
{
	for (int i = 0; i < s->n_learned;)
		if (keep(s, &s->learned[i], now))
			i++;
		else
			s->learned[i] = s->learned[--s->n_learned];
	learned_reindex(s);
	s->learned_dirty = true;
}

/*
 * Runs before the reply leaves latchd: the entry is in the kernel when the
 * guest connects.  0 when every address is (or needs not be) in the kernel;
 * the resolver then skips this for later cache hits of the same answer.
 */
int learned_answered(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl)
{
	struct sandbox *s = arg;
	uint64_t expires = latch_now_boot_ns() + ttl * NS_PER_S;
	struct latch_entry ports[SANDBOX_NAME_PORTS_MAX];
	char err[LATCH_ERR_MAX];
	json_t *list;
	bool want;
	/* a granted name: its addresses join the grant, with its deadline */
	int rc = grant_answered(s, qname, addrs, n);
	/* the profile's ports and each kit entry's (open: none, the kernel passes everything already) */
	int n_ports = sandbox_name_ports(s, qname, ports, sizeof(ports) / sizeof(ports[0]));

	if (!n_ports)
		return rc;
	want = latchd_audit_wanted(s->ld, s->name, "learned");
	list = want ? json_array() : NULL;
	for (int i = 0; i < n; i++) {
		bool written = true;

		for (int k = 0; k < n_ports; k++) {
			struct latch_entry e;

			latch_profile_address_entry(&addrs[i], &ports[k], &e);
			if (switch_learn(s, &e, expires, LATCH_ORIGIN_LEARNED, err, sizeof(err))) {
				latchd_log("%s: learned entry for %s: %s", s->name, qname, err);
				written = false;
				rc = -EAGAIN;
			}
		}
		if (written)
			learned_remember(s, qname, &addrs[i], expires);
		if (want)
			json_array_append_new(list, latchd_addr_json(&addrs[i]));
	}
	if (want)
		latchd_audit(s->ld, s->name, "learned", "allow", "latchd.dns.answer",
			     json_pack("{s:s, s:o, s:i}", "name", qname, "addresses", list, "ttl", (int)ttl));
	return rc;
}

static bool still_allowed(const struct sandbox *s, const struct learned *l, uint64_t now)
{
	struct latch_entry ports[1];

	return sandbox_name_ports(s, l->name, ports, 1) > 0;
}

/* After a switch: answers the new profile does not allow are gone from the kernel, so forget them. */
void learned_keep_allowed(struct sandbox *s)
{
	learned_filter(s, still_allowed, 0);
}

static bool within_grace(const struct sandbox *s, const struct learned *l, uint64_t now)
{
	return l->expires_ns + RESOLVED_GRACE_NS > now;
}

/* Forget the answers whose deadline and grace have passed (periodic.c prunes the kernel's alike). */
void learned_prune(struct sandbox *s, uint64_t now)
{
	learned_filter(s, within_grace, now);
}

/* ---- NAME.learned ---- */

/* This boot's id: files of boot-clock deadlines name it, and one of another boot is ignored. */
void latchd_boot_id(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (!f || !fgets(buf, len, f))
		snprintf(buf, len, "unknown");
	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static int learned_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_POLICY_DIR "/%s.learned", name);
}

void learned_save(struct sandbox *s)
{
	char path[PATH_MAX], id[64], *text = NULL;
	size_t len = 0;
	FILE *f;

	if (learned_path(s->name, path, sizeof(path)) || !(f = open_memstream(&text, &len)))
		return;
	latchd_boot_id(id, sizeof(id));
	fprintf(f, "boot %s\n", id);
	for (int i = 0; i < s->n_learned; i++) {
		char a[INET6_ADDRSTRLEN];

		latch_addr_format(&s->learned[i].addr, a, sizeof(a));
		fprintf(f, "%llu %s %s\n", (unsigned long long)s->learned[i].expires_ns, a, s->learned[i].name);
	}
	/* a missing policy directory: it appears with the first profile */
	if (!fclose(f) && !latch_write_atomic(path, 0600, text, len))
		s->learned_dirty = false;
	free(text);
}

void learned_load(struct sandbox *s)
{
	char path[PATH_MAX], line[512], id[64], want[80];
	uint64_t now = latch_now_boot_ns();
	FILE *f;

	if (learned_path(s->name, path, sizeof(path)) || !(f = fopen(path, "re")))
		return;
	latchd_boot_id(id, sizeof(id));
	snprintf(want, sizeof(want), "boot %s\n", id);
	if (!fgets(line, sizeof(line), f) || strcmp(line, want)) {
		fclose(f);
		return; /* another boot: its deadlines mean nothing now, and its maps are gone */
	}
	while (fgets(line, sizeof(line), f)) {
		char addr[INET6_ADDRSTRLEN + 1], raw[LATCH_DNS_NAME_MAX + 1], name[LATCH_DNS_NAME_MAX + 1];
		char e[LATCH_ERR_MAX];
		unsigned long long expires;
		struct latch_addr a;

		if (sscanf(line, "%llu %46s %253s", &expires, addr, raw) != 3 ||
		    latch_parse_addr(addr, &a, e, sizeof(e)) || latch_dns_name_normalize(raw, name, sizeof(name)))
			continue;
		if (expires + RESOLVED_GRACE_NS > now)
			learned_remember(s, name, &a, expires);
	}
	fclose(f);
	s->learned_dirty = false;
}

/* The sandbox's pins are gone: what it learned goes with it. */
void learned_remove_file(const char *name)
{
	char path[PATH_MAX];

	if (!learned_path(name, path, sizeof(path)))
		unlink(path);
}

void learned_free(struct sandbox *s)
{
	free(s->learned);
	free(s->learned_index);
	s->learned = NULL;
	s->learned_index = NULL;
	s->n_learned = s->cap_learned = 0;
}
