/* Split virtqueue helpers (device side). See virtio-queue.h. */
#include "devices/virtio-queue.h"

#include <gio/gio.h>
#include <linux/virtio_ring.h>
#include <string.h>

#include "platform/memory.h"
#include "devices/virtio-host.h"

/* Ring layout (virtio 1.x, 2.7): avail = flags, idx, ring[size];
 * used = flags, idx, {id, len}[size]. All little-endian, as is x86. */
#define AVAIL_RING_OFF 4u
#define USED_RING_OFF 4u
#define USED_ELEM_SIZE 8u

static void *gpa_ptr(const struct virtq *q, uint64_t gpa, uint64_t len)
{
    return guest_memory_ptr(q->host->mem, gpa, len);
}

static uint16_t *avail_idx_ptr(const struct virtq *q)
{
    return gpa_ptr(q, q->avail_gpa + 2, 2);
}

static uint16_t *used_flags_ptr(const struct virtq *q)
{
    return gpa_ptr(q, q->used_gpa, 2);
}

static uint16_t *used_idx_ptr(const struct virtq *q)
{
    return gpa_ptr(q, q->used_gpa + 2, 2);
}

void virtq_reset(struct virtq *q, const struct virtio_host *host)
{
    memset(q, 0, sizeof *q);
    q->host = host;
}

static void mark_dirty(const struct virtq *q, uint64_t gpa, uint64_t len)
{
    q->host->mark_dirty(q->host->opaque, gpa, len);
}

bool virtq_validate(const struct virtq *q, GError **error)
{
    if (q->size == 0 || q->size > VIRTQ_MAX_SIZE || (q->size & (q->size - 1)) != 0) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "queue size %u is not a power of two up to %u", q->size, VIRTQ_MAX_SIZE);
        return false;
    }
    struct {
        const char *name;
        uint64_t gpa, len, align;
    } rings[] = {
        {"descriptor table", q->desc_gpa, 16ull * q->size, 16},
        {"available ring", q->avail_gpa, 6ull + 2ull * q->size, 2},
        {"used ring", q->used_gpa, 6ull + 8ull * q->size, 4},
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(rings); i++) {
        if (rings[i].gpa % rings[i].align != 0 || !gpa_ptr(q, rings[i].gpa, rings[i].len)) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                        "%s at 0x%" G_GINT64_MODIFIER "x is misaligned or not in guest RAM",
                        rings[i].name, rings[i].gpa);
            return false;
        }
    }
    return true;
}

static uint16_t read_avail_idx(const struct virtq *q)
{
    return __atomic_load_n(avail_idx_ptr(q), __ATOMIC_ACQUIRE);
}

bool virtq_has_available(const struct virtq *q)
{
    return q->ready && read_avail_idx(q) != q->last_avail_idx;
}

static bool add_segment(struct virtq_chain *chain, void *host, uint64_t gpa, uint32_t len,
                        bool writable, GError **error)
{
    if (writable) {
        if (chain->nwrite == VIRTQ_MAX_CHAIN)
            goto too_long;
        chain->write[chain->nwrite].iov_base = host;
        chain->write[chain->nwrite].iov_len = len;
        chain->write_gpa[chain->nwrite++] = gpa;
        chain->write_len += len;
    } else {
        if (chain->nwrite > 0) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                        "device-readable descriptor after a writable one");
            return false;
        }
        if (chain->nread == VIRTQ_MAX_CHAIN)
            goto too_long;
        chain->read[chain->nread].iov_base = host;
        chain->read[chain->nread++].iov_len = len;
        chain->read_len += len;
    }
    return true;
too_long:
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                "descriptor chain longer than %u entries", VIRTQ_MAX_CHAIN);
    return false;
}

static void note_tail(struct virtq_chain *chain, const struct vring_desc *desc)
{
    chain->has_tail = true;
    chain->tail_writable = desc->flags & VRING_DESC_F_WRITE;
    chain->tail_gpa = desc->addr;
    chain->tail_len = desc->len;
}

/* Walk the chain starting at head. Indirect descriptors are not offered
 * (VIRTIO_RING_F_INDIRECT_DESC is not negotiated), so they are refused. A bad
 * buffer does not end the walk: the rest is still followed (collecting
 * nothing) so the chain's tail is known. */
static bool walk_chain(const struct virtq *q, uint16_t head, struct virtq_chain *chain,
                       GError **error)
{
    const struct vring_desc *table = gpa_ptr(q, q->desc_gpa, 16ull * q->size);
    uint16_t index = head;
    bool ok = true;
    for (unsigned n = 0;; n++) {
        if (index >= q->size || n >= q->size) {
            chain->has_tail = false;
            if (ok)
                g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                            "descriptor index %u out of range or chain loops", index);
            return false;
        }
        struct vring_desc desc = table[index];
        if (desc.flags & VRING_DESC_F_INDIRECT) {
            chain->has_tail = false;
            if (ok)
                g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                            "indirect descriptors were not negotiated");
            return false;
        }
        note_tail(chain, &desc);
        void *host = desc.len ? gpa_ptr(q, desc.addr, desc.len) : NULL;
        if (ok && desc.len && !host) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                        "buffer 0x%" G_GINT64_MODIFIER "x+%u is not in guest RAM",
                        (uint64_t)desc.addr, desc.len);
            ok = false;
        }
        if (ok && desc.len && !add_segment(chain, host, desc.addr, desc.len,
                                           desc.flags & VRING_DESC_F_WRITE, error))
            ok = false;
        if (!(desc.flags & VRING_DESC_F_NEXT))
            return ok;
        index = desc.next;
    }
}

int virtq_pop(struct virtq *q, struct virtq_chain *chain, GError **error)
{
    if (!virtq_has_available(q))
        return 0;
    const uint16_t *ring = gpa_ptr(q, q->avail_gpa + AVAIL_RING_OFF, 2ull * q->size);
    uint16_t head = ring[q->last_avail_idx % q->size];
    q->last_avail_idx++;
    chain->head = head;
    chain->nread = chain->nwrite = 0;
    chain->read_len = chain->write_len = 0;
    chain->has_tail = false;
    if (head >= q->size) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                    "available ring names descriptor %u of a %u-entry queue", head, q->size);
        return -1; /* chain->head stays out of range: virtq_push ignores it */
    }
    return walk_chain(q, head, chain, error) ? 1 : -1;
}

bool virtq_chain_write_tail_byte(struct virtq *q, const struct virtq_chain *chain, uint8_t value)
{
    if (!chain->has_tail || !chain->tail_writable || chain->tail_len == 0)
        return false;
    uint64_t gpa = chain->tail_gpa + chain->tail_len - 1;
    if (gpa < chain->tail_gpa)
        return false; /* the descriptor wraps around the address space */
    uint8_t *byte = gpa_ptr(q, gpa, 1);
    if (!byte)
        return false;
    *byte = value;
    mark_dirty(q, gpa, 1);
    return true;
}

void virtq_unpop(struct virtq *q)
{
    q->last_avail_idx--;
}

void virtq_push(struct virtq *q, uint16_t head, uint32_t written)
{
    if (head >= q->size)
        return;
    uint64_t elem_gpa = q->used_gpa + USED_RING_OFF + USED_ELEM_SIZE * (q->used_idx % q->size);
    struct vring_used_elem *elem = gpa_ptr(q, elem_gpa, USED_ELEM_SIZE);
    elem->id = head;
    elem->len = written;
    mark_dirty(q, elem_gpa, USED_ELEM_SIZE);
    q->used_idx++;
    /* The element must be visible before the index that publishes it. */
    __atomic_store_n(used_idx_ptr(q), q->used_idx, __ATOMIC_RELEASE);
    mark_dirty(q, q->used_gpa + 2, 2);
}

bool virtq_interrupt_suppressed(const struct virtq *q)
{
    const uint16_t *flags = gpa_ptr(q, q->avail_gpa, 2);
    return __atomic_load_n(flags, __ATOMIC_ACQUIRE) & VRING_AVAIL_F_NO_INTERRUPT;
}

void virtq_set_notify_wanted(struct virtq *q, bool wanted)
{
    uint16_t *flags = used_flags_ptr(q);
    uint16_t value = wanted ? 0 : VRING_USED_F_NO_NOTIFY;
    if (__atomic_load_n(flags, __ATOMIC_RELAXED) == value)
        return;
    __atomic_store_n(flags, value, __ATOMIC_SEQ_CST);
    mark_dirty(q, q->used_gpa, 2);
}

/* The pieces of segs covering [offset, offset + max), as a new iovec. */
static unsigned iov_slice(const struct iovec *segs, unsigned nsegs, size_t offset, size_t max,
                          struct iovec *out)
{
    unsigned n = 0;
    for (unsigned i = 0; i < nsegs && max > 0; i++) {
        if (offset >= segs[i].iov_len) {
            offset -= segs[i].iov_len;
            continue;
        }
        size_t piece = MIN(segs[i].iov_len - offset, max);
        out[n].iov_base = (uint8_t *)segs[i].iov_base + offset;
        out[n++].iov_len = piece;
        max -= piece;
        offset = 0;
    }
    return n;
}

unsigned virtq_chain_write_iov(const struct virtq_chain *chain, size_t offset, size_t max,
                               struct iovec *iov)
{
    return iov_slice(chain->write, chain->nwrite, offset, max, iov);
}

unsigned virtq_chain_read_iov(const struct virtq_chain *chain, size_t offset, size_t max,
                              struct iovec *iov)
{
    return iov_slice(chain->read, chain->nread, offset, max, iov);
}

size_t virtq_chain_read(const struct virtq_chain *chain, size_t offset, void *dst, size_t len)
{
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned n = virtq_chain_read_iov(chain, offset, len, iov);
    size_t done = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy((uint8_t *)dst + done, iov[i].iov_base, iov[i].iov_len);
        done += iov[i].iov_len;
    }
    return done;
}

void virtq_chain_mark_written(struct virtq *q, const struct virtq_chain *chain, size_t offset,
                              size_t len)
{
    for (unsigned i = 0; i < chain->nwrite && len > 0; i++) {
        size_t seg = chain->write[i].iov_len;
        if (offset >= seg) {
            offset -= seg;
            continue;
        }
        size_t piece = MIN(seg - offset, len);
        mark_dirty(q, chain->write_gpa[i] + offset, piece);
        len -= piece;
        offset = 0;
    }
}

size_t virtq_chain_write(struct virtq *q, const struct virtq_chain *chain, size_t offset,
                         const void *src, size_t len)
{
    struct iovec iov[VIRTQ_MAX_CHAIN];
    unsigned n = virtq_chain_write_iov(chain, offset, len, iov);
    size_t done = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(iov[i].iov_base, (const uint8_t *)src + done, iov[i].iov_len);
        done += iov[i].iov_len;
    }
    virtq_chain_mark_written(q, chain, offset, done);
    return done;
}
