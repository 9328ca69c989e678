/* vsnap save images (plugin/persist/include/persist/save-image.h) as virsh restore and
 * save-image-dumpxml read them: the header and the definition
 * (save_image_read_info), every section extracted into a directory
 * (save_image_extract), and that directory read as the snapshot restore
 * then runs from (snap_dir_read, snap_dir_open_chain).
 *
 * Input: one byte of flags (bit 0: make the header's CRC right, bit 1: make
 * each section's CRC right where the section lies in the file), then the
 * header's bytes; the file is those, zeros up to 4096 (where sections
 * start), then the rest of the input.
 *
 * FUZZ_WRITE_SEEDS=<dir> writes seeds made by save_image_write from a real
 * snapshot directory, and exits. */
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "util/caller.h"
#include "persist/save-image.h"
#include "snapshot/crc32c.h"
#include "snapshot/directory.h"
#include "snapshot/layer-write.h"
#include "json/vjson.h"

/* The header as save-image.h describes it (little-endian, 16 sections). */
#define IMAGE_HEADER_AREA 4096u
#define IMAGE_SECTIONS 16u
struct image_section {
    char name[32];
    uint64_t offset, length;
    uint32_t crc, flags;
};
struct image_header {
    char magic[8];
    uint32_t version, flags, nsections, header_crc;
    struct image_section sections[IMAGE_SECTIONS];
};

enum { FIX_HEADER = 1, FIX_SECTIONS = 2 };

static char *image, *out;

static void fix_crcs(GByteArray *file, unsigned flags)
{
    struct image_header h;
    memcpy(&h, file->data, sizeof h);
    for (unsigned i = 0; (flags & FIX_SECTIONS) && i < IMAGE_SECTIONS; i++) {
        struct image_section *s = &h.sections[i];
        if (s->offset <= file->len && s->length <= file->len - s->offset)
            s->crc = crc32c(0, file->data + s->offset, s->length);
    }
    if (flags & FIX_HEADER) {
        h.header_crc = 0;
        h.header_crc = crc32c(0, &h, sizeof h);
    }
    memcpy(file->data, &h, sizeof h);
}

/* ---- seeds ---- */

static void write_snapshot_dir(const char *dir)
{
    g_mkdir_with_parents(dir, 0700);
    snap_id id;
    snap_id_parse("dddddddd-dddd-4ddd-8ddd-dddddddddddd", &id);
    g_autofree char *layer = g_build_filename(dir, SNAP_DIR_LAYER_FILE, NULL);
    g_autoptr(GError) error = NULL;
    struct snap_layer_writer *w = snap_layer_writer_new(layer, 8 * SNAP_PAGE_SIZE, &id, NULL, &error);
    uint8_t page[SNAP_PAGE_SIZE];
    memset(page, 'v', sizeof page);
    if (!w || !snap_layer_writer_add(w, 2, 1, page, &error) || !snap_layer_writer_commit(w, &error))
        g_error("fuzz: cannot write a layer: %s", error->message);
    struct snap_memory_record r = {.layer = SNAP_DIR_LAYER_FILE, .id = id,
                                   .ram_size = 8 * SNAP_PAGE_SIZE};
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    snap_state_add_record(b, &r);
    vjson_object_end(b);
    g_autoptr(JsonNode) state = json_builder_get_root(b);
    g_autofree char *text = json_to_string(state, TRUE);
    if (!snap_dir_write_file(dir, SNAP_DIR_STATE_FILE, text, &error) ||
        !snap_dir_write_file(dir, SNAP_DIR_CONFIG_FILE, "{\"payload\": {\"kernel\": \"/k\"}}", &error))
        g_error("fuzz: %s", error->message);
}

/* The input that makes the file at path again (flags first). */
static void write_seed(const char *seed, const char *path, unsigned flags)
{
    g_autofree char *bytes = NULL;
    gsize len = 0;
    if (!g_file_get_contents(path, &bytes, &len, NULL) || len < IMAGE_HEADER_AREA)
        g_error("fuzz: cannot read %s", path);
    g_autoptr(GByteArray) in = g_byte_array_new();
    guint8 f = (guint8)flags;
    g_byte_array_append(in, &f, 1);
    g_byte_array_append(in, (guint8 *)bytes, sizeof(struct image_header));
    g_byte_array_append(in, (guint8 *)bytes + IMAGE_HEADER_AREA, (guint)(len - IMAGE_HEADER_AREA));
    fuzz_write_file(seed, in->data, in->len);
}

static void write_seeds(const char *dir)
{
    g_autofree char *snap = fuzz_path("seed-snapshot");
    write_snapshot_dir(snap);
    g_autoptr(GError) error = NULL;
    const char *xml = "<domain type='kvm'><name>saved</name><memory unit='MiB'>64</memory>"
                      "<os><type>hvm</type><kernel>/k</kernel></os></domain>";
    if (!save_image_write(image, xml, snap, true, NULL, NULL, &error))
        g_error("fuzz: save_image_write: %s", error->message);
    g_autofree char *as_is = g_build_filename(dir, "saved-paused", NULL);
    g_autofree char *fixed = g_build_filename(dir, "saved-crcs-fixed", NULL);
    write_seed(as_is, image, 0);
    write_seed(fixed, image, FIX_HEADER | FIX_SECTIONS);
}

/* ---- fuzzing ---- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    image = fuzz_path("image");
    out = fuzz_path("extracted");
    const char *seeds = g_getenv("FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    return 0;
}

static void extract_and_read(void)
{
    fuzz_rmtree(out);
    g_mkdir_with_parents(out, 0700);
    g_autoptr(GError) error = NULL;
    if (!save_image_extract(image, out, &error)) {
        g_debug("%s", error->message);
        return;
    }
    g_autoptr(snap_dir) d = snap_dir_read(out, &error);
    g_autoptr(snap_chain) chain = d ? snap_dir_open_chain(d, &error) : NULL;
    if (!chain)
        g_debug("%s", error->message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return -1;
    size_t head = MIN(size - 1, sizeof(struct image_header));
    g_autoptr(GByteArray) file = g_byte_array_sized_new(IMAGE_HEADER_AREA + (guint)size);
    g_byte_array_set_size(file, IMAGE_HEADER_AREA);
    memset(file->data, 0, IMAGE_HEADER_AREA);
    memcpy(file->data, data + 1, head);
    g_byte_array_append(file, data + 1 + head, (guint)(size - 1 - head));
    fix_crcs(file, data[0]);
    fuzz_write_file(image, file->data, file->len);

    struct save_image_info info = {0};
    g_autoptr(GError) error = NULL;
    if (save_image_read_info(image, &caller_daemon, &info, &error)) {
        g_assert(info.domain_xml);
        save_image_info_clear(&info);
    } else {
        g_debug("%s", error->message);
    }
    extract_and_read();
    return 0;
}
