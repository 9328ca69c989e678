/* One object of a pull from a hostile store, as pull.c takes it: the
 * manifest parsed (manifest_parse), its first file's seek table fetched and
 * checked against the manifest's claims (object_fetch_table, through a real
 * file:// store in the scratch directory), then every frame fetched,
 * decompressed and digested in order (object_import, into /dev/null). A
 * digest that differs is the expected refusal, not a finding.
 *
 * The property: what an input makes the code allocate stays within a bound
 * stated here, whatever the manifest, the seek table or the frames claim
 * (frame sizes up to 4 GiB, 2^62-byte files, 300 million frames). The live
 * heap is counted by AddressSanitizer's allocation hooks across every
 * thread of the import; its peak over an input, above what was live when
 * the input began, must stay under
 *
 *     MEMORY_FIXED + MEMORY_PER_BYTE * input bytes + MEMORY_FRAMES
 *
 * MEMORY_FIXED: the transport, thread pools and zstd's contexts;
 * MEMORY_PER_BYTE: json-glib's nodes for the manifest's text and the parsed
 * seek table (32 bytes for each 12-byte entry), and the import's buffers of
 * compressed bytes (at most two ranges' worth for each connection, each a
 * part of the input); MEMORY_FRAMES: the decompressed frames waiting for the
 * digest with one thread: a window of two of the largest frames a table may
 * claim (64 MiB) and the one being decompressed. A frame claiming more than
 * a frame may hold would need a larger buffer, and fails the bound.
 *
 * Input: a flags byte, the manifest's text, a line "=== object", then the
 * object's bytes. The flags set the first file's claims from the object, so
 * that inputs get past the checks that guard the rest: bit 0 object_size
 * (its length), bit 1 frames (the count in its seek table's footer), bit 2
 * seek_table_sha256 (of the table that count makes), bit 3 size (the sum of
 * the table's decompressed sizes, when it parses). Files claiming more than
 * IMPORT_MAX bytes get their table checked but are not imported: the time
 * an input takes stays short (a 320 MiB import takes about 0.3 s). */
#include "fuzz-common.h"
#include "store/manifest.h"
#include "store/object.h"
#include "store/store.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN_HOOKS 1
#include <sanitizer/allocator_interface.h>
#endif
#endif

#define MEMORY_FIXED (8ull << 20)
#define MEMORY_PER_BYTE 96ull
#define MEMORY_FRAMES (3ull * SEEKABLE_MAX_FRAME_DATA)
#define IMPORT_MAX (5ull * SEEKABLE_MAX_FRAME_DATA)

#define OBJECT_MARK "\n=== object\n"

static struct store_options opts;
static struct transport *store;
static char *object_path;
static int null_fd = -1;

/* ---- the live heap, counted by ASan's hooks (every thread) ---- */

static gint64 live_bytes, peak_bytes;

#ifdef HAVE_ASAN_HOOKS
static void on_malloc(const volatile void *p, size_t n)
{
    gint64 now = __atomic_add_fetch(&live_bytes, (gint64)n, __ATOMIC_RELAXED);
    gint64 peak = __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED);
    while (now > peak && !__atomic_compare_exchange_n(&peak_bytes, &peak, now, true,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

static void on_free(const volatile void *p)
{
    if (p)
        __atomic_sub_fetch(&live_bytes, (gint64)__sanitizer_get_allocated_size((const void *)p),
                           __ATOMIC_RELAXED);
}
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_init_logging();
    /* The import's worker threads come from GLib's shared pool, which ends
     * unused ones: LeakSanitizer's check after an input, meeting one as it
     * ends (its zstd context between its thread-specific slot and its
     * destructor), reports a leak that is not one. Kept, they are all alive. */
    g_thread_pool_set_max_unused_threads(-1);
    g_thread_pool_set_max_idle_time(0);
    g_autofree char *objects = fuzz_path("store/objects");
    g_assert(g_mkdir_with_parents(objects, 0700) == 0);
    object_path = g_build_filename(objects, "fuzz.zst", NULL);
    store_options_init(&opts);
    opts.threads = 1;
    opts.connections = 2;
    opts.range_size = 4096;   /* several ranges even for small objects */
    g_autofree char *url = g_strdup_printf("file://%s/store", fuzz_scratch_dir());
    g_autoptr(GError) error = NULL;
    store = transport_open(url, &opts, &error);
    g_assert_no_error(error);
    null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    g_assert(null_fd >= 0);
#ifdef HAVE_ASAN_HOOKS
    __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
#endif
    return 0;
}

static guint32 footer_frames(const guint8 *obj, gsize len)
{
    guint32 n = 0;
    if (len >= SEEKABLE_FOOTER_SIZE)
        memcpy(&n, obj + len - SEEKABLE_FOOTER_SIZE, 4);
    return GUINT32_FROM_LE(n);
}

/* The claims the flags ask for, made from the object itself. */
static void fix_claims(guint8 flags, struct manifest_file *f, const guint8 *obj, gsize len)
{
    if (flags & 1)
        f->object_size = len;
    if (flags & 2)
        f->frames = footer_frames(obj, len);
    guint64 table_len = seekable_table_size(f->frames);
    if (table_len > len)
        return;
    const guint8 *table = obj + len - table_len;
    if (flags & 4) {
        g_autofree char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, table, table_len);
        g_strlcpy(f->table_sha256, sum, sizeof(f->table_sha256));
    }
    struct seekable_table t;
    if ((flags & 8) && seekable_table_parse(table, table_len, len, "fuzz", &t, NULL)) {
        f->size = t.data_size;
        seekable_table_clear(&t);
    }
}

static void pull_object(const struct manifest_file *f)
{
    g_autoptr(GError) error = NULL;
    struct seekable_table table;
    if (!object_fetch_table(store, "objects/fuzz.zst", f->object_size, f->size, f->frames,
                            f->table_sha256, &table, &error)) {
        g_assert_nonnull(error);
        return;
    }
    if (f->size <= IMPORT_MAX) {
        struct progress pg;
        progress_begin(&pg, "fuzz", f->size, false);
        char digest[65];
        bool ok = object_import(store, "objects/fuzz.zst", &table, null_fd, "/dev/null", &pg,
                                digest, &error);
        progress_end(&pg);
        g_assert(ok || error);
    }
    seekable_table_clear(&table);
}

static void run(const uint8_t *data, size_t size)
{
    if (size < 1)
        return;
    const char *text = (const char *)data + 1;
    const char *mark = memmem(text, size - 1, OBJECT_MARK, strlen(OBJECT_MARK));
    gsize text_len = mark ? (gsize)(mark - text) : size - 1;
    const guint8 *obj = mark ? (const guint8 *)mark + strlen(OBJECT_MARK) : data + size;
    gsize obj_len = (gsize)(data + size - obj);
    g_autoptr(GBytes) json = g_bytes_new(text, text_len);
    g_autoptr(GError) error = NULL;
    g_autoptr(manifest) m = manifest_parse(json, "manifests/fuzz.json", &error);
    if (!m) {
        g_assert_nonnull(error);
        return;
    }
    if (m->files->len == 0)
        return;
    fuzz_write_file(object_path, obj, obj_len);
    struct manifest_file *f = &g_array_index(m->files, struct manifest_file, 0);
    fix_claims(data[0], f, obj, obj_len);
    pull_object(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gint64 before = __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&peak_bytes, before, __ATOMIC_RELAXED);
    run(data, size);
    guint64 used = (guint64)(__atomic_load_n(&peak_bytes, __ATOMIC_RELAXED) - before);
    guint64 bound = MEMORY_FIXED + MEMORY_PER_BYTE * size + MEMORY_FRAMES;
    if (used > bound)
        g_error("an input of %zu bytes made the pull allocate %" G_GUINT64_FORMAT " bytes at once, "
                "more than the %" G_GUINT64_FORMAT " it may", size, used, bound);
    return 0;
}
