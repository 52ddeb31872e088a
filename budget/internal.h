/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * internal.h - what budget/'s files share; private to the module (budget.h
 * is the public face).  The pieces, one file each:
 *
 *   scan.c     a streaming JSON scanner that hands over only the values at
 *              watched paths, and an SSE scanner on top of it: bounded
 *              memory, never a copy of the stream;
 *   usage.c    the three providers' usage formats, streamed or not;
 *   classify.c classification of (provider, method, path), and the names
 *              of providers, formats and tools;
 *   request.c  what a request body says about its worst case;
 *   prices.c   the price table's reader (built-ins and /etc/latch/prices)
 *              and the integer arithmetic of a charge;
 *   prices_builtin.c  the built-in rows, as text in the file's format;
 *   ledger.c   the sqlite ledger: rows, replay, the write transaction;
 *   window.c   the rolling windows' tallies and the caps they are held to;
 *   budget.c   reservations and settlements;
 *   life.c     open (replay, dead owners), the tick, close;
 *   commit.c   a sole writer's reservations, decided in memory and written
 *              in groups (one commit per turn of latchd's event loop);
 *   journal.c  or, with budget_opts.journal, appended to a memory-mapped
 *              journal and folded into the ledger by budget_tick();
 *   report.c   refusal lines, audit notes and budget_report().
 */
#ifndef LATCH_BUDGET_INTERNAL_H
#define LATCH_BUDGET_INTERNAL_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "budget/budget.h"

/* ---- scan.c: the streaming JSON scanner ---- */

#define JSCAN_DEPTH_MAX 256 /* deeper is refused as unreadable */
#define JSCAN_KEYS 12 /* levels whose member key is remembered (watch paths are shallower) */
#define JSCAN_KEY_MAX 32 /* longer keys are remembered as "unmatchable" */
#define JSCAN_CAPTURE 4096 /* a watched value longer than this is reported as too long */
#define JSCAN_WATCH_MAX 64
/* A set of watches of one list, a bit each (index in the list). */
typedef uint64_t jscan_mask;

/*
 * A watched value: watch is its index in the watch list, text/len its JSON
 * text (NULL when it was longer than JSCAN_CAPTURE).
 */
typedef void (*jscan_value_cb)(void *arg, int watch, const char *text, size_t len);

/*
 * Watch paths: "usage" (a top-level member), "message.usage", "*.usageMetadata"
 * ('*' is any element of an array), "**.file_id" (a member of that name at
 * any depth up to JSCAN_KEYS).  A leading '?' asks only where a value starts:
 * the callback gets its first byte ('{', '[', '"', 'n'...) and nothing is
 * captured, so the values inside it can be watched.  A list is compiled once
 * (budget_jscan_compile) and shared by every scan that reads with it.
 */
struct jscan_paths {
	int n_watch;
	struct jscan_watch {
		int8_t nseg; /* -1: "**.KEY", seg[0] is KEY; 0: matches nothing */
		uint8_t len[JSCAN_KEYS];
		const char *seg[JSCAN_KEYS];
	} w[JSCAN_WATCH_MAX];
	jscan_mask presence; /* the '?' watches, a bit each */
	jscan_mask top; /* the watches of at least one segment: live at depth 0 */
	jscan_mask ends_at[JSCAN_KEYS + 1]; /* the watches of d segments */
	jscan_mask star[JSCAN_KEYS]; /* the watches whose segment d is "*" */
	jscan_mask any; /* the "**.KEY" watches */
	/* by key length: the watches whose segment d is that long, and the "**.KEY" ones whose KEY is */
	jscan_mask seg_len[JSCAN_KEYS][JSCAN_KEY_MAX + 1];
	jscan_mask any_len[JSCAN_KEY_MAX + 1];
	jscan_mask same[JSCAN_KEYS]
		       [JSCAN_WATCH_MAX]; /* the watches whose segment d reads as watch w's: one compare for all */
};

struct jscan {
	const struct jscan_paths *paths;
	jscan_value_cb cb;
	void *arg;
	int state;
	int depth;
	bool is_array[JSCAN_DEPTH_MAX]; /* per open container: a byte, not a bit (read at every comma) */
	/*
	 * live[d]: the watches whose first d segments name the path to depth d,
	 * narrowed as each key ends or array opens; any_hit[l]: the "**.KEY"
	 * watch that level l's key names, or -1.
	 */
	jscan_mask live[JSCAN_KEYS + 1];
	int8_t any_hit[JSCAN_KEYS];
	char key[JSCAN_KEY_MAX]; /* the key being read */
	int klen;
	bool key_long; /* longer than JSCAN_KEY_MAX, or escaped: matches nothing */
	bool esc; /* in a string, after a backslash */
	bool key_escape; /* some key held an escape (\u can spell a watched key's letters): read it decoded */
	int cap_watch; /* -1: not capturing */
	int cap_depth;
	size_t cap_len;
	bool cap_over;
	bool bad; /* not JSON */
	bool done; /* the top-level value is complete */
	char cap[JSCAN_CAPTURE];
};

void budget_jscan_compile(struct jscan_paths *paths, const char *const *watch, int n_watch);
void budget_jscan_init(struct jscan *j, const struct jscan_paths *paths, jscan_value_cb cb, void *arg);
void budget_jscan_feed(struct jscan *j, const char *p, size_t n);
/* The input ended: true when it held exactly one complete JSON value. */
bool budget_jscan_end(struct jscan *j);
/*
 * A captured value that jansson would read as a non-negative integer
 * (0|[1-9][0-9]*, at most 18 digits: no overflow), or as a string of
 * printable ASCII without escapes (*len: its length, the quotes left out):
 * read here without jansson.  False for anything else (a float, an exponent,
 * a sign, a leading zero, an escape, a byte past ASCII), which is jansson's
 * to read.
 */
static inline bool jscan_plain_uint(const char *text, size_t len, int64_t *out)
{
	int64_t v = 0;

	if (!len || len > 18 || (text[0] == '0' && len > 1))
		return false;
	for (size_t i = 0; i < len; i++) {
		if (text[i] < '0' || text[i] > '9')
			return false;
		v = v * 10 + (text[i] - '0');
	}
	*out = v;
	return true;
}
bool budget_jscan_plain_string(const char *text, size_t len, const char **s, size_t *slen);

/* The SSE scanner: lines, fields, events; each event's data goes through a jscan. */
#define SSE_EVENT_MAX 48
#define SSE_FIELD_MAX 8

struct sse;
/* An event is complete: its name ("" when none), whether its data was "[DONE]", whether it was JSON. */
typedef void (*sse_event_cb)(void *arg, const char *event, bool done_marker, bool json_ok);

struct sse {
	sse_event_cb on_event;
	void *arg;
	int state;
	bool cr; /* the last byte was a CR: a following LF ends nothing */
	char field[SSE_FIELD_MAX + 1];
	int flen;
	bool field_long;
	char event[SSE_EVENT_MAX + 1];
	int elen;
	bool has_data;
	size_t data_len;
	char data_head[8];
	bool bom_checked; /* the stream's first bytes were held to a BOM */
	uint8_t bom_len; /* of a BOM's bytes, matched so far */
	uint64_t events;
	struct jscan js; /* per event: reset at its first data line */
};

void budget_sse_init(struct sse *s, const struct jscan_paths *paths, jscan_value_cb cb, sse_event_cb on_event,
		     void *arg);
void budget_sse_feed(struct sse *s, const char *p, size_t n);

/* ---- usage.c: what a response says it cost ---- */

enum usage_result {
	USAGE_OK, /* complete usage read */
	USAGE_NONE, /* the response carried no (final) usage */
	USAGE_BAD, /* the body or its usage could not be read */
	USAGE_ERROR, /* the provider reported an error in a 2xx stream */
};

/* The token counts a usage object may carry, under each provider's names. */
enum usage_field {
	UF_IN,
	UF_OUT,
	UF_CACHED,
	UF_CW,
	UF_CW5M,
	UF_CW1H,
	UF_THOUGHTS,
	UF_TOOL,
	UF_SEARCH,
	UF_IMG_IN, /* Gemini: the IMAGE tokens of promptTokensDetails */
	UF_IMG_OUT, /* and of candidatesTokensDetails */
	UF_N
};

/* One usage object as read: its counts, which of them were present, and whether it was an object. */
struct usage_acc {
	int64_t v[UF_N];
	uint16_t present;
	bool object;
};

struct usage_parser {
	enum budget_format format;
	int mode; /* sniffing, JSON, SSE, or dead */
	z_stream *z;
	bool fed; /* a byte of the body was fed: too late to find a gzip or zlib header */
	struct jscan *js; /* JSON mode */
	struct sse *sse; /* SSE mode */
	/* their memory (4-5 KB each), kept by budget_usage_reuse() for the next exchange of a recycled ticket */
	struct jscan *js_buf;
	struct sse *sse_buf;
	const struct usage_watch *watch; /* the format's watch table */
	/* the event being read (SSE), or the body (JSON) */
	struct usage_acc ev[2]; /* [0]: the usage path; [1]: Anthropic's message_delta usage */
	char type[SSE_EVENT_MAX + 1];
	bool ev_error;
	int64_t ev_calls; /* OpenAI Responses: the event's (or body's) web_search_call output items */
	int64_t ev_file_calls; /* and its file_search_call items */
	int64_t ev_image_calls; /* and its image_generation_call items */
	int64_t ev_code_calls; /* and its code_interpreter_call items */
	/*
	 * Gemini: the search queries of the chunk being read (each candidate's
	 * groundingMetadata.webSearchQueries), and the most any chunk listed: a
	 * stream may repeat a candidate's grounding in several chunks, and the
	 * queries of one grounding are never split.
	 */
	int64_t queries, queries_most;
	/* results so far */
	struct usage_acc run; /* Anthropic's stream: message_start's, updated by each message_delta */
	bool have_usage, final, error, bad, done_marker;
	bool ended; /* a stream's last event was read (message_stop, response.completed, [DONE] after usage) */
	bool tier_dear; /* OpenAI: the response's service_tier says priority (or a tier latch does not know) */
	struct budget_tokens tokens;
};

void budget_usage_init(struct usage_parser *u, enum budget_format f);
/* budget_usage_init() of a parser that was initialised before (or zeroed): its scanners' memory is kept. */
void budget_usage_reuse(struct usage_parser *u, enum budget_format f);
void budget_usage_feed(struct usage_parser *u, const void *data, size_t len);
enum usage_result budget_usage_finish(struct usage_parser *u, struct budget_tokens *out);
/* A stream read to its last event: what may still follow is framing, never usage. */
bool budget_usage_ended(const struct usage_parser *u);
void budget_usage_free(struct usage_parser *u);
const char *budget_usage_result_name(enum usage_result r);

/* ---- request.c: what a request body says ---- */

struct request_facts {
	char model[BUDGET_MODEL_MAX + 1]; /* "" when the body names none (or names it twice) */
	bool object; /* the body starts as a JSON object ('{' after blanks) */
	bool readable; /* the body was one JSON object, read to its end (keys decoded when one is escaped) */
	bool ambiguous; /* a watched member appeared twice */
	int64_t max_output; /* the largest max-tokens field, 0 when none */
	int64_t choices; /* outputs: n or best_of times the prompts, or candidateCount; at least 1 (saturates) */
	bool unbounded; /* a count of outputs that is not a number: the meter can't bound the request */
	bool server_state; /* input held by the provider (previous_response_id, file ids...) */
	int64_t images; /* image parts: each may cost more tokens than its bytes (a URL most of all) */
	bool long_cache; /* Anthropic: a cache write may last an hour, at twice the input price */
	int64_t web_searches; /* the most web searches its tools allow (Anthropic, OpenAI Responses, Gemini; saturates) */
	bool grounding; /* a tool that searches Google (googleSearch, google_search, 1.5's retrieval), in any format */
	int64_t file_searches; /* OpenAI Responses: the most file searches its tools allow */
	int64_t images_generated; /* OpenAI Responses: the most images its image_generation tools may make */
	int64_t container_gb; /* OpenAI Responses: the GB of the code interpreter containers its tools may start */
	unsigned fetch_tools; /* BUDGET_TOOL_BIT()s: tools that have the provider fetch a URL the body chooses */
	bool priority; /* a service_tier other than auto, default or flex: priority processing's prices (OpenAI) */
};

/*
 * A web_search tool without max_uses (Anthropic), a Responses request with
 * one and no max_tool_calls (OpenAI), or a Gemini request that grounds with
 * Google Search (nothing bounds its queries) is reserved this many searches;
 * the searches reported are charged.
 */
#define REQUEST_WEB_SEARCH_USES 20

/*
 * A code interpreter container whose size the request does not say (an
 * existing one named by its id, a memory_limit latch does not know, or a
 * stored prompt's tools) is reserved as OpenAI's largest, 64 GB.
 */
#define REQUEST_CONTAINER_GB_MAX 64

void budget_request_inspect(enum budget_format f, const void *body, size_t len, struct request_facts *out);
/* acc + a * b, held at INT64_MAX: prices, token counts and the counts a body can make huge all saturate. */
static inline int64_t budget_mul_add(int64_t acc, int64_t a, int64_t b)
{
	int64_t m;

	if (acc == INT64_MAX || __builtin_mul_overflow(a, b, &m) || __builtin_add_overflow(acc, m, &acc))
		return INT64_MAX;
	return acc;
}

/* The input a body of body_len bytes is reserved: a token per 2 bytes, and IMAGE_TOKENS an image (saturating). */
int64_t budget_request_input(size_t body_len, const struct request_facts *facts);
/* A model name as latch keeps it: printable, no blanks, at most BUDGET_MODEL_MAX; false otherwise. */
bool budget_request_model_ok(const char *s, size_t len);

/* ---- prices.c ---- */

struct price_table {
	struct budget_price *rows;
	int n;
	/* the index budget_prices_find reads: (provider, model) of each base row, open addressing, row + 1 (0: empty) */
	int *slot;
	uint32_t mask;
	int *next_tier; /* per row: the next long-context row of the same model, from its base row; -1 ends */
	struct budget_price worst[BUDGET_PROVIDERS]; /* the highest price of each kind among a provider's rows */
	bool has_rows[BUDGET_PROVIDERS];
	struct budget_fee fees[BUDGET_FEES]; /* the per-use fees latch counts; tool NULL: none loaded */
	/* the `image` and `snapshot` lines read, resolved once every row is in (budget_prices_load) */
	struct price_line *lines;
	int n_lines;
};

/* The built-in rows, in the file's format (prices_builtin.c). */
extern const char budget_builtin_prices[];
/* OpenAI's priority processing: a documented multiple of the standard prices (docs/budget.md) */
#define PRICES_PRIORITY_TIMES 2
int budget_prices_load(struct price_table *t, const char *path, char *err, size_t errlen);
/* row at OpenAI's priority processing: each token price PRICES_PRIORITY_TIMES over (saturating), fees as they are */
void budget_prices_priority(struct budget_price *row);
void budget_prices_free(struct price_table *t);
/*
 * The row for (provider, model) at input_tokens of input: the row of that
 * exact name (a snapshot line's names have rows of their own, copies of the
 * model's), then its long-context tier when input_tokens passes one.  NULL
 * when the model is not in the table: a dated name it does not list too,
 * which may cost more than the model it is a snapshot of.
 */
const struct budget_price *budget_prices_find(const struct price_table *t, enum budget_provider p, const char *model,
					      int64_t input_tokens);
/* budget_prices_find()'s tier of a base row it returned (input 0: the base row itself), without finding it again. */
const struct budget_price *budget_prices_tier(const struct price_table *t, const struct budget_price *base,
					      int64_t input_tokens);
/* The worst row of a provider: used for a model the table lacks. */
const struct budget_price *budget_prices_worst(const struct price_table *t, enum budget_provider p);
/*
 * An OpenAI model of Chat Completions that searches the web before every
 * answer (gpt-4o-search-preview, gpt-5-search-api: a name with "-search",
 * in the table or not), billed a web search a request beside its tokens;
 * its usage does not say so, so the meter charges the search it reserved.
 */
bool budget_prices_search_model(enum budget_provider p, const char *model);

/* ---- ledger.c ---- */

struct ledger;

struct ledger_row {
	int64_t id;
	uint64_t time_ns;
	int64_t request; /* the reserve row's id */
	bool settle; /* false: a reservation */
	const char *sandbox, *provider, *model, *how;
	int64_t micros;
	struct budget_caps caps; /* reservations: the sandbox caps in force */
	struct budget_tokens tokens;
	const char *owner; /* a reservation's process ("BOOT_ID:PID:STARTTIME"), or NULL */
};

/*
 * lock: 0 (a reader), LOCK_SH (one of several writers) or LOCK_EX (the sole
 * writer): a flock(2) on the file, held until budget_ledger_close(), that keeps a
 * sole writer and any other writer apart (sqlite's own locks are fcntl's;
 * Linux keeps the two apart).
 */
struct ledger *budget_ledger_open(const char *path, bool readonly, bool sync_full, uid_t owner, int lock, char *err,
				  size_t errlen);
void budget_ledger_close(struct ledger *l);
const char *budget_ledger_error(const struct ledger *l);
/* BEGIN IMMEDIATE (the write lock) / COMMIT / ROLLBACK. */
int budget_ledger_begin(struct ledger *l);
int budget_ledger_commit(struct ledger *l);
void budget_ledger_rollback(struct ledger *l);
/* Every row after id, in id order (id order is time order). */
int budget_ledger_each_after(struct ledger *l, int64_t after, int (*fn)(const struct ledger_row *r, void *arg),
			     void *arg);
/* The first row id written at or after time_ns (or the next id when none). */
int64_t budget_ledger_first_since(struct ledger *l, uint64_t time_ns);
/* The time of the last row (0 when empty). */
uint64_t budget_ledger_last_time(struct ledger *l);
/*
 * Append a row with id r->id: the next id, which the caller knows because it
 * has read every row (budget_catch_up) inside this budget_ledger_begin()/budget_ledger_commit().
 * A wrong id fails on the primary key rather than reorder the ledger.
 */
int budget_ledger_insert(struct ledger *l, struct ledger_row *r, const char *owner);
/* The same for n rows in id order (owner in each row), several to a statement. */
#define LEDGER_BATCH 16
int budget_ledger_insert_rows(struct ledger *l, struct ledger_row *rows, size_t n);
/* The owner written with reservation id ("" when none). */
int budget_ledger_owner_of(struct ledger *l, int64_t id, char *buf, size_t len);
#define LEDGER_AUTOCHECKPOINT_PAGES 10000
/* Copy the WAL into the database (PASSIVE: never waits for a reader); a checkpoint thread's ledger: wake it. */
int budget_ledger_checkpoint(struct ledger *l);
/* Checkpoints from a thread of its own from now on (checkpoint.c).  0 or -errno with one line in err. */
int budget_ledger_checkpoint_thread(struct ledger *l, char *err, size_t errlen);

/* The largest row id (0 when empty): the last row folded from a journal. */
int64_t budget_ledger_last_id(struct ledger *l);

/* ---- journal.c: a sole writer's rows on their way to the ledger ---- */

struct journal;
/*
 * LEDGER.journal (which 0) or LEDGER.journal2 (which 1: the second of a
 * fold thread's pair), checked as the ledger is (the owner's, 0600, no
 * symlink) and scanned; readonly (mapped so): NULL in *out when there is
 * none; reader: latch usage's, beside a live latchd (a record being written
 * or emptied is where it stops, not damage).  0 or -errno with one line in
 * err naming the file.
 */
int budget_journal_open(const char *ledger_path, int which, bool readonly, bool reader, uid_t owner,
			struct journal **out, char *err, size_t errlen);
void budget_journal_close(struct journal *j);
const char *budget_journal_path(const struct journal *j);
uint32_t budget_journal_count(const struct journal *j);
bool budget_journal_full(const struct journal *j);
/* The id its first slot holds (of two journals, the older rows are in the one that starts lower). */
int64_t budget_journal_start(const struct journal *j);
/* Append a row whose id follows the last one's (-EINVAL otherwise): -ENOSPC when full. */
int budget_journal_append(struct journal *j, const struct ledger_row *r);
/* The rows with ids after after, in order (a reservation's owner is the journal's writer). */
int budget_journal_each(struct journal *j, int64_t after, int (*fn)(const struct ledger_row *r, void *arg), void *arg);
/* Everything in it is in the ledger: empty it; the next record is id start, written by owner. */
void budget_journal_reset(struct journal *j, int64_t start, const char *owner);

/* checkpoint.c */
struct checkpointer;
typedef struct sqlite3 sqlite3;
struct checkpointer *budget_checkpointer_start(sqlite3 *writer, const char *path, char *err, size_t errlen);
void budget_checkpointer_kick(struct checkpointer *c);
void budget_checkpointer_stop(struct checkpointer *c); /* before the writer's connection closes */
/*
 * pthread_create() with every signal blocked in the new thread (they stay with latchd's loop), the
 * thread at SCHED_IDLE: 0 or an errno.  The fold and the checkpoints are bookkeeping that only has
 * to keep up over seconds, so they take a CPU only when nothing else wants it, and the requests
 * they meter go first.  Whoever must wait for such a thread lends it the normal policy for the
 * wait (budget_thread_idle(t, false)): a fold starved by a busy host never stalls latchd.
 */
int budget_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
/* The thread at SCHED_IDLE (idle) or back at SCHED_OTHER; best effort: either is correct, one is slower. */
void budget_thread_idle(pthread_t t, bool idle);
/* Delete rows older than time_ns. */
int budget_ledger_prune(struct ledger *l, uint64_t time_ns);

/* This process as a ledger owner: "BOOT_ID:PID:STARTTIME". */
void budget_ledger_self(char *buf, size_t len);
/* Is the process that wrote owner still running? */
bool budget_ledger_owner_alive(const char *owner);

/* ---- budget.c's state (report.c reads it) ---- */

#define BUDGET_KEEP_DAYS 31 /* the ledger keeps a month; the caps read a day of it */
#define WARN_MAX 64 /* models named in a warning; the names come from the guest */
#define TICKET_SPARE 32 /* settled tickets kept for the next reservations (more are freed) */

enum cap_kind { CAP_REQ_HOUR, CAP_REQ_DAY, CAP_DOLLARS_DAY, CAP_KINDS };

/* One reservation in the last 24 hours: open (at its worst case) or settled (at its charge). */
struct charge {
	int64_t id;
	uint64_t time_ns;
	int64_t micros;
	uint32_t sbx;
	uint8_t provider;
	bool open;
};

/* The windows of one (sandbox, provider), or of one provider host-wide. */
struct tally {
	int64_t n_hour, n_day; /* requests reserved in the last hour, day */
	int64_t spent; /* micro-dollars charged by settled requests of the last day */
	int64_t reserved; /* micro-dollars held by open reservations of the last day */
	struct budget_caps caps; /* a sandbox's: what its last reservation was held to */
	bool caps_known;
};

struct sbx {
	char name[LATCH_NAME_MAX + 1];
	struct tally t[BUDGET_PROVIDERS];
};

/* A settlement already in memory whose row goes to the ledger with the next commit. */
struct pending {
	int64_t request;
	int64_t micros;
	const char *how; /* a static word */
	struct budget_tokens tokens;
	uint32_t sbx;
	uint8_t provider;
	char model[BUDGET_MODEL_MAX + 1];
};

/* A sole writer's reservation decided in memory, whose row waits for budget_commit(). */
struct queued {
	struct budget_ticket *t; /* NULL once settled (the exchange ended before the commit) */
	int64_t id; /* the next ids, in order: the rows are written first in the commit */
	uint64_t time_ns;
	int64_t micros;
	struct budget_caps caps;
	uint32_t sbx;
	uint8_t provider;
	const char *how; /* the format's name */
	char model[BUDGET_MODEL_MAX + 1];
};

struct budget {
	struct budget_opts o;
	char ledger_path[PATH_MAX], prices_path[PATH_MAX];
	struct ledger *l;
	struct journal *j; /* budget_opts.journal: rows go here first */
	struct journal *j2; /* LEDGER.journal2: with a fold thread, the one being (or last) folded */
	struct folder *folder; /* budget_opts.fold_thread */
	bool j2_dirty; /* j2 holds rows the ledger may not have yet (handed to the folder, not yet done) */
	char fold_error[256]; /* the folder's last failure ("" after a fold that worked) */
	struct price_table prices;
	struct charge *ch; /* in id order; [day_head, n) is the day, [hour_head, n) the hour */
	size_t n, cap, hour_head, day_head;
	struct sbx *sbx;
	uint32_t n_sbx, cap_sbx;
	uint32_t *index; /* open addressing over sbx: index + 1, 0 is empty */
	uint32_t index_size;
	struct tally host[BUDGET_PROVIDERS];
	struct pending *pending; /* settlements not written yet */
	size_t n_pending, cap_pending;
	struct queued *queue; /* a sole writer's reservations not written yet: the charges at the end of ch */
	size_t n_queue, cap_queue;
	int64_t last_id; /* the last ledger row read */
	uint64_t last_time; /* and the latest time on any row */
	char self[160]; /* this process as a ledger owner */
	char warned[WARN_MAX][BUDGET_MODEL_MAX + 16];
	int n_warned;
	bool warned_full;
	/* settled tickets kept with their scanners' memory: a calloc and a 4.6 KB malloc a request less */
	struct budget_ticket *spare[TICKET_SPARE];
	int n_spare;
};

struct budget_ticket {
	int64_t id; /* the reservation's ledger row */
	uint32_t sbx;
	enum budget_provider provider;
	enum budget_format format;
	bool known; /* the model is in the price table */
	char model[BUDGET_MODEL_MAX + 1];
	int64_t reserved;
	int64_t web_searches; /* reserved with it: the web searches the request's tools allow */
	int64_t container_gb; /* and the GB of code interpreter containers they may start */
	bool tool_fees; /* its worst case holds fees of tools other than web search */
	bool priority; /* OpenAI: the request asked a dearer service_tier: reserved and charged at priority's prices */
	int status;
	bool queued; /* its row waits for budget_commit() */
	bool void_; /* that commit failed: never forwarded, charged nothing */
	struct usage_parser usage;
};

/* Why a reservation did not fit. */
struct refusal {
	bool host;
	enum cap_kind kind;
	int64_t cap, used, reserved, need;
	uint64_t frees_ns; /* 0: never */
	const char *sandbox, *model;
	enum budget_provider provider;
	enum budget_format format;
	bool known;
	int64_t web_searches; /* of need */
	bool tool_fees; /* need holds fees of tools other than web search */
};

uint64_t budget_clock_realtime(void *arg);
/* A zeroed ticket (a spare one, its scanners' memory kept), or NULL; and back when settled or undone. */
int budget_sbx_find(struct budget *b, const char *name, bool create);
void budget_expire(struct budget *b, uint64_t now);
int budget_catch_up(struct budget *b);
int budget_catch_up_journal(struct budget *b);
const char *budget_cap_name(enum cap_kind k);
int64_t budget_cap_value(const struct budget_caps *c, enum cap_kind k);
/* The caps of provider P for a sandbox: the configured ones, with OV's where it sets them. */
struct budget_caps budget_caps_in_force(const struct budget *b, enum budget_provider p, const struct budget_caps *ov);
/* The first sandbox cap, then host cap, NEED does not fit under (*r says which); false when it fits. */
bool budget_check_caps(struct budget *b, int sbx, enum budget_provider p, const struct budget_caps *caps, int64_t need,
		       struct refusal *r);
bool budget_charge_matches(const struct charge *c, int sbx, enum budget_provider p);
void budget_refusal_text(struct budget *b, const struct refusal *r, struct budget_note *note, char *line,
			 size_t linelen);
void budget_charge_settle(struct budget *b, int64_t id, int64_t micros);
struct pending *budget_queue_pending(struct budget *b, int64_t request, int64_t micros, const char *how,
				     const struct budget_tokens *tok, uint32_t sbx, enum budget_provider p,
				     const char *model);
/* Rows on their way to the ledger, LEDGER_BATCH to a statement (their strings must outlive the flush). */
struct row_batch {
	struct ledger *l; /* the ledger they go to */
	struct ledger_row r[LEDGER_BATCH];
	size_t n;
};
int budget_batch_add(struct row_batch *rb, const struct ledger_row *r);
int budget_batch_flush(struct row_batch *rb);
/* The ledger's and its journal's file: the owner's, 0600, regular; -ENOENT (err untouched) when missing and !create. */
int budget_ledger_file_check(const char *what, const char *path, bool create, uid_t owner, char *err, size_t errlen);
/* The ledger row of a settlement (its strings stay p's and b's). */
struct ledger_row budget_settle_row(const struct budget *b, const struct pending *p, int64_t id, uint64_t now);
int budget_write_pending(struct budget *b, struct row_batch *rb, int64_t *next, uint64_t now);
/* commit.c: the sole writer's reservations, held in memory until one commit writes them. */
int budget_charge_add(struct budget *b, int64_t id, uint64_t time_ns, int sbx, enum budget_provider p, int64_t micros);
/* Take the newest charge out of the windows again (its row was never written). */
int budget_queue_reservation(struct budget *b, struct budget_ticket *t, int sbx, uint64_t now,
			     const struct budget_caps *caps, const char *how);
void budget_queue_forget(struct budget *b, struct budget_ticket *t);
/* A body that can't bound its request: the refusal's line and note; -EPROTO. */
int budget_body_refusal(struct budget_note *note, const char *why, const struct budget_request *rq,
			enum budget_format f, char *line, size_t linelen);
/* An endpoint neither the meter nor the kit prices: the refusal's line and note; -EPERM. */
int budget_endpoint_refusal(struct budget_note *note, const struct budget_request *rq, char *line, size_t linelen);
/* A tool that fetches (the lowest bit of tools) the credential does not allow: the line and note; -EPERM. */
int budget_tool_refusal(struct budget_note *note, const struct budget_request *rq, enum budget_format f, unsigned tools,
			char *line, size_t linelen);
int budget_ledger_refusal(struct budget *b, struct budget_note *note, char *line, size_t linelen, int ret);
/* budget_commit(); all: the settlements too, however few (the tick, close) */
int budget_commit_rows(struct budget *b, bool all, struct budget_note *note, char *line, size_t linelen);
/* life.c: the journal's rows (and settlements it could not take) into the ledger in one transaction. */
int budget_journal_fold(struct budget *b, bool reset);
/* One journal's rows after the ledger's last id into l, in one transaction (no reset): any thread that owns l. */
int budget_journal_fold_into(struct ledger *l, struct journal *j);
/* b's journals, the one holding the older rows first (NULL where there is none). */
void budget_journals_in_order(const struct budget *b, struct journal *js[2]);
/* With a fold thread: room in b->j, waiting for the folder if it must (a full journal). */
int budget_journal_make_room(struct budget *b);

/*
 * folder.c: a fold thread (budget_opts.fold_thread).  latchd's thread
 * appends to one journal while this thread folds the other into the
 * ledger through the writer's connection, which only it touches while a
 * fold runs; the two swap when the folder is done (budget_fold()).
 */
struct folder;
struct folder *budget_folder_start(struct ledger *l, char *err, size_t errlen);
/* Hand j over to be folded: the caller neither writes nor resets it, nor uses l, until budget_folder_done(). */
void budget_folder_give(struct folder *f, struct journal *j);
/* Is the last journal given folded (or failed)?  *result: its fold's 0 or -errno, msg its error. */
bool budget_folder_done(struct folder *f, int *result, char *msg, size_t msglen);
/* Wait until budget_folder_done() (a full journal on the request's path: the folder is behind). */
void budget_folder_wait(struct folder *f);
/* Wait for the fold under way, then end the thread. */
void budget_folder_stop(struct folder *f);
/* commit.c: a settlement's row to the journal (folding it first when full). */
int budget_journal_settle(struct budget *b, const struct pending *p);
int budget_journal_reserve(struct budget *b, struct budget_ticket *t, int sbx, uint64_t now,
			   const struct budget_caps *caps, const char *how);
/*
 * A note emptied: its strings "" (all anyone reads), want kept; a memset of
 * its 1.5 KB cost ~200 instructions, twice a request.
 */
static inline void note_clear(struct budget_note *note)
{
	note->decision[0] = note->reason[0] = note->fields[0] = note->warning[0] = '\0';
}

/* A note emptied for a call that asks no one whether it is wanted. */
static inline void note_reset(struct budget_note *note)
{
	note_clear(note);
	note->want = NULL;
	note->want_arg = NULL;
}
void budget_settle_note(const struct budget_ticket *t, const char *why, int64_t charge, const struct budget_tokens *tok,
			struct budget_note *note);

#endif
