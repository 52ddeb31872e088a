// SPDX-License-Identifier: GPL-2.0-only
/*
 * load.c - find a kit: its file in /etc/latch/kits or its built-in, read
 * under the file checks, parsed (schema.c), checked (validate.c).
 *
 * A kit decides where a sandbox may go and which keys its requests carry,
 * so a kit file is read only when it is a regular file (never through a
 * link) that root, or the caller, owns and nobody else may write.  A file
 * takes the place of the built-in of the same name, whole: nothing of the
 * built-in is merged in, and a broken file is an error, never a fallback.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit/raw.h"
/* generated from kit/kits/NAME.yaml by kit/embed_kits.sh */
#include "kit/kits_builtin.h"

#define N_BUILTIN (sizeof(latch_builtin_kits) / sizeof(latch_builtin_kits[0]))
#define KIT_EXT ".yaml"

int latch_kit_dir(char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_KITS_DIR);
}

int kit_read_checked(const char *path, enum latch_file_kind kind, size_t max, char **text, size_t *len, char *err,
		     size_t errlen)
{
	const char *what = kind == LATCH_FILE_SECRET ? "a secret file" : "a kit";
	size_t got = 0;
	char *buf = NULL;
	int fd, ret = 0;

	*text = NULL;
	*len = 0;
	fd = latch_open_trusted(path, kind, what, NULL, err, errlen);
	if (fd < 0)
		return fd;
	buf = malloc(max + 1);
	if (!buf) {
		ret = latch_errf_at(err, errlen, -ENOMEM, path, 0, "out of memory");
		goto out;
	}
	/* to EOF rather than st_size: the file may be growing */
	for (;;) {
		ssize_t r = read(fd, buf + got, max + 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = latch_errf_at(err, errlen, -errno, path, 0, "read error: %s", strerror(errno));
			break;
		}
		if (!r)
			break;
		got += r;
		if (got > max) {
			ret = latch_errf_at(err, errlen, -EFBIG, path, 0, "is larger than %zu bytes", max);
			break;
		}
	}
	if (!ret) {
		buf[got] = '\0';
		*text = buf;
		*len = got;
		buf = NULL;
	}
out:
	if (buf) {
		explicit_bzero(buf, max + 1); /* it may hold part of a secret */
		free(buf);
	}
	close(fd);
	return ret;
}

const char *latch_kit_builtin_text(const char *name)
{
	for (size_t i = 0; i < N_BUILTIN; i++)
		if (!strcmp(latch_builtin_kits[i].name, name))
			return latch_builtin_kits[i].text;
	return NULL;
}

struct latch_kit *latch_kit_parse(const char *text, size_t len, const char *source, const char *default_name,
				  const struct latch_kit_opts *opts, char *err, size_t errlen)
{
	struct raw_kit *raw = NULL;
	struct raw_doc doc;
	struct latch_kit *kit;
	int ret;

	if (len > LATCH_KIT_FILE_MAX) {
		latch_errf_at(err, errlen, -EFBIG, source, 0, "is larger than %d bytes", LATCH_KIT_FILE_MAX);
		errno = EFBIG;
		return NULL;
	}
	if (memchr(text, '\0', len)) {
		latch_errf_at(err, errlen, -EINVAL, source, 0, "has a NUL byte; a kit is a text file");
		errno = EINVAL;
		return NULL;
	}
	kit = calloc(1, sizeof(*kit));
	if (!kit) {
		latch_errf(err, errlen, -ENOMEM, "%s: out of memory", source);
		return NULL;
	}
	snprintf(kit->source, sizeof(kit->source), "%s", source);
	ret = kit_raw_read(text, len, source, &raw, &doc, err, errlen);
	if (!ret)
		ret = kit_build(raw, &doc, source, default_name, opts, kit, err, errlen);
	kit_raw_free(raw, &doc);
	if (ret) {
		latch_kit_free(kit);
		errno = -ret;
		return NULL;
	}
	return kit;
}

/* The name a file gives a kit that says none: its base name without ".yaml". */
static void name_of_path(const char *path, char *buf, size_t len)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > strlen(KIT_EXT) && !strcmp(base + n - strlen(KIT_EXT), KIT_EXT))
		n -= strlen(KIT_EXT);
	snprintf(buf, len, "%.*s", (int)n, base);
}

/*
 * The one reader of a kit file: the file checks, the parse, the checks, and
 * when the file stands in the kits directory (NAME is then the name `up`
 * looks it up by) its name.  `latch kits`, `latch kit check` and `latch up`
 * all come here, so they can't give one file two verdicts.  0 with *out, or
 * -errno with a line in err; -ENOENT, without a line, only when there is no
 * file (a kit that names a missing file is another error, never a fallback).
 */
static int load_path(const char *path, const char *name, bool in_dir, const struct latch_kit_opts *opts,
		     struct latch_kit **out, char *err, size_t errlen)
{
	struct latch_kit *kit;
	char *text;
	size_t len;
	int ret = kit_read_checked(path, LATCH_FILE_CONFIG, LATCH_KIT_FILE_MAX, &text, &len, err, errlen);

	*out = NULL;
	if (ret)
		return ret;
	kit = latch_kit_parse(text, len, path, name, opts, err, errlen);
	free(text);
	if (!kit)
		return errno == ENOENT ? -EINVAL : -errno;
	if (in_dir && strcmp(kit->name, name)) {
		latch_errf_at(err, errlen, -EINVAL, path, 0,
			      "name \"%s\" is not the file's name; write name: %s, or rename the file to %s%s",
			      kit->name, name, kit->name, KIT_EXT);
		latch_kit_free(kit);
		return -EINVAL;
	}
	*out = kit;
	return 0;
}

/* Is PATH a file of the kits directory (the one `up` reads)? */
static bool in_kits_dir(const char *path, const struct latch_kit_opts *opts)
{
	char dir[PATH_MAX], file_dir[PATH_MAX], real_dir[PATH_MAX], real_file_dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (opts && opts->dir)
		snprintf(dir, sizeof(dir), "%s", opts->dir);
	else if (latch_kit_dir(dir, sizeof(dir)))
		return false;
	snprintf(file_dir, sizeof(file_dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	if (slash == path)
		snprintf(file_dir, sizeof(file_dir), "/");
	return realpath(dir, real_dir) && realpath(file_dir, real_file_dir) && !strcmp(real_dir, real_file_dir);
}

struct latch_kit *latch_kit_load_file(const char *path, const struct latch_kit_opts *opts, char *err, size_t errlen)
{
	char name[PATH_MAX];
	struct latch_kit *kit;
	int ret;

	name_of_path(path, name, sizeof(name));
	ret = load_path(path, name, in_kits_dir(path, opts), opts, &kit, err, errlen);
	if (ret == -ENOENT)
		latch_errf_at(err, errlen, ret, path, 0, "no such file");
	errno = -ret;
	return kit;
}

/* "claude, codex, gemini, shell": for the message that says a kit is unknown. */
static void kit_names(const char *dir, char *buf, size_t len)
{
	struct latch_kit_info *v;
	size_t off = 0;
	int n;

	buf[0] = '\0';
	if (latch_kit_list(dir, &v, &n, NULL, 0))
		return;
	for (int i = 0; i < n && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s", i ? ", " : "", v[i].name);
	free(v);
}

struct latch_kit *latch_kit_load(const char *name, const struct latch_kit_opts *opts, char *err, size_t errlen)
{
	char dirbuf[PATH_MAX], path[PATH_MAX + LATCH_KIT_NAME_MAX + 8], names[512];
	const char *dir = opts && opts->dir ? opts->dir : NULL, *builtin;
	struct latch_kit *kit;
	int ret;

	if (latch_parse_file_name("kit", name, err, errlen)) {
		errno = EINVAL;
		return NULL;
	}
	if (!dir) {
		if (latch_kit_dir(dirbuf, sizeof(dirbuf))) {
			latch_errf(err, errlen, -ENAMETOOLONG, "LATCH_ROOT is too long for the kits directory");
			errno = ENAMETOOLONG;
			return NULL;
		}
		dir = dirbuf;
	}
	snprintf(path, sizeof(path), "%s/%s%s", dir, name, KIT_EXT);
	ret = load_path(path, name, true, opts, &kit, err, errlen);
	if (ret != -ENOENT) {
		errno = -ret;
		return kit;
	}
	builtin = latch_kit_builtin_text(name);
	if (!builtin) {
		kit_names(dir, names, sizeof(names));
		latch_errf(err, errlen, -ENOENT, "no kit '%s'; the kits are %s (see latch kits; yours go in %s/NAME%s)",
			   name, names, dir, KIT_EXT);
		errno = ENOENT;
		return NULL;
	}
	snprintf(path, sizeof(path), "builtin:%s", name);
	kit = latch_kit_parse(builtin, strlen(builtin), path, name, opts, err, errlen);
	if (kit)
		kit->builtin = true;
	return kit;
}

void latch_kit_free(struct latch_kit *kit)
{
	if (!kit)
		return;
	for (int i = 0; kit->command && kit->command[i]; i++)
		free(kit->command[i]);
	for (int i = 0; kit->egress && kit->egress[i]; i++)
		free(kit->egress[i]);
	free(kit->command);
	free(kit->egress);
	free(kit->egress_text);
	free(kit->creds);
	free(kit->setup);
	free(kit);
}

const struct latch_kit_cred *latch_kit_cred_find(const struct latch_kit *kit, const char *name)
{
	for (int i = 0; i < kit->n_creds; i++)
		if (!strcmp(kit->creds[i].name, name))
			return &kit->creds[i];
	return NULL;
}

/* ---- the list */

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct latch_kit_info *)a)->name, ((const struct latch_kit_info *)b)->name);
}

static struct latch_kit_info *info_add(struct latch_kit_info **v, int *n, const char *name)
{
	struct latch_kit_info *nv;

	for (int i = 0; i < *n; i++)
		if (!strcmp((*v)[i].name, name))
			return &(*v)[i];
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return NULL;
	*v = nv;
	memset(&nv[*n], 0, sizeof(nv[*n]));
	snprintf(nv[*n].name, sizeof(nv[*n].name), "%s", name);
	return &nv[(*n)++];
}

int latch_kit_list(const char *dir, struct latch_kit_info **out, int *n, char *err, size_t errlen)
{
	struct latch_kit_info *v = NULL, *info;
	struct dirent *de;
	int count = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < N_BUILTIN; i++) {
		if (!(info = info_add(&v, &count, latch_builtin_kits[i].name)))
			goto oom;
		info->builtin = true;
	}
	d = dir ? opendir(dir) : NULL;
	while (d && (de = readdir(d))) {
		char name[LATCH_KIT_NAME_MAX + 1];
		size_t len = strlen(de->d_name);

		if (len <= strlen(KIT_EXT) || strcmp(de->d_name + len - strlen(KIT_EXT), KIT_EXT))
			continue;
		len -= strlen(KIT_EXT);
		if (len > LATCH_KIT_NAME_MAX)
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)len, de->d_name);
		if (latch_parse_file_name("kit", name, NULL, 0))
			continue;
		if (!(info = info_add(&v, &count, name))) {
			closedir(d);
			goto oom;
		}
		info->file = true;
	}
	if (d)
		closedir(d);
	qsort(v, count, sizeof(*v), info_cmp);
	*out = v;
	*n = count;
	return 0;
oom:
	free(v);
	return latch_errf(err, errlen, -ENOMEM, "out of memory listing the kits");
}
