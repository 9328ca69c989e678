/* Reading and writing the files of one snapshot directory (see persist.h). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "snapshot/layer.h"

/* What a directory's state.json says about its memory layer. */
struct snapshot_meta {
    char *dir;
    char *layer_path;
    bool diff;
    snap_id id;
    snap_id parent_id;
    char *parent_url; /* diff only */
    uint64_t ram_size;
};

void snapshot_meta_clear(struct snapshot_meta *meta);

/* Parse dir/state.json; *parser_out (optional) receives the parser holding it.
 * On failure meta holds nothing to free. */
bool snapshot_dir_read(const char *dir, struct snapshot_meta *meta, JsonParser **parser_out, GError **error);

/* Write text to dir/name durably (temporary name, fsync, rename). */
bool snapshot_dir_write_file(const char *dir, const char *name, const char *text, GError **error);
/* fsync a directory, so renames inside it survive a crash. */
bool snapshot_dir_sync(const char *dir, GError **error);
/* Remove a directory we created and everything in it (no subdirectories). */
void snapshot_dir_remove(const char *dir);
