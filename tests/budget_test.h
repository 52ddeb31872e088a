/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * budget_test.h - what the budget tests share: a ledger in a fresh temp dir
 * owned by the test's uid (no root), a clock that is a variable (windows pass
 * without sleeping), the fixtures of tests/fixtures/budget/ (one per provider
 * format, streamed and not, in the providers' own shapes), and one exchange
 * driven the way the broker's meter drives budget/: reserve, the head,
 * the body in chunks of a given size, settle.
 */
#ifndef LATCH_TESTS_BUDGET_TEST_H
#define LATCH_TESTS_BUDGET_TEST_H

#include <criterion/criterion.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget/budget.h"

#define FIXTURES "tests/fixtures/budget/"
#define T0 (1764547200ULL * 1000000000ULL) /* 2025-12-01T00:00:00Z */
#define SEC 1000000000ULL

static char bt_dir[64], bt_ledger[128], bt_prices[128];
static uint64_t bt_now;
/* The fetching tools bt_exchange()'s requests may ask for (0: none, as a kit that allows none). */
static unsigned bt_allow_tools;
#define BT_ALL_TOOLS                                                                 \
	(BUDGET_TOOL_BIT(BUDGET_TOOL_WEB_FETCH) | BUDGET_TOOL_BIT(BUDGET_TOOL_MCP) | \
	 BUDGET_TOOL_BIT(BUDGET_TOOL_URL_CONTEXT))

static inline uint64_t bt_clock(void *arg)
{
	return arg ? *(uint64_t *)arg : bt_now;
}

static inline void bt_setup(void)
{
	snprintf(bt_dir, sizeof(bt_dir), "/tmp/latch-budget-XXXXXX");
	cr_assert_not_null(mkdtemp(bt_dir));
	snprintf(bt_ledger, sizeof(bt_ledger), "%s/lib/ledger.db", bt_dir);
	snprintf(bt_prices, sizeof(bt_prices), "%s/prices", bt_dir); /* absent: the built-in rows */
	bt_now = T0;
}

static inline void bt_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bt_dir);
	if (system(cmd))
		cr_log_warn("could not remove %s", bt_dir);
}

/* Caps that never bite, unless a test sets its own. */
static inline void bt_opts(struct budget_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->ledger = bt_ledger;
	o->prices = bt_prices;
	o->owner = getuid();
	o->clock = bt_clock;
	for (int p = 0; p < BUDGET_PROVIDERS; p++) {
		o->sandbox[p] = (struct budget_caps){ BUDGET_NO_CAP, BUDGET_NO_CAP, BUDGET_NO_CAP };
		o->host[p] = o->sandbox[p];
	}
}

static inline struct budget *bt_open(const struct budget_opts *o)
{
	char err[LATCH_ERR_MAX] = "";
	struct budget *b = budget_open(o, err, sizeof(err));

	cr_assert_not_null(b, "budget_open: %s", err);
	return b;
}

static inline char *bt_fixture(const char *name, size_t *len)
{
	char path[256], *buf;
	FILE *f;
	long n;

	snprintf(path, sizeof(path), FIXTURES "%s", name);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "fixture %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* One SQL value from the ledger (the truth, read beside budget/). */
static inline int bt_hour_cb(const struct budget_usage *u, void *arg)
{
	if (*u->sandbox)
		*(int64_t *)arg = u->requests_hour.used;
	return 0;
}

/* Sandbox s1's requests in the last hour, as budget_report() counts them. */
static inline int64_t bt_requests_hour(struct budget *b)
{
	int64_t n = 0;

	cr_assert_eq(budget_report(b, "s1", bt_hour_cb, &n), 0);
	return n;
}

static inline int64_t bt_sql(const char *q)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int64_t v = -1;

	cr_assert_eq(sqlite3_open_v2(bt_ledger, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK, "%s: %s", q, sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* A POST of body to path under a sandbox and provider, as the broker's meter would describe it. */
static inline struct budget_request bt_request(const char *sandbox, enum budget_provider p, const char *path,
					       const char *body)
{
	return (struct budget_request){ .sandbox = sandbox,
					.provider = p,
					.method = "POST",
					.path = path,
					.body = body,
					.body_len = body ? strlen(body) : 0 };
}

struct bt_result {
	int rc; /* of budget_reserve */
	int64_t reserved; /* the reservation row's micros */
	int64_t charged; /* the settlement row's micros */
	char how[32]; /* the settlement row's how */
	char line[512]; /* a refusal line */
	struct budget_note reserve_note, settle_note;
};

static inline void bt_how(char *buf, size_t len)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	buf[0] = '\0';
	cr_assert_eq(sqlite3_open_v2(bt_ledger, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT how FROM ledger WHERE kind = 'settle' ORDER BY id DESC LIMIT 1", -1,
					&st, NULL),
		     SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/*
 * Drive one exchange as the meter does.  resp is fed in chunks of chunk
 * bytes (0: all at once); cut_at (when not 0) stops feeding there.
 */
static inline struct bt_result bt_exchange(struct budget *b, const char *sandbox, enum budget_provider p,
					   const char *method, const char *path, const char *body, int status,
					   const char *resp, size_t resp_len, size_t chunk, size_t cut_at,
					   enum budget_end how)
{
	struct budget_request rq = bt_request(sandbox, p, path, body);
	struct budget_ticket *t = NULL;
	struct bt_result r;

	memset(&r, 0, sizeof(r));
	rq.method = method;
	rq.allow_tools = bt_allow_tools;
	r.rc = budget_reserve(b, &rq, &t, &r.reserve_note, r.line, sizeof(r.line));
	if (r.rc)
		return r;
	r.reserved = bt_sql("SELECT micros FROM ledger WHERE kind = 'reserve' ORDER BY id DESC LIMIT 1");
	budget_response(t, status, NULL, 0);
	if (cut_at && cut_at < resp_len)
		resp_len = cut_at;
	for (size_t off = 0; off < resp_len;) {
		size_t n = chunk && chunk < resp_len - off ? chunk : resp_len - off;

		budget_response(t, status, resp + off, n);
		off += n;
	}
	cr_assert_eq(budget_settle(b, t, how, &r.settle_note), 0);
	cr_assert_eq(budget_tick(b), 0); /* the settlement's row, which otherwise rides on the next commit */
	r.charged = bt_sql("SELECT micros FROM ledger WHERE kind = 'settle' ORDER BY id DESC LIMIT 1");
	bt_how(r.how, sizeof(r.how));
	return r;
}

/* A request body in each provider's shape, with a few KB of context. */
static inline char *bt_body(const char *fmt_head, const char *model, const char *tail)
{
	char *body = malloc(8192);

	snprintf(body, 8192, fmt_head, model, tail);
	return body;
}

#endif
