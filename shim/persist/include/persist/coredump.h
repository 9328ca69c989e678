/* vm.coredump: guest memory as an ELF64 core file (ET_CORE), the format of
 * QEMU's dump-guest-memory and Cloud Hypervisor's vm.coredump, which crash(8),
 * gdb and readelf read:
 *
 *   ELF header | PT_NOTE | one PT_LOAD per guest RAM range | the notes |
 *   RAM, page-aligned
 *
 * The notes are one NT_PRSTATUS "CORE" note per vCPU (its general registers,
 * pr_pid = vCPU index + 1). Each PT_LOAD's p_paddr (and p_vaddr: no paging is
 * assumed) is the range's guest-physical address. RAM that reads as zeros is
 * left as holes, so the file is sparse and takes the room of what the guest
 * wrote. Errors are PERSIST_ERROR_FAILED with errno's text. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct vm;

/* A dump in two steps: _begin reads every vCPU's registers, so the vCPUs
 * must be parked (the VM paused) for it; _write then writes the file to fd
 * (a new, empty regular file, written from offset 0 and synced before it
 * returns), while the VM may run again (a live dump: RAM as it is while
 * written). */
struct coredump;
struct coredump *persist_coredump_begin(struct vm *vm, GError **error);
bool persist_coredump_write(struct coredump *dump, int fd, GError **error);
void persist_coredump_free(struct coredump *dump);
