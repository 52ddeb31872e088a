/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vm.h - VM sandboxes: the one header other modules include.
 *
 * sandbox_vm.h: up, down, destroy, status of a guest behind its tap;
 * state.h: what latch assigned to a sandbox, on disk; agent_client.h: the
 * guest agent over virtio-serial (exec); guest_state.h: backups of the
 * agent's memory; boot.h: the boundary at boot and the libvirt hook;
 * libvirt.h and net.h: libvirt and the tap/routing underneath.
 */
#ifndef LATCH_VM_H
#define LATCH_VM_H

#include "vm/agent_client.h"
#include "vm/boot.h"
#include "vm/guest_state.h"
#include "vm/libvirt.h"
#include "vm/net.h"
#include "vm/sandbox_vm.h"
#include "vm/state.h"

#endif
