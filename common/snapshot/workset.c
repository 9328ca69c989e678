/* The recorded working set's file (workset.h). Parsing is strict: the file
 * may come from a store, which is untrusted input. */
#include "snapshot/workset.h"

#include <errno.h>
#include <string.h>

#include "snapshot/crc32c.h"
#include "snapshot/directory.h"

#define HEADER "vsnap-workset 1 "

struct snap_workset *snap_workset_new(const snap_id *layer_id, uint64_t ram_pages)
{
    struct snap_workset *ws = g_new0(struct snap_workset, 1);
    ws->layer_id = *layer_id;
    ws->ram_pages = ram_pages;
    ws->runs = g_array_new(FALSE, FALSE, sizeof(struct snap_workset_run));
    return ws;
}

void snap_workset_free(struct snap_workset *ws)
{
    if (!ws)
        return;
    g_array_unref(ws->runs);
    g_free(ws);
}

void snap_workset_add(struct snap_workset *ws, uint64_t first, uint64_t pages)
{
    if (first >= ws->ram_pages || pages == 0)
        return;
    pages = MIN(pages, ws->ram_pages - first);
    ws->pages += pages;
    if (ws->runs->len) {
        struct snap_workset_run *last = &g_array_index(ws->runs, struct snap_workset_run, ws->runs->len - 1);
        if (last->first + last->pages == first) {
            last->pages += pages;
            return;
        }
    }
    struct snap_workset_run run = { first, pages };
    g_array_append_val(ws->runs, run);
}

char *snap_workset_format(const struct snap_workset *ws)
{
    char id[37];
    snap_id_to_string(&ws->layer_id, id);
    GString *s = g_string_new(NULL);
    g_string_append_printf(s, HEADER "%s %" G_GUINT64_FORMAT "\n", id, ws->ram_pages);
    for (guint i = 0; i < ws->runs->len; i++) {
        const struct snap_workset_run *r = &g_array_index(ws->runs, struct snap_workset_run, i);
        g_string_append_printf(s, "%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n", r->first, r->pages);
    }
    g_string_append_printf(s, "crc32c %08x\n", crc32c(0, s->str, s->len));
    return g_string_free(s, FALSE);
}

bool snap_workset_write(const char *dir, const struct snap_workset *ws, GError **error)
{
    g_autofree char *text = snap_workset_format(ws);
    return snap_dir_write_file(dir, SNAP_DIR_WORKSET_FILE, text, error);
}

/* A decimal of digits only (no sign, no spaces), into *v. */
static bool parse_u64(const char *text, uint64_t *v)
{
    return *text && g_ascii_string_to_unsigned(text, 10, 0, G_MAXUINT64, v, NULL);
}

/* "<first> <pages>", in RAM, non-empty. */
static bool parse_run(const char *line, uint64_t ram_pages, struct snap_workset_run *run)
{
    g_auto(GStrv) f = g_strsplit(line, " ", 3);
    return g_strv_length(f) == 2 && parse_u64(f[0], &run->first) && parse_u64(f[1], &run->pages) &&
           run->pages > 0 && run->first < ram_pages && run->pages <= ram_pages - run->first;
}

static enum snap_workset_found corrupt(char **why, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static enum snap_workset_found corrupt(char **why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *why = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return SNAP_WORKSET_CORRUPT;
}

/* The checksum line ends the text; it covers every byte before it. */
static bool checksum_holds(const char *text, size_t len)
{
    if (len < 17 || text[len - 1] != '\n')
        return false;
    const char *last = g_strrstr_len(text, (gssize)len - 1, "\n");
    const char *line = last ? last + 1 : text;
    uint64_t want;
    if (strncmp(line, "crc32c ", 7) != 0 || (size_t)(text + len - line) != 7 + 8 + 1)
        return false;
    g_autofree char *hex = g_strndup(line + 7, 8);
    if (!g_ascii_string_to_unsigned(hex, 16, 0, G_MAXUINT32, &want, NULL))
        return false;
    return crc32c(0, text, (size_t)(line - text)) == (uint32_t)want;
}

/* The header's layer id and RAM size. */
static bool parse_header(const char *line, snap_id *id, uint64_t *ram_pages)
{
    if (!g_str_has_prefix(line, HEADER))
        return false;
    g_auto(GStrv) f = g_strsplit(line + strlen(HEADER), " ", 3);
    return g_strv_length(f) == 2 && snap_id_parse(f[0], id) && parse_u64(f[1], ram_pages);
}

static enum snap_workset_found parse(const char *text, size_t len, const snap_id *layer_id, uint64_t ram_pages,
                                     struct snap_workset **out, char **why)
{
    if (memchr(text, '\0', len) || !checksum_holds(text, len))
        return corrupt(why, "its checksum does not hold");
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    guint n = g_strv_length(lines); /* the checksum line, then "" after the last newline */
    snap_id id;
    uint64_t pages;
    if (n < 3 || !parse_header(lines[0], &id, &pages))
        return corrupt(why, "its first line is not a vsnap-workset 1 header");
    if (!snap_id_equal(&id, layer_id) || pages != ram_pages) {
        *why = g_strdup("it was recorded on another snapshot or RAM size");
        return SNAP_WORKSET_STALE;
    }
    g_autoptr(snap_workset) ws = snap_workset_new(layer_id, ram_pages);
    for (guint i = 1; i + 2 < n; i++) {
        struct snap_workset_run run;
        if (!parse_run(lines[i], ram_pages, &run))
            return corrupt(why, "line %u is not a run of pages inside RAM", i + 1);
        snap_workset_add(ws, run.first, run.pages);
    }
    *out = g_steal_pointer(&ws);
    return SNAP_WORKSET_OK;
}

enum snap_workset_found snap_workset_parse(const char *text, size_t len, const snap_id *layer_id, uint64_t ram_pages,
                                           struct snap_workset **out, char **why)
{
    *out = NULL;
    *why = NULL;
    if (len > SNAP_WORKSET_MAX_BYTES)
        return corrupt(why, "it is larger than %u bytes", SNAP_WORKSET_MAX_BYTES);
    return parse(text, len, layer_id, ram_pages, out, why);
}

enum snap_workset_found snap_workset_read(const char *dir, const snap_id *layer_id, uint64_t ram_pages,
                                          struct snap_workset **out, char **why)
{
    *out = NULL;
    *why = NULL;
    g_autofree char *path = g_build_filename(dir, SNAP_DIR_WORKSET_FILE, NULL);
    g_autofree char *text = NULL;
    gsize len = 0;
    g_autoptr(GError) local = NULL;
    if (!g_file_get_contents(path, &text, &len, &local)) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return SNAP_WORKSET_NONE;
        return corrupt(why, "%s", local->message);
    }
    if (len > SNAP_WORKSET_MAX_BYTES)
        return corrupt(why, "it is larger than %u bytes", SNAP_WORKSET_MAX_BYTES);
    return parse(text, len, layer_id, ram_pages, out, why);
}
