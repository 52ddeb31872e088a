// SPDX-License-Identifier: GPL-2.0-only
/*
 * journal.c - a sole writer's rows before they reach sqlite: fixed-size,
 * checksummed records appended to a memory-mapped file beside the ledger
 * (LEDGER.journal).
 *
 * What must happen before latchd forwards a request is only that its
 * reservation survives kill -9 of latchd.  A store into a MAP_SHARED
 * mapping is in the kernel's page cache the moment it is made, as a WAL
 * commit with synchronous=NORMAL is when it returns; neither survives a
 * power cut until written back.  So a reservation (and a settlement) is a
 * memcpy here, and the rows are folded into sqlite later, in batches
 * (budget_tick(), life.c): the journal is then emptied.
 *
 * A record's sequence number is its ledger row id: the ledger's largest id
 * is the last one folded, written by the fold's own transaction, so a fold
 * repeated after a crash skips what it already wrote.  The header holds the
 * id expected in the first slot (set when the journal is emptied) and the
 * process that writes the records (the owner of its reservations); slot i
 * holds id start + i.  The first slot that doesn't (a record of an earlier
 * round, zeros) ends the journal.  A record whose checksum fails is a
 * write cut by the kill: ignored when it is the last, and only then (it
 * was never forwarded: forwarding waits for the append).  One followed by a
 * good record is damage, and the journal is refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>

#include "budget/internal.h"

/*
 * latchj2: each record's sum is the low 32 bits of XXH3-64 (about 25 ns for
 * a record, where zlib's CRC-32 took 120-250: two a request, on latchd's
 * one thread).  latchj1 (CRC-32) journals are still read and folded, and
 * made latchj2 when they are next emptied.
 */
#define JOURNAL_MAGIC "latchj2"
#define JOURNAL_MAGIC_V1 "latchj1"
#define JOURNAL_HEAD 4096
#define JOURNAL_SLOTS 16384 /* 4 MiB of records; latchd folds them every second */
#define HOW_MAX 23

struct jhead {
	char magic[8];
	uint32_t rec_size, slots;
	int64_t start; /* the id of slot 0 */
	char owner[160];
};

/* 256 bytes, every field at a fixed place; sum covers the rest of the record. */
struct jrec {
	uint32_t sum;
	uint8_t settle;
	uint8_t provider;
	char how[HOW_MAX + 1];
	char sandbox[LATCH_NAME_MAX + 1];
	char model[BUDGET_MODEL_MAX + 1];
	int64_t id, time_ns, request, micros;
	int64_t caps[3];
	int64_t tokens[5];
	char pad[32];
};
_Static_assert(sizeof(struct jrec) == 256, "a journal record is 256 bytes");
_Static_assert(sizeof(struct jhead) <= JOURNAL_HEAD, "the header fits its page");

struct journal {
	int fd;
	bool readonly; /* mapped read-only: anyone but a journaling sole writer */
	bool reader; /* latch usage: races latchd's appends, decides nothing */
	bool v1; /* a latchj1 journal: records summed with CRC-32 */
	size_t size;
	unsigned char *map;
	struct jhead *head;
	struct jrec *rec;
	uint32_t n; /* good records from slot 0 */
	bool torn; /* the slot after them holds a cut record (ignored) */
	char path[PATH_MAX];
};

static uint32_t rec_sum(const struct journal *j, const struct jrec *r)
{
	const unsigned char *from = (const unsigned char *)r + sizeof(r->sum);
	size_t len = sizeof(*r) - sizeof(r->sum);

	return j->v1 ? (uint32_t)crc32(0, from, (uInt)len) : (uint32_t)XXH3_64bits(from, len);
}

static bool rec_ok(const struct journal *j, uint32_t slot)
{
	const struct jrec *r = &j->rec[slot];

	return r->sum == rec_sum(j, r) && r->id == j->head->start + (int64_t)slot &&
	       memchr(r->how, 0, sizeof(r->how)) && memchr(r->sandbox, 0, sizeof(r->sandbox)) &&
	       memchr(r->model, 0, sizeof(r->model));
}

static bool rec_zero(const struct jrec *r)
{
	static const struct jrec zero;

	return !memcmp(r, &zero, sizeof(zero));
}

/* The ledger's rules (budget_ledger_file_check); *missing when a reader finds none. */
static int check_file(const char *path, bool readonly, uid_t owner, bool *missing, char *err, size_t errlen)
{
	int ret = budget_ledger_file_check("ledger journal", path, !readonly, owner, err, errlen);

	*missing = ret == -ENOENT;
	return *missing ? 0 : ret;
}

/* Find the good records; a cut one is allowed only as the last. */
static int scan(struct journal *j, char *err, size_t errlen)
{
	uint32_t n = 0;

	while (n < JOURNAL_SLOTS && rec_ok(j, n))
		n++;
	j->n = n;
	j->torn = n < JOURNAL_SLOTS && !rec_zero(&j->rec[n]) && j->rec[n].sum != rec_sum(j, &j->rec[n]);
	for (uint32_t i = n + 1; !j->reader && i < JOURNAL_SLOTS; i++) /* a reader races latchd's appends */
		if (rec_ok(j, i))
			return latch_errf(err, errlen, -EUCLEAN,
					  "ledger journal %s: record %u is damaged and records after it are whole; "
					  "move the file away to start (what it holds after record %u is lost)",
					  j->path, n, n);
	return 0;
}

int budget_journal_open(const char *ledger_path, int which, bool readonly, bool reader, uid_t owner,
			struct journal **out, char *err, size_t errlen)
{
	struct journal *j;
	struct stat st;
	bool missing, fresh;
	int ret;

	*out = NULL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return latch_errf(err, errlen, -ENOMEM, "out of memory");
	j->fd = -1;
	j->readonly = readonly || reader;
	j->reader = reader;
	readonly = j->readonly;
	if (snprintf(j->path, sizeof(j->path), "%s.journal%s", ledger_path, which ? "2" : "") >= (int)sizeof(j->path)) {
		free(j);
		return latch_errf(err, errlen, -ENAMETOOLONG, "ledger path %s is too long", ledger_path);
	}
	ret = check_file(j->path, readonly, owner, &missing, err, errlen);
	if (ret || missing) {
		free(j);
		return ret;
	}
	j->size = JOURNAL_HEAD + (size_t)JOURNAL_SLOTS * sizeof(struct jrec);
	j->fd = open(j->path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW);
	if (j->fd < 0 || fstat(j->fd, &st)) {
		ret = latch_errf(err, errlen, -errno, "ledger journal %s: %s", j->path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != owner || (st.st_mode & 077)) { /* swapped after the check */
		ret = latch_errf(err, errlen, -EPERM, "ledger journal %s changed while it was opened; try again",
				 j->path);
		goto fail;
	}
	if (st.st_size == 0 && readonly) { /* made, never written: nothing in it */
		budget_journal_close(j);
		return 0;
	}
	if (st.st_size == 0 && ftruncate(j->fd, (off_t)j->size)) {
		ret = latch_errf(err, errlen, -errno, "ledger journal %s: %s", j->path, strerror(errno));
		goto fail;
	}
	if (st.st_size != 0 && (size_t)st.st_size != j->size) {
		ret = latch_errf(err, errlen, -EINVAL,
				 "ledger journal %s is %lld bytes, not %zu: not latch's (move it away)", j->path,
				 (long long)st.st_size, j->size);
		goto fail;
	}
	j->map = mmap(NULL, j->size, readonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, j->fd, 0);
	if (j->map == MAP_FAILED) {
		j->map = NULL;
		ret = latch_errf(err, errlen, -errno, "ledger journal %s: mmap: %s", j->path, strerror(errno));
		goto fail;
	}
	j->head = (struct jhead *)j->map;
	j->rec = (struct jrec *)(j->map + JOURNAL_HEAD);
	fresh = st.st_size == 0 || (!j->head->magic[0] && !j->head->start); /* or cut before its header */
	if (fresh && readonly) {
		budget_journal_close(j);
		return 0;
	}
	if (fresh) { /* a new journal: empty from id 1 on */
		memcpy(j->head->magic, JOURNAL_MAGIC, sizeof(JOURNAL_MAGIC));
		j->head->rec_size = sizeof(struct jrec);
		j->head->slots = JOURNAL_SLOTS;
		j->head->start = 1;
	}
	j->v1 = !memcmp(j->head->magic, JOURNAL_MAGIC_V1, sizeof(JOURNAL_MAGIC_V1));
	if ((!j->v1 && memcmp(j->head->magic, JOURNAL_MAGIC, sizeof(JOURNAL_MAGIC))) ||
	    j->head->rec_size != sizeof(struct jrec) || j->head->slots != JOURNAL_SLOTS ||
	    !memchr(j->head->owner, 0, sizeof(j->head->owner))) {
		ret = latch_errf(err, errlen, -EINVAL, "ledger journal %s is not latch's (move it away)", j->path);
		goto fail;
	}
	ret = scan(j, err, errlen);
	if (ret)
		goto fail;
	*out = j;
	return 0;
fail:
	budget_journal_close(j);
	return ret;
}

void budget_journal_close(struct journal *j)
{
	if (!j)
		return;
	if (j->map)
		munmap(j->map, j->size);
	if (j->fd >= 0)
		close(j->fd);
	free(j);
}

const char *budget_journal_path(const struct journal *j)
{
	return j->path;
}

uint32_t budget_journal_count(const struct journal *j)
{
	return j->n;
}

bool budget_journal_full(const struct journal *j)
{
	return j->n == JOURNAL_SLOTS;
}

int64_t budget_journal_start(const struct journal *j)
{
	return j->head->start;
}

static int64_t journal_next_id(const struct journal *j)
{
	return j->head->start + (int64_t)j->n;
}

/* s into dst of size n, cut to fit, always ended (snprintf's cost, without its format) */
static void copy(char *dst, size_t n, const char *s)
{
	size_t len = strnlen(s, n - 1);

	memcpy(dst, s, len);
	dst[len] = '\0';
}

int budget_journal_append(struct journal *j, const struct ledger_row *r)
{
	enum budget_provider p;
	struct jrec *d;

	if (j->readonly)
		return -EROFS;
	if (j->n == JOURNAL_SLOTS)
		return -ENOSPC;
	if (r->id != journal_next_id(j))
		return -EINVAL; /* ids are the sequence: no gap, no reordering */
	d = &j->rec[j->n];
	memset(d, 0, sizeof(*d));
	d->settle = r->settle;
	copy(d->how, sizeof(d->how), r->how ? r->how : "");
	copy(d->sandbox, sizeof(d->sandbox), r->sandbox ? r->sandbox : "");
	copy(d->model, sizeof(d->model), r->model ? r->model : "-");
	d->id = r->id;
	d->time_ns = (int64_t)r->time_ns;
	d->request = r->settle ? r->request : r->id;
	d->micros = r->micros;
	d->caps[0] = r->caps.requests_per_hour;
	d->caps[1] = r->caps.requests_per_day;
	d->caps[2] = r->caps.micros_per_day;
	d->tokens[0] = r->tokens.input;
	d->tokens[1] = r->tokens.cached;
	d->tokens[2] = r->tokens.cache_write;
	d->tokens[3] = r->tokens.cache_write_1h;
	d->tokens[4] = r->tokens.output;
	d->provider = budget_provider_parse(r->provider, &p) ? 0xff : (uint8_t)p;
	d->sum = rec_sum(j, d);
	j->n++;
	return 0;
}

/* The strings point into the mapping: valid until the journal is reset or closed. */
int budget_journal_each(struct journal *j, int64_t after, int (*fn)(const struct ledger_row *r, void *arg), void *arg)
{
	for (uint32_t i = 0; i < j->n; i++) {
		const struct jrec *d = &j->rec[i];
		struct ledger_row r;
		int ret;

		if (j->reader && d->sum != rec_sum(j, d))
			break; /* latchd emptied it meanwhile (a reader's view only) */
		if (d->id <= after)
			continue;
		r = (struct ledger_row){
			.id = d->id,
			.time_ns = (uint64_t)d->time_ns,
			.request = d->request,
			.settle = d->settle,
			.sandbox = d->sandbox,
			.provider = d->provider < BUDGET_PROVIDERS ? budget_provider_name(d->provider) : "?",
			.model = d->model,
			.how = d->how,
			.micros = d->micros,
			.caps = { d->caps[0], d->caps[1], d->caps[2] },
			.tokens = { .input = d->tokens[0],
				    .cached = d->tokens[1],
				    .cache_write = d->tokens[2],
				    .cache_write_1h = d->tokens[3],
				    .output = d->tokens[4] },
			.owner = d->settle ? NULL : j->head->owner,
		};
		ret = fn(&r, arg);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Empty the journal: everything in it is in the ledger.  start is stored
 * last, in one aligned store: a kill before it leaves the old records,
 * which the next fold skips (their ids are in the ledger already).
 */
void budget_journal_reset(struct journal *j, int64_t start, const char *owner)
{
	if (j->readonly)
		return;
	if (j->v1) { /* emptied: its old records go, so none is read with the other sum; then the new magic */
		memset(j->rec, 0, (size_t)JOURNAL_SLOTS * sizeof(*j->rec));
		memcpy(j->head->magic, JOURNAL_MAGIC, sizeof(JOURNAL_MAGIC));
		j->v1 = false;
	}
	if (owner && strcmp(j->head->owner, owner))
		snprintf(j->head->owner, sizeof(j->head->owner), "%s", owner);
	__atomic_store_n(&j->head->start, start, __ATOMIC_RELEASE);
	j->n = 0;
	j->torn = false;
}
