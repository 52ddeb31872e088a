// SPDX-License-Identifier: GPL-2.0-only
/*
 * log.c - latchd's log lines: to the journal with a priority when stderr is
 * its stream (systemd's JOURNAL_STREAM), else "latchd: " lines on stderr.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "latchd/latchd.h"

/* Is stderr the journal's stream?  systemd says which one in JOURNAL_STREAM ("DEV:INO"). */
static bool stderr_is_journal(void)
{
	static int known = -1;
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (known < 0)
		known = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && !fstat(STDERR_FILENO, &st) &&
			st.st_dev == dev && st.st_ino == ino;
	return known;
}

static void log_line(int prio, const char *fmt, va_list ap)
{
	if (stderr_is_journal())
		fprintf(stderr, "<%d>", prio);
	else
		fputs("latchd: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void latchd_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(strncmp(fmt, "warning", 7) ? LOG_NOTICE : LOG_WARNING, fmt, ap);
	va_end(ap);
}

void latchd_log_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(LOG_ERR, fmt, ap);
	va_end(ap);
}
