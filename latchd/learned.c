// SPDX-License-Identifier: GPL-2.0-only
/*
 * learned.c - the answers a sandbox's resolver gave its guest.
 *
 * Each answer for an allowed name becomes a learned entry in the kernel
 * before the reply leaves, and is remembered here by (name, address) so that
 * a later switch keeps the answers the new profile still allows (the kernel
 * keeps no names).  The names outlive latchd in NAME.learned (below), so
 * that a restarted latchd knows which name each learned entry in the maps
 * answered.  Deadlines are on the boot clock: the file names the boot it
 * belongs to, and a file of another boot is ignored.
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

/* Does E let TCP reach LATCH_SNI_PORT, the port the tc program name-checks? */
static bool reaches_sni_port(const struct latch_entry *e)
{
	if (e->proto != LATCH_PROTO_ANY && e->proto != LATCH_PROTO_TCP)
		return false;
	if (!e->n_ports)
		return true;
	for (int i = 0; i < e->n_ports; i++)
		if (e->ports[i].lo <= LATCH_SNI_PORT && LATCH_SNI_PORT <= e->ports[i].hi)
			return true;
	return false;
}

/*
 * The name travels with the address: before E's rule lets the guest reach
 * its address, NAME is recorded there, so the tc program holds the flow's
 * TLS server name to it.  A room (no names map) is not name-checked.
 */
int latchd_learned_name(struct sandbox *s, const char *name, const struct latch_entry *e, uint64_t expires, char *err,
			size_t errlen)
{
	int rc;

	if (!reaches_sni_port(e))
		return 0;
	rc = latch_names_record(s->sb, &e->addr, name, expires);
	if (rc == -EOPNOTSUPP)
		return 0;
	return rc ? latch_errf(err, errlen, rc, "names map: %s", strerror(-rc)) : 0;
}

/*
 * Runs before the reply leaves latchd: the entry is in the kernel when the
 * guest connects.  0 when every address is (or needs not be) in the kernel;
 * the resolver then skips this for later cache hits of the same answer.
 */
int latchd_learned_answered(void *arg, const char *qname, const struct latch_addr *addrs, int n, uint32_t ttl)
{
	struct sandbox *s = arg;
	uint64_t expires = latch_now_boot_ns() + ttl * NS_PER_S;
	struct latch_entry ports[SANDBOX_NAME_PORTS_MAX];
	char err[LATCH_ERR_MAX];
	json_t *list;
	bool want;
	/* a granted name: its addresses join the grant, with its deadline */
	int rc = latchd_grant_answered(s, qname, addrs, n);
	/* the profile's ports and each kit entry's (open: none, the kernel passes everything already) */
	int n_ports = latchd_sandbox_name_ports(s, qname, ports, sizeof(ports) / sizeof(ports[0]));

	if (!n_ports)
		return rc;
	want = latchd_audit_wanted(s->ld, s->name, "learned");
	list = want ? json_array() : NULL;
	for (int i = 0; i < n; i++) {
		bool written = true;

		for (int k = 0; k < n_ports; k++) {
			struct latch_entry e;

			latch_profile_address_entry(&addrs[i], &ports[k], &e);
			/* the name first: an address the guest can reach is never one the kernel can't name-check */
			if (latchd_learned_name(s, qname, &e, expires, err, sizeof(err)) ||
			    latchd_switch_learn(s, &e, expires, LATCH_ORIGIN_LEARNED, err, sizeof(err))) {
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

	return latchd_sandbox_name_ports(s, l->name, ports, 1) > 0;
}

/* After a switch: answers the new profile does not allow are gone from the kernel, so forget them. */
void latchd_learned_keep_allowed(struct sandbox *s)
{
	learned_filter(s, still_allowed, 0);
}

static bool within_grace(const struct sandbox *s, const struct learned *l, uint64_t now)
{
	return l->expires_ns + RESOLVED_GRACE_NS > now;
}

/* Forget the answers whose deadline and grace have passed (periodic.c prunes the kernel's alike). */
void latchd_learned_prune(struct sandbox *s, uint64_t now)
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

/*
 * NAME.learned (LATCH_STATE_LEARNED of the state API):
 *
 *	boot = BOOT-ID
 *	learned = EXPIRES-NS ADDRESS NAME
 *	...
 *
 * An older latch wrote "boot ID" and the entries bare, one a line: read
 * too, and rewritten in this format by the next save.
 */
struct learned_file {
	struct sandbox *s;
	uint64_t now;
	bool this_boot; /* the boot line named this boot: its entries mean something */
};

static int boot_parse(void *obj, const char *value, char *msg, size_t msglen)
{
	struct learned_file *lf = obj;
	char id[64];

	latchd_boot_id(id, sizeof(id));
	lf->this_boot = !strcmp(value, id);
	return 0;
}

static void boot_print(FILE *f, const void *obj)
{
	char id[64];

	latchd_boot_id(id, sizeof(id));
	fprintf(f, "boot = %s\n", id);
}

/* "EXPIRES ADDRESS NAME": remembered when it is of this boot and not spent; a line latch did not write is skipped. */
static int entry_parse(void *obj, const char *value, char *msg, size_t msglen)
{
	struct learned_file *lf = obj;
	char addr[INET6_ADDRSTRLEN + 1], raw[LATCH_DNS_NAME_MAX + 1], name[LATCH_DNS_NAME_MAX + 1];
	char e[LATCH_ERR_MAX];
	unsigned long long expires;
	struct latch_addr a;

	/* another boot: its deadlines mean nothing now, and its maps are gone */
	if (!lf->this_boot)
		return 0;
	if (sscanf(value, "%llu %46s %253s", &expires, addr, raw) != 3 || latch_parse_addr(addr, &a, e, sizeof(e)) ||
	    latch_dns_name_normalize(raw, name, sizeof(name)))
		return 0;
	if (expires + RESOLVED_GRACE_NS > lf->now)
		learned_remember(lf->s, name, &a, expires);
	return 0;
}

static void entry_print(FILE *f, const void *obj)
{
	const struct learned_file *lf = obj;

	for (int i = 0; i < lf->s->n_learned; i++) {
		char a[INET6_ADDRSTRLEN];

		latch_addr_format(&lf->s->learned[i].addr, a, sizeof(a));
		fprintf(f, "learned = %llu %s %s\n", (unsigned long long)lf->s->learned[i].expires_ns, a,
			lf->s->learned[i].name);
	}
}

/* The format an older latch wrote: "boot ID", then the entries bare. */
static int legacy_read(const char *path, char *text, void *obj, char *err, size_t errlen)
{
	struct learned_file *lf = obj;
	char *line = text, *next = strchr(text, '\n');

	if (next)
		*next++ = '\0';
	if (strncmp(line, "boot ", 5))
		return 0; /* not a file of this boot: nothing of it is kept */
	boot_parse(lf, line + 5, NULL, 0);
	for (line = next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		entry_parse(lf, line, NULL, 0);
	}
	return 0;
}

static const struct latch_kv_key learned_keys[] = {
	LATCH_KV_FN("boot", boot_parse, boot_print),
	LATCH_KV_LIST_FN("learned", entry_parse, entry_print),
};
static const struct latch_state_format learned_format = { learned_keys, 2, 0, legacy_read };

void latchd_learned_save(struct sandbox *s)
{
	struct learned_file lf = { .s = s };
	char err[LATCH_ERR_MAX];

	if (!latch_state_file_write(s->name, LATCH_STATE_LEARNED, &learned_format,
				    "latchd: the names this sandbox's resolver answered; written by latchd", &lf, err,
				    sizeof(err)))
		s->learned_dirty = false;
}

void latchd_learned_load(struct sandbox *s)
{
	struct learned_file lf = { .s = s, .now = latch_now_boot_ns() };
	char err[LATCH_ERR_MAX];
	int ret = latch_state_file_read(s->name, LATCH_STATE_LEARNED, &learned_format, &lf, err, sizeof(err));

	if (ret && ret != -ENOENT)
		latchd_log("%s: learned names not restored: %s", s->name, err);
	s->learned_dirty = false;
}

/* The sandbox's pins are gone: what it learned goes with it. */
void latchd_learned_remove_file(const char *name)
{
	char err[LATCH_ERR_MAX];

	if (latch_state_file_remove(name, LATCH_STATE_LEARNED, err, sizeof(err)))
		latchd_log("%s: %s", name, err);
}

void latchd_learned_free(struct sandbox *s)
{
	free(s->learned);
	free(s->learned_index);
	s->learned = NULL;
	s->learned_index = NULL;
	s->n_learned = s->cap_learned = 0;
}
