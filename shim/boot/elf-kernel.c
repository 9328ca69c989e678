/* ELF vmlinux loader: an uncompressed x86-64 kernel. Every PT_LOAD goes to its
 * physical address; the entry is startup_64's physical address. There is no
 * setup header in the file, so one is made up with what the kernel reads from
 * the zero page (as Firecracker does for ELF kernels).
 */
#include <elf.h>
#include <inttypes.h>
#include <string.h>

#include "boot-internal.h"

#define SYNTH_PROTOCOL 0x020f          /* what the header below describes */
#define SYNTH_KERNEL_ALIGNMENT 0x1000000

bool kernel_is_elf(const uint8_t *data, size_t size)
{
    return size >= SELFMAG && memcmp(data, ELFMAG, SELFMAG) == 0;
}

static bool check_ehdr(const char *path, const uint8_t *data, size_t size, GError **error)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)data;
    const char *problem = NULL;
    if (size < sizeof(Elf64_Ehdr) || data[EI_CLASS] != ELFCLASS64)
        problem = "not a 64-bit ELF file";
    else if (data[EI_DATA] != ELFDATA2LSB)
        problem = "not a little-endian ELF file";
    else if (eh->e_machine != EM_X86_64) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' is an ELF file for another architecture (e_machine %u), not x86-64",
                    path, eh->e_machine);
        return false;
    } else if (eh->e_type != ET_EXEC)
        problem = "not an executable ELF file (e_type is not ET_EXEC)";
    else if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 ||
             eh->e_phoff > size || (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > size - eh->e_phoff)
        problem = "its program headers are missing or truncated";
    if (problem) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT, "kernel '%s' is not an x86-64 Linux vmlinux: %s",
                    path, problem);
        return false;
    }
    return true;
}

static bool load_segment(struct guest_memory *mem, const char *path, const uint8_t *data, size_t size,
                         const Elf64_Phdr *ph, GError **error)
{
    if (ph->p_filesz > ph->p_memsz || ph->p_offset > size || ph->p_filesz > size - ph->p_offset) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' is truncated or corrupt: a PT_LOAD segment (offset 0x%" PRIx64
                    ", %" PRIu64 " bytes) lies outside the file of %zu bytes",
                    path, ph->p_offset, ph->p_filesz, size);
        return false;
    }
    if (ph->p_paddr < BOOT_KERNEL_ADDR) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                    "kernel '%s' has a PT_LOAD segment at 0x%" PRIx64
                    ", below 1 MiB where the boot tables live", path, ph->p_paddr);
        return false;
    }
    uint64_t low_end = boot_low_ram_end(mem);
    uint8_t *dst = NULL;
    if (ph->p_memsz <= low_end && ph->p_paddr <= low_end - ph->p_memsz)
        dst = guest_memory_ptr(mem, ph->p_paddr, ph->p_memsz);
    if (!dst) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_NO_ROOM,
                    "kernel '%s' does not fit in guest RAM: a segment needs [0x%" PRIx64 ", 0x%" PRIx64
                    ") and the guest has %" PRIu64 " MiB below 3 GiB",
                    path, ph->p_paddr, ph->p_paddr + ph->p_memsz, low_end >> 20);
        return false;
    }
    memcpy(dst, data + ph->p_offset, ph->p_filesz);
    memset(dst + ph->p_filesz, 0, ph->p_memsz - ph->p_filesz); /* .bss: RAM may not be fresh */
    return true;
}

/* e_entry is physical in Linux's vmlinux (phys_startup_64); if a build gives
 * the virtual address instead, translate it through the segment holding it. */
static bool find_entry(const char *path, const Elf64_Ehdr *eh, const Elf64_Phdr *phdrs,
                       uint64_t *entry, GError **error)
{
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = &phdrs[i];
        if (ph->p_type == PT_LOAD && eh->e_entry >= ph->p_paddr && eh->e_entry < ph->p_paddr + ph->p_memsz) {
            *entry = eh->e_entry;
            return true;
        }
    }
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = &phdrs[i];
        if (ph->p_type == PT_LOAD && eh->e_entry >= ph->p_vaddr && eh->e_entry < ph->p_vaddr + ph->p_memsz) {
            *entry = eh->e_entry - ph->p_vaddr + ph->p_paddr;
            return true;
        }
    }
    g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT,
                "kernel '%s': entry point 0x%" PRIx64 " is in no PT_LOAD segment", path, eh->e_entry);
    return false;
}

/* The fields of a bzImage header that the kernel reads from the zero page
 * when entered at startup_64. */
static void synthesize_header(struct setup_header *hdr)
{
    memset(hdr, 0, sizeof *hdr);
    hdr->boot_flag = 0xaa55;
    memcpy(&hdr->header, "HdrS", 4);
    hdr->version = SYNTH_PROTOCOL;
    hdr->vid_mode = 0xffff; /* "normal" */
    hdr->kernel_alignment = SYNTH_KERNEL_ALIGNMENT;
    hdr->initrd_addr_max = LINUX_ELF_INITRD_MAX;
    hdr->cmdline_size = LINUX_ELF_CMDLINE_MAX;
    hdr->xloadflags = XLF_KERNEL_64;
}

bool elf_kernel_load(struct guest_memory *mem, const char *path, const uint8_t *data, size_t size,
                     struct linux_kernel *out, GError **error)
{
    if (!check_ehdr(path, data, size, error))
        return false;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)data;
    /* A copy: e_phoff need not be aligned in a file we did not make. */
    g_autofree Elf64_Phdr *phdrs = g_new(Elf64_Phdr, eh->e_phnum);
    memcpy(phdrs, data + eh->e_phoff, eh->e_phnum * sizeof(Elf64_Phdr));
    uint64_t low = UINT64_MAX, high = 0;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (phdrs[i].p_type != PT_LOAD)
            continue;
        if (!load_segment(mem, path, data, size, &phdrs[i], error))
            return false;
        low = MIN(low, phdrs[i].p_paddr);
        high = MAX(high, phdrs[i].p_paddr + phdrs[i].p_memsz);
    }
    if (high == 0) {
        g_set_error(error, BOOT_ERROR, BOOT_ERROR_FORMAT, "kernel '%s' has no PT_LOAD segment", path);
        return false;
    }
    if (!find_entry(path, eh, phdrs, &out->entry, error))
        return false;

    synthesize_header(&out->hdr);
    out->hdr_len = sizeof out->hdr;
    out->format = KERNEL_FORMAT_ELF;
    out->load_addr = low;
    out->end = high;
    out->cmdline_max = LINUX_ELF_CMDLINE_MAX;
    out->initrd_end_max = (uint64_t)LINUX_ELF_INITRD_MAX + 1;
    return true;
}
