/* The product's limits: the largest machine vsnap runs, in one place.
 *
 * The shim refuses a VM beyond them (shim/config/vm-config.c, shim/core/vm.c), the
 * daemon refuses a definition beyond them at define time rather than at start
 * (plugin/conf/domain-parse.c) and reports them in its capabilities, and the format
 * library refuses a layer describing more (snapshot/layer.h). Header only:
 * every program and library may include it.
 */
#pragma once

#define VSNAP_MIN_MEMORY (16ull << 20)
#define VSNAP_MAX_MEMORY (64ull << 30)
#define VSNAP_MAX_VCPUS 64
/* The largest disk: a disk layer's page index is 2 bytes a 4 KiB block
 * (2 GiB of address space, touched only where layers hold blocks). */
#define VSNAP_MAX_DISK_SIZE (4ull << 40)
