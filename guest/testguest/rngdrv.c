#include "rngdrv.h"

#include "io.h"
#include "libc.h"
#include "serial.h"
#include "virtio.h"

#define VIRTIO_ID_RNG 4
#define QUEUE_SIZE 8

static struct vring_desc desc[QUEUE_SIZE] __attribute__((aligned(16)));
static uint16_t avail[2 + QUEUE_SIZE] __attribute__((aligned(2)));
static uint32_t used[1 + 2 * QUEUE_SIZE] __attribute__((aligned(4)));
static uint8_t buffer[RNG_READ_MAX] __attribute__((aligned(4096)));

static struct {
    bool up;
    uint64_t tsc_khz;
    struct virtio_dev dev;
    struct vq q;
} drv;

bool rng_init(const char *cmdline, uint64_t tsc_khz)
{
    drv.tsc_khz = tsc_khz ? tsc_khz : 1000000;
    if (!virtio_find(cmdline, VIRTIO_ID_RNG, &drv.dev))
        return false;
    if (!virtio_negotiate(&drv.dev) ||
        !virtio_setup_queue(&drv.dev, &drv.q, 0, QUEUE_SIZE, desc, avail, (volatile uint16_t *)used)) {
        serial_log("error: the virtio-rng device refused the driver");
        return false;
    }
    virtio_driver_ok(&drv.dev);
    drv.up = true;
    serial_log("virtio-rng found");
    return true;
}

bool rng_present(void)
{
    return drv.up;
}

/* One request for up to len bytes into the buffer; waits for its answer. */
static size_t request(size_t len, uint64_t deadline_tsc, void (*poll)(void))
{
    desc[0] = (struct vring_desc){ .addr = (uint64_t)(uintptr_t)buffer, .len = (uint32_t)len,
                                   .flags = VRING_DESC_F_WRITE };
    vq_publish(&drv.q, 0);
    vq_flush(&drv.dev, &drv.q);
    struct vring_used_elem elem;
    while (!vq_take_used(&drv.q, &elem)) {
        if (rdtsc() > deadline_tsc)
            return SIZE_MAX; /* the buffer is the device's until it answers */
        if (poll)
            poll();
        cpu_relax();
    }
    return elem.len <= len ? elem.len : len;
}

size_t rng_read(uint8_t *out, size_t len, uint64_t timeout_ms, void (*poll)(void))
{
    if (!drv.up || len > RNG_READ_MAX)
        return 0;
    uint64_t deadline = rdtsc() + timeout_ms * drv.tsc_khz;
    size_t got = 0;
    while (got < len && rdtsc() <= deadline) {
        size_t n = request(len - got, deadline, poll);
        if (n == SIZE_MAX) {
            drv.up = false; /* a request is still out: no more use of the queue */
            serial_log("error: virtio-rng did not answer in time");
            break;
        }
        memcpy(out + got, buffer, n);
        got += n;
    }
    return got;
}
