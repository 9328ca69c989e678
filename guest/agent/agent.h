/* vsnap-agent's state, shared by main.c (options, event loop), readiness.c
 * (announcing READY) and commands.c (the command port). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "protocol.h"
#include "transport.h"

#define MAX_CLIENTS 16
#define RETRY_FIRST_MS 50
#define RETRY_MAX_MS 1000

struct options {
    uint32_t ready_port, cmd_port;
    struct transport transport;
    bool set_clock;
};

enum ready_state { READY_IDLE, READY_CONNECTING, READY_WAIT_ACK, READY_ACKED };

struct readiness {
    enum ready_state state;
    int fd;
    uint64_t generation;
    uint64_t retry_at_ms;
    unsigned retry_ms;
    struct line_reader reader;
};

struct client {
    int fd;
    struct line_reader reader;
};

struct agent {
    struct options opts;
    char boot_id[64];
    bool is_pid1;
    int signal_fd, listen_fd;
    struct readiness ready;
    struct client clients[MAX_CLIENTS];
};

/* readiness.c: called from the loop on the readiness socket's events. */
void readiness_connect(struct agent *a);
void readiness_announce(struct agent *a); /* the connect completed (or failed) */
void readiness_read(struct agent *a);

/* commands.c */
void commands_accept(struct agent *a);
void commands_serve(struct client *c);
