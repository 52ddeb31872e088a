// SPDX-License-Identifier: GPL-2.0-only
/*
 * units.c - the one grammar of a duration and the one grammar of a size.
 *
 * Every option, latch.conf key and kit field that takes a duration or a
 * size goes through here, so `--timeout 1h` means the same to every command
 * and a bad value is refused the same way everywhere (latch(8), "Durations
 * and sizes").  The grammar is strict on purpose: strtod() and strtoul()
 * take signs, blanks, hex, exponents, "nan" and "inf", and wrap or saturate
 * on overflow, and each of those once turned a typo into a deadline at the
 * start or a memory limit of 1 GiB.  Here a value is decimal digits and at
 * most one unit; anything else is -EINVAL, anything too large -ERANGE.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

#define MS_PER_S 1000ull
#define DIGITS_MAX 20 /* UINT64_MAX has 20 */

/* Leading decimal digits of s into *n; the rest in *unit.  -EINVAL (no digit), -ERANGE (past 2^64). */
static int digits(const char *s, uint64_t *n, const char **unit)
{
	uint64_t v = 0;
	int count = 0;

	for (; *s >= '0' && *s <= '9'; s++, count++) {
		if (count == DIGITS_MAX || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (!count)
		return -EINVAL;
	*n = v;
	*unit = s;
	return 0;
}

static const struct duration_unit {
	const char *name;
	uint64_t ms;
} duration_units[] = {
	/* largest first: the order latch_format_duration() tries them in */
	{ "d", 86400 * MS_PER_S }, { "h", 3600 * MS_PER_S }, { "m", 60 * MS_PER_S }, { "s", MS_PER_S }, { "ms", 1 },
};
#define N_DURATION_UNITS (sizeof(duration_units) / sizeof(duration_units[0]))

static const struct size_unit {
	char upper, lower;
	unsigned shift;
	const char *name;
} size_units[] = {
	{ 'T', 't', 40, "TiB" },
	{ 'G', 'g', 30, "GiB" },
	{ 'M', 'm', 20, "MiB" },
	{ 'K', 'k', 10, "KiB" },
};
#define N_SIZE_UNITS (sizeof(size_units) / sizeof(size_units[0]))

void latch_format_duration(uint64_t ms, char *buf, size_t len)
{
	for (size_t i = 0; i < N_DURATION_UNITS; i++)
		if (ms && ms % duration_units[i].ms == 0) {
			snprintf(buf, len, "%" PRIu64 "%s", ms / duration_units[i].ms, duration_units[i].name);
			return;
		}
	snprintf(buf, len, "0s");
}

void latch_format_size(uint64_t bytes, char *buf, size_t len)
{
	for (size_t i = 0; i < N_SIZE_UNITS; i++)
		if (bytes && bytes % (1ull << size_units[i].shift) == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", bytes >> size_units[i].shift, size_units[i].upper);
			return;
		}
	snprintf(buf, len, "%" PRIu64, bytes);
}

/* s as a duration in ms, unbounded but for overflow: 0, -EINVAL or -ERANGE. */
static int duration_value(const char *s, uint64_t *ms)
{
	const char *unit;
	uint64_t n, mult = MS_PER_S; /* no unit: seconds */
	int ret = digits(s, &n, &unit);

	if (ret)
		return ret;
	if (*unit) {
		size_t i;

		for (i = 0; i < N_DURATION_UNITS; i++)
			if (!strcmp(unit, duration_units[i].name))
				break;
		if (i == N_DURATION_UNITS)
			return -EINVAL;
		mult = duration_units[i].ms;
	}
	if (n > UINT64_MAX / mult)
		return -ERANGE;
	*ms = n * mult;
	return 0;
}

/* The one error line of a duration: what was wrong, and the grammar or the range. */
static int duration_err(const char *what, const char *s, int ret, bool whole_s, uint64_t min_ms, uint64_t max_ms,
			char *err, size_t errlen)
{
	char lo[32], hi[32];

	if (ret == -EINVAL)
		return latch_errf(err, errlen, -EINVAL, "%s: '%s' is not a duration (%s)", what, s,
				  whole_s ? "60, 90s, 5m, 1h" : "60, 90s, 5m, 1h, 500ms");
	latch_format_duration(min_ms, lo, sizeof(lo));
	latch_format_duration(max_ms, hi, sizeof(hi));
	return latch_errf(err, errlen, -ERANGE, "%s: '%s' is out of range; give %s to %s", what, s, lo, hi);
}

int latch_parse_duration_ms(const char *what, const char *s, uint64_t min_ms, uint64_t max_ms, uint64_t *ms, char *err,
			    size_t errlen)
{
	uint64_t v;
	int ret = duration_value(s, &v);

	if (!ret && (v < min_ms || v > max_ms))
		ret = -ERANGE;
	if (ret)
		return duration_err(what, s, ret, false, min_ms, max_ms, err, errlen);
	*ms = v;
	return 0;
}

int latch_parse_seconds(const char *what, const char *s, uint32_t min_s, uint32_t max_s, uint32_t *secs, char *err,
			size_t errlen)
{
	uint64_t v, min_ms = min_s * MS_PER_S, max_ms = max_s * MS_PER_S;
	int ret = duration_value(s, &v);

	if (!ret && v % MS_PER_S)
		return latch_errf(err, errlen, -EINVAL, "%s: '%s' is not a whole number of seconds (60, 90s, 5m, 1h)",
				  what, s);
	if (!ret && (v < min_ms || v > max_ms))
		ret = -ERANGE;
	if (ret)
		return duration_err(what, s, ret, true, min_ms, max_ms, err, errlen);
	*secs = (uint32_t)(v / MS_PER_S);
	return 0;
}

int latch_parse_duration(const char *s, uint32_t min_s, uint32_t max_s, uint32_t *ms)
{
	uint32_t secs;
	int ret;

	/* a duration in ms must fit the uint32_t: 49 days */
	if (max_s > UINT32_MAX / MS_PER_S)
		max_s = UINT32_MAX / MS_PER_S;
	ret = latch_parse_seconds("duration", s, min_s, max_s, &secs, NULL, 0);
	if (!ret)
		*ms = secs * (uint32_t)MS_PER_S;
	return ret;
}

int latch_parse_size(const char *what, const char *s, uint64_t unit, uint64_t min, uint64_t max, uint64_t *bytes,
		     char *err, size_t errlen)
{
	const char *suffix;
	uint64_t n, mult = unit;
	const char *unit_name = "bytes";
	char lo[32], hi[32];
	int ret = digits(s, &n, &suffix);

	for (size_t i = 0; i < N_SIZE_UNITS; i++)
		if (unit == 1ull << size_units[i].shift)
			unit_name = size_units[i].name;

	if (!ret && *suffix) {
		size_t i;

		for (i = 0; i < N_SIZE_UNITS; i++)
			if (*suffix == size_units[i].upper || *suffix == size_units[i].lower)
				break;
		if (i == N_SIZE_UNITS || suffix[1])
			ret = -EINVAL;
		else
			mult = 1ull << size_units[i].shift;
	}
	if (!ret && n > UINT64_MAX / mult)
		ret = -ERANGE;
	if (ret == -EINVAL && unit == 1)
		return latch_errf(err, errlen, -EINVAL, "%s: '%s' is not a size (4096, 64K, 512M, 1G)", what, s);
	if (ret == -EINVAL)
		return latch_errf(err, errlen, -EINVAL, "%s: '%s' is not a size (512M, 2G; a bare number is in %s)",
				  what, s, unit_name);
	if (!ret && (n * mult) % unit)
		return latch_errf(err, errlen, -EINVAL, "%s: '%s' is not a whole number of %s", what, s, unit_name);
	if (!ret && (n * mult < min || n * mult > max))
		ret = -ERANGE;
	if (ret) {
		latch_format_size(min, lo, sizeof(lo));
		latch_format_size(max, hi, sizeof(hi));
		return latch_errf(err, errlen, -ERANGE, "%s: '%s' is out of range; give %s to %s", what, s, lo, hi);
	}
	*bytes = n * mult;
	return 0;
}
