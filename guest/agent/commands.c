/* The command port: host-initiated connections, one line in, one line out. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"

void commands_accept(struct agent *a)
{
    for (;;) {
        int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct client *free_slot = NULL;
        for (unsigned i = 0; i < MAX_CLIENTS && !free_slot; i++)
            if (a->clients[i].fd < 0)
                free_slot = &a->clients[i];
        if (!free_slot) {
            static const char busy[] = "ERR too many connections\n";
            send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            close(fd);
            continue;
        }
        free_slot->fd = fd;
        line_reader_reset(&free_slot->reader);
    }
}

void commands_serve(struct client *c)
{
    char buf[512];
    ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    for (size_t off = 0; n > 0 && off < (size_t)n;) {
        bool done;
        off += line_reader_feed(&c->reader, buf + off, (size_t)n - off, &done);
        if (!done)
            continue;
        char reply[128];
        if (c->reader.overflow)
            snprintf(reply, sizeof reply, "ERR line too long\n");
        else
            agent_command_reply(c->reader.buf, reply, sizeof reply);
        line_reader_reset(&c->reader);
        /* Replies are short and the client reads them: a blocking-free send of
         * a few bytes only fails if it has gone. */
        if (send(c->fd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
            n = 0;
    }
    if (n <= 0) {
        close(c->fd);
        c->fd = -1;
    }
}
