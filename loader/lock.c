// SPDX-License-Identifier: GPL-2.0-only
/*
 * lock.c - the policy lock of a sandbox: one flock file per sandbox under
 * run/latch, taken by every writer of the policy maps that reads before it
 * writes (see loader.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "loader/loader.h"

int latch_policy_lock(const char *name, char *err, size_t errlen)
{
	return latch_policy_lock_wait(name, 10000, err, errlen);
}

int latch_policy_lock_wait(const char *name, int wait_ms, char *err, size_t errlen)
{
	char path[PATH_MAX], dir[PATH_MAX];
	long long until = latch_now_ms() + wait_ms;
	int fd, rc;

	if (latch_path(path, sizeof(path), LATCH_POLICY_LOCK_FMT, name) || latch_path(dir, sizeof(dir), LATCH_RUN_DIR))
		return latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long");
	rc = latch_mkdirs(dir, 0700); /* root-only */
	if (rc)
		return latch_errf(err, errlen, rc, "%s: %s", dir, strerror(-rc));
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return latch_errf(err, errlen, -errno, "%s: %s", path, strerror(errno));
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK || latch_now_ms() >= until) {
			rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
			close(fd);
			return latch_errf(err, errlen, rc, "the policy of '%s' stayed locked (%s); try again", name,
					  path);
		}
		usleep(10 * 1000);
	}
	return fd;
}

void latch_policy_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}
