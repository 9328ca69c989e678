/* Snapshot directories as a restore reads them (common/snapshot/
 * directory.h): state.json and its memory record (snap_dir_read), the
 * parents it names, the layers below (snap_dir_open_chain) and their data
 * (snap_dir_verify_chain, which also writes and checks seals).
 *
 * The harness keeps three real snapshots, s0 (full), s1 and s2 (diffs),
 * each with its layer, under <scratch>/snap. An input replaces files in
 * them: sections that each start with a line "=== <dir>/<file>" (s0 to s2,
 * any file name without a slash but the layer's), their text after it,
 * "@DIR@" standing for <scratch> (the directories are @DIR@/snap/s0 ...).
 * The first section's directory is the one read as the top. Every file is
 * put back before the next input. */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "snapshot/directory.h"
#include "snapshot/layer-write.h"
#include "json/vjson.h"

#define NDIRS 3
#define RAM_PAGES 16u

static const char *const ids[NDIRS] = {
    "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa",
    "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb",
    "cccccccc-cccc-4ccc-8ccc-cccccccccccc",
};
static char *root, *dirs[NDIRS], *states[NDIRS];

static char *state_text(unsigned i)
{
    struct snap_memory_record r = {.layer = SNAP_DIR_LAYER_FILE, .diff = i > 0,
                                   .ram_size = RAM_PAGES * SNAP_PAGE_SIZE};
    snap_id_parse(ids[i], &r.id);
    g_autofree char *parent_url = i > 0 ? snap_dir_url(dirs[i - 1]) : NULL;
    if (i > 0) {
        snap_id_parse(ids[i - 1], &r.parent_id);
        r.parent_url = parent_url;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    snap_state_add_record(b, &r);
    vjson_object_end(b);
    g_autoptr(JsonNode) root_node = json_builder_get_root(b);
    return json_to_string(root_node, TRUE);
}

static void write_layer(unsigned i)
{
    snap_id id, parent;
    snap_id_parse(ids[i], &id);
    if (i > 0)
        snap_id_parse(ids[i - 1], &parent);
    g_autofree char *path = g_build_filename(dirs[i], SNAP_DIR_LAYER_FILE, NULL);
    g_autoptr(GError) error = NULL;
    struct snap_layer_writer *w =
        snap_layer_writer_new(path, RAM_PAGES * SNAP_PAGE_SIZE, &id, i > 0 ? &parent : NULL, &error);
    uint8_t pages[4 * SNAP_PAGE_SIZE];
    memset(pages, 'a' + (int)i, sizeof pages);
    if (!w || !snap_layer_writer_add(w, i * 4, 4, pages, &error) ||
        !snap_layer_writer_commit(w, &error))
        g_error("fuzz: cannot write the layer of %s: %s", dirs[i], error->message);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    root = fuzz_path("snap");
    for (unsigned i = 0; i < NDIRS; i++) {
        g_autofree char *name = g_strdup_printf("s%u", i);
        dirs[i] = g_build_filename(root, name, NULL);
        g_mkdir_with_parents(dirs[i], 0700);
    }
    for (unsigned i = 0; i < NDIRS; i++) {
        write_layer(i);
        states[i] = state_text(i);
    }
    return 0;
}

/* Every directory as the harness made it: its state.json, its layer, no
 * other file. */
static void reset(void)
{
    for (unsigned i = 0; i < NDIRS; i++) {
        GDir *d = g_dir_open(dirs[i], 0, NULL);
        const char *name;
        while (d && (name = g_dir_read_name(d))) {
            if (strcmp(name, SNAP_DIR_LAYER_FILE) == 0)
                continue;
            g_autofree char *p = g_build_filename(dirs[i], name, NULL);
            fuzz_rmtree(p);
        }
        if (d)
            g_dir_close(d);
        g_autofree char *state = g_build_filename(dirs[i], SNAP_DIR_STATE_FILE, NULL);
        fuzz_write_file(state, states[i], strlen(states[i]));
    }
}

/* "s<N>/<name>": the directory's index and the file's path; -1 otherwise
 * (also for a name no file system takes: the harness could not make it). */
static int section_target(const char *line, char **path)
{
    if (line[0] != 's' || line[1] < '0' || line[1] >= '0' + NDIRS || line[2] != '/')
        return -1;
    const char *name = line + 3;
    if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") ||
        !strcmp(name, SNAP_DIR_LAYER_FILE) || strlen(name) > NAME_MAX)
        return -1;
    *path = g_build_filename(dirs[line[1] - '0'], name, NULL);
    return line[1] - '0';
}

/* Write the input's sections; the index of the first one's directory. */
static int apply_sections(const char *text)
{
    int top = -1;
    g_auto(GStrv) parts = g_strsplit(text, "=== ", -1);
    for (unsigned k = 1; parts[0] && parts[k]; k++) {
        char *nl = strchr(parts[k], '\n');
        const char *body = nl ? nl + 1 : "";
        if (nl)
            *nl = '\0';
        g_autofree char *path = NULL;
        int dir = section_target(parts[k], &path);
        if (dir < 0)
            continue;
        fuzz_write_file(path, body, strlen(body));
        if (top < 0)
            top = dir;
    }
    return top;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *text = fuzz_expand_dir(data, size, NULL);
    reset();
    int top = apply_sections(text);
    if (top < 0)
        return -1;
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dirs[top], &error);
    if (!d) {
        g_debug("%s", error->message);
        return 0;
    }
    g_autoptr(snap_chain) chain = snap_dir_open_chain(d, &error);
    if (!chain) {
        g_debug("%s", error->message);
        return 0;
    }
    if (chain->ram_size != d->memory.ram_size || !snap_id_equal(snap_chain_top_id(chain), &d->memory.id))
        g_error("the chain below %s is not the snapshot its record describes", d->path);
    if (!snap_dir_verify_chain(d, &error))
        g_debug("%s", error->message);
    return 0;
}
