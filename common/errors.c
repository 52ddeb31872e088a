// SPDX-License-Identifier: GPL-2.0-only
/*
 * errors.c - the one way latch writes an error line.
 */
#include <stdarg.h>
#include <stdio.h>

#include "common/common.h"

int latch_verrf(char *err, size_t errlen, int ret, const char *fmt, va_list ap)
{
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	return ret;
}

int latch_errf(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	latch_verrf(err, errlen, ret, fmt, ap);
	va_end(ap);
	return ret;
}

int latch_errf_at(char *err, size_t errlen, int ret, const char *file, int line, const char *fmt, ...)
{
	char msg[LATCH_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line)
		return latch_errf(err, errlen, ret, "%s:%d: %s", file, line, msg);
	return latch_errf(err, errlen, ret, "%s: %s", file, msg);
}
