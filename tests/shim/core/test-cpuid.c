/* CPUID tables built from this machine's KVM_GET_SUPPORTED_CPUID: topology,
 * hypervisor leaves, hidden features. (test-vm checks what a guest sees.) */
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpuid.h"

static struct kvm_cpuid2 *supported(void)
{
    int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    g_assert_cmpint(kvm, >=, 0);
    g_autoptr(GError) error = NULL;
    struct kvm_cpuid2 *c = cpuid_get_supported(kvm, &error);
    g_assert_no_error(error);
    g_assert_nonnull(c);
    close(kvm);
    return c;
}

static struct kvm_cpuid_entry2 *must_find(struct kvm_cpuid2 *t, uint32_t function, uint32_t index)
{
    struct kvm_cpuid_entry2 *e = cpuid_find(t, function, index);
    if (!e)
        g_error("leaf 0x%x.%u missing", function, index);
    return e;
}

static void test_topology(void)
{
    g_autofree struct kvm_cpuid2 *base = supported();
    for (unsigned ncpus = 1; ncpus <= 6; ncpus++) {
        for (unsigned index = 0; index < ncpus; index++) {
            g_autofree struct kvm_cpuid2 *t = cpuid_for_vcpu(base, index, ncpus, 2000000);
            struct kvm_cpuid_entry2 *l1 = must_find(t, 1, 0);
            g_assert_cmpuint(l1->ebx >> 24, ==, index);
            g_assert_cmpuint((l1->ebx >> 16) & 0xff, ==, ncpus);
            g_assert_cmpuint(!!(l1->edx & (1u << 28)), ==, ncpus > 1);
            if (cpuid_find(base, 0xb, 0)) {
                struct kvm_cpuid_entry2 *smt = must_find(t, 0xb, 0), *core = must_find(t, 0xb, 1);
                g_assert_cmpuint(smt->edx, ==, index);
                g_assert_cmpuint(core->edx, ==, index);
                g_assert_cmpuint(smt->ebx, ==, 1);
                g_assert_cmpuint(core->ebx, ==, ncpus);
                g_assert_cmpuint((core->ecx >> 8) & 0xff, ==, 2); /* level type: core */
                g_assert_cmpuint(1u << core->eax, >=, ncpus);     /* ids fit in the shift */
                g_assert_cmpuint(must_find(t, 0xb, 2)->ecx >> 8, ==, 0);
            }
            for (unsigned i = 0; i < t->nent; i++) {
                struct kvm_cpuid_entry2 *e = &t->entries[i];
                if (e->function == 4 && (e->eax & 0x1f))
                    g_assert_cmpuint((e->eax >> 26) + 1, ==, ncpus);
            }
        }
    }
}

static void test_hypervisor_leaves(void)
{
    g_autofree struct kvm_cpuid2 *base = supported();
    g_autofree struct kvm_cpuid2 *t = cpuid_for_vcpu(base, 0, 1, 2345678);
    struct kvm_cpuid_entry2 *hv = must_find(t, CPUID_HYPERVISOR_BASE, 0);
    char sig[12];
    memcpy(sig, &hv->ebx, 4);
    memcpy(sig + 4, &hv->ecx, 4);
    memcpy(sig + 8, &hv->edx, 4);
    g_assert_cmpmem(sig, 12, CPUID_VSNAP_SIGNATURE, 12);
    g_assert_cmphex(hv->eax, >=, CPUID_TIMING_LEAF);
    g_assert_cmpuint(must_find(t, CPUID_TIMING_LEAF, 0)->eax, ==, 2345678);
    g_assert_cmphex(must_find(t, 1, 0)->ecx & (1u << 31), !=, 0);
    /* KVM's paravirt leaves are still there, one block up. */
    if (cpuid_find(base, CPUID_HYPERVISOR_BASE, 0)) {
        struct kvm_cpuid_entry2 *kvm = must_find(t, CPUID_KVM_BASE, 0);
        g_assert_cmpmem(&kvm->ebx, 4, "KVMK", 4);
        g_assert_cmphex(kvm->eax, ==, CPUID_KVM_BASE + 1);
        g_assert_cmphex(must_find(t, CPUID_KVM_BASE + 1, 0)->eax, ==,
                        must_find(base, CPUID_HYPERVISOR_BASE + 1, 0)->eax);
    }
    /* Each function.index appears once. */
    for (unsigned i = 0; i < t->nent; i++)
        for (unsigned j = i + 1; j < t->nent; j++)
            g_assert_false(t->entries[i].function == t->entries[j].function &&
                           t->entries[i].index == t->entries[j].index);
}

/* Nothing is taken away from what KVM supports; only the hypervisor bit and
 * HTT (with more than one vCPU) are added to leaf 1. */
static void test_features_kept(void)
{
    g_autofree struct kvm_cpuid2 *base = supported();
    g_autofree struct kvm_cpuid2 *t = cpuid_for_vcpu(base, 0, 2, 1000000);
    struct kvm_cpuid_entry2 *was = must_find(base, 1, 0), *now = must_find(t, 1, 0);
    g_assert_cmphex(now->ecx, ==, was->ecx | (1u << 31));
    g_assert_cmphex(now->edx, ==, was->edx | (1u << 28));
    struct kvm_cpuid_entry2 *l7 = cpuid_find(base, 7, 0);
    if (l7)
        g_assert_cmphex(must_find(t, 7, 0)->ebx, ==, l7->ebx);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cpuid/topology", test_topology);
    g_test_add_func("/cpuid/hypervisor-leaves", test_hypervisor_leaves);
    g_test_add_func("/cpuid/features-kept", test_features_kept);
    return g_test_run();
}
