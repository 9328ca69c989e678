/* VM Generation ID (see vmgenid.h). */
#include "devices/vmgenid.h"

#include <errno.h>
#include <gio/gio.h>
#include <string.h>
#include <sys/random.h>

#include "platform/layout.h"
#include "platform/memory.h"
#include "json/vjson.h"

#define VMGENID_SIZE 16

struct vmgenid {
    struct vmgenid_host host;
    uint8_t id[VMGENID_SIZE];
    uint64_t generations; /* ids written since this VM was built */
};

struct vmgenid *vmgenid_new(const struct vmgenid_host *host)
{
    struct vmgenid *dev = g_new0(struct vmgenid, 1);
    dev->host = *host;
    return dev;
}

void vmgenid_free(struct vmgenid *dev)
{
    g_free(dev);
}

bool vmgenid_new_generation(struct vmgenid *dev, bool notify_guest, GError **error)
{
    uint8_t id[VMGENID_SIZE];
    if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id) {
        int e = errno;
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "VM generation ID: getrandom: %s", g_strerror(e));
        return false;
    }
    uint8_t *slot = guest_memory_ptr(dev->host.mem, BOOT_VMGENID_ADDR, VMGENID_SIZE);
    if (!slot) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "VM generation ID: 0x%llx is not guest RAM",
                    BOOT_VMGENID_ADDR);
        return false;
    }
    memcpy(slot, id, sizeof id);
    memcpy(dev->id, id, sizeof id);
    dev->generations++;
    dev->host.mark_dirty(dev->host.opaque, BOOT_VMGENID_ADDR, VMGENID_SIZE);
    if (notify_guest)
        dev->host.notify(dev->host.opaque);
    return true;
}

void vmgenid_add_info(struct vmgenid *dev, JsonBuilder *b)
{
    char hex[2 * VMGENID_SIZE + 1];
    for (unsigned i = 0; i < VMGENID_SIZE; i++)
        g_snprintf(hex + 2 * i, 3, "%02x", dev->id[i]);
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", hex);
    vjson_int(b, "address", (gint64)BOOT_VMGENID_ADDR);
    vjson_int(b, "generations", (gint64)dev->generations);
    vjson_object_end(b);
}
