/* A run's network interfaces, host side (part of the process module): each
 * interface gets its tap (netdev.c), on its bridge or on the bridge of a
 * port of its libvirt network (network-port.c), before the shim is
 * started; the shim gets the taps' descriptors with vm.create or
 * vm.restore, and the daemon closes its own, so a tap lives exactly as
 * long as the shim that holds it. When the run ends its network ports are
 * released. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "domain/state.h"

struct run_nets {
    int *fds;        /* fds[i]: the tap of live->nets[i], until handed over */
    size_t n;
};

/* Open the tap of every interface of live (a run's copy of the definition)
 * and record what was chosen in it: the tap's name, a network's port and
 * bridge. On failure nothing is left: taps closed, ports released. */
bool process_net_prepare(struct vsnap_driver *drv, struct domain_def *live, struct run_nets *nets,
                         GError **error);
/* Close the daemon's descriptors (the shim holds its own copies by now,
 * or the start failed and the taps go). */
void process_net_close(struct run_nets *nets);
/* After vm.create or vm.restore: interfaces defined with their link down
 * show it to the guest. */
bool process_net_apply_links(const char *api_socket, const struct domain_def *live, GError **error);
/* The run of live is over: release its network ports and remove any tap it
 * named that something left behind. Errors are logged. */
void process_net_release(struct vsnap_driver *drv, const struct domain_def *live);
