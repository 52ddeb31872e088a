// SPDX-License-Identifier: GPL-2.0-only
/*
 * ctl.c - latch's control path through its own API, on a pinned sandbox.
 *
 *   ctl NAME load LIST
 *       latch_policy_replace(NAME, LIST): make LIST the whole permanent
 *       policy.  Prints "op=load n=N us=US".
 *   ctl NAME bench LIST_A LIST_B REPS ADDS
 *       per rep:  replace with the empty policy (not timed), then
 *                 load      latch_policy_replace(LIST_A), from empty
 *                 replace   latch_policy_replace(LIST_B) over LIST_A
 *                           (write B under the idle generation, flip)
 *                 loadgc, replacegc  the latch_policy_gc() after each: the
 *                           old generation deleted, after the switch
 *                 add       ADDS x latch_policy_allow of one new entry into a
 *                           policy holding N (198.18.128.2-201:443, each
 *                           revoked again, untimed, so every add is a fresh
 *                           insert); the median is printed
 *       Prints "op=OP n=N rep=R us=US".  Leaves LIST_B as the policy.
 *   ctl - diag LIST REPS
 *       The map primitives latch_policy_replace is made of, timed on a
 *       private hash map shaped like exact4 (8-byte key, struct latch_rules
 *       value, LATCH_POLICY_MAX, BPF_F_NO_PREALLOC) holding LIST:
 *         prim_batch_insert   one bpf_map_update_batch of N new keys
 *         prim_walk           bpf_map_get_next_key over N keys
 *         prim_walk_2n        the same over 2N keys (both generations present)
 *         prim_lookup_batch_2n  bpf_map_lookup_batch over the same 2N keys and
 *                             values, 4096 at a time (for comparison)
 *         prim_elem_delete    N x bpf_map_delete_elem
 *         prim_batch_delete   bpf_map_delete_batch of N keys (for comparison)
 *       No sandbox is needed (NAME is "-").
 *
 * LIST: lines "A.B.C.D PORT", one ADDR:PORT entry each.  Times are wall
 * clock (CLOCK_MONOTONIC) around the API call only: the sandbox is opened
 * and the list parsed beforehand.  Uses $LATCH_BPFFS like the CLI.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "loader/loader.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int load_list(const char *path, struct latch_entry **out)
{
	FILE *f = fopen(path, "r");
	struct latch_entry *v = NULL;
	char addr[64], text[96], err[LATCH_ERR_MAX];
	unsigned int port;
	int n = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "ctl: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fscanf(f, "%63s %u", addr, &port) == 2) {
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			v = realloc(v, cap * sizeof(*v));
			if (!v) {
				fclose(f);
				return -1;
			}
		}
		snprintf(text, sizeof(text), "%s:%u", addr, port);
		if (latch_parse_entry(text, &v[n], err, sizeof(err))) {
			fprintf(stderr, "ctl: %s\n", err);
			fclose(f);
			return -1;
		}
		n++;
	}
	fclose(f);
	*out = v;
	return n;
}

/*
 * us: until the new policy is live (latch_policy_replace returns after the
 * one config update); gc_us: deleting the old generation afterwards
 * (latch_policy_gc), which traffic no longer sees.
 */
static int replace(struct latch_sandbox *sb, const struct latch_entry *e, int n, double *us, double *gc_us)
{
	char err[LATCH_ERR_MAX];
	double t0 = now_us(), t1;
	int rc = latch_policy_replace(sb, e, n, err, sizeof(err));

	t1 = now_us();
	if (us)
		*us = t1 - t0;
	if (rc) {
		fprintf(stderr, "ctl: latch_policy_replace: %s\n", err);
		return rc;
	}
	rc = latch_policy_gc(sb);
	if (gc_us)
		*gc_us = now_us() - t1;
	if (rc)
		fprintf(stderr, "ctl: latch_policy_gc: %s\n", strerror(-rc));
	return rc;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int bench(struct latch_sandbox *sb, const char *pa, const char *pb, int reps, int adds)
{
	struct latch_entry *A, *B;
	int na = load_list(pa, &A), nb = load_list(pb, &B);
	char err[LATCH_ERR_MAX], text[64];
	double us, gc, *add = calloc(adds > 0 ? adds : 1, sizeof(double));

	if (na < 0 || nb < 0 || !add)
		return 1;
	for (int r = 1; r <= reps; r++) {
		if (replace(sb, NULL, 0, NULL, NULL))
			return 1;
		if (replace(sb, A, na, &us, &gc))
			return 1;
		printf("op=load n=%d rep=%d us=%.1f\n", na, r, us);
		printf("op=loadgc n=%d rep=%d us=%.1f\n", na, r, gc);
		if (replace(sb, B, nb, &us, &gc))
			return 1;
		printf("op=replace n=%d rep=%d us=%.1f\n", nb, r, us);
		printf("op=replacegc n=%d rep=%d us=%.1f\n", nb, r, gc);
		for (int i = 0; i < adds; i++) {
			struct latch_entry e;
			double t0;

			snprintf(text, sizeof(text), "198.18.128.%d:443", 2 + i % 200);
			if (latch_parse_entry(text, &e, err, sizeof(err)))
				return 1;
			t0 = now_us();
			if (latch_policy_allow(sb, &e, 0, LATCH_ORIGIN_EGRESS, err, sizeof(err))) {
				fprintf(stderr, "ctl: latch_policy_allow: %s\n", err);
				return 1;
			}
			add[i] = now_us() - t0;
			if (latch_policy_revoke(sb, &e, err, sizeof(err))) {
				fprintf(stderr, "ctl: latch_policy_revoke: %s\n", err);
				return 1;
			}
		}
		if (adds > 0) {
			qsort(add, adds, sizeof(double), cmp_d);
			printf("op=add n=%d rep=%d us=%.2f\n", nb, r, add[adds / 2]);
		}
		fflush(stdout);
	}
	free(A);
	free(B);
	free(add);
	return 0;
}

/* Time the exact4-shaped map primitives; see the header. */
static int diag(const char *path, int reps)
{
	struct latch_entry *e;
	int n = load_list(path, &e);
	struct latch_exact4_key *k;
	struct latch_rules *v;
	uint8_t key[8], next[8];

	if (n <= 0)
		return 1;
	k = calloc(2 * n, sizeof(*k));
	v = calloc(2 * n, sizeof(*v));
	if (!k || !v)
		return 1;
	for (int i = 0; i < 2 * n; i++) {
		struct latch_rule r;

		k[i].gen = i >= n;
		k[i].addr = e[i % n].addr.v4.s_addr;
		latch_entry_rule(&e[i % n], 0, 0, LATCH_ORIGIN_PROFILE, &r);
		latch_rules_merge(&v[i], &r);
	}
	for (int r = 1; r <= reps; r++) {
		LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_NO_PREALLOC);
		int fd =
			bpf_map_create(BPF_MAP_TYPE_HASH, "bench_exact4", sizeof(*k), sizeof(*v), LATCH_POLICY_MAX, &o);
		__u32 cnt;
		double t0;
		int walked;
		void *prev;

		if (fd < 0) {
			fprintf(stderr, "ctl: bpf_map_create: %s\n", strerror(errno));
			return 1;
		}
		cnt = n;
		t0 = now_us();
		if (bpf_map_update_batch(fd, k, v, &cnt, NULL)) {
			fprintf(stderr, "ctl: batch insert: %s\n", strerror(errno));
			return 1;
		}
		printf("op=prim_batch_insert n=%d rep=%d us=%.1f\n", n, r, now_us() - t0);
		for (int pass = 0; pass < 2; pass++) {
			walked = 0;
			prev = NULL;
			t0 = now_us();
			while (bpf_map_get_next_key(fd, prev, next) == 0) {
				memcpy(key, next, sizeof(key));
				prev = key;
				walked++;
			}
			printf("op=%s n=%d rep=%d us=%.1f\n", pass ? "prim_walk_2n" : "prim_walk", n, r, now_us() - t0);
			if (walked != (pass + 1) * n) {
				fprintf(stderr, "ctl: walked %d keys\n", walked);
				return 1;
			}
			cnt = n;
			if (!pass && bpf_map_update_batch(fd, k + n, v + n, &cnt, NULL)) {
				fprintf(stderr, "ctl: batch insert: %s\n", strerror(errno));
				return 1;
			}
		}
		{
			struct latch_exact4_key *bk = calloc(4096, sizeof(*bk));
			struct latch_rules *bv = calloc(4096, sizeof(*bv));
			__u32 batch = 0, got = 0;
			void *in = NULL;
			int err;

			if (!bk || !bv)
				return 1;
			t0 = now_us();
			do {
				cnt = 4096;
				err = bpf_map_lookup_batch(fd, in, &batch, bk, bv, &cnt, NULL);
				got += cnt;
				in = &batch;
			} while (!err);
			printf("op=prim_lookup_batch_2n n=%d rep=%d us=%.1f\n", n, r, now_us() - t0);
			if (errno != ENOENT || got != 2u * n)
				fprintf(stderr, "ctl: lookup batch: %s, %u keys\n", strerror(errno), got);
			free(bk);
			free(bv);
		}
		t0 = now_us();
		for (int i = 0; i < n; i++)
			bpf_map_delete_elem(fd, &k[i]);
		printf("op=prim_elem_delete n=%d rep=%d us=%.1f\n", n, r, now_us() - t0);
		cnt = n;
		t0 = now_us();
		if (bpf_map_delete_batch(fd, k + n, &cnt, NULL))
			fprintf(stderr, "ctl: batch delete: %s\n", strerror(errno));
		printf("op=prim_batch_delete n=%d rep=%d us=%.1f\n", n, r, now_us() - t0);
		fflush(stdout);
		close(fd);
	}
	free(e);
	free(k);
	free(v);
	return 0;
}

int main(int argc, char **argv)
{
	char err[LATCH_ERR_MAX];
	struct latch_sandbox *sb;
	int rc = 2;

	if (argc < 4) {
		fprintf(stderr, "usage: %s NAME load LIST | NAME bench LIST_A LIST_B REPS ADDS | - diag LIST REPS\n",
			argv[0]);
		return 2;
	}
	if (!strcmp(argv[2], "diag") && argc == 5)
		return diag(argv[3], atoi(argv[4]));
	sb = latch_sandbox_open(argv[1], err, sizeof(err));
	if (!sb) {
		fprintf(stderr, "ctl: %s\n", err);
		return 1;
	}
	if (!strcmp(argv[2], "load") && argc == 4) {
		struct latch_entry *e;
		int n = load_list(argv[3], &e);
		double us;

		rc = n < 0 || replace(sb, e, n, &us, NULL);
		if (!rc)
			printf("op=load n=%d us=%.1f\n", n, us);
		free(n < 0 ? NULL : e);
	} else if (!strcmp(argv[2], "bench") && argc == 7) {
		rc = bench(sb, argv[3], argv[4], atoi(argv[5]), atoi(argv[6]));
	} else {
		fprintf(stderr, "usage: %s NAME load LIST | NAME bench LIST_A LIST_B REPS ADDS | - diag LIST REPS\n",
			argv[0]);
	}
	latch_sandbox_free(sb);
	return rc;
}
