/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * paths.h - every path latch keeps things at, spelled once.
 *
 * Part of common.h (include that).  Each is a suffix under $LATCH_ROOT:
 * give it to latch_path(), which puts $LATCH_ROOT (unset: /) before it, so
 * a test moves every one of them at once.  The *_FMT ones take the sandbox
 * name.  latch(8)'s FILES lists them for operators; a path added here
 * goes there too.
 */
#ifndef LATCH_COMMON_PATHS_H
#define LATCH_COMMON_PATHS_H

/* ---- etc: what the operator writes ---- */
#define LATCH_ETC_DIR "etc/latch"
#define LATCH_CONF_FILE LATCH_ETC_DIR "/latch.conf"
#define LATCH_KITS_DIR LATCH_ETC_DIR "/kits"
#define LATCH_PROFILES_DIR LATCH_ETC_DIR "/profiles"
#define LATCH_ALLOWLIST_FILE LATCH_ETC_DIR "/allowlist.txt"
#define LATCH_PRICES_FILE LATCH_ETC_DIR "/prices"
/* latch-cni: a pod's namespace (or namespace/pod) to its profile and kit */
#define LATCH_CNI_PODS_FILE LATCH_ETC_DIR "/cni-pods"

/* ---- var: what latch keeps across reboots ---- */
#define LATCH_VAR_DIR "var/lib/latch"
#define LATCH_AUDIT_DB LATCH_VAR_DIR "/audit.db"
#define LATCH_LEDGER_DB LATCH_VAR_DIR "/ledger.db"
#define LATCH_IMAGES_DIR LATCH_VAR_DIR "/images"
/* a warm-started sandbox's disk over its image (vm/template.h): NAME.qcow2 */
#define LATCH_OVERLAYS_DIR LATCH_VAR_DIR "/overlays"
/* kit setup's npm tarballs, each named by its sha512 (root's, 0700; files 0600) */
#define LATCH_NPM_CACHE_DIR LATCH_VAR_DIR "/cache/npm"
/* per-sandbox state files of the host-side modules (latch_state_file_path()) */
#define LATCH_POLICY_DIR LATCH_VAR_DIR "/policy"
/* a VM sandbox's directory: its record and its guest-state backup */
#define LATCH_SANDBOXES_DIR LATCH_VAR_DIR "/sandboxes"
#define LATCH_SANDBOX_DIR_FMT LATCH_SANDBOXES_DIR "/%s"
#define LATCH_GUEST_STATE_DIR_FMT LATCH_SANDBOX_DIR_FMT "/state"

/* ---- run: what goes with the boot (root-only directory) ---- */
#define LATCH_RUN_DIR "run/latch"
#define LATCH_SOCKET_FILE LATCH_RUN_DIR "/latchd.sock"
#define LATCH_LIFECYCLE_LOCK LATCH_RUN_DIR "/lifecycle.lock"
#define LATCH_ROOMS_DIR LATCH_RUN_DIR "/rooms"
#define LATCH_AGENT_SOCKET_FMT LATCH_RUN_DIR "/%s.agent"
#define LATCH_POLICY_LOCK_FMT LATCH_RUN_DIR "/%s.policy.lock"

/* ---- bpffs: the pins, under $LATCH_BPFFS instead (loader/sandbox.h) ---- */
#define LATCH_BPFFS_DEFAULT "/sys/fs/bpf"

#endif
