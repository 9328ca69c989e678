/* One connected libvirt client: its identity, its access and everything
 * written to its socket. The bottom of the RPC layer: every file above
 * (server, dispatch, procedures, event registry, streams) sends through it,
 * and it calls none of them.
 *
 * Threads: the main loop reads packets; calls run on worker threads; events
 * are sent from whichever thread produced them. Everything written to the
 * socket goes through rpc_client_send(), which holds `lock` for the whole
 * packet so packets never interleave. */
#pragma once

#include <glib.h>
#include <rpc/xdr.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/caller.h"
#include "rpc/wire.h"

struct rpc_server;

struct rpc_client {
    gint refs;
    unsigned id;
    struct rpc_server *server;
    int fd;
    bool readonly_socket;    /* accepted on -sock-ro */
    uid_t uid;               /* SO_PEERCRED */
    pid_t pid;
    struct caller peer;      /* SO_PEERCRED + SO_PEERGROUPS, as opened files see it */

    GMutex lock;             /* protects the fields below and socket writes */
    bool closed;
    bool readonly;           /* read-only socket or VIR_CONNECT_RO */

    /* Atomic, not under lock: the main loop reads them for every packet,
     * while a worker may hold lock for a whole send to a slow client. */
    gint opened;             /* CONNECT_OPEN succeeded */
    gint calls_in_flight;    /* queued or running calls */

    /* Reading state: main loop only. */
    GSource *source;         /* NULL while reading_paused */
    bool reading_paused;     /* calls_in_flight reached the limit */
    uint8_t head[RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE];   /* length word + header */
    size_t head_have;
    struct wire_header hdr;  /* decoded once head is complete */
    uint8_t *body;           /* grows as the body arrives */
    size_t body_len, body_have, body_cap;
    size_t charged;          /* bytes of body counted against the read-only clients' share */
};

/* Accepted on fd (taken) from peer uid/pid; one reference. */
struct rpc_client *rpc_client_new(struct rpc_server *server, int fd, bool readonly_socket,
                                  uid_t uid, pid_t pid);
struct rpc_client *rpc_client_ref(struct rpc_client *client);
void rpc_client_unref(struct rpc_client *client);

/* Encode and send one packet; false when the client is gone or too slow
 * (it is then closed). body may be NULL for an empty body. */
bool rpc_client_send(struct rpc_client *client, const struct wire_header *hdr,
                     xdrproc_t body_filter, void *body);

/* Send one packet whose body is raw bytes (stream data). */
bool rpc_client_send_raw(struct rpc_client *client, const struct wire_header *hdr,
                         const void *data, size_t len);

/* No more sends; the main loop sees EOF and removes the client. The fd is
 * closed with the last reference, so no thread writes to a reused fd. */
void rpc_client_close(struct rpc_client *client);

/* An error reply to the call whose header is call_hdr: code is a
 * virErrorNumber, domain a VIR_FROM_*; the message gets libvirt's text for
 * the code in front, as virsh users know it. */
bool rpc_send_error_reply(struct rpc_client *client, const struct wire_header *call_hdr,
                          int code, int domain, const char *message);

/* The peer's gid and supplementary groups (SO_PEERCRED, SO_PEERGROUPS). */
void rpc_client_set_peer_groups(struct rpc_client *client, gid_t gid, const gid_t *groups,
                                int ngroups);
/* Whose credentials a file the client names is opened with: the daemon's
 * for clients of the read-write socket (its owner), else the peer's own. */
const struct caller *rpc_client_caller(struct rpc_client *client);

/* Mark the client read-only / opened (used by CONNECT_OPEN). */
void rpc_client_set_opened(struct rpc_client *client, bool readonly);
bool rpc_client_is_readonly(struct rpc_client *client);
bool rpc_client_is_opened(struct rpc_client *client);
