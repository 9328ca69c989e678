/* A snapshot's recorded working set: the guest pages an on-demand restore saw
 * the guest touch first, in the order it touched them, as runs of pages. A
 * file of the snapshot directory (SNAP_DIR_WORKSET_FILE, so a store push
 * carries it like config.json), written by the first on-demand restore and
 * read by later ones to fetch those pages before the guest asks.
 *
 * A record only orders reads: whatever it says, every page is still served
 * from the chain and checked there. So a record is trusted for nothing but
 * its shape; one of another snapshot (its layer id differs: stale), of
 * another RAM size, or that fails its checksum or syntax (corrupt) is
 * reported as such and the restore goes on without it.
 *
 * The file is text, one run per line after a header, and a CRC-32C (hex) of
 * everything before its last line:
 *     vsnap-workset 1 <layer id> <ram pages>
 *     <first page> <pages>
 *     ...
 *     crc32c <8 hex digits>
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "snapshot/layer.h"

#define SNAP_DIR_WORKSET_FILE "workset"
#define SNAP_WORKSET_MAX_BYTES (16u << 20) /* larger files are corrupt, unread */

struct snap_workset_run {
    uint64_t first, pages;
};

struct snap_workset {
    snap_id layer_id;    /* the top layer of the chain it was recorded on */
    uint64_t ram_pages;
    GArray *runs;        /* struct snap_workset_run, first-touch order */
    uint64_t pages;      /* sum of the runs */
};

enum snap_workset_found {
    SNAP_WORKSET_NONE,    /* no file */
    SNAP_WORKSET_OK,
    SNAP_WORKSET_STALE,   /* well-formed, for another layer or RAM size */
    SNAP_WORKSET_CORRUPT, /* unreadable, malformed, or its checksum fails */
};

struct snap_workset *snap_workset_new(const snap_id *layer_id, uint64_t ram_pages);
void snap_workset_free(struct snap_workset *ws);
typedef struct snap_workset snap_workset;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snap_workset, snap_workset_free)

/* Append pages [first, first + pages): joined to the last run when they
 * continue it. Pages past ram_pages are the caller's bug and are dropped. */
void snap_workset_add(struct snap_workset *ws, uint64_t first, uint64_t pages);

/* Read dir's record for the layer layer_id of a chain of ram_pages pages.
 * OK: *out is the record. STALE, CORRUPT: *why says what (for a log line),
 * *out NULL. NONE: neither. */
enum snap_workset_found snap_workset_read(const char *dir, const snap_id *layer_id, uint64_t ram_pages,
                                          struct snap_workset **out, char **why);

/* The same checks of a record's text from elsewhere (a shim that handed its
 * record over to the daemon, which owns the directory). */
enum snap_workset_found snap_workset_parse(const char *text, size_t len, const snap_id *layer_id, uint64_t ram_pages,
                                           struct snap_workset **out, char **why);

/* Replace dir's record with ws, atomically and durably (a reader sees the
 * old record or the new one). */
bool snap_workset_write(const char *dir, const struct snap_workset *ws, GError **error);

/* The text of ws as the file holds it (for the store and the tests). */
char *snap_workset_format(const struct snap_workset *ws);
