// SPDX-License-Identifier: GPL-2.0-only
/*
 * state.c - each sandbox's state files: one path scheme, one atomic write,
 * one set of permissions and one format for all of their owners.
 *
 * The files outlive the process that wrote them and are read back by
 * another (latchd after a restart, the CLI after latchd), so a file is
 * trusted only when nobody but root could have put it there.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"

/* Far above any state latch writes (a kit's is under 8 KiB, learned names a few hundred KiB). */
#define STATE_FILE_MAX (4u << 20)

static const struct {
	const char *fmt; /* under $LATCH_ROOT, with the sandbox's name */
	enum latch_file_kind trust;
} kinds[LATCH_STATE_KINDS] = {
	[LATCH_STATE_PROFILE] = { LATCH_POLICY_DIR "/%s.profile", LATCH_FILE_CONFIG },
	/* the placeholders the guest holds are worth something inside it */
	[LATCH_STATE_KIT] = { LATCH_POLICY_DIR "/%s.kit", LATCH_FILE_SECRET },
	[LATCH_STATE_LEARNED] = { LATCH_POLICY_DIR "/%s.learned", LATCH_FILE_CONFIG },
	[LATCH_STATE_GRANTS] = { LATCH_POLICY_DIR "/%s.grants", LATCH_FILE_CONFIG },
	/* NAME/state/ is the guest's state backup (vm/guest_state.h): this record is NAME/sandbox */
	[LATCH_STATE_VM] = { LATCH_SANDBOX_DIR_FMT "/sandbox", LATCH_FILE_CONFIG },
	[LATCH_STATE_AGENT] = { LATCH_POLICY_DIR "/%s.agent", LATCH_FILE_CONFIG },
};

int latch_state_file_path(const char *name, enum latch_state_kind kind, char *buf, size_t len)
{
	/* the name becomes part of a path: nothing that could walk out of the directory */
	if ((unsigned)kind >= LATCH_STATE_KINDS || latch_parse_name(name, NULL, 0))
		return -EINVAL;
	return latch_path(buf, len, kinds[kind].fmt, name);
}

static int path_or_err(const char *name, enum latch_state_kind kind, char *path, size_t len, char *err, size_t errlen)
{
	int ret = latch_state_file_path(name, kind, path, len);

	if (ret == -EINVAL)
		return latch_errf(err, errlen, ret, "'%s' is not a sandbox name (1-%d of a-z, 0-9, '-')", name,
				  LATCH_NAME_MAX);
	if (ret)
		return latch_errf(err, errlen, ret, "LATCH_ROOT is too long");
	return 0;
}

int latch_state_file_read_raw(const char *name, enum latch_state_kind kind, char **text, size_t *len, char *err,
			      size_t errlen)
{
	char path[PATH_MAX], *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, ret;

	*text = NULL;
	*len = 0;
	ret = path_or_err(name, kind, path, sizeof(path), err, errlen);
	if (ret)
		return ret;
	/* the one opener: a link, a FIFO or a file others could write is refused as every trusted file is */
	fd = latch_open_trusted(path, kinds[kind].trust, "a state file", &st, err, errlen);
	if (fd < 0)
		return fd;
	ret = 0;
	if (!ret && st.st_size > (off_t)STATE_FILE_MAX)
		ret = latch_errf_at(err, errlen, -EFBIG, path, 0,
				    "larger than %u bytes; latch never writes one so large", STATE_FILE_MAX);
	if (!ret && !(buf = malloc((size_t)st.st_size + 1)))
		ret = -ENOMEM;
	while (!ret && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			ret = latch_errf_at(err, errlen, -errno, path, 0, "read error: %s", strerror(errno));
		else if (n == 0)
			break; /* shorter than fstat said: replaced by rename, never truncated, so what is here is whole */
		else
			got += (size_t)n;
	}
	close(fd);
	if (ret) {
		free(buf);
		return ret;
	}
	buf[got] = '\0';
	if (strlen(buf) != got) {
		explicit_bzero(buf, got);
		free(buf);
		return latch_errf_at(err, errlen, -EINVAL, path, 0, "has a NUL byte; latch never writes one");
	}
	*text = buf;
	*len = got;
	return 0;
}

/* The first line that is not blank or a comment is `KEY = ...` of a key of the table. */
static bool current_format(const char *text, const struct latch_state_format *fmt)
{
	const char *l = text;

	for (;;) {
		l += strspn(l, " \t\r\n");
		if (*l != '#')
			break;
		l = strchr(l, '\n');
		if (!l)
			return true; /* comments alone: nothing to read either way */
	}
	if (!*l)
		return true;
	for (int i = 0; i < fmt->n_keys; i++) {
		size_t n = strlen(fmt->keys[i].name);
		const char *p = l + n;

		if (strncmp(l, fmt->keys[i].name, n))
			continue;
		p += strspn(p, " \t");
		if (*p == '=')
			return true;
	}
	return false;
}

int latch_state_file_read(const char *name, enum latch_state_kind kind, const struct latch_state_format *fmt, void *obj,
			  char *err, size_t errlen)
{
	char path[PATH_MAX], *text;
	size_t len;
	int ret = latch_state_file_read_raw(name, kind, &text, &len, err, errlen);

	if (ret)
		return ret;
	latch_state_file_path(name, kind, path, sizeof(path)); /* it was made above */
	if (fmt->legacy && !current_format(text, fmt))
		ret = fmt->legacy(path, text, obj, err, errlen);
	else
		ret = latch_kv_parse(path, text, fmt->keys, fmt->n_keys, fmt->flags, NULL, obj, err, errlen);
	explicit_bzero(text, len);
	free(text);
	return ret;
}

/* Make the file's directory, root-only: the files in it say what a sandbox may do. */
static int make_dir(const char *path, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	char *slash;
	int ret;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	ret = latch_mkdirs(dir, 0700);
	if (ret)
		return latch_errf(err, errlen, ret, "cannot create %s: %s", dir, strerror(-ret));
	return 0;
}

int latch_state_file_write(const char *name, enum latch_state_kind kind, const struct latch_state_format *fmt,
			   const char *header, const void *obj, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret = path_or_err(name, kind, path, sizeof(path), err, errlen);

	if (!ret)
		ret = make_dir(path, err, errlen);
	if (!ret)
		ret = latch_kv_write(path, 0600, header, fmt->keys, fmt->n_keys, obj, err, errlen);
	return ret;
}

int latch_state_file_write_raw(const char *name, enum latch_state_kind kind, const void *data, size_t len, char *err,
			       size_t errlen)
{
	char path[PATH_MAX];
	int ret = path_or_err(name, kind, path, sizeof(path), err, errlen);

	if (!ret)
		ret = make_dir(path, err, errlen);
	if (!ret && (ret = latch_write_atomic(path, 0600, data, len)))
		latch_errf(err, errlen, ret, "cannot write %s: %s", path, strerror(-ret));
	return ret;
}

int latch_state_file_remove(const char *name, enum latch_state_kind kind, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int ret = path_or_err(name, kind, path, sizeof(path), err, errlen);

	if (ret)
		return ret;
	if (unlink(path) && errno != ENOENT)
		return latch_errf(err, errlen, -errno, "cannot remove %s: %s", path, strerror(errno));
	return 0;
}

int latch_state_forget(const char *name, char *err, size_t errlen)
{
	static const enum latch_state_kind gone[] = { LATCH_STATE_PROFILE, LATCH_STATE_LEARNED, LATCH_STATE_GRANTS,
						      LATCH_STATE_AGENT };
	char e[LATCH_ERR_MAX];
	int ret = 0;

	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
		int r = latch_state_file_remove(name, gone[i], e, sizeof(e));

		if (r && !ret)
			ret = latch_errf(err, errlen, r, "%s", e);
	}
	return ret;
}
