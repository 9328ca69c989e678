/* CPUID for vCPUs. See cpuid.h. */
#include "core/cpuid.h"

#include <errno.h>
#include <gio/gio.h>
#include <string.h>
#include <sys/ioctl.h>

#define MAX_ENTRIES_START 128
#define MAX_ENTRIES_LIMIT 4096
#define EXTRA_ENTRIES 16 /* leaves this file adds on top of KVM's */

/* Leaf 1 ECX */
#define L1_ECX_HYPERVISOR (1u << 31)
#define L1_EDX_HTT (1u << 28)
#define EXT1_ECX_CMP_LEGACY (1u << 1)

struct kvm_cpuid2 *cpuid_get_supported(int dev_kvm_fd, GError **error)
{
    for (unsigned n = MAX_ENTRIES_START; n <= MAX_ENTRIES_LIMIT; n *= 2) {
        struct kvm_cpuid2 *c = g_malloc0(sizeof(*c) + n * sizeof(struct kvm_cpuid_entry2));
        c->nent = n;
        if (ioctl(dev_kvm_fd, KVM_GET_SUPPORTED_CPUID, c) == 0)
            return c;
        int e = errno;
        g_free(c);
        if (e != E2BIG) {
            g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "KVM_GET_SUPPORTED_CPUID failed: %s",
                        g_strerror(e));
            return NULL;
        }
    }
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "KVM_GET_SUPPORTED_CPUID: more than %d entries",
                MAX_ENTRIES_LIMIT);
    return NULL;
}

struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid2 *table, uint32_t function, uint32_t index)
{
    for (unsigned i = 0; i < table->nent; i++) {
        struct kvm_cpuid_entry2 *e = &table->entries[i];
        bool indexed = e->flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
        if (e->function == function && (!indexed || e->index == index))
            return e;
    }
    return NULL;
}

static void remove_function(struct kvm_cpuid2 *table, uint32_t function)
{
    unsigned out = 0;
    for (unsigned i = 0; i < table->nent; i++) {
        if (table->entries[i].function != function)
            table->entries[out++] = table->entries[i];
    }
    table->nent = out;
}

static struct kvm_cpuid_entry2 *append(struct kvm_cpuid2 *table, uint32_t function, uint32_t index,
                                       uint32_t flags)
{
    struct kvm_cpuid_entry2 *e = &table->entries[table->nent++];
    memset(e, 0, sizeof(*e));
    e->function = function;
    e->index = index;
    e->flags = flags;
    return e;
}

static void put_signature(struct kvm_cpuid_entry2 *e, const char sig[12])
{
    memcpy(&e->ebx, sig, 4);
    memcpy(&e->ecx, sig + 4, 4);
    memcpy(&e->edx, sig + 8, 4);
}

/* Bits of APIC id that number cores within the socket. */
static unsigned core_id_bits(unsigned ncpus)
{
    unsigned bits = 0;
    while ((1u << bits) < ncpus)
        bits++;
    return bits;
}

static bool is_amd(struct kvm_cpuid2 *table)
{
    struct kvm_cpuid_entry2 *e = cpuid_find(table, 0, 0);
    return e && memcmp(&e->ebx, "Auth", 4) == 0;
}

static void set_leaf1(struct kvm_cpuid2 *t, unsigned apic_id, unsigned ncpus)
{
    struct kvm_cpuid_entry2 *e = cpuid_find(t, 1, 0);
    if (!e)
        return;
    e->ebx = (apic_id << 24) | (MIN(ncpus, 255u) << 16) | (8u << 8) /* CLFLUSH: 64-byte lines */;
    e->ecx |= L1_ECX_HYPERVISOR;
    if (ncpus > 1)
        e->edx |= L1_EDX_HTT;
    else
        e->edx &= ~L1_EDX_HTT;
}

/* Leaf 4 (Intel cache topology): cores per package, and who shares each cache. */
static void set_leaf4(struct kvm_cpuid2 *t, unsigned ncpus)
{
    for (unsigned i = 0; i < t->nent; i++) {
        struct kvm_cpuid_entry2 *e = &t->entries[i];
        if (e->function != 4 || (e->eax & 0x1f) == 0)
            continue;
        unsigned level = (e->eax >> 5) & 7;
        unsigned sharing = level >= 3 ? MIN(ncpus, 4096u) - 1 : 0; /* L3 per socket, L1/L2 per core */
        e->eax = (e->eax & 0x3fff) | (sharing << 14) | ((MIN(ncpus, 64u) - 1) << 26);
    }
}

/* Leaves 0xb and 0x1f: SMT level (1 thread), core level (ncpus), x2APIC id. */
static void set_extended_topology(struct kvm_cpuid2 *t, uint32_t function, unsigned apic_id, unsigned ncpus)
{
    remove_function(t, function);
    uint32_t flags = KVM_CPUID_FLAG_SIGNIFCANT_INDEX;
    struct kvm_cpuid_entry2 *smt = append(t, function, 0, flags);
    smt->eax = 0;
    smt->ebx = 1;
    smt->ecx = (1u << 8) | 0;
    smt->edx = apic_id;
    struct kvm_cpuid_entry2 *core = append(t, function, 1, flags);
    core->eax = core_id_bits(ncpus);
    core->ebx = ncpus;
    core->ecx = (2u << 8) | 1;
    core->edx = apic_id;
    struct kvm_cpuid_entry2 *end = append(t, function, 2, flags);
    end->ecx = 2;
    end->edx = apic_id;
}

/* AMD reports cores per socket in 0x80000008 ECX and per-core ids in 0x8000001e. */
static void set_amd_topology(struct kvm_cpuid2 *t, unsigned apic_id, unsigned ncpus)
{
    struct kvm_cpuid_entry2 *e = cpuid_find(t, 0x80000008, 0);
    if (e)
        e->ecx = (e->ecx & ~0xf0ffu) | (core_id_bits(ncpus) << 12) | (ncpus - 1);
    e = cpuid_find(t, 0x80000001, 0);
    if (e && ncpus > 1)
        e->ecx |= EXT1_ECX_CMP_LEGACY; /* HTT in leaf 1 counts cores, not threads */
    e = cpuid_find(t, 0x8000001e, 0);
    if (e) {
        e->eax = apic_id;
        e->ebx = apic_id & 0xff; /* core id; threads per core - 1 = 0 */
        e->ecx = 0;              /* one node */
    }
}

/* Hypervisor leaves: vsnap at 0x40000000 (Linux and the test guest read the
 * TSC frequency from 0x40000010 in the VMware/Xen "timing leaf" convention),
 * KVM's paravirt leaves moved to 0x40000100 where guests (and KVM itself)
 * still find them by scanning in steps of 0x100. */
static void set_hypervisor_leaves(struct kvm_cpuid2 *t, uint32_t tsc_khz)
{
    struct kvm_cpuid_entry2 *kvm_base = cpuid_find(t, CPUID_HYPERVISOR_BASE, 0);
    struct kvm_cpuid_entry2 *kvm_features = cpuid_find(t, CPUID_HYPERVISOR_BASE + 1, 0);
    struct kvm_cpuid_entry2 saved_base = {0}, saved_features = {0};
    if (kvm_base)
        saved_base = *kvm_base;
    if (kvm_features)
        saved_features = *kvm_features;
    remove_function(t, CPUID_HYPERVISOR_BASE);
    remove_function(t, CPUID_HYPERVISOR_BASE + 1);
    remove_function(t, CPUID_TIMING_LEAF);
    struct kvm_cpuid_entry2 *base = append(t, CPUID_HYPERVISOR_BASE, 0, 0);
    base->eax = CPUID_TIMING_LEAF;
    put_signature(base, CPUID_VSNAP_SIGNATURE);
    struct kvm_cpuid_entry2 *timing = append(t, CPUID_TIMING_LEAF, 0, 0);
    timing->eax = tsc_khz;
    timing->ebx = 1000000; /* KVM's emulated LAPIC timer runs at 1 GHz */
    if (kvm_base) {
        struct kvm_cpuid_entry2 *moved = append(t, CPUID_KVM_BASE, 0, 0);
        *moved = saved_base;
        moved->function = CPUID_KVM_BASE;
        moved->eax = CPUID_KVM_BASE + 1;
    }
    if (kvm_features) {
        struct kvm_cpuid_entry2 *moved = append(t, CPUID_KVM_BASE + 1, 0, 0);
        *moved = saved_features;
        moved->function = CPUID_KVM_BASE + 1;
    }
}

/* No feature is hidden. Masking what the development hosts' instruction
 * emulator lacks for guest kernel code (XSAVE, AVX, SSE4, ...) looks tempting,
 * but there (kvm_pvm, see shim/README.md, "Host limits") KVM_SET_CPUID2 keeps
 * the host's bits in leaves 1, 7 and 0xd whatever the table says
 * (KVM_GET_CPUID2 returns them, and a CPL0 guest reads them), so a mask
 * changes nothing, while on VMX/SVM hosts it would only take features away
 * from guests. Topology and hypervisor leaves are honoured. */

struct kvm_cpuid2 *cpuid_for_vcpu(const struct kvm_cpuid2 *supported, unsigned index, unsigned ncpus,
                                  uint32_t tsc_khz)
{
    size_t bytes = sizeof(*supported) + (supported->nent + EXTRA_ENTRIES) * sizeof(struct kvm_cpuid_entry2);
    struct kvm_cpuid2 *t = g_malloc0(bytes);
    memcpy(t, supported, sizeof(*supported) + supported->nent * sizeof(struct kvm_cpuid_entry2));
    unsigned apic_id = index;
    set_leaf1(t, apic_id, ncpus);
    set_leaf4(t, ncpus);
    if (cpuid_find(t, 0xb, 0))
        set_extended_topology(t, 0xb, apic_id, ncpus);
    if (cpuid_find(t, 0x1f, 0))
        set_extended_topology(t, 0x1f, apic_id, ncpus);
    if (is_amd(t))
        set_amd_topology(t, apic_id, ncpus);
    set_hypervisor_leaves(t, tsc_khz);
    return t;
}

bool cpuid_configure_vcpu(int vcpu_fd, const struct kvm_cpuid2 *supported, unsigned index, unsigned ncpus,
                          GError **error)
{
    int khz = ioctl(vcpu_fd, KVM_GET_TSC_KHZ, 0);
    if (khz < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "vCPU %u: KVM_GET_TSC_KHZ failed: %s",
                    index, g_strerror(errno));
        return false;
    }
    g_autofree struct kvm_cpuid2 *table = cpuid_for_vcpu(supported, index, ncpus, (uint32_t)khz);
    if (ioctl(vcpu_fd, KVM_SET_CPUID2, table) < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "vCPU %u: KVM_SET_CPUID2 failed: %s",
                    index, g_strerror(errno));
        return false;
    }
    return true;
}
