/* One watcher thread per running domain: reads the shim's event monitor
 * FIFO (one JSON object per line, the format shim/vmm/include/vmm/events.h documents;
 * other events are ignored) and watches the shim's pidfd. It turns
 * what the shim reports into domain state and libvirt events:
 *   guest/ready   -> readiness, agent-lifecycle "connected"
 *   vm/shutdown   -> the guest powered off (or crashed): stop the shim per
 *                    on_poweroff / on_crash, shut off (shutdown / crashed)
 *   vm/rebooted   -> reboot event (on_reboot=destroy stops the domain)
 *   shim exit     -> shut off, reason crashed, unless a stop was expected */
#pragma once

#include "domain/state.h"

struct domain_run;

void shim_events_watch(struct vsnap_driver *drv, struct vsnap_domain *dom,
                       struct domain_run *run);
