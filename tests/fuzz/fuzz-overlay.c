/* One disk overlay file as snap_overlay_open reads it (header, its CRC,
 * the layout against the capacity, the bitmap against the capacity and the
 * file's length), then used as the shim uses it: every block looked up,
 * counted, sealed into a disk layer, and the layer opened and checked.
 *
 * Input: a flags byte (bit 0: lay the header out from its capacity, which is
 * then taken modulo 1 MiB; bit 1: make the header CRC right), a struct
 * snap_overlay_header, then the file from offset 4096 on (bitmap, data). */
#include "fuzz-common.h"
#include "snapshot/crc32c.h"
#include "snapshot/layer.h"
#include "snapshot/overlay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAG_LAYOUT 1u
#define FLAG_FIX_CRC 2u

static char *path, *layer_path;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_init_logging();
    path = fuzz_path("disk.overlay");
    layer_path = fuzz_path("disk-vda.layer");
    return 0;
}

static void lay_out(struct snap_overlay_header *h)
{
    h->capacity = (h->capacity % (1u << 20)) / 512 * 512 + 512;
    h->block_count = (h->capacity + 4095) / 4096;
    h->bitmap_offset = 4096;
    h->bitmap_bytes = (h->block_count + 63) / 64 * 8;
    h->data_offset = (4096 + h->bitmap_bytes + SNAP_OVERLAY_DATA_ALIGN - 1) / SNAP_OVERLAY_DATA_ALIGN *
                     SNAP_OVERLAY_DATA_ALIGN;
}

static void write_overlay(const uint8_t *data, size_t size)
{
    struct snap_overlay_header h = { 0 };
    uint8_t flags = size ? data[0] : 0;
    size_t hlen = size > 1 ? MIN(size - 1, sizeof h) : 0;
    memcpy(&h, data + 1, hlen);
    if (flags & FLAG_LAYOUT) {
        memcpy(h.magic, SNAP_OVERLAY_MAGIC, 8);
        h.version = SNAP_OVERLAY_VERSION;
        h.header_size = sizeof h;
        h.block_size = SNAP_OVERLAY_BLOCK;
        h.flags = 0;
        lay_out(&h);
    }
    if (flags & FLAG_FIX_CRC) {
        h.header_crc = 0;
        h.header_crc = crc32c(0, &h, sizeof h);
    }
    size_t tail = size > 1 + sizeof h ? size - 1 - sizeof h : 0;
    /* The data the bitmap names sits at data_offset (1 MiB on): the tail
     * goes at the bitmap, and the file is extended to cover the blocks. */
    g_autofree uint8_t *file = g_malloc0(4096 + tail);
    memcpy(file, &h, sizeof h);
    memcpy(file + 4096, data + 1 + sizeof h, tail);
    fuzz_write_file(path, file, 4096 + tail);
    if ((flags & FLAG_LAYOUT) && tail >= h.bitmap_bytes) {
        FILE *f = fopen(path, "r+");
        if (f) {
            if (fseek(f, (long)(h.data_offset + h.block_count * 4096 - 1), SEEK_SET) == 0)
                fputc(0x5a, f);
            fclose(f);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    write_overlay(data, size);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_overlay) ov = snap_overlay_open(path, false, &error);
    if (!ov) {
        g_debug("%s", error->message);
        return 0;
    }
    uint64_t n = 0;
    for (uint64_t b = 0; b < ov->hdr.block_count; b++)
        n += snap_overlay_has(ov, b);
    if (n != snap_overlay_count(ov))
        abort();
    snap_id id;
    snap_id_random(&id);
    uint64_t blocks = 0;
    if (!snap_overlay_seal(ov, layer_path, &id, &blocks, &error)) {
        g_debug("%s", error->message);
        return 0;
    }
    g_autoptr(snap_layer) l = snap_layer_open(layer_path, &error);
    if (!l || blocks != n || !snap_layer_is_disk(l) || !snap_layer_verify_data(l, 0, l->hdr.page_count, &error))
        abort(); /* a sealed layer must open, hold every block and verify */
    return 0;
}
