/* Address-range dispatch for port I/O and MMIO exits.
 *
 * Ranges are registered while the VM is built (single-threaded) and only read
 * afterwards, so lookups on vCPU threads need no lock. The array is kept sorted
 * by base so a lookup is a binary search: Linux probes many ports during boot
 * and every one of them is an exit.
 */
#include "platform/bus.h"

#include <glib.h>
#include <string.h>

void bus_init(struct bus *bus)
{
    memset(bus, 0, sizeof(*bus));
}

void bus_release(struct bus *bus)
{
    g_free(bus->ranges);
    memset(bus, 0, sizeof(*bus));
}

static bool ranges_overlap(uint64_t a_base, uint64_t a_len, uint64_t b_base, uint64_t b_len)
{
    return a_base < b_base + b_len && b_base < a_base + a_len;
}

bool bus_register(struct bus *bus, uint64_t base, uint64_t len, const struct bus_ops *ops,
                  void *opaque, const char *name)
{
    if (len == 0 || base + len < base)
        return false;
    unsigned insert_at = bus->nranges;
    for (unsigned i = 0; i < bus->nranges; i++) {
        const struct bus_range *r = &bus->ranges[i];
        if (ranges_overlap(base, len, r->base, r->len))
            return false;
        if (insert_at == bus->nranges && base < r->base)
            insert_at = i;
    }
    if (bus->nranges == bus->cap) {
        bus->cap = bus->cap ? bus->cap * 2 : 8;
        bus->ranges = g_renew(struct bus_range, bus->ranges, bus->cap);
    }
    memmove(&bus->ranges[insert_at + 1], &bus->ranges[insert_at],
            (bus->nranges - insert_at) * sizeof(struct bus_range));
    bus->ranges[insert_at] = (struct bus_range){
        .base = base, .len = len, .ops = ops, .opaque = opaque, .name = name,
    };
    bus->nranges++;
    return true;
}

/* The range holding all of [addr, addr + len), or NULL. An access that
 * straddles two devices is treated as unmapped: no real device decodes that. */
static const struct bus_range *bus_find(const struct bus *bus, uint64_t addr, unsigned len)
{
    unsigned lo = 0, hi = bus->nranges;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const struct bus_range *r = &bus->ranges[mid];
        if (addr < r->base) {
            hi = mid;
        } else if (addr - r->base >= r->len) {
            lo = mid + 1;
        } else {
            return (addr - r->base) + len <= r->len ? r : NULL;
        }
    }
    return NULL;
}

bool bus_read(const struct bus *bus, uint64_t addr, uint8_t *data, unsigned len)
{
    const struct bus_range *r = bus_find(bus, addr, len);
    if (!r || !r->ops->read) {
        memset(data, 0xff, len);
        return r != NULL;
    }
    r->ops->read(r->opaque, addr - r->base, data, len);
    return true;
}

bool bus_write(const struct bus *bus, uint64_t addr, const uint8_t *data, unsigned len)
{
    const struct bus_range *r = bus_find(bus, addr, len);
    if (!r)
        return false;
    if (r->ops->write)
        r->ops->write(r->opaque, addr - r->base, data, len);
    return true;
}
