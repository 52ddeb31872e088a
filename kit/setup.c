// SPDX-License-Identifier: GPL-2.0-only
/*
 * setup.c - fetch a kit's npm installers on the host and hold them to their
 * pinned sha512 before anything of them reaches a guest.
 *
 * The registry (or a mirror, or the cache) is never trusted: a tarball is
 * hashed as it arrives and is used only when its digest is the kit's.  It
 * arrives in an unnamed file (O_TMPFILE) of the cache directory and gets its
 * name, the hash, only after the check, so a mismatch or a cut download
 * leaves nothing behind.  A cache hit is hashed again before use (the file
 * is root's, but a cache outlives the run that checked it).  The caller
 * installs from the descriptor that was hashed, never by reopening a path.
 */
#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit/kit.h"

#define PACKAGE_JSON_MAX (1 << 20)
#define HEX_LEN (2 * LATCH_SHA512_LEN)

static void hex_of(const unsigned char *d, char out[HEX_LEN + 1])
{
	for (int i = 0; i < LATCH_SHA512_LEN; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The integrity string of a digest: what a mismatch names beside the pin's. */
static void integrity_of(const unsigned char *d, char out[LATCH_NPM_INTEGRITY_MAX + 1])
{
	memcpy(out, "sha512-", 7);
	EVP_EncodeBlock((unsigned char *)out + 7, d, LATCH_SHA512_LEN);
}

static int cache_dir(const struct latch_npm_source *src, char *buf, size_t len)
{
	int ret;

	if (src->cache_dir) {
		ret = snprintf(buf, len, "%s", src->cache_dir);
		return ret < 0 || (size_t)ret >= len ? -ENAMETOOLONG : 0;
	}
	return latch_path(buf, len, LATCH_NPM_CACHE_DIR);
}

/* ---- hashing */

struct sink {
	int fd;
	EVP_MD_CTX *md;
	uint64_t got;
	uint64_t max; /* bytes; more is EFBIG */
	int error; /* errno of a failed write, or EFBIG */
};

static int sink_put(struct sink *s, const void *data, size_t len)
{
	const char *p = data;
	size_t n = len;

	if (s->got + len > s->max) {
		s->error = EFBIG;
		return -EFBIG;
	}
	if (!EVP_DigestUpdate(s->md, data, n)) {
		s->error = EIO;
		return -EIO;
	}
	while (s->fd >= 0 && n) {
		ssize_t w = write(s->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			s->error = errno;
			return -errno;
		}
		p += w;
		n -= w;
	}
	s->got += len;
	return 0;
}

/* FD whole through the hash (from offset 0), for a cache hit. */
static int hash_fd(int fd, unsigned char digest[LATCH_SHA512_LEN], uint64_t *size)
{
	struct sink s = { .fd = -1, .md = EVP_MD_CTX_new(), .max = LATCH_NPM_TARBALL_MAX };
	char buf[65536];
	unsigned int dlen = 0;
	int ret = 0;

	if (!s.md || !EVP_DigestInit_ex(s.md, EVP_sha512(), NULL)) {
		EVP_MD_CTX_free(s.md);
		return -ENOMEM;
	}
	for (off_t off = 0;;) {
		ssize_t r = pread(fd, buf, sizeof(buf), off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = -errno;
			break;
		}
		if (!r)
			break;
		ret = sink_put(&s, buf, r);
		if (ret)
			break;
		off += r;
	}
	if (!ret && !EVP_DigestFinal_ex(s.md, digest, &dlen))
		ret = -EIO;
	*size = s.got;
	EVP_MD_CTX_free(s.md);
	return ret;
}

/* ---- the registry, over libcurl */

static size_t to_sink(char *data, size_t size, size_t n, void *arg)
{
	return sink_put(arg, data, size * n) ? 0 : size * n; /* 0 stops the transfer */
}

/* A handle for URL: https only (redirects too), TLS verified, bounded in time and size. */
static CURL *registry_handle(const char *url, const struct latch_npm_source *src, uint64_t max, char *curl_err)
{
	CURL *c = curl_easy_init();
	long timeout = src->timeout ? src->timeout : LATCH_NPM_TIMEOUT;

	if (!c)
		return NULL;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 3L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (src->ca_file && *src->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, src->ca_file);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	/* a registry that trickles is given up on well before the timeout */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max);
	curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "latch");
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_sink);
	return c;
}

/* GET URL through S; 0 or -errno with a line naming WHAT in err. */
static int registry_get(const char *url, const struct latch_npm_source *src, uint64_t max, struct sink *s,
			const char *what, char *err, size_t errlen)
{
	char curl_err[CURL_ERROR_SIZE] = "";
	CURL *c = registry_handle(url, src, max, curl_err);
	CURLcode rc;

	if (!c)
		return latch_errf(err, errlen, -ENOMEM, "%s: out of memory", what);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
	rc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	if (s->error == EFBIG || rc == CURLE_FILESIZE_EXCEEDED)
		return latch_errf(err, errlen, -EFBIG, "%s: %s is larger than %llu MiB; refused", what, url,
				  (unsigned long long)(max >> 20));
	if (s->error)
		return latch_errf(err, errlen, -s->error, "%s: writing it: %s", what, strerror(s->error));
	if (rc != CURLE_OK)
		return latch_errf(err, errlen, -EIO, "%s: fetching %s failed: %s", what, url,
				  curl_err[0] ? curl_err : curl_easy_strerror(rc));
	return 0;
}

/* ---- package.json, read from the verified tarball */

/* The first entry TOP/package.json (one level down) (npm's "package/" or any other top directory). */
static int read_package_json(int fd, char **text, char *err, size_t errlen, const char *what)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	int ret = -ENOENT, dup_fd = dup(fd);

	*text = NULL;
	if (!a || dup_fd < 0) {
		archive_read_free(a);
		if (dup_fd >= 0)
			close(dup_fd);
		return latch_errf(err, errlen, -ENOMEM, "%s: out of memory", what);
	}
	archive_read_support_filter_gzip(a);
	archive_read_support_format_tar(a);
	if (lseek(dup_fd, 0, SEEK_SET) < 0 || archive_read_open_fd(a, dup_fd, 65536) != ARCHIVE_OK) {
		ret = latch_errf(err, errlen, -EINVAL, "%s: not a gzipped tar: %s", what, archive_error_string(a));
		goto out;
	}
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e), *slash = name ? strchr(name, '/') : NULL;
		la_int64_t size = archive_entry_size(e);

		if (!slash || strcmp(slash + 1, "package.json") || archive_entry_filetype(e) != AE_IFREG)
			continue;
		if (size <= 0 || size > PACKAGE_JSON_MAX) {
			ret = latch_errf(err, errlen, -EINVAL, "%s: package.json of %lld bytes", what, (long long)size);
			goto out;
		}
		*text = calloc(1, size + 1);
		if (!*text || archive_read_data(a, *text, size) != size) {
			free(*text);
			*text = NULL;
			ret = latch_errf(err, errlen, -EINVAL, "%s: package.json could not be read", what);
			goto out;
		}
		ret = 0;
		goto out;
	}
	ret = latch_errf(err, errlen, -EINVAL, "%s: the tarball has no package.json", what);
out:
	archive_read_free(a);
	close(dup_fd);
	lseek(fd, 0, SEEK_SET);
	return ret;
}

static int add_bin(struct latch_npm_tarball *t, const char *name, const char *path, const char *what, char *err,
		   size_t errlen)
{
	size_t n = strlen(name);

	if (path[0] == '.' && path[1] == '/')
		path += 2; /* npm writes "./cli.js" as often as "cli.js" */
	if (t->n_bins >= LATCH_NPM_BINS_MAX)
		return latch_errf(err, errlen, -EINVAL, "%s: more than %d bins", what, LATCH_NPM_BINS_MAX);
	if (!n || n > LATCH_NPM_BIN_NAME_MAX || name[0] == '.' ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._") != n ||
	    !latch_npm_bin_path_ok(path) || strlen(path) > LATCH_KIT_PATH_MAX)
		return latch_errf(err, errlen, -EINVAL,
				  "%s: package.json's bin \"%.64s\": \"%.80s\" is not a plain command name and a path "
				  "inside the package; name the bins in the kit (bin: [PATH])",
				  what, name, path);
	snprintf(t->bins[t->n_bins].name, sizeof(t->bins[0].name), "%s", name);
	snprintf(t->bins[t->n_bins].path, sizeof(t->bins[0].path), "%s", path);
	t->n_bins++;
	return 0;
}

/* The bins: the kit's when it names them, else package.json's (whose name and version must be the pin's). */
static int find_bins(const struct latch_kit_npm *p, struct latch_npm_tarball *t, const char *what, char *err,
		     size_t errlen)
{
	json_t *pj, *bin;
	char *text;
	const char *key, *base = strrchr(p->name, '/');
	json_t *v;
	int ret = read_package_json(t->fd, &text, err, errlen, what);

	if (ret)
		return ret;
	pj = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(pj)) {
		json_decref(pj);
		return latch_errf(err, errlen, -EINVAL, "%s: package.json is not a JSON object", what);
	}
	if (!json_is_string(json_object_get(pj, "name")) || !json_is_string(json_object_get(pj, "version")) ||
	    strcmp(json_string_value(json_object_get(pj, "name")), p->name) ||
	    strcmp(json_string_value(json_object_get(pj, "version")), p->version)) {
		json_decref(pj);
		return latch_errf(err, errlen, -EINVAL, "%s: the tarball's package.json is not %s@%s", what, p->name,
				  p->version);
	}
	for (int i = 0; i < p->n_bins && !ret; i++) {
		const char *slash = strrchr(p->bins[i], '/');

		ret = add_bin(t, slash ? slash + 1 : p->bins[i], p->bins[i], what, err, errlen);
	}
	bin = json_object_get(pj, "bin");
	if (!p->n_bins && json_is_string(bin))
		ret = add_bin(t, base ? base + 1 : p->name, json_string_value(bin), what, err, errlen);
	else if (!p->n_bins && json_is_object(bin))
		json_object_foreach(bin, key, v) {
			if (!ret)
				ret = json_is_string(v) ?
					      add_bin(t, key, json_string_value(v), what, err, errlen) :
					      latch_errf(err, errlen, -EINVAL,
							 "%s: package.json's bin %.64s is not a path", what, key);
		}
	json_decref(pj);
	if (!ret && !t->n_bins)
		ret = latch_errf(err, errlen, -EINVAL,
				 "%s: package.json names no bin to put on the guest's PATH; name it in the kit (bin: "
				 "[PATH])",
				 what);
	return ret;
}

/* ---- fetch */

/* The cache file of P, hashed again: 0 with t->fd, -ENOENT when there is none, else refused (and removed). */
static int from_cache(const struct latch_kit_npm *p, struct latch_npm_tarball *t, const char *what, char *err,
		      size_t errlen)
{
	unsigned char got[LATCH_SHA512_LEN];
	char got_int[LATCH_NPM_INTEGRITY_MAX + 1];
	int fd = latch_open_trusted(t->file, LATCH_FILE_SECRET, "a cached installer", NULL, err, errlen);
	int ret;

	if (fd == -ENOENT)
		return -ENOENT;
	if (fd < 0)
		return fd; /* a link or someone else's file: refused, left for the operator to look at */
	ret = hash_fd(fd, got, &t->size);
	if (ret) {
		close(fd);
		return latch_errf(err, errlen, ret, "%s: reading the cache file %s: %s", what, t->file, strerror(-ret));
	}
	if (memcmp(got, p->sha512, sizeof(got))) {
		close(fd);
		unlink(t->file);
		integrity_of(got, got_int);
		return latch_errf(err, errlen, -EBADMSG,
				  "%s: the cached tarball %s does not match its pin (expected %s, got %s); removed it, "
				  "run again to fetch it anew",
				  what, t->file, p->integrity, got_int);
	}
	t->fd = fd;
	t->cached = true;
	return 0;
}

static int from_registry(const struct latch_kit_npm *p, const struct latch_npm_source *src, const char *dir,
			 struct latch_npm_tarball *t, const char *what, char *err, size_t errlen)
{
	char url[LATCH_NPM_NAME_MAX + LATCH_NPM_VERSION_MAX + 600], proc[64], got_int[LATCH_NPM_INTEGRITY_MAX + 1];
	unsigned char got[LATCH_SHA512_LEN];
	unsigned int dlen = 0;
	struct sink s = { .md = EVP_MD_CTX_new(), .max = LATCH_NPM_TARBALL_MAX };
	int ret;

	if (!src->registry || latch_npm_tarball_url(src->registry, p, url, sizeof(url)))
		return latch_errf(err, errlen, -EINVAL, "%s: no registry URL (npm_registry in latch.conf)", what);
	/* unnamed until verified: a mismatch or a cut download leaves nothing in the cache */
	s.fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (s.fd < 0 || !s.md || !EVP_DigestInit_ex(s.md, EVP_sha512(), NULL)) {
		ret = s.fd < 0 ? -errno : -ENOMEM;
		latch_errf(err, errlen, ret, "%s: a file in %s: %s", what, dir, strerror(-ret));
		goto out;
	}
	ret = registry_get(url, src, LATCH_NPM_TARBALL_MAX, &s, what, err, errlen);
	if (ret)
		goto out;
	if (!EVP_DigestFinal_ex(s.md, got, &dlen)) {
		ret = latch_errf(err, errlen, -EIO, "%s: hashing failed", what);
		goto out;
	}
	if (memcmp(got, p->sha512, sizeof(got))) {
		integrity_of(got, got_int);
		ret = latch_errf(err, errlen, -EBADMSG,
				 "%s: the tarball from %s does not match its pin (expected %s, got %s); refused, "
				 "nothing kept",
				 what, src->registry, p->integrity, got_int);
		goto out;
	}
	if (fsync(s.fd)) {
		ret = latch_errf(err, errlen, -errno, "%s: %s: %s", what, dir, strerror(errno));
		goto out;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", s.fd);
	/* EEXIST: another run cached the same bytes first; this descriptor was checked all the same */
	if (linkat(AT_FDCWD, proc, AT_FDCWD, t->file, AT_SYMLINK_FOLLOW) && errno != EEXIST) {
		ret = latch_errf(err, errlen, -errno, "%s: naming %s: %s", what, t->file, strerror(errno));
		goto out;
	}
	/* the installer reads it back from this descriptor: no path is opened again */
	t->fd = s.fd;
	t->size = s.got;
	s.fd = -1;
	lseek(t->fd, 0, SEEK_SET);
out:
	if (s.fd >= 0)
		close(s.fd);
	EVP_MD_CTX_free(s.md);
	return ret;
}

int latch_npm_fetch(const struct latch_kit_npm *p, const struct latch_npm_source *src, struct latch_npm_tarball *out,
		    char *err, size_t errlen)
{
	char dir[PATH_MAX - HEX_LEN - 16], hex[HEX_LEN + 1], what[LATCH_NPM_NAME_MAX + LATCH_NPM_VERSION_MAX + 16];
	int ret;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	snprintf(what, sizeof(what), "setup %s@%s", p->name, p->version);
	if (cache_dir(src, dir, sizeof(dir)))
		return latch_errf(err, errlen, -ENAMETOOLONG, "%s: the cache path is too long", what);
	ret = latch_mkdirs(dir, 0700);
	if (!ret && chmod(dir, 0700))
		ret = -errno;
	if (ret)
		return latch_errf(err, errlen, ret, "%s: cache %s: %s", what, dir, strerror(-ret));
	hex_of(p->sha512, hex);
	/* named by the hash: a hit is the pin's bytes by name, and hashed again to be sure */
	snprintf(out->file, sizeof(out->file), "%s/%s.tgz", dir, hex);
	ret = from_cache(p, out, what, err, errlen);
	if (ret == -ENOENT)
		ret = from_registry(p, src, dir, out, what, err, errlen);
	if (!ret)
		ret = find_bins(p, out, what, err, errlen);
	if (ret)
		latch_npm_tarball_close(out);
	return ret;
}

void latch_npm_tarball_close(struct latch_npm_tarball *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

/* ---- the registry's word, for `latch kit pin` */

int latch_npm_registry_integrity(const struct latch_npm_source *src, const char *name, const char *version,
				 char out[LATCH_NPM_INTEGRITY_MAX + 1], char *err, size_t errlen)
{
	char url[LATCH_NPM_NAME_MAX + LATCH_NPM_VERSION_MAX + 600], what[LATCH_NPM_NAME_MAX + 80];
	unsigned char sha[LATCH_SHA512_LEN];
	struct sink s = { .fd = -1, .md = EVP_MD_CTX_new(), .max = 8 * PACKAGE_JSON_MAX };
	char *body = NULL;
	json_t *doc = NULL;
	const char *integrity;
	int ret, mfd = memfd_create("latch-npm-meta", MFD_CLOEXEC), n;

	snprintf(what, sizeof(what), "%s@%s", name, version);
	n = snprintf(url, sizeof(url), "%s/%s/%s", src->registry, name, version);
	if (mfd < 0 || !s.md || !EVP_DigestInit_ex(s.md, EVP_sha512(), NULL) || n < 0 || (size_t)n >= sizeof(url)) {
		ret = latch_errf(err, errlen, -ENOMEM, "%s: out of memory", what);
		goto out;
	}
	s.fd = mfd;
	ret = registry_get(url, src, PACKAGE_JSON_MAX * 8, &s, what, err, errlen);
	if (ret)
		goto out;
	body = calloc(1, s.got + 1);
	if (!body || pread(mfd, body, s.got, 0) != (ssize_t)s.got) {
		ret = latch_errf(err, errlen, -EIO, "%s: reading the registry's answer failed", what);
		goto out;
	}
	doc = json_loads(body, 0, NULL);
	integrity = json_string_value(json_object_get(json_object_get(doc, "dist"), "integrity"));
	if (!integrity || json_is_string(json_object_get(doc, "version")) == 0 ||
	    strcmp(json_string_value(json_object_get(doc, "version")), version)) {
		ret = latch_errf(err, errlen, -EINVAL, "%s: the registry's answer has no dist.integrity for it", what);
		goto out;
	}
	if (latch_npm_integrity_parse(integrity, sha)) {
		ret = latch_errf(
			err, errlen, -EINVAL,
			"%s: unverifiable: the registry gives no sha512 integrity (%.40s); latch will not pin it", what,
			integrity);
		goto out;
	}
	snprintf(out, LATCH_NPM_INTEGRITY_MAX + 1, "%s", integrity);
out:
	json_decref(doc);
	free(body);
	if (mfd >= 0)
		close(mfd);
	EVP_MD_CTX_free(s.md);
	return ret;
}
