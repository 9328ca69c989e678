/* A polled virtio-vsock driver for the test guest (stream sockets only).
 *
 * Single-threaded and non-blocking: call vsock_poll() often; it takes what the
 * device delivered, answers the protocol (RESPONSE, RST, credit updates) and
 * rings the doorbells once per call. Sockets are small slots with a receive
 * ring each; vsock_send/vsock_recv move bytes and never wait.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VSOCK_MAX_SOCKETS 40
#define VSOCK_HOST_CID 2u

enum vsock_state {
    VS_FREE,
    VS_CONNECTING,  /* REQUEST sent */
    VS_ESTABLISHED,
    VS_CLOSING,     /* SHUTDOWN(both) sent, waiting for RST */
    VS_RESET,       /* peer reset or refused: owner must vsock_release() */
};

struct vsock_socket; /* opaque: use the functions below */

/* Find and start the device. false (with a serial line saying why) if there
 * is none or it refuses. */
bool vsock_init(const char *cmdline, uint64_t tsc_khz);
uint64_t vsock_guest_cid(void);

/* Take everything the device delivered, answer the protocol, flush doorbells.
 * Returns the number of packets received (0: nothing happened). */
unsigned vsock_poll(void);

/* Accept connections to port; at most one listener per port. */
bool vsock_listen(uint32_t port);
/* A newly established incoming connection on port, or NULL. */
struct vsock_socket *vsock_accept(uint32_t port);

/* Connect to the host (CID 2). NULL if no slot is free. */
struct vsock_socket *vsock_connect(uint32_t port);

enum vsock_state vsock_socket_state(const struct vsock_socket *s);
/* Bytes queued for sending (bounded by the peer's credit and free TX
 * buffers); 0 if none can go now. */
size_t vsock_send(struct vsock_socket *s, const void *data, size_t len);
/* Bytes copied out of the receive ring. */
size_t vsock_recv(struct vsock_socket *s, void *data, size_t len);
/* Received bytes waiting. */
size_t vsock_readable(const struct vsock_socket *s);
/* The peer will send no more, and everything it sent was read. */
bool vsock_eof(const struct vsock_socket *s);
/* The peer will read no more (it shut down its receiving side). */
bool vsock_peer_stopped_reading(const struct vsock_socket *s);
/* Stop sending (SHUTDOWN SEND) but keep receiving. */
void vsock_shutdown_send(struct vsock_socket *s);
/* Orderly close; the slot frees itself once the peer confirms (or after a
 * timeout). The pointer must not be used afterwards. */
void vsock_close(struct vsock_socket *s);
/* Give back a VS_RESET socket. */
void vsock_release(struct vsock_socket *s);

/* For the device's robustness test: publish a batch of malformed packets
 * (short header, unknown connection, wrong type, length beyond the buffer,
 * spoofed CID, unknown op, buffer outside RAM). Returns how many. */
unsigned vsock_send_malformed(void);

/* Number of VIRTIO_VSOCK_EVENT_TRANSPORT_RESET events seen so far. */
uint64_t vsock_transport_resets(void);
