// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_budget_caps.c - the caps hold: per sandbox and host-wide, over
 * rolling windows, across processes, across a restart and a SIGKILL.
 *
 * Invariants: a request is forwarded only if its worst case fits under every
 * cap with everything already charged or reserved; the refusal names the cap,
 * where it stands and the exact moment it frees; 32 processes racing for the
 * last dollar on one ledger never spend past it; a restart, a crash or
 * kill -9 never hands out a fresh hour or day, and a reservation left open
 * by a dead process is settled at its full amount.  The clock is a variable
 * (the ledger's time is the test's), the ledger a file in a temp dir.
 */
#include <jansson.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "budget_test.h"

TestSuite(budget_caps, .init = bt_setup, .fini = bt_teardown);

static const char small_body[] = "{\"model\":\"claude-haiku-4-5\",\"max_tokens\":1000,\"messages\":[]}";
static const char small_resp[] = "{\"type\":\"message\",\"usage\":{\"input_tokens\":100,\"output_tokens\":100}}";

static struct bt_result one(struct budget *b, const char *sandbox, enum budget_provider p)
{
	const char *path = p == BUDGET_ANTHROPIC ? "/v1/messages" : "/v1/chat/completions";

	return bt_exchange(b, sandbox, p, "POST", path, small_body, 200, small_resp, strlen(small_resp), 0, 0,
			   BUDGET_END_COMPLETE);
}

static int reserve_rc(struct budget *b, const char *sandbox, const struct budget_caps *caps, char *line, size_t len)
{
	struct budget_request rq = bt_request(sandbox, BUDGET_ANTHROPIC, "/v1/messages", small_body);
	struct budget_ticket *t = NULL;
	struct budget_note note;
	int rc;

	rq.caps = caps;
	rc = budget_reserve(b, &rq, &t, &note, line, len);
	if (!rc)
		budget_settle(b, t, BUDGET_END_GUEST_CUT, &note);
	return rc;
}

/* Anthropic capped at rph requests an hour and rpd a day for each sandbox, nothing else. */
static struct budget *open_requests_capped(struct budget_opts *o, int64_t rph, int64_t rpd)
{
	bt_opts(o);
	o->sandbox[BUDGET_ANTHROPIC].requests_per_hour = rph;
	o->sandbox[BUDGET_ANTHROPIC].requests_per_day = rpd;
	return bt_open(o);
}

/* requests_per_hour: the 4th of 3 is refused until the first is an hour old, to the nanosecond. */
Test(budget_caps, requests_per_hour_rolls_and_frees_exactly)
{
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;
	char line[512];

	bt_opts(&o);
	o.sandbox[BUDGET_ANTHROPIC].requests_per_hour = 3;
	b = bt_open(&o);
	for (int i = 0; i < 3; i++) {
		bt_now = T0 + (uint64_t)i * 600 * SEC + 250000000; /* :00:00.25, :10:00.25, :20:00.25 */
		cr_assert_eq(one(b, "a1", BUDGET_ANTHROPIC).rc, 0, "request %d", i);
	}
	bt_now = T0 + 1800 * SEC;
	r = one(b, "a1", BUDGET_ANTHROPIC);
	cr_assert_eq(r.rc, -EDQUOT);
	/* the first request was at 00:00:00.25: its place frees at 01:00:00.25, shown as the next whole second */
	cr_expect_str_eq(r.line,
			 "latch: requests_per_hour cap for anthropic in sandbox a1 is 3; 3 requests in the last "
			 "hour; frees at 2025-12-01T01:00:01Z (or raise budget_requests_per_hour)");
	cr_expect_str_eq(r.reserve_note.decision, "refuse");
	cr_expect_str_eq(r.reserve_note.reason, "budget.refused.requests_per_hour");
	/* controls: another sandbox, another provider */
	cr_expect_eq(one(b, "a2", BUDGET_ANTHROPIC).rc, 0);
	cr_expect_eq(one(b, "a1", BUDGET_OPENAI).rc, 0);
	/* a nanosecond early: still refused; at the moment: forwarded */
	bt_now = T0 + 3600 * SEC + 250000000 - 1;
	cr_expect_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), -EDQUOT);
	bt_now += 1;
	cr_expect_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), 0, "%s", line);
	budget_close(b);
}

/* dollars_per_day: charged plus reserved plus this request's worst case, never past the cap. */
Test(budget_caps, dollars_per_day_counts_open_reservations)
{
	struct budget_request rq = bt_request("a1", BUDGET_ANTHROPIC, "/v1/messages", small_body);
	struct budget_ticket *held;
	struct budget_note note;
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;
	char line[512];
	int64_t need;

	bt_opts(&o);
	b = bt_open(&o);
	/* claude-haiku-4-5: 1000 output tokens at $5/M, 30 input (60 bytes) at $1.25/M (the dearest input price) */
	need = bt_exchange(b, "probe", BUDGET_ANTHROPIC, "POST", "/v1/messages", small_body, 200, "", 0, 0, 0,
			   BUDGET_END_GUEST_CUT)
		       .reserved;
	cr_assert_eq(need, (30 * 1250000LL + 1000 * 5000000LL + 999999) / 1000000);
	budget_close(b);

	/* room for one settled request (600) and two worst cases, less one micro-dollar */
	o.sandbox[BUDGET_ANTHROPIC].micros_per_day = 600 + 2 * need - 1;
	b = bt_open(&o);
	bt_now = T0 + 10 * SEC;
	cr_assert_eq(one(b, "a1", BUDGET_ANTHROPIC).rc, 0); /* settles at 600: 100 x $1 + 100 x $5 per M */
	bt_now = T0 + 20 * SEC;
	cr_assert_eq(budget_reserve(b, &rq, &held, &note, line, sizeof(line)), 0); /* left open */
	bt_now = T0 + 30 * SEC;
	r = one(b, "a1", BUDGET_ANTHROPIC);
	cr_assert_eq(r.rc, -EDQUOT, "600 + %lld open + %lld more is past the cap", (long long)need, (long long)need);
	/* it fits once the 600 of 00:00:10 has left the day */
	cr_expect_str_eq(r.line, "latch: dollars_per_day cap for anthropic in sandbox a1 is $0.010675; $0.0006 spent "
				 "and $0.005038 reserved in the last 24 hours, this request needs up to $0.005038; "
				 "frees at 2025-12-02T00:00:10Z (or raise budget_dollars_per_day)");
	cr_expect_str_eq(r.reserve_note.reason, "budget.refused.dollars_per_day");
	/* the open one settles at its usage: room again, without waiting a day */
	budget_response(held, 200, NULL, 0);
	budget_response(held, 200, small_resp, strlen(small_resp));
	cr_assert_eq(budget_settle(b, held, BUDGET_END_COMPLETE, &note), 0);
	cr_expect_eq(one(b, "a1", BUDGET_ANTHROPIC).rc, 0);
	budget_close(b);
}

/* Host-wide caps add up every sandbox; the refusal says host-wide. */
Test(budget_caps, host_wide_caps_count_every_sandbox)
{
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;

	bt_opts(&o);
	o.host[BUDGET_OPENAI].requests_per_day = 2;
	b = bt_open(&o);
	cr_assert_eq(one(b, "a1", BUDGET_OPENAI).rc, 0);
	cr_assert_eq(one(b, "a2", BUDGET_OPENAI).rc, 0);
	r = one(b, "a3", BUDGET_OPENAI);
	cr_assert_eq(r.rc, -EDQUOT);
	cr_expect_str_eq(r.line,
			 "latch: host-wide requests_per_day cap for openai is 2; 2 requests in the last 24 hours; "
			 "frees at 2025-12-02T00:00:00Z (or raise budget_host_requests_per_day)");
	cr_expect_str_eq(r.reserve_note.reason, "budget.refused.host.requests_per_day");
	cr_expect_eq(one(b, "a3", BUDGET_ANTHROPIC).rc, 0); /* control: another provider */
	budget_close(b);
}

/* A credential's caps override latch.conf's per-sandbox ones, field by field; host caps still hold. */
Test(budget_caps, credential_overrides)
{
	struct budget_caps tight = { 1, BUDGET_INHERIT, BUDGET_INHERIT },
			   loose = { BUDGET_NO_CAP, BUDGET_INHERIT, BUDGET_INHERIT };
	struct budget_opts o;
	struct budget *b;
	char line[512];

	b = open_requests_capped(&o, 2, 3);
	cr_expect_eq(reserve_rc(b, "a1", &tight, line, sizeof(line)), 0);
	cr_expect_eq(reserve_rc(b, "a1", &tight, line, sizeof(line)), -EDQUOT);
	cr_expect(strstr(line, "requests_per_hour cap for anthropic in sandbox a1 is 1;"), "%s", line);
	cr_expect_eq(reserve_rc(b, "a1", &loose, line, sizeof(line)), 0);
	cr_expect_eq(reserve_rc(b, "a1", &loose, line, sizeof(line)), 0);
	/* the inherited daily cap (3) still holds under the loose hourly one */
	cr_expect_eq(reserve_rc(b, "a1", &loose, line, sizeof(line)), -EDQUOT);
	cr_expect(strstr(line, "requests_per_day cap for anthropic in sandbox a1 is 3;"), "%s", line);
	budget_close(b);
}

/* A cap of 0, and a request that alone is more than the cap: never frees, and the line says so. */
Test(budget_caps, caps_that_never_free)
{
	static const char big[] = "{\"model\":\"claude-opus-4-1\",\"max_tokens\":32000,\"messages\":[]}";
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;
	json_t *fields;

	bt_opts(&o);
	o.sandbox[BUDGET_OPENAI].requests_per_hour = 0;
	o.sandbox[BUDGET_ANTHROPIC].micros_per_day = 1000000; /* $1; 32000 tokens of opus output is $2.40 */
	b = bt_open(&o);
	r = one(b, "a1", BUDGET_OPENAI);
	cr_expect_eq(r.rc, -EDQUOT);
	cr_expect(strstr(r.line,
			 "is 0; 0 requests in the last hour; it allows nothing; raise budget_requests_per_hour"),
		  "%s", r.line);
	r = bt_exchange(b, "a1", BUDGET_ANTHROPIC, "POST", "/v1/messages", big, 200, "", 0, 0, 0, BUDGET_END_COMPLETE);
	cr_expect_eq(r.rc, -EDQUOT);
	cr_expect(strstr(r.line, "this request needs up to $2.400563; this request alone is more than the cap"), "%s",
		  r.line);
	fields = json_loads(r.reserve_note.fields, 0, NULL);
	cr_assert_not_null(fields, "%s", r.reserve_note.fields);
	cr_expect(json_is_null(json_object_get(fields, "frees_at")));
	cr_expect_eq(json_integer_value(json_object_get(fields, "need")), 2400563);
	json_decref(fields);
	budget_close(b);
}

/* The refusal names the cap that frees last: the one the request really waits for. */
Test(budget_caps, the_refusal_names_the_cap_that_frees_last)
{
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;

	b = open_requests_capped(&o, 1, 1);
	cr_assert_eq(one(b, "a1", BUDGET_ANTHROPIC).rc, 0);
	r = one(b, "a1", BUDGET_ANTHROPIC);
	cr_assert_eq(r.rc, -EDQUOT);
	cr_expect(!strncmp(r.line, "latch: requests_per_day cap", 27), "%s", r.line);
	budget_close(b);
}

/* A restart replays the ledger: the hour and the day go on; only time frees them. */
Test(budget_caps, a_restart_hands_out_no_fresh_window)
{
	struct budget_opts o;
	struct budget *b;
	char line[512];

	b = open_requests_capped(&o, 2, 3);
	cr_assert_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), 0);
	cr_assert_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), 0);
	budget_close(b);
	b = bt_open(&o);
	cr_expect_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), -EDQUOT, "a restart handed out a fresh hour");
	budget_close(b);
	bt_now += 3600 * SEC;
	b = bt_open(&o);
	cr_expect_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), 0, "%s", line);
	cr_expect_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), -EDQUOT, "a restart handed out a fresh day");
	budget_close(b);
	bt_now += 86400 * SEC - 3600 * SEC;
	b = bt_open(&o);
	cr_expect_eq(reserve_rc(b, "a1", NULL, line, sizeof(line)), 0, "%s", line);
	budget_close(b);
}

static int report_row(const struct budget_usage *u, void *arg)
{
	struct budget_usage *out = arg;

	for (int i = 0; i < 8; i++)
		if (!out[i].sandbox[0] && !out[i].requests_day.cap && !out[i].requests_day.used) {
			out[i] = *u;
			if (!u->sandbox[0])
				snprintf(out[i].sandbox, sizeof(out[i].sandbox), "(host)");
			return 0;
		}
	return 0;
}

/* budget_report: used, reserved, left and when each window next frees, per sandbox and host-wide. */
Test(budget_caps, report_says_where_each_cap_stands)
{
	struct budget_usage rows[8];
	struct budget_opts o;
	struct budget *b;

	bt_opts(&o);
	o.sandbox[BUDGET_ANTHROPIC] = (struct budget_caps){ 10, 100, 5 * BUDGET_MICROS };
	o.host[BUDGET_ANTHROPIC] = (struct budget_caps){ 40, 400, 20 * BUDGET_MICROS };
	b = bt_open(&o);
	bt_now = T0 + 100 * SEC;
	one(b, "a1", BUDGET_ANTHROPIC);
	bt_now = T0 + 200 * SEC;
	one(b, "a1", BUDGET_ANTHROPIC);
	memset(rows, 0, sizeof(rows));
	cr_assert_eq(budget_report(b, "a1", report_row, rows), 0);
	cr_assert_str_eq(rows[0].sandbox, "a1");
	cr_expect_eq(rows[0].provider, BUDGET_ANTHROPIC);
	cr_expect_eq(rows[0].requests_hour.used, 2);
	cr_expect_eq(rows[0].requests_hour.left, 8);
	cr_expect_eq(rows[0].requests_hour.frees_ns, T0 + 3700 * SEC);
	cr_expect_eq(rows[0].requests_day.frees_ns, T0 + 86500 * SEC);
	cr_expect_eq(rows[0].dollars_day.used, 1200);
	cr_expect_eq(rows[0].dollars_day.reserved, 0);
	cr_expect_eq(rows[0].dollars_day.left, 5 * BUDGET_MICROS - 1200);
	/* the host-wide row of the same provider */
	cr_expect_str_eq(rows[1].sandbox, "(host)");
	cr_expect_eq(rows[1].provider, BUDGET_ANTHROPIC);
	cr_expect_eq(rows[1].requests_hour.cap, 40);
	cr_expect_eq(rows[1].requests_hour.used, 2);
	/* a sandbox without requests still shows its capped providers */
	memset(rows, 0, sizeof(rows));
	cr_assert_eq(budget_report(b, "never", report_row, rows), 0);
	cr_expect_str_eq(rows[0].sandbox, "never");
	cr_expect_eq(rows[0].requests_hour.used, 0);
	cr_expect_eq(rows[0].requests_hour.frees_ns, 0);
	budget_close(b);
}

/* ---- across processes ---- */

static const char race_prices[] = "openai race-model 0 10.00 0 0 100000 1000\n";

static void write_prices(const char *text)
{
	FILE *f = fopen(bt_prices, "w");

	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	chmod(bt_prices, 0644);
}

/* One child of the race: open the shared ledger, wait at the barrier, try for $0.01. */
static int racer(int barrier, const struct budget_opts *o)
{
	static const char body[] = "{\"model\":\"race-model\",\"max_tokens\":1000,\"messages\":[]}";
	struct budget_request rq = bt_request("racer", BUDGET_OPENAI, "/v1/chat/completions", body);
	struct budget_ticket *t;
	struct budget_note note;
	char err[256], line[512], c;
	struct budget *b = budget_open(o, err, sizeof(err));
	int rc;

	if (!b)
		return 3;
	if (read(barrier, &c, 1) < 0)
		return 3;
	rc = budget_reserve(b, &rq, &t, &note, line, sizeof(line));
	if (!rc)
		budget_settle(b, t, BUDGET_END_GUEST_CUT, &note); /* charged its whole reservation */
	budget_close(b);
	return rc == 0 ? 0 : rc == -EDQUOT ? 1 : 2;
}

/*
 * 32 processes race for the last 5 cents of a $1.00 cap with 1-cent
 * requests: exactly 5 win, and the day's charges end at $1.00, not a cent
 * over (each decision is made under the ledger's write lock).
 */
Test(budget_caps, thirty_two_processes_race_for_the_last_dollar, .timeout = 120)
{
	static const char pre[] = "{\"model\":\"race-model\",\"max_tokens\":95000,\"messages\":[]}";
	int fds[2], won = 0, lost = 0, errors = 0;
	pid_t kids[32];
	struct budget_opts o;
	struct budget *b;
	struct bt_result r;

	write_prices(race_prices);
	bt_opts(&o);
	o.clock = NULL; /* the children share the real clock, as processes do */
	o.sandbox[BUDGET_OPENAI].micros_per_day = BUDGET_MICROS;
	b = bt_open(&o);
	r = bt_exchange(b, "racer", BUDGET_OPENAI, "POST", "/v1/chat/completions", pre, 200, "", 0, 0, 0,
			BUDGET_END_GUEST_CUT);
	cr_assert_eq(r.charged, 950000, "%lld", (long long)r.charged);
	budget_close(b);

	cr_assert_eq(pipe(fds), 0);
	for (int i = 0; i < 32; i++) {
		kids[i] = fork();
		cr_assert_geq(kids[i], 0);
		if (!kids[i]) {
			close(fds[1]);
			_exit(racer(fds[0], &o));
		}
	}
	close(fds[0]);
	usleep(300000); /* let them open; then release all at once */
	close(fds[1]);
	for (int i = 0; i < 32; i++) {
		int st;

		cr_assert_eq(waitpid(kids[i], &st, 0), kids[i]);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			won++;
		else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
			lost++;
		else
			errors++;
	}
	cr_expect_eq(errors, 0);
	cr_expect_eq(won, 5, "%d won", won);
	cr_expect_eq(lost, 27);
	cr_expect_eq(bt_sql("SELECT sum(micros) FROM ledger WHERE kind = 'settle'"), BUDGET_MICROS);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'reserve'"), 6);
}

/*
 * kill -9 mid-stream: a child reserves, reads half a stream and is killed.
 * While it lives its reservation is its own (nobody settles it); after,
 * the next open settles it at its full amount, and the day's charges never
 * go down across the crash.
 */
Test(budget_caps, sigkill_mid_stream_loses_nothing, .timeout = 60)
{
	static const char body[] =
		"{\"model\":\"claude-opus-4-1\",\"max_tokens\":4000,\"stream\":true,\"messages\":[]}";
	struct budget_usage before[8], after[8];
	struct budget_opts o;
	struct budget *b;
	int64_t settled_while_alive;
	int fds[2], st;
	pid_t kid;
	char c;

	bt_opts(&o);
	o.clock = NULL;
	o.sandbox[BUDGET_ANTHROPIC] = (struct budget_caps){ 100, 1000, 100 * BUDGET_MICROS };
	cr_assert_eq(pipe(fds), 0);
	kid = fork();
	cr_assert_geq(kid, 0);
	if (!kid) {
		struct budget_request rq = bt_request("a1", BUDGET_ANTHROPIC, "/v1/messages", body);
		struct budget_ticket *t;
		struct budget_note note;
		char err[256], line[512];
		size_t len;
		char *sse;

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test, whatever fails in it */
		sse = bt_fixture("anthropic.sse", &len);

		b = budget_open(&o, err, sizeof(err));
		if (!b || budget_reserve(b, &rq, &t, &note, line, sizeof(line)))
			_exit(1);
		budget_response(t, 200, NULL, 0);
		budget_response(t, 200, sse, len / 2);
		if (write(fds[1], "r", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(fds[0], &c, 1), 1);

	/* control: opened while the owner lives, its reservation stays open (checked after the kill) */
	b = budget_open(&o, NULL, 0);
	memset(before, 0, sizeof(before));
	if (b)
		budget_report(b, "a1", report_row, before);
	budget_close(b);
	settled_while_alive = bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle'");

	kill(kid, SIGKILL);
	cr_assert_eq(waitpid(kid, &st, 0), kid);
	cr_assert(WIFSIGNALED(st));
	cr_assert_gt(before[0].dollars_day.reserved, 0, "the open reservation of a live process was settled");
	cr_assert_eq(settled_while_alive, 0);

	b = bt_open(&o);
	memset(after, 0, sizeof(after));
	budget_report(b, "a1", report_row, after);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle' AND how = 'lost'"), 1);
	cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE kind = 'settle'"),
		     bt_sql("SELECT micros FROM ledger WHERE kind = 'reserve'"));
	cr_expect_eq(after[0].dollars_day.reserved, 0);
	cr_expect_eq(after[0].dollars_day.used, before[0].dollars_day.reserved, "settled at its full amount");
	cr_expect_geq(after[0].dollars_day.used + after[0].dollars_day.reserved,
		      before[0].dollars_day.used + before[0].dollars_day.reserved, "the day's spend went down");
	cr_expect_eq(after[0].requests_hour.used, before[0].requests_hour.used);
	/* and it stays settled once: a second open changes nothing */
	b = bt_open(&o);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle'"), 1);
}

/* Whoever could rewrite the ledger could hand out a fresh day: unsafe files are refused. */
Test(budget_caps, an_unsafe_ledger_is_refused)
{
	struct budget_opts o;
	struct budget *b;
	char err[512], dir[160], target[160];

	bt_opts(&o);
	b = bt_open(&o);
	budget_close(b);
	cr_assert_eq(chmod(bt_ledger, 0644), 0);
	cr_expect_null(budget_open(&o, err, sizeof(err)));
	cr_expect(strstr(err, "chmod 600"), "%s", err);
	cr_assert_eq(chmod(bt_ledger, 0600), 0);
	snprintf(dir, sizeof(dir), "%s/lib", bt_dir);
	cr_assert_eq(chmod(dir, 0777), 0);
	cr_expect_null(budget_open(&o, err, sizeof(err)));
	cr_expect(strstr(err, "chmod go-w"), "%s", err);
	cr_assert_eq(chmod(dir, 0755), 0);
	b = bt_open(&o); /* control: put right, it opens */
	budget_close(b);
	snprintf(target, sizeof(target), "%s/elsewhere.db", bt_dir);
	cr_assert_eq(rename(bt_ledger, target), 0);
	cr_assert_eq(symlink(target, bt_ledger), 0);
	cr_expect_null(budget_open(&o, err, sizeof(err)));
	cr_expect(strstr(err, "not a regular file"), "%s", err);
}

/*
 * A settlement's row rides on the next commit.  Until then the caps already
 * see the charge; if the process dies first, the reservation is open in the
 * ledger and the next open charges it in full: the loss can only overcharge.
 */
Test(budget_caps, a_settlement_not_yet_written_is_charged_in_full_after_a_crash, .timeout = 60)
{
	struct budget_opts o;
	struct budget *b;
	int fds[2], st;
	pid_t kid;
	char c;

	bt_opts(&o);
	o.clock = NULL;
	cr_assert_eq(pipe(fds), 0);
	kid = fork();
	cr_assert_geq(kid, 0);
	if (!kid) {
		struct budget_usage rows[8];
		char line[512], err[256];
		struct budget_request rq = bt_request("a1", BUDGET_ANTHROPIC, "/v1/messages", small_body);
		struct budget_ticket *t;
		struct budget_note note;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		b = budget_open(&o, err, sizeof(err));
		if (!b || budget_reserve(b, &rq, &t, &note, line, sizeof(line)))
			_exit(1);
		budget_response(t, 200, NULL, 0);
		budget_response(t, 200, small_resp, strlen(small_resp));
		budget_settle(b, t, BUDGET_END_COMPLETE, &note);
		memset(rows, 0, sizeof(rows));
		budget_report(b, "a1", report_row, rows);
		/* in memory the charge is the usage (600), at once */
		if (rows[0].dollars_day.used != 600 || rows[0].dollars_day.reserved != 0)
			_exit(2);
		if (write(fds[1], "s", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	cr_assert_eq(read(fds[0], &c, 1), 1);
	kill(kid, SIGKILL);
	cr_assert_eq(waitpid(kid, &st, 0), kid);
	cr_assert(WIFSIGNALED(st), "the child failed before the kill: %d", WEXITSTATUS(st));
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'settle'"), 0, "the row was not written yet");
	b = bt_open(&o);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT how = 'lost' FROM ledger WHERE kind = 'settle'"), 1);
	cr_expect_eq(bt_sql("SELECT micros FROM ledger WHERE kind = 'settle'"),
		     bt_sql("SELECT micros FROM ledger WHERE kind = 'reserve'"));
	/* control: the same exchange in a process that lives writes its row at close, at the usage */
	b = bt_open(&o);
	cr_assert_eq(one(b, "a1", BUDGET_ANTHROPIC).charged, 600);
	budget_close(b);
}

/* A month of ledger is kept; the caps read the last day of it, found by bisecting ids (no time index). */
Test(budget_caps, replay_reads_the_last_day_and_prunes_the_month)
{
	struct budget_usage rows[8];
	struct budget_opts o;
	struct budget *b;

	bt_opts(&o);
	b = bt_open(&o);
	for (int i = 0; i < 40; i++) { /* one request a day for 40 days, then 5 in the last hour */
		bt_now = T0 + (uint64_t)i * 86400 * SEC;
		one(b, "a1", BUDGET_ANTHROPIC);
	}
	for (int i = 0; i < 5; i++) {
		bt_now = T0 + 39ULL * 86400 * SEC + (uint64_t)(i + 1) * 60 * SEC;
		one(b, "a1", BUDGET_ANTHROPIC);
	}
	budget_close(b);
	b = bt_open(&o); /* replays, prunes what is older than 31 days */
	memset(rows, 0, sizeof(rows));
	budget_report(b, "a1", report_row, rows);
	cr_expect_eq(rows[0].requests_day.used, 6, "the day holds the 40th day's request and the 5 after it");
	cr_expect_eq(rows[0].requests_hour.used, 6);
	cr_expect_eq(rows[0].dollars_day.used, 6 * 600);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT min(time_ns) = 1764547200000000000 + 9 * 86400000000000 FROM ledger"), 1);
	cr_expect_eq(bt_sql("SELECT count(*) FROM ledger WHERE kind = 'reserve'"), 31 + 5); /* days 9..39, and the 5 */
	/* ids keep growing after a prune */
	b = bt_open(&o);
	one(b, "a1", BUDGET_ANTHROPIC);
	budget_close(b);
	cr_expect_eq(bt_sql("SELECT max(id) FROM ledger"), 2 * 46);
}
