/* KVM state of the VM and of each vCPU, to and from state.json.
 *
 * Saved (VM paused, every vCPU parked at an instruction boundary, see vcpu.c):
 * per vCPU regs, sregs, xsave (KVM_GET_XSAVE2 at KVM_CAP_XSAVE2's size), xcrs,
 * the MSRs KVM lists in KVM_GET_MSR_INDEX_LIST that this vCPU can read, LAPIC,
 * vCPU events, MP state and debug registers; per VM the irqchip (PIC master,
 * PIC slave, IOAPIC), the PIT and the kvmclock. Restored into a VM built by
 * vm_new_for_restore before any vCPU runs, in this order, which was checked to
 * round-trip every one of them into a fresh VM on the development hosts: VM
 * state, then per vCPU MP state, regs, sregs, xsave, xcrs, debug registers,
 * LAPIC, MSRs, events. What cannot be restored (the TSC rate) is in
 * shim/README.md, "Host limits".
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

struct vm;

/* Members "kvm" ({irqchip, pit, clock, tsc_khz}) and "vcpus" ([...]). */
bool cpu_state_save(struct vm *vm, JsonBuilder *b, GError **error);
/* root: the state.json object holding "kvm" and "vcpus". */
bool cpu_state_restore(struct vm *vm, JsonObject *root, GError **error);
