/* vm.coredump's ELF core file (see persist/coredump.h). */
#include "persist/coredump.h"

#include <elf.h>
#include <errno.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/procfs.h>
#include <sys/user.h>
#include <unistd.h>

#include "core/vm.h"
#include "persist/persist-error.h"
#include "platform/memory.h"

#define NOTE_NAME "CORE"
#define NOTE_NAME_SIZE 8 /* "CORE\0", padded to 4 bytes: 8 */
#define NOTE_SIZE (sizeof(Elf64_Nhdr) + NOTE_NAME_SIZE + sizeof(struct elf_prstatus))
#define DATA_ALIGN 4096u
#define CHUNK (1u << 20) /* RAM is written (or skipped as zeros) a MiB at a time */

struct coredump {
    struct vm *vm;
    unsigned nvcpus;
    struct elf_prstatus *prstatus;
};

static bool fail_errno(GError **error, int err, const char *what)
{
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "core dump: %s: %s", what, g_strerror(err));
    return false;
}

/* user_regs_struct is the register order of NT_PRSTATUS on x86-64. */
static void fill_regs(struct user_regs_struct *u, const struct kvm_regs *r, const struct kvm_sregs *s)
{
    *u = (struct user_regs_struct){
        .r15 = r->r15, .r14 = r->r14, .r13 = r->r13, .r12 = r->r12, .rbp = r->rbp, .rbx = r->rbx,
        .r11 = r->r11, .r10 = r->r10, .r9 = r->r9, .r8 = r->r8, .rax = r->rax, .rcx = r->rcx,
        .rdx = r->rdx, .rsi = r->rsi, .rdi = r->rdi, .orig_rax = r->rax, .rip = r->rip,
        .cs = s->cs.selector, .eflags = r->rflags, .rsp = r->rsp, .ss = s->ss.selector,
        .fs_base = s->fs.base, .gs_base = s->gs.base, .ds = s->ds.selector, .es = s->es.selector,
        .fs = s->fs.selector, .gs = s->gs.selector,
    };
}

struct coredump *persist_coredump_begin(struct vm *vm, GError **error)
{
    g_autofree struct elf_prstatus *prstatus = g_new0(struct elf_prstatus, vm_vcpu_count(vm));
    G_STATIC_ASSERT(sizeof(prstatus->pr_reg) == sizeof(struct user_regs_struct));
    for (unsigned i = 0; i < vm_vcpu_count(vm); i++) {
        struct kvm_regs regs;
        struct kvm_sregs sregs;
        int fd = vm_vcpu_fd(vm, i);
        if (ioctl(fd, KVM_GET_REGS, &regs) < 0 || ioctl(fd, KVM_GET_SREGS, &sregs) < 0) {
            fail_errno(error, errno, "reading a vCPU's registers");
            return NULL;
        }
        struct user_regs_struct u;
        fill_regs(&u, &regs, &sregs);
        memcpy(&prstatus[i].pr_reg, &u, sizeof(u));
        prstatus[i].pr_pid = (int)i + 1;
    }
    struct coredump *dump = g_new0(struct coredump, 1);
    dump->vm = vm;
    dump->nvcpus = vm_vcpu_count(vm);
    dump->prstatus = g_steal_pointer(&prstatus);
    return dump;
}

void persist_coredump_free(struct coredump *dump)
{
    if (!dump)
        return;
    g_free(dump->prstatus);
    g_free(dump);
}

static bool write_all(int fd, const void *data, size_t len, off_t offset, GError **error)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail_errno(error, n < 0 ? errno : ENOSPC, "writing the file");
        p += n;
        len -= (size_t)n;
        offset += n;
    }
    return true;
}

static bool is_zero(const uint8_t *p, size_t len)
{
    return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* The headers and notes, the first data_offset bytes of the file. */
static uint8_t *build_headers(const struct coredump *dump, const struct guest_memory *mem, uint64_t *data_offset)
{
    unsigned nphdr = 1 + mem->nregions;
    uint64_t notes_offset = sizeof(Elf64_Ehdr) + nphdr * sizeof(Elf64_Phdr);
    uint64_t notes_size = dump->nvcpus * NOTE_SIZE;
    *data_offset = align_up(notes_offset + notes_size, DATA_ALIGN);
    uint8_t *head = g_malloc0(*data_offset);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)head;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_ident[EI_OSABI] = ELFOSABI_NONE;
    eh->e_type = ET_CORE;
    eh->e_machine = EM_X86_64;
    eh->e_version = EV_CURRENT;
    eh->e_phoff = sizeof(Elf64_Ehdr);
    eh->e_ehsize = sizeof(Elf64_Ehdr);
    eh->e_phentsize = sizeof(Elf64_Phdr);
    eh->e_phnum = (Elf64_Half)nphdr;
    Elf64_Phdr *ph = (Elf64_Phdr *)(head + eh->e_phoff);
    ph[0] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = notes_offset, .p_filesz = notes_size, .p_align = 4};
    uint64_t offset = *data_offset;
    for (unsigned i = 0; i < mem->nregions; i++) {
        const struct guest_region *r = &mem->regions[i];
        ph[1 + i] = (Elf64_Phdr){
            .p_type = PT_LOAD, .p_flags = PF_R | PF_W | PF_X, .p_offset = offset, .p_vaddr = r->gpa,
            .p_paddr = r->gpa, .p_filesz = r->size, .p_memsz = r->size, .p_align = DATA_ALIGN,
        };
        offset += r->size;
    }
    uint8_t *note = head + notes_offset;
    for (unsigned i = 0; i < dump->nvcpus; i++, note += NOTE_SIZE) {
        Elf64_Nhdr nh = {.n_namesz = sizeof(NOTE_NAME), .n_descsz = sizeof(struct elf_prstatus),
                         .n_type = NT_PRSTATUS};
        memcpy(note, &nh, sizeof(nh));
        memcpy(note + sizeof(nh), NOTE_NAME, sizeof(NOTE_NAME));
        memcpy(note + sizeof(nh) + NOTE_NAME_SIZE, &dump->prstatus[i], sizeof(struct elf_prstatus));
    }
    return head;
}

/* One range's bytes from RAM offset start, zeros left as holes. */
static bool write_range(int fd, const uint8_t *ram, uint64_t size, off_t offset, GError **error)
{
    for (uint64_t done = 0; done < size; done += CHUNK) {
        size_t len = (size_t)MIN((uint64_t)CHUNK, size - done);
        if (!is_zero(ram + done, len) && !write_all(fd, ram + done, len, offset + (off_t)done, error))
            return false;
    }
    return true;
}

bool persist_coredump_write(struct coredump *dump, int fd, GError **error)
{
    const struct guest_memory *mem = vm_memory(dump->vm);
    uint64_t data_offset;
    g_autofree uint8_t *head = build_headers(dump, mem, &data_offset);
    if (!write_all(fd, head, data_offset, 0, error))
        return false;
    uint64_t offset = data_offset;
    for (unsigned i = 0; i < mem->nregions; i++) {
        const struct guest_region *r = &mem->regions[i];
        if (!write_range(fd, mem->host + r->ram_offset, r->size, (off_t)offset, error))
            return false;
        offset += r->size;
    }
    /* The holes at the end, then the blocks the holes do not need: a full
     * disk shows here at the latest (fallocate is not asked for: a sparse
     * dump of a mostly idle guest is the point). */
    if (ftruncate(fd, (off_t)offset) < 0)
        return fail_errno(error, errno, "setting the file's size");
    if (fsync(fd) < 0)
        return fail_errno(error, errno, "syncing the file");
    return true;
}
