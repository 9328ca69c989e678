/* Polled virtio-console driver (see consoledrv.h; virtio spec 5.3). */
#include "consoledrv.h"

#include <stdint.h>

#include "io.h"
#include "libc.h"
#include "virtio.h"

#define VIRTIO_ID_CONSOLE 3u
#define QUEUE_TX 1 /* transmitq of port 0 */
#define TX_QUEUE_SIZE 16
#define CONSOLE_CHUNK 256
/* How long to wait for a free buffer: the device thread returns them within
 * microseconds; a VMM that stopped serving must not hang the guest. */
#define FREE_SLOT_SPINS 10000000u

static struct {
    bool up;
    struct virtio_dev dev;
    struct vq tx;
    uint16_t free[TX_QUEUE_SIZE];
    unsigned nfree;
} drv;

static struct vring_desc tx_desc[TX_QUEUE_SIZE] __attribute__((aligned(16)));
static uint16_t tx_avail[2 + TX_QUEUE_SIZE] __attribute__((aligned(2)));
static uint32_t tx_used[1 + 2 * TX_QUEUE_SIZE] __attribute__((aligned(4)));
static char tx_buffers[TX_QUEUE_SIZE][CONSOLE_CHUNK];

/* "word" as a whole space-separated word of cmdline. */
static bool has_word(const char *cmdline, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = cmdline; *p; p++) {
        if (p != cmdline && p[-1] != ' ')
            continue;
        size_t i = 0;
        while (i < n && p[i] == word[i])
            i++;
        if (i == n && (p[n] == ' ' || p[n] == '\0'))
            return true;
    }
    return false;
}

bool console_init(const char *cmdline)
{
    if (!has_word(cmdline, "vsnap.hvc=1") || !virtio_find(cmdline, VIRTIO_ID_CONSOLE, &drv.dev) ||
        !virtio_negotiate(&drv.dev) ||
        !virtio_setup_queue(&drv.dev, &drv.tx, QUEUE_TX, TX_QUEUE_SIZE, tx_desc, tx_avail,
                            (volatile uint16_t *)tx_used))
        return false;
    for (uint16_t i = 0; i < TX_QUEUE_SIZE; i++)
        drv.free[i] = i;
    drv.nfree = TX_QUEUE_SIZE;
    virtio_driver_ok(&drv.dev);
    drv.up = true;
    return true;
}

bool console_active(void)
{
    return drv.up;
}

static void reclaim(void)
{
    struct vring_used_elem elem;
    while (vq_take_used(&drv.tx, &elem))
        if (elem.id < TX_QUEUE_SIZE)
            drv.free[drv.nfree++] = (uint16_t)elem.id;
}

static bool take_slot(uint16_t *slot)
{
    for (uint32_t spin = 0; drv.nfree == 0 && spin < FREE_SLOT_SPINS; spin++) {
        if (spin == 0)
            vq_flush(&drv.dev, &drv.tx); /* the device may not know of the full ring yet */
        reclaim();
        cpu_relax();
    }
    if (drv.nfree == 0)
        return false;
    *slot = drv.free[--drv.nfree];
    return true;
}

void console_write(const char *bytes, size_t len)
{
    if (!drv.up)
        return;
    reclaim();
    while (len > 0) {
        uint16_t slot;
        if (!take_slot(&slot))
            break;
        size_t n = len < CONSOLE_CHUNK ? len : CONSOLE_CHUNK;
        memcpy(tx_buffers[slot], bytes, n);
        tx_desc[slot].addr = (uintptr_t)tx_buffers[slot];
        tx_desc[slot].len = (uint32_t)n;
        tx_desc[slot].flags = 0;
        tx_desc[slot].next = 0;
        vq_publish(&drv.tx, slot);
        bytes += n;
        len -= n;
    }
    vq_flush(&drv.dev, &drv.tx);
}
