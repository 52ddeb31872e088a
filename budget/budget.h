/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * budget.h - spend caps: money is a boundary too.
 *
 * The broker asks budget/ before it forwards a credentialed request and tells
 * it afterwards; budget/ knows nothing of sockets or kits.  For each request:
 *
 *   budget_classify()  which usage format the (provider, method, path) speaks
 *                      (none: refused, unless the kit gives it a fixed price);
 *   budget_reserve()   the worst case of the request (input from the body
 *                      size, output from its max-tokens field or the model's
 *                      maximum), checked against every cap and written to the
 *                      ledger before anything is forwarded, or one `latch:`
 *                      line for a 429;
 *   budget_response()  every response chunk as it passes (never buffered:
 *                      a bounded scanner keeps only the usage numbers);
 *   budget_settle()    the charge: the real usage priced from the table, or
 *                      the full reservation when the response was cut, had no
 *                      usage, failed upstream or could not be read.
 *
 * Caps are per provider, per sandbox and host-wide: requests in the last
 * hour, requests in the last 24 hours, and dollars in the last 24 hours
 * (rolling windows, docs/budget.md).  Money is integer micro-dollars
 * everywhere; no float holds an amount.
 *
 * Threads and processes: a struct budget belongs to one thread.  Several
 * processes (or threads, each with its own struct budget) may share one
 * ledger: every reservation is decided inside one sqlite write transaction,
 * after reading what the others wrote, so caps hold across all of them.  The
 * ledger, not memory, is the truth; at open it is replayed (the last 24 h),
 * and the open reservations of processes that died are settled in full.
 *
 * latchd is the ledger's sole writer (budget_opts.sole_writer: a lock on the
 * file keeps every other writer out while it runs): its decisions are made
 * in memory, which then holds everything the ledger holds, and each row is
 * appended to the ledger's memory-mapped journal before budget_reserve()
 * returns (budget_opts.journal: it survives kill -9, as a WAL commit does),
 * folded into sqlite by budget_tick(), or by a thread of budget/'s own
 * (budget_opts.fold_thread, latchd's: its thread never runs sqlite).  A sole writer without the journal
 * writes the reservations of one turn by one commit (budget_reserve_later(),
 * then budget_commit()) and forwards only after it.
 */
#ifndef LATCH_BUDGET_H
#define LATCH_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/common.h"

enum budget_provider {
	BUDGET_OPENAI,
	BUDGET_ANTHROPIC,
	BUDGET_GEMINI,
	BUDGET_OTHER, /* an OpenAI-compatible server; uncapped unless configured */
	BUDGET_PROVIDERS,
};
const char *budget_provider_name(enum budget_provider p);
/* "openai", "anthropic", "gemini", "other": 0, or -EINVAL. */
int budget_provider_parse(const char *s, enum budget_provider *p);

#define BUDGET_HOUR_NS (3600ULL * 1000000000ULL)
#define BUDGET_DAY_NS (86400ULL * 1000000000ULL)
#define BUDGET_MICROS 1000000LL /* one dollar */

/* A cap's value: a number (0 refuses everything), or one of these. */
#define BUDGET_NO_CAP (-1)
#define BUDGET_INHERIT (-2) /* in a credential's override: latch.conf's value stands */

struct budget_caps {
	int64_t requests_per_hour; /* requests in any 3600 s */
	int64_t requests_per_day; /* requests in any 86400 s */
	int64_t micros_per_day; /* micro-dollars charged or reserved in any 86400 s */
};

/* ---- requests ---- */

/* How a response reports its usage, from the provider and the path. */
enum budget_format {
	BUDGET_FORMAT_UNKNOWN, /* no usage is read: charged the full reservation */
	BUDGET_FORMAT_FREE, /* model lists, token counting: counted, charged nothing */
	BUDGET_FORMAT_OPENAI_CHAT, /* /v1/chat/completions, /v1/completions */
	BUDGET_FORMAT_OPENAI_EMBEDDINGS, /* /v1/embeddings */
	BUDGET_FORMAT_OPENAI_RESPONSES, /* /v1/responses */
	BUDGET_FORMAT_ANTHROPIC, /* /v1/messages */
	BUDGET_FORMAT_GEMINI, /* /v1beta/models/M:generateContent and :streamGenerateContent */
	BUDGET_FORMAT_FIXED, /* an endpoint the kit prices (budget_request.fixed): its price, whatever the usage */
};
const char *budget_format_name(enum budget_format f);

#define BUDGET_MODEL_MAX 64

struct budget_class {
	enum budget_format format;
	char model[BUDGET_MODEL_MAX + 1]; /* from the path (Gemini), else "" */
};

/*
 * Which usage format a request speaks.  The provider comes from the
 * credential, never from the request.  The query string is ignored; the
 * method and the path are compared exactly, so a case or spelling trick
 * (`post`, `/V1/messages`, `//v1/messages`, `/v1/messages;x`, `%2f`) lands on
 * BUDGET_FORMAT_UNKNOWN, which budget_reserve() refuses unless the kit
 * prices that endpoint (budget_request.fixed).  Always 0.
 */
int budget_classify(enum budget_provider p, const char *method, const char *path, struct budget_class *out);

/*
 * An endpoint the meter has no usage for (a batch, a file upload, images,
 * video), allowed by the kit at a fixed price a request (a credential's
 * priced_endpoints): reserved and charged that price against the caps.
 */
struct budget_fixed {
	const char *method; /* compared exactly */
	const char *path; /* compared exactly, the query left out; '*' is one or more bytes other than '/' */
	int64_t micros; /* the price of one request */
};

/* Does a request's method and path (its query ignored) match f?  A path with two readings matches nothing. */
bool budget_fixed_match(const struct budget_fixed *f, const char *method, const char *path);

/*
 * Tools that have the provider itself fetch from a URL the request chooses:
 * the guest's data would leave through the provider, past the sandbox's
 * profile.  A request that asks for one is refused unless its credential
 * allows it (budget_request.allow_tools, the kit's allow_provider_tools):
 *   web_fetch    Anthropic's web fetch tool (a tool whose type starts "web_fetch")
 *   mcp          a remote MCP server: Anthropic's mcp_servers, an OpenAI Responses tool of type "mcp"
 *   url_context  Gemini's URL context tool (url_context, urlContext)
 */
enum budget_fetch_tool {
	BUDGET_TOOL_WEB_FETCH,
	BUDGET_TOOL_MCP,
	BUDGET_TOOL_URL_CONTEXT,
	BUDGET_FETCH_TOOLS,
};
#define BUDGET_TOOL_BIT(t) (1u << (t))
/* "web_fetch", "mcp", "url_context". */
const char *budget_fetch_tool_name(enum budget_fetch_tool t);
/* 0, or -EINVAL. */
int budget_fetch_tool_parse(const char *s, enum budget_fetch_tool *t);

struct budget_request {
	const char *sandbox; /* 1-32 of a-z 0-9 - */
	enum budget_provider provider; /* the credential's */
	const char *method, *path; /* as forwarded (the query is ignored) */
	const void *body; /* the complete request body */
	size_t body_len;
	const struct budget_caps *caps; /* the credential's per-sandbox overrides, or NULL */
	const struct budget_fixed *fixed; /* the endpoints the kit prices (n_fixed of them), or NULL */
	size_t n_fixed;
	unsigned allow_tools; /* BUDGET_TOOL_BIT()s of the fetching tools the credential allows */
	const char *credential; /* the route's name, for a refusal's fix (NULL: "the route") */
};

/* How an exchange ended: the broker engine's four endings. */
enum budget_end {
	BUDGET_END_COMPLETE, /* the whole response reached the guest */
	BUDGET_END_GUEST_CUT, /* the guest went away first */
	BUDGET_END_UPSTREAM_CUT, /* the upstream closed or reset mid-response */
	BUDGET_END_ERROR, /* TLS, timeout or protocol error */
};

/*
 * What the caller writes to the audit log (budget/ does not use audit/):
 * kind "budget", decision and reason as given, fields as the JSON object
 * text.  decision is "" when there is nothing to log.  warning, when not "",
 * is one line for latchd's log and the audit log (a model missing from the
 * price table, named once per model).
 */
struct budget_note {
	char decision[16]; /* "refuse", "settle" or "" */
	char reason[64]; /* budget.refused.dollars_per_day, budget.settled.cut_guest, ... */
	char fields[1024];
	char warning[384];
	/*
	 * Set by the caller of budget_settle(), which keeps them: asked before
	 * a settlement note is written, so that one an audit rate limit would
	 * drop costs nothing (NULL: always written).
	 */
	bool (*want)(void *arg);
	void *want_arg;
};

struct budget;
struct budget_ticket; /* one reserved request, from budget_reserve() to budget_settle() */

/*
 * Reserve the worst case of rq.  0: reserved and written to the ledger;
 * forward the request and hand *ticket to budget_response() and
 * budget_settle().  -EDQUOT: a cap refuses it; -EPROTO: its body can't
 * bound it (a metered endpoint's body that is not one JSON object latch can
 * read, or a count of outputs that is not a number); -EPERM: the route does
 * not allow it, however long one waits (an endpoint the meter can't price
 * and the kit does not, or a tool that fetches, budget_fetch_tool); -EIO (or another
 * -errno): the ledger can't be written, so nothing may be forwarded.  On
 * refusal, line
 * holds the one `latch: ...` line for the 429's body (naming the cap, where
 * it stands and when it frees) and note says what to audit.
 */
int budget_reserve(struct budget *b, const struct budget_request *rq, struct budget_ticket **ticket,
		   struct budget_note *note, char *line, size_t linelen);

/*
 * The same decision, for a sole writer (budget_opts.sole_writer; -EINVAL
 * otherwise): made in memory and counted against the caps at once, but the
 * reservation's row is written by the next budget_commit().  Forward the
 * request only after that commit returned 0.  A ticket whose commit failed
 * is void: budget_settle() frees it and charges nothing (nothing was
 * forwarded).  With budget_opts.journal it is budget_reserve(): the row is
 * in the journal when it returns.
 */
int budget_reserve_later(struct budget *b, const struct budget_request *rq, struct budget_ticket **ticket,
			 struct budget_note *note, char *line, size_t linelen);

/*
 * Write every reservation decided since the last commit in one write
 * transaction, with the settlements waiting for a row when eight or more
 * wait or one of them ends a reservation of this commit (else
 * budget_tick() writes them).  0: the held
 * requests may be forwarded.  -errno: the ledger can't be written; those
 * reservations are undone (their tickets void) and line holds the one
 * `latch:` line for their 429s, note what to audit.  Nothing to write: 0.
 * With budget_opts.journal: 0, nothing to do (the tick folds the journal).
 */
int budget_commit(struct budget *b, struct budget_note *note, char *line, size_t linelen);

/*
 * With budget_opts.journal: fold the journal into the ledger now if it
 * holds at least min records (latchd calls it after a request's end, so
 * that the tick never folds a second's worth at once and stalls the loop
 * for it).  0, or -errno when the fold failed (the rows stay in the
 * journal for the next one).
 */
int budget_fold(struct budget *b, unsigned min);

/*
 * The response as it passes: data NULL and len 0 with the status when the
 * head arrives, then each decoded body chunk.  Nothing is buffered beyond a
 * bounded scanner state.
 */
void budget_response(struct budget_ticket *t, int status, const void *data, size_t len);

/*
 * Settle and free t.  The charge is the real usage priced from the table
 * when the response was complete and carried readable usage; a 4xx answer
 * costs nothing; everything else is charged the full reservation.  note is
 * filled when the charge differs from the reservation.  The caps see the
 * charge at once; its ledger row is written by a later commit (with the
 * next reservations once a few settlements wait) or by budget_tick(),
 * whichever comes first, so a request costs one commit, not two.  A process that dies before then leaves the reservation
 * open, and the next open charges it in full: the only way that loss can go.
 * Always 0.
 */
int budget_settle(struct budget *b, struct budget_ticket *t, enum budget_end how, struct budget_note *note);

/* ---- the module ---- */

struct budget_opts {
	const char *ledger; /* NULL: $LATCH_ROOT/var/lib/latch/ledger.db */
	const char *prices; /* NULL: $LATCH_ROOT/etc/latch/prices (missing: the built-in rows alone) */
	struct budget_caps sandbox[BUDGET_PROVIDERS]; /* each sandbox's caps (latch.conf) */
	struct budget_caps host[BUDGET_PROVIDERS]; /* all sandboxes together (latch.conf) */
	bool sync_full; /* PRAGMA synchronous=FULL (an fsync per commit) instead of NORMAL */
	bool readonly; /* `latch usage`: read the ledger, never write it; -ENOENT when missing */
	uid_t owner; /* the ledger and its directory must belong to it: 0 unless a test says so */
	/*
	 * The only process that writes the ledger (latchd): budget_open() takes
	 * an exclusive lock on the file and fails while another writer holds
	 * one (other writers take a shared lock; readers none), decisions are
	 * not read back from the ledger, and budget_reserve_later() is allowed.
	 */
	bool sole_writer;
	/*
	 * Checkpoints (the WAL copied into the database, with its fsyncs) run
	 * on a thread of budget/'s own, woken by the WAL's growth and by
	 * budget_tick(), instead of on the caller's: latchd's loop never waits
	 * for them.
	 */
	bool checkpoint_thread;
	/*
	 * A sole writer's rows are appended to a memory-mapped journal beside
	 * the ledger (LEDGER.journal) instead of being committed to sqlite:
	 * budget_reserve() and budget_reserve_later() return with the row
	 * there (it survives kill -9), budget_commit() has nothing to do, and
	 * budget_tick() folds the journal into the ledger.  Any writer folds
	 * what a journal holds at open; readers read it beside the ledger.
	 */
	bool journal;
	/*
	 * With journal, sole_writer and checkpoint_thread: the journal is
	 * folded by a thread of budget/'s own (folder.c) while the caller's
	 * thread appends to a second one (LEDGER.journal2); budget_fold() swaps
	 * them when the thread is done.  The caller's thread never runs sqlite.
	 */
	bool fold_thread;
	uint64_t (*clock)(void *arg); /* ns since the epoch; NULL: CLOCK_REALTIME */
	void *clock_arg;
};

/*
 * latch.conf's budget_* caps into o->sandbox and o->host: what latchd meters
 * with and what `latch usage` shows, read by this one function.
 */
struct latch_conf;
void budget_caps_from_conf(struct budget_opts *o, const struct latch_conf *c);

/*
 * Open the ledger (creating it 0600, WAL mode), load the price table,
 * replay the last 24 hours and settle in full the open reservations of
 * processes that died.  NULL with errno and one line in err.
 */
struct budget *budget_open(const struct budget_opts *o, char *err, size_t errlen);
void budget_close(struct budget *b);

/*
 * Call from a timer (latchd's tick, about once a second): writes the
 * settlements still pending, then copies the ledger's WAL into its database
 * file with the fsyncs that takes (or has the checkpoint thread do it), so
 * that no request pays for a checkpoint (sqlite's own is only a backstop,
 * at about 40 MB of WAL).  0 or -errno.
 */
int budget_tick(struct budget *b);

/* Re-read the price table (SIGHUP); on error nothing changes.  0 or -errno with `file:line:` in err. */
int budget_reload_prices(struct budget *b, char *err, size_t errlen);
/* latch.conf's caps changed (SIGHUP): the next decisions are held to these (budget_opts' arrays). */
void budget_set_caps(struct budget *b, const struct budget_caps sandbox[BUDGET_PROVIDERS],
		     const struct budget_caps host[BUDGET_PROVIDERS]);

/* ---- reporting ---- */

struct budget_cap_state {
	int64_t cap; /* BUDGET_NO_CAP: none */
	int64_t used; /* requests, or micro-dollars charged */
	int64_t reserved; /* micro-dollars in open reservations (0 for request caps) */
	int64_t left; /* cap - used - reserved, never below 0; BUDGET_NO_CAP without a cap */
	uint64_t frees_ns; /* when the oldest request counted leaves the window; 0: nothing counted */
};

struct budget_usage {
	char sandbox[LATCH_NAME_MAX + 1]; /* "" for the host-wide caps */
	enum budget_provider provider;
	struct budget_cap_state requests_hour, requests_day, dollars_day;
};

/*
 * Call fn for each (sandbox, provider) with requests in the last 24 hours
 * (only sandbox's when it is not NULL; its capped providers even without
 * requests), then for each provider's host-wide caps.  A sandbox's caps are
 * the ones its last reservation was held to (a credential may override
 * latch.conf's).  fn's non-zero return stops the walk and is returned.
 */
int budget_report(struct budget *b, const char *sandbox, int (*fn)(const struct budget_usage *u, void *arg), void *arg);

/* The time the ledger is at now: the clock, never before the ledger's last row. */
uint64_t budget_now(struct budget *b);

/* ---- money and prices ---- */

/*
 * "$5", "$4.93", "$0.0031": dollars with cents, or more decimals when the
 * amount has them (never rounded, so a cap is never shown as reached early).
 */
void budget_format_dollars(int64_t micros, char *buf, size_t len);
/* "2026-12-02T00:00:00Z" for ns since the epoch, rounded up to the second. */
void budget_format_time(uint64_t ns, char *buf, size_t len);

/* One row of the price table; prices are micro-dollars per million tokens (dollars per token, x 10^-6). */
struct budget_price {
	enum budget_provider provider;
	char model[BUDGET_MODEL_MAX + 1];
	int64_t above; /* 0, or: these prices apply when a request's input passes this many tokens */
	int64_t input, output, cached_input, cache_write;
	/* image tokens (an `image` line of the table; else the text prices): gpt-image-1, Gemini's image models */
	int64_t image_input, image_output;
	int64_t max_output; /* the most output tokens one request can be billed for */
	int64_t context; /* the most input tokens one request can be billed for */
	int64_t per_search; /* pico-dollars a web search (a grounding query on Gemini): the row's fee line, or 0 */
	int64_t per_grounded; /* pico-dollars a request that searched at all (Gemini 2.x's grounded prompt), or 0 */
	int64_t per_file_search; /* pico-dollars a file search (OpenAI Responses' file_search tool), or 0 */
	int64_t per_image; /* pico-dollars an image of OpenAI Responses' image_generation tool, or 0 */
	int64_t per_container_gb; /* pico-dollars a code interpreter container a GB of its memory (OpenAI), or 0 */
	bool builtin;
};

/*
 * A per-use fee the meter counts (a `fee PROVIDER TOOL PRICE` line of the
 * price table): the server-side web search of Anthropic, whose usage
 * reports its searches (usage.server_tool_use.web_search_requests), of
 * OpenAI's Responses, whose output has a web_search_call item a search, and
 * Gemini's grounding with Google Search, whose candidates' groundingMetadata
 * list the queries it ran (webSearchQueries).  Gemini bills grounding two
 * ways: per query from Gemini 3 on (google_search), per grounded prompt
 * before (grounded_prompt: a request that ran any query); a Gemini model
 * of neither family is charged the dearer of the two.  OpenAI's Responses
 * also bill a file search (file_search: a file_search_call item of the
 * output), an image (image_generation: an image_generation_call item) and
 * a code interpreter container (code_interpreter: priced a
 * container of 1 GB, a larger one at its GB times that).
 */
enum budget_fee_kind {
	BUDGET_FEE_ANTHROPIC_WEB_SEARCH,
	BUDGET_FEE_OPENAI_WEB_SEARCH,
	BUDGET_FEE_GEMINI_GOOGLE_SEARCH,
	BUDGET_FEE_GEMINI_GROUNDED_PROMPT,
	BUDGET_FEE_OPENAI_FILE_SEARCH,
	BUDGET_FEE_OPENAI_IMAGE_GENERATION,
	BUDGET_FEE_OPENAI_CODE_INTERPRETER,
	BUDGET_FEES
};

struct budget_fee {
	enum budget_provider provider;
	const char *tool; /* as the line spells it: "web_search", "google_search", "file_search", ... */
	int64_t micros_per_1000; /* dollars per 1,000 uses, in micro-dollars */
	bool builtin;
};

/* Call fn for each fee in force. */
int budget_fees_each(struct budget *b, int (*fn)(const struct budget_fee *f, void *arg), void *arg);

/* Call fn for each row in force (built-ins and the file's), in table order. */
int budget_prices_each(struct budget *b, int (*fn)(const struct budget_price *p, void *arg), void *arg);

/*
 * Parse one line of the price table (the format is in docs/budget.md):
 * `PROVIDER MODEL[>TOKENS] INPUT OUTPUT CACHED_INPUT CACHE_WRITE MAX_OUTPUT CONTEXT`.
 * 0 with *row filled, 1 for a blank or comment line, or -EINVAL with one
 * line in err that names the field (the caller adds file:line).
 */
int budget_price_parse_line(const char *line, struct budget_price *row, char *err, size_t errlen);

/* Tokens of one request, split the way they are billed. */
struct budget_tokens {
	int64_t input; /* uncached input, at the input price */
	int64_t cached; /* cache reads, at the cached-input price */
	int64_t cache_write; /* cache writes, at the cache-write price */
	int64_t cache_write_1h; /* Anthropic's 1-hour cache writes: twice the input price */
	int64_t output; /* output, reasoning included (image output apart) */
	int64_t image_input; /* input image tokens, uncached, at the row's image_input (inside no other count) */
	int64_t image_output; /* output image tokens, at the row's image_output (inside no other count) */
	/*
	 * Server-side web searches (Anthropic, OpenAI Responses, Gemini's
	 * grounding queries), at the row's per_search, and per_grounded once
	 * when there are any (the dearer of the two is charged); -1 from an
	 * Anthropic usage without server_tool_use (a stream whose
	 * message_delta leaves it out): budget_settle() then charges the
	 * searches reserved.
	 */
	int64_t web_searches;
	/* OpenAI Responses: file searches (file_search_call items), at the row's per_file_search */
	int64_t file_searches;
	/* OpenAI Responses: images its image_generation tool made (image_generation_call items), at per_image */
	int64_t images;
	/*
	 * OpenAI Responses: the GB of the code interpreter containers it may
	 * have started, at the row's per_container_gb; -1 when the output ran
	 * code (a code_interpreter_call item): budget_settle() then charges the
	 * containers reserved, since the output does not say which were new.
	 */
	int64_t container_gb;
};

/*
 * The price of tokens at row, in micro-dollars, rounded up once from exact
 * integer arithmetic (pico-dollars).  At most BUDGET_COST_MAX, where the
 * pico-dollar sum saturates (about $9.2 million): a charge that large is
 * refused by any dollar cap, and the windows' sums of a million of them
 * still can't overflow.
 */
#define BUDGET_COST_MAX (INT64_MAX / BUDGET_MICROS)
int64_t budget_cost(const struct budget_price *row, const struct budget_tokens *t);

#endif
