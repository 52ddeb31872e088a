// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_clock.c - latch's one clock (common/clock.c).
 *
 * Invariant: every deadline and timeout is measured on CLOCK_MONOTONIC, which
 * never steps when the wall clock is set, so a deadline neither fires early
 * nor hangs.  The reading is checked against CLOCK_MONOTONIC itself, with
 * CLOCK_REALTIME beside it as the clock it must not be.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <time.h>

#include "common/common.h"

static int64_t clock_ms(clockid_t id)
{
	struct timespec ts;

	cr_assert_eq(clock_gettime(id, &ts), 0);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(clock, reads_the_monotonic_clock_not_the_wall_clock)
{
	int64_t before = clock_ms(CLOCK_MONOTONIC), now = latch_now_ms(), after = clock_ms(CLOCK_MONOTONIC);

	cr_expect(before <= now && now <= after, "latch_now_ms() %lld is not between %lld and %lld (CLOCK_MONOTONIC)",
		  (long long)now, (long long)before, (long long)after);
	/* control: the wall clock is decades past boot, so the two never agree */
	cr_expect_gt(clock_ms(CLOCK_REALTIME) - now, 86400LL * 1000, "latch_now_ms() reads the wall clock");
	cr_expect_leq(latch_now_ms() - (int64_t)(latch_now_ns() / 1000000), 1, "ms and ns are not one clock");
}

Test(clock, advances_by_the_time_slept_and_never_goes_back)
{
	struct timespec nap = { .tv_nsec = 50 * 1000000 };
	uint64_t ns0 = latch_now_ns(), last = ns0;
	int64_t ms0 = latch_now_ms();

	for (int i = 0; i < 10000; i++) {
		uint64_t ns = latch_now_ns();

		cr_assert_geq(ns, last, "the clock went back by %llu ns", (unsigned long long)(last - ns));
		last = ns;
	}
	cr_assert_eq(nanosleep(&nap, NULL), 0);
	cr_expect_geq(latch_now_ms() - ms0, 50, "50 ms slept, %lld ms measured", (long long)(latch_now_ms() - ms0));
	cr_expect_geq(latch_now_ns() - ns0, 50 * 1000000ull);
	/* bounded above too: a clock that counts in the wrong unit fails here */
	cr_expect_lt(latch_now_ms() - ms0, 5000);
}
