/* Guest-physical layout of the test guest. Everything the guest uses for itself
 * lies below GUEST_PRIVATE_END; RAM from there up is only touched on command, so
 * it reads as zero until filled (the snapshot tests rely on that).
 */
#pragma once

#define GUEST_IMAGE_BASE 0x100000     /* 1 MiB: where the linker script puts us */
#define GUEST_PRIVATE_END 0x1000000   /* 16 MiB */
#define GUEST_FILL_BASE GUEST_PRIVATE_END

/* virtio-mmio devices (shim/platform/include/platform/memory.h MMIO_VIRTIO_BASE), mapped uncached. */
#define GUEST_MMIO_BASE 0xd0000000ull
#define GUEST_MMIO_END 0xe0000000ull

/* Never mapped (the page tables stop at 65 GiB): vsnap.fault_after_ready reads it. */
#define GUEST_UNMAPPED_ADDR 0x4000000000ull /* 256 GiB */

/* Segment selectors of the guest's own GDT (cpl0.c). */
#define SEL_KERNEL_CODE 0x10 /* same as the boot protocol's __BOOT_CS */
#define SEL_KERNEL_DATA 0x18
#define SEL_USER_DATA (0x20 | 3)
#define SEL_USER_CODE (0x28 | 3)
#define SEL_TSS 0x30

/* RFLAGS at CPL3: IOPL=3 (port I/O allowed), IF=0 (no interrupts), bit 1 reserved. */
#define USER_RFLAGS 0x3002
