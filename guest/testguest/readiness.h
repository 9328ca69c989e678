/* The readiness client: connect to the host's readiness port, send
 *     READY {"boot_id":"<16 hex>","generation":G,"mono_ns":N,"cid":C}\n
 * and read the ACK. If the connection is reset (the host restarted its side,
 * or a transport reset after a restore), reconnect and announce again with
 * generation + 1.
 */
#pragma once

#include <stdint.h>

struct readiness {
    uint32_t port;
    uint64_t tsc_khz;
    uint64_t boot_id;
    uint64_t generation;
    struct vsock_socket *sock;
    int phase;              /* see readiness.c */
    uint64_t retry_at_tsc;
    uint64_t resets_seen;   /* transport resets already acted on */
    char reply[256];      /* the start of the answer line (longer lines are cut) */
    unsigned reply_len;
    const volatile uint8_t *working_set; /* read back after a transport reset */
    uint64_t working_set_len;
    uint64_t working_set_touch; /* 0: all of it in order; else this much, scattered (readiness.c) */
};

void readiness_start(struct readiness *r, uint32_t port, uint64_t tsc_khz, uint64_t boot_id);
void readiness_poll(struct readiness *r);
