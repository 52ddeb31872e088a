// SPDX-License-Identifier: GPL-2.0-only
/*
 * match.c - the cost of matching a queried name against a large profile,
 * as latchd's resolver does twice per query (may it be asked? which ports?).
 *
 *   match DIR N REPS
 *
 * Writes DIR/bench-match.txt: N - 1 host names hK.names.bench.example:443
 * and one wildcard *.wild.bench.example:443, loads it with
 * latch_profile_load (which builds the name index), and times
 * latch_profile_match over 30,000 names per case:
 *
 *   host      a listed host name
 *   wildcard  a name under the wildcard
 *   miss      a name that nothing matches
 *
 * each with the index, and again on the same profile without it (index
 * NULL: latch_profile_next_match then scans every entry, as latch did
 * before the index; the reference).  The scan runs a tenth of the names.
 * Prints "op=match_CASE impl=index|scan n=N rep=R ns=NS" per query.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "profile/profile.h"

#define QUERIES 30000

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void query_name(const char *kind, int i, int n, char *buf, size_t len)
{
	if (!strcmp(kind, "host"))
		snprintf(buf, len, "h%d.names.bench.example", (i * 7919) % (n - 1));
	else if (!strcmp(kind, "wildcard"))
		snprintf(buf, len, "x%d.wild.bench.example", i);
	else
		snprintf(buf, len, "m%d.other.bench.example", i);
}

int main(int argc, char **argv)
{
	static const char *const cases[] = { "host", "wildcard", "miss" };
	char path[4096], err[LATCH_ERR_MAX], name[128];
	struct latch_profile p, scan;
	struct latch_entry ports;
	int n, reps;
	FILE *f;

	if (argc != 4 || (n = atoi(argv[2])) < 2 || n > LATCH_PROFILE_ENTRIES_MAX || (reps = atoi(argv[3])) < 1) {
		fprintf(stderr, "usage: %s DIR N(2-%d) REPS\n", argv[0], LATCH_PROFILE_ENTRIES_MAX);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/bench-match.txt", argv[1]);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	for (int i = 0; i < n - 1; i++)
		fprintf(f, "h%d.names.bench.example:443\n", i);
	fprintf(f, "*.wild.bench.example:443\n");
	if (fclose(f) || chmod(path, 0644)) {
		perror(path);
		return 1;
	}
	if (latch_profile_load(argv[1], "bench-match", NULL, &p, err, sizeof(err))) {
		fprintf(stderr, "match: %s\n", err);
		return 1;
	}
	scan = p;
	scan.index = NULL;
	for (int r = 1; r <= reps; r++) {
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			for (int with_index = 1; with_index >= 0; with_index--) {
				const struct latch_profile *q = with_index ? &p : &scan;
				int count = with_index ? QUERIES : QUERIES / 10, hits = 0;
				double t0 = now_ns();

				for (int i = 0; i < count; i++) {
					query_name(cases[c], i, n, name, sizeof(name));
					hits += latch_profile_match(q, name, &ports);
				}
				double ns = (now_ns() - t0) / count;

				if (hits != (strcmp(cases[c], "miss") ? count : 0)) {
					fprintf(stderr, "match: %s: %d of %d names matched\n", cases[c], hits, count);
					return 1;
				}
				printf("op=match_%s impl=%s n=%d rep=%d ns=%.0f\n", cases[c],
				       with_index ? "index" : "scan", n, r, ns);
			}
		}
	}
	latch_profile_free(&p);
	return 0;
}
