/* boot_write_gdt_and_page_tables, boot_setup_bsp and boot_set_irq_routing on
 * real KVM: the page tables and GDT as written, the vCPU state read back, a
 * few instructions run in the mode set up (selectors, RSI, stack, identity map
 * high in RAM, interrupts off), and the PIT's GSI 0 arriving on IOAPIC pin 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "boot/boot.h"
#include "platform/memory.h"

#define RAM_SIZE (512ull << 20)
#define CODE_ADDR 0x100000ull
#define PROBE_ADDR 0x1ffff000ull /* near the top of RAM: the identity map must reach it */
#define RESULT_PORT 0x510

/* Reports, through 32-bit OUTs to RESULT_PORT: CS, DS, SS, RSI, the "HdrS" at
 * RSI+0x202, a value stored and loaded at PROBE_ADDR, a value from a called
 * function (the stack works), RFLAGS, CR0, CR4. Then HLT. */
extern const uint8_t lm_prog[], lm_prog_end[];
asm(".pushsection .rodata\n.code64\n"
    "lm_prog:\n"
    "  mov $0x510, %dx\n"
    "  mov %cs, %eax\n  out %eax, %dx\n"
    "  mov %ds, %eax\n  out %eax, %dx\n"
    "  mov %ss, %eax\n  out %eax, %dx\n"
    "  mov %rsi, %rax\n  out %eax, %dx\n"
    "  mov 0x202(%rsi), %eax\n  out %eax, %dx\n"
    "  mov $0x1ffff000, %rdi\n  movl $0x12345678, (%rdi)\n  mov (%rdi), %eax\n  out %eax, %dx\n"
    "  call 1f\n  jmp 2f\n"
    "1: mov $0xc0ffee, %eax\n  out %eax, %dx\n  ret\n"
    "2: pushf\n  pop %rax\n  out %eax, %dx\n"
    "  mov %cr0, %rax\n  out %eax, %dx\n"
    "  mov %cr4, %rax\n  out %eax, %dx\n"
    "  hlt\n"
    "lm_prog_end:\n"
    ".popsection\n");

struct kvm_vm {
    int kvm, vm, vcpu;
    struct kvm_run *run;
    struct guest_memory mem;
};

static void vm_open(struct kvm_vm *v, bool irqchip)
{
    GError *error = NULL;
    v->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (v->kvm < 0)
        g_error("cannot open /dev/kvm: %s", g_strerror(errno));
    v->vm = ioctl(v->kvm, KVM_CREATE_VM, 0);
    g_assert_cmpint(v->vm, >=, 0);
    g_assert_cmpint(ioctl(v->vm, KVM_SET_TSS_ADDR, 0xfffbd000), ==, 0);
    if (irqchip)
        g_assert_cmpint(ioctl(v->vm, KVM_CREATE_IRQCHIP, 0), ==, 0);
    g_assert_true(guest_memory_init(&v->mem, RAM_SIZE, &error));
    struct kvm_userspace_memory_region region = {
        .slot = 0, .guest_phys_addr = 0, .memory_size = RAM_SIZE, .userspace_addr = (uint64_t)v->mem.host,
    };
    g_assert_cmpint(ioctl(v->vm, KVM_SET_USER_MEMORY_REGION, &region), ==, 0);
    v->vcpu = ioctl(v->vm, KVM_CREATE_VCPU, 0);
    g_assert_cmpint(v->vcpu, >=, 0);
    int run_size = ioctl(v->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
    v->run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->vcpu, 0);
    g_assert_true(v->run != MAP_FAILED);
    /* The host's CPUID, so the guest may use long mode at all. */
    struct kvm_cpuid2 *cpuid = g_malloc0(sizeof *cpuid + 256 * sizeof(struct kvm_cpuid_entry2));
    cpuid->nent = 256;
    g_assert_cmpint(ioctl(v->kvm, KVM_GET_SUPPORTED_CPUID, cpuid), ==, 0);
    g_assert_cmpint(ioctl(v->vcpu, KVM_SET_CPUID2, cpuid), ==, 0);
    g_free(cpuid);
}

static void vm_close(struct kvm_vm *v)
{
    close(v->vcpu);
    close(v->vm);
    close(v->kvm);
    guest_memory_release(&v->mem);
}

static uint64_t rd64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void test_tables_in_ram(void)
{
    struct guest_memory mem;
    GError *error = NULL;
    g_assert_true(guest_memory_init(&mem, 64ull << 20, &error));
    boot_write_gdt_and_page_tables(&mem);

    const uint8_t *gdt = guest_memory_ptr(&mem, BOOT_GDT_ADDR, 32);
    uint64_t cs = rd64(gdt + 0x10), ds = rd64(gdt + 0x18);
    g_assert_cmphex(rd64(gdt), ==, 0);
    g_assert_cmphex((cs >> 40) & 0xff, ==, 0x9b);  /* present, DPL0, code exec/read */
    g_assert_cmphex((cs >> 53) & 1, ==, 1);        /* L: 64-bit */
    g_assert_cmphex((ds >> 40) & 0xff, ==, 0x93);  /* present, DPL0, data read/write */

    const uint8_t *pml4 = guest_memory_ptr(&mem, BOOT_PML4_ADDR, 4096);
    const uint8_t *pdpt = guest_memory_ptr(&mem, BOOT_PDPTE_ADDR, 4096);
    g_assert_cmphex(rd64(pml4) & ~0xfffull, ==, BOOT_PDPTE_ADDR);
    g_assert_cmphex(rd64(pml4) & 3, ==, 3);
    for (uint64_t gib = 0; gib < 4; gib++) {
        uint64_t pdpte = rd64(pdpt + 8 * gib);
        g_assert_cmphex(pdpte & 3, ==, 3);
        const uint8_t *pd = guest_memory_ptr(&mem, pdpte & ~0xfffull, 4096);
        g_assert_nonnull(pd);
        for (uint64_t i = 0; i < 512; i++) {
            uint64_t pde = rd64(pd + 8 * i);
            g_assert_cmphex(pde & ~0xfffull, ==, (gib << 30) + (i << 21));
            g_assert_cmphex(pde & 0x83, ==, 0x83); /* present, writable, 2 MiB page */
        }
    }
    g_assert_cmphex(rd64(pdpt + 8 * 4), ==, 0);
    guest_memory_release(&mem);
}

static void check_vcpu_state(struct kvm_vm *v, const struct boot_entry *e)
{
    struct kvm_sregs s;
    struct kvm_regs r;
    struct kvm_fpu fpu;
    g_assert_cmpint(ioctl(v->vcpu, KVM_GET_SREGS, &s), ==, 0);
    g_assert_cmpint(ioctl(v->vcpu, KVM_GET_REGS, &r), ==, 0);
    g_assert_cmpint(ioctl(v->vcpu, KVM_GET_FPU, &fpu), ==, 0);
    g_assert_cmphex(s.cr0 & 0x80000001, ==, 0x80000001); /* PG | PE */
    g_assert_cmphex(s.cr4 & 0x20, ==, 0x20);             /* PAE */
    g_assert_cmphex(s.efer & 0x500, ==, 0x500);          /* LME | LMA */
    g_assert_cmphex(s.cr3, ==, BOOT_PML4_ADDR);
    g_assert_cmphex(s.cs.selector, ==, 0x10);
    g_assert_cmpuint(s.cs.l, ==, 1);
    g_assert_cmphex(s.ds.selector, ==, 0x18);
    g_assert_cmphex(s.ss.selector, ==, 0x18);
    g_assert_cmphex(s.gdt.base, ==, BOOT_GDT_ADDR);
    g_assert_cmphex(r.rip, ==, e->entry);
    g_assert_cmphex(r.rsi, ==, e->boot_params);
    g_assert_cmphex(r.rsp, ==, e->stack);
    g_assert_cmphex(r.rflags, ==, 0x2);
    g_assert_cmphex(fpu.fcw, ==, 0x37f);
    /* KVM_GET_FPU leaves mxcsr 0 on this host's KVM; the XSAVE image has it
     * (legacy area, byte 24). */
    struct kvm_xsave xsave;
    g_assert_cmpint(ioctl(v->vcpu, KVM_GET_XSAVE, &xsave), ==, 0);
    g_assert_cmphex(xsave.region[6], ==, 0x1f80);

    struct {
        struct kvm_msrs h;
        struct kvm_msr_entry e[2];
    } msrs = { .h.nmsrs = 2, .e = { { .index = 0x1a0 }, { .index = 0x2ff } } };
    g_assert_cmpint(ioctl(v->vcpu, KVM_GET_MSRS, &msrs), ==, 2);
    g_assert_cmphex(msrs.e[0].data & 1, ==, 1);
    g_assert_cmphex(msrs.e[1].data, ==, (1u << 11) | 6);
}

static void test_bsp_runs(void)
{
    struct kvm_vm v;
    vm_open(&v, false); /* no irqchip: HLT comes back to us */
    boot_write_gdt_and_page_tables(&v.mem);
    memcpy(guest_memory_ptr(&v.mem, CODE_ADDR, lm_prog_end - lm_prog), lm_prog, lm_prog_end - lm_prog);
    memcpy(guest_memory_ptr(&v.mem, BOOT_ZERO_PAGE + 0x202, 4), "HdrS", 4);
    struct boot_entry e = { .entry = CODE_ADDR, .boot_params = BOOT_ZERO_PAGE, .stack = BOOT_STACK_TOP };
    GError *error = NULL;
    g_assert_true(boot_setup_bsp(v.vcpu, &e, &error));
    g_assert_no_error(error);
    check_vcpu_state(&v, &e);

    uint32_t got[16];
    unsigned n = 0;
    for (;;) {
        int rc = ioctl(v.vcpu, KVM_RUN, 0);
        if (rc < 0 && errno == EINTR)
            continue;
        g_assert_cmpint(rc, ==, 0);
        if (v.run->exit_reason == KVM_EXIT_HLT)
            break;
        if (v.run->exit_reason != KVM_EXIT_IO)
            g_error("unexpected exit %u", v.run->exit_reason);
        g_assert_cmphex(v.run->io.port, ==, RESULT_PORT);
        g_assert_cmpuint(v.run->io.size, ==, 4);
        g_assert_cmpuint(n, <, G_N_ELEMENTS(got));
        memcpy(&got[n++], (uint8_t *)v.run + v.run->io.data_offset, 4);
    }
    g_assert_cmpuint(n, ==, 10);
    g_assert_cmphex(got[0], ==, 0x10);
    g_assert_cmphex(got[1], ==, 0x18);
    g_assert_cmphex(got[2], ==, 0x18);
    g_assert_cmphex(got[3], ==, BOOT_ZERO_PAGE);
    g_assert_cmpmem(&got[4], 4, "HdrS", 4);
    g_assert_cmphex(got[5], ==, 0x12345678);
    g_assert_cmphex(got[6], ==, 0xc0ffee);
    g_assert_cmphex(got[7] & 0x200, ==, 0);                /* IF off */
    g_assert_cmphex(got[8] & 0x80000001, ==, 0x80000001);  /* PG | PE */
    g_assert_cmphex(got[9] & 0x20, ==, 0x20);              /* PAE */
    const uint8_t *probe = guest_memory_ptr(&v.mem, PROBE_ADDR, 4);
    g_assert_cmphex(probe[0], ==, 0x78);
    vm_close(&v);
}

/* IOAPIC IRR after raising GSI 0 (masked pins keep IRR set). */
static uint32_t ioapic_irr_after_gsi0(bool with_routing)
{
    struct kvm_vm v;
    vm_open(&v, true);
    GError *error = NULL;
    if (with_routing) {
        g_assert_true(boot_set_irq_routing(v.vm, &error));
        g_assert_no_error(error);
    }
    struct kvm_irq_level line = { .irq = 0, .level = 1 };
    g_assert_cmpint(ioctl(v.vm, KVM_IRQ_LINE, &line), ==, 0);
    struct kvm_irqchip chip = { .chip_id = KVM_IRQCHIP_IOAPIC };
    g_assert_cmpint(ioctl(v.vm, KVM_GET_IRQCHIP, &chip), ==, 0);
    uint32_t irr = chip.chip.ioapic.irr;
    vm_close(&v);
    return irr;
}

static void test_irq_routing(void)
{
    /* KVM's default: the PIT's GSI 0 on pin 0, contradicting the MADT. */
    g_assert_cmphex(ioapic_irr_after_gsi0(false) & 0x5, ==, 0x1);
    /* With the boot routing: on pin 2, as the MP table and MADT say. */
    g_assert_cmphex(ioapic_irr_after_gsi0(true) & 0x5, ==, 0x4);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/longmode/tables-in-ram", test_tables_in_ram);
    g_test_add_func("/longmode/bsp-runs", test_bsp_runs);
    g_test_add_func("/longmode/irq-routing", test_irq_routing);
    return g_test_run();
}
