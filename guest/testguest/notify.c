#include "notify.h"

#include <stdbool.h>
#include <stddef.h>

#include "libc.h"
#include "serial.h"
#include "vsockdrv.h"

#define MAX_WRITES 6

/* One connection's job: its writes in order, then close. */
struct job {
    const char *writes[MAX_WRITES];
    unsigned nwrites;
    const char *name;
};

static const struct job ready_job = {
    { "READY=1\nSTATUS=vsnap-testguest ready\n" }, 1, "ready",
};
static const struct job several_job = {
    { "STATUS=vsnap-testguest serving\n", "WATCHDOG=1\n", "WATCHDOG=1\n",
      "X_SYSTEMD_UNIT_ACTIVE=vsnap-testguest.target\n", "this is not an assignment\n", "lower=case\n" },
    6, "several",
};
static const struct job stopping_job = {
    { "STOPPING=1\nSTATUS=vsnap-testguest stopping\n", "EXIT_STATUS=3" }, 2, "stopping",
};

#define QUEUE_MAX 4

static struct {
    uint32_t port;
    const struct job *queue[QUEUE_MAX];
    unsigned queued;
    struct vsock_socket *sock; /* the current job's connection */
    unsigned written;          /* writes of queue[0] done */
} client;

static void enqueue(const struct job *job)
{
    if (client.queued == QUEUE_MAX) {
        serial_log("error: notify queue full");
        return;
    }
    client.queue[client.queued++] = job;
}

static void finish_job(bool ok)
{
    const struct job *job = client.queue[0];
    serial_puts(ok ? "vsnap-testguest: notify sent " : "vsnap-testguest: error: notify connection lost: ");
    serial_puts(job->name);
    serial_puts("\n");
    for (unsigned i = 1; i < client.queued; i++)
        client.queue[i - 1] = client.queue[i];
    client.queued--;
    client.sock = NULL;
    client.written = 0;
}

void notify_start(uint32_t port)
{
    client.port = port;
    enqueue(&ready_job);
    enqueue(&several_job);
    notify_poll();
}

void notify_stopping(void)
{
    enqueue(&stopping_job);
}

/* Each write goes out whole in its own packet: a fresh connection has the
 * host's full credit, and these are short. */
static void write_next(const struct job *job)
{
    const char *text = job->writes[client.written];
    size_t len = strlen(text);
    if (vsock_send(client.sock, text, len) != len)
        return; /* no TX buffer now: the next poll tries again */
    client.written++;
    vsock_poll(); /* one write, one packet */
}

void notify_poll(void)
{
    if (client.queued == 0)
        return;
    const struct job *job = client.queue[0];
    if (!client.sock) {
        client.sock = vsock_connect(client.port);
        return;
    }
    enum vsock_state state = vsock_socket_state(client.sock);
    if (state == VS_RESET) {
        vsock_release(client.sock);
        finish_job(false);
        return;
    }
    if (state != VS_ESTABLISHED)
        return;
    if (client.written < job->nwrites)
        write_next(job);
    if (client.written == job->nwrites) {
        vsock_close(client.sock);
        finish_job(true);
    }
}
