/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * libvirt.h - latch's guests as libvirt domains, through the libvirt C API.
 *
 * A latch domain is named latch-NAME, boots the image's kernel and initrd
 * directly, has exactly one NIC (an ethernet interface on the tap latch made
 * and filtered, managed='no'), the agent's virtio-serial channel, and an
 * optional 9p workspace, plus the image's disk.qcow2 as a transient vda
 * when the image has one (`--image debian`).  It carries
 *   <metadata><latch:sandbox xmlns:latch='https://latch.invalid/1' name='NAME'/></metadata>
 * so latch-managed domains can be recognised (by the boot hook, by `ls`).
 *
 * The accelerator is chosen by probing (/dev/kvm and vmx/svm in cpuinfo) and
 * reported as observed: the `type` of the running domain's live XML; so is
 * the guest CPU (host-passthrough under KVM, libvirt's `maximum` under TCG).
 */
#ifndef LATCH_VM_LIBVIRT_H
#define LATCH_VM_LIBVIRT_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vm/vm.h"

#define LATCH_XMLNS "https://latch.invalid/1"
#define LATCH_LIBVIRT_URI "qemu:///system"
/* An image directory with this file beside vmlinuz boots it as a transient vda. */
#define LATCH_IMAGE_DISK "disk.qcow2"

struct latch_virt; /* a connection to libvirtd */

struct latch_domain_opts {
	char name[LATCH_NAME_MAX + 1];
	bool kvm; /* domain type kvm, else qemu (TCG) */
	uint32_t memory_mib, cpus;
	char kernel[PATH_MAX], initrd[PATH_MAX];
	char cmdline[512];
	uint8_t mac[6];
	char tap[IF_NAMESIZE];
	char agent_sock[PATH_MAX];
	char workspace[PATH_MAX]; /* "" : none */
	char console_log[PATH_MAX]; /* the serial console's log file (virtlogd writes it); "" : none */
	/* a warm start's template and its restored copies (vm/template.h) */
	char uuid[40]; /* "" : libvirt picks one */
	bool genid; /* a VM generation ID: a restored guest's kernel reseeds its random generator */
	char workspace_tag[32]; /* the 9p mount tag; "" : "workspace", which the guest mounts at boot */
	char overlay[PATH_MAX]; /* "" : the image's disk as a transient vda; else this qcow2 over it */
};

/* Connect to qemu:///system; NULL with a line in err when libvirtd is not there. */
struct latch_virt *latch_virt_open(char *err, size_t errlen);
void latch_virt_close(struct latch_virt *v);

/* KVM usable here: /dev/kvm openable and vmx or svm among the cpu flags.  why says which is missing. */
bool latch_kvm_usable(char *why, size_t len);

/* The guest CPU a domain asks for, by accelerator (see latch_domain_xml). */
#define LATCH_CPU_MODE_KVM "host-passthrough"
#define LATCH_CPU_MODE_TCG "maximum"

/*
 * The CPU of a domain's XML as "MODE" (maximum, host-passthrough,
 * host-model) or "custom MODEL"; -ENOENT and "" when it has no <cpu mode=>.
 */
int latch_domain_cpu_from_xml(const char *xml, char *buf, size_t len);

/* s escaped for an XML attribute or text into buf; -ENAMETOOLONG when it does not fit. */
int latch_xml_escape(const char *s, char *buf, size_t len);

/* The domain XML for o; returns a malloc'd string or NULL (errno set). */
char *latch_domain_xml(const struct latch_domain_opts *o);

/* Define and start; on failure the domain is undefined again. */
int latch_domain_create(struct latch_virt *v, const struct latch_domain_opts *o, char *err, size_t errlen);
/* ACPI shutdown, wait up to timeout_ms for shutoff, then destroy.  0 when it is off. */
int latch_domain_stop(struct latch_virt *v, const char *name, int timeout_ms, bool *forced, char *err, size_t errlen);
/* Destroy if running, then undefine; 0 when there is no such domain. */
int latch_domain_remove(struct latch_virt *v, const char *name, char *err, size_t errlen);

int latch_domain_info(struct latch_virt *v, const char *name, struct latch_domain_info *info);

/* libvirt's and the hypervisor's (QEMU's) versions, as major * 1000000 + minor * 1000 + micro. */
int latch_virt_versions(struct latch_virt *v, unsigned long *lib, unsigned long *hypervisor);

/* Save a running domain's memory to path (the domain stops); restore one, its XML as the file says. */
int latch_domain_save(struct latch_virt *v, const char *name, const char *path, char *err, size_t errlen);
int latch_domain_restore(struct latch_virt *v, const char *path, char *err, size_t errlen);
/* Make a running domain persistent: o is what it boots next time (o->uuid must be the domain's). */
int latch_domain_define(struct latch_virt *v, const struct latch_domain_opts *o, char *err, size_t errlen);

/* Start an already defined (shut off) domain. */
int latch_domain_start(struct latch_virt *v, const char *name, char *err, size_t errlen);

#endif
