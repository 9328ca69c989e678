/* Control of a running domain from outside the guest: virsh reset,
 * inject-nmi and send-key. Each takes the domain's job, needs it running or
 * paused (VIR_ERR_OPERATION_INVALID when it is shut off) and asks the shim. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct vsnap_driver;
struct vsnap_domain;

/* A hard reset (vm.reboot: a microVM has no firmware at the reset vector, so
 * a reset is the same fresh VM a guest's reboot gets; the reboot event and
 * on_reboot follow as for one). A paused domain stays paused. */
bool driver_reset(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags, GError **error);
/* An NMI on vCPU 0 (vm.nmi). */
bool driver_inject_nmi(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags, GError **error);
/* n (1 to VIR_DOMAIN_SEND_KEY_MAX_KEYS) keys of codeset (virKeycodeSet)
 * pressed in order, held holdtime ms (0: 100 ms, what libvirt's QEMU driver
 * gets from QEMU then), released in reverse order (keycodes.h). */
bool driver_send_key(struct vsnap_driver *drv, struct vsnap_domain *dom, int codeset, unsigned holdtime_ms,
                     const uint32_t *codes, unsigned n, unsigned flags, GError **error);
