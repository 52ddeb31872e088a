// SPDX-License-Identifier: GPL-2.0-only
/*
 * errors.c - the one way latch writes an error line.
 */
#include <errno.h>
#include <sqlite3.h> /* its result codes only: nothing here links sqlite */
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

int latch_sqlite_errno(int rc)
{
	switch (rc & 0xff) { /* the primary code of an extended one */
	case SQLITE_OK:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CANTOPEN:
		return -EACCES;
	case SQLITE_PERM:
		return -EPERM;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	default: /* SQLITE_DONE and SQLITE_ROW too: a caller that asks has an error in hand */
		return -EIO;
	}
}
