/* A tap device for virtio-net: opened by name (created when missing), made by
 * the shim ("vmtap%d"), or taken over from a descriptor that came with an API
 * request. The tap speaks virtio 1.x's 12-byte vnet header (IFF_VNET_HDR,
 * TUNSETVNETHDRSZ) so frames pass between it and the guest's rings without
 * translation, and starts with every offload off (TUNSETOFFLOAD 0): the guest
 * gets whole, checksummed frames until it negotiates more.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/vm-config.h"

#define TAP_VNET_HDR_LEN 12

struct tap {
    int fd;        /* non-blocking, close-on-exec */
    char name[16]; /* the interface's name (TUNGETIFF) */
    bool created;  /* the shim made it (no name and no descriptor given) */
};

/* Open the tap of cfg: fds[0] (a dup of it: the config keeps its own), else
 * the tap named cfg->tap, else a new one; set ip/mask, host_mac and mtu when
 * given, and bring the interface up when the shim opened it by name or made
 * it. Errors name the net's id and the tap. */
bool tap_open(struct tap *tap, const struct net_config *cfg, GError **error);
void tap_close(struct tap *tap);

/* TUNSETOFFLOAD with the TUN_F_* bits (0: none). */
bool tap_set_offload(struct tap *tap, unsigned flags, GError **error);
/* Whether the interface still exists (the kernel detaches a tap's fd when its
 * interface is deleted). */
bool tap_attached(struct tap *tap);
