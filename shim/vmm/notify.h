/* The notify port (vsock.notify_port, default 1025): systemd's readiness
 * protocol, so a stock guest needs nothing of ours. systemd (PID 1, 256 or
 * later) reads the credential vmm.notify_socket=vsock-stream:2:<port> from
 * the kernel command line or an SMBIOS OEM string and sends its sd_notify
 * datagrams, "KEY=VALUE" lines, over a vsock stream connection to the host.
 *
 *   READY=1          the guest is ready: the same announcement the agent's
 *                    READY makes (readiness.h), with "source": "notify"
 *   STATUS=text      kept: the last one is vm.info's vsnap.notify.status
 *   STOPPING=1       kept (stopping: true)
 *   EXIT_STATUS=n    kept (exit_status)
 *   WATCHDOG=1       counted (watchdog_count)
 *   X_SYSTEMD_*=v    kept, the last value of each (x_systemd)
 *
 * Anything else that looks like an assignment is counted as a message and
 * otherwise ignored; a line that is not one is counted as ignored. Nothing is
 * ever sent back. A stream has no datagram boundaries: the lines of one
 * delivery (and a last line without "\n" when the connection closes) are
 * taken together, so "READY=1\nSTATUS=..." announces with its STATUS.
 *
 * Generations: 0 from boot; a restore makes it the snapshot's + 1, and a
 * guest that was ready when the snapshot was taken is announced ready again
 * (notify_service_announce_again) as soon as it runs, since systemd announces
 * only once per boot.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/virtio-vsock.h"
#include "vmm/readiness.h"

struct notify_service {
    struct vsock_port_handler handler;
    readiness_announced_func announced;
    void *data;

    GMutex lock; /* the device thread writes, the main thread reads (vm.info, snapshots) */
    char boot_id[17];
    uint64_t generation;
    bool ready;
    char *status;
    bool stopping;
    bool has_exit_status;
    int64_t exit_status;
    uint64_t watchdog_count;
    uint64_t messages;
    uint64_t ignored_lines;
    GTree *x_systemd; /* name -> value */
};

/* Fill s in (a fresh boot: new boot id, generation 0); s->handler is what
 * virtio_vsock_serve_port takes. s must outlive the device. */
void notify_service_init(struct notify_service *s, uint32_t port, readiness_announced_func announced, void *data);
void notify_service_clear(struct notify_service *s);

/* vm.info's vsnap.notify object. */
void notify_service_add_info(struct notify_service *s, JsonBuilder *b);

/* Snapshots: what the guest told so far, as an object for state.json, and
 * back into a restored VM's service. restore returns whether the guest had
 * announced READY=1 (then call notify_service_announce_again once it runs). */
JsonNode *notify_service_save(struct notify_service *s);
bool notify_service_restore(struct notify_service *s, JsonObject *saved);
void notify_service_announce_again(struct notify_service *s);
