/* virsh dump --memory-only (virDomainCoreDump, virDomainCoreDumpWithFormat):
 * the shim's vm.coredump (an ELF core: a PT_NOTE with one NT_PRSTATUS per
 * vCPU, one PT_LOAD per guest RAM range at its guest-physical address) into
 * a file the daemon creates. Without VIR_DUMP_LIVE a running VM is paused
 * for the dump and resumed (a "dump" job: a daemon that dies meanwhile
 * leaves the next one a VM to resume); with it, the shim stops the vCPUs
 * only to read their registers. VIR_DUMP_RESET resets the guest after it,
 * VIR_DUMP_CRASH stops the domain as crashed.
 *
 * The file appears whole or not at all: it is written unnamed (O_TMPFILE, or
 * a hidden name where the file system has none) and renamed over `to` once
 * the shim synced it, so a failure (an unwritable directory, a full disk)
 * leaves no file and the VM as it was. Formats other than ELF (kdump-zlib,
 * kdump-lzo, kdump-snappy, win-dmp) and a dump without --memory-only are
 * refused by name (VIR_ERR_OPERATION_UNSUPPORTED). */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

bool dump_memory(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *to, unsigned format,
                 unsigned flags, GError **error);
