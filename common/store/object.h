/* One object: a file's bytes compressed into zstd's seekable format on the
 * way out (object-export.c) and decompressed into place on the way in
 * (object-import.c). Library-internal. */
#pragma once

#include "store/progress.h"
#include "store/seekable.h"
#include "store/transport.h"

/* The object's name in a store: objects/<digest>.zst */
char *object_name(const char *digest);

/* SHA-256 (64 hex digits) of fd's first size bytes; stops at o's cancel
 * (o may be NULL). */
bool object_digest(int fd, const char *path, guint64 size, const struct store_options *o,
                   char out[65], GError **error);

/* What an export wrote. */
struct object_info {
    guint64 object_size;
    guint64 frames;
    char table_sha256[65];   /* of the seek table frame, which binds every frame */
};

/* Compress fd's size bytes (frames of o->frame_size on o->threads threads,
 * in order into one upload: nothing compressed is kept on disk) into name. */
bool object_export(struct transport *t, const char *name, int fd, const char *path, guint64 size,
                   struct progress *progress, struct object_info *info, GError **error);

/* Fetch the seek table of an object of object_size bytes holding nframes
 * frames of data_size bytes in all and check it against table_sha256
 * (object-table.c). The claims are checked before anything is fetched:
 * nframes at most seekable_max_frames(data_size), the table within the
 * object; the caller bounds data_size itself (by what the object is). */
bool object_fetch_table(struct transport *t, const char *name, guint64 object_size,
                        guint64 data_size, guint64 nframes, const char *table_sha256,
                        struct seekable_table *table, GError **error);
/* The same checks on a seek table's bytes (len: all of them). */
bool object_check_table(const guint8 *bytes, gsize len, const char *name, guint64 object_size,
                        guint64 data_size, guint64 nframes, const char *table_sha256,
                        struct seekable_table *table, GError **error);

/* An object the store has already (a push that skips it): its frame count
 * and its seek table's SHA-256, read from its end. */
bool object_describe(struct transport *t, const char *name, guint64 object_size,
                     struct object_info *info, GError **error);

/* Fetch every frame of the object (ranged requests of o->range_size on
 * o->connections), decompress them on o->threads workers and pwrite each
 * at its uncompressed offset in fd, skipping zero frames (fd must read as
 * zero where nothing is written; path names it in errors), and digest them
 * in order as they come: *digest is the SHA-256 of all the bytes written,
 * for the caller to compare before it keeps anything. A frame that fails
 * its checksum ends it. Memory: at most 2 * o->connections ranges of
 * compressed bytes, and 16 to 256 MiB of decompressed frames (two frames
 * per thread) waiting for the digest, whatever the object claims. */
bool object_import(struct transport *t, const char *name, const struct seekable_table *table,
                   int fd, const char *path, struct progress *progress, char digest[65],
                   GError **error);
