/* The layer writer. Data is streamed once: pages go to the data area as they
 * are added (small runs batched in a staging buffer, big ones written straight
 * from the caller's memory), block checksums are computed on the way, and the
 * index, checksum table and header are written at commit. */
#include "snapshot/layer-write.h"

#include "snapshot/crc32c.h"
#include "snapshot/layer-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define STAGING_BYTES (1u << 20)

struct snap_layer_writer {
    char *path;
    char *tmp_path;
    int fd;
    struct snap_layer_header hdr;
    GArray *runs;         /* struct snap_layer_run */
    GArray *block_crc;    /* uint32_t */
    uint32_t cur_crc;     /* CRC of the block being filled */
    uint64_t cur_bytes;   /* bytes in it so far */
    uint64_t next_page;   /* pages below this were added already */
    uint64_t file_pos;
    uint64_t flushed_pos; /* writeback was started for the bytes below this */
    uint8_t *staging;
    size_t staged;
};

static bool fail_errno(struct snap_layer_writer *w, int err, const char *what, GError **error)
{
    if (err == ENOSPC || err == EDQUOT)
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_NO_SPACE,
                    "cannot write snapshot layer %s: destination is full (%s while %s); "
                    "nothing was written", w->path, g_strerror(err), what);
    else
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_IO, "cannot write snapshot layer %s: %s: %s",
                    w->path, what, g_strerror(err));
    return false;
}

/* A layer written over an existing one (a fold into a child) gets the old
 * file's owner and mode: the daemon, as root, folds layers that an
 * unprivileged shim wrote and must open again at its next snapshot. */
static bool keep_owner_of(const char *path, int fd)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return errno == ENOENT;
    if ((geteuid() == 0 || st.st_uid == geteuid()) && fchown(fd, st.st_uid, st.st_gid) < 0)
        return false;
    return fchmod(fd, st.st_mode & 0777) == 0;
}

static struct snap_layer_writer *writer_new(const char *path, uint64_t ram_size, const snap_id *id,
                                            const snap_id *parent, bool disk, GError **error)
{
    if (ram_size == 0 || ram_size % SNAP_PAGE_SIZE || ram_size > (disk ? SNAP_MAX_DISK_SIZE : SNAP_MAX_RAM_SIZE)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "cannot write snapshot layer %s: RAM size %" G_GUINT64_FORMAT
                    " is not a positive multiple of 4 KiB", path, ram_size);
        return NULL;
    }
    g_autofree char *tmp = g_strdup_printf("%s.tmp-XXXXXX", path);
    int fd = g_mkstemp_full(tmp, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 || !keep_owner_of(path, fd)) {
        int err = errno;
        if (fd >= 0) {
            unlink(tmp);
            close(fd);
        }
        g_set_error(error, SNAP_ERROR, err == ENOSPC ? SNAP_ERROR_NO_SPACE : SNAP_ERROR_IO,
                    "cannot create snapshot layer %s: %s", path, g_strerror(err));
        return NULL;
    }
    struct snap_layer_writer *w = g_new0(struct snap_layer_writer, 1);
    w->path = g_strdup(path);
    w->tmp_path = g_steal_pointer(&tmp);
    w->fd = fd;
    w->runs = g_array_new(FALSE, FALSE, sizeof(struct snap_layer_run));
    w->block_crc = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    w->staging = g_malloc(STAGING_BYTES);
    w->file_pos = SNAP_LAYER_DATA_OFFSET;
    memcpy(w->hdr.magic, SNAP_LAYER_MAGIC, 8);
    w->hdr.version = SNAP_LAYER_VERSION;
    w->hdr.header_size = sizeof w->hdr;
    w->hdr.page_size = SNAP_PAGE_SIZE;
    w->hdr.block_pages = SNAP_BLOCK_PAGES;
    w->hdr.ram_size = ram_size;
    w->hdr.id = *id;
    if (parent)
        w->hdr.parent_id = *parent;
    if (disk)
        w->hdr.flags |= SNAP_LAYER_FLAG_DISK;
    else if (snap_id_is_nil(&w->hdr.parent_id))
        w->hdr.flags |= SNAP_LAYER_FLAG_FULL;
    return w;
}

struct snap_layer_writer *snap_layer_writer_new(const char *path, uint64_t ram_size,
                                                const snap_id *id, const snap_id *parent,
                                                GError **error)
{
    return writer_new(path, ram_size, id, parent, false, error);
}

struct snap_layer_writer *snap_disk_layer_writer_new(const char *path, uint64_t size, const snap_id *id,
                                                     const snap_id *parent, GError **error)
{
    return writer_new(path, size, id, parent, true, error);
}

/* Writeback starts as the layer grows, every WRITEBACK_STEP: the commit's
 * fsync then waits for the last step, not for gigabytes the page cache
 * held (which also made a cancel wait for it, and throttled the writer
 * once the dirty limit was reached). 2 GiB written here: 1.1-1.5 s with,
 * 2.4-10.6 s without (load 4). A failure is only a lost hint. */
#define WRITEBACK_STEP (16u << 20)

static void start_writeback(struct snap_layer_writer *w)
{
    if (w->file_pos - w->flushed_pos < WRITEBACK_STEP)
        return;
    (void)sync_file_range(w->fd, (off_t)w->flushed_pos, (off_t)(w->file_pos - w->flushed_pos),
                          SYNC_FILE_RANGE_WRITE);
    w->flushed_pos = w->file_pos;
}

static bool write_all(struct snap_layer_writer *w, const void *buf, size_t len, GError **error)
{
    int err = snap_pwrite_all(w->fd, buf, len, w->file_pos);
    if (err)
        return fail_errno(w, -err, "writing page data", error);
    w->file_pos += len;
    start_writeback(w);
    return true;
}

static bool flush_staging(struct snap_layer_writer *w, GError **error)
{
    bool ok = write_all(w, w->staging, w->staged, error);
    w->staged = 0;
    return ok;
}

/* Fold data into the per-block checksums. */
static void checksum_data(struct snap_layer_writer *w, const uint8_t *p, uint64_t len)
{
    const uint64_t block_bytes = (uint64_t)SNAP_BLOCK_PAGES * SNAP_PAGE_SIZE;
    while (len) {
        uint64_t take = MIN(len, block_bytes - w->cur_bytes);
        w->cur_crc = crc32c(w->cur_crc, p, take);
        w->cur_bytes += take;
        p += take;
        len -= take;
        if (w->cur_bytes == block_bytes) {
            g_array_append_val(w->block_crc, w->cur_crc);
            w->cur_crc = 0;
            w->cur_bytes = 0;
        }
    }
}

static bool store_data(struct snap_layer_writer *w, const uint8_t *data, uint64_t len,
                       GError **error)
{
    checksum_data(w, data, len);
    if (len >= STAGING_BYTES) {
        return flush_staging(w, error) && write_all(w, data, len, error);
    }
    if (w->staged + len > STAGING_BYTES && !flush_staging(w, error))
        return false;
    memcpy(w->staging + w->staged, data, len);
    w->staged += len;
    return true;
}

static void append_run(struct snap_layer_writer *w, uint64_t first, uint64_t npages,
                       uint32_t kind)
{
    /* Extend the previous run when contiguous and of the same kind; split runs
     * at 2^31 pages so npages fits its field. */
    if (w->runs->len) {
        struct snap_layer_run *last =
            &g_array_index(w->runs, struct snap_layer_run, w->runs->len - 1);
        if (last->kind == kind && last->first_page + last->npages == first &&
            (uint64_t)last->npages + npages < (1ull << 31)) {
            last->npages += (uint32_t)npages;
            return;
        }
    }
    while (npages) {
        uint64_t take = MIN(npages, (1ull << 31) - 1);
        struct snap_layer_run run = { .first_page = first, .npages = (uint32_t)take, .kind = kind };
        g_array_append_val(w->runs, run);
        first += take;
        npages -= take;
    }
}

bool snap_layer_writer_add(struct snap_layer_writer *w, uint64_t first_page, uint64_t npages,
                           const void *data, GError **error)
{
    uint64_t ram_pages = w->hdr.ram_size / SNAP_PAGE_SIZE;
    if (first_page < w->next_page || npages > ram_pages || first_page > ram_pages - npages) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                    "snapshot layer %s: pages %" G_GUINT64_FORMAT "+%" G_GUINT64_FORMAT
                    " added out of order or beyond RAM", w->path, first_page, npages);
        return false;
    }
    if (npages == 0)
        return true;
    w->next_page = first_page + npages;
    if (!data) {
        if (!(w->hdr.flags & SNAP_LAYER_FLAG_FULL))
            append_run(w, first_page, npages, SNAP_RUN_ZERO);
        return true;
    }
    append_run(w, first_page, npages, 0);
    w->hdr.page_count += npages;
    return store_data(w, data, npages * SNAP_PAGE_SIZE, error);
}

uint64_t snap_layer_writer_pages(const struct snap_layer_writer *w)
{
    return w->hdr.page_count;
}

static void writer_free(struct snap_layer_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    g_array_unref(w->runs);
    g_array_unref(w->block_crc);
    g_free(w->staging);
    g_free(w->tmp_path);
    g_free(w->path);
    g_free(w);
}

void snap_layer_writer_abort(struct snap_layer_writer *w)
{
    if (!w)
        return;
    unlink(w->tmp_path);
    writer_free(w);
}

static bool write_metadata(struct snap_layer_writer *w, GError **error)
{
    if (w->cur_bytes) {
        g_array_append_val(w->block_crc, w->cur_crc);
        w->cur_bytes = 0;
    }
    struct snap_layer_header *h = &w->hdr;
    h->run_count = w->runs->len;
    h->block_count = w->block_crc->len;
    h->index_offset = w->file_pos;
    if (!write_all(w, w->runs->data, w->runs->len * sizeof(struct snap_layer_run), error))
        return false;
    h->csum_offset = w->file_pos;
    if (!write_all(w, w->block_crc->data, w->block_crc->len * sizeof(uint32_t), error))
        return false;
    h->file_size = w->file_pos;
    h->index_crc = snap_layer_index_crc((void *)w->runs->data, h->run_count,
                                        (void *)w->block_crc->data, h->block_count);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    h->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    h->header_crc = snap_layer_header_crc(h);
    uint8_t page[SNAP_LAYER_DATA_OFFSET] = { 0 };
    memcpy(page, h, sizeof *h);
    uint64_t end = w->file_pos;
    w->file_pos = 0;
    bool ok = write_all(w, page, sizeof page, error);
    w->file_pos = end;
    return ok;
}

/* fsync the directory so the rename itself survives a crash. */
static void sync_directory(const char *path)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

bool snap_layer_writer_commit(struct snap_layer_writer *w, GError **error)
{
    bool ok = flush_staging(w, error) && write_metadata(w, error);
    if (ok && fsync(w->fd) < 0)
        ok = fail_errno(w, errno, "syncing to disk", error);
    if (ok && rename(w->tmp_path, w->path) < 0)
        ok = fail_errno(w, errno, "renaming into place", error);
    if (!ok) {
        snap_layer_writer_abort(w);
        return false;
    }
    sync_directory(w->path);
    writer_free(w);
    return true;
}
