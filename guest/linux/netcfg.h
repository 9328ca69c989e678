/* The guest's network address, set with the kernel's own ioctls (no ip or
 * ifconfig program: every exec costs the guest half a second on kvm_pvm). */
#ifndef VSNAP_LINUX_NETCFG_H
#define VSNAP_LINUX_NETCFG_H

#include <stddef.h>

/* Brings lo up, and iface up with "a.b.c.d/prefix": 0 or -errno. */
int netcfg_up(const char *iface, const char *address);
/* "a.b.c.d/prefix aa:bb:cc:dd:ee:ff" of iface, or "none" when it has no address. */
void netcfg_describe(const char *iface, char *out, size_t size);

#endif
