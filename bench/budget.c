// SPDX-License-Identifier: GPL-2.0-only
/*
 * budget.c - what the spend meter costs per request, beside references
 * measured in the same run.
 *
 * The integrated target (issue 12) is the broker's requests/s and p50 with
 * the meter on and off: at most 5 % of requests/s and 10 us of p50.  This
 * measures budget/'s own share now, in ns per request, one process, one
 * thread, as latchd would call it: budget_reserve (classify, read the body,
 * price, the ledger's write transaction), budget_response for each chunk,
 * budget_settle (usage, price, the ledger again).  Two shapes:
 *
 *   small  a 300-byte Messages request and its 600-byte JSON answer (the
 *          shape of the broker benchmark's fake upstream)
 *   agent  a 100 KB request (an agent's context) and a 170-event SSE
 *          stream of 26 KB, fed in 1 KB chunks
 *
 * Configurations, interleaved rep by rep (rotated order):
 *   copy          memcpy of the request and response bytes: moving them once
 *   scan          budget/ without the ledger: classify, read the body, scan
 *                 the response, price it (internal functions)
 *   sqlite        the floor of any durable per-request ledger: one one-row
 *                 write transaction (BEGIN IMMEDIATE, INSERT, COMMIT) on a
 *                 table of the same shape, WAL, synchronous=NORMAL (the
 *                 reservation must be on disk before the request leaves;
 *                 budget/ writes the settlement with the next one)
 *   budget        the whole meter, WAL, synchronous=NORMAL, each row
 *                 committed to sqlite before budget_reserve() returns
 *   journal       the whole meter as latchd runs it (budget_opts.journal):
 *                 the rows appended to the ledger's memory-mapped journal,
 *                 folded into sqlite every FOLD_EVERY requests (512, as
 *                 latchd's 1024 records; timed apart: the fold's cost per
 *                 request is printed below the table)
 *   sqlite-full   the floor with synchronous=FULL (an fsync per commit)
 *   budget-full   the whole meter with synchronous=FULL
 *   rows          the journal fold's floor: a request's two rows (its
 *                 reservation and its settlement, as budget/ fills them)
 *                 written by the ledger's own INSERTs, one transaction every
 *                 FOLD_EVERY requests, without the journal (timed apart
 *                 and printed below the table beside the fold: what the
 *                 fold spends beyond it is the journal's read and sums)
 * Each request is timed alone (CLOCK_MONOTONIC); p50, p90 and mean per
 * configuration over all reps.  Every 256 requests the ledger is
 * checkpointed off the timed path, as latchd's tick does with
 * budget_tick().  Output: a table, and CSV lines
 * `budget,SHAPE,CONFIG,p50_ns,p90_ns,mean_ns` for scripts.
 *
 * A fifth and sixth argument name the configurations and shapes to run
 * (comma lists, e.g. `scan small`): the rest are left out of the table, so
 * one row can be run under callgrind quickly.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <unistd.h>

#include "budget/budget.h"
#include "budget/internal.h"

enum { C_COPY, C_SCAN, C_SQLITE, C_BUDGET, C_JOURNAL, C_SQLITE_FULL, C_BUDGET_FULL, C_ROWS, N_CONFIGS };
static const char *const config_names[N_CONFIGS] = { "copy",	"scan",	       "sqlite",      "budget",
						     "journal", "sqlite-full", "budget-full", "rows" };

struct shape {
	const char *name;
	char *body;
	size_t body_len;
	char *resp;
	size_t resp_len;
	size_t chunk;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static char *append(char *buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);

	if (*len + n + 1 > *cap) {
		*cap = (*len + n + 1) * 2;
		buf = realloc(buf, *cap);
		if (!buf)
			exit(1);
	}
	memcpy(buf + *len, s, n + 1);
	*len += n;
	return buf;
}

static void make_shapes(struct shape *small, struct shape *agent)
{
	size_t len = 0, cap = 0;
	char *b = NULL, line[512];

	small->name = "small";
	small->body =
		strdup("{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1024,\"messages\":[{\"role\":\"user\","
		       "\"content\":\"Write a haiku about the sea, then explain each line in one sentence.\"}],"
		       "\"system\":\"You are a helpful assistant.\",\"temperature\":0.7,\"metadata\":{\"user_id\":"
		       "\"bench\"}}");
	small->body_len = strlen(small->body);
	small->resp = strdup(
		"{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
		"\"claude-haiku-4-5-20251001\",\"content\":[{\"type\":\"text\",\"text\":\"Waves fold into foam,\\nthe "
		"tide keeps its old promise,\\nsalt on the morning.\\n\\nThe first line shows motion; the second, "
		"constancy; the third, what remains.\"}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null,"
		"\"usage\":{\"input_tokens\":43,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,"
		"\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":0},"
		"\"output_tokens\":57,\"service_tier\":\"standard\"}}");
	small->resp_len = strlen(small->resp);
	small->chunk = small->resp_len;

	/* an agent turn: 100 KB of context with escapes, the model named after the messages */
	b = append(b, &len, &cap, "{\"max_tokens\":32000,\"messages\":[");
	for (int i = 0; len < 100000; i++) {
		snprintf(line, sizeof(line),
			 "%s{\"role\":\"%s\",\"content\":[{\"type\":\"text\",\"text\":\"Step %d: read src/file%d.c "
			 "and fix the \\\"off by one\\\" in loop %d;\\n\\tthen run make check and report.\"}]}",
			 i ? "," : "", i % 2 ? "assistant" : "user", i, i, i);
		b = append(b, &len, &cap, line);
	}
	b = append(b, &len, &cap,
		   "],\"model\":\"claude-sonnet-4-5\",\"stream\":true,\"system\":[{\"type\":\"text\","
		   "\"text\":\"You are Claude Code.\",\"cache_control\":{\"type\":\"ephemeral\"}}]}");
	agent->name = "agent";
	agent->body = b;
	agent->body_len = len;

	b = NULL;
	len = cap = 0;
	b = append(b, &len, &cap,
		   "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":"
		   "\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5-20250929\","
		   "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":812,"
		   "\"cache_creation_input_tokens\":1200,\"cache_read_input_tokens\":24000,\"output_tokens\":1}}}\n\n"
		   "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
		   "{\"type\":\"text\",\"text\":\"\"}}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n");
	for (int i = 0; i < 165; i++) {
		snprintf(
			line, sizeof(line),
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
			"{\"type\":\"text_delta\",\"text\":\"line %d of the fix: for (i = 0; i < n; i++) \\\"ok\\\"\\n\"}}"
			"\n\n",
			i);
		b = append(b, &len, &cap, line);
	}
	b = append(b, &len, &cap,
		   "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
		   "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
		   "\"stop_sequence\":null},\"usage\":{\"output_tokens\":2210}}\n\n"
		   "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
	agent->resp = b;
	agent->resp_len = len;
	agent->chunk = 1024;
}

/* ---- the configurations ---- */

static char sink[1 << 18];

static void run_copy(const struct shape *s)
{
	memcpy(sink, s->body, s->body_len < sizeof(sink) ? s->body_len : sizeof(sink));
	for (size_t off = 0; off < s->resp_len; off += s->chunk)
		memcpy(sink, s->resp + off, s->resp_len - off < s->chunk ? s->resp_len - off : s->chunk);
	__asm__ volatile("" ::: "memory");
}

static struct price_table scan_prices;

static void run_scan(const struct shape *s)
{
	struct budget_class cls;
	struct request_facts facts;
	struct usage_parser u;
	struct budget_tokens tok;
	const struct budget_price *row;

	budget_classify(BUDGET_ANTHROPIC, "POST", "/v1/messages", &cls);
	budget_request_inspect(cls.format, s->body, s->body_len, &facts);
	row = budget_prices_find(&scan_prices, BUDGET_ANTHROPIC, facts.model, (int64_t)s->body_len / 2);
	budget_usage_init(&u, cls.format);
	for (size_t off = 0; off < s->resp_len; off += s->chunk)
		budget_usage_feed(&u, s->resp + off, s->resp_len - off < s->chunk ? s->resp_len - off : s->chunk);
	if (budget_usage_finish(&u, &tok) != USAGE_OK || !row)
		exit(2);
	budget_usage_free(&u);
	(void)budget_cost(row, &tok);
}

struct floor_db {
	sqlite3 *db;
	sqlite3_stmt *ins, *begin, *commit;
};

static int floor_open(struct floor_db *f, const char *path, bool full)
{
	char pragma[96];

	if (sqlite3_open(path, &f->db) != SQLITE_OK)
		return -1;
	snprintf(pragma, sizeof(pragma), "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;", full ? "FULL" : "NORMAL");
	if (sqlite3_exec(f->db, pragma, NULL, NULL, NULL) ||
	    sqlite3_exec(f->db,
			 "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, time_ns INTEGER, request INTEGER,"
			 " kind TEXT, sandbox TEXT, provider TEXT, model TEXT, micros INTEGER, how TEXT);",
			 NULL, NULL, NULL) ||
	    sqlite3_prepare_v2(
		    f->db,
		    "INSERT INTO t (time_ns, request, kind, sandbox, provider, model, micros, how)"
		    " VALUES (?, 1, 'reserve', 'bench', 'anthropic', 'claude-sonnet-4-5', 12345, 'anthropic')",
		    -1, &f->ins, NULL) ||
	    sqlite3_prepare_v2(f->db, "BEGIN IMMEDIATE", -1, &f->begin, NULL) ||
	    sqlite3_prepare_v2(f->db, "COMMIT", -1, &f->commit, NULL))
		return -1;
	return 0;
}

static void floor_row(struct floor_db *f, uint64_t t)
{
	sqlite3_step(f->begin);
	sqlite3_reset(f->begin);
	sqlite3_bind_int64(f->ins, 1, (int64_t)t);
	sqlite3_step(f->ins);
	sqlite3_reset(f->ins);
	sqlite3_step(f->commit);
	sqlite3_reset(f->commit);
}

static void run_floor(struct floor_db *f, uint64_t t)
{
	floor_row(f, t); /* the reservation: one commit a request */
}

static void run_budget(struct budget *b, const struct shape *s)
{
	struct budget_request rq = { .sandbox = "bench",
				     .provider = BUDGET_ANTHROPIC,
				     .method = "POST",
				     .path = "/v1/messages",
				     .body = s->body,
				     .body_len = s->body_len };
	struct budget_ticket *t;
	struct budget_note note;
	char line[512];

	if (budget_reserve(b, &rq, &t, &note, line, sizeof(line))) {
		fprintf(stderr, "bench/budget: %s\n", line);
		exit(2);
	}
	budget_response(t, 200, NULL, 0);
	for (size_t off = 0; off < s->resp_len; off += s->chunk)
		budget_response(t, 200, s->resp + off, s->resp_len - off < s->chunk ? s->resp_len - off : s->chunk);
	if (budget_settle(b, t, BUDGET_END_COMPLETE, &note))
		exit(2);
}

/* The rows config: a ledger and the rows that wait for its next transaction. */
struct rows_db {
	struct ledger *l;
	struct ledger_row *rows;
	size_t n;
	int64_t next_id;
};

/* A request's reservation and settlement, as budget/ writes them (a small request's counts). */
static void rows_add(struct rows_db *r, uint64_t t)
{
	static const struct budget_caps caps = { BUDGET_NO_CAP, BUDGET_NO_CAP, BUDGET_NO_CAP };
	int64_t id = r->next_id;

	r->rows[r->n++] = (struct ledger_row){ .id = id,
					       .time_ns = t,
					       .sandbox = "bench",
					       .provider = "anthropic",
					       .model = "claude-haiku-4-5",
					       .how = "reserve",
					       .micros = 12345,
					       .caps = caps,
					       .owner = "00000000-0000-0000-0000-000000000000:1:2" };
	r->rows[r->n++] = (struct ledger_row){ .id = id + 1,
					       .time_ns = t + 1,
					       .request = id,
					       .settle = true,
					       .sandbox = "bench",
					       .provider = "anthropic",
					       .model = "claude-haiku-4-5",
					       .how = "usage",
					       .micros = 1234,
					       .tokens = { .input = 93, .output = 46 } };
	r->next_id += 2;
}

/* The rows that wait, in one transaction. */
static void rows_write(struct rows_db *r)
{
	if (budget_ledger_begin(r->l) || budget_ledger_insert_rows(r->l, r->rows, r->n) || budget_ledger_commit(r->l)) {
		fprintf(stderr, "bench/budget: rows: %s\n", budget_ledger_error(r->l));
		exit(2);
	}
	r->n = 0;
}

/* Is name in the comma list (NULL: every name is)? */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return true;
	return !list;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n_fast = argc > 1 ? atoi(argv[1]) : 20000, n_full = argc > 2 ? atoi(argv[2]) : 300,
	    reps = argc > 3 ? atoi(argv[3]) : 3, fold_every = argc > 4 ? atoi(argv[4]) : 512;
	const char *only_configs = argc > 5 ? argv[5] : NULL, *only_shapes = argc > 6 ? argv[6] : NULL;
	char dir[] = "/tmp/latch-bench-budget-XXXXXX", path[N_CONFIGS][128], err[LATCH_ERR_MAX], cmd[96];
	struct shape shapes[2];
	struct budget *b[N_CONFIGS] = { 0 };
	struct floor_db fl[N_CONFIGS] = { 0 };
	uint64_t *ns[2][N_CONFIGS];
	size_t cnt[2][N_CONFIGS] = { { 0 } };
	uint64_t fold_ns[2] = { 0 }; /* the journal's folds (the tick), off the request's path */
	uint64_t rows_ns[2] = { 0 }; /* the rows config's transactions */
	struct rows_db rows = { 0 };

	if (!mkdtemp(dir) || n_fast < 1 || n_full < 1 || reps < 1 || fold_every < 1) {
		fprintf(stderr, "usage: bench/budget [N N_FULL REPS FOLD_EVERY [CONFIGS [SHAPES]]]\n");
		return 1;
	}
	make_shapes(&shapes[0], &shapes[1]);
	if (budget_prices_load(&scan_prices, "/nonexistent", err, sizeof(err)))
		return 1;
	for (int c = C_SQLITE; c < N_CONFIGS; c++) {
		bool full = c == C_SQLITE_FULL || c == C_BUDGET_FULL;

		snprintf(path[c], sizeof(path[c]), "%s/%s.db", dir, config_names[c]);
		if (c == C_ROWS) {
			rows.l = budget_ledger_open(path[c], false, false, geteuid(), LOCK_EX, err, sizeof(err));
			rows.rows = calloc(2 * (size_t)fold_every, sizeof(*rows.rows));
			rows.next_id = 1;
			if (!rows.l || !rows.rows) {
				fprintf(stderr, "bench/budget: rows: %s\n", rows.l ? "out of memory" : err);
				return 1;
			}
		} else if (c == C_SQLITE || c == C_SQLITE_FULL) {
			if (floor_open(&fl[c], path[c], full))
				return 1;
		} else {
			struct budget_opts o = {
				.ledger = path[c], .prices = "/nonexistent", .owner = geteuid(), .sync_full = full
			};

			o.sole_writer = o.journal = c == C_JOURNAL;

			for (int p = 0; p < BUDGET_PROVIDERS; p++)
				o.sandbox[p] = o.host[p] =
					(struct budget_caps){ BUDGET_NO_CAP, BUDGET_NO_CAP, BUDGET_NO_CAP };
			b[c] = budget_open(&o, err, sizeof(err));
			if (!b[c]) {
				fprintf(stderr, "bench/budget: %s\n", err);
				return 1;
			}
		}
	}
	for (int s = 0; s < 2; s++)
		for (int c = 0; c < N_CONFIGS; c++)
			ns[s][c] = calloc((size_t)reps * (size_t)n_fast, sizeof(uint64_t));
	for (int rep = 0; rep < reps; rep++) {
		for (int k = 0; k < N_CONFIGS; k++) {
			int c = (k + rep) % N_CONFIGS;
			int n = c == C_SQLITE_FULL || c == C_BUDGET_FULL ? n_full : n_fast;

			if (!listed(only_configs, config_names[c]))
				continue;
			for (int s = 0; s < 2; s++)
				for (int i = 0; i < n && listed(only_shapes, shapes[s].name); i++) {
					uint64_t t0 = mono_ns();

					switch (c) {
					case C_COPY:
						run_copy(&shapes[s]);
						break;
					case C_SCAN:
						run_scan(&shapes[s]);
						break;
					case C_SQLITE:
					case C_SQLITE_FULL:
						run_floor(&fl[c], t0);
						break;
					case C_ROWS:
						rows_add(&rows, t0);
						break;
					default:
						run_budget(b[c], &shapes[s]);
						break;
					}
					ns[s][c][cnt[s][c]++] = mono_ns() - t0;
					if (c == C_JOURNAL && i % fold_every == fold_every - 1) {
						uint64_t f0 = mono_ns(); /* latchd's fold: off the request's path */

						if (budget_journal_fold(b[c], true))
							exit(2);
						fold_ns[s] += mono_ns() - f0;
					}
					if (c == C_ROWS && rows.n == 2 * (size_t)fold_every) {
						uint64_t f0 = mono_ns();

						rows_write(&rows);
						rows_ns[s] += mono_ns() - f0;
					}
					if (i % 256 == 255) { /* latchd's tick, off the timed path */
						if (c == C_JOURNAL) /* its fold is the one above */
							budget_ledger_checkpoint(b[c]->l);
						else if (c == C_ROWS)
							budget_ledger_checkpoint(rows.l);
						else if (b[c])
							budget_tick(b[c]);
						else if (fl[c].db)
							sqlite3_wal_checkpoint_v2(
								fl[c].db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
					}
				}
		}
	}
	printf("budget/ per request (reserve + response + settle), ns; %d reps, %d requests a rep (%d with "
	       "synchronous=FULL)\n",
	       reps, n_fast, n_full);
	printf("%-6s %-12s %10s %10s %10s\n", "shape", "config", "p50", "p90", "mean");
	for (int s = 0; s < 2; s++)
		for (int c = 0; c < N_CONFIGS; c++) {
			uint64_t sum = 0;
			size_t n = cnt[s][c];

			if (!n || c == C_ROWS) /* its requests only gather rows: its line is below */
				continue;
			qsort(ns[s][c], n, sizeof(uint64_t), cmp_u64);
			for (size_t i = 0; i < n; i++)
				sum += ns[s][c][i];
			printf("%-6s %-12s %10llu %10llu %10llu\n", shapes[s].name, config_names[c],
			       (unsigned long long)ns[s][c][n / 2], (unsigned long long)ns[s][c][n * 9 / 10],
			       (unsigned long long)(sum / n));
			fprintf(stderr, "budget,%s,%s,%llu,%llu,%llu\n", shapes[s].name, config_names[c],
				(unsigned long long)ns[s][c][n / 2], (unsigned long long)ns[s][c][n * 9 / 10],
				(unsigned long long)(sum / n));
		}
	for (int s = 0; s < 2; s++)
		if (cnt[s][C_JOURNAL])
			printf("%-6s journal: its fold into sqlite (every %d requests, off the request's path) costs %llu ns a request\n",
			       shapes[s].name, fold_every, (unsigned long long)(fold_ns[s] / cnt[s][C_JOURNAL]));
	for (int s = 0; s < 2; s++)
		if (cnt[s][C_ROWS])
			printf("%-6s rows: the ledger's INSERTs of a request's two rows alone (the fold's floor) cost %llu ns a request\n",
			       shapes[s].name, (unsigned long long)(rows_ns[s] / cnt[s][C_ROWS]));
	printf("shapes: small = %zu B request, %zu B JSON answer; agent = %zu B request, %zu B SSE in %zu B chunks\n",
	       shapes[0].body_len, shapes[0].resp_len, shapes[1].body_len, shapes[1].resp_len, shapes[1].chunk);
	budget_ledger_close(rows.l);
	free(rows.rows);
	for (int c = 0; c < N_CONFIGS; c++) {
		budget_close(b[c]);
		if (fl[c].db) {
			sqlite3_finalize(fl[c].ins);
			sqlite3_finalize(fl[c].begin);
			sqlite3_finalize(fl[c].commit);
			sqlite3_close(fl[c].db);
		}
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? 1 : 0;
}
