// SPDX-License-Identifier: GPL-2.0-only
/*
 * template.c - the warm start: make a template guest, restore it as a
 * sandbox, adopt it (template.h says why each step is there).
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "vm/agent_client.h"
#include "vm/net.h"
#include "vm/sandbox_vm.h"
#include "vm/template.h"

#define TEMPLATE_FORMAT 1 /* bump when what a template holds changes */

/* libvirt's save file (src/qemu/qemu_saveimage.h): a header, then XML, a cookie and zeros, then QEMU's stream. */
#define SAVE_MAGIC "LibvirtQemudSave"
#define SAVE_VERSION 2
struct save_header {
	char magic[16];
	uint32_t version, data_len, was_running, compressed, cookie_offset;
	uint32_t unused[14];
};

int latch_template_locate(const struct latch_vm_state *st, bool kvm, const struct latch_vm_up_opts *o,
			  struct latch_template *t, char *err, size_t errlen)
{
	uint32_t h;

	memset(t, 0, sizeof(*t));
	snprintf(t->id, sizeof(t->id), "m%u-c%u-%s%s%.23s", st->memory_mib, st->cpus, kvm ? "kvm" : "tcg",
		 *o->template_tag ? "-" : "", o->template_tag);
	h = latch_fnv1a(2166136261u, st->image_dir, strlen(st->image_dir));
	h = latch_fnv1a(h, t->id, strlen(t->id));
	snprintf(t->token, sizeof(t->token), "tpl-%08x", h);
	if (snprintf(t->dir, sizeof(t->dir), "%s/templates", st->image_dir) >= (int)sizeof(t->dir) ||
	    snprintf(t->save, sizeof(t->save), "%s/%s.save", t->dir, t->id) >= (int)sizeof(t->save) ||
	    snprintf(t->inputs, sizeof(t->inputs), "%s/%s.inputs", t->dir, t->id) >= (int)sizeof(t->inputs) ||
	    snprintf(t->lock, sizeof(t->lock), "%s/%s.lock", t->dir, t->id) >= (int)sizeof(t->lock) ||
	    snprintf(t->empty, sizeof(t->empty), "%s/empty", t->dir) >= (int)sizeof(t->empty))
		return latch_errf(err, errlen, -ENAMETOOLONG, "image path %s is too long", st->image_dir);
	if (snprintf(t->overlay, sizeof(t->overlay), "%s/" LATCH_IMAGE_DISK, st->image_dir) >= (int)sizeof(t->overlay))
		return latch_errf(err, errlen, -ENAMETOOLONG, "image path %s is too long", st->image_dir);
	if (access(t->overlay, F_OK))
		*t->overlay = '\0';
	else if (snprintf(t->overlay, sizeof(t->overlay), "%s/%s.qcow2", t->dir, t->id) >= (int)sizeof(t->overlay))
		return latch_errf(err, errlen, -ENAMETOOLONG, "image path %s is too long", st->image_dir);
	return 0;
}

static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return (size_t)n == len - 1 ? -EFBIG : 0;
}

/* What a template is made from; any change in it makes a new one. */
static int inputs_text(struct latch_virt *v, const struct latch_vm_state *st, const struct latch_vm_up_opts *o,
		       const struct latch_template *t, char *buf, size_t len, char *err, size_t errlen)
{
	char manifest[8192], path[PATH_MAX];
	unsigned long lib, hv;
	int r;

	r = snprintf(path, sizeof(path), "%s/manifest.txt", st->image_dir) >= (int)sizeof(path) ?
		    -ENAMETOOLONG :
		    read_small(path, manifest, sizeof(manifest));
	if (r)
		return latch_errf(err, errlen, r, "cannot read %s: %s", path, strerror(-r));
	if (latch_virt_versions(v, &lib, &hv))
		return latch_errf(err, errlen, -EIO, "libvirt did not say its versions");
	r = snprintf(buf, len, "format %d\ntemplate %s\nlibvirt %lu\nhypervisor %lu\ncpu %s\n%s%s", TEMPLATE_FORMAT,
		     t->id, lib, hv, strstr(t->id, "-kvm") ? LATCH_CPU_MODE_KVM : LATCH_CPU_MODE_TCG,
		     o->template_inputs ? o->template_inputs : "", manifest);
	return r > 0 && (size_t)r < len ? 0 : latch_errf(err, errlen, -EFBIG, "%s is too big", path);
}

static int lock_template(const struct latch_template *t, char *err, size_t errlen)
{
	int fd, r = latch_mkdirs(t->dir, 0711); /* qemu opens the template's disk in it while it boots */

	if (r)
		return latch_errf(err, errlen, r, "cannot create %s: %s", t->dir, strerror(-r));
	fd = open(t->lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || flock(fd, LOCK_EX)) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return latch_errf(err, errlen, r, "cannot lock %s: %s", t->lock, strerror(-r));
	}
	return fd;
}

static int run_qemu_img(const char *backing, const char *overlay, char *err, size_t errlen)
{
	char *argv[] = { "qemu-img",	  "create",	   "-q", "-f", "qcow2", "-F", "qcow2", "-b",
			 (char *)backing, (char *)overlay, NULL };
	int status;
	pid_t pid;

	if (posix_spawnp(&pid, "qemu-img", NULL, NULL, argv, (char *[]){ "PATH=/usr/bin:/bin", NULL }))
		return latch_errf(err, errlen, -ENOENT, "cannot run qemu-img (apt-get install qemu-utils)");
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return latch_errf(err, errlen, -EIO, "qemu-img could not create %s over %s", overlay, backing);
	return 0;
}

static int template_opts(const struct latch_vm_state *st, bool kvm, const struct latch_template *t,
			 struct latch_domain_opts *d)
{
	const uint8_t mac[6] = LATCH_TEMPLATE_MAC;
	char why[128];

	if (latch_vm_domain_opts(st, d, why, sizeof(why)))
		return -ENAMETOOLONG;
	snprintf(d->name, sizeof(d->name), "%s", t->token);
	d->kvm = kvm;
	/* no latch.ip: the template has no address for a sandbox to inherit */
	snprintf(d->cmdline, sizeof(d->cmdline), "console=ttyS0 quiet panic=-1 latch.template=1");
	memcpy(d->mac, mac, sizeof(mac));
	snprintf(d->tap, sizeof(d->tap), "lt-%.12s", t->token);
	snprintf(d->workspace, sizeof(d->workspace), "%s", t->empty);
	snprintf(d->workspace_tag, sizeof(d->workspace_tag), LATCH_TEMPLATE_WORKSPACE_TAG);
	d->genid = true;
	snprintf(d->overlay, sizeof(d->overlay), "%s", t->overlay);
	if (latch_vm_agent_path(t->token, d->agent_sock, sizeof(d->agent_sock)))
		return -ENAMETOOLONG;
	return latch_vm_console_path(t->token, d->console_log, sizeof(d->console_log));
}

/* Boot the template on a tap that stays down and bare, wait for its agent, save it. */
static int make_template(struct latch_virt *v, const struct latch_domain_opts *d, const struct latch_template *t,
			 const struct latch_vm_up_opts *o, int boot_timeout_ms, char *err, size_t errlen)
{
	char tmp[PATH_MAX + 8], e[LATCH_ERR_MAX], backing[PATH_MAX];
	struct latch_vm_domain_watch watch = { v, t->token, err, errlen };
	struct latch_agent_wait_stats seen;
	bool created;
	int r;

	latch_domain_remove(v, t->token, e, sizeof(e)); /* a template that a killed latch left */
	r = latch_mkdirs(d->workspace, 0755);
	if (r)
		return latch_errf(err, errlen, r, "cannot create %s: %s", d->workspace, strerror(-r));
	if (*t->overlay) {
		snprintf(backing, sizeof(backing), "%.*s/" LATCH_IMAGE_DISK, (int)(strrchr(t->dir, '/') - t->dir),
			 t->dir);
		unlink(t->overlay);
		r = run_qemu_img(backing, t->overlay, err, errlen);
		if (r)
			return r;
	}
	snprintf(backing, sizeof(backing), "%s", d->console_log);
	*strrchr(backing, '/') = '\0';
	r = latch_mkdirs(backing, 0700);
	if (r)
		return latch_errf(err, errlen, r, "cannot create %s: %s", backing, strerror(-r));
	r = latch_net_tap_create(d->tap, &created, err, errlen);
	if (r)
		return r;
	unlink(d->agent_sock);
	r = latch_domain_create(v, d, err, errlen);
	if (!r) {
		r = latch_agent_wait(d->agent_sock, boot_timeout_ms, latch_vm_domain_alive, &watch, NULL, 0, &seen);
		if (r == -ETIMEDOUT)
			latch_errf(err, errlen, r, "the template guest's agent did not answer (console log %s)",
				   d->console_log);
	}
	if (!r && o->template_prepare) {
		char pe[LATCH_ERR_MAX];

		r = o->template_prepare(t->token, o->template_arg, pe, sizeof(pe));
		if (r)
			latch_errf(err, errlen, r, "preparing the template: %s", pe);
	}
	snprintf(tmp, sizeof(tmp), "%s.new", t->save);
	unlink(tmp);
	if (!r)
		r = latch_domain_save(v, t->token, tmp, err, errlen);
	if (!r && rename(tmp, t->save))
		r = latch_errf(err, errlen, -errno, "cannot rename %s: %s", tmp, strerror(errno));
	latch_domain_remove(v, t->token, e, sizeof(e));
	latch_net_tap_delete(d->tap, e, sizeof(e));
	unlink(tmp);
	unlink(d->agent_sock);
	return r;
}

int latch_template_ensure(struct latch_virt *v, const struct latch_vm_state *st, bool kvm, int boot_timeout_ms,
			  const struct latch_vm_up_opts *o, const struct latch_template *t, bool *made, char *err,
			  size_t errlen)
{
	char want[9216], have[9216];
	struct latch_domain_opts d;
	int lock, r;

	*made = false;
	r = inputs_text(v, st, o, t, want, sizeof(want), err, errlen);
	if (r)
		return r;
	lock = lock_template(t, err, errlen);
	if (lock < 0)
		return lock;
	if (!read_small(t->inputs, have, sizeof(have)) && !strcmp(have, want) && access(t->save, F_OK) == 0)
		goto out;
	unlink(t->inputs);
	unlink(t->save);
	r = template_opts(st, kvm, t, &d);
	if (r)
		latch_errf(err, errlen, r, "image path %s is too long", st->image_dir);
	else
		r = make_template(v, &d, t, o, boot_timeout_ms, err, errlen);
	if (!r)
		r = latch_write_atomic(t->inputs, 0600, want, strlen(want));
	if (r) {
		unlink(t->save);
		if (*t->overlay)
			unlink(t->overlay);
	}
	*made = r == 0;
out:
	close(lock);
	return r;
}

int latch_template_overlay_path(const char *name, char *buf, size_t len)
{
	return latch_path(buf, len, LATCH_OVERLAYS_DIR "/%s.qcow2", name);
}

int latch_template_overlay_remove(const char *name)
{
	char path[PATH_MAX];

	if (latch_template_overlay_path(name, path, sizeof(path)))
		return -ENAMETOOLONG;
	return unlink(path) && errno != ENOENT ? -errno : 0;
}

static int copy_file(const char *from, const char *to, char *err, size_t errlen)
{
	int in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), out = -1, r = 0;
	struct stat sb;
	ssize_t n;

	if (in < 0 || fstat(in, &sb))
		r = -errno;
	if (!r) {
		unlink(to);
		out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (out < 0)
			r = -errno;
	}
	for (off_t left = r ? 0 : sb.st_size; left > 0; left -= n) {
		n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
	}
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) && !r)
		r = -errno;
	if (r) {
		unlink(to);
		return latch_errf(err, errlen, r, "cannot copy %s to %s: %s", from, to, strerror(-r));
	}
	return 0;
}

static void new_uuid(char *buf)
{
	uint8_t b[16];

	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		abort(); /* the kernel's generator always answers 16 bytes */
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	sprintf(buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
		b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/*
 * In xml, after the first anchor (NULL: the start) and before the first limit
 * after it (NULL: no limit), replace the value of the first attribute or
 * element that starts with open (ending in a quote: either quote is taken) up
 * to close with value; every such place when all.  -ENOENT when it is not
 * there: libvirt wrote something this does not know, and the restore must
 * not guess.
 */
static int xml_set(char **xml, const char *anchor, const char *limit, const char *open, const char *close,
		   const char *value, bool all)
{
	char o2[64], c2[8], *from, *end, *p, *q, *out;
	size_t off;
	int n = 0;

	snprintf(o2, sizeof(o2), "%s", open);
	snprintf(c2, sizeof(c2), "%s", close);
	for (int pass = 0; pass < 2 && !n; pass++) {
		if (pass) { /* the other quote */
			if (o2[strlen(o2) - 1] != '\'' || strcmp(c2, "'"))
				break;
			o2[strlen(o2) - 1] = '"';
			strcpy(c2, "\"");
		}
		from = anchor ? strstr(*xml, anchor) : *xml;
		while (from && (p = strstr(from, o2)) && (q = strstr(p + strlen(o2), c2))) {
			end = limit ? strstr(from, limit) : NULL;
			if (end && p > end)
				break;
			off = (size_t)(p - *xml) + strlen(o2);
			if (asprintf(&out, "%.*s%s%s", (int)off, *xml, value, q) < 0)
				return -ENOMEM;
			free(*xml);
			*xml = out;
			n++;
			from = all ? *xml + off + strlen(value) : NULL;
		}
	}
	return n ? 0 : -ENOENT;
}

/* The saved XML with st's identity in place of the template's (or the last restore's). */
static int restore_xml(char **xml, const struct latch_vm_state *st, const struct latch_template *t, const char *overlay,
		       const char *uuid)
{
	char dom[LATCH_NAME_MAX + 16], genid[40], sock[PATH_MAX], log[PATH_MAX], ws[PATH_MAX * 6], ov[PATH_MAX * 6];
	int r;

	snprintf(dom, sizeof(dom), LATCH_DOMAIN_PREFIX "%s", st->name);
	new_uuid(genid);
	if (latch_vm_agent_path(st->name, sock, sizeof(sock)) || latch_vm_console_path(st->name, log, sizeof(log)) ||
	    latch_xml_escape(*st->workspace ? st->workspace : t->empty, ws, sizeof(ws)) ||
	    latch_xml_escape(overlay, ov, sizeof(ov)))
		return -ENAMETOOLONG;
	r = xml_set(xml, NULL, NULL, "<name>", "</name>", dom, false);
	r = r ?: xml_set(xml, NULL, NULL, "<uuid>", "</uuid>", uuid, false);
	r = r ?: xml_set(xml, NULL, NULL, "<genid>", "</genid>", genid, false);
	r = r ?: xml_set(xml, "<latch:sandbox", ">", "name='", "'", st->name, false);
	r = r ?: xml_set(xml, "<interface type='ethernet'>", "</interface>", "<target dev='", "'", st->tap, false);
	r = r ?: xml_set(xml, "<channel type='unix'>", "</channel>", "path='", "'", sock, false);
	r = r ?: xml_set(xml, NULL, NULL, "<log file='", "'", log, true);
	r = r ?: xml_set(xml, "<filesystem type='mount'", "</filesystem>", "<source dir='", "'", ws, false);
	if (!r && *overlay)
		r = xml_set(xml, "<disk type='file' device='disk'>", "</disk>", "<source file='", "'", ov, false);
	return r;
}

/* Put xml in the save file at fd, in the room libvirt left for it; the cookie after it stays as it was. */
static int rewrite_save(int fd, const struct latch_template *t, const struct latch_vm_state *st, const char *overlay,
			const char *uuid, char *err, size_t errlen)
{
	struct save_header h;
	char *data = NULL, *xml = NULL;
	size_t xlen, clen;
	int r = -EINVAL;

	if (pread(fd, &h, sizeof(h), 0) != sizeof(h) || memcmp(h.magic, SAVE_MAGIC, sizeof(h.magic)) ||
	    h.version != SAVE_VERSION || h.compressed || h.data_len > (1u << 24) || h.cookie_offset >= h.data_len)
		return latch_errf(err, errlen, -EINVAL, "%s is not a save file this latch knows", t->save);
	data = calloc(1, h.data_len + 1);
	if (!data || pread(fd, data, h.data_len, sizeof(h)) != (ssize_t)h.data_len)
		goto out;
	clen = strnlen(data + h.cookie_offset, h.data_len - h.cookie_offset);
	xml = strndup(data, h.cookie_offset);
	if (!xml)
		goto out;
	r = restore_xml(&xml, st, t, overlay, uuid);
	if (r) {
		latch_errf(err, errlen, r, "the XML in %s is not what latch saved (%s)", t->save, strerror(-r));
		goto out;
	}
	xlen = strlen(xml) + 1;
	if (xlen + clen + 1 > h.data_len) {
		r = latch_errf(err, errlen, -EFBIG, "the XML does not fit in %s", t->save);
		goto out;
	}
	memmove(data + xlen, data + h.cookie_offset, clen);
	memcpy(data, xml, xlen);
	memset(data + xlen + clen, 0, h.data_len - xlen - clen);
	h.cookie_offset = (uint32_t)xlen;
	r = pwrite(fd, data, h.data_len, sizeof(h)) == (ssize_t)h.data_len &&
			    pwrite(fd, &h, sizeof(h), 0) == sizeof(h) ?
		    0 :
		    latch_errf(err, errlen, -EIO, "cannot write %s: %s", t->save, strerror(errno));
out:
	if (r == -EINVAL && !*err)
		latch_errf(err, errlen, r, "cannot read %s", t->save);
	free(xml);
	free(data);
	return r;
}

int latch_template_restore(struct latch_virt *v, const struct latch_template *t, const struct latch_vm_state *st,
			   char *uuid, char *err, size_t errlen)
{
	char overlay[PATH_MAX] = "", dir[PATH_MAX];
	int lock, fd, r = 0;

	*err = '\0';
	new_uuid(uuid);
	if (*t->overlay) {
		if (latch_template_overlay_path(st->name, overlay, sizeof(overlay)))
			return latch_errf(err, errlen, -ENAMETOOLONG, "the overlay path is too long");
		snprintf(dir, sizeof(dir), "%s", overlay);
		*strrchr(dir, '/') = '\0';
		r = latch_mkdirs(dir, 0711); /* qemu opens the overlay by its path */
		if (r)
			return latch_errf(err, errlen, r, "cannot create %s: %s", dir, strerror(-r));
	}
	lock = lock_template(t, err, errlen);
	if (lock < 0)
		return lock;
	if (*overlay)
		r = copy_file(t->overlay, overlay, err, errlen);
	fd = r ? -1 : open(t->save, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (!r && fd < 0)
		r = latch_errf(err, errlen, -errno, "cannot open %s: %s", t->save, strerror(errno));
	if (!r)
		r = rewrite_save(fd, t, st, overlay, uuid, err, errlen);
	if (fd >= 0)
		close(fd);
	if (!r)
		r = latch_domain_restore(v, t->save, err, errlen);
	close(lock);
	if (r && *overlay)
		unlink(overlay);
	return r;
}

/*
 * Run in the guest as root with: ADDR4/30 GW4 ADDR6/64 GW6 EPOCH WORKSPACE(0|1)
 * RESEED_TENTHS.  The template brought its NIC up with no address, RAs,
 * autoconf and DAD off (the image's latch-net), so this only adds.
 */
static const char adopt_script[] =
	"set -e\n"
	"date -u -s \"@$5\" >/dev/null\n"
	"dev=\n"
	"for d in /sys/class/net/*; do [ \"$(cat \"$d/type\")\" = 1 ] && { dev=${d##*/}; break; }; done\n"
	"[ -n \"$dev\" ] || { echo 'no network interface'; exit 1; }\n"
	"ip addr add \"$1\" dev \"$dev\"\n"
	"ip route add default via \"$2\" dev \"$dev\"\n"
	"[ -z \"$3\" ] || ip -6 addr add \"$3\" dev \"$dev\"\n"
	"[ -z \"$4\" ] || ip -6 route add default via \"$4\" dev \"$dev\"\n"
	"{ echo \"nameserver $2\"; [ -z \"$4\" ] || echo \"nameserver $4\"; } > /etc/resolv.conf\n"
	"[ \"$6\" = 0 ] || mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,nosuid,nodev "
	"" LATCH_TEMPLATE_WORKSPACE_TAG " /workspace\n"
	"i=0\n"
	"until dmesg | grep -q 'crng reseeded due to virtual machine fork'; do\n"
	"	i=$((i + 1))\n"
	"	[ $i -lt \"$7\" ] || { echo 'the kernel did not reseed its random generator after the restore'; exit 3; }\n"
	"	sleep 0.1\n"
	"done\n";

int latch_template_adopt(const struct latch_vm_state *st, char *err, size_t errlen)
{
	char g4[64], h4[64], g6[64] = "", h6[64] = "", epoch[24], tenths[16], out[256] = "", e[LATCH_ERR_MAX];
	const char *argv[] = { "/bin/sh", "-c", adopt_script, "latch-adopt", g4,
			       h4,	  g6,	h6,	      epoch,	     *st->workspace ? "1" : "0",
			       tenths,	  NULL };
	struct latch_vm_exec_opts eo = { .timeout_ms = LATCH_TEMPLATE_RESEED_WAIT_MS + 10000, .cwd = "/" };
	struct latch_vm_exec_result res;
	int fd = memfd_create("latch-adopt", MFD_CLOEXEC), r;
	ssize_t n;

	if (fd < 0)
		return latch_errf(err, errlen, -errno, "memfd: %s", strerror(errno));
	latch_addr_format(&st->guest4, g4, sizeof(g4));
	strcat(g4, "/30");
	latch_addr_format(&st->host4, h4, sizeof(h4));
	if (st->guest6.family) {
		latch_addr_format(&st->guest6, g6, sizeof(g6));
		strcat(g6, "/64");
		latch_addr_format(&st->host6, h6, sizeof(h6));
	}
	snprintf(epoch, sizeof(epoch), "%lld", (long long)time(NULL));
	snprintf(tenths, sizeof(tenths), "%d", LATCH_TEMPLATE_RESEED_WAIT_MS / 100);
	r = latch_vm_exec(st->name, argv, &eo, fd, fd, &res, e, sizeof(e));
	n = pread(fd, out, sizeof(out) - 1, 0);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	for (char *c = out; *c; c++) /* guest text */
		if (*c < 0x20 || *c == 0x7f)
			*c = '?';
	if (r)
		return latch_errf(err, errlen, r, "the restored guest's agent: %s", e);
	if (res.status)
		return latch_errf(err, errlen, -EIO, "adopting the restored guest failed (status %d): %s", res.status,
				  *out ? out : "no output");
	return 0;
}
