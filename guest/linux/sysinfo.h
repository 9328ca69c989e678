/* What the Linux guest can tell about the shim's devices, read from sysfs,
 * devices and /proc: one function per fact, each filling a line of text.
 * The init prints them on the consoles, the test service answers with them. */
#ifndef VSNAP_LINUX_SYSINFO_H
#define VSNAP_LINUX_SYSINFO_H

#include <stddef.h>
#include <stdint.h>

/* "virtio_blk virtio_net ..." : the driver bound to each virtio device, in
 * device order ("none" for a device without one). */
void sysinfo_virtio_drivers(char *out, size_t size);
/* "bound" if Linux's vmgenid driver bound to an ACPI device, else "not bound". */
void sysinfo_vmgenid(char *out, size_t size);
/* /sys/class/dmi/id/<field>, "" if absent. */
void sysinfo_dmi(const char *field, char *out, size_t size);
/* The sha256 of length bytes at offset of a block device (or file): 0 and
 * hex filled, or -errno. */
int sysinfo_sha256_range(const char *path, uint64_t offset, uint64_t length, char hex[65]);
/* Reads up to size bytes of /dev/hwrng: the count read, or -errno. */
int sysinfo_hwrng(uint8_t *buf, size_t size);
/* Text of a small file without its last newline; "" when unreadable. */
void sysinfo_read_line(const char *path, char *out, size_t size);
/* The value of vsnap.<name>= on the kernel command line, or fallback. */
void sysinfo_cmdline_value(const char *name, const char *fallback, char *out, size_t size);

#endif
