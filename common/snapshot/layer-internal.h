/* Inside the snapshot library only (not a public header): the checksums of a
 * layer's header and index, shared by the writer and the reader, and the
 * building of a chain's page index. */
#pragma once

#include <json-glib/json-glib.h>
#include <sys/types.h>

#include "snapshot/chain.h"

/* CRC-32C of the header with header_crc taken as 0. */
uint32_t snap_layer_header_crc(const struct snap_layer_header *hdr);
/* CRC-32C of the index followed by the block checksum table. */
uint32_t snap_layer_index_crc(const struct snap_layer_run *runs, uint64_t run_count,
                              const uint32_t *block_crc, uint64_t block_count);

static inline uint64_t snap_blocks_for_pages(uint64_t pages)
{
    return (pages + SNAP_BLOCK_PAGES - 1) / SNAP_BLOCK_PAGES;
}

/* Fill chain->page_layer from the layers' indexes (page-index.c). */
void snap_page_index_build(struct snap_chain *chain);

/* ---- files (file-io.c) ---- */

/* Set error (SNAP_ERROR, code) to "<kind> <name>: <text>" and return false:
 * every error about one of the library's files reads this way ("snapshot
 * layer /x/memory-ranges: truncated"). */
bool snap_file_error(GError **error, int code, const char *kind, const char *name, const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);
/* Write all of buf at off, through EINTR and short writes: 0, or -errno. */
int snap_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Read into buf from off until len bytes or the end of the file: the bytes
 * read, or -errno. */
ssize_t snap_pread_upto(int fd, void *buf, size_t len, uint64_t off);

/* ---- state.json's checksums (state-digest.c) ---- */

/* SHA-256 of data as 64 lowercase hex digits. */
void snap_sha256(const void *data, size_t len, char out[65]);
/* 64 lowercase hex digits. */
bool snap_is_digest(const char *text);
/* state.json's text: root with its digest member (re)set as the last member,
 * serialised, the digest computed with its digits as zeros and filled in. */
char *snap_state_text(JsonNode *root);
/* Whether text's digest member (digest) is the SHA-256 of text with those
 * digits as zeros. */
bool snap_state_digest_matches(const char *text, size_t len, const char *digest);
/* SHA-256 of a file of at most max bytes; SNAP_ERROR_FORMAT naming it when it
 * cannot be read or is larger. */
bool snap_file_sha256(const char *path, size_t max, char out[65], GError **error);

/* ---- disk records (disk-record.c) ---- */

struct snap_dir;
/* The element of state.json's devices.disks with this id (to change in place), or NULL. */
JsonObject *snap_dir_disk_object(const struct snap_dir *d, const char *disk_id);
/* The ids of devices.disks, in order. */
GPtrArray *snap_dir_disk_ids(const struct snap_dir *d);
