// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_units.c - the one grammar of a duration and of a size (common/units.c).
 *
 * Invariant: a value is decimal digits and at most one unit; whatever
 * strtod()/strtoul() would also have taken (a sign, a blank, hex, an
 * exponent, a fraction, nan, inf) is refused, and a value past 64 bits is
 * out of range, never wrapped.  Each refusal names the option and shows the
 * grammar.  Each table of refusals has its table of accepted values beside it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "common/common.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define DAY_MS (86400ull * 1000)

Test(duration_ms, accepts_digits_and_one_unit)
{
	static const struct {
		const char *in;
		uint64_t ms;
	} ok[] = {
		{ "60", 60000 },  { "90s", 90000 },	{ "5m", 300000 },	{ "1h", 3600000 }, { "500ms", 500 },
		{ "1d", DAY_MS }, { "7d", 7 * DAY_MS }, { "1", 1000 },		{ "007s", 7000 },  { "1500ms", 1500 },
		{ "0", 0 },	  { "0ms", 0 },		{ "168h", 7 * DAY_MS },
	};
	char err[LATCH_ERR_MAX];
	uint64_t ms;

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		cr_expect_eq(latch_parse_duration_ms("--timeout", ok[i].in, 0, 7 * DAY_MS, &ms, err, sizeof(err)), 0,
			     "'%s' refused: %s", ok[i].in, err);
		cr_expect_eq(ms, ok[i].ms, "'%s' is %llu ms", ok[i].in, (unsigned long long)ms);
	}
}

Test(duration_ms, refuses_what_strtod_would_take)
{
	static const char *const bad[] = {
		"",    "nan", "NaN",   "inf",  "-inf", "infinity", "0x10", "0X1A",  "1e3",  "1E3",  "1.5",    "1.5s",
		".5s", "-5",  "+5",    " 5",   "5 ",   "5 s",	   "s",	   "ms",    "5x",   "5ss",  "5sm",    "5M",
		"5H",  "5S",  "1h30m", "5mss", "5\n",  "5\t",	   "٥",	   "0b101", "5min", "5sec", "5hours",
	};
	char err[LATCH_ERR_MAX];
	uint64_t ms = 7;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		cr_expect_eq(latch_parse_duration_ms("--timeout", bad[i], 0, 7 * DAY_MS, &ms, err, sizeof(err)),
			     -EINVAL, "'%s' accepted", bad[i]);
		cr_expect(strstr(err, "--timeout: '") == err, "'%s': the line names the option: %s", bad[i], err);
		cr_expect(strstr(err, "is not a duration (60, 90s, 5m, 1h, 500ms)"), "'%s': no grammar in: %s", bad[i],
			  err);
	}
	cr_expect_eq(ms, 7, "a refused duration was stored");
}

Test(duration_ms, overflow_and_bounds_are_out_of_range)
{
	static const char *const far[] = {
		"18446744073709551616", /* 2^64 */
		"18446744073709551615s", /* 2^64 - 1 seconds: wraps when multiplied */
		"213503982334601d", /* wraps a uint64_t of ms */
		"99999999999999999999999", "8d",
	};
	char err[LATCH_ERR_MAX];
	uint64_t ms = 7;

	for (size_t i = 0; i < ARRAY_SIZE(far); i++) {
		cr_expect_eq(latch_parse_duration_ms("--timeout", far[i], 1, 7 * DAY_MS, &ms, err, sizeof(err)),
			     -ERANGE, "'%s' not out of range", far[i]);
		cr_expect(strstr(err, "is out of range; give 1ms to 7d"), "'%s': %s", far[i], err);
	}
	cr_expect_eq(latch_parse_duration_ms("--timeout", "168h1", 1, 7 * DAY_MS, &ms, err, sizeof(err)), -EINVAL);
	cr_expect_eq(latch_parse_duration_ms("--timeout", "0", 1, 7 * DAY_MS, &ms, err, sizeof(err)), -ERANGE);
	/* control: the bounds themselves are in range */
	cr_expect_eq(latch_parse_duration_ms("--timeout", "7d", 1, 7 * DAY_MS, &ms, err, sizeof(err)), 0);
	cr_expect_eq(latch_parse_duration_ms("--timeout", "1ms", 1, 7 * DAY_MS, &ms, err, sizeof(err)), 0);
	cr_expect_eq(ms, 1);
}

Test(seconds, whole_seconds_in_any_unit)
{
	static const struct {
		const char *in;
		uint32_t s;
	} ok[] = { { "60", 60 }, { "90s", 90 }, { "5m", 300 }, { "1h", 3600 }, { "2000ms", 2 }, { "1d", 86400 } };
	char err[LATCH_ERR_MAX];
	uint32_t s;

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		cr_expect_eq(latch_parse_seconds("--for", ok[i].in, 1, 86400, &s, err, sizeof(err)), 0,
			     "'%s' refused: %s", ok[i].in, err);
		cr_expect_eq(s, ok[i].s, "'%s' is %u s", ok[i].in, s);
	}
}

Test(seconds, refuses_a_part_of_a_second_and_the_rest)
{
	static const char *const bad[] = { "1500ms", "500ms", "nan", "1e3", "0x10", "-1", "1.5", "5 m", "" };
	char err[LATCH_ERR_MAX];
	uint32_t s = 7;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		cr_expect_eq(latch_parse_seconds("--for", bad[i], 1, 86400, &s, err, sizeof(err)), -EINVAL,
			     "'%s' accepted", bad[i]);
		/* a field in seconds does not offer 500ms in its grammar */
		cr_expect(strstr(err, "(60, 90s, 5m, 1h)"), "'%s': %s", bad[i], err);
		cr_expect(strstr(err, "--for: '") == err, "'%s': %s", bad[i], err);
	}
	cr_expect_eq(latch_parse_seconds("--for", "2d", 1, 86400, &s, err, sizeof(err)), -ERANGE);
	cr_expect_str_eq(err, "--for: '2d' is out of range; give 1s to 1d");
	cr_expect_eq(latch_parse_seconds("--for", "0", 1, 86400, &s, err, sizeof(err)), -ERANGE);
	cr_expect_eq(latch_parse_seconds("--for", "4294967296", 1, 86400, &s, err, sizeof(err)), -ERANGE);
	cr_expect_eq(s, 7, "a refused duration was stored");
}

Test(size, accepts_digits_and_a_binary_unit)
{
	static const struct {
		const char *in;
		uint64_t bytes;
	} ok[] = {
		{ "4096", 4096 },      { "64K", 64 << 10 },  { "64k", 64 << 10 },  { "512M", 512 << 20 },
		{ "512m", 512 << 20 }, { "1G", 1ull << 30 }, { "1g", 1ull << 30 }, { "2T", 2ull << 40 },
	};
	char err[LATCH_ERR_MAX];
	uint64_t b;

	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		cr_expect_eq(latch_parse_size("--memory", ok[i].in, 1, 0, UINT64_MAX, &b, err, sizeof(err)), 0,
			     "'%s' refused: %s", ok[i].in, err);
		cr_expect_eq(b, ok[i].bytes, "'%s' is %llu", ok[i].in, (unsigned long long)b);
	}
	/* the largest that fits: 2^64 - 1 bytes, and 16777215T */
	cr_expect_eq(latch_parse_size("--memory", "18446744073709551615", 1, 0, UINT64_MAX, &b, err, sizeof(err)), 0);
	cr_expect_eq(b, UINT64_MAX);
	cr_expect_eq(latch_parse_size("--memory", "16777215T", 1, 0, UINT64_MAX, &b, err, sizeof(err)), 0);
	cr_expect_eq(b, 16777215ull << 40);
}

Test(size, refuses_what_strtoull_would_take)
{
	static const char *const bad[] = {
		"",    "nan",  "inf", "0x10", "1e3", "1.5G", "-1", "+1", " 1G", "1G ", "1 G", "G",
		"1GB", "1GiB", "1KB", "1B",   "1Gi", "1P",   "1E", "1X", "1GG", "1KM", "1\n",
	};
	char err[LATCH_ERR_MAX];
	uint64_t b = 7;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		cr_expect_eq(latch_parse_size("--memory", bad[i], 1, 0, UINT64_MAX, &b, err, sizeof(err)), -EINVAL,
			     "'%s' accepted", bad[i]);
		cr_expect(strstr(err, "--memory: '") == err, "'%s': %s", bad[i], err);
		cr_expect(strstr(err, "is not a size (4096, 64K, 512M, 1G)"), "'%s': %s", bad[i], err);
	}
	cr_expect_eq(b, 7, "a refused size was stored");
}

Test(size, overflow_is_refused_not_wrapped)
{
	/* 17179869185G is 2^64 + 2^30 bytes: with a shift it wrapped to 1 GiB */
	static const char *const far[] = { "17179869185G", "16777216T", "18446744073709551616",
					   "99999999999999999999999K" };
	char err[LATCH_ERR_MAX];
	uint64_t b = 7;

	for (size_t i = 0; i < ARRAY_SIZE(far); i++) {
		cr_expect_eq(latch_parse_size("--memory", far[i], 1, 8 << 20, 64ull << 40, &b, err, sizeof(err)),
			     -ERANGE, "'%s' not out of range", far[i]);
		cr_expect(strstr(err, "is out of range; give 8M to 64T"), "'%s': %s", far[i], err);
	}
	cr_expect_eq(latch_parse_size("--memory", "4M", 1, 8 << 20, 64ull << 40, &b, err, sizeof(err)), -ERANGE);
	cr_expect_eq(b, 7, "a refused size was stored");
	/* control: at the bounds */
	cr_expect_eq(latch_parse_size("--memory", "8M", 1, 8 << 20, 64ull << 40, &b, err, sizeof(err)), 0);
	cr_expect_eq(latch_parse_size("--memory", "64T", 1, 8 << 20, 64ull << 40, &b, err, sizeof(err)), 0);
	cr_expect_eq(b, 64ull << 40);
}

Test(size, a_key_in_mib_takes_a_bare_number_as_mib)
{
	char err[LATCH_ERR_MAX];
	uint64_t b = 7;

	cr_expect_eq(latch_parse_size("broker_body_max", "32", 1 << 20, 1 << 20, 1ull << 30, &b, err, sizeof(err)), 0);
	cr_expect_eq(b, 32 << 20);
	cr_expect_eq(latch_parse_size("broker_body_max", "1G", 1 << 20, 1 << 20, 1ull << 30, &b, err, sizeof(err)), 0);
	cr_expect_eq(b, 1ull << 30);
	cr_expect_eq(latch_parse_size("broker_body_max", "1536K", 1 << 20, 1 << 20, 1ull << 30, &b, err, sizeof(err)),
		     -EINVAL);
	cr_expect_str_eq(err, "broker_body_max: '1536K' is not a whole number of MiB");
	cr_expect_eq(latch_parse_size("broker_body_max", "x", 1 << 20, 1 << 20, 1ull << 30, &b, err, sizeof(err)),
		     -EINVAL);
	cr_expect_str_eq(err, "broker_body_max: 'x' is not a size (512M, 2G; a bare number is in MiB)");
}

Test(units_format, the_largest_exact_unit)
{
	char buf[32];

	latch_format_duration(90000, buf, sizeof(buf));
	cr_expect_str_eq(buf, "90s");
	latch_format_duration(3600000, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1h");
	latch_format_duration(1500, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1500ms");
	latch_format_size(1ull << 30, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1G");
	latch_format_size(1536 << 10, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1536K");
	latch_format_size(1000, buf, sizeof(buf));
	cr_expect_str_eq(buf, "1000");
}
