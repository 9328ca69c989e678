#include "persist/save-image.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/caller.h"
#include "snapshot/crc32c.h"
#include "snapshot/layer.h"
#include "util/virt-error.h"

#define IMAGE_MAGIC "VSNAPSAV"
#define IMAGE_VERSION 1u
#define HEADER_SIZE 4096u
#define ALIGN 4096u
#define MAX_SECTIONS 16u
#define NAME_MAX_LEN 32u
#define DOMAIN_SECTION "domain.xml"
#define SECTION_SELF_CHECKED 1u   /* a memory layer: its own checksums apply */
#define IMAGE_PAUSED 1u
/* Sections other than the layer are small JSON/XML files. */
#define SMALL_SECTION_MAX (64u * 1024 * 1024)
#define COPY_CHUNK (16u << 20) /* a step: a domjobabort is seen between two */
#define BUFFERED_CHUNK (1u << 20)

struct section {
    char name[NAME_MAX_LEN];
    uint64_t offset;
    uint64_t length;
    uint32_t crc;
    uint32_t flags;
};

struct header {
    char magic[8];
    uint32_t version;
    uint32_t flags;          /* IMAGE_PAUSED */
    uint32_t nsections;
    uint32_t header_crc;     /* over this struct with header_crc = 0 */
    struct section sections[MAX_SECTIONS];
};

G_STATIC_ASSERT(sizeof(struct header) <= HEADER_SIZE);

static bool fail(GError **error, int code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static bool fail(GError **error, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, VSNAP_VIR_ERROR, code, text);
    return false;
}

static uint32_t header_crc(const struct header *h)
{
    struct header copy = *h;
    copy.header_crc = 0;
    return crc32c(0, &copy, sizeof(copy));
}

static uint64_t align_up(uint64_t v)
{
    return (v + ALIGN - 1) / ALIGN * ALIGN;
}

void save_image_info_clear(struct save_image_info *info)
{
    g_clear_pointer(&info->domain_xml, g_free);
}

/* ---- writing ---- */

struct writer {
    const char *path;
    int fd;
    struct header hdr;
    uint64_t end;
    guint64 done, total;
    save_image_progress progress;
    void *data;
};

static struct section *add_section(struct writer *w, const char *name, GError **error)
{
    if (w->hdr.nsections >= MAX_SECTIONS || strlen(name) >= NAME_MAX_LEN) {
        fail(error, VIR_ERR_INTERNAL_ERROR, "cannot store '%s' in a save image (too many files "
             "or too long a name)", name);
        return NULL;
    }
    struct section *s = &w->hdr.sections[w->hdr.nsections++];
    g_strlcpy(s->name, name, sizeof(s->name));
    s->offset = w->end;
    return s;
}

static bool write_at(int fd, const void *buf, size_t len, uint64_t off)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf = (const char *)buf + n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return true;
}

static bool add_bytes(struct writer *w, const char *name, const char *bytes, size_t len,
                      GError **error)
{
    struct section *s = add_section(w, name, error);
    if (!s)
        return false;
    if (!write_at(w->fd, bytes, len, s->offset))
        return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot write %s: %s", w->path, g_strerror(errno));
    s->length = len;
    s->crc = crc32c(0, bytes, len);
    w->end = align_up(s->offset + len);
    return true;
}

/* Through a buffer: what copy_file_range cannot do between filesystems. */
static ssize_t copy_buffered(int in, loff_t *src, int out, loff_t *dst, size_t want)
{
    g_autofree char *buf = g_malloc(BUFFERED_CHUNK);
    ssize_t n = pread(in, buf, MIN(want, (size_t)BUFFERED_CHUNK), *src);
    if (n <= 0)
        return n;
    if (!write_at(out, buf, (size_t)n, (uint64_t)*dst))
        return -1;
    *src += n;
    *dst += n;
    return n;
}

/* One step of a copy, as copy_file_range returns. The kernel copies (or
 * shares extents) within a filesystem; between two it refuses with EXDEV
 * (some filesystems with EOPNOTSUPP or EINVAL), and from then on this copy
 * goes through a buffer (*buffered). */
static ssize_t copy_step(int in, loff_t *src, int out, loff_t *dst, size_t want, bool *buffered)
{
    if (!*buffered) {
        ssize_t n = copy_file_range(in, src, out, dst, want, 0);
        if (n >= 0 || (errno != EXDEV && errno != EOPNOTSUPP && errno != EINVAL &&
                       errno != ENOSYS))
            return n;
        *buffered = true;
    }
    return copy_buffered(in, src, out, dst, want);
}

static bool copy_range(struct writer *w, int in, uint64_t len, uint64_t out_off, GError **error)
{
    loff_t src = 0, dst = (loff_t)out_off;
    bool buffered = false;
    while ((uint64_t)src < len) {
        size_t want = (size_t)MIN((uint64_t)COPY_CHUNK, len - (uint64_t)src);
        ssize_t n = copy_step(in, &src, w->fd, &dst, want, &buffered);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot copy into %s: %s", w->path,
                        n == 0 ? "unexpected end of file" : g_strerror(errno));
        w->done += (guint64)n;
        if (w->progress && !w->progress(w->data, w->done, w->total))
            return fail(error, VIR_ERR_OPERATION_ABORTED, "operation aborted: the save to %s was cancelled",
                        w->path);
    }
    return true;
}

static bool is_layer(int fd)
{
    char magic[8];
    return pread(fd, magic, sizeof(magic), 0) == sizeof(magic) &&
           memcmp(magic, SNAP_LAYER_MAGIC, sizeof(magic)) == 0;
}

static bool add_file(struct writer *w, const char *dir, const char *name, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0) {
        if (in >= 0)
            close(in);
        return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot read %s: %s", path, g_strerror(errno));
    }
    bool layer = is_layer(in);
    struct section *s = add_section(w, name, error);
    bool ok = s != NULL;
    if (ok && !layer && (uint64_t)st.st_size > SMALL_SECTION_MAX)
        ok = fail(error, VIR_ERR_INTERNAL_ERROR, "%s is too large for a save image section",
                  path);
    if (ok) {
        s->length = (uint64_t)st.st_size;
        s->flags = layer ? SECTION_SELF_CHECKED : 0;
        ok = copy_range(w, in, s->length, s->offset, error);
    }
    if (ok && !layer) {
        g_autofree char *bytes = NULL;
        gsize len = 0;
        ok = g_file_get_contents(path, &bytes, &len, NULL) && len == s->length;
        if (ok)
            s->crc = crc32c(0, bytes, len);
        else
            fail(error, VIR_ERR_SYSTEM_ERROR, "%s changed while it was saved", path);
    }
    close(in);
    if (ok)
        w->end = align_up(s->offset + s->length);
    return ok;
}

static guint64 dir_bytes(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    guint64 total = 0;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            total += (guint64)st.st_size;
    }
    return total;
}

static bool add_dir(struct writer *w, const char *dir, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) d = g_dir_open(dir, 0, &local);
    if (!d)
        return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot read %s: %s", dir, local->message);
    const char *name;
    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_REGULAR) && !g_str_equal(name, DOMAIN_SECTION) &&
            !add_file(w, dir, name, error))
            return false;
    }
    return true;
}

/* The rename itself lasts once the directory holding it is on disk. */
static bool sync_parent_dir(const char *path, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    bool ok = fd >= 0 && fsync(fd) == 0;
    int err = errno;
    if (fd >= 0)
        close(fd);
    return ok || fail(error, VIR_ERR_SYSTEM_ERROR, "cannot sync directory %s: %s", dir,
                      g_strerror(err));
}

static bool finish(struct writer *w, const char *tmp, GError **error)
{
    memcpy(w->hdr.magic, IMAGE_MAGIC, 8);
    w->hdr.version = IMAGE_VERSION;
    w->hdr.header_crc = header_crc(&w->hdr);
    char page[HEADER_SIZE] = {0};
    memcpy(page, &w->hdr, sizeof(w->hdr));
    if (!write_at(w->fd, page, sizeof(page), 0) || ftruncate(w->fd, (off_t)w->end) < 0 ||
        fsync(w->fd) < 0)
        return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot write %s: %s", tmp, g_strerror(errno));
    /* tmp is beside the image: the rename never crosses a filesystem. */
    if (rename(tmp, w->path) < 0)
        return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot rename %s to %s: %s", tmp, w->path,
                    g_strerror(errno));
    return sync_parent_dir(w->path, error);
}

char *save_image_temp_path(const char *path)
{
    return g_strconcat(path, ".vsnap-tmp", NULL);
}

bool save_image_write(const char *path, const char *domain_xml, const char *snapshot_dir,
                      bool paused, save_image_progress progress, void *data, GError **error)
{
    g_autofree char *tmp = save_image_temp_path(path);
    struct writer w = {.path = path, .end = HEADER_SIZE, .progress = progress, .data = data};
    w.total = dir_bytes(snapshot_dir);
    w.hdr.flags = paused ? IMAGE_PAUSED : 0;
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (w.fd < 0)
        return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", tmp, g_strerror(errno));
    bool ok = add_bytes(&w, DOMAIN_SECTION, domain_xml, strlen(domain_xml), error) &&
              add_dir(&w, snapshot_dir, error) && finish(&w, tmp, error);
    close(w.fd);
    if (!ok)
        g_unlink(tmp);
    return ok;
}

/* ---- reading ---- */

static bool read_header(int fd, const char *path, struct header *h, uint64_t file_size,
                        GError **error)
{
    if (pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h))
        return fail(error, VIR_ERR_OPERATION_FAILED, "%s is too short to be a vsnap save image",
                    path);
    if (memcmp(h->magic, IMAGE_MAGIC, 8) != 0)
        return fail(error, VIR_ERR_OPERATION_FAILED, "%s is not a vsnap save image", path);
    if (h->version != IMAGE_VERSION)
        return fail(error, VIR_ERR_OPERATION_FAILED,
                    "%s is a vsnap save image of format version %u; this vsnap reads version %u",
                    path, h->version, IMAGE_VERSION);
    if (h->header_crc != header_crc(h))
        return fail(error, VIR_ERR_OPERATION_FAILED, "%s: the header checksum does not match",
                    path);
    if (h->nsections < 1 || h->nsections > MAX_SECTIONS)
        return fail(error, VIR_ERR_OPERATION_FAILED, "%s: bad section count %u", path,
                    h->nsections);
    for (uint32_t i = 0; i < h->nsections; i++) {
        const struct section *s = &h->sections[i];
        if (memchr(s->name, '\0', sizeof(s->name)) == NULL || !s->name[0] ||
            strchr(s->name, '/') || s->name[0] == '.' || s->offset < HEADER_SIZE ||
            s->offset > file_size || s->length > file_size - s->offset)
            return fail(error, VIR_ERR_OPERATION_FAILED,
                        "%s: section %u is damaged or the file is truncated", path, i);
    }
    return true;
}

static char *read_small_section(int fd, const char *path, const struct section *s,
                                GError **error)
{
    if (s->length > SMALL_SECTION_MAX) {
        fail(error, VIR_ERR_OPERATION_FAILED, "%s: section %s is too large", path, s->name);
        return NULL;
    }
    g_autofree char *buf = g_malloc(s->length + 1);
    if (pread(fd, buf, s->length, (off_t)s->offset) != (ssize_t)s->length) {
        fail(error, VIR_ERR_OPERATION_FAILED, "%s: cannot read section %s", path, s->name);
        return NULL;
    }
    buf[s->length] = '\0';
    if (crc32c(0, buf, s->length) != s->crc) {
        fail(error, VIR_ERR_OPERATION_FAILED, "%s: section %s fails its checksum", path, s->name);
        return NULL;
    }
    return g_steal_pointer(&buf);
}

/* O_NONBLOCK and regular files only (caller.h): a FIFO or a device named as
 * an image must not park the worker; opened as the caller could. */
static int open_image(const char *path, const struct caller *caller, struct header *h,
                      GError **error)
{
    int fd = caller_open_regular(caller, path, error);
    struct stat st;
    if (fd < 0) {
        g_prefix_error(error, "save image: ");
        return -1;
    }
    bool ok = fstat(fd, &st) == 0
                  ? read_header(fd, path, h, (uint64_t)st.st_size, error)
                  : fail(error, VIR_ERR_SYSTEM_ERROR, "cannot stat save image %s: %s", path,
                         g_strerror(errno));
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

bool save_image_read_info(const char *path, const struct caller *caller,
                          struct save_image_info *info, GError **error)
{
    struct header h;
    int fd = open_image(path, caller, &h, error);
    if (fd < 0)
        return false;
    if (!g_str_equal(h.sections[0].name, DOMAIN_SECTION)) {
        close(fd);
        return fail(error, VIR_ERR_OPERATION_FAILED, "%s holds no domain definition", path);
    }
    info->domain_xml = read_small_section(fd, path, &h.sections[0], error);
    info->paused = h.flags & IMAGE_PAUSED;
    close(fd);
    return info->domain_xml != NULL;
}

static bool extract_section(int fd, const char *path, const struct section *s, const char *dir,
                            GError **error)
{
    g_autofree char *out_path = g_build_filename(dir, s->name, NULL);
    if (!(s->flags & SECTION_SELF_CHECKED)) {
        g_autofree char *bytes = read_small_section(fd, path, s, error);
        g_autoptr(GError) local = NULL;
        if (!bytes)
            return false;
        if (!g_file_set_contents(out_path, bytes, (gssize)s->length, &local))
            return fail(error, VIR_ERR_SYSTEM_ERROR, "%s", local->message);
        return true;
    }
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
        return fail(error, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", out_path,
                    g_strerror(errno));
    loff_t src = (loff_t)s->offset, dst = 0;
    bool ok = true, buffered = false;
    while (ok && (uint64_t)dst < s->length) {
        size_t want = (size_t)MIN((uint64_t)COPY_CHUNK, s->length - (uint64_t)dst);
        ssize_t n = copy_step(fd, &src, out, &dst, want, &buffered);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            ok = fail(error, VIR_ERR_SYSTEM_ERROR, "cannot copy %s out of %s: %s", s->name, path,
                      n == 0 ? "unexpected end of file" : g_strerror(errno));
    }
    close(out);
    return ok;
}

bool save_image_extract(const char *path, const char *dir, GError **error)
{
    struct header h;
    int fd = open_image(path, &caller_daemon, &h, error);
    if (fd < 0)
        return false;
    bool ok = true;
    for (uint32_t i = 1; ok && i < h.nsections; i++)
        ok = extract_section(fd, path, &h.sections[i], dir, error);
    close(fd);
    return ok;
}
