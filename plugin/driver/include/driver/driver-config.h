/* Changes to a definition that are not devices: virsh desc and metadata
 * (title, description, other namespaces' <metadata> elements) and virsh
 * setvcpus. Each takes the domain's job and honours VIR_DOMAIN_AFFECT_LIVE
 * and _CONFIG as libvirt's QEMU driver does (0: the live definition of a
 * running domain, else the persistent one). The persistent definition is
 * written to disk (it survives a daemon restart) and the live one to the
 * run's domain.xml; a snapshot's copy of the definition is taken from the
 * live one, so it keeps what was set. */
#pragma once

#include <glib.h>
#include <stdbool.h>

struct vsnap_driver;
struct vsnap_domain;

char *driver_get_metadata(struct vsnap_driver *drv, struct vsnap_domain *dom, int type, const char *uri,
                          unsigned flags, GError **error);
bool driver_set_metadata(struct vsnap_driver *drv, struct vsnap_domain *dom, int type, const char *metadata,
                         const char *key, const char *uri, unsigned flags, GError **error);
/* --config (VIR_DOMAIN_AFFECT_CONFIG, with or without VIR_DOMAIN_VCPU_MAXIMUM:
 * vsnap's <vcpu> is both) sets the vCPUs of the next boot; --live is refused,
 * VIR_ERR_OPERATION_UNSUPPORTED: virtio-mmio microVMs have no CPU hotplug. */
bool driver_set_vcpus(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned nvcpus, unsigned flags,
                      GError **error);
