/* The CPUID table each vCPU gets: what KVM supports, with this VM's topology
 * (one socket, one thread per core, APIC id = vCPU index) and the hypervisor
 * leaves (vsnap's signature and the TSC frequency). Nothing is hidden (see
 * cpuid.c for why). */
#pragma once

#include <glib.h>
#include <linux/kvm.h>
#include <stdbool.h>
#include <stdint.h>

#define CPUID_VSNAP_SIGNATURE "vsnapvsnapvs"
#define CPUID_HYPERVISOR_BASE 0x40000000u
#define CPUID_TIMING_LEAF 0x40000010u /* EAX: TSC kHz, EBX: LAPIC timer kHz */
#define CPUID_KVM_BASE 0x40000100u    /* KVM's own leaves, moved out of the way */

/* KVM_GET_SUPPORTED_CPUID, sized to fit. g_free the result. */
struct kvm_cpuid2 *cpuid_get_supported(int dev_kvm_fd, GError **error);

/* The table for vCPU index of ncpus, with tsc_khz in the timing leaf. g_free it. */
struct kvm_cpuid2 *cpuid_for_vcpu(const struct kvm_cpuid2 *supported, unsigned index, unsigned ncpus,
                                  uint32_t tsc_khz);

/* cpuid_for_vcpu + KVM_SET_CPUID2, reading the TSC frequency from the vCPU. */
bool cpuid_configure_vcpu(int vcpu_fd, const struct kvm_cpuid2 *supported, unsigned index, unsigned ncpus,
                          GError **error);

/* Entry for function/index in table, or NULL. */
struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid2 *table, uint32_t function, uint32_t index);
