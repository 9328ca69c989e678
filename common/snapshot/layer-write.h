/* Writing one layer: pages are added in increasing RAM order, then the layer is
 * committed. The file appears under its final name only at commit (temporary
 * name, fsync, rename, fsync of the directory), so no reader ever sees half a
 * layer; any failure removes the temporary file and leaves nothing else touched. */
#pragma once

#include "snapshot/layer.h"

struct snap_layer_writer;

/* A long write in steps (a layer of RAM or of a disk): go_on(data, done,
 * error) between two, done counting what was read so far (pages, blocks);
 * false (error set) ends the write there, its file not created. So a
 * cancel takes a step's time, and the caller sees progress meanwhile. */
struct snap_steps {
    bool (*go_on)(void *data, uint64_t done, GError **error);
    void *data;
};

/* parent NULL or nil: a full layer (zero runs are then dropped: absent pages of a
 * full layer are zero anyway). ram_size must be a multiple of the page size. */
struct snap_layer_writer *snap_layer_writer_new(const char *path, uint64_t ram_size,
                                                const snap_id *id, const snap_id *parent,
                                                GError **error);

/* A disk layer (SNAP_LAYER_FLAG_DISK): size is the disk's capacity rounded up
 * to 4 KiB, each "page" a 4 KiB block; parent NULL or nil for the first layer
 * over the base image, which is still not full (zero runs are kept). */
struct snap_layer_writer *snap_disk_layer_writer_new(const char *path, uint64_t size, const snap_id *id,
                                                     const snap_id *parent, GError **error);

/* Add npages pages starting at RAM page first_page, after everything added so
 * far. data: npages * 4096 bytes, or NULL for a zero run. */
bool snap_layer_writer_add(struct snap_layer_writer *w, uint64_t first_page, uint64_t npages,
                           const void *data, GError **error);

/* Finish the file and rename it into place. Frees w whatever the outcome. */
bool snap_layer_writer_commit(struct snap_layer_writer *w, GError **error);

/* Give up: remove the temporary file, free w. */
void snap_layer_writer_abort(struct snap_layer_writer *w);

/* Data pages added so far (for statistics). */
uint64_t snap_layer_writer_pages(const struct snap_layer_writer *w);
