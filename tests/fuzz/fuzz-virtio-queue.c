/* Split virtqueues (shim/devices/include/devices/virtio-queue.h) against whatever a guest
 * puts in its RAM: the queue's size, ring addresses and device indices as
 * the transport would set them, RAM a heap buffer (so AddressSanitizer sees
 * an access outside it) filled from the input, then every chain popped,
 * read, written and handed back as the devices do.
 *
 * Input: a 16-byte struct queue_setup, then guest RAM from address 0.
 * Checks: every buffer of a chain lies inside RAM and adds up to the
 * chain's lengths; nothing is marked dirty outside RAM; writes stay within
 * the writable part; a chain put back pops again the same. */
#include <string.h>

#include "fuzz-common.h"
#include "platform/memory.h"
#include "devices/virtio-host.h"
#include "devices/virtio-queue.h"

#define RAM_SIZE (64u * 1024)

struct queue_setup {
    uint16_t size;
    uint16_t desc;     /* ring addresses, in units of 2 bytes */
    uint16_t avail;
    uint16_t used;
    uint16_t last_avail_idx;
    uint16_t used_idx;
    uint16_t flags;    /* bit 0: unpop the first chain and pop it again */
    uint16_t write_len;
};

static struct guest_memory ram;
static struct virtio_host host;
static uint8_t scratch[RAM_SIZE];

static void on_dirty(void *opaque, uint64_t gpa, uint64_t len)
{
    if (gpa > RAM_SIZE || len > RAM_SIZE - gpa)
        g_error("marked 0x%" G_GINT64_MODIFIER "x+%" G_GUINT64_FORMAT " dirty: outside RAM", gpa, len);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    ram.host = g_malloc0(RAM_SIZE);
    ram.size = RAM_SIZE;
    ram.fd = -1;
    ram.nregions = 1;
    ram.regions[0] = (struct guest_region){.gpa = 0, .size = RAM_SIZE, .ram_offset = 0};
    host = (struct virtio_host){.mem = &ram, .mark_dirty = on_dirty};
    return 0;
}

static bool in_ram(const void *p, size_t len)
{
    const uint8_t *b = p;
    return b >= ram.host && b <= ram.host + RAM_SIZE && len <= (size_t)(ram.host + RAM_SIZE - b);
}

static void check_segments(const struct iovec *iov, unsigned n, size_t total, const char *what)
{
    size_t sum = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!in_ram(iov[i].iov_base, iov[i].iov_len))
            g_error("%s segment %u is outside guest RAM", what, i);
        sum += iov[i].iov_len;
    }
    if (sum != total)
        g_error("%s segments add up to %zu, the chain says %zu", what, sum, total);
}

/* Use a chain as a device does: read it all, write into it, slice it. */
static uint32_t use_chain(struct virtq *q, const struct virtq_chain *c, size_t write_len)
{
    check_segments(c->read, c->nread, c->read_len, "readable");
    check_segments(c->write, c->nwrite, c->write_len, "writable");
    size_t got = virtq_chain_read(c, 0, scratch, MIN(c->read_len, sizeof scratch));
    if (got != MIN(c->read_len, sizeof scratch))
        g_error("read %zu of %zu readable bytes", got, c->read_len);
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned n = virtq_chain_read_iov(c, c->read_len / 3, c->read_len, iov);
    check_segments(iov, n, c->read_len - c->read_len / 3, "readable slice");
    size_t want = MIN(write_len, sizeof scratch);
    memset(scratch, 0xa5, want);
    size_t wrote = virtq_chain_write(q, c, 1, scratch, want);
    if (wrote > c->write_len || (c->write_len >= 1 && wrote != MIN(want, c->write_len - 1)))
        g_error("wrote %zu bytes at offset 1 of a %zu-byte writable part (asked %zu)", wrote,
                c->write_len, want);
    n = virtq_chain_write_iov(c, 0, c->write_len, iov);
    check_segments(iov, n, c->write_len, "writable slice");
    return (uint32_t)(wrote ? wrote + 1 : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct queue_setup s = {0};
    memcpy(&s, data, MIN(size, sizeof s));
    size_t image = size > sizeof s ? MIN(size - sizeof s, (size_t)RAM_SIZE) : 0;
    memset(ram.host, 0, RAM_SIZE);
    memcpy(ram.host, data + sizeof s, image);

    struct virtq q;
    virtq_reset(&q, &host);
    q.size = s.size;
    q.desc_gpa = 2ull * s.desc;
    q.avail_gpa = 2ull * s.avail;
    q.used_gpa = 2ull * s.used;
    q.last_avail_idx = s.last_avail_idx;
    q.used_idx = s.used_idx;
    g_autoptr(GError) error = NULL;
    if (!virtq_validate(&q, &error))
        return 0;
    q.ready = true;
    virtq_set_notify_wanted(&q, false);
    (void)virtq_interrupt_suppressed(&q);

    struct virtq_chain chain, again;
    bool unpop = s.flags & 1;
    for (unsigned round = 0; round < 2u * q.size; round++) {
        g_clear_error(&error);
        int r = virtq_pop(&q, &chain, &error);
        if (r == 0)
            break;
        if (r > 0 && unpop) {
            unpop = false;
            virtq_unpop(&q);
            g_clear_error(&error);
            if (virtq_pop(&q, &again, &error) != 1 || again.head != chain.head ||
                again.nread != chain.nread || again.nwrite != chain.nwrite)
                g_error("a chain put back pops again differently");
        }
        uint32_t written = r > 0 ? use_chain(&q, &chain, s.write_len) : 0;
        virtq_push(&q, chain.head, written);
    }
    virtq_set_notify_wanted(&q, true);
    return 0;
}
