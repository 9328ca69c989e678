/* The BSP starts directly in 64-bit mode, as the Linux 64-bit boot protocol
 * asks: paging on with an identity map covering the kernel, zero page and
 * command line (the first 4 GiB with 2 MiB pages), a GDT whose flat code and
 * data descriptors sit at __BOOT_CS = 0x10 and __BOOT_DS = 0x18, interrupts
 * off, RSI = boot_params.
 */
#include <errno.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>

#include "boot-internal.h"

#define CR0_PE (1ull << 0)
#define CR0_ET (1ull << 4)
#define CR0_NW (1ull << 29)
#define CR0_CD (1ull << 30)
#define CR0_PG (1ull << 31)
#define CR4_PAE (1ull << 5)
#define EFER_LME (1ull << 8)
#define EFER_LMA (1ull << 10)

#define PTE_PRESENT (1ull << 0)
#define PTE_WRITE (1ull << 1)
#define PTE_HUGE (1ull << 7)
#define IDENTITY_MAP_GIB 4

#define BOOT_CS_INDEX 2 /* selector 0x10 */
#define BOOT_DS_INDEX 3 /* selector 0x18 */
#define BOOT_GDT_ENTRIES 4
/* Flags/access bits of a descriptor, as (granularity/size nibble << 12) | access byte. */
#define DESC_CODE64 0xa09b /* G, L, present, DPL0, code exec/read, accessed */
#define DESC_DATA 0xc093   /* G, D/B, present, DPL0, data read/write, accessed */
#define DESC_TSS64 0x808b  /* G, present, busy 64-bit TSS */

static uint64_t gdt_descriptor(uint16_t flags, uint32_t base, uint32_t limit)
{
    return ((uint64_t)(base & 0xff000000u) << 32) | ((uint64_t)(flags & 0xf0ffu) << 40) |
           ((uint64_t)(limit & 0x000f0000u) << 32) | ((uint64_t)(base & 0x00ffffffu) << 16) |
           (uint64_t)(limit & 0x0000ffffu);
}

static void boot_gdt(uint64_t gdt[BOOT_GDT_ENTRIES])
{
    memset(gdt, 0, BOOT_GDT_ENTRIES * sizeof gdt[0]);
    gdt[BOOT_CS_INDEX] = gdt_descriptor(DESC_CODE64, 0, 0xfffff);
    gdt[BOOT_DS_INDEX] = gdt_descriptor(DESC_DATA, 0, 0xfffff);
}

/* The KVM segment register image of a GDT descriptor. */
static struct kvm_segment segment_from_descriptor(uint64_t desc, uint16_t selector)
{
    uint32_t limit = (desc & 0xffff) | (((desc >> 48) & 0xf) << 16);
    struct kvm_segment s = {
        .base = ((desc >> 16) & 0xffffff) | (((desc >> 56) & 0xff) << 24),
        .selector = selector,
        .type = (desc >> 40) & 0xf,
        .present = (desc >> 47) & 1,
        .dpl = (desc >> 45) & 3,
        .db = (desc >> 54) & 1,
        .s = (desc >> 44) & 1,
        .l = (desc >> 53) & 1,
        .g = (desc >> 55) & 1,
        .avl = (desc >> 52) & 1,
    };
    s.limit = s.g ? (limit << 12) | 0xfff : limit;
    s.unusable = !s.present;
    return s;
}

static void write_page_tables(struct guest_memory *mem)
{
    uint64_t *pml4 = guest_memory_ptr(mem, BOOT_PML4_ADDR, GUEST_PAGE_SIZE);
    uint64_t *pdpte = guest_memory_ptr(mem, BOOT_PDPTE_ADDR, GUEST_PAGE_SIZE);
    uint64_t *pde = guest_memory_ptr(mem, BOOT_PDE_ADDR, IDENTITY_MAP_GIB * GUEST_PAGE_SIZE);
    g_assert(pml4 && pdpte && pde); /* low RAM always holds them: VSNAP_MIN_MEMORY is 16 MiB */

    memset(pml4, 0, GUEST_PAGE_SIZE);
    memset(pdpte, 0, GUEST_PAGE_SIZE);
    pml4[0] = BOOT_PDPTE_ADDR | PTE_PRESENT | PTE_WRITE;
    for (uint64_t gib = 0; gib < IDENTITY_MAP_GIB; gib++) {
        pdpte[gib] = (BOOT_PDE_ADDR + gib * GUEST_PAGE_SIZE) | PTE_PRESENT | PTE_WRITE;
        for (uint64_t i = 0; i < 512; i++)
            pde[gib * 512 + i] = ((gib << 30) | (i << 21)) | PTE_PRESENT | PTE_WRITE | PTE_HUGE;
    }
}

void boot_write_gdt_and_page_tables(struct guest_memory *mem)
{
    uint64_t gdt[BOOT_GDT_ENTRIES];
    boot_gdt(gdt);
    uint8_t *gdt_ram = guest_memory_ptr(mem, BOOT_GDT_ADDR, sizeof gdt);
    uint8_t *idt_ram = guest_memory_ptr(mem, BOOT_IDT_ADDR, 8);
    g_assert(gdt_ram && idt_ram);
    G_STATIC_ASSERT(BOOT_GDT_ADDR + sizeof(uint64_t) * BOOT_GDT_ENTRIES <= BOOT_IDT_ADDR);
    memcpy(gdt_ram, gdt, sizeof gdt);
    memset(idt_ram, 0, 8); /* an empty IDT: any exception before Linux sets its own is fatal */
    write_page_tables(mem);
}

static bool vcpu_ioctl(int fd, unsigned long request, void *arg, const char *name, GError **error)
{
    if (ioctl(fd, request, arg) < 0) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_KVM, "cannot set up the boot vCPU: %s failed: %s",
                    name, g_strerror(errno));
        return false;
    }
    return true;
}

static bool set_long_mode_sregs(int vcpu_fd, GError **error)
{
    struct kvm_sregs sregs;
    if (!vcpu_ioctl(vcpu_fd, KVM_GET_SREGS, &sregs, "KVM_GET_SREGS", error))
        return false;
    uint64_t gdt[BOOT_GDT_ENTRIES];
    boot_gdt(gdt);
    sregs.gdt.base = BOOT_GDT_ADDR;
    sregs.gdt.limit = sizeof gdt - 1;
    sregs.idt.base = BOOT_IDT_ADDR;
    sregs.idt.limit = 7;
    sregs.cs = segment_from_descriptor(gdt[BOOT_CS_INDEX], BOOT_CS_INDEX * 8);
    sregs.ds = segment_from_descriptor(gdt[BOOT_DS_INDEX], BOOT_DS_INDEX * 8);
    sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
    /* Entering long mode needs a busy 64-bit TSS in TR. Linux loads its own
     * before it could use it, so it need not be in the boot GDT. */
    sregs.tr = segment_from_descriptor(gdt_descriptor(DESC_TSS64, 0, 0xfffff), BOOT_GDT_ENTRIES * 8);
    sregs.cr3 = BOOT_PML4_ADDR;
    sregs.cr4 |= CR4_PAE;
    sregs.cr0 = (sregs.cr0 & ~(CR0_CD | CR0_NW)) | CR0_PE | CR0_ET | CR0_PG; /* caches on, as firmware leaves them */
    sregs.efer |= EFER_LME | EFER_LMA;
    return vcpu_ioctl(vcpu_fd, KVM_SET_SREGS, &sregs, "KVM_SET_SREGS", error);
}

static bool set_boot_regs(int vcpu_fd, const struct boot_entry *entry, GError **error)
{
    struct kvm_regs regs = {
        .rip = entry->entry,
        .rsi = entry->boot_params,
        .rsp = entry->stack,
        .rbp = entry->stack,
        .rflags = 0x2, /* bit 1 is always set; IF off */
    };
    return vcpu_ioctl(vcpu_fd, KVM_SET_REGS, &regs, "KVM_SET_REGS", error);
}

static bool set_fpu_defaults(int vcpu_fd, GError **error)
{
    struct kvm_fpu fpu = {
        .fcw = 0x37f,    /* x87 reset state: all exceptions masked, 64-bit precision */
        .mxcsr = 0x1f80, /* SSE reset state: all exceptions masked */
    };
    return vcpu_ioctl(vcpu_fd, KVM_SET_FPU, &fpu, "KVM_SET_FPU", error);
}

/* MSRs a BIOS would leave in a known state. */
static const struct {
    uint32_t index;
    uint64_t value;
} boot_msrs[] = {
    { 0x174, 0 },                  /* IA32_SYSENTER_CS */
    { 0x175, 0 },                  /* IA32_SYSENTER_ESP */
    { 0x176, 0 },                  /* IA32_SYSENTER_EIP */
    { 0xc0000081, 0 },             /* STAR */
    { 0xc0000082, 0 },             /* LSTAR */
    { 0xc0000083, 0 },             /* CSTAR */
    { 0xc0000084, 0 },             /* SYSCALL_MASK */
    { 0xc0000102, 0 },             /* KERNEL_GS_BASE */
    { 0x1a0, 1 },                  /* IA32_MISC_ENABLE: fast string operations */
    { 0x2ff, (1u << 11) | 6 },     /* MTRRdefType: MTRRs on, default write-back */
};

static bool set_boot_msrs(int vcpu_fd, GError **error)
{
    enum { N = G_N_ELEMENTS(boot_msrs) };
    struct {
        struct kvm_msrs header;
        struct kvm_msr_entry entries[N];
    } msrs;
    memset(&msrs, 0, sizeof msrs);
    msrs.header.nmsrs = N;
    for (unsigned i = 0; i < N; i++) {
        msrs.entries[i].index = boot_msrs[i].index;
        msrs.entries[i].data = boot_msrs[i].value;
    }
    int set = ioctl(vcpu_fd, KVM_SET_MSRS, &msrs);
    if (set < 0 || set != N) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_KVM,
                    "cannot set up the boot vCPU: KVM_SET_MSRS set %d of %d MSRs (refused: 0x%x)%s%s",
                    set < 0 ? 0 : set, N, set < 0 ? boot_msrs[0].index : boot_msrs[set].index,
                    set < 0 ? ": " : "", set < 0 ? g_strerror(errno) : "");
        return false;
    }
    return true;
}

bool boot_setup_bsp(int vcpu_fd, const struct boot_entry *entry, GError **error)
{
    return set_long_mode_sregs(vcpu_fd, error) && set_boot_regs(vcpu_fd, entry, error) &&
           set_fpu_defaults(vcpu_fd, error) && set_boot_msrs(vcpu_fd, error);
}
