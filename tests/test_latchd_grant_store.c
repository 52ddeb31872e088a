// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_latchd_grant_store.c - NAME.grants, the file a restarted latchd
 * learns its active grants from (latchd/grant_store.c).
 *
 * Invariants: the active grants and the last hour's history come back
 * whole after a restart in the same boot, in the state API's `key = value`
 * format; the JSON document an older latchd wrote is still read (and
 * rewritten in the new format); nothing of another boot, and no spent
 * grant, is restored (their deadlines mean nothing now).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latchd/grant.h"

static char root[64];

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	strcpy(root, "/tmp/latch-grants-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	setenv("LATCH_ROOT", root, 1);
}

static void teardown(void)
{
	unsetenv("LATCH_ROOT");
	nftw(root, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(grant_store, .init = setup, .fini = teardown);

static struct latchd ld;

static void grants_free(struct sandbox *s)
{
	while (s->grants && s->grants->list) {
		struct grant *g = s->grants->list;

		s->grants->list = g->next;
		free(g);
	}
	free(s->grants);
	s->grants = NULL;
}

static int count(const struct sandbox *s)
{
	int n = 0;

	for (const struct grant *g = s->grants->list; g; g = g->next)
		n++;
	return n;
}

static char *file_text(const char *name)
{
	char *text = NULL, err[LATCH_ERR_MAX];
	size_t len;

	cr_assert_eq(latch_state_file_read_raw(name, LATCH_STATE_GRANTS, &text, &len, err, sizeof(err)), 0, "%s", err);
	return text;
}

static void host_set(struct grant_host *h, const char *name, uint16_t lo, uint16_t hi, const char *addr)
{
	char err[LATCH_ERR_MAX];

	snprintf(h->name, sizeof(h->name), "%s", name);
	h->ports.proto = LATCH_PROTO_TCP;
	h->ports.n_ports = 1;
	h->ports.ports[0].lo = lo;
	h->ports.ports[0].hi = hi;
	if (addr)
		cr_assert_eq(latch_parse_addr(addr, &h->addr[h->n++], err, sizeof(err)), 0, "%s", err);
}

Test(grant_store, active_grants_and_history_survive_a_restart)
{
	struct sandbox s = { .ld = &ld, .name = "lts-gstore" };
	uint64_t now = latch_now_boot_ns();
	struct grant *a, *p;
	char *text;

	latchd_grants_open(&s);
	cr_assert_not_null(s.grants);
	cr_assert_eq(count(&s), 0);
	a = latchd_grant_new(&s, true);
	a->state = GRANT_ACTIVE;
	a->seconds = 600;
	a->deadline_ns = now + 600ull * 1000000000;
	a->deadline_wall = 2000000000;
	a->asked_wall = 1999999400;
	snprintf(a->reason, sizeof(a->reason), "read the docs: café, two  blanks");
	host_set(&a->host[a->n_hosts++], "docs.example", 443, 443, "192.0.2.10");
	host_set(&a->host[a->n_hosts++], "git.example", 7100, 7200, NULL);
	a->host[0].addr[a->host[0].n++] = a->host[0].addr[0];
	p = latchd_grant_new(&s, true); /* pending: not kept, an ask dies with latchd */
	p->state = GRANT_PENDING;
	host_set(&p->host[p->n_hosts++], "pending.example", 443, 443, NULL);
	s.grants->asked[s.grants->n_asked++] = now - 1000;
	s.grants->granted[s.grants->n_granted++] = now - 2000;
	latchd_grants_save(&s);

	text = file_text(s.name);
	cr_expect(strstr(text, "\ngrant = ") != NULL, "no grant line in:\n%s", text);
	cr_expect(strstr(text, "\nhost = docs.example ") != NULL, "%s", text);
	cr_expect(strchr(text, '{') == NULL, "still JSON:\n%s", text);
	cr_expect(strstr(text, "pending.example") == NULL, "a pending ask was stored:\n%s", text);
	free(text);

	char id[sizeof(a->id)];
	strcpy(id, a->id);
	grants_free(&s);
	latchd_grants_open(&s);
	cr_assert_eq(count(&s), 1);
	a = s.grants->list;
	cr_expect_str_eq(a->id, id);
	cr_expect(a->asked);
	cr_expect_eq(a->state, GRANT_ACTIVE);
	cr_expect_eq(a->seconds, 600);
	cr_expect_eq(a->deadline_ns, now + 600ull * 1000000000);
	cr_expect_eq(a->deadline_wall, 2000000000);
	cr_expect_eq(a->asked_wall, 1999999400);
	cr_expect_str_eq(a->reason, "read the docs: café, two  blanks");
	cr_assert_eq(a->n_hosts, 2);
	cr_expect_str_eq(a->host[0].name, "docs.example");
	cr_expect_eq(a->host[0].n, 2);
	cr_expect_eq(a->host[1].ports.ports[0].lo, 7100);
	cr_expect_eq(a->host[1].ports.ports[0].hi, 7200);
	cr_expect_eq(a->host[1].ports.proto, LATCH_PROTO_TCP);
	cr_expect_eq(a->host[1].n, 0);
	cr_expect_eq(s.grants->n_asked, 1);
	cr_expect_eq(s.grants->asked[0], now - 1000);
	cr_expect_eq(s.grants->n_granted, 1);
	grants_free(&s);
}

/* What latchd wrote before NAME.grants took the state API's format. */
static void legacy_write(const char *name, const char *boot, uint64_t deadline)
{
	char doc[1024], err[LATCH_ERR_MAX];
	int n = snprintf(doc, sizeof(doc),
			 "{\"boot\":\"%s\",\"asked\":[],\"granted\":[%llu],\"grants\":[{\"id\":\"abcdefghijklmnop\","
			 "\"asked\":false,\"seconds\":300,\"reason\":\"from the host\",\"asked_at\":1999999000,"
			 "\"deadline_ns\":%llu,\"expires_at\":2000000300,\"hosts\":[{\"name\":\"docs.example\","
			 "\"proto\":6,\"ports\":[[443,443]],\"addresses\":[\"192.0.2.10\",\"2001:db8::10\"]}]}]}",
			 boot, (unsigned long long)(latch_now_boot_ns() - 5), (unsigned long long)deadline);

	cr_assert_eq(latch_state_file_write_raw(name, LATCH_STATE_GRANTS, doc, n, err, sizeof(err)), 0, "%s", err);
}

Test(grant_store, an_older_latchds_json_is_read_and_rewritten)
{
	struct sandbox s = { .ld = &ld, .name = "lts-gjson" };
	uint64_t deadline = latch_now_boot_ns() + 300ull * 1000000000;
	char boot[64], *text;

	latchd_boot_id(boot, sizeof(boot));
	legacy_write(s.name, boot, deadline);
	latchd_grants_open(&s);
	cr_assert_eq(count(&s), 1);
	cr_expect_str_eq(s.grants->list->id, "abcdefghijklmnop");
	cr_expect_not(s.grants->list->asked);
	cr_expect_eq(s.grants->list->deadline_ns, deadline);
	cr_expect_str_eq(s.grants->list->reason, "from the host");
	cr_assert_eq(s.grants->list->n_hosts, 1);
	cr_expect_eq(s.grants->list->host[0].n, 2);
	cr_expect_eq(s.grants->n_granted, 1);
	latchd_grants_save(&s);
	text = file_text(s.name);
	cr_expect(strstr(text, "grant = abcdefghijklmnop 0 300 1999999000 ") != NULL, "%s", text);
	cr_expect(strstr(text, "host = docs.example 6 443-443 192.0.2.10,2001:db8::10\n") != NULL, "%s", text);
	free(text);
	grants_free(&s);
}

Test(grant_store, another_boots_or_a_spent_grant_is_not_restored)
{
	struct sandbox s = { .ld = &ld, .name = "lts-gold" };
	char boot[64];

	latchd_boot_id(boot, sizeof(boot));
	legacy_write(s.name, "00000000-0000-0000-0000-000000000000", latch_now_boot_ns() + 1000000000ull);
	latchd_grants_open(&s);
	cr_expect_eq(count(&s), 0, "another boot's grant was restored");
	cr_expect_eq(s.grants->n_granted, 0);
	grants_free(&s);

	legacy_write(s.name, boot, latch_now_boot_ns() - 1);
	latchd_grants_open(&s);
	cr_expect_eq(count(&s), 0, "a spent grant was restored");
	cr_expect_eq(s.grants->n_granted, 1, "the history of this boot is kept (control)");
	grants_free(&s);
}
