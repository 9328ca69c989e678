/* The readiness port (vsock.readiness_port, default 1024): the guest agent
 * announces that the guest is ready, and the VMM hears it at once. vmm.c
 * installs it on the VM's vsock device as a port handler; the protocol is in
 * readiness.c.
 */
#pragma once

#include <stdint.h>

#include "devices/virtio-vsock.h"

/* Called on the vsock device thread for each valid announcement, with the
 * "vsnap" readiness object for vm.info and wait-ready:
 * {"ready":true,"generation":G,"boot_id":"...","ready_ns":T,"port":P,"source":"agent","guest":{...}}
 * (the notify port, notify.h, announces with "source": "notify"). */
typedef void (*readiness_announced_func)(void *data, const char *info_json);

/* The most an info_json can hold: a READY line is at most 4 KiB, and writing
 * it out again with the host's members added makes it only a little longer. */
#define READINESS_INFO_MAX_BYTES (64u << 10)

struct readiness_service {
    struct vsock_port_handler handler;
    readiness_announced_func announced;
    void *data;
};

/* Fill s in; s->handler is then what virtio_vsock_serve_port takes. s must
 * outlive the device it is installed on. */
void readiness_service_init(struct readiness_service *s, uint32_t port, readiness_announced_func announced,
                            void *data);
