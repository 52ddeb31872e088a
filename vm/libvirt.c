// SPDX-License-Identifier: GPL-2.0-only
/*
 * libvirt.c - define, start, stop, undefine and read latch's domains
 * through the libvirt C API (never virsh).
 *
 * libvirt prints its errors to stderr unless told otherwise; latch installs a
 * silent handler and turns lv.virGetLastErrorMessage() into its own one line.
 * The XML is built here from checked values, and every string that came
 * from the operator (paths) is escaped.
 *
 * An image directory that holds a disk.qcow2 beside its vmlinuz (the
 * `debian` image) gets that disk as vda, <transient shareBacking='yes'/>:
 * the guest writes to an overlay that libvirt throws away when the domain
 * stops, so the image is shared by every sandbox built on it.  Its DAC label
 * is left alone (root-owned, 0644): qemu may read the image, never write it.
 *
 * libvirt is loaded with dlopen() when a connection is first wanted.  Linked
 * in, it and the fifty libraries under it (glib, gnutls, libxml2, ICU, ...)
 * cost every latch command about 25 ms of start-up, and most commands never
 * talk to libvirtd.  Its header still gives the types and the prototypes.
 */
#include <dlfcn.h>
#include <errno.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vm/libvirt.h"

struct latch_virt {
	virConnectPtr conn;
};

/* The libvirt functions latch calls. */
#define LATCH_LIBVIRT_FUNCS(X)       \
	X(virSetErrorFunc)           \
	X(virGetLastErrorMessage)    \
	X(virConnectOpen)            \
	X(virConnectOpenReadOnly)    \
	X(virConnectClose)           \
	X(virConnectGetLibVersion)   \
	X(virConnectGetVersion)      \
	X(virConnectGetCapabilities) \
	X(virDomainLookupByName)     \
	X(virDomainFree)             \
	X(virDomainDefineXML)        \
	X(virDomainCreate)           \
	X(virDomainUndefine)         \
	X(virDomainIsActive)         \
	X(virDomainShutdown)         \
	X(virDomainGetState)         \
	X(virDomainDestroy)          \
	X(virDomainGetMetadata)      \
	X(virDomainGetXMLDesc)       \
	X(virDomainSave)             \
	X(virDomainRestore)

/* Each member is a pointer to the function of the same name, typed by its prototype. */
static struct {
	void *handle;
#define LATCH_LIBVIRT_MEMBER(f) __typeof__(f) *f;
	LATCH_LIBVIRT_FUNCS(LATCH_LIBVIRT_MEMBER)
#undef LATCH_LIBVIRT_MEMBER
} lv;

static void quiet(void *data, virErrorPtr e)
{
}

/* DIR/disk.qcow2 for the image whose kernel is DIR/vmlinuz; false when there is none. */
static bool image_disk(const char *kernel, char *buf, size_t len)
{
	const char *slash = strrchr(kernel, '/');
	int n;

	if (!slash)
		return false;
	n = snprintf(buf, len, "%.*s/" LATCH_IMAGE_DISK, (int)(slash - kernel), kernel);
	return n > 0 && (size_t)n < len && access(buf, R_OK) == 0;
}

static void quiet(void *data, virErrorPtr e);

/* dlopen libvirt once and find every function of LATCH_LIBVIRT_FUNCS; 0, or -errno with a line in err. */
static int lv_load(char *err, size_t errlen)
{
	void *h;

	if (lv.handle)
		return 0;
	h = dlopen("libvirt.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return latch_errf(err, errlen, -ENOENT, "cannot load libvirt: %s (apt-get install libvirt0)",
				  dlerror());
#define LATCH_LIBVIRT_FIND(f)                                                                                       \
	if (!(lv.f = (__typeof__(lv.f))dlsym(h, #f))) {                                                             \
		dlclose(h);                                                                                         \
		return latch_errf(err, errlen, -ENOSYS, "libvirt.so.0 has no %s; latch needs libvirt 9.0 or later", \
				  #f);                                                                              \
	}
	LATCH_LIBVIRT_FUNCS(LATCH_LIBVIRT_FIND)
#undef LATCH_LIBVIRT_FIND
	lv.handle = h;
	lv.virSetErrorFunc(NULL, quiet);
	return 0;
}

static const char *lasterr(void)
{
	const char *m = lv.virGetLastErrorMessage();

	return m ? m : "unknown libvirt error";
}

struct latch_virt *latch_virt_open(char *err, size_t errlen)
{
	struct latch_virt *v;

	if (lv_load(err, errlen))
		return NULL;
	v = calloc(1, sizeof(*v));
	if (!v) {
		latch_errf(err, errlen, 0, "out of memory");
		return NULL;
	}
	v->conn = lv.virConnectOpen(LATCH_LIBVIRT_URI);
	if (!v->conn) {
		latch_errf(err, errlen, 0, "libvirt unreachable at %s: %s (start it: virtlogd -d; libvirtd -d)",
			   LATCH_LIBVIRT_URI, lasterr());
		free(v);
		errno = ECONNREFUSED;
		return NULL;
	}
	return v;
}

/* One capabilities call, timed; -1 when it failed. */
static int64_t caps_call_ms(virConnectPtr conn)
{
	int64_t t0 = latch_now_ms();
	char *caps = lv.virConnectGetCapabilities(conn);

	if (!caps)
		return -1;
	free(caps);
	return latch_now_ms() - t0;
}

int latch_vm_libvirt_probe(struct latch_vm_libvirt_probe *p, char *err, size_t errlen)
{
	virConnectPtr conn;
	int64_t t0;
	int rc;

	memset(p, 0, sizeof(*p));
	rc = lv_load(err, errlen);
	if (rc)
		return rc;
	t0 = latch_now_ms();
	conn = lv.virConnectOpenReadOnly(LATCH_LIBVIRT_URI);
	if (!conn)
		return latch_errf(err, errlen, -ECONNREFUSED, "cannot connect to %s: %s", LATCH_LIBVIRT_URI, lasterr());
	p->connect_ms = latch_now_ms() - t0;
	lv.virConnectGetLibVersion(conn, &p->version);
	/*
	 * libvirtd re-probes QEMU (seconds) whenever its cached capabilities
	 * look stale; after a fix that happens once, while a /dev/kvm its qemu
	 * user can't open makes it happen on every call.  A second call tells
	 * the two apart.
	 */
	p->caps_first_ms = p->caps_ms = caps_call_ms(conn);
	if (p->caps_ms > LATCH_VM_CAPS_SLOW_MS)
		p->caps_ms = caps_call_ms(conn);
	lv.virConnectClose(conn);
	if (p->caps_ms < 0)
		return latch_errf(err, errlen, -EIO, "%s did not answer a capabilities call: %s", LATCH_LIBVIRT_URI,
				  lasterr());
	return 0;
}

void latch_virt_close(struct latch_virt *v)
{
	if (!v)
		return;
	if (v->conn)
		lv.virConnectClose(v->conn);
	free(v);
}

/* The entity that stands for c in an XML attribute or text; NULL when c stands for itself. */
static const char *xml_entity(char c)
{
	switch (c) {
	case '&':
		return "&amp;";
	case '<':
		return "&lt;";
	case '>':
		return "&gt;";
	case '\'':
		return "&apos;";
	case '"':
		return "&quot;";
	default:
		return NULL;
	}
}

/* Append s to the buffer, escaped for an XML attribute or text. */
static void xesc(FILE *f, const char *s)
{
	for (; *s; s++) {
		const char *e = xml_entity(*s);

		if (e)
			fputs(e, f);
		else
			fputc(*s, f);
	}
}

int latch_xml_escape(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	for (; *s; s++) {
		const char *e = xml_entity(*s);
		size_t n = e ? strlen(e) : 1;

		if (o + n >= len)
			return -ENAMETOOLONG;
		memcpy(buf + o, e ? e : s, n);
		o += n;
	}
	buf[o] = '\0';
	return 0;
}

char *latch_domain_xml(const struct latch_domain_opts *o)
{
	char disk[PATH_MAX], *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f, "<domain type='%s'>\n", o->kvm ? "kvm" : "qemu");
	fprintf(f, "  <name>" LATCH_DOMAIN_PREFIX "%s</name>\n", o->name);
	if (*o->uuid)
		fprintf(f, "  <uuid>%s</uuid>\n", o->uuid); /* checked hex and dashes: latch_domain_define() */
	if (o->genid)
		fputs("  <genid/>\n", f); /* libvirt picks it; vm/template.c gives each restore its own */
	fprintf(f, "  <metadata><latch:sandbox xmlns:latch='" LATCH_XMLNS "' name='%s'/></metadata>\n", o->name);
	fprintf(f, "  <memory unit='MiB'>%u</memory>\n  <vcpu>%u</vcpu>\n", o->memory_mib, o->cpus);
	fprintf(f, "  <os>\n    <type arch='x86_64'>hvm</type>\n    <kernel>");
	xesc(f, o->kernel);
	fprintf(f, "</kernel>\n    <initrd>");
	xesc(f, o->initrd);
	fprintf(f, "</initrd>\n    <cmdline>");
	xesc(f, o->cmdline);
	fprintf(f, "</cmdline>\n  </os>\n");
	fprintf(f, "  <features><acpi/></features>\n");
	/*
	 * Agents' native binaries use SSE4 and AVX: libvirt's default qemu64
	 * model kills them with SIGILL.  Under KVM the host's own CPU (a
	 * transient guest never migrates, so nothing is lost by naming every
	 * host feature); under TCG everything QEMU can emulate (-cpu max).
	 */
	fprintf(f, "  <cpu mode='%s'/>\n", o->kvm ? LATCH_CPU_MODE_KVM : LATCH_CPU_MODE_TCG);
	fprintf(f, "  <clock offset='utc'/>\n");
	/* a guest that panics or reboots stops; it never comes back unobserved */
	fprintf(f, "  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>destroy</on_reboot>\n"
		   "  <on_crash>destroy</on_crash>\n");
	fprintf(f, "  <devices>\n");
	if (*o->overlay && image_disk(o->kernel, disk, sizeof(disk))) {
		/*
		 * A disk of its own over the image, which a saved guest needs
		 * (libvirt will not save one with a transient disk); the image
		 * under it is still never relabelled nor written.
		 */
		fprintf(f, "    <disk type='file' device='disk'>\n"
			   "      <driver name='qemu' type='qcow2'/>\n      <source file='");
		xesc(f, o->overlay);
		fprintf(f, "'/>\n      <backingStore type='file'>\n        <format type='qcow2'/>\n"
			   "        <source file='");
		xesc(f, disk);
		fprintf(f, "'>\n          <seclabel model='dac' relabel='no'/>\n        </source>\n"
			   "        <backingStore/>\n      </backingStore>\n"
			   "      <target dev='vda' bus='virtio'/>\n    </disk>\n");
	} else if (image_disk(o->kernel, disk, sizeof(disk))) {
		fprintf(f, "    <disk type='file' device='disk'>\n"
			   "      <driver name='qemu' type='qcow2'/>\n      <source file='");
		xesc(f, disk);
		/* read-only for qemu: never chown the shared image to it */
		fprintf(f,
			"'>\n        <seclabel model='dac' relabel='no'/>\n      </source>\n"
			"      <target dev='vda' bus='virtio'/>\n      <transient shareBacking='yes'/>\n    </disk>\n");
	}
	fprintf(f,
		"    <interface type='ethernet'>\n"
		"      <mac address='%02x:%02x:%02x:%02x:%02x:%02x'/>\n"
		"      <target dev='%s' managed='no'/>\n"
		"      <model type='virtio'/>\n"
		"    </interface>\n",
		o->mac[0], o->mac[1], o->mac[2], o->mac[3], o->mac[4], o->mac[5], o->tap);
	fprintf(f, "    <channel type='unix'>\n      <source mode='bind' path='");
	xesc(f, o->agent_sock);
	fprintf(f, "'/>\n      <target type='virtio' name='org.latch.agent'/>\n    </channel>\n");
	if (*o->workspace) {
		fprintf(f, "    <filesystem type='mount' accessmode='mapped'>\n      <source dir='");
		xesc(f, o->workspace);
		fprintf(f, "'/>\n      <target dir='%s'/>\n    </filesystem>\n",
			*o->workspace_tag ? o->workspace_tag : "workspace");
	}
	if (*o->console_log) {
		/* virtlogd keeps the console in a file: the evidence when a boot fails */
		fprintf(f, "    <serial type='pty'>\n      <log file='");
		xesc(f, o->console_log);
		fprintf(f, "' append='off'/>\n      <target port='0'/>\n    </serial>\n");
	} else {
		fprintf(f, "    <serial type='pty'><target port='0'/></serial>\n");
	}
	fprintf(f, "    <console type='pty'><target type='serial' port='0'/></console>\n");
	fprintf(f, "    <controller type='usb' model='none'/>\n");
	fprintf(f, "    <memballoon model='none'/>\n");
	fprintf(f, "  </devices>\n</domain>\n");
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The value of attribute attr (quoted either way) inside the tag that starts at tag. */
static bool xml_attr(const char *tag, const char *attr, char *buf, size_t len)
{
	const char *end = strchr(tag, '>'), *p = tag, *q;
	size_t alen = strlen(attr);

	while (end && (p = strstr(p, attr)) && p < end) {
		if (p[-1] == ' ' && p[alen] == '=' && (p[alen + 1] == '\'' || p[alen + 1] == '"')) {
			q = strchr(p + alen + 2, p[alen + 1]);
			if (!q || q > end || (size_t)(q - (p + alen + 2)) >= len)
				return false;
			snprintf(buf, len, "%.*s", (int)(q - (p + alen + 2)), p + alen + 2);
			return true;
		}
		p += alen;
	}
	return false;
}

int latch_domain_cpu_from_xml(const char *xml, char *buf, size_t len)
{
	const char *cpu = strstr(xml, "<cpu "), *model, *end;
	char mode[32];

	*buf = '\0';
	if (!cpu || !xml_attr(cpu, "mode", mode, sizeof(mode)))
		return -ENOENT;
	if (strcmp(mode, "custom")) {
		snprintf(buf, len, "%s", mode);
		return 0;
	}
	/* a named model: say which (qemu64 is what libvirt picks when the XML names none) */
	model = strstr(cpu, "<model");
	end = strstr(cpu, "</cpu>");
	if (model && (!end || model < end) && (model = strchr(model, '>')) && (end = strchr(model, '<')))
		snprintf(buf, len, "custom %.*s", (int)(end - model - 1), model + 1);
	else
		snprintf(buf, len, "custom");
	return 0;
}

static virDomainPtr lookup(struct latch_virt *v, const char *name)
{
	char dn[LATCH_NAME_MAX + sizeof(LATCH_DOMAIN_PREFIX)];

	snprintf(dn, sizeof(dn), LATCH_DOMAIN_PREFIX "%s", name);
	return lv.virDomainLookupByName(v->conn, dn);
}

int latch_domain_create(struct latch_virt *v, const struct latch_domain_opts *o, char *err, size_t errlen)
{
	char *xml = latch_domain_xml(o);
	virDomainPtr d;

	if (!xml)
		return latch_errf(err, errlen, -ENOMEM, "out of memory building the domain XML");
	d = lookup(v, o->name);
	if (d) {
		lv.virDomainFree(d);
		free(xml);
		return latch_errf(err, errlen, -EEXIST, "a domain named " LATCH_DOMAIN_PREFIX "%s already exists",
				  o->name);
	}
	d = lv.virDomainDefineXML(v->conn, xml);
	free(xml);
	if (!d)
		return latch_errf(err, errlen, -EINVAL, "libvirt refused the domain: %s", lasterr());
	if (lv.virDomainCreate(d) < 0) {
		latch_errf(err, errlen, -EIO, "libvirt could not start " LATCH_DOMAIN_PREFIX "%s: %s", o->name,
			   lasterr());
		lv.virDomainUndefine(d);
		lv.virDomainFree(d);
		return -EIO;
	}
	lv.virDomainFree(d);
	return 0;
}

int latch_virt_versions(struct latch_virt *v, unsigned long *lib, unsigned long *hypervisor)
{
	return lv.virConnectGetLibVersion(v->conn, lib) < 0 || lv.virConnectGetVersion(v->conn, hypervisor) < 0 ? -EIO :
														  0;
}

int latch_domain_save(struct latch_virt *v, const char *name, const char *path, char *err, size_t errlen)
{
	virDomainPtr d = lookup(v, name);
	int r;

	if (!d)
		return latch_errf(err, errlen, -ENOENT, "no domain " LATCH_DOMAIN_PREFIX "%s", name);
	r = lv.virDomainSave(d, path);
	if (r < 0)
		latch_errf(err, errlen, -EIO, "libvirt could not save " LATCH_DOMAIN_PREFIX "%s: %s", name, lasterr());
	lv.virDomainFree(d);
	return r < 0 ? -EIO : 0;
}

int latch_domain_restore(struct latch_virt *v, const char *path, char *err, size_t errlen)
{
	if (lv.virDomainRestore(v->conn, path) < 0)
		return latch_errf(err, errlen, -EIO, "libvirt could not restore %s: %s", path, lasterr());
	return 0;
}

int latch_domain_define(struct latch_virt *v, const struct latch_domain_opts *o, char *err, size_t errlen)
{
	virDomainPtr d;
	char *xml;

	if (strspn(o->uuid, "0123456789abcdef-") != strlen(o->uuid) || strlen(o->uuid) != 36)
		return latch_errf(err, errlen, -EINVAL, "a domain to define needs its uuid, not '%s'", o->uuid);
	xml = latch_domain_xml(o);
	if (!xml)
		return latch_errf(err, errlen, -ENOMEM, "out of memory building the domain XML");
	d = lv.virDomainDefineXML(v->conn, xml);
	free(xml);
	if (!d)
		return latch_errf(err, errlen, -EINVAL, "libvirt refused the domain: %s", lasterr());
	lv.virDomainFree(d);
	return 0;
}

int latch_domain_start(struct latch_virt *v, const char *name, char *err, size_t errlen)
{
	virDomainPtr d = lookup(v, name);
	int r;

	if (!d)
		return latch_errf(err, errlen, -ENOENT, "no domain " LATCH_DOMAIN_PREFIX "%s", name);
	r = lv.virDomainIsActive(d) == 1 ? 0 : lv.virDomainCreate(d);
	if (r < 0)
		latch_errf(err, errlen, -EIO, "libvirt could not start " LATCH_DOMAIN_PREFIX "%s: %s", name, lasterr());
	lv.virDomainFree(d);
	return r < 0 ? -EIO : 0;
}

int latch_domain_stop(struct latch_virt *v, const char *name, int timeout_ms, bool *forced, char *err, size_t errlen)
{
	virDomainPtr d = lookup(v, name);
	int64_t deadline = latch_now_ms() + timeout_ms;
	int state = VIR_DOMAIN_NOSTATE, reason, ret = 0;

	*forced = false;
	if (!d)
		return latch_errf(err, errlen, -ENOENT, "no domain " LATCH_DOMAIN_PREFIX "%s", name);
	if (lv.virDomainIsActive(d) != 1)
		goto out;
	lv.virDomainShutdown(d); /* a guest without ACPI handling ignores it; the deadline covers that */
	while (latch_now_ms() < deadline) {
		if (lv.virDomainGetState(d, &state, &reason, 0) == 0 && state == VIR_DOMAIN_SHUTOFF)
			goto out;
		usleep(200 * 1000);
	}
	*forced = true;
	if (lv.virDomainDestroy(d) < 0 && lv.virDomainIsActive(d) == 1)
		ret = latch_errf(err, errlen, -EIO, "cannot stop " LATCH_DOMAIN_PREFIX "%s: %s", name, lasterr());
out:
	lv.virDomainFree(d);
	return ret;
}

int latch_domain_remove(struct latch_virt *v, const char *name, char *err, size_t errlen)
{
	virDomainPtr d = lookup(v, name);
	int ret = 0;

	if (!d)
		return 0;
	if (lv.virDomainIsActive(d) == 1 && lv.virDomainDestroy(d) < 0 && lv.virDomainIsActive(d) == 1)
		ret = latch_errf(err, errlen, -EIO, "cannot stop " LATCH_DOMAIN_PREFIX "%s: %s", name, lasterr());
	else if (lv.virDomainUndefine(d) < 0)
		ret = latch_errf(err, errlen, -EIO, "cannot undefine " LATCH_DOMAIN_PREFIX "%s: %s", name, lasterr());
	lv.virDomainFree(d);
	return ret;
}

static const char *state_name(int s)
{
	switch (s) {
	case VIR_DOMAIN_RUNNING:
		return "running";
	case VIR_DOMAIN_BLOCKED:
		return "blocked";
	case VIR_DOMAIN_PAUSED:
		return "paused";
	case VIR_DOMAIN_SHUTDOWN:
		return "shutting-down";
	case VIR_DOMAIN_SHUTOFF:
		return "shutoff";
	case VIR_DOMAIN_CRASHED:
		return "crashed";
	case VIR_DOMAIN_PMSUSPENDED:
		return "suspended";
	default:
		return "unknown";
	}
}

int latch_domain_info(struct latch_virt *v, const char *name, struct latch_domain_info *info)
{
	virDomainPtr d = lookup(v, name);
	int state, reason;
	char *x;

	memset(info, 0, sizeof(*info));
	snprintf(info->state, sizeof(info->state), "absent");
	if (!d)
		return 0;
	info->exists = true;
	x = lv.virDomainGetMetadata(d, VIR_DOMAIN_METADATA_ELEMENT, LATCH_XMLNS, 0);
	info->latch_managed = x != NULL;
	free(x);
	if (lv.virDomainGetState(d, &state, &reason, 0) == 0)
		snprintf(info->state, sizeof(info->state), "%s", state_name(state));
	if (lv.virDomainIsActive(d) == 1) {
		/* the live definition: what the running qemu was started as */
		x = lv.virDomainGetXMLDesc(d, 0);
		if (x) {
			if (strstr(x, "<domain type='kvm'") || strstr(x, "<domain type=\"kvm\""))
				snprintf(info->accel, sizeof(info->accel), "kvm");
			else if (strstr(x, "<domain type='qemu'") || strstr(x, "<domain type=\"qemu\""))
				snprintf(info->accel, sizeof(info->accel), "tcg");
			latch_domain_cpu_from_xml(x, info->cpu_mode, sizeof(info->cpu_mode));
			free(x);
		}
	}
	lv.virDomainFree(d);
	return 0;
}
