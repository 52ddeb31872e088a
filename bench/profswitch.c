// SPDX-License-Identifier: GPL-2.0-only
/*
 * profswitch.c - the steps of latchd's profile switch, timed one by one.
 *
 *   profswitch NAME DIR PROFILE_A PROFILE_B REPS
 *
 * For a profile of CIDR entries only (no host names to look up, nothing
 * learned that it still allows), `latch egress NAME profile P` makes latchd
 * (latchd/switch.c, latchd_switch_begin/switch_commit) do, before it replies:
 *
 *   parse   latch_profile_load(DIR, P): read and parse the extends chain
 *           (the CLI does the same once more in its own process, first)
 *   walk    latch_policy_list() over the live policy, for the entries the
 *           switch must carry over (operator `egress allow` entries)
 *   compose latch_profile_compose(): the union of the profile and what the
 *           walk carries, identical entries folded (profile/compose.c)
 *   switch  latch_policy_switch() with one spec per entry: the new
 *           generation written under the idle one, then one config update
 *           makes it live -- the kernel part, the time until enforcement
 *   gc      latch_policy_gc(): the old generation deleted
 *
 * This helper makes the same calls on the same files, REPS times, switching
 * to PROFILE_B, then PROFILE_A, and so on, from whatever is live, and prints
 * "op=parse|walk|compose|switch|gc n=N rep=R us=US".  It leaves out what latchd adds
 * around them (JSON on its socket, the state file, one audit row).  Run it
 * with latchd stopped, so nothing else writes the maps meanwhile.  Times are
 * CLOCK_MONOTONIC around each call.  Uses $LATCH_BPFFS like the CLI.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/profile.h"
#include "loader/loader.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int one_switch(struct latch_sandbox *sb, const char *dir, const char *name, int rep)
{
	char err[LATCH_ERR_MAX];
	struct latch_compose_out out = { 0 };
	struct latch_profile p = { 0 };
	struct latch_compose_live w = { 0 }; /* what latchd's walk keeps */
	double t0, t1, t2, t3, t4, t5;
	int rc;

	t0 = now_us();
	rc = latch_profile_load(dir, name, NULL, &p, err, sizeof(err));
	t1 = now_us();
	if (rc) {
		fprintf(stderr, "profswitch: %s\n", err);
		return 1;
	}
	if (latch_policy_list(sb, latch_compose_live_keep, &w) < 0 || w.rc) {
		fprintf(stderr, "profswitch: latch_policy_list failed\n");
		rc = 1;
		goto out;
	}
	t2 = now_us();
	struct latch_compose_in in = { .profile = &p, .live = w.items, .n_live = w.n, .now_ns = latch_now_boot_ns() };

	if (latch_profile_compose(&in, &out)) {
		fprintf(stderr, "profswitch: latch_profile_compose: out of memory\n");
		rc = 1;
		goto out;
	}
	t3 = now_us();
	rc = latch_policy_switch(sb, out.specs, out.n, out.open, err, sizeof(err));
	t4 = now_us();
	if (rc) {
		fprintf(stderr, "profswitch: latch_policy_switch: %s\n", err);
		rc = 1;
		goto out;
	}
	rc = latch_policy_gc(sb);
	t5 = now_us();
	if (rc) {
		fprintf(stderr, "profswitch: latch_policy_gc: %s\n", strerror(-rc));
		rc = 1;
		goto out;
	}
	printf("op=parse n=%d rep=%d us=%.1f\n", p.n, rep, t1 - t0);
	printf("op=walk n=%d rep=%d us=%.1f\n", w.walked, rep, t2 - t1);
	printf("op=compose n=%d rep=%d us=%.1f\n", out.n, rep, t3 - t2);
	printf("op=switch n=%d rep=%d us=%.1f\n", out.n, rep, t4 - t3);
	printf("op=gc n=%d rep=%d us=%.1f\n", out.n, rep, t5 - t4);
	fflush(stdout);
out:
	latch_compose_out_free(&out);
	free(w.items);
	latch_profile_free(&p);
	return rc;
}

int main(int argc, char **argv)
{
	char err[LATCH_ERR_MAX];
	struct latch_sandbox *sb;
	int reps, rc = 0;

	if (argc != 6 || (reps = atoi(argv[5])) < 1) {
		fprintf(stderr, "usage: %s NAME DIR PROFILE_A PROFILE_B REPS\n", argv[0]);
		return 2;
	}
	sb = latch_sandbox_open(argv[1], err, sizeof(err));
	if (!sb) {
		fprintf(stderr, "profswitch: %s\n", err);
		return 1;
	}
	for (int r = 1; r <= reps && !rc; r++)
		rc = one_switch(sb, argv[2], r % 2 ? argv[4] : argv[3], r);
	latch_sandbox_free(sb);
	return rc;
}
