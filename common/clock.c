// SPDX-License-Identifier: GPL-2.0-only
/*
 * clock.c - latch's one clock for deadlines, timeouts and intervals.
 *
 * CLOCK_MONOTONIC never steps when the wall clock is set (NTP, an operator,
 * a guest resumed from a snapshot), so a deadline computed from it neither
 * fires early nor hangs.  Kept free of every other part of common/ so the
 * static guest agent can link this file alone.
 */
#include <time.h>

#include "common/common.h"

uint64_t latch_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t latch_now_ms(void)
{
	return (int64_t)(latch_now_ns() / 1000000);
}
