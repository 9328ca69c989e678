/* Where the agent's sockets go. In a guest: AF_VSOCK, the host is CID 2. For
 * the host tests (and for running the agent anywhere without vsock): UNIX
 * sockets named like the hybrid vsock ones, "<prefix>_<port>" to connect to
 * and "<prefix>.listen_<port>" to listen on. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>

struct transport {
    bool use_unix;
    char prefix[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* Start a non-blocking connect; the caller waits for POLLOUT and then calls
 * transport_connect_result. -1 with errno on immediate failure. */
int transport_connect(const struct transport *t, uint32_t port);
/* 0 once connected, else the errno of the failed connect. */
int transport_connect_result(int fd);
int transport_listen(const struct transport *t, uint32_t port);
