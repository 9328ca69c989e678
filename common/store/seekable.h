/* zstd's seekable format (zstd contrib/seekable_format, version 0.1.0):
 * independent zstd frames, then a skippable frame holding the seek table
 *
 *   u32 0x184D2A5E, u32 Frame_Size,
 *   per frame: u32 Compressed_Size, u32 Decompressed_Size, u32 Checksum,
 *   u32 Number_Of_Frames, u8 Seek_Table_Descriptor (bit 7: checksums),
 *   u32 0x8F92EAB1
 *
 * Checksum is the low 32 bits of XXH64 of the frame's uncompressed data,
 * which is exactly the Content_Checksum a zstd frame carries when it is
 * written with ZSTD_c_checksumFlag: we write every frame with it, copy it
 * into the table, and on reading require the two to agree, so zstd's own
 * check of the frame is the check of the table's checksum. Integers are
 * little-endian. Plain `zstd -d` decompresses an object whole. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define SEEKABLE_SKIPPABLE_MAGIC 0x184D2A5Eu
#define SEEKABLE_MAGIC 0x8F92EAB1u
#define SEEKABLE_FOOTER_SIZE 9u
#define SEEKABLE_ENTRY_SIZE 12u
#define SEEKABLE_CHECKSUM_FLAG 0x80u
/* The zstd format's limit on a skippable frame's size bounds the table. */
#define SEEKABLE_MAX_FRAMES ((0xFFFFFFFFu - SEEKABLE_FOOTER_SIZE) / SEEKABLE_ENTRY_SIZE)
/* Frames hold frame_size bytes (4 KiB to 64 MiB: --frame-size), the last
 * one fewer (at least 1). A reader refuses a table claiming a larger frame
 * (its buffers are sized by the claim: a bomb of a 4 GiB frame in a 131 KB
 * object took 4.2 GB), a compressed frame larger than zstd's bound for the
 * largest, or a frame before the last shorter than the smallest (so an
 * object of N bytes has at most seekable_max_frames(N) frames: its table and
 * whatever counts frames stay proportional to the data). */
#define SEEKABLE_MAX_FRAME_DATA (64u << 20)
#define SEEKABLE_MIN_FRAME_DATA 4096u
/* ZSTD_COMPRESSBOUND(SEEKABLE_MAX_FRAME_DATA) */
#define SEEKABLE_MAX_FRAME_SIZE (SEEKABLE_MAX_FRAME_DATA + (SEEKABLE_MAX_FRAME_DATA >> 8))

struct seekable_frame {
    guint64 offset;        /* in the object */
    guint64 data_offset;   /* in the uncompressed data */
    guint32 size;          /* compressed */
    guint32 data_size;     /* uncompressed */
    guint32 checksum;
};

struct seekable_table {
    struct seekable_frame *frames;
    guint nframes;
    guint64 object_size;   /* frames + table */
    guint64 data_size;     /* uncompressed */
};

void seekable_table_clear(struct seekable_table *t);

/* Bytes of the seek table frame for n frames. */
static inline guint64 seekable_table_size(guint64 nframes)
{
    return 8 + nframes * SEEKABLE_ENTRY_SIZE + SEEKABLE_FOOTER_SIZE;
}

/* The most frames an object of data_size uncompressed bytes may have. */
static inline guint64 seekable_max_frames(guint64 data_size)
{
    return data_size / SEEKABLE_MIN_FRAME_DATA + (data_size % SEEKABLE_MIN_FRAME_DATA != 0);
}

/* The seek table frame for frames (their sizes and checksums). */
GBytes *seekable_table_encode(const struct seekable_frame *frames, guint nframes);

/* Parse the seek table frame that ends an object of object_size bytes
 * (tail: its last tail_len bytes, at least the whole table). Checks magics,
 * reserved bits, the checksum flag, every frame's sizes (the bounds above),
 * that the frames fill the object exactly.
 * name is the object's name for messages. */
bool seekable_table_parse(const guint8 *tail, gsize tail_len, guint64 object_size,
                          const char *name, struct seekable_table *t, GError **error);

/* Compress one frame (with its checksum) into a new buffer. */
GBytes *seekable_compress_frame(void *cctx, const void *data, gsize len, int level,
                                GError **error);
/* The frame's Content_Checksum (its last 4 bytes). */
guint32 seekable_frame_checksum(GBytes *frame);

/* Decompress one frame of t (bytes: its compressed bytes) into out
 * (frame->data_size bytes): the size and checksum must be those of the
 * table, and zstd checks the data against it. */
bool seekable_decompress_frame(void *dctx, const struct seekable_frame *frame, guint index,
                               const guint8 *bytes, void *out, const char *name, GError **error);

bool seekable_is_zero(const void *data, gsize len);
