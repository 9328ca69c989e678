/* Data streams of the RPC protocol (VIR_NET_STREAM packets), used for
 * domain consoles: the call that opens the stream is answered, then both
 * sides send STREAM packets with the call's procedure and serial. Data
 * travels with status CONTINUE, and an empty CONTINUE packet is end of
 * file; the client then finishes (OK) or aborts (ERROR), which we confirm
 * with an empty OK packet. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "rpc/client.h"

struct rpc_server;
struct stream_registry;

struct stream_registry *stream_registry_new(void);
void stream_registry_free(struct stream_registry *reg);

/* The console of this domain already has a stream: true. With force, that
 * stream is ended (its client sees end of file) and false is returned. */
bool stream_registry_console_busy(struct stream_registry *reg, const unsigned char uuid[16],
                                  bool force);

/* Start relaying between fd (taken) and the client, for the call hdr. */
void stream_start(struct stream_registry *reg, struct rpc_client *client,
                  const struct wire_header *hdr, int fd, const unsigned char uuid[16]);

/* A STREAM packet from a client (main loop). */
void stream_handle_packet(struct stream_registry *reg, struct rpc_client *client,
                          const struct wire_header *hdr, const uint8_t *body, size_t len);

/* The client is gone: end its streams. */
void stream_registry_remove_client(struct stream_registry *reg, struct rpc_client *client);
