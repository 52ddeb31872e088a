// SPDX-License-Identifier: GPL-2.0-only
/*
 * files.c - where latch keeps things, how it replaces a file, and which
 * files it refuses to trust.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

int latch_path(char *buf, size_t len, const char *fmt, ...)
{
	const char *root = getenv("LATCH_ROOT");
	char suffix[PATH_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(suffix, sizeof(suffix), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(suffix))
		return -ENAMETOOLONG;
	if (!root || !*root)
		root = "";
	n = snprintf(buf, len, "%s/%s", root, suffix);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int latch_mkdirs(const char *dir, mode_t mode)
{
	char buf[PATH_MAX];

	if (strlen(dir) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, dir);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

int latch_write_atomic(const char *path, mode_t mode, const void *data, size_t len)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd, ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	/* O_CREAT's mode is filtered by the umask; the file gets exactly mode */
	if (fchmod(fd, mode))
		ret = -errno;
	while (!ret && len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			ret = -errno;
		else {
			p += w;
			len -= w;
		}
	}
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

int latch_file_check(const char *path, const struct stat *st, enum latch_file_kind kind, char *err, size_t errlen)
{
	bool secret = kind == LATCH_FILE_SECRET;

	if (S_ISLNK(st->st_mode))
		return latch_errf_at(err, errlen, -ELOOP, path, 0, "is a symbolic link; replace it with the file");
	if (!S_ISREG(st->st_mode))
		return latch_errf_at(err, errlen, -EINVAL, path, 0, "not a regular file");
	if (kind == LATCH_FILE_PLAIN)
		return 0;
	/* root's files, or the caller's own (unit tests run unprivileged) */
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return latch_errf_at(err, errlen, -EPERM, path, 0,
				     "owned by uid %u, not root; run chown root %s: it decides what sandboxes may do",
				     (unsigned)st->st_uid, path);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return latch_errf_at(err, errlen, -EPERM, path, 0,
				     "writable by group or others (mode %04o); run chmod %s %s",
				     (unsigned)(st->st_mode & 07777), secret ? "600" : "go-w", path);
	if (secret && (st->st_mode & (S_IRWXG | S_IRWXO)))
		return latch_errf_at(err, errlen, -EPERM, path, 0,
				     "a secret readable by group or others (mode %04o); run chmod 600 %s",
				     (unsigned)(st->st_mode & 07777), path);
	return 0;
}

int latch_open_trusted(const char *path, enum latch_file_kind kind, const char *what, struct stat *st, char *err,
		       size_t errlen)
{
	struct stat own;
	int fd, ret;

	if (!st)
		st = &own;
	/*
	 * O_NOFOLLOW: a link could point anywhere.  O_NONBLOCK: opening a FIFO
	 * for reading would wait for a writer; this way it opens at once and
	 * fstat refuses it (O_NONBLOCK does nothing to a regular file's reads).
	 */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0 && errno == ELOOP && what)
		return latch_errf_at(err, errlen, -ELOOP, path, 0,
				     "is a symbolic link; %s must be a regular file: replace the link with the file",
				     what);
	if (fd < 0 && errno == ELOOP)
		return latch_errf_at(err, errlen, -ELOOP, path, 0, "is a symbolic link; replace it with the file");
	if (fd < 0)
		return latch_errf_at(err, errlen, -errno, path, 0, "cannot open: %s", strerror(errno));
	if (fstat(fd, st))
		ret = latch_errf_at(err, errlen, -errno, path, 0, "cannot stat: %s", strerror(errno));
	else
		ret = latch_file_check(path, st, kind, err, errlen);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}
